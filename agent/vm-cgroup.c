/*
 * agent/vm-cgroup.c: the vm guest's command cgroup (rung.pids, agent/vm-init.h).
 *
 * On the other rungs the host's cgroup holds the whole sandbox. In a guest the kernel is the
 * sandbox's own, so pid 1 makes a cgroup2 hierarchy of it before the root switch: the group
 * "cmd" with pids.max from rung.pids (and cpu.max from rung.cpu_quota), where every command
 * starts (agent/spawn.c writes the child into it before its execve), while the agent, its
 * handlers and the fixer stay in the root group (a command's fork bomb cannot starve the
 * agent of processes).
 *
 * The hierarchy is mounted under /rung in the initramfs, which the root switch hides: the
 * command cannot reach it by path, and as uid 0 without CAP_SYS_ADMIN it cannot mount one.
 * Migration goes through one descriptor, cmd/cgroup.procs opened by pid 1 as real root: the
 * kernel checks the opener's credentials, so handlers (the agent uid) may write to it. The
 * descriptor is O_CLOEXEC; a command could only reach it through /proc/<pid>/fd of an agent
 * process, which it may not (a different uid; the fixer: more capabilities than it has).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/vm-init.h"

#define CG "/rung/cgroup"

int agent_cmd_cgroup_fd = -1;
static int cmd_dir_fd = -1; /* the group's directory: pids.current for STATS */

/* The number a kernel file holds (its first line), read at dirfd: false when unreadable. */
static bool file_u64(int dirfd, const char *path, uint64_t *out)
{
	struct rung_err e = {0};
	cleanup_free char *t = NULL;
	if (rung_file_load(dirfd, path, 32, &t, NULL, &e) < 0)
		return false;
	t[strcspn(t, "\n")] = '\0';
	return rung_parse_u64(t, out) == 0;
}

static int put(const char *path, const char *txt, struct rung_err *err)
{
	cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || rung_write_all(fd, txt, strlen(txt)) < 0)
		return rung_err_sys(err, errno, "write '%s' to %s", txt, path);
	return 0;
}

int agent_vm_cgroup_setup(uint32_t pids, uint32_t cpu_quota, struct rung_err *err)
{
	if (!pids)
		return 0; /* a host that asks for no limit (an older one): no group at all */
	if ((mkdir("/rung", 0755) < 0 && errno != EEXIST) || (mkdir(CG, 0700) < 0 && errno != EEXIST))
		return rung_err_sys(err, errno, "mkdir %s", CG);
	if (mount("cgroup2", CG, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return rung_err_sys(err, errno,
				    "mount cgroup2 on %s: rung.pids needs a guest kernel with "
				    "CONFIG_CGROUPS and CONFIG_CGROUP_PIDS", CG);
	char n[32];
	int r;
	if ((r = put(CG "/cgroup.subtree_control", cpu_quota ? "+pids +cpu" : "+pids", err)) < 0)
		return r;
	if (mkdir(CG "/cmd", 0755) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s/cmd", CG);
	/* pids.max takes at most the kernel's PID_MAX_LIMIT (32768 in this small kernel), and
	 * the guest's pid_max (4096 here) bounds it anyway: a limit at or past pid_max is "max" */
	uint64_t pid_max = 0;
	if (file_u64(AT_FDCWD, "/proc/sys/kernel/pid_max", &pid_max) && pids >= pid_max)
		snprintf(n, sizeof(n), "max");
	else
		snprintf(n, sizeof(n), "%u", pids);
	if ((r = put(CG "/cmd/pids.max", n, err)) < 0)
		return r;
	snprintf(n, sizeof(n), "%u 100000", cpu_quota);
	if (cpu_quota && (r = put(CG "/cmd/cpu.max", n, err)) < 0)
		return r;
	int fd = open(CG "/cmd/cgroup.procs", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return rung_err_sys(err, errno, "open %s/cmd/cgroup.procs", CG);
	agent_cmd_cgroup_fd = fd;
	if ((cmd_dir_fd = open(CG "/cmd", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return rung_err_sys(err, errno, "open %s/cmd", CG);
	return 0;
}

bool agent_cmd_cgroup_pids(uint64_t *out)
{
	return cmd_dir_fd >= 0 && file_u64(cmd_dir_fd, "pids.current", out);
}
