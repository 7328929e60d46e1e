// SPDX-License-Identifier: MIT
/*
 * A client of pinmem-cached for the tests: open FILE, ask the service for
 * it, print what came back (shared or private, entry, tensors, a checksum
 * of every tensor's bytes; whether every tensor's data is on 64 bytes),
 * then keep the mapping for --hold seconds (or
 * until a line arrives on stdin with --hold -1), then checksum again
 * ("after: sum") and close. --path: FILE through pin_cache_open_path
 * (which a sharded checkpoint's *.index.json needs), not an fd.
 *   cache-client [--socket PATH] [--no-fallback] [--hold S] [--path] FILE
 * Exit: 0 ok, 1 the request failed (the reason on stderr), 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pin.h>

static uint64_t checksum(const struct pin_st *st)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < pin_st_count(st); i++) {
		struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
		const uint8_t *p;

		if (pin_st_tensor(st, i, &t))
			return 0;
		p = t.data;
		for (uint64_t j = 0; j < t.nbytes; j++)
			sum = sum * 31 + p[j];
	}
	return sum;
}

/* Whether every tensor with bytes starts on 64 bytes. */
static int aligned(const struct pin_st *st)
{
	for (size_t i = 0; i < pin_st_count(st); i++) {
		struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);

		if (pin_st_tensor(st, i, &t) ||
		    (t.nbytes && (uintptr_t)t.data % 64))
			return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	const char *sock = NULL, *file = NULL;
	unsigned flags = 0;
	struct pin_cache_opts o;
	struct pin_cache_ck *c;
	char why[1024] = "";
	int hold = 0, by_path = 0, fd = -1, ret;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--socket") && i + 1 < argc)
			sock = argv[++i];
		else if (!strcmp(argv[i], "--hold") && i + 1 < argc)
			hold = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--path"))
			by_path = 1;
		else if (!strcmp(argv[i], "--no-fallback"))
			flags |= PIN_CACHE_NO_FALLBACK;
		else if (!file)
			file = argv[i];
		else
			return 2;
	}
	if (!file)
		return 2;
	if (!by_path) {
		fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "open %s: %s\n", file, strerror(errno));
			return 1;
		}
	}
	o = (struct pin_cache_opts){
		.size = sizeof(struct pin_cache_opts), .flags = flags,
		.socket = sock, .why = why, .why_len = sizeof(why) };
	ret = by_path ? pin_cache_open_path(file, &o, &c) :
			pin_cache_open(fd, &o, &c);
	if (fd >= 0)
		close(fd);
	if (ret) {
		fprintf(stderr, "pin_cache_open%s: %s: %s\n",
			by_path ? "_path" : "", strerror(-ret), why);
		return 1;
	}
	printf("%s entry %llu tensors %zu sum %016llx\n",
	       pin_cache_shared(c) ? "shared" : "private",
	       (unsigned long long)pin_cache_entry(c),
	       pin_st_count(pin_cache_st(c)),
	       (unsigned long long)checksum(pin_cache_st(c)));
	printf("aligned: %s\n", aligned(pin_cache_st(c)) ? "yes" : "no");
	printf("how: %s\n", pin_cache_how(c));
	fflush(stdout);
	if (hold < 0) {
		char line[8];

		if (!fgets(line, sizeof(line), stdin))
			line[0] = 0;
	} else if (hold > 0) {
		sleep((unsigned)hold);
	}
	if (hold)
		printf("after: sum %016llx\n",
		       (unsigned long long)checksum(pin_cache_st(c)));
	pin_cache_close(c);
	return 0;
}
