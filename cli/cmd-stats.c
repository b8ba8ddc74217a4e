/*
 * cli/cmd-stats.c: `rung stats ID [--json] [--watch [SEC]]` (docs/files.md), on the local store
 * or through the daemon's GET /v1/sandboxes/{id}/stats; one JSON shape (rung_stats_json).
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "common/err.h"

static int fetch(struct cli *c, const char *id, json_t **out, struct rung_err *err)
{
	char *s = NULL;
	if (c->remote) {
		char url[256];
		cli_url_sb(url, sizeof(url), id, "/stats");
		struct cli_http h = {0};
		int r = cli_http_call(c, &h, "GET", url, NULL, NULL, 0, err);
		if (r == 0 && !(*out = json_loadb(h.body ? h.body : "", h.len, 0, NULL)))
			r = rung_err_set(err, EPROTO, "the daemon answered no JSON");
		cli_http_release(&h);
		return r;
	}
	struct rung_router *r = cli_router(c);
	if (!r)
		return rung_err_set(err, EIO, "no store");
	struct rung_sandbox *sb;
	int rc = rung_sandbox_open(r, id, NULL, &sb, err);
	if (rc < 0)
		return rc;
	struct rung_stats st;
	if ((rc = rung_stats(sb, &st, err)) == 0 && (s = rung_stats_json(id, &st)))
		*out = json_loads(s, 0, NULL);
	free(s);
	rung_sandbox_close(sb);
	if (rc == 0 && !*out)
		rc = rung_err_set(err, ENOMEM, "out of memory");
	return rc;
}

static double mib(json_t *o, const char *a, const char *b)
{
	json_t *v = json_object_get(json_object_get(o, a), b);
	return (double)json_integer_value(v) / (1024.0 * 1024.0);
}

static long long num(json_t *o, const char *a, const char *b)
{
	json_t *v = b ? json_object_get(json_object_get(o, a), b) : json_object_get(o, a);
	return (long long)json_integer_value(v);
}

static void print_text(json_t *o)
{
	printf("cpu      %.3f s (%s)\n", (double)num(o, "cpu_usage_us", NULL) / 1e6,
	       json_string_value(json_object_get(o, "source")));
	printf("memory   %.1f MiB now, %.1f MiB peak, %.1f MiB limit, %lld oom kills\n",
	       mib(o, "memory", "current"), mib(o, "memory", "peak"), mib(o, "memory", "limit"),
	       num(o, "memory", "oom_kills"));
	printf("pids     %lld of %lld\n", num(o, "pids", "current"), num(o, "pids", "limit"));
	printf("disk     %.1f MiB used of %.1f MiB (limit %.1f MiB)\n", mib(o, "disk", "used"),
	       mib(o, "disk", "total"), mib(o, "disk", "limit"));
	printf("procs    %lld live, %lld exited\n", num(o, "procs", "live"),
	       num(o, "procs", "exited"));
	if (num(o, "vmm_rss", NULL))
		printf("vmm rss  %.1f MiB\n", (double)num(o, "vmm_rss", NULL) / (1024.0 * 1024.0));
	json_t *net = json_object_get(o, "net");
	if (json_is_object(net))
		printf("network  %lld bytes out, %lld in, %lld packets refused\n",
		       num(net, "tx_bytes", NULL), num(net, "rx_bytes", NULL),
		       num(net, "refused_packets", NULL));
	else
		printf("network  none\n");
}

int cli_cmd_stats(struct cli *c, int argc, char **argv)
{
	const char *id = NULL;
	unsigned watch = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--watch")) {
			watch = 2;
			if (i + 1 < argc && argv[i + 1][0] >= '1' && argv[i + 1][0] <= '9') {
				char *end;
				unsigned long s = strtoul(argv[++i], &end, 10);
				if (*end || s > 3600)
					return cli_usage_error(
					    "stats", "--watch: '%s' is not 1..3600", argv[i]);
				watch = (unsigned)s;
			}
		} else if (!id && argv[i][0] != '-') {
			id = argv[i];
		} else {
			return cli_usage_error("stats", "unexpected '%s'", argv[i]);
		}
	}
	if (!id)
		return cli_usage_error("stats", "usage: rung stats ID [--json] [--watch [SEC]]");
	bool tty = isatty(1);
	for (;;) {
		struct rung_err err = {0};
		json_t *o = NULL;
		if (fetch(c, id, &o, &err) < 0)
			return cli_fail(c, &err);
		if (c->json) {
			char *s = json_dumps(o, JSON_COMPACT);
			if (s)
				puts(s);
			free(s);
		} else {
			if (watch && tty)
				fputs("\033[H\033[2J", stdout);
			print_text(o);
		}
		json_decref(o);
		fflush(stdout);
		if (!watch)
			return 0;
		sleep(watch);
	}
}
