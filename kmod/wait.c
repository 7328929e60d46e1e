// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: the waits of DONATE and SEAL, which end early only for a real
 * signal. io_uring posts a completion to the thread that submitted the
 * I/O as task work, which raises TIF_NOTIFY_SIGNAL and so makes
 * signal_pending() true although no signal exists: the very thread whose
 * I/O a DONATE waits for would see a spurious EINTR. Such a wakeup is set
 * aside (the flag cleared, so that sleeping works again) and raised again
 * when the wait ends: the work then runs on the return to user space, as
 * it would have, only later.
 */
#include <linux/jiffies.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/wait.h>

#include "pinmem.h"

/* timeout_ms 0: no limit. killable: only a fatal signal ends the wait. */
void pinmem_wait_init(struct pinmem_wait *w, u32 timeout_ms, bool killable)
{
	w->forever = !timeout_ms;
	w->deadline = jiffies + msecs_to_jiffies(timeout_ms);
	w->killable = killable;
	w->deferred = false;
}

/* Jiffies left (MAX_SCHEDULE_TIMEOUT without a limit), 0 once expired. */
long pinmem_wait_left(struct pinmem_wait *w)
{
	long left;

	if (w->forever)
		return MAX_SCHEDULE_TIMEOUT;
	left = (long)(w->deadline - jiffies);
	return left > 0 ? left : 0;
}

/* After a wakeup by a pending "signal": true if it is a real one. */
static bool pinmem_wait_signalled(struct pinmem_wait *w)
{
	if (w->killable ? fatal_signal_pending(current) :
			  task_sigpending(current))
		return true;
	if (test_thread_flag(TIF_NOTIFY_SIGNAL)) {
		clear_notify_signal();
		w->deferred = true;
	}
	return false;
}

/*
 * Wait on wq until ready(arg): 0, -ETIMEDOUT at the deadline, -EINTR on
 * a real signal. ready() is read without locks; the caller rechecks.
 */
int pinmem_wait_queue(struct pinmem_wait *w, wait_queue_head_t *wq,
		      bool (*ready)(void *arg), void *arg)
{
	long left, t;

	for (;;) {
		if (ready(arg))
			return 0;
		left = pinmem_wait_left(w);
		if (!left)
			return -ETIMEDOUT;
		if (w->killable)
			t = wait_event_killable_timeout(*wq, ready(arg), left);
		else
			t = wait_event_interruptible_timeout(*wq, ready(arg),
							     left);
		if (t > 0)
			return 0;
		if (!t)
			return -ETIMEDOUT;
		if (pinmem_wait_signalled(w))
			return -EINTR;
	}
}

/* Sleep for up to t jiffies, never past the deadline: 0, or -EINTR. */
int pinmem_wait_sleep(struct pinmem_wait *w, long t)
{
	t = min(t, pinmem_wait_left(w));
	while (t > 0) {
		set_current_state(w->killable ? TASK_KILLABLE :
						TASK_INTERRUPTIBLE);
		t = schedule_timeout(t);
		if (t && signal_pending(current) && pinmem_wait_signalled(w))
			return -EINTR;
	}
	return 0;
}

/*
 * The end of a wait: raise again the task work wakeup set aside. This
 * task is running, so the flag alone is enough (set_notify_signal()'s
 * wakeup is for other tasks, and wake_up_state() is not exported): the
 * return to user space looks at it.
 */
void pinmem_wait_end(struct pinmem_wait *w)
{
	if (w->deferred)
		set_thread_flag(TIF_NOTIFY_SIGNAL);
}
