/*
 * runtime/pool.c: warm pools in the store: set, list, remove, refill (one pass or kept), and
 * their part of gc. The claim is pool-claim.c. docs/pools.md.
 *
 * <root>/pools/<name>/pool.json  {name, size, mem_reserve, spec, owner_pid, owner_start}
 *                    /match      rung_pool_match of the spec (read by every claim)
 *                    /lock       held by set, fill and remove (one filler at a time)
 *                    /ready/<id> a ready sandbox; /claimed/<id> one being bound to a key
 * A ready sandbox is an ordinary store entry whose scope label is RT_POOL_SCOPE_LABEL (no
 * key hashes to it, so no caller can open it by scope), thread label the pool name's, kind
 * "pool.<name>", no ttl and no idle suspend until claimed.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/log.h"
#include "runtime/rt-internal.h"

#define POOL_DEFAULT_RESERVE (256ull << 20)
#define POOL_UID_SLOTS_KEPT 64         /* uid slots a pool never takes */
#define POOL_SHARED_FOOTPRINT (32ull << 20) /* a ready shared-kernel sandbox, estimated */

struct pool_cfg {
	char name[RUNG_POOL_NAME_MAX + 1];
	uint32_t size;
	uint64_t mem_reserve;
	json_t *spec;
	pid_t owner;
	uint64_t owner_start;
};

static void cfg_release(struct pool_cfg *c)
{
	json_decref(c->spec);
	c->spec = NULL;
}

int rt_pool_path(const struct rung_router *r, const char *name, const char *sub, char *buf,
		 size_t len)
{
	int n = !name  ? snprintf(buf, len, "%s/pools", r->store.root)
		: !sub ? snprintf(buf, len, "%s/pools/%s", r->store.root, name)
		       : snprintf(buf, len, "%s/pools/%s/%s", r->store.root, name, sub);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int name_check(const char *name, struct rung_err *err)
{
	size_t n = name ? strlen(name) : 0;
	bool ok = n >= 1 && n <= RUNG_POOL_NAME_MAX && name[0] != '.';
	for (size_t i = 0; ok && i < n; i++)
		ok = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-",
			    name[i]) != NULL;
	if (!ok)
		return rung_err_set(err, EINVAL,
				    "pool name '%.80s': 1-%d characters of [A-Za-z0-9_.-], not "
				    "starting with '.'",
				    name ? name : "", RUNG_POOL_NAME_MAX);
	return 0;
}

int rung_pool_match(const struct rung_spec *spec, char out[65], struct rung_err *err)
{
	struct rung_spec s = *spec;
	s.kind = (char *)"pool";
	s.ttl_s = 0;
	s.idle_suspend_s = 0;
	cleanup_free char *js = rung_spec_to_json(&s);
	if (!js)
		return rung_err_set(err, ENOMEM, "out of memory");
	rung_sha256_hex(js, strlen(js), out);
	return 0;
}

static int cfg_load(struct rung_router *r, const char *name, struct pool_cfg *c,
		    struct rung_err *err)
{
	char p[4096];
	cleanup_free char *txt = NULL;
	size_t len = 0;
	memset(c, 0, sizeof(*c));
	rt_pool_path(r, name, "pool.json", p, sizeof(p));
	int rc = rung_file_load(AT_FDCWD, p, 1 << 20, &txt, &len, err);
	if (rc == -ENOENT)
		return rung_err_set(err, ENOENT, "no pool '%s'", name);
	if (rc < 0)
		return rc;
	json_error_t je;
	json_t *o = json_loadb(txt, len, 0, &je);
	json_int_t size = 0, reserve = 0, owner = 0, start = 0;
	json_t *spec = NULL;
	const char *nm = NULL;
	if (!o || json_unpack_ex(o, &je, 0, "{s:s, s:I, s:I, s:o, s:I, s:I}", "name", &nm, "size",
				 &size, "mem_reserve", &reserve, "spec", &spec, "owner_pid",
				 &owner, "owner_start", &start) < 0) {
		json_decref(o);
		return rung_err_set(err, EINVAL, "%s: %s", p, je.text);
	}
	snprintf(c->name, sizeof(c->name), "%s", nm);
	c->size = (uint32_t)size;
	c->mem_reserve = (uint64_t)reserve;
	c->spec = json_incref(spec);
	c->owner = (pid_t)owner;
	c->owner_start = (uint64_t)start;
	json_decref(o);
	return 0;
}

static int cfg_save(struct rung_router *r, const struct pool_cfg *c, struct rung_err *err)
{
	char p[4096];
	json_t *o = json_pack("{s:s, s:I, s:I, s:O, s:I, s:I}", "name", c->name, "size",
			      (json_int_t)c->size, "mem_reserve", (json_int_t)c->mem_reserve,
			      "spec", c->spec, "owner_pid", (json_int_t)c->owner, "owner_start",
			      (json_int_t)c->owner_start);
	cleanup_free char *txt = o ? json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
	json_decref(o);
	if (!txt)
		return rung_err_set(err, ENOMEM, "out of memory");
	rt_pool_path(r, c->name, "pool.json", p, sizeof(p));
	return rung_write_file_replace(AT_FDCWD, p, txt, strlen(txt), 0600, err);
}

/* The pool's spec as a struct (malloc'd members). */
static int cfg_spec(const struct pool_cfg *c, struct rung_spec *out, struct rung_err *err)
{
	cleanup_free char *js = json_dumps(c->spec, JSON_COMPACT);
	if (!js)
		return rung_err_set(err, ENOMEM, "out of memory");
	return rung_spec_from_json(js, strlen(js), out, err);
}

static int pool_lock(struct rung_router *r, const char *name, bool create, struct rung_err *err)
{
	char p[4096];
	rt_pool_path(r, name, "lock", p, sizeof(p));
	int fd = open(p, O_RDWR | (create ? O_CREAT : 0) | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == ENOENT)
		return rung_err_set(err, ENOENT, "no pool '%s'", name);
	if (fd < 0)
		return rung_err_sys(err, errno, "open %s", p);
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR) {
			int e = errno;
			close(fd);
			return rung_err_sys(err, e, "lock %s", p);
		}
	return fd;
}

/* Ready ids of the pool (NULL-terminated, malloc'd); count in *n. */
static char **ready_ids(struct rung_router *r, const char *name, const char *sub, size_t *n)
{
	char p[4096];
	rt_pool_path(r, name, sub, p, sizeof(p));
	*n = 0;
	char **v = calloc(1, sizeof(char *));
	cleanup_dir DIR *d = opendir(p);
	struct dirent *de;
	while (v && d && (de = readdir(d))) {
		if (!rt_id_valid(de->d_name))
			continue;
		char **nv = realloc(v, (*n + 2) * sizeof(char *));
		if (!nv)
			break;
		v = nv;
		if (!(v[*n] = strdup(de->d_name)))
			break;
		v[++*n] = NULL;
	}
	return v;
}

/* Take one ready sandbox out of the pool (as a claim would) and dispose it: 0 if done. */
static int drop_ready(struct rung_router *r, const char *name, const char *id)
{
	char from[4096], to[4096], rel[128];
	snprintf(rel, sizeof(rel), "ready/%s", id);
	rt_pool_path(r, name, rel, from, sizeof(from));
	snprintf(rel, sizeof(rel), "claimed/%s", id);
	rt_pool_path(r, name, rel, to, sizeof(to));
	if (rename(from, to) < 0)
		return -errno; /* claimed meanwhile: it is a key's now */
	struct rung_err e = {0};
	int rc = rung_dispose(r, id, NULL, &e);
	unlink(to);
	return rc == -ENOENT ? 0 : rc;
}

static size_t drop_all_ready(struct rung_router *r, const char *name)
{
	size_t n = 0, done = 0;
	cleanup_strv char **ids = ready_ids(r, name, "ready", &n);
	for (size_t i = 0; ids && i < n; i++)
		if (drop_ready(r, name, ids[i]) == 0)
			done++;
	return done;
}

int rung_pool_set(struct rung_router *r, const char *name, uint32_t size,
		  const struct rung_spec *spec, uint64_t mem_reserve, struct rung_err *err)
{
	int rc;
	if ((rc = name_check(name, err)) < 0)
		return rc;
	if (size > RUNG_POOL_MAX_SIZE)
		return rung_err_set(err, EINVAL, "size: %u is over the maximum of %d", size,
				    RUNG_POOL_MAX_SIZE);
	enum rung_isolation iso;
	if ((rc = rung_router_pick(r, spec, &iso, err)) < 0)
		return rung_err_wrap(err, "pool '%s'", name);
	char match[65], p[4096];
	if ((rc = rung_pool_match(spec, match, err)) < 0)
		return rc;
	const char *subs[] = {"ready", "claimed"};
	for (size_t i = 0; i < 2; i++) {
		rt_pool_path(r, name, subs[i], p, sizeof(p));
		if ((rc = rung_mkdir_p(p, 0700, err)) < 0)
			return rung_err_wrap(err, "pool '%s'", name);
	}
	cleanup_close int lock = pool_lock(r, name, true, err);
	if (lock < 0)
		return lock;
	struct pool_cfg c;
	struct rung_err e2 = {0};
	bool had = cfg_load(r, name, &c, &e2) == 0;
	char old[65] = "";
	rt_pool_path(r, name, "match", p, sizeof(p));
	cleanup_free char *txt = NULL;
	if (had && rung_file_load(AT_FDCWD, p, 128, &txt, NULL, NULL) == 0)
		snprintf(old, sizeof(old), "%s", txt);
	if (!had)
		memset(&c, 0, sizeof(c));
	cfg_release(&c);
	snprintf(c.name, sizeof(c.name), "%s", name);
	c.size = size;
	c.mem_reserve = mem_reserve ? mem_reserve : POOL_DEFAULT_RESERVE;
	c.spec = rt_spec_to_jsonv(spec);
	if (!c.spec)
		return rung_err_set(err, ENOMEM, "out of memory");
	rc = cfg_save(r, &c, err);
	cfg_release(&c);
	/* The match last: a claim never sees a new match with the old pool.json's sandboxes
	 * unless they were made for it. Then the old spec's sandboxes go. */
	if (rc == 0 && strcmp(old, match)) {
		rc = rung_write_file_replace(AT_FDCWD, p, match, 64, 0600, err);
		if (rc == 0 && had)
			drop_all_ready(r, name);
	}
	return rc;
}

int rung_pool_own(struct rung_router *r, const char *name, pid_t pid, struct rung_err *err)
{
	int rc = name_check(name, err);
	if (rc < 0)
		return rc;
	uint64_t start = pid ? rung_proc_starttime(pid) : 0;
	if (pid && !start)
		return rung_err_set(err, ESRCH, "owner: no process %d", (int)pid);
	cleanup_close int lock = pool_lock(r, name, false, err);
	if (lock < 0)
		return lock;
	struct pool_cfg c;
	if ((rc = cfg_load(r, name, &c, err)) < 0)
		return rc;
	c.owner = pid;
	c.owner_start = start;
	rc = cfg_save(r, &c, err);
	cfg_release(&c);
	return rc;
}

static uint64_t meminfo_kb(const char *field)
{
	cleanup_free char *txt = NULL;
	if (rung_file_load(AT_FDCWD, "/proc/meminfo", 1 << 16, &txt, NULL, NULL) < 0)
		return UINT64_MAX / 1024;
	const char *p = strstr(txt, field);
	return p ? strtoull(p + strlen(field), NULL, 10) : UINT64_MAX / 1024;
}

static size_t uid_slots_used(struct rung_router *r)
{
	cleanup_dir DIR *d = opendir(r->uid_registry ? r->uid_registry : "/run/rung/uid-slots");
	size_t n = 0;
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	return n;
}

/* Is there room for one more ready sandbox of spec on rung iso? Sets why if not. */
static bool host_has_room(struct rung_router *r, const struct pool_cfg *c,
			  const struct rung_spec *spec, enum rung_isolation iso, const char **why)
{
	uint64_t avail = meminfo_kb("MemAvailable:") * 1024;
	uint64_t need = iso == RUNG_ISO_VM ? spec->limits.memory_bytes : POOL_SHARED_FOOTPRINT;
	if (avail < c->mem_reserve + need) {
		*why = "memory (MemAvailable under the pool's reserve)";
		return false;
	}
	if (uid_slots_used(r) + POOL_UID_SLOTS_KEPT >= RT_UID_SLOTS) {
		*why = "uid slots";
		return false;
	}
	return true;
}

/* Create one ready sandbox for the pool (its lock held); its id in the ready dir. */
static int create_ready(struct rung_router *r, const struct pool_cfg *c, struct rung_spec *spec,
			struct rung_err *err)
{
	unsigned char rnd[16];
	char agent[33], kind[RUNG_POOL_NAME_MAX + 8];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return rung_err_sys(err, errno, "getrandom");
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(agent + 2 * i, 3, "%02x", rnd[i]);
	snprintf(kind, sizeof(kind), "pool.%s", c->name);
	struct rung_key key = {.scope = "rung-pool", .thread = c->name, .agent = agent};
	struct rung_spec s = *spec;
	s.kind = kind;
	s.ttl_s = 0;
	s.idle_suspend_s = 0;
	struct rung_sandbox *sb = NULL;
	rt_pool_filling(true);
	int rc = rung_acquire(r, &key, &s, &sb, NULL, err);
	rt_pool_filling(false);
	if (rc < 0)
		return rc;
	char p[4096], rel[128];
	/* The file its claim writes the key's metadata to (rt_store_meta_exchange), made now. */
	rt_store_path(&r->store, rung_sandbox_id(sb), RT_META_ASIDE, p, sizeof(p));
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0)
		close(fd);
	snprintf(rel, sizeof(rel), "ready/%s", rung_sandbox_id(sb));
	rt_pool_path(r, c->name, rel, p, sizeof(p));
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = rung_err_sys(err, errno, "create %s", p);
		rung_dispose(r, rung_sandbox_id(sb), NULL, NULL);
	} else {
		close(fd);
	}
	rung_sandbox_close(sb);
	return rc;
}

int rung_pool_fill(struct rung_router *r, const char *name, size_t *created, size_t *shrunk,
		   struct rung_err *err)
{
	size_t made = 0, dropped = 0;
	int rc = name_check(name, err);
	if (rc < 0)
		return rc;
	cleanup_close int lock = pool_lock(r, name, false, err);
	if (lock < 0)
		return lock;
	struct pool_cfg c;
	if ((rc = cfg_load(r, name, &c, err)) < 0)
		return rc;
	struct rung_spec spec;
	enum rung_isolation iso;
	if ((rc = cfg_spec(&c, &spec, err)) < 0) {
		cfg_release(&c);
		return rung_err_wrap(err, "pool '%s' spec", name);
	}
	if ((rc = rung_router_pick(r, &spec, &iso, err)) == 0) {
		size_t n = 0;
		cleanup_strv char **ids = ready_ids(r, name, "ready", &n);
		/* Under pressure: give the memory back, newest listing order first. */
		while (n > 0 && meminfo_kb("MemAvailable:") * 1024 < c.mem_reserve)
			if (drop_ready(r, name, ids[--n]) == 0)
				dropped++;
		/* Past the size (it was lowered): drop the excess. */
		while (n > c.size)
			if (drop_ready(r, name, ids[--n]) == 0)
				dropped++;
		const char *why = NULL;
		while (n + made < c.size && host_has_room(r, &c, &spec, iso, &why)) {
			if ((rc = create_ready(r, &c, &spec, err)) < 0)
				break;
			made++;
		}
		if (rc == 0 && why && n + made < c.size)
			LOG_INFO("pool %s: %zu of %u ready: host short of %s", name, n + made,
				 c.size, why);
	}
	rung_spec_release(&spec);
	cfg_release(&c);
	if (created)
		*created = made;
	if (shrunk)
		*shrunk = dropped;
	return rc < 0 ? rung_err_wrap(err, "fill pool '%s'", name) : 0;
}

int rung_pool_keep(struct rung_router *r, const char *name, const volatile bool *stop,
		   struct rung_err *err)
{
	char ready[4096], dir[4096];
	int rc = name_check(name, err);
	if (rc < 0)
		return rc;
	rt_pool_path(r, name, "ready", ready, sizeof(ready));
	rt_pool_path(r, name, NULL, dir, sizeof(dir));
	cleanup_close int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (in < 0 || inotify_add_watch(in, ready, IN_MOVED_FROM | IN_DELETE) < 0 ||
	    inotify_add_watch(in, dir, IN_MOVED_TO | IN_DELETE_SELF) < 0)
		return rung_err_sys(err, errno, "watch pool '%s'", name);
	while (!stop || !*stop) {
		struct rung_err e = {0};
		if ((rc = rung_pool_fill(r, name, NULL, NULL, &e)) == -ENOENT ||
		    access(dir, F_OK) < 0)
			return 0; /* removed */
		if (rc < 0)
			LOG_WARN("pool %s: %s", name, e.msg);
		struct pollfd p = {.fd = in, .events = POLLIN};
		if (poll(&p, 1, 1000) > 0) {
			char buf[4096];
			while (read(in, buf, sizeof(buf)) > 0)
				;
		}
	}
	return 0;
}

static bool owner_alive(const struct pool_cfg *c)
{
	return c->owner > 0 && rung_proc_starttime(c->owner) == c->owner_start;
}

void rung_pool_info_free(struct rung_pool_info *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].spec_json);
	free(v);
}

int rung_pool_list(struct rung_router *r, struct rung_pool_info **out, size_t *n_out,
		   struct rung_err *err)
{
	char p[4096];
	rt_pool_path(r, NULL, NULL, p, sizeof(p));
	*out = NULL;
	*n_out = 0;
	cleanup_dir DIR *d = opendir(p);
	if (!d && errno != ENOENT)
		return rung_err_sys(err, errno, "open %s", p);
	struct rung_pool_info *v = calloc(1, sizeof(*v));
	size_t n = 0;
	struct dirent *de;
	while (v && d && (de = readdir(d))) {
		struct pool_cfg c;
		if (de->d_name[0] == '.' || name_check(de->d_name, NULL) < 0 ||
		    cfg_load(r, de->d_name, &c, NULL) < 0)
			continue;
		struct rung_pool_info *nv = realloc(v, (n + 1) * sizeof(*v));
		if (!nv) {
			cfg_release(&c);
			break;
		}
		v = nv;
		struct rung_pool_info *x = &v[n++];
		memset(x, 0, sizeof(*x));
		snprintf(x->name, sizeof(x->name), "%s", c.name);
		x->size = c.size;
		x->mem_reserve = c.mem_reserve;
		x->owner = c.owner;
		x->owner_alive = owner_alive(&c);
		x->spec_json = json_dumps(c.spec, JSON_SORT_KEYS | JSON_COMPACT);
		size_t ready = 0;
		cleanup_strv char **ids = ready_ids(r, c.name, "ready", &ready);
		x->ready = (uint32_t)ready;
		cleanup_free char *m = NULL;
		rt_pool_path(r, c.name, "match", p, sizeof(p));
		if (rung_file_load(AT_FDCWD, p, 128, &m, NULL, NULL) == 0)
			snprintf(x->match, sizeof(x->match), "%s", m);
		cfg_release(&c);
	}
	if (!v)
		return rung_err_set(err, ENOMEM, "out of memory");
	*out = v;
	*n_out = n;
	return 0;
}

int rung_pool_remove(struct rung_router *r, const char *name, size_t *disposed,
		     struct rung_err *err)
{
	char dir[4096];
	int rc = name_check(name, err);
	if (rc < 0)
		return rc;
	cleanup_close int lock = pool_lock(r, name, false, err);
	if (lock < 0)
		return lock;
	/* The match first: no claim starts on this pool after it. */
	char p[4096];
	rt_pool_path(r, name, "match", p, sizeof(p));
	unlink(p);
	size_t n = drop_all_ready(r, name);
	if (disposed)
		*disposed = n;
	rt_pool_path(r, name, NULL, dir, sizeof(dir));
	return rung_rm_rf(dir, err);
}

/* A claim older than 30 s whose sandbox still has the pool's labels never bound. */
static void gc_stale_claims(struct rung_router *r, const char *name)
{
	size_t n = 0;
	cleanup_strv char **ids = ready_ids(r, name, "claimed", &n);
	char p[4096], rel[128];
	struct stat st;
	for (size_t i = 0; ids && i < n; i++) {
		snprintf(rel, sizeof(rel), "claimed/%s", ids[i]);
		rt_pool_path(r, name, rel, p, sizeof(p));
		if (stat(p, &st) < 0 || time(NULL) < st.st_mtime + 30)
			continue;
		struct rt_meta m;
		if (rt_store_meta_read(&r->store, ids[i], &m, NULL) == 0) {
			if (rt_pool_unclaimed(&m))
				rung_dispose(r, ids[i], NULL, NULL);
			rt_meta_release(&m);
		}
		unlink(p);
	}
}

/* Ready sandboxes in no pool's ready or claimed dir, older than 60 s: a filler crashed. */
static void gc_orphans(struct rung_router *r)
{
	cleanup_strv char **ids = NULL;
	int n = rt_store_ids(&r->store, &ids, NULL);
	uint64_t now = rung_wall_ms();
	for (int i = 0; i < n; i++) {
		struct rt_meta m;
		if (rt_store_meta_read(&r->store, ids[i], &m, NULL) < 0)
			continue;
		bool orphan = rt_pool_unclaimed(&m) && now > m.created_ms + 60000;
		char name[RUNG_POOL_NAME_MAX + 1] = "", p[4096], rel[128];
		if (orphan && !strncmp(m.spec.kind, "pool.", 5))
			snprintf(name, sizeof(name), "%s", m.spec.kind + 5);
		rt_meta_release(&m);
		if (!orphan)
			continue;
		const char *subs[] = {"ready", "claimed"};
		for (size_t k = 0; k < 2 && orphan && name[0]; k++) {
			snprintf(rel, sizeof(rel), "%s/%s", subs[k], ids[i]);
			rt_pool_path(r, name, rel, p, sizeof(p));
			orphan = access(p, F_OK) < 0;
		}
		if (orphan)
			rung_dispose(r, ids[i], NULL, NULL);
	}
}

int rt_pool_gc(struct rung_router *r, size_t *removed, struct rung_err *err)
{
	struct rung_pool_info *v = NULL;
	size_t n = 0;
	*removed = 0;
	int rc = rung_pool_list(r, &v, &n, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if (v[i].owner && !v[i].owner_alive) {
			struct rung_err e = {0};
			if (rung_pool_remove(r, v[i].name, NULL, &e) == 0)
				++*removed;
			else
				LOG_WARN("gc: pool %s: %s", v[i].name, e.msg);
			continue;
		}
		gc_stale_claims(r, v[i].name);
	}
	rung_pool_info_free(v, n);
	gc_orphans(r);
	return 0;
}
