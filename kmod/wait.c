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
 *
 * A wait with a timeout never ends before the time asked, as poll(),
 * futex() and epoll_wait() promise: the deadline is a CLOCK_MONOTONIC
 * time (ktime_get()), taken when the call begins; the sleeps are hrtimers
 * set at it (or at the end of a polling interval, whichever is first);
 * and -ETIMEDOUT is decided by reading the clock, never by a count of
 * ticks, which from a call made in the middle of a tick ends up to a tick
 * (4 ms at HZ=250) early. It may end later, by the timer slack of the
 * task and the scheduling delay.
 */
#include <linux/hrtimer.h>
#include <linux/jiffies.h>
#include <linux/ktime.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/wait.h>

#include "pinmem.h"

/* timeout_ms 0: no limit. killable: only a fatal signal ends the wait. */
void pinmem_wait_init(struct pinmem_wait *w, u32 timeout_ms, bool killable)
{
	w->forever = !timeout_ms;
	w->deadline = ktime_add_ms(ktime_get(), timeout_ms);
	w->killable = killable;
	w->deferred = false;
}

/* Whether the deadline has passed, by the clock. */
static bool pinmem_wait_expired(struct pinmem_wait *w)
{
	return !w->forever && !ktime_before(ktime_get(), w->deadline);
}

/*
 * Jiffies left, rounded up (MAX_SCHEDULE_TIMEOUT without a limit): 0 only
 * once the deadline has passed.
 */
long pinmem_wait_left(struct pinmem_wait *w)
{
	s64 ns;

	if (w->forever)
		return MAX_SCHEDULE_TIMEOUT;
	ns = ktime_to_ns(ktime_sub(w->deadline, ktime_get()));
	if (ns <= 0)
		return 0;
	return DIV_ROUND_UP_ULL(ns, TICK_NSEC);
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
 * Sleep, in the state the caller set, until the time *until (forever for
 * NULL) or a wakeup; the caller looks at why. The slack is the task's, as
 * for poll() and nanosleep(): the timer fires in [until, until + slack].
 */
static void pinmem_wait_schedule(ktime_t *until)
{
	schedule_hrtimeout_range(until, current->timer_slack_ns,
				 HRTIMER_MODE_ABS);
}

/*
 * Wait on wq until ready(arg): 0, -ETIMEDOUT at the deadline, -EINTR on
 * a real signal. ready() is read without locks; the caller rechecks. As
 * in wait_event_*(), ready() wins over a signal and over the deadline.
 */
int pinmem_wait_queue(struct pinmem_wait *w, wait_queue_head_t *wq,
		      bool (*ready)(void *arg), void *arg)
{
	unsigned int state = w->killable ? TASK_KILLABLE : TASK_INTERRUPTIBLE;
	struct wait_queue_entry entry;
	int ret;

	init_wait_entry(&entry, 0);
	for (;;) {
		/* Queued and in state, unless a "signal" is pending. */
		long intr = prepare_to_wait_event(wq, &entry, state);

		if (ready(arg)) {
			ret = 0;
			break;
		}
		if (intr) {
			if (pinmem_wait_signalled(w)) {
				ret = -EINTR;
				break;
			}
			continue;	/* set aside: queue again */
		}
		if (pinmem_wait_expired(w)) {
			ret = -ETIMEDOUT;
			break;
		}
		pinmem_wait_schedule(w->forever ? NULL : &w->deadline);
	}
	finish_wait(wq, &entry);
	return ret;
}

/*
 * Sleep for t jiffies or until the deadline, whichever comes first, and
 * no less but for a signal: 0, or -EINTR. t is a polling interval, small.
 */
int pinmem_wait_sleep(struct pinmem_wait *w, long t)
{
	unsigned int state = w->killable ? TASK_KILLABLE : TASK_INTERRUPTIBLE;
	ktime_t until;

	if (t <= 0)
		return 0;
	until = ktime_add_ns(ktime_get(), jiffies_to_nsecs(t));
	if (!w->forever && ktime_after(until, w->deadline))
		until = w->deadline;
	for (;;) {
		set_current_state(state);
		pinmem_wait_schedule(&until);
		if (!ktime_before(ktime_get(), until))
			return 0;
		if (signal_pending(current) && pinmem_wait_signalled(w))
			return -EINTR;
	}
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
