/* cli/remote.h: the CLI as a client of `rung serve` over its Unix socket (cli/remote*.c). */
#ifndef RUNG_CLI_REMOTE_H
#define RUNG_CLI_REMOTE_H

#include <stdbool.h>
#include <jansson.h>
#include <stddef.h>

#include "cli/cli.h"

#define CLI_DEFAULT_SOCKET "/run/rung/rung.sock"

/* One request's answer. With on_data set, the body goes to it as it arrives (<0: stop). */
struct cli_http {
	long status;
	char *body; /* NUL-terminated when collected */
	size_t len, cap;
	int (*on_data)(struct cli_http *h, const char *p, size_t len);
	bool (*cancel)(struct cli_http *h); /* polled during the transfer: true aborts it */
	void *ud;
};

/* Choose the transport: --socket, else env_socket (RUNG_SOCKET), else the local store when
 * local (root, or RUNG_STATE_DIR set) or --state-dir was given, else the default socket when
 * it exists; else an error that says what to do (and c->hint). */
int cli_remote_select(struct cli *c, const char *env_socket, bool local, struct rung_err *err);
/* Connect once to c->socket: 0, or an error (and c->hint: what to do). */
int cli_remote_check(struct cli *c, struct rung_err *err);
/* One request; 0 when an HTTP answer came (any status: see h->status). */
int cli_http_do(struct cli *c, struct cli_http *h, const char *method, const char *path,
		const char *const *headers, const void *body, size_t blen, struct rung_err *err);
/* An HTTP error answer as a rung_err (errno from the status, the daemon's message). */
int cli_http_error(struct cli *c, struct cli_http *h, struct rung_err *err);
/* The same from an answer's status and its "error" object (NULL: none), for streamed answers. */
int cli_http_error_of(struct cli *c, long status, json_t *error, struct rung_err *err);

/* NDJSON lines of a streamed answer: each complete line, without its newline, goes to fn; a
 * negative return from fn stops the feed. _end passes a last line without its newline (an
 * error answer's body) and frees the buffer. */
struct cli_lines {
	char *line;
	size_t len, cap;
};
int cli_lines_feed(struct cli_lines *l, const char *p, size_t len,
		   int (*fn)(void *ud, const char *line, size_t len), void *ud);
int cli_lines_end(struct cli_lines *l, int (*fn)(void *ud, const char *line, size_t len),
		  void *ud);
void cli_http_release(struct cli_http *h);
/* {"K": "V"} of a NULL-terminated K=V list (NULL: {}). */
json_t *cli_env_json(const char *const *env);
/* cli_http_do, then a non-2xx answer as cli_http_error. */
int cli_http_call(struct cli *c, struct cli_http *h, const char *method, const char *path,
		  const char *const *hdrs, const void *body, size_t blen, struct rung_err *err);
/* Append s percent-encoded (all but RFC 3986's unreserved bytes) to out. */
void cli_url_pct(char *out, size_t n, const char *s);
/* out = "/v1/sandboxes/ID" + tail (NULL: none). */
void cli_url_sb(char *out, size_t n, const char *id, const char *tail);
void cli_remote_close(struct cli *c);

/* The commands over the socket (cli/cmd-remote.c, cli/remote-exec.c), called after each command
 * parsed its arguments exactly as for the local store. */
int cli_remote_acquire(struct cli *c, const struct rung_key *key, const struct rung_spec *spec,
		       char id[65], char isolation[16], bool *created, struct rung_err *err);
int cli_remote_run(struct cli *c, const struct rung_key *key, bool anonymous,
		   const struct rung_spec *spec, struct rung_exec_req *req);
int cli_remote_exec(struct cli *c, const char *id, const struct rung_exec_req *req,
		    const char *lang);
int cli_remote_write(struct cli *c, const char *id, const char *path, const char *data, size_t len,
		     unsigned mode);
int cli_remote_read(struct cli *c, const char *id, const char *path);
int cli_remote_simple(struct cli *c, const char *op, const char *id);
/* POST .../suspend {"to_disk": true} */
int cli_remote_suspend_disk(struct cli *c, const char *id);
int cli_remote_dispose(struct cli *c, const char *id);
int cli_remote_dispose_scope(struct cli *c, const char *thread);
int cli_remote_ls(struct cli *c, const char *thread);
int cli_remote_inspect(struct cli *c, const char *id);
/* rung proc / rung session through the daemon (remote-proc.c): the exit status. */
int cli_remote_proc(struct cli *c, struct cli_proc_args *a);
/* rung attach through the daemon's WebSocket attach (remote-attach.c): the exit status. */
int cli_remote_attach(struct cli *c, const char *id, const char *h, uint64_t since, bool forget);
int cli_remote_exec_tty(struct cli *c, const char *id, const struct rung_proc_req *req);

#endif
