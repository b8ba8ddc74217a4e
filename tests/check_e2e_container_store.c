/*
 * tests/check_e2e_container_store.c: the store keeps its promises to the host (issue 10, items 5,
 * 9, 10), against live container sandboxes. Tagged "root".
 *  - other local users (uid 1000, no groups) can neither read a tenant's files, list sandbox
 *    ids (store or cgroupfs), read tags and manifests, nor write a shared layer; an old store
 *    (0711/0755 modes) is tightened when it is opened;
 *  - a 1000-deep tree and symlinks pointing out of the sandbox are removed by dispose and by
 *    gc (the links are not followed), and the uid slot goes only with the files;
 *  - a restart never writes through symlinks the sandbox planted in its kept overlay.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs.h"
#include "runtime/rt-internal.h"
#include "tests/lib/container.h"
#include "tests/lib/testutil.h"

/* paths below the fixture's short tmp dir: truncation cannot happen */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define OTHER_UID 1000

/* What uid 1000 (no supplementary groups) could do: a bitmask of the probes that worked. */
enum probe { P_READ_WORK = 1, P_LIST_IDS = 2, P_LIST_CG = 4, P_READ_TAGS = 8, P_READ_MANIFEST = 16,
	     P_WRITE_LAYER = 32, P_ENTER_SANDBOX = 64 };

struct paths {
	char work_file[4400], sandboxes[4400], cg_parent[4400], tags[4400], manifest[4400],
	    layer_file[4400], sandbox_dir[4400];
};

static bool can_list(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return false;
	bool any = false;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			any = true;
	closedir(d);
	return any;
}

static bool can_open(const char *p, int flags)
{
	int fd = open(p, flags | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static int probe_all(const struct paths *p)
{
	int got = 0;
	got |= can_open(p->work_file, O_RDONLY) ? P_READ_WORK : 0;
	got |= can_list(p->sandboxes) ? P_LIST_IDS : 0;
	got |= p->cg_parent[0] && can_list(p->cg_parent) ? P_LIST_CG : 0;
	got |= can_open(p->tags, O_RDONLY) ? P_READ_TAGS : 0;
	got |= can_open(p->manifest, O_RDONLY) ? P_READ_MANIFEST : 0;
	got |= can_open(p->layer_file, O_WRONLY) ? P_WRITE_LAYER : 0;
	got |= can_open(p->sandbox_dir, O_RDONLY | O_DIRECTORY) ? P_ENTER_SANDBOX : 0;
	return got;
}

/* The probes as host uid 1000 (as `setpriv --reuid=1000 --regid=1000 --clear-groups`). */
static int probe_as_other(const struct paths *p)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setresgid(OTHER_UID, OTHER_UID, OTHER_UID) < 0 ||
		    setresuid(OTHER_UID, OTHER_UID, OTHER_UID) < 0)
			_exit(255);
		_exit(probe_all(p));
	}
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	ck_assert_msg(WEXITSTATUS(st) != 255, "cannot become uid %d", OTHER_UID);
	return WEXITSTATUS(st);
}

/* The layer dir holding home/owned-by-1000 (the image's uid 1000 owns it). */
static void find_layer_file(char *out, size_t n)
{
	char dir[4400];
	snprintf(dir, sizeof(dir), "%s/images/layers/sha256", ct_state());
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	out[0] = '\0';
	while ((de = readdir(d))) {
		char p[4800];
		struct stat st;
		snprintf(p, sizeof(p), "%s/%s/home/owned-by-1000", dir, de->d_name);
		if (de->d_name[0] != '.' && stat(p, &st) == 0) {
			ck_assert_uint_eq(st.st_uid, OTHER_UID);
			snprintf(out, n, "%s", p);
		}
	}
	closedir(d);
	ck_assert_msg(out[0], "no layer holds home/owned-by-1000");
}

static void manifest_path(char *out, size_t n)
{
	char p[4400];
	snprintf(p, sizeof(p), "%s/images/repositories.json", ct_state());
	json_t *o = json_load_file(p, 0, NULL);
	ck_assert_ptr_nonnull(o);
	const char *dg = json_string_value(json_object_get(o, CT_IMAGE));
	ck_assert_ptr_nonnull(dg);
	ck_assert(!strncmp(dg, "sha256:", 7));
	snprintf(out, n, "%s/images/blobs/sha256/%s", ct_state(), dg + 7);
	json_decref(o);
	ck_assert_int_eq(access(out, R_OK), 0);
}

static void fill_paths(struct paths *p, struct rung_router *r, const char *id)
{
	/* The tenant's files live on its disk image, mounted in its own mount namespace only:
	 * the host reaches them through its pid 1's root (ptrace access: root only). */
	struct rt_meta m;
	struct rung_err err = {0};
	ck_assert_msg(rt_store_meta_read(&r->store, id, &m, &err) == 0, "%s", err.msg);
	snprintf(p->work_file, sizeof(p->work_file), "/proc/%d/root/work/.env", (int)m.init_pid);
	rt_meta_release(&m);
	snprintf(p->sandbox_dir, sizeof(p->sandbox_dir), "%s/sandboxes/%s", ct_state(), id);
	snprintf(p->sandboxes, sizeof(p->sandboxes), "%s/sandboxes", ct_state());
	snprintf(p->tags, sizeof(p->tags), "%s/images/repositories.json", ct_state());
	manifest_path(p->manifest, sizeof(p->manifest));
	find_layer_file(p->layer_file, sizeof(p->layer_file));
	/* rung-<tag>/<id> in the pids (v1) or unified (v2) hierarchy: its parent */
	ct_cg_path("pids", id, NULL, p->cg_parent, sizeof(p->cg_parent));
	char *slash = strrchr(p->cg_parent, '/');
	ck_assert_ptr_nonnull(slash);
	*slash = '\0';
	if (access(p->cg_parent, F_OK) < 0)
		p->cg_parent[0] = '\0';
}

START_TEST(test_other_users_shut_out)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	struct rung_sandbox *sb = ct_acquire(r, "store", "perm", &s, NULL);
	free(ct_sh(sb, "echo TOKEN=hunter2 > /work/.env"));
	struct paths p;
	fill_paths(&p, r, rung_sandbox_id(sb));
	ck_assert_msg(p.cg_parent[0], "no cgroup parent for the sandbox found");
	/* Root reaches every one of them (the probes are not vacuous) ... */
	int all = P_READ_WORK | P_LIST_IDS | P_LIST_CG | P_READ_TAGS | P_READ_MANIFEST |
		  P_WRITE_LAYER | P_ENTER_SANDBOX;
	ck_assert_int_eq(probe_all(&p), all);
	/* ... another local user none. */
	ck_assert_int_eq(probe_as_other(&p), 0);

	/* A store left by an older rung (everything 0711/0755) is closed again on open. */
	struct stat st;
	ck_assert_int_eq(stat(p.sandbox_dir, &st), 0);
	gid_t gid = st.st_gid;
	char img[4400];
	snprintf(img, sizeof(img), "%s/images", ct_state());
	ck_assert_int_eq(chmod(img, 0711), 0);
	ck_assert_int_eq(chown(p.sandbox_dir, 0, 0), 0);
	ck_assert_int_eq(chmod(p.sandbox_dir, 0711), 0);
	ck_assert_int_eq(chmod(p.sandboxes, 0755), 0);
	char mark[4400]; /* an older store has no record of the one-time pass (runtime/store.c) */
	snprintf(mark, sizeof(mark), "%s/%s", ct_state(), RT_STORE_TIGHT);
	ck_assert_int_eq(unlink(mark), 0);
	/* (the work file itself is on the sandbox's disk image now, out of reach either way) */
	ck_assert_int_ne(probe_as_other(&p) & (P_LIST_IDS | P_READ_TAGS), 0);
	struct rung_router *r2 = ct_router(NULL);
	struct rfs_store *rs = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rfs_store_open(ct_state(), &rs, &err) == 0, "%s", err.msg);
	rfs_store_free(rs);
	ck_assert_int_eq(probe_as_other(&p), 0);
	ck_assert_int_eq(stat(p.sandbox_dir, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0710);
	ck_assert_uint_eq(st.st_gid, gid); /* the sandbox's own root may traverse it */
	/* and the sandbox still works, restarted included */
	char *out = ct_sh(sb, "cat /work/.env");
	ck_assert_str_eq(out, "TOKEN=hunter2\n");
	free(out);
	rung_sandbox_close(sb);
	rung_router_free(r2);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

/* ---- item 9: deep trees ----------------------------------------------------------------- */

/* A 1000-deep tree, and links out of the sandbox to host files (which must survive). */
static void make_deep(struct rung_sandbox *sb, const char *sentinel)
{
	char script[2048];
	/* ten `mkdir -p` of 100 levels each (a loop of 1000 mkdirs is slow on a busy host) */
	snprintf(script, sizeof(script),
		 "cd /work && ln -s %s out && ln -s %s/.. outdir && p=d && i=1 && "
		 "while [ $i -lt 100 ]; do p=$p/d; i=$((i+1)); done; n=0; "
		 "while [ $n -lt 10 ]; do mkdir -p $p && cd $p || exit 1; n=$((n+1)); "
		 "[ $n = 5 ] && ln -s %s out && ln -s / root; done; echo deep > f && "
		 "cd /work && find d | wc -l",
		 sentinel, sentinel, sentinel);
	char *out = ct_sh(sb, script);
	ck_assert_int_ge(atoi(out), 1000);
	free(out);
}

static bool slot_of(const char *state, const char *id)
{
	/* the registry names each slot's owner "<state dir>\n<id>\n" */
	const char *reg = getenv("RUNG_UID_REGISTRY");
	DIR *d = opendir(reg && *reg ? reg : "/run/rung/uid-slots");
	if (!d)
		return false;
	char mine[4400];
	snprintf(mine, sizeof(mine), "%s\n%s\n", state, id);
	bool found = false;
	struct dirent *de;
	while (!found && (de = readdir(d))) {
		char *txt = NULL;
		if (de->d_name[0] == '.' ||
		    rung_file_load(dirfd(d), de->d_name, 8192, &txt, NULL, NULL) < 0)
			continue;
		found = !strcmp(txt, mine);
		free(txt);
	}
	closedir(d);
	return found;
}

START_TEST(test_deep_tree_dispose_and_gc)
{
	CT_REQUIRE();
	char sentinel[4400], sdir[4400];
	snprintf(sdir, sizeof(sdir), "%s/host-side", ct_tmp());
	ck_assert_int_eq(mkdir(sdir, 0755), 0);
	snprintf(sentinel, sizeof(sentinel), "%s/keep", sdir);
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, sentinel, "keep\n", 5, 0644, NULL), 0);
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	struct rung_err err = {0};
	/* dispose */
	struct rung_sandbox *sb = ct_acquire(r, "store", "deep", &s, NULL);
	char id[65], dir[4400];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
	snprintf(dir, sizeof(dir), "%s/sandboxes/%s", ct_state(), id);
	make_deep(sb, sentinel);
	rung_sandbox_close(sb);
	ck_assert(slot_of(ct_state(), id));
	ck_assert_msg(rung_dispose(r, id, "store", &err) == 0, "dispose: %s", err.msg);
	ck_assert_msg(access(dir, F_OK) < 0 && errno == ENOENT, "%s is still there", dir);
	ck_assert(!slot_of(ct_state(), id));
	ck_assert_int_eq(access(sentinel, F_OK), 0);
	/* gc of a dead one */
	sb = ct_acquire(r, "store", "deep-gc", &s, NULL);
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
	snprintf(dir, sizeof(dir), "%s/sandboxes/%s", ct_state(), id);
	make_deep(sb, sentinel);
	rung_sandbox_close(sb);
	struct rt_meta m;
	ck_assert_msg(rt_store_meta_read(&r->store, id, &m, &err) == 0, "%s", err.msg);
	pid_t sup = m.sup_pid;
	rt_meta_release(&m);
	ct_kill_reaped(sup);
	struct rung_gc_report rep;
	ck_assert_msg(rung_gc(r, &rep, &err) == 0, "gc: %s", err.msg);
	ck_assert_uint_eq(rep.disposed_dead, 1);
	ck_assert_msg(access(dir, F_OK) < 0 && errno == ENOENT, "%s is still there", dir);
	ck_assert(!slot_of(ct_state(), id));
	ck_assert_int_eq(access(sentinel, F_OK), 0);
	ck_assert_int_eq(access(sdir, F_OK), 0);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

/* The same remover on a host tree: 5000 deep (past the 64 levels it keeps open). */
START_TEST(test_rm_rf_no_depth_limit)
{
	RUNG_REQUIRE_ROOT();
	char *t = rung_test_tmpdir("rmrf");
	ck_assert_ptr_nonnull(t);
	char keep[4400];
	snprintf(keep, sizeof(keep), "%s/keep", t);
	ck_assert_int_eq(mkdir(keep, 0755), 0);
	int fd = open(t, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(mkdirat(fd, "tree", 0755), 0);
	int cur = openat(fd, "tree", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < 5000; i++) {
		ck_assert_int_eq(symlinkat(keep, cur, "out"), 0);
		ck_assert_int_eq(mkdirat(cur, "a", 0755), 0);
		ck_assert_int_eq(mkdirat(cur, "b", 0755), 0);
		int nfd = openat(cur, i % 2 ? "a" : "b", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ck_assert_int_ge(nfd, 0);
		close(cur);
		cur = nfd;
	}
	close(cur);
	int fds = rung_test_count_fds();
	struct rung_err err = {0};
	ck_assert_msg(rung_rm_rf_at(fd, "tree", &err) == 0, "%s", err.msg);
	ck_assert_int_eq(faccessat(fd, "tree", F_OK, AT_SYMLINK_NOFOLLOW), -1);
	ck_assert_int_eq(access(keep, F_OK), 0);
	ck_assert_int_eq(rung_test_count_fds(), fds);
	close(fd);
	ck_assert_int_eq(rung_rm_rf(t, &err), 0);
	free(t);
}
END_TEST

/* ---- item 10: restart after planted symlinks -------------------------------------------- */

static pid_t init_pid_of(struct rung_router *r, const char *id)
{
	struct rt_meta m;
	struct rung_err err = {0};
	ck_assert_msg(rt_store_meta_read(&r->store, id, &m, &err) == 0, "%s", err.msg);
	pid_t p = m.init_pid;
	rt_meta_release(&m);
	return p;
}

/* Kill the sandbox's rung-agent from the host and wait for its supervisor to notice. */
static void kill_agent(struct rung_router *r, const char *id)
{
	pid_t init = init_pid_of(r, id);
	ck_assert_int_gt(init, 1);
	ck_assert_int_eq(kill(init, SIGKILL), 0);
	struct rung_sandbox_info *v = NULL;
	size_t n = 0;
	struct rung_err err = {0};
	for (int i = 0; i < 250; i++) {
		ck_assert_int_eq(rung_list(r, "store", NULL, &v, &n, &err), 0);
		bool dead = true;
		for (size_t k = 0; k < n; k++)
			if (!strcmp(v[k].id, id) && v[k].state != RUNG_STATE_DEAD)
				dead = false;
		free(v);
		if (dead)
			return;
		usleep(20000);
	}
	ck_abort_msg("sandbox %s still alive after its agent was killed", id);
}

static char *slurp(const char *p)
{
	char *t = NULL;
	return rung_file_load(AT_FDCWD, p, 1 << 20, &t, NULL, NULL) == 0 ? t : NULL;
}

struct links_env {
	char hdir[4400], hfile[4400];
	struct rung_router *r;
	struct rung_spec s;
	struct rung_key k;
	char id[65];
};

/* A sandbox with a file in its kept overlay, a host dir and a host file anyone may write
 * (the worst case: even the sandbox's host uid could write there). */
static struct rung_sandbox *links_start(struct links_env *e, const char *agent)
{
	snprintf(e->hdir, sizeof(e->hdir), "%s/host-etc", ct_tmp());
	snprintf(e->hfile, sizeof(e->hfile), "%s/host-hosts", ct_tmp());
	ck_assert_int_eq(mkdir(e->hdir, 0777), 0);
	ck_assert_int_eq(chmod(e->hdir, 0777), 0);
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, e->hfile, "orig\n", 5, 0666, NULL), 0);
	ck_assert_int_eq(chmod(e->hfile, 0666), 0);
	e->r = ct_router(NULL);
	ct_spec(&e->s, NULL);
	e->k = (struct rung_key){.scope = "store", .thread = "t", .agent = agent};
	struct rung_sandbox *sb = ct_acquire(e->r, "store", agent, &e->s, NULL);
	snprintf(e->id, sizeof(e->id), "%s", rung_sandbox_id(sb));
	free(ct_sh(sb, "echo keep > /work/kept"));
	return sb;
}

static void links_check_host(const struct links_env *e)
{
	char *t = slurp(e->hfile);
	ck_assert_ptr_nonnull(t);
	ck_assert_str_eq(t, "orig\n");
	free(t);
	DIR *d = opendir(e->hdir);
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	while ((de = readdir(d)))
		ck_assert_msg(de->d_name[0] == '.', "%s/%s was made through a planted link",
			      e->hdir, de->d_name);
	closedir(d);
}

static void links_end(struct links_env *e)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(e->r, e->id, "store", &err) == 0, "%s", err.msg);
	rung_spec_release(&e->s);
	rung_router_free(e->r);
}

/* /etc/hosts -> a host file, /etc/hostname -> into a host dir: replaced, not followed. */
START_TEST(test_restart_planted_leaf_links)
{
	CT_REQUIRE();
	struct links_env e;
	struct rung_sandbox *sb = links_start(&e, "leaf");
	char script[2048];
	snprintf(script, sizeof(script),
		 "rm -f /etc/hosts /etc/hostname && ln -s %s /etc/hosts && "
		 "ln -s %s/hostname /etc/hostname",
		 e.hfile, e.hdir);
	free(ct_sh(sb, script));
	rung_sandbox_close(sb);
	kill_agent(e.r, e.id);
	struct rung_err err = {0};
	sb = NULL;
	ck_assert_msg(rung_acquire(e.r, &e.k, &e.s, &sb, NULL, &err) == 0, "re-acquire: %s",
		      err.msg);
	ck_assert_str_eq(rung_sandbox_id(sb), e.id);
	char *out = ct_sh(sb, "cat /work/kept; test -L /etc/hosts || echo regular; "
			      "grep -c localhost /etc/hosts; cat /etc/hostname");
	ck_assert_str_eq(out, "keep\nregular\n2\nrung\n");
	free(out);
	rung_sandbox_close(sb);
	links_check_host(&e);
	links_end(&e);
}
END_TEST

/* /etc itself -> a host directory: nothing lands there; the restart is refused, naming the
 * path (or, if it starts, the sandbox has an /etc of its own). */
START_TEST(test_restart_planted_dir_link)
{
	CT_REQUIRE();
	struct links_env e;
	struct rung_sandbox *sb = links_start(&e, "dir");
	char script[2048];
	snprintf(script, sizeof(script), "rm -rf /etc && ln -s %s /etc", e.hdir);
	free(ct_sh(sb, script));
	rung_sandbox_close(sb);
	kill_agent(e.r, e.id);
	struct rung_err err = {0};
	sb = NULL;
	int rc = rung_acquire(e.r, &e.k, &e.s, &sb, NULL, &err);
	links_check_host(&e);
	if (rc == 0) {
		char *out = ct_sh(sb, "test -L /etc && echo link; grep -c localhost /etc/hosts");
		ck_assert_str_eq(out, "2\n");
		free(out);
		rung_sandbox_close(sb);
	} else {
		fprintf(stderr, "restart refused: %s\n", err.msg);
		ck_assert_msg(strstr(err.msg, "/etc") && strstr(err.msg, "symlink"),
			      "unclear refusal: %s", err.msg);
	}
	links_end(&e);
}
END_TEST

Suite *e2e_container_store_suite(void)
{
	Suite *s = suite_create("e2e_container_store");
	ct_add(s, "perm", test_other_users_shut_out, 120);
	ct_add(s, "deep", test_deep_tree_dispose_and_gc, 180);
	ct_add(s, "rmrf", test_rm_rf_no_depth_limit, 120);
	ct_add(s, "leaflinks", test_restart_planted_leaf_links, 120);
	ct_add(s, "dirlink", test_restart_planted_dir_link, 120);
	return s;
}
