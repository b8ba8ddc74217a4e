/*
 * runtime/diskimg.h: a sandbox's size-limited writable storage (the `limits.disk` of the process
 * and container rungs): a sparse ext4 image in the sandbox's store directory, attached to a loop
 * device (LO_FLAGS_AUTOCLEAR) and mounted as a detached mount (fsopen/fsmount) that only the
 * sandbox's mount namespace ever holds. When that namespace dies the filesystem is unmounted
 * and the kernel frees the loop device: a crash leaks neither a mount nor a loop device.
 * Writing past the size gets ENOSPC inside; the host file never grows past it.
 */
#ifndef RUNG_RT_DISKIMG_H
#define RUNG_RT_DISKIMG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

/* Can this host give a sandbox a disk limit? -ENOTSUP naming the missing facility (the loop
 * control device ctl, rung_router_opts.loop_control; or mkfs.ext4). */
int rt_disk_check(const char *ctl, struct rung_err *err);
/*
 * Make path a sparse ext4 of bytes (kept if it exists: files persist until dispose). A blank
 * template per size is built once under <state_dir>/disks (mkfs is ~100 ms of fsyncs) and
 * copied sparsely (holes stay holes). Returns 1 when it made the image, 0 when it was there.
 */
int rt_disk_image(const char *state_dir, const char *path, uint64_t bytes, struct rung_err *err);
/* Attach img to a free loop device (through the loop control device ctl) and mount it
 * nosuid,nodev as a detached mount whose root belongs to owner; a throwaway disk (an owned
 * sandbox's) is mounted nobarrier. Returns the mount fd (for move_mount). */
int rt_disk_mount(const char *ctl, const char *img, uid_t owner, bool throwaway,
		  struct rung_err *err);
/* A tmpfs of bytes (size=: ENOSPC past it; its pages are charged to the memory cgroup of
 * whoever writes them) as a detached nosuid,nodev mount whose root belongs to owner. */
int rt_disk_tmpfs(uint64_t bytes, uid_t owner, struct rung_err *err);
/* The sandbox's disk (<sandbox dir>/disk.img, limits.disk bytes), made if needed and mounted:
 * the mount fd, its root owned by the sandbox's root. An owned sandbox whose limits.memory
 * covers limits.disk gets rt_disk_tmpfs instead (no image, no loop device). */
struct rt_sandbox;
int rt_sandbox_disk_mount(const struct rt_sandbox *sb, struct rung_err *err);
/* Copies of the template of sb's disk size kept ready
 * (`<state_dir>/disks/ext4-<bytes>.spare<i>.img`, i < RT_DISK_SPARES), made by whoever has
 * time after a start (an owned dispose's hand-off child, a supervisor once its sandbox runs):
 * rt_sandbox_disk_mount takes one instead of copying the template on its path. Makes the
 * missing ones, for a sandbox with an ext4 disk (a template not built yet: none), unless
 * another filler (or a template's build) holds `disks/lock`: it then returns at once;
 * failures leave a slot empty. */
#define RT_DISK_SPARES 2
void rt_sandbox_disk_spares_fill(const struct rt_sandbox *sb);
/* Does sb get the tmpfs (above)? */
bool rt_sandbox_disk_is_tmpfs(const struct rt_sandbox *sb);
/* Copy the image src to the new file dst: a reflink (FICLONE) where the filesystem shares
 * extents (*reflinked), else a sparse copy (holes stay holes). */
int rt_disk_clone(const char *src, const char *dst, bool *reflinked, struct rung_err *err);
/* How many loop devices have a backing file whose path starts with prefix. */
int rt_disk_loops_under(const char *prefix);

#endif
