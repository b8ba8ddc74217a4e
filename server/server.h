/*
 * server/server.h: `rung serve`, the HTTP/JSON API daemon (the module's one public header).
 *
 * The daemon is a client of the public C API (include/rung/rung.h) and nothing else. The
 * request-handling pipeline is split so that everything a client controls is parsed by pure
 * functions, unit-tested and fuzzed without a socket:
 *
 *   tokens file text      -> srv_tokens_parse()     -> struct srv_tokens (digests, scopes)
 *   method/path/query/hdr -> srv_req_parse()        -> struct srv_req   (route, id, params)
 *   credential            -> srv_auth()             -> the caller's scope (never from the body)
 *   JSON body             -> srv_exec_body_parse()  -> struct srv_exec  (argv, env, ...)
 *                            srv_code_body_parse()
 *
 * Errors use rung_err plus a stable API code (enum srv_code) that maps to an HTTP status and
 * the JSON error body {"error": {"code": "...", "message": "..."}}.
 */
#ifndef RUNG_SERVER_SERVER_H
#define RUNG_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "rung/err.h"

/* `rung serve ...` (argv[0] is "serve"), with the routers' settings from the program's main
 * (host; its state_dir is the default of --state-dir). Returns the process exit status. */
struct rung_router_opts;
int rung_serve_main(int argc, char **argv, const struct rung_router_opts *host);

/* ---- limits --------------------------------------------------------------------------- */

#define SRV_MAX_JSON_BODY (1u << 20)  /* JSON request bodies */
#define SRV_MAX_UPLOAD (64u << 20)    /* PUT .../files */
#define SRV_MAX_READ_FILE (64u << 20) /* GET .../files */
#define SRV_MAX_ARCHIVE (8ull << 30)  /* PUT .../archive, unless --max-archive says */
#define SRV_MAX_HEADER 4096	      /* one header value */
#define SRV_MAX_PATH 4096	      /* the URL path and ?path= */
#define SRV_MAX_KEY_PART 256	      /* thread / agent / scope */
#define SRV_MAX_ARGS 4096
#define SRV_MAX_ENV 1024
#define SRV_MAX_TIMEOUT_S 86400

/* ---- stable error codes ------------------------------------------------------------ */

enum srv_code {
	SRV_OK,
	SRV_E_BAD_REQUEST,  /* 400 bad_request */
	SRV_E_UNAUTHORIZED, /* 401 unauthorized */
	SRV_E_FORBIDDEN,    /* 403 forbidden (policy refusal) */
	SRV_E_NOT_FOUND,    /* 404 not_found */
	SRV_E_METHOD,	    /* 405 method_not_allowed */
	SRV_E_CONFLICT,	    /* 409 conflict */
	SRV_E_TOO_LARGE,    /* 413 payload_too_large */
	SRV_E_UNSUPPORTED,  /* 415 unsupported_media_type */
	SRV_E_TOO_MANY,	    /* 429 too_many_requests (the scope's limit) */
	SRV_E_UNAVAILABLE,  /* 503 unavailable */
	SRV_E_TIMEOUT,	    /* 504 timeout */
	SRV_E_INTERNAL,	    /* 500 internal */
	SRV_CODE__COUNT
};
const char *srv_code_name(enum srv_code c);
unsigned srv_code_http(enum srv_code c);
/* Map a -errno from the rung API to an API code (ENOENT -> not_found, ...). */
enum srv_code srv_code_from_errno(int neg_errno);

/* ---- per-scope limits ------------------------------------------------------------------ */

/*
 * What the operator lets one scope have (the tokens file's "limits SCOPE key=value..." lines;
 * "limits * ..." changes the default for every scope). Concurrency keeps one tenant from
 * starving another; the spec maxima bound what one acquire may ask for.
 */
struct srv_limits {
	uint32_t requests;	 /* requests=N: in flight at once (429 beyond) */
	uint32_t connections;	 /* connections=N: open connections, idle ones included */
	uint32_t sandboxes;	 /* sandboxes=N: live sandboxes (a new one is 429 beyond) */
	uint64_t memory_bytes;	 /* memory=SIZE: the largest limits.memory */
	uint64_t disk_bytes;	 /* disk=SIZE: the largest limits.disk */
	uint32_t cpus_milli;	 /* cpus=N: the largest limits.cpus (1000 = one CPU) */
	uint32_t pids;		 /* pids=N: the largest limits.pids */
	uint32_t exec_timeout_s; /* exec_timeout=SECONDS: the largest limits.exec_timeout_s */
	uint64_t output_bytes;	 /* output=SIZE: the largest limits.output_bytes */
	uint32_t ttl_s;		 /* ttl=SECONDS: the longest ttl_s, and ttl_s 0 (never) is refused;
				    ttl=0: no maximum */
};
extern const struct srv_limits srv_limits_default;
#define SRV_MAX_COLLECTED_OUTPUT (16u << 20) /* per stream, for a collected (non-streamed) exec */

/* The KEY=VALUE words of a limits line into l (keys it does not name keep their value). */
int srv_limits_line_parse(const char *p, size_t len, struct srv_limits *l, struct rung_err *err);
struct rung_spec;
/* Pure: 0, or -EACCES naming the first spec field above the scope's maximum. */
int srv_spec_check(const struct rung_spec *spec, const struct srv_limits *l, struct rung_err *err);

/* ---- tokens and identity --------------------------------------------------------------- */

/*
 * The tokens file: one "TOKEN SCOPE" per line; '#' starts a comment; blank lines are
 * ignored. Two more forms grant the Unix socket without a token:
 *   unix-peer-uid:UID SCOPE   a Unix-socket client whose SO_PEERCRED uid is UID gets SCOPE
 *   - SCOPE                   any Unix-socket client without a token gets SCOPE
 *   admin TOKEN               TOKEN reads the daemon-wide /metrics (every scope), nothing else
 *   limits SCOPE|* KEY=VALUE...  the scope's limits (struct srv_limits); unnamed keys keep
 *                             the default's
 * A token is 16..512 printable non-space bytes and maps to exactly one scope (a repeated
 * token is an error). Tokens are kept only as SHA-256 digests, compared in constant time.
 */
enum srv_cred_kind { SRV_CRED_TOKEN, SRV_CRED_UNIX_UID, SRV_CRED_UNIX_ANY, SRV_CRED_ADMIN };

struct srv_cred {
	enum srv_cred_kind kind;
	unsigned char digest[32]; /* SRV_CRED_TOKEN */
	uid_t uid;		  /* SRV_CRED_UNIX_UID */
	char *scope;
	unsigned line;
};

struct srv_scope_limits {
	char *scope; /* "*": the default for every scope */
	struct srv_limits l;
	unsigned line;
};

struct srv_tokens {
	struct srv_cred *v;
	size_t n;
	struct srv_scope_limits *lim;
	size_t n_lim;
};
/* The limits of scope: its own line, else the "*" line, else srv_limits_default. */
const struct srv_limits *srv_tokens_limits(const struct srv_tokens *t, const char *scope);

int srv_tokens_parse(const char *text, size_t len, struct srv_tokens *out, struct rung_err *err);
/* Reads path, refusing a file that is world-readable/-writable or not a regular file. */
int srv_tokens_load(const char *path, struct srv_tokens *out, struct rung_err *err);
void srv_tokens_release(struct srv_tokens *t);

/* Who is calling: the bearer token (if any) and, for the Unix socket, the peer's uid. */
struct srv_caller {
	const char *bearer;	/* the token from "Authorization: Bearer X"; NULL if none */
	bool bad_authorization; /* an Authorization header that is not "Bearer <token>" */
	bool unix_peer;		/* arrived on the Unix socket with valid SO_PEERCRED */
	uid_t uid;
};

/*
 * The caller's scope, or NULL (unauthorized). A token, when given, decides alone: a wrong
 * token is refused even on the Unix socket. Every token is compared (constant time).
 * An admin token answers SRV_ADMIN_SCOPE (which no scope line can name: it has a space).
 */
const char *srv_auth(const struct srv_tokens *t, const struct srv_caller *c);
#define SRV_ADMIN_SCOPE "admin metrics"

/* ---- requests ----------------------------------------------------------------------------- */

enum srv_route {
	SRV_R_NONE,
	SRV_R_HEALTH,	     /* GET /healthz */
	SRV_R_METRICS,	     /* GET /metrics */
	SRV_R_CREATE,	     /* POST /v1/sandboxes */
	SRV_R_LIST,	     /* GET /v1/sandboxes[?thread=T] */
	SRV_R_DISPOSE_SCOPE, /* DELETE /v1/sandboxes[?thread=T] */
	SRV_R_INSPECT,	     /* GET /v1/sandboxes/{id} */
	SRV_R_DISPOSE,	     /* DELETE /v1/sandboxes/{id} */
	SRV_R_EXEC,	     /* POST /v1/sandboxes/{id}/exec */
	SRV_R_RUN_CODE,	     /* POST /v1/sandboxes/{id}/run-code */
	SRV_R_FILE_PUT,	     /* PUT /v1/sandboxes/{id}/files?path=P[&mode=0644] */
	SRV_R_FILE_GET,	     /* GET /v1/sandboxes/{id}/files?path=P */
	SRV_R_SUSPEND,	     /* POST /v1/sandboxes/{id}/suspend */
	SRV_R_RESUME,	     /* POST /v1/sandboxes/{id}/resume */
	/* background processes and sessions (server/procs.c); {h}: a handle, 16 hex digits */
	SRV_R_PROC_START,    /* POST /v1/sandboxes/{id}/procs */
	SRV_R_PROC_LIST,     /* GET /v1/sandboxes/{id}/procs */
	SRV_R_PROC_GET,	     /* GET /v1/sandboxes/{id}/procs/{h} */
	SRV_R_PROC_KILL,     /* DELETE /v1/sandboxes/{id}/procs/{h} */
	SRV_R_PROC_LOGS,     /* GET .../procs/{h}/logs[?since=N][&follow=1] */
	SRV_R_PROC_STDIN,    /* POST .../procs/{h}/stdin[?eof=1] (raw bytes) */
	SRV_R_PROC_SIGNAL,   /* POST .../procs/{h}/signal */
	SRV_R_PROC_RESIZE,   /* POST .../procs/{h}/resize */
	SRV_R_PROC_WAIT,     /* POST .../procs/{h}/wait */
	SRV_R_PROC_ATTACH,   /* GET .../procs/{h}/attach (WebSocket upgrade) */
	SRV_R_SESSION_START, /* POST /v1/sandboxes/{id}/sessions */
	SRV_R_SESSION_RUN,   /* POST /v1/sandboxes/{id}/sessions/{s}/run */
	SRV_R_PORT,	     /* ANY /v1/sandboxes/{id}/ports/{port}/... (server/ports.c) */
	SRV_R_FS_LS,	     /* GET /v1/sandboxes/{id}/fs/ls?path=P (server/fs.c) */
	SRV_R_FS_STAT,	     /* GET /v1/sandboxes/{id}/fs/stat?path=P */
	SRV_R_FS_RM,	     /* POST /v1/sandboxes/{id}/fs/rm?path=P[&recursive=1] */
	SRV_R_FS_MKDIR,	     /* POST /v1/sandboxes/{id}/fs/mkdir?path=P[&mode=0755][&parents=1] */
	SRV_R_FS_MV,	     /* POST /v1/sandboxes/{id}/fs/mv?path=P&to=Q */
	SRV_R_STATS,	     /* GET /v1/sandboxes/{id}/stats */
	SRV_R_CALLBACK,	     /* POST /v1/sandboxes/{id}/callbacks/{cid} (docs/callbacks.md) */
	SRV_R_ARCHIVE_PUT,   /* PUT /v1/sandboxes/{id}/archive?path=P (a tar; server/archive.c) */
	SRV_R_ARCHIVE_GET,   /* GET /v1/sandboxes/{id}/archive?path=P (a tar, streamed) */
	SRV_R_SNAPSHOT,	     /* POST /v1/sandboxes/{id}/snapshot (server/snapshots.c) */
	SRV_R_SNAP_LIST,     /* GET /v1/snapshots */
	SRV_R_SNAP_RM,	     /* DELETE /v1/snapshots/{name} */
	SRV_R__COUNT
};
const char *srv_route_name(enum srv_route r);

struct srv_kv {
	const char *key, *value;
};

/* What the HTTP layer hands over: decoded path, query arguments and headers. */
struct srv_raw {
	const char *method;
	const char *path;
	const struct srv_kv *query;
	size_t n_query;
	const struct srv_kv *headers; /* names compared case-insensitively */
	size_t n_headers;
};

struct srv_req {
	enum srv_route route;
	char id[65];	       /* sandbox id: [A-Za-z0-9_-]{1,64} */
	const char *thread;    /* X-Rung-Thread header, or ?thread= for list/dispose-scope */
	const char *agent;     /* X-Rung-Agent header */
	const char *file_path; /* ?path= for files (absolute or relative, no NUL) */
	unsigned file_mode;    /* ?mode= (octal, default 0644) */
	const char *bearer;    /* token from Authorization, NULL if absent */
	bool bad_authorization;
	char handle[17];       /* procs/{h}, sessions/{s}: [0-9a-f]{16} */
	uint64_t since;	       /* logs: ?since= (a byte offset, default 0) */
	bool follow;	       /* logs: ?follow=1|true */
	bool eof;	       /* stdin: ?eof=1|true closes stdin after the body */
	unsigned port;	       /* ports/{port}: 1..65535 */
	const char *port_path; /* ports/{port}/REST: "/REST" (into raw->path; "" for "/") */
	const char *fs_to;  /* ?to= for fs/mv */
	bool fs_flag;       /* ?recursive=1 (fs/rm), ?parents=1 (fs/mkdir) */
	bool body_allowed; /* the route takes a request body */
	size_t body_max;   /* its limit */
	char cb_id[33];	   /* SRV_R_CALLBACK: the pending call's id */
	char snapshot[65]; /* SRV_R_SNAP_RM: the template's name (rung_snapshot_name_check) */
};

/*
 * Pure: route and validate one request. Strings in out point into raw. Returns 0, or
 * -errno with err set and *code the API code (not_found, method_not_allowed, bad_request).
 */
int srv_req_parse(const struct srv_raw *raw, struct srv_req *out, enum srv_code *code,
		  struct rung_err *err);

/* server/fs.c: the fs/OP routes' query (path, to, mode, recursive, parents) into out. */
int srv_fs_parse(const struct srv_raw *raw, struct srv_req *out, struct rung_err *err);
/* The ?path= and ?mode= query of files and fs routes (pure). */
int srv_path_mode_parse(const struct srv_raw *raw, struct srv_req *out, struct rung_err *err);

/* A decoded exec body. Strings are malloc'd; release with srv_exec_release. */
struct srv_exec {
	char **argv; /* NULL-terminated, >= 1 entry */
	char **env;  /* NULL-terminated "K=V" */
	char *cwd;
	char *stdin_data;
	size_t stdin_len;
	uint32_t timeout_ms; /* 0: the spec's default */
	uint64_t output_bytes; /* per stream; 0: the spec's (collected: at most
				  SRV_MAX_COLLECTED_OUTPUT) */
	bool stream;
	char *language, *code; /* run-code only */
	char **callbacks;      /* names the command may call back (streamed only), or NULL */
};
/* {"argv": [str...], "timeout": s, "cwd": str, "env": {K: V}, "stdin": str, "stream": bool,
 *  "output_bytes": n} */
int srv_exec_body_parse(const char *body, size_t len, struct srv_exec *out, struct rung_err *err);
/* {"language": str, "code": str, "timeout": s, "stream": bool, "output_bytes": n} */
int srv_code_body_parse(const char *body, size_t len, struct srv_exec *out, struct rung_err *err);
/* {"spec": {...}}: returns the spec object re-serialized (malloc'd) for rung_spec_from_json. */
int srv_create_body_parse(const char *body, size_t len, char **spec_json, struct rung_err *err);
/* POST .../suspend: an empty body, or {"to_disk": bool} (the vm rung's suspend to disk). */
int srv_suspend_body_parse(const char *body, size_t len, bool *to_disk, struct rung_err *err);
void srv_exec_release(struct srv_exec *x);

/* Background processes' bodies (body-proc.c). Strings malloc'd; release with
 * srv_proc_body_release. Every error names its field. */
struct srv_proc_body {
	char **argv;	       /* start: required */
	char **env;	       /* "K=V" */
	char *cwd, *name;
	char *shell;	       /* session start */
	bool pty;
	bool follow;	       /* start: answer with its output as NDJSON (as logs?follow=1) */
	unsigned rows, cols;   /* with pty: 1..4096; 0: the default */
	uint64_t buffer_bytes; /* 0: the default; else 4096..1 GiB */
	char *command;	       /* session run: required */
	uint32_t timeout_ms;   /* session run, wait: 0 none given */
	int sig;	       /* signal: 1..64 */
};
/* {"argv": [str...], "env": {K: V}, "cwd": str, "name": str, "pty": bool, "rows": n,
 *  "cols": n, "buffer_bytes": n, "follow": bool} */
int srv_proc_start_parse(const char *body, size_t len, struct srv_proc_body *out,
			 struct rung_err *err);
/* {"shell": str, "env": {K: V}, "cwd": str} (an empty body: the defaults) */
int srv_session_start_parse(const char *body, size_t len, struct srv_proc_body *out,
			    struct rung_err *err);
/* {"command": str, "timeout": s} */
int srv_session_run_parse(const char *body, size_t len, struct srv_proc_body *out,
			  struct rung_err *err);
/* {"signal": "TERM" | "SIGTERM" | 15} */
int srv_signal_body_parse(const char *body, size_t len, struct srv_proc_body *out,
			  struct rung_err *err);
/* {"rows": 1..4096, "cols": 1..4096} */
int srv_resize_body_parse(const char *body, size_t len, struct srv_proc_body *out,
			  struct rung_err *err);
/* {"timeout": s} or an empty body (wait up to SRV_MAX_TIMEOUT_S) */
int srv_wait_body_parse(const char *body, size_t len, struct srv_proc_body *out,
			struct rung_err *err);
void srv_proc_body_release(struct srv_proc_body *p);

/* body.c's strict pieces, shared with body-proc.c. */
int srv_body_object(const char *body, size_t len, json_t **out, struct rung_err *err);
int srv_body_str(json_t *v, const char *field, size_t max, char **out, struct rung_err *err);
int srv_body_argv(json_t *v, char ***out, struct rung_err *err);
int srv_body_env(json_t *v, char ***out, struct rung_err *err);
int srv_body_timeout(json_t *v, uint32_t *out, struct rung_err *err);

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if it is not one. */
size_t srv_utf8_seq(const unsigned char *p, size_t left);

/*
 * Command output in JSON (encode.c): JSON text when it is valid UTF-8 and its escapes cost no
 * more than base64, else base64 (the field is then NAME_b64). One encoding, never both: at
 * most 4/3 of the bytes, plus 3.
 */
struct srv_enc {
	bool b64;
	size_t len; /* encoded length, without quotes */
};
void srv_enc_pick(const void *data, size_t len, struct srv_enc *out);
/* Encode data from *pos into buf, whole units only (an escape, 3 bytes of base64), at most
 * max bytes; advances *pos. Returns the bytes written. */
size_t srv_enc_chunk(const struct srv_enc *e, const void *data, size_t len, size_t *pos, char *buf,
		     size_t max);
/* "NAME":"text" or "NAME_b64":"base64" (malloc'd, NUL-terminated; *out_len its length). */
char *srv_enc_field(const char *name, const void *data, size_t len, size_t *out_len);

/*
 * Text for JSON: valid UTF-8 is kept; invalid bytes become U+FFFD. *lossy tells whether any
 * byte was replaced (the caller then also sends base64). malloc'd, NUL-terminated.
 */
char *srv_utf8_sanitize(const char *data, size_t len, bool *lossy);
char *srv_base64(const void *data, size_t len);

#endif
