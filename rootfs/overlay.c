/* rootfs/overlay.c: overlayfs mount plans (pure) and their application. */
#include <fcntl.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
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
	if (!upper && !lowers[1])
		return rung_err_set(err, EINVAL,
				    "overlay: a read-only stack needs at least two lower layers "
				    "(bind-mount a single layer instead)");
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
	out->flags = MS_NODEV | (upper ? 0 : MS_RDONLY);
	return 0;
}

static int fsconfig_str(int fsfd, const char *k, const char *v)
{
	return (int)syscall(SYS_fsconfig, fsfd, FSCONFIG_SET_STRING, k, v, 0);
}

/* The new mount API: one "lowerdir+" per layer, so no single option hits a page limit. */
static int apply_fsopen(const struct rfs_mount_plan *p, struct rung_err *err)
{
	cleanup_close int fsfd = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return -errno;
	char buf[RFS_MOUNT_DATA_MAX];
	snprintf(buf, sizeof(buf), "%s", p->data);
	char *save = NULL;
	for (char *opt = strtok_r(buf, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(opt, '=');
		if (!eq)
			continue;
		*eq = '\0';
		if (!strcmp(opt, "lowerdir")) {
			char *s2 = NULL;
			for (char *l = strtok_r(eq + 1, ":", &s2); l; l = strtok_r(NULL, ":", &s2))
				if (fsconfig_str(fsfd, "lowerdir+", l) < 0)
					return rung_err_sys(err, errno, "overlay lowerdir+ %s", l);
		} else if (fsconfig_str(fsfd, opt, eq + 1) < 0) {
			return rung_err_sys(err, errno, "overlay %s=%s", opt, eq + 1);
		}
	}
	if (syscall(SYS_fsconfig, fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return rung_err_sys(err, errno, "overlay mount on %s", p->target);
	unsigned attr = MOUNT_ATTR_NODEV | (p->read_only ? MOUNT_ATTR_RDONLY : 0);
	cleanup_close int mfd = (int)syscall(SYS_fsmount, fsfd, FSMOUNT_CLOEXEC, attr);
	if (mfd < 0)
		return rung_err_sys(err, errno, "overlay fsmount");
	if (syscall(SYS_move_mount, mfd, "", AT_FDCWD, p->target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return rung_err_sys(err, errno, "overlay move_mount to %s", p->target);
	return 0;
}

int rfs_overlay_apply(const struct rfs_mount_plan *p, struct rung_err *err)
{
	int r = apply_fsopen(p, err);
	if (r != -ENOSYS)
		return r;
	if (strlen(p->data) >= 4096)
		return rung_err_set(err, E2BIG, "overlay options exceed a page and fsopen is absent");
	if (mount(p->source, p->target, p->fstype, p->flags, p->data) < 0)
		return rung_err_sys(err, errno, "mount overlay on %s", p->target);
	return 0;
}
