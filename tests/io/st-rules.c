// SPDX-License-Identifier: GPL-2.0
/*
 * The reader refuses every violation of the format with -EINVAL and an
 * error that names the file, the tensor where there is one, and the rule.
 */
#include "io-test.h"

static size_t build(uint8_t *buf, uint64_t hlen, const char *hdr,
		    size_t data_len)
{
	size_t n = strlen(hdr);
	int i;

	for (i = 0; i < 8; i++)
		buf[i] = (uint8_t)(hlen >> (8 * i));
	memcpy(buf + 8, hdr, n);
	memset(buf + 8 + n, 0x5a, data_len);
	return 8 + n + data_len;
}

static int cases;

/* Parse; expect -EINVAL and every one of the words in the error. */
static void expect(const char *what, const uint8_t *buf, size_t len,
		   const char *w1, const char *w2)
{
	struct pin_st *ck = pin_st_create();
	int ret = pin_st_parse_buffer(ck, buf, len, "t.safetensors");
	const char *e = pin_st_error(ck);

	if (ret != -EINVAL)
		FAIL("%s: returned %d, expected -EINVAL (error \"%s\")", what, ret, e);
	if (!strstr(e, "t.safetensors") || !strstr(e, w1) ||
	    (w2 && !strstr(e, w2)))
		FAIL("%s: error \"%s\" lacks \"t.safetensors\", \"%s\" or \"%s\"",
		     what, e, w1, w2 ? w2 : "");
	CHECK_EQ(pin_st_count(ck), 0);
	printf("# %-28s %s\n", what, e);
	pin_st_close(ck);
	cases++;
}

static void hdr_case(const char *what, const char *hdr, size_t data_len,
		     const char *w1, const char *w2)
{
	static uint8_t buf[1 << 16];
	size_t len = build(buf, strlen(hdr), hdr, data_len);

	expect(what, buf, len, w1, w2);
}

int main(void)
{
	static uint8_t buf[1 << 16];
	char deep[300];
	size_t len;
	int i;

	/* Sanity: a valid file parses. */
	{
		struct pin_st *ck = pin_st_create();
		const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}  ";

		len = build(buf, strlen(ok), ok, 8);
		CHECK(pin_st_parse_buffer(ck, buf, len, "ok") == 0, "%s",
		      pin_st_error(ck));
		pin_st_close(ck);
	}
	/* So does MLX's null metadata (none), and safetensors 0.8's FNUZ. */
	{
		struct pin_st *ck = pin_st_create();
		struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
		const char *ok = "{\"__metadata__\":null,\"a\":{\"dtype\":\"F8_E5M2FNUZ\",\"shape\":[2],\"data_offsets\":[0,2]}}";

		len = build(buf, strlen(ok), ok, 2);
		CHECK(pin_st_parse_buffer(ck, buf, len, "ok") == 0, "%s",
		      pin_st_error(ck));
		CHECK_EQ(pin_st_metadata_count(ck), 0);
		CHECK_EQ(pin_st_tensor(ck, 0, &t), 0);
		CHECK_EQ(t.dtype, PIN_DT_F8_E5M2FNUZ);
		CHECK(!strcmp(pin_dtype_name(PIN_DT_F8_E4M3FNUZ), "F8_E4M3FNUZ"),
		      "%s", pin_dtype_name(PIN_DT_F8_E4M3FNUZ));
		pin_st_close(ck);
	}
	expect("file under 8 bytes", buf, 5, "shorter than the 8-byte", NULL);
	len = build(buf, 100000001ULL, "{}", 0);
	expect("header over 100,000,000", buf, len, "over the limit", NULL);
	len = build(buf, 100, "{}", 0);
	expect("header past end of file", buf, len, "runs past the end", NULL);
	hdr_case("header not '{'", " {}", 0, "does not start with '{'", NULL);
	hdr_case("header is an array", "[]", 0, "does not start with '{'", NULL);
	hdr_case("invalid UTF-8", "{\"__metadata__\":{\"k\":\"\xff\"}}", 0,
		 "not valid UTF-8", NULL);
	hdr_case("overlong UTF-8", "{\"__metadata__\":{\"k\":\"\xc0\xaf\"}}", 0,
		 "not valid UTF-8", NULL);
	hdr_case("bad JSON", "{\"a\":}", 0, "JSON error", "unexpected");
	hdr_case("garbage after JSON", "{} x", 0, "after the JSON value", NULL);
	hdr_case("tab padding", "{}\t", 0, "after the JSON value", NULL);
	hdr_case("unterminated", "{\"a", 0, "unterminated string", NULL);
	hdr_case("duplicate key",
		 "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},"
		 "\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}",
		 0, "duplicate key \"a\"", NULL);
	hdr_case("control char in string", "{\"a\nb\":1}", 0,
		 "control character", NULL);
	hdr_case("lone surrogate", "{\"\\udc00\":1}", 0, "surrogate", NULL);
	hdr_case("NUL escape", "{\"a\\u0000\":1}", 0, "NUL", NULL);
	hdr_case("leading zero", "{\"a\":{\"dtype\":\"U8\",\"shape\":[01],\"data_offsets\":[0,1]}}",
		 1, "leading zero", NULL);
	for (i = 0; i < 70; i++)
		deep[i] = '[';
	deep[70] = 0;
	{
		char h[400];

		snprintf(h, sizeof(h), "{\"__metadata__\":%s}", deep);
		hdr_case("nesting too deep", h, 0, "nesting deeper", NULL);
	}
	hdr_case("entry not an object", "{\"w\":[1]}", 0, "tensor \"w\"",
		 "not a JSON object");
	hdr_case("unknown key",
		 "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}",
		 1, "tensor \"w\"", "unknown key \"x\"");
	hdr_case("missing shape", "{\"w\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}",
		 1, "tensor \"w\"", "missing \"shape\"");
	hdr_case("missing dtype", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,1]}}",
		 1, "tensor \"w\"", "missing \"dtype\"");
	hdr_case("missing data_offsets", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1]}}",
		 1, "tensor \"w\"", "missing \"data_offsets\"");
	hdr_case("dtype not a string",
		 "{\"w\":{\"dtype\":8,\"shape\":[1],\"data_offsets\":[0,1]}}",
		 1, "tensor \"w\"", "dtype is not a string");
	hdr_case("unknown dtype",
		 "{\"w\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,1]}}",
		 1, "tensor \"w\"", "unknown dtype \"F128\"");
	hdr_case("lowercase dtype",
		 "{\"w\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
		 4, "tensor \"w\"", "unknown dtype");
	hdr_case("shape not an array",
		 "{\"w\":{\"dtype\":\"U8\",\"shape\":1,\"data_offsets\":[0,1]}}",
		 1, "tensor \"w\"", "shape is not an array");
	hdr_case("negative dimension",
		 "{\"w\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}",
		 1, "tensor \"w\"", "shape[0] is not an unsigned");
	hdr_case("fractional dimension",
		 "{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1.0],\"data_offsets\":[0,1]}}",
		 1, "tensor \"w\"", "shape[1] is not an unsigned");
	hdr_case("dimension over 2^64",
		 "{\"w\":{\"dtype\":\"U8\",\"shape\":[18446744073709551616],\"data_offsets\":[0,1]}}",
		 1, "tensor \"w\"", "shape[0] is not an unsigned");
	hdr_case("offsets not a pair",
		 "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}",
		 1, "tensor \"w\"", "data_offsets is not [begin, end]");
	hdr_case("offset a string",
		 "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[\"0\",1]}}",
		 1, "tensor \"w\"", "data_offsets is not [begin, end]");
	hdr_case("begin after end",
		 "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,1]}}",
		 2, "tensor \"w\"", "begin 2 after end 1");
	hdr_case("size mismatch",
		 "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
		 8, "tensor \"w\"", "needs 12 bytes, data_offsets [0, 8] hold 8");
	hdr_case("element count overflow",
		 "{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}",
		 0, "tensor \"w\"", "overflows 64 bits");
	hdr_case("bit count overflow",
		 "{\"w\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952,2],\"data_offsets\":[0,0]}}",
		 0, "tensor \"w\"", "overflows 64 bits");
	hdr_case("partial byte (F4)",
		 "{\"w\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,1]}}",
		 1, "tensor \"w\"", "not a whole number of bytes");
	hdr_case("partial byte (F6)",
		 "{\"w\":{\"dtype\":\"F6_E3M2\",\"shape\":[2],\"data_offsets\":[0,1]}}",
		 1, "tensor \"w\"", "not a whole number of bytes");
	hdr_case("hole at start",
		 "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
		 2, "tensor \"w\"", "hole in the data section");
	hdr_case("hole between",
		 "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
		 "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}",
		 3, "tensor \"b\"", "hole in the data section");
	hdr_case("overlap",
		 "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
		 "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[1,3]}}",
		 3, "tensor \"b\"", "overlap");
	hdr_case("empty tensor inside another",
		 "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
		 "\"b\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[1,1]}}",
		 2, "tensor \"b\"", "overlap");
	hdr_case("past the data section",
		 "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
		 3, "tensor \"w\"", "past the end of the data section");
	hdr_case("bytes after the last tensor",
		 "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
		 5, "has 5 bytes but the tensors cover 4", NULL);
	hdr_case("data but no tensors", "{}", 1, "has 1 bytes but the tensors cover 0",
		 NULL);
	hdr_case("__metadata__ not an object", "{\"__metadata__\":[]}", 0,
		 "__metadata__ is not an object", NULL);
	hdr_case("__metadata__ value not a string",
		 "{\"__metadata__\":{\"k\":1}}", 0,
		 "__metadata__ value of \"k\" is not a string", NULL);
	printf("# %d violations refused\n", cases);
	return 0;
}
