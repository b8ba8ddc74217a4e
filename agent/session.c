/*
 * agent/session.c: a shell session, a keeper whose process is a shell reading commands from
 * its stdin. Where a run ends and its exit status travel on a side channel, never in the
 * output: per run the keeper writes the command text to a file of its own directory and
 * sends the shell one fixed line,
 *     . DIR/cmd-N </dev/null 3>&- ; printf '%d\n' "$?" >&3
 * where fd 3 is a pipe only the keeper reads. The run's output is what the shell's stdout and
 * stderr carry until its status line arrives (then what the pipes already hold). The shell
 * runs with `trap : INT`: a handled signal is reset to the default in its children, so a
 * timeout's SIGINT to the process group interrupts the job and not the shell; what survives
 * the grace gets SIGKILL, every process of the run but the shell. A shell that does not
 * report within the grace after that is broken: it is killed, and the session ends.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/keeper.h"

#define GRACE_MS 1000 /* SIGINT -> SIGKILL of the job -> the shell must have reported */

int keeper_session_spawn(struct keeper *k, struct rung_err *err)
{
	struct keeper_session *ss = &k->ses;
	ss->on = true;
	ss->status_fd = ss->run_fd = -1;
	/* the default shell: bash where the sandbox has it */
	if (k->p->default_shell && access("/bin/bash", X_OK) == 0) {
		char *b = strdup("/bin/bash");
		if (!b)
			return rung_err_set(err, ENOMEM, "out of memory");
		free(k->p->x.argv[0]);
		k->p->x.argv[0] = b;
	}
	/* the runs' command files: a directory of the shell's user (root) only */
	const char *bases[] = {"/dev/shm", "/tmp", "/run"};
	bool made = false;
	for (size_t i = 0; i < 3 && !made; i++) {
		snprintf(ss->dir, sizeof(ss->dir), "%s/.rung-session-%s", bases[i], k->handle);
		made = mkdir(ss->dir, 0700) == 0;
	}
	if (!made)
		return rung_err_sys(err, errno, "session: no writable /dev/shm, /tmp or /run");
	int sp[2];
	if (pipe2(sp, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe");
	int r = keeper_start_process(k, sp[1], err);
	close(sp[1]);
	if (r < 0) {
		close(sp[0]);
		return r;
	}
	ss->status_fd = sp[0];
	rung_fd_set_nonblock(sp[0], 1);
	static const char init[] = "trap : INT\n";
	return keeper_stdin_queue(k, (const uint8_t *)init, sizeof(init) - 1, false, err);
}

static void run_answer_error(struct keeper *k, int fd, int code, const char *msg)
{
	struct rung_err e;
	rung_err_set(&e, code, "session %s: %s", k->handle, msg);
	rung_proto_error_send(fd, &e);
	close(fd);
}

void keeper_session_run(struct keeper *k, int fd, const struct rung_proto_proc *q)
{
	struct keeper_session *ss = &k->ses;
	if (k->exited || ss->status_fd < 0)
		return run_answer_error(k, fd, EPIPE, "session ended (the shell exited)");
	if (ss->run_fd >= 0 || ss->run_t0)
		return run_answer_error(k, fd, EBUSY, "a run is in progress");
	char path[200], line[400];
	snprintf(path, sizeof(path), "%s/cmd-%llu", ss->dir, (unsigned long long)++ss->nrun);
	int cf = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	bool ok = cf >= 0 && rung_write_all(cf, q->data, q->data_len) == 0 &&
		  rung_write_all(cf, "\n", 1) == 0;
	if (cf >= 0)
		close(cf);
	if (!ok)
		return run_answer_error(k, fd, EIO, "cannot write the command file");
	int n = snprintf(line, sizeof(line),
			 ". %s </dev/null 3>&- ; printf '%%d\\n' \"$?\" >&3\n", path);
	struct rung_err e = {0};
	if (keeper_stdin_queue(k, (const uint8_t *)line, (size_t)n, false, &e) < 0)
		return run_answer_error(k, fd, EPIPE, "session ended (the shell exited)");
	keeper_stdin_flush(k);
	ss->run_fd = fd;
	ss->run_t0 = rung_now_us();
	ss->run_deadline = q->timeout_ms ? rung_now_ms() + q->timeout_ms : 0;
	ss->run_kill_at = 0;
	ss->phase = 0;
	ss->run_timed_out = false;
}

/* The run is over: EXIT to the host, or (status -1: the shell died or broke) -EPIPE. */
static void run_end(struct keeper *k, int status_code)
{
	struct keeper_session *ss = &k->ses;
	/* what the command wrote before it ended is in the pipes */
	keeper_pump_fd(k, &k->out_fd, 0);
	keeper_pump_fd(k, &k->err_fd, 1);
	if (ss->run_fd >= 0 && status_code < 0) {
		struct rung_err e;
		rung_err_set(&e, EPIPE, "session %s ended%s", k->handle,
			     ss->run_timed_out ? ": the shell did not recover from the timeout"
					       : " (the shell exited)");
		rung_proto_error_send(ss->run_fd, &e);
		close(ss->run_fd);
	} else if (ss->run_fd >= 0) {
		struct rung_proto_exit ex = {.duration_us = rung_now_us() - ss->run_t0};
		ex.exit_code = status_code >= 0 && status_code <= 255 ? status_code : -1;
		if (ss->run_timed_out)
			ex.flags |= RUNG_EXIT_TIMED_OUT;
		struct rung_buf b = {0};
		rung_proto_exit_encode(&ex, &b);
		rung_frame_write_buf(ss->run_fd, RUNG_MSG_EXIT, &b, NULL);
		rung_buf_release(&b);
		close(ss->run_fd);
	}
	ss->run_fd = -1;
	ss->run_t0 = 0;
	char path[200];
	snprintf(path, sizeof(path), "%s/cmd-%llu", ss->dir, (unsigned long long)ss->nrun);
	unlink(path);
}

void keeper_session_on_status(struct keeper *k)
{
	struct keeper_session *ss = &k->ses;
	for (;;) {
		ssize_t n = read(ss->status_fd, ss->sbuf + ss->slen, sizeof(ss->sbuf) - 1 - ss->slen);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) { /* the shell is gone */
			close(ss->status_fd);
			ss->status_fd = -1;
			if (ss->run_t0)
				keeper_session_ended(k);
			return;
		}
		ss->slen += (size_t)n;
		char *nl;
		while ((nl = memchr(ss->sbuf, '\n', ss->slen))) {
			*nl = 0;
			int code = atoi(ss->sbuf);
			size_t used = (size_t)(nl - ss->sbuf) + 1;
			memmove(ss->sbuf, nl + 1, ss->slen - used);
			ss->slen -= used;
			if (ss->run_t0)
				run_end(k, code);
		}
		if (ss->slen == sizeof(ss->sbuf) - 1)
			ss->slen = 0; /* not a status line: only we write there */
	}
}

int keeper_session_tick(struct keeper *k)
{
	struct keeper_session *ss = &k->ses;
	if (!ss->run_t0 || !ss->run_deadline)
		return 1000;
	uint64_t now = rung_now_ms();
	uint64_t at = ss->run_kill_at ? ss->run_kill_at : ss->run_deadline;
	if (now >= at) {
		switch (ss->phase++) {
		case 0: /* the timeout: SIGINT to the job (the shell traps it) */
			ss->run_timed_out = true;
			kill(-k->pid, SIGINT);
			break;
		case 1: /* what is left of the run, the shell excepted */
			agent_kill_descendants_except(k->pid);
			break;
		default: /* the shell does not report: broken, it ends */
			kill(k->pid, SIGKILL);
			return 1000;
		}
		at = ss->run_kill_at = now + GRACE_MS;
	}
	return (int)(at - now < 1000 ? at - now : 1000);
}

void keeper_session_ended(struct keeper *k)
{
	if (k->ses.run_t0)
		run_end(k, -1);
}

void keeper_session_cleanup(struct keeper *k)
{
	struct keeper_session *ss = &k->ses;
	char path[200];
	snprintf(path, sizeof(path), "%s/cmd-%llu", ss->dir, (unsigned long long)ss->nrun);
	unlink(path);
	rmdir(ss->dir);
}
