// SPDX-License-Identifier: GPL-2.0
/*
 * A truncated file is refused, whichever part the cut falls in (the length,
 * the header, the data section), by pin_st_parse_file and pin_st_load, with
 * an error naming the file; nothing is left loaded.
 *   st-truncated FIXTURE-DIR OUT-DIR
 */
#include "io-test.h"

int main(int argc, char **argv)
{
	char in[4096], out[4096];
	struct pin_dev *dev;
	uint8_t *b;
	size_t n, hl, cuts[5], i;

	if (argc < 3)
		FAIL("usage: st-truncated FIXTURE-DIR OUT-DIR");
	snprintf(in, sizeof(in), "%s/big.safetensors", argv[1]);
	snprintf(out, sizeof(out), "%s/truncated-%d.safetensors", argv[2], (int)getpid());
	b = read_all(in, &n);
	hl = b[0] | (size_t)b[1] << 8;
	cuts[0] = 0;
	cuts[1] = 7;
	cuts[2] = 8 + hl / 2;
	cuts[3] = 8 + hl + 1;
	cuts[4] = n - 1;
	CHECK_EQ(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), 0);
	for (i = 0; i < 5; i++) {
		struct pin_st *ck = pin_st_create();
		int ret;

		write_file(out, b, cuts[i]);
		ret = pin_st_parse_file(ck, out);
		CHECK_EQ(ret, -EINVAL);
		CHECK(strstr(pin_st_error(ck), out), "error \"%s\"", pin_st_error(ck));
		printf("# cut at %zu: %s\n", cuts[i], pin_st_error(ck));
		ret = pin_st_load(ck, dev, out, NULL);
		CHECK_EQ(ret, -EINVAL);
		CHECK(strstr(pin_st_error(ck), out), "error \"%s\"", pin_st_error(ck));
		CHECK_EQ(pin_st_count(ck), 0);
		CHECK_EQ(pin_st_file_count(ck), 0);
		pin_st_close(ck);
	}
	unlink(out);
	free(b);
	pin_dev_close(dev);
	return 0;
}
