/*
 * tests/check_e2e_oci_exec.c: build/rung-oci's exec, ps, pause/resume, events (--stats and the
 * stream) and update on a running busybox container, as containerd's shim calls them: exec's exit
 * status and output are the process's, the exec'd process is confined as the init (same uid map,
 * user, pid namespace, seccomp mode 2, capability bounding set), --detach with --pid-file, ps lists
 * init and exec'd pids, pause -> "paused" -> exec refused -> resume, the stats document's fields,
 * update read back from the cgroup files, the error paths, and nothing left behind (cgroup, state
 * directory, processes, host mounts).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "oci/oci.h"
#include "tests/lib/oci.h"
#include "tests/lib/testutil.h"

struct env {
	char dir[PATH_MAX], bundle[PATH_MAX + 16], root[PATH_MAX + 16], bin[PATH_MAX];
	char cg[64]; /* the container's cgroup name */
	char stdout_[8192], stderr_[8192];
};

static struct env *E;

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* A busybox bundle that sleeps, in its own cgroup with pids.limit 100; extra: more of linux. */
static void bundle_x(struct env *e, const char *extra)
{
	char p[PATH_MAX * 2], cfg[4096];
	struct rung_err err = {0};
	snprintf(p, sizeof(p), "%s/rootfs/bin", e->bundle);
	ck_assert_int_eq(rung_mkdir_p(p, 0755, &err), 0);
	char *data = NULL;
	size_t len = 0;
	ck_assert_int_eq(rung_file_load(AT_FDCWD, "/bin/busybox", 8 << 20, &data, &len, &err), 0);
	snprintf(p, sizeof(p), "%s/rootfs/bin/busybox", e->bundle);
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, p, data, len, 0755, &err), 0);
	free(data);
	static const char *const applets[] = {"sh", "sleep", "cat", "echo", "id", "grep", "true"};
	for (size_t i = 0; i < sizeof(applets) / sizeof(applets[0]); i++) {
		snprintf(p, sizeof(p), "%s/rootfs/bin/%s", e->bundle, applets[i]);
		ck_assert(symlink("busybox", p) == 0 || errno == EEXIST);
	}
	snprintf(cfg, sizeof(cfg),
		 "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\"},"
		 " \"process\": {\"args\": [\"sleep\", \"1000\"], \"env\": [\"PATH=/bin\"], \"cwd\": \"/\","
		 "  \"user\": {\"uid\": 0, \"gid\": 0}, \"capabilities\": {\"bounding\": [\"CAP_KILL\"],"
		 "  \"effective\": [\"CAP_KILL\"], \"permitted\": [\"CAP_KILL\"]}},"
		 " \"mounts\": [{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"},"
		 "  {\"destination\": \"/dev\", \"type\": \"tmpfs\", \"source\": \"tmpfs\"},"
		 "  {\"destination\": \"/dev/pts\", \"type\": \"devpts\", \"source\": \"devpts\","
		 "   \"options\": [\"nosuid\", \"noexec\", \"newinstance\", \"ptmxmode=0666\"]}],"
		 " \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"ipc\"},"
		 "  {\"type\": \"mount\"}, {\"type\": \"network\"}, {\"type\": \"uts\"}],"
		 "  \"cgroupsPath\": \"/%s\", \"resources\": {\"pids\": {\"limit\": 100}}%s}}",
		 e->cg, extra);
	snprintf(p, sizeof(p), "%s/config.json", e->bundle);
	put(p, cfg);
}

/* Run rung-oci --root ROOT args... (stdin from in, or /dev/null); stdout and stderr in e. */
static int oci_in(struct env *e, const char *in, const char *const *args)
{
	return oci_test_run(e->bin, e->root, e->dir, in, args, e->stdout_, sizeof(e->stdout_),
			    e->stderr_, sizeof(e->stderr_));
}

#define OCI(e, ...) oci_in(e, NULL, (const char *const[]){__VA_ARGS__, NULL})
#define OCI_IN(e, in, ...) oci_in(e, in, (const char *const[]){__VA_ARGS__, NULL})

static json_t *json_out(struct env *e)
{
	json_t *j = json_loads(e->stdout_, 0, NULL);
	ck_assert_msg(j != NULL, "not JSON: %s", e->stdout_);
	return j;
}

static const char *status_of(struct env *e, int *pid)
{
	static char st[32];
	ck_assert_int_eq(OCI(e, "state", "c1"), 0);
	json_t *j = json_out(e);
	snprintf(st, sizeof(st), "%s", json_string_value(json_object_get(j, "status")));
	if (pid)
		*pid = (int)json_integer_value(json_object_get(j, "pid"));
	json_decref(j);
	return st;
}

static int mounts_count(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	ck_assert_ptr_nonnull(f);
	int n = 0;
	for (int c; (c = fgetc(f)) != EOF;)
		n += c == '\n';
	fclose(f);
	return n;
}

static int host_mounts;

static void setup_env(void)
{
	struct env *e = E = calloc(1, sizeof(*e));
	char *d = rung_test_tmpdir("ociexec");
	snprintf(e->dir, sizeof(e->dir), "%s", d);
	free(d);
	snprintf(e->bundle, sizeof(e->bundle), "%s/bundle", e->dir);
	snprintf(e->root, sizeof(e->root), "%s/root", e->dir);
	snprintf(e->bin, sizeof(e->bin), "%s/rung-oci", rung_test_build_dir());
	snprintf(e->cg, sizeof(e->cg), "rung-oci-exec-%d", (int)getpid());
	mkdir(e->bundle, 0755);
	ck_assert_msg(access(e->bin, X_OK) == 0, "%s: build it first (make all)", e->bin);
	host_mounts = mounts_count();
}

static void teardown_env(void)
{
	if (geteuid() == 0)
		OCI(E, "delete", "--force", "c1");
	struct rung_err err = {0};
	rung_rm_rf(E->dir, &err);
	free(E);
	E = NULL;
}

/* The group's file: v1 under its controller's hierarchy, v2 in the one directory. */
static void cg_file(const struct env *e, const char *ctl, const char *file, char *out, size_t n)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "/sys/fs/cgroup/%s/%s/%s", ctl, e->cg, file);
	if (access(p, F_OK) != 0)
		snprintf(p, sizeof(p), "/sys/fs/cgroup/%s/%s", e->cg, file);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "%s: %s", p, strerror(errno));
	ssize_t k = read(fd, out, n - 1);
	close(fd);
	out[k > 0 ? k : 0] = 0;
	out[strcspn(out, "\n")] = 0;
}

static bool cg_exists(const struct env *e)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "/sys/fs/cgroup/pids/%s", e->cg);
	if (access("/sys/fs/cgroup/pids", F_OK) != 0)
		snprintf(p, sizeof(p), "/sys/fs/cgroup/%s", e->cg);
	return access(p, F_OK) == 0;
}

static void start_c1_x(struct env *e, const char *extra)
{
	OCI(e, "delete", "--force", "c1"); /* what an earlier failed test left */
	bundle_x(e, extra);
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c1") == 0, "%s", e->stderr_);
	ck_assert_msg(OCI(e, "start", "c1") == 0, "%s", e->stderr_);
	ck_assert_str_eq(status_of(e, NULL), "running");
}

static void start_c1(struct env *e)
{
	start_c1_x(e, "");
}

/* Delete c1 and check nothing is left: its cgroup, state dir, the given pids, host mounts. */
static void delete_c1(struct env *e, const pid_t *pids, size_t n)
{
	ck_assert_msg(OCI(e, "delete", "--force", "c1") == 0, "%s", e->stderr_);
	ck_assert(!cg_exists(e));
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/c1", e->root);
	ck_assert_int_ne(access(p, F_OK), 0);
	for (size_t i = 0; i < n; i++) {
		/* a container process whose parent is gone may be reparented to this test's
		 * process (a subreaper): reap it; one still alive is a leak */
		waitpid(pids[i], NULL, WNOHANG);
		char st[64], b[512] = {0};
		snprintf(st, sizeof(st), "/proc/%d/stat", (int)pids[i]);
		int fd = open(st, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			(void)!read(fd, b, sizeof(b) - 1);
			close(fd);
		}
		char *state = strrchr(b, ')');
		ck_assert_msg(fd < 0 || (state && state[2] == 'Z'), "pid %d left: %s", (int)pids[i],
			      b);
	}
	ck_assert_int_eq(mounts_count(), host_mounts);
}

static ino_t ns_ino(int pid, const char *ns)
{
	char p[64];
	struct stat st;
	snprintf(p, sizeof(p), "/proc/%d/ns/%s", pid, ns);
	ck_assert_int_eq(stat(p, &st), 0);
	return st.st_ino;
}

/* pid is in the container's group on every hierarchy rung uses: v1 memory, cpu, cpuacct,
 * pids, freezer (each "id:controllers:path" line of /proc/PID/cgroup naming one of them has
 * the group's path); v2 the "0::" line. */
static void assert_in_group(const struct env *e, pid_t pid)
{
	char want[128], path[4096];
	snprintf(want, sizeof(want), "/%s", e->cg);
	static const char *const ctls[] = {"memory", "cpu", "cpuacct", "pids", "freezer"};
	bool v1 = access("/sys/fs/cgroup/memory", F_OK) == 0;
	int checked = 0;
	for (size_t i = 0; i < (v1 ? sizeof(ctls) / sizeof(ctls[0]) : 1); i++) {
		if (!rung_test_proc_cgroup(pid, v1 ? ctls[i] : NULL, path, sizeof(path)))
			continue;
		ck_assert_msg(!strcmp(path, want), "pid %d: %s %s, not %s", (int)pid,
			      v1 ? ctls[i] : "v2", path, want);
		checked++;
	}
	ck_assert_msg(checked >= (v1 ? 4 : 1), "pid %d: %d of its groups checked", (int)pid,
		      checked);
}

/* exec: the process's status and output; its flags; the init's confinement. */
START_TEST(test_exec)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	start_c1(e);
	int init = 0;
	status_of(e, &init);
	ck_assert_int_eq(OCI(e, "exec", "c1", "sh", "-c", "echo hi; exit 7"), 7);
	ck_assert_str_eq(e->stdout_, "hi\n");
	ck_assert_int_eq(OCI(e, "exec", "c1", "sh", "-c", "kill -9 $$"), 128 + SIGKILL);
	ck_assert_int_eq(OCI(e, "exec", "--env", "FOO=bar", "--cwd", "/dev", "--user", "5:6", "c1",
			     "sh", "-c", "echo $FOO:$(pwd):$(id -u):$(id -g)"), 0);
	ck_assert_str_eq(e->stdout_, "bar:/dev:5:6\n");
	/* seen from inside: the init's filter mode, bounding set and uid map */
	ck_assert_int_eq(OCI(e, "exec", "c1", "sh", "-c",
			     "grep -E '^(Seccomp|CapBnd):' /proc/self/status; cat /proc/self/uid_map"),
			 0);
	ck_assert_msg(strstr(e->stdout_, "CapBnd:\t0000000000000020\n"), "%s", e->stdout_);
	ck_assert_msg(strstr(e->stdout_, "Seccomp:\t2\n"), "%s", e->stdout_);
	ck_assert_msg(strstr(e->stdout_, " 500000000 "), "%s", e->stdout_); /* rung-oci's range */
	/* --process replaces the bundle's process; --detach returns at once with its pid */
	char proc[PATH_MAX * 2], pidf[PATH_MAX * 2];
	snprintf(proc, sizeof(proc), "%s/proc.json", e->dir);
	snprintf(pidf, sizeof(pidf), "%s/exec.pid", e->dir);
	put(proc, "{\"args\": [\"sleep\", \"1000\"], \"cwd\": \"/\", \"user\": {\"uid\": 7, \"gid\": 7},"
		   " \"capabilities\": {\"bounding\": [\"CAP_KILL\"]}, \"noNewPrivileges\": true}");
	ck_assert_msg(OCI(e, "exec", "--detach", "--pid-file", pidf, "--process", proc, "c1") == 0,
		      "%s", e->stderr_);
	char buf[32] = {0};
	int fd = open(pidf, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	(void)!read(fd, buf, sizeof(buf) - 1);
	close(fd);
	pid_t ex = (pid_t)atoi(buf);
	ck_assert_int_gt(ex, 0);
	ck_assert_int_eq(kill(ex, 0), 0);
	/* seen from the host: the init's namespaces, a uid of its range, mode 2, same bounding set */
	static const char *const nss[] = {"user", "mnt", "pid", "uts", "ipc", "net"};
	for (size_t i = 0; i < sizeof(nss) / sizeof(nss[0]); i++)
		ck_assert_msg(ns_ino(ex, nss[i]) == ns_ino(init, nss[i]), "ns %s", nss[i]);
	ck_assert_int_eq(rung_test_status_field(ex, "Uid:\t"), rung_test_status_field(init, "Uid:\t") + 7);
	ck_assert_int_eq(rung_test_status_field(ex, "Seccomp:\t"), 2);
	ck_assert_int_eq(rung_test_status_field(ex, "CapBnd:\t"), rung_test_status_field(init, "CapBnd:\t"));
	ck_assert_int_eq(rung_test_status_field(ex, "CapEff:\t"), 0); /* uid 7: no effective capability */
	ck_assert_int_eq(rung_test_status_field(ex, "NoNewPrivs:\t"), 1);  /* as its process asked */
	ck_assert_int_eq(rung_test_status_field(init, "NoNewPrivs:\t"), 0);
	/* ps: the init and the exec'd process, as host pids */
	ck_assert_int_eq(OCI(e, "ps", "--format", "json", "c1"), 0);
	json_t *pids = json_out(e);
	ck_assert(json_is_array(pids));
	bool saw_init = false, saw_ex = false;
	for (size_t i = 0; i < json_array_size(pids); i++) {
		json_int_t p = json_integer_value(json_array_get(pids, i));
		saw_init |= p == init;
		saw_ex |= p == ex;
	}
	json_decref(pids);
	ck_assert_msg(saw_init && saw_ex, "ps: %s (init %d, exec %d)", e->stdout_, init, (int)ex);
	assert_in_group(e, init); /* born there: clone3 into it (v2), or it entered itself (v1) */
	assert_in_group(e, ex);
	ck_assert_int_eq(OCI(e, "ps", "c1"), 0);
	ck_assert_msg(strstr(e->stdout_, "PID") && strstr(e->stdout_, "sleep 1000"), "%s",
		      e->stdout_);
	delete_c1(e, (pid_t[]){init, ex}, 2);
}
END_TEST

/* pause freezes (state "paused", exec refused), resume thaws; delete of a paused container. */
START_TEST(test_pause_resume)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	start_c1(e);
	int init = 0;
	status_of(e, &init);
	ck_assert_msg(OCI(e, "resume", "c1") == 1 && strstr(e->stderr_, "not paused"), "%s",
		      e->stderr_);
	ck_assert_msg(OCI(e, "pause", "c1") == 0, "%s", e->stderr_);
	ck_assert_str_eq(status_of(e, NULL), "paused");
	char b[64];
	cg_file(e, "freezer", access("/sys/fs/cgroup/freezer", F_OK) == 0 ? "freezer.state"
									 : "cgroup.freeze", b, sizeof(b));
	ck_assert_msg(strcmp(b, "FROZEN") == 0 || strcmp(b, "1") == 0, "freezer: %s", b);
	ck_assert_int_eq(OCI(e, "exec", "c1", "true"), 1);
	ck_assert_msg(strstr(e->stderr_, "cannot exec in a paused container"), "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "delete", "c1"), 1); /* not stopped */
	ck_assert_msg(OCI(e, "resume", "c1") == 0, "%s", e->stderr_);
	ck_assert_str_eq(status_of(e, NULL), "running");
	ck_assert_int_eq(OCI(e, "exec", "c1", "echo", "back"), 0);
	ck_assert_str_eq(e->stdout_, "back\n");
	/* a paused container goes with delete --force (thawed so its processes can die) */
	ck_assert_int_eq(OCI(e, "pause", "c1"), 0);
	delete_c1(e, (pid_t[]){init}, 1);
}
END_TEST

/* events --stats: runc's shape with sane values; update read back from the cgroup files. */
START_TEST(test_events_update)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	start_c1(e);
	int init = 0;
	status_of(e, &init);
	ck_assert_int_eq(OCI(e, "exec", "c1", "sh", "-c",
			     "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"), 0);
	ck_assert_msg(OCI(e, "events", "--stats", "c1") == 0, "%s", e->stderr_);
	json_t *j = json_out(e), *d = json_object_get(j, "data");
	ck_assert_str_eq(json_string_value(json_object_get(j, "type")), "stats");
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "c1");
	json_t *cpu = json_object_get(d, "cpu"), *mem = json_object_get(d, "memory");
	json_t *usage = json_object_get(cpu, "usage");
	ck_assert_int_gt(json_integer_value(json_object_get(usage, "total")), 0);
	ck_assert_int_ge(json_integer_value(json_object_get(usage, "total")),
			 json_integer_value(json_object_get(usage, "user")));
	ck_assert_ptr_nonnull(json_object_get(json_object_get(cpu, "throttling"), "periods"));
	json_t *mu = json_object_get(mem, "usage");
	ck_assert_int_gt(json_integer_value(json_object_get(mu, "usage")), 0);
	ck_assert_int_ge(json_integer_value(json_object_get(mu, "max")),
			 json_integer_value(json_object_get(mu, "usage")));
	ck_assert_int_gt(json_integer_value(json_object_get(mu, "limit")), 0);
	ck_assert_ptr_nonnull(json_object_get(json_object_get(mem, "swap"), "usage"));
	json_t *raw = json_object_get(mem, "raw"); /* memory.stat: v1 "rss", v2 "anon" */
	ck_assert_msg(json_object_get(raw, "rss") || json_object_get(raw, "anon"), "%s", e->stdout_);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(d, "pids"), "current")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(d, "pids"), "limit")), 100);
	json_decref(j);
	/* the flags */
	ck_assert_msg(OCI(e, "update", "--pids-limit", "42", "--memory", "64m", "c1") == 0, "%s",
		      e->stderr_);
	char b[64];
	cg_file(e, "pids", "pids.max", b, sizeof(b));
	ck_assert_str_eq(b, "42");
	bool v1 = access("/sys/fs/cgroup/memory", F_OK) == 0;
	cg_file(e, "memory", v1 ? "memory.limit_in_bytes" : "memory.max", b, sizeof(b));
	ck_assert_str_eq(b, "67108864");
	/* --resources, a file or stdin */
	char res[PATH_MAX * 2];
	snprintf(res, sizeof(res), "%s/res.json", e->dir);
	put(res, "{\"pids\": {\"limit\": 7}, \"memory\": {\"limit\": 134217728}}");
	ck_assert_msg(OCI(e, "update", "--resources", res, "c1") == 0, "%s", e->stderr_);
	cg_file(e, "pids", "pids.max", b, sizeof(b));
	ck_assert_str_eq(b, "7");
	cg_file(e, "memory", v1 ? "memory.limit_in_bytes" : "memory.max", b, sizeof(b));
	ck_assert_str_eq(b, "134217728");
	put(res, "{\"pids\": {\"limit\": 9}}");
	ck_assert_msg(OCI_IN(e, res, "update", "--resources", "-", "c1") == 0, "%s", e->stderr_);
	cg_file(e, "pids", "pids.max", b, sizeof(b));
	ck_assert_str_eq(b, "9");
	ck_assert_int_eq(OCI(e, "events", "--stats", "c1"), 0);
	ck_assert_msg(strstr(e->stdout_, "\"limit\":9}"), "%s", e->stdout_);
	/* bad input names the field and changes nothing */
	put(res, "{\"pids\": {\"limit\": \"x\"}}");
	ck_assert_int_eq(OCI(e, "update", "--resources", res, "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "linux.resources.pids.limit"), "%s", e->stderr_);
	put(res, "{\"memory\": 5}");
	ck_assert_int_eq(OCI(e, "update", "--resources", res, "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "linux.resources.memory"), "%s", e->stderr_);
	put(res, "{\"pids\": ");
	ck_assert_int_eq(OCI(e, "update", "--resources", res, "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "--resources") && strstr(e->stderr_, "line 1"), "%s",
		      e->stderr_);
	cg_file(e, "pids", "pids.max", b, sizeof(b));
	ck_assert_str_eq(b, "9");
	ck_assert_int_eq(OCI(e, "update", "--bogus", "1", "c1"), 1);
	ck_assert_int_eq(OCI(e, "update", "--memory", "12q", "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "not a number"), "%s", e->stderr_);
	ck_assert_msg(OCI(e, "update", "--pids-limit", "-1", "c1") == 0, "%s", e->stderr_);
	cg_file(e, "pids", "pids.max", b, sizeof(b)); /* -1: no limit */
	ck_assert_str_eq(b, "max");
	delete_c1(e, (pid_t[]){init}, 1);
}
END_TEST

/* The events stream's file out once it holds needle n times, or as it is after 100 reads
 * step_us apart (malloc'd; NULL: never readable). */
static char *events_when(const char *out, const char *needle, int n, unsigned step_us)
{
	char *text = NULL;
	for (int i = 0; i < 100; i++) {
		free(text);
		text = NULL;
		struct rung_err err = {0};
		rung_file_load(AT_FDCWD, out, 1 << 20, &text, NULL, &err);
		int seen = 0;
		for (const char *at = text; at && (at = strstr(at, needle)); at++)
			seen++;
		if (seen >= n)
			break;
		usleep(step_us);
	}
	return text;
}

/* events (the stream): stats lines every --interval, an oom line when a process of the
 * container is OOM-killed (a shell doubling a string past a 16 MiB limit), and the stream ends
 * by itself once the container stops; a bad or zero --interval is a usage error. */
START_TEST(test_events_stream)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	ck_assert_int_eq(OCI(e, "events", "--interval", "0", "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "greater than 0"), "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "events", "--interval", "5", "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "--interval"), "%s", e->stderr_);
	start_c1(e);
	int init = 0;
	status_of(e, &init);
	ck_assert_msg(OCI(e, "update", "--memory", "16m", "c1") == 0, "%s", e->stderr_);
	char out[PATH_MAX * 2];
	snprintf(out, sizeof(out), "%s/events.out", e->dir);
	pid_t ev = fork();
	ck_assert_int_ge(ev, 0);
	if (ev == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || dup2(fd, 1) < 0)
			_exit(126);
		execl(e->bin, "rung-oci", "--root", e->root, "events", "--interval", "200ms", "c1",
		      (char *)NULL);
		_exit(127);
	}
	/* two stats lines before the OOM: the stream is periodic (a fixed 300 ms here left one
	 * line now and then on a fast host, where the exec, the OOM and the kill take ~50 ms) */
	free(events_when(out, "\"type\":\"stats\"", 2, 50000));
	OCI(e, "exec", "c1", "sh", "-c", "x=x; while :; do x=$x$x; done");
	/* the oom line: at once (v2, v1 eventfd) or within 1 s */
	char *text = events_when(out, "\"type\":\"oom\"", 1, 100000);
	struct rung_err err = {0};
	ck_assert_msg(text && strstr(text, "{\"type\":\"oom\",\"id\":\"c1\"}"), "events: %s",
		      text ? text : "(none)");
	ck_assert_int_eq(OCI(e, "kill", "c1", "KILL"), 0);
	int st = -1;
	for (int i = 0; i < 100 && waitpid(ev, &st, WNOHANG) == 0; i++)
		usleep(100000);
	if (st == -1) {
		kill(ev, SIGKILL);
		waitpid(ev, NULL, 0);
	}
	ck_assert_msg(st == 0, "the stream did not end with the container: status %d", st);
	free(text);
	text = NULL;
	ck_assert_int_eq(rung_file_load(AT_FDCWD, out, 1 << 20, &text, NULL, &err), 0);
	size_t stats = 0;
	for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
		json_t *j = json_loads(l, 0, NULL);
		ck_assert_msg(j, "not JSON: %s", l);
		const char *type = json_string_value(json_object_get(j, "type"));
		ck_assert_msg(type && (!strcmp(type, "stats") || !strcmp(type, "oom")), "%s", l);
		if (!strcmp(type, "stats")) {
			stats++;
			ck_assert_ptr_nonnull(json_object_get(json_object_get(j, "data"), "memory"));
		}
		json_decref(j);
	}
	fprintf(stderr, "e2e_oci_exec: events: %zu stats lines at 200 ms, an oom line\n", stats);
	ck_assert_uint_ge(stats, 2);
	free(text);
	delete_c1(e, (pid_t[]){init}, 1);
}
END_TEST

/* Unknown ids, bad --process, usage errors: exit 1 and a message naming what is wrong. */
START_TEST(test_bad_input)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	static const char *const cmds[][3] = {{"exec", "nope", "true"}, {"ps", "nope", NULL},
					      {"pause", "nope", NULL},	{"resume", "nope", NULL},
					      {"events", "--stats", "nope"},
					      {"update", "--pids-limit=5", "nope"}};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		ck_assert_int_eq(oci_in(e, NULL, (const char *const[]){cmds[i][0], cmds[i][1],
								     cmds[i][2], NULL}), 1);
		ck_assert_msg(strstr(e->stderr_, "container nope does not exist"), "%s: %s",
			      cmds[i][0], e->stderr_);
	}
	start_c1(e);
	int init = 0;
	status_of(e, &init);
	char proc[PATH_MAX * 2];
	snprintf(proc, sizeof(proc), "%s/bad.json", e->dir);
	put(proc, "{\"args\": \"sh\", \"cwd\": \"/\"}");
	ck_assert_int_eq(OCI(e, "exec", "--process", proc, "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "process.args"), "%s", e->stderr_);
	put(proc, "{\"args\": [\"sh\"], ");
	ck_assert_int_eq(OCI(e, "exec", "--process", proc, "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "--process") && strstr(e->stderr_, "line"), "%s",
		      e->stderr_);
	ck_assert_int_eq(OCI(e, "exec", "c1"), 1); /* no process */
	ck_assert_int_eq(OCI(e, "exec", "--user", "x", "c1", "true"), 1);
	ck_assert_msg(strstr(e->stderr_, "--user"), "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "exec", "--tty", "c1", "true"), 1); /* a tty needs the socket */
	ck_assert_msg(strstr(e->stderr_, "--console-socket"), "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "ps", "--format", "xml", "c1"), 1);
	ck_assert_int_eq(OCI(e, "exec", "--help"), 0);
	ck_assert_msg(strstr(e->stdout_, "usage: rung-oci"), "%s", e->stdout_);
	/* a stopped container refuses exec as runc does */
	ck_assert_int_eq(OCI(e, "kill", "c1", "KILL"), 0);
	for (int i = 0; i < 500 && strcmp(status_of(e, NULL), "stopped") != 0; i++)
		usleep(20000);
	ck_assert_int_eq(OCI(e, "exec", "c1", "true"), 1);
	ck_assert_msg(strstr(e->stderr_, "cannot exec in a stopped container"), "%s", e->stderr_);
	delete_c1(e, (pid_t[]){init}, 1);
}
END_TEST

/* exec --tty: the pty's master comes over --console-socket; the process's stdio is its slave. */
START_TEST(test_exec_tty)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	start_c1(e);
	int init = 0;
	status_of(e, &init);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char sock[PATH_MAX * 2];
	snprintf(sock, sizeof(sock), "%s/console.sock", e->dir);
	ck_assert_uint_lt(strlen(sock), sizeof(sa.sun_path));
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(ls, 0);
	ck_assert_int_eq(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(ls, 1), 0);
	ck_assert_msg(OCI(e, "exec", "--detach", "--tty", "--console-socket", sa.sun_path, "c1",
			  "sh", "-c", "[ -t 0 ] && [ -t 1 ] && echo tty-ok; sleep 100") == 0,
		      "%s", e->stderr_);
	int master = oci_test_console_master(ls);
	char out[256] = {0};
	size_t n = 0;
	for (int i = 0; i < 100 && !strstr(out, "tty-ok"); i++) {
		ssize_t k = read(master, out + n, sizeof(out) - 1 - n);
		if (k > 0)
			n += (size_t)k;
	}
	ck_assert_msg(strstr(out, "tty-ok"), "the terminal said: %s", out);
	close(master);
	close(ls);
	delete_c1(e, (pid_t[]){init}, 1);
}
END_TEST

/* The spec's seccomp filter is the exec'd process's too, stacked on rung's. */
START_TEST(test_exec_spec_seccomp)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	start_c1_x(e, ", \"seccomp\": {\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\":"
		      " [{\"names\": [\"mkdir\", \"mkdirat\"], \"action\": \"SCMP_ACT_ERRNO\","
		      " \"errnoRet\": 13}]}");
	int init = 0;
	status_of(e, &init);
	ck_assert_int_eq(OCI(e, "exec", "c1", "sh", "-c",
			     "mkdir /d 2>&1; echo rc=$?; grep Seccomp_filters /proc/self/status"), 0);
	ck_assert_msg(strstr(e->stdout_, "Permission denied") && strstr(e->stdout_, "rc=1"), "%s",
		      e->stdout_);
	ck_assert_msg(strstr(e->stdout_, "Seccomp_filters:\t2"), "%s", e->stdout_);
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/rootfs/d", e->bundle);
	ck_assert_int_ne(access(p, F_OK), 0);
	delete_c1(e, (pid_t[]){init}, 1);
}
END_TEST

Suite *e2e_oci_exec_suite(void)
{
	Suite *s = suite_create("e2e_oci_exec");
	TCase *tc = tcase_create("exec");
	tcase_add_unchecked_fixture(tc, setup_env, teardown_env);
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_exec);
	tcase_add_test(tc, test_pause_resume);
	tcase_add_test(tc, test_events_update);
	tcase_add_test(tc, test_events_stream);
	tcase_add_test(tc, test_bad_input);
	tcase_add_test(tc, test_exec_tty);
	tcase_add_test(tc, test_exec_spec_seccomp);
	suite_add_tcase(s, tc);
	return s;
}
