/*
 * tests/check_e2e_cli_runspare.c: spare disk images (runtime/diskimg.c). An owned run's
 * hand-off child leaves copies of its disk's template in `<store>/disks/` (two slots per
 * size, byte for byte the template, no other file); the next start takes one instead of
 * copying (traced "disk: spare taken"), and what it gets is a fresh filesystem: nothing of an
 * earlier run, no lost+found (removed from the template once; a template that has one, each
 * mount removes it). Concurrent starts never share one image, and a slot that is a
 * symbolic link or of the wrong size is never taken. A supervised sandbox's supervisor fills
 * the slots as well, once its sandbox runs; one filler works at a time. Tagged "root".
 *
 * The runs have a 96 MiB disk over 64 MiB of memory: an ext4 image (a disk the memory limit
 * covers would be a tmpfs), small enough to compare with the template.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

#define DISK_BYTES (96ull << 20)

static char *state_dir(const char *tag)
{
	char *d;
	ck_assert_int_ge(asprintf(&d, "%s/spare-%s-%d", spine_base(), tag, (int)getpid()), 0);
	return d;
}

static void disk_file(const char *sd, const char *what, char out[static 4096])
{
	snprintf(out, 4096, "%s/disks/ext4-%llu.%s", sd, DISK_BYTES, what);
}

/* `rung --state-dir SD run --memory 64M --disk 96M -- /bin/sh -c SCRIPT`, traced to stderr. */
static void run_sh(struct spine_run *r, const char *sd, const char *script)
{
	const char *const a[] = {"--state-dir", sd, "run", "--memory", "64M", "--disk", "96M",
				 "--", "/bin/sh", "-c", script, NULL};
	const char *const env[] = {"RUNG_TRACE=1", NULL};
	spine_cli_run_env(r, NULL, a, env);
}

/* The two slots' paths. */
static void slots(const char *sd, char s0[static 4096], char s1[static 4096])
{
	disk_file(sd, "spare0.img", s0);
	disk_file(sd, "spare1.img", s1);
}

/* Both slots present within 5 s (the hand-off child fills them after the CLI returned). */
static void wait_spares(const char *sd)
{
	char s0[4096], s1[4096];
	slots(sd, s0, s1);
	for (int i = 0; i < 50 && (access(s0, F_OK) || access(s1, F_OK)); i++)
		usleep(100000);
	ck_assert_msg(access(s0, F_OK) == 0 && access(s1, F_OK) == 0, "no spares in %s/disks", sd);
}

/* A fresh store (its directory returned) whose first run left both spares. */
static char *store_with_spares(const char *tag)
{
	char *sd = state_dir(tag);
	struct spine_run r;
	run_sh(&r, sd, "true");
	ck_assert_msg(r.status == 0, "%s", r.err);
	spine_run_release(&r);
	wait_spares(sd);
	return sd;
}

static ino_t inode_of(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_ino : 0;
}

/* Marks a slot's file (its mtime set to 2001-01-01; inode numbers are reused at once). */
static void mark(const char *path)
{
	const struct timespec t[2] = {{978307200, 0}, {978307200, 0}};
	ck_assert_int_eq(utimensat(AT_FDCWD, path, t, 0), 0);
}

static bool marked(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && st.st_mtim.tv_sec == 978307200;
}

/* Do files a and b hold the same bytes? */
static bool same_bytes(const char *a, const char *b)
{
	FILE *fa = fopen(a, "r"), *fb = fopen(b, "r");
	ck_assert_ptr_nonnull(fa);
	ck_assert_ptr_nonnull(fb);
	static char ba[1 << 16], bb[1 << 16];
	bool same = true;
	for (;;) {
		size_t na = fread(ba, 1, sizeof(ba), fa), nb = fread(bb, 1, sizeof(bb), fb);
		if (na != nb || memcmp(ba, bb, na)) {
			same = false;
			break;
		}
		if (na == 0)
			break;
	}
	fclose(fa);
	fclose(fb);
	return same;
}

/* A run leaves two spares equal to the template and nothing else in disks/; the next run
 * takes one (and it is replaced), and sees an empty work dir: not the marker the first run
 * wrote, not mkfs's lost+found. */
START_TEST(test_spares_made_taken_fresh)
{
	RUNG_REQUIRE_ROOT();
	char *sd = state_dir("taken");
	struct spine_run r;
	run_sh(&r, sd, "echo one > marker && sync && ls -A");
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_msg(!strstr(r.err, "disk: spare taken"), "a fresh store had a spare: %s", r.err);
	spine_run_release(&r);
	wait_spares(sd);
	char tpl[4096], s0[4096], s1[4096], dir[4096];
	disk_file(sd, "img", tpl);
	slots(sd, s0, s1);
	ck_assert(same_bytes(tpl, s0));
	/* The template has no lost+found to remove at each mount (debugfs removed it once). */
	if (access("/sbin/debugfs", X_OK) == 0) {
		char cmd[4200], ls[4096] = "";
		snprintf(cmd, sizeof(cmd), "/sbin/debugfs -R 'ls -p /' '%s' 2>/dev/null", tpl);
		FILE *p = popen(cmd, "r");
		ck_assert_ptr_nonnull(p);
		size_t n = fread(ls, 1, sizeof(ls) - 1, p);
		ls[n] = '\0';
		ck_assert_int_eq(pclose(p), 0);
		ck_assert_msg(strstr(ls, "/.."), "debugfs listed no root: %s", ls);
		ck_assert_msg(!strstr(ls, "lost+found"), "the template has a lost+found: %s", ls);
	} else {
		fprintf(stderr, "*** no /sbin/debugfs: the template's lost+found unchecked ***\n");
	}
	ck_assert(same_bytes(tpl, s1));
	snprintf(dir, sizeof(dir), "%s/disks", sd);
	/* template, its mark (no lost+found there: later mounts skip the removal), lock, two
	 * spares */
	char tmark[4200];
	snprintf(tmark, sizeof(tmark), "%s.empty-%llu", tpl, (unsigned long long)inode_of(tpl));
	ck_assert_msg(access(tmark, F_OK) == 0, "no mark %s", tmark);
	ck_assert_int_eq(rung_test_count_entries(dir), 5);
	mark(s0);
	mark(s1);

	run_sh(&r, sd, "ls -A; echo end");
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_msg(strstr(r.err, "disk: spare taken"), "no spare taken: %s", r.err);
	ck_assert_str_eq(r.out, "end\n");
	spine_run_release(&r);
	wait_spares(sd);
	ck_assert_msg(marked(s0) != marked(s1), "not one slot was taken and refilled");
	ck_assert(same_bytes(tpl, s0));
	ck_assert_int_eq(rung_test_count_entries(dir), 5);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	free(sd);
}
END_TEST

/* Eight runs at once, two spares: each run's work dir holds only the file it wrote (no two
 * attached the same image), and at least one took a spare. */
START_TEST(test_concurrent_starts)
{
	RUNG_REQUIRE_ROOT();
	char *sd = store_with_spares("conc");
	struct spine_run r;
	enum { N = 8 };
	pid_t kids[N];
	for (int i = 0; i < N; i++) {
		kids[i] = fork();
		ck_assert_int_ge(kids[i], 0);
		if (kids[i] == 0) {
			run_sh(&r, sd, "echo $$ > \"f$$\"; sleep 0.5; ls -A | wc -l");
			int code = r.status != 0 ? 1 : strcmp(r.out, "1\n") ? 2 : 0;
			if (code)
				fprintf(stderr, "run %d: status %d out %s err %s\n", i, r.status,
					r.out, r.err);
			_exit(code ? code : strstr(r.err, "disk: spare taken") ? 10 : 11);
		}
	}
	int took = 0;
	for (int i = 0; i < N; i++) {
		int st;
		ck_assert_int_eq(waitpid(kids[i], &st, 0), kids[i]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) >= 10, "run %d failed (%d)", i, st);
		took += WEXITSTATUS(st) == 10;
	}
	ck_assert_int_ge(took, 1);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	free(sd);
}
END_TEST

/* A slot that is a symbolic link (to a file the run must not get) or of the wrong size is not
 * taken: the run copies the template, and both slots stay as they were. */
START_TEST(test_bad_slots_skipped)
{
	RUNG_REQUIRE_ROOT();
	char *sd = store_with_spares("bad");
	struct spine_run r;
	char s0[4096], s1[4096], other[4096];
	slots(sd, s0, s1);
	snprintf(other, sizeof(other), "%s/not-a-disk", sd);
	ck_assert_int_eq(rename(s0, other), 0); /* a whole image, but no slot's own file */
	ck_assert_int_eq(symlink(other, s0), 0);
	ck_assert_int_eq(truncate(s1, DISK_BYTES / 2), 0);
	ino_t i1 = inode_of(s1);
	run_sh(&r, sd, "ls -A; echo end");
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_msg(!strstr(r.err, "disk: spare taken"), "a bad slot was taken: %s", r.err);
	ck_assert_msg(strstr(r.err, "disk: image ready"), "no copy made: %s", r.err);
	ck_assert_str_eq(r.out, "end\n");
	spine_run_release(&r);
	struct stat st;
	ck_assert_int_eq(lstat(s0, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_int_eq(inode_of(s1), i1);
	ck_assert_int_eq(stat(other, &st), 0);
	ck_assert_uint_eq((unsigned long long)st.st_size, DISK_BYTES);
	free(sd);
}
END_TEST

/* `rung acquire` of a supervised sandbox in scope s, thread thread, with the runs' limits. */
static void acquire(const char *sd, const char *thread)
{
	struct spine_run r;
	const char *const a[] = {"--state-dir", sd, "--json", "acquire", "--memory", "64M",
				 "--disk", "96M", "--scope", "s", "--thread", thread, "--agent",
				 "a", NULL};
	spine_cli_run(&r, NULL, a);
	ck_assert_msg(r.status == 0, "%s", r.err);
	spine_run_release(&r);
}

/* A supervised sandbox (`rung acquire`) takes a spare too, and its supervisor refills the
 * slots once the sandbox runs: a store that only ever had supervised sandboxes has them. */
START_TEST(test_supervised_fills_and_takes)
{
	RUNG_REQUIRE_ROOT();
	char *sd = state_dir("sup");
	struct spine_run r;
	acquire(sd, "t");
	wait_spares(sd);
	char s0[4096], s1[4096];
	slots(sd, s0, s1);
	mark(s0);
	mark(s1);
	acquire(sd, "t2");
	wait_spares(sd); /* the supervisor traces to its log: the slots say what it took */
	ck_assert_msg(marked(s0) != marked(s1), "not one slot was taken and refilled");
	const char *const d[] = {"--state-dir", sd, "dispose-scope", "--scope", "s", NULL};
	spine_cli_run(&r, NULL, d);
	ck_assert_msg(r.status == 0, "%s", r.err);
	spine_run_release(&r);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	free(sd);
}
END_TEST

/* One filler at a time: while `disks/lock` is held (here, by the test), a run's hand-off
 * child does not refill the slot its run took; once it is free, the next run's child does. */
START_TEST(test_one_filler_at_a_time)
{
	RUNG_REQUIRE_ROOT();
	char *sd = store_with_spares("lock");
	char s0[4096], s1[4096], lockp[4096];
	slots(sd, s0, s1);
	snprintf(lockp, sizeof(lockp), "%s/disks/lock", sd);
	int lock = open(lockp, O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(lock, 0);
	ck_assert_int_eq(flock(lock, LOCK_EX), 0);
	struct spine_run r;
	run_sh(&r, sd, "true");
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_msg(strstr(r.err, "disk: spare taken"), "no spare taken: %s", r.err);
	spine_run_release(&r);
	usleep(1000000); /* the hand-off child has long finished (it does not wait) */
	ck_assert_int_eq(!access(s0, F_OK) + !access(s1, F_OK), 1);
	close(lock);
	run_sh(&r, sd, "true");
	ck_assert_msg(r.status == 0, "%s", r.err);
	spine_run_release(&r);
	wait_spares(sd);
	free(sd);
}
END_TEST

/* A template that still has mkfs's lost+found (a host without debugfs, or a store from
 * before it): each mount removes it, the work dir is empty, and no mark says otherwise. */
START_TEST(test_template_with_lost_found)
{
	RUNG_REQUIRE_ROOT();
	const char *mkfs = access("/sbin/mkfs.ext4", X_OK) == 0 ? "/sbin/mkfs.ext4"
								: "/usr/sbin/mkfs.ext4";
	char *sd = state_dir("lf");
	char dir[4096], tpl[4096], size[32];
	snprintf(dir, sizeof(dir), "%s/disks", sd);
	ck_assert_int_eq(rung_test_run((const char *const[]){"mkdir", "-p", dir, NULL}, NULL, 0),
			 0);
	disk_file(sd, "img", tpl);
	snprintf(size, sizeof(size), "%lluk", DISK_BYTES >> 10);
	const char *const mk[] = {mkfs, "-q", "-F", "-m", "0", "-O", "^has_journal,^resize_inode",
				  tpl, size, NULL};
	ck_assert_int_eq(rung_test_run(mk, NULL, 0), 0);
	for (int i = 0; i < 3; i++) { /* the copy of the template, then the spares */
		struct spine_run r;
		run_sh(&r, sd, "ls -A; echo end");
		ck_assert_msg(r.status == 0, "%s", r.err);
		ck_assert_str_eq(r.out, "end\n");
		spine_run_release(&r);
		wait_spares(sd);
	}
	char tmark[4200];
	snprintf(tmark, sizeof(tmark), "%s.empty-%llu", tpl, (unsigned long long)inode_of(tpl));
	ck_assert_int_ne(access(tmark, F_OK), 0);
	free(sd);
}
END_TEST

Suite *e2e_cli_runspare_suite(void)
{
	Suite *s = suite_create("e2e_cli_runspare");
	TCase *tc = spine_tcase(s, "spare", 300);
	tcase_add_test(tc, test_spares_made_taken_fresh);
	tcase_add_test(tc, test_concurrent_starts);
	tcase_add_test(tc, test_bad_slots_skipped);
	tcase_add_test(tc, test_supervised_fills_and_takes);
	tcase_add_test(tc, test_one_filler_at_a_time);
	tcase_add_test(tc, test_template_with_lost_found);
	return s;
}
