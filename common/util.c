#include <ctype.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#ifndef MADV_POPULATE_READ /* musl's sys/mman.h lacks them */
#include <linux/mman.h>
#endif
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

int rung_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int rung_read_exact(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = read(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int rung_read_fd_all(int fd, size_t max, char **out, size_t *out_len, struct rung_err *err)
{
	size_t cap = 4096, len = 0;
	cleanup_free char *buf = malloc(cap + 1);
	if (!buf)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (;;) {
		if (len == cap) {
			if (cap > max)
				return rung_err_set(err, EFBIG, "input larger than %zu bytes", max);
			cap *= 2;
			char *nb = realloc(buf, cap + 1);
			if (!nb)
				return rung_err_set(err, ENOMEM, "out of memory");
			buf = nb;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return rung_err_sys(err, errno, "read");
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max)
			return rung_err_set(err, EFBIG, "input larger than %zu bytes", max);
	}
	buf[len] = '\0';
	*out = rung_steal_ptr(&buf);
	if (out_len)
		*out_len = len;
	return 0;
}

int rung_file_load(int dirfd, const char *path, size_t max, char **out, size_t *out_len,
		   struct rung_err *err)
{
	cleanup_close int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return rung_err_sys(err, errno, "open %s", path);
	int r = rung_read_fd_all(fd, max, out, out_len, err);
	if (r < 0)
		return rung_err_wrap(err, "%s", path);
	return 0;
}

static int write_replace(int dirfd, const char *path, const void *buf, size_t len, mode_t mode,
			 bool durable, struct rung_err *err)
{
	char tmp[4096];
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= sizeof(tmp))
		return rung_err_set(err, ENAMETOOLONG, "path too long: %s", path);
	cleanup_close int fd =
		openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return rung_err_sys(err, errno, "create %s", tmp);
	int r = rung_write_all(fd, buf, len);
	if (r == 0 && durable && fsync(fd) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(dirfd, tmp, 0);
		return rung_err_sys(err, -r, "write %s", tmp);
	}
	if (renameat(dirfd, tmp, dirfd, path) < 0) {
		r = -errno;
		unlinkat(dirfd, tmp, 0);
		return rung_err_sys(err, -r, "rename %s", path);
	}
	if (!durable)
		return 0;
	/* Make the rename durable: fsync the directory holding path. */
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir)
		*slash = '\0';
	else if (slash)
		dir[1] = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	cleanup_close int dfd = openat(dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0)
		fsync(dfd);
	return 0;
}

int rung_write_file_atomic(int dirfd, const char *path, const void *buf, size_t len, mode_t mode,
			   struct rung_err *err)
{
	return write_replace(dirfd, path, buf, len, mode, true, err);
}

int rung_write_file_replace(int dirfd, const char *path, const void *buf, size_t len, mode_t mode,
			    struct rung_err *err)
{
	return write_replace(dirfd, path, buf, len, mode, false, err);
}

int rung_mkdir_p(const char *path, mode_t mode, struct rung_err *err)
{
	char buf[4096];
	if ((size_t)snprintf(buf, sizeof(buf), "%s", path) >= sizeof(buf))
		return rung_err_set(err, ENAMETOOLONG, "path too long: %s", path);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return rung_err_sys(err, errno, "mkdir %s", buf);
			*p = c;
			if (c == '\0')
				break;
		}
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return rung_err_sys(err, errno, "stat %s", path);
	if (!S_ISDIR(st.st_mode))
		return rung_err_set(err, ENOTDIR, "%s exists and is not a directory", path);
	return 0;
}

/*
 * rm -rf without recursion and without a depth limit (a tenant can make a tree as deep as it
 * likes). Every step is fd-relative and never follows a symlink: an explicit stack of levels
 * (name, dev, ino); the top RM_OPEN_LEVELS keep their directory stream open, deeper ones are
 * closed on the way down (the fd limit) and re-reached on the way up through "..", which must
 * be the very directory (dev and ino) we came from. A mount point below is refused (EBUSY).
 */
#define RM_OPEN_LEVELS 64

struct rm_level {
	DIR *d;            /* NULL while closed (deep levels) */
	dev_t dev;
	ino_t ino;
	char name[256];    /* in its parent */
};

static void rm_levels_free(struct rm_level *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].d)
			closedir(v[i].d);
	free(v);
}

static int rm_push(struct rm_level **v, size_t *n, size_t *cap, int fd, const char *name,
		   struct rung_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return rung_err_sys(err, e, "stat %s", name);
	}
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct rm_level *nv = realloc(*v, nc * sizeof(**v));
		if (!nv) {
			close(fd);
			return rung_err_set(err, ENOMEM, "out of memory");
		}
		*v = nv;
		*cap = nc;
	}
	struct rm_level *l = &(*v)[*n];
	l->d = fdopendir(fd);
	if (!l->d) {
		int e = errno;
		close(fd);
		return rung_err_sys(err, e, "fdopendir %s", name);
	}
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	snprintf(l->name, sizeof(l->name), "%s", name);
	(*n)++;
	return 0;
}

/* Back up from v[n-1] (now empty) to its parent and remove it; reopens a closed parent. */
static int rm_pop(struct rm_level *v, size_t *n, struct rung_err *err)
{
	struct rm_level *l = &v[*n - 1], *p = &v[*n - 2];
	if (!p->d) {
		int pfd = openat(dirfd(l->d), "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (pfd < 0)
			return rung_err_sys(err, errno, "open the parent of %s", l->name);
		if (fstat(pfd, &st) < 0 || st.st_dev != p->dev || st.st_ino != p->ino) {
			close(pfd);
			return rung_err_set(err, EAGAIN, "the parent of %s moved while removing it",
					    l->name);
		}
		if (!(p->d = fdopendir(pfd))) {
			int e = errno;
			close(pfd);
			return rung_err_sys(err, e, "fdopendir");
		}
	}
	closedir(l->d);
	l->d = NULL;
	(*n)--;
	if (unlinkat(dirfd(p->d), l->name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return rung_err_sys(err, errno, "rmdir %s (depth %zu)", l->name, *n);
	return 0;
}

/* Empties the directory open as fd (taken). */
static int rm_rf_children(int fd, const char *name, struct rung_err *err)
{
	struct rm_level *v = NULL;
	size_t n = 0, cap = 0;
	int r = rm_push(&v, &n, &cap, fd, name, err);
	while (r == 0 && n > 0) {
		struct rm_level *l = &v[n - 1];
		errno = 0;
		struct dirent *de = readdir(l->d);
		if (!de) {
			if (errno)
				r = rung_err_sys(err, errno, "readdir %s (depth %zu)", l->name, n - 1);
			else if (n == 1)
				break;
			else
				r = rm_pop(v, &n, err);
			continue;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd(l->d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				r = rung_err_sys(err, errno, "stat %s (depth %zu)", de->d_name, n);
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (unlinkat(dirfd(l->d), de->d_name, 0) < 0 && errno != ENOENT)
				r = rung_err_sys(err, errno, "unlink %s (depth %zu)", de->d_name, n);
			continue;
		}
		if (st.st_dev != v[0].dev) {
			r = rung_err_set(err, EBUSY, "%s is a mount point", de->d_name);
			continue;
		}
		int cfd = openat(dirfd(l->d), de->d_name,
				 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd < 0) {
			if (errno != ENOENT)
				r = rung_err_sys(err, errno, "open %s (depth %zu)", de->d_name, n);
			continue;
		}
		if ((r = rm_push(&v, &n, &cap, cfd, de->d_name, err)) < 0)
			continue;
		l = &v[n - 2]; /* v may have moved */
		if (v[n - 1].dev != v[0].dev)
			r = rung_err_set(err, EBUSY, "%s is a mount point", de->d_name);
		else if (n - 1 > RM_OPEN_LEVELS) { /* re-reached through ".." */
			closedir(l->d);
			l->d = NULL;
		}
	}
	rm_levels_free(v, n);
	return r;
}

int rung_rm_rf_at(int dirfd, const char *name, struct rung_err *err)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return rung_err_sys(err, errno, "stat %s", name);
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
			return rung_err_sys(err, errno, "unlink %s", name);
		return 0;
	}
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return rung_err_sys(err, errno, "open %s", name);
	int r = rm_rf_children(fd, name, err);
	if (r < 0)
		return rung_err_wrap(err, "%s", name);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return rung_err_sys(err, errno, "rmdir %s", name);
	return 0;
}

int rung_rm_rf(const char *path, struct rung_err *err)
{
	return rung_rm_rf_at(AT_FDCWD, path, err);
}

static uint64_t clock_ms(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t rung_now_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
}

uint64_t rung_wall_ms(void)
{
	return clock_ms(CLOCK_REALTIME);
}

uint64_t rung_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

int rung_parse_u64(const char *s, uint64_t *out)
{
	if (!s || !*s)
		return -EINVAL;
	uint64_t v = 0;
	for (const char *p = s; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int rung_parse_size(const char *s, uint64_t *out)
{
	if (!s || !*s)
		return -EINVAL;
	char num[32];
	size_t n = strlen(s);
	uint64_t mult = 1;
	char last = (char)tolower((unsigned char)s[n - 1]);
	if (last == 'b' && n > 1 && isalpha((unsigned char)s[n - 2])) {
		n--; /* "MB", "GiB" handled below via the letter before */
		last = (char)tolower((unsigned char)s[n - 1]);
	}
	if (last == 'i' && n > 1) { /* "Mi", "Gi"; a bare "1i" is no size */
		n--;
		last = (char)tolower((unsigned char)s[n - 1]);
		if (!strchr("kmgt", last))
			return -EINVAL;
	}
	switch (last) {
	case 'k': mult = 1ULL << 10; n--; break;
	case 'm': mult = 1ULL << 20; n--; break;
	case 'g': mult = 1ULL << 30; n--; break;
	case 't': mult = 1ULL << 40; n--; break;
	default: break;
	}
	if (n == 0 || n >= sizeof(num))
		return -EINVAL;
	memcpy(num, s, n);
	num[n] = '\0';
	uint64_t v;
	int r = rung_parse_u64(num, &v);
	if (r < 0)
		return r;
	if (v > UINT64_MAX / mult)
		return -ERANGE;
	*out = v * mult;
	return 0;
}

uint64_t rung_proc_starttime(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm may hold spaces and parens: fields start after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	/* after ')' come fields 3..; starttime is field 22, the 20th after ')'. */
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return 0;
	}
	return strtoull(p + 1, NULL, 10);
}

int rung_fd_set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -errno;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	return fcntl(fd, F_SETFL, fl) < 0 ? -errno : 0;
}

void rung_close_from_except(unsigned from, int a, int b)
{
	int keep[2] = {a < b ? a : b, a < b ? b : a};
	unsigned lo = from;
	for (int i = 0; i < 2; i++) {
		if (keep[i] < 0 || (unsigned)keep[i] < lo)
			continue;
		if ((unsigned)keep[i] > lo)
			syscall(SYS_close_range, lo, (unsigned)keep[i] - 1, 0);
		lo = (unsigned)keep[i] + 1;
	}
	syscall(SYS_close_range, lo, ~0U, 0);
}

int rung_fd_set_cloexec(int fd, int on)
{
	int fl = fcntl(fd, F_GETFD);
	if (fl < 0)
		return -errno;
	fl = on ? (fl | FD_CLOEXEC) : (fl & ~FD_CLOEXEC);
	return fcntl(fd, F_SETFD, fl) < 0 ? -errno : 0;
}

int rung_helper_path_in(const char *bin, const char *name, char *out, size_t len)
{
	/* $PREFIX/bin -> $PREFIX/libexec/rung: the FHS place for a package's helpers */
	char prefix[PATH_MAX], libexec[PATH_MAX + 32];
	snprintf(prefix, sizeof(prefix), "%s", bin[0] ? bin : "/");
	char *p = strrchr(prefix, '/');
	if (p)
		*(p == prefix ? p + 1 : p) = '\0';
	snprintf(libexec, sizeof(libexec), "%s%slibexec/rung/%s", prefix,
		 prefix[0] && prefix[strlen(prefix) - 1] == '/' ? "" : "/", name);
	if ((size_t)snprintf(out, len, "%s/%s", bin, name) >= len)
		return -ENAMETOOLONG;
	if (access(out, F_OK) == 0)
		return 0;
	/* a helper ($PREFIX/libexec/rung/rung-dyn) looking for a program: $PREFIX/bin */
	size_t bl = strlen(bin);
	char up[PATH_MAX + 32];
	if (bl > 13 && !strcmp(bin + bl - 13, "/libexec/rung") &&
	    (size_t)snprintf(up, sizeof(up), "%.*s/bin/%s", (int)(bl - 13), bin, name) <
		sizeof(up) &&
	    access(up, F_OK) == 0)
		return (size_t)snprintf(out, len, "%s", up) >= len ? -ENAMETOOLONG : 0;
	/* neither there: name the place an installed rung ($PREFIX/bin/...) expects it */
	const char *base = strrchr(bin, '/');
	if (access(libexec, F_OK) < 0 && strcmp(base ? base + 1 : bin, "bin") != 0)
		return 0;
	if ((size_t)snprintf(out, len, "%s", libexec) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int rung_helper_path(const char *name, char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -ENOENT;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	return rung_helper_path_in(self, name, out, len);
}

static const char *const sig_names[] = {
    [SIGHUP] = "HUP",	    [SIGINT] = "INT",	[SIGQUIT] = "QUIT",   [SIGILL] = "ILL",
    [SIGTRAP] = "TRAP",	    [SIGABRT] = "ABRT", [SIGBUS] = "BUS",     [SIGFPE] = "FPE",
    [SIGKILL] = "KILL",	    [SIGUSR1] = "USR1", [SIGSEGV] = "SEGV",   [SIGUSR2] = "USR2",
    [SIGPIPE] = "PIPE",	    [SIGALRM] = "ALRM", [SIGTERM] = "TERM",   [SIGCHLD] = "CHLD",
    [SIGCONT] = "CONT",	    [SIGSTOP] = "STOP", [SIGTSTP] = "TSTP",   [SIGTTIN] = "TTIN",
    [SIGTTOU] = "TTOU",	    [SIGURG] = "URG",	[SIGXCPU] = "XCPU",   [SIGXFSZ] = "XFSZ",
    [SIGVTALRM] = "VTALRM", [SIGPROF] = "PROF", [SIGWINCH] = "WINCH", [SIGIO] = "IO",
    [SIGPWR] = "PWR",	    [SIGSYS] = "SYS",
};

int rung_signal_parse(const char *s)
{
	if (!s || !*s || strlen(s) > 16)
		return -1;
	if (s[0] >= '0' && s[0] <= '9') {
		char *end;
		long v = strtol(s, &end, 10);
		return *end || v < 1 || v > 64 ? -1 : (int)v;
	}
	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(sig_names); i++)
		if (sig_names[i] && !strcasecmp(s, sig_names[i]))
			return (int)i;
	return -1;
}

const char *rung_signal_name(int sig)
{
	return sig > 0 && (size_t)sig < RUNG_ARRAY_SIZE(sig_names) && sig_names[sig] ? sig_names[sig]
										   : "?";
}

extern const char __executable_start[], etext[]; /* GNU ld's, for every executable */
/* 1 where build/rung's entry point (cli/entry.S) mapped the code already: its definition
 * replaces this one at the link (volatile: a weak constant's value must not be folded in). */
__attribute__((weak)) const volatile char rung_code_mapped = 0;

__attribute__((noinline)) void rung_prefault_stack(void)
{
	const uintptr_t pg = 4096;
	char here; /* the stack's initial mapping reaches 128 KiB below its top at exec */
	uintptr_t sp = (uintptr_t)&here & ~(pg - 1);
	madvise((void *)(sp - 16 * pg), 16 * pg, MADV_POPULATE_WRITE);
}

void rung_prefault(void)
{
	const uintptr_t pg = 4096;
	uintptr_t a = (uintptr_t)__executable_start & ~(pg - 1),
		  b = ((uintptr_t)etext + pg - 1) & ~(pg - 1);
	if (!rung_code_mapped)
		madvise((void *)a, b - a, MADV_POPULATE_READ);
	rung_prefault_stack();
	void *m = malloc(1); /* the first malloc grants the heap */
	uintptr_t h = ((uintptr_t)m + pg - 1) & ~(pg - 1), top = (uintptr_t)sbrk(0);
	if (m && top > h && top - h <= (1u << 20))
		madvise((void *)h, top - h, MADV_POPULATE_WRITE);
	free(m);
}
