// SPDX-License-Identifier: MIT
/*
 * A failure text longer than a handle's buffer is cut in the middle, not
 * at its end: the errno words that say why are still there, after "...".
 * The long text comes from pin_cuda_open naming a driver file whose path
 * (said twice: in libpin's words and in dlerror's) exceeds the buffer.
 */
#include <stdlib.h>

#include "test.h"

#define PATHLEN	900

int main(void)
{
	static char path[PATHLEN + 1], err[2048];
	const char *why = ": No such file or directory";
	struct pin_cuda *c = (struct pin_cuda *)1;
	struct pin_cuda_opts co = {
		.size = sizeof(co), .why = err, .why_len = sizeof(err),
	};
	size_t n;

	memcpy(path, "/nonexistent-", 13);
	memset(path + 13, 'a', PATHLEN - 13);
	path[PATHLEN] = '\0';
	EXPECT_EQ(setenv("PIN_CUDA_LIBRARY", path, 1), 0);
	EXPECT_EQ(pin_cuda_open(&c, 0, &co), -ENOENT);
	EXPECT_TRUE(c == NULL);
	n = strlen(err);
	/* Cut to the handle's 1024-byte buffer, with the reason kept. */
	EXPECT_EQ(n, 1023);
	EXPECT_CONTAINS(err, "no CUDA driver: dlopen(\"/nonexistent-aaa");
	EXPECT_TRUE(n > strlen(why) && !strcmp(err + n - strlen(why), why));
	EXPECT_CONTAINS(err, "...: No such file or directory");
	return 0;
}
