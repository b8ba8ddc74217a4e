/*
 * oci/nsjoin.c: joining a pod's ipc and uts namespaces by path (docs/oci.md, "Namespaces").
 * containerd's CRI gives every app container of a pod linux.namespaces ipc and uts as
 * /proc/<pause pid>/ns/{ipc,uts}: create joins them in its own process before the init is
 * cloned (as it does the network namespace), so that the init starts inside them. Only a pod's
 * are joined: a path that is not a namespace of its type, the host's (pid 1's or rung-oci's
 * own), or one owned by the initial user namespace (made outside any container's user
 * namespace: rung-oci's sandboxes own theirs) is refused, naming the field.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/mount.h>
#include <linux/nsfs.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/oci-internal.h"

static bool same_file(const char *path, const struct stat *st)
{
	struct stat o;
	return stat(path, &o) == 0 && o.st_ino == st->st_ino && o.st_dev == st->st_dev;
}

bool oci_ns_is_hosts(const char *name, const struct stat *st, pid_t also)
{
	char p1[32], other[48];
	snprintf(p1, sizeof(p1), "/proc/1/ns/%s", name);
	snprintf(other, sizeof(other), "/proc/%d/ns/%s", (int)also, name);
	return same_file(p1, st) || same_file(other, st);
}

/* Whether st is pid 1's or this process's namespace of that name ("ipc", "user"). */
static bool hosts(const char *name, const struct stat *st)
{
	return oci_ns_is_hosts(name, st, getpid());
}

/* Open and check the namespace at j->path (of type flag, /proc's name): its fd, or < 0. */
static int ns_open(const struct oci_ns_join *j, int flag, const char *name, struct rung_err *err)
{
	char field[48];
	snprintf(field, sizeof(field), "linux.namespaces[%zu].path", j->index);
	cleanup_close int fd = open(j->path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return rung_err_sys(err, errno, "%s: %s", field, j->path);
	if (ioctl(fd, NS_GET_NSTYPE) != flag)
		return rung_err_set(err, EINVAL, "%s: %s is not %s %s namespace", field, j->path,
				    flag == CLONE_NEWIPC ? "an" : "a", name);
	if (hosts(name, &st))
		return rung_err_set(err, EPERM,
				    "%s: %s is the host's %s namespace (pid 1's or "
				    "rung-oci's own): only a pod's may be joined",
				    field, j->path, name);
	cleanup_close int owner = ioctl(fd, NS_GET_USERNS);
	struct stat ust;
	if (owner < 0 || fstat(owner, &ust) < 0 || hosts("user", &ust))
		return rung_err_set(err, EPERM,
				    "%s: %s is not owned by a container's user "
				    "namespace (it was made outside a pod's sandbox): refused",
				    field, j->path);
	int r = fd;
	fd = -1; /* the caller's now */
	return r;
}

int oci_ns_check(const struct oci_ns_join *j, int flag, const char *name, struct rung_err *err)
{
	cleanup_close int fd = j->path ? ns_open(j, flag, name, err) : -1;
	return j->path && fd < 0 ? fd : 0;
}

/* Check the namespace at j->path and setns into it. */
static int join(const struct oci_ns_join *j, int flag, const char *name, struct rung_err *err)
{
	cleanup_close int fd = ns_open(j, flag, name, err);
	if (fd < 0)
		return fd;
	if (setns(fd, flag) < 0)
		return rung_err_sys(err, errno, "linux.namespaces[%zu].path: join %s", j->index,
				    j->path);
	return 0;
}

/* The mqueue filesystem of the ipc namespace just joined, created here by the runtime (an fs
 * context, fsopen's): the init's user namespace does not own the pod's ipc namespace, so the
 * kernel refuses it the superblock; the init mounts this one in its own mount namespace. */
static int mqueue_make(struct oci_config *c, struct rung_err *err)
{
	size_t i = 0;
	while (i < c->nmounts && strcmp(c->mounts[i].type ? c->mounts[i].type : "", "mqueue") != 0)
		i++;
	if (i == c->nmounts)
		return 0;
	int fs = (int)syscall(SYS_fsopen, "mqueue", FSOPEN_CLOEXEC);
	if (fs < 0 || syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		int e = errno;
		if (fs >= 0)
			close(fs);
		return rung_err_sys(err, e, "mounts[%zu]: mqueue of the pod's ipc namespace", i);
	}
	c->mqueue_fd = fs;
	return 0;
}

int oci_ns_join(struct oci_config *c, struct rung_err *err)
{
	int r = 0;
	if (c->ipc_join.path && (r = join(&c->ipc_join, CLONE_NEWIPC, "ipc", err)) == 0)
		r = mqueue_make(c, err);
	if (r < 0 || !c->uts_join.path)
		return r;
	if ((r = join(&c->uts_join, CLONE_NEWUTS, "uts", err)) < 0)
		return r;
	/* the pod's hostname is its sandbox's: a spec's own would rename the whole pod */
	struct utsname u = {0};
	if (c->hostname && (uname(&u) < 0 || strcmp(u.nodename, c->hostname) != 0))
		return rung_err_set(err, EPERM,
				    "hostname: '%s' with the pod's uts namespace "
				    "joined (linux.namespaces[%zu].path), whose hostname is "
				    "'%s': the pod's is its sandbox's",
				    c->hostname, c->uts_join.index, u.nodename);
	return 0;
}
