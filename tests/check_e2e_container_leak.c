/*
 * tests/check_e2e_container_leak.c: 200 cycles of acquire / exec / dispose on the container rung,
 * then everything a sandbox holds on the host is back where it was: mounts (this process's
 * and pid 1's mount table), cgroup directories under every /sys/fs/cgroup/<ctl>/rung,
 * processes, this process's fds, store entries and image leases. Figures go to stderr as
 * "leak: ...". Other engineers' tests may mount or make cgroups on the same host at the same
 * time, so the whole-host tables are compared line by line: a change that names this test's
 * store or one of its sandboxes fails; a foreign change is printed, never counted as ours.
 * Tagged "root".
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/container.h"
#include "tests/lib/testutil.h"

#define CYCLES 200

struct lines {
	char **v;
	size_t n;
};

static void lines_load(const char *path, struct lines *l)
{
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	char *line = NULL;
	size_t cap = 0;
	l->v = NULL;
	l->n = 0;
	while (getline(&line, &cap, f) > 0) {
		l->v = realloc(l->v, (l->n + 1) * sizeof(char *));
		ck_assert_ptr_nonnull(l->v);
		l->v[l->n++] = strdup(line);
	}
	free(line);
	fclose(f);
}

static bool lines_has(const struct lines *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], s))
			return true;
	return false;
}

static void lines_free(struct lines *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
}

/* Lines in b not in a (added) and in a not in b (removed); returns how many name mine. */
static int lines_diff(const char *what, const struct lines *a, const struct lines *b,
		      const char *mine)
{
	int added = 0, removed = 0, ours = 0;
	for (size_t i = 0; i < b->n; i++)
		if (!lines_has(a, b->v[i])) {
			added++;
			ours += strstr(b->v[i], mine) != NULL;
			fprintf(stderr, "leak: %s: + %s", what, b->v[i]);
		}
	for (size_t i = 0; i < a->n; i++)
		if (!lines_has(b, a->v[i])) {
			removed++;
			fprintf(stderr, "leak: %s: - %s", what, a->v[i]);
		}
	fprintf(stderr, "leak: %s: %zu -> %zu entries (+%d -%d, %d of them this test's)\n", what,
		a->n, b->n, added, removed, ours);
	return ours;
}

/* Every rung cgroup on the host, as lines: "<ctl>/rung/..." and "<ctl>/rung-<store>/..."
 * (two levels). */
static void cgroups_walk(struct lines *l, const char *dir, const char *rel, int depth)
{
	DIR *r = opendir(dir);
	if (!r)
		return;
	struct dirent *e;
	while ((e = readdir(r))) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		char *s, sub[4096], subrel[1024];
		ck_assert_int_ge(asprintf(&s, "%s/%s\n", rel, e->d_name), 0);
		l->v = realloc(l->v, (l->n + 1) * sizeof(char *));
		ck_assert_ptr_nonnull(l->v);
		l->v[l->n++] = s;
		snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
		snprintf(subrel, sizeof(subrel), "%s/%s", rel, e->d_name);
		if (depth < 2)
			cgroups_walk(l, sub, subrel, depth + 1);
	}
	closedir(r);
}

static void cgroups_load(struct lines *l)
{
	l->v = NULL;
	l->n = 0;
	DIR *d = opendir(CT_CG);
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char p[512];
		snprintf(p, sizeof(p), CT_CG "/%s", de->d_name);
		DIR *h = opendir(p);
		if (!h)
			continue;
		struct dirent *e;
		while ((e = readdir(h))) {
			if (e->d_type != DT_DIR ||
			    (strcmp(e->d_name, "rung") && strncmp(e->d_name, "rung-", 5)))
				continue;
			char q[1024], rel[600];
			snprintf(q, sizeof(q), "%s/%s", p, e->d_name);
			snprintf(rel, sizeof(rel), "%s/%s", de->d_name, e->d_name);
			cgroups_walk(l, q, rel, 1);
		}
		closedir(h);
	}
	closedir(d);
}

struct snap {
	int fds, store_procs, host_procs, sandboxes, leases, children;
	struct lines self_mounts, pid1_mounts, cgroups;
};

static void snap_take(struct snap *s)
{
	char p[4200];
	s->fds = rung_test_count_fds();
	s->store_procs = ct_count_store_procs(ct_state());
	s->host_procs = rung_test_count_procs();
	snprintf(p, sizeof(p), "%s/sandboxes", ct_state());
	s->sandboxes = ct_count_dir(p);
	s->leases = ct_count_leases(ct_state());
	s->children = waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD ? 0 : 1;
	lines_load("/proc/self/mountinfo", &s->self_mounts);
	lines_load("/proc/1/mountinfo", &s->pid1_mounts);
	cgroups_load(&s->cgroups);
}

static void snap_free(struct snap *s)
{
	lines_free(&s->self_mounts);
	lines_free(&s->pid1_mounts);
	lines_free(&s->cgroups);
}

START_TEST(test_leak_200)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	/* one warm-up cycle, so lazily opened library state is not counted as a leak */
	struct rung_err err = {0};
	struct rung_sandbox *sb = ct_acquire(r, "leak", "warmup", &s, NULL);
	free(ct_sh(sb, "true"));
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(sb), "leak", &err), 0);
	rung_sandbox_close(sb);

	struct snap a, b;
	snap_take(&a);
	char(*ids)[65] = calloc(CYCLES, sizeof(*ids));
	ck_assert_ptr_nonnull(ids);
	uint64_t t0 = ct_now_us(), acq_us = 0, exec_us = 0, disp_us = 0;
	for (int i = 0; i < CYCLES; i++) {
		char agent[32], want[40];
		snprintf(agent, sizeof(agent), "c%d", i);
		uint64_t t = ct_now_us();
		bool created = false;
		sb = ct_acquire(r, "leak", agent, &s, &created);
		ck_assert(created);
		acq_us += ct_now_us() - t;
		snprintf(ids[i], sizeof(ids[i]), "%s", rung_sandbox_id(sb));
		const char *const argv[] = {"echo", agent, NULL};
		struct rung_exec_res res;
		t = ct_now_us();
		ct_exec(sb, argv, 10000, &res);
		exec_us += ct_now_us() - t;
		snprintf(want, sizeof(want), "%s\n", agent);
		ck_assert_str_eq(res.out, want);
		rung_exec_res_release(&res);
		t = ct_now_us();
		int rc = rung_dispose(r, ids[i], "leak", &err);
		disp_us += ct_now_us() - t;
		ck_assert_msg(rc == 0, "cycle %d: dispose: %s", i, err.msg);
		rung_sandbox_close(sb);
	}
	uint64_t total = ct_now_us() - t0;
	snap_take(&b);
	int mine_cg = 0;
	for (int i = 0; i < CYCLES; i++)
		mine_cg += ct_cg_exists_any(ids[i]);
	fprintf(
	    stderr,
	    "leak: %d cycles in %.1f s: acquire %.1f ms, exec %.1f ms, dispose %.1f ms (means)\n",
	    CYCLES, (double)total / 1e6, (double)acq_us / CYCLES / 1000,
	    (double)exec_us / CYCLES / 1000, (double)disp_us / CYCLES / 1000);
	fprintf(stderr, "leak: fds %d -> %d\n", a.fds, b.fds);
	fprintf(stderr, "leak: store processes (supervisors + sandboxes) %d -> %d\n", a.store_procs,
		b.store_procs);
	fprintf(stderr, "leak: host processes %d -> %d (whole host, informational)\n", a.host_procs,
		b.host_procs);
	fprintf(stderr, "leak: unreaped children %d -> %d\n", a.children, b.children);
	fprintf(stderr, "leak: store entries %d -> %d, image leases %d -> %d\n", a.sandboxes,
		b.sandboxes, a.leases, b.leases);
	fprintf(stderr, "leak: cgroup dirs of the %d sandboxes left: %d\n", CYCLES, mine_cg);
	int m_self = lines_diff("host mounts (/proc/self/mountinfo)", &a.self_mounts,
				&b.self_mounts, ct_tmp());
	int m_pid1 =
	    lines_diff("host mounts (/proc/1/mountinfo)", &a.pid1_mounts, &b.pid1_mounts, ct_tmp());
	/* a cgroup line is ours when it names one of this test's sandbox ids */
	lines_diff("cgroup dirs (" CT_CG "/*/rung{,-*}/*)", &a.cgroups, &b.cgroups, ct_tmp());
	int cg_ours = 0;
	for (size_t i = 0; i < b.cgroups.n; i++)
		for (int k = 0; k < CYCLES; k++)
			cg_ours += strstr(b.cgroups.v[i], ids[k]) != NULL;
	ck_assert_int_eq(b.fds, a.fds);
	ck_assert_int_eq(b.store_procs, 0);
	ck_assert_int_eq(a.store_procs, 0);
	ck_assert_int_eq(b.children, a.children);
	ck_assert_int_eq(b.sandboxes, 0);
	ck_assert_int_eq(b.leases, a.leases);
	ck_assert_int_eq(mine_cg, 0);
	ck_assert_int_eq(cg_ours, 0);
	ck_assert_int_eq(m_self, 0);
	ck_assert_int_eq(m_pid1, 0);
	snap_free(&a);
	snap_free(&b);
	free(ids);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

Suite *e2e_container_leak_suite(void)
{
	Suite *s = suite_create("e2e_container_leak");
	TCase *tc = tcase_create("leak");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 600);
	tcase_add_unchecked_fixture(tc, ct_setup, ct_teardown);
	tcase_add_test(tc, test_leak_200);
	suite_add_tcase(s, tc);
	return s;
}
