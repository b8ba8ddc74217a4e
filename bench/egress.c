/*
 * bench/egress.c: what an egress allowlist adds to a sandbox's creation, through rung.
 * N rounds on the process rung, each on fresh keys, interleaved so both variants see the same
 * machine load: acquire with no allowlist (a netns with loopback only, made with the other
 * namespaces), then acquire with a 4-entry allowlist (a host-owned netns, lease, veth pair,
 * addresses, route, IPv6 off, the nft table applied through libnftables, the DNS proxy
 * started in the supervisor); each disposed right after, timed apart. The acquire includes
 * the first `exec /bin/true`, so the sandbox is known to be serving. Prints medians in ms,
 * one "name value" per line. Needs root. Sends no packet anywhere (no lookup is made).
 * usage: egress N
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "rung/rung.h"

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_s(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static double median_ms_s(int64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_s);
	return (n % 2 ? (double)v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0) / 1000.0;
}

static double median_ms(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return (n % 2 ? (double)v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0) / 1000.0;
}

/* acquire + exec /bin/true, then dispose; microseconds of each. */
static int cycle(struct rung_router *r, const struct rung_spec *s, const char *thread, uint64_t *up,
		 uint64_t *down, struct rung_err *err)
{
	struct rung_key k = {.scope = "bench-egress", .thread = thread, .agent = "a"};
	struct rung_sandbox *sb = NULL;
	bool created = false;
	static const char *const argv_true[] = {"/bin/true", NULL};
	struct rung_exec_req req = {.argv = argv_true};
	struct rung_exec_res res;
	uint64_t t0 = rung_now_us();
	if (rung_acquire(r, &k, s, &sb, &created, err) < 0)
		return -1;
	int rc = rung_exec(sb, &req, &res, err);
	*up = rung_now_us() - t0;
	if (rc == 0)
		rung_exec_res_release(&res);
	char id[80];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
	rung_sandbox_close(sb);
	t0 = rung_now_us();
	if (rung_dispose(r, id, NULL, rc < 0 ? NULL : err) < 0 || rc < 0)
		return -1;
	*down = rung_now_us() - t0;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2 || atoi(argv[1]) < 1) {
		fprintf(stderr, "usage: egress N\n");
		return 2;
	}
	int n = atoi(argv[1]);
	char dir[] = "/tmp/rung-bench-egress-XXXXXX";
	if (!mkdtemp(dir) || chmod(dir, 0711) < 0) {
		perror("mkdtemp");
		return 1;
	}
	struct rung_err err = {0};
	struct rung_router *r = NULL;
	/* No lookup is made; the upstream only keeps the proxy from reading the host's
	 * resolv.conf (RUNG_DNS_UPSTREAM and RUNG_NET_POOL, when set, win). */
	struct rung_router_opts o = {.dns_upstream = "127.0.0.1:53", .net_pool = "10.214.250.0/24"};
	if (rung_router_opts_load(&o, getenv, &err) < 0) { /* this main reads them */
		fprintf(stderr, "%s\n", err.msg);
		return 2;
	}
	o.state_dir = dir;
	if (rung_router_new(&o, &r, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	static const char *const allow[] = {"allowed.test", "*.sub.test:443", "198.18.0.0/24:8080",
					    "[2001:db8::/32]:443", NULL};
	struct rung_spec none, with;
	rung_spec_init(&none);
	rung_spec_init(&with);
	none.kind = strdup("bench");
	with.kind = strdup("bench");
	with.egress_allow = calloc(5, sizeof(char *));
	for (int i = 0; allow[i]; i++)
		with.egress_allow[i] = strdup(allow[i]);
	uint64_t *up0 = calloc((size_t)n, 8), *up1 = calloc((size_t)n, 8),
		 *d0 = calloc((size_t)n, 8), *d1 = calloc((size_t)n, 8);
	int64_t *diff = calloc((size_t)n, 8);
	int rc = 0;
	/* a warm-up round of each: page cache, lazily built library state */
	char t[64];
	uint64_t u, d;
	if (cycle(r, &none, "warm-0", &u, &d, &err) < 0 ||
	    cycle(r, &with, "warm-1", &u, &d, &err) < 0)
		rc = 1;
	for (int i = 0; i < n && !rc; i++) {
		snprintf(t, sizeof(t), "none-%d", i);
		if (cycle(r, &none, t, &up0[i], &d0[i], &err) < 0)
			rc = 1;
		snprintf(t, sizeof(t), "with-%d", i);
		if (!rc && cycle(r, &with, t, &up1[i], &d1[i], &err) < 0)
			rc = 1;
		diff[i] = (int64_t)up1[i] - (int64_t)up0[i];
	}
	if (rc) {
		fprintf(stderr, "egress bench: %s\n", err.msg);
	} else {
		printf("rounds %d\n", n);
		double m0 = median_ms(up0, n), m1 = median_ms(up1, n);
		printf("acquire_no_allowlist_ms %.2f\n", m0);
		printf("acquire_allowlist_ms %.2f\n", m1);
		printf("median_difference_ms %.2f\n", m1 - m0);
		printf("median_of_pairwise_difference_ms %.2f\n", median_ms_s(diff, n));
		printf("dispose_no_allowlist_ms %.2f\n", median_ms(d0, n));
		printf("dispose_allowlist_ms %.2f\n", median_ms(d1, n));
	}
	rung_spec_release(&none);
	rung_spec_release(&with);
	rung_router_free(r);
	rung_rm_rf(dir, NULL);
	free(up0);
	free(up1);
	free(d0);
	free(d1);
	free(diff);
	return rc;
}
