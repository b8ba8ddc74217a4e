/* agent/serve.c: the accept loop and per-connection dispatch. */
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "agent/agent.h"

void agent_handle(int fd)
{
	struct rung_err err = {0};
	struct rung_frame f;
	/* The host sends its request promptly; a silent peer is dropped after 30 s. */
	int r = rung_frame_read(fd, &f, rung_now_ms() + 30000, &err);
	if (r < 0)
		return;
	switch (f.type) {
	case RUNG_MSG_PING:
		r = rung_frame_write(fd, RUNG_MSG_PONG, NULL, 0, &err);
		break;
	case RUNG_MSG_EXEC:
		r = agent_exec(fd, &f, &err);
		break;
	case RUNG_MSG_WRITE_FILE:
		r = agent_write_file(fd, &f, &err);
		break;
	case RUNG_MSG_READ_FILE:
		r = agent_read_file(fd, &f, &err);
		break;
	default:
		r = rung_err_set(&err, EPROTO, "unexpected request frame type %u", f.type);
		break;
	}
	if (r < 0)
		rung_proto_error_send(fd, &err);
	rung_frame_release(&f);
}

int agent_serve(int listen_fd)
{
	rung_fd_set_cloexec(listen_fd, 1);
	for (;;) {
		/* Reap whatever exited: handlers and any orphan re-parented to pid 1. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		struct pollfd p = {.fd = listen_fd, .events = POLLIN};
		int r = poll(&p, 1, 1000);
		if (r <= 0)
			continue;
		int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED ||
			    errno == EMFILE || errno == ENFILE)
				continue;
			return -errno;
		}
		pid_t pid = fork();
		if (pid == 0) {
			close(listen_fd);
			prctl(PR_SET_NAME, "rung-agent-h");
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			/* Orphans of this request's processes re-parent to us, not to pid 1. */
			prctl(PR_SET_CHILD_SUBREAPER, 1);
			signal(SIGPIPE, SIG_IGN);
			agent_handle(c);
			agent_kill_descendants();
			_exit(0);
		}
		close(c);
	}
}
