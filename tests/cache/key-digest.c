// SPDX-License-Identifier: GPL-2.0
/*
 * The service's SHA-256 (service/key.c) on a file, for host.d/26-cache-digest
 * to compare with sha256sum: the digest of the bytes in memory
 * (key_digest) and of the file read through its fd (key_hash_fd), as hex,
 * one line each. With SIZE, the fd is hashed for that many bytes, as a key
 * charged for a file since shrunk would be: the error is printed instead.
 *   key-digest FILE [SIZE]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "service.h"

static void hex(const uint8_t sha[32])
{
	for (int i = 0; i < 32; i++)
		printf("%02x", sha[i]);
	printf("\n");
}

static int whole(int fd, size_t size)
{
	uint8_t *p = malloc(size ? size : 1), sha[32];
	size_t off = 0;
	int ret;

	if (!p)
		return -ENOMEM;
	while (off < size) {
		ssize_t n = pread(fd, p + off, size - off, (off_t)off);

		if (n <= 0) {
			free(p);
			return n < 0 ? -errno : -EIO;
		}
		off += (size_t)n;
	}
	ret = key_digest(p, size, sha);
	free(p);
	if (!ret)
		hex(sha);
	return ret;
}

int main(int argc, char **argv)
{
	struct cache_key k = { .by_content = 1 };
	char why[256] = "";
	struct stat st;
	int fd, ret;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: key-digest FILE [SIZE]\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		perror(argv[1]);
		return 1;
	}
	k.size = argc == 3 ? strtoll(argv[2], NULL, 0) : st.st_size;
	if (argc == 2 && whole(fd, (size_t)st.st_size)) {
		fprintf(stderr, "key_digest failed\n");
		return 1;
	}
	ret = key_hash_fd(fd, &k, why, sizeof(why));
	if (ret) {
		printf("error %d hashed %d: %s\n", -ret, k.hashed, why);
		return 1;
	}
	hex(k.sha);
	close(fd);
	return !k.hashed;
}
