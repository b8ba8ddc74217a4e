/* server/metrics.c: counters and the Prometheus text exposition. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "server/srv-internal.h"

const double srv_hist_bounds[SRV_HIST_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
						  2.5,	 5,    10,    30,   60,	 0 /* +Inf */};

void srv_metrics_request(struct srv_metrics *m, enum srv_route r, enum srv_code c)
{
	if ((unsigned)r < SRV_R__COUNT && (unsigned)c < SRV_CODE__COUNT)
		atomic_fetch_add(&m->requests[r][c], 1);
}

void srv_metrics_exec(struct srv_metrics *m, const struct rung_exec_res *res, int rc)
{
	if (rc < 0) {
		atomic_fetch_add(&m->exec_total[2], 1);
		return;
	}
	atomic_fetch_add(&m->exec_total[res->timed_out ? 1 : 0], 1);
	double s = (double)res->duration_us / 1e6;
	size_t i = 0;
	while (i < SRV_HIST_BUCKETS - 1 && s > srv_hist_bounds[i])
		i++;
	atomic_fetch_add(&m->exec_hist[i], 1);
	atomic_fetch_add(&m->exec_sum_us, res->duration_us);
}

/* A scope's own view: its sandboxes, its requests in flight, its limits. */
static void render_scope(FILE *f, struct srv_call *call)
{
	unsigned inflight;
	unsigned long refused;
	srv_scope_snapshot(call->s, call->scope, &inflight, &refused);
	fprintf(f,
		"# HELP rung_scope_requests_inflight This scope's requests being served.\n"
		"# TYPE rung_scope_requests_inflight gauge\nrung_scope_requests_inflight %u\n"
		"# HELP rung_scope_requests_limit Requests this scope may have in flight.\n"
		"# TYPE rung_scope_requests_limit gauge\nrung_scope_requests_limit %u\n"
		"# HELP rung_scope_sandboxes_limit Sandboxes this scope may hold.\n"
		"# TYPE rung_scope_sandboxes_limit gauge\nrung_scope_sandboxes_limit %u\n"
		"# HELP rung_scope_refused_total Requests and acquires refused at this scope's "
		"limits (429).\n"
		"# TYPE rung_scope_refused_total counter\nrung_scope_refused_total %lu\n",
		inflight, call->lim.requests, call->lim.sandboxes, refused);
}

#define SANDBOX_SERIES_MAX 256

/* One series of each running sandbox of the caller's scope (rung_stats: measured). A
 * suspended sandbox is left out (reading its agent would resume it). */
static void render_sandboxes(FILE *f, struct srv_call *call, struct rung_router *r)
{
	static const char *const names[] = {
	    "cpu_seconds_total counter CPU time used",
	    "memory_bytes gauge Memory in use",
	    "memory_peak_bytes gauge Peak memory (0 where the kernel keeps none)",
	    "pids gauge Processes and threads",
	    "disk_used_bytes gauge Bytes used on the work dir's filesystem",
	    "procs_live gauge Background processes running",
	    "net_tx_bytes_total counter Bytes forwarded out of the sandbox",
	    "net_rx_bytes_total counter Bytes forwarded into the sandbox",
	    "net_refused_packets_total counter Packets the egress policy refused",
	};
	enum { N = sizeof(names) / sizeof(names[0]) };
	struct rung_sandbox_info *v = NULL;
	size_t n = 0;
	struct rung_err err = {0};
	if (rung_list(r, call->scope, NULL, &v, &n, &err) < 0)
		return;
	char *lines[N] = {0};
	size_t lens[N] = {0};
	FILE *out[N] = {0};
	for (int k = 0; k < N; k++)
		out[k] = open_memstream(&lines[k], &lens[k]);
	for (size_t i = 0, done = 0; i < n && done < SANDBOX_SERIES_MAX; i++) {
		struct rung_sandbox *sb = NULL;
		struct rung_stats st;
		if (v[i].state != RUNG_STATE_RUNNING ||
		    rung_sandbox_open(r, v[i].id, call->scope, &sb, &err) < 0)
			continue;
		int rc = rung_stats(sb, &st, &err);
		rung_sandbox_close(sb);
		if (rc < 0)
			continue;
		done++;
		const uint64_t val[N] = {0,
					 st.memory_current,
					 st.memory_peak,
					 st.pids_current,
					 st.disk_used,
					 st.procs_live,
					 st.net_tx_bytes,
					 st.net_rx_bytes,
					 st.net_refused_packets};
		for (int k = 0; k < N; k++) {
			if (!out[k] || (k >= 6 && !st.net_known))
				continue;
			if (k == 0)
				fprintf(out[k], "rung_sandbox_%.*s{id=\"%s\"} %.6f\n",
					(int)strcspn(names[k], " "), names[k], v[i].id,
					(double)st.cpu_usage_us / 1e6);
			else
				fprintf(out[k], "rung_sandbox_%.*s{id=\"%s\"} %llu\n",
					(int)strcspn(names[k], " "), names[k], v[i].id,
					(unsigned long long)val[k]);
		}
	}
	free(v);
	for (int k = 0; k < N; k++) {
		if (out[k])
			fclose(out[k]);
		const char *sp = strchr(names[k], ' ');
		const char *help = strchr(sp + 1, ' ');
		fprintf(f, "# HELP rung_sandbox_%.*s %s (this scope's running sandboxes).\n",
			(int)(sp - names[k]), names[k], help + 1);
		fprintf(f, "# TYPE rung_sandbox_%.*s %.*s\n", (int)(sp - names[k]), names[k],
			(int)(help - sp - 1), sp + 1);
		if (lines[k])
			fputs(lines[k], f);
		free(lines[k]);
	}
}

char *srv_metrics_render(struct srv_call *call, struct rung_router *r)
{
	struct srv_metrics *m = &call->s->metrics;
	char *buf = NULL;
	size_t len = 0;
	cleanup_fclose FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	fprintf(f, "# HELP rung_sandboxes Sandboxes in the store, by rung and state (the "
		   "caller's scope; every scope for the admin credential).\n"
		   "# TYPE rung_sandboxes gauge\n");
	size_t counts[RUNG_ISO__COUNT][4] = {{0}};
	struct rung_sandbox_info *v = NULL;
	size_t n = 0;
	struct rung_err err = {0};
	bool listed = rung_list(r, call->admin ? NULL : call->scope, NULL, &v, &n, &err) == 0;
	for (size_t i = 0; listed && i < n; i++)
		if ((unsigned)v[i].isolation < RUNG_ISO__COUNT && (unsigned)v[i].state < 4)
			counts[v[i].isolation][v[i].state]++;
	free(v);
	for (int iso = 0; iso < RUNG_ISO__COUNT; iso++)
		for (int st = 0; st < 4; st++)
			fprintf(f, "rung_sandboxes{isolation=\"%s\",state=\"%s\"} %zu\n",
				rung_isolation_name(iso), rung_state_name(st), counts[iso][st]);
	fprintf(f,
		"# HELP rung_store_list_ok Whether the store could be listed.\n"
		"# TYPE rung_store_list_ok gauge\nrung_store_list_ok %d\n",
		listed);
	if (!call->admin) {
		/* Daemon-wide counters tell of other tenants' activity: admin only. */
		render_scope(f, call);
		render_sandboxes(f, call, r);
		goto done;
	}

	fprintf(f, "# HELP rung_http_requests_total Requests by operation and result code.\n"
		   "# TYPE rung_http_requests_total counter\n");
	for (int rt = 0; rt < SRV_R__COUNT; rt++)
		for (int c = 0; c < SRV_CODE__COUNT; c++) {
			unsigned long v2 = atomic_load(&m->requests[rt][c]);
			if (v2)
				fprintf(f, "rung_http_requests_total{op=\"%s\",code=\"%s\"} %lu\n",
					srv_route_name(rt), srv_code_name(c), v2);
		}
	fprintf(f, "# HELP rung_http_errors_total Error responses by code.\n"
		   "# TYPE rung_http_errors_total counter\n");
	for (int c = 1; c < SRV_CODE__COUNT; c++) {
		unsigned long sum = 0;
		for (int rt = 0; rt < SRV_R__COUNT; rt++)
			sum += atomic_load(&m->requests[rt][c]);
		fprintf(f, "rung_http_errors_total{code=\"%s\"} %lu\n", srv_code_name(c), sum);
	}
	fprintf(f,
		"# HELP rung_http_inflight Requests being served.\n"
		"# TYPE rung_http_inflight gauge\nrung_http_inflight %ld\n",
		atomic_load(&m->inflight));

	static const char *const outcome[3] = {"completed", "timed_out", "failed"};
	fprintf(f, "# HELP rung_exec_total Execs (exec and run-code) by outcome.\n"
		   "# TYPE rung_exec_total counter\n");
	for (int i = 0; i < 3; i++)
		fprintf(f, "rung_exec_total{outcome=\"%s\"} %lu\n", outcome[i],
			atomic_load(&m->exec_total[i]));
	fprintf(f, "# HELP rung_exec_duration_seconds Exec latency inside the sandbox.\n"
		   "# TYPE rung_exec_duration_seconds histogram\n");
	unsigned long cum = 0;
	for (int i = 0; i < SRV_HIST_BUCKETS; i++) {
		cum += atomic_load(&m->exec_hist[i]);
		if (i == SRV_HIST_BUCKETS - 1)
			fprintf(f, "rung_exec_duration_seconds_bucket{le=\"+Inf\"} %lu\n", cum);
		else
			fprintf(f, "rung_exec_duration_seconds_bucket{le=\"%g\"} %lu\n",
				srv_hist_bounds[i], cum);
	}
	fprintf(f, "rung_exec_duration_seconds_sum %.6f\nrung_exec_duration_seconds_count %lu\n",
		(double)atomic_load(&m->exec_sum_us) / 1e6, cum);

	fprintf(f,
		"# HELP rung_gc_runs_total Sweeper passes (rung_gc).\n"
		"# TYPE rung_gc_runs_total counter\nrung_gc_runs_total %lu\n"
		"# TYPE rung_gc_disposed_total counter\nrung_gc_disposed_total %lu\n"
		"# TYPE rung_gc_suspended_total counter\nrung_gc_suspended_total %lu\n"
		"# TYPE rung_gc_errors_total counter\nrung_gc_errors_total %lu\n"
		"# HELP rung_http_request_timeouts_total Connections cut for a slow request head "
		"or body.\n"
		"# TYPE rung_http_request_timeouts_total counter\n"
		"rung_http_request_timeouts_total %lu\n",
		atomic_load(&m->gc_runs), atomic_load(&m->gc_disposed),
		atomic_load(&m->gc_suspended), atomic_load(&m->gc_errors),
		atomic_load(&m->header_timeouts));
done:
	if (fclose(f) != 0) {
		f = NULL;
		free(buf);
		return NULL;
	}
	f = NULL;
	return buf;
}
