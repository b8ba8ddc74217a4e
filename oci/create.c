/*
 * oci/create.c: `create` and `start`. create parses the bundle, refuses what rung does not run,
 * makes the state directory and the exec fifo, joins a pod's network, ipc and uts namespaces
 * given by path (nsjoin.c), clones the init into new namespaces (always its own user and mount
 * ones; a private id range when the spec has no user namespace), writes its id maps, puts it in
 * its cgroup with the spec's limits, sets its rlimits and oom score, attaches the rootfs idmapped
 * to it, and waits until it reports ready. Then it writes state.json and the pid file
 * (atomically) and returns: the init waits on the fifo until `start` writes one byte to it.
 */
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/nshint.h"
#include "common/util.h"
#include "oci/oci-internal.h"
#include "oci/vm.h"
#include "rootfs/rfs.h"
#include "runtime/seccomp.h"

struct create_ctx {
	const struct oci_create_opts *o;
	struct oci_config cfg;
	struct oci_state st;
	char dir[PATH_MAX];
	char pid_file[PATH_MAX]; /* absolute: root_attach's setns moves the cwd to / */
	void *bpf, *spec_bpf;
	size_t bpf_len, spec_bpf_len;
	pid_t pid;
	int sync[2], fifo, console;
	int rootfd; /* the attached rootfs, for the init (rootfd.c) */
	char hostname[64]; /* without the spec's: the id's first 63 bytes */
	char ovl_opts[4096]; /* a rootfs that was an overlay: its options (overlay.c) */
	bool dir_made;
	struct rt_cgroup *cg;
	struct rt_cgroup_birth birth; /* the init's way into cg at its clone (none: moved in) */
	bool born;		      /* the init was born in cg */
	int home[3]; /* rung-oci's own net, ipc, uts namespaces while it is in the pod's (-1: not) */
};

static const struct {
	int flag;
	const char *name;
} home_ns[3] = {{CLONE_NEWNET, "net"}, {CLONE_NEWIPC, "ipc"}, {CLONE_NEWUTS, "uts"}};

/* Keep a handle on rung-oci's own namespace i before it joins the pod's one. */
static int home_keep(struct create_ctx *x, int i, struct rung_err *err)
{
	char p[32];
	snprintf(p, sizeof(p), "/proc/self/ns/%s", home_ns[i].name);
	x->home[i] = open(p, O_RDONLY | O_CLOEXEC);
	return x->home[i] < 0 ? rung_err_sys(err, errno, "open %s", p) : 0;
}

/* Back in rung-oci's own namespaces once the init is cloned in the pod's: the hooks that
 * follow run in the runtime's namespaces (the OCI spec's; runc's), not the pod's. */
static int home_return(struct create_ctx *x, struct rung_err *err)
{
	for (int i = 0; i < 3; i++) {
		if (x->home[i] < 0)
			continue;
		if (setns(x->home[i], home_ns[i].flag) < 0)
			return rung_err_sys(err, errno, "return to rung-oci's own %s namespace",
					    home_ns[i].name);
		close(x->home[i]);
		x->home[i] = -1;
	}
	return 0;
}

static int write_proc(pid_t pid, const char *file, const char *text, struct rung_err *err)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
	cleanup_close int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || rung_write_all(fd, text, strlen(text)) < 0)
		return rung_err_sys(err, errno, "write %s", p);
	return 0;
}

static int maps_write(struct create_ctx *x, struct rung_err *err)
{
	char u[1024] = "", g[1024] = "";
	const struct oci_config *c = &x->cfg;
	if (!c->spec_userns) {
		uint32_t base = OCI_UID_BASE0 + x->st.uid_slot * OCI_UID_RANGE;
		snprintf(u, sizeof(u), "0 %u %u\n", base, OCI_UID_RANGE);
		snprintf(g, sizeof(g), "0 %u %u\n", base, OCI_UID_RANGE);
	}
	for (size_t i = 0; i < c->nuid_maps; i++)
		snprintf(u + strlen(u), sizeof(u) - strlen(u), "%u %u %u\n", c->uid_maps[i].inner,
			 c->uid_maps[i].outer, c->uid_maps[i].count);
	for (size_t i = 0; i < c->ngid_maps; i++)
		snprintf(g + strlen(g), sizeof(g) - strlen(g), "%u %u %u\n", c->gid_maps[i].inner,
			 c->gid_maps[i].outer, c->gid_maps[i].count);
	if (!*u || !*g)
		return rung_err_set(err, EINVAL, "linux.uidMappings/gidMappings: a user namespace "
				    "needs both");
	int r = write_proc(x->pid, "uid_map", u, err);
	if (r == 0)
		r = write_proc(x->pid, "gid_map", g, err);
	return r < 0 ? rung_err_wrap(err, "user namespace") : 0;
}

/* Before the init's clone: make its group, and open the way for it to be born there. */
static int cgroup_make(struct create_ctx *x, struct rung_err *err)
{
	const char *p = x->cfg.cgroups_path;
	char name[512];
	if (p && *p) {
		while (*p == '/')
			p++;
		snprintf(name, sizeof(name), "%s", p);
	} else {
		snprintf(name, sizeof(name), OCI_CGROUP_PARENT "/%s", x->o->id);
	}
	snprintf(x->st.cgroup, sizeof(x->st.cgroup), "%s", name);
	int r = rt_cgroup_open("/sys/fs/cgroup", name, &x->cg, err);
	/* -ENOENT: the parent went between its mkdir and ours (its last container deleted at
	 * that moment): make both again */
	for (int i = 0; r == 0 && i < 4; i++) {
		r = rt_cgroup_create(x->cg, &x->cfg.limits, err);
		if (r != -ENOENT)
			break;
		*err = (struct rung_err){0};
		r = i == 3 ? rung_err_set(err, ENOENT, "its parent keeps vanishing") : 0;
	}
	struct rung_err e = {0};
	if (r == 0 && rt_cgroup_birth_open(x->cg, &x->birth, &e) < 0)
		LOG_DEBUG("%s: the init is moved in instead", e.msg);
	return r < 0 ? rung_err_wrap(err, "linux.cgroupsPath %s", name) : 0;
}

/* Once the init exists: move it in unless it was born there; the cpu settings (a v1 cpuset
 * group is entered by pid). */
static int cgroup_setup(struct create_ctx *x, struct rung_err *err)
{
	int r = x->born ? 0 : rt_cgroup_enter(x->cg, x->pid, err);
	if (r == 0)
		r = oci_cgroup_cpu_apply(x->cg, &x->cfg.cpu, x->pid, err);
	return r < 0 ? rung_err_wrap(err, "linux.cgroupsPath %s", x->st.cgroup) : 0;
}

static int limits_apply(struct create_ctx *x, struct rung_err *err)
{
	for (size_t i = 0; i < x->cfg.nrlimits; i++) {
		const struct oci_rlimit *l = &x->cfg.rlimits[i];
		struct rlimit rl = {.rlim_cur = l->soft, .rlim_max = l->hard};
		if (prlimit(x->pid, (enum __rlimit_resource)l->resource, &rl, NULL) < 0)
			return rung_err_sys(err, errno, "process.rlimits[%zu]", i);
	}
	if (x->cfg.has_oom_score_adj) {
		char v[16];
		snprintf(v, sizeof(v), "%d", x->cfg.oom_score_adj);
		if (write_proc(x->pid, "oom_score_adj", v, err) < 0)
			return rung_err_wrap(err, "process.oomScoreAdj");
	}
	return 0;
}

/* The rootfs, idmapped to the init's user namespace, attached in its mount namespace. */
static int root_attach(struct create_ctx *x, struct rung_err *err)
{
	if (x->cfg.spec_userns)
		return 0;
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)x->pid);
	cleanup_close int userns = open(p, O_RDONLY | O_CLOEXEC);
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)x->pid);
	cleanup_close int mntns = open(p, O_RDONLY | O_CLOEXEC);
	cleanup_close int self = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	cleanup_close int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC); /* setns moves it */
	if (userns < 0 || mntns < 0 || self < 0 || cwd < 0)
		return rung_err_sys(err, errno, "open the container's namespaces");
	/* an overlay (containerd's snapshotter) cannot be idmapped itself: overlay.c */
	char scratch[PATH_MAX] = "";
	bool ovl = x->ovl_opts[0];
	if (ovl && !realpath(x->dir, scratch))
		return rung_err_sys(err, errno, "%s", x->dir);
	cleanup_close int tree = ovl ? -1 : rfs_idmap_clone(x->cfg.rootfs, userns, 0, err);
	if (!ovl && tree < 0)
		return rung_err_wrap(err, "root.path %s", x->cfg.rootfs);
	if (setns(mntns, CLONE_NEWNS) < 0)
		return rung_err_sys(err, errno, "enter the container's mount namespace");
	int r = 0;
	if (ovl)
		r = oci_overlay_idmapped(x->cfg.rootfs, x->ovl_opts, userns,
					 OCI_UID_BASE0 + x->st.uid_slot * OCI_UID_RANGE, scratch, err);
	else if (syscall(SYS_move_mount, tree, "", AT_FDCWD, x->cfg.rootfs,
			 MOVE_MOUNT_F_EMPTY_PATH) < 0)
		r = rung_err_sys(err, errno, "root.path: attach %s", x->cfg.rootfs);
	if (r == 0 && (x->rootfd = open(x->cfg.rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		r = rung_err_sys(err, errno, "root.path: open %s", x->cfg.rootfs);
	if (setns(self, CLONE_NEWNS) < 0 && r == 0)
		r = rung_err_sys(err, errno, "leave the container's mount namespace");
	if (fchdir(cwd) < 0 && r == 0)
		r = rung_err_sys(err, errno, "back to the working directory");
	return r;
}

static int wait_init(struct create_ctx *x, char want, struct rung_err *err)
{
	struct oci_sync_msg m = {0};
	ssize_t n = read(x->sync[0], &m, sizeof(m));
	if (n >= 1 && m.tag == want)
		return 0;
	if (n == (ssize_t)sizeof(m) && m.tag == OCI_SYNC_ERROR) {
		*err = m.err;
		return -(m.err.code ? m.err.code : EINVAL);
	}
	return rung_err_set(err, EPIPE, "the container's init exited during create");
}

static int send_tag(struct create_ctx *x, char tag, struct rung_err *err)
{
	if (write(x->sync[0], &tag, 1) != 1)
		return wait_init(x, tag, err); /* it failed and said why */
	return 0;
}

/* Parent side of the handshake with the init. */
static int drive(struct create_ctx *x, struct rung_err *err)
{
	int r = maps_write(x, err);
	if (r == 0)
		r = cgroup_setup(x, err);
	if (r == 0)
		r = limits_apply(x, err);
	if (r == 0)
		r = send_tag(x, OCI_SYNC_MAPPED, err);
	if (r == 0)
		r = wait_init(x, OCI_SYNC_PRIVATE, err);
	if (r == 0)
		r = root_attach(x, err);
	if (r == 0) { /* prestart, createRuntime, createContainer: before the pivot (hooks.c) */
		x->st.pid = x->pid;
		r = oci_hooks_create(&x->st, err);
	}
	if (r == 0 && oci_sync_send_fd(x->sync[0], OCI_SYNC_ROOT, x->rootfd) < 0)
		r = wait_init(x, OCI_SYNC_ROOT, err);
	if (r == 0)
		r = wait_init(x, OCI_SYNC_READY, err);
	return r;
}

int oci_console_connect(const char *path, struct rung_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return rung_err_set(err, ENAMETOOLONG, "--console-socket %s: path too long", path);
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return rung_err_sys(err, e, "--console-socket %s", path);
	}
	return fd;
}

int oci_create_load(const struct oci_create_opts *o, struct oci_config *cfg, char *pid_file,
		    size_t n, struct rung_err *err)
{
	char bundle[PATH_MAX], cwd[PATH_MAX];
	if (oci_id_check(o->id, err) < 0)
		return -EINVAL;
	if (o->pid_file && o->pid_file[0] != '/' &&
	    (!getcwd(cwd, sizeof(cwd)) ||
	     snprintf(pid_file, n, "%s/%s", cwd, o->pid_file) >= (int)n))
		return rung_err_set(err, ENAMETOOLONG, "--pid-file %s: path too long", o->pid_file);
	else if (o->pid_file && o->pid_file[0] == '/')
		snprintf(pid_file, n, "%s", o->pid_file);
	if (!realpath(o->bundle, bundle))
		return rung_err_sys(err, errno, "--bundle %s", o->bundle);
	int r = oci_config_load(bundle, cfg, err);
	if (r == 0)
		r = oci_hooks_check(cfg->doc, err);
	if (r == 0)
		r = oci_annotations_check(cfg, err);
	if (r < 0)
		return r;
	if (cfg->terminal != (o->console_socket != NULL))
		return rung_err_set(err, EINVAL, cfg->terminal
				    ? "process.terminal is true: --console-socket is required"
				    : "--console-socket given but process.terminal is false");
	return 0;
}

int oci_create_record(const char *root, struct oci_state *st, pid_t pid, json_t *annotations,
		      const char *pid_file, struct rung_err *err)
{
	st->pid = pid;
	st->start_time = rung_proc_starttime(pid);
	if (!st->annotations) /* the container rung's create set it before its hooks ran */
		st->annotations = json_incref(annotations);
	int r = oci_state_write(root, st, err);
	if (r < 0 || !pid_file[0])
		return r;
	char v[16];
	snprintf(v, sizeof(v), "%d", (int)pid);
	r = rung_write_file_replace(AT_FDCWD, pid_file, v, strlen(v), 0644, err);
	return r < 0 ? rung_err_wrap(err, "--pid-file") : 0;
}

static int prepare(struct create_ctx *x, struct rung_err *err)
{
	const struct oci_create_opts *o = x->o;
	int r = oci_create_load(o, &x->cfg, x->pid_file, sizeof(x->pid_file), err);
	if (r < 0)
		return r;
	/* kept in the state: the bundle may change after create */
	x->st.annotations = json_incref(x->cfg.annotations);
	x->st.hooks = json_incref(json_object_get(x->cfg.doc, "hooks"));
	if ((r = rt_seccomp_build(&x->bpf, &x->bpf_len, err)) < 0)
		return r;
	json_t *sc = json_object_get(json_object_get(x->cfg.doc, "linux"), "seccomp");
	if ((r = oci_seccomp_build(sc, &x->spec_bpf, &x->spec_bpf_len, err)) < 0)
		return r;
	if ((r = rung_mkdir_p(o->root, 0700, err)) < 0)
		return rung_err_wrap(err, "--root");
	if (oci_state_path(o->root, o->id, NULL, x->dir, sizeof(x->dir)) < 0)
		return rung_err_set(err, ENAMETOOLONG, "--root %s: path too long", o->root);
	if (mkdir(x->dir, 0700) < 0)
		return errno == EEXIST ? rung_err_set(err, EEXIST, "container %s already exists", o->id)
				       : rung_err_sys(err, errno, "mkdir %s", x->dir);
	x->dir_made = true;
	snprintf(x->st.id, sizeof(x->st.id), "%s", o->id);
	snprintf(x->st.bundle, sizeof(x->st.bundle), "%s", x->cfg.bundle);
	if (!x->cfg.spec_userns && (r = oci_uid_slot_claim(o->root, &x->st.uid_slot, err)) < 0)
		return r;
	char fifo[PATH_MAX + 16];
	snprintf(fifo, sizeof(fifo), "%s/exec.fifo", x->dir);
	if (mkfifo(fifo, 0600) < 0 || (x->fifo = open(fifo, O_RDWR | O_CLOEXEC)) < 0)
		return rung_err_sys(err, errno, "exec fifo %s", fifo);
	if (o->console_socket && (x->console = oci_console_connect(o->console_socket, err)) < 0)
		return x->console;
	if ((x->cfg.netns_path && (r = home_keep(x, 0, err)) < 0) ||
	    (x->cfg.ipc_join.path && (r = home_keep(x, 1, err)) < 0) ||
	    (x->cfg.uts_join.path && (r = home_keep(x, 2, err)) < 0))
		return r;
	if (x->cfg.netns_path) {
		cleanup_close int nfd = open(x->cfg.netns_path, O_RDONLY | O_CLOEXEC);
		if (nfd < 0 || setns(nfd, CLONE_NEWNET) < 0)
			return rung_err_sys(err, errno, "linux.namespaces[network].path %s",
					    x->cfg.netns_path);
	}
	if ((r = oci_ns_join(&x->cfg, err)) < 0) /* a pod's ipc and uts (nsjoin.c) */
		return r;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, x->sync) < 0)
		return rung_err_sys(err, errno, "socketpair");
	return 0;
}

static int spawn(struct create_ctx *x, struct rung_err *err)
{
	int flags = x->cfg.ns_flags & ~CLONE_NEWCGROUP; /* the init unshares it once in its group */
	long pid = rt_cgroup_birth_clone(&x->birth, (unsigned long)flags | SIGCHLD);
	if (pid < 0)
		return rung_err_ns(err, (int)-pid, flags & CLONE_NEWUSER,
				   "clone the container's init");
	if (pid == 0) {
		close(x->sync[0]);
		int e = rt_cgroup_birth_enter(&x->birth); /* v1: into its group, first */
		if (e < 0) {
			struct oci_sync_msg m = {.tag = OCI_SYNC_ERROR};
			rung_err_sys(&m.err, -e, "linux.cgroupsPath %s: enter", x->st.cgroup);
			(void)!write(x->sync[1], &m, sizeof(m));
			_exit(127);
		}
		for (int i = 0; i < 3; i++) /* the init keeps no handle on the host's namespaces */
			if (x->home[i] >= 0)
				close(x->home[i]);
		struct oci_init_args a = {.sync_fd = x->sync[1], .fifo_fd = x->fifo,
					  .console_fd = x->console, .bpf = x->bpf,
					  .bpf_len = x->bpf_len, .spec_bpf = x->spec_bpf,
					  .spec_bpf_len = x->spec_bpf_len, .no_pivot = x->o->no_pivot};
		oci_init_run(&x->cfg, &a);
	}
	x->pid = (pid_t)pid;
	x->born = rt_cgroup_born(&x->birth);
	rt_cgroup_birth_close(&x->birth);
	close(x->sync[1]);
	x->sync[1] = -1;
	return 0;
}

static int finish(struct create_ctx *x, struct rung_err *err)
{
	return oci_create_record(x->o->root, &x->st, x->pid, x->cfg.annotations, x->pid_file, err);
}

static void undo(struct create_ctx *x)
{
	if (x->pid > 0) {
		kill(x->pid, SIGKILL);
		waitpid(x->pid, NULL, 0);
	}
	if (x->cg) {
		struct rung_err e = {0};
		rt_cgroup_destroy(x->cg, &e);
		oci_cgroup_cpuset_remove(rt_cgroup_name(x->cg));
	}
	if (x->dir_made) {
		struct rung_err e = {0};
		oci_egress_down(x->o->root, x->o->id, &e);
		rung_rm_rf(x->dir, &e);
	}
	oci_uid_slot_release(x->o->root, x->st.uid_slot);
}

int oci_create(const struct oci_create_opts *o, struct rung_err *err)
{
	bool vm = false; /* the rung: the runtime's, raised by the bundle's annotation (vm.h) */
	int v = oci_vm_wanted(o, &vm, err);
	if (v < 0 || vm)
		return v < 0 ? v : oci_vm_create(o, err);
	struct create_ctx x = {.o = o, .sync = {-1, -1}, .fifo = -1, .console = -1, .rootfd = -1,
			       .st.uid_slot = OCI_UID_SLOTS, /* none claimed yet: none to give back */
			       .home = {-1, -1, -1}, .birth = RT_CGROUP_BIRTH_NONE};
	/* nothing of the caller's but stdio reaches the container */
	syscall(SYS_close_range, 3, ~0u, 4 /* CLOSE_RANGE_CLOEXEC */);
	int r = prepare(&x, err);
	if (r == 0 && !x.cfg.hostname && !x.cfg.uts_join.path) { /* the id, never the host's */
		snprintf(x.hostname, sizeof(x.hostname), "%.63s", o->id);
		x.cfg.hostname = x.hostname;
	}
	if (r == 0 && !x.cfg.spec_userns && oci_rootfs_is_overlay(x.cfg.rootfs)) /* overlay.c */
		r = oci_overlay_take(x.cfg.rootfs, x.ovl_opts, sizeof(x.ovl_opts), err);
	if (r == 0) /* in the joined netns (prepare): its table and DNS proxy */
		r = oci_egress_up(&x.cfg, o->root, o->id, err);
	if (r == 0)
		r = cgroup_make(&x, err);
	if (r == 0)
		r = spawn(&x, err);
	if (r == 0)
		r = home_return(&x, err);
	if (r == 0)
		r = drive(&x, err);
	if (r == 0)
		r = finish(&x, err);
	if (r < 0)
		undo(&x);
	for (int i = 0; i < 2; i++)
		if (x.sync[i] >= 0)
			close(x.sync[i]);
	if (x.fifo >= 0)
		close(x.fifo);
	if (x.console >= 0)
		close(x.console);
	if (x.rootfd >= 0)
		close(x.rootfd);
	for (int i = 0; i < 3; i++)
		if (x.home[i] >= 0)
			close(x.home[i]);
	free(x.bpf);
	free(x.spec_bpf);
	rt_cgroup_birth_close(&x.birth);
	rt_cgroup_free(x.cg);
	oci_state_release(&x.st);
	oci_config_release(&x.cfg);
	return r;
}

/* Let the init exec: one byte on the fifo, and return once the program is exec'd. */
static int start_program(const char *root, const char *id, struct rung_err *err)
{
	char p[PATH_MAX];
	oci_state_path(root, id, "exec.fifo", p, sizeof(p));
	cleanup_close int fd = open(p, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return rung_err_sys(err, errno, "container %s: its init is not waiting", id);
	if (unlink(p) < 0)
		return rung_err_sys(err, errno, "container %s: remove %s", id, p);
	if (write(fd, "0", 1) != 1)
		return rung_err_sys(err, errno, "container %s: start its init", id);
	/* Return once the program is exec'd: the init's end of the fifo is close-on-exec, so a
	 * write fails with EPIPE when no reader is left (the caller ignores SIGPIPE). A signal
	 * sent right after start then finds the program, not the init. */
	for (int i = 0; i < 10000; i++) {
		if (write(fd, "0", 1) < 0)
			return errno == EPIPE ? 0 : rung_err_sys(err, errno, "container %s: start", id);
		nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
	}
	return 0; /* still not exec'd after 10 s: started all the same */
}

int oci_start(const char *root, const char *id, struct rung_err *err)
{
	struct oci_state st;
	int r = oci_state_read(root, id, &st, err);
	if (r < 0)
		return r;
	enum oci_status s = oci_status_of(root, &st);
	if (s != OCI_CREATED)
		r = rung_err_set(err, EINVAL, "container %s is %s, not created", id,
				 oci_status_name(s));
	/* a failing startContainer hook stops the container (the spec): delete is the caller's */
	if (r == 0 && (r = oci_hooks_start(&st, false, err)) < 0)
		kill(st.pid, SIGKILL);
	if (r == 0)
		r = start_program(root, id, err);
	if (r == 0)
		r = oci_hooks_start(&st, true, err);
	oci_state_release(&st);
	return r;
}
