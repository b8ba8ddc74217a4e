/*
 * tests/check_e2e_ladder_probes.c: every probe of rung-probe can detect an escape. The whole
 * battery runs in a deliberately weakened setting (tests/lib/ladder.h, lt_run_weak: host
 * root, the host's namespaces, no seccomp, no cgroup, an ambient capability, a host bind
 * mount), where each probe must report escaped, checked on the host by the ladder's own code.
 * A probe whose facility this host's kernel lacks (the ladder's host check makes it n/a,
 * "this host has no ...") cannot escape here whatever the setting: it is named on stderr
 * (docs/ladder.md lists them for the development host), and every other probe must escape.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/ladder.h"
#include "tests/lib/ladder.h"
#include "tests/lib/testutil.h"

START_TEST(test_every_probe_escapes_when_weakened)
{
	RUNG_REQUIRE_ROOT();
	static struct lt_outcome out[LT_MAX];
	size_t n = lt_list(out, LT_MAX);
	ck_assert_msg(n >= 50, "rung-probe --list: %zu probes (want at least 50)", n);
	char why[512] = "";
	ck_assert_msg(lt_run_weak(out, n, why, sizeof(why)), "weakened run: %s", why);
	char failed[8192] = "";
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(out[i].result, "escaped"))
			continue;
		/* n/a from the ladder's host check: this host's kernel lacks the facility
		 * (docs/ladder.md, "n/a"), so nothing here can escape through it */
		if (!strcmp(out[i].result, "n/a") &&
		    !strncmp(out[i].evidence, "this host has ", 14)) {
			char skip[1024];
			snprintf(skip, sizeof(skip), "%s cannot escape on this host: %s",
				 out[i].name, out[i].evidence);
			rung_test_skip(__func__, skip);
			continue;
		}
		at += (size_t)snprintf(failed + at, sizeof(failed) - at, "\n  %s: %s (%s)",
				       out[i].name, out[i].result, out[i].evidence);
		if (at >= sizeof(failed))
			break;
	}
	ck_assert_msg(!failed[0], "probes that did not report an escape when weakened:%s", failed);
}
END_TEST

START_TEST(test_probe_refuses_outside)
{
	/* no context file in the working directory: it refuses, whatever the token */
	char *d = rung_test_tmpdir("probe");
	ck_assert_ptr_nonnull(d);
	const char *script = "cd \"$1\" && \"$2\" --token $3 fs.host_marker_write >out 2>err; "
			     "echo $?; cat err";
	const char *tok = "0123456789abcdef0123456789abcdef";
	const char *argv[] = {"sh", "-c", script, "sh", d, lt_probe_bin(), tok, NULL};
	char buf[512];
	ck_assert_int_eq(rung_test_run(argv, buf, sizeof(buf)), 0);
	ck_assert_msg(!strncmp(buf, "3\n", 2), "%s", buf);
	/* a context whose token differs: refused too */
	char ctx[PATH_MAX];
	snprintf(ctx, sizeof(ctx), "%s/rung-probe.ctx", d);
	FILE *f = fopen(ctx, "w");
	ck_assert_ptr_nonnull(f);
	fputs("token=ffffffffffffffffffffffffffffffff\n", f);
	fclose(f);
	ck_assert_int_eq(rung_test_run(argv, buf, sizeof(buf)), 0);
	ck_assert_msg(!strncmp(buf, "3\n", 2) && strstr(buf, "token does not match"), "%s", buf);
	ck_assert_int_eq(rung_test_rmtree(d), 0);
	free(d);
}
END_TEST

/*
 * A stand-in VMM for vm.vmm_jail's host check: jailed (a filter that allows everything, as
 * only its presence is checked; no_new_privs; new mnt/pid/net/ipc/uts namespaces (the pid
 * one through a fork); a chroot; uid 65534), or with the parts in `skip` left out ("filter",
 * "net"). Its host pid; it pauses until killed, with its parent (*outer) waiting on it.
 */
static pid_t stand_in(const char *skip, const char *root, pid_t *outer)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	*outer = fork();
	ck_assert_int_ge(*outer, 0);
	if (*outer == 0) {
		bool jail = !strstr(skip, "all");
		int fl = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
			 (strstr(skip, "net") ? 0 : CLONE_NEWNET);
		if (jail && unshare(fl) < 0)
			_exit(1);
		pid_t in = fork();
		if (in == 0) {
			struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
			struct sock_fprog prog = {1, &allow};
			if (jail && (chroot(root) < 0 || chdir("/") < 0 ||
				     prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
				     setgid(65534) < 0 || setuid(65534) < 0))
				_exit(1);
			if (jail && !strstr(skip, "filter") &&
			    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
				_exit(1);
			for (;;)
				pause();
		}
		if (write(p[1], &in, sizeof(in)) != sizeof(in))
			_exit(1);
		waitpid(in, NULL, 0);
		_exit(0);
	}
	close(p[1]);
	pid_t in = 0;
	ck_assert_int_eq(read(p[0], &in, sizeof(in)), sizeof(in));
	close(p[0]);
	usleep(200000); /* jailed and paused by now */
	return in;
}

static void check_stand_in(const char *skip, const char *root, const char *want,
			   const char *names)
{
	pid_t outer, pid = stand_in(skip, root, &outer);
	char res[16], ev[700];
	ck_assert_int_eq(ladder_vmm_check(pid, res, sizeof(res), ev, sizeof(ev)), 0);
	kill(pid, SIGKILL);
	waitpid(outer, NULL, 0);
	ck_assert_msg(!strcmp(res, want), "%s: %s, want %s (%s)", skip, res, want, ev);
	ck_assert_msg(!names || strstr(ev, names), "%s: evidence '%s' lacks '%s'", skip, ev, names);
}

START_TEST(test_vmm_jail_check)
{
	RUNG_REQUIRE_ROOT();
	char *root = rung_test_tmpdir("vmm-jail");
	ck_assert_ptr_nonnull(root);
	check_stand_in("", root, "blocked", "Seccomp: 2");
	check_stand_in("filter", root, "escaped", "no seccomp filter (Seccomp: 0)");
	check_stand_in("net", root, "escaped", "the host's net namespace");
	check_stand_in("all", root, "escaped", "the host's root directory");
	/* no such process: n/a, never blocked */
	char res[16], ev[700];
	ck_assert_int_eq(ladder_vmm_check(0x3fffffff, res, sizeof(res), ev, sizeof(ev)), -ESRCH);
	ck_assert_str_eq(res, "n/a");
	rmdir(root);
	free(root);
}
END_TEST

/* ladder_vmm_find: a process whose argv[0] is rung-vmm, chrooted into .../ID/jail (here a
 * static rung-probe --sibling, which idles), is found by ID; another ID finds nothing. */
START_TEST(test_vmm_find)
{
	RUNG_REQUIRE_ROOT();
	char *d = rung_test_tmpdir("vmm-find");
	ck_assert_ptr_nonnull(d);
	char jail[PATH_MAX];
	snprintf(jail, sizeof(jail), "%s/0123abcd/jail", d);
	ck_assert_int_eq(rung_test_sh("mkdir -p \"$1\" && cp \"$2\" \"$1/rung-probe\" && "
				      "echo token=$3 > \"$1/rung-probe.ctx\"",
				      jail, lt_probe_bin(), "0123456789abcdef0123456789abcdef", NULL),
			 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (chroot(jail) < 0 || chdir("/") < 0)
			_exit(1);
		execl("/rung-probe", "rung-vmm", "--token", "0123456789abcdef0123456789abcdef",
		      "--sibling", "vmm-find", "0", (char *)NULL);
		_exit(127);
	}
	pid_t got = 0;
	for (int i = 0; i < 100 && !got; i++, usleep(20000))
		got = ladder_vmm_find("0123abcd");
	pid_t other = ladder_vmm_find("0123abc");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ck_assert_int_eq(got, pid);
	ck_assert_int_eq(other, 0);
	ck_assert_int_eq(rung_test_rmtree(d), 0);
	free(d);
}
END_TEST

Suite *e2e_ladder_probes_suite(void)
{
	Suite *s = suite_create("e2e_ladder_probes");
	TCase *tc = tcase_create("weakened");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_every_probe_escapes_when_weakened);
	suite_add_tcase(s, tc);
	tc = tcase_create("vmm_jail");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_vmm_jail_check);
	tcase_add_test(tc, test_vmm_find);
	suite_add_tcase(s, tc);
	tc = tcase_create("refuse");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_probe_refuses_outside);
	suite_add_tcase(s, tc);
	return s;
}
