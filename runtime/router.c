/*
 * runtime/router.c: the backends and the isolation x capability policy. The router picks the
 * weakest available backend that meets the spec's minimum isolation and requires; when
 * deployed, one policy table reads the rung's boundary together with the capability surface.
 * It never silently degrades: a refusal names the capability and the rung.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "runtime/rt-internal.h"

static const struct rt_backend_ops *const backends[RUNG_ISO__COUNT] = {
	[RUNG_ISO_PROCESS] = &rt_backend_process,
	[RUNG_ISO_CONTAINER] = &rt_backend_container,
	[RUNG_ISO_VM] = &rt_backend_vm,
};

const struct rt_backend_ops *rt_backend_get(enum rung_isolation iso)
{
	return (unsigned)iso < RUNG_ISO__COUNT ? backends[iso] : NULL;
}

/*
 * The deployed policy, in one place. A shared-kernel rung never gets a shell-capable spec
 * (exec, install); process additionally needs no network and no persistence.
 */
static const struct {
	unsigned allowed;   /* capabilities a deployed spec may require on this rung */
	bool need_no_net;   /* egress_allow must be empty */
	const char *boundary;
} deployed_policy[RUNG_ISO__COUNT] = {
	[RUNG_ISO_PROCESS] = {RUNG_CAP_RUN_CODE, true, "shares the host kernel"},
	[RUNG_ISO_CONTAINER] = {RUNG_CAP_RUN_CODE | RUNG_CAP_FS_PERSIST, false,
				"shares the host kernel"},
	[RUNG_ISO_VM] = {RUNG_CAP__ALL, false, "has its own guest kernel"},
};

const char *rt_policy_check(enum rung_isolation iso, const struct rung_spec *spec, bool deployed)
{
	if (!deployed)
		return NULL;
	unsigned extra = spec->requires & ~deployed_policy[iso].allowed;
	if (extra & (RUNG_CAP_EXEC | RUNG_CAP_INSTALL))
		return "a shell-capable spec (exec, install) is refused on a shared-kernel rung";
	if (extra)
		return "the spec requires a capability this rung may not offer when deployed";
	if (deployed_policy[iso].need_no_net && spec->egress_allow && spec->egress_allow[0])
		return "run_code on the process rung is allowed only with no network";
	return NULL;
}

static void caps_str(unsigned caps, char *buf, size_t len)
{
	buf[0] = '\0';
	for (unsigned b = 1; b <= RUNG_CAP_INSTALL; b <<= 1)
		if (caps & b) {
			size_t n = strlen(buf);
			snprintf(buf + n, len - n, "%s%s", n ? "," : "", rung_cap_name(b));
		}
}

/*
 * What each operation on a live sandbox needs from its granted set (any one of the bits).
 * Arbitrary argv (exec) is the strongest: it can run any code, so it also covers run_code;
 * run_code in a shell language is a shell, so it needs exec. A file write feeds code the
 * sandbox may run: it needs something that runs code, or persistent files. Reading a file
 * back needs nothing beyond the scope that opened the sandbox.
 */
static const struct {
	const char *what;
	unsigned any_of;
} op_needs[RT_OP__COUNT] = {
	[RT_OP_EXEC] = {"exec", RUNG_CAP_EXEC},
	[RT_OP_RUN_CODE] = {"run_code", RUNG_CAP_RUN_CODE | RUNG_CAP_EXEC},
	[RT_OP_RUN_SHELL] = {"run_code in a shell language", RUNG_CAP_EXEC},
	[RT_OP_WRITE_FILE] = {"write_file",
			      RUNG_CAP_EXEC | RUNG_CAP_RUN_CODE | RUNG_CAP_FS_PERSIST},
};

bool rt_op_allowed(unsigned granted, enum rt_op op)
{
	return (unsigned)op < RT_OP__COUNT && (granted & op_needs[op].any_of);
}

int rt_op_check(const struct rt_meta *m, enum rt_op op, struct rung_err *err)
{
	if (rt_op_allowed(m->granted, op))
		return 0;
	char have[128], need[128];
	caps_str(m->granted, have, sizeof(have));
	caps_str((unsigned)op < RT_OP__COUNT ? op_needs[op].any_of : 0, need, sizeof(need));
	return rung_err_set(err, EACCES,
			    "%s: not granted to sandbox %s (granted: %s; it needs one of: %s)",
			    (unsigned)op < RT_OP__COUNT ? op_needs[op].what : "operation", m->id,
			    have[0] ? have : "nothing", need);
}

/* A helper program: in the caller's helper_dir, else $env, else found from our own binary. */
static char *helper_binary(const char *dir, const char *env, const char *name)
{
	char path[PATH_MAX];
	if (dir && *dir) {
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		return strdup(path);
	}
	const char *e = getenv(env);
	if (e && *e)
		return strdup(e);
	if (rung_helper_path(name, path, sizeof(path)) < 0)
		return NULL;
	return strdup(path);
}

int rung_router_new(const struct rung_router_opts *opts, struct rung_router **out,
		    struct rung_err *err)
{
	struct rung_router_opts o = opts ? *opts : (struct rung_router_opts){0};
	const char *dir = o.state_dir;
	if (!dir || !*dir)
		dir = getenv("RUNG_STATE_DIR");
	if (!dir || !*dir)
		dir = "/var/lib/rung";
	struct rung_router *r = calloc(1, sizeof(*r));
	if (!r)
		return rung_err_set(err, ENOMEM, "out of memory");
	r->deployed = o.deployed;
	const char *hd = o.helper_dir;
	r->agent_path = o.agent_path ? strdup(o.agent_path)
				     : helper_binary(hd, "RUNG_AGENT", "rung-agent");
	r->vmm_path = o.vmm_path ? strdup(o.vmm_path) : helper_binary(hd, "RUNG_VMM", "rung-vmm");
	r->rung_path = helper_binary(hd, "RUNG_BIN", "rung");
	int rc = rt_store_open(dir, &r->store, err);
	if (rc == 0 && (!r->agent_path || !r->vmm_path || !r->rung_path))
		rc = rung_err_set(err, ENOMEM, "out of memory");
	if (rc < 0) {
		rung_router_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void rung_router_free(struct rung_router *r)
{
	if (!r)
		return;
	rt_store_close(&r->store);
	free(r->agent_path);
	free(r->vmm_path);
	free(r->rung_path);
	free(r);
}

const char *rung_router_state_dir(const struct rung_router *r)
{
	return r->store.root;
}

int rung_router_pick(struct rung_router *r, const struct rung_spec *spec,
		     enum rung_isolation *out, struct rung_err *err)
{
	int rc = rung_spec_validate(spec, err);
	if (rc < 0)
		return rc;
	char why[512] = "";
	for (int i = spec->isolation; i < RUNG_ISO__COUNT; i++) {
		const struct rt_backend_ops *b = backends[i];
		size_t n = strlen(why);
		const char *name = rung_isolation_name((enum rung_isolation)i);
		struct rung_err e2 = {0};
		if (!b) {
			snprintf(why + n, sizeof(why) - n, "%s%s: not available in this build", n ? "; " : "", name);
			continue;
		}
		if (!b->available(r, &e2)) {
			snprintf(why + n, sizeof(why) - n, "%s%s: not available (%s)", n ? "; " : "", name, e2.msg);
			continue;
		}
		unsigned missing = spec->requires & ~b->caps;
		if (missing) {
			char c[128];
			caps_str(missing, c, sizeof(c));
			snprintf(why + n, sizeof(why) - n, "%s%s: does not offer %s", n ? "; " : "", name, c);
			continue;
		}
		const char *refusal = rt_policy_check((enum rung_isolation)i, spec, r->deployed);
		if (refusal) {
			snprintf(why + n, sizeof(why) - n, "%s%s (deployed): %s", n ? "; " : "", name, refusal);
			continue;
		}
		*out = (enum rung_isolation)i;
		return 0;
	}
	return rung_err_set(err, ENOTSUP, "no rung can serve this spec (isolation >= %s): %s",
			    rung_isolation_name(spec->isolation), why);
}
