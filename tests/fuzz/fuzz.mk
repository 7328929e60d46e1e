# SPDX-License-Identifier: GPL-2.0
# libFuzzer targets (clang, libfuzzer-14-dev) with ASan+UBSan over libpin's
# safetensors reader: build/fuzz/<target>, libpin built again for them in
# build/fuzz/obj/. tests/fuzz/run runs them (tests/host.d/60-fuzz: a short
# run of each in make check; make fuzz: long runs).
#   st_header  pin_st_parse_buffer on the input
#   st_index   pin_st_load of an index file whose text is the input
#   st_load    pin_st_load of a memory file (memfd) holding the input
#   json_diff  libpin's JSON reader against jansson
#   cache_proto  pinmem-cached's packet decoder on the input

FUZZ_CC		?= clang
FUZZ_TARGETS	:= st_header st_index st_load json_diff cache_proto
FUZZ_SAN	:= -fsanitize=address,undefined -fno-sanitize-recover=undefined \
		   -fno-omit-frame-pointer
FUZZ_CFLAGS	:= -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O1 -g \
		   -I$(TOP)/include -I$(B)/include -Ilibpin -Ilibpin/cache $(FUZZ_SAN)
FUZZ_OBJS	:= $(patsubst libpin/%.c,$(B)/fuzz/obj/%.o,$(LIBPIN_SRCS))
FUZZ_BINS	:= $(patsubst %,$(B)/fuzz/%,$(FUZZ_TARGETS))

# Built with make all only where clang and libFuzzer are installed.
ifneq ($(shell command -v $(FUZZ_CC) 2>/dev/null),)
ifneq ($(wildcard /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a),)
all: $(FUZZ_BINS)
endif
endif

$(B)/fuzz/obj/%.o: libpin/%.c $(LIBPIN_HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(B)/fuzz/json_diff: FUZZ_LIBS := -ljansson
$(B)/fuzz/%: tests/fuzz/%.c $(FUZZ_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(LIBPIN_LIBS) \
		$(FUZZ_LIBS)

.SECONDARY: $(FUZZ_OBJS)
fuzz-build: $(FUZZ_BINS)
.PHONY: fuzz-build
