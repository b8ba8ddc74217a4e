/*
 * oci/seccomp.c: the spec's linux.seccomp as a second filter, loaded after rung's allow-list.
 * Stacked filters both apply and the strictest answer wins, so the spec can narrow what rung
 * allows, never widen it. Built with libseccomp in the create process (before the init
 * runs anything of the bundle's), exported as BPF; the init only loads it.
 */
#include <seccomp.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "oci/oci.h"

static int action_of(const char *name, json_t *rule, uint32_t *out, struct rung_err *err,
		     const char *field)
{
	json_t *e = json_object_get(rule, "errnoRet");
	int eno = json_is_integer(e) ? (int)json_integer_value(e) : EPERM;
	static const struct {
		const char *name;
		uint32_t act;
	} acts[] = {
		{"SCMP_ACT_KILL", SCMP_ACT_KILL},	      {"SCMP_ACT_KILL_THREAD", SCMP_ACT_KILL_THREAD},
		{"SCMP_ACT_KILL_PROCESS", SCMP_ACT_KILL_PROCESS}, {"SCMP_ACT_TRAP", SCMP_ACT_TRAP},
		{"SCMP_ACT_ALLOW", SCMP_ACT_ALLOW},	      {"SCMP_ACT_LOG", SCMP_ACT_LOG},
	};
	if (name && strcmp(name, "SCMP_ACT_ERRNO") == 0) {
		*out = SCMP_ACT_ERRNO((uint32_t)eno);
		return 0;
	}
	if (name && strcmp(name, "SCMP_ACT_TRACE") == 0) {
		*out = SCMP_ACT_ERRNO(ENOSYS); /* no tracer: as runc without one */
		return 0;
	}
	for (size_t i = 0; name && i < sizeof(acts) / sizeof(acts[0]); i++)
		if (strcmp(name, acts[i].name) == 0) {
			*out = acts[i].act;
			return 0;
		}
	return rung_err_set(err, EINVAL, "%s: action '%s' is not supported", field,
			    name ? name : "(none)");
}

static int op_of(const char *op, enum scmp_compare *out)
{
	static const char *const ops[] = {"SCMP_CMP_NE", "SCMP_CMP_LT", "SCMP_CMP_LE", "SCMP_CMP_EQ",
					  "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_MASKED_EQ"};
	static const enum scmp_compare cmp[] = {SCMP_CMP_NE, SCMP_CMP_LT, SCMP_CMP_LE, SCMP_CMP_EQ,
						SCMP_CMP_GE, SCMP_CMP_GT, SCMP_CMP_MASKED_EQ};
	for (size_t i = 0; op && i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(op, ops[i]) == 0) {
			*out = cmp[i];
			return 0;
		}
	return -1;
}

static int rule_add(scmp_filter_ctx ctx, json_t *rule, size_t i, uint32_t deflt,
		    struct rung_err *err)
{
	char field[64];
	snprintf(field, sizeof(field), "linux.seccomp.syscalls[%zu]", i);
	uint32_t act;
	int r = action_of(json_string_value(json_object_get(rule, "action")), rule, &act, err, field);
	if (r < 0 || act == deflt)
		return r;
	json_t *args = json_object_get(rule, "args");
	struct scmp_arg_cmp cmp[6];
	size_t n = json_array_size(args);
	if (n > 6)
		return rung_err_set(err, EINVAL, "%s.args: more than 6", field);
	for (size_t k = 0; k < n; k++) {
		json_t *a = json_array_get(args, k);
		enum scmp_compare op;
		if (op_of(json_string_value(json_object_get(a, "op")), &op) < 0)
			return rung_err_set(err, EINVAL, "%s.args[%zu].op: unknown", field, k);
		cmp[k] = (struct scmp_arg_cmp){
			.arg = (unsigned)json_integer_value(json_object_get(a, "index")), .op = op,
			.datum_a = (scmp_datum_t)json_integer_value(json_object_get(a, "value")),
			.datum_b = (scmp_datum_t)json_integer_value(json_object_get(a, "valueTwo"))};
	}
	json_t *names = json_object_get(rule, "names");
	for (size_t k = 0; k < json_array_size(names); k++) {
		const char *name = json_string_value(json_array_get(names, k));
		int nr = name ? seccomp_syscall_resolve_name(name) : __NR_SCMP_ERROR;
		if (nr == __NR_SCMP_ERROR)
			continue; /* a name this kernel lacks, as runc skips it */
		if ((r = seccomp_rule_add_array(ctx, act, nr, (unsigned)n, cmp)) < 0)
			return rung_err_set(err, -r, "%s: rule for %s", field, name);
	}
	return 0;
}

int oci_seccomp_build(json_t *spec, void **bpf, size_t *len, struct rung_err *err)
{
	*bpf = NULL;
	*len = 0;
	if (!json_is_object(spec))
		return 0;
	uint32_t deflt;
	int r = action_of(json_string_value(json_object_get(spec, "defaultAction")), spec, &deflt,
			  err, "linux.seccomp.defaultAction");
	if (r < 0)
		return r;
	if (json_object_get(spec, "listenerPath"))
		return rung_err_set(err, ENOTSUP, "linux.seccomp.listenerPath: not supported");
	scmp_filter_ctx ctx = seccomp_init(deflt);
	if (!ctx)
		return rung_err_set(err, ENOMEM, "linux.seccomp: seccomp_init failed");
	seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
	json_t *rules = json_object_get(spec, "syscalls");
	for (size_t i = 0; r == 0 && i < json_array_size(rules); i++)
		r = rule_add(ctx, json_array_get(rules, i), i, deflt, err);
	/* exported through a memfd: libseccomp writes BPF to an fd */
	int fd = r == 0 ? memfd_create("rung-oci-seccomp", MFD_CLOEXEC) : -1;
	if (r == 0 && fd < 0)
		r = rung_err_sys(err, errno, "memfd_create");
	if (r == 0 && (r = seccomp_export_bpf(ctx, fd)) < 0)
		rung_err_set(err, -r, "linux.seccomp: export the filter");
	seccomp_release(ctx);
	if (r == 0 && lseek(fd, 0, SEEK_SET) == 0)
		r = rung_read_fd_all(fd, 1 << 20, (char **)bpf, len, err);
	if (fd >= 0)
		close(fd);
	return r;
}
