/*
 * tests/check_e2e_pool_claim.c: warm pools on real process-rung sandboxes: a claim binds the
 * key at claim time and gives a sandbox indistinguishable from a fresh one (the same probe in
 * both), the key's later acquires and lookups find it, its ttl counts from the claim; 32
 * concurrent claimer processes over one store never share a sandbox; a non-matching spec is
 * not served from the pool; memory pressure shrinks a pool; gc removes a pool whose owner
 * died, a claim that never bound and an orphaned ready sandbox; the CLI's pool set/ls/rm
 * with a keeper that refills after a claim. Tagged "root".
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

static struct rung_spec spec_k(const char *kind)
{
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup(kind);
	return s;
}

static void pool_up(struct rung_router *r, const char *name, uint32_t size,
		    const struct rung_spec *s)
{
	struct rung_err err = {0};
	size_t made = 0;
	ck_assert_msg(rung_pool_set(r, name, size, s, 0, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_pool_fill(r, name, &made, NULL, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(made, size);
}

static uint32_t pool_ready(struct rung_router *r, const char *name)
{
	struct rung_pool_info *v = NULL;
	size_t n = 0;
	struct rung_err err = {0};
	ck_assert_msg(rung_pool_list(r, &v, &n, &err) == 0, "%s", err.msg);
	uint32_t ready = UINT32_MAX;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].name, name))
			ready = v[i].ready;
	rung_pool_info_free(v, n);
	ck_assert_msg(ready != UINT32_MAX, "pool %s not listed", name);
	return ready;
}

/* Is id one of the entries of <state>/pools/<name>/ready right now? */
static bool in_ready(const char *state, const char *name, const char *id)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/pools/%s/ready/%s", state, name, id);
	return access(p, F_OK) == 0;
}

/* What a fresh sandbox looks like from inside: work dir and /tmp, the processes (by name,
 * the probe's own shell and its children left out), network interfaces and their counters,
 * resolv.conf, hostname. */
static const char *probe =
    "ls -A /work /tmp; for p in /proc/[0-9]*; do n=${p#/proc/}; "
    "[ \"$n\" = $$ ] && continue; c=$(cat $p/comm 2>/dev/null) || continue; "
    "pp=$(cut -d' ' -f4 $p/stat 2>/dev/null); [ \"$pp\" = $$ ] && continue; "
    "echo \"proc $n $c\"; done; "
    "tail -n +3 /proc/net/dev; cat /etc/resolv.conf 2>/dev/null; hostname; id -u";

START_TEST(test_claim_is_fresh)
{
	RUNG_REQUIRE_ROOT();
	char *dir;
	struct rung_router *r = spine_router(&dir);
	struct rung_err err = {0};
	struct rung_spec ps = spec_k("any");
	pool_up(r, "p", 2, &ps);
	ck_assert_uint_eq(pool_ready(r, "p"), 2);

	/* another kind and ttl: still a match (kind, ttl, idle suspend are the claim's) */
	struct rung_spec cs = spec_k("pytest");
	cs.ttl_s = 3;
	bool created = false;
	struct rung_sandbox *a = spine_acquire(r, "scope-a", "t", "pytest", &cs, &created);
	ck_assert(created);
	const char *id = rung_sandbox_id(a);
	char pooled[4096];
	snprintf(pooled, sizeof(pooled), "%s/pools/p/claimed/%s", dir, id);
	ck_assert_msg(access(pooled, F_OK) < 0, "the claim marker of %s was left behind", id);
	ck_assert_uint_eq(pool_ready(r, "p"), 1);
	struct rt_meta m;
	spine_meta(r, id, &m);
	struct rung_key key = {"scope-a", "t", "agent"};
	struct rt_labels want;
	rt_labels_compute(&key, &want);
	ck_assert_str_eq(m.labels.scope, want.scope); /* bound at the claim */
	ck_assert_str_eq(m.labels.thread, want.thread);
	ck_assert_str_eq(m.labels.agent, want.agent);
	ck_assert_str_eq(m.spec.kind, "pytest");
	ck_assert_uint_eq(m.spec.ttl_s, 3);
	char key_id[RT_ID_LEN + 1]; /* the way back to the key, for dispose */
	rt_id_compute(&key, "pytest", key_id);
	ck_assert_str_eq(m.aliased_by, key_id);
	/* its last use is the claim, before its supervisor adopts it and touches the file */
	ck_assert_uint_ge(rt_store_used_ms(&r->store, &m), m.created_ms);
	rt_meta_release(&m);

	/* a fresh sandbox of another spec (no pool matches it), the same probe in both */
	struct rung_spec fs = spec_k("fresh");
	fs.limits.memory_bytes = 256u << 20;
	struct rung_sandbox *f = spine_acquire(r, "scope-f", "t", "fresh", &fs, &created);
	ck_assert(created);
	char *pa = spine_sh_ok(a, probe), *pf = spine_sh_ok(f, probe);
	ck_assert_str_eq(pa, pf);
	ck_assert_ptr_nonnull(strstr(pa, "proc 1 rung-agent"));
	free(pa);
	free(pf);
	/* the adopt (within a second) removes the ready record the claim set aside */
	char aside[4096];
	snprintf(aside, sizeof(aside), "%s/sandboxes/%s/" RT_META_ASIDE, dir, id);
	for (int i = 0; i < 40 && access(aside, F_OK) == 0; i++)
		usleep(50000);
	ck_assert_msg(access(aside, F_OK) < 0, "%s is left after the adopt", aside);

	/* the key finds it again: acquire (warm), lookup; another scope does not */
	ck_assert_msg(rung_write_file(a, "kept.txt", "x", 1, 0, &err) == 0, "%s", err.msg);
	struct rung_sandbox *b = spine_acquire(r, "scope-a", "t", "pytest", &cs, &created);
	ck_assert(!created);
	ck_assert_str_eq(rung_sandbox_id(b), id);
	struct rung_sandbox *l = NULL;
	ck_assert_msg(rung_sandbox_lookup(r, &key, "pytest", &l, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(rung_sandbox_id(l), id);
	rung_sandbox_close(l);
	struct rung_sandbox *o = NULL;
	ck_assert_int_eq(rung_sandbox_open(r, id, "scope-other", &o, &err), -ENOENT);
	/* the same key with another spec is refused, as for any sandbox */
	struct rung_spec other = spec_k("pytest");
	other.limits.pids = 99;
	struct rung_sandbox *x = NULL;
	struct rung_key k2 = {"scope-a", "t", "agent"};
	ck_assert_int_eq(rung_acquire(r, &k2, &other, &x, NULL, &err), -EEXIST);

	/* its ttl counts from the claim (the supervisor adopts it): gone after 3 s */
	struct rt_meta mb;
	spine_meta(r, id, &mb);
	ck_assert_msg(spine_wait_gone(mb.sup_pid, 8000), "ttl of a claimed sandbox not enforced");
	rt_meta_release(&mb);
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(f), NULL, &err), 0);
	/* the key's alias went with it (gc's or the ttl dispose's): a new acquire makes anew */
	struct rung_sandbox *c = spine_acquire(r, "scope-a", "t", "pytest", &cs, &created);
	ck_assert(created);
	ck_assert_str_ne(rung_sandbox_id(c), id);
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(c), NULL, &err), 0);
	char key_dir[4096]; /* c was claimed too: its dispose found the key's dir (aliased_by) */
	snprintf(key_dir, sizeof(key_dir), "%s/sandboxes/%s", dir, key_id);
	ck_assert_msg(access(key_dir, F_OK) < 0, "%s is left after the dispose", key_dir);
	size_t disposed = 0;
	ck_assert_msg(rung_pool_remove(r, "p", &disposed, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(disposed, 0); /* both ready ones were claimed */
	rung_sandbox_close(a);
	rung_sandbox_close(b);
	rung_sandbox_close(c);
	rung_sandbox_close(f);
	rung_spec_release(&ps);
	rung_spec_release(&cs);
	rung_spec_release(&fs);
	rung_spec_release(&other);
	rung_router_free(r);
	free(dir);
}
END_TEST

#define CLAIMERS 32
#define POOL_SIZE 16

struct claim_row {
	char id[33];
	bool created;
	bool key_ok;
};

/* In a child: its own router, acquire for key (s, t<i>, agent); the row on fd. */
static void claimer(const char *dir, int i, int fd, int go)
{
	struct rung_router_opts o = {.state_dir = dir};
	rung_test_router_env(&o);
	struct rung_router *r = NULL;
	struct rung_err err = {0};
	struct claim_row row = {0};
	char t[16], c;
	snprintf(t, sizeof(t), "t%d", i);
	struct rung_key key = {"race", t, "agent"};
	struct rung_spec s = spec_k("claim");
	if (read(go, &c, 1) != 0 || rung_router_new(&o, &r, &err) < 0)
		_exit(2);
	struct rung_sandbox *sb = NULL;
	if (rung_acquire(r, &key, &s, &sb, &row.created, &err) < 0) {
		fprintf(stderr, "claimer %d: %s\n", i, err.msg);
		_exit(3);
	}
	snprintf(row.id, sizeof(row.id), "%s", rung_sandbox_id(sb));
	struct rung_sandbox *l = NULL;
	row.key_ok = rung_sandbox_lookup(r, &key, "claim", &l, &err) == 0 &&
		     !strcmp(rung_sandbox_id(l), row.id);
	if (write(fd, &row, sizeof(row)) != (ssize_t)sizeof(row))
		_exit(4);
	_exit(0);
}

START_TEST(test_concurrent_claims)
{
	RUNG_REQUIRE_ROOT();
	char *dir;
	struct rung_router *r = spine_router(&dir);
	struct rung_err err = {0};
	struct rung_spec ps = spec_k("any");
	pool_up(r, "race", POOL_SIZE, &ps);
	char ready[POOL_SIZE][33];
	struct rung_sandbox_info *v = NULL;
	size_t n = 0;
	char rd[4096];
	snprintf(rd, sizeof(rd), "%s/pools/race/ready", dir);
	int k = 0;
	DIR *d = opendir(rd);
	ck_assert_ptr_nonnull(d);
	for (struct dirent *de; (de = readdir(d));)
		if (de->d_name[0] != '.' && k < POOL_SIZE)
			snprintf(ready[k++], 33, "%.32s", de->d_name);
	closedir(d);
	ck_assert_int_eq(k, POOL_SIZE);
	int p[2], go[2];
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(pipe(go), 0);
	pid_t kids[CLAIMERS];
	for (int i = 0; i < CLAIMERS; i++) {
		kids[i] = fork();
		ck_assert_int_ge(kids[i], 0);
		if (kids[i] == 0) {
			close(p[0]);
			close(go[1]);
			claimer(dir, i, p[1], go[0]);
		}
	}
	close(p[1]);
	close(go[0]);
	close(go[1]); /* all start at once */
	struct claim_row rows[CLAIMERS];
	int got = 0;
	while (got < CLAIMERS && read(p[0], &rows[got], sizeof(rows[0])) == sizeof(rows[0]))
		got++;
	close(p[0]);
	for (int i = 0; i < CLAIMERS; i++) {
		int st;
		ck_assert_int_eq(waitpid(kids[i], &st, 0), kids[i]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "claimer %d failed (0x%x)", i,
			      st);
	}
	ck_assert_int_eq(got, CLAIMERS);
	int from_pool = 0;
	for (int i = 0; i < CLAIMERS; i++) {
		ck_assert_msg(rows[i].key_ok, "claimer %d: its key does not find %s", i,
			      rows[i].id);
		ck_assert(rows[i].created);
		for (int j = 0; j < i; j++)
			ck_assert_msg(strcmp(rows[i].id, rows[j].id),
				      "sandbox %s handed to two claims", rows[i].id);
		for (int j = 0; j < POOL_SIZE; j++)
			if (!strcmp(rows[i].id, ready[j]))
				from_pool++;
	}
	/* more claimers than ready sandboxes: every ready one went to exactly one claimer */
	ck_assert_int_eq(from_pool, POOL_SIZE);
	ck_assert_uint_eq(pool_ready(r, "race"), 0);
	ck_assert_msg(rung_list(r, "race", NULL, &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, CLAIMERS);
	free(v);
	size_t gone = 0;
	ck_assert_msg(rung_dispose_scope(r, "race", NULL, &gone, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(gone, CLAIMERS);
	ck_assert_msg(rung_pool_remove(r, "race", NULL, &err) == 0, "%s", err.msg);
	/* dispose took the keys' aliases along: nothing is left in the store */
	ck_assert_int_eq(spine_store_entries(dir), 0);
	rung_spec_release(&ps);
	rung_router_free(r);
	free(dir);
}
END_TEST

START_TEST(test_mismatch_pressure_gc)
{
	RUNG_REQUIRE_ROOT();
	char *dir;
	struct rung_router *r = spine_router(&dir);
	struct rung_err err = {0};
	struct rung_spec ps = spec_k("any");
	ps.limits.memory_bytes = 256u << 20;
	pool_up(r, "small", 2, &ps);
	/* the default memory limit does not match a 256M pool */
	bool created = false;
	struct rung_sandbox *a = spine_acquire(r, "mm", "t", "k", NULL, &created);
	ck_assert(created);
	ck_assert(!in_ready(dir, "small", rung_sandbox_id(a)));
	ck_assert_uint_eq(pool_ready(r, "small"), 2);
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(a), NULL, &err), 0);
	rung_sandbox_close(a);

	/* memory pressure (a reserve over what the host has): no refill, ready ones go */
	size_t made = 9, shrunk = 0;
	ck_assert_msg(rung_pool_set(r, "small", 2, &ps, 1ull << 60, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_pool_fill(r, "small", &made, &shrunk, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(made, 0);
	ck_assert_uint_eq(shrunk, 2);
	ck_assert_uint_eq(pool_ready(r, "small"), 0);
	ck_assert_msg(rung_pool_set(r, "small", 1, &ps, 0, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_pool_fill(r, "small", &made, &shrunk, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(made, 1);

	/* an owner that died: gc removes the pool and disposes its ready sandbox */
	pid_t kid = fork();
	ck_assert_int_ge(kid, 0);
	if (kid == 0) {
		pause();
		_exit(0);
	}
	ck_assert_msg(rung_pool_own(r, "small", kid, &err) == 0, "%s", err.msg);
	struct rung_gc_report rep;
	ck_assert_msg(rung_gc(r, &rep, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(rep.pools_removed, 0); /* alive: kept */
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	ck_assert_msg(rung_gc(r, &rep, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(rep.pools_removed, 1);
	struct rung_pool_info *v = NULL;
	size_t n = 9;
	ck_assert_msg(rung_pool_list(r, &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 0);
	rung_pool_info_free(v, n);
	ck_assert_int_eq(spine_store_entries(dir), 0);
	/* names are checked */
	ck_assert_int_eq(rung_pool_set(r, "../x", 1, &ps, 0, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "pool name"));
	ck_assert_int_eq(rung_pool_set(r, "ok", RUNG_POOL_MAX_SIZE + 1, &ps, 0, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "size"));
	rung_spec_release(&ps);
	rung_router_free(r);
	free(dir);
}
END_TEST

/* gc: a claim that never bound (the claimer died after the rename) and a ready sandbox no pool
 * lists (its filler died before the marker) are disposed once old enough; a live one is not. */
START_TEST(test_gc_stale_claim_and_orphan)
{
	RUNG_REQUIRE_ROOT();
	char *dir;
	struct rung_router *r = spine_router(&dir);
	struct rung_err err = {0};
	struct rung_spec ps = spec_k("any");
	pool_up(r, "g", 3, &ps);
	char rd[4096], ids[3][33];
	snprintf(rd, sizeof(rd), "%s/pools/g/ready", dir);
	int k = 0;
	DIR *d = opendir(rd);
	ck_assert_ptr_nonnull(d);
	for (struct dirent *de; (de = readdir(d));)
		if (de->d_name[0] != '.' && k < 3)
			snprintf(ids[k++], 33, "%.32s", de->d_name);
	closedir(d);
	ck_assert_int_eq(k, 3);
	char from[4200], to[4200];
	/* ids[0]: claimed (renamed) 60 s ago, never bound */
	snprintf(from, sizeof(from), "%s/%s", rd, ids[0]);
	snprintf(to, sizeof(to), "%s/pools/g/claimed/%s", dir, ids[0]);
	ck_assert_int_eq(rename(from, to), 0);
	struct timespec old[2] = {{.tv_sec = time(NULL) - 60}, {.tv_sec = time(NULL) - 60}};
	ck_assert_int_eq(utimensat(AT_FDCWD, to, old, 0), 0);
	/* ids[1]: in no pool dir, made 120 s ago */
	snprintf(from, sizeof(from), "%s/%s", rd, ids[1]);
	ck_assert_int_eq(unlink(from), 0);
	struct rt_meta m;
	spine_meta(r, ids[1], &m);
	m.created_ms -= 120000;
	ck_assert_msg(rt_store_meta_write(&r->store, &m, &err) == 0, "%s", err.msg);
	rt_meta_release(&m);
	struct rung_gc_report rep;
	ck_assert_msg(rung_gc(r, &rep, &err) == 0, "%s", err.msg);
	struct rt_meta gone;
	ck_assert_int_eq(rt_store_meta_read(&r->store, ids[0], &gone, NULL), -ENOENT);
	ck_assert_int_eq(rt_store_meta_read(&r->store, ids[1], &gone, NULL), -ENOENT);
	ck_assert_msg(access(to, F_OK) < 0, "the stale claim marker is still there");
	spine_meta(r, ids[2], &m); /* the live ready one stays, still claimable */
	rt_meta_release(&m);
	ck_assert_uint_eq(pool_ready(r, "g"), 1);
	ck_assert_msg(rung_pool_remove(r, "g", NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(spine_store_entries(dir), 0);
	rung_spec_release(&ps);
	rung_router_free(r);
	free(dir);
}
END_TEST

static json_t *cli_json(const char *const *args)
{
	struct spine_run res;
	spine_cli_run(&res, NULL, args);
	ck_assert_msg(res.status == 0, "rung %s %s: %d: %s", args[2], args[3], res.status,
		      res.err);
	json_error_t je;
	json_t *j = json_loads(res.out, 0, &je);
	ck_assert_msg(j, "not JSON: %s", res.out);
	spine_run_release(&res);
	return j;
}

static json_t *cli_pool_ls(const char *dir)
{
	const char *ls[] = {"--state-dir", dir, "--json", "pool", "ls", NULL};
	return cli_json(ls);
}

START_TEST(test_cli_keeper)
{
	RUNG_REQUIRE_ROOT();
	char *dir;
	struct rung_router *r = spine_router(&dir);
	const char *set[] = {"--state-dir", dir, "--json", "pool", "set", "cli", "--size", "2",
			     "--kind", "x", NULL};
	json_t *j = cli_json(set);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "created")), 2);
	pid_t keeper = (pid_t)json_integer_value(json_object_get(j, "keeper"));
	ck_assert_int_gt(keeper, 0);
	json_decref(j);
	/* a claim through the CLI; the keeper refills within a few seconds */
	const char *acq[] = {"--state-dir", dir, "--json", "acquire", "--scope", "c", "--thread",
			     "t", "--agent", "a", NULL};
	j = cli_json(acq);
	char id[33];
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(j, "id")));
	json_decref(j);
	struct rt_meta cm; /* its metadata names the key's id */
	spine_meta(r, id, &cm);
	struct rung_key ck = {"c", "t", "a"};
	char key_id[RT_ID_LEN + 1];
	rt_id_compute(&ck, "default", key_id);
	ck_assert_msg(!strcmp(cm.aliased_by, key_id), "%s was not claimed from the pool", id);
	rt_meta_release(&cm);
	int ready = -1;
	for (int i = 0; i < 100 && ready != 2; i++) {
		usleep(100000);
		j = cli_pool_ls(dir);
		json_t *p = json_array_get(j, 0);
		ready = (int)json_integer_value(json_object_get(p, "ready"));
		ck_assert(json_is_true(json_object_get(p, "owner_alive")));
		json_decref(j);
	}
	ck_assert_int_eq(ready, 2);
	const char *rm[] = {"--state-dir", dir, "--json", "pool", "rm", "cli", NULL};
	j = cli_json(rm);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "disposed")), 2);
	json_decref(j);
	ck_assert_msg(spine_wait_gone(keeper, 5000), "the keeper outlived its pool");
	j = cli_pool_ls(dir);
	ck_assert_uint_eq(json_array_size(j), 0);
	json_decref(j);
	struct rung_err err = {0};
	ck_assert_int_eq(rung_dispose(r, id, NULL, &err), 0);
	ck_assert_int_eq(spine_store_entries(dir), 0);
	rung_router_free(r);
	free(dir);
}
END_TEST

Suite *e2e_pool_claim_suite(void)
{
	Suite *s = suite_create("e2e_pool_claim");
	TCase *tc = spine_tcase(s, "claim", 240);
	tcase_add_test(tc, test_claim_is_fresh);
	tcase_add_test(tc, test_concurrent_claims);
	tcase_add_test(tc, test_mismatch_pressure_gc);
	tcase_add_test(tc, test_gc_stale_claim_and_orphan);
	tcase_add_test(tc, test_cli_keeper);
	return s;
}
