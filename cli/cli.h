/* cli/cli.h: the rung command's internals. The CLI uses only the public API (rung/rung.h). */
#ifndef RUNG_CLI_H
#define RUNG_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>
#include <stdlib.h>

#include "rung/rung.h"

struct cli {
	/* the router's settings from the environment, read once by main (RUNG_STATE_DIR, ...) */
	struct rung_router_opts host;
	const char *state_dir;
	bool json;
	bool deployed;
	struct rung_router *router; /* opened lazily by cli_router() */
	/* remote: a client of `rung serve` on socket (cli/remote.h); token: RUNG_TOKEN */
	const char *socket;
	const char *token;
	const char *path_env; /* PATH, where --callback finds its programs */
	bool remote;
	bool root;
	struct curl_fns *curl; /* libcurl, loaded on the first remote request */
	char hint[512];        /* what to do about the last error, printed by cli_fail */
};

struct cli_cmd {
	const char *name;
	int (*run)(struct cli *c, int argc, char **argv);
	const char *usage;   /* one line */
	const char *help;    /* long help */
};

extern const struct cli_cmd cli_cmds[];

struct rung_router *cli_router(struct cli *c);
/* The sandbox id of the local store into *sb; an exit status (0, or the failure printed). */
int cli_sandbox_open(struct cli *c, const char *id, struct rung_sandbox **sb);
int cli_fail(struct cli *c, const struct rung_err *err);   /* prints, returns exit status */
/* main's argv as given, then rung-dyn instead of this program where it cannot dlopen (util.c) */
void cli_dyn_init(int argc, char **argv);
void cli_dyn(const char *why);
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool cli_want_help(int argc, char **argv);
/* `rung run`'s stop signals (SIGINT, SIGTERM, SIGHUP) into set; block them (the old mask in
 * prev) when block, so one that comes while an anonymous sandbox is being created is held for
 * the exec's wait instead of leaving the new sandbox behind. */
void cli_hold_stop_signals(bool block, sigset_t *set, sigset_t *prev);
int cli_print_help(const char *cmd);

/* SPEC-OPTS: consumes recognised options at argv[*i]; 1 if consumed, 0 if not, <0 on error. */
struct cli_spec_opts {
	struct rung_spec spec;
	const char *spec_file;
	bool any_flag;
};
void cli_spec_opts_init(struct cli_spec_opts *o);
int cli_spec_opt(struct cli *c, struct cli_spec_opts *o, int argc, char **argv, int *i);
/* Build the final spec (file, then flags on top). */
int cli_spec_finish(struct cli_spec_opts *o, struct rung_err *err);

/* Run an exec with output streamed to stdout/stderr (or collected for --json). */
int cli_exec_and_report(struct cli *c, struct rung_sandbox *sb, struct rung_exec_req *req);

/* --callback NAME=COMMAND (cmd-callbacks.c): 1 consumed, 0 not it, -1 error (reported).
 * COMMAND runs on the host, outside the sandbox. */
struct cli_callbacks {
	struct rung_callback *tab;
	size_t n;
};
int cli_callback_opt(const struct cli *c, const char *cmd, int argc, char **argv, int *i,
		     struct cli_callbacks *cbs);
void cli_callbacks_free(struct cli_callbacks *cbs);
void cli_callbacks_apply(const struct cli_callbacks *cbs, struct rung_exec_req *req);
/* Run req's callback name (args: JSON text) with a deadline timeout_ms from now (the daemon's
 * path: the daemon sends the call, the CLI answers it). */
int cli_callback_invoke(const struct rung_exec_req *req, const char *name, const char *args,
			uint32_t timeout_ms, char **result, struct rung_err *err);
static inline void cli_callbacks_freep(struct cli_callbacks *cbs)
{
	cli_callbacks_free(cbs);
}
#define cleanup_callbacks __attribute__((cleanup(cli_callbacks_freep)))
#define CLI_CALLBACK_HELP                                                                      \
	"  --callback NAME=COMMAND  let the code call host function NAME (docs/callbacks.md).\n" \
	"                        COMMAND runs ON THE HOST, outside the sandbox, the call's\n"    \
	"                        JSON arguments on its stdin; its stdout (JSON) is the\n"       \
	"                        result, a non-zero exit an error (its last stderr line).\n"    \
	"                        No shell: COMMAND is split into words (quotes group, \\\n"    \
	"                        escapes, nothing expands) and its program found on PATH;\n"    \
	"                        for a pipeline use a script or name sh -c. Repeatable.\n"

/* commands */
#define CLI_CMD(n) int cli_cmd_##n(struct cli *c, int argc, char **argv)
CLI_CMD(run);
CLI_CMD(snapshot);
CLI_CMD(acquire);
CLI_CMD(exec);
CLI_CMD(write);
CLI_CMD(read);
CLI_CMD(cp);
/* rung-image's `cp` (cli/main-image-cp.c) */
int cli_cp_main(struct cli *c, int argc, char **argv);
CLI_CMD(run_code);
CLI_CMD(ls);
CLI_CMD(inspect);
CLI_CMD(suspend);
CLI_CMD(resume);
CLI_CMD(dispose);
CLI_CMD(dispose_scope);
CLI_CMD(gc);
CLI_CMD(pool);
CLI_CMD(fork);
CLI_CMD(image);
CLI_CMD(serve);
CLI_CMD(ladder);
CLI_CMD(proc);
CLI_CMD(session);
CLI_CMD(attach);


/* ---- background processes and sessions (cmd-proc.c; through the daemon: remote-proc.c) -- */
enum cli_proc_op {
	CLI_P_START, CLI_P_LS, CLI_P_LOGS, CLI_P_STDIN, CLI_P_SIGNAL, CLI_P_WAIT, CLI_P_KILL,
	CLI_P_RESIZE, CLI_P_SESS_START, CLI_P_SESS_RUN
};
struct cli_proc_args {
	enum cli_proc_op op;
	const char *id, *handle;
	struct rung_proc_req req; /* start; session start: cwd, env */
	char **envv;		  /* req.env's storage */
	const char *shell;	  /* session start */
	char *command;		  /* session run (malloc'd) */
	uint64_t since;		  /* logs */
	bool follow;
	int sig;		  /* signal */
	uint32_t timeout_ms;	  /* wait, session run */
	bool has_timeout;	  /* --timeout given (wait --timeout 0: do not wait) */
	unsigned rows, cols;	  /* resize */
};
/* Printing shared by the local and the remote path: info is one process as the daemon
 * encodes it ({"handle", "name", "argv", "state", ...}); list an array of those. */
json_t *cli_proc_info_json(const struct rung_proc_info *pi);
int cli_proc_print_list(struct cli *c, const char *id, json_t *list);
/* wait's answer: {"exited": bool, ...info}; the exit status of `rung proc wait`. */
int cli_proc_print_wait(struct cli *c, json_t *o);
/* logs: one chunk, its bytes to stdout/stderr, or (--json) one NDJSON line
 * {"type": "stdout"|"stderr", "offset": N, "data"|"data_b64": ...}; <0: stdout is gone. */
int cli_proc_emit_chunk(struct cli *c, enum rung_stream s, uint64_t offset, const void *data,
			size_t len);
/* logs' end: --json {"type": "end", "end_offset", "dropped", "exited"}; else dropped bytes
 * on stderr. */
int cli_proc_print_end(struct cli *c, uint64_t end_offset, uint64_t dropped, bool exited);
/* ---- attach and exec -t (cmd-attach.c; through the daemon: remote-attach.c) ---------- */
/* Our terminal raw until cli_term_restore (also at exit and on SIGINT/TERM/HUP/QUIT);
 * nothing when stdin is not a terminal. */
void cli_term_raw(void);
void cli_term_restore(void);
bool cli_term_size(unsigned *rows, unsigned *cols);
/* The detach keys, Ctrl-P Ctrl-Q (a Ctrl-P is held until the next byte says what it is). */
struct cli_detach {
	bool held;
};
/* out gets what passes on (at most len + 1 bytes); -1: detach. */
ssize_t cli_detach_filter(struct cli_detach *d, const char *in, size_t len, char *out);
/* Attach our terminal to process h: 1 it exited, 0 detached, <0 with err. eof_eot: our
 * stdin's EOF is sent as the terminal's EOF character (exec -t) instead of detaching. */
int cli_attach_local(struct cli *c, struct rung_sandbox *sb, const char *id, const char *h,
		     uint64_t since, bool eof_eot, struct rung_err *err);
/* `rung exec -t`: start req (made a pty of our size) in sandbox id, attach, the exit status. */
int cli_exec_tty(struct cli *c, const char *id, struct rung_proc_req *req);

CLI_CMD(port);
CLI_CMD(fs);
CLI_CMD(stats);

#endif
