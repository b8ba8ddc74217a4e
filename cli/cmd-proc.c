/*
 * cli/cmd-proc.c: `rung proc ...` and `rung session ...`: background processes, terminals and
 * shell sessions (docs/procs.md). Arguments are parsed once into struct cli_proc_args; the
 * local store runs them here through the public API, the daemon's socket in remote-proc.c.
 * Both print through the same functions, from the JSON the daemon answers (locally built the
 * same way), so the two paths print the same bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "common/cleanup.h"
#include "common/err.h"
#include "common/util.h"

/* ---- printing (both paths) ------------------------------------------------------------- */

json_t *cli_proc_info_json(const struct rung_proc_info *pi)
{
	json_t *argv = json_array();
	for (char **a = pi->argv; a && *a; a++)
		json_array_append_new(argv, json_string(*a));
	bool exited = pi->state == RUNG_PROC_EXITED;
	return json_pack("{s:s, s:s, s:o, s:b, s:b, s:s, s:o, s:o, s:I, s:I, s:I, s:I, s:I}",
			 "handle", pi->handle, "name", pi->name, "argv", argv, "pty", pi->pty,
			 "session", pi->session, "state", exited ? "exited" : "running",
			 "exit_code", exited ? json_integer(pi->exit_code) : json_null(), "signal",
			 exited ? json_integer(pi->signal) : json_null(), "pid",
			 (json_int_t)pi->pid, "started_ms", (json_int_t)pi->started_ms,
			 "end_offset", (json_int_t)pi->end_offset, "dropped_out",
			 (json_int_t)pi->dropped_out, "dropped_err", (json_int_t)pi->dropped_err);
}

static void print_json(json_t *o)
{
	json_dumpf(o, stdout, JSON_COMPACT);
	putchar('\n');
}

int cli_proc_print_list(struct cli *c, const char *id, json_t *list)
{
	if (c->json) {
		json_t *o = json_pack("{s:s, s:O}", "id", id, "procs", list);
		print_json(o);
		json_decref(o);
		return 0;
	}
	printf("%-16s  %-12s  %-8s  %-6s  %-7s  %-19s  %s\n", "HANDLE", "NAME", "STATE", "EXIT",
	       "PID", "STARTED", "COMMAND");
	for (size_t i = 0; i < json_array_size(list); i++) {
		json_t *p = json_array_get(list, i);
		char exit_s[16] = "-", when[32] = "-", cmd[256] = "";
		json_t *ec = json_object_get(p, "exit_code");
		int sig = (int)json_integer_value(json_object_get(p, "signal"));
		if (json_is_integer(ec) && sig)
			snprintf(exit_s, sizeof(exit_s), "SIG%s", rung_signal_name(sig));
		else if (json_is_integer(ec))
			snprintf(exit_s, sizeof(exit_s), "%d", (int)json_integer_value(ec));
		time_t t = (time_t)(json_integer_value(json_object_get(p, "started_ms")) / 1000);
		struct tm tm;
		if (t && localtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		json_t *a = json_object_get(p, "argv");
		for (size_t k = 0; k < json_array_size(a); k++)
			snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "%s%s", k ? " " : "",
				 json_string_value(json_array_get(a, k)));
		const char *name = json_string_value(json_object_get(p, "name"));
		printf("%-16s  %-12s  %-8s  %-6s  %-7" PRId64 "  %-19s  %s%s\n",
		       json_string_value(json_object_get(p, "handle")), name && *name ? name : "-",
		       json_string_value(json_object_get(p, "state")), exit_s,
		       (int64_t)json_integer_value(json_object_get(p, "pid")), when,
		       json_is_true(json_object_get(p, "session")) ? "[session] " : "", cmd);
	}
	return 0;
}

int cli_proc_print_wait(struct cli *c, json_t *o)
{
	if (c->json)
		print_json(o);
	if (!json_is_true(json_object_get(o, "exited"))) {
		if (!c->json)
			fprintf(stderr, "rung: still running\n");
		return 124;
	}
	int code = (int)json_integer_value(json_object_get(o, "exit_code"));
	int sig = (int)json_integer_value(json_object_get(o, "signal"));
	if (!c->json && sig)
		fprintf(stderr, "rung: killed by SIG%s\n", rung_signal_name(sig));
	return sig ? 128 + sig : code;
}

/* ---- arguments --------------------------------------------------------------------------- */

static int add_env(const char *cmd, struct cli_proc_args *a, const char *v)
{
	if (!strchr(v, '=') || v[0] == '=')
		return cli_usage_error(cmd, "--env: '%s' is not KEY=VALUE", v), -1;
	size_t n = 0;
	while (a->envv && a->envv[n])
		n++;
	char **nv = realloc(a->envv, (n + 2) * sizeof(char *));
	if (!nv)
		return -1;
	nv[n] = (char *)v;
	nv[n + 1] = NULL;
	a->envv = nv;
	a->req.env = (const char *const *)nv;
	return 0;
}

static int parse_uint(const char *cmd, const char *opt, const char *v, uint64_t max, uint64_t *out)
{
	if (rung_parse_u64(v, out) < 0 || *out > max)
		return cli_usage_error(cmd, "%s: '%s' is not a number from 0 to %" PRIu64, opt, v,
				       max),
		       -1;
	return 0;
}

static int parse_seconds(const char *cmd, const char *v, uint32_t *ms)
{
	char *end;
	double d = strtod(v, &end);
	if (*end || !*v || d < 0 || d > 86400)
		return cli_usage_error(cmd, "--timeout: '%s' is not seconds (0..86400)", v), -1;
	*ms = (uint32_t)(d * 1000);
	return 0;
}

/* One option at argv[*i]: 1 consumed, 0 not an option of this op, -1 error (printed). */
static int proc_opt(const char *cmd, struct cli_proc_args *a, int argc, char **argv, int *i)
{
	const char *o = argv[*i];
	uint64_t v;
	if (!strcmp(o, "--follow") || !strcmp(o, "-f")) {
		a->follow = true;
		return a->op == CLI_P_LOGS;
	}
	if (!strcmp(o, "--pty") || !strcmp(o, "-t")) {
		a->req.pty = true;
		return a->op == CLI_P_START;
	}
	static const char *const valued[] = {"--since", "--timeout", "--name",	 "--cwd",  "--env",
					     "--rows",	"--cols",    "--buffer", "--shell"};
	size_t k = 0;
	while (k < RUNG_ARRAY_SIZE(valued) && strcmp(o, valued[k]))
		k++;
	if (k == RUNG_ARRAY_SIZE(valued))
		return 0;
	if (*i + 1 >= argc)
		return cli_usage_error(cmd, "%s needs a value", o), -1;
	const char *val = argv[++*i];
	bool start = a->op == CLI_P_START, sess = a->op == CLI_P_SESS_START;
	switch (k) {
	case 0:
		return a->op != CLI_P_LOGS				? 0
		       : parse_uint(cmd, o, val, UINT64_MAX, &a->since) ? -1
									: 1;
	case 1:
		if (a->op != CLI_P_WAIT && a->op != CLI_P_SESS_RUN)
			return 0;
		a->has_timeout = true;
		return parse_seconds(cmd, val, &a->timeout_ms) ? -1 : 1;
	case 2:
		if (strlen(val) > RUNG_PROC_NAME_MAX)
			return cli_usage_error(cmd, "--name: longer than %d bytes",
					       RUNG_PROC_NAME_MAX),
			       -1;
		a->req.name = val;
		return start;
	case 3:
		a->req.cwd = val;
		return start || sess;
	case 4:
		return !(start || sess) ? 0 : add_env(cmd, a, val) ? -1 : 1;
	case 5:
	case 6:
		if (!start)
			return 0;
		if (parse_uint(cmd, o, val, 4096, &v) < 0)
			return -1;
		*(k == 5 ? &a->req.rows : &a->req.cols) = (uint16_t)v;
		return 1;
	case 7:
		if (!start)
			return 0;
		if (rung_parse_size(val, &a->req.buffer_bytes) < 0)
			return cli_usage_error(cmd, "--buffer: '%s' is not a size", val), -1;
		return 1;
	default:
		a->shell = val;
		return sess;
	}
}

static const struct {
	const char *name;
	enum cli_proc_op op;
	int npos; /* positionals after the subcommand: ID, H, and the op's own */
	bool cmd; /* takes -- CMD */
} subs[] = {
    {"start", CLI_P_START, 1, true},	{"ls", CLI_P_LS, 1, false},
    {"logs", CLI_P_LOGS, 2, false},	{"stdin", CLI_P_STDIN, 2, false},
    {"signal", CLI_P_SIGNAL, 3, false}, {"wait", CLI_P_WAIT, 2, false},
    {"kill", CLI_P_KILL, 2, false},	{"resize", CLI_P_RESIZE, 4, false},
};
static const struct {
	const char *name;
	enum cli_proc_op op;
	int npos;
	bool cmd;
} sess_subs[] = {{"start", CLI_P_SESS_START, 1, false}, {"run", CLI_P_SESS_RUN, 2, true}};

/* The op's own positionals (after ID and H): signal SIG, resize ROWS COLS. */
static int own_positionals(const char *cmd, struct cli_proc_args *a, char **pos)
{
	uint64_t r, c;
	if (a->op == CLI_P_SIGNAL && (a->sig = rung_signal_parse(pos[2])) < 0)
		return cli_usage_error(cmd, "signal: '%s' is not a signal (TERM, KILL, INT, 9...)",
				       pos[2]),
		       -1;
	if (a->op == CLI_P_RESIZE) {
		if (rung_parse_u64(pos[2], &r) < 0 || rung_parse_u64(pos[3], &c) < 0 ||
		    r > 100000000 || c > 100000000)
			return cli_usage_error(cmd, "resize: ROWS COLS must be numbers ('%s' '%s')",
					       pos[2], pos[3]),
			       -1;
		a->rows = (unsigned)r;
		a->cols = (unsigned)c;
	}
	return 0;
}

/* session run's command: the words after --, joined by spaces (one shell string). */
static int join_command(struct cli_proc_args *a, int argc, char **argv, int at)
{
	size_t len = 1;
	for (int i = at; i < argc; i++)
		len += strlen(argv[i]) + 1;
	if (!(a->command = calloc(1, len)))
		return -1;
	for (int i = at; i < argc; i++) {
		if (i > at)
			strcat(a->command, " ");
		strcat(a->command, argv[i]);
	}
	return 0;
}

static int parse_args(const char *cmd, int npos, bool takes_cmd, struct cli_proc_args *a, int argc,
		      char **argv)
{
	char *pos[4] = {0};
	int n = 0, cmd_at = -1;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			cmd_at = i + 1;
			break;
		}
		if (argv[i][0] == '-' && argv[i][1]) {
			int r = proc_opt(cmd, a, argc, argv, &i);
			if (r < 0)
				return 2;
			if (!r)
				return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
			continue;
		}
		if (n == npos)
			return cli_usage_error(cmd, "unexpected '%s'%s", argv[i],
					       takes_cmd ? " (missing --?)" : "");
		pos[n++] = argv[i];
	}
	if (n < npos)
		return cli_usage_error(cmd, "missing %s",
				       n == 0		       ? "ID"
				       : n == 1		       ? "handle"
				       : a->op == CLI_P_SIGNAL ? "SIGNAL"
							       : "ROWS COLS");
	if (takes_cmd && (cmd_at < 0 || cmd_at >= argc))
		return cli_usage_error(cmd, "missing -- CMD");
	if (!takes_cmd && cmd_at >= 0)
		return cli_usage_error(cmd, "takes no command after --");
	if ((a->req.rows || a->req.cols) && !a->req.pty)
		return cli_usage_error(cmd, "--rows/--cols need --pty");
	a->id = pos[0];
	a->handle = pos[1];
	if (own_positionals(cmd, a, pos) < 0)
		return 2;
	if (takes_cmd && a->op == CLI_P_START)
		a->req.argv = (const char *const *)argv + cmd_at;
	if (takes_cmd && a->op == CLI_P_SESS_RUN && join_command(a, argc, argv, cmd_at) < 0)
		return 1;
	return 0;
}

/* ---- the local store ------------------------------------------------------------------- */

static int local_logs(struct cli *c, struct rung_sandbox *sb, struct cli_proc_args *a,
		      struct rung_err *err);
static int local_stdin(struct rung_sandbox *sb, const char *h, struct rung_err *err);

static int local_info(struct cli *c, struct rung_sandbox *sb, const char *h, bool exited,
		      struct rung_err *err)
{
	struct rung_proc_info pi;
	int r = rung_proc_get(sb, h, &pi, err);
	if (r < 0)
		return r;
	json_t *o = cli_proc_info_json(&pi);
	rung_proc_info_release(&pi, 1);
	json_object_set_new(o, "exited", json_boolean(exited));
	int st = cli_proc_print_wait(c, o);
	json_decref(o);
	return st;
}

static int local_session_run(struct cli *c, struct rung_sandbox *sb, struct cli_proc_args *a,
			     struct rung_err *err)
{
	struct rung_exec_res res;
	int r = rung_session_run(sb, a->handle, a->command, a->timeout_ms, &res, err);
	if (r < 0)
		return r;
	int status = res.exit_code >= 0 ? res.exit_code : 128 + res.signal;
	if (res.timed_out)
		status = 124;
	if (c->json) {
		json_t *o = json_pack(
		    "{s:s, s:s, s:i, s:i, s:s%, s:s%, s:b, s:b, s:I}", "id", a->id, "session",
		    a->handle, "exit_code", res.exit_code, "signal", res.signal, "stdout",
		    res.out ? res.out : "", res.out_len, "stderr", res.errout ? res.errout : "",
		    res.err_len, "timed_out", res.timed_out, "truncated", res.truncated,
		    "duration_ms", (json_int_t)(res.duration_us / 1000));
		if (o)
			print_json(o);
		json_decref(o);
	} else {
		rung_write_all(1, res.out ? res.out : "", res.out_len);
		rung_write_all(2, res.errout ? res.errout : "", res.err_len);
	}
	if (res.timed_out)
		fprintf(stderr, "rung: the run timed out; its job was interrupted\n");
	rung_exec_res_release(&res);
	return status;
}

static void print_handle(struct cli *c, const char *id, const char *h)
{
	if (c->json)
		printf("{\"id\": \"%s\", \"handle\": \"%s\"}\n", id, h);
	else
		printf("%s\n", h);
}

static void print_done(struct cli *c, struct cli_proc_args *a, const char *what)
{
	if (c->json)
		printf("{\"id\": \"%s\", \"handle\": \"%s\", \"%s\": true}\n", a->id, a->handle,
		       what);
}

/* The exit status, or <0 with err. */
static int local_op(struct cli *c, struct rung_sandbox *sb, struct cli_proc_args *a,
		    struct rung_err *err)
{
	char h[RUNG_PROC_HANDLE_LEN + 1];
	int r;
	switch (a->op) {
	case CLI_P_START:
	case CLI_P_SESS_START:
		r = a->op == CLI_P_START
			? rung_proc_start(sb, &a->req, h, err)
			: rung_session_start(sb, a->shell, a->req.env, a->req.cwd, h, err);
		if (r >= 0)
			print_handle(c, a->id, h);
		return r < 0 ? r : 0;
	case CLI_P_LS: {
		struct rung_proc_info *v = NULL;
		size_t n = 0;
		if ((r = rung_proc_list(sb, &v, &n, err)) < 0)
			return r;
		json_t *list = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(list, cli_proc_info_json(&v[i]));
		rung_proc_info_free(v, n);
		cli_proc_print_list(c, a->id, list);
		json_decref(list);
		return 0;
	}
	case CLI_P_LOGS:
		return local_logs(c, sb, a, err);
	case CLI_P_STDIN:
		r = local_stdin(sb, a->handle, err);
		break;
	case CLI_P_SIGNAL:
		r = rung_proc_signal(sb, a->handle, a->sig, err);
		break;
	case CLI_P_WAIT:
		if ((r = rung_proc_wait(sb, a->handle, a->has_timeout ? a->timeout_ms : UINT32_MAX,
					NULL, err)) < 0)
			return r;
		return local_info(c, sb, a->handle, r == 1, err);
	case CLI_P_KILL:
		r = rung_proc_kill(sb, a->handle, err);
		break;
	case CLI_P_RESIZE:
		r = rung_proc_resize(sb, a->handle, a->rows, a->cols, err);
		break;
	case CLI_P_SESS_RUN:
		return local_session_run(c, sb, a, err);
	default:
		return rung_err_set(err, EINVAL, "unknown operation");
	}
	if (r < 0)
		return r;
	print_done(c, a,
		   a->op == CLI_P_KILL	   ? "killed"
		   : a->op == CLI_P_STDIN  ? "closed"
		   : a->op == CLI_P_SIGNAL ? "signalled"
					   : "resized");
	return 0;
}

static int run_parsed(struct cli *c, struct cli_proc_args *a)
{
	struct rung_err err = {0};
	if (c->remote)
		return cli_remote_proc(c, a);
	struct rung_router *r = cli_router(c);
	if (!r)
		return 1;
	struct rung_sandbox *sb;
	if (rung_sandbox_open(r, a->id, NULL, &sb, &err) < 0)
		return cli_fail(c, &err);
	int st = local_op(c, sb, a, &err);
	rung_sandbox_close(sb);
	return st < 0 ? cli_fail(c, &err) : st;
}

static int dispatch(struct cli *c, const char *cmd, bool session, int argc, char **argv)
{
	if (argc < 2)
		return cli_usage_error(cmd, "missing a subcommand");
	struct cli_proc_args a = {0};
	int npos = -1;
	bool takes_cmd = false;
	size_t n = session ? RUNG_ARRAY_SIZE(sess_subs) : RUNG_ARRAY_SIZE(subs);
	for (size_t i = 0; i < n; i++) {
		const char *name = session ? sess_subs[i].name : subs[i].name;
		if (strcmp(name, argv[1]))
			continue;
		a.op = session ? sess_subs[i].op : subs[i].op;
		npos = session ? sess_subs[i].npos : subs[i].npos;
		takes_cmd = session ? sess_subs[i].cmd : subs[i].cmd;
	}
	if (npos < 0)
		return cli_usage_error(cmd, "unknown subcommand '%s'", argv[1]);
	int st = parse_args(cmd, npos, takes_cmd, &a, argc, argv);
	if (!st)
		st = run_parsed(c, &a);
	free(a.envv);
	free(a.command);
	return st;
}

CLI_CMD(proc) { return dispatch(c, "proc", false, argc, argv); }

CLI_CMD(session) { return dispatch(c, "session", true, argc, argv); }

/* ---- logs and stdin, locally -------------------------------------------------------------- */

int cli_proc_emit_chunk(struct cli *c, enum rung_stream s, uint64_t offset, const void *data,
			size_t len)
{
	if (!c->json) {
		int r = rung_write_all(s == RUNG_STDERR ? 2 : 1, data, len);
		return r == -EPIPE ? -1 : 0;
	}
	json_t *o = json_pack("{s:s, s:I}", "type", s == RUNG_STDERR ? "stderr" : "stdout",
			      "offset", (json_int_t)offset);
	json_t *text = json_stringn(data, len); /* NULL when not valid UTF-8 */
	if (text) {
		json_object_set_new(o, "data", text);
	} else {
		char *b = malloc(len / 3 * 4 + 8);
		if (b)
			EVP_EncodeBlock((unsigned char *)b, data, (int)len);
		json_object_set_new(o, "data_b64", json_string(b ? b : ""));
		free(b);
	}
	print_json(o);
	json_decref(o);
	return fflush(stdout) == EOF ? -1 : 0;
}

int cli_proc_print_end(struct cli *c, uint64_t end_offset, uint64_t dropped, bool exited)
{
	if (c->json) {
		printf("{\"type\": \"end\", \"end_offset\": %" PRIu64 ", \"dropped\": %" PRIu64
		       ", \"exited\": %s}\n",
		       end_offset, dropped, exited ? "true" : "false");
	} else if (dropped) {
		fprintf(stderr,
			"rung: %" PRIu64
			" bytes after the offset asked for were no longer buffered\n",
			dropped);
	}
	return 0;
}

static int on_log(void *ud, enum rung_stream s, uint64_t offset, const void *data, size_t len)
{
	return cli_proc_emit_chunk(ud, s, offset, data, len);
}

static int local_logs(struct cli *c, struct rung_sandbox *sb, struct cli_proc_args *a,
		      struct rung_err *err)
{
	struct rung_proc_logs_req q = {
	    .since = a->since, .follow = a->follow, .on_output = on_log, .ud = c};
	struct rung_proc_logs_res res = {0};
	int r = rung_proc_logs(sb, a->handle, &q, &res, err);
	if (r < 0)
		return r;
	return cli_proc_print_end(c, res.end_offset, res.dropped, res.exited);
}

static int local_stdin(struct rung_sandbox *sb, const char *h, struct rung_err *err)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return rung_err_sys(err, errno, "read stdin");
		if (n == 0)
			return rung_proc_close_stdin(sb, h, err);
		int r = rung_proc_write(sb, h, buf, (size_t)n, err);
		if (r < 0)
			return r;
	}
}
