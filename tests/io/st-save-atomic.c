// SPDX-License-Identifier: GPL-2.0
/*
 * pin_st_save writes to a temporary name and renames it into place: a save
 * over an existing checkpoint replaces it whole (new inode), a save that
 * fails leaves the old file untouched, and no temporary file is left.
 *   st-save-atomic DIR
 */
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>

#include "io-test.h"

static int count_tmp(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		FAIL("opendir %s", dir);
	while ((e = readdir(d)))
		if (strstr(e->d_name, ".tmp-"))
			n++;
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	char dir[2048], path[4096];
	uint64_t shape[1] = { 100000 };
	uint8_t *data = malloc(100000);
	struct pin_st_tensor t = {
		.size = sizeof(struct pin_st_tensor),
		.name = "w", .dtype = PIN_DT_U8, .ndim = 1, .shape = shape,
		.nbytes = 100000, .data = data,
	};
	struct pin_st *ck = pin_st_create();
	struct stat a, b;
	size_t n;
	uint8_t *f;

	snprintf(dir, sizeof(dir), "%s/st-atomic-%d", test_dir(argc, argv), (int)getpid());
	CHECK_EQ(mkdir(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/ck.safetensors", dir);
	fill(data, 100000, 1);
	CHECK(pin_st_save(ck, path, &t, 1, NULL, NULL, 0, NULL) == 0, "%s", pin_st_error(ck));
	CHECK_EQ(stat(path, &a), 0);
	fill(data, 100000, 2);
	CHECK(pin_st_save(ck, path, &t, 1, NULL, NULL, 0, NULL) == 0, "%s", pin_st_error(ck));
	CHECK_EQ(stat(path, &b), 0);
	CHECK(a.st_ino != b.st_ino, "the save rewrote the file in place");
	f = read_all(path, &n);
	CHECK(!memcmp(f + n - 100000, data, 100000), "new contents missing");
	free(f);
	CHECK_EQ(count_tmp(dir), 0);

	/* A failing save (a tensor with neither data nor region). */
	t.data = NULL;
	t.region = NULL;
	CHECK_EQ(pin_st_save(ck, path, &t, 1, NULL, NULL, 0, NULL), -EINVAL);
	CHECK_EQ(stat(path, &a), 0);
	CHECK(a.st_ino == b.st_ino, "a failed save replaced the file");
	CHECK_EQ(count_tmp(dir), 0);

	/* Failing half way: writes past RLIMIT_FSIZE fail with EFBIG after
	 * the temporary file exists. */
	{
		struct rlimit old, lim = { .rlim_cur = 50000, .rlim_max = RLIM_INFINITY };

		signal(SIGXFSZ, SIG_IGN);
		getrlimit(RLIMIT_FSIZE, &old);
		lim.rlim_max = old.rlim_max;
		CHECK_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
		t.data = data;
		CHECK_EQ(pin_st_save(ck, path, &t, 1, NULL, NULL, 0, NULL), -EFBIG);
		CHECK(strstr(pin_st_error(ck), ".tmp-") && strstr(pin_st_error(ck), "offset"),
		      "%s", pin_st_error(ck));
		printf("# %s\n", pin_st_error(ck));
		setrlimit(RLIMIT_FSIZE, &old);
		CHECK_EQ(stat(path, &a), 0);
		CHECK(a.st_ino == b.st_ino, "a failed save replaced the file");
		CHECK_EQ(count_tmp(dir), 0);
	}

	/* A directory that cannot be written: open of the temporary fails. */
	if (geteuid() != 0) {
		t.data = data;
		CHECK_EQ(chmod(dir, 0555), 0);
		CHECK_EQ(pin_st_save(ck, path, &t, 1, NULL, NULL, 0, NULL), -EACCES);
		CHECK(strstr(pin_st_error(ck), dir), "%s", pin_st_error(ck));
		chmod(dir, 0755);
	}
	unlink(path);
	rmdir(dir);
	free(data);
	pin_st_close(ck);
	return 0;
}
