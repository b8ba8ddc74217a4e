/*
 * agent/privs.c: the agent side runs as RUNG_AGENT_UID, the command as uid 0 (common/proto.h).
 *
 * The agent and its handlers keep only CAP_SETUID and CAP_SETGID (to start a command as uid 0)
 * and CAP_KILL (to kill what an exec left, which runs as another uid). Their real, effective
 * and saved uid is the agent's, so a command (uid 0, no capability) fails the kernel's checks
 * for kill, ptrace, process_vm_*, prlimit and /proc/<pid>/{mem,fd,environ}; they stay dumpable,
 * so their /proc files are owned by the agent uid and a command cannot write their
 * oom_score_adj either. A handler's fsuid/fsgid is 0: the files write_file creates are root's,
 * as a command's are. (pid 1 keeps its file ids: changing them would clear the parent-death
 * signal the supervisor's clone set.) Raw system calls: the agent is static and links no libcap.
 */
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"

#define KEEP ((1u << CAP_SETUID) | (1u << CAP_SETGID) | (1u << CAP_KILL))

/* P = E = KEEP, I = nothing: nothing can become ambient, and execve grants nothing. */
static int caps_keep_only(struct rung_err *err)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {{.effective = KEEP, .permitted = KEEP}};
	if (syscall(SYS_capset, &h, d) < 0)
		return rung_err_sys(err, errno, "keep only CAP_SETUID, CAP_SETGID, CAP_KILL");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return rung_err_sys(err, errno, "clear ambient capabilities");
	return 0;
}

static int write_self(const char *file, const char *txt, struct rung_err *err)
{
	cleanup_close int fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || rung_write_all(fd, txt, strlen(txt)) < 0)
		return rung_err_sys(err, errno, "write %s", file);
	return 0;
}

/* From root (a guest's real root, or root of our own user namespace) to the agent uid with
 * only KEEP: securebits locked (no root magic, no setuid fixup, no ambient raise), an empty
 * bounding set, no_new_privs. setgroups is a guest's only: a sandbox's user namespace
 * denies it (its supplementary groups are the host's, unmapped there). */
static int drop_to_agent(bool guest, struct rung_err *err)
{
	unsigned bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
			SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
			SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
		return rung_err_sys(err, errno, "set securebits");
	for (int c = 0; c <= CAP_LAST_CAP; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			return rung_err_sys(err, errno, "drop capability %d from the bounding set",
					    c);
	if (guest && setgroups(0, NULL) < 0)
		return rung_err_sys(err, errno, "clear supplementary groups");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return rung_err_sys(err, errno, "no_new_privs");
	if (setresgid(RUNG_AGENT_UID, RUNG_AGENT_UID, RUNG_AGENT_UID) < 0 ||
	    setresuid(RUNG_AGENT_UID, RUNG_AGENT_UID, RUNG_AGENT_UID) < 0)
		return rung_err_sys(err, errno, "become the agent uid %d", RUNG_AGENT_UID);
	/* The uid change made pid 1 non-dumpable, which hands its /proc files (oom_score_adj,
	 * fd/) to root, the command's uid: dumpable, they are the agent uid's. */
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		return rung_err_sys(err, errno, "set dumpable");
	return caps_keep_only(err);
}

int agent_privs_vm_drop(struct rung_err *err)
{
	/* Real root here: pin our OOM score first (the supervisor does it on the other rungs). */
	int r = write_self("/proc/self/oom_score_adj", "-1000", err);
	return r < 0 ? r : drop_to_agent(true, err);
}

int agent_privs_ns_drop(struct rung_err *err)
{
	return drop_to_agent(false, err);
}

int agent_privs_settle(struct rung_err *err)
{
	if (getuid() != RUNG_AGENT_UID || geteuid() != RUNG_AGENT_UID)
		return rung_err_set(
		    err, EPERM,
		    "rung-agent must start as uid %d (it runs as %d): a command could "
		    "otherwise signal it",
		    RUNG_AGENT_UID, (int)getuid());
	return caps_keep_only(err);
}

int agent_privs_handler(struct rung_err *err)
{
	setfsgid(0);
	setfsuid(0);
	if ((int)setfsuid((uid_t)-1) != 0 || (int)setfsgid((gid_t)-1) != 0)
		return rung_err_set(err, EPERM, "set the handler's file ids to 0");
	/* The id change made us non-dumpable, which would hand our /proc files to the
	 * namespace's root (the command's uid): dumpable, they are the agent uid's. */
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		return rung_err_sys(err, errno, "set dumpable");
	return 0;
}
