/* cli/util.c: helpers shared by the commands: the router, errors, help. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/dl.h"
#include "common/log.h"
#include "common/util.h"

struct rung_router *cli_router(struct cli *c)
{
	if (c->router)
		return c->router;
	struct rung_err err = {0};
	struct rung_router_opts o = c->host;
	if (c->state_dir)
		o.state_dir = c->state_dir;
	o.deployed = c->deployed;
	if (rung_router_new(&o, &c->router, &err) < 0) {
		cli_fail(c, &err);
		return NULL;
	}
	rung_trace("cli: router ready");
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
	if (c && c->hint[0])
		fputs(c->hint, stderr);
	if (c && !c->remote && !c->root && !c->hint[0] &&
	    (err->code == EACCES || err->code == EPERM))
		fprintf(stderr, "rung: not root: use `rung serve` through its socket instead "
				"(--socket PATH or RUNG_SOCKET; see rung --help)\n");
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

void cli_hold_stop_signals(bool block, sigset_t *set, sigset_t *prev)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	if (block)
		sigprocmask(SIG_BLOCK, set, prev);
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

static char **given_argv; /* as given: main's take_globals compacts argv */

void cli_dyn_init(int argc, char **argv)
{
	char **given = calloc((size_t)argc + 1, sizeof(char *));
	if (given)
		given_argv = memcpy(given, argv, (size_t)argc * sizeof(char *));
}

/*
 * A rung that cannot dlopen (common/dl.h: linked against musl, or statically against a
 * libc.so.6 that is no longer the installed one) runs the same program linked dynamically,
 * rung-dyn, for a call that needs a shared library (why), from the call's start: argv as
 * given. Without one, this one goes on, and only its dlopens are refused, saying so.
 */
void cli_dyn(const char *why)
{
	char dyn[PATH_MAX];
	if (rung_dl_libc_check() || !given_argv ||
	    rung_helper_path("rung-dyn", dyn, sizeof(dyn)) < 0 || access(dyn, X_OK) < 0)
		return;
	rung_trace("cli: rung-dyn");
	execv(dyn, given_argv);
}
