/*
 * tests/check_runtime_store.c: runtime/store.c, the on-disk store, on a scratch state dir:
 * opening (absolute paths only, parents the sandbox uids can traverse, old stores tightened),
 * paths, metadata through meta.json (and a pool claim's exchange), the id listing, the global
 * and per-sandbox flock locks, the busy lock (shared holders against an exclusive one),
 * activity and last-use times, and the host-wide uid registry (a private one, the store's
 * uid_registry, so no real sandbox's slot is touched).
 * No sandbox runs. The uid cases chown, so they need root.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/rt-internal.h"
#include "tests/lib/testutil.h"

#define ID1 "0123456789abcdef0123456789abcdef"
#define ID2 "fedcba9876543210fedcba9876543210"
#define ID3 "00000000000000000000000000000001"

static char *tmp;
static char root[512];
static struct rt_store st;

static void setup(void)
{
	tmp = rung_test_tmpdir("store");
	ck_assert_ptr_nonnull(tmp);
	snprintf(root, sizeof(root), "%s/state", tmp);
	struct rung_err err = {0};
	ck_assert_msg(rt_store_open(root, &st, &err) == 0, "%s", err.msg);
}

static void teardown(void)
{
	rt_store_close(&st);
	struct rung_err err = {0};
	rung_rm_rf(tmp, &err);
	free(tmp);
}

static mode_t mode_of(const char *path)
{
	struct stat s;
	ck_assert_msg(lstat(path, &s) == 0, "stat %s: %s", path, strerror(errno));
	return s.st_mode & 07777;
}

START_TEST(test_open_layout)
{
	ck_assert_int_ge(st.root_fd, 0);
	ck_assert_str_eq(st.root, root);
	/* the sandbox uids traverse the state dir and "sandboxes" but cannot list them */
	ck_assert_uint_eq(mode_of(root) & 0011, 0011);
	char p[4096];
	snprintf(p, sizeof(p), "%s/sandboxes", root);
	ck_assert_uint_eq(mode_of(p), 0711);
	/* an existing private dir is made traversable, nothing more */
	rt_store_close(&st);
	ck_assert_int_eq(chmod(root, 0700), 0);
	struct rung_err err = {0};
	ck_assert_int_eq(rt_store_open(root, &st, &err), 0);
	ck_assert_uint_eq(mode_of(root), 0711);
	/* close twice is harmless */
	rt_store_close(&st);
	ck_assert_int_eq(st.root_fd, -1);
	ck_assert_ptr_null(st.root);
	rt_store_close(&st);
	rt_store_close(NULL);
	ck_assert_int_eq(rt_store_open(root, &st, &err), 0);
}
END_TEST

START_TEST(test_open_refusals)
{
	struct rt_store s2;
	struct rung_err err = {0};
	ck_assert_int_eq(rt_store_open("relative/state", &s2, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "absolute"), "%s", err.msg);
	ck_assert_int_eq(s2.root_fd, -1);
	struct rung_err e2 = {0};
	ck_assert_int_eq(rt_store_open(NULL, &s2, &e2), -EINVAL);
	struct rung_err e3 = {0};
	ck_assert_int_eq(rt_store_open("", &s2, &e3), -EINVAL);
	/* a parent the sandbox uids cannot search: refused, the parent named, nothing made */
	char closed[1024], inner[4096];
	snprintf(closed, sizeof(closed), "%s/closed", tmp);
	ck_assert_int_eq(mkdir(closed, 0750), 0);
	snprintf(inner, sizeof(inner), "%s/deeper/state", closed);
	struct rung_err e4 = {0};
	ck_assert_int_eq(rt_store_open(inner, &s2, &e4), -EACCES);
	ck_assert_msg(strstr(e4.msg, closed) && strstr(e4.msg, "0750"), "%s", e4.msg);
	char deeper[4096];
	snprintf(deeper, sizeof(deeper), "%s/deeper", closed);
	ck_assert_int_eq(access(deeper, F_OK), -1);
}
END_TEST

START_TEST(test_paths)
{
	char buf[4096], want[4096];
	ck_assert_int_eq(rt_store_path(&st, ID1, NULL, buf, sizeof(buf)), 0);
	snprintf(want, sizeof(want), "%s/sandboxes/%s", root, ID1);
	ck_assert_str_eq(buf, want);
	ck_assert_int_eq(rt_store_path(&st, ID1, "meta.json", buf, sizeof(buf)), 0);
	snprintf(want, sizeof(want), "%s/sandboxes/%s/meta.json", root, ID1);
	ck_assert_str_eq(buf, want);
	/* a buffer one byte short: ENAMETOOLONG, never a truncated path used silently */
	size_t need = strlen(want) + 1;
	ck_assert_int_eq(rt_store_path(&st, ID1, "meta.json", buf, need), 0);
	ck_assert_int_eq(rt_store_path(&st, ID1, "meta.json", buf, need - 1), -ENAMETOOLONG);
	ck_assert_int_eq(rt_store_path(&st, ID1, NULL, buf, 8), -ENAMETOOLONG);
}
END_TEST

static void meta_fill(struct rt_meta *m, const char *id)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->id, sizeof(m->id), "%s", id);
	memset(m->labels.scope, 'a', 64);
	memset(m->labels.thread, 'b', 64);
	memset(m->labels.agent, 'c', 64);
	m->iso = RUNG_ISO_PROCESS;
	m->state = RUNG_STATE_RUNNING;
	m->created_ms = 5;
	m->sup_pid = 99;
	rung_spec_init(&m->spec);
	m->spec.kind = strdup("store-test");
	m->granted = RUNG_CAP_EXEC;
}

/* ID1 locked (the fd returned) with a's record written as its metadata. */
static int meta_written(struct rt_meta *a)
{
	struct rung_err err = {0};
	int fd = rt_store_lock_sandbox(&st, ID1, true, false, &err);
	ck_assert_msg(fd >= 0, "%s", err.msg);
	meta_fill(a, ID1);
	ck_assert_msg(rt_store_meta_write(&st, a, &err) == 0, "%s", err.msg);
	return fd;
}

START_TEST(test_meta_read_write)
{
	struct rung_err err = {0};
	struct rt_meta a, b;
	int fd = meta_written(&a);
	char p[4096];
	rt_store_path(&st, ID1, "meta.json", p, sizeof(p));
	ck_assert_uint_eq(mode_of(p), 0600);
	ck_assert_int_eq(rt_store_meta_read(&st, ID1, &b, &err), 0);
	ck_assert_str_eq(b.id, ID1);
	ck_assert_int_eq(b.state, RUNG_STATE_RUNNING);
	ck_assert_int_eq(b.sup_pid, 99);
	ck_assert_str_eq(b.spec.kind, "store-test");
	rt_meta_release(&b);
	/* rewritten in place: readers see the new record whole */
	a.state = RUNG_STATE_SUSPENDED;
	ck_assert_int_eq(rt_store_meta_write(&st, &a, &err), 0);
	ck_assert_int_eq(rt_store_meta_read(&st, ID1, &b, &err), 0);
	ck_assert_int_eq(b.state, RUNG_STATE_SUSPENDED);
	rt_meta_release(&b);
	rt_meta_release(&a);
	/* no such sandbox, a malformed id (never a path), a corrupt file */
	struct rung_err e2 = {0};
	ck_assert_int_eq(rt_store_meta_read(&st, ID2, &b, &e2), -ENOENT);
	ck_assert_msg(strstr(e2.msg, "no sandbox"), "%s", e2.msg);
	static const char *const bad_ids[] = {"", "../../etc", "0123456789ABCDEF0123456789abcdef",
					      ID1 "/..", "sandboxes"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(bad_ids); i++) {
		struct rung_err e3 = {0};
		ck_assert_int_eq(rt_store_meta_read(&st, bad_ids[i], &b, &e3), -ENOENT);
		ck_assert_msg(strstr(e3.msg, "no sandbox"), "%s", e3.msg);
	}
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, p, "{\"version\":", 11, 0600, &err), 0);
	struct rung_err e4 = {0};
	ck_assert_int_eq(rt_store_meta_read(&st, ID1, &b, &e4), -EINVAL);
	ck_assert_msg(strstr(e4.msg, "metadata"), "%s", e4.msg);
	close(fd);
}
END_TEST

/* A pool claim's write: the new record exchanged in whole, the one it replaced kept aside (a
 * prepared empty file or none), and the aside file's old content never mistaken for it. */
START_TEST(test_meta_exchange)
{
	struct rung_err err = {0};
	struct rt_meta a, b;
	int fd = meta_written(&a);
	char p[4096], aside[4096];
	rt_store_path(&st, ID1, "meta.json", p, sizeof(p));
	rt_store_path(&st, ID1, RT_META_ASIDE, aside, sizeof(aside));
	/* a stale, longer aside file (a claim that died): truncated, not appended to */
	char junk[4096];
	memset(junk, 'x', sizeof(junk));
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, aside, junk, sizeof(junk), 0600, &err),
			 0);
	for (int round = 0; round < 2; round++) {
		struct stat before, after;
		ck_assert_int_eq(stat(p, &before), 0);
		memset(a.labels.scope, round ? 'e' : 'd', 64);
		ck_assert_msg(rt_store_meta_exchange(&st, &a, &err) == 0, "%s", err.msg);
		ck_assert_int_eq(rt_store_meta_read(&st, ID1, &b, &err), 0);
		ck_assert_int_eq(b.labels.scope[0], round ? 'e' : 'd');
		ck_assert_str_eq(b.spec.kind, "store-test");
		rt_meta_release(&b);
		ck_assert_uint_eq(mode_of(p), 0600);
		/* the replaced record is the aside file now (the same inode) */
		ck_assert_int_eq(stat(aside, &after), 0);
		ck_assert_uint_eq(after.st_ino, before.st_ino);
		ck_assert_int_eq(unlink(aside), 0); /* as the supervisor's adopt does */
	}
	rt_meta_release(&a);
	close(fd);
}
END_TEST

START_TEST(test_ids)
{
	struct rung_err err = {0};
	char **ids = NULL;
	ck_assert_int_eq(rt_store_ids(&st, &ids, &err), 0);
	ck_assert_ptr_null(ids[0]);
	free(ids);
	/* two sandboxes, plus entries that are not sandbox ids */
	int f1 = rt_store_lock_sandbox(&st, ID1, true, false, &err);
	int f2 = rt_store_lock_sandbox(&st, ID2, true, false, &err);
	ck_assert(f1 >= 0 && f2 >= 0);
	char p[4096];
	snprintf(p, sizeof(p), "%s/sandboxes/junk", root);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/sandboxes/0123456789ABCDEF0123456789ABCDEF", root);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	int n = rt_store_ids(&st, &ids, &err);
	ck_assert_int_eq(n, 2);
	ck_assert_ptr_null(ids[2]);
	int seen1 = 0, seen2 = 0;
	for (int i = 0; i < n; i++) {
		seen1 += !strcmp(ids[i], ID1);
		seen2 += !strcmp(ids[i], ID2);
		free(ids[i]);
	}
	free(ids);
	ck_assert(seen1 == 1 && seen2 == 1);
	close(f1);
	close(f2);
}
END_TEST

START_TEST(test_locks)
{
	struct rung_err err = {0};
	/* without create, a sandbox that does not exist cannot be locked (nor made) */
	ck_assert_int_eq(rt_store_lock_sandbox(&st, ID1, false, false, &err), -ENOENT);
	char dir[4096];
	rt_store_path(&st, ID1, NULL, dir, sizeof(dir));
	ck_assert_int_eq(access(dir, F_OK), -1);
	int fd = rt_store_lock_sandbox(&st, ID1, true, false, &err);
	ck_assert_msg(fd >= 0, "%s", err.msg);
	ck_assert_uint_eq(mode_of(dir), 0700);
	/* a second holder (another open file, as another process would have) cannot take it */
	struct rung_err e2 = {0};
	ck_assert_int_eq(rt_store_lock_sandbox(&st, ID1, false, true, &e2), -EWOULDBLOCK);
	close(fd);
	fd = rt_store_lock_sandbox(&st, ID1, false, true, &err);
	ck_assert_msg(fd >= 0, "%s", err.msg);
	close(fd);
	/* a directory without its lock file is a sandbox being removed: no lock, no new file */
	char lock[4096];
	rt_store_path(&st, ID1, "lock", lock, sizeof(lock));
	ck_assert_int_eq(unlink(lock), 0);
	struct rung_err e3 = {0};
	ck_assert_int_eq(rt_store_lock_sandbox(&st, ID1, false, false, &e3), -ENOENT);
	ck_assert_msg(strstr(e3.msg, "gone"), "%s", e3.msg);
	ck_assert_int_eq(access(lock, F_OK), -1);
	/* the global lock: one holder at a time */
	int g = rt_store_lock_global(&st, &err);
	ck_assert_int_ge(g, 0);
	char gp[4096];
	snprintf(gp, sizeof(gp), "%s/lock", root);
	int other = open(gp, O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(other, 0);
	ck_assert_int_eq(flock(other, LOCK_EX | LOCK_NB), -1);
	ck_assert_int_eq(errno, EWOULDBLOCK);
	close(g);
	ck_assert_int_eq(flock(other, LOCK_EX | LOCK_NB), 0);
	close(other);
}
END_TEST

START_TEST(test_busy)
{
	struct rung_err err = {0};
	int fd = rt_store_lock_sandbox(&st, ID1, true, false, &err);
	ck_assert_int_ge(fd, 0);
	/* shared holders never create the file */
	ck_assert_int_eq(rt_store_busy(&st, ID1, false), -ENOENT);
	char p[4096];
	rt_store_path(&st, ID1, "busy", p, sizeof(p));
	ck_assert_int_eq(access(p, F_OK), -1);
	int x = rt_store_busy(&st, ID1, true);
	ck_assert_int_ge(x, 0);
	ck_assert_int_eq(rt_store_busy(&st, ID1, true), -EWOULDBLOCK);
	close(x);
	/* two shared holders; an exclusive one is refused until both are gone */
	int s1 = rt_store_busy(&st, ID1, false), s2 = rt_store_busy(&st, ID1, false);
	ck_assert(s1 >= 0 && s2 >= 0);
	ck_assert_int_eq(rt_store_busy(&st, ID1, true), -EWOULDBLOCK);
	close(s1);
	ck_assert_int_eq(rt_store_busy(&st, ID1, true), -EWOULDBLOCK);
	close(s2);
	x = rt_store_busy(&st, ID1, true);
	ck_assert_int_ge(x, 0);
	close(x);
	close(fd);
}
END_TEST

START_TEST(test_activity)
{
	struct rung_err err = {0};
	int fd = rt_store_lock_sandbox(&st, ID1, true, false, &err);
	ck_assert_int_ge(fd, 0);
	ck_assert_uint_eq(rt_store_activity_ms(&st, ID1), 0);
	rt_store_touch_activity(&st, ID1, false); /* without create: nothing appears */
	ck_assert_uint_eq(rt_store_activity_ms(&st, ID1), 0);
	uint64_t t0 = rung_wall_ms();
	rt_store_touch_activity(&st, ID1, true);
	uint64_t a = rt_store_activity_ms(&st, ID1);
	ck_assert_msg(a + 50 >= t0 && a <= rung_wall_ms() + 50, "activity %llu, now %llu",
		      (unsigned long long)a, (unsigned long long)t0);
	/* the mark is the busy file's mtime (no file of its own) */
	char p[4096], old_file[4096];
	rt_store_path(&st, ID1, "activity", old_file, sizeof(old_file));
	ck_assert_int_eq(access(old_file, F_OK), -1);
	/* an old mark moves forward on the next touch */
	rt_store_path(&st, ID1, "busy", p, sizeof(p));
	struct timespec old[2] = {{1000, 0}, {1000, 0}};
	ck_assert_int_eq(utimensat(AT_FDCWD, p, old, 0), 0);
	ck_assert_uint_eq(rt_store_activity_ms(&st, ID1), 1000000);
	rt_store_touch_activity(&st, ID1, false);
	ck_assert_uint_ge(rt_store_activity_ms(&st, ID1), t0 - 50);
	/* last use: the later of the file and the metadata's last_used_ms (a claim's) */
	struct rt_meta m;
	meta_fill(&m, ID1);
	m.last_used_ms = 7000;
	struct timespec five[2] = {{5, 0}, {5, 0}}, nine[2] = {{9, 0}, {9, 0}};
	ck_assert_int_eq(utimensat(AT_FDCWD, p, five, 0), 0);
	ck_assert_uint_eq(rt_store_used_ms(&st, &m), 7000);
	ck_assert_int_eq(utimensat(AT_FDCWD, p, nine, 0), 0);
	ck_assert_uint_eq(rt_store_used_ms(&st, &m), 9000);
	/* a store of an older version: its "activity" file counts too, the later one wins */
	int a_fd = open(old_file, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(a_fd, 0);
	close(a_fd);
	struct timespec eleven[2] = {{11, 0}, {11, 0}};
	ck_assert_int_eq(utimensat(AT_FDCWD, old_file, eleven, 0), 0);
	ck_assert_uint_eq(rt_store_used_ms(&st, &m), 11000);
	ck_assert_int_eq(unlink(old_file), 0);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_uint_eq(rt_store_used_ms(&st, &m), 7000); /* no file */
	rt_meta_release(&m);
	close(fd);
}
END_TEST

/* ---- the uid registry (root: the sandbox dir is chowned to the range's gid) ---------- */

static char reg[512];

static void uid_setup(void)
{
	setup();
	snprintf(reg, sizeof(reg), "%s/uid-slots", tmp);
	st.uid_registry = reg; /* as the router sets it (rung_router_opts.uid_registry) */
}

static void make_sandbox(const char *id)
{
	struct rung_err err = {0};
	int fd = rt_store_lock_sandbox(&st, id, true, false, &err);
	ck_assert_msg(fd >= 0, "%s", err.msg);
	close(fd);
}

static uint32_t alloc(const char *id, uint32_t had)
{
	struct rung_err err = {0};
	uint32_t base = had;
	ck_assert_msg(rt_store_alloc_uid(&st, id, &base, &err) == 0, "%s", err.msg);
	return base;
}

START_TEST(test_uid_alloc)
{
	RUNG_REQUIRE_ROOT();
	make_sandbox(ID1);
	make_sandbox(ID2);
	uint32_t b1 = alloc(ID1, 0), b2 = alloc(ID2, 0);
	ck_assert_uint_eq(b1, RT_UID_BASE0);
	ck_assert_uint_eq(b2, RT_UID_BASE0 + RT_UID_RANGE);
	/* the registry names the owner; the sandbox dir is root:<base> 0710; "uid" records it */
	char p[4096], *txt = NULL, want[4096];
	struct rung_err err = {0};
	snprintf(p, sizeof(p), "%s/0", reg);
	ck_assert_int_eq(rung_file_load(AT_FDCWD, p, 4096, &txt, NULL, &err), 0);
	snprintf(want, sizeof(want), "%s\n%s\n", root, ID1);
	ck_assert_str_eq(txt, want);
	free(txt);
	rt_store_path(&st, ID1, NULL, p, sizeof(p));
	struct stat s;
	ck_assert_int_eq(stat(p, &s), 0);
	ck_assert_uint_eq(s.st_uid, 0);
	ck_assert_uint_eq(s.st_gid, b1);
	ck_assert_uint_eq(s.st_mode & 07777, 0710);
	/* the base is the metadata's: no file of its own (an inode made and removed a start) */
	rt_store_path(&st, ID1, "uid", p, sizeof(p));
	ck_assert_int_eq(access(p, F_OK), -1);
	/* asking again keeps the slot it holds */
	ck_assert_uint_eq(alloc(ID1, 0), b1);
	ck_assert_uint_eq(alloc(ID2, b2), b2);
}
END_TEST

START_TEST(test_uid_release_and_reuse)
{
	RUNG_REQUIRE_ROOT();
	make_sandbox(ID1);
	make_sandbox(ID2);
	uint32_t b1 = alloc(ID1, 0), b2 = alloc(ID2, 0);
	/* release by someone else's id or a base below the ranges: nothing happens */
	char slot0[4096];
	snprintf(slot0, sizeof(slot0), "%s/0", reg);
	rt_store_release_uid(&st, ID2, b1);
	rt_store_release_uid(&st, ID1, 1000);
	ck_assert_int_eq(access(slot0, F_OK), 0);
	rt_store_release_uid(&st, ID1, b1);
	ck_assert_int_eq(access(slot0, F_OK), -1);
	/* a restart keeps the slot it holds, even with a lower one free */
	ck_assert_uint_eq(alloc(ID2, b2), b2);
	/* and after a release (or a reboot that emptied the registry) it wants its old range
	 * back (its kept files are owned by it) and gets it, though slot 0 is free */
	rt_store_release_uid(&st, ID2, b2);
	char slot1[4096];
	snprintf(slot1, sizeof(slot1), "%s/1", reg);
	ck_assert_int_eq(access(slot1, F_OK), -1);
	ck_assert_uint_eq(alloc(ID2, b2), b2);
	/* a new sandbox takes the first free slot */
	ck_assert_uint_eq(alloc(ID1, 0), RT_UID_BASE0);
	/* a slot whose owner's directory is gone is stale: the next new sandbox takes it */
	struct rung_err err = {0};
	char dir[4096];
	rt_store_path(&st, ID2, NULL, dir, sizeof(dir));
	ck_assert_int_eq(rung_rm_rf(dir, &err), 0);
	make_sandbox(ID3);
	ck_assert_uint_eq(alloc(ID3, 0), RT_UID_BASE0 + RT_UID_RANGE);
	char *txt = NULL, want[4096];
	ck_assert_int_eq(rung_file_load(AT_FDCWD, slot1, 4096, &txt, NULL, &err), 0);
	snprintf(want, sizeof(want), "%s\n%s\n", root, ID3);
	ck_assert_str_eq(txt, want);
	free(txt);
}
END_TEST

START_TEST(test_old_store_tightened)
{
	RUNG_REQUIRE_ROOT();
	/* what older versions left: world-listable dirs, one with a uid range recorded */
	make_sandbox(ID1);
	make_sandbox(ID2);
	char d1[4096], d2[4096], junk[4096], sb[1024], uidf[4096];
	rt_store_path(&st, ID1, NULL, d1, sizeof(d1));
	rt_store_path(&st, ID2, NULL, d2, sizeof(d2));
	rt_store_path(&st, ID2, "uid", uidf, sizeof(uidf));
	snprintf(sb, sizeof(sb), "%s/sandboxes", root);
	snprintf(junk, sizeof(junk), "%s/not-a-sandbox", sb);
	struct rung_err err = {0};
	char val[32];
	int vl = snprintf(val, sizeof(val), "%u", RT_UID_BASE0 + 7 * RT_UID_RANGE);
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, uidf, val, (size_t)vl, 0600, &err), 0);
	ck_assert_int_eq(mkdir(junk, 0755), 0);
	ck_assert_int_eq(chmod(d1, 0711), 0);
	ck_assert_int_eq(chmod(d2, 0755), 0);
	ck_assert_int_eq(chmod(sb, 0777), 0);
	char mark[4096];
	snprintf(mark, sizeof(mark), "%s/%s", root, RT_STORE_TIGHT);
	ck_assert_int_eq(access(mark, F_OK), 0); /* this version's pass ran at the first open */
	ck_assert_int_eq(unlink(mark), 0);        /* an older store has no such record */
	rt_store_close(&st);
	ck_assert_int_eq(rt_store_open(root, &st, &err), 0);
	ck_assert_int_eq(access(mark, F_OK), 0);
	ck_assert_uint_eq(mode_of(sb), 0711);
	ck_assert_uint_eq(mode_of(d1), 0700);
	ck_assert_uint_eq(mode_of(d2), 0710);
	struct stat s;
	ck_assert_int_eq(stat(d2, &s), 0);
	ck_assert_uint_eq(s.st_gid, RT_UID_BASE0 + 7 * RT_UID_RANGE);
	ck_assert_uint_eq(mode_of(junk), 0755); /* not ours: untouched */
}
END_TEST

Suite *runtime_store_suite(void)
{
	Suite *s = suite_create("runtime_store");
	TCase *tc = tcase_create("pure");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_open_layout);
	tcase_add_test(tc, test_open_refusals);
	tcase_add_test(tc, test_paths);
	tcase_add_test(tc, test_meta_read_write);
	tcase_add_test(tc, test_meta_exchange);
	tcase_add_test(tc, test_ids);
	tcase_add_test(tc, test_locks);
	tcase_add_test(tc, test_busy);
	tcase_add_test(tc, test_activity);
	suite_add_tcase(s, tc);
	TCase *tr = tcase_create("root");
	tcase_set_tags(tr, "root");
	tcase_add_checked_fixture(tr, uid_setup, teardown);
	tcase_add_test(tr, test_uid_alloc);
	tcase_add_test(tr, test_uid_release_and_reuse);
	tcase_add_test(tr, test_old_store_tightened);
	suite_add_tcase(s, tr);
	return s;
}
