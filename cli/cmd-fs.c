/*
 * cli/cmd-fs.c: `rung fs ls|stat|rm|mkdir|mv ID PATH...` (docs/files.md), on the local store
 * or through the daemon (its fs/OP routes). Failures exit with a status a script can act on
 * (FS_EXIT_HELP); --json prints the daemon's JSON shapes, errors with their stable code.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "common/cleanup.h"
#include "common/util.h"

static int fs_exit(int e)
{
	switch (e < 0 ? -e : e) {
	case ENOENT:
		return 3;
	case ENOTDIR:
		return 4;
	case EISDIR:
		return 5;
	case EACCES:
	case EPERM:
	case EROFS:
		return 6;
	case EEXIST:
		return 7;
	case ENOTEMPTY:
		return 8;
	default:
		return 1;
	}
}

static int fail(struct cli *c, const struct rung_err *err)
{
	if (c->json) {
		json_t *j = json_pack("{s:{s:i, s:s, s:s}}", "error", "errno", err->code, "code",
				      rung_errno_code(err->code), "message", err->msg);
		char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
		if (s)
			puts(s);
		free(s);
		json_decref(j);
	}
	fprintf(stderr, "rung: %s\n", err->msg);
	if (c->hint[0])
		fputs(c->hint, stderr);
	return fs_exit(err->code);
}

static json_t *entry_json(const struct rung_fs_entry *e)
{
	json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "name", e->name, "kind",
			      rung_fs_kind_name(e->kind), "mode", (json_int_t)e->mode, "size",
			      (json_int_t)e->size, "mtime_ns", (json_int_t)e->mtime_ns, "uid",
			      (json_int_t)e->uid, "gid", (json_int_t)e->gid);
	if (j && e->target)
		json_object_set_new(j, "target", json_string(e->target));
	return j;
}

/* One entry as a line: kind, octal mode, size, name (-> target). */
static void print_entry(json_t *e)
{
	const char *t = json_string_value(json_object_get(e, "target"));
	printf("%-7s %04llo %12lld  %s%s%s\n", json_string_value(json_object_get(e, "kind")),
	       (unsigned long long)json_integer_value(json_object_get(e, "mode")),
	       (long long)json_integer_value(json_object_get(e, "size")),
	       json_string_value(json_object_get(e, "name")), t ? " -> " : "", t ? t : "");
}

/* Print an answer: --json as is, else ls/stat as lines (others print nothing). */
static void print_answer(struct cli *c, const char *op, json_t *j)
{
	if (c->json) {
		char *s = json_dumps(j, JSON_COMPACT);
		if (s)
			puts(s);
		free(s);
		return;
	}
	if (!strcmp(op, "ls")) {
		size_t i;
		json_t *e;
		json_array_foreach(json_object_get(j, "entries"), i, e) print_entry(e);
	} else if (!strcmp(op, "stat")) {
		print_entry(j);
	}
}

struct fs_args {
	const char *op, *id, *path, *to;
	bool flag; /* -r, -p */
	unsigned mode;
};

static int run_local(struct cli *c, const struct fs_args *a, json_t **out, struct rung_err *err)
{
	struct rung_router *r = cli_router(c);
	if (!r)
		return rung_err_set(err, EIO, "no store");
	struct rung_sandbox *sb;
	int rc = rung_sandbox_open(r, a->id, NULL, &sb, err);
	if (rc < 0)
		return rc;
	if (!strcmp(a->op, "ls")) {
		struct rung_fs_entry *v;
		size_t n;
		if ((rc = rung_fs_list(sb, a->path, &v, &n, err)) == 0) {
			json_t *arr = json_array();
			for (size_t i = 0; i < n; i++)
				json_array_append_new(arr, entry_json(&v[i]));
			rung_fs_entries_free(v, n);
			*out = json_pack("{s:s, s:o}", "path", a->path, "entries", arr);
		}
	} else if (!strcmp(a->op, "stat")) {
		struct rung_fs_entry e;
		if ((rc = rung_fs_stat(sb, a->path, &e, err)) == 0) {
			*out = entry_json(&e);
			rung_fs_entry_release(&e);
		}
	} else {
		if (!strcmp(a->op, "rm"))
			rc = rung_fs_remove(sb, a->path, a->flag, err);
		else if (!strcmp(a->op, "mkdir"))
			rc = rung_fs_mkdir(sb, a->path, a->mode, a->flag, err);
		else
			rc = rung_fs_move(sb, a->path, a->to, err);
		if (rc == 0)
			*out = json_pack("{s:s, s:b}", "path", a->path, "ok", 1);
	}
	rung_sandbox_close(sb);
	return rc;
}

static int run_remote(struct cli *c, const struct fs_args *a, json_t **out, struct rung_err *err)
{
	char q[12000], pct[8192] = "", tail[12100], url[12400];
	cli_url_pct(pct, sizeof(pct), a->path); /* appends */
	int n = snprintf(q, sizeof(q), "path=%s", pct);
	if (a->to) {
		pct[0] = '\0';
		cli_url_pct(pct, sizeof(pct), a->to);
		n += snprintf(q + n, sizeof(q) - (size_t)n, "&to=%s", pct);
	}
	if (a->flag)
		snprintf(q + n, sizeof(q) - (size_t)n, "&%s=1",
			 !strcmp(a->op, "rm") ? "recursive" : "parents");
	if (a->mode)
		snprintf(q + strlen(q), sizeof(q) - strlen(q), "&mode=%o", a->mode);
	snprintf(tail, sizeof(tail), "/fs/%s?%s", a->op, q);
	cli_url_sb(url, sizeof(url), a->id, tail);
	bool get = !strcmp(a->op, "ls") || !strcmp(a->op, "stat");
	struct cli_http h = {0};
	int rc = cli_http_call(c, &h, get ? "GET" : "POST", url, NULL, NULL, 0, err);
	if (rc == 0 && !(*out = json_loadb(h.body ? h.body : "", h.len, 0, NULL)))
		rc = rung_err_set(err, EPROTO, "the daemon answered no JSON");
	cli_http_release(&h);
	return rc;
}

static int parse(int argc, char **argv, struct fs_args *a)
{
	if (argc < 2)
		return cli_usage_error("fs", "usage: rung fs ls|stat|rm|mkdir|mv ID PATH...");
	a->op = argv[1];
	const char *pos[3] = {0};
	int np = 0;
	bool rm = !strcmp(a->op, "rm"), mk = !strcmp(a->op, "mkdir"), mv = !strcmp(a->op, "mv");
	if (!rm && !mk && !mv && strcmp(a->op, "ls") && strcmp(a->op, "stat"))
		return cli_usage_error("fs", "'%s' is not ls, stat, rm, mkdir or mv", a->op);
	for (int i = 2; i < argc; i++) {
		if ((rm && (!strcmp(argv[i], "-r") || !strcmp(argv[i], "--recursive"))) ||
		    (mk && (!strcmp(argv[i], "-p") || !strcmp(argv[i], "--parents")))) {
			a->flag = true;
		} else if (mk && !strcmp(argv[i], "--mode") && i + 1 < argc) {
			char *end;
			unsigned long m = strtoul(argv[++i], &end, 8);
			if (*end || !*argv[i] || m > 07777)
				return cli_usage_error("fs", "--mode: '%s' is not octal", argv[i]);
			a->mode = (unsigned)m;
		} else if (np < (mv ? 3 : 2) && (argv[i][0] != '-' || !argv[i][1])) {
			pos[np++] = argv[i];
		} else {
			return cli_usage_error("fs", "%s: unexpected '%s'", a->op, argv[i]);
		}
	}
	if (np != (mv ? 3 : 2))
		return cli_usage_error("fs", "usage: rung fs %s ID %s", a->op,
				       mv ? "SRC DST" : "PATH");
	a->id = pos[0];
	a->path = pos[1];
	a->to = pos[2];
	return 0;
}

int cli_cmd_fs(struct cli *c, int argc, char **argv)
{
	struct fs_args a = {0};
	int r = parse(argc, argv, &a);
	if (r)
		return r;
	struct rung_err err = {0};
	json_t *out = NULL;
	r = c->remote ? run_remote(c, &a, &out, &err) : run_local(c, &a, &out, &err);
	if (r < 0)
		return fail(c, &err);
	print_answer(c, a.op, out);
	json_decref(out);
	return 0;
}
