/* tests/lib/container.c: fixtures for the container suites (no suite of its own). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/util.h"
#include "rootfs/rfs.h"
#include "cgroup/cgroup.h"
#include "tests/lib/container.h"
#include "tests/lib/rootfs.h"
#include "tests/lib/testutil.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* test-only state: set by the unchecked setup in the runner, before the tests fork */
static char tmp_dir[4096], state_dir[4096];

const char *ct_tmp(void) { return tmp_dir; }

const char *ct_state(void) { return state_dir; }

bool ct_skip_reason(char *why, size_t n)
{
	enum rt_cgroup_version v;
	bool hybrid;
	if (geteuid() != 0)
		snprintf(why, n, "needs root (CI runs as root)");
	else if (access("/bin/busybox", X_OK) < 0)
		snprintf(why, n, "no /bin/busybox to build the test image (busybox-static)");
	else if (rt_cgroup_detect(CT_CG, &v, &hybrid, NULL) < 0)
		snprintf(why, n, "no cgroup controllers at " CT_CG);
	else if (!state_dir[0])
		snprintf(why, n, "the fixture made no store");
	else
		return false;
	return true;
}

/* A second layer: the applets the suites use, and a file owned by image uid 1000. */
static void applets_tar(const char *path)
{
	static const char *const applets[] = {
	    "sleep",  "yes",	  "dd",	  "head",  "tail",  "mkdir",	"rm",	 "ps",
	    "wc",     "tr",	  "grep", "seq",   "env",   "sed",	"touch", "cut",
	    "setsid", "kill",	  "stat", "test",  "[",	    "printf",	"cp",	 "mv",
	    "uname",  "hostname", "pwd",  "chmod", "ln",    "readlink", "nproc", "sort",
	    "find",   "mount",	  "df",	  "du",	   "xargs", "md5sum",	"sync",	 "timeout"};
	struct archive *a = tb_open(path);
	for (size_t i = 0; i < sizeof(applets) / sizeof(applets[0]); i++) {
		char n[64];
		snprintf(n, sizeof(n), "bin/%s", applets[i]);
		tb_symlink(a, n, "busybox");
	}
	tb_file(a, "etc/group", "root:x:0:\nuser:x:1000:\n", 0644);
	tb_dir(a, "home/", 0755);
	tb_file_owned(a, "home/owned-by-1000", "mine\n", 0644, 1000, 1000);
	tb_file(a, "etc/image-release", "ct-busybox 1\n", 0644);
	tb_close(a);
}

void ct_setup(void)
{
	tmp_dir[0] = state_dir[0] = '\0';
	if (geteuid() != 0 || access("/bin/busybox", X_OK) < 0)
		return;
	char *t = rung_test_tmpdir("ctr");
	if (!t)
		return;
	snprintf(tmp_dir, sizeof(tmp_dir), "%s", t);
	free(t);
	char base[4200], top[4200], layout[4200];
	snprintf(state_dir, sizeof(state_dir), "%s/state", tmp_dir);
	snprintf(base, sizeof(base), "%s/base.tar", tmp_dir);
	snprintf(top, sizeof(top), "%s/applets.tar", tmp_dir);
	snprintf(layout, sizeof(layout), "%s/layout", tmp_dir);
	tb_busybox_tar(base);
	applets_tar(top);
	const char *const layers[] = {base, top, NULL};
	const char *const env[] = {"PATH=/bin", "CT_GREETING=from-image", NULL};
	const char *const cmd[] = {"/bin/sh", NULL};
	struct rfs_layout_opts o = {.layer_tars = layers,
				    .compress = RFS_COMPRESS_GZIP,
				    .tag = CT_IMAGE,
				    .env = env,
				    .cmd = cmd,
				    .working_dir = "/work"};
	struct rung_err err = {0};
	struct rfs_store *st = NULL;
	struct rfs_image_info info = {0};
	if (rfs_layout_write(layout, &o, &err) < 0 || rfs_store_open(state_dir, &st, &err) < 0 ||
	    rfs_image_import(st, layout, CT_IMAGE, NULL, NULL, &info, &err) < 0) {
		fprintf(stderr, "container fixture: test image: %s\n", err.msg);
		state_dir[0] = '\0';
	}
	rfs_image_info_release(&info);
	rfs_store_free(st);
}

void ct_teardown(void)
{
	if (!tmp_dir[0])
		return;
	struct rung_err err = {0};
	struct rung_router *r = state_dir[0] ? ct_router(NULL) : NULL;
	struct rung_sandbox_info *v = NULL;
	size_t n = 0;
	if (r && rung_list(r, NULL, NULL, &v, &n, &err) == 0) {
		for (size_t i = 0; i < n; i++)
			if (rung_dispose(r, v[i].id, NULL, &err) < 0)
				fprintf(stderr, "container fixture: dispose %s: %s\n", v[i].id,
					err.msg);
		free(v);
	}
	struct rung_gc_report rep;
	if (r)
		rung_gc(r, &rep, &err);
	rung_router_free(r);
	if (rung_rm_rf(tmp_dir, &err) < 0)
		fprintf(stderr, "container fixture: remove %s: %s\n", tmp_dir, err.msg);
	tmp_dir[0] = state_dir[0] = '\0';
}

struct rung_router *ct_router(const char *state)
{
	return ct_router_with(NULL, state);
}

struct rung_router *ct_router_with(const struct rung_router_opts *host, const char *state)
{
	char rel[2048], agent[4096];
	snprintf(rel, sizeof(rel), "%s/rung-agent", rung_test_build_dir());
	char *abs = realpath(rel, NULL); /* a relative build dir works too */
	ck_assert_msg(abs != NULL, "%s: %s", rel, strerror(errno));
	snprintf(agent, sizeof(agent), "%s", abs);
	free(abs);
	struct rung_router_opts o = host ? *host : (struct rung_router_opts){0};
	o.state_dir = state ? state : state_dir;
	o.agent_path = agent;
	rung_test_router_env(&o);
	struct rung_router *r = NULL;
	struct rung_err err = {0};
	int rc = rung_router_new(&o, &r, &err);
	ck_assert_msg(rc == 0, "router: %s", err.msg);
	return r;
}

void ct_spec(struct rung_spec *s, const char *image)
{
	rung_spec_init(s);
	s->kind = strdup("ct");
	s->image = strdup(image ? image : CT_IMAGE);
	s->isolation = RUNG_ISO_CONTAINER;
	s->requires = RUNG_CAP_EXEC | RUNG_CAP_FS_PERSIST;
	s->ttl_s = 600;
}

struct rung_sandbox *ct_acquire(struct rung_router *r, const char *scope, const char *agent,
				const struct rung_spec *s, bool *created)
{
	struct rung_key k = {.scope = scope, .thread = "t", .agent = agent};
	struct rung_sandbox *sb = NULL;
	struct rung_err err = {0};
	bool c = false;
	int rc = rung_acquire(r, &k, s, &sb, &c, &err);
	ck_assert_msg(rc == 0, "acquire %s/%s: %s", scope, agent, err.msg);
	ck_assert_int_eq(rung_sandbox_isolation(sb), RUNG_ISO_CONTAINER);
	if (created)
		*created = c;
	return sb;
}

void ct_exec(struct rung_sandbox *sb, const char *const *argv, uint32_t timeout_ms,
	     struct rung_exec_res *res)
{
	struct rung_exec_req q = {.argv = argv, .timeout_ms = timeout_ms};
	struct rung_err err = {0};
	int rc = rung_exec(sb, &q, res, &err);
	ck_assert_msg(rc == 0, "exec %s: %s", argv[0], err.msg);
}

char *ct_sh(struct rung_sandbox *sb, const char *script)
{
	const char *const argv[] = {"sh", "-c", script, NULL};
	struct rung_exec_res res;
	ct_exec(sb, argv, 30000, &res);
	ck_assert_msg(res.exit_code == 0, "`%s`: exit %d signal %d: %s", script, res.exit_code,
		      res.signal, res.errout ? res.errout : "");
	char *out = res.out;
	res.out = NULL;
	rung_exec_res_release(&res);
	return out ? out : strdup("");
}

static bool cg_is_v2(void)
{
	struct statfs sf;
	return statfs(CT_CG, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
}

/* The runtime names a sandbox's cgroup rung-<store>/<id>, <store> being the first 16 hex
 * of SHA-256("<st_dev>:<st_ino>") of the state dir (runtime/backend-container.c). */
void ct_store_tag(const char *state, char tag[17])
{
	struct stat st;
	ck_assert_msg(stat(state, &st) == 0, "stat %s: %s", state, strerror(errno));
	char key[64], hex[65];
	snprintf(key, sizeof(key), "%lx:%lx", (unsigned long)st.st_dev, (unsigned long)st.st_ino);
	rung_sha256_hex(key, strlen(key), hex);
	memcpy(tag, hex, 16);
	tag[16] = '\0';
}

void ct_cg_path(const char *ctl, const char *id, const char *file, char *buf, size_t n)
{
	char tag[17];
	ct_store_tag(ct_state(), tag);
	if (cg_is_v2())
		snprintf(buf, n, CT_CG "/rung-%s/%s%s%s", tag, id, file ? "/" : "",
			 file ? file : "");
	else
		snprintf(buf, n, CT_CG "/%s/rung-%s/%s%s%s", ctl, tag, id, file ? "/" : "",
			 file ? file : "");
}

/* dir/rung-<any>/id exists */
static bool under_any(const char *dir, const char *id)
{
	DIR *d = opendir(dir);
	if (!d)
		return false;
	struct dirent *de;
	bool found = false;
	while (!found && (de = readdir(d))) {
		char p[4096];
		if (strncmp(de->d_name, "rung-", 5))
			continue;
		snprintf(p, sizeof(p), "%s/%s/%s", dir, de->d_name, id);
		found = access(p, F_OK) == 0;
	}
	closedir(d);
	return found;
}

bool ct_cg_exists_any(const char *id)
{
	if (cg_is_v2())
		return under_any(CT_CG, id);
	DIR *d = opendir(CT_CG);
	if (!d)
		return false;
	struct dirent *de;
	bool found = false;
	while (!found && (de = readdir(d))) {
		char p[4096];
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), CT_CG "/%s", de->d_name);
		found = under_any(p, id);
	}
	closedir(d);
	return found;
}

uint64_t ct_cg_u64(const char *ctl, const char *id, const char *file, const char *key)
{
	char p[4096];
	ct_cg_path(ctl, id, file, p, sizeof(p));
	FILE *f = fopen(p, "r");
	ck_assert_msg(f != NULL, "open %s: %s", p, strerror(errno));
	char line[512];
	uint64_t v = 0;
	bool got = false;
	size_t kl = key ? strlen(key) : 0;
	while (!got && fgets(line, sizeof(line), f)) {
		if (!key)
			got = sscanf(line, "%lu", &v) == 1;
		else if (!strncmp(line, key, kl) && line[kl] == ' ')
			got = sscanf(line + kl + 1, "%lu", &v) == 1;
	}
	fclose(f);
	ck_assert_msg(got, "%s: no %s", p, key ? key : "number");
	return v;
}

int ct_cg_nprocs(const char *id)
{
	char p[4096];
	ct_cg_path("pids", id, "cgroup.procs", p, sizeof(p));
	return ct_count_lines(p, NULL);
}

uint64_t ct_oom_kills(const char *id)
{
	return cg_is_v2() ? ct_cg_u64("", id, "memory.events", "oom_kill")
			  : ct_cg_u64("memory", id, "memory.oom_control", "oom_kill");
}

uint64_t ct_mem_peak(const char *id)
{
	return cg_is_v2() ? ct_cg_u64("", id, "memory.peak", NULL)
			  : ct_cg_u64("memory", id, "memory.max_usage_in_bytes", NULL);
}

uint64_t ct_cpu_usage_us(const char *id)
{
	return cg_is_v2() ? ct_cg_u64("", id, "cpu.stat", "usage_usec")
			  : ct_cg_u64("cpuacct", id, "cpuacct.usage", NULL) / 1000;
}

uint64_t ct_cpu_throttled(const char *id)
{
	return ct_cg_u64("cpu", id, "cpu.stat", "nr_throttled");
}

void ct_cpu_quota(const char *id, uint64_t *quota_us, uint64_t *period_us)
{
	if (!cg_is_v2()) {
		*quota_us = ct_cg_u64("cpu", id, "cpu.cfs_quota_us", NULL);
		*period_us = ct_cg_u64("cpu", id, "cpu.cfs_period_us", NULL);
		return;
	}
	char p[4096];
	ct_cg_path("", id, "cpu.max", p, sizeof(p));
	FILE *f = fopen(p, "r");
	ck_assert_msg(f != NULL, "open %s: %s", p, strerror(errno));
	unsigned long q = 0, per = 0;
	int n = fscanf(f, "%lu %lu", &q, &per);
	fclose(f);
	ck_assert_msg(n == 2, "%s: no quota (\"max\"?)", p);
	*quota_us = q;
	*period_us = per;
}

bool ct_frozen(const char *id)
{
	if (cg_is_v2())
		return ct_cg_u64("", id, "cgroup.events", "frozen") == 1;
	char p[4096], st[64] = "";
	ct_cg_path("freezer", id, "freezer.state", p, sizeof(p));
	FILE *f = fopen(p, "r");
	ck_assert_msg(f != NULL, "open %s: %s", p, strerror(errno));
	bool ok = fgets(st, sizeof(st), f) != NULL;
	fclose(f);
	return ok && !strcmp(st, "FROZEN\n");
}

int ct_count_lines(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char *line = NULL;
	size_t cap = 0;
	int n = 0;
	while (getline(&line, &cap, f) > 0)
		if (!needle || strstr(line, needle))
			n++;
	free(line);
	fclose(f);
	return n;
}

int ct_count_dir(const char *path)
{
	int n = tb_count_dir(path);
	return n < 0 ? 0 : n;
}

int ct_count_leases(const char *state)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/images/leases", state);
	DIR *d = opendir(p);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char q[4400];
		snprintf(q, sizeof(q), "%s/%s", p, de->d_name);
		n += ct_count_dir(q);
	}
	closedir(d);
	return n;
}

struct proc_ent {
	pid_t pid, ppid;
	bool sup;
};

int ct_count_store_procs(const char *state)
{
	DIR *d = opendir("/proc");
	ck_assert_ptr_nonnull(d);
	struct proc_ent *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char p[300], buf[4096];
		snprintf(p, sizeof(p), "/proc/%s/stat", de->d_name);
		FILE *f = fopen(p, "r");
		if (!f)
			continue;
		size_t len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = '\0';
		char *rp = strrchr(buf, ')');
		int ppid = 0;
		if (!rp || sscanf(rp + 2, "%*c %d", &ppid) != 1)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			v = realloc(v, cap * sizeof(*v));
			ck_assert_ptr_nonnull(v);
		}
		v[n] = (struct proc_ent){.pid = atoi(de->d_name), .ppid = ppid};
		snprintf(p, sizeof(p), "/proc/%s/fd/2", de->d_name);
		ssize_t l = readlink(p, buf, sizeof(buf) - 1);
		if (l > 0) {
			buf[l] = '\0';
			v[n].sup = !strncmp(buf, state, strlen(state));
		}
		n++;
	}
	closedir(d);
	int count = 0;
	for (size_t i = 0; i < n; i++) {
		pid_t p = v[i].pid;
		for (int depth = 0; p > 1 && depth < 64; depth++) {
			size_t j;
			for (j = 0; j < n && v[j].pid != p; j++)
				;
			if (j == n)
				break;
			if (v[j].sup) {
				count++;
				break;
			}
			p = v[j].ppid;
		}
	}
	free(v);
	return count;
}

void ct_kill_reaped(pid_t pid)
{
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d", (int)pid);
	for (int i = 0; i < 250 && access(p, F_OK) == 0; i++)
		usleep(20000);
}

void ct_add(Suite *s, const char *name, const TTest *t, int timeout_s)
{
	TCase *tc = tcase_create(name);
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, timeout_s);
	tcase_add_unchecked_fixture(tc, ct_setup, ct_teardown);
	tcase_add_test(tc, t);
	suite_add_tcase(s, tc);
}

/* debugfs -R CMD IMG (read-only): its stdout (malloc'd), or NULL. */
char *ct_debugfs(const char *img, const char *cmd)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 2);
		execl("/sbin/debugfs", "debugfs", "-R", cmd, img, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char *out = NULL;
	size_t len;
	struct rung_err err = {0};
	rung_read_fd_all(p[0], 1 << 20, &out, &len, &err);
	close(p[0]);
	waitpid(pid, NULL, 0);
	return out;
}

uint64_t ct_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}
