/*
 * agent/ports.c: PORT_CONNECT (docs/ports.md). The handler (agent uid, the sandbox's network
 * namespace) connects to the port on the sandbox's loopback (127.0.0.1, else ::1), answers
 * RESULT, and from then on relays raw bytes between the host's connection and the TCP
 * connection until both sides closed (common/relay.c: bounded buffers, half-close passed on).
 * Only loopback and only TCP: the request carries a port, never an address.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "agent/agent.h"
#include "common/relay.h"

#define CONNECT_MS 10000

/* A non-blocking connect to one loopback address, waited for up to CONNECT_MS. */
static int connect_to(const struct sockaddr *sa, socklen_t sl)
{
	int s = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -errno;
	if (connect(s, sa, sl) == 0)
		return s;
	int e = errno;
	if (e == EINPROGRESS) {
		struct pollfd p = {.fd = s, .events = POLLOUT};
		socklen_t el = sizeof(e);
		int n = poll(&p, 1, CONNECT_MS);
		if (n == 0)
			e = ETIMEDOUT;
		else if (n < 0 || getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
			e = errno;
		if (e == 0)
			return s;
	}
	close(s);
	return -e;
}

static int connect_loopback(uint16_t port, struct rung_err *err)
{
	struct sockaddr_in v4 = {.sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int s = connect_to((struct sockaddr *)&v4, sizeof(v4));
	if (s >= 0)
		return s;
	struct sockaddr_in6 v6 = {
	    .sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	int s6 = connect_to((struct sockaddr *)&v6, sizeof(v6));
	if (s6 >= 0)
		return s6;
	return rung_err_sys(err, -s,
			    "connect to port %u on the sandbox's loopback (127.0.0.1, ::1)", port);
}

/* The host asked for the socket itself and the channel is a Unix socket (not the vm rung's
 * vsock): RESULT(PORT_FD 1), then one byte carrying s (SCM_RIGHTS). The host relays between its
 * client and s directly, one process hop less; this handler is done. */
static int pass_socket(int fd, int s, struct rung_err *err)
{
	struct rung_buf b = {0};
	rung_buf_put_u64(&b, RUNG_TAG_PORT_FD, 1);
	int r = rung_frame_write_buf(fd, RUNG_MSG_RESULT, &b, err);
	rung_buf_release(&b);
	if (r < 0)
		return r;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} ctl = {0};
	char one = 'F';
	struct iovec iov = {&one, 1};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.b,
			    .msg_controllen = sizeof(ctl.b)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &s, sizeof(int));
	ssize_t n;
	while ((n = sendmsg(fd, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	return n == 1 ? 0 : rung_err_sys(err, n < 0 ? errno : EIO, "pass the port's socket");
}

static bool unix_channel(int fd)
{
	int dom = 0;
	socklen_t l = sizeof(dom);
	return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) == 0 && dom == AF_UNIX;
}

int agent_port_connect(int fd, const struct rung_frame *req, struct rung_err *err)
{
	uint16_t port;
	bool want_fd;
	int r = rung_proto_port_decode(req->payload, req->len, &port, &want_fd, err);
	if (r < 0)
		return r;
	int s = connect_loopback(port, err);
	if (s < 0)
		return s;
	int one = 1;
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (want_fd && unix_channel(fd)) {
		r = pass_socket(fd, s, err);
		close(s);
		return r;
	}
	if ((r = rung_frame_write(fd, RUNG_MSG_RESULT, NULL, 0, err)) < 0) {
		close(s);
		return r;
	}
	/* Past RESULT nothing but the stream's bytes travel: an error is the connection's end. */
	struct rung_err rerr = {0};
	rung_relay(fd, s, -1, NULL, &rerr);
	close(s);
	return 0;
}
