/*
 * runtime/backend-container.c: the `container` rung. Everything the process rung does, with
 * an OCI image as the root: the image's unpacked layers (shared, read-only, never copied) are
 * idmapped into the sandbox's uid range and stacked under a per-sandbox overlayfs upper dir
 * that persists until dispose, on the sandbox's own size-limited disk (limits.disk, see
 * diskimg.h); memory, cpu and pids limits through the cgroup layer (v1 or v2);
 * suspend/resume through the freezer.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "rootfs/rfs.h"
#include "runtime/diskimg.h"
#include "runtime/sandbox-cgroup.h"
#include "runtime/sandbox-ns.h"

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

static bool container_available(const struct rung_router *r, struct rung_err *err)
{
	if (access(r->agent_path, X_OK) < 0) {
		rung_err_sys(err, errno, "rung-agent binary %s", r->agent_path);
		return false;
	}
	enum rt_cgroup_version v;
	bool hybrid;
	if (rt_cgroup_detect(rt_cgroup_root(r), &v, &hybrid, err) < 0)
		return false;
	return true;
}

static int container_prepare(struct rt_sandbox *sb, struct rung_err *err)
{
	return rt_image_lease(sb, "container", NULL, err);
}

struct ctr_ctx {
	struct rt_sandbox *sb;
	char **lowers;         /* unpacked layers, top-most first */
	struct rt_cgroup *cg;
	int disk_fd;           /* the detached mount of the sandbox's disk (upper, ovlwork) */
	struct rt_cgroup_birth birth; /* pid 1 born in its group; none: moved in by after_go */
};

/* In the supervisor, once the sandbox's pid 1 exists (ids mapped, still waiting): build its
 * root inside its mount namespace: each layer idmapped into the sandbox's uid range, then
 * the overlay. Mounted by host root, so overlay copy-up works
 * and nothing inside can unmount it. */
static int ctr_on_child(struct rt_sandbox *sb, pid_t child, void *ud, struct rung_err *err)
{
	struct ctr_ctx *c = ud;
	int r = 0;
	char p[4096];
	snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)child);
	cleanup_close int userns = open(p, O_RDONLY | O_CLOEXEC);
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)child);
	cleanup_close int mntns = open(p, O_RDONLY | O_CLOEXEC);
	cleanup_close int self = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (userns < 0 || mntns < 0 || self < 0)
		return rung_err_sys(err, errno, "open the sandbox's namespaces");
	size_t n = 0;
	while (c->lowers[n])
		n++;
	int *tfd = calloc(n ? n : 1, sizeof(int));
	if (!tfd)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		tfd[i] = -1;
	for (size_t i = 0; i < n && r == 0; i++) {
		tfd[i] = rfs_idmap_clone(c->lowers[i], userns,
					 MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, err);
		if (tfd[i] < 0)
			r = rung_err_wrap(err, "layer %zu", i);
	}
	rung_trace("container: layers idmapped");
	char **mnt = calloc(n + 1, sizeof(char *));
	if (r == 0 && !mnt)
		r = rung_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n && r == 0; i++) {
		char name[32];
		snprintf(name, sizeof(name), "lower/%zu", i);
		rt_store_path(&sb->router->store, sb->meta.id, name, p, sizeof(p));
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			r = rung_err_sys(err, errno, "mkdir %s", p);
		else if (!(mnt[i] = strdup(p)))
			r = rung_err_set(err, ENOMEM, "out of memory");
	}
	char disk[4096], upper[4200], work[4200], root[4096];
	rt_store_path(&sb->router->store, sb->meta.id, "disk", disk, sizeof(disk));
	snprintf(upper, sizeof(upper), "%s/upper", disk);
	snprintf(work, sizeof(work), "%s/ovlwork", disk);
	rt_store_path(&sb->router->store, sb->meta.id, "root", root, sizeof(root));
	struct rfs_mount_plan plan;
	if (r == 0)
		r = rfs_overlay_plan((const char *const *)mnt, upper, work, root, &plan, err);
	/* the layers relative to the sandbox's dir: its mountinfo shows "lower/0", never the
	 * store's host path or the sandbox's id (the cwd is ours alone once setns succeeded) */
	rt_store_path(&sb->router->store, sb->meta.id, NULL, p, sizeof(p));
	if (r == 0)
		r = rfs_overlay_relative(&plan, p, err);
	/* Enter the sandbox's mount namespace, attach the layers, mount the overlay, come back. */
	if (r == 0 && setns(mntns, CLONE_NEWNS) < 0)
		r = rung_err_sys(err, errno, "enter the sandbox's mount namespace");
	else if (r == 0) {
		/* the size-limited disk first: upper and ovlwork live on it */
		if (syscall(SYS_move_mount, c->disk_fd, "", AT_FDCWD, disk,
			    MOVE_MOUNT_F_EMPTY_PATH) < 0)
			r = rung_err_sys(err, errno, "attach the sandbox's disk at %s", disk);
		for (size_t i = 0; i < n && r == 0; i++)
			if (syscall(SYS_move_mount, tfd[i], "", AT_FDCWD, mnt[i],
				    MOVE_MOUNT_F_EMPTY_PATH) < 0)
				r = rung_err_sys(err, errno, "attach layer %zu", i);
		if (r == 0)
			r = rfs_overlay_apply(&plan, err);
		rung_trace("container: overlay mounted");
		if (setns(self, CLONE_NEWNS) < 0 && r == 0)
			r = rung_err_sys(err, errno, "leave the sandbox's mount namespace");
	}
	for (size_t i = 0; i < n; i++) {
		if (tfd[i] >= 0)
			close(tfd[i]);
		if (mnt)
			free(mnt[i]);
	}
	free(tfd);
	free(mnt);
	return r;
}

/* Then, while pid 1 builds its root: put it in its cgroup (unless born there), made now
 * unless it was made for that. pid 1 execs rung-agent only after this, so every process it
 * ever starts is born inside the cgroup. */
static int ctr_after_go(struct rt_sandbox *sb, pid_t child, void *ud, struct rung_err *err)
{
	struct ctr_ctx *c = ud;
	return rt_sandbox_cgroup_join(sb, &c->cg, &c->birth, child, err);
}

static int container_start(struct rt_sandbox *sb, int listen_fd, struct rung_err *err)
{
	const struct rung_spec *s = &sb->meta.spec;
	const char *digest = json_string_value(json_object_get(sb->meta.backend, "image_digest"));
	if (!digest)
		return rung_err_set(err, EINVAL, "container metadata lacks the image digest");
	struct rfs_store *st = NULL;
	struct rfs_image_info info = {0};
	struct ctr_ctx c = {.sb = sb, .disk_fd = -1, .birth = RT_CGROUP_BIRTH_NONE};
	char ref[100], p[4096];
	snprintf(ref, sizeof(ref), "@%s", digest);
	int r = rfs_store_open(sb->router->store.root, &st, err);
	if (r == 0)
		r = rfs_image_resolve(st, ref, &info, err);
	if (r == 0)
		r = rfs_image_layers(st, &info, &c.lowers, err);
	rfs_image_info_release(&info);
	rfs_store_free(st);
	rung_trace("container: image resolved");
	if (r < 0)
		return rung_err_wrap(err, "image %s", s->image);
	static const char *const dirs[] = {"disk", "root", "lower"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(dirs) && r == 0; i++) {
		rt_store_path(&sb->router->store, sb->meta.id, dirs[i], p, sizeof(p));
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			r = rung_err_sys(err, errno, "mkdir %s", p);
	}
	/* upper and ovlwork live on the sandbox's disk (limits.disk); the upper dir is the
	 * sandbox root's "/": its root owns it */
	if (r == 0 && (r = rt_sandbox_disk_mount(sb, err)) >= 0) {
		c.disk_fd = r;
		r = 0;
		if ((mkdirat(c.disk_fd, "upper", 0755) < 0 && errno != EEXIST) ||
		    fchownat(c.disk_fd, "upper", sb->meta.uid_base, sb->meta.uid_base,
			     AT_SYMLINK_NOFOLLOW) < 0 ||
		    (mkdirat(c.disk_fd, "ovlwork", 0700) < 0 && errno != EEXIST))
			r = rung_err_sys(err, errno, "limits.disk: make upper and ovlwork");
	}
	if (r == 0)
		r = rt_sandbox_cgroup_prepare(sb, &c.cg, &c.birth, err);
	cleanup_free char *resolv = NULL;
	int netns = -1;
	if (r == 0)
		r = rt_net_setup(sb, &netns, &resolv, err);
	if (r == 0) {
		rt_store_path(&sb->router->store, sb->meta.id, "root", p, sizeof(p));
		struct rt_root_params rp = {
			.work_dir = s->work_dir ? s->work_dir : RT_DEFAULT_WORK_DIR,
			.hostname = "rung",
			.tmp_bytes = s->limits.disk_bytes < (256ull << 20) ? s->limits.disk_bytes
									  : 256ull << 20,
			.root_mounted = true,
			.resolv_conf = resolv,
		};
		struct rt_ns_params np = {.root = p, .root_params = &rp, .netns_fd = netns,
					  .on_child = ctr_on_child, .after_go = ctr_after_go,
					  .ud = &c, .birth = &c.birth};
		r = rt_ns_start(sb, &np, listen_fd, err);
	}
	if (netns >= 0)
		close(netns);
	if (c.disk_fd >= 0)
		close(c.disk_fd); /* the sandbox's mount namespace holds it now */
	rt_cgroup_birth_close(&c.birth);
	if (r < 0) {
		struct rung_err e2 = {0};
		if (c.cg)
			rt_cgroup_destroy(c.cg, &e2);
		rt_net_teardown(sb);
	}
	if (r >= 0 && sb->owned && !sb->cg) /* for its execs (rt-internal.h) */
		sb->cg = rung_steal_ptr(&c.cg);
	rt_cgroup_free(c.cg);
	rung_strvfreep(&c.lowers);
	return r;
}

static void container_teardown(struct rt_sandbox *sb)
{
	rt_net_teardown(sb);
	rt_sandbox_cgroup_destroy(sb);
}

static int container_suspend(struct rt_sandbox *sb, struct rung_err *err)
{
	return rt_sandbox_cgroup_freeze(sb, true, err);
}

static int container_resume(struct rt_sandbox *sb, struct rung_err *err)
{
	struct rung_err e2 = {0};
	return rt_sandbox_cgroup_freeze(sb, false, err ? err : &e2);
}

static void container_cleanup(struct rt_sandbox *sb)
{
	container_teardown(sb);
	rt_image_release(sb);
}

const struct rt_backend_ops rt_backend_container = {
	.name = "container",
	.iso = RUNG_ISO_CONTAINER,
	.caps = RUNG_CAP_EXEC | RUNG_CAP_RUN_CODE | RUNG_CAP_FS_PERSIST | RUNG_CAP_INSTALL |
		RUNG_CAP_HOST_CALLBACKS,
	.available = container_available,
	.prepare = container_prepare,
	.start = container_start,
	.teardown = container_teardown,
	.suspend = container_suspend,
	.resume = container_resume,
	.cleanup = container_cleanup,
	.oom_kills = rt_sandbox_oom_kills,
};
