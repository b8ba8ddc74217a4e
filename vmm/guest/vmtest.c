/*
 * vmm/guest/vmtest.c: rung-vmtest, the host side of the nested-KVM test stage.
 *
 * A small static client of the agent protocol (common/proto.h), run inside L1 next to
 * rung-vmm. ADDR is a Unix socket path (rung-vmm --vsock-uds) or "vsock:CID:PORT" (a QEMU
 * guest with vhost-vsock, for the baseline benchmark).
 *
 *   rung-vmtest wait ADDR TIMEOUT_MS      retry PING until PONG; print "ready MS"
 *   rung-vmtest exec ADDR [-i STDIN] [-t TIMEOUT_MS] -- ARGV...
 *                                         run ARGV in the guest; copy its stdout/stderr;
 *                                         exit with its exit code (128+signal if killed)
 *   rung-vmtest ctl PATH COMMAND          one line to rung-vmm's --control socket; print
 *                                         the reply; exit 0 if it starts with "ok"
 *
 * Exit 2 on usage errors, 3 on protocol or connection errors (message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "common/proto.h"
#include "common/util.h"

static int connect_addr(const char *addr, struct rung_err *err)
{
	cleanup_close int fd = -1;
	if (!strncmp(addr, "vsock:", 6)) {
		unsigned cid, port;
		if (sscanf(addr + 6, "%u:%u", &cid, &port) != 2)
			return rung_err_set(err, EINVAL, "bad vsock address %s (vsock:CID:PORT)", addr);
		struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = cid, .svm_port = port };
		fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return rung_err_sys(err, errno, "socket(AF_VSOCK)");
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			return rung_err_sys(err, errno, "connect %s", addr);
		return rung_steal_fd(&fd);
	}
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(addr) >= sizeof(sa.sun_path))
		return rung_err_set(err, ENAMETOOLONG, "socket path too long: %s", addr);
	strcpy(sa.sun_path, addr);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return rung_err_sys(err, errno, "socket(AF_UNIX)");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return rung_err_sys(err, errno, "connect %s", addr);
	return rung_steal_fd(&fd);
}

static int ping(const char *addr, uint64_t deadline, struct rung_err *err)
{
	cleanup_close int fd = connect_addr(addr, err);
	if (fd < 0)
		return fd;
	int r = rung_frame_write(fd, RUNG_MSG_PING, NULL, 0, err);
	if (r < 0)
		return r;
	struct rung_frame f;
	if ((r = rung_frame_read(fd, &f, deadline, err)) < 0)
		return r;
	int type = f.type;
	rung_frame_release(&f);
	if (type != RUNG_MSG_PONG)
		return rung_err_set(err, EPROTO, "expected PONG, got frame type %d", type);
	return 0;
}

static int cmd_wait(const char *addr, uint64_t timeout_ms)
{
	uint64_t t0 = rung_now_ms(), deadline = t0 + timeout_ms;
	struct rung_err err = { 0 };
	for (;;) {
		/* Each try gets at most 1 s: the bridge may accept before the guest listens. */
		uint64_t try_deadline = rung_now_ms() + 1000;
		if (ping(addr, try_deadline < deadline ? try_deadline : deadline, &err) == 0) {
			printf("ready %llu\n", (unsigned long long)(rung_now_ms() - t0));
			return 0;
		}
		if (rung_now_ms() >= deadline) {
			fprintf(stderr, "rung-vmtest: agent not ready after %llu ms: %s\n",
				(unsigned long long)timeout_ms, err.msg);
			return 3;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 5 * 1000 * 1000 }, NULL);
	}
}

static int send_stdin(int fd, const char *data, struct rung_err *err)
{
	size_t len = strlen(data);
	for (size_t off = 0; off < len;) {
		size_t n = len - off > 65536 ? 65536 : len - off;
		struct rung_buf b = { 0 };
		rung_buf_put_bytes(&b, RUNG_TAG_DATA, data + off, n);
		int r = rung_frame_write_buf(fd, RUNG_MSG_STDIN, &b, err);
		rung_buf_release(&b);
		if (r < 0)
			return r;
		off += n;
	}
	return rung_frame_write(fd, RUNG_MSG_STDIN_EOF, NULL, 0, err);
}

static int copy_data(const struct rung_frame *f, int out, struct rung_err *err)
{
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	int r;
	rung_tlv_init(&it, f->payload, f->len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0)
		if (tag == RUNG_TAG_DATA && rung_write_all(out, v, l) < 0)
			return rung_err_sys(err, errno, "write output");
	return r;
}

static int cmd_exec(const char *addr, char **argv, const char *in, uint64_t timeout_ms)
{
	struct rung_err err = { 0 };
	uint64_t deadline = rung_now_ms() + timeout_ms + 10000;
	cleanup_close int fd = connect_addr(addr, &err);
	if (fd < 0)
		goto fail;
	struct rung_proto_exec x = { .argv = argv, .timeout_ms = timeout_ms,
				     .max_output = 16u << 20, .has_stdin = in != NULL };
	struct rung_buf b = { 0 };
	rung_proto_exec_encode(&x, &b);
	int r = rung_frame_write_buf(fd, RUNG_MSG_EXEC, &b, &err);
	rung_buf_release(&b);
	if (r < 0 || (in && send_stdin(fd, in, &err) < 0))
		goto fail;
	for (;;) {
		struct rung_frame f;
		if (rung_frame_read(fd, &f, deadline, &err) < 0)
			goto fail;
		if (f.type == RUNG_MSG_STDOUT || f.type == RUNG_MSG_STDERR) {
			r = copy_data(&f, f.type == RUNG_MSG_STDOUT ? 1 : 2, &err);
			rung_frame_release(&f);
			if (r < 0)
				goto fail;
			continue;
		}
		if (f.type == RUNG_MSG_EXIT) {
			struct rung_proto_exit ex;
			r = rung_proto_exit_decode(f.payload, f.len, &ex, &err);
			rung_frame_release(&f);
			if (r < 0)
				goto fail;
			if (ex.flags & RUNG_EXIT_TIMED_OUT)
				fprintf(stderr, "rung-vmtest: timed out\n");
			return ex.signal ? 128 + (int)ex.signal : (int)(ex.exit_code & 0xff);
		}
		if (f.type == RUNG_MSG_ERROR)
			rung_proto_error_decode(f.payload, f.len, &err);
		else
			rung_err_set(&err, EPROTO, "unexpected frame type %d", f.type);
		rung_frame_release(&f);
		goto fail;
	}
fail:
	fprintf(stderr, "rung-vmtest: exec: %s\n", err.msg);
	return 3;
}

static int cmd_ctl(const char *path, const char *cmd)
{
	struct rung_err err = { 0 };
	char line[256], reply[512];
	cleanup_close int fd = connect_addr(path, &err);
	if (fd < 0)
		goto fail;
	snprintf(line, sizeof(line), "%s\n", cmd);
	if (rung_write_all(fd, line, strlen(line)) < 0) {
		rung_err_sys(&err, errno, "write %s", path);
		goto fail;
	}
	size_t n = 0;
	while (n < sizeof(reply) - 1) {
		ssize_t k = read(fd, reply + n, 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0 || reply[n] == '\n')
			break;
		n++;
	}
	reply[n] = '\0';
	printf("%s\n", reply);
	return strncmp(reply, "ok", 2) ? 1 : 0;
fail:
	fprintf(stderr, "rung-vmtest: ctl: %s\n", err.msg);
	return 3;
}

static int usage(void)
{
	fprintf(stderr, "usage: rung-vmtest wait ADDR TIMEOUT_MS\n"
			"       rung-vmtest exec ADDR [-i STDIN] [-t TIMEOUT_MS] -- ARGV...\n"
			"       rung-vmtest ctl PATH COMMAND\n");
	return 2;
}

int main(int argc, char **argv)
{
	uint64_t ms = 30000;
	if (argc == 4 && !strcmp(argv[1], "wait"))
		return rung_parse_u64(argv[3], &ms) < 0 ? usage() : cmd_wait(argv[2], ms);
	if (argc == 4 && !strcmp(argv[1], "ctl"))
		return cmd_ctl(argv[2], argv[3]);
	if (argc < 5 || strcmp(argv[1], "exec"))
		return usage();
	const char *in = NULL;
	int i = 3;
	for (; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "-i") && i + 1 < argc)
			in = argv[++i];
		else if (!strcmp(argv[i], "-t") && i + 1 < argc) {
			if (rung_parse_u64(argv[++i], &ms) < 0)
				return usage();
		} else
			return usage();
	}
	if (i + 1 >= argc)
		return usage();
	return cmd_exec(argv[2], argv + i + 1, in, ms);
}
