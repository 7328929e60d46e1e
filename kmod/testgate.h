/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem: the test gates at their points (testgate.c): a call to stop
 * there if a test has armed the gate. Nothing at all in builds without
 * PINMEM_TEST_GATES.
 */
#ifndef _PINMEM_TESTGATE_H
#define _PINMEM_TESTGATE_H

#include <linux/compiler.h>
#include <linux/irqflags.h>

#include "pinmem.h"

#ifdef PINMEM_TEST_GATES
static inline void pinmem_gate(enum pinmem_gate_point point)
{
	if (unlikely(READ_ONCE(pinmem_gates_armed)))
		pinmem_gate_wait(point);
}

/* The same with interrupts off (saved in *flags): on while stopped. */
static inline void pinmem_gate_irq(enum pinmem_gate_point point,
				   unsigned long *flags)
{
	if (likely(!READ_ONCE(pinmem_gates_armed)))
		return;
	local_irq_restore(*flags);
	pinmem_gate_wait(point);
	local_irq_save(*flags);
}
#else
static inline void pinmem_gate(enum pinmem_gate_point point) { }
static inline void pinmem_gate_irq(enum pinmem_gate_point point,
				   unsigned long *flags) { }
#endif

#endif /* _PINMEM_TESTGATE_H */
