/*
 * tests/check_e2e_oci_life.c: build/rung-oci as containerd's shim drives it, on a busybox
 * bundle: create (pid file, state "created" with a live pid waiting before the program),
 * start, state "running", kill, "stopped", delete (nothing left: state dir, cgroup, uid slot);
 * runc's exit codes and messages for the error paths; refusals leave nothing behind; the
 * container runs inside rung's boundary (a private uid range, rung's seccomp filter, no
 * capability beyond the policy).
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
#include <sched.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "oci/oci.h"
#include "tests/lib/oci.h"
#include "tests/lib/testutil.h"

struct env {
	char dir[PATH_MAX], bundle[PATH_MAX + 16], root[PATH_MAX + 16], out[PATH_MAX + 16];
	char bin[PATH_MAX];
	const char *root_arg; /* --root as given (NULL: root) */
	bool default_cgroup;  /* no linux.cgroupsPath in the bundle: rung-oci's default */
	char stdout_[8192], stderr_[8192];
};

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void copy_file(const char *from, const char *to)
{
	char *data = NULL;
	size_t len = 0;
	struct rung_err err = {0};
	ck_assert_int_eq(rung_file_load(AT_FDCWD, from, 8 << 20, &data, &len, &err), 0);
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, to, data, len, 0755, &err), 0);
	free(data);
}

/* A bundle: rootfs with busybox, config.json with args (a JSON array text) and extra linux. */
static void bundle_x(struct env *e, const char *args, const char *namespaces, const char *extra)
{
	char p[PATH_MAX * 2], cfg[8192];
	snprintf(p, sizeof(p), "%s/rootfs/bin", e->bundle);
	struct rung_err err = {0};
	ck_assert_int_eq(rung_mkdir_p(p, 0755, &err), 0);
	snprintf(p, sizeof(p), "%s/rootfs/bin/busybox", e->bundle);
	copy_file("/bin/busybox", p);
	static const char *const applets[] = {"sh", "sleep", "cat", "echo", "hostname", "ip"};
	for (size_t i = 0; i < sizeof(applets) / sizeof(applets[0]); i++) {
		snprintf(p, sizeof(p), "%s/rootfs/bin/%s", e->bundle, applets[i]);
		ck_assert(symlink("busybox", p) == 0 || errno == EEXIST);
	}
	snprintf(cfg, sizeof(cfg),
		 "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\"}, \"hostname\": \"ocihost\","
		 " \"annotations\": {\"k\": \"v\"},"
		 " \"process\": {\"args\": %s, \"env\": [\"PATH=/bin\"], \"cwd\": \"/\","
		 "  \"user\": {\"uid\": 0, \"gid\": 0}, \"capabilities\": {\"bounding\": [\"CAP_KILL\"],"
		 "  \"effective\": [\"CAP_KILL\"], \"permitted\": [\"CAP_KILL\"]}},"
		 " \"mounts\": [{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"},"
		 "  {\"destination\": \"/dev\", \"type\": \"tmpfs\", \"source\": \"tmpfs\"},"
		 "  {\"destination\": \"/out\", \"source\": \"%s\", \"options\": [\"bind\"]}],"
		 " \"linux\": {\"namespaces\": %s, \"cgroupsPath\": \"/rung-oci-test-%d\"%s}}",
		 args, e->out, namespaces, (int)getpid(), extra);
	if (e->default_cgroup) { /* the same without its cgroupsPath */
		char *c = strstr(cfg, ", \"cgroupsPath\": \"");
		char *end = strchr(c + strlen(", \"cgroupsPath\": \""), '"') + 1;
		memmove(c, end, strlen(end) + 1);
	}
	snprintf(p, sizeof(p), "%s/config.json", e->bundle);
	put(p, cfg);
}

static void bundle(struct env *e, const char *args, const char *namespaces)
{
	bundle_x(e, args, namespaces, "");
}

static const char ns_default[] = "[{\"type\": \"pid\"}, {\"type\": \"ipc\"}, {\"type\": \"mount\"},"
				 " {\"type\": \"network\"}, {\"type\": \"uts\"}]";

/* Run rung-oci --root ROOT args...; its stdout and stderr in e; the exit status. */
static int oci(struct env *e, const char *const *args)
{
	return oci_test_run(e->bin, e->root_arg ? e->root_arg : e->root, e->dir, NULL, args,
			    e->stdout_, sizeof(e->stdout_), e->stderr_, sizeof(e->stderr_));
}

#define OCI(e, ...) oci(e, (const char *const[]){__VA_ARGS__, NULL})

static json_t *state_of(struct env *e, const char *id)
{
	ck_assert_int_eq(OCI(e, "state", id), 0);
	json_t *j = json_loads(e->stdout_, 0, NULL);
	ck_assert_msg(j != NULL, "state is not JSON: %s", e->stdout_);
	return j;
}

static const char *status_of(struct env *e, const char *id, int *pid)
{
	static char st[32];
	json_t *j = state_of(e, id);
	snprintf(st, sizeof(st), "%s", json_string_value(json_object_get(j, "status")));
	if (pid)
		*pid = (int)json_integer_value(json_object_get(j, "pid"));
	json_decref(j);
	return st;
}

static void wait_status(struct env *e, const char *id, const char *want)
{
	for (int i = 0; i < 500 && strcmp(status_of(e, id, NULL), want) != 0; i++)
		usleep(20000);
	ck_assert_str_eq(status_of(e, id, NULL), want);
}

/* Made and removed by the parent process (an unchecked fixture): a failed test's container,
 * cgroup and files go too. */
static struct env *E;

static void setup_env(void)
{
	struct env *e = E = calloc(1, sizeof(*e));
	char *d = rung_test_tmpdir("oci");
	snprintf(e->dir, sizeof(e->dir), "%s", d);
	free(d);
	snprintf(e->bundle, sizeof(e->bundle), "%s/bundle", e->dir);
	snprintf(e->root, sizeof(e->root), "%s/root", e->dir);
	snprintf(e->out, sizeof(e->out), "%s/out", e->dir);
	snprintf(e->bin, sizeof(e->bin), "%s/rung-oci", rung_test_build_dir());
	mkdir(e->bundle, 0755);
	mkdir(e->out, 0777);
	chmod(e->out, 0777); /* the container's root is an unprivileged host uid */
	ck_assert_msg(access(e->bin, X_OK) == 0, "%s: build it first (make all)", e->bin);
}

static void teardown_env(void)
{
	if (geteuid() == 0)
		for (int i = 1; i <= 3; i++) {
			char id[8];
			snprintf(id, sizeof(id), "c%d", i);
			OCI(E, "delete", "--force", id);
		}
	struct rung_err err = {0};
	rung_rm_rf(E->dir, &err);
	free(E);
	E = NULL;
}

static bool cgroup_exists(void)
{
	char p[128];
	snprintf(p, sizeof(p), "/sys/fs/cgroup/pids/rung-oci-test-%d", (int)getpid());
	if (access("/sys/fs/cgroup/pids", F_OK) != 0) /* v2 */
		snprintf(p, sizeof(p), "/sys/fs/cgroup/rung-oci-test-%d", (int)getpid());
	return access(p, F_OK) == 0;
}

START_TEST(test_life)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	bundle(e, "[\"sh\", \"-c\", \"hostname > /out/hello; exec sleep 100\"]", ns_default);
	int mounts0 = rung_test_count_mounts();
	char pidfile[PATH_MAX * 2], hello[PATH_MAX * 2];
	snprintf(pidfile, sizeof(pidfile), "%s/pid", e->dir);
	snprintf(hello, sizeof(hello), "%s/hello", e->out);
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "--pid-file", pidfile, "c1") == 0,
		      "create: %s", e->stderr_);
	/* created: a live init that has not run the program yet */
	int pid = 0;
	ck_assert_str_eq(status_of(e, "c1", &pid), "created");
	ck_assert_int_gt(pid, 1);
	ck_assert_int_eq(kill(pid, 0), 0);
	char buf[32] = {0};
	int fd = open(pidfile, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	(void)!read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_int_eq(atoi(buf), pid);
	ck_assert_int_ne(access(hello, F_OK), 0);
	json_t *j = state_of(e, "c1");
	ck_assert_str_eq(json_string_value(json_object_get(j, "ociVersion")), OCI_VERSION);
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "c1");
	ck_assert_str_eq(json_string_value(json_object_get(j, "bundle")), e->bundle);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "annotations"), "k")), "v");
	json_decref(j);
	ck_assert(cgroup_exists());
	/* a second create of the same id fails as runc's does, and leaves the first alone */
	ck_assert_int_eq(OCI(e, "create", "--bundle", e->bundle, "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "already exists"), "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "start", "c1"), 0);
	wait_status(e, "c1", "running");
	for (int i = 0; i < 500 && access(hello, F_OK) != 0; i++)
		usleep(20000);
	fd = open(hello, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	memset(buf, 0, sizeof(buf));
	(void)!read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_str_eq(buf, "ocihost\n");
	/* rung's boundary: a private uid range, its seccomp filter, only the policy's caps */
	ck_assert_int_ge(rung_test_status_field(pid, "Uid:\t"), (long)OCI_UID_BASE0);
	ck_assert_int_eq(rung_test_status_field(pid, "Seccomp:\t"), 2);
	ck_assert_int_eq(rung_test_status_field(pid, "CapBnd:\t"), 1L << 5 /* CAP_KILL */);
	/* a running container is not deleted without --force */
	ck_assert_int_eq(OCI(e, "delete", "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "not stopped"), "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "start", "c1"), 1);
	ck_assert_int_eq(OCI(e, "kill", "c1", "KILL"), 0);
	wait_status(e, "c1", "stopped");
	char p[PATH_MAX * 2];
	ck_assert_int_eq(OCI(e, "kill", "c1", "TERM"), 1);
	/* a refused create of another id gives back no one's user ids */
	ck_assert_int_eq(OCI(e, "create", "--bundle", "/nonexistent", "c9"), 1);
	snprintf(p, sizeof(p), "%s/.uids", e->root);
	ck_assert_int_eq(rung_test_count_entries(p), 1);
	ck_assert_int_eq(OCI(e, "delete", "c1"), 0);
	ck_assert_int_eq(OCI(e, "state", "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "does not exist"), "%s", e->stderr_);
	ck_assert(!cgroup_exists());
	snprintf(p, sizeof(p), "%s/c1", e->root);
	ck_assert_int_ne(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "%s/.uids", e->root);
	ck_assert_int_eq(rung_test_count_entries(p), 0);
	/* the rootfs attach and the mounts were the container's: none on the host */
	ck_assert_int_eq(rung_test_count_mounts(), mounts0);
}
END_TEST

START_TEST(test_delete_created_and_force)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	bundle(e, "[\"sleep\", \"100\"]", ns_default);
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c2") == 0, "%s", e->stderr_);
	int pid = 0;
	ck_assert_str_eq(status_of(e, "c2", &pid), "created");
	/* a created container is deleted (its init killed), as runc does */
	ck_assert_int_eq(OCI(e, "delete", "c2"), 0);
	ck_assert_int_eq(OCI(e, "state", "c2"), 1);
	ck_assert(!cgroup_exists());
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c2") == 0, "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "start", "c2"), 0);
	wait_status(e, "c2", "running");
	ck_assert_int_eq(OCI(e, "kill", "--all", "c2", "9"), 0);
	wait_status(e, "c2", "stopped");
	ck_assert_int_eq(OCI(e, "delete", "--force", "c2"), 0);
	/* --force on what does not exist succeeds; without, runc's exit 1 */
	ck_assert_int_eq(OCI(e, "delete", "--force", "c2"), 0);
	ck_assert_int_eq(OCI(e, "delete", "c2"), 1);
}
END_TEST

/* Without linux.cgroupsPath the group is rung-oci/<id>; the parent goes with its last
 * container, on every hierarchy (v1 and v2). */
static bool default_parent_exists(void)
{
	const char *p = access("/sys/fs/cgroup/pids", F_OK) == 0 ? "/sys/fs/cgroup/pids/" OCI_CGROUP_PARENT
								  : "/sys/fs/cgroup/" OCI_CGROUP_PARENT;
	return access(p, F_OK) == 0;
}

START_TEST(test_default_cgroup_parent)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	e->default_cgroup = true;
	bundle(e, "[\"sleep\", \"100\"]", ns_default);
	char cfg[PATH_MAX + 32];
	snprintf(cfg, sizeof(cfg), "%s/config.json", e->bundle);
	char *text = NULL;
	size_t len = 0;
	struct rung_err err = {0};
	ck_assert_int_eq(rung_file_load(AT_FDCWD, cfg, 1 << 20, &text, &len, &err), 0);
	ck_assert_msg(!strstr(text, "cgroupsPath") && strstr(text, "\"linux\": {\"namespaces\""),
		      "%s", text);
	free(text);
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "d1") == 0, "%s", e->stderr_);
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "d2") == 0, "%s", e->stderr_);
	ck_assert(default_parent_exists());
	ck_assert_int_eq(OCI(e, "delete", "--force", "d1"), 0);
	ck_assert(default_parent_exists()); /* d2 is still in it */
	ck_assert_int_eq(OCI(e, "delete", "--force", "d2"), 0);
	ck_assert_msg(!default_parent_exists(), "the default parent %s outlived its last container",
		      OCI_CGROUP_PARENT);
}
END_TEST

START_TEST(test_refused_leaves_nothing)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	bundle(e, "[\"true\"]", "[{\"type\": \"pid\", \"path\": \"/proc/1/ns/pid\"}, "
		  "{\"type\": \"ipc\"}]");
	ck_assert_int_eq(OCI(e, "create", "--bundle", e->bundle, "c3"), 1);
	ck_assert_msg(strstr(e->stderr_, "linux.namespaces[0].path"), "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "state", "c3"), 1);
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/c3", e->root);
	ck_assert_int_ne(access(p, F_OK), 0);
	ck_assert(!cgroup_exists());
	/* the command line, as runc: refusals and usage errors exit 1, an unknown command 3 */
	ck_assert_int_eq(OCI(e, "--systemd-cgroup", "state", "c3"), 1);
	ck_assert_msg(strstr(e->stderr_, "--systemd-cgroup"), "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "bogus"), 3);
	ck_assert_int_eq(OCI(e, "kill", "c3", "NOSIG"), 1);
	ck_assert_msg(strstr(e->stderr_, "unknown signal"), "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "start"), 1);
	ck_assert_msg(strstr(e->stderr_, "container id is missing"), "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "create", "--help"), 0);
	ck_assert_msg(strstr(e->stdout_, "--console-socket"), "%s", e->stdout_);
	ck_assert_int_eq(OCI(e, "features"), 0);
	json_t *f = json_loads(e->stdout_, 0, NULL);
	ck_assert_ptr_nonnull(f);
	ck_assert_str_eq(json_string_value(json_object_get(f, "ociVersionMax")), OCI_VERSION);
	json_decref(f);
}
END_TEST

/* Relative --root, --bundle and --pid-file are the caller's working directory's, as runc's. */
START_TEST(test_relative_paths)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	bundle(e, "[\"sleep\", \"100\"]", ns_default);
	ck_assert_int_eq(chdir(e->dir), 0); /* this test's own process (CK_FORK) */
	e->root_arg = "root";
	ck_assert_msg(OCI(e, "create", "--bundle", "bundle", "--pid-file", "relpid", "c3") == 0, "%s",
		      e->stderr_);
	int pid = 0;
	ck_assert_str_eq(status_of(e, "c3", &pid), "created");
	char buf[32] = {0};
	int fd = open("relpid", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	(void)!read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_int_eq(atoi(buf), pid);
	ck_assert_int_eq(OCI(e, "delete", "c3"), 0);
	e->root_arg = NULL;
}
END_TEST

/* The spec's filter narrows rung's: mkdir answers the spec's errno, the rest still runs. */
START_TEST(test_spec_seccomp)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	bundle_x(e, "[\"sh\", \"-c\", \"mkdir /out/d 2>/out/err; echo $? > /out/rc\"]", ns_default,
		 ", \"seccomp\": {\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [{\"names\":"
		 " [\"mkdir\", \"mkdirat\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 13}]}");
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c1") == 0, "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "start", "c1"), 0);
	wait_status(e, "c1", "stopped");
	char p[PATH_MAX * 2], buf[256] = {0};
	snprintf(p, sizeof(p), "%s/d", e->out);
	ck_assert_int_ne(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "%s/err", e->out);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	(void)!read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_msg(strstr(buf, "Permission denied"), "mkdir said: %s", buf);
	ck_assert_int_eq(OCI(e, "delete", "c1"), 0);
	/* an action rung-oci does not run is refused at create, naming the field */
	bundle_x(e, "[\"true\"]", ns_default,
		 ", \"seccomp\": {\"defaultAction\": \"SCMP_ACT_NOTIFY\"}");
	ck_assert_int_eq(OCI(e, "create", "--bundle", e->bundle, "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "linux.seccomp.defaultAction"), "%s", e->stderr_);
}
END_TEST

/* A network namespace joined by path (the CNI's, here one a child of the test holds) is left
 * as it is, and nothing inside can change it: a netlink change from inside fails with EPERM
 * and lo stays down. Two reasons, either enough: the container never holds CAP_NET_ADMIN
 * (rung's capability policy), and the namespace belongs to the host's user namespace, not the
 * container's. What rung's egress rules in such a namespace stand on (e2e_oci_egress). */
START_TEST(test_joined_netns_locked)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	int holder = oci_test_ns_holder(CLONE_NEWNET);
	char ns[128], p[PATH_MAX * 2];
	snprintf(ns, sizeof(ns), "[{\"type\": \"pid\"}, {\"type\": \"ipc\"}, {\"type\": \"mount\"},"
		 " {\"type\": \"network\", \"path\": \"/proc/%d/ns/net\"}, {\"type\": \"uts\"}]",
		 (int)holder);
	bundle(e, "[\"sh\", \"-c\", \"ip link set lo up 2>/out/err; echo $? > /out/rc\"]", ns);
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c1") == 0, "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "start", "c1"), 0);
	wait_status(e, "c1", "stopped");
	ck_assert_int_eq(OCI(e, "delete", "c1"), 0);
	char *out = NULL;
	size_t n = 0;
	struct rung_err err = {0};
	snprintf(p, sizeof(p), "%s/err", e->out);
	ck_assert_int_eq(rung_file_load(AT_FDCWD, p, 4096, &out, &n, &err), 0);
	ck_assert_msg(strstr(out, "Operation not permitted"), "ip said: %s", out);
	free(out);
	snprintf(p, sizeof(p), "%s/rc", e->out);
	ck_assert_int_eq(rung_file_load(AT_FDCWD, p, 64, &out, &n, &err), 0);
	ck_assert_int_ne(atoi(out), 0);
	free(out);
	/* lo is still down in the joined namespace: nothing changed it (this test's process is
	 * its own fork: it may stay in that namespace) */
	snprintf(p, sizeof(p), "/proc/%d/ns/net", (int)holder);
	int nsfd = open(p, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(nsfd, 0);
	ck_assert_int_eq(setns(nsfd, CLONE_NEWNET), 0);
	close(nsfd);
	int sk = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	ck_assert_int_eq(ioctl(sk, SIOCGIFFLAGS, &ifr), 0);
	ck_assert_int_eq(ifr.ifr_flags & IFF_UP, 0);
	close(sk);
	oci_test_ns_holder_end(holder);
}
END_TEST

/* The mountinfo line of mount point mp in text (NUL-terminated in line), or NULL. */
static char *mountinfo_of(char *text, const char *mp, char *line, size_t n)
{
	char want[PATH_MAX + 4];
	snprintf(want, sizeof(want), " %s ", mp);
	for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		size_t len = strcspn(l, "\n");
		snprintf(line, n, "%.*s", (int)len, l);
		char *f = line; /* the fifth field: the mount point */
		for (int i = 0; i < 4 && f; i++)
			f = strchr(f + 1, ' ');
		if (f && !strncmp(f, want, strlen(want)))
			return line;
	}
	return NULL;
}

/* A rootfs that is an overlay mount, as containerd's overlayfs snapshotter leaves it (two
 * lowers, the upper and work dirs side by side in one snapshot dir): rung-oci remounts it over
 * idmapped layers (oci/overlay.c, rootfs's rfs_overlay_apply_idmapped) made from paths relative
 * to its state dir. The container reads both layers and writes the upper as its root; its
 * mountinfo names no host path; nothing staged is left in the state dir nor mounted on the
 * host, where the first overlay is gone from the rootfs. */
START_TEST(test_overlay_rootfs)
{
	RUNG_REQUIRE_ROOT();
	struct env *e = E;
	bundle(e, "[\"sh\", \"-c\", \"cat /proc/self/mountinfo > /out/mountinfo; cat /top >"
		  " /out/top; echo w > /written\"]", ns_default);
	char rootfs[PATH_MAX + 32], l0[PATH_MAX + 16], l1[PATH_MAX + 16], snap[PATH_MAX + 16],
	    p[PATH_MAX * 2], opts[PATH_MAX * 5];
	snprintf(rootfs, sizeof(rootfs), "%s/rootfs", e->bundle);
	snprintf(l0, sizeof(l0), "%s/l0", e->dir);
	snprintf(l1, sizeof(l1), "%s/l1", e->dir);
	snprintf(snap, sizeof(snap), "%s/snap", e->dir);
	ck_assert_int_eq(rename(rootfs, l1), 0); /* busybox: the bottom layer */
	ck_assert_int_eq(mkdir(rootfs, 0755), 0);
	ck_assert_int_eq(mkdir(l0, 0755), 0);
	snprintf(p, sizeof(p), "%s/top", l0);
	put(p, "from l0\n");
	ck_assert_int_eq(mkdir(snap, 0700), 0);
	snprintf(p, sizeof(p), "%s/fs", snap);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/work", snap);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(opts, sizeof(opts), "lowerdir=%s:%s,upperdir=%s/fs,workdir=%s/work", l0, l1, snap,
		 snap);
	/* in this test's own mount namespace (CK_FORK): rung-oci takes the overlay from it */
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	ck_assert_msg(mount("overlay", rootfs, "overlay", 0, opts) == 0, "%s", strerror(errno));
	int mounts0 = rung_test_count_mounts();
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c1") == 0, "%s", e->stderr_);
	ck_assert_int_eq(rung_test_count_mounts(), mounts0 - 1); /* only the overlay taken */
	snprintf(p, sizeof(p), "%s/c1", e->root);
	static const char *const staged[] = {"0", "1", "u"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(staged); i++) {
		char q[PATH_MAX * 4];
		snprintf(q, sizeof(q), "%s/%s", p, staged[i]);
		ck_assert_msg(access(q, F_OK) != 0, "%s left in the state dir", q);
	}
	ck_assert_int_eq(OCI(e, "start", "c1"), 0);
	wait_status(e, "c1", "stopped");
	ck_assert_int_eq(OCI(e, "delete", "c1"), 0);
	char *text = NULL, line[8192];
	size_t n = 0;
	struct rung_err err = {0};
	snprintf(p, sizeof(p), "%s/top", e->out);
	ck_assert_int_eq(rung_file_load(AT_FDCWD, p, 64, &text, &n, &err), 0);
	ck_assert_str_eq(text, "from l0\n");
	free(text);
	snprintf(p, sizeof(p), "%s/mountinfo", e->out);
	ck_assert_int_eq(rung_file_load(AT_FDCWD, p, 1 << 16, &text, &n, &err), 0);
	const char *root = mountinfo_of(text, "/", line, sizeof(line));
	ck_assert_msg(root, "no / in %s", text);
	fprintf(stderr, "e2e_oci_life: an overlay rootfs in the container's mountinfo: %s\n", root);
	/* the layers as given: one lowerdir+ each (Linux 6.8), or one classic lowerdir */
	ck_assert_msg(strstr(root, " - overlay ") &&
			  (strstr(root, "lowerdir+=0,lowerdir+=1,") || strstr(root, "lowerdir=0:1,")) &&
			  strstr(root, "upperdir=u/fs,workdir=u/work"),
		      "%s", root);
	/* neither the layers' nor rung-oci's state dir (the bundle's /out bind names its source) */
	ck_assert_msg(!strstr(root, e->dir), "the root's line names %s: %s", e->dir, root);
	free(text);
	/* the container's root wrote the upper, as its uid on the host */
	struct stat st;
	snprintf(p, sizeof(p), "%s/fs/written", snap);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_ge(st.st_uid, OCI_UID_BASE0);
	ck_assert_int_eq(rung_test_count_mounts(), mounts0 - 1);
}
END_TEST

Suite *e2e_oci_life_suite(void)
{
	Suite *s = suite_create("e2e_oci_life");
	TCase *tc = tcase_create("life");
	tcase_add_unchecked_fixture(tc, setup_env, teardown_env);
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_life);
	tcase_add_test(tc, test_delete_created_and_force);
	tcase_add_test(tc, test_refused_leaves_nothing);
	tcase_add_test(tc, test_spec_seccomp);
	tcase_add_test(tc, test_joined_netns_locked);
	tcase_add_test(tc, test_relative_paths);
	tcase_add_test(tc, test_default_cgroup_parent);
	tcase_add_test(tc, test_overlay_rootfs);
	suite_add_tcase(s, tc);
	return s;
}
