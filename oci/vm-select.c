/*
 * oci/vm-select.c: which rung a bundle runs on, and what the vm rung refuses. The runtime's rung
 * comes from how containerd calls it (the binary rung-oci-vm, or --isolation vm); the bundle's
 * dev.rung.isolation annotation may raise it to vm, never lower it (docs/oci.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci/vm.h"

int oci_rung_parse(const char *name, bool *vm)
{
	if (name && strcmp(name, "container") == 0)
		*vm = false;
	else if (name && strcmp(name, "vm") == 0)
		*vm = true;
	else
		return -EINVAL;
	return 0;
}

bool oci_rung_from_argv0(const char *argv0)
{
	const char *b = argv0 ? strrchr(argv0, '/') : NULL;
	b = b ? b + 1 : argv0;
	return b && strcmp(b, "rung-oci-vm") == 0;
}

int oci_rung_resolve(bool runtime_vm, json_t *annotations, bool *vm, struct rung_err *err)
{
	*vm = runtime_vm;
	json_t *v = json_object_get(annotations, OCI_ISOLATION_KEY);
	if (!v)
		return 0;
	bool want;
	if (!json_is_string(v) || oci_rung_parse(json_string_value(v), &want) < 0)
		return rung_err_set(err, EINVAL, "annotations." OCI_ISOLATION_KEY ": want "
				    "\"container\" or \"vm\"%s%s%s", json_is_string(v) ? ", not \"" : "",
				    json_is_string(v) ? json_string_value(v) : "",
				    json_is_string(v) ? "\"" : "");
	if (runtime_vm && !want)
		return rung_err_set(err, EPERM, "annotations." OCI_ISOLATION_KEY ": \"container\" "
				    "would lower this runtime's vm rung; an annotation may only raise it");
	*vm = want;
	return 0;
}

int oci_vm_config_check(const struct oci_config *c, struct rung_err *err)
{
	if (c->uid != 0 || c->gid != 0)
		return rung_err_set(err, ENOTSUP, "process.user: the vm rung runs the program as the "
				    "guest's uid 0 (without capabilities); uid %u gid %u is not "
				    "supported there", (unsigned)c->uid, (unsigned)c->gid);
	/* containerd (1.6.18 on) lists the primary gid among the additional ones: 0 is no change */
	for (size_t i = 0; i < c->ngids; i++)
		if (c->gids[i] != 0)
			return rung_err_set(err, ENOTSUP, "process.user.additionalGids[%zu]: the vm "
					    "rung runs the program as the guest's uid 0 and gid 0 only; "
					    "group %u is not supported there", i, (unsigned)c->gids[i]);
	json_t *hooks = json_object_get(c->doc, "hooks");
	const char *name;
	json_t *h;
	json_object_foreach(hooks, name, h)
		if (json_array_size(h))
			return rung_err_set(err, ENOTSUP, "hooks.%s: hooks are not run on the vm rung "
					    "(the container's namespaces are a guest's)", name);
	if (c->sysctl_keys && c->sysctl_keys[0])
		return rung_err_set(err, ENOTSUP, "linux.sysctl.%s: not applied in the vm rung's "
				    "guest", c->sysctl_keys[0]);
	if (c->limits.pids_max && c->limits.pids_max < 8) /* the guest's command cgroup */
		return rung_err_set(err, EINVAL, "linux.resources.pids.limit: %u is below the vm "
				    "rung's least, 8", c->limits.pids_max);
	/* linux.seccomp: built here to refuse what cannot be built (naming the field) before
	 * anything starts; the program's proxy builds it again for the guest's agent. */
	void *bpf = NULL;
	size_t len = 0;
	int r = oci_seccomp_build(json_object_get(json_object_get(c->doc, "linux"), "seccomp"),
				  &bpf, &len, err);
	free(bpf);
	return r < 0 ? r : oci_vm_mounts_check(c, err);
}

int oci_vm_wanted(const struct oci_create_opts *o, bool *vm, struct rung_err *err)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/config.json", o->bundle);
	json_error_t je;
	json_t *doc = json_load_file(p, 0, &je); /* unreadable: create's parser says why */
	int r = oci_rung_resolve(o->vm, json_object_get(doc, "annotations"), vm, err);
	json_decref(doc);
	return r;
}
