# SPDX-License-Identifier: GPL-2.0
# The scale checks (tests/scale/scale.c), run by `make scale` in a guest
# whose memory is raised for them: a SCALE_BIG_MIB region, SCALE_REGIONS
# regions of 2 MiB, SCALE_MAPPINGS view mappings of one region. 10,000
# regions pin 20 GiB: more than a guest on this 24 GiB host may take, so
# the default is what fits in SCALE_MEM.

SCALE_MEM	?= 19456
SCALE_BIG_MIB	?= 16384
SCALE_REGIONS	?= 8000
SCALE_MAPPINGS	?= 10000

all: $(B)/scale/scale

$(B)/scale/scale: tests/scale/scale.c include/uapi/pinmem.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -o $@ $<

scale: all
	set -e; for k in $(KERNELS); do \
		PINMEM_KERNEL=$$k PINMEM_VM_MEM=$(SCALE_MEM) PINMEM_VM_TIMEOUT=3600 \
		tests/vm/run $(B)/scale/scale $(SCALE_BIG_MIB) $(SCALE_REGIONS) \
		$(SCALE_MAPPINGS); \
	done

.PHONY: scale
