/* cli/cli.h: the rung command's internals. The CLI uses only the public API (rung/rung.h). */
#ifndef RUNG_CLI_H
#define RUNG_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
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
int cli_fail(struct cli *c, const struct rung_err *err);   /* prints, returns exit status */
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
int cli_callback_opt(const char *cmd, int argc, char **argv, int *i, struct cli_callbacks *cbs);
void cli_callbacks_apply(const struct cli_callbacks *cbs, struct rung_exec_req *req);
/* Run req's callback name (args: JSON text) with a deadline timeout_ms from now (the daemon's
 * path: the daemon sends the call, the CLI answers it). */
int cli_callback_invoke(const struct rung_exec_req *req, const char *name, const char *args,
			uint32_t timeout_ms, char **result, struct rung_err *err);
static inline void cli_callbacks_freep(struct cli_callbacks *cbs)
{
	free(cbs->tab);
}
#define cleanup_callbacks __attribute__((cleanup(cli_callbacks_freep)))
#define CLI_CALLBACK_HELP                                                                      \
	"  --callback NAME=COMMAND  let the code call host function NAME (docs/callbacks.md).\n" \
	"                        COMMAND runs ON THE HOST, outside the sandbox, as sh -c\n"      \
	"                        COMMAND, the call's JSON arguments on its stdin; its stdout\n"  \
	"                        (JSON) is the result, a non-zero exit an error (its last\n"     \
	"                        stderr line). Repeatable.\n"

/* commands */
#define CLI_CMD(n) int cli_cmd_##n(struct cli *c, int argc, char **argv)
CLI_CMD(run);
CLI_CMD(acquire);
CLI_CMD(exec);
CLI_CMD(write);
CLI_CMD(read);
CLI_CMD(run_code);
CLI_CMD(ls);
CLI_CMD(inspect);
CLI_CMD(suspend);
CLI_CMD(resume);
CLI_CMD(dispose);
CLI_CMD(dispose_scope);
CLI_CMD(gc);
CLI_CMD(image);
CLI_CMD(serve);

#endif
