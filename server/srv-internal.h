/* server/srv-internal.h: the types shared between the server's files (no functions of a file of
 * its own: those are in that file's header, so scripts/check-layers.sh sees who calls whom);
 * never included outside server/. */
#ifndef RUNG_SERVER_SRV_INTERNAL_H
#define RUNG_SERVER_SRV_INTERNAL_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "common/log.h"
#include "rung/rung.h"
#include "server/server.h"

static inline void srv_json_decrefp(json_t **j)
{
	if (*j)
		json_decref(*j);
}
#define cleanup_json __attribute__((cleanup(srv_json_decrefp)))

/* ---- options ---------------------------------------------------------------------------- */

#define SRV_MAX_POOLS 16

struct srv_opts {
	const char *socket_path; /* default /run/rung/rung.sock; "" disables */
	const char *listen;	 /* HOST:PORT or NULL */
	const char *tokens_path;
	const char *state_dir;
	const char *socket_group; /* chown the socket to this group */
	unsigned socket_mode;
	bool deployed;
	unsigned gc_interval_s;	   /* 0: no sweeper */
	unsigned header_timeout_s; /* whole request head must arrive within this */
	unsigned body_timeout_s;   /* and then the whole body within this */
	unsigned idle_timeout_s;   /* MHD_OPTION_CONNECTION_TIMEOUT */
	unsigned max_connections;
	unsigned max_per_ip;
	uint64_t max_archive; /* --max-archive: the body limit of PUT .../archive */
	unsigned drain_s;
	enum rung_log_level log_level;
	bool log_json; /* --json: one JSON object per log line */
	struct rung_router_opts host; /* from main-serve.c (the environment), not argv */
	/* --pool NAME=SIZE:SPEC.json (warm.c, docs/pools.md) */
	const char *pools[SRV_MAX_POOLS];
	size_t n_pools;
};
/* Warm pools of the configuration (warm.c): each is set up in the store now (a bad one fails
 * the start, naming it) and kept filled by a thread of its own until stopping. */
struct srv;
int srv_warm_start(struct srv *s, pthread_t *threads, size_t *nt, struct rung_err *err);
/* Pure: argv -> opts. Returns 0, 1 for --help (text written to *help), or -EINVAL. */
int srv_opts_parse(int argc, char **argv, struct srv_opts *o, struct rung_err *err);
extern const char srv_usage[];

/* ---- metrics ---------------------------------------------------------------------------- */

#define SRV_HIST_BUCKETS 14
extern const double srv_hist_bounds[SRV_HIST_BUCKETS]; /* seconds; the last is +Inf */

struct srv_metrics {
	atomic_ulong requests[SRV_R__COUNT][SRV_CODE__COUNT];
	atomic_ulong exec_total[3]; /* completed, timed_out, failed */
	atomic_ulong exec_hist[SRV_HIST_BUCKETS];
	atomic_ulong exec_sum_us;
	atomic_ulong gc_runs, gc_disposed, gc_suspended, gc_errors;
	atomic_ulong header_timeouts; /* head or body past its deadline */
	atomic_long inflight;
};
void srv_metrics_request(struct srv_metrics *m, enum srv_route r, enum srv_code c);
void srv_metrics_exec(struct srv_metrics *m, const struct rung_exec_res *res, int rc);
/* Prometheus text (malloc'd). The admin credential (call->admin) gets the daemon-wide view;
 * any other only its own scope's sandboxes, requests in flight and limits. */
struct srv_call;
char *srv_metrics_render(struct srv_call *call, struct rung_router *r);

/* ---- the daemon ------------------------------------------------------------------------- */

struct srv_conn; /* per-connection tracking for the header deadline */
struct srv_ws;	 /* one WebSocket attach (ws.c) */
struct srv_archive; /* one archive transfer (archive.c) */

/* quota.c: what one scope holds right now (under srv.scope_mu). */
struct srv_scope {
	struct srv_scope *next;
	char *name;
	unsigned inflight;	/* requests being served */
	unsigned creating;	/* acquires under way (not yet in the store) */
	unsigned conns;		/* open connections that made a request as this scope */
	unsigned long refused;	/* 429s answered */
};

struct srv;
struct srv_listener {
	struct srv *s;
	bool is_unix;
	struct MHD_Daemon *d;
};

struct srv {
	struct srv_opts o;
	char state_path[4096];	      /* the store's path, redacted from error messages */
	pthread_rwlock_t tokens_lock; /* SIGHUP swaps the tokens under it */
	struct srv_tokens tokens;
	struct srv_metrics metrics;
	struct srv_listener unix_l, tcp_l;
	/* Routers are pooled: a request takes one for its duration (no shared router state). */
	pthread_mutex_t pool_mu;
	struct rung_router **pool;
	size_t pool_n, pool_cap;
	/* Per-scope accounting (quota.c). */
	pthread_mutex_t scope_mu;
	struct srv_scope *scopes;
	/* Connections still reading their request head. */
	pthread_mutex_t conn_mu;
	struct srv_conn *conns;
	/* Live WebSocket attaches (ws.c), shut down with the daemon. */
	pthread_mutex_t ws_mu;
	struct srv_ws *ws;
	/* Background threads stop when stopping is set (under stop_mu, signalled on stop_cv). */
	pthread_mutex_t stop_mu;
	pthread_cond_t stop_cv;
	bool stopping;
};

/* quota.c. enter: 0 with *out held, or -EAGAIN (the scope is at its limit) naming it. */
int srv_scope_enter(struct srv *s, const char *scope, uint32_t limit, struct srv_scope **out,
		    struct rung_err *err);
void srv_scope_leave(struct srv *s, struct srv_scope *q);
/* A connection counts for the scope of its first request until it closes. */
int srv_scope_attach(struct srv *s, const char *scope, uint32_t limit, struct srv_scope **out,
		     struct rung_err *err);
void srv_scope_detach(struct srv *s, struct srv_scope *q);
void srv_scope_snapshot(struct srv *s, const char *scope, unsigned *inflight,
			unsigned long *refused);
/* A new sandbox for key (not an existing one) must fit the scope's sandbox limit. */
int srv_create_enter(struct srv *s, struct rung_router *r, const char *scope,
		     const struct rung_key *key, const char *kind, uint32_t limit,
		     struct srv_scope **out, struct rung_err *err);
void srv_create_leave(struct srv *s, struct srv_scope *q);

/* The state of one request while it runs (the HTTP layer's con_cls). */
struct srv_call {
	struct srv *s;
	struct srv_req req;
	char *scope; /* copied from the tokens (which SIGHUP may replace) */
	bool admin;  /* the admin credential: /metrics, every scope */
	struct srv_limits lim;	 /* the scope's, copied with it */
	struct srv_scope *slot;	 /* this request's place in its scope's in-flight count */
	bool close_conn;	 /* answer with "Connection: close" */
	char *body;
	size_t body_len;
	enum srv_code pending; /* an error found mid-upload, answered once the body is in */
	struct srv_archive *archive; /* PUT .../archive: the body streams into its worker */
	uint64_t discarded;
	uint64_t t0_us;
	unsigned status;
	enum srv_code code;
	char sb_id[65];
	char errmsg[200]; /* the error answered, for the request log ('"' replaced) */
	/* storage the parsed request points into */
	char *method, *path;
	struct srv_kv *kv;
	size_t n_kv, cap_kv;
	char *strs;
};

#endif
