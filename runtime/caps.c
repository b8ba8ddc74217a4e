/* runtime/caps.c: no capabilities (libcap), locked securebits, no_new_privs; rlimits. */
#include <linux/securebits.h>
#include <stdlib.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "runtime/rt-internal.h"

int rt_caps_drop_all(struct rung_err *err)
{
	/* Root in the sandbox's user namespace must not regain capabilities on execve. */
	unsigned bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
			SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
			SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
	if (cap_set_secbits(bits) < 0)
		return rung_err_sys(err, errno, "set securebits");
	if (cap_reset_ambient() < 0)
		return rung_err_sys(err, errno, "clear ambient capabilities");
	for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++)
		if (cap_drop_bound(c) < 0 && errno != EINVAL)
			return rung_err_sys(err, errno, "drop capability %d from the bounding set",
					    (int)c);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return rung_err_sys(err, errno, "no_new_privs");
	cap_t empty = cap_init();
	if (!empty)
		return rung_err_sys(err, errno, "cap_init");
	int r = cap_set_proc(empty);
	cap_free(empty);
	if (r < 0)
		return rung_err_sys(err, errno, "drop capabilities");
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
