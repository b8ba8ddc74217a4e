/* rung: the command-line interface. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/log.h"

static void usage_all(FILE *f)
{
	fprintf(f, "rung %s: run untrusted code behind a declared isolation level\n\n"
		   "usage: rung [--state-dir DIR] [--json] COMMAND [ARGS...]\n\ncommands:\n",
		RUNG_VERSION);
	for (const struct cli_cmd *c = cli_cmds; c->name; c++)
		fprintf(f, "  %s\n", c->usage);
	fprintf(f, "\nglobal options (before or after COMMAND):\n"
		   "  --state-dir DIR   the store (default $RUNG_STATE_DIR or /var/lib/rung)\n"
		   "  --json            print one machine-readable JSON object on stdout\n"
		   "  --help            help for rung or for COMMAND\n");
}

/* Pull global options out of argv (anywhere before "--"), compacting the rest. */
static int take_globals(struct cli *c, int *argc, char **argv)
{
	int o = 1;
	bool after = false;
	for (int i = 1; i < *argc; i++) {
		if (!after && !strcmp(argv[i], "--"))
			after = true;
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

int main(int argc, char **argv)
{
	struct cli c = {0};
	rung_trace("cli: main");
	if (argc == 2 && !strcmp(argv[1], "__supervise"))
		return rung_supervisor_main();
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
		if (cli_want_help(argc - 1, argv + 1) && strcmp(cmd->name, "serve") &&
		    strcmp(cmd->name, "image"))
			return cli_print_help(cmd->name);
		int r = cmd->run(&c, argc - 1, argv + 1);
		rung_router_free(c.router);
		rung_trace("cli: done");
		return r;
	}
	fprintf(stderr, "rung: unknown command '%s' (see: rung --help)\n", argv[1]);
	return 2;
}
