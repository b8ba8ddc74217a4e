/* cli/cmd-sandbox.c: run, acquire, exec, write, read, run-code. */
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "common/util.h"

/* ud: a bool set when our stdout or stderr is a pipe nobody reads any more. */
static int stream_out(void *ud, enum rung_stream s, const void *data, size_t len)
{
	if (rung_write_all(s == RUNG_STDOUT ? 1 : 2, data, len) == -EPIPE) {
		*(bool *)ud = true;
		return -1; /* cancel: closing the connection makes the agent kill the command */
	}
	return 0; /* other write errors: the command runs on, its output is lost */
}

/* interrupted (optional): set when a stop signal cancelled the exec (run_on_signal).
 * lang (optional): run_code in that language, the code being req's stdin (the runtime checks
 * the sandbox's grant for run_code, which differs from exec's). */
static int exec_and_report(struct cli *c, struct rung_sandbox *sb, struct rung_exec_req *req,
			   const int *interrupted, const char *lang)
{
	struct rung_exec_res res;
	struct rung_err err = {0};
	bool broken_pipe = false;
	if (!c->json) {
		req->on_output = stream_out;
		req->ud = &broken_pipe;
		req->no_collect = true;
	}
	int rc = lang ? rung_run_code(sb, lang, req->stdin_data, req, &res, &err)
		      : rung_exec(sb, req, &res, &err);
	if (rc < 0) {
		if (interrupted && __atomic_load_n(interrupted, __ATOMIC_ACQUIRE))
			return 1; /* a stop signal cancelled it: not an error */
		if (broken_pipe)  /* (only with SIGPIPE ignored) as if SIGPIPE had ended us */
			return 128 + SIGPIPE;
		return cli_fail(c, &err);
	}
	int status = res.exit_code >= 0 ? res.exit_code : 128 + res.signal;
	if (res.timed_out)
		status = 124;
	if (c->json) {
		json_t *o = json_pack("{s:s, s:i, s:i, s:s%, s:s%, s:b, s:b, s:b, s:I}", "id",
				      rung_sandbox_id(sb), "exit_code", res.exit_code, "signal",
				      res.signal, "stdout", res.out ? res.out : "", res.out_len,
				      "stderr", res.errout ? res.errout : "", res.err_len,
				      "timed_out", res.timed_out, "truncated", res.truncated, "oom",
				      res.oom, "duration_ms", (json_int_t)(res.duration_us / 1000));
		if (o) {
			json_dumpf(o, stdout, JSON_COMPACT);
			putchar('\n');
			json_decref(o);
		}
	}
	if (res.timed_out)
		fprintf(stderr,
			"rung: command timed out after %u ms; every process it started "
			"was killed\n",
			req->timeout_ms);
	else if (res.truncated)
		fprintf(stderr, "rung: output truncated at the sandbox's output limit\n");
	rung_exec_res_release(&res);
	return status;
}

int cli_exec_and_report(struct cli *c, struct rung_sandbox *sb, struct rung_exec_req *req)
{
	return exec_and_report(c, sb, req, NULL, NULL);
}

/* One exec option at argv[*i]: 1 consumed (with its value), 0 not an exec option, -1 error. */
static int exec_opt(const char *cmd, int argc, char **argv, int *i, struct rung_exec_req *req,
		    char ***envv)
{
	const char *a = argv[*i];
	if (strcmp(a, "--timeout") && strcmp(a, "--cwd") && strcmp(a, "--env"))
		return 0;
	if (*i + 1 >= argc)
		return cli_usage_error(cmd, "%s needs a value", a), -1;
	const char *v = argv[++*i];
	if (!strcmp(a, "--timeout")) {
		char *end;
		double d = strtod(v, &end);
		if (*end || d <= 0 || d > 86400)
			return cli_usage_error(cmd, "--timeout: '%s' is not seconds", v), -1;
		req->timeout_ms = (uint32_t)(d * 1000);
	} else if (!strcmp(a, "--cwd")) {
		req->cwd = v;
	} else {
		if (!strchr(v, '=') || v[0] == '=')
			return cli_usage_error(cmd, "--env: '%s' is not KEY=VALUE", v), -1;
		size_t n = 0;
		while (*envv && (*envv)[n])
			n++;
		char **nv = realloc(*envv, (n + 2) * sizeof(char *));
		if (!nv)
			return -1;
		nv[n] = (char *)v;
		nv[n + 1] = NULL;
		*envv = nv;
		req->env = (const char *const *)nv;
	}
	return 1;
}

/*
 * `rung run` must never leave its sandbox behind. SIGINT/SIGTERM/SIGHUP are blocked from
 * before acquire (cli_hold_stop_signals), so none can come between the create and the
 * dispose. While the exec runs they are let in, and their handler closes the write end of a
 * pipe the exec watches (req->cancel_fd; close is async-signal-safe): the exec ends at once
 * with -ECANCELED (its connection closed, the agent kills the command), and the run disposes
 * the sandbox and ends with 128+signal. They are held again for the dispose; one that comes
 * during it is taken after it, with the same status. (No watcher thread: creating and joining
 * one cost ~0.3 ms of every run, bench/README.md, "spine".)
 */
static int run_sig;           /* the signal that ended the run (atomic), 0 if none */
static int run_cancel_w = -1; /* the exec's cancel pipe, until a signal closes it (atomic) */

static void run_on_signal(int sig)
{
	int none = 0;
	__atomic_compare_exchange_n(&run_sig, &none, sig, false, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST);
	int fd = __atomic_exchange_n(&run_cancel_w, -1, __ATOMIC_SEQ_CST);
	if (fd >= 0)
		close(fd);
}

/* The exec with the held signals let in (above); returns its status. */
static int run_watched_exec(struct cli *c, struct rung_sandbox *sb, struct rung_exec_req *req,
			    const sigset_t *held)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	struct sigaction act = {.sa_handler = run_on_signal}, old[RUNG_ARRAY_SIZE(sigs)];
	sigfillset(&act.sa_mask);
	int p[2];
	bool watched = pipe2(p, O_CLOEXEC) == 0;
	if (watched) { /* else the signals stay held until the dispose is done */
		run_cancel_w = p[1];
		req->watch_fd = true;
		req->cancel_fd = p[0];
		for (size_t i = 0; i < RUNG_ARRAY_SIZE(sigs); i++)
			sigaction(sigs[i], &act, &old[i]);
		sigprocmask(SIG_UNBLOCK, held, NULL);
	}
	/* A write to the agent's socket after the cancel, or to a stdout pipe nobody reads,
	 * must fail with EPIPE rather than end us before the dispose. */
	struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
	sigaction(SIGPIPE, &ign, &old_pipe);
	int status = exec_and_report(c, sb, req, &run_sig, NULL);
	sigaction(SIGPIPE, &old_pipe, NULL);
	if (watched) {
		sigprocmask(SIG_BLOCK, held, NULL);
		int fd = __atomic_exchange_n(&run_cancel_w, -1, __ATOMIC_SEQ_CST);
		if (fd >= 0)
			close(fd);
		close(p[0]);
		for (size_t i = 0; i < RUNG_ARRAY_SIZE(sigs); i++)
			sigaction(sigs[i], &old[i], NULL);
	}
	return status;
}

/* run's arguments: spec options, --scope/--thread/--agent, exec options, then -- CMD. Sets
 * *cmd_at to CMD's index; returns 0, or the exit status of a usage error. */
static int run_args(struct cli *c, int argc, char **argv, struct cli_spec_opts *so,
		    struct rung_exec_req *req, struct rung_key *key, char ***envv, int *cmd_at)
{
	*cmd_at = -1;
	for (int i = 1; i < argc; i++) {
		int r = cli_spec_opt(c, so, argc, argv, &i);
		if (r < 0)
			return 2;
		if (r)
			continue;
		if (!strcmp(argv[i], "--scope") || !strcmp(argv[i], "--thread") ||
		    !strcmp(argv[i], "--agent")) {
			if (i + 1 >= argc)
				return cli_usage_error("run", "%s needs a value", argv[i]);
			const char **dst = argv[i][2] == 's'   ? &key->scope
					   : argv[i][2] == 't' ? &key->thread
							       : &key->agent;
			*dst = argv[++i];
			continue;
		}
		r = exec_opt("run", argc, argv, &i, req, envv);
		if (r < 0)
			return 2;
		if (r)
			continue;
		if (!strcmp(argv[i], "--")) {
			*cmd_at = i + 1;
			break;
		}
		return cli_usage_error("run", "unknown argument '%s'", argv[i]);
	}
	if (*cmd_at < 0 || *cmd_at >= argc)
		return cli_usage_error("run", "missing -- CMD [ARG...]");
	return 0;
}

/* The key's defaults; without --scope a fresh anonymous key (its thread in anon): true. */
static bool run_key(struct rung_key *key, char *anon, size_t anon_len)
{
	bool anonymous = !key->scope;
	if (anonymous) {
		unsigned char rnd[8];
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		if (fd < 0 || read(fd, rnd, sizeof(rnd)) != sizeof(rnd))
			memset(rnd, 0, sizeof(rnd));
		if (fd >= 0)
			close(fd);
		snprintf(anon, anon_len, "run-%d-%02x%02x%02x%02x%02x%02x%02x%02x", (int)getpid(),
			 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
		key->scope = "anonymous";
		key->thread = anon;
		key->agent = "cli";
	}
	if (!key->thread)
		key->thread = "default";
	if (!key->agent)
		key->agent = "cli";
	return anonymous;
}

/* An anonymous run: ended by a stop signal (above), disposed at the end whatever happens. */
static int run_anonymous(struct cli *c, struct rung_sandbox *sb, struct rung_exec_req *req,
			 const sigset_t *held)
{
	struct rung_err err = {0};
	int status = run_watched_exec(c, sb, req, held);
	int sig = __atomic_load_n(&run_sig, __ATOMIC_SEQ_CST);
	if (sig) {
		fprintf(stderr, "rung: interrupted by signal %d; disposing the sandbox\n", sig);
		status = 128 + sig;
	}
	fflush(stdout);
	if (rung_sandbox_dispose(sb, &err) < 0)
		fprintf(stderr, "rung: dispose %s: %s\n", rung_sandbox_id(sb), err.msg);
	/* One that came while held: it would have ended us, so the same status. */
	const struct timespec now = {0, 0};
	int late = sigtimedwait(held, NULL, &now);
	if (late > 0 && !sig)
		status = 128 + late;
	return status;
}

int cli_cmd_run(struct cli *c, int argc, char **argv)
{
	struct cli_spec_opts so;
	struct rung_exec_req req = {0};
	struct rung_key key = {0};
	char **envv = NULL;
	int cmd_at;
	cli_spec_opts_init(&so);
	int st = run_args(c, argc, argv, &so, &req, &key, &envv, &cmd_at);
	if (st)
		return st;
	struct rung_err err = {0};
	if (cli_spec_finish(&so, &err) < 0)
		return cli_fail(c, &err);
	char anon[96];
	bool anonymous = run_key(&key, anon, sizeof(anon));
	req.argv = (const char *const *)argv + cmd_at;
	if (!req.timeout_ms)
		req.timeout_ms = so.spec.limits.exec_timeout_s * 1000;
	if (c->remote) {
		st = cli_remote_run(c, &key, anonymous, &so.spec, &req);
		rung_spec_release(&so.spec);
		free(envv);
		return st;
	}
	/* This process exits right after an anonymous run's dispose, freeing nothing (main()):
	 * its releaser takes our memory over then. */
	c->host.release_at_exit = true;
	struct rung_router *r = cli_router(c);
	if (!r)
		return 1;
	struct rung_sandbox *sb;
	bool created;
	/* A signal that arrives while the sandbox is being created is held until
	 * run_interruptible waits for it, so it cannot leave the new sandbox behind. */
	sigset_t hold, prev;
	cli_hold_stop_signals(anonymous, &hold, &prev);
	/* An anonymous run's sandbox lives exactly as long as this process, which can then be
	 * its supervisor (no supervisor process), unless its ttl would end it before the exec's
	 * timeout (a supervisor enforces that). */
	bool own = anonymous && (!so.spec.ttl_s || req.timeout_ms <= so.spec.ttl_s * 1000ull);
	/* Its command goes ahead with the sandbox's setup: pid 1 starts it once ready. */
	if ((own ? rung_acquire_owned(r, &key, &so.spec, &req, &sb, &created, &err)
		 : rung_acquire(r, &key, &so.spec, &sb, &created, &err)) < 0) {
		rung_spec_release(&so.spec);
		if (anonymous)
			sigprocmask(SIG_SETMASK, &prev, NULL);
		return cli_fail(c, &err);
	}
	if (anonymous) { /* nothing freed after the dispose: see main() */
		st = run_anonymous(c, sb, &req, &hold);
		sigprocmask(SIG_SETMASK, &prev, NULL);
		return st;
	} else {
		st = cli_exec_and_report(c, sb, &req);
		fflush(stdout);
	}
	rung_sandbox_close(sb);
	rung_spec_release(&so.spec);
	free(envv);
	return st;
}

int cli_cmd_acquire(struct cli *c, int argc, char **argv)
{
	struct cli_spec_opts so;
	struct rung_key key = {0};
	cli_spec_opts_init(&so);
	for (int i = 1; i < argc; i++) {
		int r = cli_spec_opt(c, &so, argc, argv, &i);
		if (r < 0)
			return 2;
		if (r)
			continue;
		if ((!strcmp(argv[i], "--scope") || !strcmp(argv[i], "--thread") ||
		     !strcmp(argv[i], "--agent")) &&
		    i + 1 < argc) {
			const char **dst = argv[i][2] == 's'   ? &key.scope
					   : argv[i][2] == 't' ? &key.thread
							       : &key.agent;
			*dst = argv[++i];
			continue;
		}
		return cli_usage_error("acquire", "unknown argument '%s'", argv[i]);
	}
	if ((!key.scope && !c->remote) || !key.thread || !key.agent)
		return cli_usage_error("acquire", "--scope, --thread and --agent are required");
	struct rung_err err = {0};
	if (cli_spec_finish(&so, &err) < 0)
		return cli_fail(c, &err);
	if (c->remote) { /* the scope is the daemon's for this caller */
		char id[65], iso[16];
		bool made;
		int rc = cli_remote_acquire(c, &key, &so.spec, id, iso, &made, &err);
		if (rc == 0 && c->json)
			printf("{\"id\": \"%s\", \"created\": %s, \"isolation\": \"%s\"}\n", id,
			       made ? "true" : "false", iso);
		else if (rc == 0)
			printf("%s\n", id);
		rung_spec_release(&so.spec);
		return rc < 0 ? cli_fail(c, &err) : 0;
	}
	struct rung_router *r = cli_router(c);
	struct rung_sandbox *sb;
	bool created;
	if (!r)
		return 1;
	if (rung_acquire(r, &key, &so.spec, &sb, &created, &err) < 0) {
		rung_spec_release(&so.spec);
		return cli_fail(c, &err);
	}
	if (c->json)
		printf("{\"id\": \"%s\", \"created\": %s, \"isolation\": \"%s\"}\n",
		       rung_sandbox_id(sb), created ? "true" : "false",
		       rung_isolation_name(rung_sandbox_isolation(sb)));
	else
		printf("%s\n", rung_sandbox_id(sb));
	rung_sandbox_close(sb);
	rung_spec_release(&so.spec);
	return 0;
}

int cli_sandbox_open(struct cli *c, const char *id, struct rung_sandbox **sb)
{
	struct rung_err err = {0};
	struct rung_router *r = cli_router(c);
	if (!r)
		return 1;
	if (rung_sandbox_open(r, id, NULL, sb, &err) < 0)
		return cli_fail(c, &err);
	return 0;
}

int cli_cmd_exec(struct cli *c, int argc, char **argv)
{
	struct rung_exec_req req = {0};
	cleanup_callbacks struct cli_callbacks cbs = {0};
	char **envv = NULL;
	const char *id = NULL;
	int cmd_at = -1;
	bool tty = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			cmd_at = i + 1 < argc ? i + 1 : -1;
			break;
		}
		if (argv[i][0] != '-') {
			if (id)
				return cli_usage_error("exec", "unexpected '%s' (missing --?)",
						       argv[i]);
			id = argv[i];
			continue;
		}
		if (!strcmp(argv[i], "-t") || !strcmp(argv[i], "--tty") || !strcmp(argv[i], "-it")) {
			tty = true;
			continue;
		}
		int r = exec_opt("exec", argc, argv, &i, &req, &envv);
		if (r == 0)
			r = cli_callback_opt(c, "exec", argc, argv, &i, &cbs);
		if (r < 0)
			return 2;
		if (!r)
			return cli_usage_error("exec", "unknown option '%s'", argv[i]);
	}
	if (!id || cmd_at < 0)
		return cli_usage_error("exec", "usage: rung exec [OPTS] ID -- CMD [ARG...]");
	cli_callbacks_apply(&cbs, &req);
	if (c->remote && cbs.n && c->json)
		return free(envv), cli_usage_error("exec", "--callback: not with --json through "
							    "the daemon (--socket)");
	if (tty && cbs.n)
		return free(envv), cli_usage_error("exec", "--callback: not with -t");
	if (tty) { /* an interactive terminal: a pty process, attached (cmd-attach.c) */
		if (req.timeout_ms)
			return free(envv), cli_usage_error("exec", "--timeout: not with -t");
		struct rung_proc_req pq = {.argv = (const char *const *)argv + cmd_at,
					   .env = req.env, .cwd = req.cwd};
		int st = cli_exec_tty(c, id, &pq);
		free(envv);
		return st;
	}
	if (c->remote) {
		req.argv = (const char *const *)argv + cmd_at;
		int st = cli_remote_exec(c, id, &req, NULL);
		free(envv);
		return st;
	}
	struct rung_sandbox *sb;
	int r = cli_sandbox_open(c, id, &sb);
	if (r)
		return r;
	req.argv = (const char *const *)argv + cmd_at;
	int status = cli_exec_and_report(c, sb, &req);
	rung_sandbox_close(sb);
	free(envv);
	return status;
}

int cli_cmd_write(struct cli *c, int argc, char **argv)
{
	const char *pos[2] = {0};
	int np = 0;
	unsigned mode = 0644;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--mode") && i + 1 < argc) {
			char *end;
			unsigned long m = strtoul(argv[++i], &end, 8);
			if (*end || m > 07777)
				return cli_usage_error("write", "--mode: '%s' is not octal",
						       argv[i]);
			mode = (unsigned)m;
		} else if (np < 2) {
			pos[np++] = argv[i];
		} else {
			return cli_usage_error("write", "unexpected '%s'", argv[i]);
		}
	}
	if (np != 2)
		return cli_usage_error("write", "usage: rung write ID PATH [--mode OCTAL] < DATA");
	struct rung_err err = {0};
	char *data;
	size_t len;
	if (rung_read_fd_all(0, 1u << 30, &data, &len, &err) < 0)
		return cli_fail(c, &err);
	if (c->remote) {
		int st = cli_remote_write(c, pos[0], pos[1], data, len, mode);
		free(data);
		return st;
	}
	struct rung_sandbox *sb = NULL;
	int r = cli_sandbox_open(c, pos[0], &sb);
	if (!r && rung_write_file(sb, pos[1], data, len, mode, &err) < 0)
		r = cli_fail(c, &err);
	else if (!r && c->json)
		printf("{\"path\": \"%s\", \"bytes\": %zu}\n", pos[1], len);
	free(data);
	rung_sandbox_close(sb);
	return r;
}

int cli_cmd_read(struct cli *c, int argc, char **argv)
{
	if (argc != 3)
		return cli_usage_error("read", "usage: rung read ID PATH > DATA");
	if (c->remote)
		return cli_remote_read(c, argv[1], argv[2]);
	struct rung_sandbox *sb;
	int r = cli_sandbox_open(c, argv[1], &sb);
	if (r)
		return r;
	struct rung_err err = {0};
	char *data;
	size_t len;
	if (rung_read_file(sb, argv[2], 0, &data, &len, &err) < 0) {
		r = cli_fail(c, &err);
	} else {
		rung_write_all(1, data, len);
		free(data);
	}
	rung_sandbox_close(sb);
	return r;
}

int cli_cmd_run_code(struct cli *c, int argc, char **argv)
{
	const char *id = NULL, *lang = NULL;
	cleanup_callbacks struct cli_callbacks cbs = {0};
	for (int i = 1; i < argc; i++) {
		int cr = cli_callback_opt(c, "run-code", argc, argv, &i, &cbs);
		if (cr < 0)
			return 2;
		if (cr > 0)
			continue;
		if (!strcmp(argv[i], "--lang") && i + 1 < argc)
			lang = argv[++i];
		else if (!id)
			id = argv[i];
		else
			return cli_usage_error("run-code", "unexpected '%s'", argv[i]);
	}
	if (!id || !lang)
		return cli_usage_error("run-code",
				       "usage: rung run-code ID --lang python|sh < CODE");
	struct rung_err err = {0};
	char *code;
	size_t len;
	if (rung_read_fd_all(0, 16u << 20, &code, &len, &err) < 0)
		return cli_fail(c, &err);
	if (c->remote && cbs.n && c->json) {
		free(code);
		return cli_usage_error("run-code", "--callback: not with --json through the daemon "
						   "(--socket)");
	}
	if (c->remote) {
		struct rung_exec_req creq = {.stdin_data = code, .stdin_len = len};
		cli_callbacks_apply(&cbs, &creq);
		int st = strcmp(lang, "python") && strcmp(lang, "python3") && strcmp(lang, "sh")
			     ? cli_usage_error("run-code", "--lang: '%s' is not python or sh", lang)
			     : cli_remote_exec(c, id, &creq, lang);
		free(code);
		return st;
	}
	struct rung_sandbox *sb;
	int r = cli_sandbox_open(c, id, &sb);
	if (r) {
		free(code);
		return r;
	}
	struct rung_exec_req req = {.stdin_data = code, .stdin_len = len};
	cli_callbacks_apply(&cbs, &req);
	if (strcmp(lang, "python") && strcmp(lang, "python3") && strcmp(lang, "sh")) {
		free(code);
		rung_sandbox_close(sb);
		return cli_usage_error("run-code", "--lang: '%s' is not python or sh", lang);
	}
	r = exec_and_report(c, sb, &req, NULL, lang);
	free(code);
	rung_sandbox_close(sb);
	return r;
}
