/* tests/lib/cgroup.c: child processes and fixtures for the real-cgroup suites. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/lib/cgroup.h"

static char parent_name[64]; /* test-only state, set in the runner before forking tests */

void cgt_parent_init(void)
{
	if (!parent_name[0])
		snprintf(parent_name, sizeof(parent_name), "rung-test-%d", (int)getpid());
}

const char *cgt_parent(void)
{
	cgt_parent_init();
	return parent_name;
}

void cgt_parent_destroy(const char *root)
{
	struct rung_err err = {0};
	struct rt_cgroup *cg = NULL;
	if (rt_cgroup_open(root, cgt_parent(), &cg, &err) < 0)
		return;
	if (rt_cgroup_destroy(cg, &err) < 0)
		fprintf(stderr, "cleanup of %s/%s: %s\n", root, cgt_parent(), err.msg);
	rt_cgroup_free(cg);
}

bool cgt_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

int cgt_spawn(struct cgt_child *c, cgt_body_fn body, long arg)
{
	int go[2], out[2];
	if (pipe2(go, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(out, O_CLOEXEC) < 0) {
		close(go[0]);
		close(go[1]);
		return -errno;
	}
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		close(go[1]);
		close(out[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		char b;
		if (read(go[0], &b, 1) != 1)
			_exit(126);
		close(go[0]);
		_exit(body(out[1], arg));
	}
	close(go[0]);
	close(out[1]);
	c->pid = pid;
	c->go_fd = go[1];
	c->out_fd = out[0];
	return 0;
}

void cgt_go(struct cgt_child *c)
{
	if (write(c->go_fd, "g", 1) != 1)
		perror("cgt_go");
}

void cgt_child_close(struct cgt_child *c)
{
	if (c->go_fd >= 0)
		close(c->go_fd);
	if (c->out_fd >= 0)
		close(c->out_fd);
	c->go_fd = c->out_fd = -1;
}

long cgt_read_long(struct cgt_child *c, int ms)
{
	struct pollfd p = {.fd = c->out_fd, .events = POLLIN};
	if (poll(&p, 1, ms) != 1)
		return -1;
	long v;
	if (rung_read_exact(c->out_fd, &v, sizeof(v)) < 0)
		return -1;
	return v;
}

static void report(int fd, long v)
{
	if (rung_write_all(fd, &v, sizeof(v)) < 0)
		_exit(125);
}

int cgt_wait(pid_t pid, int ms)
{
	uint64_t deadline = rung_now_ms() + (uint64_t)ms;
	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		if (r < 0)
			return -1;
		if (rung_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		usleep(2000);
	}
}

int cgt_body_sleep(int out_fd, long arg)
{
	report(out_fd, 1);
	for (;;)
		pause();
}

int cgt_body_busy(int out_fd, long arg)
{
	report(out_fd, 1);
	volatile unsigned long x = 0;
	for (;;)
		x++;
}

int cgt_body_alloc(int out_fd, long mib)
{
	for (long i = 0; i < mib; i++) {
		char *p = malloc(1 << 20);
		if (!p)
			return 3;
		memset(p, (int)i | 1, 1 << 20);
		report(out_fd, i + 1);
	}
	return 0;
}

int cgt_body_forks(int out_fd, long max)
{
	long n = 0;
	for (; n < max; n++) {
		pid_t p = fork();
		if (p < 0) {
			int e = errno;
			report(out_fd, n);
			report(out_fd, e);
			for (;;)
				pause();
		}
		if (p == 0) {
			for (;;)
				pause();
		}
	}
	report(out_fd, n);
	report(out_fd, 0);
	for (;;)
		pause();
}

int cgt_body_daemon(int out_fd, long arg)
{
	pid_t p = fork();
	if (p < 0)
		return 2;
	if (p == 0) {
		setsid();
		pid_t q = fork();
		if (q < 0)
			_exit(2);
		if (q > 0)
			_exit(0); /* the daemon is orphaned: reparented to the subreaper */
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		report(out_fd, (long)getpid());
		for (;;)
			pause();
	}
	waitpid(p, NULL, 0);
	/* Keep forking short-lived children: kill_all must win against this. */
	for (;;) {
		pid_t c = fork();
		if (c == 0)
			_exit(0);
		if (c > 0)
			waitpid(c, NULL, 0);
	}
}

uint64_t cgt_cpu_ns(pid_t pid)
{
	clockid_t cid;
	struct timespec ts;
	if (clock_getcpuclockid(pid, &cid) != 0 || clock_gettime(cid, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool cgt_alive(pid_t pid)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	cleanup_free char *s = NULL;
	if (rung_file_load(AT_FDCWD, p, 4096, &s, NULL, NULL) < 0)
		return false;
	char *rp = strrchr(s, ')');
	return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}
