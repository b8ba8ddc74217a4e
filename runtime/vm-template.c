/*
 * runtime/vm-template.c: templates (`rung snapshot ID NAME`, docs/snapshots.md). A running vm
 * sandbox is paused, saved by its rung-vmm, its upper disk copied, and continued; the memory
 * file and the disk go into <store>/templates/<name>/ with template.json (the spec it was
 * taken with, its scope's label, the image digest). The directory is built as
 * templates/.tmp-<name>-<pid> and renamed whole: there is never a half template.
 * Clones (spec.from_snapshot) use it through rt_template_clone (vm_prepare).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/diskimg.h"
#include "runtime/rt-internal.h"

#ifndef FICLONE
#define FICLONE _IOW(0x94, 9, int) /* linux/fs.h, which clashes with sys/mount.h */
#endif

#define TPL_JSON "template.json"
#define TPL_MAX_JSON (1 << 20)

int rung_snapshot_name_check(const char *name, struct rung_err *err)
{
	size_t n = name ? strlen(name) : 0;
	bool ok = n >= 1 && n <= 64 && ((name[0] >= 'a' && name[0] <= 'z') ||
					(name[0] >= '0' && name[0] <= '9'));
	for (size_t i = 1; ok && i < n; i++)
		ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
		     strchr("._-", name[i]);
	if (!ok)
		return rung_err_set(err, EINVAL, "snapshot name '%.80s': 1-64 characters of "
				    "[a-z0-9._-], starting with a letter or digit", name ? name : "");
	return 0;
}

/* <root>/templates (made 0700), its fd. */
static int tpl_root(const struct rt_store *st, struct rung_err *err)
{
	if (mkdirat(st->root_fd, "templates", 0700) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s/templates", st->root);
	int fd = openat(st->root_fd, "templates", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? rung_err_sys(err, errno, "open %s/templates", st->root) : fd;
}

/* A template's metadata, checked: the scope's label must be the caller's (else ENOENT). */
static int tpl_read(const struct rt_store *st, const char *name, const char *scope_label,
		    json_t **out, struct rung_err *err)
{
	int r = rung_snapshot_name_check(name, err);
	if (r < 0)
		return r;
	cleanup_close int root = tpl_root(st, err);
	if (root < 0)
		return root;
	char path[128];
	snprintf(path, sizeof(path), "%s/" TPL_JSON, name);
	cleanup_free char *txt = NULL;
	size_t len = 0;
	struct rung_err e2 = {0};
	if (rung_file_load(root, path, TPL_MAX_JSON, &txt, &len, &e2) < 0)
		return rung_err_set(err, ENOENT, "no snapshot '%s'", name);
	json_t *o = json_loadb(txt, len, 0, NULL);
	const char *sc = json_string_value(json_object_get(o, "scope"));
	if (!o || !sc || (scope_label && strcmp(sc, scope_label))) {
		json_decref(o);
		return rung_err_set(err, ENOENT, "no snapshot '%s'", name);
	}
	*out = o;
	return 0;
}

/* Copy the open file in to a new file name in dirfd (mode 0644: see docs/snapshots.md):
 * a reflink where the filesystem shares extents, else copy_file_range. */
static int fd_copy(int in, int dirfd, const char *name, struct rung_err *err)
{
	cleanup_close int out = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
						    O_CLOEXEC, 0644);
	struct stat st;
	if (out < 0 || fstat(in, &st) < 0)
		return rung_err_sys(err, errno, "create %s", name);
	if (ioctl(out, FICLONE, in) < 0) {
		loff_t a = 0, b = 0;
		for (off_t left = st.st_size; left > 0;) {
			ssize_t n = copy_file_range(in, &a, out, &b, (size_t)left, 0);
			if (n <= 0)
				return rung_err_sys(err, n < 0 ? errno : EIO, "copy into %s", name);
			left -= n;
		}
	}
	if (fchmod(out, 0644) < 0 || fsync(out) < 0)
		return rung_err_sys(err, errno, "write %s", name);
	return 0;
}

/* The VMM's save in its jail (a regular file of its uid, one link, never followed), copied
 * into the template directory and removed from the jail. Its size. */
static int take_snap(struct rt_sandbox *sb, int tdir, uint64_t *bytes, struct rung_err *err)
{
	char jail[4096];
	rt_store_path(&sb->router->store, sb->meta.id, "jail", jail, sizeof(jail));
	cleanup_close int jfd = open(jail, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	cleanup_close int fd = jfd < 0 ? -1 : openat(jfd, "vm.snap", O_RDONLY | O_NOFOLLOW |
								   O_NONBLOCK | O_CLOEXEC);
	struct stat a;
	if (fd < 0 || fstat(fd, &a) < 0)
		return rung_err_sys(err, errno, "the save %s/vm.snap", jail);
	if (!S_ISREG(a.st_mode) || a.st_uid != sb->meta.uid_base || a.st_nlink != 1)
		return rung_err_set(err, EPERM, "%s/vm.snap is not the VMM's own regular file", jail);
	int r = fd_copy(fd, tdir, "vm.snap", err);
	unlinkat(jfd, "vm.snap", 0);
	*bytes = (uint64_t)a.st_size;
	return r;
}

/* Paused: save, copy the upper disk; then continue the source if it ran. */
static int save_paused(struct rt_sandbox *sb, int tdir, const char *tpath, uint64_t *save_ms,
		       struct rung_err *err)
{
	bool ran = sb->meta.state == RUNG_STATE_RUNNING;
	int r = ran ? rt_vm_control(sb, "pause", 10, err) : 0;
	uint64_t t0 = rung_now_ms();
	rung_trace("snapshot: paused");
	if (r == 0)
		r = rt_vm_control(sb, "snapshot /vm.snap", 900, err);
	*save_ms = rung_now_ms() - t0;
	rung_trace("snapshot: saved");
	char src[4096], dst[4400];
	bool reflinked;
	rt_store_path(&sb->router->store, sb->meta.id, "upper.ext4", src, sizeof(src));
	snprintf(dst, sizeof(dst), "%.4300s/upper.ext4", tpath);
	if (r == 0)
		r = rt_disk_clone(src, dst, &reflinked, err);
	if (r == 0 && fchmodat(tdir, "upper.ext4", 0600, 0) < 0)
		r = rung_err_sys(err, errno, "chmod %s", dst);
	rung_trace("snapshot: upper disk copied");
	struct rung_err e2 = {0};
	if (ran && rt_vm_control(sb, "resume", 10, &e2) < 0)
		return r < 0 ? r : rung_err_set(err, EIO, "the sandbox %s stays paused: %s",
						  sb->meta.id, e2.msg);
	return r;
}

/* Under the sandbox's lock: what a template can be taken from. */
static int source_check(struct rt_sandbox *sb, struct rung_err *err)
{
	const struct rt_meta *m = &sb->meta;
	if (m->iso != RUNG_ISO_VM)
		return rung_err_set(err, EOPNOTSUPP, "snapshot needs the vm rung (sandbox %s is on "
				    "the %s rung)", m->id, rt_backend_get(m->iso)->name);
	if (rt_meta_on_disk(m))
		return rung_err_set(err, EBADFD, "sandbox %s is suspended to disk: resume it first",
				    m->id);
	if (!rt_supervisor_alive(m) ||
	    (m->state != RUNG_STATE_RUNNING && m->state != RUNG_STATE_SUSPENDED))
		return rung_err_set(err, EBADFD, "sandbox %s is not running", m->id);
	return 0;
}

static json_t *tpl_describe(const struct rt_meta *m, const char *name, uint64_t bytes,
			    uint64_t save_ms)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:o, s:I, s:I, s:I}", "name", name, "scope",
			      m->labels.scope, "source", m->id, "kind", m->spec.kind, "spec",
			      rt_spec_to_jsonv(&m->spec), "created_ms", (json_int_t)rung_wall_ms(),
			      "bytes", (json_int_t)bytes, "save_ms", (json_int_t)save_ms);
	json_t *d = json_object_get(m->backend, "image_digest");
	if (o && d)
		json_object_set(o, "image_digest", d);
	return o;
}

/* tmp becomes name: refused if name exists, unless force (then exchanged and the old one
 * removed). */
static int tpl_publish(int root, const char *tmp, const char *name, bool force,
		       struct rung_err *err)
{
	if (renameat2(root, tmp, root, name, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EEXIST)
		return rung_err_sys(err, errno, "rename %s to %s", tmp, name);
	if (!force)
		return rung_err_set(err, EEXIST, "snapshot '%s' exists (--force replaces it)", name);
	if (renameat2(root, tmp, root, name, RENAME_EXCHANGE) < 0)
		return rung_err_sys(err, errno, "replace %s", name);
	rung_rm_rf_at(root, tmp, NULL); /* now the old template */
	return 0;
}

static int snapshot_locked(struct rt_sandbox *sb, const char *name, bool force, char **json,
			   struct rung_err *err)
{
	struct rt_store *st = &sb->router->store;
	int r = source_check(sb, err);
	if (r < 0)
		return r;
	cleanup_close int root = tpl_root(st, err);
	if (root < 0)
		return root;
	if (!force && faccessat(root, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return rung_err_set(err, EEXIST, "snapshot '%s' exists (--force replaces it)", name);
	char tmp[128], tpath[4300];
	snprintf(tmp, sizeof(tmp), ".tmp-%s-%d", name, (int)getpid());
	snprintf(tpath, sizeof(tpath), "%s/templates/%s", st->root, tmp);
	rung_rm_rf_at(root, tmp, NULL);
	if (mkdirat(root, tmp, 0700) < 0)
		return rung_err_sys(err, errno, "mkdir %s", tpath);
	cleanup_close int tdir = openat(root, tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	uint64_t save_ms = 0, bytes = 0;
	r = tdir < 0 ? rung_err_sys(err, errno, "open %s", tpath)
		     : save_paused(sb, tdir, tpath, &save_ms, err);
	rung_trace("snapshot: resumed");
	if (r == 0)
		r = take_snap(sb, tdir, &bytes, err);
	rung_trace("snapshot: memory file copied");
	json_t *o = r == 0 ? tpl_describe(&sb->meta, name, bytes, save_ms) : NULL;
	cleanup_free char *txt = o ? json_dumps(o, JSON_SORT_KEYS | JSON_INDENT(2)) : NULL;
	json_decref(o);
	if (r == 0 && !txt)
		r = rung_err_set(err, ENOMEM, "out of memory");
	if (r == 0) {
		char p[200];
		snprintf(p, sizeof(p), "%s/" TPL_JSON, tmp);
		r = rung_write_file_atomic(root, p, txt, strlen(txt), 0600, err);
	}
	if (r == 0)
		r = tpl_publish(root, tmp, name, force, err);
	if (r < 0) {
		rung_rm_rf_at(root, tmp, NULL);
		return rung_err_wrap(err, "snapshot %s as '%s'", sb->meta.id, name);
	}
	LOG_INFO("op=snapshot id=%s name=%s bytes=%llu save_ms=%llu", sb->meta.id, name,
		 (unsigned long long)bytes, (unsigned long long)save_ms);
	if (json)
		*json = rung_steal_ptr(&txt);
	return 0;
}

int rt_guest_sync(struct rung_sandbox *h, const char *op, struct rung_err *err)
{
	static const char *const argv[] = {"sync", NULL};
	struct rung_exec_req req = {.argv = argv, .timeout_ms = 60000};
	struct rung_exec_res res = {0};
	int r = rung_exec(h, &req, &res, err);
	if (r == 0 && res.exit_code != 0)
		r = rung_err_set(err, EIO, "%s: sync in the guest exited %d", op, res.exit_code);
	rung_exec_res_release(&res);
	return r;
}

int rung_snapshot_create(struct rung_router *r, const char *id, const char *scope,
			 const char *name, bool force, char **json, struct rung_err *err)
{
	int rc = rung_snapshot_name_check(name, err);
	struct rung_sandbox *h = NULL;
	if (rc == 0)
		rc = rung_sandbox_open(r, id, scope, &h, err);
	if (rc < 0)
		return rc;
	struct rt_sandbox *sb = rt_sandbox_inner(h);
	if ((rc = source_check(sb, err)) == 0)
		rc = rt_guest_sync(h, "snapshot", err); /* the disk copy then holds what it wrote */
	rung_trace("snapshot: guest synced");
	cleanup_close int lock = rc < 0 ? -1 : rt_store_lock_sandbox(&r->store, id, false, false, err);
	if (rc == 0 && lock < 0)
		rc = lock;
	if (rc == 0) {
		rt_meta_release(&sb->meta);
		rc = rt_store_meta_read(&r->store, id, &sb->meta, err);
	}
	if (rc == 0)
		rc = snapshot_locked(sb, name, force, json, err);
	rung_sandbox_close(h);
	return rc;
}

int rung_snapshot_remove(struct rung_router *r, const char *name, const char *scope,
			 struct rung_err *err)
{
	char label[65];
	if (scope)
		rt_label_of(scope, label);
	json_t *o = NULL;
	int rc = tpl_read(&r->store, name, scope ? label : NULL, &o, err);
	json_decref(o);
	if (rc < 0)
		return rc;
	cleanup_close int root = tpl_root(&r->store, err);
	if (root < 0)
		return root;
	/* out of the name first (a clone starting now finds nothing), then the files */
	char gone[128];
	snprintf(gone, sizeof(gone), ".rm-%s-%d", name, (int)getpid());
	if (renameat(root, name, root, gone) < 0)
		return rung_err_sys(err, errno, "remove snapshot '%s'", name);
	LOG_INFO("op=snapshot_rm name=%s", name);
	return rung_rm_rf_at(root, gone, err);
}

int rung_snapshot_list(struct rung_router *r, const char *scope, char **json,
		       struct rung_err *err)
{
	char label[65];
	if (scope)
		rt_label_of(scope, label);
	cleanup_close int root = tpl_root(&r->store, err);
	if (root < 0)
		return root;
	int dfd = openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return rung_err_sys(err, errno, "list %s/templates", r->store.root);
	}
	json_t *a = json_array();
	struct dirent *e;
	while ((e = readdir(d))) {
		json_t *o = NULL;
		struct rung_err e2 = {0};
		if (e->d_name[0] == '.' || tpl_read(&r->store, e->d_name, scope ? label : NULL, &o,
						    &e2) < 0)
			continue;
		json_array_append_new(a, o);
	}
	closedir(d);
	*json = json_dumps(a, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(a);
	return *json ? 0 : rung_err_set(err, ENOMEM, "out of memory");
}

/* ---- clones (vm_prepare, vm_start) ---- */

/* The spec field that differs from the template's (the two values in want/have), or NULL. */
/* A list for a message: "[a, b]" (from a JSON array or a strv), cut to len. */
static void list_text(json_t *a, char *const *v, char *out, size_t len)
{
	size_t n = a ? json_array_size(a) : 0, o = 0;
	if (!a)
		while (v && v[n])
			n++;
	o += (size_t)snprintf(out, len, "[");
	for (size_t i = 0; i < n && o < len; i++) {
		const char *e = a ? json_string_value(json_array_get(a, i)) : v[i];
		o += (size_t)snprintf(out + o, len - o, "%s%s", i ? ", " : "", e ? e : "?");
	}
	if (o < len)
		snprintf(out + o, len - o, "]");
}

static const char *spec_mismatch(const struct rung_spec *s, json_t *tspec, char *want,
				 char *have, size_t len)
{
	json_t *lim = json_object_get(tspec, "limits");
	const char *img = json_string_value(json_object_get(tspec, "image"));
	unsigned long long tm = (unsigned long long)json_integer_value(json_object_get(lim, "memory"));
	unsigned long long td = (unsigned long long)json_integer_value(json_object_get(lim, "disk"));
	double tc = json_number_value(json_object_get(lim, "cpus"));
	if (tm != s->limits.memory_bytes)
		return snprintf(want, len, "%llu", tm),
		       snprintf(have, len, "%llu", (unsigned long long)s->limits.memory_bytes),
		       "limits.memory";
	if ((unsigned)(tc * 1000 + 0.5) != s->limits.cpus_milli)
		return snprintf(want, len, "%.3f", tc),
		       snprintf(have, len, "%.3f", s->limits.cpus_milli / 1000.0), "limits.cpus";
	if (td != s->limits.disk_bytes)
		return snprintf(want, len, "%llu", td),
		       snprintf(have, len, "%llu", (unsigned long long)s->limits.disk_bytes),
		       "limits.disk";
	/* the guest's command cgroup has the template's pids.max (agent/vm-cgroup.c) */
	unsigned long long tp = (unsigned long long)json_integer_value(json_object_get(lim, "pids"));
	if (tp != s->limits.pids)
		return snprintf(want, len, "%llu", tp), snprintf(have, len, "%u", s->limits.pids),
		       "limits.pids";
	if (!img || !s->image || strcmp(img, s->image))
		return snprintf(want, len, "%s", img ? img : "none"),
		       snprintf(have, len, "%s", s->image ? s->image : "none"), "image";
	/* the same list, in the same order: the restored guest has the template's devices (a
	 * network device with a list, none without) and, with a list, the template's view of it */
	json_t *ta = json_object_get(tspec, "egress_allow");
	size_t n = 0;
	bool same = true;
	for (; s->egress_allow && s->egress_allow[n]; n++) {
		const char *t = json_string_value(json_array_get(ta, n));
		same = same && t && !strcmp(t, s->egress_allow[n]);
	}
	if (!same || n != json_array_size(ta)) {
		list_text(ta, NULL, want, len);
		list_text(NULL, s->egress_allow, have, len);
		return "egress_allow";
	}
	return NULL;
}

int rt_template_clone(struct rt_sandbox *sb, struct rung_err *err)
{
	const struct rung_spec *s = &sb->meta.spec;
	const char *name = s->from_snapshot;
	json_t *o = NULL;
	int r = tpl_read(&sb->router->store, name, sb->meta.labels.scope, &o, err);
	if (r < 0)
		return rung_err_wrap(err, "from_snapshot");
	char tv[80], sv[80];
	const char *bad = spec_mismatch(s, json_object_get(o, "spec"), tv, sv, sizeof(tv));
	const char *want = json_string_value(json_object_get(o, "image_digest"));
	const char *have = json_string_value(json_object_get(sb->meta.backend, "image_digest"));
	if (bad)
		r = rung_err_set(err, EINVAL, "from_snapshot: %s is %s, the snapshot '%s' was taken "
				 "with %s (a clone's must be the template's)", bad, sv, name, tv);
	else if (!want || !have || strcmp(want, have))
		r = rung_err_set(err, EINVAL, "from_snapshot: image %s now resolves to %.80s, the "
				 "snapshot '%s' was taken from %.80s", s->image, have ? have : "?",
				 name, want ? want : "?");
	json_decref(o);
	if (r < 0)
		return r;
	char src[4300], dst[4096], snap[4300], mark[4096];
	bool reflinked;
	snprintf(src, sizeof(src), "%s/templates/%s/upper.ext4", sb->router->store.root, name);
	snprintf(snap, sizeof(snap), "%s/templates/%s/vm.snap", sb->router->store.root, name);
	rt_store_path(&sb->router->store, sb->meta.id, "upper.ext4", dst, sizeof(dst));
	rt_store_path(&sb->router->store, sb->meta.id, "clone.pending", mark, sizeof(mark));
	/* A clone that ran (its disk there, no mark) and is created again after its supervisor
	 * died boots on its own disk, as any sandbox does; one whose restore never finished
	 * (the mark is there) starts over from the template. */
	struct stat st;
	bool ran = lstat(dst, &st) == 0 && lstat(mark, &st) < 0;
	if (ran)
		return json_object_set_new(sb->meta.backend, "clone",
					   json_pack("{s:s, s:b}", "snapshot", name, "booted", 1)) < 0
			       ? rung_err_set(err, ENOMEM, "out of memory")
			       : 0;
	unlink(dst);
	rung_trace("clone: template checked");
	if ((r = rt_disk_clone(src, dst, &reflinked, err)) < 0)
		return rung_err_wrap(err, "from_snapshot '%s'", name);
	rung_trace("clone: upper disk copied");
	/* the vm rung's jail reads its disks as the sandbox's uid (rfs_vm_upper_disk) */
	cleanup_close int fd = open(mark, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
				    0600);
	if (chown(dst, sb->meta.uid_base, sb->meta.uid_base) < 0 || fd < 0)
		return rung_err_sys(err, errno, "from_snapshot: the clone's disk %s", dst);
	if (json_object_set_new(sb->meta.backend, "clone",
				json_pack("{s:s, s:s, s:b}", "snapshot", name, "file", snap,
					  "reflinked", reflinked)) < 0)
		return rung_err_set(err, ENOMEM, "out of memory");
	return 0;
}

bool rt_template_pending(struct rt_sandbox *sb, char *file, size_t len)
{
	char mark[4096];
	struct stat st;
	const char *f = json_string_value(json_object_get(json_object_get(sb->meta.backend,
									  "clone"), "file"));
	rt_store_path(&sb->router->store, sb->meta.id, "clone.pending", mark, sizeof(mark));
	if (!f || lstat(mark, &st) < 0)
		return false;
	snprintf(file, len, "%s", f);
	return true;
}

void rt_template_done(struct rt_sandbox *sb)
{
	char mark[4096];
	rt_store_path(&sb->router->store, sb->meta.id, "clone.pending", mark, sizeof(mark));
	unlink(mark);
}
