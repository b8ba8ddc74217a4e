/*
 * tests/lib/server.h: helpers for the server's integration suites: start build/rung-serve
 * on a temporary store/socket/tokens file, and a minimal HTTP/1.1 client over a Unix socket or
 * TCP loopback (raw, so that tests can also misbehave: slow heads, huge bodies).
 */
#ifndef RUNG_TESTS_LIB_SERVER_H
#define RUNG_TESTS_LIB_SERVER_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rung/rung.h"
#include "tests/lib/testutil.h"

#define TOK_A "tok-aaaaaaaaaaaaaaaa"
#define TOK_B "tok-bbbbbbbbbbbbbbbb"
#define TOK_ADMIN "tok-admin-metrics-0000" /* the daemon-wide /metrics (admin line) */

struct srvt {
	char dir[256]; /* temp dir: tokens, state/, sockets, logs */
	char state[300];
	char tokens[300];
	pid_t pid[2];
	char sock[2][300];
	char log[2][300];
	int reaper_fd; /* write end: the reaper cleans up when it closes, however the test ends */
};

static inline uint64_t srvt_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void srvt_write(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, mode);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	chmod(path, mode);
}

static inline int srvt_unix_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Start daemon i (0 or 1) on the shared store; extra args are NULL-terminated. */
static inline void srvt_start(struct srvt *t, int i, const char *const *extra)
{
	char dir[sizeof(t->dir)];
	memcpy(dir, t->dir, sizeof(dir));
	snprintf(t->sock[i], sizeof(t->sock[i]), "%s/d%d.sock", dir, i);
	snprintf(t->log[i], sizeof(t->log[i]), "%s/d%d.log", dir, i);
	char bin[4096];
	snprintf(bin, sizeof(bin), "%s/rung-serve", rung_test_build_dir());
	const char *argv[32] = {bin,	       "--tokens", t->tokens,	    "--socket", t->sock[i],
				"--state-dir", t->state,   "--gc-interval", "1"};
	int n = 9;
	for (; extra && *extra && n < 30; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
		int lfd = open(t->log[i], O_CREAT | O_WRONLY | O_APPEND, 0600);
		if (lfd >= 0) {
			dup2(lfd, 1);
			dup2(lfd, 2);
		}
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	t->pid[i] = pid;
	for (int k = 0; k < 500; k++) {
		int fd = srvt_unix_connect(t->sock[i]);
		if (fd >= 0) {
			close(fd);
			return;
		}
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			t->pid[i] = 0;
			ck_abort_msg("rung-serve exited early (status %d), see %s", st, t->log[i]);
		}
		usleep(10000);
	}
	ck_abort_msg("rung-serve did not come up, see %s", t->log[i]);
}

static inline void srvt_stop(struct srvt *t, int i, int sig)
{
	if (t->pid[i] > 0) {
		kill(t->pid[i], sig);
		waitpid(t->pid[i], NULL, 0);
		t->pid[i] = 0;
	}
}

/* /proc/<pid>/cmdline with its NULs as spaces, in buf (len bytes at most); its length, or
 * <= 0 when it cannot be read or is empty (a kernel thread, a zombie). */
static inline ssize_t srvt_cmdline(const char *pid, char *buf, size_t len)
{
	char p[300];
	snprintf(p, sizeof(p), "/proc/%s/cmdline", pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t k = read(fd, buf, len - 1);
	close(fd);
	for (ssize_t i = 0; i < k; i++)
		if (!buf[i])
			buf[i] = ' ';
	buf[k > 0 ? k : 0] = '\0';
	return k;
}

/* Host processes whose command line (its first 511 bytes) holds needle. */
static inline int srvt_count_procs_with(const char *needle)
{
	DIR *d = opendir("/proc");
	int n = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char buf[512];
		if (srvt_cmdline(de->d_name, buf, sizeof(buf)) > 0 && strstr(buf, needle))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

/*
 * SIGKILL every process whose command line mentions dir (this test's daemons, and the sandbox
 * supervisors they forked, which keep the daemon's argv), and their children (the agents).
 * Everything matched was started by this test: dir is a fresh mkdtemp name.
 */
static inline int srvt_kill_matching(const char *dir)
{
	pid_t pids[512];
	int n = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;
	while (d && (de = readdir(d)) && n < 256) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char p[300], buf[4096];
		ssize_t k = srvt_cmdline(de->d_name, buf, sizeof(buf));
		pid_t pid = (pid_t)atoi(de->d_name);
		if (k <= 0 || !strstr(buf, dir) || pid == getpid())
			continue;
		pids[n++] = pid;
		snprintf(p, sizeof(p), "/proc/%d/task/%d/children", (int)pid, (int)pid);
		FILE *f = fopen(p, "re");
		int c;
		while (f && n < 512 && fscanf(f, "%d", &c) == 1)
			pids[n++] = (pid_t)c;
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	for (int i = 0; i < n; i++)
		kill(pids[i], SIGKILL);
	return n;
}

/* In process: the distro stage's L1 has busybox's rm, without --one-file-system, and an rm
 * run from the reaper wrote its usage text into the log line of Check's summary. */
static inline void srvt_rm_rf(const char *dir)
{
	if (rung_test_rmtree(dir) < 0)
		fprintf(stderr, "srvt: cannot remove all of %s: %s\n", dir, strerror(errno));
}

/*
 * Check ends a failed test's process without running teardowns or atexit handlers, so a
 * reaper (its own session, out of Check's reach) waits for this process to go away and then
 * kills what the test left running and removes its directory.
 */
static inline int srvt_reaper(const char *dir)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		setsid();
		close(p[1]);
		char c;
		while (read(p[0], &c, 1) > 0)
			;
		if (access(dir, F_OK) == 0) {
			for (int i = 0; i < 5 && srvt_kill_matching(dir) > 0; i++)
				usleep(100000);
			srvt_rm_rf(dir);
		}
		_exit(0);
	}
	close(p[0]);
	return p[1];
}

static inline void srvt_setup(struct srvt *t, const char *tokens_text)
{
	memset(t, 0, sizeof(*t));
	char *d = rung_test_tmpdir("srv");
	ck_assert_ptr_nonnull(d);
	snprintf(t->dir, sizeof(t->dir), "%s", d);
	snprintf(t->state, sizeof(t->state), "%s/state", d);
	snprintf(t->tokens, sizeof(t->tokens), "%s/tokens", d);
	free(d);
	srvt_write(t->tokens, tokens_text ? tokens_text
				       : TOK_A " scopeA\n" TOK_B " scopeB\nadmin " TOK_ADMIN "\n",
		   0600);
	t->reaper_fd = srvt_reaper(t->dir);
}

/* ---- a raw HTTP/1.1 client -------------------------------------------------------------- */

struct srvt_resp {
	int status;
	char *head; /* the response head (status line + headers) */
	char *body; /* de-chunked, NUL-terminated */
	size_t len;
};

static inline void srvt_resp_free(struct srvt_resp *r)
{
	free(r->head);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

static inline int srvt_read_all(int fd, char **out, size_t *len, int timeout_ms)
{
	size_t cap = 65536, n = 0;
	char *b = malloc(cap + 1);
	uint64_t end = srvt_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		int64_t left = (int64_t)(end - srvt_now_ms());
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		if (n == cap) {
			cap *= 2;
			b = realloc(b, cap + 1);
		}
		ssize_t k = read(fd, b + n, cap - n);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	b[n] = '\0';
	*out = b;
	*len = n;
	return 0;
}

static inline void srvt_parse(char *raw, size_t n, struct srvt_resp *r)
{
	memset(r, 0, sizeof(*r));
	char *sep = strstr(raw, "\r\n\r\n");
	if (!sep || sscanf(raw, "HTTP/1.%*d %d", &r->status) != 1) {
		r->status = -1;
		r->body = calloc(1, 1);
		return;
	}
	r->head = strndup(raw, (size_t)(sep - raw));
	char *p = sep + 4, *end = raw + n;
	r->body = malloc((size_t)(end - p) + 1);
	if (strcasestr(r->head, "Transfer-Encoding: chunked")) {
		while (p < end) {
			unsigned long sz = strtoul(p, NULL, 16);
			char *nl = strstr(p, "\r\n");
			if (!nl || sz == 0)
				break;
			p = nl + 2;
			if (p + sz > end)
				sz = (unsigned long)(end - p);
			memcpy(r->body + r->len, p, sz);
			r->len += sz;
			p += sz + 2;
		}
	} else {
		r->len = (size_t)(end - p);
		memcpy(r->body, p, r->len);
	}
	r->body[r->len] = '\0';
}

/* One request on a fresh connection (Connection: close). token NULL: no Authorization. */
static inline int srvt_req_fd(int fd, const char *method, const char *path, const char *token,
			      const char *headers, const char *body, size_t blen,
			      struct srvt_resp *r, int timeout_ms)
{
	char *req = NULL;
	int n = asprintf(&req,
			 "%s %s HTTP/1.1\r\nHost: rung\r\nConnection: close\r\n%s%s%s"
			 "%sContent-Length: %zu\r\n\r\n",
			 method, path, token ? "Authorization: Bearer " : "", token ? token : "",
			 token ? "\r\n" : "", headers ? headers : "", body ? blen : 0);
	ck_assert_int_gt(n, 0);
	ssize_t w = send(fd, req, (size_t)n, MSG_NOSIGNAL);
	free(req);
	if (w != n)
		return -1;
	size_t off = 0;
	while (body && off < blen) {
		ssize_t k = send(fd, body + off, blen - off, MSG_NOSIGNAL);
		if (k <= 0)
			break; /* the server may answer early (413) and close */
		off += (size_t)k;
	}
	char *raw;
	size_t len;
	srvt_read_all(fd, &raw, &len, timeout_ms);
	srvt_parse(raw, len, r);
	free(raw);
	return 0;
}

static inline struct srvt_resp srvt_req(const char *sock, const char *method, const char *path,
					const char *token, const char *headers, const char *body)
{
	struct srvt_resp r = {0};
	int fd = srvt_unix_connect(sock);
	ck_assert_msg(fd >= 0, "connect %s", sock);
	srvt_req_fd(fd, method, path, token, headers, body, body ? strlen(body) : 0, &r, 30000);
	close(fd);
	return r;
}

/* "…"id":"X"…" -> X (static buffer per call site is enough for tests). */
static inline void srvt_json_str(const char *body, const char *key, char *out, size_t outlen)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	const char *p = strstr(body, pat);
	out[0] = '\0';
	if (!p)
		return;
	p += strlen(pat);
	size_t i = 0;
	while (p[i] && p[i] != '"' && i + 1 < outlen) {
		out[i] = p[i];
		i++;
	}
	out[i] = '\0';
}

/* Acquire a sandbox for (token, thread, agent) with the given spec JSON; returns its id. */
static inline void srvt_acquire(const char *sock, const char *token, const char *thread,
				const char *spec, char id[65])
{
	char hdr[512], body[1024];
	snprintf(hdr, sizeof(hdr), "X-Rung-Thread: %s\r\nX-Rung-Agent: agent1\r\n", thread);
	snprintf(body, sizeof(body), "{\"spec\": %s}", spec ? spec : "{\"kind\":\"test\"}");
	struct srvt_resp r = srvt_req(sock, "POST", "/v1/sandboxes", token, hdr, body);
	ck_assert_msg(r.status == 200, "acquire: %d %s", r.status, r.body);
	srvt_json_str(r.body, "id", id, 65);
	ck_assert_msg(id[0], "acquire: no id in %s", r.body);
	srvt_resp_free(&r);
}

/* Dispose every sandbox through the API (as each known credential), stop the daemons, then
 * kill anything left (supervisors outlive their daemon by design) and remove the directory. */
static inline void srvt_teardown(struct srvt *t)
{
	for (int i = 0; i < 2; i++) {
		if (t->pid[i] <= 0)
			continue;
		const char *toks[] = {TOK_A, TOK_B, NULL};
		for (int k = 0; k < 3; k++) {
			struct srvt_resp r =
			    srvt_req(t->sock[i], "DELETE", "/v1/sandboxes", toks[k], NULL, NULL);
			srvt_resp_free(&r);
		}
	}
	srvt_stop(t, 0, SIGKILL);
	srvt_stop(t, 1, SIGKILL);
	if (t->dir[0]) {
		/* what a test left in the store (a daemon it stopped itself could not be asked
		 * to dispose), disposed through the library before anything is killed: a
		 * supervisor killed by srvt_kill_matching would leave its sandbox's cgroup */
		struct rung_router_opts o = {.state_dir = t->state};
		rung_test_router_env(&o); /* the daemon's settings (its main read them) */
		struct rung_router *r = NULL;
		struct rung_err err = {0};
		struct rung_sandbox_info *v = NULL;
		size_t n = 0;
		if (rung_router_new(&o, &r, &err) == 0 &&
		    rung_list(r, NULL, NULL, &v, &n, &err) == 0) {
			for (size_t i = 0; i < n; i++)
				rung_dispose(r, v[i].id, NULL, &err);
			free(v);
		}
		for (int i = 0; i < 5 && srvt_kill_matching(t->dir) > 0; i++)
			usleep(100000);
		/* gc drops the emptied store's cgroup parent (rung-<store>): a daemon killed
		 * right after its last dispose had no gc pass left to do it */
		struct rung_gc_report rep;
		if (r) {
			if (rung_gc(r, &rep, &err) < 0)
				fprintf(stderr, "srvt teardown: gc of %s: %s\n", t->state, err.msg);
			rung_router_free(r);
		}
		/* a daemon killed mid-create (a pool's refill) leaves debris gc keeps for 60 s */
		rung_test_cgroup_debris_drop(t->state);
		srvt_rm_rf(t->dir);
		t->dir[0] = '\0';
	}
	if (t->reaper_fd > 0)
		close(t->reaper_fd);
	t->reaper_fd = -1;
}

#endif
