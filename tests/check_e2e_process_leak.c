/*
 * tests/check_e2e_process_leak.c: 200 acquire/exec/dispose cycles leave nothing behind: mounts
 * (this process's and pid 1's), processes, fds of this process, entries in the store.
 * Tagged "root".
 *
 * The machine is shared with other work, so the host-wide process count is printed but the
 * assertion is on an exact, attributable measure: this test makes itself a child subreaper
 * first, so every process a cycle leaves behind (a supervisor, or a sandbox process orphaned
 * by one) stays its descendant and is counted.
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

#define CYCLES 200

static void reap(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* Living descendants of this process (walking every host process's ppid chain). */
static int count_descendants(void)
{
	enum { MAXP = 65536 };
	static pid_t pids[MAXP], ppids[MAXP];
	int n = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	struct dirent *de;
	while ((de = readdir(d)) && n < MAXP) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char p[300];
		snprintf(p, sizeof(p), "/proc/%s/stat", de->d_name);
		char *t = spine_slurp(p, NULL);
		if (!t)
			continue;
		char *c = strrchr(t, ')');
		char st;
		int pp;
		if (c && sscanf(c + 1, " %c %d", &st, &pp) == 2 && st != 'Z' && st != 'X') {
			pids[n] = atoi(de->d_name);
			ppids[n++] = pp;
		}
		free(t);
	}
	closedir(d);
	pid_t self = getpid();
	int count = 0;
	for (int i = 0; i < n; i++) {
		pid_t cur = ppids[i];
		for (int depth = 0; depth < 64 && cur > 1; depth++) {
			if (cur == self) {
				count++;
				break;
			}
			pid_t next = 0;
			for (int j = 0; j < n; j++)
				if (pids[j] == cur)
					next = ppids[j];
			cur = next;
		}
	}
	return count;
}

static int count_lines(const char *path)
{
	size_t len = 0;
	char *t = spine_slurp(path, &len);
	if (!t)
		return -1;
	int n = 0;
	for (size_t i = 0; i < len; i++)
		n += t[i] == '\n';
	free(t);
	return n;
}

struct counts {
	int mounts_self, mounts_pid1, fds, descendants, host_procs, store;
};

static void measure(const char *dir, struct counts *c)
{
	reap();
	c->mounts_self = count_lines("/proc/self/mountinfo");
	c->mounts_pid1 = count_lines("/proc/1/mountinfo");
	c->fds = rung_test_count_fds();
	c->descendants = count_descendants();
	c->host_procs = rung_test_count_procs();
	c->store = spine_store_entries(dir);
}

static void cycle(struct rung_router *r, int i)
{
	char thread[32], script[64], want[32];
	snprintf(thread, sizeof(thread), "t%d", i);
	struct rung_sandbox *sb = spine_acquire(r, "leak", thread, "k", NULL, NULL);
	snprintf(script, sizeof(script), "echo cycle-%d; (sleep 30 &)", i);
	snprintf(want, sizeof(want), "cycle-%d\n", i);
	char *out = spine_sh_ok(sb, script);
	ck_assert_str_eq(out, want);
	free(out);
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, rung_sandbox_id(sb), "leak", &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	reap();
}

START_TEST(test_leak_cycles)
{
	RUNG_REQUIRE_ROOT();
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	char *dir;
	struct rung_router *r = spine_router(&dir);
	cycle(r, -1); /* warm-up: lazily opened library state */
	struct counts a, b;
	measure(dir, &a);
	/* the dispose's last step, the mount namespace's teardown, ends in a child of the
	 * supervisor after it returned (runtime/supervisor.c): within 5 s */
	for (int i = 0; i < 50 && a.descendants; i++) {
		usleep(100000);
		measure(dir, &a);
	}
	uint64_t t0 = rung_now_ms();
	for (int i = 0; i < CYCLES; i++)
		cycle(r, i);
	uint64_t took = rung_now_ms() - t0;
	measure(dir, &b);
	for (int i = 0; i < 50 && (b.descendants || b.mounts_pid1 != a.mounts_pid1); i++) {
		usleep(100000); /* let stragglers finish exiting */
		measure(dir, &b);
	}
	fprintf(stderr,
		"leak: %d acquire/exec/dispose cycles in %llu ms (%.1f ms each): "
		"mounts(self) %d -> %d, mounts(pid 1) %d -> %d, fds %d -> %d, "
		"descendant processes %d -> %d, host processes %d -> %d (shared host), "
		"store entries %d -> %d\n",
		CYCLES, (unsigned long long)took, (double)took / CYCLES, a.mounts_self,
		b.mounts_self, a.mounts_pid1, b.mounts_pid1, a.fds, b.fds, a.descendants,
		b.descendants, a.host_procs, b.host_procs, a.store, b.store);
	ck_assert_int_eq(b.mounts_self, a.mounts_self);
	ck_assert_int_eq(b.mounts_pid1, a.mounts_pid1);
	ck_assert_int_eq(b.fds, a.fds);
	ck_assert_int_eq(a.descendants, 0);
	ck_assert_int_eq(b.descendants, 0);
	ck_assert_int_eq(a.store, 0);
	ck_assert_int_eq(b.store, 0);
	rung_router_free(r);
	free(dir);
}
END_TEST

Suite *e2e_process_leak_suite(void)
{
	Suite *s = suite_create("e2e_process_leak");
	TCase *tc = tcase_create("leak");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 600);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, test_leak_cycles);
	suite_add_tcase(s, tc);
	return s;
}
