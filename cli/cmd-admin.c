/* cli/cmd-admin.c: ls, inspect, suspend, resume, dispose, dispose-scope, gc; the command table. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <errno.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "common/util.h"

/* [--scope S] [--thread T]: 0, or the usage-error exit status. */
static int scope_opts(const char *cmd, int argc, char **argv, const char **scope,
		      const char **thread)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--scope") && i + 1 < argc)
			*scope = argv[++i];
		else if (!strcmp(argv[i], "--thread") && i + 1 < argc)
			*thread = argv[++i];
		else
			return cli_usage_error(cmd, "unexpected '%s'", argv[i]);
	}
	return 0;
}

CLI_CMD(ls)
{
	const char *scope = NULL, *thread = NULL;
	int u = scope_opts("ls", argc, argv, &scope, &thread);
	if (u)
		return u;
	if (c->remote) /* the daemon lists the caller's scope only */
		return cli_remote_ls(c, thread);
	if (thread && !scope)
		return cli_usage_error("ls", "--thread needs --scope");
	struct rung_router *r = cli_router(c);
	if (!r)
		return 1;
	struct rung_sandbox_info *v;
	size_t n;
	struct rung_err err = {0};
	if (rung_list(r, scope, thread, &v, &n, &err) < 0)
		return cli_fail(c, &err);
	if (c->json)
		printf("[");
	else
		printf("%-32s  %-9s  %-9s  %-16s  %s\n", "ID", "ISOLATION", "STATE", "KIND", "SCOPE");
	for (size_t i = 0; i < n; i++) {
		if (c->json)
			printf("%s{\"id\": \"%s\", \"isolation\": \"%s\", \"state\": \"%s\", "
			       "\"kind\": \"%s\", \"labels\": {\"scope\": \"%s\", \"thread\": "
			       "\"%s\", \"agent\": \"%s\"}, \"created_ms\": %llu, "
			       "\"last_used_ms\": %llu}",
			       i ? ", " : "", v[i].id, rung_isolation_name(v[i].isolation),
			       rung_state_name(v[i].state), v[i].kind, v[i].scope_label,
			       v[i].thread_label, v[i].agent_label,
			       (unsigned long long)v[i].created_ms,
			       (unsigned long long)v[i].last_used_ms);
		else
			printf("%-32s  %-9s  %-9s  %-16s  %.12s\n", v[i].id,
			       rung_isolation_name(v[i].isolation), rung_state_name(v[i].state),
			       v[i].kind, v[i].scope_label);
	}
	if (c->json)
		printf("]\n");
	free(v);
	return 0;
}

CLI_CMD(inspect)
{
	if (argc != 2)
		return cli_usage_error("inspect", "usage: rung inspect ID");
	if (c->remote)
		return cli_remote_inspect(c, argv[1]);
	struct rung_router *r = cli_router(c);
	if (!r)
		return 1;
	char *json;
	struct rung_err err = {0};
	if (rung_inspect(r, argv[1], NULL, &json, &err) < 0)
		return cli_fail(c, &err);
	printf("%s\n", json);
	free(json);
	return 0;
}

static int one_id(struct cli *c, const char *cmd, int argc, char **argv,
		  int (*op)(struct rung_sandbox *, struct rung_err *))
{
	if (argc != 2)
		return cli_usage_error(cmd, "usage: rung %s ID", cmd);
	if (c->remote)
		return cli_remote_simple(c, cmd, argv[1]);
	struct rung_router *r = cli_router(c);
	if (!r)
		return 1;
	struct rung_sandbox *sb = NULL;
	struct rung_err err = {0};
	int rc = 0;
	if (rung_sandbox_open(r, argv[1], NULL, &sb, &err) < 0 || op(sb, &err) < 0)
		rc = cli_fail(c, &err);
	else if (c->json)
		printf("{\"id\": \"%s\", \"ok\": true}\n", argv[1]);
	rung_sandbox_close(sb);
	return rc;
}

CLI_CMD(suspend)
{
	return one_id(c, "suspend", argc, argv, rung_suspend);
}

CLI_CMD(resume)
{
	return one_id(c, "resume", argc, argv, rung_resume);
}

CLI_CMD(dispose)
{
	if (argc != 2)
		return cli_usage_error("dispose", "usage: rung dispose ID");
	if (c->remote)
		return cli_remote_dispose(c, argv[1]);
	struct rung_router *r = cli_router(c);
	if (!r)
		return 1;
	struct rung_err err = {0};
	if (rung_dispose(r, argv[1], NULL, &err) < 0)
		return cli_fail(c, &err);
	if (c->json)
		printf("{\"id\": \"%s\", \"disposed\": true}\n", argv[1]);
	return 0;
}

CLI_CMD(dispose_scope)
{
	const char *scope = NULL, *thread = NULL;
	int u = scope_opts("dispose-scope", argc, argv, &scope, &thread);
	if (u)
		return u;
	if (c->remote) /* the daemon disposes in the caller's scope only */
		return cli_remote_dispose_scope(c, thread);
	if (!scope)
		return cli_usage_error("dispose-scope", "--scope is required");
	struct rung_router *r = cli_router(c);
	if (!r)
		return 1;
	size_t n = 0;
	struct rung_err err = {0};
	int rc = rung_dispose_scope(r, scope, thread, &n, &err);
	if (c->json)
		printf("{\"disposed\": %zu}\n", n);
	else
		fprintf(stderr, "rung: disposed %zu sandbox(es)\n", n);
	return rc < 0 ? cli_fail(c, &err) : 0;
}

/*
 * `rung serve` and `rung image` are programs of their own (build/rung-serve, build/rung-image):
 * libmicrohttpd, libcurl and libarchive stay out of the CLI, whose start-up time is on every
 * command's path. Exec the sibling with the same arguments and the global options.
 */
static int exec_sibling(struct cli *c, const char *prog, int argc, char **argv)
{
	char path[4096];
	if (rung_helper_path(prog, path, sizeof(path)) < 0)
		return fprintf(stderr, "rung: cannot find my own binary\n"), 1;
	char **v = calloc((size_t)argc + 5, sizeof(char *));
	if (!v)
		return 1;
	int k = 0;
	v[k++] = (char *)prog;
	if (c->state_dir) {
		v[k++] = "--state-dir";
		v[k++] = (char *)c->state_dir;
	}
	if (c->json)
		v[k++] = "--json";
	if (c->deployed)
		v[k++] = "--deployed";
	for (int i = 1; i < argc; i++)
		v[k++] = argv[i];
	execv(path, v);
	fprintf(stderr, "rung: exec %s: %s\n", path, strerror(errno));
	free(v);
	return 1;
}

CLI_CMD(serve)
{
	return exec_sibling(c, "rung-serve", argc, argv);
}

CLI_CMD(image)
{
	return exec_sibling(c, "rung-image", argc, argv);
}

CLI_CMD(gc)
{
	if (argc != 1)
		return cli_usage_error("gc", "takes no arguments");
	struct rung_router *r = cli_router(c);
	if (!r)
		return 1;
	struct rung_gc_report rep;
	struct rung_err err = {0};
	if (rung_gc(r, &rep, &err) < 0)
		return cli_fail(c, &err);
	if (c->json)
		printf("{\"disposed_dead\": %zu, \"disposed_ttl\": %zu, \"suspended_idle\": %zu, "
		       "\"debris\": %zu}\n",
		       rep.disposed_dead, rep.disposed_ttl, rep.suspended_idle, rep.debris);
	else
		fprintf(stderr, "rung gc: %zu dead disposed, %zu past ttl disposed, %zu idle "
				"suspended, %zu debris removed\n",
			rep.disposed_dead, rep.disposed_ttl, rep.suspended_idle, rep.debris);
	return 0;
}

#define SPEC_OPTS_HELP                                                                             \
	"spec options:\n"                                                                          \
	"  --spec FILE.json      a SandboxSpec (flags given too override its fields)\n"           \
	"  --isolation LEVEL     minimum rung: process, container or vm\n"                       \
	"  --kind K              workload kind (default \"default\")\n"                            \
	"  --image REF           OCI image (container and vm rungs)\n"                            \
	"  --allow HOST_OR_CIDR  egress allowlist entry (repeatable); none: no network at all\n"  \
	"  --work-dir DIR        work directory inside (default /work)\n"                         \
	"  --memory SIZE --cpus N --pids N --disk SIZE --exec-timeout SEC\n"                      \
	"  --ttl SEC --idle-suspend SEC --env K=V (repeatable)\n"                                 \
	"  --requires CAP,...    exec, run_code, host_callbacks, fs_persist, install\n"           \
	"  --deployed            apply the deployed isolation x capability policy\n"

const struct cli_cmd cli_cmds[] = {
	{"run", cli_cmd_run, "rung run [SPEC-OPTS] [--timeout SEC] [--cwd DIR] [--env K=V]... -- CMD [ARG...]",
	 "Acquire a sandbox, run CMD in it, dispose it. The exit status is CMD's; a timed-out\n"
	 "command exits 124 (as timeout(1) does), a signal 128+N. Without --scope the key is a\n"
	 "fresh anonymous one. With --scope/--thread/--agent the sandbox is kept (warm).\n\n"
	 SPEC_OPTS_HELP},
	{"acquire", cli_cmd_acquire, "rung acquire [SPEC-OPTS] --scope S --thread T --agent A",
	 "Get or create the sandbox for this key and kind; print its id. The same key and kind\n"
	 "return the same live sandbox (resumed if suspended, files intact). Through the\n"
	 "daemon (--socket) the scope is the one it maps you to, and --scope is not needed.\n\n"
	 SPEC_OPTS_HELP},
	{"exec", cli_cmd_exec, "rung exec [--timeout SEC] [--cwd DIR] [--env K=V]... [--callback NAME=COMMAND]... ID -- CMD [ARG...]",
	 "Run CMD (an argv, never a shell string) in sandbox ID, streaming its output.\n"
	 "The exit status is CMD's; 124 on timeout (every process it started is killed).\n\n"
	 CLI_CALLBACK_HELP},
	{"write", cli_cmd_write, "rung write ID PATH [--mode OCTAL] < DATA",
	 "Write stdin to PATH in the sandbox (relative to its work dir; confined to its root).\n"},
	{"read", cli_cmd_read, "rung read ID PATH > DATA", "Copy PATH from the sandbox to stdout.\n"},
	{"run-code", cli_cmd_run_code, "rung run-code ID --lang python|sh [--callback NAME=COMMAND]... < CODE",
	 "Run CODE read from stdin with python3 or sh in the sandbox. With --callback, the code\n"
	 "calls host functions: rung_host.tools.NAME(**kw) in Python, rung-call NAME JSON in sh.\n\n"
	 CLI_CALLBACK_HELP},
	{"ls", cli_cmd_ls, "rung ls [--scope S] [--thread T]",
	 "List sandboxes, optionally those whose labels match a scope (and thread).\n"},
	{"inspect", cli_cmd_inspect, "rung inspect ID",
	 "Describe a sandbox as JSON: state, spec, labels, effective egress policy, and its\n"
	 "security metadata for an information-flow layer.\n"},
	{"suspend", cli_cmd_suspend, "rung suspend ID",
	 "Stop every process of the sandbox. Its next use (exec, write, read, run-code, here\n"
	 "or through the library or the daemon) resumes it, as after an idle suspend.\n"},
	{"resume", cli_cmd_resume, "rung resume ID", "Continue a suspended sandbox.\n"},
	{"dispose", cli_cmd_dispose, "rung dispose ID",
	 "Destroy a sandbox: its processes, mounts, network and files.\n"},
	{"dispose-scope", cli_cmd_dispose_scope, "rung dispose-scope --scope S [--thread T]",
	 "Destroy every sandbox whose labels match the scope (and thread), from the store.\n"},
	{"gc", cli_cmd_gc, "rung gc",
	 "Sweep the store: dispose sandboxes whose supervisor died or whose ttl passed, suspend\n"
	 "idle ones, remove debris of crashed creates.\n"},
	{"serve", cli_cmd_serve, "rung serve [--socket PATH] [--listen HOST:PORT] --tokens FILE",
	 "The HTTP/JSON API daemon (see rung serve --help).\n"},
	{"image", cli_cmd_image, "rung image import PATH [--tag REF] | pull REF | ls | inspect REF | rm REF | gc",
	 "Manage the local image store (content-addressed, every blob verified).\n"},
	{NULL, NULL, NULL, NULL},
};
