/* server/opts.c: `rung serve` command line (pure: argv -> struct srv_opts). */
#include <string.h>

#include "common/err.h"
#include "common/util.h"
#include "server/srv-internal.h"

const char srv_usage[] =
    "usage: rung serve [OPTIONS] --tokens FILE\n"
    "\n"
    "Serve the rung sandbox protocol as versioned HTTP/JSON (/v1/...) on a Unix socket and,\n"
    "optionally, on TCP. Every request is authenticated; its scope is the credential's.\n"
    "\n"
    "  --tokens FILE          credentials, one \"TOKEN SCOPE\" per line (required). '#' starts\n"
    "                         a comment. \"uid UID SCOPE\" (or \"unix-peer-uid:UID SCOPE\") grants\n"
    "                         Unix-socket clients running as UID (SO_PEERCRED) SCOPE\n"
    "                         without a token (the rung CLI without root); \"- SCOPE\"\n"
    "                         grants every token-less Unix-socket client SCOPE. Tokens are\n"
    "                         16..512 printable bytes. The file must not be world-accessible.\n"
    "                         \"admin TOKEN\" reads the daemon-wide /metrics (a scope's\n"
    "                         token sees only its own). \"limits SCOPE|* KEY=VALUE...\" sets a\n"
    "                         scope's limits: requests (32 in flight; 429 beyond),\n"
    "                         connections (64 open, idle ones too), sandboxes (64), and\n"
    "                         spec maxima memory (8G), disk (64G), cpus (8),\n"
    "                         pids (4096), exec_timeout (3600), output (64M), ttl (604800;\n"
    "                         ttl=0 allows specs that never expire).\n"
    "                         SIGHUP re-reads it (a bad file keeps the old credentials).\n"
    "  --socket PATH          Unix socket (default /run/rung/rung.sock; \"none\" disables)\n"
    "  --socket-mode MODE     octal mode of the socket (default 0660)\n"
    "  --socket-group GROUP   group owning the socket (default: the daemon's)\n"
    "  --listen HOST:PORT     also listen on TCP (e.g. 127.0.0.1:7878; port 0 picks one and\n"
    "                         logs it). Tokens travel in clear: use loopback or a TLS proxy.\n"
    "  --state-dir DIR        the sandbox store (default $RUNG_STATE_DIR, else /var/lib/rung);\n"
    "                         several daemons may share one store\n"
    "  --deployed             apply the deployed isolation x capability policy\n"
    "  --pool NAME=SIZE:SPEC  a warm pool (repeatable, docs/pools.md): SIZE ready sandboxes\n"
    "                         of the SandboxSpec in file SPEC, kept filled by this daemon;\n"
    "                         an acquire of a matching spec claims one\n"
    "  --gc-interval SECONDS  sweeper period: suspend idle, dispose past TTL (default 5; 0 off)\n"
    "  --header-timeout SECS  a request head must arrive within this (default 10)\n"
    "  --body-timeout SECS    ... and its body within this (default 120; 0: no limit)\n"
    "  --idle-timeout SECS    close a connection idle this long (default 60)\n"
    "  --max-archive SIZE     largest tar a PUT .../archive takes (default 8G; 413 beyond)\n"
    "  --max-connections N    concurrent connections per listener (default 256)\n"
    "  --max-per-ip N         concurrent TCP connections per client address (default 64)\n"
    "  --drain-timeout SECS   on SIGTERM/SIGINT, wait this long for requests (default 10)\n"
    "  --log-level LEVEL      error, warn, info (default; one line per request) or debug\n"
    "  --json                 log one JSON object per line instead of key=value\n"
    "  -h, --help             this text\n"
    "\n"
    "Limits: JSON bodies 1 MiB, file uploads 64 MiB, header block 32 KiB (431 beyond).\n"
    "Endpoints: POST/GET/DELETE /v1/sandboxes, GET/DELETE /v1/sandboxes/{id},\n"
    "POST /v1/sandboxes/{id}/{exec,run-code,suspend,resume}, PUT/GET /v1/sandboxes/{id}/files,\n"
    "PUT/GET /v1/sandboxes/{id}/archive (tar streams),\n"
    "GET /healthz, GET /metrics (authenticated). See server/README.md.\n";

static int num(const char *opt, const char *v, unsigned max, unsigned *out, struct rung_err *err)
{
	uint64_t n;
	if (rung_parse_u64(v, &n) < 0 || n > max)
		return rung_err_set(err, EINVAL, "%s: expected a number 0..%u, got \"%s\"", opt,
				    max, v);
	*out = (unsigned)n;
	return 0;
}

int srv_opts_parse(int argc, char **argv, struct srv_opts *o, struct rung_err *err)
{
	*o = (struct srv_opts){
	    .socket_path = "/run/rung/rung.sock",
	    .socket_mode = 0660,
	    .gc_interval_s = 5,
	    .header_timeout_s = 10,
	    .body_timeout_s = 120,
	    .idle_timeout_s = 60,
	    .max_archive = SRV_MAX_ARCHIVE,
	    .max_connections = 256,
	    .max_per_ip = 64,
	    .drain_s = 10,
	    .log_level = RUNG_LOG_INFO,
	};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return 1;
		if (!strcmp(a, "--deployed")) {
			o->deployed = true;
			continue;
		}
		if (!strcmp(a, "--json")) {
			o->log_json = true;
			continue;
		}
		if (strncmp(a, "--", 2))
			return rung_err_set(err, EINVAL, "unexpected argument \"%s\"", a);
		const char *eq = strchr(a, '=');
		char name[64];
		size_t nl = eq ? (size_t)(eq - a) : strlen(a);
		if (nl >= sizeof(name))
			return rung_err_set(err, EINVAL, "unknown option %.64s", a);
		memcpy(name, a, nl);
		name[nl] = '\0';
		const char *v = eq ? eq + 1 : NULL;
		if (!v) {
			if (i + 1 >= argc)
				return rung_err_set(err, EINVAL, "%s: needs a value", name);
			v = argv[++i];
		}
		int r = 0;
		if (!strcmp(name, "--tokens"))
			o->tokens_path = v;
		else if (!strcmp(name, "--socket"))
			o->socket_path = strcmp(v, "none") ? v : "";
		else if (!strcmp(name, "--socket-group"))
			o->socket_group = v;
		else if (!strcmp(name, "--socket-mode")) {
			char *end;
			unsigned long m = strtoul(v, &end, 8);
			if (!*v || *end || m > 0777)
				return rung_err_set(err, EINVAL, "--socket-mode: bad octal mode %s",
						    v);
			o->socket_mode = (unsigned)m;
		} else if (!strcmp(name, "--listen"))
			o->listen = v;
		else if (!strcmp(name, "--state-dir"))
			o->state_dir = v;
		else if (!strcmp(name, "--pool")) {
			if (o->n_pools == SRV_MAX_POOLS)
				return rung_err_set(err, EINVAL, "--pool: at most %d pools",
						    SRV_MAX_POOLS);
			o->pools[o->n_pools++] = v;
		} else if (!strcmp(name, "--gc-interval"))
			r = num(name, v, 86400, &o->gc_interval_s, err);
		else if (!strcmp(name, "--header-timeout"))
			r = num(name, v, 3600, &o->header_timeout_s, err);
		else if (!strcmp(name, "--body-timeout"))
			r = num(name, v, 86400, &o->body_timeout_s, err);
		else if (!strcmp(name, "--idle-timeout"))
			r = num(name, v, 86400, &o->idle_timeout_s, err);
		else if (!strcmp(name, "--max-archive")) {
			if (rung_parse_size(v, &o->max_archive) < 0 || !o->max_archive ||
			    o->max_archive > SIZE_MAX / 2)
				return rung_err_set(err, EINVAL, "--max-archive: bad size %s", v);
		} else if (!strcmp(name, "--max-connections"))
			r = num(name, v, 65536, &o->max_connections, err);
		else if (!strcmp(name, "--max-per-ip"))
			r = num(name, v, 65536, &o->max_per_ip, err);
		else if (!strcmp(name, "--drain-timeout"))
			r = num(name, v, 3600, &o->drain_s, err);
		else if (!strcmp(name, "--log-level")) {
			static const char *const lv[] = {"error", "warn", "info", "debug"};
			unsigned k;
			for (k = 0; k < 4 && strcmp(v, lv[k]); k++)
				;
			if (k == 4)
				return rung_err_set(err, EINVAL, "--log-level: unknown level %s",
						    v);
			o->log_level = (enum rung_log_level)k;
		} else
			return rung_err_set(err, EINVAL, "unknown option %s", name);
		if (r < 0)
			return r;
	}
	if (!o->tokens_path)
		return rung_err_set(err, EINVAL, "--tokens FILE is required");
	if (!o->socket_path[0] && !o->listen)
		return rung_err_set(err, EINVAL,
				    "nothing to listen on (--socket none, no --listen)");
	if (o->header_timeout_s == 0 || o->max_connections == 0)
		return rung_err_set(err, EINVAL,
				    "--header-timeout and --max-connections must be > 0");
	return 0;
}
