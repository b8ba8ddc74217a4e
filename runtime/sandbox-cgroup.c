/*
 * runtime/sandbox-cgroup.c: the cgroup of a process or container sandbox (see
 * sandbox-cgroup.h), and the sweep of groups whose sandbox is gone.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/sandbox-cgroup.h"

const char *rt_cgroup_root(const struct rung_router *r)
{
	return r->cgroup_root;
}

void rt_sandbox_cgroup_limits(const struct rung_limits *l, struct rt_cgroup_limits *out)
{
	*out = (struct rt_cgroup_limits){.memory_bytes = l->memory_bytes,
					 .cpu_millis = l->cpus_milli,
					 .pids_max = l->pids};
}

/*
 * Sandbox cgroups are "rung-<store>/<id>": <store> names the state dir by its inode (so any
 * path to it gives the same name). Two stores on one host then never share a cgroup (the
 * same key and kind give the same id in both), and one store's gc never takes another
 * store's live sandboxes for orphans and kills them. (Not below "rung/": older rung
 * sweepers destroy every group there that their own store does not know.)
 */
static int store_tag(const struct rung_router *r, char tag[17], struct rung_err *err)
{
	struct stat st;
	if (stat(r->store.root, &st) < 0)
		return rung_err_sys(err, errno, "stat state dir %s", r->store.root);
	char key[64], hex[65];
	snprintf(key, sizeof(key), "%lx:%lx", (unsigned long)st.st_dev, (unsigned long)st.st_ino);
	rt_label_of(key, hex);
	memcpy(tag, hex, 16);
	tag[16] = '\0';
	return 0;
}

/* The sandbox's group in the store's (tag: store_tag's). */
static int open_tagged(const struct rt_sandbox *sb, const char *tag, struct rt_cgroup **out,
		       struct rung_err *err)
{
	char name[96];
	snprintf(name, sizeof(name), "rung-%s/%s", tag, sb->meta.id);
	return rt_cgroup_open(rt_cgroup_root(sb->router), name, out, err);
}

int rt_sandbox_cgroup_open(const struct rt_sandbox *sb, struct rt_cgroup **out,
			   struct rung_err *err)
{
	char tag[17];
	int r = store_tag(sb->router, tag, err);
	return r < 0 ? r : open_tagged(sb, tag, out, err);
}

/* Does this /proc/swaps text list a swap area? (a header line, then one line per area) */
static bool swaps_listed(const char *txt)
{
	const char *nl = txt ? strchr(txt, '\n') : NULL;
	return nl && nl[1] != '\0';
}

int rt_sandbox_swap_check(const struct rt_cgroup *cg, const char *swaps, struct rung_err *err)
{
	if (!swaps_listed(swaps))
		return 0;
	bool v2 = rt_cgroup_version(cg) == RT_CGROUP_V2;
	const char *file = v2 ? "memory.swap.max" : "memory.memsw.limit_in_bytes";
	const char *d = rt_cgroup_dir(cg, RT_CGCTL_MEMORY);
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", d ? d : rt_cgroup_name(cg), file);
	if (d && access(p, F_OK) == 0)
		return 0;
	return rung_err_set(err, ENOTSUP,
			    "limits.memory cannot be enforced: the host has swap on but no swap "
			    "accounting (%s missing; boot with swapaccount=1 or turn swap off)",
			    p);
}

/* With swap on, a memory limit holds only if swap is limited too (memsw / swap.max). */
static int swap_check(const struct rt_cgroup *cg, struct rung_err *err)
{
	cleanup_free char *txt = NULL;
	if (rung_file_load(AT_FDCWD, "/proc/swaps", 1 << 16, &txt, NULL, NULL) < 0)
		return 0;
	return rt_sandbox_swap_check(cg, txt, err);
}

/* cgroupfs is world-readable: the store's group ("rung-<tag>") lists its sandboxes' ids
 * unless it is 0711 (traversable, for the tools that know an id; not listable). */
static int cgroup_parent_private(const struct rt_cgroup *cg, struct rung_err *err)
{
	for (int c = 0; c < RT_CGCTL__COUNT; c++) {
		const char *d = rt_cgroup_dir(cg, (enum rt_cgroup_ctl)c);
		char p[4096];
		if (!d || (size_t)snprintf(p, sizeof(p), "%s", d) >= sizeof(p))
			continue;
		char *slash = strrchr(p, '/');
		if (!slash)
			continue;
		*slash = '\0';
		struct stat st;
		if (stat(p, &st) == 0 && (st.st_mode & 0777) != 0711 && chmod(p, 0711) < 0)
			return rung_err_sys(err, errno, "chmod %s 0711", p);
	}
	return 0;
}

int rt_sandbox_cgroup_create(const struct rt_sandbox *sb, struct rt_cgroup **out,
			     struct rung_err *err)
{
	struct rt_cgroup *cg = NULL;
	struct rt_cgroup_limits lim;
	rt_sandbox_cgroup_limits(&sb->meta.spec.limits, &lim);
	int r = rt_sandbox_cgroup_open(sb, &cg, err);
	/* -ENOENT: the store's group went between its mkdir and ours (the last sandbox of the
	 * store disposed at that moment drops it): make both again */
	for (int i = 0; i < 4; i++) {
		if (r == 0 && (r = rt_cgroup_create(cg, &lim, err)) == 0)
			r = cgroup_parent_private(cg, err);
		if (r != -ENOENT || i == 3)
			break;
		*err = (struct rung_err){0};
		r = 0;
	}
	if (r == 0)
		r = swap_check(cg, err);
	if (r < 0) {
		struct rung_err e2 = {0};
		if (cg)
			rt_cgroup_destroy(cg, &e2);
		rt_cgroup_free(cg);
		return rung_err_wrap(err, "cgroup");
	}
	*out = cg;
	return 0;
}

int rt_sandbox_cgroup_prepare(const struct rt_sandbox *sb, struct rt_cgroup **cg,
			      struct rt_cgroup_birth *b, struct rung_err *err)
{
	*cg = NULL;
	*b = RT_CGROUP_BIRTH_NONE;
	if (sb->router->no_clone_into_cgroup)
		return 0;
	int r = rt_sandbox_cgroup_create(sb, cg, err);
	if (r < 0)
		return r;
	rung_trace("cgroup: made");
	struct rung_err e = {0};
	if (rt_cgroup_birth_open(*cg, b, &e) < 0)
		LOG_DEBUG("cgroup: %s: pid 1 is moved in instead", e.msg);
	return 0;
}

int rt_sandbox_cgroup_join(const struct rt_sandbox *sb, struct rt_cgroup **cg,
			   const struct rt_cgroup_birth *b, pid_t pid, struct rung_err *err)
{
	if (!*cg) {
		int r = rt_sandbox_cgroup_create(sb, cg, err);
		if (r < 0)
			return r;
		rung_trace("cgroup: made");
	}
	if (rt_cgroup_born(b))
		return 0;
	int r = rt_cgroup_enter(*cg, pid, err);
	return r < 0 ? rung_err_wrap(err, "cgroup") : 0;
}

void rt_cg_later_run(const struct rung_router *r, struct rt_cg_later *l)
{
	struct rung_err err = {0};
	if (l->cg && rt_cgroup_destroy(l->cg, &err) < 0)
		LOG_WARN("sandbox cgroup %s: %s", rt_cgroup_name(l->cg), err.msg);
	rt_cgroup_free(l->cg);
	l->cg = NULL;
	/* the store's last sandbox takes the store's group with it (no gc needed for that) */
	if (l->parent[0])
		rt_cgroup_drop_if_empty(rt_cgroup_root(r), l->parent);
	l->parent[0] = '\0';
}

void rt_sandbox_cgroup_destroy(const struct rt_sandbox *sb)
{
	if (sb->cg_later && sb->cg_later->elsewhere)
		return; /* its releaser's, which names it itself */
	struct rt_cg_later l = {0};
	struct rung_err err = {0};
	char tag[17];
	if (store_tag(sb->router, tag, &err) == 0) {
		if (open_tagged(sb, tag, &l.cg, &err) < 0)
			l.cg = NULL;
		snprintf(l.parent, sizeof(l.parent), "rung-%s", tag);
	}
	if (sb->cg_later)
		*sb->cg_later = l; /* named now, removed by whoever holds it (lifecycle.c) */
	else
		rt_cg_later_run(sb->router, &l);
}

int rt_sandbox_cgroup_freeze(const struct rt_sandbox *sb, bool frozen, struct rung_err *err)
{
	struct rt_cgroup *cg = NULL;
	int r = rt_sandbox_cgroup_open(sb, &cg, err);
	if (r == 0)
		r = rt_cgroup_freeze(cg, frozen, err);
	rt_cgroup_free(cg);
	return r;
}

int rt_sandbox_oom_kills(struct rt_sandbox *sb, struct rt_cgroup **cg, uint64_t *n)
{
	struct rung_err err = {0};
	int r = *cg ? 0 : rt_sandbox_cgroup_open(sb, cg, &err);
	return r < 0 ? r : rt_cgroup_oom_kills(*cg, n, &err);
}

/* A group is live while its sandbox is: being worked on (its lock is held: a create makes
 * the group before it writes any metadata), younger than gc's 60 s grace for a create, or
 * with a live supervisor. */
static bool id_live(const char *id, void *data)
{
	struct rung_router *r = data;
	struct rung_err err = {0};
	cleanup_close int lock = rt_store_lock_sandbox(&r->store, id, false, true, &err);
	if (lock < 0)
		return lock != -ENOENT; /* held by someone (EWOULDBLOCK), or unreadable: keep */
	struct rt_meta m;
	if (rt_store_meta_read(&r->store, id, &m, &err) < 0) {
		char dir[4096];
		struct stat st;
		rt_store_path(&r->store, id, NULL, dir, sizeof(dir));
		return stat(dir, &st) == 0 && rung_wall_ms() / 1000 <= (uint64_t)st.st_mtime + 60;
	}
	bool alive = rt_supervisor_alive(&m);
	rt_meta_release(&m);
	return alive;
}

/* The groups of every cgroup-limited rung (process and container) of this store. */
int rt_container_gc(struct rung_router *r, bool store_empty, struct rung_err *err)
{
	enum rt_cgroup_version v;
	bool hybrid;
	struct rung_err e2 = {0};
	if (rt_cgroup_detect(rt_cgroup_root(r), &v, &hybrid, &e2) < 0)
		return 0; /* no cgroups here: nothing of ours either */
	char parent[32], tag[17];
	int rc = store_tag(r, tag, err);
	if (rc < 0)
		return rc;
	snprintf(parent, sizeof(parent), "rung-%s", tag); /* this store's sandboxes only */
	rc = rt_cgroup_gc(rt_cgroup_root(r), parent, id_live, r, err);
	if (rc >= 0 && store_empty) /* no sandbox left: the store's (now empty) group too */
		rt_cgroup_drop_if_empty(rt_cgroup_root(r), parent);
	return rc;
}

json_t *rt_limits_describe(const struct rung_limits *l, enum rung_isolation iso)
{
	uint64_t tmp = l->disk_bytes < (256ull << 20) ? l->disk_bytes : 256ull << 20;
	const char *by =
	    iso == RUNG_ISO_VM
		? "guest RAM (memory), 1 to 4 vCPUs (cpus rounded up; a fractional cpus is also a "
		  "CFS quota), the guest kernel's own cgroup holding every command (the quota, "
		  "pids.max; the guest's agent is outside it), the size of the sparse ext4 upper "
		  "disk (disk)"
		: "a cgroup (memory with swap off, counting shm, memfd and tmpfs pages; cpus as a "
		  "CFS quota; pids.max) and a sparse ext4 image on a loop device for the writable "
		  "storage (disk: ENOSPC past it); /tmp and /dev/shm are tmpfs of a fixed size, "
		  "charged to the cgroup";
	double cpus = l->cpus_milli / 1000.0;
	json_t *o = json_pack("{s:I, s:f, s:I, s:I, s:s}", "memory", (json_int_t)l->memory_bytes,
			      "cpus", cpus, "pids", (json_int_t)l->pids, "disk",
			      (json_int_t)l->disk_bytes, "enforced_by", by);
	if (o && iso != RUNG_ISO_VM)
		json_object_set_new(o, "tmpfs", json_pack("{s:I, s:I}", "/tmp", (json_int_t)tmp,
							  "/dev/shm", (json_int_t)(64ull << 20)));
	return o ? o : json_null();
}
