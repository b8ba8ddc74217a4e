/*
 * runtime/caps.c: the sandbox's pid 1 becomes the agent uid with only CAP_SETUID, CAP_SETGID
 * and CAP_KILL (libcap; the commands it starts get none), locked securebits, an empty bounding
 * set, no_new_privs; rlimits.
 */
#include <linux/securebits.h>
#include <stdlib.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "runtime/rt-internal.h"

static int caps_set(const cap_value_t *keep, int n, bool all_else, struct rung_err *err)
{
	cap_t c = all_else ? cap_get_proc() : cap_init();
	if (!c)
		return rung_err_sys(err, errno, "cap_get_proc");
	int r = 0;
	if (cap_set_flag(c, CAP_PERMITTED, n, keep, CAP_SET) < 0 ||
	    cap_set_flag(c, CAP_EFFECTIVE, n, keep, CAP_SET) < 0 ||
	    cap_set_flag(c, CAP_INHERITABLE, n, keep, CAP_SET) < 0 || cap_set_proc(c) < 0)
		r = rung_err_sys(err, errno, "keep the agent's capabilities");
	cap_free(c);
	return r;
}

int rt_caps_drop_agent(struct rung_err *err)
{
	static const cap_value_t keep[] = {CAP_SETUID, CAP_SETGID, CAP_KILL};
	const int n = (int)RUNG_ARRAY_SIZE(keep);
	/* Root does not regain capabilities on execve, and changing uid keeps the ones held;
	 * ambient raise stays possible until the agent has cleared its inheritable set. */
	unsigned bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
			SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;
	if (cap_set_secbits(bits) < 0)
		return rung_err_sys(err, errno, "set securebits");
	/* Inheritable (needed for ambient) while the bounding set still has them. */
	int r = caps_set(keep, n, true, err);
	if (r < 0)
		return r;
	if (cap_reset_ambient() < 0)
		return rung_err_sys(err, errno, "clear ambient capabilities");
	for (int i = 0; i < n; i++)
		if (cap_set_ambient(keep[i], CAP_SET) < 0)
			return rung_err_sys(err, errno, "raise ambient capability %d",
					    (int)keep[i]);
	for (cap_value_t v = 0; v <= CAP_LAST_CAP; v++)
		if (cap_drop_bound(v) < 0 && errno != EINVAL)
			return rung_err_sys(err, errno, "drop capability %d from the bounding set",
					    (int)v);
	if ((r = caps_set(keep, n, false, err)) < 0)
		return r;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return rung_err_sys(err, errno, "no_new_privs");
	if (setresgid(RUNG_AGENT_UID, RUNG_AGENT_UID, RUNG_AGENT_UID) < 0 ||
	    setresuid(RUNG_AGENT_UID, RUNG_AGENT_UID, RUNG_AGENT_UID) < 0)
		return rung_err_sys(err, errno, "become the agent uid %d", RUNG_AGENT_UID);
	return 0;
}

/* Fixed hygiene limits only. The spec's limits are a cgroup's (memory, cpus, pids) and a
 * size-limited filesystem's (disk): an rlimit at the same value would only trip first
 * (ENOMEM instead of an OOM kill, EAGAIN before pids.max, SIGXFSZ instead of ENOSPC), and
 * none of them bounds the sandbox as a whole. */
int rt_rlimits_apply(struct rung_err *err)
{
	struct {
		int res;
		rlim_t v;
		const char *name;
	} lim[] = {
		{RLIMIT_NOFILE, 4096, "nofile"},
		{RLIMIT_CORE, 0, "core"},
		{RLIMIT_MEMLOCK, 64 << 10, "memlock"},
		{RLIMIT_MSGQUEUE, 0, "msgqueue"},
	};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(lim); i++) {
		struct rlimit rl = {lim[i].v, lim[i].v};
		if (setrlimit(lim[i].res, &rl) < 0)
			return rung_err_sys(err, errno, "rlimit %s", lim[i].name);
	}
	return 0;
}
