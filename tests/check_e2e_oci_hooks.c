/*
 * tests/check_e2e_oci_hooks.c: the spec's hooks through build/rung-oci on a busybox bundle.
 * Each of prestart, createRuntime, createContainer, startContainer, poststart and poststop
 * runs once, in that order, with its env, the state (id, status, pid, bundle, annotations) on
 * stdin, in the runtime's mount namespace or the container's; a failing create-time hook fails
 * create and leaves nothing; a failing startContainer hook fails start and stops the
 * container; a failing poststart hook is a warning and the next one still runs; a timeout
 * kills the hook; a malformed hook is refused naming the field.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "oci/oci.h"
#include "tests/lib/egress.h"
#include "tests/lib/oci.h"
#include "tests/lib/testutil.h"

struct env {
	char dir[PATH_MAX], bundle[PATH_MAX + 16], root[PATH_MAX + 16], out[PATH_MAX + 16];
	char bin[PATH_MAX];
	char stdout_[8192], stderr_[8192];
	const char *netns; /* the network namespace's path (NULL: a new one) */
};

static struct env *E;

static int oci(struct env *e, const char *const *args)
{
	return oci_test_run(e->bin, e->root, e->dir, NULL, args, e->stdout_, sizeof(e->stdout_),
			    e->stderr_, sizeof(e->stderr_));
}

#define OCI(e, ...) oci(e, (const char *const[]){__VA_ARGS__, NULL})

/* The text of out/name ("" when it does not exist). */
static const char *out_file(struct env *e, const char *name)
{
	static char buf[8192];
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/%s", e->out, name);
	char *d = NULL;
	size_t n = 0;
	struct rung_err err = {0};
	buf[0] = 0;
	if (rung_file_load(AT_FDCWD, p, sizeof(buf) - 1, &d, &n, &err) == 0)
		snprintf(buf, sizeof(buf), "%.*s", (int)n, d);
	free(d);
	return buf;
}

/* A busybox bundle whose program is args (JSON) and whose top-level "hooks" is hooks (JSON);
 * ann: more annotations ("" or ", \"key\": \"value\""). */
static void bundle_ann(struct env *e, const char *args, const char *hooks, const char *ann)
{
	char p[PATH_MAX * 2];
	struct rung_err err = {0};
	oci_test_busybox(e->bundle, (const char *const[]){"sh", "sleep", "cat", "echo", "readlink",
							   "true", NULL});
	char *cfg = NULL;
	ck_assert_int_gt(asprintf(&cfg,
		"{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\"},"
		" \"annotations\": {\"k\": \"v\"%s}, \"hooks\": %s,"
		" \"process\": {\"args\": %s, \"env\": [\"PATH=/bin\"], \"cwd\": \"/\","
		"  \"user\": {\"uid\": 0, \"gid\": 0}},"
		" \"mounts\": [{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"},"
		"  {\"destination\": \"/out\", \"source\": \"%s\", \"options\": [\"bind\"]}],"
		" \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"ipc\"},"
		"  {\"type\": \"mount\"}, {\"type\": \"network\"%s%s%s}, {\"type\": \"uts\"}],"
		"  \"cgroupsPath\": \"/rung-oci-hooks-test-%d\"}}",
		ann, hooks, args, e->out, e->netns ? ", \"path\": \"" : "",
		e->netns ? e->netns : "", e->netns ? "\"" : "", (int)getpid()), 0);
	snprintf(p, sizeof(p), "%s/config.json", e->bundle);
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, p, cfg, strlen(cfg), 0644, &err), 0);
	free(cfg);
}

static void bundle(struct env *e, const char *args, const char *hooks)
{
	bundle_ann(e, args, hooks, "");
}

/* One recording hook: its state on stdin into DIR/KIND.json, its mount and pid namespaces and
 * HOOKVAR into DIR/KIND.ns, its name appended to DIR/order (DIR: the host's out directory, or
 * /out for the hook that runs after the pivot). */
static char *recorder(const char *kind, const char *sh, const char *dir)
{
	char *h = NULL;
	ck_assert_int_gt(asprintf(&h,
		"{\"path\": \"%s\", \"args\": [\"sh\", \"-c\", \"cat > %s/%s.json;"
		" echo $(readlink /proc/self/ns/mnt) $(readlink /proc/self/ns/pid) $HOOKVAR"
		" > %s/%s.ns; echo %s >> %s/order\"],"
		" \"env\": [\"PATH=/bin:/usr/bin\", \"HOOKVAR=%s-env\"], \"timeout\": 30}",
		sh, dir, kind, dir, kind, kind, dir, kind), 0);
	return h;
}

static void ns_of(pid_t pid, const char *ns, char *buf, size_t n)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int)pid, ns);
	ssize_t r = readlink(p, buf, n - 1);
	ck_assert_int_gt(r, 0);
	buf[r] = 0;
}

/* No such process, or a zombie (its new parent reaps it when it does). */
static bool gone(pid_t pid) { return eg_gone(pid); }

static void check_state(struct env *e, const char *kind, const char *status, int pid)
{
	char f[64];
	snprintf(f, sizeof(f), "%s.json", kind);
	json_t *j = json_loads(out_file(e, f), 0, NULL);
	ck_assert_msg(j != NULL, "%s: no state on its stdin: '%s'", kind, out_file(e, f));
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "c1");
	ck_assert_str_eq(json_string_value(json_object_get(j, "status")), status);
	ck_assert_str_eq(json_string_value(json_object_get(j, "bundle")), e->bundle);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "pid")), pid);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "annotations"), "k")),
			 "v");
	json_decref(j);
}

static void check_ns(struct env *e, const char *kind, pid_t in)
{
	char f[64], want[256], mnt[64], pidns[64];
	snprintf(f, sizeof(f), "%s.ns", kind);
	ns_of(in, "mnt", mnt, sizeof(mnt));
	ns_of(in, "pid", pidns, sizeof(pidns));
	snprintf(want, sizeof(want), "%s %s %s-env\n", mnt, pidns, kind);
	ck_assert_str_eq(out_file(e, f), want);
}

START_TEST(test_all_hooks_in_order)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	char *h[6], hooks[16384];
	h[0] = recorder("prestart", "/bin/sh", e->out);
	h[1] = recorder("createRuntime", "/bin/sh", e->out);
	h[2] = recorder("createContainer", "/bin/sh", e->out); /* before the pivot: host paths */
	h[3] = recorder("startContainer", "/bin/sh", "/out");  /* the container's /bin/sh */
	h[4] = recorder("poststart", "/bin/sh", e->out);
	h[5] = recorder("poststop", "/bin/sh", e->out);
	snprintf(hooks, sizeof(hooks), "{\"prestart\": [%s], \"createRuntime\": [%s],"
		 " \"createContainer\": [%s], \"startContainer\": [%s], \"poststart\": [%s],"
		 " \"poststop\": [%s]}", h[0], h[1], h[2], h[3], h[4], h[5]);
	for (int i = 0; i < 6; i++)
		free(h[i]);
	bundle(e, "[\"sleep\", \"100\"]", hooks);
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c1") == 0, "create: %s", e->stderr_);
	ck_assert_str_eq(out_file(e, "order"), "prestart\ncreateRuntime\ncreateContainer\n");
	ck_assert_int_eq(OCI(e, "state", "c1"), 0);
	json_t *st = json_loads(e->stdout_, 0, NULL);
	pid_t pid = (pid_t)json_integer_value(json_object_get(st, "pid"));
	json_decref(st);
	ck_assert_int_gt(pid, 0);
	check_state(e, "prestart", "creating", pid);
	check_state(e, "createRuntime", "creating", pid);
	check_state(e, "createContainer", "creating", pid);
	check_ns(e, "prestart", getpid()); /* the runtime's namespaces */
	check_ns(e, "createRuntime", getpid());
	check_ns(e, "createContainer", pid); /* the container's */

	ck_assert_msg(OCI(e, "start", "c1") == 0, "start: %s", e->stderr_);
	ck_assert_str_eq(out_file(e, "order"), "prestart\ncreateRuntime\ncreateContainer\n"
					       "startContainer\npoststart\n");
	check_state(e, "startContainer", "created", pid);
	check_state(e, "poststart", "running", pid);
	check_ns(e, "startContainer", pid);
	check_ns(e, "poststart", getpid());

	ck_assert_msg(OCI(e, "delete", "--force", "c1") == 0, "delete: %s", e->stderr_);
	ck_assert_str_eq(out_file(e, "order"), "prestart\ncreateRuntime\ncreateContainer\n"
					       "startContainer\npoststart\npoststop\n");
	check_state(e, "poststop", "stopped", 0);
	check_ns(e, "poststop", getpid());
	ck_assert(gone(pid)); /* deleted before poststop ran */
}
END_TEST

static const char fail_hook[] = "{\"path\": \"/bin/sh\", \"args\": [\"sh\", \"-c\","
				" \"echo boom-from-hook >&2; exit 3\"]}";

START_TEST(test_create_hook_fails)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	char hooks[8192], *post = recorder("poststop", "/bin/sh", e->out),
			  *cc = recorder("createContainer", "/bin/sh", e->out);
	snprintf(hooks, sizeof(hooks), "{\"createRuntime\": [%s], \"createContainer\": [%s],"
		 " \"poststop\": [%s]}", fail_hook, cc, post);
	free(post);
	free(cc);
	bundle(e, "[\"true\"]", hooks);
	int mounts0 = rung_test_count_mounts();
	ck_assert_int_eq(OCI(e, "create", "--bundle", e->bundle, "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "hooks.createRuntime[0] /bin/sh: exit status 3") &&
		      strstr(e->stderr_, "boom-from-hook"), "%s", e->stderr_);
	ck_assert_str_eq(out_file(e, "order"), ""); /* createContainer never ran */
	ck_assert_int_eq(OCI(e, "state", "c1"), 1); /* nothing left */
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/c1", e->root);
	ck_assert_int_eq(access(p, F_OK), -1);
	snprintf(p, sizeof(p), "/sys/fs/cgroup/pids/rung-oci-hooks-test-%d", (int)getpid());
	if (access("/sys/fs/cgroup/pids", F_OK) != 0)
		snprintf(p, sizeof(p), "/sys/fs/cgroup/rung-oci-hooks-test-%d", (int)getpid());
	ck_assert_int_eq(access(p, F_OK), -1);
	ck_assert_int_eq(rung_test_count_mounts(), mounts0);
}
END_TEST

START_TEST(test_start_hook_fails)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	char hooks[8192], *post = recorder("poststop", "/bin/sh", e->out);
	snprintf(hooks, sizeof(hooks), "{\"startContainer\": [%s], \"poststop\": [%s]}",
		 "{\"path\": \"/bin/sh\", \"args\": [\"sh\", \"-c\", \"echo no >&2; exit 4\"]}",
		 post);
	free(post);
	bundle(e, "[\"sh\", \"-c\", \"echo ran > /out/program\"]", hooks);
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c1") == 0, "create: %s", e->stderr_);
	ck_assert_int_eq(OCI(e, "start", "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "hooks.startContainer[0] /bin/sh: exit status 4: no"),
		      "%s", e->stderr_);
	for (int i = 0; i < 250; i++) { /* the spec: the container is stopped */
		ck_assert_int_eq(OCI(e, "state", "c1"), 0);
		if (strstr(e->stdout_, "\"stopped\""))
			break;
		usleep(20000);
	}
	ck_assert_msg(strstr(e->stdout_, "\"stopped\""), "%s", e->stdout_);
	ck_assert_str_eq(out_file(e, "program"), ""); /* the program never ran */
	ck_assert_int_eq(OCI(e, "delete", "c1"), 0);
	ck_assert_str_eq(out_file(e, "order"), "poststop\n");
}
END_TEST

START_TEST(test_poststart_fails_warns)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	char hooks[8192], *ok = recorder("poststart", "/bin/sh", e->out);
	snprintf(hooks, sizeof(hooks), "{\"poststart\": [%s, %s], \"poststop\": [%s]}", fail_hook,
		 ok, fail_hook);
	free(ok);
	bundle(e, "[\"sleep\", \"100\"]", hooks);
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c1") == 0, "create: %s", e->stderr_);
	ck_assert_msg(OCI(e, "start", "c1") == 0, "start: %s", e->stderr_);
	ck_assert_msg(strstr(e->stderr_, "warning: hooks.poststart[0] /bin/sh: exit status 3"),
		      "%s", e->stderr_);
	ck_assert_str_eq(out_file(e, "order"), "poststart\n"); /* the next one ran */
	ck_assert_int_eq(OCI(e, "delete", "--force", "c1"), 0);
	ck_assert_msg(strstr(e->stderr_, "warning: hooks.poststop[0]"), "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "state", "c1"), 1); /* deleted all the same */
}
END_TEST

START_TEST(test_timeout)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	char hooks[8192];
	snprintf(hooks, sizeof(hooks), "{\"prestart\": [{\"path\": \"/bin/sh\", \"args\": [\"sh\","
		 " \"-c\", \"echo $$ > %s/hookpid; exec sleep 60\"], \"timeout\": 1}]}", e->out);
	bundle(e, "[\"true\"]", hooks);
	time_t t0 = time(NULL);
	ck_assert_int_eq(OCI(e, "create", "--bundle", e->bundle, "c1"), 1);
	ck_assert_int_lt(time(NULL) - t0, 20);
	ck_assert_msg(strstr(e->stderr_, "hooks.prestart[0] /bin/sh: killed after its timeout of "
			     "1 s"), "%s", e->stderr_);
	int hp = atoi(out_file(e, "hookpid"));
	ck_assert_int_gt(hp, 0);
	ck_assert(gone(hp)); /* killed */
	ck_assert_int_eq(OCI(e, "state", "c1"), 1);
}
END_TEST

START_TEST(test_malformed_refused)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	static const struct { const char *hooks, *field; } bad[] = {
		{"{\"prestart\": [{\"path\": \"bin/sh\"}]}", "hooks.prestart[0].path"},
		{"{\"poststop\": [{\"path\": \"/bin/true\", \"timeout\": 0}]}",
		 "hooks.poststop[0].timeout"},
		{"{\"createRuntime\": [{\"path\": \"/bin/true\", \"args\": [1]}]}",
		 "hooks.createRuntime[0].args[0]"},
		{"{\"startContainer\": {}}", "hooks.startContainer: want an array"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		bundle(e, "[\"true\"]", bad[i].hooks);
		ck_assert_int_eq(OCI(e, "create", "--bundle", e->bundle, "c1"), 1);
		ck_assert_msg(strstr(e->stderr_, bad[i].field), "%s: %s", bad[i].field, e->stderr_);
		ck_assert_int_eq(OCI(e, "state", "c1"), 1);
	}
}
END_TEST

/* Refused, naming it, rather than run unrestricted (docs/oci.md): without a network namespace
 * path (a new one has no route out), with a bad entry, and in the host's network namespace
 * (applied: e2e_oci_egress). */
START_TEST(test_egress_annotation_refused)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	static const char *const ann[][3] = {
		{"example.org", NULL, "needs linux.namespaces[network].path"},
		{"example.org, bad_name!", NULL, "bad_name!"},
		{"example.org", "/proc/self/ns/net", "is the host's network namespace"},
	};
	for (size_t i = 0; i < sizeof(ann) / sizeof(ann[0]); i++) {
		char a[256];
		e->netns = ann[i][1];
		snprintf(a, sizeof(a), ", \"dev.rung.egress-allow\": \"%s\"", ann[i][0]);
		bundle_ann(e, "[\"true\"]", "{}", a);
		ck_assert_int_eq(OCI(e, "create", "--bundle", e->bundle, "c1"), 1);
		ck_assert_msg(strstr(e->stderr_, "annotations.dev.rung.egress-allow") &&
			      strstr(e->stderr_, ann[i][2]), "%s: %s", ann[i][2], e->stderr_);
		ck_assert_int_eq(OCI(e, "state", "c1"), 1);
	}
	e->netns = NULL;
	bundle_ann(e, "[\"true\"]", "{}", ", \"dev.rung.other\": \"x\""); /* the rest are data */
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c1") == 0, "%s", e->stderr_);
}
END_TEST

static void setup_env(void)
{
	struct env *e = E = calloc(1, sizeof(*e));
	char *d = rung_test_tmpdir("ocihooks");
	int w = snprintf(e->bundle, sizeof(e->bundle), "%s/bundle", d) +
		snprintf(e->root, sizeof(e->root), "%s/root", d) +
		snprintf(e->out, sizeof(e->out), "%s/out", d) +
		snprintf(e->bin, sizeof(e->bin), "%s/rung-oci", rung_test_build_dir()) +
		snprintf(e->dir, sizeof(e->dir), "%s", d);
	free(d);
	ck_assert_int_gt(w, 0);
	mkdir(e->bundle, 0755);
	ck_assert_msg(access(e->bin, X_OK) == 0, "%s: build it first (make all)", e->bin);
}

/* each test: an empty out directory, writable by the container's unprivileged host uid */
static void setup_out(void)
{
	struct rung_err err = {0};
	rung_rm_rf(E->out, &err);
	mkdir(E->out, 0777);
	chmod(E->out, 0777);
	char p[PATH_MAX * 2]; /* every hook appends to it: the host's root and the container's */
	snprintf(p, sizeof(p), "%s/order", E->out);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
	ck_assert_int_ge(fd, 0);
	fchmod(fd, 0666);
	close(fd);
}

static void teardown_test(void)
{
	if (geteuid() == 0)
		OCI(E, "delete", "--force", "c1");
}

static void teardown_env(void)
{
	teardown_test(); /* a failed test's container too */
	struct rung_err err = {0};
	rung_rm_rf(E->dir, &err);
	free(E);
	E = NULL;
}

Suite *e2e_oci_hooks_suite(void)
{
	Suite *s = suite_create("e2e_oci_hooks");
	TCase *tc = tcase_create("hooks");
	tcase_add_unchecked_fixture(tc, setup_env, teardown_env);
	tcase_add_checked_fixture(tc, setup_out, teardown_test);
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_all_hooks_in_order);
	tcase_add_test(tc, test_create_hook_fails);
	tcase_add_test(tc, test_start_hook_fails);
	tcase_add_test(tc, test_poststart_fails_warns);
	tcase_add_test(tc, test_timeout);
	tcase_add_test(tc, test_malformed_refused);
	tcase_add_test(tc, test_egress_annotation_refused);
	suite_add_tcase(s, tc);
	return s;
}
