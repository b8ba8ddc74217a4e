/*
 * common/compat-musl.h: what glibc 2.36 declares and musl 1.2.3 (Debian 12's musl-tools) does
 * not, for build/rung linked against musl (cli/module.mk). Force-included (-include) into
 * every object of that link and into nothing else. Each wrapper is the system call itself, as
 * glibc's is; the structures and flags are the kernel's uapi ones.
 */
#ifndef RUNG_COMMON_COMPAT_MUSL_H
#define RUNG_COMMON_COMPAT_MUSL_H

#include <limits.h>	 /* PATH_MAX: glibc's headers pull it in on their own */
#include <linux/mount.h> /* MOUNT_ATTR_*, FSOPEN_*, FSCONFIG_*, MOVE_MOUNT_*, struct mount_attr */
#include <stdint.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#define RENAME_EXCHANGE (1 << 1)
#define RENAME_WHITEOUT (1 << 2)
#endif

static inline int renameat2(int ofd, const char *o, int nfd, const char *n, unsigned int fl)
{
	return (int)syscall(SYS_renameat2, ofd, o, nfd, n, fl);
}

static inline int fsopen(const char *fs, unsigned int fl)
{
	return (int)syscall(SYS_fsopen, fs, fl);
}

static inline int fsconfig(int fd, unsigned int cmd, const char *k, const void *v, int aux)
{
	return (int)syscall(SYS_fsconfig, fd, cmd, k, v, aux);
}

static inline int fsmount(int fd, unsigned int fl, unsigned int attr)
{
	return (int)syscall(SYS_fsmount, fd, fl, attr);
}

static inline int move_mount(int ffd, const char *fp, int tfd, const char *tp, unsigned int fl)
{
	return (int)syscall(SYS_move_mount, ffd, fp, tfd, tp, fl);
}

static inline int open_tree(int dfd, const char *p, unsigned int fl)
{
	return (int)syscall(SYS_open_tree, dfd, p, fl);
}

static inline int mount_setattr(int dfd, const char *p, unsigned int fl, struct mount_attr *a,
				size_t sz)
{
	return (int)syscall(SYS_mount_setattr, dfd, p, fl, a, sz);
}

/* glibc 2.32's: the message without translation (musl's strerror is that). */
static inline const char *strerrordesc_np(int e) { return strerror(e); }

/* statx (musl 1.2.5 has it): <linux/stat.h>'s structure and masks, which that header cannot
 * give here (it redefines S_IF* against musl's <sys/stat.h>). */
#ifndef STATX_TYPE
struct statx_timestamp {
	int64_t tv_sec;
	uint32_t tv_nsec;
	int32_t __reserved;
};
struct statx {
	uint32_t stx_mask, stx_blksize;
	uint64_t stx_attributes;
	uint32_t stx_nlink, stx_uid, stx_gid;
	uint16_t stx_mode, __spare0[1];
	uint64_t stx_ino, stx_size, stx_blocks, stx_attributes_mask;
	struct statx_timestamp stx_atime, stx_btime, stx_ctime, stx_mtime;
	uint32_t stx_rdev_major, stx_rdev_minor, stx_dev_major, stx_dev_minor;
	uint64_t stx_mnt_id;
	uint32_t stx_dio_mem_align, stx_dio_offset_align;
	uint64_t __spare3[12];
};
#define STATX_TYPE 0x1U
#define STATX_MODE 0x2U
#define STATX_NLINK 0x4U
#define STATX_UID 0x8U
#define STATX_GID 0x10U
#define STATX_ATIME 0x20U
#define STATX_MTIME 0x40U
#define STATX_CTIME 0x80U
#define STATX_INO 0x100U
#define STATX_SIZE 0x200U
#define STATX_BLOCKS 0x400U
#define STATX_BASIC_STATS 0x7ffU
#define STATX_BTIME 0x800U
#define STATX_MNT_ID 0x1000U
#endif

static inline int statx(int dfd, const char *p, int fl, unsigned int mask, struct statx *b)
{
	return (int)syscall(SYS_statx, dfd, p, fl, mask, b);
}

#endif
