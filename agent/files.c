/*
 * agent/files.c: write_file / read_file. Every path is resolved with openat2(RESOLVE_IN_ROOT):
 * "..", absolute symlinks and symlinks planted in the sandbox all stay inside its root.
 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "agent/agent.h"

#define FILE_MAX (1ull << 30)
#define RESOLVE_FLAGS (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)

static int open2(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {.flags = (uint64_t)flags | O_CLOEXEC,
			       .mode = (flags & O_CREAT) ? mode : 0,
			       .resolve = RESOLVE_FLAGS};
	int fd;
	do
		fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	while (fd < 0 && errno == EAGAIN);
	return fd;
}

int agent_open_confined(const char *path, int flags, mode_t mode, int mkdirs, struct rung_err *err)
{
	if (!path[0] || strlen(path) > 4095)
		return rung_err_set(err, EINVAL, "path: empty or too long");
	cleanup_close int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return rung_err_sys(err, errno, "open /");
	if (mkdirs) {
		char buf[4096];
		strcpy(buf, path);
		for (char *p = buf + 1; (p = strchr(p, '/')); p++) {
			*p = '\0'; /* buf: the directory to create */
			char *slash = strrchr(buf, '/');
			const char *name = slash + 1;
			*slash = '\0'; /* buf: its parent */
			cleanup_close int parent = open2(root, slash == buf ? "/" : buf,
							 O_PATH | O_DIRECTORY, 0);
			int e = errno;
			*slash = '/';
			if (parent < 0)
				return rung_err_sys(err, e, "%s", buf);
			if (*name && strcmp(name, ".") && strcmp(name, "..") &&
			    mkdirat(parent, name, 0755) < 0 && errno != EEXIST)
				return rung_err_sys(err, errno, "mkdir %s", buf);
			*p = '/';
		}
	}
	int fd = open2(root, path, flags, mode);
	if (fd < 0)
		return rung_err_sys(err, errno, "%s", path);
	return fd;
}

static int send_result(int sock, uint64_t size, struct rung_err *err)
{
	struct rung_buf b = {0};
	rung_buf_put_u64(&b, RUNG_TAG_SIZE, size);
	int r = rung_frame_write_buf(sock, RUNG_MSG_RESULT, &b, err);
	rung_buf_release(&b);
	return r;
}

int agent_write_file(int sock, const struct rung_frame *req, struct rung_err *err)
{
	struct rung_proto_file x;
	int r = rung_proto_file_decode(req->payload, req->len, &x, err);
	if (r < 0)
		return r;
	if (x.size > FILE_MAX) {
		rung_proto_file_release(&x);
		return rung_err_set(err, EFBIG, "file of %llu bytes exceeds the limit",
				    (unsigned long long)x.size);
	}
	/* O_NONBLOCK: a FIFO planted at the path must not hang us (it fails the S_ISREG check). */
	cleanup_close int fd = agent_open_confined(
		x.path, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_NONBLOCK, x.mode & 07777, 1, err);
	if (fd >= 0) {
		struct stat st;
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			r = rung_err_set(err, EINVAL, "%s: not a regular file", x.path);
		} else if ((st.st_mode & 07777) != (x.mode & 07777)) {
			fchmod(fd, x.mode & 07777);
		}
	} else {
		r = fd;
	}
	/* Read the data frames even on error, so the host gets our answer in order. */
	uint64_t got = 0;
	for (;;) {
		struct rung_frame f;
		struct rung_err ferr = {0};
		if (rung_frame_read(sock, &f, rung_now_ms() + 60000, &ferr) < 0) {
			rung_proto_file_release(&x);
			return r < 0 ? r : rung_err_set(err, ferr.code, "%s", ferr.msg);
		}
		if (f.type == RUNG_MSG_FILE_END) {
			rung_frame_release(&f);
			break;
		}
		struct rung_tlv_iter it;
		uint16_t tag;
		const uint8_t *v;
		uint32_t l;
		rung_tlv_init(&it, f.payload, f.len);
		if (f.type != RUNG_MSG_FILE_DATA && r == 0)
			r = rung_err_set(err, EPROTO, "unexpected frame %u in write_file", f.type);
		while (f.type == RUNG_MSG_FILE_DATA && rung_tlv_next(&it, &tag, &v, &l, &ferr) > 0) {
			got += l;
			if (r == 0 && got > x.size)
				r = rung_err_set(err, EPROTO, "more data than the declared size");
			if (r == 0 && rung_write_all(fd, v, l) < 0)
				r = rung_err_sys(err, errno, "write %s", x.path);
		}
		rung_frame_release(&f);
	}
	if (r == 0 && got != x.size)
		r = rung_err_set(err, EPROTO, "got %llu of %llu bytes", (unsigned long long)got,
				 (unsigned long long)x.size);
	rung_proto_file_release(&x);
	if (r < 0)
		return r;
	return send_result(sock, got, err);
}

int agent_read_file(int sock, const struct rung_frame *req, struct rung_err *err)
{
	struct rung_proto_file x;
	int r = rung_proto_file_decode(req->payload, req->len, &x, err);
	if (r < 0)
		return r;
	uint64_t max = x.size ? x.size : FILE_MAX;
	cleanup_close int fd = agent_open_confined(x.path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0, 0, err);
	if (fd < 0) {
		rung_proto_file_release(&x);
		return fd;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		r = rung_err_set(err, EINVAL, "%s: not a regular file", x.path);
		rung_proto_file_release(&x);
		return r;
	}
	if ((uint64_t)st.st_size > max) {
		r = rung_err_set(err, EFBIG, "%s: %lld bytes exceeds the %llu-byte limit", x.path,
				 (long long)st.st_size, (unsigned long long)max);
		rung_proto_file_release(&x);
		return r;
	}
	rung_proto_file_release(&x);
	char buf[65536];
	uint64_t total = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return rung_err_sys(err, errno, "read");
		if (n == 0)
			break;
		total += (uint64_t)n;
		if (total > max)
			return rung_err_set(err, EFBIG, "file grew past the limit while reading");
		struct rung_buf b = {0};
		rung_buf_put_bytes(&b, RUNG_TAG_DATA, buf, (size_t)n);
		r = rung_frame_write_buf(sock, RUNG_MSG_FILE_DATA, &b, err);
		rung_buf_release(&b);
		if (r < 0)
			return r;
	}
	return send_result(sock, total, err);
}
