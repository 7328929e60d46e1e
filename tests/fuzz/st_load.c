// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the full loader (pin_st_load) over a memory file: the
 * input goes into a memfd, is loaded into pinned regions on the portable
 * backend, as the file lays it out and with PIN_ST_LOAD_ALIGN, and every
 * tensor accepted must hold exactly the file's bytes (and, aligned, start
 * on PIN_ST_ALIGN bytes of its region).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <pin.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(struct pin_st *ck, const uint8_t *data, size_t size,
		  unsigned flags)
{
	for (size_t i = 0; i < pin_st_count(ck); i++) {
		struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);

		if (pin_st_tensor(ck, i, &t) ||
		    t.file_offset > size || t.nbytes > size - t.file_offset ||
		    memcmp(t.data, data + t.file_offset, t.nbytes) ||
		    ((flags & PIN_ST_LOAD_ALIGN) &&
		     t.region_offset % PIN_ST_ALIGN))
			__builtin_trap();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pin_dev *dev = NULL;
	struct pin_st *ck;
	char path[64];
	int fd;

	fd = memfd_create("fuzz.safetensors", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size)
		__builtin_trap();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (pin_dev_open(&dev, PIN_BACKEND_PORTABLE, NULL))
		dev = NULL;
	for (unsigned flags = 0; dev && flags <= PIN_ST_LOAD_ALIGN;
	     flags += PIN_ST_LOAD_ALIGN) {
		struct pin_st_load_opts lo = { .size = sizeof(lo),
					       .flags = flags };

		ck = pin_st_create();
		if (ck && pin_st_load(ck, dev, path, &lo) == 0)
			check(ck, data, size, flags);
		pin_st_close(ck);
	}
	pin_dev_close(dev);
	close(fd);
	return 0;
}
