# SPDX-License-Identifier: GPL-2.0
# CUDA registration tests: the driver test double (libcuda-double.so), one
# program per behaviour linked against libpin.so, and the same programs
# under ASan+UBSan linked against build/lib-san/libpin.a.

CUDA_TEST_SRCS	:= $(filter-out tests/cuda/cuda-double.c,$(wildcard tests/cuda/*.c))
CUDA_TESTS	:= $(patsubst tests/cuda/%.c,$(B)/tests/cuda/%,$(CUDA_TEST_SRCS))
CUDA_TESTS_SAN	:= $(patsubst tests/cuda/%.c,$(B)/tests/cuda-san/%,$(CUDA_TEST_SRCS))
CUDA_TEST_HDRS	:= tests/cuda/cuda-test.h tests/cuda/cuda-double.h $(LIBPIN_PUBLIC_HDRS)

all: $(B)/tests/cuda/libcuda-double.so $(CUDA_TESTS) $(CUDA_TESTS_SAN)

$(B)/tests/cuda/libcuda-double.so: tests/cuda/cuda-double.c tests/cuda/cuda-double.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -fPIC -shared -o $@ $<

$(B)/tests/cuda/%: tests/cuda/%.c $(CUDA_TEST_HDRS) $(B)/lib/libpin.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -Itests/cuda -o $@ $< -L$(B)/lib -lpin -ldl \
		-Wl,-rpath,'$$ORIGIN/../../lib'

$(B)/tests/cuda-san/%: tests/cuda/%.c $(CUDA_TEST_HDRS) $(B)/lib-san/libpin.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(SANFLAGS) -Itests/cuda -o $@ $< \
		$(B)/lib-san/libpin.a $(LIBPIN_LIBS)
