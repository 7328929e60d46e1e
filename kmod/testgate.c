// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: test gates, built only into the test builds (PINMEM_TEST_GATES=y
 * on make's command line, as kmod/kmod.mk gives it; DKMS and the packages
 * build without it, and pinmem.h then makes every gate an empty inline).
 * Such a module says what it is: modinfo's "test: Y", which taints the
 * kernel with TAINT_TEST when it loads (6.0 and later), and a warning at
 * load.
 *
 * A gate is a named point in the module (enum pinmem_gate_point) where one
 * thread, chosen by the test, stops until the test lets it go: the test
 * can then make its own move (map, zap, POPULATE) at exactly that point of
 * the call, every time, on any number of CPUs. The debugfs file
 * pinmem/gates takes
 *	arm POINT TID N		stop thread TID at POINT, its next N passes
 *	release POINT		let the oldest stop at POINT go on
 *	disarm POINT		no more stops there; every stopped one goes on
 * and reads one line per point: "POINT parked P released R left N".
 * A stop ends by itself after PINMEM_GATE_MAX_WAIT or on a fatal signal,
 * so a test that dies cannot leave a call stopped for good.
 */
#include <linux/debugfs.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include "pinmem.h"

#define PINMEM_GATE_MAX_WAIT	(30 * HZ)

struct pinmem_gate {
	struct pid *pid;		/* the thread it stops, or NULL */
	unsigned int left;		/* stops still to make */
	unsigned long parked;		/* stops made since armed */
	unsigned long released;		/* of which let go */
};

static const char *const pinmem_gate_names[PINMEM_GATE_NR] = {
	[PINMEM_GATE_RECORDS_ROUND]	= "records_round",
	[PINMEM_GATE_READ_REF]		= "chunk_read_ref",
	[PINMEM_GATE_READ_MAP]		= "chunk_read_map",
	[PINMEM_GATE_FILL_CLAIMED]	= "fill_claimed",
	[PINMEM_GATE_POPULATE_HELD]	= "populate_held",
};

static DEFINE_SPINLOCK(pinmem_gates_lock);
static DECLARE_WAIT_QUEUE_HEAD(pinmem_gates_wq);
static struct pinmem_gate pinmem_gates[PINMEM_GATE_NR];
/* Gates with stops left; read without the lock by pinmem_gate(). */
int pinmem_gates_armed;

/* Under pinmem_gates_lock: arm (pid, n) or disarm (NULL, 0) gate g. */
static void pinmem_gate_set(struct pinmem_gate *g, struct pid *pid,
			    unsigned int n)
{
	lockdep_assert_held(&pinmem_gates_lock);
	if (g->left)
		WRITE_ONCE(pinmem_gates_armed, pinmem_gates_armed - 1);
	/* Whoever is stopped goes on: its ticket is released. */
	WRITE_ONCE(g->released, g->parked);
	put_pid(g->pid);
	g->pid = pid;
	g->left = pid ? n : 0;
	if (g->left) {
		g->parked = 0;
		WRITE_ONCE(g->released, 0);
		WRITE_ONCE(pinmem_gates_armed, pinmem_gates_armed + 1);
	}
	wake_up_all(&pinmem_gates_wq);
}

/* Stop here if the gate at point is armed for this thread. */
void pinmem_gate_wait(enum pinmem_gate_point point)
{
	struct pinmem_gate *g = &pinmem_gates[point];
	unsigned long ticket;

	spin_lock(&pinmem_gates_lock);
	if (!g->left || g->pid != task_pid(current)) {
		spin_unlock(&pinmem_gates_lock);
		return;
	}
	if (!--g->left)
		WRITE_ONCE(pinmem_gates_armed, pinmem_gates_armed - 1);
	ticket = ++g->parked;
	spin_unlock(&pinmem_gates_lock);
	wait_event_killable_timeout(pinmem_gates_wq,
				    READ_ONCE(g->released) >= ticket,
				    PINMEM_GATE_MAX_WAIT);
}

static int pinmem_gates_show(struct seq_file *m, void *unused)
{
	int i;

	spin_lock(&pinmem_gates_lock);
	for (i = 0; i < PINMEM_GATE_NR; i++)
		seq_printf(m, "%s parked %lu released %lu left %u\n",
			   pinmem_gate_names[i], pinmem_gates[i].parked,
			   pinmem_gates[i].released, pinmem_gates[i].left);
	spin_unlock(&pinmem_gates_lock);
	return 0;
}

static int pinmem_gates_open(struct inode *inode, struct file *file)
{
	return single_open(file, pinmem_gates_show, NULL);
}

/* Carry out one command; the point is already looked up. */
static int pinmem_gates_do(struct pinmem_gate *g, const char *cmd, int tid,
			   unsigned int n)
{
	struct pid *pid = NULL;

	if (!strcmp(cmd, "arm")) {
		pid = tid > 0 ? find_get_pid(tid) : NULL;
		if (!pid || !n) {
			put_pid(pid);
			return -EINVAL;
		}
	} else if (strcmp(cmd, "release") && strcmp(cmd, "disarm")) {
		return -EINVAL;
	}
	spin_lock(&pinmem_gates_lock);
	if (!strcmp(cmd, "release")) {
		if (g->released < g->parked)
			WRITE_ONCE(g->released, g->released + 1);
		wake_up_all(&pinmem_gates_wq);
	} else {
		pinmem_gate_set(g, pid, n);
	}
	spin_unlock(&pinmem_gates_lock);
	return 0;
}

static ssize_t pinmem_gates_write(struct file *file, const char __user *ubuf,
				  size_t len, loff_t *ppos)
{
	char buf[64], cmd[16], name[32];
	unsigned int n = 0;
	int i, tid = 0, ret;

	if (len >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, len))
		return -EFAULT;
	buf[len] = '\0';
	if (sscanf(buf, "%15s %31s %d %u", cmd, name, &tid, &n) < 2)
		return -EINVAL;
	for (i = 0; i < PINMEM_GATE_NR; i++)
		if (!strcmp(name, pinmem_gate_names[i]))
			break;
	if (i == PINMEM_GATE_NR)
		return -EINVAL;
	ret = pinmem_gates_do(&pinmem_gates[i], cmd, tid, n);
	return ret ? ret : len;
}

static const struct file_operations pinmem_gates_fops = {
	.owner		= THIS_MODULE,
	.open		= pinmem_gates_open,
	.read		= seq_read,
	.llseek		= seq_lseek,
	.release	= single_release,
	.write		= pinmem_gates_write,
};

void pinmem_gates_init(struct dentry *dir)
{
	pr_warn("pinmem: a test build, with test gates (debugfs pinmem/gates): not for production use\n");
	debugfs_create_file("gates", 0600, dir, NULL, &pinmem_gates_fops);
}

MODULE_INFO(test, "Y");

/* At module exit, after debugfs is gone: nothing can be stopped now. */
void pinmem_gates_exit(void)
{
	int i;

	spin_lock(&pinmem_gates_lock);
	for (i = 0; i < PINMEM_GATE_NR; i++)
		pinmem_gate_set(&pinmem_gates[i], NULL, 0);
	spin_unlock(&pinmem_gates_lock);
}
