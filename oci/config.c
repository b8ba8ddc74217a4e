/*
 * oci/config.c: a bundle's config.json (OCI runtime spec, config.md) into struct oci_config.
 * Whatever rung does not run is refused here, before anything is created, with an error that
 * names the field: joining a pid, mount, user or cgroup namespace (a pod's network, ipc and uts
 * ones are joined: nsjoin.c checks the last two), sharing the host's pid or ipc namespace, a
 * joined namespace's sysctl, all capabilities (a privileged container), devices beyond the
 * defaults, a user namespace whose map reaches host root. Capabilities beyond rung's policy are
 * dropped.
 */
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <linux/capability.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/oci.h"

/* A capability's number from its name as the spec writes it (CAP_ and upper case), through
 * libcap's table; -1 for anything else (libcap alone would also take "cap_kill" and "12"). */
int oci_cap_from_name(const char *name)
{
	cap_value_t v;
	if (strncmp(name, "CAP_", 4) != 0)
		return -1;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
			return -1;
	return cap_from_name(name, &v) == 0 && v >= 0 && v < 64 ? (int)v : -1;
}

const char *oci_cap_name(int cap, char *buf, size_t n)
{
	char *name = cap_to_name((cap_value_t)cap);
	size_t i = 0;
	for (; name && name[i] && i + 1 < n; i++)
		buf[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 'a' + 'A' : name[i]);
	if (n)
		buf[i] = 0;
	cap_free(name);
	/* libcap names a capability it does not know by its number */
	return n && oci_cap_from_name(buf) == cap ? buf : NULL;
}

uint64_t oci_cap_policy(void)
{
	static const int allowed[] = {
		CAP_CHOWN,	  CAP_DAC_OVERRIDE, CAP_FSETID,	     CAP_FOWNER, CAP_MKNOD,
		CAP_NET_RAW,	  CAP_SETGID,	    CAP_SETUID,	     CAP_SETFCAP, CAP_SETPCAP,
		CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT, CAP_KILL,	     CAP_AUDIT_WRITE,
	};
	uint64_t m = 0;
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		m |= 1ull << allowed[i];
	return m;
}

/* A NULL-terminated array of the strings of a JSON array (pointing into it). */
static int strv_of(json_t *a, const char *field, const char ***out, struct rung_err *err)
{
	*out = NULL;
	if (!a)
		return 0;
	if (!json_is_array(a))
		return rung_err_set(err, EINVAL, "%s: not an array", field);
	const char **v = calloc(json_array_size(a) + 1, sizeof(*v));
	if (!v)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < json_array_size(a); i++) {
		v[i] = json_string_value(json_array_get(a, i));
		if (!v[i]) {
			free(v);
			return rung_err_set(err, EINVAL, "%s[%zu]: not a string", field, i);
		}
	}
	*out = v;
	return 0;
}

static const struct {
	const char *name;
	unsigned long set, clear;
	bool rec;
} mount_opts[] = {
	{"ro", MS_RDONLY, 0, false},	       {"rw", 0, MS_RDONLY, false},
	{"nosuid", MS_NOSUID, 0, false},       {"suid", 0, MS_NOSUID, false},
	{"nodev", MS_NODEV, 0, false},	       {"dev", 0, MS_NODEV, false},
	{"noexec", MS_NOEXEC, 0, false},       {"exec", 0, MS_NOEXEC, false},
	{"sync", MS_SYNCHRONOUS, 0, false},    {"async", 0, MS_SYNCHRONOUS, false},
	{"noatime", MS_NOATIME, 0, false},     {"atime", 0, MS_NOATIME, false},
	{"nodiratime", MS_NODIRATIME, 0, false}, {"relatime", MS_RELATIME, 0, false},
	{"strictatime", MS_STRICTATIME, 0, false}, {"mand", MS_MANDLOCK, 0, false},
	{"bind", MS_BIND, 0, false},	       {"rbind", MS_BIND, 0, true},
	{"private", MS_PRIVATE, 0, false},     {"rprivate", MS_PRIVATE, 0, true},
	{"slave", MS_SLAVE, 0, false},	       {"rslave", MS_SLAVE, 0, true},
	{"shared", MS_SHARED, 0, false},       {"rshared", MS_SHARED, 0, true},
	{"unbindable", MS_UNBINDABLE, 0, false}, {"runbindable", MS_UNBINDABLE, 0, true},
};

static int mount_parse(json_t *j, size_t i, struct oci_mount *m, struct rung_err *err)
{
	m->dst = (char *)json_string_value(json_object_get(j, "destination"));
	m->src = (char *)json_string_value(json_object_get(j, "source"));
	m->type = (char *)json_string_value(json_object_get(j, "type"));
	if (!m->dst || m->dst[0] != '/')
		return rung_err_set(err, EINVAL, "mounts[%zu].destination: missing or not absolute", i);
	json_t *opts = json_object_get(j, "options");
	size_t dlen = 0;
	for (size_t k = 0; k < json_array_size(opts); k++) {
		const char *o = json_string_value(json_array_get(opts, k));
		if (!o)
			return rung_err_set(err, EINVAL, "mounts[%zu].options[%zu]: not a string", i, k);
		bool known = false;
		for (size_t t = 0; t < sizeof(mount_opts) / sizeof(mount_opts[0]); t++) {
			if (strcmp(o, mount_opts[t].name) != 0)
				continue;
			known = true;
			unsigned long s = mount_opts[t].set;
			if (s & (MS_PRIVATE | MS_SLAVE | MS_SHARED | MS_UNBINDABLE))
				m->prop = s | (mount_opts[t].rec ? MS_REC : 0);
			else if (s == MS_BIND) {
				m->bind = true;
				m->rec = mount_opts[t].rec;
			} else {
				m->flags = (m->flags | s) & ~mount_opts[t].clear;
				m->clear = (m->clear | mount_opts[t].clear) & ~s;
			}
		}
		if (known)
			continue;
		char *d = realloc(m->data, dlen + strlen(o) + 2);
		if (!d)
			return rung_err_set(err, ENOMEM, "out of memory");
		m->data = d;
		dlen += (size_t)sprintf(d + dlen, "%s%s", dlen ? "," : "", o);
	}
	if (m->type && strcmp(m->type, "bind") == 0)
		m->bind = true;
	if (!m->bind && !m->type)
		return rung_err_set(err, EINVAL, "mounts[%zu].type: missing (and not a bind mount)", i);
	if (m->bind && !m->src)
		return rung_err_set(err, EINVAL, "mounts[%zu].source: a bind mount needs one", i);
	return 0;
}

static const struct {
	const char *name;
	int flag;
} ns_types[] = {
	{"pid", CLONE_NEWPID},	   {"network", CLONE_NEWNET}, {"mount", CLONE_NEWNS},
	{"ipc", CLONE_NEWIPC},	   {"uts", CLONE_NEWUTS},     {"user", CLONE_NEWUSER},
	{"cgroup", CLONE_NEWCGROUP}, {"time", 0},
};

static int idmaps_parse(json_t *a, const char *field, struct oci_idmap **out, size_t *n,
			struct rung_err *err)
{
	*n = json_array_size(a);
	if (*n == 0)
		return 0;
	if (!(*out = calloc(*n, sizeof(**out))))
		return rung_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < *n; i++) {
		json_t *m = json_array_get(a, i);
		json_int_t c = json_integer_value(json_object_get(m, "containerID"));
		json_int_t h = json_integer_value(json_object_get(m, "hostID"));
		json_int_t s = json_integer_value(json_object_get(m, "size"));
		if (c < 0 || h < 0 || s <= 0 || c + s > UINT32_MAX || h + s > UINT32_MAX)
			return rung_err_set(err, EINVAL, "%s[%zu]: bad containerID/hostID/size", field,
					    i);
		if (h == 0)
			return rung_err_set(err, EPERM,
					    "%s[%zu].hostID: mapping host id 0 (host root) is refused",
					    field, i);
		(*out)[i] = (struct oci_idmap){(uint32_t)c, (uint32_t)h, (uint32_t)s};
	}
	return 0;
}

static int namespaces_parse(json_t *linux_, struct oci_config *c, struct rung_err *err)
{
	json_t *a = json_object_get(linux_, "namespaces");
	int seen = 0;
	for (size_t i = 0; i < json_array_size(a); i++) {
		json_t *n = json_array_get(a, i);
		const char *type = json_string_value(json_object_get(n, "type"));
		const char *path = json_string_value(json_object_get(n, "path"));
		int flag = -1;
		for (size_t t = 0; type && t < sizeof(ns_types) / sizeof(ns_types[0]); t++)
			if (strcmp(type, ns_types[t].name) == 0)
				flag = ns_types[t].flag;
		if (flag < 0)
			return rung_err_set(err, EINVAL, "linux.namespaces[%zu].type: unknown '%s'", i,
					    type ? type : "");
		if (flag == 0)
			return rung_err_set(err, ENOTSUP, "linux.namespaces[%zu]: a time namespace "
					    "is not supported", i);
		if (seen & flag)
			return rung_err_set(err, EINVAL, "linux.namespaces[%zu]: '%s' listed twice", i,
					    type);
		seen |= flag;
		if (path && *path) {
			if (flag == CLONE_NEWIPC || flag == CLONE_NEWUTS) { /* a pod's (nsjoin.c) */
				struct oci_ns_join *j = flag == CLONE_NEWIPC ? &c->ipc_join
									     : &c->uts_join;
				*j = (struct oci_ns_join){.path = path, .index = i};
				continue;
			}
			if (flag != CLONE_NEWNET)
				return rung_err_set(err, EPERM, "linux.namespaces[%zu].path: joining "
						    "an existing %s namespace is refused (only the "
						    "network, ipc and uts namespaces may be joined)", i,
						    type);
			c->netns_path = path;
			continue;
		}
		c->ns_flags |= flag;
	}
	if (!(seen & CLONE_NEWPID))
		return rung_err_set(err, EPERM, "linux.namespaces: no pid namespace: sharing the "
				    "host's pid namespace is refused");
	if (!(seen & CLONE_NEWIPC))
		return rung_err_set(err, EPERM, "linux.namespaces: no ipc namespace: sharing the "
				    "host's ipc namespace is refused");
	c->spec_userns = seen & CLONE_NEWUSER;
	/* rung's boundary: always its own mount and user namespaces, and its own uts one unless
	 * a pod's is joined */
	c->ns_flags |= CLONE_NEWNS | CLONE_NEWUSER | (c->uts_join.path ? 0 : CLONE_NEWUTS);
	if (!c->spec_userns && (json_array_size(json_object_get(linux_, "uidMappings")) ||
				json_array_size(json_object_get(linux_, "gidMappings"))))
		return rung_err_set(err, EINVAL, "linux.uidMappings: given without a user namespace");
	int r = idmaps_parse(json_object_get(linux_, "uidMappings"), "linux.uidMappings",
			     &c->uid_maps, &c->nuid_maps, err);
	if (r == 0)
		r = idmaps_parse(json_object_get(linux_, "gidMappings"), "linux.gidMappings",
				 &c->gid_maps, &c->ngid_maps, err);
	return r;
}

static const struct {
	const char *name;
	int res;
} rlimit_names[] = {
	{"RLIMIT_AS", RLIMIT_AS},	  {"RLIMIT_CORE", RLIMIT_CORE},
	{"RLIMIT_CPU", RLIMIT_CPU},	  {"RLIMIT_DATA", RLIMIT_DATA},
	{"RLIMIT_FSIZE", RLIMIT_FSIZE},	  {"RLIMIT_LOCKS", RLIMIT_LOCKS},
	{"RLIMIT_MEMLOCK", RLIMIT_MEMLOCK}, {"RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE},
	{"RLIMIT_NICE", RLIMIT_NICE},	  {"RLIMIT_NOFILE", RLIMIT_NOFILE},
	{"RLIMIT_NPROC", RLIMIT_NPROC},	  {"RLIMIT_RSS", RLIMIT_RSS},
	{"RLIMIT_RTPRIO", RLIMIT_RTPRIO}, {"RLIMIT_RTTIME", RLIMIT_RTTIME},
	{"RLIMIT_SIGPENDING", RLIMIT_SIGPENDING}, {"RLIMIT_STACK", RLIMIT_STACK},
};

static int rlimits_parse(json_t *a, struct oci_config *c, struct rung_err *err)
{
	size_t n = json_array_size(a);
	if (n == 0)
		return 0;
	if (!(c->rlimits = calloc(n, sizeof(*c->rlimits))))
		return rung_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_t *r = json_array_get(a, i);
		const char *type = json_string_value(json_object_get(r, "type"));
		int res = -1;
		for (size_t t = 0; type && t < sizeof(rlimit_names) / sizeof(rlimit_names[0]); t++)
			if (strcmp(type, rlimit_names[t].name) == 0)
				res = rlimit_names[t].res;
		if (res < 0)
			return rung_err_set(err, EINVAL, "process.rlimits[%zu].type: unknown '%s'", i,
					    type ? type : "");
		json_t *soft = json_object_get(r, "soft"), *hard = json_object_get(r, "hard");
		if (!json_is_integer(soft) || !json_is_integer(hard))
			return rung_err_set(err, EINVAL, "process.rlimits[%zu]: soft and hard must be "
					    "integers", i);
		c->rlimits[c->nrlimits++] = (struct oci_rlimit){
			res, (uint64_t)json_integer_value(soft), (uint64_t)json_integer_value(hard)};
	}
	return 0;
}

static int caps_parse(json_t *caps, struct oci_config *c, struct rung_err *err)
{
	static const char *const sets[OCI_CAP__COUNT] = {"bounding", "effective", "inheritable",
							 "permitted", "ambient"};
	uint64_t all = (1ull << (CAP_LAST_CAP + 1)) - 1; /* every capability: privileged */
	for (int s = 0; s < OCI_CAP__COUNT; s++) {
		json_t *a = json_object_get(caps, sets[s]);
		uint64_t m = 0;
		for (size_t i = 0; i < json_array_size(a); i++) {
			const char *name = json_string_value(json_array_get(a, i));
			int cap = name ? oci_cap_from_name(name) : -1;
			if (cap < 0)
				return rung_err_set(err, EINVAL, "process.capabilities.%s[%zu]: unknown "
						    "capability '%s'", sets[s], i, name ? name : "");
			m |= 1ull << cap;
		}
		/* CAP_CHECKPOINT_RESTORE is the newest; a set naming all of them is privileged */
		if ((m & all) == all)
			return rung_err_set(err, EPERM, "process.capabilities.%s: all capabilities "
					    "(a privileged container) are refused", sets[s]);
		c->caps[s] = m & oci_cap_policy();
	}
	return 0;
}

static int process_parse(json_t *p, struct oci_config *c, struct rung_err *err)
{
	if (!json_is_object(p))
		return rung_err_set(err, EINVAL, "process: missing");
	int r = strv_of(json_object_get(p, "args"), "process.args", &c->args, err);
	if (r == 0 && (!c->args || !c->args[0]))
		r = rung_err_set(err, EINVAL, "process.args: missing or empty");
	if (r == 0)
		r = strv_of(json_object_get(p, "env"), "process.env", &c->env, err);
	if (r < 0)
		return r;
	c->cwd = json_string_value(json_object_get(p, "cwd"));
	if (!c->cwd || c->cwd[0] != '/')
		return rung_err_set(err, EINVAL, "process.cwd: missing or not absolute");
	c->terminal = json_is_true(json_object_get(p, "terminal"));
	c->no_new_privs = json_is_true(json_object_get(p, "noNewPrivileges"));
	json_t *oom = json_object_get(p, "oomScoreAdj");
	if (oom) {
		c->has_oom_score_adj = true;
		c->oom_score_adj = (int)json_integer_value(oom);
		if (c->oom_score_adj < -1000 || c->oom_score_adj > 1000)
			return rung_err_set(err, EINVAL, "process.oomScoreAdj: not in -1000..1000");
	}
	json_t *u = json_object_get(p, "user");
	c->uid = (uid_t)json_integer_value(json_object_get(u, "uid"));
	c->gid = (gid_t)json_integer_value(json_object_get(u, "gid"));
	json_t *g = json_object_get(u, "additionalGids");
	c->ngids = json_array_size(g);
	if (c->ngids && !(c->gids = calloc(c->ngids, sizeof(gid_t))))
		return rung_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < c->ngids; i++)
		c->gids[i] = (gid_t)json_integer_value(json_array_get(g, i));
	if ((r = rlimits_parse(json_object_get(p, "rlimits"), c, err)) < 0)
		return r;
	return caps_parse(json_object_get(p, "capabilities"), c, err);
}

/* The default devices (config.md, "Default Devices"); anything else in linux.devices is refused. */
static int devices_check(json_t *a, struct rung_err *err)
{
	static const char *const defaults[] = {"/dev/null", "/dev/zero", "/dev/full",
					       "/dev/random", "/dev/urandom", "/dev/tty"};
	for (size_t i = 0; i < json_array_size(a); i++) {
		const char *p = json_string_value(json_object_get(json_array_get(a, i), "path"));
		bool ok = false;
		for (size_t k = 0; p && k < sizeof(defaults) / sizeof(defaults[0]); k++)
			ok |= strcmp(p, defaults[k]) == 0;
		if (!ok)
			return rung_err_set(err, EPERM, "linux.devices[%zu]: device %s is refused (only "
					    "the default devices are given)", i, p ? p : "(no path)");
	}
	return 0;
}

static int resources_parse(json_t *res, struct oci_config *c, struct rung_err *err)
{
	json_t *mem = json_object_get(json_object_get(res, "memory"), "limit");
	if (json_is_integer(mem) && json_integer_value(mem) > 0)
		c->limits.memory_bytes = (uint64_t)json_integer_value(mem);
	json_t *cpu = json_object_get(res, "cpu");
	struct oci_cpu *k = &c->cpu;
	k->shares = (uint64_t)json_integer_value(json_object_get(cpu, "shares"));
	k->quota = json_integer_value(json_object_get(cpu, "quota"));
	k->period = (uint64_t)json_integer_value(json_object_get(cpu, "period"));
	k->rt_runtime = json_integer_value(json_object_get(cpu, "realtimeRuntime"));
	k->rt_period = (uint64_t)json_integer_value(json_object_get(cpu, "realtimePeriod"));
	k->cpus = json_string_value(json_object_get(cpu, "cpus"));
	k->mems = json_string_value(json_object_get(cpu, "mems"));
	if (k->quota > 0 && k->quota < 1000)
		return rung_err_set(err, EINVAL, "linux.resources.cpu.quota: below 1000 us");
	if (k->period && (k->period < 1000 || k->period > 1000000))
		return rung_err_set(err, EINVAL, "linux.resources.cpu.period: not in 1000..1000000");
	json_int_t pids = json_integer_value(json_object_get(json_object_get(res, "pids"), "limit"));
	if (pids > 0)
		c->limits.pids_max = pids > UINT32_MAX ? UINT32_MAX : (uint32_t)pids;
	return 0;
}

static int sysctl_parse(json_t *o, struct oci_config *c, struct rung_err *err)
{
	size_t n = json_object_size(o), i = 0;
	if (n == 0)
		return 0;
	c->sysctl_keys = calloc(n + 1, sizeof(char *));
	c->sysctl_values = calloc(n + 1, sizeof(char *));
	if (!c->sysctl_keys || !c->sysctl_values)
		return rung_err_set(err, ENOMEM, "out of memory");
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v) {
		if (!json_is_string(v))
			return rung_err_set(err, EINVAL, "linux.sysctl.%s: not a string", k);
		if (strstr(k, "..") || strchr(k, '/'))
			return rung_err_set(err, EINVAL, "linux.sysctl.%s: bad name", k);
		bool ns = strncmp(k, "net.", 4) == 0 || strncmp(k, "kernel.shm", 10) == 0 ||
			  strncmp(k, "kernel.msg", 10) == 0 || strcmp(k, "kernel.sem") == 0 ||
			  strncmp(k, "fs.mqueue.", 10) == 0 || strcmp(k, "kernel.hostname") == 0 ||
			  strcmp(k, "kernel.domainname") == 0;
		if (!ns)
			return rung_err_set(err, EPERM, "linux.sysctl.%s: not a namespaced sysctl "
					    "(it would change the host)", k);
		bool uts = strcmp(k, "kernel.hostname") == 0 || strcmp(k, "kernel.domainname") == 0;
		const struct oci_ns_join *j = uts ? &c->uts_join : &c->ipc_join;
		if (strncmp(k, "net.", 4) != 0 && j->path)
			return rung_err_set(err, EPERM, "linux.sysctl.%s: the %s namespace is joined "
					    "(linux.namespaces[%zu].path): it is the pod's, set by "
					    "its sandbox", k, uts ? "uts" : "ipc", j->index);
		c->sysctl_keys[i] = k;
		c->sysctl_values[i++] = json_string_value(v);
	}
	return 0;
}

static int linux_parse(json_t *l, struct oci_config *c, struct rung_err *err)
{
	int r = namespaces_parse(l, c, err);
	if (r == 0)
		r = devices_check(json_object_get(l, "devices"), err);
	if (r == 0)
		r = resources_parse(json_object_get(l, "resources"), c, err);
	if (r == 0)
		r = strv_of(json_object_get(l, "maskedPaths"), "linux.maskedPaths", &c->masked, err);
	if (r == 0)
		r = strv_of(json_object_get(l, "readonlyPaths"), "linux.readonlyPaths", &c->readonly,
			    err);
	if (r == 0)
		r = sysctl_parse(json_object_get(l, "sysctl"), c, err);
	if (r < 0)
		return r;
	c->cgroups_path = json_string_value(json_object_get(l, "cgroupsPath"));
	if (c->cgroups_path && strchr(c->cgroups_path, ':') && c->cgroups_path[0] != '/')
		return rung_err_set(err, ENOTSUP, "linux.cgroupsPath: '%s' is a systemd slice path; "
				    "rung-oci manages cgroupfs paths only", c->cgroups_path);
	/* linux.seccomp: oci/seccomp.c, a second filter on top of rung's allow-list */
	return 0;
}

int oci_config_parse(const char *text, size_t len, const char *bundle, struct oci_config *c,
		     struct rung_err *err)
{
	memset(c, 0, sizeof(*c));
	json_error_t je;
	c->doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!c->doc || !json_is_object(c->doc))
		return rung_err_set(err, EINVAL, "config.json: line %d: %s", je.line,
				    c->doc ? "not an object" : je.text);
	if (!(c->bundle = strdup(bundle)))
		return rung_err_set(err, ENOMEM, "out of memory");
	const char *ver = json_string_value(json_object_get(c->doc, "ociVersion"));
	if (!ver || strncmp(ver, "1.", 2) != 0)
		return rung_err_set(err, EINVAL, "ociVersion: missing or not 1.x");
	json_t *root = json_object_get(c->doc, "root");
	const char *rp = json_string_value(json_object_get(root, "path"));
	if (!rp || !*rp)
		return rung_err_set(err, EINVAL, "root.path: missing");
	if (asprintf(&c->rootfs, rp[0] == '/' ? "%s" : "%s/%s", rp[0] == '/' ? rp : bundle, rp) < 0)
		return rung_err_set(err, ENOMEM, "out of memory");
	c->rootfs_ro = json_is_true(json_object_get(root, "readonly"));
	c->hostname = json_string_value(json_object_get(c->doc, "hostname"));
	c->annotations = json_object_get(c->doc, "annotations");
	int r = process_parse(json_object_get(c->doc, "process"), c, err);
	if (r == 0)
		r = linux_parse(json_object_get(c->doc, "linux"), c, err);
	if (r < 0)
		return r;
	json_t *mounts = json_object_get(c->doc, "mounts");
	if (json_array_size(mounts) &&
	    !(c->mounts = calloc(json_array_size(mounts), sizeof(*c->mounts))))
		return rung_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < json_array_size(mounts); i++) {
		if ((r = mount_parse(json_array_get(mounts, i), i, &c->mounts[i], err)) < 0)
			return r;
		c->nmounts++;
	}
	return 0;
}

int oci_config_load(const char *bundle, struct oci_config *c, struct rung_err *err)
{
	memset(c, 0, sizeof(*c));
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/config.json", bundle);
	cleanup_free char *text = NULL;
	size_t len = 0;
	int r = rung_file_load(AT_FDCWD, path, 4 << 20, &text, &len, err);
	if (r < 0)
		return rung_err_wrap(err, "bundle %s", bundle);
	return oci_config_parse(text, len, bundle, c, err);
}

void oci_config_release(struct oci_config *c)
{
	for (size_t i = 0; i < c->nmounts; i++)
		free(c->mounts[i].data);
	free(c->mounts);
	free(c->args);
	free(c->env);
	free(c->gids);
	free(c->rlimits);
	free(c->masked);
	free(c->readonly);
	free(c->uid_maps);
	free(c->gid_maps);
	free(c->sysctl_keys);
	if (c->mqueue_fd > 0)
		close(c->mqueue_fd);
	free(c->sysctl_values);
	free(c->rootfs);
	free(c->bundle);
	json_decref(c->doc);
	memset(c, 0, sizeof(*c));
}
