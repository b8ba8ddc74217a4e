/* runtime/sandbox.c: acquire (get-or-create, warm reuse), open, and the per-sandbox operations. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "runtime/rt-internal.h"

/*
 * Which meta.json sb.meta was read from (or written as): every write replaces the file (a
 * new inode), so while stat() still shows this identity, sb.meta is what the store says and
 * an operation need not read and parse the file again.
 */
struct meta_ident {
	bool valid;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtim;
};

struct rung_sandbox {
	struct rt_sandbox sb;
	struct meta_ident ident;
	int cancel_fd; /* -1, or rung_sandbox_set_cancel_fd's: its hang-up ends file operations */
};

static bool meta_ident_get(const struct rt_store *st, const char *id, struct meta_ident *out)
{
	char p[4096];
	struct stat s;
	rt_store_path(st, id, "meta.json", p, sizeof(p));
	out->valid = stat(p, &s) == 0;
	out->dev = s.st_dev;
	out->ino = s.st_ino;
	out->size = s.st_size;
	out->mtim = s.st_mtim;
	return out->valid;
}

static bool meta_ident_same(const struct meta_ident *a, const struct meta_ident *b)
{
	return a->valid && b->valid && a->dev == b->dev && a->ino == b->ino &&
	       a->size == b->size && a->mtim.tv_sec == b->mtim.tv_sec &&
	       a->mtim.tv_nsec == b->mtim.tv_nsec;
}

static struct rung_sandbox *sandbox_new(struct rung_router *r, struct rung_err *err)
{
	struct rung_sandbox *s = calloc(1, sizeof(*s));
	if (!s) {
		rung_err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	s->sb.router = r;
	s->sb.first_conn = -1;
	s->sb.mntns = -1;
	s->sb.release_gate = -1;
	s->cancel_fd = -1;
	return s;
}

void rung_sandbox_close(struct rung_sandbox *s)
{
	if (!s)
		return;
	rung_closep(&s->sb.first_conn);
	rung_closep(&s->sb.mntns);
	rung_closep(&s->sb.release_gate); /* no "G": the releaser only lets the namespace go */
	rt_cgroup_free(s->sb.cg);
	rt_meta_release(&s->sb.meta);
	free(s);
}

const char *rung_sandbox_id(const struct rung_sandbox *s)
{
	return s->sb.meta.id;
}

enum rung_isolation rung_sandbox_isolation(const struct rung_sandbox *s)
{
	return s->sb.meta.iso;
}

static bool spec_equal(const struct rung_spec *a, const struct rung_spec *b)
{
	cleanup_free char *ja = rung_spec_to_json(a);
	cleanup_free char *jb = rung_spec_to_json(b);
	return ja && jb && !strcmp(ja, jb);
}

static int spec_copy(const struct rung_spec *src, struct rung_spec *dst, struct rung_err *err)
{
	cleanup_free char *j = rung_spec_to_json(src);
	if (!j)
		return rung_err_set(err, ENOMEM, "out of memory");
	return rung_spec_from_json(j, strlen(j), dst, err);
}

/* With the sandbox lock held: sb runs (st), its metadata says so. */
static int meta_running(struct rt_sandbox *sb, const struct rt_started *st, struct rung_err *err)
{
	struct rt_store *store = &sb->router->store;
	sb->meta.sup_pid = st->sup_pid;
	sb->meta.sup_start = st->sup_start;
	sb->meta.init_pid = st->init_pid;
	sb->meta.state = RUNG_STATE_RUNNING;
	int r = rt_store_meta_write(store, &sb->meta, err);
	if (r < 0)
		return r;
	rt_store_touch_activity(store, sb->meta.id, true);
	int busy = rt_store_busy(store, sb->meta.id, true); /* create it, under the lock */
	if (busy >= 0)
		close(busy);
	return 0;
}

void rt_sandbox_meta_early(struct rt_sandbox *sb, pid_t init_pid)
{
	struct rt_started st = {.sup_pid = getpid(), .init_pid = init_pid};
	struct rung_err e = {0};
	st.sup_start = rung_proc_starttime(st.sup_pid);
	sb->meta_early = sb->owned && sb->meta_early_ok && meta_running(sb, &st, &e) == 0;
	if (sb->meta_early)
		rung_trace("acquire: meta written early");
}

/* Called with the sandbox lock held: create the sandbox's runtime. */
static int create_locked(struct rt_sandbox *sb, const struct rt_backend_ops *ops,
			 struct rung_err *err)
{
	struct rt_store *st = &sb->router->store;
	int g = rt_store_lock_global(st, err);
	if (g < 0)
		return g;
	int r = rt_store_alloc_uid(st, sb->meta.id, &sb->meta.uid_base, err);
	close(g);
	if (r < 0)
		return r;
	rung_trace("acquire: uid allocated");
	/* No metadata until the sandbox runs: a crash before leaves a directory without it,
	 * which gc removes as debris. */
	sb->meta.created_ms = sb->meta.last_used_ms = rung_wall_ms();
	if (ops->prepare && (r = ops->prepare(sb, err)) < 0)
		return r;
	struct rt_started started;
	r = 1; /* without the owned start (it clears sb->owned when it cannot): a supervisor */
	if (sb->owned && (r = rt_supervisor_inline(sb, ops, &started, err)) < 0) {
		ops->cleanup(sb);
		return r;
	}
	if (r > 0 && (r = rt_supervisor_spawn(sb, ops, &started, err)) < 0) {
		ops->cleanup(sb); /* e.g. the image lease taken by prepare */
		return r;
	}
	rung_trace("acquire: supervisor ready");
	if (sb->meta_early && sb->meta.init_pid == started.init_pid &&
	    sb->meta.sup_pid == started.sup_pid)
		return 0;
	if ((r = meta_running(sb, &started, err)) < 0) {
		rt_supervisor_stop(&sb->meta, 2000);
		if (sb->owned) /* no supervisor to tear down after its pid 1 */
			ops->cleanup(sb);
		return r;
	}
	rung_trace("acquire: meta written");
	return 0;
}

/* With the sandbox lock held, right after writing sb->meta: remember the file's identity. */
static void meta_ident_written(struct rung_sandbox *s)
{
	meta_ident_get(&s->sb.router->store, s->sb.meta.id, &s->ident);
}

int rt_sandbox_adopt(struct rung_router *r, struct rt_meta *m, struct rung_sandbox **out,
		     struct rung_err *err)
{
	struct rung_sandbox *s = sandbox_new(r, err);
	if (!s)
		return -ENOMEM;
	s->sb.meta = *m;
	memset(m, 0, sizeof(*m));
	rt_store_path(&r->store, s->sb.meta.id, NULL, s->sb.dir, sizeof(s->sb.dir));
	meta_ident_written(s);
	*out = s;
	return 0;
}

/* acquire's warm reuse of the live sandbox old (its metadata moves into s): resumed if it was
 * suspended, its use recorded. On failure s is closed. */
static int warm_reuse(struct rung_sandbox *s, const struct rt_backend_ops *ops, struct rt_meta *old,
		      struct rung_sandbox **out, bool *created, struct rung_err *err)
{
	struct rt_sandbox *sb = &s->sb;
	struct rung_router *r = sb->router;
	int rc;
	sb->meta = *old;
	if (old->state == RUNG_STATE_SUSPENDED) {
		if ((rc = ops->resume(sb, err)) < 0) {
			rc = rung_err_wrap(err, "resume %s", sb->meta.id); /* before s (its id) go */
			rung_sandbox_close(s);
			return rc;
		}
		sb->meta.state = RUNG_STATE_RUNNING;
	}
	sb->meta.last_used_ms = rung_wall_ms();
	rc = rt_store_meta_write(&r->store, &sb->meta, err);
	rt_store_touch_activity(&r->store, sb->meta.id, true);
	if (rc < 0) {
		rung_sandbox_close(s);
		return rc;
	}
	meta_ident_written(s);
	if (created)
		*created = false;
	*out = s;
	return 0;
}

/* owned: rung_acquire_owned's, with its first exec (NULL: none). */
static int acquire(struct rung_router *r, const struct rung_key *key, const struct rung_spec *spec,
		   bool owned, const struct rung_exec_req *first, struct rung_sandbox **out,
		   bool *created, struct rung_err *err)
{
	int rc;
	enum rung_isolation iso;
	if ((rc = rt_key_validate(key, err)) < 0 || (rc = rung_router_pick(r, spec, &iso, err)) < 0)
		return rc;
	rung_trace("acquire: begin");
	const struct rt_backend_ops *ops = rt_backend_get(iso);
	struct rung_sandbox *s = sandbox_new(r, err);
	if (!s)
		return -ENOMEM;
	struct rt_sandbox *sb = &s->sb;
	rt_id_compute(key, spec->kind, sb->meta.id);
	rt_labels_compute(key, &sb->meta.labels);
	rt_create_override(&sb->meta); /* a pool's filler, a fork (pool-claim.c) */
	rt_store_path(&r->store, sb->meta.id, NULL, sb->dir, sizeof(sb->dir));
	cleanup_close int lock = rt_store_lock_sandbox(&r->store, sb->meta.id, true, false, err);
	if (lock < 0) {
		rung_sandbox_close(s);
		return lock;
	}
	rung_trace("acquire: locked");
	struct rt_meta old;
	struct rung_err e2 = {0};
	bool have_old = rt_store_meta_read(&r->store, sb->meta.id, &old, &e2) == 0;
	rung_trace("acquire: key's meta read");
	/* No sandbox under the key's id: the key's alias to a claimed pool sandbox, or a claim
	 * from a matching pool (pool-claim.c). */
	if (!have_old && (rc = rt_pool_acquire(r, key, spec, iso, sb->meta.id, out, created,
					       err)) != 0) {
		rung_sandbox_close(s);
		return rc < 0 ? rc : 0;
	}
	if (have_old) {
		if (memcmp(&old.labels, &sb->meta.labels, sizeof(old.labels))) {
			rung_err_set(err, EEXIST, "sandbox id %s belongs to another key", old.id);
			rt_meta_release(&old);
			rung_sandbox_close(s);
			return -EEXIST;
		}
		if (!spec_equal(&old.spec, spec) || old.iso != iso) {
			/* old.id, not sb's: sb lives in s, closed below */
			rung_err_set(err, EEXIST,
				     "a sandbox for this key and kind exists with a different "
				     "spec (%s): dispose it first",
				     old.id);
			rt_meta_release(&old);
			rung_sandbox_close(s);
			return -EEXIST;
		}
		if (rt_sandbox_live(&old) &&
		    (old.state == RUNG_STATE_RUNNING || old.state == RUNG_STATE_SUSPENDED))
			return warm_reuse(s, ops, &old, out, created, err);
		/* The supervisor is gone (crash, reboot): clear leftovers, keep the files. */
		sb->meta.init_pid = old.init_pid;
		sb->meta.uid_base = old.uid_base;
		struct rt_sandbox tmp = {.router = r, .meta = old};
		memcpy(tmp.dir, sb->dir, sizeof(tmp.dir));
		rt_supervisor_stop(&old, 1000);
		ops->cleanup(&tmp);
		rt_meta_release(&old);
	}
	sb->meta.iso = iso;
	/* What every later operation is checked against (rung_router_pick verified the rung
	 * offers it and, when deployed, that the policy allows it). */
	sb->meta.granted = spec->requires & ops->caps;
	sb->owned = owned; /* a request: rt_supervisor_inline decides */
	sb->meta_early_ok = !have_old; /* a failed start removes all (below) */
	sb->first_req = owned ? first : NULL;
	if ((rc = spec_copy(spec, &sb->meta.spec, err)) < 0 ||
	    (rc = create_locked(sb, ops, err)) < 0) {
		rung_err_wrap(err, "create %s sandbox", rung_isolation_name(iso));
		if (!have_old) { /* nothing worth keeping: leave no half-made directory */
			struct rung_err e3 = {0};
			rung_rm_rf(sb->dir, &e3);
		}
		rung_sandbox_close(s);
		return rc;
	}
	meta_ident_written(s);
	if (created)
		*created = true;
	*out = s;
	return 0;
}

int rung_acquire(struct rung_router *r, const struct rung_key *key, const struct rung_spec *spec,
		 struct rung_sandbox **out, bool *created, struct rung_err *err)
{
	return acquire(r, key, spec, false, NULL, out, created, err);
}

int rung_acquire_owned(struct rung_router *r, const struct rung_key *key,
		       const struct rung_spec *spec, const struct rung_exec_req *first,
		       struct rung_sandbox **out, bool *created, struct rung_err *err)
{
	return acquire(r, key, spec, true, first, out, created, err);
}

int rung_sandbox_open(struct rung_router *r, const char *id, const char *scope,
		      struct rung_sandbox **out, struct rung_err *err)
{
	int rc;
	struct rung_sandbox *s = sandbox_new(r, err);
	if (!s)
		return -ENOMEM;
	/* The identity before the read: a write in between makes it stale, never wrong. */
	if (rt_id_valid(id))
		meta_ident_get(&r->store, id, &s->ident);
	if ((rc = rt_store_meta_read(&r->store, id, &s->sb.meta, err)) < 0) {
		rung_sandbox_close(s);
		return rc;
	}
	if (scope) {
		char label[65];
		rt_label_of(scope, label);
		if (strcmp(label, s->sb.meta.labels.scope)) {
			rung_sandbox_close(s);
			return rung_err_set(err, ENOENT, "no sandbox %s", id);
		}
	}
	rt_store_path(&r->store, s->sb.meta.id, NULL, s->sb.dir, sizeof(s->sb.dir));
	*out = s;
	return 0;
}

int rung_sandbox_lookup(struct rung_router *r, const struct rung_key *key, const char *kind,
			struct rung_sandbox **out, struct rung_err *err)
{
	int rc = rt_key_validate(key, err);
	if (rc < 0)
		return rc;
	if (!kind || !*kind)
		return rung_err_set(err, EINVAL, "kind: required");
	char id[RT_ID_LEN + 1];
	rt_id_compute(key, kind, id);
	struct rung_sandbox *s;
	if ((rc = rung_sandbox_open(r, id, key->scope, &s, err)) < 0 &&
	    (rc != -ENOENT || (rc = rt_pool_alias_open(r, id, key->scope, &s, err)) < 0))
		return rc;
	struct rt_labels l; /* the id is a truncated hash: the full labels decide */
	rt_labels_compute(key, &l);
	if (memcmp(&l, &s->sb.meta.labels, sizeof(l))) {
		rung_sandbox_close(s);
		return rung_err_set(err, ENOENT, "no sandbox for this key and kind");
	}
	*out = s;
	return 0;
}

static int set_suspended(struct rung_sandbox *s, bool suspend, bool to_disk,
			 struct rung_err *err);

/*
 * Connect to a sandbox's agent, refusing a sandbox that is not running. A suspended one is
 * resumed first, whoever suspended it (`rung suspend` or the idle policy): every use (exec,
 * run_code, files) from the library, the CLI and the daemon goes through here, so one rule
 * holds for all of them (docs/architecture.md).
 */
/* Kept agent connections (agent-keep.c): the router asks for them; rung-agent's own socket. */
static bool keeps_conns(const struct rt_sandbox *sb)
{
	return sb->router->keep_agent_conns && sb->meta.iso != RUNG_ISO_VM;
}

/* kept_cg: an exec, which may take a kept connection (with the group parked beside it, into
 * *kept_cg); NULL: any other operation, which connects. req: the exec's request (NULL: not an
 * exec); *sent (NULL: not an exec): set when the connection is the first one with req's frame
 * on it already (rung_acquire_owned's first exec). */
static int connect_agent(struct rung_sandbox *s, struct rt_cgroup **kept_cg,
			 const struct rung_exec_req *req, bool *sent, struct rung_err *err)
{
	struct rt_meta *m = &s->sb.meta;
	enum rung_state st;
	bool alive;
	/* Another process may have suspended or disposed it since we opened it: re-read the
	 * metadata, unless the file is still the one sb.meta came from. */
	struct meta_ident cur;
	if (meta_ident_get(&s->sb.router->store, m->id, &cur) &&
	    meta_ident_same(&cur, &s->ident)) {
		st = m->state;
		alive = rt_sandbox_live(m);
	} else {
		struct rt_meta now;
		int r = rt_store_meta_read(&s->sb.router->store, m->id, &now, err);
		if (r < 0)
			return r;
		st = now.state;
		alive = rt_sandbox_live(&now);
		rt_meta_release(&now);
	}
	if (!alive)
		return rung_err_set(err, EBADFD, "sandbox %s is not running (its supervisor is gone; "
				    "acquire it again or run `rung gc`)", m->id);
	if (st == RUNG_STATE_SUSPENDED) {
		int r = set_suspended(s, false, false, err);
		if (r < 0) {
			rung_err_wrap(err, "resume suspended sandbox %s", m->id);
			return r;
		}
		LOG_INFO("op=resume id=%s reason=use", m->id);
		st = m->state;
	}
	if (st != RUNG_STATE_RUNNING)
		return rung_err_set(err, EBADFD, "sandbox %s is %s", m->id, rung_state_name(st));
	/* The first exec went ahead on the first connection: that exec, and only it, comes
	 * first (pid 1 serves nothing else until it has). */
	if (s->sb.owned && __atomic_load_n(&s->sb.first_sent, __ATOMIC_ACQUIRE)) {
		if (!req || req != s->sb.first_req)
			return rung_err_set(err, EBUSY, "sandbox %s: the exec given at its acquire "
					    "comes first", m->id);
		__atomic_store_n(&s->sb.first_sent, false, __ATOMIC_RELEASE);
		*sent = true;
	}
	/* A handler waits on it already; taken once, whichever thread asks first. */
	int first = s->sb.owned ? __atomic_exchange_n(&s->sb.first_conn, -1, __ATOMIC_ACQ_REL) : -1;
	if (first >= 0) {
		rung_trace("agent: first connection");
		return first;
	}
	if (sent && *sent) /* another thread took it */
		return rung_err_set(err, EBUSY, "sandbox %s: its first connection is taken", m->id);
	int kept = kept_cg && keeps_conns(&s->sb)
			   ? rt_keep_take(&s->sb.router->store, m->id, kept_cg)
			   : -1;
	if (kept >= 0) {
		rung_trace("agent: kept connection");
		return kept;
	}
	char sock[4096];
	rt_store_path(&s->sb.router->store, m->id, "agent.sock", sock, sizeof(sock));
	return rt_agent_connect(sock, err);
}

/* The image's environment, recorded by the container and vm backends. */
static char **image_env(const struct rt_meta *m)
{
	json_t *env = m->backend ? json_object_get(m->backend, "image_env") : NULL;
	size_t n = json_array_size(env), k = 0;
	if (!n)
		return NULL;
	char **v = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; v && i < n; i++) {
		const char *e = json_string_value(json_array_get(env, i));
		if (e && strchr(e, '=') && (v[k] = strdup(e)))
			k++;
	}
	return v;
}

/* The request an exec sends: req, with the sandbox's output limit where it asks for more (a
 * request may ask for less, never for more). */
static void exec_request(const struct rt_sandbox *sb, const struct rung_exec_req *req,
			 struct rung_exec_req *q)
{
	*q = *req;
	if (!q->max_output || q->max_output > sb->meta.spec.limits.output_bytes)
		q->max_output = sb->meta.spec.limits.output_bytes;
}

int rt_sandbox_first_frame(const struct rt_sandbox *sb, struct rung_buf *frame,
			   struct rung_err *err)
{
	struct rung_exec_req q;
	exec_request(sb, sb->first_req, &q);
	cleanup_strv char **ienv = image_env(&sb->meta);
	return rt_agent_exec_frame(&q, &sb->meta.spec, (const char *const *)ienv, frame, err);
}

/* An exec whose capability the caller has checked (exec, or run_code's language). */
static int exec_checked(struct rung_sandbox *s, const struct rung_exec_req *req,
			struct rung_exec_res *res, struct rung_err *err)
{
	rung_trace("exec: begin");
	if (req->n_callbacks && !(s->sb.meta.granted & RUNG_CAP_HOST_CALLBACKS))
		return rung_err_set(err, EACCES,
				    "callbacks: host_callbacks is not granted to sandbox %s (add it "
				    "to the spec's requires)",
				    s->sb.meta.id);
	/* in flight: no idle suspend until this returns */
	cleanup_close int busy = rt_store_busy(&s->sb.router->store, s->sb.meta.id, false);
	struct rt_cgroup *cg = NULL;
	bool sent = false;
	cleanup_close int fd = connect_agent(s, &cg, req, &sent, err);
	if (fd < 0)
		return fd;
	rung_trace("exec: connected");
	if (!cg) /* an owned sandbox's, from its start: lent for this exec (one at a time) */
		cg = __atomic_exchange_n(&s->sb.cg, NULL, __ATOMIC_SEQ_CST);
	const struct rt_backend_ops *ops = rt_backend_get(s->sb.meta.iso);
	uint64_t oom0 = 0, oom1 = 0;
	/* A first exec that went ahead is the sandbox's first: every kill so far is its own. */
	bool oom_known = ops && ops->oom_kills &&
			 (sent || ops->oom_kills(&s->sb, &cg, &oom0) == 0);
	cleanup_strv char **ienv = image_env(&s->sb.meta);
	struct rung_exec_req q;
	exec_request(&s->sb, req, &q);
	bool keep = keeps_conns(&s->sb);
	int r = rt_agent_exec(fd, &q, &s->sb.meta.spec, (const char *const *)ienv, sent, &keep, res,
			      err);
	if (r == 0 && oom_known && ops->oom_kills(&s->sb, &cg, &oom1) == 0 && oom1 > oom0)
		res->oom = true;
	if (keep) { /* parked for the next exec, with the group (agent-keep.c) */
		rt_keep_put(&s->sb.router->store, s->sb.meta.id, fd, cg);
		fd = -1;
		cg = NULL;
	}
	struct rt_cgroup *none = NULL; /* given back, unless another exec gave one meanwhile */
	if (s->sb.owned && cg &&
	    __atomic_compare_exchange_n(&s->sb.cg, &none, cg, false, __ATOMIC_SEQ_CST,
					__ATOMIC_SEQ_CST))
		cg = NULL;
	rt_cgroup_free(cg);
	rt_store_touch_activity(&s->sb.router->store, s->sb.meta.id, false);
	rung_trace("exec: done");
	return r;
}

struct rt_sandbox *rt_sandbox_inner(struct rung_sandbox *s)
{
	return &s->sb;
}

int rt_sandbox_agent(struct rung_sandbox *s, int *busy, struct rung_err *err)
{
	return rt_sandbox_agent_for(s, RT_OP_EXEC, busy, err);
}

int rt_sandbox_agent_for(struct rung_sandbox *s, enum rt_op op, int *busy, struct rung_err *err)
{
	*busy = -1;
	int r = op == RT_OP__COUNT ? 0 : rt_op_check(&s->sb.meta, op, err);
	if (r < 0)
		return r;
	/* in flight: no idle suspend until the caller closes *busy */
	*busy = rt_store_busy(&s->sb.router->store, s->sb.meta.id, false);
	int fd = connect_agent(s, NULL, NULL, NULL, err);
	if (fd < 0 && *busy >= 0) {
		close(*busy);
		*busy = -1;
	}
	return fd;
}

char **rt_sandbox_image_env(struct rung_sandbox *s)
{
	return image_env(&s->sb.meta);
}

int rt_sandbox_cancel_fd(const struct rung_sandbox *s)
{
	return s->cancel_fd;
}

void rt_sandbox_touch(struct rung_sandbox *s)
{
	rt_store_touch_activity(&s->sb.router->store, s->sb.meta.id, false);
}

int rung_exec(struct rung_sandbox *s, const struct rung_exec_req *req, struct rung_exec_res *res,
	      struct rung_err *err)
{
	memset(res, 0, sizeof(*res));
	int r = rt_op_check(&s->sb.meta, RT_OP_EXEC, err);
	return r < 0 ? r : exec_checked(s, req, res, err);
}

/* Relative paths are relative to the work dir. */
static int sandbox_path(struct rung_sandbox *s, const char *path, char *buf, size_t len,
			struct rung_err *err)
{
	if (!path || !*path)
		return rung_err_set(err, EINVAL, "path: required");
	const char *wd = s->sb.meta.spec.work_dir ? s->sb.meta.spec.work_dir : RT_DEFAULT_WORK_DIR;
	int n = path[0] == '/' ? snprintf(buf, len, "%s", path)
			       : snprintf(buf, len, "%s/%s", wd, path);
	if (n < 0 || (size_t)n >= len)
		return rung_err_set(err, ENAMETOOLONG, "path: too long");
	return 0;
}

int rt_sandbox_path(struct rung_sandbox *s, const char *path, char *buf, size_t len,
		    struct rung_err *err)
{
	return sandbox_path(s, path, buf, len, err);
}

void rung_sandbox_set_cancel_fd(struct rung_sandbox *s, int fd)
{
	s->cancel_fd = fd;
}

int rung_write_file(struct rung_sandbox *s, const char *path, const void *data, size_t len,
		    unsigned mode, struct rung_err *err)
{
	char p[4096];
	int r = sandbox_path(s, path, p, sizeof(p), err);
	if (r < 0)
		return r;
	if (mode & ~07777u)
		return rung_err_set(err, EINVAL, "mode: %o out of range", mode);
	if ((r = rt_op_check(&s->sb.meta, RT_OP_WRITE_FILE, err)) < 0)
		return r;
	/* in flight: no idle suspend until this returns */
	cleanup_close int busy = rt_store_busy(&s->sb.router->store, s->sb.meta.id, false);
	cleanup_close int fd = connect_agent(s, NULL, NULL, NULL, err);
	if (fd < 0)
		return fd;
	r = rt_agent_write_file(fd, p, data, len, mode ? mode : 0644, rt_agent_file_timeout_ms(len),
				s->cancel_fd, err);
	rt_store_touch_activity(&s->sb.router->store, s->sb.meta.id, false);
	return r;
}

int rung_read_file(struct rung_sandbox *s, const char *path, size_t max, char **data, size_t *len,
		   struct rung_err *err)
{
	char p[4096];
	int r = sandbox_path(s, path, p, sizeof(p), err);
	if (r < 0)
		return r;
	/* in flight: no idle suspend until this returns */
	cleanup_close int busy = rt_store_busy(&s->sb.router->store, s->sb.meta.id, false);
	cleanup_close int fd = connect_agent(s, NULL, NULL, NULL, err);
	if (fd < 0)
		return fd;
	max = max ? max : (64u << 20);
	r = rt_agent_read_file(fd, p, max, data, len, rt_agent_file_timeout_ms(max), s->cancel_fd,
			       err);
	rt_store_touch_activity(&s->sb.router->store, s->sb.meta.id, false);
	return r;
}

/* run_code's languages: the argv each runs, and the operation it counts as. */
static int language_op(const char *language, enum rt_op *op, const char *const **argv,
		       struct rung_err *err)
{
	static const char *const py[] = {"python3", "-", NULL};
	static const char *const sh[] = {"/bin/sh", "-s", NULL};
	if (!strcmp(language, "python") || !strcmp(language, "python3"))
		*argv = py, *op = RT_OP_RUN_CODE;
	else if (!strcmp(language, "sh"))
		*argv = sh, *op = RT_OP_RUN_SHELL; /* a shell: as much as exec */
	else
		return rung_err_set(err, EINVAL, "language: '%.32s' is not supported (python, sh)",
				    language);
	return 0;
}

int rung_sandbox_allows(const struct rung_sandbox *s, const char *op, const char *language,
			struct rung_err *err)
{
	enum rt_op o;
	const char *const *argv;
	int r = 0;
	if (!op)
		return rung_err_set(err, EINVAL, "op: required");
	if (!strcmp(op, "exec"))
		o = RT_OP_EXEC;
	else if (!strcmp(op, "write_file"))
		o = RT_OP_WRITE_FILE;
	else if (!strcmp(op, "run_code"))
		r = language_op(language ? language : "", &o, &argv, err);
	else
		return rung_err_set(err, EINVAL, "op: unknown operation '%.32s'", op);
	return r < 0 ? r : rt_op_check(&s->sb.meta, o, err);
}

int rung_run_code(struct rung_sandbox *s, const char *language, const char *code,
		  const struct rung_exec_req *opts, struct rung_exec_res *res, struct rung_err *err)
{
	const char *const *argv;
	enum rt_op op;
	memset(res, 0, sizeof(*res));
	if (!language || !code)
		return rung_err_set(err, EINVAL, "run_code: language and code are required");
	int r = language_op(language, &op, &argv, err);
	if (r < 0 || (r = rt_op_check(&s->sb.meta, op, err)) < 0)
		return r;
	struct rung_exec_req req = opts ? *opts : (struct rung_exec_req){0};
	req.argv = argv;
	req.stdin_data = code;
	req.stdin_len = strlen(code);
	return exec_checked(s, &req, res, err);
}

static int set_suspended(struct rung_sandbox *s, bool suspend, bool to_disk,
			 struct rung_err *err)
{
	struct rt_store *st = &s->sb.router->store;
	cleanup_close int lock = rt_store_lock_sandbox(st, s->sb.meta.id, false, false, err);
	if (lock < 0)
		return lock;
	rt_meta_release(&s->sb.meta);
	int r = rt_store_meta_read(st, s->sb.dir[0] ? strrchr(s->sb.dir, '/') + 1 : "", &s->sb.meta,
				   err);
	if (r < 0)
		return r;
	meta_ident_written(s); /* what we just read, under the lock */
	if (!rt_sandbox_live(&s->sb.meta))
		return rung_err_set(err, EBADFD, "sandbox %s is not running", s->sb.meta.id);
	const struct rt_backend_ops *ops = rt_backend_get(s->sb.meta.iso);
	if (to_disk && !ops->suspend_disk)
		return rung_err_set(err, EOPNOTSUPP, "suspend --to-disk needs the vm rung (sandbox "
				    "%s is on the %s rung)", s->sb.meta.id, ops->name);
	enum rung_state want = suspend ? RUNG_STATE_SUSPENDED : RUNG_STATE_RUNNING;
	if (s->sb.meta.state == want && (!to_disk || rt_meta_on_disk(&s->sb.meta)))
		return 0;
	if (s->sb.meta.state != RUNG_STATE_RUNNING && s->sb.meta.state != RUNG_STATE_SUSPENDED)
		return rung_err_set(err, EBADFD, "sandbox %s is %s", s->sb.meta.id,
				    rung_state_name(s->sb.meta.state));
	r = to_disk   ? ops->suspend_disk(&s->sb, err)
	    : suspend ? ops->suspend(&s->sb, err)
		      : ops->resume(&s->sb, err);
	if (r < 0)
		return r;
	s->sb.meta.state = want;
	if (!suspend)
		rt_store_touch_activity(st, s->sb.meta.id, true);
	r = rt_store_meta_write(st, &s->sb.meta, err);
	if (r == 0)
		meta_ident_written(s);
	else
		s->ident.valid = false;
	return r;
}

int rung_suspend(struct rung_sandbox *s, struct rung_err *err)
{
	return set_suspended(s, true, false, err);
}

int rung_suspend_to_disk(struct rung_sandbox *s, struct rung_err *err)
{
	return set_suspended(s, true, true, err);
}

int rung_resume(struct rung_sandbox *s, struct rung_err *err)
{
	return set_suspended(s, false, false, err);
}
