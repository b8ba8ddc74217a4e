/*
 * oci/egress.c: dev.rung.egress-allow applied in the joined network namespace (docs/oci.md,
 * "The egress annotation"). create (already in that namespace) installs netpolicy's pod table
 * there and starts the DNS proxy: a process of its own that outlives create (rung-oci exits),
 * running as nobody with CAP_NET_ADMIN alone (to fill the table's sets), its pid and start time
 * in <root>/<id>/egress.json; delete kills it and removes the table. One table per namespace:
 * the first container of a pod to ask (under CRI, the sandbox's pause container, which goes
 * last) owns it; a later one in the same namespace finds it and shares it.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <grp.h>
#include <signal.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "netpolicy/np.h"
#include "oci/oci-internal.h"

#define ANN "annotations." OCI_ANN_EGRESS
#define PROXY_UID 65534u /* nobody */

/* The rootfs's etc/resolv.conf (the image's: resolved inside the rootfs, a regular file). */
static int rootfs_resolv(const char *rootfs, char **txt, struct rung_err *err)
{
	cleanup_close int root = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct open_how how = {.flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	cleanup_close int fd = root < 0 ? -1
					: (int)syscall(SYS_openat2, root, "etc/resolv.conf", &how,
						       sizeof(how));
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return rung_err_sys(err, errno, "%s/etc/resolv.conf", rootfs);
	if (!S_ISREG(st.st_mode))
		return rung_err_set(err, EINVAL, "%s/etc/resolv.conf: not a regular file", rootfs);
	return rung_read_fd_all(fd, 1 << 16, txt, NULL, err);
}

/* The pod's resolver: the first nameserver of the resolv.conf the container gets (the spec's
 * mount on /etc/resolv.conf, as CRI gives, else the rootfs's own). */
int oci_egress_resolver(const struct oci_config *c, char ip[64], struct rung_err *err)
{
	char path[PATH_MAX];
	const char *src = NULL;
	for (size_t i = 0; i < c->nmounts; i++)
		if (c->mounts[i].bind && c->mounts[i].src &&
		    !strcmp(c->mounts[i].dst, "/etc/resolv.conf"))
			src = c->mounts[i].src;
	snprintf(path, sizeof(path), "%s", src ? src : "the rootfs's /etc/resolv.conf");
	cleanup_free char *txt = NULL;
	int r = src ? rung_file_load(AT_FDCWD, src, 1 << 16, &txt, NULL, err)
		    : rootfs_resolv(c->rootfs, &txt, err);
	if (r < 0)
		return rung_err_wrap(err, ANN ": the pod's DNS resolver");
	char *save = NULL;
	for (char *l = strtok_r(txt, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		struct in_addr a;
		if (sscanf(l, " nameserver %45s", ip) != 1)
			continue;
		if (inet_pton(AF_INET, ip, &a) != 1)
			return rung_err_set(err, ENOTSUP, ANN ": %s names resolver %s: only an IPv4 "
					    "resolver is supported", path, ip);
		if ((ntohl(a.s_addr) >> 24) == 127)
			return rung_err_set(err, EINVAL, ANN ": %s names a loopback resolver (%s): "
					    "in the pod's namespace that is a process of the pod, "
					    "which the DNS proxy must not trust", path, ip);
		return 0;
	}
	return rung_err_set(err, ENOENT, ANN ": %s: no nameserver line", path);
}

/* What the proxy's loop calls (np_pod_proxy_handle: sockets, epoll, its nfnetlink batches, the
 * host-address refresh through getifaddrs, malloc); anything else fails with EPERM. Built in
 * the proxy itself before its first query, as the last step of its setup. */
static int proxy_seccomp(struct rung_err *err)
{
	static const int allowed[] = {
	    SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(close), SCMP_SYS(poll),
	    SCMP_SYS(epoll_wait), SCMP_SYS(epoll_pwait), SCMP_SYS(epoll_ctl), SCMP_SYS(socket),
	    SCMP_SYS(bind), SCMP_SYS(getsockname), SCMP_SYS(accept4), SCMP_SYS(recvfrom),
	    SCMP_SYS(sendto), SCMP_SYS(recvmsg), SCMP_SYS(sendmsg), SCMP_SYS(setsockopt),
	    SCMP_SYS(getsockopt), SCMP_SYS(fcntl), SCMP_SYS(getrandom), SCMP_SYS(getpid),
	    SCMP_SYS(clock_gettime), SCMP_SYS(gettimeofday), SCMP_SYS(brk), SCMP_SYS(mmap),
	    SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(madvise), SCMP_SYS(futex),
	    SCMP_SYS(rt_sigreturn), SCMP_SYS(exit), SCMP_SYS(exit_group),
	};
	scmp_filter_ctx f = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	int r = f ? 0 : -ENOMEM;
	for (size_t i = 0; r == 0 && i < sizeof(allowed) / sizeof(allowed[0]); i++)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, allowed[i], 0);
	if (r == 0)
		r = seccomp_load(f);
	seccomp_release(f);
	return r < 0 ? rung_err_set(err, -r, "DNS proxy: seccomp filter") : 0;
}

/* The proxy's identity: nobody, CAP_NET_ADMIN alone (nothing else it could gain). */
static int proxy_drop(struct rung_err *err)
{
	gid_t g = PROXY_UID;
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++) /* while it may (CAP_SETPCAP) */
		if (cap != CAP_NET_ADMIN && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return rung_err_sys(err, errno, "DNS proxy: drop capability %d", cap);
	if (prctl(PR_SET_KEEPCAPS, 1) < 0 || setgroups(0, NULL) < 0 ||
	    setresgid(g, g, g) < 0 || setresuid(PROXY_UID, PROXY_UID, PROXY_UID) < 0)
		return rung_err_sys(err, errno, "DNS proxy: become uid %u", PROXY_UID);
	cap_t caps = cap_init();
	cap_value_t na = CAP_NET_ADMIN;
	int r = -1;
	if (caps && cap_set_flag(caps, CAP_EFFECTIVE, 1, &na, CAP_SET) == 0 &&
	    cap_set_flag(caps, CAP_PERMITTED, 1, &na, CAP_SET) == 0)
		r = cap_set_proc(caps);
	cap_free(caps);
	if (r < 0)
		return rung_err_sys(err, errno, "DNS proxy: keep CAP_NET_ADMIN alone");
	prctl(PR_SET_DUMPABLE, 0);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return rung_err_sys(err, errno, "DNS proxy: no_new_privs");
	return 0;
}

/* What the proxy tells create once it serves (or why it cannot). */
struct proxy_ready {
	pid_t pid;
	struct rung_err err;
};

/* The proxy process (a grandchild of create: reparented when create's child exits). */
static void __attribute__((noreturn)) proxy_main(const char *id, const struct np_policy *p,
						 const char *table, const char *upstream, int ready)
{
	struct rung_err err = {0};
	struct np_pod_proxy *x = NULL;
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(devnull, 2) < 0)
		_exit(127);
	/* nothing of create's (the exec fifo, the sync socket, the console) stays open here */
	rung_close_from_except(3, ready, -1);
	setsid();
	signal(SIGPIPE, SIG_IGN);
	int r = np_pod_proxy_new(id, p, table, upstream, NULL, NULL, &x, &err);
	if (r == 0)
		r = proxy_drop(&err);
	if (r == 0)
		r = proxy_seccomp(&err);
	struct proxy_ready m = {.pid = getpid(), .err = err}; /* one write: under PIPE_BUF */
	if (write(ready, &m, sizeof(m)) != sizeof(m) || r < 0)
		_exit(1);
	close(ready);
	for (;;) {
		struct pollfd pf = {.fd = np_pod_proxy_fd(x), .events = POLLIN};
		poll(&pf, 1, np_pod_proxy_timeout_ms(x));
		np_pod_proxy_handle(x, &err);
	}
}

/* Starts the proxy; its pid (not our child) once it is serving. */
static pid_t proxy_start(const char *id, const struct np_policy *p, const char *table,
			 const char *upstream, struct rung_err *err)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe");
	pid_t mid = fork();
	if (mid == 0) {
		close(pfd[0]);
		pid_t g = fork();
		if (g == 0)
			proxy_main(id, p, table, upstream, pfd[1]);
		_exit(g > 0 ? 0 : 1);
	}
	close(pfd[1]);
	struct proxy_ready m = {.pid = -1};
	int ws = 0;
	if (mid > 0)
		waitpid(mid, &ws, 0);
	/* the grandchild's one message; EOF (no message): it died, or mid could not fork it */
	if (mid < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0 ||
	    read(pfd[0], &m, sizeof(m)) != sizeof(m))
		m.err.code = m.err.code ? m.err.code : EIO;
	close(pfd[0]);
	pid_t pid = m.pid;
	if (m.err.code) {
		if (pid > 0)
			kill(pid, SIGKILL);
		m.err.msg[sizeof(m.err.msg) - 1] = 0;
		return rung_err_set(err, m.err.code, ANN ": %s", m.err.msg[0] ? m.err.msg
				    : "DNS proxy did not start");
	}
	return pid;
}

static int record(const char *root, const char *id, const char *table, bool owner, pid_t pid,
		  const char *netns, struct rung_err *err)
{
	char p[PATH_MAX];
	oci_state_path(root, id, "egress.json", p, sizeof(p));
	cleanup_json json_t *j = json_pack("{s:s, s:b, s:i, s:I, s:s}", "table", table, "owner",
					   owner, "proxy_pid", (int)pid, "proxy_start",
					   (json_int_t)(pid > 0 ? rung_proc_starttime(pid) : 0),
					   "netns", netns);
	cleanup_free char *txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (!txt)
		return rung_err_set(err, ENOMEM, "out of memory");
	return rung_write_file_replace(AT_FDCWD, p, txt, strlen(txt), 0600, err);
}

int oci_egress_up(const struct oci_config *c, const char *root, const char *id,
		  struct rung_err *err)
{
	struct np_policy pol;
	int r = oci_egress_parse(c, &pol, err);
	if (r <= 0)
		return r;
	char ip[64], table[32], comment[300];
	struct stat st;
	if (stat("/proc/self/ns/net", &st) < 0) {
		r = rung_err_sys(err, errno, "stat the joined network namespace");
		goto out;
	}
	if (oci_ns_is_hosts("net", &st, getppid())) {
		r = rung_err_set(err, EPERM, ANN ": %s is the host's network namespace (pid 1's, "
				 "or the caller's): rung's default deny would apply to the whole "
				 "host", c->netns_path);
		goto out;
	}
	if ((r = oci_egress_resolver(c, ip, err)) < 0)
		goto out;
	snprintf(table, sizeof(table), "rung_oci_%lx", (unsigned long)st.st_ino);
	snprintf(comment, sizeof(comment), "rung-oci:%.200s", id);
	r = np_pod_up(table, comment, &pol, ip, 53, err);
	if (r == -EEXIST) { /* another container of the pod applies it: shared */
		r = record(root, id, table, false, 0, c->netns_path, err);
		goto out;
	}
	if (r < 0) {
		rung_err_wrap(err, ANN);
		goto out;
	}
	pid_t pid = proxy_start(id, &pol, table, ip, err);
	r = pid < 0 ? pid : record(root, id, table, true, pid, c->netns_path, err);
	if (r < 0) {
		if (pid > 0)
			kill(pid, SIGKILL);
		np_pod_down(table, &(struct rung_err){0});
	}
out:
	np_policy_release(&pol);
	return r;
}

/* Kill the proxy (if it is still the one we started) and wait until it is gone. */
static void proxy_stop(pid_t pid, uint64_t start)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0)
		return;
	if (rung_proc_starttime(pid) == start &&
	    syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0) {
		struct pollfd pf = {.fd = pfd, .events = POLLIN};
		poll(&pf, 1, 5000);
	}
	close(pfd);
}

/* In a child that joined netns_fd: remove the table. */
static int table_remove(int netns_fd, const char *table, struct rung_err *err)
{
	pid_t c = fork();
	if (c < 0)
		return rung_err_sys(err, errno, "fork");
	if (c == 0)
		_exit(setns(netns_fd, CLONE_NEWNET) == 0 &&
		      np_pod_down(table, &(struct rung_err){0}) == 0 ? 0 : 1);
	int ws = 0;
	waitpid(c, &ws, 0);
	return WIFEXITED(ws) && WEXITSTATUS(ws) == 0
		       ? 0 : rung_err_set(err, EIO, ANN ": removing table %s failed", table);
}

int oci_egress_down(const char *root, const char *id, struct rung_err *err)
{
	char p[PATH_MAX];
	oci_state_path(root, id, "egress.json", p, sizeof(p));
	cleanup_free char *txt = NULL;
	struct rung_err e2 = {0};
	if (rung_file_load(AT_FDCWD, p, 1 << 16, &txt, NULL, &e2) < 0)
		return 0; /* none (or an aborted create before the table) */
	cleanup_json json_t *j = json_loads(txt, 0, NULL);
	const char *table = json_string_value(json_object_get(j, "table"));
	const char *ns = json_string_value(json_object_get(j, "netns"));
	pid_t pid = (pid_t)json_integer_value(json_object_get(j, "proxy_pid"));
	uint64_t start = (uint64_t)json_integer_value(json_object_get(j, "proxy_start"));
	if (!table || !json_is_true(json_object_get(j, "owner")))
		return 0;
	/* the namespace: the proxy's (it lives there), else the path (gone: the table with it) */
	char pns[64];
	snprintf(pns, sizeof(pns), "/proc/%d/ns/net", (int)pid);
	cleanup_close int nfd = pid > 0 && rung_proc_starttime(pid) == start
					? open(pns, O_RDONLY | O_CLOEXEC) : -1;
	if (nfd < 0 && ns)
		nfd = open(ns, O_RDONLY | O_CLOEXEC);
	if (pid > 0)
		proxy_stop(pid, start);
	return nfd < 0 ? 0 : table_remove(nfd, table, err);
}
