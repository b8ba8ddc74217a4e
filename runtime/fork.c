/*
 * runtime/fork.c: rung_fork: new sandboxes whose filesystem starts as the source's is now.
 *
 * Shared-kernel rungs: the source's files all live on its disk image (process rung: the work
 * dir; container rung: the overlay's upper dir and ovlwork), so a fork is that image, copied
 * while the source is stopped and its filesystem synced: a reflink (FICLONE) where the store's
 * filesystem shares extents, else a sparse copy. Processes are not copied (a fork starts with
 * only its agent). Files of the source's uid range are then remapped into the fork's (on a
 * host mount of the copy that nothing else sees), and the fork is created as usual over the
 * kept image, with the source's spec and scope and thread labels.
 *
 * The vm rung: the guest's writable disk is its upper disk (upper.ext4, guest-owned files, no
 * host uid range inside): the guest syncs its filesystems (an exec of sync), the VM is paused,
 * the disk copied the same way and the VM continued; the fork boots on its copy. Its memory is
 * not copied (the VM memory snapshots issue).
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
	int mfd = rt_disk_mount(r->loop_control, img, to, false, err);
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
	if (m->iso == RUNG_ISO_VM)
		return 0; /* the guest synced before the pause (guest_sync) */
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
	const char *disk = s->m.iso == RUNG_ISO_VM ? "upper.ext4" : "disk.img";
	snprintf(src, sizeof(src), "%s/%s", s->dir, disk);
	snprintf(dst, sizeof(dst), "%s/%s", dir, disk);
	if ((rc = rt_disk_clone(src, dst, reflinked, err)) < 0)
		return rc;
	/* the vm rung's jail reads its disks as the sandbox's uid (rfs_vm_upper_disk) */
	if (s->m.iso == RUNG_ISO_VM && chown(dst, *base, *base) < 0)
		return rung_err_sys(err, errno, "fork: chown %s", dst);
	return 0;
}

/* With the source stopped and its filesystem synced (under its lock): fn, then continue it. */
static int while_stopped(struct rung_router *r, struct fork_src *s,
			 int (*fn)(struct rung_router *r, struct fork_src *s, void *ud,
				   struct rung_err *err),
			 void *ud, struct rung_err *err)
{
	const struct rt_backend_ops *ops = rt_backend_get(s->m.iso);
	struct rt_sandbox sb = {.router = r, .meta = s->m};
	memcpy(sb.dir, s->dir, sizeof(sb.dir));
	bool stopped = s->m.state == RUNG_STATE_RUNNING;
	int rc = stopped ? ops->suspend(&sb, err) : 0;
	if (rc == 0)
		rc = sync_source(&s->m, err);
	if (rc == 0)
		rc = fn(r, s, ud, err);
	struct rung_err e2 = {0};
	if (stopped && ops->resume(&sb, &e2) < 0 && rc == 0) {
		*err = e2;
		rc = -EIO;
	}
	return rc;
}

struct copy_job {
	unsigned n;
	char (*agents)[33];
	char (*ids)[RT_ID_LEN + 1];
	uint32_t *bases;
	bool reflinked;
};

static int copy_all(struct rung_router *r, struct fork_src *s, void *ud, struct rung_err *err)
{
	struct copy_job *j = ud;
	int rc = 0;
	for (unsigned i = 0; rc == 0 && i < j->n; i++)
		rc = fork_prepare(r, s, j->agents[i], j->ids[i], &j->bases[i], &j->reflinked, err);
	return rc;
}

/* The source: locked (the lock's fd returned), its metadata read, checked for op. */
static int src_open(struct rung_router *r, const char *id, const char *scope, const char *op,
		    struct fork_src *s, struct rung_err *err)
{
	memset(s, 0, sizeof(*s));
	if (!rt_id_valid(id))
		return rung_err_set(err, ENOENT, "no sandbox '%.80s'", id ? id : "");
	int lock = rt_store_lock_sandbox(&r->store, id, false, false, err);
	if (lock < 0)
		return lock;
	int rc = rt_store_meta_read(&r->store, id, &s->m, err);
	if (rc < 0) {
		close(lock);
		return rc;
	}
	char label[65];
	if (scope)
		rt_label_of(scope, label);
	if ((scope && strcmp(label, s->m.labels.scope)) || rt_pool_unclaimed(&s->m))
		rc = rung_err_set(err, ENOENT, "no sandbox %s", id);
	else if (!rt_supervisor_alive(&s->m))
		rc = rung_err_set(err, ESRCH, "%s: sandbox %s is not running", op, id);
	if (rc < 0) {
		rt_meta_release(&s->m);
		close(lock);
		return rc;
	}
	rt_store_path(&r->store, id, NULL, s->dir, sizeof(s->dir));
	return lock;
}

static int fork_create(struct rung_router *r, const struct fork_src *s, const char *agent,
		       uint32_t base, struct rung_err *err)
{
	char img[4300], dir[4096], id[RT_ID_LEN + 1];
	struct rung_key k = {.scope = "rung-fork", .thread = s->m.id, .agent = agent};
	rt_id_compute(&k, s->m.spec.kind, id);
	rt_store_path(&r->store, id, NULL, dir, sizeof(dir));
	snprintf(img, sizeof(img), "%s/disk.img", dir);
	int rc = s->m.iso == RUNG_ISO_VM ? 0 : remap_image(r, img, s->m.uid_base, base, err);
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

/* The vm rung: have the guest write its dirty pages out before the VM is paused (the host
 * sees its disk only; what a command writes after this is crash-consistent in the copy). */
static int guest_sync(struct rung_router *r, const char *id, const char *scope,
		      struct rung_err *err)
{
	struct rung_sandbox *h = NULL;
	if (!rt_id_valid(id) || rung_sandbox_open(r, id, scope, &h, NULL) < 0 ||
	    rung_sandbox_isolation(h) != RUNG_ISO_VM) {
		rung_sandbox_close(h);
		return 0; /* src_open says what is wrong, if anything */
	}
	int rc = rt_guest_sync(h, "fork", err);
	rung_sandbox_close(h);
	return rc < 0 ? rung_err_wrap(err, "fork %s", id) : 0;
}

int rung_fork(struct rung_router *r, const char *id, const char *scope, unsigned count,
	      char ***out, bool *reflinked, struct rung_err *err)
{
	if (count < 1 || count > 64)
		return rung_err_set(err, EINVAL, "count: %u is not 1..64", count);
	struct fork_src s;
	int lock = guest_sync(r, id, scope, err);
	if (lock == 0)
		lock = src_open(r, id, scope, "fork", &s, err);
	if (lock < 0)
		return lock;
	struct copy_job j = {.n = count,
			     .agents = calloc(count, sizeof(*j.agents)),
			     .ids = calloc(count, sizeof(*j.ids)),
			     .bases = calloc(count, sizeof(*j.bases))};
	char **v = calloc(count + 1, sizeof(char *));
	int rc = 0;
	if (!j.agents || !j.ids || !j.bases || !v)
		rc = rung_err_set(err, ENOMEM, "out of memory");
	if (rc == 0)
		rc = while_stopped(r, &s, copy_all, &j, err);
	close(lock);
	for (unsigned made = 0; rc == 0 && made < count; made++)
		if ((rc = fork_create(r, &s, j.agents[made], j.bases[made], err)) == 0)
			rc = (v[made] = strdup(j.ids[made])) ? 0 : -ENOMEM;
	if (rc < 0) { /* none of it: the forks made and the directories prepared */
		for (unsigned i = 0; j.ids && i < count && j.ids[i][0]; i++) {
			char dir[4096];
			rung_dispose(r, j.ids[i], NULL, NULL);
			rt_store_path(&r->store, j.ids[i], NULL, dir, sizeof(dir));
			rung_rm_rf(dir, NULL);
			rt_store_release_uid(&r->store, j.ids[i], j.bases[i]);
		}
		rung_strvfreep(&v);
		v = NULL;
	}
	free(j.agents);
	free(j.ids);
	free(j.bases);
	rt_meta_release(&s.m);
	if (rc < 0)
		return rung_err_wrap(err, "fork %s", id);
	*out = v;
	if (reflinked)
		*reflinked = j.reflinked;
	return (int)count;
}

/* ---- the changes of a sandbox, for rung image commit ---- */

struct rung_changes {
	int mfd, dirfd;
	char img[4200];
	char prefix[256];
	char base[80];
	uint32_t id_base;
};

static int clone_for_changes(struct rung_router *r, struct fork_src *s, void *ud,
			     struct rung_err *err)
{
	(void)r;
	struct rung_changes *c = ud;
	char src[4200];
	bool rl;
	snprintf(src, sizeof(src), "%s/%s", s->dir,
		 s->m.iso == RUNG_ISO_VM ? "upper.ext4" : "disk.img");
	return rt_disk_clone(src, c->img, &rl, err);
}

int rung_changes_open(struct rung_router *r, const char *id, const char *scope,
		      struct rung_changes **out, struct rung_err *err)
{
	struct fork_src s;
	int lock = guest_sync(r, id, scope, err);
	if (lock == 0)
		lock = src_open(r, id, scope, "image commit", &s, err);
	if (lock < 0)
		return lock;
	struct rung_changes *c = calloc(1, sizeof(*c));
	int rc = c ? 0 : rung_err_set(err, ENOMEM, "out of memory");
	if (c) {
		c->mfd = c->dirfd = -1;
		/* the vm rung's upper disk holds the guest's own ids (no host range) */
		c->id_base = s.m.iso == RUNG_ISO_VM ? 0 : s.m.uid_base;
		snprintf(c->img, sizeof(c->img), "%s/commit-%d.img", s.dir, (int)getpid());
		const char *wd = s.m.spec.work_dir ? s.m.spec.work_dir : RT_DEFAULT_WORK_DIR;
		if (s.m.iso == RUNG_ISO_PROCESS)
			snprintf(c->prefix, sizeof(c->prefix), "%s", wd + 1);
		const char *d = json_string_value(json_object_get(s.m.backend, "image_digest"));
		if (s.m.iso != RUNG_ISO_PROCESS && d)
			snprintf(c->base, sizeof(c->base), "%s", d);
		rc = while_stopped(r, &s, clone_for_changes, c, err);
	}
	close(lock);
	rt_meta_release(&s.m);
	if (rc == 0 && (c->mfd = rt_disk_mount(r->loop_control, c->img, c->id_base, false, err)) < 0)
		rc = c->mfd;
	if (rc == 0 && (c->dirfd = openat(c->mfd, c->prefix[0] ? "." : "upper",
					  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		rc = rung_err_sys(err, errno, "image commit: open the copy of %s", id);
	if (rc < 0) {
		rung_changes_close(c);
		return rung_err_wrap(err, "image commit %s", id);
	}
	*out = c;
	return 0;
}

int rung_changes_dirfd(const struct rung_changes *c)
{
	return c->dirfd;
}

const char *rung_changes_prefix(const struct rung_changes *c)
{
	return c->prefix;
}

const char *rung_changes_base_image(const struct rung_changes *c)
{
	return c->base[0] ? c->base : NULL;
}

uint32_t rung_changes_id_base(const struct rung_changes *c)
{
	return c->id_base;
}

void rung_changes_close(struct rung_changes *c)
{
	if (!c)
		return;
	if (c->dirfd >= 0)
		close(c->dirfd);
	if (c->mfd >= 0)
		close(c->mfd);
	char real[PATH_MAX];
	bool known = realpath(c->img, real) != NULL;
	unlink(c->img);
	for (int i = 0; known && i < 100 && rt_disk_loops_under(real) > 0; i++)
		usleep(20000);
	free(c);
}
