// SPDX-License-Identifier: MIT
/*
 * pin__shmem_thp_advise() on THP knob trees written here, one per case:
 * the top mode alone (before Linux 6.11), per-size knobs with "inherit",
 * the deny and force overrides, and knobs missing or unreadable. The
 * loader fallocates a step first only where this says 0 (fill.c): under
 * "advise" a fallocate would fix the pages at 4 KiB.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* libpin's internal (libpin/internal.h); this test links libpin.a. */
int pin__shmem_thp_advise(const char *thp_dir);

#define TOP_MODES	"always within_size advise never deny force"
#define SIZE_MODES	"always inherit within_size advise never"

static char root[256];
static int failed, n;

/* mode "advise" -> "always within_size [advise] never deny force". */
static void knob(const char *dir, const char *modes, const char *mode)
{
	char path[512], line[256], *at;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/shmem_enabled", root, dir);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	snprintf(line, sizeof(line), "%s", modes);
	at = strstr(line, mode);
	if (mode[0] && at && (at == line || at[-1] == ' ')) {
		fprintf(f, "%.*s[%s]%s\n", (int)(at - line), line, mode,
			at + strlen(mode));
	} else {
		fprintf(f, "%s\n", mode[0] ? mode : modes);	/* malformed */
	}
	fclose(f);
}

static void reset(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'/*", root);
	if (system(cmd)) {
		fprintf(stderr, "%s failed\n", cmd);
		exit(1);
	}
}

static void expect(const char *what, int want)
{
	int got = pin__shmem_thp_advise(root);

	n++;
	printf("%s %d - %s: %d\n", got == want ? "ok" : "not ok", n, what, got);
	if (got != want)
		failed = 1;
	reset();
}

int main(void)
{
	static const char *const top_only[][2] = {
		{ "never", "0" }, { "deny", "0" }, { "always", "0" },
		{ "within_size", "0" }, { "force", "0" }, { "advise", "1" },
	};
	char what[128];
	size_t i;

	snprintf(root, sizeof(root), "/tmp/shmem-thp.XXXXXX");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	expect("no shmem_enabled (no THP in the kernel): fallocate", 0);
	for (i = 0; i < sizeof(top_only) / sizeof(top_only[0]); i++) {
		knob(".", TOP_MODES, top_only[i][0]);
		snprintf(what, sizeof(what), "top %s, no per-size knobs: %s",
			 top_only[i][0],
			 top_only[i][1][0] == '1' ? "advised" : "fallocate");
		expect(what, top_only[i][1][0] == '1');
	}
	knob(".", TOP_MODES, "advise");
	knob("hugepages-2048kB", SIZE_MODES, "inherit");
	expect("top advise, 2048kB inherit: advised", 1);
	knob(".", TOP_MODES, "advise");
	knob("hugepages-2048kB", SIZE_MODES, "never");
	knob("hugepages-64kB", SIZE_MODES, "never");
	expect("top advise, every size never: fallocate", 0);
	knob(".", TOP_MODES, "always");
	knob("hugepages-2048kB", SIZE_MODES, "inherit");
	expect("top always, 2048kB inherit: fallocate", 0);
	knob(".", TOP_MODES, "never");
	knob("hugepages-2048kB", SIZE_MODES, "inherit");
	expect("top never, 2048kB inherit: fallocate", 0);
	knob(".", TOP_MODES, "never");
	knob("hugepages-2048kB", SIZE_MODES, "inherit");
	knob("hugepages-64kB", SIZE_MODES, "advise");
	expect("top never, 64kB advise: advised", 1);
	knob(".", TOP_MODES, "never");
	knob("hugepages-2048kB", SIZE_MODES, "always");
	expect("top never, 2048kB always: fallocate", 0);
	knob(".", TOP_MODES, "deny");
	knob("hugepages-64kB", SIZE_MODES, "advise");
	expect("top deny overrides 64kB advise: fallocate", 0);
	knob(".", TOP_MODES, "force");
	knob("hugepages-2048kB", SIZE_MODES, "advise");
	expect("top force overrides 2048kB advise: fallocate", 0);
	knob(".", TOP_MODES, "");
	expect("top knob without a selection: fallocate", 0);
	knob(".", TOP_MODES, "advise");
	knob("hugepages-2048kB", SIZE_MODES, "");
	knob("hugepages-64kB", SIZE_MODES, "never");
	expect("a per-size knob without a selection is skipped: fallocate", 0);
	rmdir(root);
	printf("1..%d\n", n);
	return failed;
}
