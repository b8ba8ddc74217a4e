/*
 * tests/check_oci_vmbinds.c: the vm rung's file binds (oci/vm-binds.c) without KVM: which
 * mounts are accepted (the guest's own filesystems, a bind of a regular file within the
 * limits) and which refused naming mounts[i] (a directory, a fifo, a missing source, a file or
 * a total over the limits, a host filesystem); and where a copy lands: the agent's write
 * (agent_open_confined, what a copy into the guest runs, with the guest's root as its "/") in a
 * chroot standing in for the guest, whose destination is a link climbing out of the root, lands
 * inside it, or fails there. The chroot, like the VM, is what holds here: a host-side escape
 * through openat2's resolution is not what this shows (files.md's suites do).
 */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/util.h"
#include "oci/vm.h"
#include "tests/lib/testutil.h"

/* A config whose mounts are /proc's and then extra (JSON objects after a comma, or ""), parsed
 * with bundle dir; the vm rung's verdict. */
static int binds_check(const char *dir, const char *extra, struct rung_err *e)
{
	char t[8 * PATH_MAX];
	snprintf(t, sizeof(t),
		 "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\"},"
		 " \"process\": {\"args\": [\"/bin/true\"], \"cwd\": \"/\", \"user\": {\"uid\": 0, "
		 "\"gid\": 0}},"
		 " \"mounts\": [{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"}%s],"
		 " \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"ipc\"}, {\"type\": \"mount\"}]}}",
		 extra);
	struct oci_config c = {0};
	int r = oci_config_parse(t, strlen(t), dir, &c, e);
	ck_assert_msg(r == 0, "parse: %s", e->msg);
	r = oci_vm_config_check(&c, e);
	oci_config_release(&c);
	return r;
}

static void make_file(const char *dir, const char *name, off_t size)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, size), 0);
	close(fd);
}

/* ", {bind src on dst}" into buf; src relative: the bundle's. */
static const char *bind_json(char *buf, size_t n, const char *src, const char *dst)
{
	snprintf(buf, n, ", {\"destination\": \"%s\", \"type\": \"bind\", \"source\": \"%s\", "
		 "\"options\": [\"rbind\", \"ro\"]}", dst, src);
	return buf;
}

START_TEST(test_binds_accepted_and_refused)
{
	char *d = rung_test_tmpdir("vmbinds");
	char p[PATH_MAX], b[3 * PATH_MAX], all[16 * PATH_MAX];
	struct rung_err e = {0};
	make_file(d, "hosts", 40);
	make_file(d, "big", OCI_VM_BIND_MAX + 1);
	make_file(d, "max", OCI_VM_BIND_MAX);
	snprintf(p, sizeof(p), "%s/dir", d);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/fifo", d);
	ck_assert_int_eq(mkfifo(p, 0600), 0);

	/* the CRI's: files (absolute and the bundle's relative), /dev/shm as tmpfs */
	snprintf(p, sizeof(p), "%s/hosts", d);
	snprintf(all, sizeof(all), "%s", bind_json(b, sizeof(b), p, "/etc/hosts"));
	strcat(all, bind_json(b, sizeof(b), "hosts", "/etc/resolv.conf"));
	strcat(all, bind_json(b, sizeof(b), p, "/etc/hostname"));
	strcat(all, ", {\"destination\": \"/dev/shm\", \"type\": \"tmpfs\", \"source\": \"shm\"}");
	strcat(all, bind_json(b, sizeof(b), "dir", "/dev/shm")); /* an app container's */
	ck_assert_msg(binds_check(d, all, &e) == 0, "%s", e.msg);
	e = (struct rung_err){0};
	ck_assert_msg(binds_check(d, bind_json(b, sizeof(b), "max", "/m"), &e) == 0, "%s", e.msg);

	static const struct {
		const char *src, *dst, *want;
	} t[] = {
		{"fifo", "/f", "not a regular file or a directory"},
		{"missing", "/etc/hosts", "No such file"},
		{"big", "/etc/hosts", "at most 1048576 bytes"},
		{"hosts", "/", "destination"},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		e = (struct rung_err){0};
		ck_assert_msg(binds_check(d, bind_json(b, sizeof(b), t[i].src, t[i].dst), &e) < 0,
			      "case %zu accepted", i);
		ck_assert_msg(strstr(e.msg, "mounts[1]") && strstr(e.msg, t[i].want), "case %zu: %s",
			      i, e.msg);
	}
	/* five files of the most each: over the total, refused at the fifth */
	all[0] = '\0';
	for (int i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "/m%d", i);
		strcat(all, bind_json(b, sizeof(b), "max", p));
	}
	e = (struct rung_err){0};
	ck_assert_int_lt(binds_check(d, all, &e), 0);
	ck_assert_msg(strstr(e.msg, "mounts[5]") && strstr(e.msg, "in all"), "%s", e.msg);
	/* a host filesystem (not the guest's own, not a bind) */
	e = (struct rung_err){0};
	ck_assert_int_lt(binds_check(d, ", {\"destination\": \"/n\", \"type\": \"nfs\", \"source\": "
				     "\"h:/x\"}", &e), 0);
	ck_assert_msg(strstr(e.msg, "mounts[1]") && strstr(e.msg, "nfs"), "%s", e.msg);
	rung_rm_rf(d, &e);
	free(d);
}
END_TEST

/* The guest's copy: the agent's write in a root whose /etc/hostname is a link out of it lands
 * in the root; a link to an absent directory fails (-ENOENT); nothing is made beside it. */
START_TEST(test_copy_confined)
{
	RUNG_REQUIRE_ROOT();
	char *d = rung_test_tmpdir("vmbinds");
	char p[PATH_MAX];
	struct rung_err e = {0};
	snprintf(p, sizeof(p), "%s/root/etc", d);
	ck_assert_int_eq(rung_mkdir_p(p, 0755, &e), 0);
	snprintf(p, sizeof(p), "%s/root/etc/hostname", d);
	ck_assert_int_eq(symlink("../../../../../../../escaped", p), 0);
	snprintf(p, sizeof(p), "%s/root/etc/resolv.conf", d);
	ck_assert_int_eq(symlink("/../../newdir/resolv", p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char r[PATH_MAX];
		snprintf(r, sizeof(r), "%s/root", d);
		if (chroot(r) < 0 || chdir("/") < 0)
			_exit(2);
		/* hostname: made inside; resolv.conf: its target's directory is missing, refused */
		struct rung_err ce = {0};
		int fd = agent_open_confined("/etc/hostname", O_WRONLY | O_CREAT | O_TRUNC, 0444, 1,
					     &ce);
		if (fd < 0 || write(fd, "x\n", 2) != 2) {
			fprintf(stderr, "/etc/hostname: %s\n", ce.msg);
			_exit(3);
		}
		close(fd);
		if (agent_open_confined("/etc/resolv.conf", O_WRONLY | O_CREAT | O_TRUNC, 0444, 1,
					&ce) != -ENOENT)
			_exit(4);
		_exit(0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d", st);
	struct stat s;
	snprintf(p, sizeof(p), "%s/root/escaped", d);
	ck_assert_msg(stat(p, &s) == 0 && S_ISREG(s.st_mode), "%s not made inside", p);
	snprintf(p, sizeof(p), "%s/escaped", d);
	ck_assert_msg(access(p, F_OK) < 0, "%s made outside the root", p);
	ck_assert_int_eq(access("/escaped", F_OK), -1);
	ck_assert_int_eq(access("/newdir", F_OK), -1);
	ck_assert_int_eq(rung_test_count_entries(d), 1); /* root only */
	rung_rm_rf(d, &e);
	free(d);
}
END_TEST

Suite *oci_vmbinds_suite(void)
{
	Suite *s = suite_create("oci_vmbinds");
	TCase *tc = tcase_create("vmbinds");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_binds_accepted_and_refused);
	tcase_add_test(tc, test_copy_confined);
	suite_add_tcase(s, tc);
	return s;
}
