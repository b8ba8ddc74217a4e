/* rootfs/overlay.c: overlayfs mount plans (pure) and their application. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
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

/* The plan's paths, split in buf: its lowers (top-most first, at most max of them), upper and
 * work (NULL without). */
static int plan_paths(const struct rfs_mount_plan *p, char *buf, size_t len, char **lowers,
		      size_t max, size_t *n, char **upper, char **work, struct rung_err *err)
{
	snprintf(buf, len, "%s", p->data);
	*n = 0;
	*upper = *work = NULL;
	char *save = NULL;
	for (char *opt = strtok_r(buf, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		if (!strncmp(opt, "upperdir=", 9))
			*upper = opt + 9;
		else if (!strncmp(opt, "workdir=", 8))
			*work = opt + 8;
		if (strncmp(opt, "lowerdir=", 9))
			continue;
		char *s2 = NULL;
		for (char *l = strtok_r(opt + 9, ":", &s2); l; l = strtok_r(NULL, ":", &s2)) {
			if (*n == max)
				return rung_err_set(err, E2BIG, "overlay: more than %zu layers", max);
			lowers[(*n)++] = l;
		}
	}
	return 0;
}

/* Mounts the plan's stack: one lowerdir+ per layer where the kernel has it. */
static int apply_stack(const struct rfs_mount_plan *p, struct rung_err *err)
{
	char buf[RFS_MOUNT_DATA_MAX], *lowers[512], *upper, *work;
	size_t n = 0;
	int r = plan_paths(p, buf, sizeof(buf), lowers, RUNG_ARRAY_SIZE(lowers), &n, &upper, &work,
			   err);
	if (r == 0)
		r = !p->classic && has_lowerdir_plus() ? mount_fsopen(p, lowers, n, err)
						       : mount_classic(p, lowers, n, err);
	return r;
}

/* The deepest directory holding both a and b ("/x/s/fs", "/x/s/work" -> "/x/s"), into out. */
static void common_dir(const char *a, const char *b, char *out, size_t n)
{
	size_t k = 0, last = 0;
	while (a[k] && a[k] == b[k]) {
		if (a[k] == '/')
			last = k;
		k++;
	}
	if ((!a[k] || a[k] == '/') && (!b[k] || b[k] == '/'))
		last = k; /* one is the other's parent, or they are equal */
	snprintf(out, n, "%.*s", (int)(last ? last : 1), a);
}

/* dir's clone (idmapped to userns, or plain when userns < 0) attached on at (made). */
static int attach(const char *dir, int userns, const char *at, struct rung_err *err)
{
	if (mkdir(at, 0700) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s", at);
	cleanup_close int tfd = userns >= 0 ? rfs_idmap_clone(dir, userns, 0, err)
					    : (int)syscall(SYS_open_tree, AT_FDCWD, dir,
							   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tfd < 0)
		return userns >= 0 ? tfd : rung_err_sys(err, errno, "clone %s", dir);
	if (syscall(SYS_move_mount, tfd, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return rung_err_sys(err, errno, "attach %s on %s", dir, at);
	return 0;
}

/* The clones on at[0..n-1] detached, their dirs removed (what attach made of them). */
static void detach_all(char (*at)[PATH_MAX], size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (umount2(at[i], MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
			LOG_WARN("detach %s: %s", at[i], strerror(errno));
		rmdir(at[i]);
	}
}

/*
 * The stack of p mounted from scratch: each lower's idmapped clone attached on scratch/N
 * (overlayfs takes no detached mount: it clones each layer), the directory holding upper and
 * work cloned on scratch/u (overlayfs wants both on one mount), the overlay made from paths
 * relative to scratch, then the clones detached again (the overlay holds its own).
 */
static int apply_staged(const struct rfs_mount_plan *p, char **lowers, size_t n,
			const char *upper, const char *work, int userns, const char *scratch,
			struct rung_err *err)
{
	char (*at)[PATH_MAX] = calloc(n + 3, PATH_MAX);
	const char **rel = calloc(n + 1, sizeof(*rel));
	struct rfs_mount_plan *q = calloc(1, sizeof(*q));
	char base[PATH_MAX];
	size_t k = 0; /* the dirs made (and clones attached) at at[0..k-1]: the lowers', then u */
	int r = at && rel && q ? 0 : rung_err_set(err, ENOMEM, "overlay plan");
	for (; r == 0 && k < n; k++) {
		snprintf(at[k], PATH_MAX, "%s/%zu", scratch, k);
		rel[k] = at[k];
		if ((r = attach(lowers[k], userns, at[k], err)) < 0)
			rung_err_wrap(err, "overlay lowerdir %s (idmapped)", lowers[k]);
	}
	if (r == 0 && upper) {
		common_dir(upper, work, base, sizeof(base));
		size_t b = strcmp(base, "/") ? strlen(base) : 0;
		snprintf(at[n], PATH_MAX, "%s/u", scratch);
		if (snprintf(at[n + 1], PATH_MAX, "%s/u%s", scratch, upper + b) >= PATH_MAX ||
		    snprintf(at[n + 2], PATH_MAX, "%s/u%s", scratch, work + b) >= PATH_MAX)
			r = rung_err_set(err, ENAMETOOLONG, "overlay upperdir %s: path too long",
					 upper);
		else {
			r = attach(base, -1, at[n], err);
			k++; /* scratch/u made, to detach and remove even after a failed attach */
		}
	}
	if (r == 0)
		r = rfs_overlay_plan(rel, upper ? at[n + 1] : NULL, upper ? at[n + 2] : NULL,
				     p->target, q, err);
	if (r == 0) {
		q->flags = p->flags;
		q->classic = p->classic;
		r = rfs_overlay_relative(q, scratch, err);
	}
	if (r == 0)
		r = rfs_overlay_apply(q, err);
	if (at)
		detach_all(at, k);
	free(at);
	free(rel);
	free(q);
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
	char buf[RFS_MOUNT_DATA_MAX], *lowers[512], *upper, *work;
	size_t n = 0;
	if ((r = plan_paths(p, buf, sizeof(buf), lowers, RUNG_ARRAY_SIZE(lowers), &n, &upper,
			    &work, err)) < 0)
		return r;
	return apply_staged(p, lowers, n, upper, work, userns_fd, scratch, err);
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
		return p->bind ? apply_bind(p, err) : apply_stack(p, err);
	cleanup_close int old = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	cleanup_close int dir = open(p->base, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (old < 0)
		return rung_err_sys(err, errno, "open the working directory");
	if (dir < 0 || fchdir(dir) < 0)
		return rung_err_sys(err, errno, "overlay base dir %s", p->base);
	int r = p->bind ? apply_bind(p, err) : apply_stack(p, err);
	if (fchdir(old) < 0 && r == 0)
		r = rung_err_sys(err, errno, "back to the working directory");
	return r;
}
