/* rung: the command-line interface. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

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

struct rung_router *cli_router(struct cli *c)
{
	if (c->router)
		return c->router;
	struct rung_err err = {0};
	struct rung_router_opts o = {.state_dir = c->state_dir, .deployed = c->deployed};
	if (rung_router_new(&o, &c->router, &err) < 0) {
		cli_fail(c, &err);
		return NULL;
	}
	return c->router;
}

int cli_fail(struct cli *c, const struct rung_err *err)
{
	if (c && c->json) {
		/* a JSON error object; the message is escaped by hand for the few specials */
		printf("{\"error\": {\"errno\": %d, \"message\": \"", err->code);
		for (const char *p = err->msg; *p; p++) {
			if (*p == '"' || *p == '\\')
				printf("\\%c", *p);
			else if ((unsigned char)*p < 0x20)
				printf("\\u%04x", *p);
			else
				putchar(*p);
		}
		printf("\"}}\n");
	}
	fprintf(stderr, "rung: %s\n", err->msg);
	return err->code == ENOENT ? 3 : 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "rung %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see: rung %s --help)\n", cmd);
	return 2;
}

bool cli_want_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return false;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return true;
	}
	return false;
}

int cli_print_help(const char *cmd)
{
	for (const struct cli_cmd *c = cli_cmds; c->name; c++)
		if (!strcmp(c->name, cmd)) {
			printf("usage: %s\n\n%s", c->usage, c->help);
			return 0;
		}
	return 2;
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
		return r;
	}
	fprintf(stderr, "rung: unknown command '%s' (see: rung --help)\n", argv[1]);
	return 2;
}
