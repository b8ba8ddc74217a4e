/*
 * oci/init.c: the container's init, from clone to execve. It waits for the parent to write
 * its id maps and cgroup, makes its mounts private, waits for the rootfs to be attached
 * (idmapped to its user namespace), mounts, pivots, drops to process.user with the spec's
 * capabilities (within rung's policy), loads rung's seccomp filter, reports ready, and blocks
 * reading the exec fifo until `start` writes to it. A failure is sent to the parent as a
 * struct rung_err and the init exits 127.
 */
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/oci-internal.h"

static void fail(int sync_fd, const struct rung_err *err)
{
	struct oci_sync_msg m = {.tag = OCI_SYNC_ERROR, .err = *err};
	if (!m.err.msg[0])
		snprintf(m.err.msg, sizeof(m.err.msg), "container init failed");
	(void)!write(sync_fd, &m, sizeof(m));
	_exit(127);
}

static int wait_tag(int fd, char want, struct rung_err *err)
{
	char t = 0;
	if (read(fd, &t, 1) != 1 || t != want)
		return rung_err_set(err, EPIPE, "the runtime went away during create");
	return 0;
}

static int enter_root(const struct oci_config *c, bool no_pivot, struct rung_err *err)
{
	if (chdir(c->rootfs) < 0)
		return rung_err_sys(err, errno, "chdir %s", c->rootfs);
	if (no_pivot) {
		if (mount(c->rootfs, "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0)
			return rung_err_sys(err, errno, "move the root (--no-pivot)");
	} else {
		if (syscall(SYS_pivot_root, ".", ".") < 0)
			return rung_err_sys(err, errno, "pivot_root %s", c->rootfs);
		if (umount2(".", MNT_DETACH) < 0)
			return rung_err_sys(err, errno, "detach the old root");
	}
	if (chdir("/") < 0)
		return rung_err_sys(err, errno, "chdir /");
	return 0;
}

static int sysctl_apply(const struct oci_config *c, struct rung_err *err)
{
	for (size_t i = 0; c->sysctl_keys && c->sysctl_keys[i]; i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "/proc/sys/%s", c->sysctl_keys[i]);
		for (char *q = p + 10; *q; q++)
			if (*q == '.')
				*q = '/';
		cleanup_close int fd = open(p, O_WRONLY | O_CLOEXEC);
		const char *v = c->sysctl_values[i];
		if (fd < 0 || rung_write_all(fd, v, strlen(v)) < 0)
			return rung_err_sys(err, errno, "linux.sysctl.%s", c->sysctl_keys[i]);
	}
	return 0;
}

/* A pty from the container's devpts: the master goes to --console-socket, the slave is stdio. */
int oci_console_apply(int sock, struct rung_err *err)
{
	cleanup_close int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0)
		return rung_err_sys(err, errno, "process.terminal: open /dev/ptmx");
	char name[64];
	if (ptsname_r(master, name, sizeof(name)) != 0)
		return rung_err_sys(err, errno, "process.terminal: ptsname");
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = name, .iov_len = strlen(name)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &master, sizeof(int));
	if (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0)
		return rung_err_sys(err, errno, "--console-socket: send the terminal");
	if (setsid() < 0)
		return rung_err_sys(err, errno, "setsid");
	cleanup_close int slave = open(name, O_RDWR | O_CLOEXEC);
	if (slave < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
		return rung_err_sys(err, errno, "process.terminal: open %s", name);
	for (int fd = 0; fd < 3; fd++)
		if (dup2(slave, fd) < 0)
			return rung_err_sys(err, errno, "process.terminal: dup2");
	return 0;
}

int oci_identity_apply(const struct oci_config *c, struct rung_err *err)
{
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (!(c->caps[OCI_CAP_BOUNDING] >> cap & 1) &&
		    prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return rung_err_sys(err, errno, "process.capabilities.bounding: drop %d", cap);
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		return rung_err_sys(err, errno, "keepcaps");
	if (setgroups(c->ngids, c->gids) < 0)
		return rung_err_sys(err, errno, "process.user.additionalGids");
	if (setresgid(c->gid, c->gid, c->gid) < 0)
		return rung_err_sys(err, errno, "process.user.gid %u", (unsigned)c->gid);
	if (setresuid(c->uid, c->uid, c->uid) < 0)
		return rung_err_sys(err, errno, "process.user.uid %u", (unsigned)c->uid);
	cap_t caps = cap_init();
	if (!caps)
		return rung_err_sys(err, errno, "cap_init");
	static const cap_flag_t flags[] = {CAP_EFFECTIVE, CAP_INHERITABLE, CAP_PERMITTED};
	static const int sets[] = {OCI_CAP_EFFECTIVE, OCI_CAP_INHERITABLE, OCI_CAP_PERMITTED};
	for (size_t s = 0; s < 3; s++)
		for (cap_value_t cap = 0; cap <= CAP_LAST_CAP; cap++)
			if (c->caps[sets[s]] >> cap & 1)
				cap_set_flag(caps, flags[s], 1, &cap, CAP_SET);
	int r = cap_set_proc(caps);
	cap_free(caps);
	if (r < 0)
		return rung_err_sys(err, errno, "process.capabilities");
	/* an ambient capability needs to be permitted and inheritable (as runc, others skipped) */
	uint64_t ambient = c->caps[OCI_CAP_AMBIENT] & c->caps[OCI_CAP_PERMITTED] &
			   c->caps[OCI_CAP_INHERITABLE];
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		if ((ambient >> cap & 1) &&
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
			return rung_err_sys(err, errno, "process.capabilities.ambient: %d", cap);
	return 0;
}

int oci_seccomp_load(const void *bpf, size_t len, struct rung_err *err)
{
	struct sock_fprog prog = {.len = (unsigned short)(len / sizeof(struct sock_filter)),
				  .filter = (struct sock_filter *)bpf};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return rung_err_sys(err, errno, "load rung's seccomp filter");
	return 0;
}

static int setup(const struct oci_config *c, const struct oci_init_args *a, struct rung_err *err)
{
	if (wait_tag(a->sync_fd, OCI_SYNC_MAPPED, err) < 0)
		return -EPIPE;
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		return rung_err_sys(err, errno, "become root of the user namespace");
	if (c->ns_flags & CLONE_NEWCGROUP && unshare(CLONE_NEWCGROUP) < 0)
		return rung_err_sys(err, errno, "linux.namespaces[cgroup]");
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return rung_err_sys(err, errno, "make the mounts private");
	char tag = OCI_SYNC_PRIVATE;
	int rootfd = -1;
	if (write(a->sync_fd, &tag, 1) != 1 ||
	    oci_sync_recv_fd(a->sync_fd, OCI_SYNC_ROOT, &rootfd, err) < 0)
		return rung_err_set(err, EPIPE, "the runtime went away during create");
	/* the parent attached the idmapped rootfs and sent it open: from here on the root is
	 * the working directory, never looked up by path (rootfd.c); or (a spec's own user
	 * namespace) we bind it */
	struct oci_config here = *c;
	if (rootfd >= 0) {
		int f = fchdir(rootfd);
		close(rootfd);
		if (f < 0)
			return rung_err_sys(err, errno, "root.path: enter %s", c->rootfs);
		here.rootfs = (char *)".";
		c = &here;
	}
	if (c->spec_userns && mount(c->rootfs, c->rootfs, NULL, MS_BIND | MS_REC, NULL) < 0)
		return rung_err_sys(err, errno, "root.path: bind %s", c->rootfs);
	int r = oci_mounts_apply(c, err);
	if (r == 0)
		r = enter_root(c, a->no_pivot, err);
	if (r == 0)
		r = oci_paths_apply(c, err);
	if (r == 0 && c->hostname && !c->uts_join.path && /* a pod's is its sandbox's */
	    sethostname(c->hostname, strlen(c->hostname)) < 0)
		r = rung_err_sys(err, errno, "hostname '%s'", c->hostname);
	if (r == 0)
		r = sysctl_apply(c, err);
	if (r == 0 && a->console_fd >= 0)
		r = oci_console_apply(a->console_fd, err);
	/* rung's filter, loaded while the init still holds CAP_SYS_ADMIN in its user namespace,
	 * so no_new_privs is the spec's choice (process.noNewPrivileges) */
	if (r == 0)
		r = oci_process_finish(c, a->bpf, a->bpf_len, a->spec_bpf, a->spec_bpf_len, err);
	return r;
}

int oci_process_finish(const struct oci_config *c, const void *bpf, size_t bpf_len,
		       const void *spec_bpf, size_t spec_bpf_len, struct rung_err *err)
{
	int r = oci_seccomp_load(bpf, bpf_len, err);
	if (r == 0 && spec_bpf)
		r = oci_seccomp_load(spec_bpf, spec_bpf_len, err);
	if (r == 0)
		r = oci_identity_apply(c, err);
	if (r == 0 && chdir(c->cwd) < 0)
		r = rung_err_sys(err, errno, "process.cwd %s", c->cwd);
	if (r == 0 && c->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		r = rung_err_sys(err, errno, "process.noNewPrivileges");
	return r;
}

void oci_exec_program(const struct oci_config *c)
{
	const char *path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	for (size_t i = 0; c->env && c->env[i]; i++)
		if (strncmp(c->env[i], "PATH=", 5) == 0)
			path = c->env[i] + 5;
	char *const *argv = (char *const *)c->args;
	char *const *envp = (char *const *)(c->env ? c->env : (const char *[]){NULL});
	if (strchr(c->args[0], '/')) {
		execve(c->args[0], argv, envp);
	} else {
		for (const char *p = path; *p;) {
			const char *end = strchrnul(p, ':');
			char full[PATH_MAX];
			snprintf(full, sizeof(full), "%.*s/%s", (int)(end - p), p, c->args[0]);
			execve(full, argv, envp);
			p = *end ? end + 1 : end;
		}
	}
	dprintf(2, "rung-oci: exec %s: %s\n", c->args[0], strerror(errno));
	_exit(127);
}

void oci_init_run(const struct oci_config *c, const struct oci_init_args *a)
{
	struct rung_err err = {0};
	if (setup(c, a, &err) < 0)
		fail(a->sync_fd, &err);
	struct oci_sync_msg m = {.tag = OCI_SYNC_READY};
	if (write(a->sync_fd, &m, sizeof(m)) != (ssize_t)sizeof(m))
		_exit(127);
	close(a->sync_fd);
	char b;
	if (read(a->fifo_fd, &b, 1) != 1)
		_exit(127);
	close(a->fifo_fd);
	oci_exec_program(c);
}
