/*
 * tests/check_runtime_hostetc.c: runtime/hostetc.c, the process rung's prepared /etc, on a
 * stand-in host (a temporary directory's etc/): the tree holds the listed entries only (the
 * host's secrets never), directories, files and symlinks as on the host, modes whatever the
 * umask, fifos left out, and rung's files; an unchanged host gets the same tree back, not a
 * new copy; every kind of host change (a file edited in place, an entry added to a listed
 * directory, a listed entry appearing, a symlink retargeted) gives a new tree and leaves the
 * old one whole; a spec's own work dir or resolv.conf is not prepared (a copy each would fill
 * the disk); gc's sweep removes an old state's trees only once no sandbox can be using them,
 * and a crashed build after a minute. No root needed.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "runtime/rt-internal.h"
#include "tests/lib/testutil.h"

static char *tmp;
static char host[4096], state[4096];

static void put(const char *rel, const char *text)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s%s", host, rel);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void mk(const char *rel)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s%s", host, rel);
	ck_assert_int_eq(mkdir(p, 0755), 0);
}

static void setup(void)
{
	tmp = rung_test_tmpdir("hostetc");
	snprintf(host, sizeof(host), "%s/host", tmp);
	snprintf(state, sizeof(state), "%s/state", tmp);
	ck_assert_int_eq(mkdir(host, 0755), 0);
	ck_assert_int_eq(mkdir(state, 0711), 0);
	mk("/etc");
	mk("/etc/ssl");
	mk("/etc/ssl/certs");
	mk("/etc/python3");
	put("/etc/ld.so.cache", "cache");
	put("/etc/nsswitch.conf", "passwd: files\n");
	put("/etc/ssl/certs/ca-certificates.crt", "CERTS");
	put("/etc/python3/debian_config", "[install]\n");
	put("/etc/shadow", "root:SECRET:::::::\n");
	mk("/etc/ssl/private");
	put("/etc/ssl/private/key.pem", "KEY");
	char p[4200];
	snprintf(p, sizeof(p), "%s/etc/ssl/certs/abc.0", host);
	ck_assert_int_eq(symlink("ca-certificates.crt", p), 0);
	snprintf(p, sizeof(p), "%s/etc/localtime", host);
	ck_assert_int_eq(symlink("/usr/share/zoneinfo/Etc/UTC", p), 0);
	snprintf(p, sizeof(p), "%s/etc/ssl/certs/fifo", host);
	ck_assert_int_eq(mkfifo(p, 0644), 0);
}

static void teardown(void)
{
	struct rung_err err = {0};
	rung_rm_rf(tmp, &err);
	free(tmp);
}

static const struct rt_root_params params = {.work_dir = "/work", .host_system = true};

static void prepare(const struct rt_root_params *p, char *out)
{
	struct rung_err err = {0};
	ck_assert_msg(rt_host_etc_prepare(state, host, p, out, 4096, &err) == 0, "%s", err.msg);
}

static char *slurp(const char *dir, const char *rel)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	char *txt = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rung_file_load(AT_FDCWD, p, 1 << 20, &txt, NULL, &err) == 0, "%s", err.msg);
	return txt;
}

static bool exists(const char *dir, const char *rel)
{
	char p[8400];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return lstat(p, &st) == 0;
}

static ino_t ino(const char *path)
{
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	return st.st_ino;
}

START_TEST(test_tree_contents)
{
	mode_t old = umask(077); /* a root's umask must not make /etc unreadable inside */
	char t[4096];
	prepare(&params, t);
	umask(old);
	char *s = slurp(t, "ld.so.cache");
	ck_assert_str_eq(s, "cache");
	free(s);
	s = slurp(t, "ssl/certs/ca-certificates.crt");
	ck_assert_str_eq(s, "CERTS");
	free(s);
	char p[4200], link[256];
	snprintf(p, sizeof(p), "%s/ssl/certs/abc.0", t);
	ssize_t n = readlink(p, link, sizeof(link) - 1);
	ck_assert_int_gt(n, 0);
	link[n] = '\0';
	ck_assert_str_eq(link, "ca-certificates.crt");
	snprintf(p, sizeof(p), "%s/localtime", t);
	n = readlink(p, link, sizeof(link) - 1);
	ck_assert_int_gt(n, 0);
	link[n] = '\0';
	ck_assert_str_eq(link, "/usr/share/zoneinfo/Etc/UTC");
	/* rung's own files */
	s = slurp(t, "passwd");
	ck_assert_ptr_nonnull(strstr(s, "root:x:0:0:root:/work:/bin/sh"));
	free(s);
	s = slurp(t, "pip.conf");
	ck_assert_ptr_nonnull(strstr(s, "cert = /etc/ssl/certs/ca-certificates.crt"));
	free(s);
	ck_assert(exists(t, "group") && exists(t, "hosts") && exists(t, "hostname"));
	ck_assert(exists(t, "resolv.conf"));
	/* never the host's secrets, nor what is not a file, a directory or a link */
	ck_assert(!exists(t, "shadow"));
	ck_assert(!exists(t, "ssl/private"));
	ck_assert(!exists(t, "ssl/certs/fifo"));
	ck_assert(!exists(t, "timezone")); /* listed, absent on this host */
	struct stat st;
	const char *const dirs[] = {"", "/ssl", "/ssl/certs", "/python3"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(dirs); i++) {
		snprintf(p, sizeof(p), "%s%s", t, dirs[i]);
		ck_assert_int_eq(stat(p, &st), 0);
		ck_assert_msg((st.st_mode & 0777) == 0755, "%s: mode %o", p, st.st_mode & 0777);
	}
	snprintf(p, sizeof(p), "%s/nsswitch.conf", t);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0644);
	/* unchanged: the same tree, not a new copy */
	char t2[4096];
	ino_t before = ino(t);
	prepare(&params, t2);
	ck_assert_str_eq(t, t2);
	ck_assert_uint_eq(ino(t2), before);
}
END_TEST

/* prepare after a change: a new tree, the old one (a running sandbox's) whole */
static void changed(char *prev)
{
	char t[4096];
	prepare(&params, t);
	ck_assert_str_ne(t, prev);
	ck_assert(exists(prev, "ld.so.cache"));
	strcpy(prev, t);
}

START_TEST(test_changes_seen)
{
	char t[4096], first[4096];
	prepare(&params, t);
	strcpy(first, t);
	char p[4200];
	/* a file below a listed directory edited in place (its directory unchanged) */
	snprintf(p, sizeof(p), "%s/etc/python3/debian_config", host);
	FILE *f = fopen(p, "a");
	fputs("x\n", f);
	fclose(f);
	changed(t);
	char *s = slurp(t, "python3/debian_config");
	ck_assert_str_eq(s, "[install]\nx\n");
	free(s);
	/* an entry added to a listed directory */
	put("/etc/ssl/certs/new.pem", "NEW");
	changed(t);
	ck_assert(exists(t, "ssl/certs/new.pem"));
	/* a listed entry that was absent appears */
	put("/etc/timezone", "Etc/UTC\n");
	changed(t);
	ck_assert(exists(t, "timezone"));
	/* a symlink retargeted (replaced, as ln -sf does) */
	snprintf(p, sizeof(p), "%s/etc/localtime", host);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(symlink("/usr/share/zoneinfo/Europe/Paris", p), 0);
	changed(t);
	/* a listed file edited in place, same size (a clock tick later: timestamps are the
	 * kernel's coarse clock) */
	usleep(20 * 1000);
	snprintf(p, sizeof(p), "%s/etc/ld.so.cache", host);
	f = fopen(p, "r+");
	fputs("CACHE", f);
	fclose(f);
	changed(t);
	s = slurp(t, "ld.so.cache");
	ck_assert_str_eq(s, "CACHE");
	free(s);
	s = slurp(first, "ld.so.cache");
	ck_assert_str_eq(s, "cache");
	free(s);
	/* another work dir, hostname or a resolv.conf: not prepared (a copy per spec would
	 * fill the disk) */
	struct rt_root_params other = params;
	other.work_dir = "/src";
	char v[4096];
	struct rung_err err = {0};
	ck_assert_int_eq(rt_host_etc_prepare(state, host, &other, v, sizeof(v), &err), -ENOTSUP);
	other = params;
	other.resolv_conf = "nameserver 10.0.0.1\n";
	ck_assert_int_eq(rt_host_etc_prepare(state, host, &other, v, sizeof(v), &err), -ENOTSUP);
	other.resolv_conf = "";
	prepare(&other, v);
	ck_assert_str_eq(v, t);
}
END_TEST

static void age(const char *path, int seconds)
{
	struct timeval tv[2] = {{time(NULL) - seconds, 0}, {time(NULL) - seconds, 0}};
	ck_assert_int_eq(utimes(path, tv), 0);
}

START_TEST(test_sweep)
{
	char old[4096], cur[4096], p[4200];
	char crashed[4200], fresh[4200];
	prepare(&params, old);
	put("/etc/nsswitch.conf", "passwd: files systemd\n");
	prepare(&params, cur);
	ck_assert_str_ne(old, cur);
	snprintf(p, sizeof(p), "%s/etc/host", state);
	age(p, 10); /* the state switched 10 s ago */
	uint64_t now = rung_wall_ms();
	/* a sandbox whose metadata was not read (being made) may hold any tree */
	ck_assert_uint_eq(rt_host_etc_sweep(state, false, UINT64_MAX), 0);
	/* a sandbox created before the switch may hold the old one */
	ck_assert_uint_eq(rt_host_etc_sweep(state, true, now - 60000), 0);
	ck_assert(exists(old, "ld.so.cache"));
	/* a crashed build: removed after a minute, not before */
	snprintf(crashed, sizeof(crashed), "%s/etc/.new-1-1", state);
	snprintf(fresh, sizeof(fresh), "%s/etc/.new-2-2", state);
	ck_assert_int_eq(mkdir(crashed, 0700), 0);
	ck_assert_int_eq(mkdir(fresh, 0700), 0);
	age(crashed, 120);
	/* every live sandbox created after the switch: the old state's trees go */
	ck_assert_uint_eq(rt_host_etc_sweep(state, true, now - 1000), 2);
	ck_assert(!exists(old, "."));
	ck_assert(!exists(crashed, "."));
	ck_assert(exists(fresh, "."));
	ck_assert(exists(cur, "ld.so.cache"));
	/* and the current one is used again, not rebuilt */
	char again[4096];
	prepare(&params, again);
	ck_assert_str_eq(again, cur);
}
END_TEST

Suite *runtime_hostetc_suite(void)
{
	Suite *s = suite_create("runtime_hostetc");
	TCase *tc = tcase_create("hostetc");
	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_tree_contents);
	tcase_add_test(tc, test_changes_seen);
	tcase_add_test(tc, test_sweep);
	suite_add_tcase(s, tc);
	return s;
}
