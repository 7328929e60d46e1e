/* SPDX-License-Identifier: MIT */
/*
 * pinload --shared: each checkpoint from pinmem-cached (pin_cache_open),
 * one copy per host, or a private load where no service answers (said on
 * stderr). Prints per file: tensors, bytes, seconds and how it was served.
 */
#ifndef PINLOAD_SHARED_H
#define PINLOAD_SHARED_H


static int load_shared_one(const char *path, int json)
{
	struct pin_cache_ck *c;
	char why[1024] = "";
	uint64_t bytes = 0, t0 = now_ns();
	struct pin_st_tensor t;
	const struct pin_st *st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0) {
		fprintf(stderr, "pinload: %s: %s\n", path, strerror(errno));
		return 1;
	}
	ret = pin_cache_open(NULL, fd, 0, &c, why, sizeof(why));
	close(fd);
	if (ret) {
		fprintf(stderr, "pinload: %s: %s\n", path, why[0] ? why : strerror(-ret));
		return 1;
	}
	st = pin_cache_st(c);
	for (size_t i = 0; i < pin_st_count(st); i++)
		if (!pin_st_tensor(st, i, &t))
			bytes += t.nbytes;
	if (!pin_cache_shared(c))
		fprintf(stderr, "pinload: %s\n", pin_cache_how(c));
	if (json) {
		printf("{\"path\":");
		json_str(stdout, path);
		printf(",\"shared\":%s,\"entry\":%llu,\"tensors\":%zu,\"bytes\":%llu,\"seconds\":%.6f,\"how\":",
		       pin_cache_shared(c) ? "true" : "false",
		       (unsigned long long)pin_cache_entry(c), pin_st_count(st),
		       (unsigned long long)bytes, (double)(now_ns() - t0) / 1e9);
		json_str(stdout, pin_cache_how(c));
		printf("}\n");
	} else {
		printf("%s: %zu tensors, %llu bytes in %.3f s; %s\n", path,
		       pin_st_count(st), (unsigned long long)bytes,
		       (double)(now_ns() - t0) / 1e9, pin_cache_how(c));
	}
	pin_cache_close(c);
	return 0;
}

static int load_shared_all(int n, char **paths, int json)
{
	int status = 0;

	for (int i = 0; i < n; i++)
		status |= load_shared_one(paths[i], json);
	return status;
}

#endif /* PINLOAD_SHARED_H */
