/*
 * bench/relay.c: common/relay.c alone, without a sandbox: a source thread sends SIZE MiB over
 * TCP on the host's loopback to a sink (the main thread) that reads to EOF, three ways in each
 * round, the order rotating by round:
 *   direct  source -> TCP -> sink (the peer: what a direct connection costs)
 *   copy    source -> TCP -> relay (a foreign b: recv/send through its buffer) -> TCP -> sink,
 *           what a forward does with the socket the agent passed (runtime/ports.c)
 *   splice  the same relay with splice(2) through a pipe (a socket no one else holds)
 * For each: MiB/s, and the CPU the whole process spent per MiB (getrusage: source, relay and
 * sink threads, with the loopback's softirq work they run), so that the relay's cost reads
 * apart from the machine's scheduling noise; and the relay thread's and the sink's own CPU
 * per MiB (where a splice moves the cost). Prints medians of each and the median (p25, p75)
 * of the per-round ratios to direct, one "name value" per line. No root needed.
 * usage: relay [N [SIZE_MIB]]   (defaults 7, 256)
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/relay.h"

enum { DIRECT, COPY, SPLICE, NWAYS };
static const char *const way_name[NWAYS] = {"direct", "copy", "splice"};

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
	       (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static double thread_cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* q-quantile (0..1) of v's n values (v is left as it is), nearest rank */
static double quant(const double *v, int n, double q)
{
	double s[1000];
	for (int i = 0; i < n; i++)
		s[i] = v[i];
	qsort(s, (size_t)n, sizeof(*s), cmp);
	return s[(int)(q * (n - 1) + 0.5)];
}

static int tcp_listen(unsigned *port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	if (s < 0 || bind(s, (struct sockaddr *)&a, l) < 0 || listen(s, 8) < 0 ||
	    getsockname(s, (struct sockaddr *)&a, &l) < 0) {
		perror("relay: listen");
		exit(1);
	}
	*port = ntohs(a.sin_port);
	return s;
}

static int tcp_connect(unsigned port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("relay: connect");
		exit(1);
	}
	return s;
}

struct source {
	int fd;
	size_t bytes;
};

static void *source_main(void *arg)
{
	static char blk[1 << 20];
	struct source *s = arg;
	for (size_t sent = 0; sent < s->bytes; sent += sizeof(blk))
		for (size_t off = 0; off < sizeof(blk);) {
			ssize_t k = write(s->fd, blk + off, sizeof(blk) - off);
			if (k <= 0)
				return NULL;
			off += (size_t)k;
		}
	shutdown(s->fd, SHUT_WR);
	return NULL;
}

struct relay_job {
	int a, b;
	unsigned flags;
	int rc;
	double cpu; /* the relay thread's, seconds */
};

static void *relay_main(void *arg)
{
	struct relay_job *j = arg;
	struct rung_err err = {0};
	double c0 = thread_cpu_s();
	j->rc = rung_relay_ex(j->a, j->b, j->flags, -1, NULL, &err);
	if (j->rc < 0)
		fprintf(stderr, "relay: %s\n", err.msg);
	j->cpu = thread_cpu_s() - c0;
	return NULL;
}

struct result {
	double mib_s, cpu, relay_cpu, sink_cpu; /* CPU: ms per MiB */
};

/* One transfer. */
static void one(int way, size_t mib, struct result *res)
{
	static char buf[1 << 20];
	unsigned p_in, p_out;
	int l_in = tcp_listen(&p_in), l_out = tcp_listen(&p_out);
	struct source src = {.fd = tcp_connect(way == DIRECT ? p_out : p_in), .bytes = mib << 20};
	struct relay_job j = {.a = -1, .b = -1};
	pthread_t rt, st;
	if (way != DIRECT) {
		j.a = accept4(l_in, NULL, NULL, SOCK_CLOEXEC);
		j.b = tcp_connect(p_out);
		j.flags = way == COPY ? RUNG_RELAY_B_FOREIGN : 0;
	}
	int sink = accept4(l_out, NULL, NULL, SOCK_CLOEXEC);
	if (sink < 0 || (way != DIRECT && j.a < 0)) {
		perror("relay: accept");
		exit(1);
	}
	double c0 = cpu_s(), t0 = now_s(), s0 = thread_cpu_s();
	if (way != DIRECT && pthread_create(&rt, NULL, relay_main, &j) != 0)
		exit(1);
	if (pthread_create(&st, NULL, source_main, &src) != 0)
		exit(1);
	size_t got = 0;
	ssize_t k;
	while ((k = read(sink, buf, sizeof(buf))) > 0)
		got += (size_t)k;
	double t = now_s() - t0, sc = thread_cpu_s() - s0;
	shutdown(sink, SHUT_WR); /* the relay's other direction ends too */
	pthread_join(st, NULL);
	if (way != DIRECT)
		pthread_join(rt, NULL);
	double c = cpu_s() - c0;
	if (got != src.bytes || (way != DIRECT && j.rc != 0)) {
		fprintf(stderr, "relay: %s moved %zu of %zu bytes\n", way_name[way], got,
			src.bytes);
		exit(1);
	}
	*res = (struct result){.mib_s = (double)mib / t,
			       .cpu = c * 1000 / (double)mib,
			       .relay_cpu = j.cpu * 1000 / (double)mib,
			       .sink_cpu = sc * 1000 / (double)mib};
	close(sink);
	close(src.fd);
	if (j.a >= 0) {
		close(j.a);
		close(j.b);
	}
	close(l_in);
	close(l_out);
}

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: relay [N [SIZE_MIB]]   (defaults 7, 256; bench/README.md)\n");
		return 0;
	}
	int n = argc > 1 ? atoi(argv[1]) : 7;
	size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 256;
	if (argc > 3 || n < 1 || n > 1000 || mib < 1 || mib > 65536) {
		fprintf(stderr, "usage: relay [N [SIZE_MIB]]   (N 1..1000, SIZE_MIB 1..65536)\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	double *rate = calloc((size_t)(NWAYS * n), sizeof(double));
	double *cpu = calloc((size_t)(NWAYS * n), sizeof(double));
	double *rcpu = calloc((size_t)(NWAYS * n), sizeof(double));
	double *scpu = calloc((size_t)(NWAYS * n), sizeof(double));
	double *ratio = calloc((size_t)n, sizeof(double));
	if (!rate || !cpu || !rcpu || !scpu || !ratio)
		return 1;
	for (int r = 0; r < n; r++)
		for (int i = 0; i < NWAYS; i++) {
			int w = (i + r) % NWAYS; /* rotating order */
			struct result x;
			one(w, mib, &x);
			rate[w * n + r] = x.mib_s;
			cpu[w * n + r] = x.cpu;
			rcpu[w * n + r] = x.relay_cpu;
			scpu[w * n + r] = x.sink_cpu;
		}
	printf("rounds %d\nsize_mib %zu\n", n, mib);
	for (int w = 0; w < NWAYS; w++) {
		if (w != DIRECT) {
			for (int r = 0; r < n; r++)
				ratio[r] = rate[w * n + r] / rate[DIRECT * n + r];
			printf("%s_ratio %.2f\n%s_ratio_p25 %.2f\n%s_ratio_p75 %.2f\n", way_name[w],
			       quant(ratio, n, 0.5), way_name[w], quant(ratio, n, 0.25),
			       way_name[w], quant(ratio, n, 0.75));
			for (int r = 0; r < n; r++)
				ratio[r] = cpu[w * n + r] / cpu[DIRECT * n + r];
			printf("%s_cpu_ratio %.2f\n", way_name[w], quant(ratio, n, 0.5));
			printf("%s_relay_cpu_ms_per_mib %.3f\n", way_name[w],
			       quant(rcpu + w * n, n, 0.5));
		}
		printf("%s_mib_s %.0f\n%s_cpu_ms_per_mib %.3f\n", way_name[w],
		       quant(rate + w * n, n, 0.5), way_name[w], quant(cpu + w * n, n, 0.5));
		printf("%s_sink_cpu_ms_per_mib %.3f\n", way_name[w], quant(scpu + w * n, n, 0.5));
	}
	free(rate);
	free(cpu);
	free(rcpu);
	free(scpu);
	free(ratio);
	return 0;
}
