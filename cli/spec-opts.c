/* cli/spec-opts.c: SPEC-OPTS, parsed into the same struct as a JSON spec and validated alike. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/util.h"

void cli_spec_opts_init(struct cli_spec_opts *o)
{
	memset(o, 0, sizeof(*o));
	rung_spec_init(&o->spec);
}

static int strv_add(char ***v, const char *s)
{
	size_t n = 0;
	while (*v && (*v)[n])
		n++;
	char **nv = realloc(*v, (n + 2) * sizeof(char *));
	if (!nv)
		return -ENOMEM;
	nv[n] = strdup(s);
	nv[n + 1] = NULL;
	*v = nv;
	return nv[n] ? 0 : -ENOMEM;
}

static int set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = strdup(v);
	return *dst ? 0 : -ENOMEM;
}

/* The spec file is read first; flags given after it override its fields. We keep the flags
 * in a second spec and merge in cli_spec_finish, so order on the command line does not matter. */
int cli_spec_opt(struct cli *c, struct cli_spec_opts *o, int argc, char **argv, int *i)
{
	const char *a = argv[*i];
	static const char *const with_value[] = {"--spec", "--isolation", "--kind", "--image",
						 "--allow", "--work-dir", "--memory", "--cpus",
						 "--pids", "--requires", "--disk", "--ttl",
						 "--idle-suspend", "--exec-timeout", "--env",
						 "--from-snapshot", NULL};
	bool known = false;
	for (const char *const *w = with_value; *w; w++)
		if (!strcmp(a, *w))
			known = true;
	if (!known)
		return 0;
	if (*i + 1 >= argc) {
		fprintf(stderr, "rung: %s needs a value\n", a);
		return -EINVAL;
	}
	const char *v = argv[++*i];
	struct rung_spec *s = &o->spec;
	uint64_t u;
	int r = 0;
	(void)c;
	o->any_flag = true;
	if (!strcmp(a, "--spec")) {
		o->spec_file = v;
	} else if (!strcmp(a, "--isolation")) {
		if (rung_isolation_parse(v, &s->isolation) < 0) {
			fprintf(stderr, "rung: --isolation: '%s' is not process, container or vm\n", v);
			return -EINVAL;
		}
	} else if (!strcmp(a, "--kind")) {
		r = set_str(&s->kind, v);
	} else if (!strcmp(a, "--image")) {
		r = set_str(&s->image, v);
	} else if (!strcmp(a, "--allow")) {
		r = strv_add(&s->egress_allow, v);
	} else if (!strcmp(a, "--from-snapshot")) {
		r = set_str(&s->from_snapshot, v);
	} else if (!strcmp(a, "--env")) {
		r = strv_add(&s->env, v);
	} else if (!strcmp(a, "--work-dir")) {
		r = set_str(&s->work_dir, v);
	} else if (!strcmp(a, "--memory") || !strcmp(a, "--disk")) {
		if (rung_parse_size(v, &u) < 0) {
			fprintf(stderr, "rung: %s: '%s' is not a size (e.g. 512M)\n", a, v);
			return -EINVAL;
		}
		if (!strcmp(a, "--memory"))
			s->limits.memory_bytes = u;
		else
			s->limits.disk_bytes = u;
	} else if (!strcmp(a, "--cpus")) {
		char *end;
		double d = strtod(v, &end);
		if (*end || d <= 0 || d > 256) {
			fprintf(stderr, "rung: --cpus: '%s' is not a number in (0, 256]\n", v);
			return -EINVAL;
		}
		s->limits.cpus_milli = (uint32_t)(d * 1000 + 0.5);
	} else if (!strcmp(a, "--requires")) {
		struct rung_err err = {0};
		if (rung_caps_parse(v, &s->requires, &err) < 0) {
			fprintf(stderr, "rung: --%s\n", err.msg);
			return -EINVAL;
		}
	} else {
		if (rung_parse_u64(v, &u) < 0 || u > 100000000) {
			fprintf(stderr, "rung: %s: '%s' is not a whole number\n", a, v);
			return -EINVAL;
		}
		if (!strcmp(a, "--pids"))
			s->limits.pids = (uint32_t)u;
		else if (!strcmp(a, "--ttl"))
			s->ttl_s = (uint32_t)u;
		else if (!strcmp(a, "--idle-suspend"))
			s->idle_suspend_s = (uint32_t)u;
		else
			s->limits.exec_timeout_s = (uint32_t)u;
	}
	return r < 0 ? r : 1;
}

int cli_spec_finish(struct cli_spec_opts *o, struct rung_err *err)
{
	if (!o->spec.kind && !o->spec_file)
		o->spec.kind = strdup("default");
	if (o->spec_file) {
		/* The file is the base; any flag that differs from the defaults overrides it. */
		char *txt = NULL;
		size_t len;
		int r = rung_file_load(AT_FDCWD, o->spec_file, 1 << 20, &txt, &len, err);
		if (r < 0)
			return r;
		struct rung_spec file;
		r = rung_spec_from_json(txt, len, &file, err);
		free(txt);
		if (r < 0)
			return rung_err_wrap(err, "%s", o->spec_file);
		struct rung_spec def;
		rung_spec_init(&def);
		struct rung_spec *f = &o->spec;
#define TAKE(field)                                                                                \
	if (f->field == def.field)                                                                 \
		f->field = file.field;
		TAKE(requires);
		TAKE(isolation);
		TAKE(limits.memory_bytes);
		TAKE(limits.cpus_milli);
		TAKE(limits.pids);
		TAKE(limits.disk_bytes);
		TAKE(limits.exec_timeout_s);
		TAKE(limits.output_bytes);
		TAKE(idle_suspend_s);
		TAKE(ttl_s);
#undef TAKE
#define TAKEP(field)                                                                               \
	if (!f->field) {                                                                           \
		f->field = file.field;                                                             \
		file.field = NULL;                                                                 \
	}
		TAKEP(kind);
		TAKEP(image);
		TAKEP(work_dir);
		TAKEP(egress_allow);
		TAKEP(env);
		TAKEP(from_snapshot);
#undef TAKEP
		rung_spec_release(&file);
	}
	int r = rung_spec_validate(&o->spec, err);
	if (r == 0 && o->spec.egress_allow && o->spec.egress_allow[0])
		cli_dyn("an egress allowlist (libnftables)"); /* before anything is made */
	return r;
}
