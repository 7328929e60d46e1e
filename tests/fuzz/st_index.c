// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the index parser, through pin_st_load of
 * <dir>/model.safetensors.index.json whose text is the input. <dir> (on
 * /dev/shm) also holds two small valid shards, a.safetensors and
 * b.safetensors, so inputs that name them go on to load.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pin.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], index_path[128];

static void put(const char *name, const void *buf, size_t len)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len)
		abort();
	close(fd);
}

static void shard(const char *name, const char *tensor)
{
	char buf[256];
	int n = snprintf(buf + 8, sizeof(buf) - 8,
			 "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],"
			 "\"data_offsets\":[0,8]}}", tensor);
	uint64_t len = n;

	memcpy(buf, &len, 8);
	memcpy(buf + 8 + n, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
	put(name, buf, 8 + n + 8);
}

static void cleanup(void)
{
	static const char *const names[] = {
		"a.safetensors", "b.safetensors", "model.safetensors.index.json",
	};
	char path[128];

	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "/dev/shm/pinmem-fuzz-index-XXXXXX");
	if (!mkdtemp(dir))
		abort();
	atexit(cleanup);
	shard("a.safetensors", "x");
	shard("b.safetensors", "y");
	snprintf(index_path, sizeof(index_path),
		 "%s/model.safetensors.index.json", dir);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pin_dev *dev = NULL;
	struct pin_st *ck;

	put("model.safetensors.index.json", data, size);
	ck = pin_st_create();
	if (ck && pin_dev_open(&dev, PIN_BACKEND_PORTABLE, NULL) == 0 &&
	    pin_st_load(ck, dev, index_path, NULL) == 0) {
		for (size_t i = 0; i < pin_st_count(ck); i++) {
			struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
			const uint8_t *p;

			if (pin_st_tensor(ck, i, &t) || t.nbytes != 8)
				__builtin_trap();
			p = t.data;
			if (p[0] != 1 || p[7] != 8)
				__builtin_trap();
		}
	}
	pin_st_close(ck);
	pin_dev_close(dev);
	return 0;
}
