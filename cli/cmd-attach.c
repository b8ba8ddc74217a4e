/*
 * cli/cmd-attach.c: `rung attach ID H` and `rung exec -t ID -- CMD`: an interactive terminal
 * on a background process (docs/procs.md). Our terminal goes raw for the time of the attach
 * and is restored on every way out (return, exit, SIGINT/SIGTERM/SIGHUP/SIGQUIT); Ctrl-P
 * Ctrl-Q detaches (the process runs on); our window size follows SIGWINCH. The replay buffer
 * is shown first. Through the daemon the relay is the WebSocket attach (remote-attach.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "common/err.h"
#include "common/util.h"

/* ---- the terminal ------------------------------------------------------------------------ */

static struct termios saved_tio;
static volatile sig_atomic_t raw_on;

static void term_restore(void)
{
	if (raw_on) {
		tcsetattr(0, TCSADRAIN, &saved_tio);
		raw_on = 0;
	}
}

static void on_fatal(int sig)
{
	term_restore(); /* async-signal-safe: tcsetattr is */
	signal(sig, SIG_DFL);
	raise(sig);
}

void cli_term_raw(void)
{
	if (!isatty(0) || tcgetattr(0, &saved_tio) < 0)
		return;
	struct termios t = saved_tio;
	cfmakeraw(&t);
	if (tcsetattr(0, TCSADRAIN, &t) < 0)
		return;
	raw_on = 1;
	atexit(term_restore);
	const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(sigs); i++) {
		struct sigaction sa = {.sa_handler = on_fatal};
		sigaction(sigs[i], &sa, NULL);
	}
}

void cli_term_restore(void) { term_restore(); }

bool cli_term_size(unsigned *rows, unsigned *cols)
{
	struct winsize ws;
	if (ioctl(0, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
		return false;
	*rows = ws.ws_row;
	*cols = ws.ws_col;
	return true;
}

/* Ctrl-P Ctrl-Q: out gets what passes (at most len + 1 bytes: a held Ctrl-P); -1: detach. */
ssize_t cli_detach_filter(struct cli_detach *d, const char *in, size_t len, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		if (d->held) {
			d->held = false;
			if (in[i] == 0x11)
				return -1;
			out[o++] = 0x10;
		}
		if (in[i] == 0x10)
			d->held = true;
		else
			out[o++] = in[i];
	}
	return (ssize_t)o;
}

/* ---- the local store ---------------------------------------------------------------------- */

struct relay {
	struct cli *c;
	const char *id, *handle;
	int in_w;     /* the attach's input: filtered stdin */
	bool eof_eot; /* exec -t: our EOF is the terminal's EOF character (^D), not a detach */
	int stop[2];  /* the attach is over */
	int sfd;      /* SIGWINCH */
};

static void resize_now(struct rung_sandbox *sb, const char *h)
{
	unsigned rows, cols;
	struct rung_err err = {0};
	if (cli_term_size(&rows, &cols))
		rung_proc_resize(sb, h, rows, cols, &err); /* not a pty: nothing to follow */
}

/* stdin -> the pipe; SIGWINCH -> resize, through a router and handle of this thread's own. */
static void *input_main(void *arg)
{
	struct relay *x = arg;
	struct rung_router *r = NULL;
	struct rung_sandbox *sb = NULL;
	struct rung_err err = {0};
	struct rung_router_opts o = x->c->host;
	if (x->c->state_dir)
		o.state_dir = x->c->state_dir;
	if (rung_router_new(&o, &r, &err) == 0 && rung_sandbox_open(r, x->id, NULL, &sb, &err) < 0)
		sb = NULL;
	struct cli_detach d = {0};
	char buf[4096], out[4097];
	bool in_open = true;
	for (;;) {
		struct pollfd p[3] = {
		    {in_open ? 0 : -1, POLLIN, 0}, {x->stop[0], POLLIN, 0}, {x->sfd, POLLIN, 0}};
		if (poll(p, 3, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (p[2].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(x->sfd, &si, sizeof(si)) > 0 && sb)
				resize_now(sb, x->handle);
		}
		if (!(p[0].revents & (POLLIN | POLLHUP)))
			continue;
		ssize_t n = read(0, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 && x->eof_eot) {
			in_open = false;
			if (rung_write_all(x->in_w, "\x04", 1) < 0)
				break;
			continue;
		}
		ssize_t k = n > 0 ? cli_detach_filter(&d, buf, (size_t)n, out) : -1;
		if (k < 0 || rung_write_all(x->in_w, out, (size_t)k) < 0)
			break; /* EOF, detach keys, or the attach ended */
	}
	close(x->in_w); /* EOF on the attach's input: it detaches */
	rung_sandbox_close(sb);
	rung_router_free(r);
	return NULL;
}

static int out_fn(void *ud, enum rung_stream s, uint64_t offset, const void *data, size_t len)
{
	return rung_write_all(1, data, len) < 0 ? -1 : 0;
}

/* 1: the process exited, 0: detached, <0 with err. */
int cli_attach_local(struct cli *c, struct rung_sandbox *sb, const char *id, const char *h,
		     uint64_t since, bool eof_eot, struct rung_err *err)
{
	int in[2];
	sigset_t winch, prev;
	sigemptyset(&winch);
	sigaddset(&winch, SIGWINCH);
	pthread_sigmask(SIG_BLOCK, &winch, &prev);
	struct relay x = {.c = c,
			  .id = id,
			  .handle = h,
			  .eof_eot = eof_eot,
			  .sfd = signalfd(-1, &winch, SFD_CLOEXEC)};
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(x.stop, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe");
	x.in_w = in[1];
	resize_now(sb, h);
	cli_term_raw();
	pthread_t t;
	int r = pthread_create(&t, NULL, input_main, &x);
	if (r == 0) {
		struct rung_proc_attach_req q = {
		    .since = since, .in_fd = in[0], .on_output = out_fn};
		r = rung_proc_attach(sb, h, &q, err);
		close(x.stop[1]);
		pthread_join(t, NULL);
	} else {
		close(in[1]);
		close(x.stop[1]);
		r = rung_err_set(err, EAGAIN, "attach: cannot start the input thread");
	}
	cli_term_restore();
	close(in[0]);
	close(x.stop[0]);
	if (x.sfd >= 0)
		close(x.sfd);
	pthread_sigmask(SIG_SETMASK, &prev, NULL);
	return r;
}

/* ---- the commands ----------------------------------------------------------------------- */

static int local_attach_cmd(struct cli *c, const char *id, const char *h, uint64_t since,
			    bool exec_mode)
{
	struct rung_err err = {0};
	struct rung_sandbox *sb;
	int st = cli_sandbox_open(c, id, &sb);
	if (st)
		return st;
	st = cli_attach_local(c, sb, id, h, since, exec_mode, &err);
	struct rung_proc_info pi;
	if (st < 0 && rung_proc_wait(sb, h, 0, NULL, &(struct rung_err){0}) == 1)
		st = 1; /* it exited as the relay ended: its status, not the relay's error */
	if (st == 1) {
		st = rung_proc_wait(sb, h, 5000, &pi, &err);
		if (st == 1) {
			st = pi.signal ? 128 + pi.signal : pi.exit_code;
			rung_proc_info_release(&pi, 1);
		}
	} else if (st == 0) {
		fprintf(stderr, "\r\nrung: detached from %s; it runs on\n", h);
	}
	rung_sandbox_close(sb);
	return st < 0 ? cli_fail(c, &err) : st;
}

CLI_CMD(attach)
{
	const char *pos[2] = {0};
	int n = 0;
	uint64_t since = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--since") && i + 1 < argc) {
			if (rung_parse_u64(argv[++i], &since) < 0)
				return cli_usage_error("attach", "--since: '%s' is not an offset",
						       argv[i]);
		} else if (argv[i][0] == '-') {
			return cli_usage_error("attach", "unknown option '%s'", argv[i]);
		} else if (n < 2) {
			pos[n++] = argv[i];
		} else {
			return cli_usage_error("attach", "unexpected '%s'", argv[i]);
		}
	}
	if (n < 2)
		return cli_usage_error("attach", "usage: rung attach ID HANDLE");
	if (c->remote)
		return cli_remote_attach(c, pos[0], pos[1], since, false);
	return local_attach_cmd(c, pos[0], pos[1], since, false);
}

/* exec -t: a pty process of our terminal's size, attached; its exit status; then forgotten. */
int cli_exec_tty(struct cli *c, const char *id, struct rung_proc_req *req)
{
	unsigned rows = 24, cols = 80;
	cli_term_size(&rows, &cols);
	req->pty = true;
	req->rows = (uint16_t)(rows > 4096 ? 4096 : rows);
	req->cols = (uint16_t)(cols > 4096 ? 4096 : cols);
	if (c->remote)
		return cli_remote_exec_tty(c, id, req);
	struct rung_err err = {0};
	struct rung_sandbox *sb;
	char h[RUNG_PROC_HANDLE_LEN + 1];
	int st = cli_sandbox_open(c, id, &sb);
	if (st)
		return st;
	st = rung_proc_start(sb, req, h, &err);
	if (st == 0)
		st = local_attach_cmd(c, id, h, 0, true);
	else
		st = cli_fail(c, &err);
	struct rung_proc_info pi;
	if (rung_proc_get(sb, h, &pi, &err) == 0) {
		if (pi.state == RUNG_PROC_EXITED)
			rung_proc_kill(sb, h, &err); /* forget it; a detached one runs on */
		rung_proc_info_release(&pi, 1);
	}
	rung_sandbox_close(sb);
	return st;
}
