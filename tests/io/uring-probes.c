// SPDX-License-Identifier: GPL-2.0
/*
 * How io_uring stored a registered buffer, seen from inside the kernel
 * (fixed-coalesce.c's probes; user space cannot see it). Two kprobe events
 * (tracefs, in a private trace instance, filtered to this process):
 *   reg: return of io_sqe_buffer_register(ctx, iov, pimu, last_hpage); the
 *        struct io_mapped_ubuf it made is *pimu ($arg3 at return);
 *   imp: io_import_fixed(ddir, iter, imu, buf_addr, len), which a
 *        READ_FIXED runs with the imu it uses.
 * Both read imu->nr_bvecs, imu->folio_shift and the first bio_vecs at the
 * offsets of Linux 6.12's io_uring/rsrc.h (ubuf u64 @0, len @8,
 * nr_bvecs @12, folio_shift @16, refs @20, acct_pages @24, bvec[] @32, a
 * bio_vec 16 bytes: page, len @+8, offset @+12). 6.12 coalesces in
 * io_try_coalesce_buffer(): when the pinned pages run contiguously through
 * folios of one size, imu keeps one bvec per folio and folio_shift = that
 * folio's shift. On 6.1 only imp is used (its return probes cannot fetch
 * arguments), at 6.1's offsets (ubuf @0, ubuf_end @8, nr_bvecs @16,
 * acct_pages @24, bvec[] @32; no folio_shift, no coalescing code). Other
 * kernels: the layout (and on 6.13+ the signature) differs, so the probe
 * checks SKIP there.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uring-probes.h"

/* For the exit path: the tracer to take down. */
static struct tracer *live_tracer;

static int write_str(const char *path, const char *s, int flags)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | flags);
	ssize_t n;
	int err;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	err = n < 0 ? -errno : 0;
	close(fd);
	return err;
}

/* The whole of a (small, virtual) file, NUL-terminated; NULL on error. */
char *read_text(const char *path)
{
	size_t cap = 8192, len = 0;
	char *buf = malloc(cap), *p;
	ssize_t n;
	int fd;

	if (!buf)
		return NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(buf);
		return NULL;
	}
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len < 4096) {
			p = realloc(buf, cap *= 2);
			if (!p)
				break;
			buf = p;
		}
	}
	close(fd);
	buf[len] = '\0';
	return buf;
}

void tracer_stop(struct tracer *t)
{
	char path[512], cmd[160];

	if (t->instance) {
		snprintf(path, sizeof(path), "%s/events/%s/enable", t->inst, t->group);
		write_str(path, "0", 0);
		if (rmdir(t->inst))
			printf("# could not remove %s: %s\n", t->inst, strerror(errno));
		t->instance = false;
	}
	if (t->events) {
		snprintf(path, sizeof(path), "%s/kprobe_events", t->dir);
		snprintf(cmd, sizeof(cmd), "-:%s/reg\n", t->group);
		write_str(path, cmd, O_APPEND);
		snprintf(cmd, sizeof(cmd), "-:%s/imp\n", t->group);
		write_str(path, cmd, O_APPEND);
		t->events = false;
	}
	if (live_tracer == t)
		live_tracer = NULL;
}

static void tracer_stop_live(void)
{
	if (live_tracer)
		tracer_stop(live_tracer);
}

/* Append the kernel's tracing error_log tail to why. */
static void explain(struct tracer *t, const char *what, int err)
{
	char path[512], *log, *last = NULL, *p;

	snprintf(path, sizeof(path), "%s/error_log", t->dir);
	log = read_text(path);
	if (log)
		for (p = strtok(log, "\n"); p; p = strtok(NULL, "\n"))
			last = p;
	snprintf(t->why, sizeof(t->why), "%s: %s%s%s", what, strerror(-err),
		 last ? "; error_log: " : "", last ? last : "");
	free(log);
}

int tracer_start(struct tracer *t, const char *release)
{
	static const char *const syms[] = { "io_import_fixed", "io_sqe_buffer_register" };
	char path[512], def[640], pidf[64], *ksyms;
	int err;
	size_t i;

	memset(t, 0, sizeof(*t));
	if (!strncmp(release, "6.12.", 5)) {
		t->has_reg = true;
		t->nr_off = 12;
	} else if (!strncmp(release, "6.1.", 4)) {
		/*
		 * No probes on 6.1: it refuses the pinmem registration, so
		 * there is nothing of ours to watch, and once under TCG the
		 * probed task sat in a soft lockup for minutes.
		 */
		snprintf(t->why, sizeof(t->why), "6.1: no kprobes (it refuses "
			 "the registration; probing hung a TCG guest once)");
		return -EOPNOTSUPP;
	} else {
		snprintf(t->why, sizeof(t->why), "kernel %s: the probes know struct "
			 "io_mapped_ubuf of 6.1 and 6.12 only", release);
		return -EOPNOTSUPP;
	}
	snprintf(t->dir, sizeof(t->dir), "/sys/kernel/tracing");
	snprintf(path, sizeof(path), "%s/kprobe_events", t->dir);
	if (access(path, F_OK) && mount("nodev", t->dir, "tracefs", 0, NULL) &&
	    access(path, F_OK)) {
		snprintf(t->why, sizeof(t->why), "no tracefs kprobe_events at %s (mount: %s)",
			 t->dir, strerror(errno));
		return -ENOENT;
	}
	/* The probe points must be functions of their own, not inlined. */
	ksyms = read_text("/proc/kallsyms");
	for (i = 0; i < (t->has_reg ? 2u : 1u); i++) {
		char pat[80];

		snprintf(pat, sizeof(pat), " %s\n", syms[i]);
		if (!ksyms || !strstr(ksyms, pat)) {
			snprintf(t->why, sizeof(t->why), "%s is not in /proc/kallsyms",
				 syms[i]);
			free(ksyms);
			return -ENOENT;
		}
	}
	free(ksyms);
	snprintf(t->group, sizeof(t->group), "pinmemcoal%d", (int)getpid());
	live_tracer = t;
	atexit(tracer_stop_live);
	t->events = true;
	/* Return probe: *pimu is the imu just made (6.12 layout). */
	snprintf(def, sizeof(def),
		 "r:%s/reg io_sqe_buffer_register ret=$retval:s32 imu=+0($arg3):x64 "
		 "nr_bvecs=+12(+0($arg3)):u32 folio_shift=+16(+0($arg3)):u32 "
		 "len=+8(+0($arg3)):u32 acct_pages=+24(+0($arg3)):u64 "
		 "bv0_len=+40(+0($arg3)):u32 bv0_off=+44(+0($arg3)):u32 "
		 "bv1_len=+56(+0($arg3)):u32\n", t->group);
	err = t->has_reg ? write_str(path, def, O_APPEND) : 0;
	if (err) {
		explain(t, "kretprobe on io_sqe_buffer_register refused", err);
		return err;
	}
	snprintf(def, sizeof(def),
		 "p:%s/imp io_import_fixed imu=$arg3:x64 nr_bvecs=+%d($arg3):u32 %s"
		 "bv0_len=+40($arg3):u32 bv1_len=+56($arg3):u32 addr=$arg4:x64 "
		 "len=$arg5:u64\n", t->group, t->nr_off,
		 t->has_reg ? "folio_shift=+16($arg3):u32 " : "");
	err = write_str(path, def, O_APPEND);
	if (err) {
		explain(t, "kprobe on io_import_fixed refused", err);
		return err;
	}
	snprintf(t->inst, sizeof(t->inst), "%s/instances/%s", t->dir, t->group);
	if (mkdir(t->inst, 0700)) {
		err = -errno;
		explain(t, "tracefs instance", err);
		return err;
	}
	t->instance = true;
	snprintf(pidf, sizeof(pidf), "common_pid == %d", (int)getpid());
	snprintf(path, sizeof(path), "%s/events/%s/filter", t->inst, t->group);
	err = write_str(path, pidf, 0);
	if (!err) {
		snprintf(path, sizeof(path), "%s/events/%s/enable", t->inst, t->group);
		err = write_str(path, "1", 0);
	}
	if (err) {
		explain(t, "enabling the events", err);
		return err;
	}
	return 0;
}

void tracer_clear(struct tracer *t)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/trace", t->inst);
	write_str(path, "", O_TRUNC);
}

static unsigned long long field(const char *line, const char *name)
{
	const char *p = line;
	size_t n = strlen(name);

	while ((p = strstr(p, name))) {
		if ((p == line || p[-1] == ' ') && p[n] == '=')
			return strtoull(p + n + 1, NULL, 0);
		p += n;
	}
	return ~0ull;
}

/* Parse this case's events out of the instance's trace. */
void tracer_read(struct tracer *t, struct seen *s)
{
	char path[512], *text, *line;

	memset(s, 0, sizeof(*s));
	snprintf(path, sizeof(path), "%s/trace", t->inst);
	text = read_text(path);
	if (!text)
		return;
	for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		if (line[0] == '#')
			continue;
		printf("# trace: %s\n", line + strspn(line, " "));
		if (strstr(line, " reg: ")) {
			s->reg = true;
			s->ret = (long)(int)field(line, "ret");
			s->imu = field(line, "imu");
			s->nr_bvecs = field(line, "nr_bvecs");
			s->folio_shift = field(line, "folio_shift");
			s->len = field(line, "len");
			s->acct_pages = field(line, "acct_pages");
			s->bv0_len = field(line, "bv0_len");
			s->bv0_off = field(line, "bv0_off");
			s->bv1_len = field(line, "bv1_len");
		} else if (strstr(line, " imp: ") && !s->imp) {
			s->imp = true;
			s->imp_imu = field(line, "imu");
			s->imp_nr_bvecs = field(line, "nr_bvecs");
			s->imp_folio_shift = field(line, "folio_shift");
			s->imp_bv0_len = field(line, "bv0_len");
			s->imp_bv1_len = field(line, "bv1_len");
		}
	}
	free(text);
}
