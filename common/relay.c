/* common/relay.c: the bounded bidirectional relay of forwarded ports (common/relay.h), and the
 * PORT_CONNECT request's decoding. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/proto.h"
#include "common/relay.h"

int rung_proto_port_decode(const uint8_t *p, uint32_t len, uint16_t *port, bool *want_fd,
			   struct rung_err *err)
{
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	int r;
	bool have = false, have_fd = false;
	*port = 0;
	*want_fd = false;
	rung_tlv_init(&it, p, len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0) {
		uint64_t u;
		if (tag == RUNG_TAG_PORT_FD) {
			if (have_fd)
				return rung_err_set(err, EPROTO,
						    "port request: port_fd given twice");
			if ((r = rung_tlv_u64(v, l, &u, err)) < 0)
				return rung_err_wrap(err, "port request: port_fd");
			if (u > 1)
				return rung_err_set(err, EINVAL,
						    "port request: port_fd %llu (0 or 1)",
						    (unsigned long long)u);
			*want_fd = u == 1;
			have_fd = true;
			continue;
		}
		if (tag != RUNG_TAG_PORT)
			return rung_err_set(err, EPROTO, "port request: unexpected field %u", tag);
		if (have)
			return rung_err_set(err, EPROTO, "port request: port given twice");
		if ((r = rung_tlv_u64(v, l, &u, err)) < 0)
			return rung_err_wrap(err, "port request: port");
		if (u < 1 || u > 65535)
			return rung_err_set(err, EINVAL,
					    "port %llu out of range (a TCP port is 1..65535)",
					    (unsigned long long)u);
		*port = (uint16_t)u;
		have = true;
	}
	if (r < 0)
		return rung_err_wrap(err, "port request");
	if (!have)
		return rung_err_set(err, EINVAL, "port request: no port");
	return 0;
}

/* One direction: bytes read from `from`, not yet written to `to`. They move through a pipe
 * with splice(2) (no copy through user memory), or, where a socket does not splice (EINVAL),
 * through buf. Either holds at most RUNG_RELAY_BUF bytes. */
struct dir {
	int from, to;
	int pipe[2]; /* -1: buffer mode */
	uint8_t *buf;
	size_t off, len; /* buf: where the pending bytes start; both modes: how many */
	size_t cap;	 /* what the pipe holds (its slots may fill first: full) */
	bool full;	 /* the pipe took nothing more: no read until a write drained it */
	bool eof, shut;	 /* from said EOF; to was shut for writing */
	uint64_t bytes;
};

static bool dir_done(const struct dir *d) { return d->shut; }

static bool again(void) { return errno == EAGAIN || errno == EINTR; }

static int dir_read(struct dir *d)
{
	ssize_t n;
	if (d->pipe[0] >= 0) {
		n = splice(d->from, NULL, d->pipe[1], NULL, d->cap - d->len,
			   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0 && errno == EAGAIN && d->len > 0) {
			d->full = true; /* readable, but the pipe's slots are taken */
			return 0;
		}
		if (n < 0 && errno == EINVAL && d->len == 0) { /* this socket does not splice */
			close(d->pipe[0]);
			close(d->pipe[1]);
			d->pipe[0] = d->pipe[1] = -1;
			return dir_read(d);
		}
	} else {
		if (!d->buf && !(d->buf = malloc(RUNG_RELAY_BUF)))
			return -ENOMEM;
		/* MSG_DONTWAIT: non-blocking whatever the file's O_NONBLOCK says (a foreign fd) */
		n = recv(d->from, d->buf, RUNG_RELAY_BUF, MSG_DONTWAIT);
		d->off = 0;
	}
	if (n > 0)
		d->len += (size_t)n;
	else if (n == 0)
		d->eof = true;
	else if (!again())
		return -errno;
	return 0;
}

/* The destination does not take splice (EINVAL): what the pipe holds moves to buf, and the
 * direction goes on in buffer mode. */
static int to_buffer_mode(struct dir *d)
{
	if (!d->buf && !(d->buf = malloc(RUNG_RELAY_BUF)))
		return -ENOMEM;
	size_t got = 0;
	while (got < d->len) {
		ssize_t k = read(d->pipe[0], d->buf + got, d->len - got);
		if (k <= 0)
			return -EIO;
		got += (size_t)k;
	}
	close(d->pipe[0]);
	close(d->pipe[1]);
	d->pipe[0] = d->pipe[1] = -1;
	d->off = 0;
	d->full = false;
	return 0;
}

static int dir_write(struct dir *d)
{
	if (d->pipe[0] >= 0) {
		ssize_t n = splice(d->pipe[0], NULL, d->to, NULL, d->len,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0 && errno == EINVAL) {
			int r = to_buffer_mode(d);
			return r < 0 ? r : dir_write(d);
		}
		if (n > 0) {
			d->len -= (size_t)n;
			d->bytes += (uint64_t)n;
			d->full = false;
		} else if (n < 0 && !again()) {
			return -errno;
		}
		return 0;
	}
	ssize_t n = send(d->to, d->buf + d->off, d->len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n > 0) {
		d->off += (size_t)n;
		d->len -= (size_t)n;
		d->bytes += (uint64_t)n;
	} else if (n < 0 && !again()) {
		return -errno;
	}
	return 0;
}

/* Read what fits (splice: while the pipe has room; buffer: only into an empty one), write
 * what is pending (a write is tried whenever bytes wait: EAGAIN costs one call); a clean EOF
 * is passed on once drained. Returns 0, or -errno on a failure of either side. */
static int dir_step(struct dir *d, short rev_from)
{
	int r;
	if (!d->eof && (d->pipe[0] >= 0 ? d->len < d->cap && !d->full : d->len == 0) &&
	    (rev_from & (POLLIN | POLLHUP | POLLERR)) && (r = dir_read(d)) < 0)
		return r;
	if (d->len > 0 && (r = dir_write(d)) < 0)
		return r;
	if (d->eof && d->len == 0 && !d->shut) {
		shutdown(d->to, SHUT_WR);
		d->shut = true;
	}
	return 0;
}

static short events_for(const struct dir *in, const struct dir *out)
{
	/* the fd is in->from and out->to */
	short ev = 0;
	if (!in->eof && (in->pipe[0] >= 0 ? in->len < in->cap && !in->full : in->len == 0))
		ev |= POLLIN;
	if (out->len > 0)
		ev |= POLLOUT;
	return ev;
}

static void dir_init(struct dir *d, int from, int to, bool foreign)
{
	*d = (struct dir){.from = from, .to = to, .pipe = {-1, -1}};
	if (foreign || pipe2(d->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		d->pipe[0] = d->pipe[1] = -1;
		return;
	}
	/* the pipe's capacity is the direction's bound (a smaller pipe: its own) */
	fcntl(d->pipe[1], F_SETPIPE_SZ, (int)RUNG_RELAY_BUF);
	int c = fcntl(d->pipe[1], F_GETPIPE_SZ);
	d->cap = c > 0 && (unsigned)c < RUNG_RELAY_BUF ? (size_t)c : RUNG_RELAY_BUF;
}

static void dir_release(struct dir *d)
{
	if (d->pipe[0] >= 0) {
		close(d->pipe[0]);
		close(d->pipe[1]);
	}
	free(d->buf);
}

int rung_relay(int a, int b, int cancel_fd, struct rung_relay_stats *st, struct rung_err *err)
{
	return rung_relay_ex(a, b, 0, cancel_fd, st, err);
}

int rung_relay_ex(int a, int b, unsigned flags, int cancel_fd, struct rung_relay_stats *st,
		  struct rung_err *err)
{
	struct dir ab, ba;
	int r = 0;
	bool foreign = flags & RUNG_RELAY_B_FOREIGN;
	if (st)
		*st = (struct rung_relay_stats){0};
	dir_init(&ab, a, b, foreign);
	dir_init(&ba, b, a, foreign);
	fcntl(a, F_SETFL, fcntl(a, F_GETFL) | O_NONBLOCK);
	fcntl(b, F_SETFL, fcntl(b, F_GETFL) | O_NONBLOCK);
	while (!(dir_done(&ab) && dir_done(&ba))) {
		struct pollfd p[3] = {{.fd = a, .events = events_for(&ab, &ba)},
				      {.fd = b, .events = events_for(&ba, &ab)},
				      {.fd = cancel_fd, .events = POLLIN}};
		/* a side with nothing to wait for is left out (its POLLHUP would spin) */
		if (!p[0].events)
			p[0].fd = -1;
		if (!p[1].events)
			p[1].fd = -1;
		int n = poll(p, cancel_fd >= 0 ? 3 : 2, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = rung_err_sys(err, errno, "relay: poll");
			break;
		}
		if (cancel_fd >= 0 && p[2].revents) {
			r = rung_err_set(err, ECANCELED, "relay: cancelled");
			break;
		}
		if ((r = dir_step(&ab, p[0].revents)) < 0 ||
		    (r = dir_step(&ba, p[1].revents)) < 0) {
			r = rung_err_sys(err, -r, "relay");
			break;
		}
	}
	if (r < 0) {
		shutdown(a, SHUT_RDWR);
		shutdown(b, SHUT_RDWR);
	}
	if (st) {
		st->a_to_b = ab.bytes;
		st->b_to_a = ba.bytes;
	}
	dir_release(&ab);
	dir_release(&ba);
	return r;
}
