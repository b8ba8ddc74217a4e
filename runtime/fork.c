/*
 * runtime/fork.c: rung_fork: new sandboxes whose filesystem starts as the source's is now.
 *
 * Shared-kernel rungs: the source's files all live on its disk image (process rung: the work
 * dir; container rung: the overlay's upper dir and ovlwork), so a fork is that image, copied
 * while the source is stopped and its filesystem synced: a reflink (FICLONE) where the store's
 * filesystem shares extents, else a sparse copy. Processes are not copied (a fork starts with
 * only its agent). Files of the source's uid range are then remapped into the fork's (on a
 * host mount of the copy that nothing else sees), and the fork is created as usual over the
 * kept image, with the source's spec and scope and thread labels. The vm rung is refused here.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/diskimg.h"
#include "runtime/rt-internal.h"

struct fork_src {
	struct rt_meta m;
	char dir[4096];
};

static uint32_t remap(uint32_t id, uint32_t from, uint32_t to)
{
	return id >= from && id - from < RT_UID_RANGE ? to + (id - from) : id;
}

/* Every inode under dfd (not following links), owners of [from, from+range) moved to to.
 * chown clears set-id bits: they are put back (the disk is mounted nosuid anyway). */
static int remap_tree(int dfd, uint32_t from, uint32_t to, int depth, struct rung_err *err)
{
	if (depth > 512)
		return rung_err_set(err, ELOOP, "fork: directories nested deeper than 512");
	cleanup_dir DIR *d = fdopendir(dup(dfd));
	if (!d)
		return rung_err_sys(err, errno, "fork: read a directory of the copy");
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return rung_err_sys(err, errno, "fork: stat %s", de->d_name);
		uid_t u = remap(st.st_uid, from, to);
		gid_t g = remap(st.st_gid, from, to);
		if ((u != st.st_uid || g != st.st_gid) &&
		    fchownat(dfd, de->d_name, u, g, AT_SYMLINK_NOFOLLOW) < 0)
			return rung_err_sys(err, errno, "fork: chown %s", de->d_name);
		if (S_ISREG(st.st_mode) && (st.st_mode & 06000) &&
		    fchmodat(dfd, de->d_name, st.st_mode & 07777, 0) < 0)
			return rung_err_sys(err, errno, "fork: chmod %s", de->d_name);
		if (!S_ISDIR(st.st_mode))
			continue;
		cleanup_close int sub =
		    openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			return rung_err_sys(err, errno, "fork: open %s", de->d_name);
		int r = remap_tree(sub, from, to, depth + 1, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Mount the copy at img on the host (a detached mount only this process holds), remap it,
 * and wait until its loop device is gone again (the fork mounts it next). */
static int remap_image(struct rung_router *r, const char *img, uint32_t from, uint32_t to,
		       struct rung_err *err)
{
	int mfd = rt_disk_mount(r->loop_control, img, to, err);
	if (mfd < 0)
		return mfd;
	int dfd = openat(mfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = dfd < 0 ? rung_err_sys(err, errno, "fork: open the copy")
			 : remap_tree(dfd, from, to, 0, err);
	if (dfd >= 0) {
		syncfs(dfd);
		close(dfd);
	}
	close(mfd);
	char real[PATH_MAX];
	int busy = 1;
	for (int i = 0; i < 200 && realpath(img, real) && (busy = rt_disk_loops_under(real)) > 0;
	     i++)
		usleep(10000);
	if (rc == 0 && busy > 0)
		rc = rung_err_set(err, EBUSY, "fork: %s is still attached to a loop device", img);
	return rc;
}

/* The source's filesystem, synced: opened inside its root (never following its links). */
static int sync_source(const struct rt_meta *m, struct rung_err *err)
{
	char root[64];
	snprintf(root, sizeof(root), "/proc/%d/root", (int)m->init_pid);
	cleanup_close int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return rung_err_sys(err, errno, "fork: open the source's root");
	const char *path = m->iso == RUNG_ISO_PROCESS
			       ? (m->spec.work_dir ? m->spec.work_dir : RT_DEFAULT_WORK_DIR)
			       : "/";
	struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
					  RESOLVE_NO_MAGICLINKS};
	cleanup_close int fd = (int)syscall(SYS_openat2, rfd, path, &how, sizeof(how));
	if (fd < 0)
		return rung_err_sys(err, errno, "fork: open %s in the source", path);
	if (syncfs(fd) < 0)
		return rung_err_sys(err, errno, "fork: sync the source's filesystem");
	return 0;
}

/* A fresh key for one fork (scope and thread never match a caller's: the labels are
 * overridden), its id, and its directory with a uid range and the copied image. */
static int fork_prepare(struct rung_router *r, const struct fork_src *s, char agent[33],
			char id[RT_ID_LEN + 1], uint32_t *base, bool *reflinked,
			struct rung_err *err)
{
	unsigned char rnd[16];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return rung_err_sys(err, errno, "getrandom");
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(agent + 2 * i, 3, "%02x", rnd[i]);
	struct rung_key k = {.scope = "rung-fork", .thread = s->m.id, .agent = agent};
	rt_id_compute(&k, s->m.spec.kind, id);
	char dir[4096], src[4200], dst[4200];
	rt_store_path(&r->store, id, NULL, dir, sizeof(dir));
	if (mkdir(dir, 0700) < 0)
		return rung_err_sys(err, errno, "fork: mkdir %s", dir);
	int g = rt_store_lock_global(&r->store, err);
	if (g < 0)
		return g;
	*base = 0;
	int rc = rt_store_alloc_uid(&r->store, id, base, err);
	close(g);
	if (rc < 0)
		return rc;
	snprintf(src, sizeof(src), "%s/disk.img", s->dir);
	snprintf(dst, sizeof(dst), "%s/disk.img", dir);
	return rt_disk_clone(src, dst, reflinked, err);
}

/* Stop the source, sync it, copy its image n times, continue it (under its lock). */
static int copy_all(struct rung_router *r, struct fork_src *s, unsigned n, char (*agents)[33],
		    char (*ids)[RT_ID_LEN + 1], uint32_t *bases, bool *reflinked,
		    struct rung_err *err)
{
	const struct rt_backend_ops *ops = rt_backend_get(s->m.iso);
	struct rt_sandbox sb = {.router = r, .meta = s->m};
	memcpy(sb.dir, s->dir, sizeof(sb.dir));
	bool stopped = s->m.state == RUNG_STATE_RUNNING;
	int rc = stopped ? ops->suspend(&sb, err) : 0;
	if (rc == 0)
		rc = sync_source(&s->m, err);
	for (unsigned i = 0; rc == 0 && i < n; i++)
		rc = fork_prepare(r, s, agents[i], ids[i], &bases[i], reflinked, err);
	struct rung_err e2 = {0};
	if (stopped && ops->resume(&sb, &e2) < 0 && rc == 0) {
		*err = e2;
		rc = -EIO;
	}
	return rc;
}

static int fork_create(struct rung_router *r, const struct fork_src *s, const char *agent,
		       uint32_t base, struct rung_err *err)
{
	char img[4300], dir[4096], id[RT_ID_LEN + 1];
	struct rung_key k = {.scope = "rung-fork", .thread = s->m.id, .agent = agent};
	rt_id_compute(&k, s->m.spec.kind, id);
	rt_store_path(&r->store, id, NULL, dir, sizeof(dir));
	snprintf(img, sizeof(img), "%s/disk.img", dir);
	int rc = remap_image(r, img, s->m.uid_base, base, err);
	if (rc < 0)
		return rc;
	struct rt_labels l = s->m.labels;
	rt_label_of(agent, l.agent);
	struct rung_sandbox *sb = NULL;
	rt_fork_creating(&l, base);
	rc = rung_acquire(r, &k, &s->m.spec, &sb, NULL, err);
	rt_fork_creating(NULL, 0);
	rung_sandbox_close(sb);
	return rc;
}

int rung_fork(struct rung_router *r, const char *id, const char *scope, unsigned count,
	      char ***out, bool *reflinked, struct rung_err *err)
{
	if (count < 1 || count > 64)
		return rung_err_set(err, EINVAL, "count: %u is not 1..64", count);
	struct fork_src s;
	memset(&s, 0, sizeof(s));
	if (!rt_id_valid(id))
		return rung_err_set(err, ENOENT, "no sandbox '%.80s'", id ? id : "");
	cleanup_close int lock = rt_store_lock_sandbox(&r->store, id, false, false, err);
	if (lock < 0)
		return lock;
	int rc = rt_store_meta_read(&r->store, id, &s.m, err);
	if (rc < 0)
		return rc;
	char label[65];
	if (scope)
		rt_label_of(scope, label);
	if ((scope && strcmp(label, s.m.labels.scope)) || rt_pool_unclaimed(&s.m))
		rc = rung_err_set(err, ENOENT, "no sandbox %s", id);
	else if (s.m.iso == RUNG_ISO_VM)
		rc = rung_err_set(err, ENOTSUP,
				  "fork: sandbox %s is on the vm rung, whose fork (a copy-on-write "
				  "upper disk) is not implemented yet",
				  id);
	else if (!rt_supervisor_alive(&s.m))
		rc = rung_err_set(err, ESRCH, "fork: sandbox %s is not running", id);
	if (rc < 0) {
		rt_meta_release(&s.m);
		return rc;
	}
	rt_store_path(&r->store, id, NULL, s.dir, sizeof(s.dir));
	char(*agents)[33] = calloc(count, sizeof(*agents));
	char(*ids)[RT_ID_LEN + 1] = calloc(count, sizeof(*ids));
	uint32_t *bases = calloc(count, sizeof(*bases));
	char **v = calloc(count + 1, sizeof(char *));
	bool rl = false;
	if (!agents || !ids || !bases || !v)
		rc = rung_err_set(err, ENOMEM, "out of memory");
	if (rc == 0)
		rc = copy_all(r, &s, count, agents, ids, bases, &rl, err);
	close(lock);
	lock = -1;
	unsigned made = 0;
	for (; rc == 0 && made < count; made++)
		if ((rc = fork_create(r, &s, agents[made], bases[made], err)) == 0)
			rc = (v[made] = strdup(ids[made])) ? 0 : -ENOMEM;
	if (rc < 0) { /* none of it: the forks made and the directories prepared */
		for (unsigned i = 0; ids && i < count && ids[i][0]; i++) {
			char dir[4096];
			rung_dispose(r, ids[i], NULL, NULL);
			rt_store_path(&r->store, ids[i], NULL, dir, sizeof(dir));
			rung_rm_rf(dir, NULL);
			rt_store_release_uid(&r->store, ids[i], bases[i]);
		}
		rung_strvfreep(&v);
		v = NULL;
	}
	free(agents);
	free(ids);
	free(bases);
	rt_meta_release(&s.m);
	if (rc < 0)
		return rung_err_wrap(err, "fork %s", id);
	*out = v;
	if (reflinked)
		*reflinked = rl;
	return (int)count;
}
