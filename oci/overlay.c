/*
 * oci/overlay.c: a rootfs that is an overlayfs mount (containerd's default snapshotter mounts
 * the image's layers and the container's upper dir there). An overlayfs mount itself cannot be
 * idmapped, its layers can (Linux 5.19): in the container's mount namespace the same stack is
 * mounted again over the rootfs, each lower layer through an idmapped mount for the
 * container's user namespace, the upper and work dirs as they are, the upper's top directory
 * given to the container's root (a fresh container's upper is empty). rootfs's
 * rfs_overlay_apply_idmapped stages the clones under rung-oci's state directory and makes the
 * overlay from paths relative to it, so the container's mountinfo shows "0:1", "u/fs" and
 * "u/work", no host path of containerd's or rung-oci's.
 * The first overlay is detached from the host's namespace (its options read) before the init
 * is cloned, so the container's mount namespace never holds it: two overlays on one upper dir
 * at once are undefined behaviour to overlayfs (it warns in the kernel log). The shim's delete
 * unmounts what is left on the rootfs, which is then nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/vfs.h>
#include <unistd.h>

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
	struct rfs_mount_plan *p = calloc(1, sizeof(*p));
	int r = p ? rfs_overlay_plan(lowers, upper[0] ? upper : NULL, work[0] ? work : NULL, rootfs,
				     p, err)
		  : rung_err_set(err, ENOMEM, "overlay plan");
	if (r == 0)
		r = rfs_overlay_apply_idmapped(p, userns, scratch, err);
	free(p);
	return r < 0 ? rung_err_wrap(err, "root.path %s (overlay over idmapped layers)", rootfs) : 0;
}
