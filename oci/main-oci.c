/*
 * oci/main-oci.c: rung-oci, the OCI runtime command line (runc's, as containerd's runc shim
 * calls it) on rung's container rung. docs/oci.md says what is supported and refused.
 * Exit codes follow runc: 0 on success, 1 on any failure or usage error (the message on stderr
 * and, with --log, in the log file as runc writes it), 3 for an unknown command.
 */
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/oci.h"
#include "oci/vm.h"

struct globals {
	const char *root, *log, *log_format;
	bool vm; /* the runtime's rung: rung-oci-vm or --isolation vm (oci/vm.h) */
};

static void log_error(const struct globals *g, const char *msg)
{
	fprintf(stderr, "rung-oci: %s\n", msg);
	if (!g->log)
		return;
	FILE *f = fopen(g->log, "ae");
	if (!f)
		return;
	char ts[64];
	time_t now = time(NULL);
	struct tm tm;
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
	if (g->log_format && strcmp(g->log_format, "json") == 0) {
		cleanup_json json_t *j = json_pack("{s:s, s:s, s:s}", "level", "error", "msg", msg,
						   "time", ts);
		char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
		if (t)
			fprintf(f, "%s\n", t);
		free(t);
	} else {
		fprintf(f, "time=\"%s\" level=error msg=\"%s\"\n", ts, msg);
	}
	fclose(f);
}

static int fail(const struct globals *g, const struct rung_err *err)
{
	log_error(g, err->msg[0] ? err->msg : "failed");
	return 1;
}

static int usage_error(const char *cmd, const char *what)
{
	fprintf(stderr, "rung-oci %s: %s (see rung-oci %s --help)\n", cmd, what, cmd);
	return 1; /* runc's status for a usage error */
}

static const char *const cmd_help[][2] = {
	{"create", "create [--bundle DIR] [--pid-file F] [--console-socket S] [--no-pivot] "
		   "[--no-new-keyring] ID\n  Create the container from the bundle (default: the "
		   "current directory); its process waits until `start`."},
	{"start", "start ID\n  Run the created container's process."},
	{"state", "state ID\n  Print the container's OCI state (JSON)."},
	{"kill", "kill [--all] ID [SIGNAL]\n  Send SIGNAL (default TERM) to the container's "
		 "process, or with --all to every process in its cgroup."},
	{"delete", "delete [--force] ID\n  Remove a stopped (or created) container; --force kills "
		   "a running one first and succeeds when it does not exist."},
	{"features", "features\n  Print what this runtime supports (JSON)."},
	{"exec", "exec [--process P.json | ARGS...] [--detach] [--pid-file F] [--tty] "
		 "[--console-socket S] [--cwd D] [--env K=V]... [--user UID[:GID]] ID [ARGS...]\n"
		 "  Run a process in the container, confined as its init; without --detach its "
		 "exit status is rung-oci's."},
	{"ps", "ps [--format table|json] ID\n  List the processes of the container's cgroup "
	       "(json: an array of host pids)."},
	{"pause", "pause ID\n  Freeze every process of the container (state: paused)."},
	{"resume", "resume ID\n  Thaw a paused container."},
	{"events", "events [--stats] [--interval DURATION] ID\n  Print the container's cgroup "
		   "statistics (JSON lines, runc's shape): once with --stats, else every "
		   "--interval (default 5s) with an oom event per OOM kill, until it stops."},
	{"update", "update [--resources R.json|-] [--memory BYTES] [--pids-limit N] "
		   "[--cpu-quota US] [--cpu-period US] [--cpu-shares N] ID\n  Change the "
		   "container's linux.resources (memory, pids, cpu)."},
};

static int help(const char *cmd)
{
	for (size_t i = 0; cmd && i < sizeof(cmd_help) / sizeof(cmd_help[0]); i++)
		if (strcmp(cmd, cmd_help[i][0]) == 0) {
			printf("usage: rung-oci [global options] %s\n", cmd_help[i][1]);
			return 0;
		}
	printf("usage: rung-oci [--root DIR] [--log FILE] [--log-format text|json] COMMAND ...\n"
	       "An OCI runtime (runc's command line) on rung's container rung (docs/oci.md).\n"
	       "Commands: create, start, state, kill, delete, exec, ps, pause, resume, events, update,\n"
	       "features; COMMAND --help for each.\n"
	       "  --root DIR         state directory (default /run/rung-oci)\n"
	       "  --log FILE         also write errors to FILE\n"
	       "  --log-format F     text (default) or json\n"
	       "  --systemd-cgroup   refused: rung-oci manages cgroupfs paths only\n"
	       "  --isolation RUNG   container (default) or vm (the default when called as\n"
	       "                     rung-oci-vm); a bundle's dev.rung.isolation may only raise it\n");
	return 0;
}

/* The one positional argument (the container id) after the subcommand's options. */
static int want_id(int argc, char **argv, const char *cmd, const char **id, int extra)
{
	if (optind >= argc)
		return usage_error(cmd, "the container id is missing");
	if (argc - optind > 1 + extra)
		return usage_error(cmd, "too many arguments");
	*id = argv[optind];
	return 0;
}

static int cmd_create(const struct globals *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{"bundle", required_argument, 0, 'b'},	  {"pid-file", required_argument, 0, 'p'},
		{"console-socket", required_argument, 0, 'c'}, {"no-pivot", no_argument, 0, 'P'},
		{"no-new-keyring", no_argument, 0, 'K'},   {"preserve-fds", required_argument, 0, 'f'},
		{"help", no_argument, 0, 'h'},		   {0, 0, 0, 0},
	};
	struct oci_create_opts o = {.root = g->root, .bundle = ".", .vm = g->vm};
	int c;
	while ((c = getopt_long(argc, argv, "+b:h", opts, NULL)) != -1) {
		switch (c) {
		case 'b': o.bundle = optarg; break;
		case 'p': o.pid_file = optarg; break;
		case 'c': o.console_socket = optarg; break;
		case 'P': o.no_pivot = true; break;
		case 'K': break; /* keyrings are not given to containers: nothing to skip */
		case 'f':
			if (strcmp(optarg, "0") != 0)
				return usage_error("create", "--preserve-fds is not supported");
			break;
		case 'h': return help("create");
		default: return usage_error("create", "unknown option");
		}
	}
	int r = want_id(argc, argv, "create", &o.id, 0);
	if (r)
		return r;
	struct rung_err err = {0};
	return oci_create(&o, &err) < 0 ? fail(g, &err) : 0;
}

static int simple_opts(int argc, char **argv, const char *cmd, bool *flag, const char *flagname)
{
	const struct option opts[] = {{"help", no_argument, 0, 'h'},
				      {flagname ? flagname : "help", no_argument, 0, 'f'},
				      {0, 0, 0, 0}};
	int c;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		if (c == 'h')
			return help(cmd) == 0 ? -1 : -1;
		if (c == 'f' && flag)
			*flag = true;
		else
			return usage_error(cmd, "unknown option");
	}
	return 0;
}

/* simple_opts, then the container id (extra: further arguments allowed): 0 to go on, -1 when
 * --help was printed (exit 0), else the exit status of a usage error. */
static int id_opts(int argc, char **argv, const char *cmd, bool *flag, const char *flagname,
		   const char **id, int extra)
{
	int r = simple_opts(argc, argv, cmd, flag, flagname);
	return r ? r : want_id(argc, argv, cmd, id, extra);
}

static int cmd_start(const struct globals *g, int argc, char **argv)
{
	const char *id;
	int r = id_opts(argc, argv, "start", NULL, NULL, &id, 0);
	if (r)
		return r < 0 ? 0 : r;
	struct rung_err err = {0};
	signal(SIGPIPE, SIG_IGN); /* oci_start learns of the exec from EPIPE */
	return oci_start(g->root, id, &err) < 0 ? fail(g, &err) : 0;
}

static int cmd_state(const struct globals *g, int argc, char **argv)
{
	const char *id;
	int r = id_opts(argc, argv, "state", NULL, NULL, &id, 0);
	if (r)
		return r < 0 ? 0 : r;
	struct rung_err err = {0};
	struct oci_state st;
	if (oci_state_read(g->root, id, &st, &err) < 0)
		return fail(g, &err);
	cleanup_json json_t *j = oci_state_json(g->root, &st);
	oci_state_release(&st);
	char *t = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
	if (!t)
		return fail(g, &(struct rung_err){ENOMEM, "out of memory"});
	printf("%s\n", t);
	free(t);
	return 0;
}

static int cmd_kill(const struct globals *g, int argc, char **argv)
{
	bool all = false;
	const char *id;
	int r = id_opts(argc, argv, "kill", &all, "all", &id, 1);
	if (r)
		return r < 0 ? 0 : r;
	const char *name = optind + 1 < argc ? argv[optind + 1] : "TERM";
	int sig = rung_signal_parse(name);
	if (sig <= 0)
		return usage_error("kill", "unknown signal");
	struct rung_err err = {0};
	return oci_kill(g->root, id, sig, all, &err) < 0 ? fail(g, &err) : 0;
}

static int cmd_delete(const struct globals *g, int argc, char **argv)
{
	bool force = false;
	const char *id;
	int r = id_opts(argc, argv, "delete", &force, "force", &id, 0);
	if (r)
		return r < 0 ? 0 : r;
	struct rung_err err = {0};
	return oci_delete(g->root, id, force, &err) < 0 ? fail(g, &err) : 0;
}

static int cmd_features(const struct globals *g, int argc, char **argv)
{
	int r = simple_opts(argc, argv, "features", NULL, NULL);
	if (r)
		return r < 0 ? 0 : r;
	cleanup_json json_t *caps = json_array();
	for (int i = 0; i < 64; i++)
		if (oci_cap_policy() >> i & 1) {
			char name[40];
			if (oci_cap_name(i, name, sizeof(name)))
				json_array_append_new(caps, json_string(name));
		}
	cleanup_json json_t *j = json_pack(
		"{s:s, s:s, s:[], s:[sssssssssssssssssssssss], s:{s:[sssssss], s:O, "
		"s:{s:b, s:b, s:b}, s:{s:b}, s:{s:b}}, s:{s:s}}",
		"ociVersionMin", "1.0.0", "ociVersionMax", OCI_VERSION, "hooks", "mountOptions",
		"ro", "rw", "nosuid", "suid", "nodev", "dev", "noexec", "exec", "sync", "async",
		"noatime", "atime", "nodiratime", "relatime", "strictatime", "bind", "rbind",
		"private", "rprivate", "slave", "rslave", "shared", "rshared", "linux",
		"namespaces", "cgroup", "ipc", "mount", "network", "pid", "user", "uts",
		"capabilities", caps, "cgroup", "v1", 1, "v2", 1, "systemd", 0, "seccomp", "enabled",
		1, "apparmor", "enabled", 0, "annotations", "dev.rung.isolation", g->vm ? "vm" : "container");
	char *t = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
	if (!t)
		return fail(g, &(struct rung_err){ENOMEM, "out of memory"});
	printf("%s\n", t);
	free(t);
	return 0;
}


static int cmd_exec(const struct globals *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{"process", required_argument, 0, 'p'}, {"detach", no_argument, 0, 'd'},
		{"pid-file", required_argument, 0, 'P'}, {"tty", no_argument, 0, 't'},
		{"console-socket", required_argument, 0, 'c'}, {"cwd", required_argument, 0, 'w'},
		{"env", required_argument, 0, 'e'},	{"user", required_argument, 0, 'u'},
		{"help", no_argument, 0, 'h'},		{0, 0, 0, 0},
	};
	struct oci_exec_opts o = {.root = g->root};
	const char *env[65] = {0};
	size_t nenv = 0;
	int c;
	while ((c = getopt_long(argc, argv, "+p:dte:u:w:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': o.process = optarg; break;
		case 'd': o.detach = true; break;
		case 'P': o.pid_file = optarg; break;
		case 't': o.tty = true; break;
		case 'c': o.console_socket = optarg; break;
		case 'w': o.cwd = optarg; break;
		case 'u': o.user = optarg; break;
		case 'e':
			if (nenv == 64 || !strchr(optarg, '='))
				return usage_error("exec", "--env wants K=V (at most 64)");
			env[nenv++] = optarg;
			break;
		case 'h': return help("exec");
		default: return usage_error("exec", "unknown option");
		}
	}
	if (optind >= argc)
		return usage_error("exec", "the container id is missing");
	o.id = argv[optind];
	o.args = (const char *const *)argv + optind + 1;
	o.env = env;
	if (!o.process && !o.args[0])
		return usage_error("exec", "give the process: --process FILE or ARGS after the id");
	if (o.process && o.args[0])
		return usage_error("exec", "--process and ARGS together");
	struct rung_err err = {0};
	int status = 0;
	return oci_exec(&o, &status, &err) < 0 ? fail(g, &err) : status;
}

static int cmd_ps(const struct globals *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{"format", required_argument, 0, 'f'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
	const char *fmt = "table", *id;
	int c;
	while ((c = getopt_long(argc, argv, "+f:h", opts, NULL)) != -1) {
		if (c == 'h')
			return help("ps");
		if (c != 'f')
			return usage_error("ps", "unknown option");
		fmt = optarg;
	}
	if (strcmp(fmt, "json") != 0 && strcmp(fmt, "table") != 0)
		return usage_error("ps", "--format must be table or json");
	int r = want_id(argc, argv, "ps", &id, 0);
	if (r)
		return r;
	struct rung_err err = {0};
	return oci_ps(g->root, id, strcmp(fmt, "json") == 0, &err) < 0 ? fail(g, &err) : 0;
}

static int freeze_cmd(const struct globals *g, int argc, char **argv, const char *cmd, bool on)
{
	const char *id;
	int r = id_opts(argc, argv, cmd, NULL, NULL, &id, 0);
	if (r)
		return r < 0 ? 0 : r;
	struct rung_err err = {0};
	return oci_pause(g->root, id, on, &err) < 0 ? fail(g, &err) : 0;
}

static int cmd_pause(const struct globals *g, int argc, char **argv)
{
	return freeze_cmd(g, argc, argv, "pause", true);
}

static int cmd_resume(const struct globals *g, int argc, char **argv)
{
	return freeze_cmd(g, argc, argv, "resume", false);
}

static int cmd_events(const struct globals *g, int argc, char **argv)
{
	static const struct option opts[] = {{"stats", no_argument, 0, 's'},
					     {"interval", required_argument, 0, 'i'},
					     {"help", no_argument, 0, 'h'},
					     {0, 0, 0, 0}};
	bool stats = false;
	int64_t interval = 5000;
	const char *id;
	int c;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		if (c == 'h')
			return help("events");
		if (c == 's')
			stats = true;
		else if (c == 'i' && (interval = oci_duration_ms(optarg)) <= 0)
			return usage_error("events", interval == 0 ? "duration interval must be "
					   "greater than 0" : "--interval: not a duration (5s, 250ms)");
		else if (c != 'i')
			return usage_error("events", "unknown option");
	}
	int r = want_id(argc, argv, "events", &id, 0);
	if (r)
		return r;
	struct rung_err err = {0};
	if (stats)
		return oci_events_stats(g->root, id, &err) < 0 ? fail(g, &err) : 0;
	signal(SIGPIPE, SIG_IGN); /* a reader gone ends the stream (EPIPE), not us */
	return oci_events_stream(g->root, id, (uint64_t)interval, &err) < 0 ? fail(g, &err) : 0;
}

/* "64m", "1g", "4096": bytes, or -1 when not a size. */
static long long size_parse(const char *s)
{
	char *end;
	long long v = strtoll(s, &end, 10);
	if (end == s || v < -1)
		return -2;
	static const char units[] = "kmg";
	const char *u = *end ? strchr(units, *end | 0x20) : NULL;
	if (u)
		for (long i = 0; i <= u - units; i++)
			v *= 1024;
	return (*end && (!u || (end[1] && (end[1] | 0x20) != 'b'))) ? -2 : v;
}

static int cmd_update(const struct globals *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{"resources", required_argument, 0, 'r'}, {"memory", required_argument, 0, 'm'},
		{"pids-limit", required_argument, 0, 'p'}, {"cpu-quota", required_argument, 0, 'q'},
		{"cpu-period", required_argument, 0, 'P'}, {"cpu-shares", required_argument, 0, 's'},
		{"help", no_argument, 0, 'h'},		   {0, 0, 0, 0},
	};
	cleanup_json json_t *res = json_object(), *cpu = json_object();
	const char *file = NULL, *id;
	int c;
	while ((c = getopt_long(argc, argv, "+r:h", opts, NULL)) != -1) {
		bool num = c == 'm' || c == 'p' || c == 'q' || c == 'P' || c == 's';
		long long v = num ? size_parse(optarg) : 0;
		if (num && (v < -1 || ((c == 's' || c == 'P') && v < 0)))
			return usage_error("update", "a flag's value is not a number");
		switch (c) {
		case 'r': file = optarg; break;
		case 'm': json_object_set_new(res, "memory", json_pack("{s:I}", "limit", v)); break;
		case 'p': json_object_set_new(res, "pids", json_pack("{s:I}", "limit", v)); break;
		case 'q': json_object_set_new(cpu, "quota", json_integer(v)); break;
		case 'P': json_object_set_new(cpu, "period", json_integer(v)); break;
		case 's': json_object_set_new(cpu, "shares", json_integer(v)); break;
		case 'h': return help("update");
		default: return usage_error("update", "unknown option");
		}
	}
	int r = want_id(argc, argv, "update", &id, 0);
	if (r)
		return r;
	struct rung_err err = {0};
	if (file) {
		json_error_t je;
		json_decref(res);
		res = strcmp(file, "-") == 0 ? json_loadf(stdin, 0, &je) : json_load_file(file, 0, &je);
		if (!res) {
			rung_err_set(&err, EINVAL, "--resources %s: line %d: %s", file, je.line,
				     je.text);
			return fail(g, &err);
		}
	} else if (json_object_size(cpu)) {
		json_object_set(res, "cpu", cpu);
	}
	return oci_update(g->root, id, res, &err) < 0 ? fail(g, &err) : 0;
}

static const struct {
	const char *name;
	int (*fn)(const struct globals *g, int argc, char **argv);
} cmds[] = {
	{"create", cmd_create}, {"start", cmd_start},	{"state", cmd_state},
	{"kill", cmd_kill},	{"delete", cmd_delete}, {"features", cmd_features},
	{"exec", cmd_exec},	{"ps", cmd_ps},		{"pause", cmd_pause},
	{"resume", cmd_resume}, {"events", cmd_events}, {"update", cmd_update},
};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"root", required_argument, 0, 'r'},	   {"log", required_argument, 0, 'l'},
		{"log-format", required_argument, 0, 'F'}, {"systemd-cgroup", no_argument, 0, 's'},
		{"debug", no_argument, 0, 'd'},		   {"help", no_argument, 0, 'h'},
		{"version", no_argument, 0, 'v'},	   {"isolation", required_argument, 0, 'i'},
		{0, 0, 0, 0},
	};
	struct globals g = {.root = "/run/rung-oci", .log_format = "text",
			    .vm = oci_rung_from_argv0(argv[0])};
	bool systemd = false;
	int c;
	while ((c = getopt_long(argc, argv, "+hv", opts, NULL)) != -1) {
		switch (c) {
		case 'r': g.root = optarg; break;
		case 'l': g.log = optarg; break;
		case 'F':
			if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
				return usage_error("--log-format", "must be text or json");
			g.log_format = optarg;
			break;
		case 's': systemd = true; break;
		case 'd': break;
		case 'i':
			if (oci_rung_parse(optarg, &g.vm) < 0)
				return usage_error("--isolation", "must be container or vm");
			break;
		case 'h': return help(NULL);
		case 'v': printf("rung-oci version 0.1\nspec: %s\n", OCI_VERSION); return 0;
		default: return usage_error("", "unknown global option");
		}
	}
	if (optind >= argc)
		return help(NULL), 1;
	if (systemd) {
		log_error(&g, "--systemd-cgroup is refused: rung-oci manages cgroupfs paths only "
			      "(set SystemdCgroup = false for this runtime in containerd)");
		return 1;
	}
	/* the vm rung's router (its RUNG_* knobs, docs/configuration.md): read here, used there */
	static struct rung_router_opts ro;
	static struct rung_err re;
	if (rung_router_opts_load(&ro, getenv, &re) < 0)
		oci_vm_router_opts(NULL, re.msg);
	else
		oci_vm_router_opts(&ro, NULL);
	const char *cmd = argv[optind];
	argc -= optind;
	argv += optind;
	optind = 1;
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(cmd, cmds[i].name) == 0)
			return cmds[i].fn(&g, argc, argv);
	usage_error(cmd, "unknown command");
	return 3; /* as runc (urfave/cli's "no help topic") */
}
