// SPDX-License-Identifier: GPL-2.0
/*
 * A file that changes size while it is being read fails the read with
 * -ESTALE and an error naming the file and both sizes: shrinking (truncate)
 * and growing (append), for pin_file_read and for a safetensors load. The
 * change is made from the progress callback after the first request.
 *   io-changes-size DIR
 */
#include "io-test.h"

#define SIZE	(256u << 10)

struct change {
	const char *path;
	int grow;
	int done;
};

static void change_it(void *arg, uint64_t done, uint64_t total)
{
	struct change *c = arg;

	(void)done;
	(void)total;
	if (c->done++)
		return;
	if (c->grow) {
		int fd = open(c->path, O_WRONLY | O_APPEND);

		if (fd < 0 || write(fd, "more", 4) != 4)
			FAIL("append to %s", c->path);
		close(fd);
	} else if (truncate(c->path, SIZE / 2) < 0) {
		FAIL("truncate %s: %s", c->path, strerror(errno));
	}
}

int main(int argc, char **argv)
{
	const char *dir = test_dir(argc, argv);
	char path[4096], sz[64], why[512];
	uint8_t *data, *buf;
	struct pin_dev *dev;
	int grow, ret;

	snprintf(path, sizeof(path), "%s/io-size-%d.bin", dir, (int)getpid());
	data = malloc(SIZE);
	if (posix_memalign((void **)&buf, 4096, SIZE + 8192))
		FAIL("posix_memalign");
	CHECK_EQ(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), 0);
	for (grow = 0; grow < 2; grow++) {
		struct change c = { .path = path, .grow = grow };
		struct pin_io_opts o = {
			.size = sizeof(struct pin_io_opts),
			.queue_depth = 1, .request_size = 4096,
			.progress = change_it, .progress_arg = &c,
			.why = why, .why_len = sizeof(why),
		};
		struct pin_st_load_opts lo = {
			.size = sizeof(struct pin_st_load_opts), .io = &o,
		};
		struct pin_io_stats st = PIN_INIT(struct pin_io_stats);

		fill(data, SIZE, 5);
		write_file(path, data, SIZE);
		ret = pin_file_read(buf, SIZE + 8192, path, 0, SIZE, &o, &st);
		CHECK_EQ(ret, -ESTALE);
		snprintf(sz, sizeof(sz), "%u -> %u bytes", SIZE,
			 grow ? SIZE + 4 : SIZE / 2);
		CHECK(strstr(why, path) && strstr(why, "changed size") &&
		      strstr(why, sz), "error \"%s\"", why);
		printf("# %s: %s\n", grow ? "grow" : "shrink", why);

		/* The same through a safetensors load. */
		{
			uint64_t shape[1] = { SIZE };
			struct pin_st_tensor t = {
				.size = sizeof(struct pin_st_tensor),
				.name = "t", .dtype = PIN_DT_U8, .ndim = 1,
				.shape = shape, .nbytes = SIZE, .data = data,
			};
			struct pin_st *ck = pin_st_create();

			CHECK(pin_st_save(ck, path, &t, 1, NULL, NULL, 0, NULL) == 0,
			      "%s", pin_st_error(ck));
			c.done = 0;
			ret = pin_st_load(ck, dev, path, &lo);
			CHECK_EQ(ret, -ESTALE);
			CHECK(strstr(pin_st_error(ck), path) &&
			      strstr(pin_st_error(ck), "changed size"),
			      "error \"%s\"", pin_st_error(ck));
			CHECK_EQ(pin_st_count(ck), 0);
			printf("# load, %s: %s\n", grow ? "grow" : "shrink",
			       pin_st_error(ck));
			pin_st_close(ck);
		}
	}
	unlink(path);
	pin_dev_close(dev);
	free(data);
	free(buf);
	return 0;
}
