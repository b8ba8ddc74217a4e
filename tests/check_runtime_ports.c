/*
 * tests/check_runtime_ports.c: runtime/ports.c's side of a passed socket (rt_port_recv_passed),
 * against a hand-made "agent" on a socketpair: only one fd, a connected TCP socket whose peer
 * is the loopback at the port asked for, is taken; anything else is refused and every fd that
 * came along is closed (no sandbox, no root).
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/rt-internal.h"

/* A listening TCP socket on 127.0.0.1 (its port in *port). */
static int listener(unsigned *port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	ck_assert_int_ge(s, 0);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(s, 8), 0);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &l), 0);
	*port = ntohs(a.sin_port);
	return s;
}

static int connected(unsigned port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	ck_assert_int_eq(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
	return s;
}

/* The "agent" sends n bytes with fds[0..k) attached. */
static void agent_send(int fd, const char *bytes, size_t n, const int *fds, int k)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 4)];
	} ctl = {0};
	struct iovec iov = {(void *)bytes, n};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (k) {
		mh.msg_control = ctl.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)k);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)k);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)k);
	}
	ck_assert_int_eq(sendmsg(fd, &mh, 0), (ssize_t)n);
}

/* The received fd's file is still open somewhere iff the listener has a peer to accept whose
 * end is not closed: after a refusal, the accepted end sees EOF at once. */
static void assert_closed(int lfd)
{
	int a = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(a, 0);
	char b;
	ck_assert_int_eq(read(a, &b, 1), 0); /* EOF: the host closed what it refused */
	close(a);
}

START_TEST(takes_the_right_one)
{
	unsigned port;
	int l = listener(&port), p[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
	int t = connected(port);
	agent_send(p[1], "F", 1, &t, 1);
	close(t);
	struct rung_err err = {0};
	int s = rt_port_recv_passed(p[0], port, &err);
	ck_assert_msg(s >= 0, "%s", err.msg);
	ck_assert_int_eq(write(s, "x", 1), 1); /* it is the connection */
	int a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	char b = 0;
	ck_assert_int_eq(read(a, &b, 1), 1);
	ck_assert_int_eq(b, 'x');
	ck_assert(fcntl(s, F_GETFD) & FD_CLOEXEC);
	close(a);
	close(s);
	close(p[0]);
	close(p[1]);
	close(l);
}
END_TEST

START_TEST(refuses_the_rest)
{
	unsigned port, other;
	int l = listener(&port), l2 = listener(&other), p[2];
	struct rung_err err = {0};
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
	/* a TCP socket connected elsewhere than the port asked for */
	int t = connected(other);
	agent_send(p[1], "F", 1, &t, 1);
	close(t);
	ck_assert_int_eq(rt_port_recv_passed(p[0], port, &err), -EPROTO);
	ck_assert_msg(strstr(err.msg, "not connected to the loopback"), "%s", err.msg);
	assert_closed(l2);
	/* two fds: both closed, nothing taken */
	int t1 = connected(port), t2 = connected(port), two[2] = {t1, t2};
	agent_send(p[1], "F", 1, two, 2);
	close(t1);
	close(t2);
	ck_assert_int_eq(rt_port_recv_passed(p[0], port, &err), -EPROTO);
	assert_closed(l);
	assert_closed(l);
	/* not TCP: a Unix socket, a pipe */
	int u[2], pp[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, u), 0);
	agent_send(p[1], "F", 1, &u[0], 1);
	ck_assert_int_eq(rt_port_recv_passed(p[0], port, &err), -EPROTO);
	ck_assert_msg(strstr(err.msg, "other than a connected TCP socket"), "%s", err.msg);
	char b;
	close(u[0]);
	ck_assert_int_eq(read(u[1], &b, 1), 0); /* the host's copy is closed too */
	close(u[1]);
	ck_assert_int_eq(pipe(pp), 0);
	agent_send(p[1], "F", 1, &pp[0], 1);
	ck_assert_int_eq(rt_port_recv_passed(p[0], port, &err), -EPROTO);
	close(pp[0]);
	close(pp[1]);
	/* a listening socket (not connected) */
	agent_send(p[1], "F", 1, &l2, 1);
	ck_assert_int_eq(rt_port_recv_passed(p[0], other, &err), -EPROTO);
	/* no fd at all */
	agent_send(p[1], "F", 1, NULL, 0);
	ck_assert_int_eq(rt_port_recv_passed(p[0], port, &err), -EPROTO);
	ck_assert_msg(strstr(err.msg, "no socket"), "%s", err.msg);
	/* the agent hangs up instead */
	close(p[1]);
	ck_assert_int_eq(rt_port_recv_passed(p[0], port, &err), -EPROTO);
	close(p[0]);
	close(l);
	close(l2);
}
END_TEST

Suite *runtime_ports_suite(void)
{
	Suite *s = suite_create("runtime_ports");
	TCase *tc = tcase_create("passed");
	tcase_add_test(tc, takes_the_right_one);
	tcase_add_test(tc, refuses_the_rest);
	suite_add_tcase(s, tc);
	return s;
}
