/*
 * oci/vm-binds.c: the bundle's bind mounts on the vm rung (docs/oci.md, "The vm rung"). The
 * guest cannot see a host path, so a bind of a regular file (the CRI's /etc/hosts,
 * /etc/resolv.conf, /etc/hostname, /dev/termination-log) is copied into the guest's root at
 * create, through the agent's confined file writes, and a bind of a directory (a kubelet's
 * service-account token, configmap, secret, emptyDir) as a tar walked by vm-bindtree.c through
 * the agent's confined tree put: the destination is resolved inside the guest's root (openat2
 * RESOLVE_IN_ROOT there), never through a link out of it. A copy, not a share: later host
 * changes are not seen, the program's writes stay in the guest.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/vm.h"

/* The source's path: a relative one is the bundle's. */
static void bind_source(const struct oci_config *c, const struct oci_mount *m, char *p, size_t n)
{
	if (m->src[0] == '/')
		snprintf(p, n, "%s", m->src);
	else
		snprintf(p, n, "%s/%s", c->bundle, m->src);
}

/* Mount i's source as an O_PATH fd (the CRI's path, followed as a mount would), with its
 * stat; a regular file within OCI_VM_BIND_MAX or a directory. */
static int source_open(const struct oci_config *c, size_t i, struct stat *st,
		       struct rung_err *err)
{
	const struct oci_mount *m = &c->mounts[i];
	char p[PATH_MAX];
	bind_source(c, m, p, sizeof(p));
	/* O_PATH first: a device or fifo is refused without being opened. */
	int fd = open(p, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return rung_err_sys(err, errno, "mounts[%zu] (bind %s on %s)", i, m->src, m->dst);
	int r = 0;
	if (fstat(fd, st) < 0)
		r = rung_err_sys(err, errno, "mounts[%zu] (bind %s on %s)", i, m->src, m->dst);
	else if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))
		r = rung_err_set(err, ENOTSUP, "mounts[%zu] (bind %s on %s): not a regular file "
				 "or a directory; the vm rung copies only those into the guest",
				 i, m->src, m->dst);
	else if (S_ISREG(st->st_mode) && st->st_size > OCI_VM_BIND_MAX)
		r = rung_err_set(err, EFBIG, "mounts[%zu] (bind %s on %s): %lld bytes; the vm "
				 "rung copies a file of at most %u bytes", i, m->src, m->dst,
				 (long long)st->st_size, OCI_VM_BIND_MAX);
	if (r < 0)
		close(fd);
	return r < 0 ? r : fd;
}

/* The O_PATH fd opened again to read: the same file or directory. */
static int source_reopen(const struct oci_config *c, size_t i, int fd, bool dir,
			 struct rung_err *err)
{
	const struct oci_mount *m = &c->mounts[i];
	int rd = dir ? openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (!dir) {
		char p[64];
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		rd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	}
	if (rd < 0)
		return rung_err_sys(err, errno, "mounts[%zu] (bind %s on %s)", i, m->src, m->dst);
	return rd;
}

/* A mount the guest makes itself (its own kernel's proc, sysfs, dev, ...): not copied. The
 * CRI's /dev/shm (a tmpfs, or in an app container a bind of the pod's shm directory) is the
 * guest init's own tmpfs there: shared memory is not shared with the pod's other containers. */
static bool guest_mount(const struct oci_mount *m)
{
	static const char *const types[] = {"proc", "sysfs", "tmpfs", "devpts", "mqueue", "cgroup",
					    "cgroup2"};
	if (m->dst && (!strcmp(m->dst, "/dev/shm") || !strcmp(m->dst, "/dev/shm/")))
		return true;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (m->type && strcmp(m->type, types[i]) == 0 && !m->bind)
			return true;
	return false;
}

int oci_vm_mounts_check(const struct oci_config *c, struct rung_err *err)
{
	uint64_t total = 0, dirs = 0;
	for (size_t i = 0; i < c->nmounts; i++) {
		const struct oci_mount *m = &c->mounts[i];
		if (guest_mount(m))
			continue;
		if (!m->bind || !m->src)
			return rung_err_set(err, ENOTSUP, "mounts[%zu] (%s on %s): the vm rung cannot "
					    "share a host filesystem with the guest", i,
					    m->type ? m->type : "bind", m->dst);
		if (!m->dst[0] || !strcmp(m->dst, "/"))
			return rung_err_set(err, EINVAL, "mounts[%zu]: destination \"%s\": not a "
					    "file's path", i, m->dst);
		struct stat st;
		cleanup_close int fd = source_open(c, i, &st, err);
		if (fd < 0)
			return fd;
		if (S_ISDIR(st.st_mode)) { /* walked, bounded, nothing read: the copy checks again */
			cleanup_close int d = source_reopen(c, i, fd, true, err);
			int r = d < 0 ? d : oci_vm_bind_tree(d, m, i, -1, &dirs, err);
			if (r < 0)
				return r;
			continue;
		}
		total += (uint64_t)st.st_size;
		if (total > OCI_VM_BINDS_TOTAL)
			return rung_err_set(err, EFBIG, "mounts[%zu] (bind %s on %s): the vm rung "
					    "copies at most %u bytes of bound files in all", i,
					    m->src, m->dst, OCI_VM_BINDS_TOTAL);
	}
	return 0;
}

/* The guest path of a destination: relative ones are the root's. */
static void guest_path(const char *dst, char *p, size_t n)
{
	snprintf(p, n, "%s%s", dst[0] == '/' ? "" : "/", dst);
}

/* A directory: its tar (oci_vm_bind_tree) in a memfd, applied under the destination's parent
 * in the guest (the agent makes missing parents and resolves every component in the root). */
static int dir_copy(struct rung_sandbox *sb, const struct oci_config *c, size_t i, int src,
		    uint64_t *dirs, struct rung_err *err)
{
	const struct oci_mount *m = &c->mounts[i];
	cleanup_close int d = source_reopen(c, i, src, true, err);
	if (d < 0)
		return d;
	cleanup_close int tar = memfd_create("rung-bind", MFD_CLOEXEC);
	if (tar < 0)
		return rung_err_sys(err, errno, "memfd_create");
	int r = oci_vm_bind_tree(d, m, i, tar, dirs, err);
	if (r < 0)
		return r;
	char parent[PATH_MAX], top[NAME_MAX + 1];
	oci_vm_dst_split(m->dst, parent, sizeof(parent), top, sizeof(top)); /* checked by the walk */
	if (lseek(tar, 0, SEEK_SET) < 0)
		return rung_err_sys(err, errno, "memfd");
	r = rung_cp_upload(sb, tar, parent, NULL, err);
	return r < 0 ? rung_err_wrap(err, "mounts[%zu] (bind %s on %s): copy into the guest", i,
				     m->src, m->dst) : 0;
}

static int bind_copy(struct rung_sandbox *sb, const struct oci_config *c, size_t i,
		     uint64_t *dirs, struct rung_err *err)
{
	const struct oci_mount *m = &c->mounts[i];
	struct stat st;
	cleanup_close int src = source_open(c, i, &st, err);
	if (src < 0)
		return src;
	if (S_ISDIR(st.st_mode))
		return dir_copy(sb, c, i, src, dirs, err);
	cleanup_close int fd = source_reopen(c, i, src, false, err);
	if (fd < 0)
		return fd;
	cleanup_free char *data = malloc((size_t)st.st_size + 1);
	if (!data)
		return rung_err_set(err, ENOMEM, "out of memory");
	size_t len = 0;
	while (len < (size_t)st.st_size) {
		ssize_t k = read(fd, data + len, (size_t)st.st_size - len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return rung_err_sys(err, errno, "mounts[%zu]: read %s", i, m->src);
		if (k == 0)
			break;
		len += (size_t)k;
	}
	char p[PATH_MAX];
	guest_path(m->dst, p, sizeof(p));
	unsigned mode = (unsigned)st.st_mode & 0777;
	if (m->flags & MS_RDONLY)
		mode &= ~0222u;
	/* The agent makes missing parents (0755) and resolves every component in the root. */
	int r = rung_write_file(sb, p, data, len, mode ? mode : 0444, err);
	return r < 0 ? rung_err_wrap(err, "mounts[%zu] (bind %s on %s): copy into the guest", i,
				     m->src, m->dst) : 0;
}

int oci_vm_binds_copy(struct rung_sandbox *sb, const struct oci_config *c, bool own_resolv,
		      struct rung_err *err)
{
	uint64_t dirs = 0;
	for (size_t i = 0; i < c->nmounts; i++) {
		if (guest_mount(&c->mounts[i]))
			continue;
		char p[PATH_MAX];
		guest_path(c->mounts[i].dst, p, sizeof(p));
		if (own_resolv && !strcmp(p, "/etc/resolv.conf"))
			continue; /* the guest's is the network's (its resolver named from this file) */
		int r = bind_copy(sb, c, i, &dirs, err);
		if (r < 0)
			return r;
	}
	return 0;
}
