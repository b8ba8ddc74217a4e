/* rung: the command-line interface. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "common/dl.h"
#include "common/log.h"
#include "common/util.h"

static void usage_all(FILE *f)
{
	fprintf(f, "rung %s: run untrusted code behind a declared isolation level\n\n"
		   "usage: rung [--state-dir DIR | --socket PATH] [--json] COMMAND [ARGS...]\n\n"
		   "commands:\n",
		RUNG_VERSION);
	for (const struct cli_cmd *c = cli_cmds; c->name; c++)
		fprintf(f, "  %s\n", c->usage);
	fprintf(f, "\nglobal options (before or after COMMAND):\n"
		   "  --state-dir DIR   the store (default $RUNG_STATE_DIR or /var/lib/rung)\n"
		   "  --socket PATH     be a client of `rung serve` on PATH (default $RUNG_SOCKET;\n"
		   "                    not root and neither given: " CLI_DEFAULT_SOCKET " if it\n"
		   "                    exists). The daemon's tokens file maps your uid to a scope\n"
		   "                    (\"uid UID SCOPE\"); RUNG_TOKEN sends a bearer token instead\n"
		   "  --json            print one machine-readable JSON object on stdout\n"
		   "  --help            help for rung or for COMMAND\n");
}

/* Pull global options out of argv (anywhere before "--"), compacting the rest. */
static int take_globals(struct cli *c, int *argc, char **argv)
{
	int o = 1;
	bool after = false, own_socket = false; /* serve and image have their own --socket */
	for (int i = 1; i < *argc; i++) {
		if (!after && !strcmp(argv[i], "--"))
			after = true;
		if (o == 1 && argv[i][0] != '-')
			own_socket = !strcmp(argv[i], "serve") || !strcmp(argv[i], "image");
		if (!after && !own_socket && !strncmp(argv[i], "--socket", 8) &&
		    (argv[i][8] == '=' || argv[i][8] == '\0')) {
			if (argv[i][8] == '=') {
				c->socket = argv[i] + 9;
				continue;
			}
			if (i + 1 >= *argc) {
				fprintf(stderr, "rung: --socket needs a path\n");
				return -1;
			}
			c->socket = argv[++i];
			continue;
		}
		if (!after && !strcmp(argv[i], "--json")) {
			c->json = true;
			continue;
		}
		if (!after && !strcmp(argv[i], "--deployed")) {
			c->deployed = true;
			continue;
		}
		if (!after && !strncmp(argv[i], "--state-dir", 11)) {
			if (argv[i][11] == '=') {
				c->state_dir = argv[i] + 12;
				continue;
			}
			if (argv[i][11] == '\0') {
				if (i + 1 >= *argc) {
					fprintf(stderr, "rung: --state-dir needs a directory\n");
					return -1;
				}
				c->state_dir = argv[++i];
				continue;
			}
		}
		argv[o++] = argv[i];
	}
	argv[o] = NULL;
	*argc = o;
	return 0;
}

/* The environment, read here once (docs/configuration.md): the router's host settings, and
 * the remote client's socket and token. */
static int read_env(struct cli *c, const char **socket_env)
{
	struct rung_err err = {0};
	if (rung_router_opts_load(&c->host, getenv, &err) < 0) {
		fprintf(stderr, "rung: %s\n", err.msg);
		return -1;
	}
	c->token = getenv("RUNG_TOKEN");
	c->path_env = getenv("PATH");
	if (c->token && !*c->token)
		c->token = NULL;
	*socket_env = getenv("RUNG_SOCKET");
	return 0;
}

/*
 * The commands a rung linked against musl serves itself (cli/module.mk); every other one
 * (gc, pools and their keepers, stats, ports, images, the daemon, ...) may reach libnftables
 * or libcurl and runs rung-dyn. A spec with an egress allowlist (cli_spec_finish), a sandbox
 * with one to dispose (dispose) and the daemon's client (main) run rung-dyn too.
 */
static bool musl_serves(const char *cmd)
{
#ifdef RUNG_LIBC_MUSL
	static const char *const served[] = {"run",  "acquire",	 "exec",    "write",
					     "read", "run-code", "cp",	    "fs",
					     "ls",   "inspect",	 "dispose", NULL};
	for (const char *const *s = served; *s; s++)
		if (!strcmp(*s, cmd))
			return true;
	return false;
#else
	(void)cmd;
	return true;
#endif
}

int main(int argc, char **argv)
{
	struct cli c = {0};
	const char *socket_env = NULL;
	cli_dyn_init(argc, argv);
#ifndef RUNG_LIBC_MUSL
	cli_dyn("a moved libc.so.6"); /* a static glibc rung: every call, at once */
#endif
	rung_trace_start(getenv("RUNG_TRACE"));
	rung_trace("cli: main");
	if (argc == 2 && !strcmp(argv[1], "__supervise"))
		return rung_supervisor_main();
	if (argc == 2 && !strcmp(argv[1], "__release"))
		return rung_release_main();
	rung_prefault(); /* not for the releaser: it runs little code, off the command's path */
	if (take_globals(&c, &argc, argv) < 0)
		return 2;
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		if (argc >= 3 && !strcmp(argv[1], "help"))
			return cli_print_help(argv[2]);
		usage_all(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("rung %s\n", RUNG_VERSION);
		return 0;
	}
	for (const struct cli_cmd *cmd = cli_cmds; cmd->name; cmd++) {
		if (strcmp(cmd->name, argv[1]))
			continue;
		if (read_env(&c, &socket_env) < 0)
			return 2;
		if (cli_want_help(argc - 1, argv + 1) && strcmp(cmd->name, "serve") &&
		    strcmp(cmd->name, "image"))
			return cli_print_help(cmd->name);
		if (!musl_serves(cmd->name))
			cli_dyn(cmd->name);
		c.root = geteuid() == 0;
		if (strcmp(cmd->name, "serve") && strcmp(cmd->name, "image") &&
		    strcmp(cmd->name, "gc") && strcmp(cmd->name, "pool") &&
		    strcmp(cmd->name, "fork")) {
			struct rung_err err = {0};
			if (cli_remote_select(&c, socket_env, c.root || c.host.state_dir,
					      &err) < 0)
				return cli_fail(&c, &err);
			if (c.remote)
				cli_dyn("the daemon's client (libcurl)");
		}
		/* The router is not freed: the process ends here and exit returns its memory,
		 * while a free would write to pages an owned dispose's hand-off child shares
		 * copy-on-write (runtime/lifecycle.c: a page fault each). */
		int r = cmd->run(&c, argc - 1, argv + 1);
		cli_remote_close(&c);
		rung_trace("cli: done");
		return r;
	}
	fprintf(stderr, "rung: unknown command '%s' (see: rung --help)\n", argv[1]);
	return 2;
}
