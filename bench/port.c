/*
 * bench/port.c: a forwarded port (rung_port_forward, what `rung port` runs) against a direct
 * loopback connection to the same server on the host. The server is tests/lib/ports_srv.h's
 * python3 script, run twice: inside a process-rung sandbox WITHOUT egress (reached through the
 * forward: host TCP -> relay -> agent socket -> the agent's relay -> TCP on the sandbox's
 * loopback) and on the host (reached directly). N interleaved rounds, each measuring both:
 *   download  SIZE MiB from the source server, connect to EOF
 *   upload    SIZE MiB to the sink server, connect to its close
 *   connect   a connection's round trip: connect, 4 bytes, half-close, the echo server's answer
 *             (median of 50 per round)
 * Prints the medians of each side and the median (with p25 and p75) of the per-round
 * forward/direct ratios, one "name value" per line. Needs root.
 * usage: port [N [SIZE_MIB]]   (defaults 5, 128)
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "rung/rung.h"
#include "tests/lib/ports_srv.h"

enum { SRC = 9101, SINK = 9102, ECHO = 9103 }; /* inside; on the host: + 1000 */

static uint64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int tcp(unsigned port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof(a)) == 0)
		return s;
	if (s >= 0)
		close(s);
	return -1;
}

static int tcp_listen(unsigned *port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 128) < 0 ||
	    getsockname(s, (struct sockaddr *)&a, &l) < 0)
		return -1;
	*port = ntohs(a.sin_port);
	return s;
}

/* Seconds to read to EOF (download) or to send n bytes and see the close (upload). */
static double xfer(unsigned port, size_t n, bool up)
{
	static char buf[1 << 20];
	uint64_t t0 = now_us();
	int s = tcp(port);
	if (s < 0)
		return -1;
	if (up) {
		for (size_t off = 0; off < n; off += sizeof(buf))
			if (rung_write_all(s, buf, sizeof(buf)) < 0)
				break;
		shutdown(s, SHUT_WR);
	}
	while (read(s, buf, sizeof(buf)) > 0)
		;
	close(s);
	return (double)(now_us() - t0) / 1e6;
}

static double conn_rt(unsigned port)
{
	char b[128];
	uint64_t t0 = now_us();
	int s = tcp(port);
	if (s < 0)
		return -1;
	rung_write_all(s, "ping", 4);
	shutdown(s, SHUT_WR);
	while (read(s, b, sizeof(b)) > 0)
		;
	close(s);
	return (double)(now_us() - t0) / 1000.0;
}

struct fwd {
	struct rung_sandbox *sb;
	unsigned port;
	int lfd, stop[2];
	pthread_t t;
};

static void *fwd_main(void *arg)
{
	struct fwd *f = arg;
	struct rung_err err = {0};
	if (rung_port_forward(f->sb, f->port, f->lfd, f->stop[0], 0, NULL, NULL, &err) < 0)
		fprintf(stderr, "port: forward %u: %s\n", f->port, err.msg);
	return NULL;
}

static int fwd_start(struct fwd *f, struct rung_sandbox *sb, unsigned port, unsigned *host_port)
{
	*f = (struct fwd){.sb = sb, .port = port};
	if ((f->lfd = tcp_listen(host_port)) < 0 || pipe(f->stop) < 0)
		return -1;
	return pthread_create(&f->t, NULL, fwd_main, f) == 0 ? 0 : -1;
}

static void fwd_stop(struct fwd *f)
{
	close(f->stop[1]);
	pthread_join(f->t, NULL);
	close(f->stop[0]);
	close(f->lfd);
}

/* The three servers inside (background processes) and on the host (children). */
static int servers(struct rung_sandbox *sb, const char *script, unsigned mib, pid_t host[3])
{
	struct rung_err err = {0};
	if (rung_write_file(sb, "/tmp/psrv.py", ports_srv_py, strlen(ports_srv_py), 0644, &err) <
	    0) {
		fprintf(stderr, "port: %s\n", err.msg);
		return -1;
	}
	const char *modes[3] = {"source", "sink", "echo"};
	unsigned ports[3] = {SRC, SINK, ECHO};
	char ms[16];
	snprintf(ms, sizeof(ms), "%u", mib);
	for (int i = 0; i < 3; i++) {
		char ps[16], hs[16], h[RUNG_PROC_HANDLE_LEN + 1];
		snprintf(ps, sizeof(ps), "%u", ports[i]);
		snprintf(hs, sizeof(hs), "%u", ports[i] + 1000);
		const char *argv[] = {"python3", "/tmp/psrv.py", modes[i], ps, ms, NULL};
		struct rung_proc_req req = {.argv = argv};
		if (rung_proc_start(sb, &req, h, &err) < 0) {
			fprintf(stderr, "port: %s\n", err.msg);
			return -1;
		}
		if ((host[i] = fork()) == 0) {
			execlp("python3", "python3", script, modes[i], hs, ms, (char *)NULL);
			_exit(127);
		}
	}
	for (int i = 0; i < 3; i++) /* both ready */
		for (int k = 0; k < 200; k++) {
			struct rung_port_conn c;
			int s = tcp(ports[i] + 1000);
			if (s >= 0)
				close(s);
			if (s >= 0 && rung_port_connect(sb, ports[i], &c, &err) == 0) {
				rung_port_conn_close(&c);
				break;
			}
			usleep(50000);
		}
	return 0;
}

struct sample {
	double down[2], up[2], conn[2]; /* [0] forward, [1] direct */
};

/* Forward and direct back to back, in an order that alternates by round (neither always runs
 * first, after the other's cache and scheduler state). */
static void round_once(const unsigned fp[3], size_t bytes, int round, struct sample *s)
{
	for (int k = 0; k < 2; k++) {
		int v = (k + round) % 2;
		unsigned base = v ? 1000 : 0;
		unsigned src = v ? SRC + base : fp[0], sink = v ? SINK + base : fp[1],
			 echo = v ? ECHO + base : fp[2];
		s->down[v] = xfer(src, bytes, false);
		s->up[v] = xfer(sink, bytes, true);
		double c[50];
		for (int i = 0; i < 50; i++)
			c[i] = conn_rt(echo);
		s->conn[v] = median(c, 50);
	}
}

/* The median of v[0..n) and its 25th and 75th percentiles (v is sorted). */
static void spread(double *v, int n, double *med, double *p25, double *p75)
{
	*med = median(v, n);
	*p25 = v[(n - 1) / 4];
	*p75 = v[(3 * (n - 1) + 3) / 4];
}

static void print_row(const char *name, const char *unit, double fwd[], double dir[], double rat[],
		      int n)
{
	double f, d, r, lo, hi, x;
	spread(fwd, n, &f, &x, &x);
	spread(dir, n, &d, &x, &x);
	spread(rat, n, &r, &lo, &hi);
	printf(strcmp(unit, "ms") ? "%s_%s_forward %.0f\n%s_%s_direct %.0f\n"
				  : "%s_%s_forward %.3f\n%s_%s_direct %.3f\n",
	       name, unit, f, name, unit, d);
	printf("%s_ratio %.2f\n%s_ratio_p25 %.2f\n%s_ratio_p75 %.2f\n", name, r, name, lo, name,
	       hi);
}

/* The interleaved rounds, then the connection costs alone; prints the figures: medians of
 * each side, and the median (p25, p75) of the per-round forward/direct ratios. */
static void measure(struct rung_sandbox *sb, const unsigned fp[3], int n, unsigned mib)
{
	struct rung_err err = {0};
	size_t bytes = (size_t)mib << 20;
	double dn[2][100], up[2][100], cn[2][100], rd[100], ru[100], rc[100];
	struct sample s;
	round_once(fp, bytes, 0, &s); /* warm */
	for (int i = 0; i < n; i++) {
		round_once(fp, bytes, i, &s);
		for (int v = 0; v < 2; v++) {
			dn[v][i] = (double)mib / s.down[v];
			up[v][i] = (double)mib / s.up[v];
			cn[v][i] = s.conn[v];
		}
		rd[i] = dn[0][i] / dn[1][i];
		ru[i] = up[0][i] / up[1][i];
		rc[i] = cn[0][i] / cn[1][i];
	}
	printf("rounds %d\nsize_mib %u\n", n, mib);
	print_row("download", "mib_s", dn[0], dn[1], rd, n);
	print_row("upload", "mib_s", up[0], up[1], ru, n);
	print_row("connect", "ms", cn[0], cn[1], rc, n);
	double pc[50];
	for (int i = 0; i < 50; i++) { /* the agent connection alone */
		struct rung_port_conn c;
		uint64_t t0 = now_us();
		if (rung_port_connect(sb, ECHO, &c, &err) == 0)
			rung_port_conn_close(&c);
		pc[i] = (double)(now_us() - t0) / 1000.0;
	}
	printf("rung_port_connect_ms %.3f\n", median(pc, 50));
	const char *tv[] = {"/bin/true", NULL}; /* the agent's per-request cost, for scale */
	struct rung_exec_req xq = {.argv = tv, .timeout_ms = 10000};
	for (int i = 0; i < 50; i++) {
		struct rung_exec_res xr;
		uint64_t t0 = now_us();
		if (rung_exec(sb, &xq, &xr, &err) == 0)
			rung_exec_res_release(&xr);
		pc[i] = (double)(now_us() - t0) / 1000.0;
	}
	printf("exec_true_ms %.3f\n", median(pc, 50));
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 5;
	unsigned mib = argc > 2 ? (unsigned)atoi(argv[2]) : 128;
	if (n < 1 || n > 100 || mib < 1 || mib > 4096) {
		fprintf(stderr, "usage: port [N (1..100) [SIZE_MIB (1..4096)]]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	char dir[] = "/tmp/rung-bench-port-XXXXXX", script[64];
	if (!mkdtemp(dir) || chmod(dir, 0711) < 0)
		return 1;
	snprintf(script, sizeof(script), "%s/psrv.py", dir);
	FILE *sf = fopen(script, "w");
	struct rung_err err = {0};
	if (!sf || fputs(ports_srv_py, sf) < 0 || fclose(sf) != 0) {
		rung_rm_rf(dir, &err);
		return 1;
	}
	struct rung_router_opts o = {0};
	if (rung_router_opts_load(&o, getenv, &err) < 0) { /* this main reads them */
		fprintf(stderr, "port: %s\n", err.msg);
		rung_rm_rf(dir, &err);
		return 1;
	}
	/* build/bench/port: the agent is build/rung-agent */
	char agent[4200], exe[4096];
	ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[el > 0 ? el : 0] = 0;
	char *sl = strrchr(exe, '/');
	if (sl)
		*sl = 0;
	snprintf(agent, sizeof(agent), "%s/../rung-agent", exe);
	if (!o.agent_path)
		o.agent_path = agent;
	char state[96];
	snprintf(state, sizeof(state), "%s/state", dir);
	o.state_dir = state;
	struct rung_router *r = NULL;
	struct rung_sandbox *sb = NULL;
	struct rung_spec spec;
	rung_spec_init(&spec);
	spec.kind = strdup("bench-port");
	spec.limits.cpus_milli = 2000; /* the forward, not the CFS quota, is measured */
	struct rung_key k = {.scope = "bench-port", .thread = "t", .agent = "a"};
	if (rung_router_new(&o, &r, &err) < 0 || rung_acquire(r, &k, &spec, &sb, NULL, &err) < 0) {
		fprintf(stderr, "port: %s\n", err.msg);
		rung_router_free(r);
		rung_spec_release(&spec);
		rung_rm_rf(dir, &err);
		return 1;
	}
	pid_t host[3] = {0};
	struct fwd f[3];
	unsigned fp[3];
	int rc = servers(sb, script, mib, host);
	unsigned ports[3] = {SRC, SINK, ECHO};
	for (int i = 0; rc == 0 && i < 3; i++)
		rc = fwd_start(&f[i], sb, ports[i], &fp[i]);
	if (rc == 0) {
		measure(sb, fp, n, mib);
		for (int i = 0; i < 3; i++)
			fwd_stop(&f[i]);
	}
	for (int i = 0; i < 3; i++)
		if (host[i] > 0) {
			kill(host[i], SIGTERM);
			waitpid(host[i], NULL, 0);
		}
	rung_dispose(r, rung_sandbox_id(sb), NULL, &err);
	rung_sandbox_close(sb);
	rung_spec_release(&spec);
	rung_router_free(r);
	struct rung_err e2 = {0};
	rung_rm_rf(dir, &e2);
	return rc == 0 ? 0 : 1;
}
