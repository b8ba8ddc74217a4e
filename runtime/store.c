/* runtime/store.c: the on-disk store: one directory per sandbox, flock locks, atomic metadata. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "runtime/rt-internal.h"

/*
 * A sandbox's directory (its upper dir, work dir, socket, metadata) is root's alone, except
 * that the sandbox's own root (host gid uid_base, the gid its user namespace maps 0 to) may
 * traverse it to build its root: root:<uid_base> 0710. Other local users can neither list
 * "sandboxes" (0711) nor enter a sandbox whose id they know.
 */
static int close_sandbox_dir(int dfd, const char *id, uint32_t base, struct rung_err *err)
{
	if (fchownat(dfd, id, 0, base ? base : 0, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fchmodat(dfd, id, base ? 0710 : 0700, 0) < 0)
		return rung_err_sys(err, errno, "close sandbox dir %s to other users", id);
	return 0;
}

/* Stores made by older versions left sandbox dirs 0711 (and upper dirs 0755 below them). The
 * pass runs once per store: RT_STORE_TIGHT in the store's root records it (every sandbox dir
 * made since is closed when it is made), so opening the store, which every CLI call does, does
 * not stat every sandbox dir again (bench/README.md "pool"). */
static int tighten_sandboxes(int root_fd, const char *dir, struct rung_err *err)
{
	cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return rung_err_sys(err, errno, "open %s", dir);
	struct stat s;
	if (fstat(dfd, &s) == 0 && (s.st_mode & 0066) && fchmod(dfd, 0711) < 0)
		return rung_err_sys(err, errno, "chmod %s", dir);
	if (faccessat(root_fd, RT_STORE_TIGHT, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	cleanup_dir DIR *d = fdopendir(dup(dfd));
	if (!d)
		return rung_err_sys(err, errno, "open %s", dir);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!rt_id_valid(de->d_name) ||
		    fstatat(dfd, de->d_name, &s, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(s.st_mode) ||
		    !(s.st_mode & 0007))
			continue;
		char name[300];
		cleanup_free char *txt = NULL;
		snprintf(name, sizeof(name), "%s/uid", de->d_name);
		unsigned long base = 0;
		size_t len;
		struct rt_meta m;
		if (rung_file_load(dfd, name, 64, &txt, NULL, NULL) == 0) {
			base = strtoul(txt, NULL, 10);
		} else { /* a sandbox of this version: the base is its metadata's */
			snprintf(name, sizeof(name), "%s/meta.json", de->d_name);
			if (rung_file_load(dfd, name, 1 << 20, &txt, &len, NULL) == 0 &&
			    rt_meta_from_json(txt, len, &m, NULL) == 0) {
				base = m.uid_base;
				rt_meta_release(&m);
			}
		}
		int r = close_sandbox_dir(dfd, de->d_name, base < RT_UID_BASE0 ? 0 : (uint32_t)base,
					  err);
		if (r < 0)
			return r;
	}
	/* Best effort: without the record (a read-only store) the next open passes again. */
	int m = openat(root_fd, RT_STORE_TIGHT, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (m >= 0)
		close(m);
	return 0;
}

int rt_store_open(const char *root, struct rt_store *st, struct rung_err *err)
{
	memset(st, 0, sizeof(*st));
	st->root_fd = -1;
	if (!root || root[0] != '/')
		return rung_err_set(err, EINVAL, "state dir '%s' must be an absolute path",
				    root ? root : "");
	/* Sandboxes run as unprivileged host uids that must traverse every directory above the
	 * store: we do not change those, we name the culprit. */
	char up[4096];
	snprintf(up, sizeof(up), "%s", root);
	for (char *slash; (slash = strrchr(up, '/')) && slash != up;) {
		*slash = '\0';
		struct stat as;
		if (stat(up, &as) == 0 && !(as.st_mode & 0001))
			return rung_err_set(err, EACCES,
					    "state dir %s: its parent %s (mode %04o) is not searchable "
					    "by the unprivileged uids sandboxes run as; use a state dir "
					    "whose parents are world-searchable (o+x)",
					    root, up, (unsigned)(as.st_mode & 07777));
	}
	int r = rung_mkdir_p(root, 0711, err);
	if (r < 0)
		return rung_err_wrap(err, "state dir");
	/* Sandboxes run as unprivileged host uids that must traverse (not list) the store. */
	struct stat sb;
	if (stat(root, &sb) == 0 && (sb.st_mode & 0011) != 0011 && sb.st_uid == geteuid() &&
	    chmod(root, (sb.st_mode & 07777) | 0011) < 0)
		return rung_err_sys(err, errno, "make state dir %s traversable", root);
	char p[4096];
	snprintf(p, sizeof(p), "%s/sandboxes", root);
	if (mkdir(p, 0711) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s", p);
	st->root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (st->root_fd < 0)
		return rung_err_sys(err, errno, "open state dir %s", root);
	if ((r = tighten_sandboxes(st->root_fd, p, err)) < 0) {
		rt_store_close(st);
		return r;
	}
	st->root = strdup(root);
	if (!st->root) {
		rt_store_close(st);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	return 0;
}

void rt_store_close(struct rt_store *st)
{
	if (!st)
		return;
	if (st->root_fd >= 0)
		close(st->root_fd);
	st->root_fd = -1;
	free(st->root);
	st->root = NULL;
}

int rt_store_path(const struct rt_store *st, const char *id, const char *name, char *buf,
		  size_t len)
{
	int n = name ? snprintf(buf, len, "%s/sandboxes/%s/%s", st->root, id, name)
		     : snprintf(buf, len, "%s/sandboxes/%s", st->root, id);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int lock_file(const char *path, bool create, bool nonblock, struct rung_err *err)
{
	/* Without create, a missing lock file means the sandbox is gone (or going): never
	 * re-create it inside a directory that a disposer is removing. */
	int fd = open(path, O_RDWR | (create ? O_CREAT : 0) | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == ENOENT && !create)
		return rung_err_set(err, ENOENT, "no such sandbox (%s is gone)", path);
	if (fd < 0)
		return rung_err_sys(err, errno, "open lock %s", path);
	while (flock(fd, LOCK_EX | (nonblock ? LOCK_NB : 0)) < 0) {
		if (errno == EINTR)
			continue;
		int e = errno;
		close(fd);
		return rung_err_sys(err, e, "lock %s", path);
	}
	return fd;
}

int rt_store_lock_global(const struct rt_store *st, struct rung_err *err)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/lock", st->root);
	return lock_file(p, true, false, err);
}

int rt_store_lock_sandbox(const struct rt_store *st, const char *id, bool create, bool nonblock,
			  struct rung_err *err)
{
	char dir[4096], p[4096];
	rt_store_path(st, id, NULL, dir, sizeof(dir));
	if (create) {
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return rung_err_sys(err, errno, "mkdir %s", dir);
	} else if (access(dir, F_OK) < 0) {
		return rung_err_set(err, ENOENT, "no sandbox %s", id);
	}
	rt_store_path(st, id, "lock", p, sizeof(p));
	int fd = lock_file(p, create, nonblock, err);
	if (fd < 0)
		return fd;
	/* A disposer may have removed the directory while we waited: re-check. */
	struct stat a, b;
	if (fstat(fd, &a) < 0 || stat(p, &b) < 0 || a.st_ino != b.st_ino) {
		close(fd);
		if (!create)
			return rung_err_set(err, ENOENT, "no sandbox %s", id);
		return rt_store_lock_sandbox(st, id, create, nonblock, err);
	}
	return fd;
}

int rt_store_meta_read(const struct rt_store *st, const char *id, struct rt_meta *m,
		       struct rung_err *err)
{
	char p[4096];
	cleanup_free char *txt = NULL;
	size_t len;
	if (!rt_id_valid(id))
		return rung_err_set(err, ENOENT, "no sandbox '%.80s'", id);
	rt_store_path(st, id, "meta.json", p, sizeof(p));
	int r = rung_file_load(AT_FDCWD, p, 1 << 20, &txt, &len, err);
	if (r == -ENOENT)
		return rung_err_set(err, ENOENT, "no sandbox %s", id);
	if (r < 0)
		return r;
	return rt_meta_from_json(txt, len, m, err);
}

int rt_store_meta_write(const struct rt_store *st, const struct rt_meta *m, struct rung_err *err)
{
	cleanup_free char *txt = NULL;
	char p[4096];
	int r = rt_meta_to_json(m, &txt, err);
	if (r < 0)
		return r;
	rt_store_path(st, m->id, "meta.json", p, sizeof(p));
	/* Atomic but not fsync'd: a sandbox never outlives the host (its supervisor and pid 1
	 * die with it), and gc removes a sandbox whose metadata a crash lost as debris. The
	 * fsyncs cost ~4 ms per acquire here, and made dispose's unlinks slower. */
	return rung_write_file_replace(AT_FDCWD, p, txt, strlen(txt), 0600, err);
}

/*
 * Why an exchange and not rt_store_meta_write's rename over meta.json (bench/README.md "pool"):
 * on ext4 (auto_da_alloc, the default) a rename over an existing file first allocates and
 * starts writing the new file's delayed blocks, and the replaced inode is freed in the same
 * call (its blocks too; with online discard, a block written back before is slow to free).
 * RENAME_EXCHANGE does neither: the new file's blocks are allocated by writeback later, and the
 * old inode lives on under RT_META_ASIDE until someone unlinks it off the hot path. It is as
 * atomic for readers (meta.json is always one whole file, old or new) and no more durable than
 * the rename (no fsync: see rt_store_meta_write). A pool's filler makes RT_META_ASIDE empty in
 * advance (pool.c), so the claim allocates no inode either. A file system without the flag
 * (EINVAL) gets the plain rename.
 */
int rt_store_meta_exchange(const struct rt_store *st, const struct rt_meta *m,
			   struct rung_err *err)
{
	cleanup_free char *txt = NULL;
	char p[4096], aside[4096];
	int r = rt_meta_to_json(m, &txt, err);
	if (r < 0)
		return r;
	rt_store_path(st, m->id, "meta.json", p, sizeof(p));
	rt_store_path(st, m->id, RT_META_ASIDE, aside, sizeof(aside));
	int fd = open(aside, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return rung_err_sys(err, errno, "create %s", aside);
	r = rung_write_all(fd, txt, strlen(txt));
	close(fd);
	if (r < 0)
		return rung_err_sys(err, -r, "write %s", aside);
	if (renameat2(AT_FDCWD, aside, AT_FDCWD, p, RENAME_EXCHANGE) == 0)
		return 0;
	if (errno == EINVAL && rename(aside, p) == 0)
		return 0;
	return rung_err_sys(err, errno, "replace %s", p);
}

int rt_store_ids(const struct rt_store *st, char ***ids, struct rung_err *err)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/sandboxes", st->root);
	cleanup_dir DIR *d = opendir(p);
	if (!d)
		return rung_err_sys(err, errno, "open %s", p);
	size_t n = 0;
	char **v = calloc(1, sizeof(char *));
	struct dirent *de;
	while (v && (de = readdir(d))) {
		if (!rt_id_valid(de->d_name))
			continue;
		char **nv = realloc(v, (n + 2) * sizeof(char *));
		if (!nv)
			break;
		v = nv;
		v[n] = strdup(de->d_name);
		if (!v[n])
			break;
		v[++n] = NULL;
	}
	if (!v)
		return rung_err_set(err, ENOMEM, "out of memory");
	*ids = v;
	return (int)n;
}

/*
 * Host uid ranges are handed out through one registry for the whole host, not per store, so
 * that sandboxes of two stores (two daemons, tests) never share host uids. Each slot is a file
 * <registry>/<slot> naming its owner "<state dir>\n<id>\n"; a slot whose owner's directory is
 * gone is stale and reused. The registry is under /run: after a reboot no sandbox runs.
 */
static const char *uid_registry(const struct rt_store *st)
{
	return st->uid_registry ? st->uid_registry : "/run/rung/uid-slots";
}

static bool slot_owner_gone(const char *txt)
{
	char dir[4096];
	const char *nl = strchr(txt, '\n');
	if (!nl || (size_t)(nl - txt) >= sizeof(dir) - 64)
		return true;
	snprintf(dir, sizeof(dir), "%.*s/sandboxes/%.40s", (int)(nl - txt), txt, nl + 1);
	char *end = strchr(dir + (nl - txt), '\n');
	if (end)
		*end = '\0';
	return access(dir, F_OK) < 0 && errno == ENOENT;
}

int rt_store_alloc_uid(const struct rt_store *st, const char *id, uint32_t *base,
		       struct rung_err *err)
{
	char mine[4200];
	int len = snprintf(mine, sizeof(mine), "%s\n%s\n", st->root, id);
	int r = rung_mkdir_p(uid_registry(st), 0700, err);
	if (r < 0)
		return rung_err_wrap(err, "uid registry");
	cleanup_close int dfd = open(uid_registry(st), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || flock(dfd, LOCK_EX) < 0)
		return rung_err_sys(err, errno, "lock the uid registry %s", uid_registry(st));
	/* A restarted sandbox gets its old range back when it can: its kept files (work dir,
	 * upper dir, disk image) are owned by it. So: the slot it still holds, else the one it
	 * had (*base; e.g. after a reboot emptied the registry) if free, else the first free
	 * one. A new sandbox (*base 0) takes the first slot that is free or its own. */
	bool restart = *base >= RT_UID_BASE0;
	uint32_t had = restart ? (*base - RT_UID_BASE0) / RT_UID_RANGE : RT_UID_SLOTS;
	uint32_t mine_at = RT_UID_SLOTS, free_at = RT_UID_SLOTS;
	for (uint32_t slot = 0; slot < RT_UID_SLOTS && mine_at == RT_UID_SLOTS; slot++) {
		char name[16];
		snprintf(name, sizeof(name), "%u", slot);
		cleanup_free char *txt = NULL;
		bool is_free;
		if (rung_file_load(dfd, name, 8192, &txt, NULL, NULL) == 0) {
			if (!strcmp(txt, mine))
				mine_at = slot;
			is_free = slot_owner_gone(txt);
		} else {
			is_free = errno == ENOENT;
		}
		if (is_free && (free_at == RT_UID_SLOTS || slot == had))
			free_at = slot;
		if (!restart && free_at != RT_UID_SLOTS)
			break;
	}
	uint32_t slot = mine_at != RT_UID_SLOTS ? mine_at : free_at;
	if (slot != RT_UID_SLOTS) {
		char name[16];
		snprintf(name, sizeof(name), "%u", slot);
		if ((r = rung_write_file_replace(dfd, name, mine, (size_t)len, 0600, err)) < 0)
			return r;
		*base = RT_UID_BASE0 + slot * RT_UID_RANGE;
		/* (no "uid" file: the metadata records the base; stores of older versions had
		 * one, which tighten_sandboxes reads) */
		char p[4096];
		snprintf(p, sizeof(p), "%s/sandboxes", st->root);
		cleanup_close int sfd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (sfd < 0)
			return rung_err_sys(err, errno, "open %s", p);
		return close_sandbox_dir(sfd, id, *base, err);
	}
	return rung_err_set(err, ENOSPC, "all %d sandbox uid ranges are in use", RT_UID_SLOTS);
}

void rt_store_release_uid(const struct rt_store *st, const char *id, uint32_t base)
{
	if (base < RT_UID_BASE0)
		return;
	char name[4200], mine[4200];
	snprintf(name, sizeof(name), "%s/%u", uid_registry(st),
		 (base - RT_UID_BASE0) / RT_UID_RANGE);
	snprintf(mine, sizeof(mine), "%s\n%s\n", st->root, id);
	cleanup_free char *txt = NULL;
	if (rung_file_load(AT_FDCWD, name, 8192, &txt, NULL, NULL) == 0 && !strcmp(txt, mine))
		unlink(name);
}

/* The last use is the busy file's mtime (one inode fewer a start than a file of its own;
 * stores of older versions have an "activity" file, still read). */
void rt_store_touch_activity(const struct rt_store *st, const char *id, bool create)
{
	char p[4096];
	rt_store_path(st, id, "busy", p, sizeof(p));
	if (!create) { /* every exec's: one call; a missing file (disposed meanwhile) stays so */
		utimensat(AT_FDCWD, p, NULL, AT_SYMLINK_NOFOLLOW);
		return;
	}
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0) {
		futimens(fd, NULL);
		close(fd);
	}
}

int rt_store_busy(const struct rt_store *st, const char *id, bool exclusive)
{
	char p[4096];
	rt_store_path(st, id, "busy", p, sizeof(p));
	/* Shared holders (exec, files) run without the sandbox lock: a dispose may be removing
	 * the directory, so they never create the file (acquire does, under the lock). */
	int fd = open(p, O_RDWR | (exclusive ? O_CREAT : 0) | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	while (flock(fd, exclusive ? LOCK_EX | LOCK_NB : LOCK_SH) < 0) {
		if (errno == EINTR)
			continue;
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

uint64_t rt_store_activity_ms(const struct rt_store *st, const char *id)
{
	static const char *const names[] = {"busy", "activity"};
	uint64_t last = 0;
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(names); i++) {
		char p[4096];
		struct stat s;
		rt_store_path(st, id, names[i], p, sizeof(p));
		uint64_t t = stat(p, &s) < 0 ? 0
					     : (uint64_t)s.st_mtim.tv_sec * 1000 +
						   (uint64_t)s.st_mtim.tv_nsec / 1000000;
		last = t > last ? t : last;
	}
	return last;
}

uint64_t rt_store_used_ms(const struct rt_store *st, const struct rt_meta *m)
{
	uint64_t act = rt_store_activity_ms(st, m->id);
	return act > m->last_used_ms ? act : m->last_used_ms;
}
