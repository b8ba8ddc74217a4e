/*
 * runtime/vm-snap.c: the vm rung's suspend to disk (docs/snapshots.md). rung-vmm saves the
 * paused guest into its jail ("snapshot /vm.snap" on its control socket); once the supervisor
 * and the VMM are gone the file moves into the sandbox's store directory, and the metadata
 * records it. Resume starts a new supervisor, whose vm_start binds the file into the new jail
 * and runs `rung-vmm --restore`; the file is deleted once the guest's agent answers.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/rt-internal.h"

#define SNAP_NAME "vm.snap"

bool rt_meta_on_disk(const struct rt_meta *m)
{
	return m->state == RUNG_STATE_SUSPENDED && m->backend &&
	       json_object_get(m->backend, "snapshot") &&
	       !json_object_get(m->backend, "snapshot_broken");
}

bool rt_sandbox_live(const struct rt_meta *m)
{
	return rt_supervisor_alive(m) || rt_meta_on_disk(m);
}

bool rt_vm_snap_path(struct rt_sandbox *sb, char *path, size_t len)
{
	struct stat st;
	rt_store_path(&sb->router->store, sb->meta.id, SNAP_NAME, path, len);
	return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

void rt_vm_snap_drop_stale(struct rt_sandbox *sb)
{
	char jail[4096];
	rt_store_path(&sb->router->store, sb->meta.id, "jail", jail, sizeof(jail));
	cleanup_close int jfd = open(jail, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (jfd >= 0)
		unlinkat(jfd, SNAP_NAME, 0);
}

/* The saved file, in the jail the VMM's uid owns: a regular file of that uid with one link,
 * made 0600 and renamed into the store dir (nothing runs in the jail any more). Its size. */
static int snap_take(struct rt_sandbox *sb, int jfd, const char *jail, uint64_t *bytes,
		     struct rung_err *err)
{
	char dir[4096];
	rt_store_path(&sb->router->store, sb->meta.id, NULL, dir, sizeof(dir));
	cleanup_close int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	cleanup_close int fd = openat(jfd, SNAP_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat a, b;
	if (dfd < 0 || fd < 0 || fstat(fd, &a) < 0)
		return rung_err_sys(err, errno, "the snapshot %s/%s", jail, SNAP_NAME);
	if (!S_ISREG(a.st_mode) || a.st_uid != sb->meta.uid_base || a.st_nlink != 1)
		return rung_err_set(err, EPERM, "%s/%s is not the VMM's own regular file", jail,
				    SNAP_NAME);
	if (fchmod(fd, 0600) < 0 || renameat(jfd, SNAP_NAME, dfd, SNAP_NAME) < 0)
		return rung_err_sys(err, errno, "move %s/%s into %s", jail, SNAP_NAME, dir);
	if (fstatat(dfd, SNAP_NAME, &b, AT_SYMLINK_NOFOLLOW) < 0 || b.st_ino != a.st_ino ||
	    b.st_dev != a.st_dev)
		return rung_err_set(err, EPERM, "%s/%s changed while it was moved", dir, SNAP_NAME);
	*bytes = (uint64_t)a.st_size;
	return 0;
}

int rt_vm_suspend_disk(struct rt_sandbox *sb, struct rung_err *err)
{
	struct rt_store *st = &sb->router->store;
	char jail[4096], path[4096];
	/* With an allowlist the resume gets a new tap (and its lease): RESTORED tells the guest
	 * its address, route and DNS proxy and makes it forget the old tap's MAC (vm-fixup.c). */
	rt_store_path(st, sb->meta.id, "jail", jail, sizeof(jail));
	cleanup_close int jfd = open(jail, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (jfd < 0)
		return rung_err_sys(err, errno, "open the VMM's jail %s", jail);
	unlinkat(jfd, SNAP_NAME, 0); /* an earlier try's (the VMM only renames whole files) */
	int r = rt_vm_control(sb, "pause", 10, err);
	if (r < 0)
		return r;
	/* From here a crash leaves an ordinary suspended sandbox (paused vCPUs): the disk and
	 * the memory stay in step, and the next use resumes it. */
	sb->meta.state = RUNG_STATE_SUSPENDED;
	if ((r = rt_store_meta_write(st, &sb->meta, err)) < 0)
		return r;
	uint64_t t0 = rung_now_ms();
	r = rt_vm_control(sb, "snapshot /" SNAP_NAME, 900, err);
	if (r < 0) {
		unlinkat(jfd, SNAP_NAME, 0);
		return r;
	}
	uint64_t save_ms = rung_now_ms() - t0;
	/* The VMM dies paused (kill_ends_suspended): the guest never runs past the save. */
	rt_supervisor_stop(&sb->meta, 5000);
	if (rt_supervisor_alive(&sb->meta))
		return rung_err_set(err, EBUSY, "sandbox %s: its supervisor did not stop after the "
				    "save", sb->meta.id);
	uint64_t bytes = 0;
	if ((r = snap_take(sb, jfd, jail, &bytes, err)) < 0) {
		unlinkat(jfd, SNAP_NAME, 0);
		return rung_err_wrap(err, "suspend %s to disk (the sandbox stopped)", sb->meta.id);
	}
	rt_store_path(st, sb->meta.id, SNAP_NAME, path, sizeof(path));
	if (json_object_set_new(sb->meta.backend, "snapshot",
				json_pack("{s:s, s:I, s:I}", "file", path, "bytes",
					  (json_int_t)bytes, "save_ms", (json_int_t)save_ms)) < 0)
		return rung_err_set(err, ENOMEM, "out of memory");
	sb->meta.sup_pid = 0;
	sb->meta.sup_start = 0;
	sb->meta.init_pid = 0;
	LOG_INFO("op=suspend id=%s to_disk=%s bytes=%llu save_ms=%llu", sb->meta.id, path,
		 (unsigned long long)bytes, (unsigned long long)save_ms);
	return 0;
}

int rt_vm_resume_disk(struct rt_sandbox *sb, struct rung_err *err)
{
	char snap[4096], jail[4200];
	struct rt_started started;
	int r;
	if (!rt_vm_snap_path(sb, snap, sizeof(snap)))
		r = rung_err_set(err, ENOENT, "the snapshot %s is gone", snap);
	else
		r = rt_supervisor_spawn(sb, &rt_backend_vm, &started, err);
	if (r < 0) {
		/* Never booted afresh behind the caller's back: the sandbox is dead, and says why. */
		struct rung_err e2 = {0};
		json_object_set_new(sb->meta.backend, "snapshot_broken", json_string(err->msg));
		rt_store_meta_write(&sb->router->store, &sb->meta, &e2);
		return r;
	}
	sb->meta.sup_pid = started.sup_pid;
	sb->meta.sup_start = started.sup_start;
	sb->meta.init_pid = started.init_pid;
	json_object_del(sb->meta.backend, "snapshot");
	/* The new VMM maps the file privately: its name goes now, its blocks with the VMM. */
	unlink(snap);
	rt_store_path(&sb->router->store, sb->meta.id, "jail", jail, sizeof(jail) - 16);
	strcat(jail, "/restore.snap"); /* the bind's target in the new jail */
	unlink(jail);
	LOG_INFO("op=resume id=%s from_disk=%s", sb->meta.id, snap);
	return 0;
}
