/*
 * agent/procs.c: a handler's side of background processes. PROC_START turns the handler into
 * the process's keeper (keeper.c) once the sandbox's limits allow it; every other request is
 * relayed, byte for byte both ways, to the keeper named by its handle, found by its abstract
 * socket and trusted only with the agent's uid (SO_PEERCRED). A listing asks every keeper.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "agent/agent.h"

/* The handles of every keeper: their listening sockets in /proc/net/unix. */
static int list_handles(char (**out)[RUNG_PROTO_HANDLE_LEN + 1], size_t *n)
{
	*out = NULL;
	*n = 0;
	FILE *f = fopen("/proc/net/unix", "re");
	if (!f)
		return -errno;
	char line[512];
	size_t cap = 0;
	const char *pre = "@" AGENT_PROC_SOCK_PREFIX;
	while (fgets(line, sizeof(line), f)) {
		unsigned long flags = 0;
		char path[256] = "";
		/* Num RefCount Protocol Flags Type St Inode Path */
		if (sscanf(line, "%*s %*s %*s %lx %*s %*s %*s %255s", &flags, path) != 2 ||
		    !(flags & 0x10000) || strncmp(path, pre, strlen(pre)))
			continue; /* not listening, or not a keeper's */
		const char *h = path + strlen(pre);
		if (!rung_proto_handle_valid(h))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 32;
			void *nv = realloc(*out, cap * sizeof(**out));
			if (!nv)
				break;
			*out = nv;
		}
		memcpy((*out)[(*n)++], h, RUNG_PROTO_HANDLE_LEN + 1);
	}
	fclose(f);
	return 0;
}

/* One request to a keeper, its first answer frame in *f. */
static int keeper_ask(const char *handle, uint8_t type, struct rung_frame *f, struct rung_err *err)
{
	int fd = agent_keeper_connect(handle, err);
	if (fd < 0)
		return fd;
	struct rung_proto_proc q = {.type = type};
	memcpy(q.handle, handle, sizeof(q.handle));
	struct rung_buf b = {0};
	rung_proto_proc_encode(&q, &b);
	int r = rung_frame_write_buf(fd, type, &b, err);
	rung_buf_release(&b);
	if (r == 0)
		r = rung_frame_read(fd, f, rung_now_ms() + 5000, err);
	close(fd);
	return r;
}

/* Live and kept processes; past the kept maximum the oldest exited one is forgotten. */
static int check_limits(struct rung_err *err)
{
	char(*hs)[RUNG_PROTO_HANDLE_LEN + 1] = NULL;
	size_t n = 0, live = 0, exited = 0, oldest = 0;
	uint64_t oldest_ms = UINT64_MAX;
	list_handles(&hs, &n);
	for (size_t i = 0; i < n; i++) {
		struct rung_frame f;
		struct rung_err e = {0};
		struct rung_proto_proc_info in;
		if (keeper_ask(hs[i], RUNG_MSG_PROC_LIST, &f, &e) < 0)
			continue;
		if (f.type == RUNG_MSG_PROC_INFO &&
		    rung_proto_proc_info_decode(f.payload, f.len, &in, &e) == 0) {
			if (!in.exited) {
				live++;
			} else {
				exited++;
				if (in.started_ms < oldest_ms)
					oldest_ms = in.started_ms, oldest = i;
			}
			rung_proto_proc_info_release(&in);
		}
		rung_frame_release(&f);
	}
	if (exited >= AGENT_PROC_MAX_EXITED) {
		struct rung_frame f;
		struct rung_err e = {0};
		if (keeper_ask(hs[oldest], RUNG_MSG_PROC_KILL, &f, &e) == 0)
			rung_frame_release(&f);
	}
	free(hs);
	if (live >= AGENT_PROC_MAX_LIVE)
		return rung_err_set(err, EAGAIN, "the sandbox has %zu live background processes, "
				    "the most it may have (%d): kill one first", live,
				    AGENT_PROC_MAX_LIVE);
	return 0;
}

/* One start at a time counts and takes its place (agent_start_lock_fd's record lock,
 * held from the count until the new keeper's socket listens and later counts see it). The
 * file is pid 1's memfd: commands cannot reach it (no fd of theirs, and the handlers' /proc
 * files are the agent uid's), so none can hold starts back. A lock held by a handler that dies
 * goes with it. */
static int start_lock(short type, struct rung_err *err)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET};
	while (fcntl(agent_start_lock_fd, F_SETLKW, &fl) < 0)
		if (errno != EINTR)
			return rung_err_sys(err, errno, "the background processes' start lock");
	return 0;
}

static int proc_start(int fd, const struct rung_frame *req, struct rung_err *err)
{
	struct rung_proto_proc q;
	int r = rung_proto_proc_decode(req->type, req->payload, req->len, &q, err);
	if (r < 0)
		return r;
	struct rung_err ue = {0};
	if ((r = start_lock(F_WRLCK, err)) < 0 || (r = check_limits(err)) < 0) {
		start_lock(F_UNLCK, &ue);
		rung_proto_proc_release(&q);
		return r;
	}
	uint8_t rnd[RUNG_PROTO_HANDLE_LEN / 2];
	char handle[RUNG_PROTO_HANDLE_LEN + 1];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		rung_proto_proc_release(&q);
		return rung_err_sys(err, errno, "getrandom");
	}
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(handle + 2 * i, 3, "%02x", rnd[i]);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, AGENT_PROC_SOCK_PREFIX "%s",
			 handle);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 ||
	    bind(lfd, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)) < 0 ||
	    listen(lfd, 64) < 0) {
		r = rung_err_sys(err, errno, "the process's socket");
		if (lfd >= 0)
			close(lfd);
		rung_proto_proc_release(&q);
		return r;
	}
	start_lock(F_UNLCK, &ue); /* listening: the next count sees this one */
	close(agent_start_lock_fd);
	r = agent_keeper_run(fd, &q, lfd, handle, err); /* returns only on failure */
	close(lfd);
	rung_proto_proc_release(&q);
	return r;
}

/* Every process's PROC_INFO, then RESULT. */
static int proc_list_all(int fd, struct rung_err *err)
{
	char(*hs)[RUNG_PROTO_HANDLE_LEN + 1] = NULL;
	size_t n = 0;
	list_handles(&hs, &n);
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		struct rung_frame f;
		struct rung_err e = {0};
		if (keeper_ask(hs[i], RUNG_MSG_PROC_LIST, &f, &e) < 0)
			continue; /* killed meanwhile */
		if (f.type == RUNG_MSG_PROC_INFO)
			r = rung_frame_write(fd, f.type, f.payload, f.len, err);
		rung_frame_release(&f);
	}
	free(hs);
	return r < 0 ? r : rung_frame_write(fd, RUNG_MSG_RESULT, NULL, 0, err);
}

/* Copy bytes both ways until either side closes. Returns whether b (the keeper) sent any. */
static bool relay(int a, int b)
{
	char buf[65536];
	bool from_b = false;
	for (;;) {
		struct pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return from_b;
		}
		for (int i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			ssize_t n = read(p[i].fd, buf, sizeof(buf));
			if (n <= 0)
				return from_b;
			from_b |= i == 1;
			for (ssize_t off = 0; off < n;) {
				ssize_t w = send(p[!i].fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0)
					return from_b;
				off += w;
			}
		}
	}
}

int agent_proc_request(int fd, const struct rung_frame *req, struct rung_err *err)
{
	if (req->type == RUNG_MSG_PROC_START)
		return proc_start(fd, req, err);
	if (req->type == RUNG_MSG_PROC_LIST && req->len == 0)
		return proc_list_all(fd, err);
	struct rung_proto_proc q;
	int r = rung_proto_proc_decode(req->type, req->payload, req->len, &q, err);
	if (r < 0)
		return r;
	char q_handle[RUNG_PROTO_HANDLE_LEN + 1];
	memcpy(q_handle, q.handle, sizeof(q_handle));
	int k = agent_keeper_connect(q.handle, err);
	rung_proto_proc_release(&q);
	if (k < 0)
		return k;
	r = rung_frame_write(k, req->type, req->payload, req->len, err);
	/* A keeper that was ending (killed, or forgotten past the kept maximum) may still have
	 * taken the connection and then closed it unanswered: the process is gone, which is
	 * what the host is told (a closed connection would read as a broken agent). */
	if (r == 0 && !relay(fd, k))
		r = rung_err_set(err, ENOENT, "no process %s in this sandbox", q_handle);
	close(k);
	return r;
}
