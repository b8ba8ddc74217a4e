/*
 * agent/callbacks.c: an exec's host-callback channel (docs/callbacks.md). The command gets one
 * end of a socketpair as its fd 3 (named by RUNG_CALLBACK_FD); only it and what it starts
 * inherit it: no other exec, no background process, nothing to connect to or guess. The agent
 * parses nothing: the bytes the command writes travel to the host in CALLBACK frames and the
 * host's answers come back in CALLBACK_ANSWER frames; the host validates every call. The tools
 * (rung-call, which is this binary, and the Python module rung_host) are put in a directory
 * of the sandbox's own filesystem when an exec first needs them.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "agent/agent.h"
#include "rung_host_py.h" /* generated from agent/py/rung_host.py */

#define CHUNK 65536
#define OUT_BACKLOG (1u << 20)	/* answers the command has not read: stop reading its calls */
#define OUT_MAX (16u << 20)	/* past this the command is not reading at all: close */

/* Write data to dir/name (mode) through a temporary name, unless it already holds it. */
static int put_file(const char *dir, const char *name, const void *data, size_t len, mode_t mode)
{
	char p[512], tmp[560];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	struct stat st;
	if (stat(p, &st) == 0 && (size_t)st.st_size == len && (st.st_mode & 07777) == mode)
		return 0;
	snprintf(tmp, sizeof(tmp), "%s.%d", p, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	int r = rung_write_all(fd, data, len);
	if (fchmod(fd, mode) < 0 && r == 0)
		r = -errno;
	close(fd);
	if (r == 0 && rename(tmp, p) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

/* rung-call is this very binary (it answers to that name). */
static int put_self(const char *dir)
{
	char *data = NULL;
	size_t len = 0;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char p[512];
	struct stat self, st;
	snprintf(p, sizeof(p), "%s/rung-call", dir);
	if (fstat(fd, &self) == 0 && stat(p, &st) == 0 && st.st_size == self.st_size &&
	    (st.st_mode & 07777) == 0755) {
		close(fd); /* in place already: no need to read 1 MB again */
		return 0;
	}
	int r = rung_read_fd_all(fd, 64u << 20, &data, &len, NULL);
	close(fd);
	if (r == 0)
		r = put_file(dir, "rung-call", data, len, 0755);
	free(data);
	return r;
}

/* dir/bin/rung-call and dir/python/rung_host.py, in the first of /.rung and /tmp/.rung that
 * takes them. Returns 0 with root filled, or <0 (the channel still works without them). */
static int install_tools(char *root, size_t rlen)
{
	static const char *const roots[] = {"/.rung", "/tmp/.rung"};
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		char bin[300], py[300];
		snprintf(bin, sizeof(bin), "%s/bin", roots[i]);
		snprintf(py, sizeof(py), "%s/python", roots[i]);
		if (rung_mkdir_p(bin, 0755, NULL) < 0 || rung_mkdir_p(py, 0755, NULL) < 0)
			continue;
		if (put_self(bin) < 0 || put_file(py, "rung_host.py", agent_rung_host_py,
						  sizeof(agent_rung_host_py) - 1, 0644) < 0)
			continue;
		snprintf(root, rlen, "%s", roots[i]);
		return 0;
	}
	return -ENOENT;
}

/* x->env with RUNG_CALLBACK_FD, RUNG_CALLBACK_MAX_BYTES, and the tools on PATH/PYTHONPATH. */
static int edit_env(struct rung_proto_exec *x, const char *root, uint64_t max_bytes)
{
	size_t n = 0;
	while (x->env && x->env[n])
		n++;
	char **env = realloc(x->env, (n + 5) * sizeof(char *));
	if (!env)
		return -ENOMEM;
	x->env = env;
	bool path = false, pypath = false;
	for (size_t i = 0; i < n && root[0]; i++) {
		char *e = NULL;
		if (!strncmp(env[i], "PATH=", 5) && asprintf(&e, "%s:%s/bin", env[i], root) > 0)
			path = true;
		else if (!strncmp(env[i], "PYTHONPATH=", 11) &&
			 asprintf(&e, "PYTHONPATH=%s/python:%s", root, env[i] + 11) > 0)
			pypath = true;
		if (e) {
			free(env[i]);
			env[i] = e;
		}
	}
	if (root[0] && !path &&
	    asprintf(&env[n++], "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:"
				"/bin:%s/bin", root) < 0)
		return -ENOMEM;
	if (root[0] && !pypath && asprintf(&env[n++], "PYTHONPATH=%s/python", root) < 0)
		return -ENOMEM;
	if (!(env[n++] = strdup("RUNG_CALLBACK_FD=3")))
		return -ENOMEM;
	env[n] = NULL;
	if (max_bytes) {
		if (asprintf(&env[n++], "RUNG_CALLBACK_MAX_BYTES=%llu",
			     (unsigned long long)max_bytes) < 0)
			return -ENOMEM;
		env[n] = NULL;
	}
	return 0;
}

int agent_cb_open(struct agent_cb *cb, struct rung_proto_exec *x, int *child_fd,
		  struct rung_err *err)
{
	memset(cb, 0, sizeof(*cb));
	cb->fd = -1;
	*child_fd = -1;
	if (!x->callbacks)
		return 0;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return rung_err_sys(err, errno, "callback channel: socketpair");
	char root[64] = "";
	install_tools(root, sizeof(root));
	if (edit_env(x, root, x->callbacks) < 0) {
		close(sv[0]);
		close(sv[1]);
		return rung_err_set(err, ENOMEM, "callback channel: out of memory");
	}
	rung_fd_set_nonblock(sv[0], 1);
	cb->fd = sv[0];
	*child_fd = sv[1];
	return 0;
}

short agent_cb_events(const struct agent_cb *cb)
{
	if (cb->fd < 0)
		return 0;
	short ev = 0;
	if (cb->out.len - cb->out_off < OUT_BACKLOG)
		ev |= POLLIN;
	if (cb->out_off < cb->out.len)
		ev |= POLLOUT;
	return ev;
}

void agent_cb_close(struct agent_cb *cb)
{
	if (cb->fd >= 0)
		close(cb->fd);
	cb->fd = -1;
	rung_buf_release(&cb->out);
	cb->out_off = 0;
}

/* The command's end is ready: relay what it wrote to the host, write it its answers.
 * Returns <0 only for a host write error. */
int agent_cb_ready(struct agent_cb *cb, short revents, int sock, struct rung_err *err)
{
	if (cb->fd < 0)
		return 0;
	if (revents & POLLOUT) {
		ssize_t w = write(cb->fd, cb->out.data + cb->out_off, cb->out.len - cb->out_off);
		if (w > 0 && (cb->out_off += (size_t)w) == cb->out.len)
			cb->out.len = cb->out_off = 0;
	}
	if (!(revents & (POLLIN | POLLHUP | POLLERR)))
		return 0;
	char buf[CHUNK];
	ssize_t n = read(cb->fd, buf, sizeof(buf));
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		agent_cb_close(cb); /* every holder closed it */
		return 0;
	}
	if (n < 0)
		return 0;
	struct rung_buf b = {0};
	rung_buf_put_bytes(&b, RUNG_TAG_DATA, buf, (size_t)n);
	int r = rung_frame_write_buf(sock, RUNG_MSG_CALLBACK, &b, err);
	rung_buf_release(&b);
	return r;
}

void agent_cb_answer(struct agent_cb *cb, const struct rung_frame *f)
{
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	if (cb->fd < 0)
		return; /* the exec ended: nobody to answer */
	rung_tlv_init(&it, f->payload, f->len);
	while (rung_tlv_next(&it, &tag, &v, &l, NULL) > 0)
		if (tag == RUNG_TAG_DATA)
			rung_buf_append(&cb->out, v, l);
	if (cb->out.oom || cb->out.len - cb->out_off > OUT_MAX) {
		agent_cb_close(cb); /* the command reads none of its answers */
		return;
	}
	/* most answers fit at once: no poll round for them */
	ssize_t w = write(cb->fd, cb->out.data + cb->out_off, cb->out.len - cb->out_off);
	if (w > 0 && (cb->out_off += (size_t)w) == cb->out.len)
		cb->out.len = cb->out_off = 0;
}
