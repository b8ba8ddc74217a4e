/*
 * runtime/ports.c: the host side of forwarded ports (rung_port_* of rung.h; docs/ports.md).
 * One agent connection per forwarded TCP connection: PORT_CONNECT, the agent's RESULT (or
 * ERROR: refused, out of range), then the connection carries the stream's raw bytes, relayed
 * with bounded buffers (common/relay.c). A forward (rung_port_forward) asks the agent for the
 * connected socket itself (PORT_FD), where the channel is a Unix socket: one relay on the host,
 * between the client and that socket, instead of two relays and the agent's hop.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/relay.h"
#include "runtime/agent-io.h"
#include "runtime/rt-internal.h"

#define CONNECT_TIMEOUT_MS 15000u /* resume + the agent's own 10 s connect */
#define MAX_CONNS_DEFAULT 256u

void rung_port_conn_close(struct rung_port_conn *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	if (c->busy >= 0)
		close(c->busy);
	c->fd = c->busy = -1;
}

/* Closes an fd the agent passed (or a copy it may hold): a linger set inside must not make this
 * close wait (the accept loop, a relay thread) on the sandbox's peer. */
static void drop_passed(int fd)
{
	struct linger no = {0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &no, sizeof(no));
	close(fd);
}

/* The socket the agent passed must be what it was asked for: a connected TCP socket whose peer
 * is the sandbox's loopback at `port`. Anything else (a hostile agent's pick) is refused. */
static int check_passed(int s, unsigned port, struct rung_err *err)
{
	int type = 0, proto = 0;
	socklen_t l = sizeof(type), pl = sizeof(proto);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getsockopt(s, SOL_SOCKET, SO_TYPE, &type, &l) < 0 ||
	    getsockopt(s, SOL_SOCKET, SO_PROTOCOL, &proto, &pl) < 0 || type != SOCK_STREAM ||
	    proto != IPPROTO_TCP || getpeername(s, (struct sockaddr *)&ss, &sl) < 0)
		return rung_err_set(err, EPROTO,
				    "the agent passed something other than a connected TCP socket");
	bool ok = false;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
		ok = (ntohl(a->sin_addr.s_addr) >> 24) == 127 && ntohs(a->sin_port) == port;
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
		const struct in6_addr *x = &a->sin6_addr;
		ok = (IN6_IS_ADDR_LOOPBACK(x) ||
		      (IN6_IS_ADDR_V4MAPPED(x) && x->s6_addr[12] == 127)) &&
		     ntohs(a->sin6_port) == port;
	}
	if (!ok)
		return rung_err_set(err, EPROTO,
				    "the agent passed a socket not connected to the loopback at %u",
				    port);
	return 0;
}

int rt_port_recv_passed(int fd, unsigned port, struct rung_err *err)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int n;
	while ((n = poll(&p, 1, (int)CONNECT_TIMEOUT_MS)) < 0 && errno == EINTR)
		;
	if (n <= 0)
		return rung_err_set(err, ETIMEDOUT, "the agent passed no socket");
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 8)];
	} ctl;
	char byte = 0;
	struct iovec iov = {&byte, 1};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.b,
			    .msg_controllen = sizeof(ctl.b)};
	ssize_t got = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	int s = -1, extra = 0;
	for (struct cmsghdr *c = got >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int x;
			memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (s < 0)
				s = x;
			else {
				drop_passed(x);
				extra++;
			}
		}
	}
	int r = 0;
	if (got != 1 || s < 0 || extra || (mh.msg_flags & MSG_CTRUNC))
		r = rung_err_set(err, EPROTO, "the agent passed %s",
				 s < 0 ? "no socket" : "something other than one byte and one fd");
	else
		r = check_passed(s, port, err);
	if (r < 0) {
		if (s >= 0)
			drop_passed(s);
		return r;
	}
	return s;
}

/* RESULT's payload: empty, or PORT_FD 1 where the request asked for it. */
static int result_passes(const struct rung_frame *f, bool want_fd, struct rung_err *err)
{
	if (f->len == 0)
		return 0;
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	uint64_t u = 0;
	int r, n = 0;
	rung_tlv_init(&it, f->payload, f->len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0) {
		if (tag != RUNG_TAG_PORT_FD || !want_fd || n++ ||
		    (r = rung_tlv_u64(v, l, &u, err)) < 0 || u != 1)
			return rung_err_set(err, EPROTO,
					    "port connect: unexpected answer from the agent");
	}
	return r < 0 ? r : n == 1;
}

/* PORT_CONNECT; *passed: the socket the agent passed (want_fd), else -1 (the agent relays). */
static int connect_answer(int fd, unsigned port, bool want_fd, int *passed, struct rung_err *err)
{
	struct rt_agent_io io;
	struct rung_buf b = {0};
	*passed = -1;
	rung_buf_put_u64(&b, RUNG_TAG_PORT, port);
	if (want_fd)
		rung_buf_put_u64(&b, RUNG_TAG_PORT_FD, 1);
	int r = b.oom ? rung_err_set(err, ENOMEM, "out of memory encoding the request") : 0;
	if (r == 0)
		r = rt_agent_io_init(&io, fd, CONNECT_TIMEOUT_MS, -1, err);
	if (r < 0) {
		rung_buf_release(&b);
		return r;
	}
	struct rung_frame f = {0};
	if ((r = rt_agent_io_queue(&io, RUNG_MSG_PORT_CONNECT, &b, err)) == 0)
		r = rt_agent_io_next(&io, &f, err);
	rung_buf_release(&b);
	rt_agent_io_release(&io);
	if (r < 0)
		return r;
	if (f.type == RUNG_MSG_ERROR) {
		rung_proto_error_decode(f.payload, f.len, err);
		r = -(err->code ? err->code : EIO);
	} else if (f.type != RUNG_MSG_RESULT) {
		r = rung_err_set(err, EPROTO,
				 "port connect: unexpected frame type %u from the agent", f.type);
	} else if ((r = result_passes(&f, want_fd, err)) == 1) {
		r = *passed = rt_port_recv_passed(fd, port, err);
	}
	rung_frame_release(&f);
	return r < 0 ? r : 0;
}

static int port_connect(struct rung_sandbox *s, unsigned port, bool want_fd,
			struct rung_port_conn *c, bool *passed, struct rung_err *err)
{
	*c = (struct rung_port_conn){.fd = -1, .busy = -1};
	*passed = false;
	if (port < 1 || port > 65535)
		return rung_err_set(err, EINVAL, "port %u out of range (a TCP port is 1..65535)",
				    port);
	int fd = rt_sandbox_agent(s, &c->busy, err);
	if (fd < 0)
		return fd;
	c->fd = fd;
	int ps;
	int r = connect_answer(fd, port, want_fd, &ps, err);
	if (r < 0) {
		rung_port_conn_close(c);
		return rung_err_wrap(err, "port %u of sandbox %s", port,
				     rt_sandbox_inner(s)->meta.id);
	}
	if (ps >= 0) { /* the agent's part is done: its channel goes */
		close(fd);
		c->fd = fd = ps;
		*passed = true;
	}
	/* back to blocking, as a caller expects of a fresh socket */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	rt_sandbox_touch(s);
	return 0;
}

int rung_port_connect(struct rung_sandbox *s, unsigned port, struct rung_port_conn *c,
		      struct rung_err *err)
{
	bool passed;
	return port_connect(s, port, false, c, &passed, err);
}

int rung_port_relay(struct rung_port_conn *c, int peer, int cancel_fd, struct rung_err *err)
{
	return rung_relay(peer, c->fd, cancel_fd, NULL, err);
}

/* ---- forward: an accept loop, a thread per connection ---- */

struct fwd {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned live;
	int stop[2]; /* closing stop[1] ends every relay */
};

struct conn_job {
	struct fwd *fw;
	struct rung_port_conn pc;
	int peer;
	bool passed; /* pc.fd is the socket the agent passed: shared with a hostile process */
};

static void *conn_thread(void *arg)
{
	struct conn_job *j = arg;
	struct rung_err err = {0};
	rung_relay_ex(j->peer, j->pc.fd, j->passed ? RUNG_RELAY_B_FOREIGN : 0, j->fw->stop[0], NULL,
		      &err);
	close(j->peer);
	if (j->passed) {
		drop_passed(j->pc.fd);
		j->pc.fd = -1;
	}
	rung_port_conn_close(&j->pc);
	struct fwd *fw = j->fw;
	free(j);
	pthread_mutex_lock(&fw->mu);
	fw->live--;
	pthread_cond_broadcast(&fw->cv);
	pthread_mutex_unlock(&fw->mu);
	return NULL;
}

/* One accepted connection: its agent connection, then a relay thread. */
static void fwd_one(struct fwd *fw, struct rung_sandbox *s, unsigned port, int peer,
		    unsigned max_conns, void (*on_error)(void *, const struct rung_err *), void *ud)
{
	struct rung_err err = {0};
	struct conn_job *j = calloc(1, sizeof(*j));
	int r = j ? 0 : rung_err_set(&err, ENOMEM, "out of memory");
	pthread_mutex_lock(&fw->mu);
	if (r == 0 && fw->live >= max_conns)
		r = rung_err_set(&err, EAGAIN, "%u connections already forwarded to port %u",
				 max_conns, port);
	pthread_mutex_unlock(&fw->mu);
	if (r == 0)
		r = port_connect(s, port, true, &j->pc, &j->passed, &err);
	if (r == 0) {
		j->fw = fw;
		j->peer = peer;
		pthread_attr_t a;
		pthread_t t;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 64u << 10);
		pthread_mutex_lock(&fw->mu);
		fw->live++;
		r = pthread_create(&t, &a, conn_thread, j);
		if (r != 0)
			fw->live--;
		pthread_mutex_unlock(&fw->mu);
		pthread_attr_destroy(&a);
		if (r == 0)
			return;
		rung_err_set(&err, r, "start a relay thread");
		if (j->passed) {
			drop_passed(j->pc.fd);
			j->pc.fd = -1;
		}
		rung_port_conn_close(&j->pc);
	}
	if (on_error)
		on_error(ud, &err);
	close(peer);
	free(j);
}

int rung_port_forward(struct rung_sandbox *s, unsigned port, int listen_fd, int cancel_fd,
		      unsigned max_conns, void (*on_error)(void *ud, const struct rung_err *e),
		      void *ud, struct rung_err *err)
{
	if (port < 1 || port > 65535)
		return rung_err_set(err, EINVAL, "port %u out of range (a TCP port is 1..65535)",
				    port);
	struct fwd fw = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	if (pipe2(fw.stop, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe");
	if (!max_conns)
		max_conns = MAX_CONNS_DEFAULT;
	int r = 0;
	for (;;) {
		struct pollfd p[2] = {{.fd = listen_fd, .events = POLLIN},
				      {.fd = cancel_fd, .events = POLLIN}};
		int n = poll(p, cancel_fd >= 0 ? 2 : 1, -1);
		if (n < 0 && errno != EINTR) {
			r = rung_err_sys(err, errno, "poll the listening socket");
			break;
		}
		if (n <= 0)
			continue;
		if (cancel_fd >= 0 && p[1].revents)
			break;
		if (!(p[0].revents & POLLIN)) {
			r = rung_err_set(err, EBADF, "the listening socket failed");
			break;
		}
		int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EMFILE || errno == ENFILE)
				usleep(100000); /* out of fds: the pending connection waits */
			if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED ||
			    errno == EMFILE || errno == ENFILE)
				continue;
			r = rung_err_sys(err, errno, "accept");
			break;
		}
		fwd_one(&fw, s, port, c, max_conns, on_error, ud);
	}
	close(fw.stop[1]);
	pthread_mutex_lock(&fw.mu);
	while (fw.live > 0)
		pthread_cond_wait(&fw.cv, &fw.mu);
	pthread_mutex_unlock(&fw.mu);
	close(fw.stop[0]);
	return r;
}
