/*
 * oci/overlay.c: a rootfs that is an overlayfs mount (containerd's default snapshotter mounts
 * the image's layers and the container's upper dir there). An overlayfs mount itself cannot be
 * idmapped, its layers can (Linux 5.19): in the container's mount namespace the same stack is
 * mounted again over the rootfs, each lower layer through an idmapped mount for the
 * container's user namespace (rootfs/overlay.c), the upper and work dirs as they are, the
 * upper's top directory given to the container's root (a fresh container's upper is empty).
 * The layers' clones and the upper's are attached under rung-oci's state directory while the
 * overlay is made from paths relative to it, so the container's mountinfo shows "0:1", "u/fs"
 * and "u/work", no host path of containerd's or rung-oci's.
 * The first overlay is detached from the host's namespace (its options read) before the init
 * is cloned, so the container's mount namespace never holds it: two overlays on one upper dir
 * at once are undefined behaviour to overlayfs (it warns in the kernel log). The shim's delete
 * unmounts what is left on the rootfs, which is then nothing.
 */
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
#include <sys/vfs.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "oci/oci-internal.h"
#include "rootfs/rfs.h"

#define MAX_LOWERS 128
#define OVERLAY_MAGIC 0x794c7630 /* OVERLAYFS_SUPER_MAGIC */

bool oci_rootfs_is_overlay(const char *rootfs)
{
	struct statfs sf;
	return statfs(rootfs, &sf) == 0 && sf.f_type == OVERLAY_MAGIC;
}

/* The super options of the overlay mounted on target (this mount namespace's mountinfo). */
static int overlay_options(const char *target, char *opts, size_t n, struct rung_err *err)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return rung_err_sys(err, errno, "read /proc/self/mountinfo");
	char line[8192];
	int r = rung_err_set(err, ENOENT, "root.path %s: no overlay mounted there", target);
	while (fgets(line, sizeof(line), f)) {
		char mp[4096], type[32], super[4096];
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 || strcmp(mp, target) ||
		    sscanf(dash + 3, "%31s %*s %4095s", type, super) != 2)
			continue;
		if (strcmp(type, "overlay")) /* the last mount on target counts */
			r = rung_err_set(err, EINVAL, "root.path %s: a %s mount, not overlay",
					 target, type);
		else if (strchr(super, '\\'))
			r = rung_err_set(err, EINVAL, "root.path %s: overlay layer paths with escaped"
					 " characters are not supported", target);
		else
			r = snprintf(opts, n, "%s", super) < (int)n ? 0
			    : rung_err_set(err, E2BIG, "root.path %s: overlay options too long", target);
	}
	fclose(f);
	return r;
}

/* key=value of opts (comma-separated) into out; "" when absent. */
static void option(const char *opts, const char *key, char *out, size_t n)
{
	size_t k = strlen(key);
	out[0] = '\0';
	for (const char *p = opts; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, key, k) && p[k] == '=') {
			snprintf(out, n, "%.*s", (int)strcspn(p + k + 1, ","), p + k + 1);
			return;
		}
}

int oci_overlay_take(const char *rootfs, char *opts, size_t n, struct rung_err *err)
{
	int r = overlay_options(rootfs, opts, n, err);
	if (r == 0 && umount2(rootfs, MNT_DETACH) < 0)
		r = rung_err_sys(err, errno, "root.path %s: detach the overlay", rootfs);
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

/* Detach the clones on scratch/0..n-1 (and scratch/u with upper), remove their dirs. */
static void detach_all(const char *scratch, size_t n, bool upper)
{
	char at[PATH_MAX];
	for (size_t i = 0; i < n + upper; i++) {
		if (i == n)
			snprintf(at, sizeof(at), "%s/u", scratch);
		else
			snprintf(at, sizeof(at), "%s/%zu", scratch, i);
		if (umount2(at, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
			LOG_WARN("detach %s: %s", at, strerror(errno));
		rmdir(at);
	}
}

/* dir's clone (idmapped to userns, or plain when userns < 0) attached on at. */
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

/*
 * The stack mounted from scratch, so that the overlay's options (what /proc/self/mountinfo
 * shows inside the container) name no host path: each lower's idmapped clone attached on
 * scratch/N, the directory holding upper and work cloned on scratch/u, the overlay made from
 * paths relative to scratch ("0:1", "u/fs", "u/work"; rfs_overlay_relative, as rung's own
 * container rung does), then the clones detached again (the overlay keeps its own).
 */
static int mount_hidden(const char *rootfs, const char *const *lowers, size_t n,
			const char *upper, const char *work, int userns, const char *scratch,
			struct rung_err *err)
{
	char (*at)[PATH_MAX] = calloc(n + 3, PATH_MAX);
	const char **rel = calloc(n + 1, sizeof(*rel));
	struct rfs_mount_plan *p = calloc(1, sizeof(*p));
	char base[PATH_MAX];
	size_t k = 0; /* the lowers' clones made (and their dirs), then u's */
	bool up = upper[0];
	int r = at && rel && p ? 0 : rung_err_set(err, ENOMEM, "overlay plan");
	for (; r == 0 && k < n; k++) {
		snprintf(at[k], PATH_MAX, "%s/%zu", scratch, k);
		rel[k] = at[k];
		if ((r = attach(lowers[k], userns, at[k], err)) < 0)
			rung_err_wrap(err, "overlay lowerdir %s (idmapped)", lowers[k]);
	}
	if (r == 0 && up) {
		common_dir(upper, work, base, sizeof(base));
		snprintf(at[n], PATH_MAX, "%s/u", scratch);
		size_t b = strcmp(base, "/") ? strlen(base) : 0;
		if (snprintf(at[n + 1], PATH_MAX, "%s/u%s", scratch, upper + b) >= PATH_MAX ||
		    snprintf(at[n + 2], PATH_MAX, "%s/u%s", scratch, work + b) >= PATH_MAX)
			r = rung_err_set(err, ENAMETOOLONG, "overlay upperdir %s: path too long",
					 upper);
		else
			r = attach(base, -1, at[n], err);
	}
	if (r == 0)
		r = rfs_overlay_plan(rel, up ? at[n + 1] : NULL, up ? at[n + 2] : NULL, rootfs, p,
				     err);
	if (r == 0 && p->bind) /* one read-only layer: its idmapped bind does */
		r = rung_err_set(err, EINVAL, "root.path %s: a one-layer read-only overlay", rootfs);
	if (r == 0)
		r = rfs_overlay_relative(p, scratch, err);
	if (r == 0)
		r = rfs_overlay_apply(p, err);
	if (at)
		detach_all(scratch, k, up && k == n);
	free(at);
	free(rel);
	free(p);
	return r;
}

int oci_overlay_idmapped(const char *rootfs, const char *opts, int userns, uint32_t host_root,
			 const char *scratch, struct rung_err *err)
{
	char lower[4096], upper[4096], work[4096];
	option(opts, "lowerdir", lower, sizeof(lower));
	option(opts, "upperdir", upper, sizeof(upper));
	option(opts, "workdir", work, sizeof(work));
	const char *lowers[MAX_LOWERS + 1];
	size_t n = 0;
	char *save = NULL;
	for (char *l = strtok_r(lower, ":", &save); l; l = strtok_r(NULL, ":", &save)) {
		if (l[0] != '/' || n == MAX_LOWERS)
			return rung_err_set(err, EINVAL, "root.path %s: overlay lowerdir %s: want "
					    "absolute paths, at most %d", rootfs, l, MAX_LOWERS);
		lowers[n++] = l;
	}
	lowers[n] = NULL;
	if (!upper[0] != !work[0])
		return rung_err_set(err, EINVAL, "root.path %s: overlay upperdir and workdir must "
				    "be given together", rootfs);
	/* the upper's top directory is the container's "/": its root's, as with rung's rung */
	if (upper[0] && (chown(upper, host_root, host_root) < 0 || chown(work, 0, 0) < 0))
		return rung_err_sys(err, errno, "root.path %s: give the overlay's upper dir %s to "
				    "the container's root", rootfs, upper);
	int r = mount_hidden(rootfs, lowers, n, upper, work, userns, scratch, err);
	return r < 0 ? rung_err_wrap(err, "root.path %s (overlay over idmapped layers)", rootfs) : 0;
}
