// SPDX-License-Identifier: MIT
/*
 * Distinct handles from distinct threads at once: four threads, each with
 * its own device handle, allocate, fill, view, check, fail on purpose (so
 * each handle's error text is written concurrently) and free, many times;
 * every thread's error text must stay its own.
 */
#include <pthread.h>
#include <sys/mman.h>

#include "test.h"

#define THREADS	4
#define ROUNDS	25

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	struct pin_dev *dev;
	int i;

	if (pin_dev_open(&dev, PIN_BACKEND_AUTO, NULL))
		return "pin_dev_open";
	for (i = 0; i < ROUNDS; i++) {
		struct pin_region *r, *none;
		struct pin_view *v, *bad;
		unsigned char *own, *p;
		char want[32];

		if (pin_region_create(dev, MiB(2), NULL, &r))
			return "pin_region_create";
		if (pin_region_map(r, (void **)&own))
			return "pin_region_map";
		t_fill(own, 4096, seed + (unsigned)i);
		if (pin_view_create(r, 0, 4096, 0, &v) ||
		    pin_view_map(v, PROT_READ, (void **)&p))
			return "view";
		t_check(p, 4096, seed + (unsigned)i, "thread view");
		/* A failure whose text carries this thread's number. */
		if (pin_view_create(r, 4096 * (seed + 1) + 1, 4096, 0, &bad) !=
		    -EINVAL)
			return "bad view accepted";
		snprintf(want, sizeof(want), "+0x%x ", 4096 * (seed + 1) + 1);
		if (!strstr(pin_region_error(r), want))
			return "error text of another thread";
		if (pin_region_create(dev, 0, NULL, &none) != -EINVAL ||
		    !strstr(pin_dev_error(dev), "size 0"))
			return "device error text";
		if (pin_view_unmap(v, p))
			return "pin_view_unmap";
		pin_view_close(v);
		if (pin_region_close(r))
			return "pin_region_close";
	}
	pin_dev_close(dev);
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	void *res;
	int i;

	for (i = 0; i < THREADS; i++)
		EXPECT_EQ(pthread_create(&t[i], NULL, worker,
					 (void *)(uintptr_t)i), 0);
	for (i = 0; i < THREADS; i++) {
		EXPECT_EQ(pthread_join(t[i], &res), 0);
		if (res)
			FAIL("thread %d: %s", i, (const char *)res);
	}
	return 0;
}
