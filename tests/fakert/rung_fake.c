/*
 * tests/fakert/rung_fake.c: a NON-ISOLATING stand-in for include/rung/rung.h, used only to test
 * the server's HTTP layer until runtime/ lands (see README.md). Never part of the product.
 */
#pragma GCC diagnostic ignored "-Wformat-truncation" /* test stand-in: paths are short */
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "common/digest.h"
#include "common/err.h"
#include "common/util.h"
#include "rung/rung.h"

struct rung_router {
	char dir[4096];
};
struct rung_sandbox {
	struct rung_router *r;
	char id[65];
	char root[4200];
	struct rung_spec spec;
};

static const char *const iso_names[] = {"process", "container", "vm"};
static const char *const cap_names[] = {"exec", "run_code", "host_callbacks", "fs_persist",
					"install"};
static const char *const state_names[] = {"creating", "running", "suspended", "dead"};

const char *rung_isolation_name(enum rung_isolation i)
{
	return (unsigned)i < RUNG_ISO__COUNT ? iso_names[i] : "?";
}
int rung_isolation_parse(const char *n, enum rung_isolation *out)
{
	for (int i = 0; i < RUNG_ISO__COUNT; i++)
		if (!strcmp(n, iso_names[i]))
			return *out = i, 0;
	return -EINVAL;
}
const char *rung_cap_name(unsigned bit)
{
	for (unsigned i = 0; i < 5; i++)
		if (bit == 1u << i)
			return cap_names[i];
	return "?";
}
int rung_caps_parse(const char *list, unsigned *out, struct rung_err *err)
{
	*out = 0;
	cleanup_free char *s = strdup(list);
	for (char *save, *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned i;
		for (i = 0; i < 5 && strcmp(t, cap_names[i]); i++)
			;
		if (i == 5)
			return rung_err_set(err, EINVAL, "requires: unknown capability %s", t);
		*out |= 1u << i;
	}
	return 0;
}
const char *rung_state_name(enum rung_state s)
{
	return (unsigned)s < 4 ? state_names[s] : "?";
}

void rung_spec_init(struct rung_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->limits = (struct rung_limits){512u << 20, 1000, 256, 1u << 30, 60, 16u << 20};
	s->requires = RUNG_CAP_EXEC;
	s->ttl_s = 3600;
}
void rung_spec_release(struct rung_spec *s)
{
	if (!s)
		return;
	free(s->kind);
	free(s->image);
	free(s->work_dir);
	rung_strvfreep(&s->egress_allow);
	rung_strvfreep(&s->env);
	rung_spec_init(s);
}
int rung_spec_validate(const struct rung_spec *s, struct rung_err *err)
{
	if (!s->kind || !*s->kind)
		return rung_err_set(err, EINVAL, "kind: required");
	return 0;
}

static int strv_from(json_t *a, const char *f, char ***out, struct rung_err *err)
{
	if (!json_is_array(a))
		return rung_err_set(err, EINVAL, "%s: must be an array of strings", f);
	*out = calloc(json_array_size(a) + 1, sizeof(char *));
	for (size_t i = 0; i < json_array_size(a); i++) {
		if (!json_is_string(json_array_get(a, i)))
			return rung_err_set(err, EINVAL, "%s[%zu]: must be a string", f, i);
		(*out)[i] = strdup(json_string_value(json_array_get(a, i)));
	}
	return 0;
}

int rung_spec_from_json(const char *json, size_t len, struct rung_spec *s, struct rung_err *err)
{
	rung_spec_init(s);
	json_t *j = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		return rung_err_set(err, EINVAL, "spec: not a JSON object");
	}
	const char *k;
	json_t *v;
	int r = 0;
	json_object_foreach(j, k, v)
	{
		if (!strcmp(k, "kind") && json_is_string(v))
			s->kind = strdup(json_string_value(v));
		else if (!strcmp(k, "work_dir") && json_is_string(v))
			s->work_dir = strdup(json_string_value(v));
		else if (!strcmp(k, "image") && json_is_string(v))
			s->image = strdup(json_string_value(v));
		else if (!strcmp(k, "isolation") && json_is_string(v)) {
			if (rung_isolation_parse(json_string_value(v), &s->isolation) < 0)
				r = rung_err_set(err, EINVAL, "isolation: unknown rung");
		} else if (!strcmp(k, "egress_allow"))
			r = strv_from(v, k, &s->egress_allow, err);
		else if (!strcmp(k, "env"))
			r = strv_from(v, k, &s->env, err);
		else if (!strcmp(k, "requires") && json_is_array(v)) {
			s->requires = 0;
			for (size_t i = 0; i < json_array_size(v) && r == 0; i++) {
				unsigned bit;
				const char *n = json_string_value(json_array_get(v, i));
				r = n ? rung_caps_parse(n, &bit, err) : -EINVAL;
				s->requires |= bit;
			}
		} else if (!strcmp(k, "limits") && json_is_object(v))
			continue; /* accepted, not enforced by the stand-in */
		else if (!strcmp(k, "ttl_s") && json_is_integer(v))
			s->ttl_s = (uint32_t)json_integer_value(v);
		else if (!strcmp(k, "idle_suspend_s") && json_is_integer(v))
			s->idle_suspend_s = (uint32_t)json_integer_value(v);
		else
			r = rung_err_set(err, EINVAL, "%s: unknown field or bad type", k);
		if (r < 0)
			break;
	}
	json_decref(j);
	if (r == 0)
		r = rung_spec_validate(s, err);
	if (r < 0)
		rung_spec_release(s);
	return r;
}

char *rung_spec_to_json(const struct rung_spec *s)
{
	json_t *j = json_pack("{s:s, s:s, s:i, s:i, s:s}", "kind", s->kind ? s->kind : "",
			      "work_dir", s->work_dir ? s->work_dir : "/work", "ttl_s",
			      (json_int_t)s->ttl_s, "idle_suspend_s", (json_int_t)s->idle_suspend_s,
			      "isolation", rung_isolation_name(s->isolation));
	json_t *env = json_array();
	for (char **e = s->env; e && *e; e++)
		json_array_append_new(env, json_string(*e));
	json_object_set_new(j, "env", env);
	char *out = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	return out;
}

int rung_router_new(const struct rung_router_opts *o, struct rung_router **out,
		    struct rung_err *err)
{
	const char *d = o && o->state_dir ? o->state_dir : getenv("RUNG_STATE_DIR");
	struct rung_router *r = calloc(1, sizeof(*r));
	snprintf(r->dir, sizeof(r->dir), "%s/fake-sandboxes", d ? d : "/var/lib/rung");
	if (rung_mkdir_p(r->dir, 0700, err) < 0) {
		free(r);
		return -EIO;
	}
	*out = r;
	return 0;
}
void rung_router_free(struct rung_router *r)
{
	free(r);
}
const char *rung_router_state_dir(const struct rung_router *r)
{
	return r->dir;
}
int rung_router_pick(struct rung_router *r, const struct rung_spec *s, enum rung_isolation *o,
		     struct rung_err *err)
{
	*o = RUNG_ISO_PROCESS;
	return 0;
}

static int store_lock(struct rung_router *r)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/.lock", r->dir);
	int fd = open(p, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		flock(fd, LOCK_EX);
	return fd;
}

static json_t *meta_load(struct rung_router *r, const char *id)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s/meta.json", r->dir, id);
	return json_load_file(p, 0, NULL);
}
static void meta_save(struct rung_router *r, const char *id, json_t *m)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s/meta.json", r->dir, id);
	char tmp[4300];
	snprintf(tmp, sizeof(tmp), "%s.%d.%lx", p, (int)getpid(), (unsigned long)pthread_self());
	/* temp + rename, without fsync: the stand-in favours speed over durability */
	if (json_dump_file(m, tmp, JSON_COMPACT) == 0)
		rename(tmp, p);
}
static const char *mstr(json_t *m, const char *k)
{
	const char *s = json_string_value(json_object_get(m, k));
	return s ? s : "";
}
static uint64_t mint(json_t *m, const char *k)
{
	return (uint64_t)json_integer_value(json_object_get(m, k));
}
static void label(const char *s, char out[65])
{
	rung_sha256_hex(s, strlen(s), out);
}

static int open_sb(struct rung_router *r, const char *id, const char *scope,
		   struct rung_sandbox **out, struct rung_err *err)
{
	json_t *m = strlen(id) < 65 && !strchr(id, '/') && id[0] != '.' ? meta_load(r, id) : NULL;
	char sl[65];
	if (scope)
		label(scope, sl);
	if (!m || (scope && strcmp(mstr(m, "scope"), sl))) {
		json_decref(m);
		return rung_err_set(err, ENOENT, "sandbox %s: not found", id);
	}
	struct rung_sandbox *sb = calloc(1, sizeof(*sb));
	sb->r = r;
	snprintf(sb->id, sizeof(sb->id), "%s", id);
	snprintf(sb->root, sizeof(sb->root), "%s/%s/root", r->dir, id);
	const char *sj = mstr(m, "spec");
	if (rung_spec_from_json(sj, strlen(sj), &sb->spec, err) < 0)
		rung_spec_init(&sb->spec);
	json_decref(m);
	*out = sb;
	return 0;
}

int rung_sandbox_open(struct rung_router *r, const char *id, const char *scope,
		      struct rung_sandbox **out, struct rung_err *err)
{
	return open_sb(r, id, scope, out, err);
}

int rung_acquire(struct rung_router *r, const struct rung_key *k, const struct rung_spec *spec,
		 struct rung_sandbox **out, bool *created, struct rung_err *err)
{
	if (!k->scope || !k->thread || !k->agent)
		return rung_err_set(err, EINVAL, "key: incomplete");
	cleanup_close int lk = store_lock(r);
	const char *parts[] = {k->scope, k->thread, k->agent, spec->kind};
	char kl[65], sl[65], tl[65], al[65];
	rung_sha256_parts_hex(parts, 4, kl);
	label(k->scope, sl), label(k->thread, tl), label(k->agent, al);
	cleanup_dir DIR *d = opendir(r->dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		json_t *m = meta_load(r, de->d_name);
		bool match = m && !strcmp(mstr(m, "keylabel"), kl);
		if (match) {
			json_object_set_new(m, "state", json_integer(RUNG_STATE_RUNNING));
			json_object_set_new(m, "last_used", json_integer(rung_wall_ms()));
			meta_save(r, de->d_name, m);
		}
		json_decref(m);
		if (match) {
			*created = false;
			return open_sb(r, de->d_name, k->scope, out, err);
		}
	}
	unsigned char rnd[16];
	char id[33];
	int ufd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (ufd < 0 || read(ufd, rnd, 16) != 16)
		return rung_err_sys(err, errno, "urandom");
	close(ufd);
	for (int i = 0; i < 16; i++)
		sprintf(id + 2 * i, "%02x", rnd[i]);
	char p[4300];
	const char *wd = spec->work_dir ? spec->work_dir : "/work";
	snprintf(p, sizeof(p), "%s/%s/root%s", r->dir, id, wd);
	if (rung_mkdir_p(p, 0755, err) < 0)
		return -EIO;
	char *sj = rung_spec_to_json(spec);
	json_t *m = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:I, s:I, s:I, s:I}", "id", id,
			      "kind", spec->kind, "keylabel", kl, "scope", sl, "thread", tl,
			      "agent", al, "state", RUNG_STATE_RUNNING, "created",
			      (json_int_t)rung_wall_ms(), "last_used", (json_int_t)rung_wall_ms(),
			      "ttl", (json_int_t)spec->ttl_s, "idle",
			      (json_int_t)spec->idle_suspend_s);
	json_object_set_new(m, "spec", json_string(sj));
	free(sj);
	meta_save(r, id, m);
	json_decref(m);
	*created = true;
	return open_sb(r, id, k->scope, out, err);
}

void rung_sandbox_close(struct rung_sandbox *sb)
{
	if (!sb)
		return;
	rung_spec_release(&sb->spec);
	free(sb);
}
const char *rung_sandbox_id(const struct rung_sandbox *sb)
{
	return sb->id;
}
enum rung_isolation rung_sandbox_isolation(const struct rung_sandbox *sb)
{
	return RUNG_ISO_PROCESS;
}
void rung_exec_res_release(struct rung_exec_res *res)
{
	if (!res)
		return;
	free(res->out);
	free(res->errout);
	res->out = res->errout = NULL;
}

static void touch(struct rung_sandbox *sb, int state)
{
	cleanup_close int lk = store_lock(sb->r);
	json_t *m = meta_load(sb->r, sb->id);
	if (!m)
		return;
	if (state >= 0)
		json_object_set_new(m, "state", json_integer(state));
	json_object_set_new(m, "last_used", json_integer(rung_wall_ms()));
	meta_save(sb->r, sb->id, m);
	json_decref(m);
}

static int collect(const struct rung_exec_req *q, int s, char **buf, size_t *len, char *data,
		   size_t n, uint64_t max, bool *trunc)
{
	if (q->on_output && q->on_output(q->ud, s, data, n) < 0)
		return -1;
	if (q->on_output && q->no_collect)
		return 0;
	if (*len + n > max) {
		*trunc = true;
		n = max - *len;
	}
	*buf = realloc(*buf, *len + n + 1);
	memcpy(*buf + *len, data, n);
	*len += n;
	(*buf)[*len] = 0;
	return 0;
}

int rung_exec(struct rung_sandbox *sb, const struct rung_exec_req *q, struct rung_exec_res *res,
	      struct rung_err *err)
{
	memset(res, 0, sizeof(*res));
	touch(sb, RUNG_STATE_RUNNING);
	int po[2], pe[2], pi[2];
	if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC) || pipe2(pi, O_CLOEXEC))
		return rung_err_sys(err, errno, "pipe");
	char cwd[8400];
	const char *wd = q->cwd ? q->cwd : sb->spec.work_dir ? sb->spec.work_dir : "/work";
	snprintf(cwd, sizeof(cwd), "%s%s%s", sb->root, wd[0] == '/' ? "" : "/work/", wd);
	uint64_t t0 = rung_now_us();
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(pi[0], 0), dup2(po[1], 1), dup2(pe[1], 2);
		if (chdir(cwd) < 0)
			_exit(126);
		for (const char *const *e = q->env; e && *e; e++)
			putenv((char *)*e);
		for (char **e = sb->spec.env; e && *e; e++)
			putenv(*e);
		execvp(q->argv[0], (char *const *)q->argv);
		_exit(127);
	}
	close(pi[0]), close(po[1]), close(pe[1]);
	if (q->stdin_len)
		rung_write_all(pi[1], q->stdin_data, q->stdin_len);
	close(pi[1]);
	uint32_t tmo = q->timeout_ms ? q->timeout_ms : sb->spec.limits.exec_timeout_s * 1000;
	uint64_t max = q->max_output ? q->max_output : sb->spec.limits.output_bytes;
	uint64_t deadline = rung_now_ms() + tmo;
	struct pollfd pf[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
	int open_n = 2;
	while (open_n > 0) {
		int64_t left = (int64_t)(deadline - rung_now_ms());
		if (left <= 0) {
			res->timed_out = true;
			kill(-pid, SIGKILL);
			break;
		}
		if (poll(pf, 2, (int)left) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			if (pf[i].fd < 0 || !pf[i].revents)
				continue;
			char b[16384];
			ssize_t n = read(pf[i].fd, b, sizeof(b));
			if (n <= 0) {
				close(pf[i].fd);
				pf[i].fd = -1;
				open_n--;
				continue;
			}
			int rr = i == 0 ? collect(q, RUNG_STDOUT, &res->out, &res->out_len, b,
						  (size_t)n, max, &res->truncated)
					: collect(q, RUNG_STDERR, &res->errout, &res->err_len, b,
						  (size_t)n, max, &res->truncated);
			if (rr < 0)
				kill(-pid, SIGKILL);
		}
	}
	for (int i = 0; i < 2; i++)
		if (pf[i].fd >= 0)
			close(pf[i].fd);
	int st = 0;
	if (!res->timed_out) {
		/* Output closed; give the process the rest of the deadline to exit. */
		while (waitpid(pid, &st, WNOHANG) == 0) {
			if (rung_now_ms() >= deadline) {
				res->timed_out = true;
				kill(-pid, SIGKILL);
				waitpid(pid, &st, 0);
				break;
			}
			usleep(1000);
		}
	} else {
		waitpid(pid, &st, 0);
	}
	kill(-pid, SIGKILL);
	res->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	res->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	res->duration_us = rung_now_us() - t0;
	if (!res->out)
		res->out = calloc(1, 1);
	if (!res->errout)
		res->errout = calloc(1, 1);
	touch(sb, -1);
	return 0;
}

static int open_in(struct rung_sandbox *sb, const char *path, int flags, unsigned mode,
		   struct rung_err *err)
{
	cleanup_close int root = open(sb->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	char p[8400];
	const char *wd = sb->spec.work_dir ? sb->spec.work_dir : "/work";
	snprintf(p, sizeof(p), "%s%s%s", path[0] == '/' ? "" : wd, path[0] == '/' ? "" : "/", path);
	struct open_how how = {.flags = (uint64_t)flags | O_CLOEXEC, .mode = flags & O_CREAT ? mode : 0,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, root, p, &how, sizeof(how));
	if (fd < 0)
		return rung_err_sys(err, errno, "%s", path);
	return fd;
}

int rung_write_file(struct rung_sandbox *sb, const char *path, const void *data, size_t len,
		    unsigned mode, struct rung_err *err)
{
	cleanup_close int fd = open_in(sb, path, O_WRONLY | O_CREAT | O_TRUNC, mode, err);
	if (fd < 0)
		return fd;
	fchmod(fd, mode);
	return rung_write_all(fd, data, len);
}

int rung_read_file(struct rung_sandbox *sb, const char *path, size_t max, char **data,
		   size_t *len, struct rung_err *err)
{
	cleanup_close int fd = open_in(sb, path, O_RDONLY, 0, err);
	if (fd < 0)
		return fd;
	return rung_read_fd_all(fd, max, data, len, err);
}

int rung_run_code(struct rung_sandbox *sb, const char *lang, const char *code,
		  const struct rung_exec_req *o, struct rung_exec_res *res, struct rung_err *err)
{
	const char *py[] = {"python3", "-c", code, NULL}, *sh[] = {"/bin/sh", "-c", code, NULL};
	struct rung_exec_req q = o ? *o : (struct rung_exec_req){0};
	if (!strcmp(lang, "python"))
		q.argv = py;
	else if (!strcmp(lang, "sh"))
		q.argv = sh;
	else
		return rung_err_set(err, EINVAL, "language: unknown %s", lang);
	q.stdin_len = 0;
	return rung_exec(sb, &q, res, err);
}

int rung_suspend(struct rung_sandbox *sb, struct rung_err *err)
{
	touch(sb, RUNG_STATE_SUSPENDED);
	return 0;
}
int rung_resume(struct rung_sandbox *sb, struct rung_err *err)
{
	touch(sb, RUNG_STATE_RUNNING);
	return 0;
}

int rung_dispose(struct rung_router *r, const char *id, const char *scope, struct rung_err *err)
{
	struct rung_sandbox *sb;
	int rr = open_sb(r, id, scope, &sb, err);
	if (rr < 0)
		return rr;
	rung_sandbox_close(sb);
	cleanup_close int lk = store_lock(r);
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s", r->dir, id);
	return rung_rm_rf(p, err);
}

int rung_list(struct rung_router *r, const char *scope, const char *thread,
	      struct rung_sandbox_info **out, size_t *n, struct rung_err *err)
{
	char sl[65], tl[65];
	if (scope)
		label(scope, sl);
	if (thread)
		label(thread, tl);
	*out = NULL;
	*n = 0;
	cleanup_dir DIR *d = opendir(r->dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		json_t *m = meta_load(r, de->d_name);
		if (m && (!scope || !strcmp(mstr(m, "scope"), sl)) &&
		    (!thread || !strcmp(mstr(m, "thread"), tl))) {
			*out = realloc(*out, (*n + 1) * sizeof(**out));
			struct rung_sandbox_info *i = &(*out)[(*n)++];
			memset(i, 0, sizeof(*i));
			snprintf(i->id, sizeof(i->id), "%s", mstr(m, "id"));
			snprintf(i->kind, sizeof(i->kind), "%s", mstr(m, "kind"));
			snprintf(i->scope_label, 65, "%s", mstr(m, "scope"));
			snprintf(i->thread_label, 65, "%s", mstr(m, "thread"));
			snprintf(i->agent_label, 65, "%s", mstr(m, "agent"));
			i->state = (enum rung_state)mint(m, "state");
			i->created_ms = mint(m, "created");
			i->last_used_ms = mint(m, "last_used");
		}
		json_decref(m);
	}
	return 0;
}

int rung_dispose_scope(struct rung_router *r, const char *scope, const char *thread,
		       size_t *nd, struct rung_err *err)
{
	struct rung_sandbox_info *v;
	size_t n;
	*nd = 0;
	rung_list(r, scope, thread, &v, &n, err);
	for (size_t i = 0; i < n; i++)
		if (rung_dispose(r, v[i].id, scope, err) == 0)
			(*nd)++;
	free(v);
	return 0;
}

int rung_inspect(struct rung_router *r, const char *id, const char *scope, char **json,
		 struct rung_err *err)
{
	struct rung_sandbox *sb;
	int rr = open_sb(r, id, scope, &sb, err);
	if (rr < 0)
		return rr;
	rung_sandbox_close(sb);
	json_t *m = meta_load(r, id);
	json_t *o = json_pack("{s:s, s:s, s:s, s:O}", "id", id, "isolation", "process", "state",
			      rung_state_name((enum rung_state)mint(m, "state")), "labels",
			      json_pack("{s:s, s:s, s:s}", "scope", mstr(m, "scope"), "thread",
					mstr(m, "thread"), "agent", mstr(m, "agent")));
	*json = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	json_decref(m);
	return 0;
}

int rung_gc(struct rung_router *r, struct rung_gc_report *rep, struct rung_err *err)
{
	memset(rep, 0, sizeof(*rep));
	struct rung_sandbox_info *v;
	size_t n;
	rung_list(r, NULL, NULL, &v, &n, err);
	uint64_t now = rung_wall_ms();
	for (size_t i = 0; i < n; i++) {
		json_t *m = meta_load(r, v[i].id);
		if (!m)
			continue;
		uint64_t ttl = mint(m, "ttl"), idle = mint(m, "idle"), lu = mint(m, "last_used");
		if (ttl && now - mint(m, "created") > ttl * 1000) {
			if (rung_dispose(r, v[i].id, NULL, err) == 0)
				rep->disposed_ttl++;
		} else if (idle && v[i].state == RUNG_STATE_RUNNING && now - lu > idle * 1000) {
			struct rung_sandbox *sb;
			if (open_sb(r, v[i].id, NULL, &sb, err) == 0) {
				touch(sb, RUNG_STATE_SUSPENDED);
				rung_sandbox_close(sb);
				rep->suspended_idle++;
			}
		}
		json_decref(m);
	}
	free(v);
	return 0;
}
