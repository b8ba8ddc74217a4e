/* probe/res.c: resources: memory past the limit (private, memfd, tmpfs, SysV shm), processes past the
 * pids limit, CPU past the quota, disk past the limit, the fd limit. The limits come from the
 * context file (the ladder sets them low); each probe uses at most limit + a margin. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe/probe.h"

#define MARGIN (32ULL << 20)

/* Touch every page of m (len bytes). */
static void touch(char *m, size_t len)
{
	for (size_t i = 0; i < len; i += 4096)
		m[i] = 1;
}

/* Run fn in a child (an OOM kill takes the child, not the probe); escaped when it exits 0. */
static void in_child(struct probe_out *o, int (*fn)(const struct probe_ctx *),
		     const struct probe_ctx *c, const char *what)
{
	pid_t ch = fork();
	if (ch < 0)
		return probe_blocked(o, errno, "fork: %s", strerror(errno));
	if (ch == 0)
		_exit(fn(c));
	int st;
	waitpid(ch, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return probe_escaped(o, "%s: %llu MiB past the %llu MiB limit were used", what,
				     MARGIN >> 20, (unsigned long long)(c->mem_limit >> 20));
	if (WIFSIGNALED(st))
		return probe_blocked(o, 0, "%s: killed by signal %d", what, WTERMSIG(st));
	probe_blocked(o, WEXITSTATUS(st), "%s: %s", what, strerror(WEXITSTATUS(st)));
}

static int do_private(const struct probe_ctx *c)
{
	size_t len = (size_t)(c->mem_limit + MARGIN);
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return errno;
	touch(m, len);
	return 0;
}

static int do_memfd(const struct probe_ctx *c)
{
	size_t len = (size_t)(c->mem_limit + MARGIN);
	int fd = memfd_create("rung-probe", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)len) < 0)
		return errno;
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return errno;
	touch(m, len);
	return 0;
}

/* Write n bytes to path (then remove it): 0, or the errno that stopped it. */
static int fill(const char *path, unsigned long long n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	unlink(path); /* gone with the process, even one the OOM killer takes */
	static char buf[1 << 20];
	memset(buf, 'x', sizeof(buf));
	int r = 0;
	for (unsigned long long done = 0; done < n; done += sizeof(buf))
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf)) {
			r = errno ? errno : ENOSPC;
			break;
		}
	if (!r && fsync(fd) < 0)
		r = errno;
	close(fd);
	return r;
}

static int do_tmpfs(const struct probe_ctx *c)
{
	char p[64];
	snprintf(p, sizeof(p), "/dev/shm/rung-probe-%d", getpid());
	return fill(p, c->mem_limit + MARGIN);
}

/* A SysV segment, removed as soon as it is attached (gone with the child, even OOM-killed). */
static int do_sysv(const struct probe_ctx *c)
{
	size_t len = (size_t)(c->mem_limit + MARGIN);
	int id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
	if (id < 0)
		return errno;
	char *m = shmat(id, NULL, 0);
	int e = errno;
	shmctl(id, IPC_RMID, NULL);
	if (m == (void *)-1)
		return e;
	touch(m, len);
	return 0;
}

static void mem_private(const struct probe_ctx *c, struct probe_out *o)
{
	in_child(o, do_private, c, "private anonymous memory");
}

static void mem_memfd(const struct probe_ctx *c, struct probe_out *o)
{
	in_child(o, do_memfd, c, "a memfd");
}

static void mem_tmpfs(const struct probe_ctx *c, struct probe_out *o)
{
	in_child(o, do_tmpfs, c, "a /dev/shm file");
}

static void mem_sysv(const struct probe_ctx *c, struct probe_out *o)
{
	in_child(o, do_sysv, c, "a SysV shared memory segment");
}

static void fork_bomb(const struct probe_ctx *c, struct probe_out *o)
{
	unsigned want = c->pids_limit + 16, made = 0;
	pid_t *kids = calloc(want, sizeof(pid_t));
	int e = 0;
	if (!kids)
		return probe_na(o, "out of memory");
	for (; made < want; made++) {
		pid_t p = fork();
		if (p == 0) {
			pause();
			_exit(0);
		}
		if (p < 0) {
			e = errno;
			break;
		}
		kids[made] = p;
	}
	for (unsigned i = 0; i < made; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	free(kids);
	if (made == want)
		return probe_escaped(o, "%u processes past the pids limit of %u",
				     want - c->pids_limit, c->pids_limit);
	probe_blocked(o, e, "fork failed after %u processes: %s", made, strerror(e));
}

/* Two busy children for one second of wall time: CPU time past 1.5x the quota escapes. */
static void cpu_quota(const struct probe_ctx *c, struct probe_out *o)
{
	pid_t kids[2];
	for (int i = 0; i < 2; i++)
		if ((kids[i] = fork()) == 0) {
			for (volatile unsigned long n = 0;; n++)
				;
		}
	struct timespec ts = {1, 0};
	nanosleep(&ts, NULL);
	for (int i = 0; i < 2; i++)
		if (kids[i] > 0)
			kill(kids[i], SIGKILL);
	for (int i = 0; i < 2; i++)
		if (kids[i] > 0)
			waitpid(kids[i], NULL, 0);
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		     (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	double quota = c->cpus_milli / 1000.0;
	if (cpu > 1.5 * quota)
		return probe_escaped(o, "%.2f CPU-seconds in one second, quota %.2f", cpu, quota);
	probe_blocked(o, 0, "%.2f CPU-seconds in one second, quota %.2f", cpu, quota);
}

static void disk(const struct probe_ctx *c, struct probe_out *o)
{
	int r = fill("probe-fill", c->disk_limit + MARGIN);
	if (r)
		return probe_blocked(o, r, "writing past the disk limit: %s", strerror(r));
	probe_escaped(o, "wrote %llu MiB past the %llu MiB disk limit", MARGIN >> 20,
		      (unsigned long long)(c->disk_limit >> 20));
}

/* Lower the hard fd limit by one (anyone may), then raise it back: only CAP_SYS_RESOURCE
 * may raise a hard limit, and the original value is within fs.nr_open by definition. */
static void nofile(const struct probe_ctx *c, struct probe_out *o)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	struct rlimit down = {rl.rlim_cur < rl.rlim_max ? rl.rlim_cur : rl.rlim_max - 1,
			      rl.rlim_max - 1};
	if (setrlimit(RLIMIT_NOFILE, &down) < 0)
		return probe_na(o, "lowering nofile: %s", strerror(errno));
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		return probe_blocked(o, errno, "raising the hard nofile limit back to %llu: %s",
				     (unsigned long long)rl.rlim_max, strerror(errno));
	probe_escaped(o, "raised the hard nofile limit (%llu)", (unsigned long long)rl.rlim_max);
}

const struct probe probes_res[] = {
    {"res.memory_private", "resources", "private memory past the limit", mem_private},
    {"res.memory_memfd", "resources", "memfd memory past the limit", mem_memfd},
    {"res.memory_tmpfs", "resources", "/dev/shm past the memory limit", mem_tmpfs},
    {"res.shm", "resources", "SysV shared memory past the memory limit", mem_sysv},
    {"res.fork_bomb", "resources", "processes past the pids limit", fork_bomb},
    {"res.cpu_quota", "resources", "CPU past the quota", cpu_quota},
    {"res.disk", "resources", "disk past the limit", disk},
    {"res.nofile", "resources", "the fd limit raised", nofile},
    {NULL, NULL, NULL, NULL},
};
