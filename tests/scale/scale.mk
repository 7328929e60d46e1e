# SPDX-License-Identifier: GPL-2.0
# The scale checks (tests/scale/scale.c), run by `make scale` in a guest
# whose memory is raised for them: a SCALE_BIG_MIB region (allocated
# twice), SCALE_REGIONS regions of 2 MiB, SCALE_MAPPINGS view mappings of
# one region. 10,000 regions pin 19.5 GiB: the guest takes 20.5 GiB
# (SCALE_MEM), QEMU's resident memory peaked at 20.3 GiB on this 24 GiB
# host, with the TCG translation buffer cut from 1 GiB to SCALE_TB_MB.
# Drop the host's page cache first and run nothing else big meanwhile.
# Both kernels run; the target fails if either run did.

SCALE_MEM	?= 20992
SCALE_TB_MB	?= 256
SCALE_BIG_MIB	?= 16384
SCALE_REGIONS	?= 10000
SCALE_MAPPINGS	?= 10000

all: $(B)/scale/scale

$(B)/scale/scale: tests/scale/scale.c include/uapi/pinmem.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -o $@ $<

scale: all
	st=0; for k in $(KERNELS); do \
		PINMEM_KERNEL=$$k PINMEM_VM_MEM=$(SCALE_MEM) \
		PINMEM_VM_TB_MB=$(SCALE_TB_MB) PINMEM_VM_TIMEOUT=3600 \
		tests/vm/run $(B)/scale/scale $(SCALE_BIG_MIB) $(SCALE_REGIONS) \
		$(SCALE_MAPPINGS) || st=1; \
	done; exit $$st

.PHONY: scale
