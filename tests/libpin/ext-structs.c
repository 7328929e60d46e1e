// SPDX-License-Identifier: MIT
/*
 * Extensible structs, as a program built against another libpin sees
 * them: options of another size are read as far as both know them (a
 * size below 1.0's is -EINVAL, a set field this libpin does not know is
 * -E2BIG); results are written as far as both know them, the caller's
 * bytes past them zeroed and its size kept; arrays go by element 0's
 * size. A handle-less call's failure text lands in its options' why.
 */
#include "test.h"

#define EXTRA	24	/* bytes a later libpin might have added */

/* A struct as a caller built against a later libpin has it. */
#define LATER(type) struct { type v; unsigned char tail[EXTRA]; }

static void region_options(struct pin_dev *dev)
{
	LATER(struct pin_region_opts) big;
	struct pin_region_opts o = PIN_INIT(struct pin_region_opts);
	struct pin_region *r = NULL;

	o.size = 0;
	EXPECT_EQ(pin_region_create(dev, MiB(2), &o, &r), -EINVAL);
	o.size = offsetof(struct pin_region_opts, node);
	EXPECT_EQ(pin_region_create(dev, MiB(2), &o, &r), -EINVAL);
	EXPECT_TRUE(r == NULL);

	memset(&big, 0, sizeof(big));
	big.v.size = sizeof(big);
	CHECK_OK(pin_region_create(dev, MiB(2), &big.v, &r), pin_dev_error(dev));
	pin_region_close(r);
	r = NULL;
	big.tail[EXTRA - 1] = 1;
	EXPECT_EQ(pin_region_create(dev, MiB(2), &big.v, &r), -E2BIG);
	EXPECT_TRUE(r == NULL);
	printf("ok - options: short -EINVAL, longer with zeros taken, unknown set -E2BIG\n");
}

static void result_struct(struct pin_dev *dev)
{
	LATER(struct pin_region_info) big;
	struct pin_region_info info = PIN_INIT(struct pin_region_info);
	struct pin_region *r;
	size_t i;

	CHECK_OK(pin_region_create(dev, MiB(2), NULL, &r), pin_dev_error(dev));
	CHECK_OK(pin_region_info(r, &info), pin_region_error(r));
	EXPECT_EQ(info.size, sizeof(info));
	EXPECT_EQ(info.region_size, MiB(2));
	EXPECT_EQ(info.id, pin_region_id(r));

	memset(&big, 0xff, sizeof(big));
	big.v.size = sizeof(big);
	CHECK_OK(pin_region_info(r, &big.v), pin_region_error(r));
	EXPECT_EQ(big.v.size, sizeof(big));
	EXPECT_EQ(big.v.region_size, MiB(2));
	EXPECT_EQ(big.v.state, info.state);
	for (i = 0; i < EXTRA; i++)
		EXPECT_EQ(big.tail[i], 0);

	info.size = offsetof(struct pin_region_info, owner_pid);
	EXPECT_EQ(pin_region_info(r, &info), -EINVAL);
	info.size = 0;
	EXPECT_EQ(pin_region_info(r, &info), -EINVAL);
	pin_region_close(r);
	printf("ok - results: filled as far as known, the rest zeroed, size kept\n");
}

/* A result array: each element where the stride puts it, sized. */
static void timeline(struct pin_dev *dev, const char *path)
{
	LATER(struct pin_st_step) big[4];
	struct pin_st_step steps[4] = { PIN_INIT(struct pin_st_step) };
	uint64_t shape[1] = { MiB(24) };
	struct pin_st_tensor t = {
		.size = sizeof(t), .name = "w", .dtype = PIN_DT_U8, .ndim = 1,
		.shape = shape, .nbytes = MiB(24), .data = calloc(1, MiB(24)),
	};
	struct pin_st *ck = pin_st_create();
	int n, i, k;

	if (!ck || !t.data)
		FAIL("memory");
	/* Big enough to be read in more than one step. */
	CHECK_OK(pin_st_save(ck, path, &t, 1, NULL, NULL, 0, NULL),
		 pin_st_error(ck));
	free(t.data);
	CHECK_OK(pin_st_load(ck, dev, path, NULL), pin_st_error(ck));
	n = pin_st_timeline(ck, steps, 4);
	EXPECT_TRUE(n >= 2);
	memset(big, 0xff, sizeof(big));
	big[0].v.size = sizeof(big[0]);
	EXPECT_EQ(pin_st_timeline(ck, &big[0].v, 4), n);
	for (i = 0; i < n && i < 4; i++) {
		EXPECT_EQ(big[i].v.size, sizeof(big[0]));
		EXPECT_EQ(big[i].v.length, steps[i].length);
		EXPECT_EQ(big[i].v.read_end_ns, steps[i].read_end_ns);
		for (k = 0; k < EXTRA; k++)
			EXPECT_EQ(big[i].tail[k], 0);
	}
	big[0].v.size = 0;
	EXPECT_EQ(pin_st_timeline(ck, &big[0].v, 4), -EINVAL);
	EXPECT_EQ(pin_st_timeline(ck, NULL, 0), n);
	pin_st_close(ck);
}

static void arrays(struct pin_dev *dev, const char *path)
{
	static const uint64_t shape[1] = { 4 };
	static const uint8_t bytes[2][4] = { { 1, 2, 3, 4 }, { 5, 6, 7, 8 } };
	LATER(struct pin_st_tensor) in[2], out;
	struct pin_st *ck = pin_st_create();
	size_t i;

	if (!ck)
		FAIL("pin_st_create");
	memset(in, 0, sizeof(in));
	for (i = 0; i < 2; i++) {
		in[i].v.name = i ? "b" : "a";
		in[i].v.dtype = PIN_DT_U8;
		in[i].v.ndim = 1;
		in[i].v.shape = shape;
		in[i].v.nbytes = 4;
		in[i].v.data = (void *)bytes[i];
	}
	/* Element 0 says the stride; element 1 need not say anything. */
	in[0].v.size = sizeof(in[0]);
	EXPECT_EQ(pin_st_save(ck, path, &in[0].v, 2, NULL, NULL, 0, NULL), 0);
	in[1].tail[0] = 1;
	EXPECT_EQ(pin_st_save(ck, path, &in[0].v, 2, NULL, NULL, 0, NULL),
		  -E2BIG);
	in[0].v.size = 8;
	EXPECT_EQ(pin_st_save(ck, path, &in[0].v, 2, NULL, NULL, 0, NULL),
		  -EINVAL);
	EXPECT_CONTAINS(pin_st_error(ck), "PIN_INIT");

	CHECK_OK(pin_st_parse_file(ck, path), pin_st_error(ck));
	memset(&out, 0xff, sizeof(out));
	out.v.size = sizeof(out);
	CHECK_OK(pin_st_tensor(ck, 1, &out.v), pin_st_error(ck));
	EXPECT_EQ(out.v.size, sizeof(out));
	EXPECT_TRUE(!strcmp(out.v.name, "b"));
	EXPECT_EQ(out.v.nbytes, 4);
	for (i = 0; i < EXTRA; i++)
		EXPECT_EQ(out.tail[i], 0);
	out.v.size = 4;
	EXPECT_EQ(pin_st_tensor(ck, 1, &out.v), -EINVAL);
	EXPECT_EQ(pin_st_find(ck, "b", &out.v), -EINVAL);
	pin_st_close(ck);
	timeline(dev, path);
	printf("ok - arrays: element 0's size is the stride, in and out\n");
}

static void why_of_file_calls(const char *path)
{
	char why[256] = "stale", buf[8192] __attribute__((aligned(4096)));
	struct pin_io_opts o = {
		.size = sizeof(o), .why = why, .why_len = sizeof(why),
	};
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	char missing[4200];

	snprintf(missing, sizeof(missing), "%s.missing", path);
	EXPECT_EQ(pin_file_read(buf, sizeof(buf), missing, 0, 4, &o, &st),
		  -ENOENT);
	EXPECT_CONTAINS(why, missing);
	EXPECT_TRUE(pin_file_read(buf, sizeof(buf), path, 0, 4, &o, &st) >= 0);
	EXPECT_TRUE(why[0] == '\0');
	EXPECT_EQ(st.size, sizeof(st));
	EXPECT_TRUE(st.bytes > 0);
	st.size = 0;
	EXPECT_EQ(pin_file_read(buf, sizeof(buf), path, 0, 4, &o, &st),
		  -EINVAL);
	EXPECT_CONTAINS(why, "stats");
	o.size = 8;
	EXPECT_EQ(pin_file_read(buf, sizeof(buf), path, 0, 4, &o, NULL),
		  -EINVAL);
	printf("ok - file calls: failure text in opts->why, \"\" on success\n");
}

int main(void)
{
	char path[4096];
	struct pin_dev *dev;
	const char *tmp = getenv("TMPDIR");

	snprintf(path, sizeof(path), "%s/ext-structs-%d.safetensors",
		 tmp ? tmp : "/tmp", (int)getpid());
	CHECK_OK(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), "open");
	region_options(dev);
	result_struct(dev);
	arrays(dev, path);
	why_of_file_calls(path);
	unlink(path);
	pin_dev_close(dev);
	return 0;
}
