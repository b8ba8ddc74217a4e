/* rootfs/overlay.c: overlayfs mount plans (pure) and their application. */
#include <fcntl.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs.h"

/* overlayfs splits options on ',' and lowerdir on ':'; '\n' would corrupt mountinfo. */
static int check_path(const char *what, const char *p, struct rung_err *err)
{
	if (!p || p[0] != '/')
		return rung_err_set(err, EINVAL, "overlay %s '%s' is not an absolute path", what,
				    p ? p : "(null)");
	if (strpbrk(p, ",:\\\n"))
		return rung_err_set(err, EINVAL, "overlay %s '%s' contains ',', ':', '\\' or newline",
				    what, p);
	if (strlen(p) >= 256)
		return rung_err_set(err, ENAMETOOLONG, "overlay %s '%.64s...' longer than 255", what,
				    p);
	return 0;
}

int rfs_overlay_plan(const char *const *lowers, const char *upper, const char *work,
		     const char *target, struct rfs_mount_plan *out, struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	int r;
	if (!lowers || !lowers[0])
		return rung_err_set(err, EINVAL, "overlay: no lower layers");
	if (!upper != !work)
		return rung_err_set(err, EINVAL, "overlay: upper and work must be given together");
	if ((r = check_path("target", target, err)) < 0)
		return r;
	if (upper && ((r = check_path("upperdir", upper, err)) < 0 ||
		      (r = check_path("workdir", work, err)) < 0))
		return r;
	size_t n = 0, o = 0;
	o = (size_t)snprintf(out->data, sizeof(out->data), "lowerdir=");
	for (; lowers[n]; n++) {
		if ((r = check_path("lowerdir", lowers[n], err)) < 0)
			return rung_err_wrap(err, "layer %zu", n);
		size_t need = strlen(lowers[n]) + 1;
		if (o + need >= sizeof(out->data))
			return rung_err_set(err, E2BIG, "overlay: %zu+ layers exceed the option size", n);
		o += (size_t)snprintf(out->data + o, sizeof(out->data) - o, "%s%s", n ? ":" : "",
				      lowers[n]);
	}
	if (n > 500)
		return rung_err_set(err, E2BIG, "overlay: %zu layers (overlayfs max 500)", n);
	if (upper) {
		int w = snprintf(out->data + o, sizeof(out->data) - o, ",upperdir=%s,workdir=%s",
				 upper, work);
		if (w < 0 || (size_t)w >= sizeof(out->data) - o)
			return rung_err_set(err, E2BIG, "overlay: options too long");
	}
	snprintf(out->source, sizeof(out->source), "overlay");
	snprintf(out->fstype, sizeof(out->fstype), "overlay");
	snprintf(out->target, sizeof(out->target), "%s", target);
	out->read_only = !upper;
	out->bind = !upper && n == 1;
	out->flags = MS_NODEV | MS_NOSUID | (upper ? 0 : MS_RDONLY);
	return 0;
}

static int fsconfig_str(int fsfd, const char *k, const char *v)
{
	return (int)syscall(SYS_fsconfig, fsfd, FSCONFIG_SET_STRING, k, v, 0);
}

/* A detached clone of dir, idmapped to userns_fd. */
static int idmapped_clone(const char *dir, int userns_fd, struct rung_err *err)
{
	int tfd = (int)syscall(SYS_open_tree, AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tfd < 0)
		return rung_err_sys(err, errno, "open_tree %s", dir);
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns_fd };
	if (syscall(SYS_mount_setattr, tfd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
		int e = errno;
		close(tfd);
		return rung_err_sys(err, e, "idmap %s", dir);
	}
	return tfd;
}

/*
 * The new mount API: one "lowerdir+" per layer, so no single option hits a page limit.
 * Idmapped: overlayfs cannot take a detached mount (it clones each lower), so each layer's
 * idmapped clone is attached on scratch/N for the duration of the overlay's creation, then
 * detached again and the directory removed.
 */
static int apply_fsopen(const struct rfs_mount_plan *p, int userns_fd, const char *scratch,
			struct rung_err *err)
{
	cleanup_close int fsfd = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return -errno;
	char buf[RFS_MOUNT_DATA_MAX];
	snprintf(buf, sizeof(buf), "%s", p->data);
	char covered[512][280];
	size_t ncov = 0;
	int r = 0;
	char *save = NULL;
	for (char *opt = strtok_r(buf, ",", &save); r == 0 && opt; opt = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(opt, '=');
		if (!eq)
			continue;
		*eq = '\0';
		if (strcmp(opt, "lowerdir")) {
			if (fsconfig_str(fsfd, opt, eq + 1) < 0)
				r = rung_err_sys(err, errno, "overlay %s=%s", opt, eq + 1);
			continue;
		}
		char *s2 = NULL;
		for (char *l = strtok_r(eq + 1, ":", &s2); r == 0 && l; l = strtok_r(NULL, ":", &s2)) {
			if (userns_fd >= 0) {
				if (ncov == RUNG_ARRAY_SIZE(covered)) {
					r = rung_err_set(err, E2BIG, "overlay: too many layers");
					break;
				}
				char *at = covered[ncov];
				snprintf(at, sizeof(covered[0]), "%s/%zu", scratch, ncov);
				if (mkdir(at, 0700) < 0 && errno != EEXIST) {
					r = rung_err_sys(err, errno, "mkdir %s", at);
					break;
				}
				cleanup_close int tfd = idmapped_clone(l, userns_fd, err);
				if (tfd < 0) {
					rmdir(at);
					r = tfd;
					break;
				}
				if (syscall(SYS_move_mount, tfd, "", AT_FDCWD, at,
					    MOVE_MOUNT_F_EMPTY_PATH) < 0) {
					r = rung_err_sys(err, errno, "attach idmapped %s on %s", l, at);
					rmdir(at);
					break;
				}
				ncov++;
				l = at;
			}
			if (fsconfig_str(fsfd, "lowerdir+", l) < 0)
				r = rung_err_sys(err, errno, "overlay lowerdir+ %s", l);
		}
	}
	if (r == 0 && syscall(SYS_fsconfig, fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		r = rung_err_sys(err, errno, "overlay mount on %s", p->target);
	for (size_t i = 0; i < ncov; i++) {
		if (umount2(covered[i], MNT_DETACH) < 0)
			LOG_WARN("detach idmapped %s: %s", covered[i], strerror(errno));
		rmdir(covered[i]);
	}
	if (r < 0)
		return r;
	unsigned attr = (p->flags & MS_NODEV ? MOUNT_ATTR_NODEV : 0) |
			(p->flags & MS_NOSUID ? MOUNT_ATTR_NOSUID : 0) |
			(p->flags & MS_NOEXEC ? MOUNT_ATTR_NOEXEC : 0) |
			(p->flags & MS_RDONLY || p->read_only ? MOUNT_ATTR_RDONLY : 0);
	cleanup_close int mfd = (int)syscall(SYS_fsmount, fsfd, FSMOUNT_CLOEXEC, attr);
	if (mfd < 0)
		return rung_err_sys(err, errno, "overlay fsmount");
	if (syscall(SYS_move_mount, mfd, "", AT_FDCWD, p->target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return rung_err_sys(err, errno, "overlay move_mount to %s", p->target);
	return 0;
}

int rfs_overlay_apply_idmapped(const struct rfs_mount_plan *p, int userns_fd,
			       const char *scratch, struct rung_err *err)
{
	int r;
	if (userns_fd < 0)
		return rung_err_set(err, EBADF, "overlay: bad user namespace fd");
	if (p->bind)
		return rung_err_set(err, EINVAL, "overlay: an idmapped single-layer view needs an upper dir");
	if ((r = check_path("scratch dir", scratch, err)) < 0)
		return r;
	if (strlen(scratch) > 200)
		return rung_err_set(err, ENAMETOOLONG, "overlay scratch dir '%.64s...' too long",
				    scratch);
	r = apply_fsopen(p, userns_fd, scratch, err);
	return r == -ENOSYS ? rung_err_set(err, ENOSYS, "overlay: fsopen unavailable") : r;
}

/* One read-only layer: a read-only, nodev, nosuid bind of it (overlayfs needs two lowers). */
static int apply_bind(const struct rfs_mount_plan *p, struct rung_err *err)
{
	const char *src = p->data + strlen("lowerdir=");
	cleanup_close int tfd = (int)syscall(SYS_open_tree, AT_FDCWD, src,
					     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tfd < 0)
		return rung_err_sys(err, errno, "bind %s", src);
	struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY |
					    (p->flags & MS_NODEV ? MOUNT_ATTR_NODEV : 0) |
					    (p->flags & MS_NOSUID ? MOUNT_ATTR_NOSUID : 0) |
					    (p->flags & MS_NOEXEC ? MOUNT_ATTR_NOEXEC : 0) };
	if (syscall(SYS_mount_setattr, tfd, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
		return rung_err_sys(err, errno, "make the bind of %s read-only", src);
	if (syscall(SYS_move_mount, tfd, "", AT_FDCWD, p->target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return rung_err_sys(err, errno, "bind %s on %s", src, p->target);
	return 0;
}

int rfs_overlay_apply(const struct rfs_mount_plan *p, struct rung_err *err)
{
	if (p->bind)
		return apply_bind(p, err);
	int r = apply_fsopen(p, -1, NULL, err);
	if (r != -ENOSYS)
		return r;
	if (strlen(p->data) >= 4096)
		return rung_err_set(err, E2BIG, "overlay options exceed a page and fsopen is absent");
	if (mount(p->source, p->target, p->fstype, p->flags, p->data) < 0)
		return rung_err_sys(err, errno, "mount overlay on %s", p->target);
	return 0;
}
