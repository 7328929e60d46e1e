// SPDX-License-Identifier: GPL-2.0
/*
 * Where io_uring is unavailable (a container's default seccomp profile
 * answers io_uring_setup with ENOSYS or EPERM, as kernel.io_uring_disabled
 * does with EPERM), reads, writes and a safetensors save and load still
 * work, with plain reads and writes (O_DIRECT kept where the file takes it)
 * and say so in the fallback reason. Each case runs in a child under a
 * seccomp filter that refuses io_uring_setup with that error.
 *   io-no-uring DIR
 */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "io-test.h"

#define SIZE	(3u * 65536 + 1234)
#define NOTE	"io_uring unavailable"

#if defined(__x86_64__)
#define NATIVE_ARCH	AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH	AUDIT_ARCH_AARCH64
#endif

#ifdef NATIVE_ARCH
/* io_uring_setup answers -err from now on, in this process and its children. */
static void refuse_io_uring(int err)
{
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = sizeof(code) / sizeof(code[0]), .filter = code,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		FAIL("PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		FAIL("PR_SET_SECCOMP: %s", strerror(errno));
	errno = 0;
	CHECK(syscall(__NR_io_uring_setup, 1, NULL) == -1 && errno == err,
	      "io_uring_setup not refused with %d (errno %d)", err, errno);
}
#endif

/* pin_file_read and pin_file_write of path, several requests each. */
static void raw_io(const char *path, const uint8_t *data, int direct)
{
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	char why[512] = "";
	struct pin_io_opts o = {
		.size = sizeof(o), .queue_depth = 4, .request_size = 65536,
		.why = why, .why_len = sizeof(why),
	};
	size_t len;
	uint8_t *buf, *back;
	int ret;

	if (posix_memalign((void **)&buf, 4096, SIZE + 8192))
		FAIL("posix_memalign");
	ret = pin_file_read(buf, SIZE + 8192, path, 5, SIZE - 5, &o, &st);
	CHECK(ret == 5, "read: ret %d: %s", ret, why);
	CHECK(!memcmp(buf + 5, data + 5, SIZE - 5), "read: bytes differ");
	CHECK(strstr(st.fallback_reason, NOTE), "read: reason \"%s\"",
	      st.fallback_reason);
	CHECK_EQ(st.direct, direct);
	CHECK_EQ(st.bytes, SIZE);
	CHECK_EQ(st.requests, 4);
	CHECK_EQ(st.fixed_buffers, 0);
	printf("# read: %s\n", st.fallback_reason);
	/* An unaligned destination: buffered, the same bytes. */
	memset(buf, 0, SIZE + 8192);
	ret = pin_file_read(buf + 1, SIZE + 8191, path, 0, SIZE, &o, &st);
	CHECK(ret == 0, "unaligned read: ret %d: %s", ret, why);
	CHECK(!memcmp(buf + 1, data, SIZE), "unaligned read: bytes differ");
	CHECK_EQ(st.direct, 0);
	/* A write from an unaligned source, read back. */
	ret = pin_file_write(data + 1, SIZE - 1, path, 4096, &o, &st);
	CHECK(ret == 0, "write: %s", why);
	CHECK(strstr(st.fallback_reason, NOTE), "write: reason \"%s\"",
	      st.fallback_reason);
	back = read_all(path, &len);
	CHECK_EQ(len, 4096 + SIZE - 1);
	CHECK(!memcmp(back, data, 4096) && !memcmp(back + 4096, data + 1, SIZE - 1),
	      "written bytes differ");
	free(back);
	free(buf);
}

/* pin_st_save, then pin_st_load (the paced read) of the same tensor. */
static void st_io(const char *path, uint8_t *data)
{
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	uint64_t shape[1] = { SIZE };
	struct pin_st_tensor t = {
		.size = sizeof(struct pin_st_tensor), .name = "t",
		.dtype = PIN_DT_U8, .ndim = 1, .shape = shape,
		.nbytes = SIZE, .data = data,
	};
	struct pin_st_tensor got = PIN_INIT(struct pin_st_tensor);
	struct pin_io_opts o = { .size = sizeof(o), .flags = PIN_IO_NO_KERNEL_FILL };
	struct pin_st_load_opts lo = { .size = sizeof(lo), .io = &o };
	struct pin_st *ck = pin_st_create();
	struct pin_dev *dev;

	CHECK(pin_st_save(ck, path, &t, 1, NULL, NULL, 0, NULL) == 0,
	      "save: %s", pin_st_error(ck));
	pin_st_close(ck);
	CHECK_EQ(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), 0);
	/* The device's FILL reads in the kernel, with no ring to miss: the
	 * default load (either backend) must work, and the one through
	 * libpin's own reads must say how it read. */
	ck = pin_st_create();
	CHECK(pin_st_load(ck, dev, path, NULL) == 0, "load: %s", pin_st_error(ck));
	CHECK_EQ(pin_st_find(ck, "t", &got), 0);
	CHECK(!memcmp(got.data, data, SIZE), "loaded bytes differ (default)");
	pin_st_close(ck);
	ck = pin_st_create();
	CHECK(pin_st_load(ck, dev, path, &lo) == 0, "load: %s", pin_st_error(ck));
	pin_st_stats(ck, &st);
	CHECK(strstr(st.fallback_reason, NOTE), "load: reason \"%s\"",
	      st.fallback_reason);
	CHECK_EQ(pin_st_find(ck, "t", &got), 0);
	CHECK(!memcmp(got.data, data, SIZE), "loaded bytes differ");
	printf("# load: %s\n", st.fallback_reason);
	pin_st_close(ck);
	pin_dev_close(dev);
}

int main(int argc, char **argv)
{
	static const int errs[] = { ENOSYS, EPERM };
	char path[4096], stpath[4096];
	uint8_t *data = malloc(SIZE);
	int direct, status;
	size_t i;

	if (argc < 2)
		FAIL("usage: io-no-uring DIR");
#ifndef NATIVE_ARCH
	SKIP("no seccomp architecture constant for this machine");
#else
	direct = dir_has_odirect(argv[1]);
	snprintf(path, sizeof(path), "%s/no-uring-%d.bin", argv[1], (int)getpid());
	snprintf(stpath, sizeof(stpath), "%s/no-uring-%d.safetensors", argv[1],
		 (int)getpid());
	fill(data, SIZE, 5);
	for (i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		pid_t pid;

		write_file(path, data, SIZE);
		fflush(NULL);
		pid = fork();
		if (pid < 0)
			FAIL("fork: %s", strerror(errno));
		if (!pid) {
			refuse_io_uring(errs[i]);
			raw_io(path, data, direct);
			st_io(stpath, data);
			exit(0);
		}
		CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "io_uring_setup refused with %s: child status %#x",
		      strerror(errs[i]), status);
		printf("# io_uring_setup refused with %s: loads and saves work\n",
		       strerror(errs[i]));
	}
	unlink(path);
	unlink(stpath);
	free(data);
	return 0;
#endif
}
