/*
 * runtime/backend-vm.c: the `vm` rung. The sandbox's code runs under its own guest kernel in
 * rung-vmm (vmm/), and rung-agent is the guest's init, reached through virtio-vsock bridged to
 * the same agent socket as every other rung. rung-vmm runs jailed, Firecracker-style: new
 * mount, pid, net, ipc and uts namespaces, chrooted into a directory holding only the kernel,
 * the initramfs and the two disks, as the sandbox's unprivileged uid with every capability
 * dropped and no_new_privs; /dev/kvm and the agent socket come in as open fds; rung-vmm itself
 * installs a seccomp filter per thread. With an egress allowlist the VM gets one virtio-net
 * device: its frames go to a tap in the host netns (fd 7) behind the sandbox's netpolicy table,
 * and the guest kernel configures eth0 from the ip= parameter.
 */
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/capability.h>

#include "common/nshint.h"
#include "rootfs/rfs.h"
#include "runtime/rt-internal.h"

/* The guest kernel and initramfs: the router's vm_kernel / vm_initrd, else vm/ beside rung-vmm. */
static void guest_paths(const struct rung_router *r, char *kernel, char *initrd, size_t len)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", r->vmm_path);
	const char *d = dirname(dir);
	const char *k = r->vm_kernel, *i = r->vm_initrd;
	if (k)
		snprintf(kernel, len, "%s", k);
	else
		snprintf(kernel, len, "%s/vm/bzImage", d);
	if (i)
		snprintf(initrd, len, "%s", i);
	else
		snprintf(initrd, len, "%s/vm/initramfs.cpio.gz", d);
}

/*
 * Is KVM usable for a real guest? A /dev/kvm can exist without hardware virtualisation (e.g.
 * kvm_pvm, where a stock kernel never boots): `rung-vmm --probe` answers, and the answer is
 * cached in the store for this boot and this rung-vmm binary.
 */
static bool kvm_works(const struct rung_router *r, struct rung_err *err)
{
	char key[256] = "", cache[4096], line[512] = "";
	cleanup_free char *boot = NULL, *cached = NULL;
	struct stat st;
	if (rung_file_load(AT_FDCWD, "/proc/sys/kernel/random/boot_id", 64, &boot, NULL, NULL) == 0 &&
	    stat(r->vmm_path, &st) == 0)
		snprintf(key, sizeof(key), "%.36s %lld.%09ld\n", boot, (long long)st.st_mtim.tv_sec,
			 st.st_mtim.tv_nsec);
	snprintf(cache, sizeof(cache), "%s/vm-probe", r->store.root);
	if (key[0] && rung_file_load(AT_FDCWD, cache, 1024, &cached, NULL, NULL) == 0 &&
	    !strncmp(cached, key, strlen(key))) {
		char *verdict = cached + strlen(key);
		verdict[strcspn(verdict, "\n")] = '\0';
		if (!strcmp(verdict, "ok"))
			return true;
		rung_err_set(err, ENODEV, "KVM cannot run a guest here: %s", verdict);
		return false;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe"), false;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 2);
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		char *argv[] = {"rung-vmm", "--probe", NULL}, *envp[] = {NULL};
		execve(r->vmm_path, argv, envp);
		_exit(127);
	}
	close(p[1]);
	ssize_t n = pid > 0 ? read(p[0], line, sizeof(line) - 1) : -1;
	close(p[0]);
	int status = 1;
	if (pid > 0)
		waitpid(pid, &status, 0);
	line[n > 0 ? n : 0] = '\0';
	line[strcspn(line, "\n")] = '\0';
	bool ok = pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
	if (!ok && !line[0])
		snprintf(line, sizeof(line), "rung-vmm --probe failed (status 0x%x)", status);
	if (key[0]) {
		char txt[1024];
		int len = snprintf(txt, sizeof(txt), "%s%s\n", key, ok ? "ok" : line);
		rung_write_file_replace(AT_FDCWD, cache, txt, (size_t)len, 0600, NULL);
	}
	if (!ok)
		rung_err_set(err, ENODEV, "KVM cannot run a guest here: %s", line);
	return ok;
}

static bool vm_available(const struct rung_router *r, struct rung_err *err)
{
	char kernel[4096], initrd[4096];
	guest_paths(r, kernel, initrd, sizeof(kernel));
	/* KVM first: without it, nothing else matters (and the guest files are worth building) */
	const char *need[][2] = {{"/dev/kvm", "KVM (/dev/kvm)"},
				 {r->vmm_path, "rung-vmm"},
				 {kernel, "the guest kernel (make guest-kernel)"},
				 {initrd, "the guest initramfs (make vm-initramfs)"}};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(need); i++) {
		if (access(need[i][0], R_OK) < 0) {
			rung_err_sys(err, errno, "%s at %s", need[i][1], need[i][0]);
			return false;
		}
		if (i == 1 && !kvm_works(r, err))
			return false;
	}
	return true;
}

/*
 * The vm rung's CPU: ceil(cpus) vCPUs, 1 to 4 (more is refused), and for a fractional limit a
 * CFS quota per 100 ms on the guest's command cgroup (*quota_us, 0: none; agent/vm-cgroup.c),
 * as on the other rungs. The host's own bound on the guest is its vCPUs.
 */
int rt_vm_cpus(const struct rung_limits *l, unsigned *out, unsigned *quota_us,
	       struct rung_err *err)
{
	if (l->cpus_milli < 10 || l->cpus_milli > 4000)
		return rung_err_set(err, ENOTSUP,
				    "limits.cpus: the vm rung runs 1 to 4 vCPUs; %.3f cannot be "
				    "enforced there",
				    l->cpus_milli / 1000.0);
	*out = (l->cpus_milli + 999) / 1000;
	*quota_us = l->cpus_milli % 1000 ? l->cpus_milli * 100 : 0;
	return 0;
}

static int vm_prepare(struct rt_sandbox *sb, struct rung_err *err)
{
	char **lowers = NULL;
	char disk[4096];
	unsigned cpus, quota;
	int r = rt_vm_cpus(&sb->meta.spec.limits, &cpus, &quota, err);
	if (r < 0)
		return r;
	r = rt_image_lease(sb, "vm", &lowers, err);
	if (r < 0)
		return r;
	rung_trace("vm: image leased");
	const char *digest = json_string_value(json_object_get(sb->meta.backend, "image_digest"));
	r = rfs_vm_base_disk(sb->router->store.root, digest, lowers, disk, sizeof(disk), err);
	rung_strvfreep(&lowers);
	rung_trace("vm: base disk ready");
	if (r == 0 && json_object_set_new(sb->meta.backend, "base_disk", json_string(disk)) < 0)
		r = rung_err_set(err, ENOMEM, "out of memory");
	if (r < 0) {
		rt_image_release(sb);
		return rung_err_wrap(err, "image %s", sb->meta.spec.image);
	}
	if (sb->meta.spec.from_snapshot && (r = rt_template_clone(sb, err)) < 0) /* vm-template.c */
		rt_image_release(sb);
	return r;
}

struct jail {
	char dir[4096];
	const char *src[5]; /* kernel, initrd, base disk, upper disk[, snapshot] */
	int dst[5];         /* their bind targets in the jail, O_PATH (checked regular files) */
	int n;              /* 4, or 5 to restore from the snapshot (--restore) */
	bool clone;         /* restoring a template (vm-template.c), not a resume */
	int vmm_fd, kvm_fd, listen_fd;
	int log_fd;         /* restoring: the VMM's stderr (vmm.err), else -1 */
	const struct rt_vm_net *net; /* tap_fd -1: no network device */
	uid_t uid;
	char mem[16], cpus[8];
	char cmdline[704]; /* the guest's rung.* keys (agent/vm-init.h) and the network's */
	int err_fd;
};

static const char *const jail_names[5] = {"bzImage", "initrd", "base.ext4", "upper.ext4",
					  "restore.snap"};

static void jail_fail(int fd, struct rung_err *e)
{
	rung_write_all(fd, e, sizeof(*e));
	_exit(127);
}

/* pid 1 of the VMM's namespaces: bind the four files in, chroot, drop everything, exec. */
static void jail_child(struct jail *j)
{
	struct rung_err err = {0};
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		jail_fail(j->err_fd, (rung_err_sys(&err, errno, "private mounts"), &err));
	/* Onto the very files vm_start checked, never a path the VMM could have relinked. Its
	 * fds belong to the mount namespace this one was copied from (a mount target must be
	 * in ours), so each is found again here, without following, and must be the same
	 * inode; the bind is made detached with its flags set, then attached through that fd. */
	cleanup_close int jd = open(j->dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (jd < 0)
		jail_fail(j->err_fd, (rung_err_sys(&err, errno, "open %s", j->dir), &err));
	for (int i = 0; i < j->n; i++) {
		struct stat want, got;
		int tfd = openat(jd, jail_names[i], O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (tfd < 0 || fstat(tfd, &got) < 0 || fstat(j->dst[i], &want) < 0)
			jail_fail(j->err_fd,
				  (rung_err_sys(&err, errno, "open %s/%s", j->dir, jail_names[i]), &err));
		if (!S_ISREG(got.st_mode) || got.st_dev != want.st_dev || got.st_ino != want.st_ino)
			jail_fail(j->err_fd, (rung_err_set(&err, EPERM, "%s/%s was replaced",
							   j->dir, jail_names[i]),
					      &err));
		struct mount_attr a = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
						   MOUNT_ATTR_NOEXEC |
						   (i != 3 ? MOUNT_ATTR_RDONLY : 0)};
		int m = (int)syscall(SYS_open_tree, AT_FDCWD, j->src[i],
				     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (m < 0 || syscall(SYS_mount_setattr, m, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0 ||
		    syscall(SYS_move_mount, m, "", tfd, "",
			    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
			jail_fail(j->err_fd, (rung_err_sys(&err, errno, "bind %s", j->src[i]), &err));
		close(m);
		close(tfd);
	}
	if (chdir(j->dir) < 0 || chroot(".") < 0 || chdir("/") < 0)
		jail_fail(j->err_fd, (rung_err_sys(&err, errno, "chroot %s", j->dir), &err));
	/* fds: 0-2 closed, 3 agent socket, 4 /dev/kvm, 5 error pipe, 6 vmm, 7 the tap. Every
	 * source goes above them first, so that no dup2 overwrites another source. */
	if (j->log_fd >= 0 && dup2(j->log_fd, 2) < 0)
		jail_fail(j->err_fd, (rung_err_sys(&err, errno, "arrange fds"), &err));
	int src[5] = {j->listen_fd, j->kvm_fd, j->err_fd, j->vmm_fd, j->net->tap_fd};
	int nfd = j->net->tap_fd >= 0 ? 5 : 4;
	for (int i = 0; i < nfd; i++)
		if ((src[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 16)) < 0)
			jail_fail(j->err_fd, (rung_err_sys(&err, errno, "arrange fds"), &err));
	j->err_fd = src[2];
	for (int i = 0; i < nfd; i++)
		if (dup2(src[i], 3 + i) < 0)
			jail_fail(j->err_fd, (rung_err_sys(&err, errno, "arrange fds"), &err));
	j->err_fd = 5;
	fcntl(5, F_SETFD, FD_CLOEXEC);
	fcntl(6, F_SETFD, FD_CLOEXEC);
	syscall(SYS_close_range, 3 + nfd, ~0U, 0);
	for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++)
		cap_drop_bound(c);
	/* The uid change cleared the parent-death signal set above (the kernel does on any
	 * credential change): set again, so that a supervisor killed outright takes its VMM. */
	if (setgroups(0, NULL) < 0 || setresgid(j->uid, j->uid, j->uid) < 0 ||
	    setresuid(j->uid, j->uid, j->uid) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		jail_fail(j->err_fd, (rung_err_sys(&err, errno, "drop privileges"), &err));
	char *argv[32] = {"rung-vmm",   "--kernel",     "/bzImage",      "--initrd",
			  "/initrd",    "--disk",       "/base.ext4,ro", "--disk",
			  "/upper.ext4", "--mem",       j->mem,          "--cpus",
			  j->cpus,      "--serial-log", "/console.log",  "--vsock-fd",
			  "3",          "--kvm-fd",     "4",             "--control",
			  "/control.sock"};
	int argc = 21;
	if (j->n == 5) { /* the snapshot replaces the kernel and initrd (and the cmdline) */
		argv[1] = "--restore", argv[2] = "/restore.snap";
		memmove(&argv[3], &argv[5], (size_t)(argc - 5) * sizeof(char *));
		argc -= 2;
	}
	if (j->net->tap_fd >= 0) {
		char *more[] = {"--net-fd", "7", "--net-mac", (char *)j->net->mac};
		for (size_t i = 0; i < RUNG_ARRAY_SIZE(more); i++)
			argv[argc++] = more[i];
	}
	if (j->n != 5) {
		argv[argc++] = "--cmdline";
		argv[argc++] = j->cmdline;
	}
	argv[argc] = NULL;
	char *envp[] = {NULL};
	syscall(SYS_execveat, 6, "", argv, envp, AT_EMPTY_PATH);
	jail_fail(j->err_fd, (rung_err_sys(&err, errno, "exec rung-vmm"), &err));
}

/*
 * The last line the guest printed, for an error message: guest-controlled bytes, so printable
 * ASCII only, and opened without following links (the jail dir belongs to the sandbox's uid).
 */
static void console_tail(const char *jail, const char *name, char *out, size_t len)
{
	char path[4200], buf[4096];
	out[0] = '\0';
	snprintf(path, sizeof(path), "%s/%s", jail, name);
	cleanup_close int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	off_t at = st.st_size > (off_t)sizeof(buf) - 1 ? st.st_size - (off_t)sizeof(buf) + 1 : 0;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, at);
	if (n <= 0)
		return;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	buf[n] = '\0';
	const char *line = strrchr(buf, '\n') ? strrchr(buf, '\n') + 1 : buf;
	size_t k = 0;
	for (; *line && k + 1 < len; line++)
		out[k++] = *line >= 0x20 && *line < 0x7f ? *line : '?';
	out[k] = '\0';
}

static int wait_ready(const char *sock, pid_t vmm, unsigned timeout_ms, struct rung_err *err)
{
	uint64_t end = rung_now_ms() + timeout_ms;
	struct rung_err e2 = {0};
	while (rung_now_ms() < end) {
		if (waitpid(vmm, NULL, WNOHANG) == vmm)
			return rung_err_set(err, ECHILD, "rung-vmm exited during boot (see console.log)");
		int fd = rt_agent_connect(sock, &e2);
		if (fd >= 0) {
			int r = rt_agent_ping(fd, 2000, &e2);
			close(fd);
			if (r == 0)
				return 0;
		}
		usleep(50 * 1000);
	}
	return rung_err_set(err, ETIMEDOUT, "guest agent not ready after %u ms: %s", timeout_ms,
			    e2.msg);
}

static void jail_release(struct jail *j)
{
	for (int i = 0; i < 5; i++)
		rung_closep(&j->dst[i]);
	rung_closep(&j->log_fd);
	rung_closep(&j->kvm_fd);
	rung_closep(&j->vmm_fd);
}

/* Bind targets. The jail belongs to the VMM's uid, and a VMM of an earlier life may have left
 * links, fifos or directories there: each target is opened without following or blocking,
 * must be a regular file, and is mounted on through its fd (dst: the caller closes them). */
static int jail_targets(const char *jail, int dst[5], int n, struct rung_err *err)
{
	cleanup_close int jfd = open(jail, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (jfd < 0)
		return rung_err_sys(err, errno, "open jail dir %s", jail);
	for (int i = 0; i < n; i++) {
		cleanup_close int fd = openat(jfd, jail_names[i], O_RDONLY | O_CREAT | O_NOFOLLOW |
							      O_NONBLOCK | O_CLOEXEC, 0600);
		struct stat fst;
		if (fd < 0)
			return rung_err_sys(err, errno, "create %s/%s", jail, jail_names[i]);
		if (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode))
			return rung_err_set(err, EPERM, "%s/%s is not a regular file", jail,
					    jail_names[i]);
		dst[i] = rung_steal_fd(&fd);
	}
	return 0;
}

/* Clone rung-vmm into its jail (jail_child): its pid once it exec'd (EOF on the error pipe),
 * or its report of a failed setup (it is reaped). */
static pid_t jail_spawn(struct jail *j, const char *vmm_path, struct rung_err *err)
{
	cleanup_close int ep_r = -1, ep_w = -1;
	int ep[2];
	j->kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	j->vmm_fd = open(vmm_path, O_PATH | O_CLOEXEC);
	if (j->kvm_fd < 0 || j->vmm_fd < 0 || pipe2(ep, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "open /dev/kvm, rung-vmm or a pipe");
	ep_r = ep[0], ep_w = ep[1];
	j->err_fd = ep_w;
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
						      CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD,
				   NULL, NULL, NULL, 0);
	if (pid < 0)
		return rung_err_ns(err, errno, false, "clone the VMM's namespaces");
	if (pid == 0) {
		close(ep_r);
		jail_child(j); /* never returns */
	}
	rung_closep(&ep_w);
	struct rung_err cerr;
	ssize_t n = read(ep_r, &cerr, sizeof(cerr));
	if (n == (ssize_t)sizeof(cerr)) {
		*err = cerr;
		err->msg[sizeof(err->msg) - 1] = '\0';
		waitpid(pid, NULL, 0);
		return -(err->code ? err->code : EIO);
	}
	return pid;
}

/* Start rung-vmm in its jail and wait for the guest's agent: the VMM's pid. */
static int vm_boot(struct rt_sandbox *sb, struct jail *j, struct rung_err *err)
{
	const struct rung_spec *s = &sb->meta.spec;
	unsigned cpus = 1, quota = 0;
	(void)rt_vm_cpus(&s->limits, &cpus, &quota, err); /* checked by vm_prepare */
	snprintf(j->cpus, sizeof(j->cpus), "%u", cpus);
	snprintf(j->mem, sizeof(j->mem), "%llu", (unsigned long long)(s->limits.memory_bytes >> 20));
	/* The guest's agent runs every command in a cgroup of the guest's own, with this
	 * pids.max and CPU quota (agent/vm-cgroup.c): the agent itself stays outside it. */
	char q[32] = "";
	if (quota)
		snprintf(q, sizeof(q), " rung.cpu_quota=%u", quota);
	snprintf(j->cmdline, sizeof(j->cmdline), "rung.pids=%u%s%s%s", s->limits.pids, q,
		 j->net->tap_fd >= 0 ? " " : "", j->net->tap_fd >= 0 ? j->net->cmdline : "");
	pid_t pid = jail_spawn(j, sb->router->vmm_path, err);
	if (pid < 0)
		return (int)pid;
	rung_trace("vm: rung-vmm started in its jail");
	char sock[4096];
	rt_store_path(&sb->router->store, sb->meta.id, "agent.sock", sock, sizeof(sock));
	int r = wait_ready(sock, pid, sb->router->vm_boot_timeout_ms, err);
	if (r < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		char last[160];
		console_tail(j->dir, "console.log", last, sizeof(last));
		if (last[0] && j->n == 4)
			rung_err_wrap(err, "guest console's last line: \"%s\"", last);
		if (j->n == 5) {
			char dir[4096];
			snprintf(dir, sizeof(dir), "%s", j->dir);
			console_tail(dirname(dir), "vmm.err", last, sizeof(last));
			char why[sizeof(err->msg)];
			snprintf(why, sizeof(why), "%s", last[0] ? last : err->msg);
			rung_err_set(err, EIO, "restore from the snapshot %s failed: %s", j->src[4],
				     why);
		}
		return r;
	}
	rung_trace("vm: agent ready");
	if (j->n == 5 && (r = rt_vm_fixup(sb, j->clone, err)) < 0) { /* before any other use */
		rung_trace("vm: fix-ups failed");
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return rung_err_wrap(err, "restore from the snapshot %s", j->src[4]);
	}
	if (j->n == 5)
		rung_trace("vm: fix-ups applied");
	return pid;
}

static int vm_start(struct rt_sandbox *sb, int listen_fd, struct rung_err *err)
{
	const struct rung_spec *s = &sb->meta.spec;
	struct rt_store *st = &sb->router->store;
	char kernel[4096], initrd[4096], upper[4096], jail[4096], snap[4096], vlog[4096];
	guest_paths(sb->router, kernel, initrd, sizeof(kernel));
	const char *base = json_string_value(json_object_get(sb->meta.backend, "base_disk"));
	if (!base)
		return rung_err_set(err, EINVAL, "vm metadata lacks the base disk");
	rt_store_path(st, sb->meta.id, "upper.ext4", upper, sizeof(upper));
	int r = rfs_vm_upper_disk(upper, s->limits.disk_bytes, sb->meta.uid_base, err);
	if (r < 0)
		return r;
	rung_trace("vm: upper disk ready");
	rt_store_path(st, sb->meta.id, "jail", jail, sizeof(jail));
	if ((mkdir(jail, 0700) < 0 && errno != EEXIST) ||
	    chown(jail, sb->meta.uid_base, sb->meta.uid_base) < 0)
		return rung_err_sys(err, errno, "jail dir %s", jail);
	/* Resuming from disk (vm-snap.c): the metadata names the file and it is there. A file
	 * the metadata does not name is a stale one: a boot does not use it. */
	rt_vm_snap_drop_stale(sb);
	bool restore = rt_vm_snap_path(sb, snap, sizeof(snap));
	if (restore && !json_object_get(sb->meta.backend, "snapshot"))
		restore = (unlink(snap), false);
	bool clone = !restore && rt_template_pending(sb, snap, sizeof(snap));
	__attribute__((cleanup(jail_release))) struct jail j = {
	    .src = {kernel, initrd, base, upper, snap}, .dst = {-1, -1, -1, -1, -1},
	    .n = restore || clone ? 5 : 4, .clone = clone, .vmm_fd = -1, .kvm_fd = -1, .listen_fd = listen_fd,
	    .uid = sb->meta.uid_base, .err_fd = -1, .log_fd = -1};
	snprintf(j.dir, sizeof(j.dir), "%s", jail);
	rt_store_path(st, sb->meta.id, "vmm.err", vlog, sizeof(vlog));
	if (j.n == 5) /* its error line names what is wrong with the file (a boot's: supervisor.log) */
		j.log_fd = open(vlog, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if ((r = jail_targets(jail, j.dst, j.n, err)) < 0)
		return r;
	struct rt_vm_net net;
	if ((r = rt_net_setup_vm(sb, &net, err)) < 0)
		return r;
	rung_trace("vm: network ready");
	j.net = &net;
	if ((r = vm_boot(sb, &j, err)) < 0)
		rt_net_teardown(sb);
	else if (clone)
		rt_template_done(sb); /* a later start boots: the disk has moved on */
	else if (restore) { /* this supervisor's copy: running, not on disk (vm_resume) */
		json_object_del(sb->meta.backend, "snapshot");
		sb->meta.state = RUNG_STATE_RUNNING;
	}
	return r;
}

/*
 * The VMM's control socket lives in its jail, a directory the VMM's uid owns: it could put a
 * link there to any socket on the host. So: open the entry itself (O_PATH|O_NOFOLLOW), require
 * a socket owned by the VMM's uid, and connect through that very inode (/proc/self/fd/N).
 */
int rt_vm_control_connect(const char *jail, uid_t owner, struct rung_err *err)
{
	cleanup_close int dfd = open(jail, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return rung_err_sys(err, errno, "open the VMM's jail %s", jail);
	cleanup_close int sfd = openat(dfd, "control.sock", O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return rung_err_sys(err, errno, "open %s/control.sock", jail);
	struct stat st;
	if (fstat(sfd, &st) < 0)
		return rung_err_sys(err, errno, "stat %s/control.sock", jail);
	if (!S_ISSOCK(st.st_mode))
		return rung_err_set(err, EPERM, "%s/control.sock is not a socket (mode 0%o)", jail,
				    (unsigned)st.st_mode);
	if (st.st_uid != owner)
		return rung_err_set(err, EPERM, "%s/control.sock belongs to uid %u, not the VMM's %u",
				    jail, (unsigned)st.st_uid, (unsigned)owner);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d", sfd);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return rung_err_sys(err, e, "connect to %s/control.sock", jail);
	}
	return fd;
}

int rt_vm_control(struct rt_sandbox *sb, const char *cmd, unsigned timeout_s, struct rung_err *err)
{
	char jail[4096];
	rt_store_path(&sb->router->store, sb->meta.id, "jail", jail, sizeof(jail));
	cleanup_close int fd = rt_vm_control_connect(jail, sb->meta.uid_base, err);
	if (fd < 0)
		return rung_err_wrap(err, "rung-vmm control");
	char line[64], reply[128] = "";
	snprintf(line, sizeof(line), "%s\n", cmd);
	if (rung_write_all(fd, line, strlen(line)) < 0)
		return rung_err_sys(err, errno, "rung-vmm control");
	struct timeval tv = {.tv_sec = timeout_s};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ssize_t n = read(fd, reply, sizeof(reply) - 1);
	if (n <= 0)
		return rung_err_set(err, EIO, "rung-vmm control: no answer to %s", cmd);
	reply[n] = '\0';
	if (strncmp(reply, "ok", 2))
		return rung_err_set(err, EIO, "rung-vmm control: %s: %.100s", cmd, reply);
	return 0;
}

static int vm_suspend(struct rt_sandbox *sb, struct rung_err *err)
{
	return rt_vm_control(sb, "pause", 10, err);
}

static int vm_resume(struct rt_sandbox *sb, struct rung_err *err)
{
	struct rung_err e2 = {0};
	if (rt_meta_on_disk(&sb->meta))
		return rt_vm_resume_disk(sb, err ? err : &e2);
	rt_vm_snap_drop_stale(sb);
	return rt_vm_control(sb, "resume", 10, err ? err : &e2);
}

static void vm_teardown(struct rt_sandbox *sb)
{
	/* the VMM's namespaces die with it; the disks stay until dispose; the network is ours */
	rt_net_teardown(sb);
}

static void vm_cleanup(struct rt_sandbox *sb)
{
	rt_net_teardown(sb);
	rt_image_release(sb);
}

const struct rt_backend_ops rt_backend_vm = {
	.name = "vm",
	.iso = RUNG_ISO_VM,
	.caps = RUNG_CAP_EXEC | RUNG_CAP_RUN_CODE | RUNG_CAP_FS_PERSIST | RUNG_CAP_INSTALL |
		RUNG_CAP_HOST_CALLBACKS,
	.available = vm_available,
	.prepare = vm_prepare,
	.start = vm_start,
	.teardown = vm_teardown,
	.kill_ends_suspended = true, /* SIGKILL ends a paused rung-vmm */
	.suspend = vm_suspend,
	.resume = vm_resume,
	.suspend_disk = rt_vm_suspend_disk,
	.cleanup = vm_cleanup,
};
