/* runtime/lifecycle.c: dispose, dispose_scope (purge by label), list, inspect and gc. */
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dl.h"
#include "runtime/diskimg.h"
#include "runtime/rt-internal.h"
#include "runtime/sandbox-cgroup.h"

/*
 * An owned dispose's directory leaves the store by a rename into <store>/trash/<id>, which
 * the CLI's hand-off child removes after `rung run` returned (owned_release); what a crash
 * leaves there, `rung gc` removes (trash_sweep). trash gets that path, or "" when the rename
 * failed and the directory must be removed here.
 */
static int trash_move(struct rung_router *r, const char *dir, const char *id, char trash[4096])
{
	snprintf(trash, 4096, "%s/trash", r->store.root);
	if (mkdir(trash, 0700) < 0 && errno != EEXIST)
		return trash[0] = '\0', -errno;
	snprintf(trash + strlen(trash), 4096 - strlen(trash), "/%s", id);
	if (rename(dir, trash) < 0)
		return trash[0] = '\0', -errno;
	return 0;
}

/* With the sandbox lock held: stop everything and remove the directory (with trash: move it
 * there for the caller to remove, trash_move; with cg_later: leave the cgroup's removal to the
 * caller too, rt_sandbox_cgroup_destroy). */
static int dispose_locked(struct rung_router *r, struct rt_meta *m, bool have_meta,
			  const char *id, char *trash, struct rt_cg_later *cg_later,
			  struct rung_err *err)
{
	char dir[4096];
	rt_store_path(&r->store, id, NULL, dir, sizeof(dir));
	rung_trace("dispose: locked");
	rt_keep_drop(&r->store, id); /* our parked connection to it, if any */
	/* The disk image's name goes first, while its loop device still holds the file open:
	 * its blocks are then freed when the device lets go of it (the sandbox's mount namespace
	 * dying, which the stop below hands to a child of the supervisor), not by the removal
	 * under the store's global lock (2-3 ms, tens under I/O load, on ext4 with discard;
	 * bench/README.md, "spine"). From here on the directory goes whatever happens. */
	char img[4200];
	snprintf(img, sizeof(img), "%s/disk.img", dir);
	unlink(img);
	if (have_meta) {
		rt_supervisor_stop_disposing(m, 3000);
		const struct rt_backend_ops *ops = rt_backend_get(m->iso);
		if (ops) {
			struct rt_sandbox sb = {.router = r, .meta = *m, .cg_later = cg_later};
			memcpy(sb.dir, dir, sizeof(sb.dir));
			ops->cleanup(&sb);
		}
	}
	rung_trace("dispose: stopped");
	rt_pool_unalias(r, id, have_meta ? m : NULL); /* a claimed pool sandbox's key dir */
	int g = rt_store_lock_global(&r->store, err);
	if (g < 0)
		return g;
	int rc = trash && trash_move(r, dir, id, trash) == 0 ? 0 : rung_rm_rf(dir, err);
	close(g);
	rung_trace("dispose: removed");
	if (rc < 0)
		return rung_err_wrap(err, "dispose %s", id);
	/* Only now: the uid range still owns files until they are gone (the registry also
	 * keeps a slot whose sandbox directory exists). */
	if (have_meta)
		rt_store_release_uid(&r->store, id, m->uid_base);
	return 0;
}

int rung_dispose(struct rung_router *r, const char *id, const char *scope, struct rung_err *err)
{
	if (!rt_id_valid(id))
		return rung_err_set(err, ENOENT, "no sandbox '%.80s'", id ? id : "");
	cleanup_close int lock = rt_store_lock_sandbox(&r->store, id, false, false, err);
	if (lock < 0)
		return lock;
	struct rt_meta m;
	struct rung_err e2 = {0};
	bool have = rt_store_meta_read(&r->store, id, &m, &e2) == 0;
	if (scope) {
		char label[65];
		rt_label_of(scope, label);
		if (!have || strcmp(label, m.labels.scope)) {
			if (have)
				rt_meta_release(&m);
			return rung_err_set(err, ENOENT, "no sandbox %s", id);
		}
	}
	/* Its network's teardown needs libnftables: refused before anything is stopped where it
	 * cannot be loaded (a rung linked against musl: common/dl.h), for the caller to dispose
	 * from a program that can (`rung dispose` runs rung-dyn). */
	if (have && rt_net_wanted(&m.spec) && !rung_dl_libc_check()) {
		rt_meta_release(&m);
		return rung_err_set(err, ENOTSUP,
				    "sandbox %s has an egress allowlist, whose "
				    "teardown needs libnftables, which this program cannot load "
				    "(rung-dyn can)",
				    id);
	}
	int rc = dispose_locked(r, &m, have, id, NULL, NULL, err);
	if (have)
		rt_meta_release(&m);
	return rc;
}

/* The owner's lock on its sandbox: never a blocking wait, since the holder may be a disposer
 * waiting for the owner (the supervisor) to exit. Busy: stop pid 1 (an exec in flight ends),
 * then retry for a while. A negative errno when still busy. */
static int owned_lock(struct rung_router *r, const struct rt_meta *m, struct rung_err *err)
{
	int lock = rt_store_lock_sandbox(&r->store, m->id, false, true, err);
	for (int i = 0; lock == -EWOULDBLOCK && i < 50; i++) {
		rt_supervisor_stop(m, 0);
		usleep(10000);
		lock = rt_store_lock_sandbox(&r->store, m->id, false, true, err);
	}
	return lock;
}

/*
 * An owned sandbox's mount namespace, held across its stop (-1 if not needed or not open):
 * pid 1 then dies without unmounting the disk (the ext4 umount, the loop device's release and
 * the image's blocks freed: most of a stop), which owned_release leaves to a child of ours.
 * Held since pid 1's start (sandbox-ns.c), since pid 1 may have exited by itself; else opened
 * now, while pid 1 is our unreaped child, so the pid is still its. A tmpfs disk's is held
 * only for a releaser (then the removals go to it too, ~1.5 ms off the dispose); without one
 * its teardown and the removals here cost less than the fork that would take them.
 */
static int owned_hold_mnt(struct rt_sandbox *sb)
{
	int held = sb->mntns;
	sb->mntns = -1;
	bool cheap = rt_sandbox_disk_is_tmpfs(sb) && sb->release_gate < 0;
	if (cheap || (held < 0 && sb->meta.init_pid <= 0)) {
		if (held >= 0)
			close(held);
		return -1;
	}
	if (held >= 0)
		return held;
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)sb->meta.init_pid);
	return open(p, O_RDONLY | O_CLOEXEC);
}

/*
 * The last reference to a stopped sandbox's mount namespace, the removal of its moved
 * directory (trash, "" if none) and of its cgroup (cg, named by the dispose) go to a child
 * that does nothing else (no other fd: a caller's pipe must not wait for it) and then exits;
 * the kernel tears the namespace down there, whatever becomes of that child, and `rung gc`
 * removes a trash or a group it left (the group's sandbox is gone from the store by then).
 * The group holds no process: pid 1 was reaped, and its namespace's processes went before it.
 * The child closes the namespace only once we closed our copy (EOF on the gate pipe): the last
 * close is the one that pays for the teardown, and it must never be ours. Last, with an ext4
 * disk, it makes the spare images of that size (rt_sandbox_disk_spares_fill) the next start
 * takes. Without a child (no fork), the group is removed here. That child is a releaser
 * (release.c) where one could be started: an exec of `rung __release` from a child that shares
 * our memory until then, not a fork of ours, so the caller has no page to copy on write
 * after, and does not wait for that exec; it is told to go with the trash's path, and names
 * and removes the group itself. Where the caller exits right after (release_at_exit, `rung
 * run`), that child is the heir instead: it execs nothing and works in our memory once we
 * have exited.
 */
static void owned_release(int mntns, const char *trash, struct rt_cg_later *cg,
			  struct rt_sandbox *sb)
{
	if (mntns < 0 && !trash[0]) {
		rt_cg_later_run(sb->router, cg);
		return;
	}
	if (sb->release_gate >= 0) { /* its releaser, spawned by this dispose (release.c) */
		if (mntns >= 0)
			close(mntns); /* first: the releaser's must be the last reference */
		if (rt_release_go(sb, trash)) {
			rt_cgroup_free(cg->cg); /* the releaser names and removes it */
			cg->cg = NULL;
			rung_trace("dispose: handed to the releaser");
			return;
		}
		mntns = -1; /* not told: what it would have done, here and by the fork below */
		if (cg->elsewhere) { /* named now, for the fork's child */
			struct rt_sandbox named = {.router = sb->router, .meta = sb->meta,
						   .cg_later = cg};
			cg->elsewhere = false;
			rt_sandbox_cgroup_destroy(&named);
		}
	}
	int gate[2] = {-1, -1};
	if (mntns >= 0 && pipe2(gate, O_CLOEXEC) < 0)
		gate[0] = gate[1] = -1;
	pid_t pid = fork(); /* from a threaded caller: glibc's fork leaves malloc usable */
	if (pid == 0) {
		rung_close_from_except(0, mntns, gate[0]);
		rt_cg_later_run(sb->router, cg);
		char c;
		while (gate[0] >= 0 && read(gate[0], &c, 1) < 0 && errno == EINTR)
			;
		if (mntns >= 0)
			close(mntns);
		struct rung_err e = {0};
		if (trash[0])
			rung_rm_rf(trash, &e);
		rt_sandbox_disk_spares_fill(sb);
		_exit(0);
	}
	if (pid < 0) { /* no child: removed here */
		rt_cg_later_run(sb->router, cg);
	} else { /* the child's copy removes it: ours is only freed */
		rt_cgroup_free(cg->cg);
		cg->cg = NULL;
	}
	rung_trace("dispose: namespace handed off");
	if (mntns >= 0)
		close(mntns);
	if (gate[0] >= 0) {
		close(gate[1]);
		close(gate[0]);
	}
}

/*
 * A claimed pool sandbox's dispose where the caller exits right after (`rung run` served by a
 * pool; not the vm rung): its supervisor stops it as any dispose's (letting its own copy of
 * pid 1's mount namespace go to a child, supervisor.c), and the rest goes as an owned
 * dispose's does: pid 1's mount namespace, held here too, and the directory, moved to the
 * trash, to the heir (~1.3 ms of the run: the removal). -1 when it is not such a dispose (the
 * store's lock not taken yet), else the lock.
 */
static int claimed_lock(struct rt_sandbox *sb, struct rung_err *err)
{
	if (!sb->router->release_at_exit || sb->meta.iso == RUNG_ISO_VM)
		return -1;
	return rt_store_lock_sandbox(&sb->router->store, sb->meta.id, false, false, err);
}

int rung_sandbox_dispose(struct rung_sandbox *s, struct rung_err *err)
{
	struct rt_sandbox *sb = rt_sandbox_inner(s);
	struct rung_router *r = sb->router;
	cleanup_close int lock = -1;
	if (!sb->owned) {
		struct rung_err e = {0};
		if ((lock = claimed_lock(sb, &e)) < 0)
			return rung_dispose(r, sb->meta.id, NULL, err);
	} else {
		rung_trace("dispose: owned");
		lock = owned_lock(r, &sb->meta, err);
	}
	if (lock == -EWOULDBLOCK) {
		/* Someone else holds it (a dispose waiting for us to exit): ours is stopped;
		 * they, or `rung gc` once we are gone, remove the rest. */
		LOG_INFO("sandbox %s: stopped; its lock holder removes it", sb->meta.id);
		rt_supervisor_stop(&sb->meta, 0);
		return 0;
	}
	if (lock < 0) { /* gone (someone removed it) or unlockable: ours stops all the same */
		rt_supervisor_stop(&sb->meta, 0);
		return lock == -ENOENT ? 0 : lock;
	}
	struct rt_meta m;
	struct rung_err e2 = {0};
	bool have = rt_store_meta_read(&r->store, sb->meta.id, &m, &e2) == 0;
	/* Removed meanwhile: stop what is ours, then the directory goes. */
	if (!have && sb->owned) {
		rt_supervisor_stop(&sb->meta, 0);
		const struct rt_backend_ops *ops = rt_backend_get(sb->meta.iso);
		if (ops)
			ops->cleanup(sb);
	}
	if (have && !sb->owned) {
		sb->mntns = rt_supervisor_init_mntns(&m);
		rung_trace("dispose: claimed, pid 1's namespace held");
	}
	rt_release_start(sb); /* (it takes a copy of the namespace owned_hold_mnt takes) */
	int mntns = sb->owned ? owned_hold_mnt(sb) : sb->mntns;
	sb->mntns = -1;
	char trash[4096] = "";
	/* With a releaser, the group is its to name and remove: not even named here. */
	struct rt_cg_later cg = {.elsewhere = sb->release_gate >= 0 && mntns >= 0};
	/* Only where a hand-off child is made anyway (a fork costs what the removals save). */
	int rc = dispose_locked(r, &m, have, sb->meta.id, mntns >= 0 ? trash : NULL,
				mntns >= 0 ? &cg : NULL, err);
	/* Freed before the hand-off's fork: after it, every page we write is copied first (a
	 * page fault each, 20-40 us on a paravirtualised host). */
	if (have)
		rt_meta_release(&m);
	owned_release(mntns, trash, &cg, sb);
	return rc;
}

static bool labels_match(const struct rt_meta *m, const char *scope_l, const char *thread_l)
{
	return (!scope_l || !strcmp(m->labels.scope, scope_l)) &&
	       (!thread_l || !strcmp(m->labels.thread, thread_l));
}

int rung_dispose_scope(struct rung_router *r, const char *scope, const char *thread,
		       size_t *n_disposed, struct rung_err *err)
{
	if (!scope || !*scope)
		return rung_err_set(err, EINVAL, "scope: required");
	/* The same label match as rung_list; rung_dispose re-checks the scope under the lock. */
	struct rung_sandbox_info *v = NULL;
	size_t n = 0, done = 0;
	int rc = rung_list(r, scope, thread, &v, &n, err);
	if (rc < 0)
		return rc;
	int first_err = 0;
	for (size_t i = 0; i < n; i++) {
		struct rung_err e2 = {0};
		rc = rung_dispose(r, v[i].id, scope, &e2);
		if (rc == 0)
			done++;
		else if (rc != -ENOENT && !first_err) {
			first_err = rc;
			*err = e2;
		}
	}
	free(v);
	if (n_disposed)
		*n_disposed = done;
	return first_err;
}

int rung_list(struct rung_router *r, const char *scope, const char *thread,
	      struct rung_sandbox_info **out, size_t *n_out, struct rung_err *err)
{
	char sl[65], tl[65];
	if (scope)
		rt_label_of(scope, sl);
	if (thread)
		rt_label_of(thread, tl);
	cleanup_strv char **ids = NULL;
	int n = rt_store_ids(&r->store, &ids, err);
	if (n < 0)
		return n;
	struct rung_sandbox_info *v = calloc((size_t)n + 1, sizeof(*v));
	if (!v)
		return rung_err_set(err, ENOMEM, "out of memory");
	size_t k = 0;
	for (int i = 0; i < n; i++) {
		struct rt_meta m;
		struct rung_err e2 = {0};
		if (rt_store_meta_read(&r->store, ids[i], &m, &e2) < 0)
			continue;
		if (labels_match(&m, scope ? sl : NULL, thread ? tl : NULL)) {
			struct rung_sandbox_info *x = &v[k++];
			strcpy(x->id, m.id);
			snprintf(x->kind, sizeof(x->kind), "%s", m.spec.kind);
			x->isolation = m.iso;
			x->state = rt_sandbox_live(&m) ? m.state : RUNG_STATE_DEAD;
			strcpy(x->scope_label, m.labels.scope);
			strcpy(x->thread_label, m.labels.thread);
			strcpy(x->agent_label, m.labels.agent);
			x->created_ms = m.created_ms;
			x->last_used_ms = rt_store_used_ms(&r->store, &m);
			x->supervisor = m.sup_pid;
		}
		rt_meta_release(&m);
	}
	*out = v;
	*n_out = k;
	return 0;
}

int rung_inspect(struct rung_router *r, const char *id, const char *scope, char **json,
		 struct rung_err *err)
{
	struct rung_sandbox *s;
	int rc = rung_sandbox_open(r, id, scope, &s, err);
	if (rc < 0)
		return rc;
	struct rt_meta m;
	if ((rc = rt_store_meta_read(&r->store, id, &m, err)) < 0) {
		rung_sandbox_close(s);
		return rc;
	}
	json_t *ports = rt_ports_describe(s); /* detached forwards, their host addresses */
	rung_sandbox_close(s);
	bool alive = rt_sandbox_live(&m);
	bool net = m.spec.egress_allow && m.spec.egress_allow[0];
	json_t *egress = rt_net_describe(&m.spec);
	json_t *o = json_pack(
		"{s:s, s:s, s:s, s:{s:s, s:s, s:s}, s:I, s:I, s:i, s:o, "
		"s:{s:s, s:o, s:s}, "
		"s:{s:s, s:s, s:b, s:b, s:b, s:s}}",
		"id", m.id, "isolation", rung_isolation_name(m.iso), "state",
		rung_state_name(alive ? m.state : RUNG_STATE_DEAD), "labels", "scope",
		m.labels.scope, "thread", m.labels.thread, "agent", m.labels.agent, "created_ms",
		(json_int_t)m.created_ms, "last_used_ms",
		(json_int_t)rt_store_used_ms(&r->store, &m), "supervisor_pid", (int)m.sup_pid,
		"spec", rt_spec_to_jsonv(&m.spec), "egress", "policy",
		net ? "allowlist, default deny" : "none (loopback only)", "effective", egress,
		"dns", net ? "allowlisted names only, via rung's proxy" : "none",
		"security", "boundary",
		m.iso == RUNG_ISO_VM ? "hypervisor (own guest kernel)" : "shared host kernel",
		"isolation", rung_isolation_name(m.iso), "exec_is_sink_under_untrusted_taint",
		rt_op_allowed(m.granted, RT_OP_EXEC), "can_exfiltrate",
		net || (m.granted & RUNG_CAP_HOST_CALLBACKS),
		"files_persist_until_dispose", true,
		"note",
		net ? "egress is limited to the allowlist"
		    : (m.granted & RUNG_CAP_HOST_CALLBACKS)
			  ? "empty allowlist, but the host functions its execs are given reach the host"
			  : "empty allowlist: it cannot exfiltrate");
	/* the effective limits, each of them enforced (see rt_limits_describe) */
	if (o && json_object_set_new(o, "ports", ports ? ports : json_array()) < 0) {
		json_decref(o);
		o = NULL;
	}
	if (o && json_object_set_new(o, "limits", rt_limits_describe(&m.spec.limits, m.iso)) < 0) {
		json_decref(o);
		o = NULL;
	}
	/* the vm rung's suspend to disk (vm-snap.c): the file and its size, or why it failed */
	json_t *snap = m.backend ? json_object_get(m.backend, "snapshot") : NULL;
	json_t *broken = m.backend ? json_object_get(m.backend, "snapshot_broken") : NULL;
	if (o && snap && json_object_set(o, broken ? "snapshot_broken" : "suspended_to_disk",
					 broken ? broken : snap) < 0) {
		json_decref(o);
		o = NULL;
	}
	json_t *sec = o ? json_object_get(o, "security") : NULL;
	if (sec) {
		/* What the sandbox was granted, and so what can actually run in it. */
		json_t *g = json_array();
		for (unsigned b = 1; b <= RUNG_CAP__ALL; b <<= 1)
			if (m.granted & b)
				json_array_append_new(g, json_string(rung_cap_name(b)));
		json_t *langs = json_array();
		if (rt_op_allowed(m.granted, RT_OP_RUN_CODE))
			json_array_append_new(langs, json_string("python"));
		if (rt_op_allowed(m.granted, RT_OP_RUN_SHELL))
			json_array_append_new(langs, json_string("sh"));
		json_object_set_new(sec, "granted", g);
		json_object_set_new(sec, "ladder", rt_ladder_describe(r, m.iso));
		/* Host functions are registered per exec (docs/callbacks.md): none live here. */
		json_object_set_new(sec, "host_callbacks",
				    json_pack("{s:b, s:s}", "granted",
					      (m.granted & RUNG_CAP_HOST_CALLBACKS) != 0,
					      "registered", "per exec, by its caller"));
		json_object_set_new(
		    sec, "operations",
		    json_pack("{s:b, s:o, s:b, s:b}", "exec", rt_op_allowed(m.granted, RT_OP_EXEC),
			      "run_code", langs, "write_file",
			      rt_op_allowed(m.granted, RT_OP_WRITE_FILE), "read_file", 1));
	}
	rt_meta_release(&m);
	if (!o)
		return rung_err_set(err, ENOMEM, "inspect: cannot build JSON");
	*json = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(o);
	return *json ? 0 : rung_err_set(err, ENOMEM, "out of memory");
}

/* What an owned dispose moved to <store>/trash and its hand-off child did not remove (killed
 * first, or the host went down): removed now, as debris. */
static void trash_sweep(struct rung_router *r, struct rung_gc_report *rep)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/trash", r->store.root);
	cleanup_dir DIR *d = opendir(p);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		struct rung_err e = {0};
		if (!rt_id_valid(de->d_name))
			continue;
		if (rung_rm_rf_at(dirfd(d), de->d_name, &e) == 0)
			rep->debris++;
		else
			LOG_INFO("gc: trash %s: %s", de->d_name, e.msg);
	}
}

int rung_gc(struct rung_router *r, struct rung_gc_report *rep, struct rung_err *err)
{
	memset(rep, 0, sizeof(*rep));
	trash_sweep(r, rep);
	struct rung_err ep = {0};
	if (rt_pool_gc(r, &rep->pools_removed, &ep) < 0)
		LOG_WARN("pool gc: %s", ep.msg);
	cleanup_strv char **ids = NULL;
	int n = rt_store_ids(&r->store, &ids, err);
	if (n < 0)
		return n;
	uint64_t now = rung_wall_ms();
	for (int i = 0; i < n; i++) {
		struct rung_err e2 = {0};
		/* Skip sandboxes someone is working on right now. */
		int lock = rt_store_lock_sandbox(&r->store, ids[i], false, true, &e2);
		if (lock < 0)
			continue;
		struct rt_meta m;
		bool have = rt_store_meta_read(&r->store, ids[i], &m, &e2) == 0;
		if (!have && rt_pool_alias_live(r, ids[i])) { /* a key's alias: kept */
			close(lock);
			continue;
		}
		if (!have) {
			char dir[4096];
			struct stat st;
			rt_store_path(&r->store, ids[i], NULL, dir, sizeof(dir));
			/* debris: no metadata (a crash mid-create); give a fresh create 60 s */
			if (stat(dir, &st) == 0 && now / 1000 > (uint64_t)st.st_mtime + 60 &&
			    dispose_locked(r, NULL, false, ids[i], NULL, NULL, &e2) == 0)
				rep->debris++;
			close(lock);
			continue;
		}
		bool alive = rt_sandbox_live(&m);
		uint64_t act = rt_store_used_ms(&r->store, &m);
		if (!alive) {
			if (dispose_locked(r, &m, true, ids[i], NULL, NULL, &e2) == 0)
				rep->disposed_dead++;
		} else if (m.spec.ttl_s && now >= m.created_ms + (uint64_t)m.spec.ttl_s * 1000) {
			if (dispose_locked(r, &m, true, ids[i], NULL, NULL, &e2) == 0)
				rep->disposed_ttl++;
		} else if (m.spec.idle_suspend_s && m.state == RUNG_STATE_RUNNING &&
			   now >= act + (uint64_t)m.spec.idle_suspend_s * 1000) {
			const struct rt_backend_ops *ops = rt_backend_get(m.iso);
			struct rt_sandbox sb = {.router = r, .meta = m};
			int busy = rt_store_busy(&r->store, m.id, true); /* <0: in flight */
			/* a live background process: not idle (docs/procs.md) */
			if (busy >= 0 && rt_procs_live(&r->store, m.id) > 0) {
				rt_store_touch_activity(&r->store, m.id, false);
			} else if (busy >= 0 && ops && ops->suspend(&sb, &e2) == 0) {
				m.state = RUNG_STATE_SUSPENDED;
				if (rt_store_meta_write(&r->store, &m, &e2) == 0)
					rep->suspended_idle++;
			}
			if (busy >= 0)
				close(busy);
		}
		rt_meta_release(&m);
		close(lock);
	}
	/* Kernel objects whose sandbox is gone: cgroups, veths, nft tables, leases. */
	cleanup_strv char **live = NULL;
	int nl = rt_store_ids(&r->store, &live, err);
	if (nl < 0)
		return nl;
	int g = rt_container_gc(r, nl == 0, err);
	if (g > 0)
		rep->debris += (size_t)g;
	struct rung_err e3 = {0};
	if (rt_net_gc(r, (const char *const *)live, (size_t)nl, &e3) < 0)
		LOG_WARN("network gc: %s", e3.msg);
	return g < 0 ? g : 0;
}
