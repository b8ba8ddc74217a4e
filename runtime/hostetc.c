/*
 * runtime/hostetc.c: the process rung's /etc, prepared once (see rt-internal.h). A sandbox's
 * root binds one directory at /etc instead of the host's entries one by one (~90 us of pid
 * 1's start for 15 binds, and their teardown; bench/README.md, "A prepared /etc").
 *
 * <state>/etc/host records the tree that is current: its name (16 hex digits, a digest of
 * what follows), the digest of rung's files in it, then "path<TAB>identity" for each entry of
 * rt_host_etc and every directory and regular file below one (not symlinks: a new or
 * retargeted one changes its directory's mtime, as an added, removed or renamed entry does; a
 * file edited in place changes its own). A call lstat()s each and compares: all equal (and the
 * same files), that tree is used; else the entries are copied again (each identity taken
 * before its copy: a change during it shows at the next call) and the file replaced. Trees are
 * never changed once published (a rename of a complete build): a running sandbox keeps the
 * /etc it started with.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/digest.h"
#include "common/log.h"
#include "runtime/rt-internal.h"

/*
 * Host files under /etc a process-rung sandbox sees: only ones that carry no secrets (the
 * README lists them). Never a site configuration a tool reads credentials or proxies from:
 * not /etc/pip.conf or /etc/xdg (pip's index URLs with tokens), /etc/profile or
 * /etc/bash.bashrc (exported proxies), /etc/ssl/private (keys). pip gets a pip.conf of ours.
 */
const char *const rt_host_etc[] = {
    "/etc/ld.so.cache", "/etc/ld.so.conf",	"/etc/ld.so.conf.d",	"/etc/nsswitch.conf",
    "/etc/ssl/certs",	"/etc/ssl/openssl.cnf", "/etc/ca-certificates", "/etc/alternatives",
    "/etc/localtime",	"/etc/mime.types",	"/etc/python3",		"/etc/python3.11",
    "/etc/protocols",	"/etc/services",	"/etc/debian_version",	"/etc/os-release",
    "/etc/timezone"};
const size_t rt_host_etc_count = RUNG_ARRAY_SIZE(rt_host_etc);

enum { NAME_LEN = 16, DEPTH_MAX = 8, FILE_MAX = 16 << 20 };

/* v in hex at p (no leading zeros); the end. */
static char *put_hex(char *p, uint64_t v)
{
	char tmp[16];
	int n = 0;
	do
		tmp[n++] = "0123456789abcdef"[v & 15];
	while ((v >>= 4));
	while (n)
		*p++ = tmp[--n];
	return p;
}

/*
 * An entry's identity as the host file records it: device, inode, mtime, ctime (seconds and
 * nanoseconds), size and mode in hex; "-" and the errno for one that cannot be looked at. Each
 * start formats ~30: by hand, not with musl's snprintf (1.2 us each, bench/README.md).
 */
enum { ID_LEN = 8 * 17 + 1 };
static void identity(const char *path, char out[ID_LEN])
{
	struct stat st;
	char *p = out;
	if (lstat(path, &st) < 0) {
		*p++ = '-';
		p = put_hex(p, (uint64_t)errno);
	} else {
		const uint64_t v[] = {st.st_dev,
				      st.st_ino,
				      (uint64_t)st.st_mtim.tv_sec,
				      (uint64_t)st.st_mtim.tv_nsec,
				      (uint64_t)st.st_ctim.tv_sec,
				      (uint64_t)st.st_ctim.tv_nsec,
				      (uint64_t)st.st_size,
				      st.st_mode};
		for (size_t i = 0; i < RUNG_ARRAY_SIZE(v); i++) {
			if (i)
				*p++ = ' ';
			p = put_hex(p, v[i]);
		}
	}
	*p = '\0';
}

/* Does host (the host file's text, after its first lines) still describe the host? */
static bool host_unchanged(const char *host_root, char *text)
{
	size_t n = 0, rl = strlen(host_root);
	char path[4096], id[ID_LEN];
	memcpy(path, host_root, rl);
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		char *tab = strchr(l, '\t');
		if (!tab || (size_t)(tab - l) + rl >= sizeof(path))
			return false;
		memcpy(path + rl, l, (size_t)(tab - l));
		path[rl + (size_t)(tab - l)] = '\0';
		identity(path, id);
		if (strcmp(id, tab + 1))
			return false;
		n++;
	}
	return n >= rt_host_etc_count;
}

static int copy_file(int sfd, int dfd, const char *name, mode_t mode, struct rung_err *err)
{
	cleanup_close int out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0)
		return rung_err_sys(err, errno, "create %s", name);
	char buf[65536];
	size_t total = 0;
	for (;;) {
		ssize_t n = read(sfd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return rung_err_sys(err, errno, "read %s", name);
		if (n == 0)
			break;
		if ((total += (size_t)n) > FILE_MAX)
			return rung_err_set(err, EFBIG, "%s: over %d bytes", name, FILE_MAX);
		if (rung_write_all(out, buf, (size_t)n) < 0)
			return rung_err_sys(err, errno, "write %s", name);
	}
	if (fchmod(out, mode & 0777) < 0)
		return rung_err_sys(err, errno, "chmod %s", name);
	return 0;
}

/*
 * Copy the host's src (an absolute path, host_root prefixed) to name in dfd, recording src
 * (as the sandbox sees it: rel) in the manifest: directories, regular files and symlinks
 * (as links); anything else is left out.
 */
static int copy_entry(const char *host_root, const char *rel, int dfd, const char *name, int depth,
		      bool top, struct rung_buf *man, struct rung_err *err)
{
	char src[4096], id[ID_LEN];
	if ((size_t)snprintf(src, sizeof(src), "%s%s", host_root, rel) >= sizeof(src))
		return rung_err_set(err, ENAMETOOLONG, "%s: path too long", rel);
	struct stat st;
	identity(src, id);
	bool absent = lstat(src, &st) < 0;
	if (top || (!absent && !S_ISLNK(st.st_mode))) {
		rung_buf_append(man, rel, strlen(rel));
		rung_buf_append(man, "\t", 1);
		rung_buf_append(man, id, strlen(id));
		rung_buf_append(man, "\n", 1);
	}
	if (absent)
		return errno == ENOENT ? 0 : rung_err_sys(err, errno, "lstat %s", src);
	if (S_ISLNK(st.st_mode)) {
		char link[4096];
		ssize_t n = readlink(src, link, sizeof(link) - 1);
		if (n < 0)
			return rung_err_sys(err, errno, "readlink %s", src);
		link[n] = '\0';
		return symlinkat(link, dfd, name) < 0 ? rung_err_sys(err, errno, "symlink %s", rel)
						      : 0;
	}
	if (S_ISREG(st.st_mode)) {
		cleanup_close int sfd = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (sfd < 0)
			return rung_err_sys(err, errno, "open %s", src);
		return copy_file(sfd, dfd, name, st.st_mode, err);
	}
	if (!S_ISDIR(st.st_mode))
		return 0;
	if (depth >= DEPTH_MAX)
		return rung_err_set(err, ELOOP, "%s: deeper than %d", rel, DEPTH_MAX);
	if (mkdirat(dfd, name, 0700) < 0)
		return rung_err_sys(err, errno, "mkdir %s", rel);
	cleanup_close int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	cleanup_dir DIR *d = opendir(src);
	if (sub < 0 || !d)
		return rung_err_sys(err, errno, "open %s", sub < 0 ? rel : src);
	struct dirent *de;
	int r = 0;
	while (r == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char crel[4096];
		if ((size_t)snprintf(crel, sizeof(crel), "%s/%s", rel, de->d_name) >= sizeof(crel))
			return rung_err_set(err, ENAMETOOLONG, "%s: path too long", rel);
		r = copy_entry(host_root, crel, sub, de->d_name, depth + 1, false, man, err);
	}
	if (r == 0 && fchmod(sub, st.st_mode & 0777) < 0)
		r = rung_err_sys(err, errno, "chmod %s", rel);
	return r;
}

/* The directory of path's parent below dfd (rt_host_etc's /etc/ssl/certs: ssl), made. */
static int parent_in(int dfd, const char *rel, const char **base, struct rung_err *err)
{
	char dir[256];
	const char *in = rel + strlen("/etc/");
	const char *slash = strrchr(in, '/');
	*base = slash ? slash + 1 : in;
	if (!slash)
		return fcntl(dfd, F_DUPFD_CLOEXEC, 0);
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - in), in);
	if (mkdirat(dfd, dir, 0755) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s", dir);
	int fd = openat(dfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? rung_err_sys(err, errno, "open %s", dir) : fd;
}

/* Build the tree in tmp (below etcfd): the host's entries, then files; the host's state's
 * manifest (its first line left for the caller) in man. */
static int build(int etcfd, const char *tmp, const char *host_root, const struct rt_etc_file *files,
		 size_t nf, struct rung_buf *man, struct rung_err *err)
{
	if (mkdirat(etcfd, tmp, 0700) < 0)
		return rung_err_sys(err, errno, "mkdir %s", tmp);
	cleanup_close int dfd = openat(etcfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return rung_err_sys(err, errno, "open %s", tmp);
	int r = 0;
	for (size_t i = 0; r == 0 && i < rt_host_etc_count; i++) {
		const char *base;
		int pfd = parent_in(dfd, rt_host_etc[i], &base, err);
		if (pfd < 0)
			return pfd;
		r = copy_entry(host_root, rt_host_etc[i], pfd, base, 0, true, man, err);
		close(pfd);
	}
	for (size_t i = 0; r == 0 && i < nf; i++) {
		int fd = openat(dfd, files[i].name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return rung_err_sys(err, errno, "create %s", files[i].name);
		if (rung_write_all(fd, files[i].text, strlen(files[i].text)) < 0 ||
		    fchmod(fd, 0644) < 0)
			r = rung_err_sys(err, errno, "write %s", files[i].name);
		close(fd);
	}
	if (r == 0 && fchmod(dfd, 0755) < 0)
		r = rung_err_sys(err, errno, "chmod %s", tmp);
	/* ssl (parent_in's): 0755 whatever the umask */
	if (r == 0 && fchmodat(dfd, "ssl", 0755, 0) < 0 && errno != ENOENT)
		r = rung_err_sys(err, errno, "chmod ssl");
	return r;
}

/* A digest's first NAME_LEN hex digits, of parts. */
static void short_digest(const char *const *parts, size_t n, char out[NAME_LEN + 1])
{
	char hex[RUNG_SHA256_HEX_LEN + 1];
	rung_sha256_parts_hex(parts, n, hex);
	snprintf(out, NAME_LEN + 1, "%.*s", NAME_LEN, hex);
}

/* rung's files, as a digest (a build that writes others copies again). */
static void files_digest(const struct rt_etc_file *files, size_t nf, char out[NAME_LEN + 1])
{
	const char *parts[1 + 2 * RT_ETC_FILES_MAX] = {"rung-etc-v1"};
	for (size_t i = 0; i < nf; i++) {
		parts[1 + 2 * i] = files[i].name;
		parts[2 + 2 * i] = files[i].text;
	}
	short_digest(parts, 1 + 2 * nf, out);
}

/*
 * Only a default process sandbox's /etc (work dir /work, hostname rung, no network) is
 * prepared: one copy per host state, never one per spec (a work dir of a client's choosing,
 * a lease's nameserver, would each make a copy otherwise).
 */
static bool default_files(const struct rt_root_params *p)
{
	return p->host_system && p->work_dir && !strcmp(p->work_dir, RT_DEFAULT_WORK_DIR) &&
	       (!p->hostname || !strcmp(p->hostname, "rung")) &&
	       (!p->resolv_conf || !p->resolv_conf[0]);
}

static int path_out(char *out, size_t len, const char *dir, const char *name)
{
	return (size_t)snprintf(out, len, "%s/%s", dir, name) < len ? 0 : -ENAMETOOLONG;
}

/* The host file's tree name if it still describes the host and rung's files (digest fd). */
static bool current_tree(const char *host_root, char *txt, const char *fd, char name[NAME_LEN + 1])
{
	/* "<name>\n<files digest>\n<manifest>" */
	if (strlen(txt) < 2 * NAME_LEN + 2 || txt[NAME_LEN] != '\n' ||
	    txt[2 * NAME_LEN + 1] != '\n' || strncmp(txt + NAME_LEN + 1, fd, NAME_LEN))
		return false;
	snprintf(name, NAME_LEN + 1, "%.*s", NAME_LEN, txt);
	return host_unchanged(host_root, txt + 2 * NAME_LEN + 2);
}

int rt_host_etc_prepare(const char *state_dir, const char *host_root,
			const struct rt_root_params *p, char *out, size_t len, struct rung_err *err)
{
	if (!default_files(p))
		return rung_err_set(err, ENOTSUP, "a prepared /etc holds the default files only");
	char dir[4096], name[NAME_LEN + 1] = "", fd[NAME_LEN + 1], tmp[64];
	snprintf(dir, sizeof(dir), "%s/etc", state_dir);
	if (mkdir(dir, 0711) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s", dir);
	cleanup_close int etcfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etcfd < 0)
		return rung_err_sys(err, errno, "open %s", dir);
	struct rt_etc_file files[RT_ETC_FILES_MAX];
	size_t nf = rt_etc_files(p, true, files);
	files_digest(files, nf, fd);
	cleanup_free char *txt = NULL;
	if (rung_file_load(etcfd, "host", 1 << 20, &txt, NULL, NULL) == 0 &&
	    current_tree(host_root, txt, fd, name) &&
	    faccessat(etcfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return path_out(out, len, dir, name);
	/* A build: the host's entries as they are now, under a name of our own first. */
	snprintf(tmp, sizeof(tmp), ".new-%d-%" PRIu64, (int)getpid(), rung_now_us());
	struct rung_buf man = {0};
	int r = build(etcfd, tmp, host_root, files, nf, &man, err);
	if (r == 0 && man.oom)
		r = rung_err_set(err, ENOMEM, "out of memory");
	if (r == 0) {
		rung_buf_append(&man, "", 1); /* NUL-terminated, for the digest */
		const char *parts[] = {"rung-etc-tree-v1", fd, (const char *)man.data};
		short_digest(parts, 3, name);
		/* taken by a concurrent build of the same (then the same contents): ours goes */
		if (renameat(etcfd, tmp, etcfd, name) < 0 && errno != EEXIST && errno != ENOTEMPTY)
			r = rung_err_sys(err, errno, "rename %s/%s", dir, tmp);
	}
	struct rung_err e2 = {0};
	if (faccessat(etcfd, tmp, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		rung_rm_rf_at(etcfd, tmp, &e2);
	if (r == 0) { /* a new state (or a tree gone): recorded */
		struct rung_buf h = {0};
		rung_buf_append(&h, name, NAME_LEN);
		rung_buf_append(&h, "\n", 1);
		rung_buf_append(&h, fd, NAME_LEN);
		rung_buf_append(&h, "\n", 1);
		rung_buf_append(&h, man.data, man.len - 1);
		r = h.oom ? rung_err_set(err, ENOMEM, "out of memory")
			  : rung_write_file_replace(etcfd, "host", h.data, h.len, 0600, err);
		rung_buf_release(&h);
	}
	rung_buf_release(&man);
	if (r < 0)
		return rung_err_wrap(err, "prepare %s", dir);
	LOG_DEBUG("prepared /etc %s/%s", dir, name);
	return path_out(out, len, dir, name);
}

size_t rt_host_etc_sweep(const char *state_dir, bool known, uint64_t oldest_ms)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/etc", state_dir);
	cleanup_close int etcfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat hs;
	cleanup_free char *txt = NULL;
	if (etcfd < 0 || fstatat(etcfd, "host", &hs, AT_SYMLINK_NOFOLLOW) < 0 ||
	    rung_file_load(etcfd, "host", 1 << 20, &txt, NULL, NULL) < 0)
		return 0;
	/* when the current state was recorded: a sandbox created before may use an older one */
	uint64_t switched = (uint64_t)hs.st_mtim.tv_sec * 1000 + hs.st_mtim.tv_nsec / 1000000;
	bool old_unused = known && oldest_ms > switched;
	uint64_t now = rung_wall_ms();
	cleanup_dir DIR *d = fdopendir(dup(etcfd));
	size_t n = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		struct stat st;
		if (fstatat(etcfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		bool crashed =
		    !strncmp(de->d_name, ".new-", 5) && now / 1000 > (uint64_t)st.st_mtime + 60;
		bool stale = strlen(de->d_name) == NAME_LEN && strncmp(de->d_name, txt, NAME_LEN) &&
			     old_unused;
		struct rung_err e = {0};
		if ((crashed || stale) && rung_rm_rf_at(etcfd, de->d_name, &e) == 0)
			n++;
	}
	return n;
}
