/* server/limits.c: per-scope limits: the tokens file's "limits" lines and the spec maxima (pure). */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/util.h"
#include "rung/rung.h"
#include "server/server.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

/*
 * Sane defaults: a tenant gets a fair share of the 256 connections a listener takes (a
 * quarter; raise --max-connections with the number of tenants), a few
 * dozen sandboxes, and no spec that asks for a host-sized machine or to live forever.
 */
const struct srv_limits srv_limits_default = {
    .requests = 32,
    .connections = 64,
    .sandboxes = 64,
    .memory_bytes = 8 * GIB,
    .disk_bytes = 64 * GIB,
    .cpus_milli = 8000,
    .pids = 4096,
    .exec_timeout_s = 3600,
    .output_bytes = 64 * MIB,
    .ttl_s = 7 * 86400,
};

static void fmt_size(uint64_t v, char *buf, size_t len)
{
	static const char units[] = "KMGT";
	int u = -1;
	while (u < 3 && v && v % 1024 == 0)
		v /= 1024, u++;
	if (u < 0)
		snprintf(buf, len, "%" PRIu64, v);
	else
		snprintf(buf, len, "%" PRIu64 "%c", v, units[u]);
}

static int over_size(const char *field, uint64_t v, uint64_t max, struct rung_err *err)
{
	char a[32], b[32];
	fmt_size(v, a, sizeof(a));
	fmt_size(max, b, sizeof(b));
	return rung_err_set(err, EACCES, "%s: %s is above this scope's maximum of %s", field, a,
			    b);
}

static int over_num(const char *field, uint64_t v, uint64_t max, struct rung_err *err)
{
	return rung_err_set(err, EACCES,
			    "%s: %" PRIu64 " is above this scope's maximum of %" PRIu64, field, v,
			    max);
}

int srv_spec_check(const struct rung_spec *s, const struct srv_limits *l, struct rung_err *err)
{
	const struct rung_limits *x = &s->limits;
	if (x->memory_bytes > l->memory_bytes)
		return over_size("spec.limits.memory", x->memory_bytes, l->memory_bytes, err);
	if (x->disk_bytes > l->disk_bytes)
		return over_size("spec.limits.disk", x->disk_bytes, l->disk_bytes, err);
	if (x->output_bytes > l->output_bytes)
		return over_size("spec.limits.output_bytes", x->output_bytes, l->output_bytes, err);
	if (x->cpus_milli > l->cpus_milli)
		return rung_err_set(err, EACCES,
				    "spec.limits.cpus: %.3f is above this scope's maximum of %.3f",
				    x->cpus_milli / 1000.0, l->cpus_milli / 1000.0);
	if (x->pids > l->pids)
		return over_num("spec.limits.pids", x->pids, l->pids, err);
	if (x->exec_timeout_s > l->exec_timeout_s)
		return over_num("spec.limits.exec_timeout_s", x->exec_timeout_s, l->exec_timeout_s,
				err);
	if (l->ttl_s && s->ttl_s == 0)
		return rung_err_set(err, EACCES,
				    "spec.ttl_s: 0 (no TTL: live until disposed) is refused; this "
				    "scope's maximum is %" PRIu32 " s",
				    l->ttl_s);
	if (l->ttl_s && s->ttl_s > l->ttl_s)
		return over_num("spec.ttl_s", s->ttl_s, l->ttl_s, err);
	return 0;
}

const struct srv_limits *srv_tokens_limits(const struct srv_tokens *t, const char *scope)
{
	const struct srv_limits *any = &srv_limits_default;
	for (size_t i = 0; t && i < t->n_lim; i++) {
		if (scope && !strcmp(t->lim[i].scope, scope))
			return &t->lim[i].l;
		if (!strcmp(t->lim[i].scope, "*"))
			any = &t->lim[i].l;
	}
	return any;
}

/* One "key=value" of a limits line into l. */
static int limit_kv(const char *kv, size_t len, struct srv_limits *l, struct rung_err *err)
{
	char buf[64];
	const char *eq = memchr(kv, '=', len);
	if (!eq || eq == kv || len >= sizeof(buf))
		return rung_err_set(err, EINVAL, "expected KEY=VALUE, got \"%.*s\"",
				    (int)(len > 40 ? 40 : len), kv);
	memcpy(buf, kv, len);
	buf[len] = '\0';
	buf[eq - kv] = '\0';
	const char *k = buf, *v = buf + (eq - kv) + 1;
	uint64_t n;
	static const struct {
		const char *key;
		bool size;
		uint64_t min, max;
		size_t off;
		bool wide;
	} keys[] = {
	    {"requests", false, 1, 65536, offsetof(struct srv_limits, requests), false},
	    {"connections", false, 1, 65536, offsetof(struct srv_limits, connections), false},
	    {"sandboxes", false, 1, 1000000, offsetof(struct srv_limits, sandboxes), false},
	    {"memory", true, 16 * MIB, 256 * GIB, offsetof(struct srv_limits, memory_bytes), true},
	    {"disk", true, 16 * MIB, 16384 * GIB, offsetof(struct srv_limits, disk_bytes), true},
	    {"pids", false, 8, 1000000, offsetof(struct srv_limits, pids), false},
	    {"exec_timeout", false, 1, 86400, offsetof(struct srv_limits, exec_timeout_s), false},
	    {"output", true, 1024, GIB, offsetof(struct srv_limits, output_bytes), true},
	    {"ttl", false, 0, 30 * 86400, offsetof(struct srv_limits, ttl_s), false}, /* 0: any */
	};
	if (!strcmp(k, "cpus")) {
		char *end;
		double d = strtod(v, &end);
		if (!*v || *end || !(d >= 0.01 && d <= 256))
			return rung_err_set(err, EINVAL, "cpus: expected 0.01..256, got \"%s\"", v);
		l->cpus_milli = (uint32_t)(d * 1000 + 0.5);
		return 0;
	}
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(keys); i++) {
		if (strcmp(k, keys[i].key))
			continue;
		int r = keys[i].size ? rung_parse_size(v, &n) : rung_parse_u64(v, &n);
		if (r < 0 || n < keys[i].min || n > keys[i].max)
			return rung_err_set(err, EINVAL, "%s: expected %s %" PRIu64 "..%" PRIu64
					    ", got \"%s\"", k, keys[i].size ? "a size" : "a number",
					    keys[i].min, keys[i].max, v);
		char *field = (char *)l + keys[i].off;
		if (keys[i].wide)
			memcpy(field, &n, sizeof(uint64_t));
		else {
			uint32_t n32 = (uint32_t)n;
			memcpy(field, &n32, sizeof(uint32_t));
		}
		return 0;
	}
	return rung_err_set(err, EINVAL,
			    "unknown limit \"%s\" (requests, connections, sandboxes, memory, disk, cpus, pids, "
			    "exec_timeout, output, ttl)",
			    k);
}

int srv_limits_line_parse(const char *p, size_t len, struct srv_limits *l, struct rung_err *err)
{
	const char *end = p + len;
	while (p < end) {
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		const char *w = p;
		while (p < end && *p != ' ' && *p != '\t')
			p++;
		if (p > w) {
			int r = limit_kv(w, (size_t)(p - w), l, err);
			if (r < 0)
				return r;
		}
	}
	return 0;
}
