/*
 * tests/lib/ports_cases.c: the forwarded-port cases of e2e_ports_* (check_e2e_ports_*.c), written
 * once for every rung. Each sandbox has NO egress (no network device but loopback): everything
 * reaches it through the agent channel. A python3 server inside (tests/lib/ports_srv.h) is
 * reached through rung_port_connect and through `rung port` (foreground and --detach); the
 * agent refuses ports out of range even when the host's check is bypassed; a flooding server
 * does not grow the forwarder's RSS; 100 connections leave no fd, thread, socket or process;
 * asked for the socket itself (PORT_FD), the agent passes it on a Unix channel only.
 */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/proto.h"
#include "common/util.h"
#include "runtime/rt-internal.h"
#include "tests/lib/ports_cases.h"
#include "tests/lib/ports_srv.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

static const struct ports_env *env;

struct fx {
	struct rung_router *r;
	struct rung_sandbox *sb;
	char *state;
	char id[65];
};

static void fx_open(struct fx *f, const char *thread)
{
	f->r = env->router(&f->state);
	f->sb = env->acquire(f->r, thread);
	snprintf(f->id, sizeof(f->id), "%s", rung_sandbox_id(f->sb));
	/* no egress at all: loopback is the sandbox's only interface */
	char *nets = spine_sh_ok(f->sb, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | "
					"tr '\\n' ' '");
	ck_assert_msg(!strcmp(nets, "lo "), "interfaces: %s", nets);
	free(nets);
}

static void fx_close(struct fx *f)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(f->r, f->id, NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(f->sb);
	rung_router_free(f->r);
	free(f->state);
}

/* The server of ports_srv.h in the background, waited for until it accepts. */
static void srv_start(struct fx *f, const char *mode, unsigned port)
{
	struct rung_err err = {0};
	struct rung_exec_res res;
	if (spine_sh(f->sb, "command -v python3", &res) != 0) {
		rung_exec_res_release(&res);
		ck_abort_msg("the sandbox has no python3 (the port cases' server)");
	}
	rung_exec_res_release(&res);
	ck_assert_msg(rung_write_file(f->sb, "/tmp/psrv.py", ports_srv_py, strlen(ports_srv_py),
				      0644, &err) == 0,
		      "%s", err.msg);
	char ps[16], h[RUNG_PROC_HANDLE_LEN + 1];
	snprintf(ps, sizeof(ps), "%u", port);
	const char *argv[] = {"python3", "/tmp/psrv.py", mode, ps, "64", NULL};
	struct rung_proc_req req = {.argv = argv};
	ck_assert_msg(rung_proc_start(f->sb, &req, h, &err) == 0, "%s", err.msg);
	for (int i = 0; i < 200; i++) {
		struct rung_port_conn c;
		int r = rung_port_connect(f->sb, port, &c, &err);
		if (r == 0) {
			rung_port_conn_close(&c);
			return;
		}
		ck_assert_msg(r == -ECONNREFUSED, "%s", err.msg);
		usleep(50000);
	}
	ck_abort_msg("the %s server on port %u never listened", mode, port);
}

static void send_all(int fd, const void *p, size_t n)
{
	ck_assert_int_eq(rung_write_all(fd, p, n), 0);
}

/* Everything until EOF (at most max bytes, within 30 s). */
static char *recv_all(int fd, size_t max, size_t *len)
{
	char *buf = malloc(max + 1);
	size_t got = 0;
	uint64_t end = rung_now_ms() + 30000;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ck_assert_msg(rung_now_ms() < end, "no EOF within 30 s (%zu bytes)", got);
		if (poll(&p, 1, 1000) <= 0)
			continue;
		ssize_t n = read(fd, buf + got, max - got);
		ck_assert_msg(n >= 0, "read: %s", strerror(errno));
		if (n == 0)
			break;
		got += (size_t)n;
		ck_assert_msg(got < max, "more than %zu bytes", max);
	}
	buf[got] = 0;
	if (len)
		*len = got;
	return buf;
}

static int tcp_connect(unsigned port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	ck_assert_msg(connect(s, (struct sockaddr *)&a, sizeof(a)) == 0, "connect :%u: %s", port,
		      strerror(errno));
	return s;
}

/* An HTTP GET on fd, half-closed after the request: the whole answer. */
static char *http_get(int fd, const char *path)
{
	char req[512];
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nX-Probe: p1\r\n\r\n", path);
	send_all(fd, req, strlen(req));
	shutdown(fd, SHUT_WR);
	return recv_all(fd, 1 << 20, NULL);
}

/* `rung port ID PORT --host-port 0 ...` in the background: its pid, the host port from its
 * --json line. */
struct fwd {
	pid_t pid;
	unsigned host_port;
};

/* --host for the next fwd_start (NULL: the default, loopback) */
static const char *fwd_host;

static void fwd_start(struct fx *f, unsigned port, bool detach, struct fwd *out)
{
	char bin[4096], ps[16];
	snprintf(bin, sizeof(bin), "%s/rung", rung_test_build_dir());
	snprintf(ps, sizeof(ps), "%u", port);
	int pp[2];
	ck_assert_int_eq(pipe(pp), 0);
	pid_t p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		dup2(pp[1], 1);
		close(pp[0]);
		const char *argv[16] = {bin, "--state-dir", f->state, "--json", "port", f->id,
					ps,  "--host-port", "0"};
		int n = 9;
		if (fwd_host) {
			argv[n++] = "--host";
			argv[n++] = fwd_host;
		}
		if (detach)
			argv[n++] = "--detach";
		argv[n] = NULL;
		const char *envp[] = {"PATH=/usr/bin:/bin", NULL};
		execve(bin, (char **)argv, (char **)envp);
		_exit(127);
	}
	close(pp[1]);
	char line[4096];
	size_t got = 0;
	uint64_t end = rung_now_ms() + 30000;
	while (got < sizeof(line) - 1 && !memchr(line, '\n', got)) {
		struct pollfd pl = {.fd = pp[0], .events = POLLIN};
		ck_assert_msg(rung_now_ms() < end, "rung port printed no line");
		if (poll(&pl, 1, 1000) <= 0)
			continue;
		ssize_t n = read(pp[0], line + got, sizeof(line) - 1 - got);
		ck_assert_msg(n > 0, "rung port exited without a line");
		got += (size_t)n;
	}
	line[got] = 0;
	close(pp[0]);
	const char *hp = strstr(line, "\"host_port\": ");
	ck_assert_msg(hp, "rung port said: %s", line);
	out->host_port = (unsigned)atoi(hp + 13);
	ck_assert_uint_gt(out->host_port, 0);
	out->pid = p;
	if (detach) {
		int st;
		ck_assert_int_eq(waitpid(p, &st, 0), p);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rung port --detach failed");
		const char *pid = strstr(line, "\"pid\": ");
		ck_assert_msg(pid, "%s", line);
		out->pid = atoi(pid + 7);
		ck_assert_msg(spine_pid_alive(out->pid), "the forwarder %d is not running",
			      out->pid);
	}
}

/* A foreground forwarder: SIGTERM, and it must exit 0 promptly. */
static void fwd_stop(struct fwd *w)
{
	int st;
	ck_assert_int_eq(kill(w->pid, SIGTERM), 0);
	ck_assert_int_eq(waitpid(w->pid, &st, 0), w->pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rung port ended with %d", st);
}

/* /proc/PID/fd entries (sockets: only those), /proc/PID/task entries, VmRSS in KiB */
static int count_fds(pid_t pid, bool sockets)
{
	int n = rung_test_count_fds_of(pid, NULL, sockets ? "socket:" : NULL);
	ck_assert_int_ge(n, 0);
	return n;
}

static int count_threads(pid_t pid)
{
	char d[64];
	snprintf(d, sizeof(d), "/proc/%d/task", (int)pid);
	return rung_test_count_entries(d);
}

static long rss_kib(pid_t pid)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	char *s = spine_slurp(p, NULL);
	ck_assert_ptr_nonnull(s);
	const char *v = strstr(s, "VmRSS:");
	long k = v ? atol(v + 6) : -1;
	free(s);
	return k;
}

/* The sandbox's processes, kernel threads left out (RUNG_TEST_PROCS_SH). */
static int sandbox_procs(struct fx *f)
{
	char *o = spine_sh_ok(f->sb, RUNG_TEST_PROCS_SH);
	int n = atoi(o);
	free(o);
	return n;
}

static void case_preview(void)
{
	struct fx f;
	fx_open(&f, "preview");
	srv_start(&f, "http", 8000);
	/* through the C API */
	struct rung_port_conn c;
	struct rung_err err = {0};
	ck_assert_msg(rung_port_connect(f.sb, 8000, &c, &err) == 0, "%s", err.msg);
	char *a = http_get(c.fd, "/api/one");
	ck_assert_msg(strstr(a, "HTTP/1.1 200 OK") && strstr(a, "path=/api/one probe=p1"), "%s", a);
	free(a);
	rung_port_conn_close(&c);
	/* through `rung port` */
	struct fwd w;
	fwd_start(&f, 8000, false, &w);
	for (int i = 0; i < 3; i++) {
		int s = tcp_connect(w.host_port);
		a = http_get(s, "/from-host");
		ck_assert_msg(strstr(a, "path=/from-host probe=p1 method=GET"), "%s", a);
		free(a);
		close(s);
	}
	/* a suspended sandbox is resumed by the next connection */
	ck_assert_msg(rung_suspend(f.sb, &err) == 0, "%s", err.msg);
	int s = tcp_connect(w.host_port);
	a = http_get(s, "/after-suspend");
	ck_assert_msg(strstr(a, "path=/after-suspend"), "%s", a);
	free(a);
	close(s);
	fwd_stop(&w);
	fx_close(&f);
}

/* 4 MiB up, half-close, the digest back: bytes intact and EOF passed on both ways. */
static void case_halfclose(void)
{
	struct fx f;
	fx_open(&f, "half");
	srv_start(&f, "echo", 8001);
	size_t n = 4u << 20;
	unsigned char *data = malloc(n);
	for (size_t i = 0; i < n; i++)
		data[i] = (unsigned char)(i * 2654435761u >> 13);
	char want[128], hex[RUNG_SHA256_HEX_LEN + 1];
	rung_sha256_hex(data, n, hex);
	snprintf(want, sizeof(want), "got %zu %s\n", n, hex);
	struct rung_port_conn c;
	struct rung_err err = {0};
	ck_assert_msg(rung_port_connect(f.sb, 8001, &c, &err) == 0, "%s", err.msg);
	send_all(c.fd, data, n);
	shutdown(c.fd, SHUT_WR);
	char *a = recv_all(c.fd, 4096, NULL);
	ck_assert_str_eq(a, want);
	free(a);
	rung_port_conn_close(&c);
	/* and through the CLI's relay */
	struct fwd w;
	fwd_start(&f, 8001, false, &w);
	int s = tcp_connect(w.host_port);
	send_all(s, data, n);
	shutdown(s, SHUT_WR);
	a = recv_all(s, 4096, NULL);
	ck_assert_str_eq(a, want);
	free(a);
	close(s);
	fwd_stop(&w);
	free(data);
	fx_close(&f);
}

/* A raw PORT_CONNECT with payload b: the agent must answer ERROR with errno want. */
static void raw_refused(struct fx *f, const struct rung_buf *b, int want)
{
	int busy;
	struct rung_err err = {0};
	int fd = rt_sandbox_agent(f->sb, &busy, &err);
	ck_assert_msg(fd >= 0, "%s", err.msg);
	ck_assert_int_eq(rung_frame_write_buf(fd, RUNG_MSG_PORT_CONNECT, b, &err), 0);
	struct rung_frame fr;
	ck_assert_msg(rung_frame_read(fd, &fr, rung_now_ms() + 10000, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(fr.type, RUNG_MSG_ERROR);
	struct rung_err got = {0};
	rung_proto_error_decode(fr.payload, fr.len, &got);
	ck_assert_msg(got.code == want, "errno %d (%s), want %d", got.code, got.msg, want);
	rung_frame_release(&fr);
	close(fd);
	if (busy >= 0)
		close(busy);
}

static void case_refused(void)
{
	struct fx f;
	fx_open(&f, "refused");
	struct rung_port_conn c;
	struct rung_err err = {0};
	ck_assert_int_eq(rung_port_connect(f.sb, 0, &c, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "port 0"), "%s", err.msg);
	ck_assert_int_eq(rung_port_connect(f.sb, 70000, &c, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "port 70000"), "%s", err.msg);
	ck_assert_int_eq(rung_port_connect(f.sb, 1, &c, &err), -ECONNREFUSED);
	ck_assert_int_eq(c.fd, -1);
	/* the agent checks too: the host's check bypassed */
	unsigned long long bad[] = {0, 70000, 1ull << 40};
	for (size_t i = 0; i < 3; i++) {
		struct rung_buf b = {0};
		rung_buf_put_u64(&b, RUNG_TAG_PORT, bad[i]);
		raw_refused(&f, &b, EINVAL);
		rung_buf_release(&b);
	}
	struct rung_buf b = {0};
	raw_refused(&f, &b, EINVAL);			  /* no port */
	rung_buf_put_str(&b, RUNG_TAG_PATH, "127.0.0.1"); /* an address: not a field it takes */
	raw_refused(&f, &b, EPROTO);
	rung_buf_release(&b);
	rung_buf_put_u64(&b, RUNG_TAG_PORT, 80);
	rung_buf_put_u64(&b, RUNG_TAG_PORT, 81);
	raw_refused(&f, &b, EPROTO);
	rung_buf_release(&b);
	rung_buf_put_u64(&b, RUNG_TAG_PORT, 80); /* PORT_FD: 0 or 1, once */
	rung_buf_put_u64(&b, RUNG_TAG_PORT_FD, 2);
	raw_refused(&f, &b, EINVAL);
	rung_buf_release(&b);
	rung_buf_put_u64(&b, RUNG_TAG_PORT, 80);
	rung_buf_put_u64(&b, RUNG_TAG_PORT_FD, 1);
	rung_buf_put_u64(&b, RUNG_TAG_PORT_FD, 1);
	raw_refused(&f, &b, EPROTO);
	rung_buf_release(&b);
	/* the CLI refuses them by name */
	const char *a0[] = {"--state-dir", f.state, "port", f.id, "0", NULL};
	struct spine_run res;
	spine_cli_run(&res, NULL, a0);
	ck_assert_int_eq(res.status, 2);
	ck_assert_msg(strstr(res.err, "SANDBOX_PORT: '0'"), "%s", res.err);
	spine_run_release(&res);
	const char *a1[] = {"--state-dir", f.state, "port", f.id, "70000", NULL};
	spine_cli_run(&res, NULL, a1);
	ck_assert_int_eq(res.status, 2);
	ck_assert_msg(strstr(res.err, "'70000'"), "%s", res.err);
	spine_run_release(&res);
	fx_close(&f);
}

/* A server that floods a client that does not read: the forwarder's RSS stays put. */
static void case_flood(void)
{
	struct fx f;
	fx_open(&f, "flood");
	srv_start(&f, "flood", 8002);
	struct fwd w;
	fwd_start(&f, 8002, false, &w);
	long before = rss_kib(w.pid);
	int s[4];
	for (int i = 0; i < 4; i++)
		s[i] = tcp_connect(w.host_port);
	sleep(3);
	long mid = rss_kib(w.pid);
	sleep(3);
	long after = rss_kib(w.pid);
	fprintf(stderr,
		"ports flood: forwarder RSS %ld KiB idle, %ld KiB after 3 s of 4 "
		"flooding connections unread, %ld KiB after 6 s\n",
		before, mid, after);
	/* 4 connections x 1 MiB (the flooding direction's relay buffer), and no growth over time */
	ck_assert_msg(after - before < 8 * 1024, "RSS grew from %ld to %ld KiB", before, after);
	ck_assert_msg(after - mid < 1024, "RSS still growing: %ld -> %ld KiB", mid, after);
	/* the stream flows when read: 32 MiB from one of them */
	char *buf = malloc(1 << 20);
	size_t got = 0;
	while (got < (32u << 20)) {
		ssize_t n = read(s[0], buf, 1 << 20);
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
	}
	free(buf);
	for (int i = 0; i < 4; i++)
		close(s[i]);
	fwd_stop(&w);
	fx_close(&f);
}

static void one_echo(int fd)
{
	send_all(fd, "ping", 4);
	shutdown(fd, SHUT_WR);
	char *a = recv_all(fd, 4096, NULL);
	ck_assert_msg(!strncmp(a, "got 4 ", 6), "%s", a);
	free(a);
}

/* PORT_CONNECT(PORT, PORT_FD 1) by hand: on a Unix agent channel the agent answers
 * RESULT(PORT_FD 1) and passes the connected socket (TCP, peer 127.0.0.1:port), which then
 * works with the agent's channel closed; on the vm rung (vsock) RESULT is empty and the
 * channel itself relays. */
static void raw_passed(struct fx *f, unsigned port)
{
	int busy;
	struct rung_err err = {0};
	int fd = rt_sandbox_agent(f->sb, &busy, &err);
	ck_assert_msg(fd >= 0, "%s", err.msg);
	struct rung_buf b = {0};
	rung_buf_put_u64(&b, RUNG_TAG_PORT, port);
	rung_buf_put_u64(&b, RUNG_TAG_PORT_FD, 1);
	ck_assert_int_eq(rung_frame_write_buf(fd, RUNG_MSG_PORT_CONNECT, &b, &err), 0);
	rung_buf_release(&b);
	struct rung_frame fr;
	ck_assert_msg(rung_frame_read(fd, &fr, rung_now_ms() + 10000, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(fr.type, RUNG_MSG_RESULT);
	if (rt_sandbox_inner(f->sb)->meta.iso == RUNG_ISO_VM) {
		ck_assert_uint_eq(fr.len, 0);
		one_echo(fd);
	} else {
		ck_assert_uint_gt(fr.len, 0);
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int))];
		} ctl;
		char byte;
		struct iovec iov = {&byte, 1};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = ctl.b,
				    .msg_controllen = sizeof(ctl.b)};
		ck_assert_int_eq(recvmsg(fd, &mh, MSG_CMSG_CLOEXEC), 1);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		ck_assert(c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS);
		int s;
		memcpy(&s, CMSG_DATA(c), sizeof(s));
		close(fd);
		fd = -1;
		struct sockaddr_in a;
		socklen_t al = sizeof(a);
		int proto = 0;
		socklen_t pl = sizeof(proto);
		ck_assert_int_eq(getsockopt(s, SOL_SOCKET, SO_PROTOCOL, &proto, &pl), 0);
		ck_assert_int_eq(proto, IPPROTO_TCP);
		ck_assert_int_eq(getpeername(s, (struct sockaddr *)&a, &al), 0);
		ck_assert_uint_eq(ntohl(a.sin_addr.s_addr), INADDR_LOOPBACK);
		ck_assert_uint_eq(ntohs(a.sin_port), port);
		one_echo(s);
		close(s);
	}
	rung_frame_release(&fr);
	if (fd >= 0)
		close(fd);
	if (busy >= 0)
		close(busy);
}

struct counts {
	int fds, socks, threads, sb_procs;
};

static void counts_take(struct fx *f, pid_t fwd, struct counts *c)
{
	c->fds = count_fds(fwd, false);
	c->socks = count_fds(fwd, true);
	c->threads = count_threads(fwd);
	c->sb_procs = sandbox_procs(f);
}

static bool counts_same(const struct counts *a, const struct counts *b)
{
	return a->fds == b->fds && a->socks == b->socks && a->threads == b->threads &&
	       a->sb_procs == b->sb_procs;
}

/* 100 connections through `rung port` and 100 through rung_port_connect: no fd, socket,
 * thread (forwarder, this process), or process inside the sandbox left over. */
static void case_cycles(void)
{
	struct fx f;
	fx_open(&f, "cycles");
	srv_start(&f, "echo", 8003);
	struct fwd w;
	fwd_start(&f, 8003, false, &w);
	int s = tcp_connect(w.host_port); /* warm: the first connection's lazy allocations */
	one_echo(s);
	close(s);
	raw_passed(&f, 8003);
	struct counts c0, c1, me0, me1;
	usleep(200000);
	counts_take(&f, w.pid, &c0);
	counts_take(&f, getpid(), &me0);
	for (int i = 0; i < 100; i++) {
		s = tcp_connect(w.host_port);
		one_echo(s);
		close(s);
		struct rung_port_conn c;
		struct rung_err err = {0};
		ck_assert_msg(rung_port_connect(f.sb, 8003, &c, &err) == 0, "%s", err.msg);
		one_echo(c.fd);
		rung_port_conn_close(&c);
	}
	/* a relay thread ends just after its connection does */
	for (int i = 0; i < 50; i++) {
		counts_take(&f, w.pid, &c1);
		counts_take(&f, getpid(), &me1);
		if (counts_same(&c0, &c1) && counts_same(&me0, &me1))
			break;
		usleep(100000);
	}
	ck_assert_msg(counts_same(&c0, &c1),
		      "forwarder: fds %d -> %d, sockets %d -> %d, threads %d -> %d; sandbox "
		      "processes %d -> %d",
		      c0.fds, c1.fds, c0.socks, c1.socks, c0.threads, c1.threads, c0.sb_procs,
		      c1.sb_procs);
	ck_assert_msg(counts_same(&me0, &me1),
		      "this process: fds %d -> %d, sockets %d -> %d, "
		      "threads %d -> %d",
		      me0.fds, me1.fds, me0.socks, me1.socks, me0.threads, me1.threads);
	fwd_stop(&w);
	fx_close(&f);
}

static char *cli_out(struct fx *f, const char *a, const char *b, const char *c, int want)
{
	const char *args[] = {"--state-dir", f->state, "port", a, b, c, NULL};
	struct spine_run res;
	spine_cli_run(&res, NULL, args);
	ck_assert_msg(res.status == want, "rung port %s %s: %d: %s", a, b, res.status, res.err);
	free(res.err);
	return res.out;
}

/* --detach: a forwarding process listed by ls, gone at rm, and gone at dispose. */
static void case_detach(void)
{
	struct fx f;
	fx_open(&f, "detach");
	srv_start(&f, "http", 8004);
	struct fwd w;
	fwd_start(&f, 8004, true, &w);
	int s = tcp_connect(w.host_port);
	char *a = http_get(s, "/detached");
	ck_assert_msg(strstr(a, "path=/detached"), "%s", a);
	free(a);
	close(s);
	char *ls = cli_out(&f, "ls", f.id, "--json", 0);
	char want[128];
	snprintf(want, sizeof(want), "{\"port\": 8004, \"host\": \"127.0.0.1\", \"host_port\": %u",
		 w.host_port);
	ck_assert_msg(strstr(ls, want), "%s", ls);
	free(ls);
	/* rung inspect shows it, with its host address */
	const char *ia[] = {"--state-dir", f.state, "inspect", f.id, NULL};
	struct spine_run ir;
	spine_cli_run(&ir, NULL, ia);
	ck_assert_int_eq(ir.status, 0);
	snprintf(want, sizeof(want), "\"host_port\": %u,\n      \"loopback\": true", w.host_port);
	ck_assert_msg(strstr(ir.out, "\"host\": \"127.0.0.1\"") && strstr(ir.out, want), "%s",
		      ir.out);
	spine_run_release(&ir);
	free(cli_out(&f, "rm", f.id, "8004", 0));
	ck_assert_msg(spine_wait_gone(w.pid, 5000), "forwarder %d outlived rm", w.pid);
	ls = cli_out(&f, "ls", f.id, "--json", 0);
	ck_assert_msg(strstr(ls, "\"ports\": []"), "%s", ls);
	free(ls);
	free(cli_out(&f, "rm", f.id, "8004", 2)); /* nothing left to remove */
	/* a forward on a non-loopback address is flagged in ls and inspect; dispose ends it */
	fwd_host = "0.0.0.0";
	fwd_start(&f, 8004, true, &w);
	fwd_host = NULL;
	ls = cli_out(&f, "ls", f.id, "--json", 0);
	snprintf(want, sizeof(want), "\"host\": \"0.0.0.0\", \"host_port\": %u", w.host_port);
	ck_assert_msg(strstr(ls, want) && strstr(ls, "\"loopback\": false"), "%s", ls);
	free(ls);
	spine_cli_run(&ir, NULL, ia);
	ck_assert_msg(strstr(ir.out, "\"host\": \"0.0.0.0\"") &&
			  strstr(ir.out, "\"loopback\": false"),
		      "%s", ir.out);
	spine_run_release(&ir);
	fx_close(&f);
	ck_assert_msg(spine_wait_gone(w.pid, 10000), "forwarder %d outlived dispose", w.pid);
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(w.host_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	ck_assert_msg(connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0,
		      "the listener outlived dispose");
	close(s);
}

void ports_cases_run(const struct ports_env *e, enum ports_case c)
{
	env = e;
	env->require();
	signal(SIGPIPE, SIG_IGN);
	switch (c) {
	case PORTS_PREVIEW:
		case_preview();
		break;
	case PORTS_HALFCLOSE:
		case_halfclose();
		break;
	case PORTS_REFUSED:
		case_refused();
		break;
	case PORTS_FLOOD:
		case_flood();
		break;
	case PORTS_CYCLES:
		case_cycles();
		break;
	case PORTS_DETACH:
		case_detach();
		break;
	}
}
