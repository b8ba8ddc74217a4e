/*
 * tests/check_e2e_container_life.c: the container rung through the public API (rung.h), for real:
 * the image as root (idmapped layers under a per-sandbox overlay), files and image-root
 * changes persisting across execs, suspend/resume (freezer) and warm re-acquire until
 * dispose; an exec timeout killing the whole exec tree; dispose and `rung gc` (after a
 * SIGKILLed supervisor) removing the upper dir, the mounts, the cgroups and the lease.
 * Tagged "root". Each tcase has its own store, removed by an unchecked fixture.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/lib/container.h"
#include "tests/lib/testutil.h"

static void spec_free(struct rung_spec *s) { rung_spec_release(s); }

static bool wait_until(bool (*pred)(const char *), const char *arg, unsigned ms)
{
	for (unsigned i = 0; i < ms / 20; i++) {
		if (pred(arg))
			return true;
		usleep(20000);
	}
	return pred(arg);
}

static bool one_proc(const char *id) { return ct_cg_nprocs(id) == 1; }

static bool no_cgroup(const char *id) { return !ct_cg_exists_any(id); }

/* Everything a disposed sandbox leaves behind, from the host's side: nothing. */
static void assert_gone(const char *id)
{
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s/sandboxes/%s", ct_state(), id);
	ck_assert_msg(access(dir, F_OK) < 0, "%s (upper dir, socket, metadata) still exists", dir);
	ck_assert_msg(wait_until(no_cgroup, id, 2000), "cgroup rung-<store>/%s still exists", id);
	ck_assert_int_eq(ct_count_leases(ct_state()), 0);
	ck_assert_int_eq(ct_count_lines("/proc/self/mountinfo", ct_state()), 0);
	ck_assert_int_eq(ct_count_lines("/proc/1/mountinfo", ct_state()), 0);
	ck_assert_int_eq(ct_count_store_procs(ct_state()), 0);
}

START_TEST(test_image_root)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	bool created;
	struct rung_sandbox *sb = ct_acquire(r, "life", "root", &s, &created);
	ck_assert(created);
	char *out = ct_sh(sb, "id -u; pwd; cat /etc/image-release; echo $CT_GREETING; ls /");
	ck_assert_msg(!strncmp(out, "0\n/work\nct-busybox 1\nfrom-image\n", 32), "got: %s", out);
	ck_assert_ptr_nonnull(strstr(out, "\nbin\n"));
	free(out);
	/* Layer ownership survives the idmapping: image uid 1000 is 1000 inside. */
	out = ct_sh(sb, "stat -c %u:%g /home/owned-by-1000 /bin/busybox");
	ck_assert_str_eq(out, "1000:1000\n0:0\n");
	free(out);
	/* Inside, uid 0 maps to the sandbox's own range, never to host root. */
	out = ct_sh(sb, "cat /proc/self/uid_map");
	unsigned long in0, host0, len;
	ck_assert_int_eq(sscanf(out, "%lu %lu %lu", &in0, &host0, &len), 3);
	ck_assert_uint_eq(in0, 0);
	ck_assert_uint_ge(host0, 200000000ul);
	ck_assert_uint_eq(len, 65536);
	free(out);
	/* Writes land in the upper dir, on the sandbox's own disk image, owned by the sandbox's
	 * host uid; the shared layers are never written (copy-up and whiteouts instead). */
	free(ct_sh(sb, "echo changed > /etc/image-release && rm /bin/yes && echo w > /work/f && "
		       "sync"));
	char p[4400];
	snprintf(p, sizeof(p), "%s/sandboxes/%s/disk.img", ct_state(), rung_sandbox_id(sb));
	char *f = ct_debugfs(p, "stat /upper/work/f");
	char want[64];
	snprintf(want, sizeof(want), "User: %9lu", host0);
	ck_assert_msg(f && strstr(f, "Type: regular") && strstr(f, want), "%s: /upper/work/f: %s", p,
		      f ? f : "(debugfs failed)");
	free(f);
	f = ct_debugfs(p, "stat /upper/bin/yes");
	ck_assert_msg(f && strstr(f, "Type: character special"), "%s: no whiteout: %s", p,
		      f ? f : "(debugfs failed)");
	free(f);
	out = ct_sh(sb, "cat /etc/image-release; test -e /bin/yes || echo no-yes");
	ck_assert_str_eq(out, "changed\nno-yes\n");
	free(out);
	/* A second sandbox of the same image sees the pristine image. */
	struct rung_sandbox *sb2 = ct_acquire(r, "life", "root2", &s, NULL);
	out = ct_sh(sb2, "cat /etc/image-release; test -e /bin/yes && echo has-yes");
	ck_assert_str_eq(out, "ct-busybox 1\nhas-yes\n");
	free(out);
	/* The sandbox cannot see or reach host mounts, and /proc/sys is read-only. */
	const char *const w[] = {"sh", "-c", "echo 1 > /proc/sys/kernel/hostname", NULL};
	struct rung_exec_res res;
	ct_exec(sb, w, 10000, &res);
	ck_assert_int_ne(res.exit_code, 0);
	rung_exec_res_release(&res);
	struct rung_err err = {0};
	char id[65], id2[65];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
	snprintf(id2, sizeof(id2), "%s", rung_sandbox_id(sb2));
	rung_sandbox_close(sb);
	rung_sandbox_close(sb2);
	ck_assert_msg(rung_dispose(r, id, "life", &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_dispose(r, id2, "life", &err) == 0, "%s", err.msg);
	assert_gone(id);
	assert_gone(id2);
	/* the store's last sandbox took the store's group (rung-<store>) with it: no gc needed */
	struct rung_sandbox_info *v = NULL;
	size_t nv = 0;
	ck_assert_int_eq(rung_list(r, NULL, NULL, &v, &nv, &err), 0);
	free(v);
	ck_assert_uint_eq(nv, 0);
	char sg[4096];
	ct_cg_path("pids", "", NULL, sg, sizeof(sg));
	ck_assert_msg(access(sg, F_OK) != 0, "%s outlived the store's last sandbox", sg);
	spec_free(&s);
	rung_router_free(r);
}
END_TEST

START_TEST(test_persist_suspend_reacquire)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	struct rung_sandbox *sb = ct_acquire(r, "life", "persist", &s, NULL);
	char id[65];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
	struct rung_err err = {0};
	/* write_file (relative: the work dir), an exec-made file, an "installed" package in
	 * the image root (outside the work dir), and a file in the image's /etc. */
	ck_assert_msg(rung_write_file(sb, "notes.txt", "api\n", 4, 0640, &err) == 0, "%s", err.msg);
	free(ct_sh(sb, "mkdir -p /usr/lib/pkg && echo v1 > /usr/lib/pkg/VERSION && "
		       "printf '#!/bin/sh\\necho tool-ok\\n' > /bin/tool && chmod 755 /bin/tool && "
		       "echo exec > /work/made.txt && echo etc > /etc/added"));
	const char *check =
	    "cat /work/notes.txt /work/made.txt /usr/lib/pkg/VERSION /etc/added; tool";
	const char *want = "api\nexec\nv1\netc\ntool-ok\n";
	char *out = ct_sh(sb, check);
	ck_assert_str_eq(out, want);
	free(out);

	/* suspend: the freezer holds the whole sandbox; resume thaws it */
	ck_assert_msg(rung_suspend(sb, &err) == 0, "suspend: %s", err.msg);
	ck_assert(ct_frozen(id));
	ck_assert_msg(rung_resume(sb, &err) == 0, "resume: %s", err.msg);
	ck_assert(!ct_frozen(id));
	out = ct_sh(sb, check);
	ck_assert_str_eq(out, want);
	free(out);
	/* suspended, an exec resumes it (neither refused nor hung), files intact */
	ck_assert_msg(rung_suspend(sb, &err) == 0, "suspend: %s", err.msg);
	ck_assert(ct_frozen(id));
	const char *const t[] = {"true", NULL};
	struct rung_exec_req q = {.argv = t};
	struct rung_exec_res res;
	int rc = rung_exec(sb, &q, &res, &err);
	ck_assert_msg(rc == 0, "exec: %s", err.msg);
	ck_assert_int_eq(res.exit_code, 0);
	rung_exec_res_release(&res);
	ck_assert(!ct_frozen(id));
	out = ct_sh(sb, check);
	ck_assert_str_eq(out, want);
	free(out);

	/* warm re-acquire (same key, kind and spec): the same sandbox, files intact */
	rung_sandbox_close(sb);
	bool created = true;
	sb = ct_acquire(r, "life", "persist", &s, &created);
	ck_assert(!created);
	ck_assert_str_eq(rung_sandbox_id(sb), id);
	out = ct_sh(sb, check);
	ck_assert_str_eq(out, want);
	free(out);

	/* suspended, then re-acquired: resumed by acquire, files intact */
	ck_assert_msg(rung_suspend(sb, &err) == 0, "suspend: %s", err.msg);
	rung_sandbox_close(sb);
	sb = ct_acquire(r, "life", "persist", &s, &created);
	ck_assert(!created);
	out = ct_sh(sb, check);
	ck_assert_str_eq(out, want);
	free(out);
	char *data = NULL;
	size_t len = 0;
	ck_assert_msg(rung_read_file(sb, "/usr/lib/pkg/VERSION", 0, &data, &len, &err) == 0, "%s",
		      err.msg);
	ck_assert_uint_eq(len, 3);
	ck_assert(!memcmp(data, "v1\n", 3));
	free(data);

	/* a different spec under the same key is refused, naming the way out */
	struct rung_spec s2;
	ct_spec(&s2, NULL);
	s2.limits.pids = 99;
	struct rung_key k = {.scope = "life", .thread = "t", .agent = "persist"};
	struct rung_sandbox *x = NULL;
	rc = rung_acquire(r, &k, &s2, &x, &created, &err);
	ck_assert_int_eq(rc, -EEXIST);
	ck_assert_ptr_nonnull(strstr(err.msg, "dispose it first"));
	spec_free(&s2);

	/* dispose: upper dir, mounts, cgroups, lease, processes: all gone */
	rung_sandbox_close(sb);
	ck_assert_msg(rung_dispose(r, id, "life", &err) == 0, "%s", err.msg);
	assert_gone(id);
	/* ...and a new acquire of the same key starts from the pristine image */
	sb = ct_acquire(r, "life", "persist", &s, &created);
	ck_assert(created);
	out = ct_sh(sb, "ls /work; test -e /usr/lib/pkg || echo clean");
	ck_assert_str_eq(out, "clean\n");
	free(out);
	rung_sandbox_close(sb);
	ck_assert_msg(rung_dispose(r, id, "life", &err) == 0, "%s", err.msg);
	assert_gone(id);
	spec_free(&s);
	rung_router_free(r);
}
END_TEST

START_TEST(test_timeout_kills_tree)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	struct rung_sandbox *sb = ct_acquire(r, "life", "timeout", &s, NULL);
	const char *id = rung_sandbox_id(sb);
	ck_assert_int_eq(ct_cg_nprocs(id), 1); /* rung-agent, pid 1 */
	/* background jobs, a setsid daemon, a double-forked orphan, then a long sleep */
	const char *const argv[] = {
	    "sh", "-c",
	    "sleep 1000 & setsid sh -c 'sleep 1001 & sleep 1002' & (sleep 1003 &); "
	    "echo started; sleep 1004",
	    NULL};
	struct rung_exec_res res;
	uint64_t t0 = ct_now_us();
	ct_exec(sb, argv, 1000, &res);
	uint64_t ms = (ct_now_us() - t0) / 1000;
	fprintf(stderr, "container timeout: exec returned after %lu ms (timeout 1000 ms)\n", ms);
	ck_assert(res.timed_out);
	ck_assert_int_eq(res.signal, SIGKILL);
	ck_assert_str_eq(res.out, "started\n");
	ck_assert_uint_lt(ms, 4000);
	rung_exec_res_release(&res);
	/* From the host: only pid 1 is left in the sandbox's cgroup. */
	ck_assert_msg(wait_until(one_proc, id, 3000), "%d processes left in rung-<store>/%s",
		      ct_cg_nprocs(id), id);
	char *out = ct_sh(sb, "ps -o comm | grep -c sleep || true");
	ck_assert_str_eq(out, "0\n");
	free(out);
	/* The spec's exec timeout applies when the request gives none. */
	rung_sandbox_close(sb);
	struct rung_err err = {0};
	rung_spec_release(&s);
	ct_spec(&s, NULL);
	s.limits.exec_timeout_s = 1;
	sb = ct_acquire(r, "life", "timeout-spec", &s, NULL);
	const char *const sl[] = {"sleep", "30", NULL};
	ct_exec(sb, sl, 0, &res);
	ck_assert(res.timed_out);
	ck_assert_uint_lt(res.duration_us, 4000000);
	rung_exec_res_release(&res);
	ck_assert_int_eq(rung_dispose_scope(r, "life", NULL, NULL, &err), 0);
	rung_sandbox_close(sb);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

START_TEST(test_gc_orphan)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	struct rung_sandbox *sb = ct_acquire(r, "life", "orphan", &s, NULL);
	char id[65];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
	free(ct_sh(sb, "echo x > /work/x; sleep 1000 >/dev/null 2>&1 & echo bg"));
	rung_sandbox_close(sb);
	struct rung_sandbox_info *v = NULL;
	size_t n = 0;
	struct rung_err err = {0};
	ck_assert_msg(rung_list(r, "life", NULL, &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 1);
	pid_t sup = v[0].supervisor;
	ck_assert_int_eq(v[0].state, RUNG_STATE_RUNNING);
	free(v);
	ck_assert_int_gt(ct_count_store_procs(ct_state()), 1);
	/* Wait for the dead supervisor to be reaped by its new parent. */
	ct_kill_reaped(sup);
	ck_assert_msg(rung_list(r, "life", NULL, &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(v[0].state, RUNG_STATE_DEAD);
	free(v);
	/* exec on it is refused, pointing at gc */
	struct rung_sandbox *o = NULL;
	ck_assert_int_eq(rung_sandbox_open(r, id, "life", &o, &err), 0);
	const char *const t[] = {"true", NULL};
	struct rung_exec_req q = {.argv = t};
	struct rung_exec_res res;
	ck_assert_int_eq(rung_exec(o, &q, &res, &err), -EBADFD);
	ck_assert_ptr_nonnull(strstr(err.msg, "gc"));
	rung_sandbox_close(o);
	struct rung_gc_report rep;
	ck_assert_msg(rung_gc(r, &rep, &err) == 0, "%s", err.msg);
	fprintf(stderr, "container gc: disposed_dead=%zu debris=%zu\n", rep.disposed_dead,
		rep.debris);
	ck_assert_uint_eq(rep.disposed_dead, 1);
	assert_gone(id);
	ck_assert_msg(rung_list(r, NULL, NULL, &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 0);
	free(v);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

/* A suspended (frozen) sandbox is disposed completely, and so is one whose supervisor was
 * SIGKILLed while it was frozen (gc). */
START_TEST(test_dispose_frozen)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	struct rung_err err = {0};
	for (int orphan = 0; orphan < 2; orphan++) {
		struct rung_sandbox *sb =
		    ct_acquire(r, "life", orphan ? "frozen-orphan" : "frozen", &s, NULL);
		char id[65];
		snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
		free(ct_sh(sb, "sleep 1000 >/dev/null 2>&1 & echo x > /work/x"));
		ck_assert_msg(rung_suspend(sb, &err) == 0, "%s", err.msg);
		ck_assert(ct_frozen(id));
		rung_sandbox_close(sb);
		if (!orphan) {
			ck_assert_msg(rung_dispose(r, id, "life", &err) == 0, "%s", err.msg);
		} else {
			struct rung_sandbox_info *v = NULL;
			size_t n = 0;
			ck_assert_int_eq(rung_list(r, "life", NULL, &v, &n, &err), 0);
			ck_assert_uint_eq(n, 1);
			ck_assert_int_eq(v[0].state, RUNG_STATE_SUSPENDED);
			pid_t sup = v[0].supervisor;
			free(v);
			ct_kill_reaped(sup);
			struct rung_gc_report rep;
			ck_assert_msg(rung_gc(r, &rep, &err) == 0, "%s", err.msg);
			ck_assert_uint_eq(rep.disposed_dead, 1);
		}
		assert_gone(id);
	}
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

START_TEST(test_errors)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	struct rung_key k = {.scope = "life", .thread = "t", .agent = "err"};
	struct rung_sandbox *sb = NULL;
	struct rung_err err = {0};
	bool created;
	/* an image the store does not hold: -ENOENT naming it, and nothing left behind */
	ct_spec(&s, "no/such-image:1");
	int rc = rung_acquire(r, &k, &s, &sb, &created, &err);
	ck_assert_int_eq(rc, -ENOENT);
	ck_assert_msg(strstr(err.msg, "no/such-image") != NULL, "%s", err.msg);
	ck_assert_int_eq(ct_count_dir(ct_state()) > 0, 1);
	char p[4200];
	snprintf(p, sizeof(p), "%s/sandboxes", ct_state());
	ck_assert_int_eq(ct_count_dir(p), 0);
	ck_assert_int_eq(ct_count_leases(ct_state()), 0);
	rung_spec_release(&s);
	/* the container rung without an image */
	ct_spec(&s, NULL);
	free(s.image);
	s.image = NULL;
	rc = rung_acquire(r, &k, &s, &sb, &created, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(strstr(err.msg, "image") != NULL, "%s", err.msg);
	ck_assert_int_eq(ct_count_dir(p), 0);
	rung_spec_release(&s);
	/* exec after dispose */
	ct_spec(&s, NULL);
	sb = ct_acquire(r, "life", "err", &s, NULL);
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(sb), "life", &err), 0);
	const char *const t[] = {"true", NULL};
	struct rung_exec_req q = {.argv = t};
	struct rung_exec_res res;
	rc = rung_exec(sb, &q, &res, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_ptr_nonnull(strstr(err.msg, rung_sandbox_id(sb)));
	/* disposing another scope's sandbox: it does not exist for that caller */
	struct rung_sandbox *sb2 = ct_acquire(r, "life", "err2", &s, NULL);
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(sb2), "other-scope", &err), -ENOENT);
	free(ct_sh(sb2, "true"));
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(sb2), "life", &err), 0);
	rung_sandbox_close(sb);
	rung_sandbox_close(sb2);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

Suite *e2e_container_life_suite(void)
{
	Suite *s = suite_create("e2e_container_life");
	ct_add(s, "image_root", test_image_root, 120);
	ct_add(s, "persist", test_persist_suspend_reacquire, 120);
	ct_add(s, "timeout", test_timeout_kills_tree, 120);
	ct_add(s, "gc", test_gc_orphan, 120);
	ct_add(s, "dispose_frozen", test_dispose_frozen, 120);
	ct_add(s, "errors", test_errors, 120);
	return s;
}
