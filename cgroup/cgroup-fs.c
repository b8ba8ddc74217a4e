/* cgroup/cgroup-fs.c: cgroupfs file I/O shared by the v1 and v2 managers. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <time.h>

#include "common/util.h"
#include "cgroup/cgroup-internal.h"

#define CG_FILE_MAX (1 << 20)

/*
 * A fake tree (tests, dry runs) is a plain directory: its interface files are created
 * on write, as the kernel would have them. On a real cgroupfs a missing file means the
 * controller is absent, and is reported as such.
 */
static bool is_cgroupfs(const char *dir)
{
	struct statfs sf;
	if (statfs(dir, &sf) < 0)
		return true;
	return sf.f_type == CGROUP_SUPER_MAGIC || sf.f_type == CGROUP2_SUPER_MAGIC;
}

static int join(char *buf, size_t sz, const char *dir, const char *file, struct rung_err *err)
{
	if ((size_t)snprintf(buf, sz, "%s/%s", dir, file) >= sz)
		return rung_err_set(err, ENAMETOOLONG, "path too long: %s/%s", dir, file);
	return 0;
}

int rt_cg_write(const char *dir, const char *file, const char *value, struct rung_err *err)
{
	char p[4096];
	int r = join(p, sizeof(p), dir, file, err);
	if (r < 0)
		return r;
	int flags = O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_TRUNC;
	if (!is_cgroupfs(dir))
		flags |= O_CREAT;
	cleanup_close int fd = open(p, flags, 0644);
	if (fd < 0)
		return rung_err_sys(err, errno, "open %s", p);
	size_t len = strlen(value);
	for (;;) {
		ssize_t n = write(fd, value, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return rung_err_sys(err, errno, "write \"%s\" to %s", value, p);
		if ((size_t)n != len)
			return rung_err_set(err, EIO, "short write of \"%s\" to %s", value, p);
		return 0;
	}
}

int rt_cg_read(const char *dir, const char *file, char **out, struct rung_err *err)
{
	char p[4096];
	int r = join(p, sizeof(p), dir, file, err);
	if (r < 0)
		return r;
	return rung_file_load(AT_FDCWD, p, CG_FILE_MAX, out, NULL, err);
}

int rt_cg_read_key(const char *dir, const char *file, const char *key, uint64_t *out,
		   struct rung_err *err)
{
	cleanup_free char *s = NULL;
	int r = rt_cg_read(dir, file, &s, err);
	if (r < 0)
		return r;
	size_t kl = strlen(key);
	for (char *line = s; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (!strncmp(line, key, kl) && line[kl] == ' ') {
			if (rung_parse_u64(line + kl + 1, out) < 0)
				return rung_err_set(err, EINVAL, "%s/%s: bad value for %s: \"%s\"",
						    dir, file, key, line + kl + 1);
			return 0;
		}
		line = nl ? nl + 1 : NULL;
	}
	return rung_err_set(err, ENOENT, "%s/%s: no key %s", dir, file, key);
}

int rt_cg_read_u64(const char *dir, const char *file, uint64_t *out, struct rung_err *err)
{
	cleanup_free char *s = NULL;
	int r = rt_cg_read(dir, file, &s, err);
	if (r < 0)
		return r;
	s[strcspn(s, "\n")] = '\0';
	if (!strcmp(s, "max")) {
		*out = UINT64_MAX;
		return 0;
	}
	if (rung_parse_u64(s, out) < 0)
		return rung_err_set(err, EINVAL, "%s/%s: not a number: \"%s\"", dir, file, s);
	return 0;
}

static int push_pid(pid_t **pids, size_t *n, size_t *cap, pid_t pid)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		pid_t *np = realloc(*pids, nc * sizeof(*np));
		if (!np)
			return -ENOMEM;
		*pids = np;
		*cap = nc;
	}
	(*pids)[(*n)++] = pid;
	return 0;
}

static int collect(const char *dir, pid_t **pids, size_t *n, size_t *cap, int depth,
		   struct rung_err *err)
{
	if (depth > 32)
		return rung_err_set(err, ELOOP, "%s: groups nested too deep", dir);
	cleanup_free char *s = NULL;
	int r = rt_cg_read(dir, "cgroup.procs", &s, err);
	if (r == -ENOENT)
		return 0; /* the group is gone (or never was) */
	if (r < 0)
		return r;
	char *save = NULL;
	for (char *tok = strtok_r(s, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save)) {
		uint64_t v;
		if (rung_parse_u64(tok, &v) < 0 || v == 0 || v > INT32_MAX)
			return rung_err_set(err, EINVAL, "%s/cgroup.procs: bad pid \"%s\"", dir,
					    tok);
		if (push_pid(pids, n, cap, (pid_t)v) < 0)
			return rung_err_set(err, ENOMEM, "out of memory");
	}
	cleanup_dir DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : rung_err_sys(err, errno, "open %s", dir);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		char sub[4096];
		if ((r = join(sub, sizeof(sub), dir, de->d_name, err)) < 0)
			return r;
		if ((r = collect(sub, pids, n, cap, depth + 1, err)) < 0)
			return r;
	}
	return 0;
}

int rt_cg_collect_pids(const char *dir, pid_t **pids, size_t *n, size_t *cap, struct rung_err *err)
{
	return collect(dir, pids, n, cap, 0, err);
}

int rt_cg_kill_tree(const char *dir, size_t *killed, struct rung_err *err)
{
	cleanup_free pid_t *pids = NULL;
	size_t n = 0, cap = 0;
	int r = rt_cg_collect_pids(dir, &pids, &n, &cap, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		if (kill(pids[i], SIGKILL) < 0 && errno != ESRCH)
			return rung_err_sys(err, errno, "kill %d", (int)pids[i]);
		if (killed)
			(*killed)++;
	}
	return 0;
}

int rt_cg_wait_empty(const char *dir, uint64_t ms, struct rung_err *err)
{
	uint64_t deadline = rung_now_ms() + ms;
	unsigned step = 0;
	for (;;) {
		cleanup_free pid_t *pids = NULL;
		size_t n = 0, cap = 0;
		int r = rt_cg_collect_pids(dir, &pids, &n, &cap, err);
		if (r < 0)
			return r;
		if (n == 0)
			return 0;
		if (rung_now_ms() > deadline)
			return rung_err_set(err, ETIMEDOUT,
					    "%s: %zu process(es) still there after %" PRIu64
					    " ms (first: %d)",
					    dir, n, ms, (int)pids[0]);
		rt_cg_backoff(&step);
	}
}

static int rmdir_tree(const char *dir, bool fake, int depth, struct rung_err *err)
{
	if (depth > 32)
		return rung_err_set(err, ELOOP, "%s: groups nested too deep", dir);
	cleanup_dir DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : rung_err_sys(err, errno, "open %s", dir);
	struct dirent *de;
	int r;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' && (!de->d_name[1] || !strcmp(de->d_name, "..")))
			continue;
		char sub[4096];
		if ((r = join(sub, sizeof(sub), dir, de->d_name, err)) < 0)
			return r;
		if (de->d_type == DT_DIR) {
			if ((r = rmdir_tree(sub, fake, depth + 1, err)) < 0)
				return r;
		} else if (fake && unlink(sub) < 0 && errno != ENOENT) {
			return rung_err_sys(err, errno, "unlink %s", sub);
		}
	}
	/* A process that was just killed can keep its group busy for a moment. */
	unsigned step = 0;
	uint64_t deadline = rung_now_ms() + 2000;
	while (rmdir(dir) < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno != EBUSY || rung_now_ms() > deadline)
			return rung_err_sys(err, errno, "rmdir %s", dir);
		rt_cg_backoff(&step);
	}
	return 0;
}

int rt_cg_rmdir_tree(const char *dir, struct rung_err *err)
{
	return rmdir_tree(dir, !is_cgroupfs(dir), 0, err);
}

void rt_cg_backoff(unsigned *step)
{
	unsigned s = *step < 8 ? *step : 8;
	struct timespec ts = {0, (long)(50000L << s)}; /* 50 us .. 12.8 ms */
	nanosleep(&ts, NULL);
	(*step)++;
}
