/*
 * cli/main-image-cp.c: `rung cp SRC DST` (docs/files.md, "Copying trees"), docker-cp style: one of
 * SRC, DST is ID:PATH (a directory in the sandbox), the other a host directory or "-" (a tar
 * stream on stdin/stdout), run by build/rung-image (libarchive stays out of build/rung). A host directory is packed/unpacked here with libarchive, in a
 * child process joined by a pipe; a download lands in a temporary directory beside DST that
 * is renamed to DST only once complete (DST must not exist).
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/util.h"

/* The pipe between the copy and its packer / unpacker child: a megabyte, not 64 KiB, so that
 * the two run apart instead of in lockstep. */
#define CP_PIPE_SZ (1 << 20)

/* Progress on a terminal: bytes and entries on stderr, at most ten times a second. */
struct meter {
	uint64_t last_ms, bytes, entries;
	bool shown;
};

static void meter_show(struct meter *m)
{
	fprintf(stderr, "\r\033[Krung: cp: %.1f MiB, %llu entries", (double)m->bytes / 1048576.0,
		(unsigned long long)m->entries);
	m->shown = true;
}

static void meter_tick(void *ud, uint64_t bytes, uint64_t entries)
{
	struct meter *m = ud;
	m->bytes = bytes;
	m->entries = entries;
	uint64_t now = rung_now_ms();
	if (now - m->last_ms >= 100) {
		m->last_ms = now;
		meter_show(m);
	}
}

/* The last figures on their own line, before anything else goes to stderr (once). */
static void meter_end(const struct rung_cp_opts *o)
{
	struct meter *m = o && o->progress ? o->progress_ud : NULL;
	if (m && m->shown) {
		meter_show(m);
		fputc('\n', stderr);
		m->shown = false;
	}
}

static int cp_fail(struct cli *c, const struct rung_cp_opts *o, const struct rung_err *err)
{
	meter_end(o);
	return cli_fail(c, err);
}

/* Child: the tree at dir as a tar stream on fd (names relative to dir). */
static int pack_dir(const char *dir, int fd)
{
	struct archive *rd = archive_read_disk_new(), *w = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	int rc = 1;
	archive_read_disk_set_symlink_physical(rd);
	archive_write_set_format_pax_restricted(w);
	if (archive_read_disk_open(rd, dir) != ARCHIVE_OK || archive_write_open_fd(w, fd) != ARCHIVE_OK)
		goto out;
	size_t skip = strlen(dir);
	for (;;) {
		int r = archive_read_next_header2(rd, e);
		if (r == ARCHIVE_EOF) {
			rc = 0;
			break;
		}
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
			break;
		archive_read_disk_descend(rd);
		const char *p = archive_entry_pathname(e);
		const char *rel = strlen(p) > skip ? p + skip : "";
		while (*rel == '/')
			rel++;
		char name[PATH_MAX];
		snprintf(name, sizeof(name), "%s", rel[0] ? rel : ".");
		archive_entry_set_pathname(e, name);
		if (archive_write_header(w, e) != ARCHIVE_OK)
			break;
		char buf[1 << 16];
		la_ssize_t n;
		while (archive_entry_filetype(e) == AE_IFREG &&
		       (n = archive_read_data(rd, buf, sizeof(buf))) > 0)
			archive_write_data(w, buf, (size_t)n);
	}
out:
	if (rc)
		fprintf(stderr, "rung: cp: packing '%s': %s\n", dir,
			archive_error_string(rd) ?: archive_error_string(w) ?: "failed");
	archive_write_close(w);
	archive_write_free(w);
	archive_read_free(rd);
	archive_entry_free(e);
	return rc;
}

/* Child: unpack the tar stream on fd into dir, refusing "..", absolute names, links out. */
static int unpack_dir(int fd, const char *dir)
{
	struct archive *a = archive_read_new(), *w = archive_write_disk_new();
	struct archive_entry *e;
	int rc = 1;
	archive_read_support_format_tar(a);
	archive_write_disk_set_options(w, ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
					     ARCHIVE_EXTRACT_SECURE_NODOTDOT |
					     ARCHIVE_EXTRACT_SECURE_SYMLINKS |
					     ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
	if (chdir(dir) < 0 || archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK)
		goto out;
	for (;;) {
		int r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF) {
			rc = 0;
			break;
		}
		if (r != ARCHIVE_OK || archive_write_header(w, e) != ARCHIVE_OK)
			break;
		const void *buf;
		size_t len;
		la_int64_t off;
		while ((r = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK)
			if (archive_write_data_block(w, buf, len, off) != ARCHIVE_OK)
				goto out;
		if (r != ARCHIVE_EOF || archive_write_finish_entry(w) != ARCHIVE_OK)
			break;
	}
out:
	if (rc)
		fprintf(stderr, "rung: cp: unpacking into '%s': %s\n", dir,
			archive_error_string(a) ?: archive_error_string(w) ?: "failed");
	archive_write_close(w);
	archive_write_free(w);
	archive_read_free(a);
	return rc;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)f;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static pid_t spawn(int (*fn)(const char *, int), int (*fn2)(int, const char *), const char *dir,
		   int fd, int other)
{
	pid_t pid = fork();
	if (pid == 0) {
		close(other);
		_exit(fn ? fn(dir, fd) : fn2(fd, dir));
	}
	close(fd);
	return pid;
}

static bool child_ok(pid_t pid)
{
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int do_upload(struct cli *c, struct rung_sandbox *sb, const char *src, const char *dst,
		     const struct rung_cp_opts *o)
{
	struct rung_err err = {0};
	if (!strcmp(src, "-"))
		return rung_cp_upload(sb, 0, dst, o, &err) < 0 ? cp_fail(c, o, &err) : 0;
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return perror("rung: cp: pipe"), 1;
	fcntl(p[1], F_SETPIPE_SZ, CP_PIPE_SZ); /* best effort */
	pid_t pid = spawn(pack_dir, NULL, src, p[1], p[0]);
	int rc = rung_cp_upload(sb, p[0], dst, o, &err);
	close(p[0]);
	bool ok = pid > 0 && child_ok(pid);
	if (rc < 0)
		return cp_fail(c, o, &err);
	return ok ? 0 : 1;
}

static int do_download(struct cli *c, struct rung_sandbox *sb, const char *src, const char *dst,
		       const struct rung_cp_opts *o)
{
	struct rung_err err = {0};
	if (!strcmp(dst, "-"))
		return rung_cp_download(sb, src, 1, o, &err) < 0 ? cp_fail(c, o, &err) : 0;
	if (access(dst, F_OK) == 0) {
		fprintf(stderr, "rung: cp: '%s' exists (the copy makes it)\n", dst);
		return 1;
	}
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s.rung-cp-XXXXXX", dst);
	if (!mkdtemp(tmp))
		return fprintf(stderr, "rung: cp: %s: %s\n", tmp, strerror(errno)), 1;
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		rmdir(tmp);
		return perror("rung: cp: pipe"), 1;
	}
	fcntl(p[1], F_SETPIPE_SZ, CP_PIPE_SZ); /* best effort */
	pid_t pid = spawn(NULL, unpack_dir, tmp, p[0], p[1]);
	int rc = rung_cp_download(sb, src, p[1], o, &err);
	close(p[1]);
	bool ok = pid > 0 && child_ok(pid);
	if (rc == 0 && ok && rename(tmp, dst) == 0)
		return 0;
	nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return rc < 0 ? cp_fail(c, o, &err) : 1;
}

/* "ID:PATH" → id (copied into idbuf) and path; else false. */
static bool split_remote(const char *s, char *idbuf, size_t cap, const char **path)
{
	const char *colon = strchr(s, ':');
	if (!colon || colon == s || (size_t)(colon - s) >= cap)
		return false;
	if (strchr(s, '/') && strchr(s, '/') < colon)
		return false;
	memcpy(idbuf, s, (size_t)(colon - s));
	idbuf[colon - s] = '\0';
	*path = colon + 1;
	return true;
}

int cli_cp_main(struct cli *c, int argc, char **argv)
{
	struct rung_cp_opts o = {0};
	if (argc == 5 && !strcmp(argv[1], "--max-bytes")) {
		char *end;
		o.max_bytes = strtoull(argv[2], &end, 10);
		if (*end || !o.max_bytes)
			return cli_usage_error("cp", "--max-bytes: '%s' is not a positive number",
					       argv[2]);
		argc -= 2, argv += 2;
	}
	if (argc != 3)
		return cli_usage_error("cp", "usage: rung cp [--max-bytes N] SRC DST (one of them "
				       "ID:PATH)");
	char sid[256], did[256];
	const char *sp = NULL, *dp = NULL;
	bool up = split_remote(argv[2], did, sizeof(did), &dp);
	bool down = split_remote(argv[1], sid, sizeof(sid), &sp);
	if (up == down)
		return cli_usage_error("cp", "exactly one of SRC, DST is ID:PATH");
	if (c->remote) {
		fprintf(stderr, "rung: cp: not through the daemon yet (use the local store)\n");
		return 1;
	}
	struct rung_router *r = cli_router(c);
	if (!r)
		return 1;
	struct rung_err err = {0};
	struct rung_sandbox *sb;
	if (rung_sandbox_open(r, up ? did : sid, NULL, &sb, &err) < 0)
		return cli_fail(c, &err);
	struct meter m = {0};
	if (!c->json && isatty(2)) {
		o.progress = meter_tick;
		o.progress_ud = &m;
	}
	int st = up ? do_upload(c, sb, argv[1], dp, &o) : do_download(c, sb, sp, argv[2], &o);
	meter_end(&o);
	rung_sandbox_close(sb);
	return st;
}
