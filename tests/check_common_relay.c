/*
 * tests/check_common_relay.c: common/relay.c, the relay of forwarded ports (with socketpairs and
 * TCP on loopback, no sandbox): bytes intact both ways, half-close passed on, a flood into a
 * side that does not read stalls with a bounded amount in flight, a peer's reset ends it,
 * cancel, a foreign side (a passed socket) whose O_NONBLOCK another holder clears; and the
 * PORT_CONNECT request's decoding (range, missing, repeated, foreign fields, PORT_FD).
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/proto.h"
#include "common/relay.h"
#include "common/util.h"

static int port_decode(const struct rung_buf *b, uint16_t *port, struct rung_err *err)
{
	bool want_fd;
	return rung_proto_port_decode(b->data, (uint32_t)b->len, port, &want_fd, err);
}

START_TEST(port_request)
{
	struct rung_err err = {0};
	uint16_t port;
	struct rung_buf b = {0};
	rung_buf_put_u64(&b, RUNG_TAG_PORT, 8080);
	ck_assert_int_eq(port_decode(&b, &port, &err), 0);
	ck_assert_uint_eq(port, 8080);
	rung_buf_release(&b);
	unsigned long long bad[] = {0, 65536, 70000, ~0ull};
	for (size_t i = 0; i < 4; i++) {
		rung_buf_put_u64(&b, RUNG_TAG_PORT, bad[i]);
		ck_assert_int_eq(port_decode(&b, &port, &err), -EINVAL);
		ck_assert_msg(strstr(err.msg, "out of range"), "%s", err.msg);
		rung_buf_release(&b);
	}
	ck_assert_int_eq(port_decode(&b, &port, &err), -EINVAL); /* empty: no port */
	rung_buf_put_u64(&b, RUNG_TAG_PORT, 1);
	rung_buf_put_u64(&b, RUNG_TAG_PORT, 2);
	ck_assert_int_eq(port_decode(&b, &port, &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_PATH, "10.0.0.1");
	ck_assert_int_eq(port_decode(&b, &port, &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_bytes(&b, RUNG_TAG_PORT, "\0\0", 2); /* not a u64 */
	ck_assert_int_lt(port_decode(&b, &port, &err), 0);
	rung_buf_release(&b);
	const uint8_t trunc[] = {0, 50, 0, 0, 0, 8, 0}; /* a field cut short */
	bool want_fd = false;
	ck_assert_int_lt(rung_proto_port_decode(trunc, sizeof(trunc), &port, &want_fd, &err), 0);
	/* PORT_FD: 0 or 1, at most once, besides the port */
	rung_buf_put_u64(&b, RUNG_TAG_PORT, 80);
	rung_buf_put_u64(&b, RUNG_TAG_PORT_FD, 1);
	ck_assert_int_eq(rung_proto_port_decode(b.data, (uint32_t)b.len, &port, &want_fd, &err), 0);
	ck_assert(want_fd);
	ck_assert_uint_eq(port, 80);
	rung_buf_put_u64(&b, RUNG_TAG_PORT_FD, 0);
	ck_assert_int_eq(port_decode(&b, &port, &err), -EPROTO);
	ck_assert_msg(strstr(err.msg, "port_fd given twice"), "%s", err.msg);
	rung_buf_release(&b);
	rung_buf_put_u64(&b, RUNG_TAG_PORT, 80);
	rung_buf_put_u64(&b, RUNG_TAG_PORT_FD, 2);
	ck_assert_int_eq(port_decode(&b, &port, &err), -EINVAL);
	rung_buf_release(&b);
	rung_buf_put_u64(&b, RUNG_TAG_PORT, 80);
	rung_buf_put_u64(&b, RUNG_TAG_PORT_FD, 0);
	ck_assert_int_eq(rung_proto_port_decode(b.data, (uint32_t)b.len, &port, &want_fd, &err), 0);
	ck_assert(!want_fd);
	rung_buf_release(&b);
}
END_TEST

struct relay_job {
	int a, b, cancel, rc;
	unsigned flags;
	struct rung_relay_stats st;
	pthread_t t;
};

static void *relay_main(void *arg)
{
	struct relay_job *j = arg;
	struct rung_err err = {0};
	j->rc = rung_relay_ex(j->a, j->b, j->flags, j->cancel, &j->st, &err);
	return NULL;
}

/* client <-> [a relay b] <-> server, all socketpairs */
static void start_ex(struct relay_job *j, int *client, int *server, int cancel, unsigned flags)
{
	int p[2], q[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, q), 0);
	*client = p[0];
	*server = q[1];
	*j = (struct relay_job){.a = p[1], .b = q[0], .cancel = cancel, .flags = flags};
	ck_assert_int_eq(pthread_create(&j->t, NULL, relay_main, j), 0);
}

static void start(struct relay_job *j, int *client, int *server, int cancel)
{
	start_ex(j, client, server, cancel, 0);
}

static void finish(struct relay_job *j)
{
	pthread_join(j->t, NULL);
	close(j->a);
	close(j->b);
}

static char *read_eof(int fd, size_t *n)
{
	size_t cap = 1 << 20, got = 0;
	char *b = malloc(cap);
	ssize_t k;
	while ((k = read(fd, b + got, cap - got)) > 0) {
		got += (size_t)k;
		if (got == cap)
			b = realloc(b, cap *= 2);
	}
	*n = got;
	return b;
}

/* _i: 0, then RUNG_RELAY_B_FOREIGN (no splice: every byte through the buffers) */
START_TEST(both_ways_and_half_close)
{
	struct relay_job j;
	int c, s;
	start_ex(&j, &c, &s, -1, _i ? RUNG_RELAY_B_FOREIGN : 0);
	size_t n = 3u << 20;
	char *up = malloc(n);
	for (size_t i = 0; i < n; i++)
		up[i] = (char)(i * 31 + 7);
	/* the client sends everything and half-closes; the server reads to EOF, then answers */
	pid_t p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		close(s);
		_exit(rung_write_all(c, up, n) == 0 && shutdown(c, SHUT_WR) == 0 ? 0 : 1);
	}
	size_t got;
	char *in = read_eof(s, &got);
	ck_assert_uint_eq(got, n);
	ck_assert(memcmp(in, up, n) == 0);
	ck_assert_int_eq(rung_write_all(s, "answer", 6), 0);
	close(s);
	char *back = read_eof(c, &got);
	ck_assert_uint_eq(got, 6);
	ck_assert(memcmp(back, "answer", 6) == 0);
	int st;
	waitpid(p, &st, 0);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	finish(&j);
	ck_assert_int_eq(j.rc, 0);
	ck_assert_uint_eq(j.st.a_to_b, n);
	ck_assert_uint_eq(j.st.b_to_a, 6);
	close(c);
	free(up);
	free(in);
	free(back);
}
END_TEST

/* The server floods, the client never reads: what leaves the server is bounded by the socket
 * buffers and one relay pipe, whatever the flood's length. */
START_TEST(flood_is_bounded)
{
	struct relay_job j;
	int c, s;
	start(&j, &c, &s, -1);
	int sz = 65536;
	setsockopt(s, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(c, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	ck_assert_int_eq(rung_fd_set_nonblock(s, 1), 0);
	static char blk[65536];
	size_t sent = 0;
	uint64_t end = rung_now_ms() + 2000;
	while (rung_now_ms() < end) {
		ssize_t k = write(s, blk, sizeof(blk));
		if (k > 0)
			sent += (size_t)k;
		else
			usleep(10000);
	}
	/* two socketpairs' buffers (each way up to a few hundred KiB) + the 1 MiB pipe */
	ck_assert_msg(sent < (8u << 20), "%zu bytes left the flooding side", sent);
	ck_assert_uint_gt(sent, 0);
	close(c); /* the reader goes: the relay ends with an error, not a hang */
	close(s);
	finish(&j);
	ck_assert_int_lt(j.rc, 0);
}
END_TEST

/* A SEQPACKET side (message boundaries; on kernels where it does not splice, the relay falls
 * back to its buffer): the bytes arrive all the same. */
START_TEST(no_splice_fallback)
{
	int p[2], q[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, p), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, q), 0);
	struct relay_job j = {.a = p[1], .b = q[0], .cancel = -1};
	ck_assert_int_eq(pthread_create(&j.t, NULL, relay_main, &j), 0);
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(rung_write_all(p[0], "0123456789", 10), 0);
	shutdown(p[0], SHUT_WR);
	size_t got;
	char *in = read_eof(q[1], &got);
	ck_assert_uint_eq(got, 1000);
	ck_assert(!memcmp(in, "0123456789", 10) && !memcmp(in + 990, "0123456789", 10));
	ck_assert_int_eq(rung_write_all(q[1], "back", 4), 0);
	shutdown(q[1], SHUT_WR);
	char b[16];
	ck_assert_int_eq(read(p[0], b, sizeof(b)), 4);
	ck_assert(!memcmp(b, "back", 4));
	finish(&j);
	ck_assert_int_eq(j.rc, 0);
	ck_assert_uint_eq(j.st.a_to_b, 1000);
	ck_assert_uint_eq(j.st.b_to_a, 4);
	free(in);
	close(p[0]);
	close(q[1]);
}
END_TEST

START_TEST(cancel_ends_it)
{
	int stop[2];
	ck_assert_int_eq(pipe(stop), 0);
	struct relay_job j;
	int c, s;
	start(&j, &c, &s, stop[0]);
	usleep(50000);
	close(stop[1]);
	finish(&j);
	ck_assert_int_eq(j.rc, -ECANCELED);
	close(stop[0]);
	close(c);
	close(s);
}
END_TEST

/* A foreign b: another holder of its file clears O_NONBLOCK while the relay runs and the far
 * side stops reading. The relay's writes stay non-blocking (a splice would block on the file's
 * flag), so the cancel fd still ends it at once. */
START_TEST(foreign_flag_cleared)
{
	int stop[2];
	ck_assert_int_eq(pipe(stop), 0);
	struct relay_job j;
	int c, s;
	start_ex(&j, &c, &s, stop[0], RUNG_RELAY_B_FOREIGN);
	usleep(50000); /* the relay set O_NONBLOCK: the "hostile" holder (j.b) clears it */
	ck_assert_int_eq(rung_fd_set_nonblock(j.b, 0), 0);
	ck_assert_int_eq(rung_fd_set_nonblock(c, 1), 0);
	static char blk[65536];
	size_t sent = 0;
	uint64_t end = rung_now_ms() + 1500;
	while (rung_now_ms() < end) { /* s never reads: every buffer on the way fills */
		ssize_t k = write(c, blk, sizeof(blk));
		if (k > 0)
			sent += (size_t)k;
		else
			usleep(10000);
	}
	ck_assert_uint_gt(sent, 0);
	ck_assert(!(fcntl(j.b, F_GETFL) & O_NONBLOCK));
	close(stop[1]);
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 5;
	ck_assert_msg(pthread_timedjoin_np(j.t, NULL, &dl) == 0,
		      "the relay blocked on the foreign fd: the cancel did not end it");
	ck_assert_int_eq(j.rc, -ECANCELED);
	close(j.a);
	close(j.b);
	close(stop[0]);
	close(c);
	close(s);
}
END_TEST

Suite *common_relay_suite(void)
{
	Suite *s = suite_create("common_relay");
	TCase *tc = tcase_create("relay");
	signal(SIGPIPE, SIG_IGN);
	tcase_add_test(tc, port_request);
	tcase_add_loop_test(tc, both_ways_and_half_close, 0, 2);
	tcase_add_test(tc, flood_is_bounded);
	tcase_add_test(tc, no_splice_fallback);
	tcase_add_test(tc, cancel_ends_it);
	tcase_add_test(tc, foreign_flag_cleared);
	suite_add_tcase(s, tc);
	return s;
}
