/*
 * runtime/stats.c: rung_stats (rung.h; docs/files.md). The cgroup's counters where the rung has
 * one (process, container), the agent's STATS answer (statvfs of the work dir; on the vm rung
 * the guest kernel's memory and CPU), the background processes (rung_proc_list) and, on the vm
 * rung, rung-vmm's resident set from /proc.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/agent-io.h"
#include "runtime/rt-internal.h"
#include "runtime/sandbox-cgroup.h"

#define STATS_TIMEOUT_MS 30000u

struct agent_view {
	uint64_t disk_total, disk_free, mem_total, mem_avail, cpu_us;
	uint64_t pids; /* the vm guest's command cgroup; 0: not reported */
};

static int view_decode(const struct rung_frame *f, struct agent_view *v, struct rung_err *err)
{
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *p;
	uint32_t l;
	int r;
	rung_tlv_init(&it, f->payload, f->len);
	while ((r = rung_tlv_next(&it, &tag, &p, &l, err)) > 0) {
		uint64_t u;
		if ((r = rung_tlv_u64(p, l, &u, err)) < 0)
			return r;
		if (tag == RUNG_TAG_DISK_TOTAL)
			v->disk_total = u;
		else if (tag == RUNG_TAG_DISK_FREE)
			v->disk_free = u;
		else if (tag == RUNG_TAG_MEM_TOTAL)
			v->mem_total = u;
		else if (tag == RUNG_TAG_MEM_AVAIL)
			v->mem_avail = u;
		else if (tag == RUNG_TAG_CPU_US)
			v->cpu_us = u;
		else if (tag == RUNG_TAG_PIDS_CUR)
			v->pids = u;
		else
			return rung_err_set(err, EPROTO, "field %u not allowed in a stats answer",
					    tag);
	}
	if (r == 0 && v->disk_free > v->disk_total)
		return rung_err_set(err, EPROTO, "the agent reported more free than total disk");
	return r;
}

static int agent_view(struct rung_sandbox *s, struct agent_view *v, struct rung_err *err)
{
	char p[4096];
	int r = rt_sandbox_path(s, ".", p, sizeof(p), err);
	if (r < 0)
		return r;
	cleanup_close int busy = -1;
	cleanup_close int fd = rt_sandbox_agent_for(s, RT_OP__COUNT, &busy, err);
	if (fd < 0)
		return fd;
	struct rung_proto_fs q = {.type = RUNG_MSG_STATS, .path = p};
	struct rung_buf b = {0};
	struct rt_agent_io io;
	if (rung_proto_fs_encode(&q, &b) < 0) {
		rung_buf_release(&b);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	if ((r = rt_agent_io_init(&io, fd, STATS_TIMEOUT_MS, rt_sandbox_cancel_fd(s), err)) < 0) {
		rung_buf_release(&b);
		return r;
	}
	r = rt_agent_io_queue(&io, RUNG_MSG_STATS, &b, err);
	rung_buf_release(&b);
	struct rung_frame f;
	if (r == 0 && (r = rt_agent_io_next(&io, &f, err)) == 0) {
		if (f.type == RUNG_MSG_ERROR)
			r = rung_proto_error_decode(f.payload, f.len, err);
		else if (f.type != RUNG_MSG_RESULT)
			r = rung_err_set(err, EPROTO, "unexpected frame type %u from the agent",
					 f.type);
		else
			r = view_decode(&f, v, err);
		rung_frame_release(&f);
	}
	rt_agent_io_release(&io);
	return r < 0 ? r : 0;
}

/* VmRSS of /proc/pid/status, in bytes (0 when unreadable). */
static uint64_t proc_rss(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (n <= 0)
		return 0;
	buf[n] = 0;
	const char *p = strstr(buf, "VmRSS:");
	return p ? strtoull(p + 6, NULL, 10) * 1024 : 0;
}

static int cgroup_view(struct rt_sandbox *sb, struct rung_stats *out, struct rung_err *err)
{
	struct rt_cgroup *cg = NULL;
	struct rt_cgroup_stats st = {0};
	int r = rt_sandbox_cgroup_open(sb, &cg, err);
	if (r == 0)
		r = rt_cgroup_stats(cg, &st, err);
	rt_cgroup_free(cg);
	if (r < 0)
		return rung_err_wrap(err, "cgroup stats");
	out->from_cgroup = true;
	out->cpu_usage_us = st.cpu_usage_us;
	out->memory_current = st.memory_current;
	out->memory_peak = st.memory_peak;
	out->oom_kills = st.oom_kills;
	out->pids_current = st.pids_current;
	return 0;
}

int rung_stats(struct rung_sandbox *s, struct rung_stats *out, struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	struct rt_sandbox *sb = rt_sandbox_inner(s);
	const struct rung_limits *l = &sb->meta.spec.limits;
	out->memory_limit = l->memory_bytes;
	out->pids_limit = l->pids;
	out->disk_limit = l->disk_bytes;
	/* The cgroup's figures before the agent is asked: the handler that answers this call
	 * (forked for it, gone only once pid 1 has reaped it) is then never among the pids. */
	bool vm = sb->meta.iso == RUNG_ISO_VM;
	struct rung_err cgerr = {0};
	int cgr = vm ? 0 : cgroup_view(sb, out, &cgerr);
	struct agent_view v = {0};
	int r = agent_view(s, &v, err); /* it resumes a suspended sandbox; its error first */
	if (r < 0)
		return rung_err_wrap(err, "stats of %s", sb->meta.id);
	if (cgr < 0) {
		if (err)
			*err = cgerr;
		return cgr;
	}
	out->disk_total = v.disk_total;
	out->disk_used = v.disk_total - v.disk_free;
	if (vm) {
		out->cpu_usage_us = v.cpu_us;
		out->memory_current = v.mem_total > v.mem_avail ? v.mem_total - v.mem_avail : 0;
		out->pids_current = v.pids; /* the guest's command cgroup (agent/vm-cgroup.c) */
		out->vmm_rss = sb->meta.init_pid > 0 ? proc_rss(sb->meta.init_pid) : 0;
	}
	/* the egress policy's nft counters; a sandbox without network has none */
	struct rung_err nerr = {0};
	if (rt_net_counters(sb, &out->net_rx_bytes, &out->net_tx_bytes, &out->net_refused_packets,
			    &nerr) == 0)
		out->net_known = true;
	else if (nerr.code != ENOENT)
		return rung_err_set(err, nerr.code, "stats of %s: network: %s", sb->meta.id,
				    nerr.msg);
	struct rung_proc_info *p = NULL;
	size_t n = 0;
	r = rung_proc_list(s, &p, &n, err);
	if (r == -EACCES) /* no exec grant: it can have no background process either */
		return 0;
	if (r < 0)
		return rung_err_wrap(err, "stats of %s: processes", sb->meta.id);
	for (size_t i = 0; i < n; i++)
		if (p[i].state == RUNG_PROC_RUNNING)
			out->procs_live++;
		else
			out->procs_exited++;
	rung_proc_info_free(p, n);
	return 0;
}

char *rung_stats_json(const char *id, const struct rung_stats *st)
{
	json_t *j = json_pack(
	    "{s:s, s:s, s:I, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I}, s:{s:I, s:I, s:I},"
	    " s:{s:I, s:I}, s:I, s:o}",
	    "id", id, "source", st->from_cgroup ? "cgroup" : "guest", "cpu_usage_us",
	    (json_int_t)st->cpu_usage_us, "memory", "current", (json_int_t)st->memory_current,
	    "peak", (json_int_t)st->memory_peak, "limit", (json_int_t)st->memory_limit, "oom_kills",
	    (json_int_t)st->oom_kills, "pids", "current", (json_int_t)st->pids_current, "limit",
	    (json_int_t)st->pids_limit, "disk", "used", (json_int_t)st->disk_used, "total",
	    (json_int_t)st->disk_total, "limit", (json_int_t)st->disk_limit, "procs", "live",
	    (json_int_t)st->procs_live, "exited", (json_int_t)st->procs_exited, "vmm_rss",
	    (json_int_t)st->vmm_rss, "net",
	    st->net_known ? json_pack("{s:I, s:I, s:I}", "rx_bytes", (json_int_t)st->net_rx_bytes,
				      "tx_bytes", (json_int_t)st->net_tx_bytes, "refused_packets",
				      (json_int_t)st->net_refused_packets)
			  : json_null());
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return s;
}
