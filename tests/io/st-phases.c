// SPDX-License-Identifier: GPL-2.0
/*
 * pin_st_phases says where a load's time went: allocate, pin, transfer and
 * seal each took time, transfer is exactly the stats' io_ns, the phases
 * (pin and transfer overlapping) add up to no more than the whole load,
 * and a save leaves them all zero.
 *   st-phases DIR
 */
#include "io-test.h"

#define SIZE	(8u << 20)

int main(int argc, char **argv)
{
	char path[4096];
	uint64_t shape[1] = { SIZE };
	uint8_t *data = malloc(SIZE);
	struct pin_st_tensor t = {
		.size = sizeof(struct pin_st_tensor),
		.name = "w", .dtype = PIN_DT_U8, .ndim = 1, .shape = shape,
		.nbytes = SIZE, .data = data,
	};
	struct pin_st *ck = pin_st_create(), *ld;
	struct pin_st_phases ph = PIN_INIT(struct pin_st_phases);
	struct pin_io_stats st = PIN_INIT(struct pin_io_stats);
	struct pin_dev *dev;

	CHECK(data && ck, "memory");
	snprintf(path, sizeof(path), "%s/st-phases-%d.safetensors",
		 test_dir(argc, argv), (int)getpid());
	fill(data, SIZE, 3);
	CHECK(pin_st_save(ck, path, &t, 1, NULL, NULL, 0, NULL) == 0, "%s",
	      pin_st_error(ck));
	memset(&ph, 0xff, sizeof(ph));
	ph.size = sizeof(ph);
	CHECK_EQ(pin_st_phases(ck, &ph), 0);
	CHECK(!ph.alloc_ns && !ph.pin_ns && !ph.transfer_ns && !ph.seal_ns,
	      "a save left phases");

	CHECK_EQ(pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL), 0);
	ld = pin_st_create();
	CHECK(pin_st_load(ld, dev, path, NULL) == 0, "%s", pin_st_error(ld));
	CHECK_EQ(pin_st_phases(ld, &ph), 0);
	CHECK_EQ(pin_st_stats(ld, &st), 0);
	printf("# %s backend: allocate %llu ns, pin %llu, transfer %llu, seal %llu; whole %llu\n",
	       pin_backend_name(pin_dev_backend(dev)),
	       (unsigned long long)ph.alloc_ns, (unsigned long long)ph.pin_ns,
	       (unsigned long long)ph.transfer_ns,
	       (unsigned long long)ph.seal_ns, (unsigned long long)st.ns);
	CHECK(ph.alloc_ns && ph.pin_ns && ph.transfer_ns && ph.seal_ns,
	      "a phase took no time");
	CHECK_EQ(ph.transfer_ns, st.io_ns);
	/* Pinning runs under the transfer: they overlap, the rest do not. */
	CHECK(ph.alloc_ns + (ph.pin_ns > ph.transfer_ns ? ph.pin_ns :
			     ph.transfer_ns) + ph.seal_ns <= st.ns,
	      "the phases add up to more than the load");

	pin_st_close(ld);
	pin_dev_close(dev);
	pin_st_close(ck);
	unlink(path);
	free(data);
	printf("ok\n");
	return 0;
}
