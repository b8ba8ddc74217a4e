/*
 * tests/check_runtime_policy.c: the router's isolation x capability policy (rt_policy_check,
 * rung_router_pick) and the process rung's mount plan (rt_root_plan). Pure: no root needed
 * (the router gets a throwaway state dir).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt-internal.h"
#include "tests/lib/testutil.h"

static struct rung_spec spec_of(unsigned requires, const char *egress)
{
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("k");
	s.requires = requires;
	if (egress) {
		s.egress_allow = calloc(2, sizeof(char *));
		s.egress_allow[0] = strdup(egress);
	}
	return s;
}

START_TEST(test_policy_table)
{
	struct rung_spec exec = spec_of(RUNG_CAP_EXEC, NULL);
	struct rung_spec install = spec_of(RUNG_CAP_INSTALL, NULL);
	struct rung_spec code = spec_of(RUNG_CAP_RUN_CODE, NULL);
	struct rung_spec code_net = spec_of(RUNG_CAP_RUN_CODE, "pypi.org");
	struct rung_spec code_fs = spec_of(RUNG_CAP_RUN_CODE | RUNG_CAP_FS_PERSIST, NULL);
	struct rung_spec cb = spec_of(RUNG_CAP_RUN_CODE | RUNG_CAP_HOST_CALLBACKS, NULL);
	const char *why;

	/* Not deployed: everything goes (the dev-box mode). */
	for (int iso = 0; iso < RUNG_ISO__COUNT; iso++) {
		ck_assert_ptr_null(rt_policy_check(iso, &exec, false));
		ck_assert_ptr_null(rt_policy_check(iso, &code_net, false));
	}
	/* Deployed: a shell-capable spec is refused on both shared-kernel rungs. */
	why = rt_policy_check(RUNG_ISO_PROCESS, &exec, true);
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_nonnull(strstr(why, "shell-capable"));
	why = rt_policy_check(RUNG_ISO_CONTAINER, &exec, true);
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_nonnull(strstr(why, "shell-capable"));
	why = rt_policy_check(RUNG_ISO_PROCESS, &install, true);
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_nonnull(strstr(why, "shell-capable"));
	why = rt_policy_check(RUNG_ISO_CONTAINER, &install, true);
	ck_assert_ptr_nonnull(why);
	/* ... and allowed on the vm rung. */
	ck_assert_ptr_null(rt_policy_check(RUNG_ISO_VM, &exec, true));
	ck_assert_ptr_null(rt_policy_check(RUNG_ISO_VM, &install, true));
	/* run_code only, no network, no persistence: fine on process. */
	ck_assert_ptr_null(rt_policy_check(RUNG_ISO_PROCESS, &code, true));
	/* run_code with egress on process: refused. */
	why = rt_policy_check(RUNG_ISO_PROCESS, &code_net, true);
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_nonnull(strstr(why, "no network"));
	ck_assert_ptr_null(rt_policy_check(RUNG_ISO_CONTAINER, &code_net, true));
	/* run_code with persistence is not "run_code only". */
	ck_assert_ptr_nonnull(rt_policy_check(RUNG_ISO_PROCESS, &code_fs, true));
	ck_assert_ptr_null(rt_policy_check(RUNG_ISO_CONTAINER, &code_fs, true));
	ck_assert_ptr_nonnull(rt_policy_check(RUNG_ISO_PROCESS, &cb, true));
	ck_assert_ptr_null(rt_policy_check(RUNG_ISO_CONTAINER, &cb, true));
	ck_assert_ptr_null(rt_policy_check(RUNG_ISO_VM, &cb, true));

	rung_spec_release(&exec);
	rung_spec_release(&install);
	rung_spec_release(&code);
	rung_spec_release(&code_net);
	rung_spec_release(&code_fs);
	rung_spec_release(&cb);
}
END_TEST

static struct rung_router *router(bool deployed, const char *agent, char **dir)
{
	*dir = rung_test_tmpdir("policy");
	ck_assert_ptr_nonnull(*dir);
	char ap[4096];
	snprintf(ap, sizeof(ap), "%s/rung-agent", rung_test_build_dir());
	struct rung_router_opts o = {
	    .state_dir = *dir, .deployed = deployed, .agent_path = agent ? agent : ap};
	rung_test_router_env(&o);
	struct rung_router *r = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rung_router_new(&o, &r, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(rung_router_state_dir(r), *dir);
	return r;
}

static void router_done(struct rung_router *r, char *dir)
{
	struct rung_err err = {0};
	rung_router_free(r);
	rung_rm_rf(dir, &err);
	free(dir);
}

static void pick_fails(struct rung_router *r, struct rung_spec *s, const char *n1, const char *n2)
{
	enum rung_isolation iso = RUNG_ISO__COUNT;
	struct rung_err err = {0};
	ck_assert_int_eq(rung_router_pick(r, s, &iso, &err), -ENOTSUP);
	ck_assert_msg(strstr(err.msg, n1), "'%s' lacks '%s'", err.msg, n1);
	ck_assert_msg(!n2 || strstr(err.msg, n2), "'%s' lacks '%s'", err.msg, n2);
	ck_assert_int_eq(iso, RUNG_ISO__COUNT); /* nothing picked */
}

/* Is the backend for iso usable on this host (its own answer)? */
static bool backend_up(struct rung_router *r, enum rung_isolation iso)
{
	const struct rt_backend_ops *b = rt_backend_get(iso);
	struct rung_err e = {0};
	return b && b->available(r, &e);
}

/* iso if its backend is up, else fallback (RUNG_ISO__COUNT: none). */
static enum rung_isolation up_or(struct rung_router *r, enum rung_isolation iso,
				 enum rung_isolation fallback)
{
	if (backend_up(r, iso))
		return iso;
	return fallback < RUNG_ISO__COUNT && backend_up(r, fallback) ? fallback : RUNG_ISO__COUNT;
}

/* want < RUNG_ISO__COUNT: the pick is want. Else: ENOTSUP naming needle. */
static void expect_pick(struct rung_router *r, struct rung_spec *s, enum rung_isolation want,
			const char *needle)
{
	if (want == RUNG_ISO__COUNT) {
		pick_fails(r, s, needle, NULL);
		return;
	}
	enum rung_isolation iso = RUNG_ISO__COUNT;
	struct rung_err err = {0};
	ck_assert_msg(rung_router_pick(r, s, &iso, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(iso, want);
}

START_TEST(test_router_pick)
{
	char ap[4096];
	snprintf(ap, sizeof(ap), "%s/rung-agent", rung_test_build_dir());
	if (access(ap, X_OK) < 0)
		RUNG_SKIP("build/rung-agent is not built (make build/rung-agent)");
	char *dir;
	struct rung_router *r = router(false, NULL, &dir);
	struct rung_err err = {0};
	enum rung_isolation iso;
	/* The weakest backend that satisfies the spec: process. */
	struct rung_spec s = spec_of(RUNG_CAP_EXEC | RUNG_CAP_RUN_CODE | RUNG_CAP_FS_PERSIST, NULL);
	ck_assert_msg(rung_router_pick(r, &s, &iso, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(iso, RUNG_ISO_PROCESS);
	/* container / vm: picked when their backend is usable here, else a clear "not
	 * available" naming the rung (never a silent fall-back to process). */
	s.isolation = RUNG_ISO_CONTAINER;
	expect_pick(r, &s, up_or(r, RUNG_ISO_CONTAINER, RUNG_ISO_VM), "container: not available");
	s.isolation = RUNG_ISO_VM;
	expect_pick(r, &s, up_or(r, RUNG_ISO_VM, RUNG_ISO__COUNT), "vm: not available");
	s.isolation = RUNG_ISO_PROCESS;
	/* A capability process does not offer: the next rung that offers it, or a refusal. */
	s.requires = RUNG_CAP_INSTALL;
	expect_pick(r, &s, up_or(r, RUNG_ISO_CONTAINER, RUNG_ISO_VM),
		    "process: does not offer install");
	s.requires = RUNG_CAP_EXEC | RUNG_CAP_HOST_CALLBACKS; /* every rung offers it */
	ck_assert_msg(rung_router_pick(r, &s, &iso, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(iso, RUNG_ISO_PROCESS);
	/* An invalid spec is a validation error, not a pick. */
	s.requires = RUNG_CAP_EXEC;
	s.limits.pids = 1;
	ck_assert_int_eq(rung_router_pick(r, &s, &iso, &err), -ERANGE);
	ck_assert_ptr_nonnull(strstr(err.msg, "limits.pids"));
	rung_spec_release(&s);
	router_done(r, dir);

	/* Deployed: a shell-capable spec only on the vm rung. */
	r = router(true, NULL, &dir);
	enum rung_isolation vm = up_or(r, RUNG_ISO_VM, RUNG_ISO__COUNT);
	s = spec_of(RUNG_CAP_EXEC, NULL);
	expect_pick(r, &s, vm, "process (deployed)");
	if (vm == RUNG_ISO__COUNT)
		pick_fails(r, &s, "process (deployed)", "shell-capable");
	rung_spec_release(&s);
	s = spec_of(RUNG_CAP_INSTALL, NULL);
	expect_pick(r, &s, vm, "does not offer install");
	rung_spec_release(&s);
	s = spec_of(RUNG_CAP_RUN_CODE, NULL);
	ck_assert_msg(rung_router_pick(r, &s, &iso, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(iso, RUNG_ISO_PROCESS);
	rung_spec_release(&s);
	s = spec_of(RUNG_CAP_RUN_CODE, "pypi.org:443");
	enum rung_isolation c = up_or(r, RUNG_ISO_CONTAINER, vm);
	expect_pick(r, &s, c, "process (deployed)");
	if (c == RUNG_ISO__COUNT)
		pick_fails(r, &s, "process (deployed)", "no network");
	rung_spec_release(&s);
	/* Host callbacks reach the host: like network, never on a deployed process rung. */
	s = spec_of(RUNG_CAP_RUN_CODE | RUNG_CAP_HOST_CALLBACKS, NULL);
	expect_pick(r, &s, c, "process (deployed)");
	rung_spec_release(&s);
	/* rung_acquire applies the same refusal, before creating anything. */
	if (vm == RUNG_ISO__COUNT) {
		s = spec_of(RUNG_CAP_EXEC, NULL);
		struct rung_key key = {"s", "t", "a"};
		struct rung_sandbox *sb = NULL;
		bool created = true;
		ck_assert_int_eq(rung_acquire(r, &key, &s, &sb, &created, &err), -ENOTSUP);
		ck_assert_ptr_nonnull(strstr(err.msg, "shell-capable"));
		ck_assert_ptr_null(sb);
		size_t n = 99;
		struct rung_sandbox_info *v = NULL;
		ck_assert_int_eq(rung_list(r, NULL, NULL, &v, &n, &err), 0);
		ck_assert_uint_eq(n, 0);
		free(v);
		rung_spec_release(&s);
	}
	router_done(r, dir);

	/* No rung-agent binary: process is not available, and says why. */
	r = router(false, "/nonexistent/rung-agent", &dir);
	s = spec_of(RUNG_CAP_EXEC, NULL);
	pick_fails(r, &s, "process: not available", "/nonexistent/rung-agent");
	rung_spec_release(&s);
	router_done(r, dir);
}
END_TEST

START_TEST(test_router_new_errors)
{
	struct rung_router *r = NULL;
	struct rung_err err = {0};
	struct rung_router_opts o = {.state_dir = "relative/dir"};
	ck_assert_int_eq(rung_router_new(&o, &r, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "relative/dir"));
	ck_assert_ptr_null(r);
	rung_router_free(NULL);
}
END_TEST

/* The host settings: a program's main sets them by the RUNG_* name it read (the library reads
 * no environment); the router keeps copies, with the defaults filled in. */
/* A main's environment, for rung_router_opts_load: one pool, optionally one bad number. */
static bool fake_env_bad;
static char *fake_env(const char *name)
{
	if (!strcmp(name, "RUNG_NET_POOL"))
		return "10.7.0.0/16";
	if (fake_env_bad && !strcmp(name, "RUNG_VM_BOOT_TIMEOUT_MS"))
		return "soon";
	return NULL;
}

START_TEST(test_router_opts_env)
{
	struct rung_router_opts o = {0};
	struct rung_err err = {0};
	static const char *const vals[][2] = {
		{"RUNG_AGENT", "/a/agent"}, {"RUNG_VMM", "/a/vmm"}, {"RUNG_BIN", "/a/rung"},
		{"RUNG_VM_KERNEL", "/k"}, {"RUNG_VM_INITRD", "/i"}, {"RUNG_CGROUP_ROOT", "/cg"},
		{"RUNG_LOOP_CONTROL", "/lc"}, {"RUNG_UID_REGISTRY", "/reg"},
		{"RUNG_NET_POOL", "10.9.0.0/16"}, {"RUNG_DNS_UPSTREAM", "10.9.0.1:53"},
		{"RUNG_VM_BOOT_TIMEOUT_MS", "1234"}, {"RUNG_CLONE_INTO_CGROUP", "0"}};
	size_t known = 0;
	while (rung_router_env_names[known])
		known++;
	ck_assert_uint_eq(known, RUNG_ARRAY_SIZE(vals) + 1); /* and RUNG_STATE_DIR */
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(vals); i++)
		ck_assert_msg(rung_router_opts_set(&o, vals[i][0], vals[i][1], &err) == 0, "%s: %s",
			      vals[i][0], err.msg);
	ck_assert_str_eq(o.agent_path, "/a/agent");
	ck_assert_str_eq(o.vmm_path, "/a/vmm");
	ck_assert_str_eq(o.rung_path, "/a/rung");
	ck_assert_str_eq(o.vm_kernel, "/k");
	ck_assert_str_eq(o.vm_initrd, "/i");
	ck_assert_str_eq(o.cgroup_root, "/cg");
	ck_assert_str_eq(o.loop_control, "/lc");
	ck_assert_str_eq(o.uid_registry, "/reg");
	ck_assert_str_eq(o.net_pool, "10.9.0.0/16");
	ck_assert_str_eq(o.dns_upstream, "10.9.0.1:53");
	ck_assert_uint_eq(o.vm_boot_timeout_ms, 1234);
	ck_assert(o.no_clone_into_cgroup);
	ck_assert_int_eq(rung_router_opts_set(&o, "RUNG_CLONE_INTO_CGROUP", "1", &err), 0);
	ck_assert(!o.no_clone_into_cgroup);
	/* unset or empty: left as it is */
	ck_assert_int_eq(rung_router_opts_set(&o, "RUNG_CGROUP_ROOT", NULL, &err), 0);
	ck_assert_int_eq(rung_router_opts_set(&o, "RUNG_CGROUP_ROOT", "", &err), 0);
	ck_assert_str_eq(o.cgroup_root, "/cg");
	/* a bad value or an unknown name: -EINVAL naming the variable */
	ck_assert_int_eq(rung_router_opts_set(&o, "RUNG_VM_BOOT_TIMEOUT_MS", "0", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "RUNG_VM_BOOT_TIMEOUT_MS=0"));
	ck_assert_int_eq(rung_router_opts_set(&o, "RUNG_VM_BOOT_TIMEOUT_MS", "9x", &err), -EINVAL);
	ck_assert_uint_eq(o.vm_boot_timeout_ms, 1234);
	ck_assert_int_eq(rung_router_opts_set(&o, "RUNG_NOPE", "1", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "RUNG_NOPE"));
	/* every variable through a main's lookup: set where given, the bad one named */
	struct rung_router_opts l = {0};
	ck_assert_int_eq(rung_router_opts_load(&l, fake_env, &err), 0);
	ck_assert_str_eq(l.net_pool, "10.7.0.0/16");
	ck_assert_ptr_null(l.cgroup_root);
	fake_env_bad = true;
	ck_assert_int_eq(rung_router_opts_load(&l, fake_env, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "RUNG_VM_BOOT_TIMEOUT_MS"));
	fake_env_bad = false;

	/* the router: copies, defaults where unset; the environment is not consulted */
	char *dir = rung_test_tmpdir("ropts");
	ck_assert_ptr_nonnull(dir);
	setenv("RUNG_CGROUP_ROOT", "/from/the/env", 1);
	setenv("RUNG_LOOP_CONTROL", "/from/the/env", 1);
	struct rung_router_opts d = {.state_dir = dir, .cgroup_root = "/cg"};
	struct rung_router *r = NULL;
	ck_assert_msg(rung_router_new(&d, &r, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(r->cgroup_root, "/cg");
	ck_assert_str_eq(r->loop_control, "/dev/loop-control");
	ck_assert_str_eq(r->uid_registry, "/run/rung/uid-slots");
	ck_assert_str_eq(r->store.uid_registry, "/run/rung/uid-slots");
	ck_assert_uint_eq(r->vm_boot_timeout_ms, 60000);
	ck_assert_ptr_null(r->vm_kernel);
	ck_assert_ptr_null(r->net_pool);
	ck_assert_ptr_null(r->dns_upstream);
	ck_assert(!r->no_clone_into_cgroup);
	rung_router_free(r);
	o.state_dir = dir;
	ck_assert_msg(rung_router_new(&o, &r, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(r->agent_path, "/a/agent");
	ck_assert_str_eq(r->rung_path, "/a/rung");
	ck_assert_str_eq(r->loop_control, "/lc");
	ck_assert_str_eq(r->store.uid_registry, "/reg");
	ck_assert_str_eq(r->net_pool, "10.9.0.0/16");
	ck_assert_str_eq(r->dns_upstream, "10.9.0.1:53");
	ck_assert_uint_eq(r->vm_boot_timeout_ms, 1234);
	rung_router_free(r);
	unsetenv("RUNG_CGROUP_ROOT");
	unsetenv("RUNG_LOOP_CONTROL");
	rung_rm_rf(dir, &err);
	free(dir);
}
END_TEST

/* ---- mount plan ----------------------------------------------------------------------------- */

static const struct rung_mount *find_op(const struct rung_mount_plan *p, enum rung_mount_op op,
				      const char *dst)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->m[i].op == op && !strcmp(p->m[i].dst, dst))
			return &p->m[i];
	return NULL;
}

static void plan_bad(const char *work_dir, const char *needle)
{
	struct rt_root_params rp = {
	    .work_src = "/tmp/w", .work_dir = work_dir, .host_system = true};
	struct rung_mount_plan p;
	struct rung_err err = {0};
	ck_assert_msg(rt_root_plan(&rp, &p, &err) == -EINVAL, "work_dir %s accepted",
		      work_dir ? work_dir : "(null)");
	ck_assert_msg(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
	ck_assert_uint_eq(p.n, 0);
	ck_assert_ptr_null(p.m);
}

START_TEST(test_root_plan_work_dir)
{
	plan_bad(NULL, "work_dir");
	plan_bad("work", "work_dir");
	plan_bad("/", "work_dir");
	plan_bad("/work/../etc", "work_dir");
	static const char *const reserved[] = {"/proc", "/proc/x",  "/dev", "/dev/shm", "/sys",
					       "/etc",	"/etc/ssl", "/usr", "/usr/lib", "/tmp",
					       "/bin",	"/sbin",    "/lib", "/lib64"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(reserved); i++)
		plan_bad(reserved[i], "reserved");
	/* Only whole components are reserved. */
	struct rt_root_params rp = {
	    .work_src = "/tmp/w", .work_dir = "/procedures", .host_system = true};
	struct rung_mount_plan p;
	struct rung_err err = {0};
	ck_assert_msg(rt_root_plan(&rp, &p, &err) == 0, "%s", err.msg);
	ck_assert_ptr_nonnull(find_op(&p, RUNG_M_BIND_RW, "/procedures"));
	rung_mount_plan_release(&p);
	rung_mount_plan_release(&p);
}
END_TEST

START_TEST(test_root_plan_ops)
{
	struct rt_root_params rp = {.work_src = "/var/lib/rung/sandboxes/x/work",
				    .work_dir = "/src",
				    .hostname = "box",
				    .tmp_bytes = 1 << 20,
				    .host_system = true};
	struct rung_mount_plan p;
	struct rung_err err = {0};
	ck_assert_msg(rt_root_plan(&rp, &p, &err) == 0, "%s", err.msg);
	ck_assert_uint_gt(p.n, 10);
	/* A fresh tmpfs root comes first; everything else is built on it. */
	ck_assert_int_eq(p.m[0].op, RUNG_M_TMPFS);
	ck_assert_str_eq(p.m[0].dst, "/");
	/* Host system dirs, read-only, from the same path. */
	static const char *const sys[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(sys); i++) {
		const struct rung_mount *m = find_op(&p, RUNG_M_BIND_RO, sys[i]);
		ck_assert_msg(m != NULL, "no read-only bind of %s", sys[i]);
		ck_assert_str_eq(m->src, sys[i]);
	}
	ck_assert_ptr_nonnull(find_op(&p, RUNG_M_BIND_RO, "/etc/ld.so.cache"));
	ck_assert_ptr_nonnull(find_op(&p, RUNG_M_BIND_RO, "/etc/ssl/certs"));
	/* The work dir is the only read-write bind, from the store. */
	const struct rung_mount *w = find_op(&p, RUNG_M_BIND_RW, "/src");
	ck_assert_ptr_nonnull(w);
	ck_assert_str_eq(w->src, "/var/lib/rung/sandboxes/x/work");
	size_t rw = 0;
	for (size_t i = 0; i < p.n; i++) {
		if (p.m[i].op == RUNG_M_BIND_RW)
			rw++;
		if (p.m[i].op == RUNG_M_BIND_RO || p.m[i].op == RUNG_M_BIND_RW) {
			/* Never the host's secrets or state. */
			static const char *const never[] = {
			    "/etc/shadow", "/etc/gshadow", "/root", "/home", "/var",	   "/run",
			    "/sys",	   "/proc",	   "/",	    "/etc",  "/etc/passwd",
			    "/etc/pip.conf", "/etc/xdg", "/etc/profile", "/etc/bash.bashrc",
			    "/etc/ssl", "/etc/ssl/private"};
			for (size_t j = 0; j < RUNG_ARRAY_SIZE(never); j++)
				ck_assert_msg(strcmp(p.m[i].src, never[j]) != 0, "binds %s",
					      never[j]);
			ck_assert_msg(p.m[i].op == RUNG_M_BIND_RW || !strcmp(p.m[i].src, p.m[i].dst),
				      "read-only bind %s -> %s", p.m[i].src, p.m[i].dst);
		}
	}
	ck_assert_uint_eq(rw, 1);
	/* Synthesised /etc files: passwd with the work dir as root's home. */
	const struct rung_mount *pw = find_op(&p, RUNG_M_FILE, "/etc/passwd");
	ck_assert_ptr_nonnull(pw);
	ck_assert_ptr_nonnull(strstr(pw->src, "root:x:0:0:root:/src:/bin/sh"));
	ck_assert_ptr_nonnull(find_op(&p, RUNG_M_FILE, "/etc/group"));
	const struct rung_mount *h = find_op(&p, RUNG_M_FILE, "/etc/hostname");
	ck_assert_ptr_nonnull(h);
	ck_assert_str_eq(h->src, "box\n");
	ck_assert_ptr_nonnull(find_op(&p, RUNG_M_FILE, "/etc/hosts"));
	const struct rung_mount *rc = find_op(&p, RUNG_M_FILE, "/etc/resolv.conf");
	ck_assert_ptr_nonnull(rc);
	ck_assert_str_eq(rc->src, ""); /* no network: no resolver */
	const struct rung_mount *t = find_op(&p, RUNG_M_TMPFS, "/tmp");
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_nonnull(strstr(t->opts, "size=1048576"));
	ck_assert_ptr_nonnull(find_op(&p, RUNG_M_DEV, "/dev"));
	ck_assert_ptr_nonnull(find_op(&p, RUNG_M_PROC, "/proc"));
	rung_mount_plan_release(&p);

	/* work_late (the process rung: its disk is attached while the root is built): the work
	 * dir's bind is the last step, right after the one wait, and there is no other. */
	rp.work_late = true;
	ck_assert_msg(rt_root_plan(&rp, &p, &err) == 0, "%s", err.msg);
	ck_assert_uint_gt(p.n, 2);
	ck_assert_int_eq(p.m[p.n - 2].op, RUNG_M_WAIT);
	ck_assert_int_eq(p.m[p.n - 1].op, RUNG_M_BIND_RW);
	ck_assert_str_eq(p.m[p.n - 1].src, "/var/lib/rung/sandboxes/x/work");
	ck_assert_str_eq(p.m[p.n - 1].dst, "/src");
	for (size_t i = 0; i < p.n - 2; i++)
		ck_assert_msg(p.m[i].op != RUNG_M_WAIT && strcmp(p.m[i].dst, "/src"),
			      "step %zu (op %d) on %s before the wait", i, (int)p.m[i].op,
			      p.m[i].dst);
	rung_mount_plan_release(&p);
	rp.work_late = false;

	/* Without host_system: no host binds at all. */
	rp.host_system = false;
	ck_assert_msg(rt_root_plan(&rp, &p, &err) == 0, "%s", err.msg);
	for (size_t i = 0; i < p.n; i++)
		ck_assert_int_ne(p.m[i].op, RUNG_M_BIND_RO);
	rung_mount_plan_release(&p);

	/* container shape: an overlay root from the layers. */
	const char *const lowers[] = {"/l/top", "/l/bottom", NULL};
	struct rt_root_params op = {.work_src = "/w",
				    .work_dir = "/work",
				    .overlay_lowers = lowers,
				    .overlay_upper = "/u",
				    .overlay_work = "/ow"};
	ck_assert_msg(rt_root_plan(&op, &p, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(p.m[0].op, RUNG_M_OVERLAY);
	ck_assert_str_eq(p.m[0].opts, "lowerdir=/l/top:/l/bottom,upperdir=/u,workdir=/ow");
	ck_assert_ptr_nonnull(find_op(&p, RUNG_M_PROC, "/proc"));
	rung_mount_plan_release(&p);
}
END_TEST

Suite *runtime_policy_suite(void)
{
	Suite *s = suite_create("runtime_policy");
	TCase *tc = tcase_create("router");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_policy_table);
	tcase_add_test(tc, test_router_pick);
	tcase_add_test(tc, test_router_new_errors);
	tcase_add_test(tc, test_router_opts_env);
	suite_add_tcase(s, tc);
	tc = tcase_create("mounts");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_root_plan_work_dir);
	tcase_add_test(tc, test_root_plan_ops);
	suite_add_tcase(s, tc);
	return s;
}
