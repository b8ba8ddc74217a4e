/*
 * runtime/pool-claim.c: claiming a ready pool sandbox for a key, the key's alias to it, and
 * what the claimed sandbox's supervisor adopts. docs/pools.md.
 *
 * A claim is one rename(2) of <pool>/ready/<id> to <pool>/claimed/<id>: of any number of
 * processes and daemon replicas renaming the same entry, exactly one succeeds; the others get
 * ENOENT and try the next entry. Only then are the key's labels bound to the sandbox, under
 * its own lock. The key's id directory (locked by rung_acquire) gets "alias" naming the
 * claimed sandbox; the claimed sandbox's metadata names the key's id (aliased_by), for dispose
 * (claims by older builds made an "aliased-by" link instead, still read).
 * The key's metadata goes in by rt_store_meta_exchange: the ready record it replaces is left
 * as RT_META_ASIDE for the supervisor's adopt to remove (no inode freed on the claim's path;
 * docs/pools.md says why, and why nothing here is fsync'd).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/rt-internal.h"

/* While this thread fills a pool or makes a fork: what the new sandbox gets instead of what
 * its key would give it. */
static __thread bool filling;
static __thread struct {
	bool on;
	struct rt_labels labels;
	uint32_t uid_base;
} forking;

void rt_pool_filling(bool on)
{
	filling = on;
}

void rt_fork_creating(const struct rt_labels *l, uint32_t uid_base)
{
	forking.on = l != NULL;
	if (l)
		forking.labels = *l;
	forking.uid_base = uid_base;
}

void rt_create_override(struct rt_meta *m)
{
	if (filling)
		memcpy(m->labels.scope, RT_POOL_SCOPE_LABEL, sizeof(m->labels.scope));
	if (forking.on) {
		m->labels = forking.labels;
		m->uid_base = forking.uid_base;
	}
}

bool rt_pool_unclaimed(const struct rt_meta *m)
{
	return !strcmp(m->labels.scope, RT_POOL_SCOPE_LABEL);
}

/* The id that a link in id's directory names (alias; older builds' aliased-by): symbolic
 * links whose target is the other id, made and replaced under the directory's lock (one
 * syscall each, atomic without a temporary file). */
static int read_id_file(struct rung_router *r, const char *id, const char *name,
			char out[RT_ID_LEN + 1])
{
	char p[4096], t[RT_ID_LEN + 2];
	if (!rt_id_valid(id) || rt_store_path(&r->store, id, name, p, sizeof(p)) < 0)
		return -ENOENT;
	ssize_t n = readlink(p, t, sizeof(t));
	if (n < 0)
		return -errno;
	if (n != RT_ID_LEN)
		return -EINVAL;
	t[n] = '\0';
	if (!rt_id_valid(t))
		return -EINVAL;
	memcpy(out, t, RT_ID_LEN + 1);
	return 0;
}

static int write_id_file(struct rung_router *r, const char *id, const char *name,
			 const char *value, struct rung_err *err)
{
	char p[4096];
	rt_store_path(&r->store, id, name, p, sizeof(p));
	if (symlink(value, p) == 0)
		return 0;
	if (errno == EEXIST && unlink(p) == 0 && symlink(value, p) == 0)
		return 0;
	return rung_err_sys(err, errno, "link %s", p);
}

static void unlink_in(struct rung_router *r, const char *id, const char *name)
{
	char p[4096];
	if (rt_store_path(&r->store, id, name, p, sizeof(p)) == 0)
		unlink(p);
}

bool rt_pool_alias_live(struct rung_router *r, const char *id)
{
	char target[RT_ID_LEN + 1], p[4096];
	if (read_id_file(r, id, "alias", target) < 0)
		return false;
	rt_store_path(&r->store, target, "meta.json", p, sizeof(p));
	return access(p, F_OK) == 0;
}

void rt_pool_unalias(struct rung_router *r, const char *id, const struct rt_meta *m)
{
	char key_id[RT_ID_LEN + 1], target[RT_ID_LEN + 1], dir[4096];
	/* The metadata names the key; a claim by an older build left an "aliased-by" link. */
	if (m && m->aliased_by[0])
		memcpy(key_id, m->aliased_by, sizeof(key_id));
	else if (read_id_file(r, id, "aliased-by", key_id) < 0)
		return;
	/* Non-blocking: the order elsewhere is key lock, then sandbox lock. A busy key dir is
	 * left to gc (an alias whose sandbox is gone is debris). */
	int lock = rt_store_lock_sandbox(&r->store, key_id, false, true, NULL);
	if (lock < 0)
		return;
	if (read_id_file(r, key_id, "alias", target) == 0 && !strcmp(target, id) &&
	    rt_store_path(&r->store, key_id, NULL, dir, sizeof(dir)) == 0) {
		int g = rt_store_lock_global(&r->store, NULL);
		rung_rm_rf(dir, NULL);
		if (g >= 0)
			close(g);
	}
	close(lock);
}

int rt_pool_alias_open(struct rung_router *r, const char *key_id, const char *scope,
		       struct rung_sandbox **out, struct rung_err *err)
{
	char target[RT_ID_LEN + 1];
	if (read_id_file(r, key_id, "alias", target) < 0)
		return rung_err_set(err, ENOENT, "no sandbox for this key and kind");
	return rung_sandbox_open(r, target, scope, out, err);
}

static bool same_spec(const struct rung_spec *a, const struct rung_spec *b)
{
	cleanup_free char *ja = rung_spec_to_json(a);
	cleanup_free char *jb = rung_spec_to_json(b);
	return ja && jb && !strcmp(ja, jb);
}

/* The key's alias names target: 1 with *out (warm reuse), 0 when it is gone (the alias is
 * dropped: create as usual), <0 an error. */
static int open_aliased(struct rung_router *r, const struct rung_key *key,
			const struct rung_spec *spec, enum rung_isolation iso, const char *key_id,
			const char *target, struct rung_sandbox **out, struct rung_err *err)
{
	struct rt_meta m;
	struct rt_labels want;
	rt_labels_compute(key, &want);
	if (rt_store_meta_read(&r->store, target, &m, NULL) < 0) {
		unlink_in(r, key_id, "alias");
		return 0;
	}
	bool mine = !memcmp(&m.labels, &want, sizeof(want));
	bool alive = rt_supervisor_alive(&m) &&
		     (m.state == RUNG_STATE_RUNNING || m.state == RUNG_STATE_SUSPENDED);
	bool same = same_spec(&m.spec, spec) && m.iso == iso;
	rt_meta_release(&m);
	if (!mine) { /* a claim that never bound (crashed): not this key's */
		unlink_in(r, key_id, "alias");
		return 0;
	}
	if (!same)
		return rung_err_set(err, EEXIST,
				    "a sandbox for this key and kind exists with a different spec "
				    "(%s): dispose it first",
				    target);
	if (!alive) { /* its supervisor died: a pool sandbox's files are not worth a restart */
		rung_dispose(r, target, NULL, NULL);
		unlink_in(r, key_id, "alias");
		return 0;
	}
	int rc = rung_sandbox_open(r, target, NULL, out, err);
	if (rc < 0)
		return rc;
	rt_store_touch_activity(&r->store, target, false);
	return 1;
}

/* With the claim won: bind the key to sandbox id under its lock; *out its handle. -ESTALE:
 * not a live ready pool sandbox of this rung (the caller disposes it). */
static int bind_claim(struct rung_router *r, const struct rung_key *key,
		      const struct rung_spec *spec, enum rung_isolation iso, const char *key_id,
		      const char *id, struct rung_sandbox **out, struct rung_err *err)
{
	cleanup_close int lock = rt_store_lock_sandbox(&r->store, id, false, false, err);
	if (lock < 0)
		return lock;
	rung_trace("claim: locked");
	struct rt_meta m;
	if (rt_store_meta_read(&r->store, id, &m, NULL) < 0)
		return -ESTALE;
	rung_trace("claim: meta read");
	int rc = -ESTALE;
	const struct rt_backend_ops *ops = rt_backend_get(iso);
	if (!rt_pool_unclaimed(&m) || m.iso != iso || m.state != RUNG_STATE_RUNNING ||
	    !rt_supervisor_alive(&m) || !ops)
		goto out;
	rung_trace("claim: checked");
	json_t *jv = rt_spec_to_jsonv(spec);
	struct rung_spec copy;
	rc = jv ? rt_spec_from_jsonv(jv, &copy, err) : rung_err_set(err, ENOMEM, "out of memory");
	json_decref(jv);
	if (rc < 0)
		goto out;
	rung_trace("claim: spec copied");
	/* The alias first: a crash before the metadata leaves an alias to a sandbox with the
	 * pool's labels, which open_aliased drops, and a stale claim, which gc disposes. The
	 * way back (for dispose) is in the metadata: aliased_by. */
	if ((rc = write_id_file(r, key_id, "alias", id, err)) < 0) {
		rung_spec_release(&copy);
		goto out;
	}
	rung_trace("claim: alias linked");
	rung_spec_release(&m.spec);
	m.spec = copy;
	rt_labels_compute(key, &m.labels);
	m.granted = spec->requires & ops->caps;
	m.created_ms = m.last_used_ms = rung_wall_ms();
	memcpy(m.aliased_by, key_id, sizeof(m.aliased_by));
	if ((rc = rt_store_meta_exchange(&r->store, &m, err)) < 0) {
		unlink_in(r, key_id, "alias");
		goto out;
	}
	rung_trace("claim: meta written");
	/* The activity file is touched by the supervisor when it adopts the claim (within a
	 * second): until then the metadata's last_used_ms (now) is the later (rt_store_used_ms). */
	rc = rt_sandbox_adopt(r, &m, out, err); /* no second read of what was just written */
out:
	rt_meta_release(&m);
	return rc;
}

/* Try each ready entry of pool dir pfd: 1 with *out on a won and bound claim, 0: none. */
static int claim_from(struct rung_router *r, int pfd, const struct rung_key *key,
		      const struct rung_spec *spec, enum rung_isolation iso, const char *key_id,
		      struct rung_sandbox **out, struct rung_err *err)
{
	/* The directory stream owns the ready dir's fd; claimed/<id> is named from the pool's. */
	int rfd = openat(pfd, "ready", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cleanup_dir DIR *d = rfd >= 0 ? fdopendir(rfd) : NULL;
	if (!d) {
		if (rfd >= 0)
			close(rfd);
		return 0;
	}
	struct dirent *de;
	char to[8 + sizeof(de->d_name)];
	rung_trace("claim: ready opened");
	while ((de = readdir(d))) {
		if (!rt_id_valid(de->d_name))
			continue;
		snprintf(to, sizeof(to), "claimed/%s", de->d_name);
		if (renameat(rfd, de->d_name, pfd, to) < 0)
			continue; /* another claimer won this one */
		rung_trace("acquire: pool claim won");
		int rc = bind_claim(r, key, spec, iso, key_id, de->d_name, out, err);
		if (rc == -ESTALE) {
			rung_dispose(r, de->d_name, NULL, NULL);
			unlinkat(pfd, to, 0);
			continue;
		}
		rung_trace("acquire: pool claim bound");
		unlinkat(pfd, to, 0);
		rung_trace("acquire: pool claim done");
		if (rc < 0) {
			rung_dispose(r, de->d_name, NULL, NULL);
			return rc;
		}
		return 1;
	}
	return 0;
}

/* The pool's match key, from its pool.json (a few hundred bytes). */
static bool pool_matches(int pfd, const char *match)
{
	cleanup_free char *txt = NULL;
	size_t len = 0;
	if (rung_file_load(pfd, "match", 128, &txt, &len, NULL) < 0)
		return false;
	return len >= 64 && !strncmp(txt, match, 64);
}

int rt_pool_acquire(struct rung_router *r, const struct rung_key *key,
		    const struct rung_spec *spec, enum rung_isolation iso, const char *key_id,
		    struct rung_sandbox **out, bool *created, struct rung_err *err)
{
	if (filling || forking.on)
		return 0;
	char target[RT_ID_LEN + 1], dir[4096];
	int rc;
	if (read_id_file(r, key_id, "alias", target) == 0) {
		if ((rc = open_aliased(r, key, spec, iso, key_id, target, out, err)) != 0) {
			if (rc > 0 && created)
				*created = false;
			return rc;
		}
	}
	rung_trace("acquire: pool alias checked");
	rt_pool_path(r, NULL, NULL, dir, sizeof(dir));
	cleanup_dir DIR *d = opendir(dir);
	if (!d)
		return 0; /* no pools */
	char match[65];
	if ((rc = rung_pool_match(spec, match, err)) < 0)
		return rc;
	rung_trace("acquire: pool match");
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		cleanup_close int pfd =
		    openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (pfd < 0 || !pool_matches(pfd, match))
			continue;
		rung_trace("acquire: pool found");
		if ((rc = claim_from(r, pfd, key, spec, iso, key_id, out, err)) != 0) {
			if (rc > 0 && created)
				*created = true;
			return rc;
		}
	}
	return 0;
}

bool rt_pool_adopt(struct rt_sandbox *sb)
{
	struct rt_meta m;
	if (rt_store_meta_read(&sb->router->store, sb->meta.id, &m, NULL) < 0)
		return false;
	bool claimed = !rt_pool_unclaimed(&m);
	if (claimed) { /* the ready metadata the claim set aside (rt_store_meta_exchange) */
		unlink_in(sb->router, sb->meta.id, RT_META_ASIDE);
		rt_store_touch_activity(&sb->router->store, sb->meta.id, false);
		sb->meta.labels = m.labels;
		sb->meta.created_ms = m.created_ms;
		sb->meta.spec.ttl_s = m.spec.ttl_s;
		sb->meta.spec.idle_suspend_s = m.spec.idle_suspend_s;
	}
	rt_meta_release(&m);
	return claimed;
}
