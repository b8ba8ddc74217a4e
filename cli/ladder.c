/*
 * cli/ladder.c: `rung ladder`: the isolation ladder as evidence (docs/ladder.md). Runs
 * rung-probe's battery in each rung available here and, with --peers, under bubblewrap, crun
 * and runc; prints the probe x target table, a summary per target and the host's facts, or
 * with --json one object whose shape docs/ladder.md documents.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/ladder.h"
#include "common/err.h"

#define MAX_TARGETS 6
#define CGROUP2_MAGIC 0x63677270

struct probe_info {
	char name[64], family[32], what[160];
};

struct ladder_opts {
	const char *rungs, *image, *probe_bin, *only, *from;
	bool peers;
};

/* A stop signal (SIGINT, SIGTERM, SIGHUP): finish the probe running, then clean up and stop. */
static volatile sig_atomic_t stop_sig;
static void on_stop(int sig) { stop_sig = sig; }

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void read_line(const char *path, char *buf, size_t n, const char *dflt)
{
	FILE *f = fopen(path, "re");
	if (!f || !fgets(buf, (int)n, f))
		snprintf(buf, n, "%s", dflt);
	else
		buf[strcspn(buf, "\n")] = '\0';
	if (f)
		fclose(f);
}

static json_t *host_facts(void)
{
	struct utsname u;
	uname(&u);
	char lsm[256], userns[64], unpriv[32], seccomp[256], kvm[64] = "none (no /dev/kvm)";
	read_line("/sys/kernel/security/lsm", lsm, sizeof(lsm), "unknown (no securityfs)");
	read_line("/proc/sys/user/max_user_namespaces", userns, sizeof(userns), "unknown");
	read_line("/proc/sys/kernel/unprivileged_userns_clone", unpriv, sizeof(unpriv), "n/a");
	read_line("/proc/sys/kernel/seccomp/actions_avail", seccomp, sizeof(seccomp), "none");
	struct statfs sf;
	const char *cg = "none";
	if (statfs("/sys/fs/cgroup", &sf) == 0)
		cg = sf.f_type == CGROUP2_MAGIC			   ? "v2"
		     : access("/sys/fs/cgroup/unified", F_OK) == 0 ? "hybrid (v1, v2 at unified)"
								   : "v1";
	if (access("/dev/kvm", F_OK) == 0) {
		const char *k = access("/sys/module/kvm_intel", F_OK) == 0 ? "kvm_intel"
				: access("/sys/module/kvm_amd", F_OK) == 0 ? "kvm_amd"
				: access("/sys/module/kvm_pvm", F_OK) == 0 ? "kvm_pvm (no VMX/SVM)"
									   : "unknown";
		snprintf(kvm, sizeof(kvm), "%s", k);
	}
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "kernel", u.release, "kernel_version",
			 u.version, "cgroup", cg, "lsm", lsm, "max_user_namespaces", userns,
			 "unprivileged_userns_clone", unpriv, "kvm", kvm, "seccomp_actions",
			 seccomp);
}

/* The battery's names, from `rung-probe --list` (safe anywhere: it runs no probe). */
static int list_probes(const char *bin, const char *only, struct probe_info **out, size_t *n,
		       struct rung_err *err)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "%s", bin);
	int p[2];
	if (pipe(p) < 0)
		return rung_err_sys(err, errno, "pipe");
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		char *argv[] = {cmd, "--list", NULL}, *envp[] = {NULL};
		execve(cmd, argv, envp);
		_exit(127);
	}
	close(p[1]);
	FILE *f = fdopen(p[0], "r");
	char line[512];
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	while (f && fgets(line, sizeof(line), f)) {
		struct probe_info pi = {0};
		if (sscanf(line, "%63[^\t]\t%31[^\t]\t%159[^\n]", pi.name, pi.family, pi.what) < 2)
			continue;
		if (only) {
			char pat[80], list[4096];
			snprintf(pat, sizeof(pat), ",%s,", pi.name);
			snprintf(list, sizeof(list), ",%s,", only);
			if (!strstr(list, pat))
				continue;
		}
		if (*n == cap)
			*out = realloc(*out, (cap = cap ? 2 * cap : 64) * sizeof(**out));
		(*out)[(*n)++] = pi;
	}
	if (f)
		fclose(f);
	waitpid(pid, NULL, 0);
	if (!*n)
		return rung_err_set(err, ENOENT, "%s --list: no probes%s", bin,
				    only ? " match --probes" : "");
	return 0;
}

/* One probe's JSON line into {result, errno, evidence}, checked against the host. */
json_t *ladder_result(struct ladder_env *e, const char *probe, const char *out, int rc,
		      const struct rung_err *err)
{
	const char *line = out ? strrchr(out, '{') : NULL;
	json_t *j = line ? json_loads(line, 0, NULL) : NULL;
	char result[16] = "n/a", evidence[800];
	const char *eno = NULL;
	if (!j) {
		snprintf(evidence, sizeof(evidence), "no result: %s",
			 rc < 0 || err->msg[0] ? err->msg : "the probe printed nothing");
	} else {
		snprintf(result, sizeof(result), "%s",
			 json_string_value(json_object_get(j, "result")) ?: "n/a");
		snprintf(evidence, sizeof(evidence), "%s",
			 json_string_value(json_object_get(j, "evidence")) ?: "");
		eno = json_string_value(json_object_get(j, "errno"));
	}
	ladder_env_verify(e, probe, result, sizeof(result), evidence, sizeof(evidence));
	json_t *r =
	    json_pack("{s:s,s:s?,s:s}", "result", result, "errno", eno, "evidence", evidence);
	json_decref(j);
	return r;
}

/* rung-probe --count in the target: {"reachable": N, "of": M}, or an empty object. */
static json_t *count_syscalls(struct cli *c, struct ladder_target *t, struct ladder_env *e)
{
	char *out = NULL;
	struct rung_err err = {0};
	json_t *j = NULL;
	if (ladder_target_run(c, t, e, "--count", &out, &err) >= 0 && out && strchr(out, '{'))
		j = json_loads(strrchr(out, '{'), 0, NULL);
	free(out);
	return j ? j : json_object();
}

static json_t *run_target(struct cli *c, struct ladder_target *t, struct ladder_env *e,
			  const struct ladder_opts *o, const struct probe_info *p, size_t n,
			  size_t *done, size_t total)
{
	double t0 = now_s();
	json_t *tj = json_pack("{s:s,s:s}", "name", t->name, "kind", t->peer ? "peer" : "rung");
	if (ladder_target_open(c, t, e, o->probe_bin, o->image) < 0) {
		ladder_target_close(c, t, e);
		json_object_set_new(tj, "available", json_false());
		json_object_set_new(tj, "why", json_string(t->why));
		*done += n;
		return tj;
	}
	json_t *res = json_object();
	size_t blocked = 0, escaped = 0, na = 0;
	bool tty = !c->json && isatty(2);
	for (size_t i = 0; i < n && !stop_sig; i++) {
		if (tty)
			fprintf(stderr, "\r\033[K[%zu/%zu] %s: %s", ++*done, total, t->name,
				p[i].name);
		ladder_env_reset(e);
		char *out = NULL;
		struct rung_err err = {0};
		int rc = ladder_target_run(c, t, e, p[i].name, &out, &err);
		if (rc < 0 && !t->peer && !stop_sig) {
			/* the sandbox died (a resource probe's OOM kill took its agent): a fresh
			 * one for the rest, and this probe once more */
			ladder_target_close(c, t, e);
			if (ladder_target_open(c, t, e, o->probe_bin, o->image) < 0)
				snprintf(err.msg, sizeof(err.msg), "%s", t->why);
			else
				rc = ladder_target_run(c, t, e, p[i].name, &out, &err);
		}
		ladder_target_fileapi(t, e, p[i].name, &out);
		ladder_target_vmm(t, p[i].name, &out);
		json_t *r = ladder_result(e, p[i].name, out, rc, &err);
		free(out);
		const char *s = json_string_value(json_object_get(r, "result"));
		blocked += !strcmp(s, "blocked");
		escaped += !strcmp(s, "escaped");
		na += !strcmp(s, "n/a");
		json_object_set_new(res, p[i].name, r);
	}
	if (tty)
		fprintf(stderr, "\r\033[K");
	json_t *count = count_syscalls(c, t, e);
	ladder_target_close(c, t, e);
	json_t *sk = json_object_get(json_object_get(res, "vm.shared_kernel"), "result");
	json_object_set_new(tj, "available", json_true());
	json_object_set_new(
	    tj, "summary",
	    json_pack("{s:I,s:I,s:I,s:I,s:o,s:o,s:o,s:f}", "blocked", (json_int_t)blocked,
		      "escaped", (json_int_t)escaped, "na", (json_int_t)na, "total", (json_int_t)n,
		      "reachable_syscalls",
		      json_incref(json_object_get(count, "reachable")) ?: json_null(),
		      "syscalls_tried", json_incref(json_object_get(count, "of")) ?: json_null(),
		      "shared_kernel",
		      sk ? json_boolean(!strcmp(json_string_value(sk), "escaped")) : json_null(),
		      "seconds", now_s() - t0));
	json_object_set_new(tj, "results", res);
	json_decref(count);
	return tj;
}

static void print_table(json_t *doc)
{
	json_t *targets = json_object_get(doc, "targets"), *t, *h = json_object_get(doc, "host");
	size_t i;
	const char *k;
	json_t *v;
	printf("host:\n");
	json_object_foreach(h, k, v) printf("  %-26s %s\n", k, json_string_value(v));
	printf("\n%-30s", "probe");
	json_array_foreach(targets, i, t)
	    printf(" %-10s", json_string_value(json_object_get(t, "name")));
	printf("\n");
	size_t j;
	json_t *pj;
	json_array_foreach(json_object_get(doc, "probes"), j, pj)
	{
		const char *name = json_string_value(json_object_get(pj, "name"));
		printf("%-30s", name);
		json_array_foreach(targets, i, t)
		{
			json_t *r = json_object_get(json_object_get(t, "results"), name);
			const char *s = r ? json_string_value(json_object_get(r, "result")) : "-";
			printf(" %-10s", !strcmp(s, "escaped") ? "ESCAPED" : s);
		}
		printf("\n");
	}
	printf("\nsummary:\n");
	json_array_foreach(targets, i, t)
	{
		json_t *s = json_object_get(t, "summary");
		const char *name = json_string_value(json_object_get(t, "name"));
		if (!json_is_true(json_object_get(t, "available"))) {
			printf("  %-10s not run: %s\n", name,
			       json_string_value(json_object_get(t, "why")));
			continue;
		}
		json_t *sk = json_object_get(s, "shared_kernel");
		json_t *rs = json_object_get(s, "reachable_syscalls");
		char reach[48] = "unknown";
		if (json_is_integer(rs))
			snprintf(reach, sizeof(reach), "%lld of %lld", json_integer_value(rs),
				 json_integer_value(json_object_get(s, "syscalls_tried")));
		printf("  %-10s blocked %lld/%lld, escaped %lld, n/a %lld; reachable syscalls %s; "
		       "shared kernel: %s; %.1f s\n",
		       name, json_integer_value(json_object_get(s, "blocked")),
		       json_integer_value(json_object_get(s, "total")),
		       json_integer_value(json_object_get(s, "escaped")),
		       json_integer_value(json_object_get(s, "na")), reach,
		       json_is_null(sk)	  ? "unknown"
		       : json_is_true(sk) ? "yes"
					  : "no",
		       json_real_value(json_object_get(s, "seconds")));
	}
}

static int parse(int argc, char **argv, struct ladder_opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char **dst = !strcmp(argv[i], "--rungs")	  ? &o->rungs
				   : !strcmp(argv[i], "--image")  ? &o->image
				   : !strcmp(argv[i], "--probe")  ? &o->probe_bin
				   : !strcmp(argv[i], "--probes") ? &o->only
				   : !strcmp(argv[i], "--from")	  ? &o->from
								  : NULL;
		if (dst && i + 1 < argc) {
			*dst = argv[++i];
			continue;
		}
		if (!strcmp(argv[i], "--peers")) {
			o->peers = true;
			continue;
		}
		return cli_usage_error("ladder", "unknown argument '%s'", argv[i]);
	}
	return 0;
}

/* rung-probe beside the running rung (build/ or the install's libexec dir). */
static void default_probe(char *buf, size_t n)
{
	char self[1024];
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[k > 0 ? k : 0] = '\0';
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	snprintf(buf, n, "%s/rung-probe", self);
	if (access(buf, X_OK) < 0 && slash) {
		snprintf(buf, n, "%s/../libexec/rung/rung-probe", self);
	}
}

/* The whole battery's result for the deployed policy and inspect (rung_ladder_cache_save);
 * a --probes subset is not evidence enough and is not saved. */
static void save(struct cli *c, json_t *doc, const struct ladder_opts *o)
{
	if (o->only || !cli_router(c))
		return;
	char *s = json_dumps(doc, 0);
	struct rung_err err = {0};
	if (s && rung_ladder_cache_save(c->router, s, &err) < 0)
		fprintf(stderr, "rung ladder: %s\n", err.msg);
	free(s);
}

int cli_cmd_ladder(struct cli *c, int argc, char **argv)
{
	struct ladder_opts o = {.rungs = "process,container,vm", .image = "rung/busybox:latest"};
	int st = parse(argc, argv, &o);
	if (st)
		return st;
	if (o.from) { /* a saved --json result, printed as the table: runs nothing */
		json_error_t je;
		json_t *doc = json_load_file(o.from, 0, &je);
		if (!doc || !json_is_array(json_object_get(doc, "targets"))) {
			fprintf(stderr, "rung ladder: --from %s: %s\n", o.from,
				doc ? "no \"targets\" array: not a rung ladder --json result"
				    : je.text);
			json_decref(doc);
			return 1;
		}
		print_table(doc);
		json_decref(doc);
		return 0;
	}
	if (c->remote || !c->root) {
		fprintf(stderr, "rung ladder: needs root on this host (it makes sandboxes with the "
				"library and plants its listeners and markers itself)\n");
		return 1;
	}
	char pbin[1200];
	if (!o.probe_bin) {
		default_probe(pbin, sizeof(pbin));
		o.probe_bin = pbin;
	}
	struct rung_err err = {0};
	struct probe_info *p = NULL;
	size_t n = 0;
	if (list_probes(o.probe_bin, o.only, &p, &n, &err) < 0)
		return cli_fail(c, &err);
	struct ladder_target ts[MAX_TARGETS];
	size_t nt = 0;
	memset(ts, 0, sizeof(ts));
	char rungs[256];
	snprintf(rungs, sizeof(rungs), "%s", o.rungs);
	for (char *r = strtok(rungs, ","); r && nt < 3; r = strtok(NULL, ",")) {
		if (strcmp(r, "process") && strcmp(r, "container") && strcmp(r, "vm")) {
			free(p);
			return cli_usage_error("ladder", "--rungs: unknown rung '%s'", r);
		}
		ts[nt++].name = !strcmp(r, "process") ? "process"
				: !strcmp(r, "vm")    ? "vm"
						      : "container";
	}
	static const char *const peers[] = {"bwrap", "crun", "runc"};
	for (size_t i = 0; o.peers && i < 3; i++) {
		ts[nt].name = peers[i];
		ts[nt++].peer = true;
	}
	struct ladder_env e;
	double t0 = now_s();
	if (ladder_env_setup(&e, c->state_dir ? c->state_dir : c->host.state_dir ?: "/var/lib/rung",
			     &err) < 0) {
		ladder_env_teardown(&e);
		free(p);
		return cli_fail(c, &err);
	}
	json_t *doc = json_pack("{s:i,s:s,s:o,s:[],s:[]}", "version", 1, "rung", RUNG_VERSION,
				"host", host_facts(), "probes", "targets");
	for (size_t i = 0; i < n; i++)
		json_array_append_new(json_object_get(doc, "probes"),
				      json_pack("{s:s,s:s,s:s}", "name", p[i].name, "family",
						p[i].family, "what", p[i].what));
	size_t done = 0;
	struct sigaction sa = {.sa_handler = on_stop}, old[3];
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, &old[i]);
	for (size_t i = 0; i < nt && !stop_sig; i++)
		json_array_append_new(json_object_get(doc, "targets"),
				      run_target(c, &ts[i], &e, &o, p, n, &done, n * nt));
	ladder_env_teardown(&e);
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	if (stop_sig) { /* everything planted is gone; a partial run is neither saved nor printed */
		fprintf(stderr, "\nrung ladder: stopped by signal %d; cleaned up\n", (int)stop_sig);
		json_decref(doc);
		free(p);
		return 128 + stop_sig;
	}
	json_object_set_new(doc, "seconds", json_real(now_s() - t0));
	save(c, doc, &o);
	if (c->json) {
		char *s = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
		printf("%s\n", s);
		free(s);
	} else {
		print_table(doc);
		printf("\nladder: %.1f s in all\n",
		       json_real_value(json_object_get(doc, "seconds")));
	}
	json_decref(doc);
	free(p);
	return 0;
}
