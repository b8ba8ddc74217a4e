/* tests/lib/ctrd.c: see ctrd.h. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs.h"
#include "tests/lib/ctrd.h"
#include "tests/lib/oci.h"
#include "tests/lib/rootfs.h"
#include "tests/lib/testutil.h"

extern char **environ;

/* containerd's and ctr's environment: PATH, and this process's RUNG_* knobs (the vm rung's
 * kernel, initramfs, uid registry, boot timeout in the nested stage), which containerd hands to
 * its shims and they to rung-oci. */
static char *const *ctr_env(void)
{
	static char *env[64] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
	static bool made;
	size_t n = 1;
	for (char **e = environ; !made && e && *e && n < 63; e++)
		if (!strncmp(*e, "RUNG_", 5))
			env[n++] = *e;
	made = true;
	return env;
}

static void child(int in_fd, int out_fd, int err_fd, bool tty)
{
	if (tty) {
		setsid();
		ioctl(in_fd, TIOCSCTTY, 0);
	}
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	dup2(in_fd >= 0 ? in_fd : null, 0);
	dup2(out_fd >= 0 ? out_fd : null, 1);
	dup2(err_fd >= 0 ? err_fd : (out_fd >= 0 ? out_fd : null), 2);
	signal(SIGPIPE, SIG_DFL);
}

/* Fork ctr --address --namespace args... with stdio on the fds (err_fd -1: with out_fd). */
static pid_t fork_ctr(struct ctrd *c, int in_fd, int out_fd, int err_fd, bool tty,
		      const char *const *args)
{
	const char *argv[64] = {"/usr/bin/ctr", "--address", c->sock, "--namespace", c->ns};
	size_t n = 5;
	for (; *args && n < 63; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		child(in_fd, out_fd, err_fd, tty);
		execve(argv[0], (char **)argv, ctr_env());
		_exit(127);
	}
	return pid;
}

pid_t ctrd_spawn(struct ctrd *c, int in_fd, int out_fd, bool tty, const char *const *args)
{
	return fork_ctr(c, in_fd, out_fd, -1, tty, args);
}

static int wait_for(pid_t pid, int timeout_s)
{
	int st = 0;
	for (int i = 0; i < timeout_s * 100; i++) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return 128 + SIGKILL;
}

static void slurp_at(int fd, off_t at, char *buf, size_t n)
{
	if (!buf || !n)
		return;
	ssize_t k = pread(fd, buf, n - 1, at);
	buf[k > 0 ? k : 0] = '\0';
}

static void slurp(int fd, char *buf, size_t n)
{
	slurp_at(fd, 0, buf, n);
}

int ctrd_ctr(struct ctrd *c, int in_fd, int timeout_s, char *out, size_t outn, char *errb,
	     size_t errn, const char *const *args)
{
	char po[256], pe[256];
	snprintf(po, sizeof(po), "%s/ctr.out", c->dir);
	snprintf(pe, sizeof(pe), "%s/ctr.err", c->dir);
	int o = open(po, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int e = errb ? open(pe, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
	pid_t pid = fork_ctr(c, in_fd, o, e, false, args);
	int rc = pid < 0 ? -1 : wait_for(pid, timeout_s);
	slurp(o, out, outn);
	slurp(e, errb, errn);
	close(o);
	if (e >= 0)
		close(e);
	return rc;
}

void ctrd_run_argv(struct ctrd *c, const char **argv, size_t max, const char *const *extra)
{
	static const char *const fixed[] = {"run", "--runc-binary"};
	size_t n = 0;
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		argv[n++] = fixed[i];
	argv[n++] = c->bin;
	argv[n++] = "--runc-root";
	argv[n++] = c->oci_root;
	if (c->native) {
		argv[n++] = "--snapshotter";
		argv[n++] = "native";
	}
	for (; *extra && n + 1 < max; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
}

static bool write_config(struct ctrd *c)
{
	char p[256], text[2048];
	snprintf(p, sizeof(p), "%s/config.toml", c->dir);
	/* no CRI, no snapshotters but native and overlayfs, no tracing: it boots in ~50 ms */
	snprintf(text, sizeof(text),
		 "version = 2\nroot = \"%s/root\"\nstate = \"%s/state\"\n"
		 "disabled_plugins = [\"io.containerd.grpc.v1.cri\","
		 " \"io.containerd.snapshotter.v1.aufs\", \"io.containerd.snapshotter.v1.btrfs\","
		 " \"io.containerd.snapshotter.v1.devmapper\", \"io.containerd.snapshotter.v1.zfs\","
		 " \"io.containerd.internal.v1.opt\", \"io.containerd.tracing.processor.v1.otlp\","
		 " \"io.containerd.internal.v1.tracing\"]\n"
		 "[grpc]\n  address = \"%s\"\n[ttrpc]\n  address = \"%s.ttrpc\"\n",
		 c->dir, c->dir, c->sock, c->sock);
	struct rung_err err = {0};
	return rung_write_file_replace(AT_FDCWD, p, text, strlen(text), 0600, &err) == 0;
}

/* The image: busybox (tests/lib/rootfs.c) and a layer with more applets and rung-probe. */
static bool import_image(struct ctrd *c)
{
	char base[256], top[256], tdir[256], layout[256], ltar[256], p[512], rel[PATH_MAX],
	    probe[PATH_MAX];
	snprintf(base, sizeof(base), "%s/base.tar", c->dir);
	snprintf(top, sizeof(top), "%s/top.tar", c->dir);
	snprintf(tdir, sizeof(tdir), "%s/top", c->dir);
	snprintf(layout, sizeof(layout), "%s/layout", c->dir);
	snprintf(ltar, sizeof(ltar), "%s/layout.tar", c->dir);
	snprintf(rel, sizeof(rel), "%s/rung-probe", rung_test_build_dir());
	struct rung_err err = {0};
	if (!realpath(rel, probe)) {
		snprintf(c->why, sizeof(c->why), "%.200s: %s (make all)", rel, strerror(errno));
		return false;
	}
	tb_busybox_tar(base);
	snprintf(p, sizeof(p), "%s/bin", tdir);
	rung_mkdir_p(p, 0755, &err);
	static const char *const applets[] = {"sleep", "tty", "kill", "grep", "test", "stty"};
	for (size_t i = 0; i < sizeof(applets) / sizeof(applets[0]); i++) {
		snprintf(p, sizeof(p), "%s/bin/%s", tdir, applets[i]);
		if (symlink("busybox", p) < 0 && errno != EEXIST)
			return false;
	}
	char *bin = NULL;
	size_t len = 0;
	snprintf(p, sizeof(p), "%s/bin/rung-probe", tdir);
	if (rung_file_load(AT_FDCWD, probe, 64 << 20, &bin, &len, &err) < 0 ||
	    rung_write_file_replace(AT_FDCWD, p, bin, len, 0755, &err) < 0) {
		free(bin);
		snprintf(c->why, sizeof(c->why), "rung-probe into the image: %s", err.msg);
		return false;
	}
	free(bin);
	tb_tar_dir(tdir, top);
	const char *const layers[] = {base, top, NULL};
	const char *const env[] = {"PATH=/bin", NULL};
	const char *const cmd[] = {"/bin/sh", NULL};
	struct rfs_layout_opts o = {.layer_tars = layers, .compress = RFS_COMPRESS_GZIP,
				    .tag = CTRD_IMAGE, .env = env, .cmd = cmd, .working_dir = "/"};
	if (rfs_layout_write(layout, &o, &err) < 0) {
		snprintf(c->why, sizeof(c->why), "image layout: %s", err.msg);
		return false;
	}
	tb_tar_dir(layout, ltar);
	char out[1024];
	/* unpacked for the default overlayfs snapshotter and for native */
	int rc = c->native ? 0
			   : ctrd_ctr(c, -1, 60, out, sizeof(out), NULL, 0,
				      (const char *const[]){"images", "import", ltar, NULL});
	if (rc == 0)
		rc = ctrd_ctr(c, -1, 60, out, sizeof(out), NULL, 0,
			      (const char *const[]){"images", "import", "--snapshotter", "native",
						    ltar, NULL});
	if (rc != 0)
		snprintf(c->why, sizeof(c->why), "ctr images import exited %d: %.400s", rc, out);
	return rc == 0;
}

/* c->why: what, then the last lines of containerd's log. */
static void log_tail(struct ctrd *c, const char *log, const char *what)
{
	char buf[4096] = "";
	int fd = open(log, O_RDONLY | O_CLOEXEC);
	off_t end = fd >= 0 ? lseek(fd, 0, SEEK_END) : 0;
	if (fd >= 0)
		slurp_at(fd, end > 300 ? end - 300 : 0, buf, sizeof(buf));
	if (fd >= 0)
		close(fd);
	snprintf(c->why, sizeof(c->why), "%s; its log %s ends: %s", what, log, buf);
}

bool ctrd_start(struct ctrd *c, bool native)
{
	memset(c, 0, sizeof(*c));
	c->native = native;
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "%s/rung-oci", rung_test_build_dir());
	if (!realpath(rel, c->bin) || access(c->bin, X_OK) < 0) {
		snprintf(c->why, sizeof(c->why), "%.200s: build it first (make all)", rel);
		return false;
	}
	char *t = rung_test_tmpdir("ctrd");
	if (!t || strlen(t) > 40) {
		snprintf(c->why, sizeof(c->why), "no temporary directory");
		free(t);
		return false;
	}
	snprintf(c->dir, sizeof(c->dir), "%s", t);
	free(t);
	c->run_dir_made = access("/run/containerd", F_OK) != 0;
	snprintf(c->sock, sizeof(c->sock), "%s/c.sock", c->dir);
	snprintf(c->ns, sizeof(c->ns), "rung-test-%d", (int)getpid());
	snprintf(c->oci_root, sizeof(c->oci_root), "%s/oci", c->dir);
	char cfg[128], log[128];
	snprintf(cfg, sizeof(cfg), "%s/config.toml", c->dir);
	snprintf(log, sizeof(log), "%s/containerd.log", c->dir);
	if (!write_config(c)) {
		snprintf(c->why, sizeof(c->why), "%s: cannot write", cfg);
		return false;
	}
	int lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	c->pid = fork();
	if (c->pid == 0) {
		child(-1, lfd, lfd, false);
		char *argv[] = {"/usr/bin/containerd", "--config", cfg, NULL};
		execve(argv[0], argv, ctr_env());
		_exit(127);
	}
	close(lfd);
	char out[512] = "";
	/* ready: it answers `ctr version`. 60 s at most: about 0.5 s here, but in the distro
	 * stage's TCG L1 beside other TCG guests 10 s were once not enough */
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		if (waitpid(c->pid, NULL, WNOHANG) == c->pid) {
			c->pid = 0;
			log_tail(c, log, "containerd exited");
			return false;
		}
		if (access(c->sock, F_OK) == 0 &&
		    ctrd_ctr(c, -1, 20, out, sizeof(out), NULL, 0,
			     (const char *const[]){"version", NULL}) == 0)
			return import_image(c);
		usleep(50000);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - t0.tv_sec < 60);
	log_tail(c, log, "containerd did not answer in 60 s");
	return false;
}

const char *ctrd_task_status(struct ctrd *c, const char *id, int *pid)
{
	static char st[32], out[16384];
	st[0] = '\0';
	if (ctrd_ctr(c, -1, 60, out, sizeof(out), NULL, 0,
		     (const char *const[]){"tasks", "ls", NULL}) != 0)
		return st;
	char *save = NULL;
	for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char name[128];
		int p;
		if (sscanf(l, "%127s %d %31s", name, &p, st) == 3 && !strcmp(name, id)) {
			if (pid)
				*pid = p;
			return st;
		}
		st[0] = '\0';
	}
	return st;
}

/* Lines of `ctr containers ls -q`, each run through fn. */
static void each_container(struct ctrd *c, void (*fn)(struct ctrd *, const char *))
{
	char out[16384];
	if (ctrd_ctr(c, -1, 30, out, sizeof(out), NULL, 0,
		     (const char *const[]){"containers", "ls", "-q", NULL}) != 0)
		return;
	char *save = NULL;
	for (char *id = strtok_r(out, "\n", &save); id; id = strtok_r(NULL, "\n", &save))
		fn(c, id);
}

static void remove_container(struct ctrd *c, const char *id)
{
	char junk[256];
	ctrd_ctr(c, -1, 30, junk, sizeof(junk), NULL, 0,
		 (const char *const[]){"tasks", "kill", "-s", "SIGKILL", id, NULL});
	ctrd_ctr(c, -1, 30, junk, sizeof(junk), NULL, 0,
		 (const char *const[]){"tasks", "delete", "-f", id, NULL});
	ctrd_ctr(c, -1, 30, junk, sizeof(junk), NULL, 0,
		 (const char *const[]){"containers", "delete", id, NULL});
}

/* The shims of this containerd's namespace (their command lines name its socket and the
 * namespace): their count, each killed when kill_them. */
static int shims(struct ctrd *c, bool kill_them)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d))) {
		char p[300], buf[4096];
		int pid = atoi(de->d_name);
		if (pid <= 0 || pid == c->pid)
			continue;
		snprintf(p, sizeof(p), "/proc/%d/cmdline", pid);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (k <= 0)
			continue;
		for (ssize_t i = 0; i < k; i++)
			buf[i] = buf[i] ? buf[i] : ' ';
		buf[k] = '\0';
		if (!strstr(buf, "containerd-shim") || !strstr(buf, c->sock) ||
		    !strstr(buf, c->ns))
			continue;
		n++;
		if (kill_them)
			kill(pid, SIGKILL);
	}
	if (d)
		closedir(d);
	return n;
}

/* fn on each cgroup hierarchy's mount point (v1 controllers, v2 or unified). */
static void each_hierarchy(struct ctrd *c, void (*fn)(struct ctrd *, const char *, int *),
			   int *acc)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	while (f && fgets(line, sizeof(line), f)) {
		char mp[1024], type[64];
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %*s %1023s", mp) != 1 ||
		    sscanf(dash + 3, "%63s", type) != 1)
			continue;
		if (!strcmp(type, "cgroup") || !strcmp(type, "cgroup2"))
			fn(c, mp, acc);
	}
	if (f)
		fclose(f);
}

static void count_groups(struct ctrd *c, const char *mp, int *acc)
{
	char p[1200];
	snprintf(p, sizeof(p), "%s/%s", mp, c->ns);
	DIR *d = opendir(p);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (de->d_type == DT_DIR && de->d_name[0] != '.')
			(*acc)++;
	if (d)
		closedir(d);
}

static void remove_groups(struct ctrd *c, const char *mp, int *acc)
{
	(void)acc;
	char p[1200];
	snprintf(p, sizeof(p), "%s/%s", mp, c->ns);
	rmdir(p); /* the namespace's parent group, which containerd never removes */
}

/* Processes whose cgroup (any hierarchy) is below /NS/. */
static int ns_procs(struct ctrd *c)
{
	char needle[64];
	snprintf(needle, sizeof(needle), ":/%s/", c->ns);
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d))) {
		char p[300], buf[8192];
		if (atoi(de->d_name) <= 0)
			continue;
		snprintf(p, sizeof(p), "/proc/%s/cgroup", de->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		buf[k > 0 ? k : 0] = '\0';
		n += strstr(buf, needle) != NULL;
	}
	if (d)
		closedir(d);
	return n;
}

/* Host mounts naming the directory (snapshots, bundles' rootfs, layers' clones): other
 * tests' mounts on this host come and go meanwhile and are not counted. */
static int ours_mounted(struct ctrd *c)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192];
	int n = 0;
	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, c->dir) != NULL;
	if (f)
		fclose(f);
	return n;
}

void ctrd_count(struct ctrd *c, struct ctrd_counts *n)
{
	char p[256];
	memset(n, 0, sizeof(*n));
	n->mounts = ours_mounted(c);
	each_hierarchy(c, count_groups, &n->cgroups);
	n->procs = ns_procs(c) + shims(c, false);
	snprintf(p, sizeof(p), "%s/%s", c->oci_root, c->ns);
	n->states = rung_test_count_entries(p);
	snprintf(p, sizeof(p), "%s/%s/.uids", c->oci_root, c->ns);
	n->uids = rung_test_count_entries(p);
}

/* Detach every mount below dir, deepest first. */
static void unmount_below(const char *dir)
{
	for (int round = 0; round < 8; round++) {
		FILE *f = fopen("/proc/self/mountinfo", "re");
		char line[4096], last[1024] = "";
		while (f && fgets(line, sizeof(line), f)) {
			char mp[1024];
			if (sscanf(line, "%*s %*s %*s %*s %1023s", mp) == 1 &&
			    !strncmp(mp, dir, strlen(dir)) && mp[strlen(dir)] == '/')
				snprintf(last, sizeof(last), "%s", mp);
		}
		if (f)
			fclose(f);
		if (!last[0] || umount2(last, MNT_DETACH) < 0)
			return;
	}
}

void ctrd_stop(struct ctrd *c)
{
	if (!c->dir[0])
		return;
	if (c->pid > 0) {
		each_container(c, remove_container);
		kill(c->pid, SIGTERM);
		if (wait_for(c->pid, 10) == 128 + SIGKILL)
			fprintf(stderr, "ctrd: containerd %d needed SIGKILL\n", (int)c->pid);
		c->pid = 0;
	}
	if (shims(c, true))
		fprintf(stderr, "ctrd: killed shims left by the namespace %s\n", c->ns);
	char p[256], out[256], errb[256];
	snprintf(p, sizeof(p), "%s/%s", c->oci_root, c->ns);
	DIR *d = opendir(p);
	struct dirent *de;
	while (d && (de = readdir(d))) { /* a container rung-oci still holds */
		if (de->d_name[0] == '.')
			continue;
		fprintf(stderr, "ctrd: rung-oci state %s/%s left: deleting it\n", p, de->d_name);
		const char *const args[] = {"delete", "--force", de->d_name, NULL};

		oci_test_run(c->bin, p, c->dir, NULL, args, out, sizeof(out), errb, sizeof(errb));
	}
	if (d)
		closedir(d);
	each_hierarchy(c, remove_groups, NULL);
	if (c->run_dir_made) { /* what containerd made there for us, if empty */
		static const char *const made[] = {"/run/containerd/s", "/run/containerd/fifo",
						   "/run/containerd/runc", "/run/containerd"};
		for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++)
			rmdir(made[i]);
	}
	unmount_below(c->dir);
	struct rung_err err = {0};
	if (rung_rm_rf(c->dir, &err) < 0)
		fprintf(stderr, "ctrd: remove %s: %s\n", c->dir, err.msg);
	c->dir[0] = '\0';
}

int ctrd_run_tty(struct ctrd *c, const char *const *extra, char *buf, size_t n)
{
	int master, slave;
	buf[0] = '\0';
	if (openpty(&master, &slave, NULL, NULL, NULL) < 0) {
		snprintf(buf, n, "(openpty: %s)", strerror(errno));
		return -1;
	}
	const char *argv[64];
	ctrd_run_argv(c, argv, 64, extra);
	pid_t pid = ctrd_spawn(c, slave, slave, true, argv);
	close(slave);
	size_t len = 0;
	ssize_t k;
	while (len + 1 < n && (k = read(master, buf + len, n - 1 - len)) > 0)
		len += (size_t)k; /* EIO once the last slave fd is closed */
	buf[len] = '\0';
	close(master);
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void ctrd_check_tty(struct ctrd *c, const char *id)
{
	char buf[4096];
	int rc = ctrd_run_tty(c, (const char *const[]){"--rm", "-t", CTRD_IMAGE, id, "sh", "-c",
						      "tty; test -t 0 && echo IS-A-TTY; exit 3",
						      NULL},
			      buf, sizeof(buf));
	ck_assert_msg(strstr(buf, "/dev/pts/") && strstr(buf, "IS-A-TTY"), "tty said: %s", buf);
	ck_assert_int_eq(rc, 3);
}

void ctrd_remove(struct ctrd *c, const char *id, int timeout_s)
{
	char out[1024], errb[1024];
	ctrd_ctr(c, -1, timeout_s, out, sizeof(out), errb, sizeof(errb),
		 (const char *const[]){"tasks", "kill", "-s", "SIGKILL", id, NULL});
	for (int i = 0; i < timeout_s * 50 && ctrd_task_status(c, id, NULL)[0] &&
			strcmp(ctrd_task_status(c, id, NULL), "STOPPED");
	     i++)
		usleep(20000);
	ctrd_ctr(c, -1, timeout_s, out, sizeof(out), errb, sizeof(errb),
		 (const char *const[]){"tasks", "delete", id, NULL});
	ctrd_ctr(c, -1, timeout_s, out, sizeof(out), errb, sizeof(errb),
		 (const char *const[]){"containers", "delete", id, NULL});
}
