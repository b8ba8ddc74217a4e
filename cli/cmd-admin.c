/* cli/cmd-admin.c: ls, inspect, suspend, resume, dispose, dispose-scope, gc; the command table. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <errno.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "common/dl.h"
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
	bool disk = argc == 3 && !strcmp(argv[1], "--to-disk");
	if (disk && c->remote)
		return cli_remote_suspend_disk(c, argv[2]);
	if (disk)
		argv[1] = argv[2], argc = 2;
	return one_id(c, "suspend", argc, argv, disk ? rung_suspend_to_disk : rung_suspend);
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
	int rc = rung_dispose(r, argv[1], NULL, &err);
	if (rc == -ENOTSUP && !rung_dl_libc_check()) /* egress: nothing done yet */
		cli_dyn("a sandbox with an egress allowlist (libnftables)");
	if (rc < 0)
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

/* `rung cp` runs in rung-image (libarchive), as `rung-image cp SRC DST`. */
CLI_CMD(cp)
{
	char *v[7] = {"cp", "cp", NULL, NULL, NULL, NULL, NULL};
	for (int i = 1; i < argc && i < 6; i++)
		v[i + 1] = argv[i];
	return exec_sibling(c, "rung-image", argc < 6 ? argc + 1 : 7, v);
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
		       "\"debris\": %zu, \"pools_removed\": %zu}\n",
		       rep.disposed_dead, rep.disposed_ttl, rep.suspended_idle, rep.debris,
		       rep.pools_removed);
	else
		fprintf(stderr, "rung gc: %zu dead disposed, %zu past ttl disposed, %zu idle "
				"suspended, %zu debris removed, %zu pools removed\n",
			rep.disposed_dead, rep.disposed_ttl, rep.suspended_idle, rep.debris,
			rep.pools_removed);
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
	"  --from-snapshot NAME  vm rung: start from the template NAME (rung snapshot)\n"         \
	"  --requires CAP,...    exec, run_code, host_callbacks, fs_persist, install\n"           \
	"  --deployed            apply the deployed isolation x capability policy\n"

#define PROC_HELP                                                                                  \
	"Background processes: they belong to the sandbox, survive this command, the daemon's\n"  \
	"restart and suspend/resume, and die at dispose, at the ttl, or when killed\n"           \
	"(docs/procs.md).\n\n"                                                                   \
	"  rung proc start ID [--name N] [--cwd D] [--env K=V]... [--buffer SIZE]\n"              \
	"                     [--pty [--rows R --cols C]] -- CMD [ARG...]\n"                      \
	"      start CMD in the background; print its handle (--buffer: replay bytes per\n"      \
	"      stream, default 1 MiB)\n"                                                         \
	"  rung proc ls ID                  handle, name, state, exit, pid, start, command\n"    \
	"  rung proc logs ID H [--since OFFSET] [--follow]\n"                                     \
	"      its output from byte OFFSET of its log (stdout and stderr in order of arrival);\n" \
	"      --follow waits for more until it exits. --json: NDJSON lines with each chunk's\n" \
	"      offset, then {\"type\": \"end\", \"end_offset\": N}: resume there with --since\n"  \
	"  rung proc stdin ID H < DATA      copy our stdin to its stdin; EOF closes it\n"        \
	"  rung proc signal ID H SIG        SIG by name (TERM, INT, KILL...) or number\n"        \
	"  rung proc wait ID H [--timeout SEC]\n"                                                 \
	"      the exit status is its own (128+N for signal N); 124 when still running at SEC\n" \
	"  rung proc kill ID H              kill it and every process it started; forget H\n"    \
	"  rung proc resize ID H ROWS COLS  its terminal (--pty), 1..4096 each\n\n"              \
	"An unknown handle is an error naming it (exit status 3).\n"

#define SESSION_HELP                                                                               \
	"Persistent shells whose cd, export and functions carry over between runs (a\n"          \
	"background process underneath: rung proc ls lists it, rung proc kill ends it).\n\n"     \
	"  rung session start ID [--shell /bin/bash] [--cwd D] [--env K=V]...   print S\n"        \
	"  rung session run ID S [--timeout SEC] -- 'COMMAND'\n"                                  \
	"      run COMMAND (one shell string; several words are joined by spaces) in the\n"      \
	"      session: its stdout and stderr, and its exit status as ours (124: timed out,\n"   \
	"      its job was interrupted). --json: {exit_code, stdout, stderr, timed_out...}\n"

const struct cli_cmd cli_cmds[] = {
	{"run", cli_cmd_run, "rung run [SPEC-OPTS] [--timeout SEC] [--cwd DIR] [--env K=V]... -- CMD [ARG...]",
	 "Acquire a sandbox, run CMD in it, dispose it. The exit status is CMD's; a timed-out\n"
	 "command exits 124 (as timeout(1) does), a signal 128+N. Without --scope the key is a\n"
	 "fresh anonymous one. With --scope/--thread/--agent the sandbox is kept (warm).\n"
	 "An anonymous run's sandbox (no --allow, a --ttl no shorter than the timeout) has no\n"
	 "supervisor process: this command is its supervisor, and killing it kills the\n"
	 "sandbox (`rung gc` removes what is left). If --memory covers --disk, its disk is a\n"
	 "tmpfs of that size (charged to its memory) instead of an ext4 image.\n\n"
	 SPEC_OPTS_HELP},
	{"acquire", cli_cmd_acquire, "rung acquire [SPEC-OPTS] --scope S --thread T --agent A",
	 "Get or create the sandbox for this key and kind; print its id. The same key and kind\n"
	 "return the same live sandbox (resumed if suspended, files intact). Through the\n"
	 "daemon (--socket) the scope is the one it maps you to, and --scope is not needed.\n\n"
	 SPEC_OPTS_HELP},
	{"exec", cli_cmd_exec, "rung exec [-t] [--timeout SEC] [--cwd DIR] [--env K=V]... [--callback NAME=COMMAND]... ID -- CMD [ARG...]",
	 "Run CMD (an argv, never a shell string) in sandbox ID, streaming its output.\n"
	 "The exit status is CMD's; 124 on timeout (every process it started is killed).\n"
	 "-t: interactively, on a terminal of the sandbox's own sized as ours, as `docker exec\n"
	 "-it` (see rung attach --help for the keys); the exit status is CMD's.\n\n"
	 CLI_CALLBACK_HELP},
	{"write", cli_cmd_write, "rung write ID PATH [--mode OCTAL] < DATA",
	 "Write stdin to PATH in the sandbox (relative to its work dir; confined to its root).\n"},
	{"read", cli_cmd_read, "rung read ID PATH > DATA", "Copy PATH from the sandbox to stdout.\n"},
	{"run-code", cli_cmd_run_code, "rung run-code ID --lang python|sh [--callback NAME=COMMAND]... < CODE",
	 "Run CODE read from stdin with python3 or sh in the sandbox. With --callback, the code\n"
	 "calls host functions: rung_host.tools.NAME(**kw) in Python, rung-call NAME JSON in sh.\n\n"
	 CLI_CALLBACK_HELP},
	{"cp", cli_cmd_cp, "rung cp [--max-bytes N] SRC DST (one of them ID:PATH; the other a dir or -)",
	 "Copy a directory tree into or out of a sandbox, docker-cp style:\n"
	 "  rung cp ./src ID:/work/src     upload a host directory (made with parents)\n"
	 "  rung cp ID:/work/out ./out     download into ./out (must not exist; unpacked beside\n"
	 "                                 it and renamed into place only when complete)\n"
	 "  rung cp - ID:DIR / ID:DIR -    a tar stream on stdin / stdout\n"
	 "Modes, mtimes, empty directories and symlinks inside the tree are kept. Refused, naming\n"
	 "the entry: absolute names, '..', hard links, devices, fifos, sockets, symlinks pointing\n"
	 "out of the tree. A download over --max-bytes of file data (default 1 GiB) fails naming\n"
	 "the bound (EFBIG). On a terminal, progress (bytes, entries) goes to stderr; nothing\n"
	 "under --json or when stderr is piped.\n"
	 "Not yet through the daemon.\n"},
	{"fs", cli_cmd_fs, "rung fs ls|stat|rm [-r]|mkdir [-p] [--mode OCTAL]|mv ID PATH [DST]",
	 "File operations in the sandbox, confined to its root as write/read are (relative paths:\n"
	 "its work dir). The last component is never followed: stat shows a symlink, rm and mv\n"
	 "act on the link. ls prints KIND MODE SIZE NAME [-> TARGET] per entry; --json prints\n"
	 "{\"path\", \"entries\": [...]} for ls, the entry for stat, {\"path\", \"ok\"} else.\n"
	 "rm of a directory needs -r (the root is refused); mkdir -p makes missing parents and\n"
	 "accepts an existing directory; mv is rename(2): DST is the new path.\n\n"
	 "Exit status: 0 ok; 1 other error; 2 usage; 3 not_found; 4 not_a_directory;\n"
	 "5 is_a_directory; 6 permission_denied; 7 exists; 8 not_empty. With --json an error\n"
	 "prints {\"error\": {\"errno\", \"code\", \"message\"}}, code being that name.\n"},
	{"stats", cli_cmd_stats, "rung stats ID [--json] [--watch [SEC]]",
	 "What the sandbox uses now, measured: CPU time, memory (current, peak, limit, OOM\n"
	 "kills) and pids from its cgroup (the vm rung: the guest kernel's view, and rung-vmm's\n"
	 "RSS), disk used of the work dir's filesystem against limits.disk, background\n"
	 "processes, network bytes out/in and packets the egress policy refused (nft counters).\n"
	 "--watch repeats every SEC seconds\n"
	 "(default 2; --json: one object per line) until interrupted.\n"},
	{"ls", cli_cmd_ls, "rung ls [--scope S] [--thread T]",
	 "List sandboxes, optionally those whose labels match a scope (and thread).\n"},
	{"inspect", cli_cmd_inspect, "rung inspect ID",
	 "Describe a sandbox as JSON: state, spec, labels, effective egress policy, and its\n"
	 "security metadata for an information-flow layer.\n"},
	{"suspend", cli_cmd_suspend, "rung suspend [--to-disk] ID",
	 "Stop every process of the sandbox. Its next use (exec, write, read, run-code, here\n"
	 "or through the library or the daemon) resumes it, as after an idle suspend.\n"
	 "--to-disk (vm rung only): save the guest to a file in the sandbox's store directory\n"
	 "and stop its VMM, freeing its memory; resume restores it and deletes the file.\n"},
	{"snapshot", cli_cmd_snapshot, "rung snapshot ID NAME [--force] | ls [--json] | rm NAME",
	 "Templates (vm rung only; docs/snapshots.md). `rung snapshot ID NAME` saves the\n"
	 "running sandbox ID (its memory, its disk, its spec) as the template NAME (1-64 of\n"
	 "[a-z0-9._-]) and continues it; an existing NAME is refused unless --force. `ls`\n"
	 "lists the templates (--json: their descriptions), `rm NAME` removes one. A sandbox\n"
	 "starts from a template with `rung acquire|run --from-snapshot NAME` (the spec's\n"
	 "memory, cpus, disk and image must be the template's).\n"},
	{"resume", cli_cmd_resume, "rung resume ID", "Continue a suspended sandbox.\n"},
	{"dispose", cli_cmd_dispose, "rung dispose ID",
	 "Destroy a sandbox: its processes, mounts, network and files.\n"},
	{"dispose-scope", cli_cmd_dispose_scope, "rung dispose-scope --scope S [--thread T]",
	 "Destroy every sandbox whose labels match the scope (and thread), from the store.\n"},
	{"gc", cli_cmd_gc, "rung gc",
	 "Sweep the store: dispose sandboxes whose supervisor died or whose ttl passed, suspend\n"
	 "idle ones, remove debris of crashed creates and pools whose keeper died.\n"},
	{"pool", cli_cmd_pool,
	 "rung pool set NAME --size N [--mem-reserve SIZE] [--no-keeper] [SPEC-OPTS] | ls | rm NAME | fill NAME",
	 "Warm pools (docs/pools.md): N ready sandboxes of one spec in the store. An acquire\n"
	 "(or run) whose spec matches (the same spec but for kind, ttl and idle suspend) and\n"
	 "whose key has no sandbox claims a ready one in well under a millisecond, atomically\n"
	 "(never two claims of one sandbox, across processes and daemons on the store); the\n"
	 "key's labels are bound at the claim, and the sandbox has run nothing before.\n\n"
	 "  set NAME --size N   create or update the pool, fill it now, and start a detached\n"
	 "                      keeper that refills it after each claim (--no-keeper: none;\n"
	 "                      then `rung pool fill NAME` or the daemon refills it)\n"
	 "  --mem-reserve SIZE  MemAvailable kept free (default 256M): under it no sandbox is\n"
	 "                      made ready and ready ones are disposed\n"
	 "  ls [--json]         pools, their size, ready count, keeper and match key\n"
	 "  rm NAME             stop its keeper, dispose its ready sandboxes, remove it\n"
	 "  fill NAME           one refill pass now\n\n"
	 "rung gc removes a pool whose keeper died.\n\n" SPEC_OPTS_HELP},
	{"fork", cli_cmd_fork, "rung fork ID [--count N]",
	 "Make N (default 1, at most 64) new sandboxes whose filesystem starts as ID's is now,\n"
	 "each diverging after; print their ids. ID is stopped while its disk is copied (a\n"
	 "reflink where the store's filesystem supports it, else a sparse copy: --json says\n"
	 "which), then continued. Processes are NOT copied on the process and container\n"
	 "rungs: a fork starts with only its agent, as a fresh sandbox does. On the vm rung\n"
	 "the guest syncs, the VM pauses while its upper disk is copied, and the fork boots on\n"
	 "the copy (its memory is not copied). A fork has ID's spec, kind and scope and is\n"
	 "addressed by its id.\n"},
	{"serve", cli_cmd_serve, "rung serve [--socket PATH] [--listen HOST:PORT] --tokens FILE",
	 "The HTTP/JSON API daemon (see rung serve --help).\n"},
	{"image", cli_cmd_image, "rung image import PATH [--tag REF] | pull REF | commit ID REF | ls | inspect REF | rm REF | gc",
	 "Manage the local image store (content-addressed, every blob verified). commit: the\n"
	 "sandbox's changes (container and vm rungs: its overlay upper dir; process rung: its\n"
	 "work dir, on an empty base) as a new layer, stored and tagged REF like an import.\n"},
	{"ladder", cli_cmd_ladder,
	 "rung ladder [--rungs process,container,vm] [--peers] [--image REF] [--probes A,B] | --from FILE",
	 "Measure what each rung stops on this host: run rung-probe's battery (rung-probe --list)\n"
	 "in each rung and, with --peers, under bubblewrap, crun and runc; print the probe x rung\n"
	 "table, a summary per rung and the host's facts (--json: docs/ladder.md). Each escape\n"
	 "is checked on the host (a marker, a listener, a secret the ladder planted). As root.\n\n"
	 "  --rungs LIST   rungs to run (default process,container,vm; one that cannot run here\n"
	 "                 says why)\n"
	 "  --peers        also bubblewrap (as nobody, --unshare-all), crun and runc (their\n"
	 "                 default spec, the same limits)\n"
	 "  --image REF    the container and vm rungs' image (default rung/busybox:latest,\n"
	 "                 make image-busybox)\n"
	 "  --probes LIST  only these probes (comma-separated names)\n"
	 "  --probe PATH   the rung-probe binary (default: beside rung)\n"
	 "  --from FILE    print the table of a saved --json result (runs nothing)\n"
	 "  --json         (global) one JSON object instead of the table\n\n"
	 "A whole run (no --probes) is saved in the store for --deployed and rung inspect.\n"},
	{"proc", cli_cmd_proc,
	 "rung proc start|ls|logs|stdin|signal|wait|kill|resize ID [H] ...",
	 PROC_HELP},
	{"attach", cli_cmd_attach, "rung attach [--since OFFSET] ID H",
	 "An interactive terminal on background process H (started with --pty): its recent\n"
	 "output (the replay buffer, from OFFSET, default its start) first, then our keys go\n"
	 "to it and its output to us. Our terminal is raw meanwhile and restored on every way\n"
	 "out. Ctrl-P Ctrl-Q detaches (the process runs on; exit status 0); when the process\n"
	 "exits, its exit status is ours. Our window size follows to its terminal.\n"},
	{"session", cli_cmd_session, "rung session start ID [--shell SH] | run ID S -- 'CMD'",
	 SESSION_HELP},
	{"port", cli_cmd_port, "rung port ID SANDBOX_PORT [--host ADDR] [--host-port P] [--detach] | ls ID | rm ID PORT",
	 "Forward a host TCP port to SANDBOX_PORT on the sandbox's loopback, through rung's own\n"
	 "agent channel: the sandbox needs no network and its egress policy opens nothing. TCP\n"
	 "only. Listens on 127.0.0.1 unless --host names another address (shown by `rung port\n"
	 "ls` and `rung inspect`); --host-port defaults to SANDBOX_PORT, 0 picks a free one.\n"
	 "Runs until interrupted; --detach leaves a forwarding process that lasts until\n"
	 "`rung port rm ID PORT` or the sandbox's dispose. `rung port ls ID [--json]` lists the\n"
	 "detached forwards.\n"},
	{NULL, NULL, NULL, NULL},
};
