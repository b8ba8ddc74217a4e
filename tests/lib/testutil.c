#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <libgen.h>
#include <sched.h>
#include <spawn.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "rung/rung.h"
#include "tests/lib/testutil.h"

void rung_test_skip(const char *test, const char *why)
{
	fprintf(stderr, "\n*** SKIP %s: %s ***\n", test, why);
	char path[4096];
	snprintf(path, sizeof(path), "%s/skips.log", rung_test_build_dir());
	FILE *f = fopen(path, "a");
	if (f) {
		fprintf(f, "%s: %s\n", test, why);
		fclose(f);
	}
}

const char *rung_test_build_dir(void)
{
	const char *b = getenv("RUNG_BUILD_DIR");
	return b && *b ? b : "build";
}

void rung_test_router_env(struct rung_router_opts *o)
{
	struct rung_router_opts e = {0};
	struct rung_err err = {0};
	ck_assert_msg(rung_router_opts_load(&e, getenv, &err) == 0, "%s", err.msg);
	/* what the test set itself wins; the tests give their own stores (no RUNG_STATE_DIR) */
#define UNSET_TAKES(f) o->f = o->f ? o->f : e.f
	UNSET_TAKES(agent_path);
	UNSET_TAKES(vmm_path);
	UNSET_TAKES(rung_path);
	UNSET_TAKES(vm_kernel);
	UNSET_TAKES(vm_initrd);
	UNSET_TAKES(vm_boot_timeout_ms);
	UNSET_TAKES(cgroup_root);
	UNSET_TAKES(loop_control);
	UNSET_TAKES(uid_registry);
	UNSET_TAKES(net_pool);
	UNSET_TAKES(dns_upstream);
	UNSET_TAKES(no_clone_into_cgroup);
#undef UNSET_TAKES
}

char rung_test_tmpdirs_list[64];

char *rung_test_tmpdir(const char *tag)
{
	char *p;
	if (asprintf(&p, "/tmp/rung-test-%s-XXXXXX", tag) < 0)
		return NULL;
	if (!mkdtemp(p)) {
		free(p);
		return NULL;
	}
	chmod(p, 0711);
	if (rung_test_tmpdirs_list[0]) { /* one short O_APPEND write: whole lines */
		int fd = open(rung_test_tmpdirs_list, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (fd >= 0) {
			dprintf(fd, "%s\n", p);
			close(fd);
		}
	}
	return p;
}

int rung_test_count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

int rung_test_count_fds(void)
{
	return rung_test_count_entries("/proc/self/fd") - 1; /* minus the opendir fd */
}

int rung_test_count_fds_of(pid_t pid, const char *skip, const char *prefix)
{
	char d[64], l[384], to[4096];
	snprintf(d, sizeof(d), "/proc/%d/fd", (int)pid);
	DIR *dir = opendir(d);
	if (!dir)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(l, sizeof(l), "%s/%s", d, e->d_name);
		ssize_t k = readlink(l, to, sizeof(to) - 1);
		to[k > 0 ? k : 0] = 0;
		if ((!skip || strcmp(to, skip)) && (!prefix || !strncmp(to, prefix, strlen(prefix))))
			n++;
	}
	closedir(dir);
	return n;
}

int rung_test_count_tasks(pid_t pid)
{
	char d[64];
	snprintf(d, sizeof(d), "/proc/%d/task", (int)pid);
	return rung_test_count_entries(d);
}

unsigned rung_test_pids_inflight(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

int rung_test_count_mounts(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		return -1;
	int n = 0, c;
	while ((c = fgetc(f)) != EOF)
		if (c == '\n')
			n++;
	fclose(f);
	return n;
}

int rung_test_count_procs(void)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] >= '1' && de->d_name[0] <= '9')
			n++;
	closedir(d);
	return n;
}

extern char **environ;

static int run_argv(const char *const *argv, char *out, size_t len, bool with_stderr)
{
	int p[2] = {-1, -1};
	if (out && pipe2(p, O_CLOEXEC) < 0)
		return -1;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (out)
		posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	if (out && with_stderr)
		posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (out) {
		close(p[1]);
		size_t n = 0;
		char sink[4096];
		ssize_t k = 1;
		while (rc == 0 && k > 0) {
			bool room = n + 1 < len;
			k = read(p[0], room ? out + n : sink, room ? len - 1 - n : sizeof(sink));
			if (k > 0 && room)
				n += (size_t)k;
		}
		out[len ? n : 0] = '\0';
		close(p[0]);
	}
	if (rc != 0)
		return -1;
	int st;
	while (waitpid(pid, &st, 0) < 0)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int rung_test_run(const char *const *argv, char *out, size_t len)
{
	return run_argv(argv, out, len, false);
}

int rung_test_run_all(const char *const *argv, char *out, size_t len)
{
	return run_argv(argv, out, len, true);
}

int rung_test_sh(const char *script, ...)
{
	const char *argv[32] = {"sh", "-c", script, "sh"};
	size_t n = 4;
	va_list ap;
	va_start(ap, script);
	for (const char *a; n + 1 < sizeof(argv) / sizeof(argv[0]) && (a = va_arg(ap, const char *));)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	return rung_test_run(argv, NULL, 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)ftw;
	return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

int rung_test_rmtree(const char *path)
{
	int r = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	return r < 0 && errno != ENOENT ? -1 : 0;
}

int rung_test_cgroup_debris_drop(const char *state_dir)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/sandboxes", state_dir);
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.' || strlen(e->d_name) < 16)
			continue;
		char pat[512];
		glob_t g = {0};
		snprintf(pat, sizeof(pat), "/sys/fs/cgroup/rung-*/%s", e->d_name);
		int r = glob(pat, 0, NULL, &g);
		snprintf(pat, sizeof(pat), "/sys/fs/cgroup/*/rung-*/%s", e->d_name);
		r = glob(pat, r == 0 ? GLOB_APPEND : 0, NULL, &g);
		if (g.gl_pathc) {
			/* ".../rung-<store>/<id>" in each hierarchy: destroyed as the runtime does,
			 * its processes frozen, killed and waited for first (a half-made sandbox's
			 * pid 1, under a supervisor that outlived the killed daemon, names no test
			 * path for srvt_kill_matching; the group is the store's own) */
			char parent[4096], name[4400];
			snprintf(parent, sizeof(parent), "%s", g.gl_pathv[0]);
			snprintf(name, sizeof(name), "%s/%s", basename(dirname(parent)), e->d_name);
			struct rt_cgroup *cg = NULL;
			struct rung_err err = {0};
			if (rt_cgroup_open("/sys/fs/cgroup", name, &cg, &err) < 0 ||
			    rt_cgroup_destroy(cg, &err) < 0)
				fprintf(stderr, "cgroup debris %s: %s\n", name, err.msg);
			rt_cgroup_free(cg);
			for (size_t i = 0; i < g.gl_pathc; i++)
				n += access(g.gl_pathv[i], F_OK) < 0;
			*strchr(name, '/') = '\0'; /* the store's group, once empty */
			rt_cgroup_drop_if_empty("/sys/fs/cgroup", name);
		}
		globfree(&g);
	}
	if (d)
		closedir(d);
	return n;
}

int rung_test_userns(pid_t *holder)
{
	int sync_pipe[2];
	ck_assert_int_eq(pipe2(sync_pipe, O_CLOEXEC), 0);
	pid_t kid = fork();
	ck_assert_int_ge(kid, 0);
	if (kid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test's too */
		char c = unshare(CLONE_NEWUSER) == 0 ? 'k' : 'x';
		if (write(sync_pipe[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(sync_pipe[1]);
	char c = 0, p[64];
	ck_assert_int_eq(read(sync_pipe[0], &c, 1), 1);
	close(sync_pipe[0]);
	ck_assert_int_eq(c, 'k');
	static const char *const maps[] = {"uid_map", "gid_map"};
	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "/proc/%d/%s", (int)kid, maps[i]);
		int fd = open(p, O_WRONLY | O_CLOEXEC);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(write(fd, "0 100000 65536\n", 15), 15);
		close(fd);
	}
	snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)kid);
	int ufd = open(p, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(ufd, 0);
	*holder = kid;
	return ufd;
}

size_t rung_test_cgroup_dirs(const char *id, char (*out)[4096], size_t max)
{
	static const char *const pats[] = {"/sys/fs/cgroup/rung-*/", "/sys/fs/cgroup/*/rung-*/",
					   "/sys/fs/cgroup/*/*/rung-*/"};
	size_t n = 0;
	for (size_t i = 0; i < sizeof(pats) / sizeof(pats[0]); i++) {
		char pat[300];
		glob_t g;
		snprintf(pat, sizeof(pat), "%s%s", pats[i], id);
		if (glob(pat, GLOB_ONLYDIR | GLOB_NOSORT, NULL, &g) == 0)
			for (size_t k = 0; k < g.gl_pathc; k++, n++)
				if (n < max)
					snprintf(out[n], sizeof(out[n]), "%s", g.gl_pathv[k]);
		globfree(&g);
	}
	return n;
}

/* The one directory of sandbox id's cgroup that counts its pids (v1: the pids hierarchy's;
 * v2: its only one) into dir, and its pids.current into *n; false when there is none. */
static bool pids_dir(const char *id, char dir[4096], uint64_t *n)
{
	char dirs[8][4096], p[4200], line[32];
	size_t k = rung_test_cgroup_dirs(id, dirs, 8);
	for (size_t i = 0; i < k && i < 8; i++) {
		snprintf(p, sizeof(p), "%s/pids.current", dirs[i]);
		FILE *f = fopen(p, "re");
		if (!f)
			continue;
		*n = fgets(line, sizeof(line), f) ? strtoull(line, NULL, 10) : 0;
		fclose(f);
		snprintf(dir, 4096, "%s", dirs[i]);
		return true;
	}
	return false;
}

uint64_t rung_test_cgroup_pids(const char *id)
{
	char dir[4096];
	uint64_t n;
	return pids_dir(id, dir, &n) ? n : 0;
}

void rung_test_cgroup_dump(const char *id)
{
	char dir[4096], p[4200], line[64];
	uint64_t n;
	if (!pids_dir(id, dir, &n))
		return;
	fprintf(stderr, "cgroup %s: pids.current %llu\n", dir, (unsigned long long)n);
	/* a zombie counts until its parent reaps it, but is listed no more */
	snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	FILE *f = fopen(p, "re");
	while (f && fgets(line, sizeof(line), f)) {
		char sp[64], st[512] = "";
		snprintf(sp, sizeof(sp), "/proc/%d/stat", atoi(line));
		int fd = open(sp, O_RDONLY | O_CLOEXEC);
		ssize_t k = fd < 0 ? -1 : read(fd, st, sizeof(st) - 1);
		if (fd >= 0)
			close(fd);
		st[k > 0 ? k : 0] = '\0';
		char *end = strrchr(st, ')'); /* pid (comm) state ppid */
		if (end && strlen(end) > 4) /* ") S ppid ...": cut after ppid */
			end[4 + strcspn(end + 4, " ")] = '\0';
		fprintf(stderr, "  process %s\n", k > 0 ? st : "(gone)");
	}
	if (f)
		fclose(f);
}

bool rung_test_proc_cgroup(pid_t pid, const char *ctl, char *out, size_t n)
{
	char p[64], b[4096] = "";
	snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t k = fd < 0 ? -1 : read(fd, b, sizeof(b) - 1);
	if (fd >= 0)
		close(fd);
	b[k > 0 ? k : 0] = '\0';
	char *save = NULL;
	for (char *l = strtok_r(b, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *c = strchr(l, ':'), *path = c ? strchr(c + 1, ':') : NULL;
		if (!path)
			continue;
		*c = *path = '\0'; /* l: the hierarchy's id; c + 1: its controllers */
		bool hit = !ctl && !strcmp(l, "0");
		char *s2 = NULL;
		for (char *t = strtok_r(c + 1, ",", &s2); ctl && t && !hit;
		     t = strtok_r(NULL, ",", &s2))
			hit = !strcmp(t, ctl);
		if (hit) {
			snprintf(out, n, "%s", path + 1);
			return true;
		}
	}
	return false;
}

long rung_test_status_field(int pid, const char *field)
{
	char p[64], buf[4096];
	snprintf(p, sizeof(p), "/proc/%d/status", pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	buf[n] = 0;
	char *f = strstr(buf, field);
	ck_assert_ptr_nonnull(f);
	return strtol(f + strlen(field), NULL, field[0] == 'C' ? 16 : 10);
}

bool rung_test_has_cap(int cap)
{
	return cap >= 0 && cap < 63 &&
	       (rung_test_status_field((int)getpid(), "CapEff:\t") & (1L << cap));
}

int rung_test_cmd_oom_adj(void)
{
	return rung_test_has_cap(24 /* CAP_SYS_RESOURCE */) ? 0 : 1000;
}
