/*
 * runtime/release.c: an owned sandbox's releaser (`rung __release`), the process that pays
 * for its end after the caller has returned: the last close of its mount namespace (the ext4
 * umount, the loop device's release), the removal of its cgroup and of its moved directory,
 * and the spare disks the next start takes (lifecycle.c, owned_release, says what each is).
 *
 * The dispose spawns it where it used to fork a child for the same work: posix_spawn (a
 * vfork) holds the caller only until the kernel's exec of `rung` swaps the address space
 * (~0.45 ms here), and leaves it no page to copy on write, where a fork of the CLI cost
 * ~0.9 ms and each page the CLI wrote after it a fault (bench/README.md, spine). Spawned
 * while the sandbox's command still ran, it lost: its exec took the cores the command needed.
 * fds: 3 the gate (the pipe's read end), 4 the handoff (supervisor.c: the router's settings
 * and the sandbox's metadata), 5 the mount namespace, 0-2 /dev/null: no other fd, so a
 * caller's pipe never waits for it; and an environment of PATH only.
 *
 * The dispose closes its own copy of the namespace, then writes "G" and the trash path (""
 * if none) and closes the gate. EOF without "G" (the caller died, or the dispose failed
 * before) only closes the namespace: the sandbox is still in the store, `rung gc`'s to remove.
 */
#include <fcntl.h>
#include <spawn.h>
#include <string.h>

#include "runtime/diskimg.h"
#include "runtime/rt-internal.h"
#include "runtime/sandbox-cgroup.h"

int rt_release_start(struct rt_sandbox *sb)
{
	struct rung_err err = {0};
	if (sb->release_gate >= 0 || sb->mntns < 0 || rt_sandbox_disk_is_tmpfs(sb))
		return 0;
	cleanup_close int handoff = rt_handoff_memfd(sb, &err);
	int gate[2];
	if (handoff < 0 || pipe2(gate, O_CLOEXEC) < 0)
		return -1;
	/* Each from 10 up first: a source among 3..5 would be overwritten by an earlier dup2. */
	cleanup_close int g = fcntl(gate[0], F_DUPFD_CLOEXEC, 10);
	cleanup_close int h = fcntl(handoff, F_DUPFD_CLOEXEC, 10);
	cleanup_close int m = fcntl(sb->mntns, F_DUPFD_CLOEXEC, 10);
	close(gate[0]);
	if (g < 0 || h < 0 || m < 0) {
		close(gate[1]);
		return -1;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, g, 3);
	posix_spawn_file_actions_adddup2(&fa, h, 4);
	posix_spawn_file_actions_adddup2(&fa, m, 5);
	for (int fd = 0; fd < 3; fd++)
		posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", O_RDWR, 0);
	posix_spawn_file_actions_addclosefrom_np(&fa, 6);
	char *argv[] = {(char *)"rung", (char *)"__release", NULL};
	/* as `rung __supervise`'s: none of the caller's variables (its trace is in the handoff) */
	static char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
	pid_t pid;
	int r = posix_spawn(&pid, sb->router->rung_path, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0) {
		close(gate[1]);
		LOG_WARN("sandbox %s: start its releaser: %s", sb->meta.id, strerror(r));
		return -1;
	}
	rung_trace("release: started");
	sb->release_gate = gate[1];
	return 0;
}

bool rt_release_go(struct rt_sandbox *sb, const char *trash)
{
	int g = sb->release_gate;
	sb->release_gate = -1;
	if (g < 0)
		return false;
	size_t n = strlen(trash);
	bool ok = rung_write_all(g, "G", 1) == 0 && rung_write_all(g, trash, n) == 0;
	close(g);
	return ok;
}

int rung_release_main(void)
{
	struct rung_router *r = NULL;
	struct rt_sandbox *sb = NULL;
	struct rung_err err = {0};
	if (fcntl(3, F_GETFD) < 0 || fcntl(4, F_GETFD) < 0 || fcntl(5, F_GETFD) < 0) {
		fprintf(stderr, "rung __release: internal; started by the runtime only\n");
		return 2;
	}
	/* The gate first; the handoff and a router only once told to go. */
	cleanup_free char *msg = NULL;
	size_t len = 0;
	if (rung_read_fd_all(3, 8192, &msg, &len, &err) < 0)
		len = 0;
	bool go = len >= 1 && msg[0] == 'G' && rt_handoff_read(4, &r, &sb, &err) == 0;
	close(4);
	if (go) /* first, as the dispose's own child did: nothing of it is in there any more */
		rt_sandbox_cgroup_destroy(sb);
	close(5); /* the last reference: the namespace's teardown happens here */
	rung_trace("release: namespace let go");
	if (!go)
		return 0; /* no dispose: `rung gc`'s to remove */
	sb->owned = true; /* as the dispose saw it (the spares' size) */
	/* Only a directory of the store's trash (the dispose moved it there). */
	char trash[4096];
	int n = snprintf(trash, sizeof(trash), "%s/trash/%s", r->store.root, sb->meta.id);
	if (msg[1] && n > 0 && (size_t)n < sizeof(trash) && !strcmp(msg + 1, trash)) {
		struct rung_err e2 = {0};
		rung_rm_rf(trash, &e2);
	}
	rt_sandbox_disk_spares_fill(sb);
	rung_trace("release: done");
	return 0;
}
