/*
 * agent/init.c: rung-agent --init, pid 1 of a process or container sandbox. The runtime
 * (runtime/sandbox-ns.c) clones us into our namespaces, maps our ids and execs us at once as
 * root of our user namespace; we build our root here, from the setup it sends on the go pipe
 * (common/pid1.h), in a process of our own rather than in a copy of the runtime's memory
 * (whose pages every write would copy first). Then the agent uid, the seccomp filter, and
 * the wait until the runtime has put us in our cgroup.
 *
 * fds on entry: 0-2 the runtime's (replaced once the root is built), 3 the listening socket,
 * 4 the error pipe, 6 the go pipe, 7 an owned sandbox's first connection.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/pid1.h"

#define ERR_FD 4
#define GO_FD 6

static void fail(struct rung_err *e)
{
	rung_write_all(ERR_FD, e, sizeof(*e));
	_exit(127);
}

/* The plan's RUNG_M_WAIT: the runtime attached the work dir's disk (a 'd'). */
static int wait_work(void *ud, struct rung_err *err)
{
	char d;
	if (rung_read_exact(GO_FD, &d, 1) < 0 || d != 'd')
		return rung_err_set(err, EIO, "parent gave up during setup (no work dir)");
	return 0;
}

static int read_setup(struct rung_pid1_setup *s, struct rung_err *err)
{
	uint32_t len;
	if (rung_read_exact(GO_FD, &len, sizeof(len)) < 0)
		return rung_err_set(err, EIO, "parent gave up during setup (no setup)");
	if (!len || len > RUNG_PID1_SETUP_MAX)
		return rung_err_set(err, EINVAL, "pid 1 setup: %u bytes (at most %u)", len,
				    RUNG_PID1_SETUP_MAX);
	cleanup_free char *buf = malloc(len);
	if (!buf)
		return rung_err_set(err, ENOMEM, "out of memory");
	if (rung_read_exact(GO_FD, buf, len) < 0)
		return rung_err_set(err, EIO, "parent gave up during setup (short setup)");
	return rung_pid1_setup_decode(buf, len, s, err);
}

/* 0-2 on the sandbox's /dev/null; the pipes kept from the commands; nothing else open. */
static int settle_fds(bool first, struct rung_err *err)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
		return rung_err_sys(err, errno, "arrange fds");
	if (null > 2)
		close(null);
	if (fcntl(ERR_FD, F_SETFD, FD_CLOEXEC) < 0 || fcntl(GO_FD, F_SETFD, FD_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "arrange fds");
	close(5); /* none: the exec closed it (a host file) */
	syscall(SYS_close_range, first ? 8 : 7, ~0U, 0);
	return 0;
}

void agent_ns_init(int *first_fd)
{
	struct rung_err err = {0};
	struct rung_pid1_setup s;
	rung_prefault_stack(); /* the root's build goes deep: one call, not 4 faults */
	if (read_setup(&s, &err) < 0)
		fail(&err);
	rung_trace_set(s.trace);
	rung_trace_keep(); /* closed below, before any fd is closed or the sandbox's code runs */
	rung_trace("child: go");
	if (s.new_session) /* an owned sandbox's creator may lead a terminal's group */
		setsid();
	/* The parent-death signal again: the exec that made us root here may have cleared it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
		rung_err_sys(&err, errno, "set the parent-death signal");
		fail(&err);
	}
	if ((s.lo_up && rung_lo_up(&err) < 0) ||
	    rung_root_apply(&s.plan, s.newroot, wait_work, NULL, &err) < 0 ||
	    sethostname("rung", 4) < 0 || rung_rlimits_apply(&err) < 0)
		fail(err.code ? &err : (rung_err_sys(&err, errno, "setup"), &err));
	rung_trace("child: root ready");
	rung_trace_set(NULL); /* the host's file: closed before anything of the sandbox's runs */
	if (settle_fds(s.first_conn, &err) < 0 || agent_privs_ns_drop(&err) < 0 ||
	    rung_seccomp_load(s.bpf, s.bpf_len, &err) < 0)
		fail(&err);
	/* Becoming the agent uid cleared the parent-death signal: set it again. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
		rung_err_sys(&err, errno, "set the parent-death signal");
		fail(&err);
	}
	/* Not one process of ours before we are in our cgroup: the parent says so ('c') once
	 * after_go has put us there; an owned sandbox's first handler is forked at once. EOF:
	 * the parent gave up or died. A parent that died after writing it but before our
	 * parent-death signal was set sent no signal: its end of the go pipe, open until we
	 * report, says so (POLLHUP). */
	char in_cg = 0;
	struct pollfd gp = {.fd = GO_FD, .events = POLLIN};
	if (rung_read_exact(GO_FD, &in_cg, 1) < 0 || in_cg != 'c' ||
	    (poll(&gp, 1, 0) > 0 && (gp.revents & (POLLHUP | POLLERR))))
		_exit(1);
	close(GO_FD);
	*first_fd = s.first_conn ? 7 : -1;
	rung_pid1_setup_release(&s);
	close(ERR_FD); /* the runtime's EOF: we are set up */
}
