/*
 * tests/check_e2e_oci_pod.c: a Kubernetes pod as containerd's CRI makes it, on busybox bundles:
 * a "pause" (sandbox) container with its own namespaces and the pod's hostname, then an "app"
 * container whose linux.namespaces give ipc, uts and network as /proc/<pause pid>/ns/...: it
 * starts in the pause's namespaces (the pod's hostname, a SysV queue made there, the pod's
 * POSIX queues on its /dev/mqueue, which the runtime makes: oci/nsjoin.c), both delete
 * with nothing left; its prestart and createRuntime hooks run in the runtime's namespaces, not the
 * pod's. Joining the host's namespace, one of another type, one the host's user
 * namespace owns, or a pid namespace by path is refused, naming the field (docs/oci.md).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mqueue.h>
#include <sys/msg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "common/util.h"
#include "tests/lib/oci.h"
#include "tests/lib/testutil.h"

#define QKEY 0x52554e47 /* the pod's SysV message queue */

struct pod {
	char dir[PATH_MAX], root[PATH_MAX + 8], out[PATH_MAX + 8], bin[PATH_MAX];
	char sb[PATH_MAX + 8], app[PATH_MAX + 8]; /* the two bundles */
	char stdout_[8192], stderr_[8192];
};

static struct pod *P;

static void setup_pod(void)
{
	struct pod *p = P = calloc(1, sizeof(*p));
	char *d = rung_test_tmpdir("ocipod");
	struct {
		char *to;
		const char *name;
	} under[] = {{p->root, "root"}, {p->out, "out"}, {p->sb, "pause"}, {p->app, "app"}};
	for (size_t i = 0; i < sizeof(under) / sizeof(under[0]); i++)
		snprintf(under[i].to, PATH_MAX + 8, "%s/%s", d, under[i].name);
	snprintf(p->dir, sizeof(p->dir), "%s", d);
	free(d);
	snprintf(p->bin, sizeof(p->bin), "%s/rung-oci", rung_test_build_dir());
	mkdir(p->out, 0777);
	chmod(p->out, 0777); /* the containers' roots are unprivileged host uids */
	static const char *const applets[] = {"sh", "sleep", "cat", "hostname", "ls", NULL};
	oci_test_busybox(p->sb, applets);
	oci_test_busybox(p->app, applets);
	ck_assert_msg(access(p->bin, X_OK) == 0, "%s: build it first (make all)", p->bin);
}

static int oci(struct pod *p, const char *const *args)
{
	return oci_test_run(p->bin, p->root, p->dir, NULL, args, p->stdout_, sizeof(p->stdout_),
			    p->stderr_, sizeof(p->stderr_));
}

#define OCI(p, ...) oci(p, (const char *const[]){__VA_ARGS__, NULL})

/* Before each test: no container of an earlier, failed one left under these ids. */
static void clean_ids(void)
{
	if (geteuid() == 0) {
		OCI(P, "delete", "--force", "app");
		OCI(P, "delete", "--force", "pause");
	}
}

static void teardown_pod(void)
{
	if (geteuid() == 0) {
		OCI(P, "delete", "--force", "app");
		OCI(P, "delete", "--force", "pause");
	}
	struct rung_err err = {0};
	rung_rm_rf(P->dir, &err);
	free(P);
	P = NULL;
}

/* bundle/config.json: `sh -c script`, /proc, /dev (a tmpfs), /dev/mqueue and /out mounted,
 * linux.namespaces ns (JSON), hostname_json (", \"hostname\": ..." or ""). */
static void config(struct pod *p, const char *bundle, const char *script, const char *ns,
		   const char *hostname_json)
{
	json_t *sc = json_string(script);
	char *script_json = json_dumps(sc, JSON_ENCODE_ANY);
	json_decref(sc);
	char path[PATH_MAX * 2], cfg[8192];
	int n = snprintf(cfg, sizeof(cfg),
		 "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\"}%s,"
		 " \"process\": {\"args\": [\"sh\", \"-c\", %s], \"env\": [\"PATH=/bin\"],"
		 "  \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0}},"
		 " \"mounts\": [{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"},"
		 "  {\"destination\": \"/dev\", \"type\": \"tmpfs\", \"source\": \"tmpfs\"},"
		 "  {\"destination\": \"/dev/mqueue\", \"type\": \"mqueue\", \"source\": \"mqueue\","
		 "   \"options\": [\"nosuid\", \"noexec\", \"nodev\"]},"
		 "  {\"destination\": \"/out\", \"source\": \"%s\", \"options\": [\"bind\"]}],"
		 " \"linux\": {\"namespaces\": %s}}",
		 hostname_json, script_json, p->out, ns);
	free(script_json);
	ck_assert_int_lt(n, (int)sizeof(cfg));
	snprintf(path, sizeof(path), "%s/config.json", bundle);
	struct rung_err err = {0};
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, path, cfg, (size_t)n, 0644, &err), 0);
}

/* The app's namespaces: [0] pid (first, when non-NULL: a pid entry and ", "), [1] mount, and
 * the pause's [2] ipc, [3] uts and [4] network by path as the CRI gives them, the ipc and uts
 * paths replaced by ipc_path and uts_path when non-NULL. */
static void app_ns(char *ns, size_t n, int sb, const char *first, const char *ipc_path,
		   const char *uts_path)
{
	char ipc[64], uts[64];
	snprintf(ipc, sizeof(ipc), "/proc/%d/ns/ipc", sb);
	snprintf(uts, sizeof(uts), "/proc/%d/ns/uts", sb);
	snprintf(ns, n, "[%s{\"type\": \"mount\"}, {\"type\": \"ipc\", \"path\": \"%s\"},"
		 " {\"type\": \"uts\", \"path\": \"%s\"},"
		 " {\"type\": \"network\", \"path\": \"/proc/%d/ns/net\"}]",
		 first ? first : "{\"type\": \"pid\"}, ", ipc_path ? ipc_path : ipc,
		 uts_path ? uts_path : uts, sb);
}

static const char pause_ns[] = "[{\"type\": \"pid\"}, {\"type\": \"ipc\"}, {\"type\": \"mount\"},"
			       " {\"type\": \"network\"}, {\"type\": \"uts\"}]";

static int state_pid(struct pod *p, const char *id, const char *want)
{
	json_t *j = NULL;
	for (int i = 0; i < 500; i++) {
		ck_assert_msg(OCI(p, "state", id) == 0, "state %s: %s", id, p->stderr_);
		json_decref(j);
		j = json_loads(p->stdout_, 0, NULL);
		ck_assert_ptr_nonnull(j);
		if (strcmp(json_string_value(json_object_get(j, "status")), want) == 0)
			break;
		usleep(20000);
	}
	ck_assert_str_eq(json_string_value(json_object_get(j, "status")), want);
	int pid = (int)json_integer_value(json_object_get(j, "pid"));
	json_decref(j);
	return pid;
}

static bool same_ns(int a, int b, const char *type)
{
	char pa[64], pb[64];
	struct stat sa, so;
	snprintf(pa, sizeof(pa), "/proc/%d/ns/%s", a, type);
	snprintf(pb, sizeof(pb), "/proc/%d/ns/%s", b, type);
	return stat(pa, &sa) == 0 && stat(pb, &so) == 0 && sa.st_ino == so.st_ino &&
	       sa.st_dev == so.st_dev;
}

/* A SysV message queue with QKEY and a POSIX one, /rungpod, made in pid's ipc namespace by its
 * root (a child of the test joins its user and ipc namespaces: the pod's mqueue filesystem has
 * no inode owner for a host uid the pause's user namespace does not map). */
static void queue_in(int pid)
{
	pid_t c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		char ns[64];
		snprintf(ns, sizeof(ns), "/proc/%d/ns/user", pid);
		int user = open(ns, O_RDONLY | O_CLOEXEC);
		snprintf(ns, sizeof(ns), "/proc/%d/ns/ipc", pid);
		int fd = open(ns, O_RDONLY | O_CLOEXEC);
		if (user < 0 || fd < 0 || setns(user, CLONE_NEWUSER) < 0 || setresgid(0, 0, 0) < 0 ||
		    setresuid(0, 0, 0) < 0 || setns(fd, CLONE_NEWIPC) < 0)
			_exit(1);
		if (msgget(QKEY, IPC_CREAT | IPC_EXCL | 0666) < 0)
			_exit(2);
		_exit(mq_open("/rungpod", O_CREAT | O_EXCL | O_RDWR, 0644, NULL) < 0 ? 100 + errno
										       : 0);
	}
	int st = 0;
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "no queues in the pause's ipc namespace: %d (100 + errno: mq_open)",
		      WEXITSTATUS(st));
}

static char *out_file(struct pod *p, const char *name)
{
	char path[PATH_MAX * 2];
	snprintf(path, sizeof(path), "%s/%s", p->out, name);
	char *text = NULL;
	size_t n = 0;
	struct rung_err err = {0};
	ck_assert_msg(rung_file_load(AT_FDCWD, path, 1 << 16, &text, &n, &err) == 0, "%s: %s", path,
		      err.msg);
	return text;
}

/* The app's prestart and createRuntime hooks record their network, ipc and uts namespaces
 * into out/KIND.ns: they run in the runtime's namespaces (the OCI spec's "runtime namespace",
 * runc's), not in the pod's ones rung-oci joined to clone the init. */
static void add_ns_hooks(struct pod *p)
{
	char cfg[PATH_MAX * 2];
	snprintf(cfg, sizeof(cfg), "%s/config.json", p->app);
	json_t *j = json_load_file(cfg, 0, NULL), *hooks = json_object();
	ck_assert_ptr_nonnull(j);
	static const char *const kinds[] = {"prestart", "createRuntime"};
	for (size_t i = 0; i < 2; i++) {
		char *sh = NULL;
		ck_assert_int_gt(asprintf(&sh, "for n in net ipc uts; do readlink /proc/self/ns/$n;"
					  " done > %s/%s.ns", p->out, kinds[i]), 0);
		json_object_set_new(hooks, kinds[i],
				    json_pack("[{s:s, s:[s,s,s]}]", "path", "/bin/sh", "args",
					      "sh", "-c", sh));
		free(sh);
	}
	json_object_set_new(j, "hooks", hooks);
	ck_assert_int_eq(json_dump_file(j, cfg, 0), 0);
	json_decref(j);
}

static void check_ns_hooks(struct pod *p)
{
	char want[512] = "";
	static const char *const types[] = {"net", "ipc", "uts"};
	for (size_t i = 0, at = 0; i < 3; i++) {
		char l[64], t[128];
		snprintf(l, sizeof(l), "/proc/%d/ns/%s", (int)getpid(), types[i]);
		ssize_t n = readlink(l, t, sizeof(t) - 1);
		ck_assert_int_gt(n, 0);
		at += (size_t)snprintf(want + at, sizeof(want) - at, "%.*s\n", (int)n, t);
	}
	static const char *const kinds[] = {"prestart.ns", "createRuntime.ns"};
	for (size_t i = 0; i < 2; i++) {
		char *got = out_file(p, kinds[i]);
		ck_assert_msg(!strcmp(got, want), "%s: %s (the runtime's: %s)", kinds[i], got, want);
		free(got);
	}
}

START_TEST(test_pod_shares_ipc_uts)
{
	RUNG_REQUIRE_ROOT();
	struct pod *p = P;
	int mounts0 = rung_test_count_mounts();
	config(p, p->sb, "exec sleep 100", pause_ns, ", \"hostname\": \"podhost\"");
	ck_assert_msg(OCI(p, "create", "--bundle", p->sb, "pause") == 0, "%s", p->stderr_);
	ck_assert_int_eq(OCI(p, "start", "pause"), 0);
	int sb = state_pid(p, "pause", "running");
	queue_in(sb);
	char ns[1024];
	app_ns(ns, sizeof(ns), sb, NULL, NULL, NULL);
	config(p, p->app, "hostname > /out/host; cat /proc/sysvipc/msg > /out/msg; "
		  "ls /dev/mqueue > /out/mq", ns, "");
	add_ns_hooks(p);
	ck_assert_msg(OCI(p, "create", "--bundle", p->app, "app") == 0, "%s", p->stderr_);
	int app = state_pid(p, "app", "created");
	check_ns_hooks(p);
	ck_assert(same_ns(app, sb, "ipc"));
	ck_assert(same_ns(app, sb, "uts"));
	ck_assert(same_ns(app, sb, "net"));
	ck_assert(!same_ns(app, sb, "pid"));
	ck_assert(!same_ns(app, sb, "user")); /* still its own user namespace */
	ck_assert_int_eq(OCI(p, "start", "app"), 0);
	state_pid(p, "app", "stopped");
	char *host = out_file(p, "host"), *msg = out_file(p, "msg"), *mq = out_file(p, "mq");
	ck_assert_str_eq(host, "podhost\n");
	ck_assert_str_eq(mq, "rungpod\n"); /* /dev/mqueue is the pod's (nsjoin.c, mount.c) */
	free(mq);
	char key[32];
	snprintf(key, sizeof(key), "%d ", QKEY);
	ck_assert_msg(strstr(msg, key), "the app's /proc/sysvipc/msg has no queue %d: %s", QKEY, msg);
	free(host);
	free(msg);
	/* the queue is the pod's, not the host's */
	ck_assert_int_lt(msgget(QKEY, 0), 0);
	ck_assert_int_eq(OCI(p, "delete", "app"), 0);
	ck_assert_int_eq(OCI(p, "kill", "pause", "KILL"), 0);
	state_pid(p, "pause", "stopped");
	ck_assert_int_eq(OCI(p, "delete", "pause"), 0);
	for (int i = 0; i < 250 && (kill(sb, 0) == 0 || kill(app, 0) == 0); i++)
		usleep(20000);
	ck_assert_int_ne(kill(sb, 0), 0);
	ck_assert_int_ne(kill(app, 0), 0);
	ck_assert_int_eq(rung_test_count_entries(p->root), 0);
	ck_assert_int_eq(rung_test_count_mounts(), mounts0);
}
END_TEST

/* create app with namespaces ns: refused (exit 1) naming want, nothing left of it. */
static void refused(struct pod *p, const char *ns, const char *hostname_json, const char *want,
		    const char *why)
{
	config(p, p->app, "true", ns, hostname_json);
	ck_assert_int_eq(OCI(p, "create", "--bundle", p->app, "app"), 1);
	ck_assert_msg(strstr(p->stderr_, want) && strstr(p->stderr_, why), "want '%s' '%s': %s",
		      want, why, p->stderr_);
	ck_assert_int_eq(OCI(p, "state", "app"), 1);
	char path[PATH_MAX * 2];
	snprintf(path, sizeof(path), "%s/app", p->root);
	ck_assert_int_ne(access(path, F_OK), 0);
}

START_TEST(test_pod_refusals)
{
	RUNG_REQUIRE_ROOT();
	struct pod *p = P;
	config(p, p->sb, "exec sleep 100", pause_ns, ", \"hostname\": \"podhost\"");
	ck_assert_msg(OCI(p, "create", "--bundle", p->sb, "pause") == 0, "%s", p->stderr_);
	int sb = state_pid(p, "pause", "created");
	char ns[1024], path[64];
	/* the host's ipc and uts namespaces (this test's: rung-oci's own; pid 1's may not be open
	 * to a sandboxed CI's root) */
	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", (int)getpid());
	app_ns(ns, sizeof(ns), sb, NULL, path, NULL);
	refused(p, ns, "", "linux.namespaces[2].path", "the host's ipc namespace");
	snprintf(path, sizeof(path), "/proc/%d/ns/uts", (int)getpid());
	app_ns(ns, sizeof(ns), sb, NULL, NULL, path);
	refused(p, ns, "", "linux.namespaces[3].path", "the host's uts namespace");
	/* a network namespace given as the ipc one */
	snprintf(path, sizeof(path), "/proc/%d/ns/net", sb);
	app_ns(ns, sizeof(ns), sb, NULL, path, NULL);
	refused(p, ns, "", "linux.namespaces[2].path", "is not an ipc namespace");
	/* an ipc namespace made outside any container (the host's user namespace owns it) */
	int holder = oci_test_ns_holder(CLONE_NEWIPC);
	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", holder);
	app_ns(ns, sizeof(ns), sb, NULL, path, NULL);
	refused(p, ns, "", "linux.namespaces[2].path", "not owned by a container's user namespace");
	oci_test_ns_holder_end(holder);
	/* the pid namespace by path (a shareProcessNamespace pod) is still refused */
	char pid_ns[128];
	snprintf(pid_ns, sizeof(pid_ns), "{\"type\": \"pid\", \"path\": \"/proc/%d/ns/pid\"}, ",
		 sb);
	app_ns(ns, sizeof(ns), sb, pid_ns, NULL, NULL);
	refused(p, ns, "", "linux.namespaces[0].path", "joining an existing pid namespace is refused");
	/* a hostname of its own would rename the whole pod; the pod's own is accepted */
	app_ns(ns, sizeof(ns), sb, NULL, NULL, NULL);
	refused(p, ns, ", \"hostname\": \"other\"", "hostname: 'other'", "the pod's is its sandbox's");
	config(p, p->app, "true", ns, ", \"hostname\": \"podhost\"");
	ck_assert_msg(OCI(p, "create", "--bundle", p->app, "app") == 0, "%s", p->stderr_);
	ck_assert_int_eq(OCI(p, "delete", "app"), 0);
	/* a pod's sysctl is its sandbox's: an app's in the joined ipc namespace is refused */
	config(p, p->app, "true", ns, "");
	char cfg[PATH_MAX * 2];
	snprintf(cfg, sizeof(cfg), "%s/config.json", p->app);
	json_t *j = json_load_file(cfg, 0, NULL);
	ck_assert_ptr_nonnull(j);
	json_object_set_new(json_object_get(j, "linux"), "sysctl",
			    json_pack("{s:s}", "kernel.msgmax", "4096"));
	ck_assert_int_eq(json_dump_file(j, cfg, 0), 0);
	json_decref(j);
	ck_assert_int_eq(OCI(p, "create", "--bundle", p->app, "app"), 1);
	ck_assert_msg(strstr(p->stderr_, "linux.sysctl.kernel.msgmax"), "%s", p->stderr_);
	ck_assert_int_eq(OCI(p, "delete", "--force", "pause"), 0);
	ck_assert_int_eq(rung_test_count_entries(p->root), 0);
}
END_TEST

Suite *e2e_oci_pod_suite(void)
{
	Suite *s = suite_create("e2e_oci_pod");
	TCase *tc = tcase_create("pod");
	tcase_add_unchecked_fixture(tc, setup_pod, teardown_pod);
	tcase_add_checked_fixture(tc, clean_ids, NULL);
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_pod_shares_ipc_uts);
	tcase_add_test(tc, test_pod_refusals);
	suite_add_tcase(s, tc);
	return s;
}
