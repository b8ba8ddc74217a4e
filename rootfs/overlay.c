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

/*
 * Does this kernel's overlayfs take "lowerdir+" (Linux 6.8)? Before 6.5 overlayfs parses
 * nothing at fsconfig time (the generic legacy parser takes any key, and an unknown one fails
 * only at create), so a made-up key succeeding means "no"; from 6.5 an unknown key is refused
 * at once, and "lowerdir+" itself tells.
 */
static bool has_lowerdir_plus(void)
{
	cleanup_close int fd = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
	if (fd < 0 || fsconfig_str(fd, "rung-probe", "1") == 0)
		return false;
	return fsconfig_str(fd, "lowerdir+", "/") == 0;
}

/* The options with lowerdir replaced by the layers as given (top-most first). */
static int classic_data(const struct rfs_mount_plan *p, char *const *lowers, size_t n, char *out,
			size_t outlen, struct rung_err *err)
{
	size_t o = (size_t)snprintf(out, outlen, "lowerdir=");
	for (size_t i = 0; i < n && o < outlen; i++)
		o += (size_t)snprintf(out + o, outlen - o, "%s%s", i ? ":" : "", lowers[i]);
	const char *rest = strchr(p->data, ',');
	if (o < outlen && rest)
		o += (size_t)snprintf(out + o, outlen - o, "%s", rest);
	if (o >= outlen)
		return rung_err_set(err, E2BIG,
				    "overlay: %zu layers need %zu bytes of options, over the %zu "
				    "the classic lowerdir= option holds; one option per layer "
				    "(overlayfs lowerdir+) needs Linux 6.8",
				    n, o, outlen - 1);
	return 0;
}

static int mount_classic(const struct rfs_mount_plan *p, char *const *lowers, size_t n,
			 struct rung_err *err)
{
	char data[4096]; /* mount(2) copies one page of options */
	int r = classic_data(p, lowers, n, data, sizeof(data), err);
	if (r < 0)
		return r;
	unsigned long fl = p->flags | (p->read_only ? MS_RDONLY : 0);
	if (mount(p->source, p->target, p->fstype, fl, data) < 0)
		return rung_err_sys(err, errno, "mount overlay on %s", p->target);
	return 0;
}

/* The new mount API: one "lowerdir+" per layer, so no single option hits a page limit. */
static int mount_fsopen(const struct rfs_mount_plan *p, char *const *lowers, size_t n,
			struct rung_err *err)
{
	cleanup_close int fsfd = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return rung_err_sys(err, errno, "fsopen overlay");
	char buf[RFS_MOUNT_DATA_MAX];
	snprintf(buf, sizeof(buf), "%s", p->data);
	char *save = NULL;
	for (char *opt = strtok_r(buf, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(opt, '=');
		if (!eq || !strncmp(opt, "lowerdir=", 9))
			continue;
		*eq = '\0';
		if (fsconfig_str(fsfd, opt, eq + 1) < 0)
			return rung_err_sys(err, errno, "overlay %s=%s", opt, eq + 1);
	}
	for (size_t i = 0; i < n; i++)
		if (fsconfig_str(fsfd, "lowerdir+", lowers[i]) < 0)
			return rung_err_sys(err, errno, "overlay lowerdir+ %s", lowers[i]);
	if (syscall(SYS_fsconfig, fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return rung_err_sys(err, errno, "overlay mount on %s", p->target);
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

/*
 * Mounts the plan's stack. Idmapped: overlayfs cannot take a detached mount (it clones each
 * lower), so each layer's idmapped clone is attached on scratch/N for the duration of the
 * overlay's creation, then detached again and the directory removed.
 */
static int apply_stack(const struct rfs_mount_plan *p, int userns_fd, const char *scratch,
		       struct rung_err *err)
{
	char buf[RFS_MOUNT_DATA_MAX];
	snprintf(buf, sizeof(buf), "%s", p->data + strlen("lowerdir="));
	char *comma = strchr(buf, ',');
	if (comma)
		*comma = '\0';
	char *lowers[512];
	char covered[512][280];
	size_t n = 0, ncov = 0;
	int r = 0;
	char *s2 = NULL;
	for (char *l = strtok_r(buf, ":", &s2); r == 0 && l; l = strtok_r(NULL, ":", &s2)) {
		if (n == RUNG_ARRAY_SIZE(lowers)) {
			r = rung_err_set(err, E2BIG, "overlay: too many layers");
			break;
		}
		if (userns_fd >= 0) {
			char *at = covered[ncov];
			snprintf(at, sizeof(covered[0]), "%s/%zu", scratch, ncov);
			if (mkdir(at, 0700) < 0 && errno != EEXIST) {
				r = rung_err_sys(err, errno, "mkdir %s", at);
				break;
			}
			cleanup_close int tfd = rfs_idmap_clone(l, userns_fd, 0, err);
			if (tfd < 0) {
				rmdir(at);
				r = tfd;
				break;
			}
			if (syscall(SYS_move_mount, tfd, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH) <
			    0) {
				r = rung_err_sys(err, errno, "attach idmapped %s on %s", l, at);
				rmdir(at);
				break;
			}
			ncov++;
			l = at;
		}
		lowers[n++] = l;
	}
	if (r == 0)
		r = !p->classic && has_lowerdir_plus() ? mount_fsopen(p, lowers, n, err)
						       : mount_classic(p, lowers, n, err);
	for (size_t i = 0; i < ncov; i++) {
		if (umount2(covered[i], MNT_DETACH) < 0)
			LOG_WARN("detach idmapped %s: %s", covered[i], strerror(errno));
		rmdir(covered[i]);
	}
	return r;
}

int rfs_overlay_apply_idmapped(const struct rfs_mount_plan *p, int userns_fd,
			       const char *scratch, struct rung_err *err)
{
	int r;
	if (userns_fd < 0)
		return rung_err_set(err, EBADF, "overlay: bad user namespace fd");
	if (p->bind)
		return rung_err_set(err, EINVAL, "overlay: an idmapped single-layer view needs an upper dir");
	if (p->base[0])
		return rung_err_set(err, EINVAL, "overlay: an idmapped stack takes absolute layers, "
						 "not ones relative to %s", p->base);
	if ((r = check_path("scratch dir", scratch, err)) < 0)
		return r;
	if (strlen(scratch) > 200)
		return rung_err_set(err, ENAMETOOLONG, "overlay scratch dir '%.64s...' too long",
				    scratch);
	return apply_stack(p, userns_fd, scratch, err);
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

/* path relative to base ("base/x/y" -> "x/y"), or NULL when it is not below base. */
static const char *below(const char *path, const char *base)
{
	size_t n = strlen(base);
	while (n > 1 && base[n - 1] == '/')
		n--;
	if (strncmp(path, base, n) || path[n] != '/')
		return NULL;
	while (path[n] == '/')
		n++;
	return path[n] ? path + n : NULL;
}

int rfs_overlay_relative(struct rfs_mount_plan *p, const char *base, struct rung_err *err)
{
	int r;
	if ((r = check_path("base dir", base, err)) < 0)
		return r;
	char in[RFS_MOUNT_DATA_MAX], out[RFS_MOUNT_DATA_MAX];
	snprintf(in, sizeof(in), "%s", p->data);
	size_t o = 0;
	char *save = NULL;
	for (char *opt = strtok_r(in, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(opt, '=');
		if (!eq || (strncmp(opt, "lowerdir=", 9) && strncmp(opt, "upperdir=", 9) &&
			    strncmp(opt, "workdir=", 8))) {
			o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s", o ? "," : "", opt);
			continue;
		}
		*eq = '\0';
		o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s=", o ? "," : "", opt);
		char *s2 = NULL;
		size_t k = 0;
		for (char *d = strtok_r(eq + 1, ":", &s2); d; d = strtok_r(NULL, ":", &s2), k++) {
			const char *rel = below(d, base);
			if (!rel)
				return rung_err_set(err, EINVAL, "overlay %s '%s' is not below '%s'",
						    opt, d, base);
			o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s", k ? ":" : "", rel);
		}
		if (o >= sizeof(out))
			return rung_err_set(err, E2BIG, "overlay: options too long");
	}
	memcpy(p->data, out, o + 1);
	snprintf(p->base, sizeof(p->base), "%s", base);
	return 0;
}

/*
 * With a base dir, the layers' relative paths resolve from it: the working directory is
 * base's for the mount's creation, then the caller's again.
 */
int rfs_overlay_apply(const struct rfs_mount_plan *p, struct rung_err *err)
{
	if (!p->base[0])
		return p->bind ? apply_bind(p, err) : apply_stack(p, -1, NULL, err);
	cleanup_close int old = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	cleanup_close int dir = open(p->base, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (old < 0)
		return rung_err_sys(err, errno, "open the working directory");
	if (dir < 0 || fchdir(dir) < 0)
		return rung_err_sys(err, errno, "overlay base dir %s", p->base);
	int r = p->bind ? apply_bind(p, err) : apply_stack(p, -1, NULL, err);
	if (fchdir(old) < 0 && r == 0)
		r = rung_err_sys(err, errno, "back to the working directory");
	return r;
}
