/*
 * runtime/router.c: the backends and the isolation x capability policy. The router picks the
 * weakest available backend that meets the spec's minimum isolation and requires; when
 * deployed, one policy table reads the rung's boundary together with the capability surface.
 * It never silently degrades: a refusal names the capability and the rung.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
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
 * (exec, install); process additionally needs no network and no persistence. Host callbacks
 * reach the host through the functions given (docs/callbacks.md): like network, so not on a
 * deployed process rung.
 */
static const struct {
	unsigned allowed;   /* capabilities a deployed spec may require on this rung */
	bool need_no_net;   /* egress_allow must be empty */
	const char *boundary;
} deployed_policy[RUNG_ISO__COUNT] = {
	[RUNG_ISO_PROCESS] = {RUNG_CAP_RUN_CODE, true, "shares the host kernel"},
	[RUNG_ISO_CONTAINER] = {RUNG_CAP_RUN_CODE | RUNG_CAP_FS_PERSIST | RUNG_CAP_HOST_CALLBACKS, false,
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

/* A helper program: in the caller's helper_dir, else found from our own binary. */
static char *helper_binary(const char *dir, const char *name)
{
	char path[PATH_MAX];
	if (dir && *dir) {
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		return strdup(path);
	}
	if (rung_helper_path(name, path, sizeof(path)) < 0)
		return NULL;
	return strdup(path);
}

const char *const rung_router_env_names[] = {
	"RUNG_STATE_DIR", "RUNG_AGENT", "RUNG_VMM", "RUNG_BIN", "RUNG_VM_KERNEL", "RUNG_VM_INITRD",
	"RUNG_VM_BOOT_TIMEOUT_MS", "RUNG_CGROUP_ROOT", "RUNG_LOOP_CONTROL", "RUNG_UID_REGISTRY",
	"RUNG_NET_POOL", "RUNG_DNS_UPSTREAM", "RUNG_CLONE_INTO_CGROUP", NULL,
};

int rung_router_opts_set(struct rung_router_opts *o, const char *name, const char *value,
			 struct rung_err *err)
{
	const char **str[] = {&o->state_dir, &o->agent_path, &o->vmm_path, &o->rung_path,
			      &o->vm_kernel, &o->vm_initrd, NULL, &o->cgroup_root,
			      &o->loop_control, &o->uid_registry, &o->net_pool, &o->dns_upstream};
	size_t i = 0;
	while (rung_router_env_names[i] && strcmp(rung_router_env_names[i], name))
		i++;
	if (!rung_router_env_names[i])
		return rung_err_set(err, EINVAL, "%s: not a rung setting", name);
	if (!value || !*value)
		return 0;
	if (i < RUNG_ARRAY_SIZE(str) && str[i]) {
		*str[i] = value;
		return 0;
	}
	if (!strcmp(name, "RUNG_CLONE_INTO_CGROUP")) {
		o->no_clone_into_cgroup = !strcmp(value, "0");
		return 0;
	}
	uint64_t ms; /* RUNG_VM_BOOT_TIMEOUT_MS */
	if (rung_parse_u64(value, &ms) < 0 || ms == 0 || ms > UINT_MAX)
		return rung_err_set(err, EINVAL, "%s=%s: not a positive number of milliseconds",
				    name, value);
	o->vm_boot_timeout_ms = (unsigned)ms;
	return 0;
}

int rung_router_opts_load(struct rung_router_opts *o, char *(*lookup)(const char *name),
			  struct rung_err *err)
{
	for (const char *const *n = rung_router_env_names; *n; n++) {
		int r = rung_router_opts_set(o, *n, lookup(*n), err);
		if (r < 0)
			return r;
	}
	return 0;
}

static char *dup_or(const char *v, const char *dflt)
{
	return strdup(v && *v ? v : dflt);
}

int rung_router_new(const struct rung_router_opts *opts, struct rung_router **out,
		    struct rung_err *err)
{
	struct rung_router_opts o = opts ? *opts : (struct rung_router_opts){0};
	const char *dir = o.state_dir && *o.state_dir ? o.state_dir : "/var/lib/rung";
	struct rung_router *r = calloc(1, sizeof(*r));
	if (!r)
		return rung_err_set(err, ENOMEM, "out of memory");
	r->deployed = o.deployed;
	const char *hd = o.helper_dir;
	r->agent_path = o.agent_path && *o.agent_path ? strdup(o.agent_path)
						      : helper_binary(hd, "rung-agent");
	r->vmm_path = o.vmm_path && *o.vmm_path ? strdup(o.vmm_path)
						: helper_binary(hd, "rung-vmm");
	r->rung_path = o.rung_path && *o.rung_path ? strdup(o.rung_path)
						   : helper_binary(hd, "rung");
	r->vm_kernel = o.vm_kernel && *o.vm_kernel ? strdup(o.vm_kernel) : NULL;
	r->vm_initrd = o.vm_initrd && *o.vm_initrd ? strdup(o.vm_initrd) : NULL;
	r->vm_boot_timeout_ms = o.vm_boot_timeout_ms ? o.vm_boot_timeout_ms : 60000;
	r->cgroup_root = dup_or(o.cgroup_root, "/sys/fs/cgroup");
	r->loop_control = dup_or(o.loop_control, "/dev/loop-control");
	r->uid_registry = dup_or(o.uid_registry, "/run/rung/uid-slots");
	r->net_pool = o.net_pool && *o.net_pool ? strdup(o.net_pool) : NULL;
	r->dns_upstream = o.dns_upstream && *o.dns_upstream ? strdup(o.dns_upstream) : NULL;
	r->no_clone_into_cgroup = o.no_clone_into_cgroup;
	r->keep_agent_conns = o.keep_agent_conns;
	r->release_at_exit = o.release_at_exit;
	r->net_inbound = o.net_inbound;
	r->dns_search = o.dns_search && *o.dns_search ? strdup(o.dns_search) : NULL;
	r->dns_options = o.dns_options && *o.dns_options ? strdup(o.dns_options) : NULL;
	int rc = rt_store_open(dir, &r->store, err);
	r->store.uid_registry = r->uid_registry;
	if (rc == 0 && (!r->agent_path || !r->vmm_path || !r->rung_path || !r->cgroup_root ||
			!r->loop_control || !r->uid_registry ||
			(o.vm_kernel && *o.vm_kernel && !r->vm_kernel) ||
			(o.vm_initrd && *o.vm_initrd && !r->vm_initrd) ||
			(o.net_pool && *o.net_pool && !r->net_pool) ||
			(o.dns_upstream && *o.dns_upstream && !r->dns_upstream) ||
			(o.dns_search && *o.dns_search && !r->dns_search) ||
			(o.dns_options && *o.dns_options && !r->dns_options)))
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
	free(r->vm_kernel);
	free(r->vm_initrd);
	free(r->cgroup_root);
	free(r->loop_control);
	free(r->uid_registry);
	free(r->net_pool);
	free(r->dns_upstream);
	free(r->dns_search);
	free(r->dns_options);
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
		char evidence[256];
		if (!refusal && rt_ladder_refusal(r, (enum rung_isolation)i, evidence, sizeof(evidence)))
			refusal = evidence;
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
