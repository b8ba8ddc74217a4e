/*
 * tests/check_e2e_cli_refused.c: `rung run` where the kernel refuses the sandbox's namespaces
 * says why (common/nshint.c): run in a chroot (a bind of / in a mount namespace of the test's
 * child, gone with it; once more below pid 1 of a pid namespace of its own, whose root rung can
 * compare with its own), and under a container runtime's style of seccomp profile (clone with
 * CLONE_NEWUSER and unshare refused with EPERM, clone3 with ENOSYS, as Docker's default profile
 * does to a container without CAP_SYS_ADMIN; with an egress allowlist too; and in a mount
 * namespace of its own, which must not read as a chroot).
 * Each fails cleanly: exit 1, the clone's error and its cause on stderr, an empty store.
 * Tagged "root".
 */
#include <check.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/nshint.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

static char jail[4096];

/* A mount namespace of our own, made private (nothing of ours reaches the host). */
static bool private_mounts(int more_flags)
{
	return unshare(CLONE_NEWNS | more_flags) == 0 &&
	       mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
}

/* / bound at jail, then chrooted there: the same files at the same paths (build/rung and the
 * store are where the test made them). */
static bool bind_and_chroot(void)
{
	return mount("/", jail, NULL, MS_BIND | MS_REC, NULL) == 0 && chroot(jail) == 0 &&
	       chdir("/") == 0;
}

/* In the child: a mount namespace of its own, chrooted as above. */
static bool into_chroot(void) { return private_mounts(0) && bind_and_chroot(); }

/* Forks: the parent waits and exits with the child's exit status (as spine_cli_run_prep
 * reads rung's), 125 where there is none; the child returns. */
static void hand_down(void)
{
	pid_t pid = fork();
	if (pid < 0)
		_exit(125);
	if (pid > 0) {
		int st;
		_exit(waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : 125);
	}
}

/* In the child: the same chroot below pid 1 of a new pid namespace with its own /proc, so that
 * pid 1's root is there to compare with (this project's hosts keep theirs from us): pid 1
 * stays outside the chroot and waits; its child goes in and runs rung. */
static bool into_chroot_pidns(void)
{
	if (!private_mounts(CLONE_NEWPID))
		return false;
	hand_down(); /* from here: pid 1 */
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		_exit(125);
	hand_down(); /* from here: pid 1's child */
	return bind_and_chroot();
}

/* In the child: what Docker's default profile does to a container without CAP_SYS_ADMIN. */
static bool under_profile(void)
{
	scmp_filter_ctx c = seccomp_init(SCMP_ACT_ALLOW);
	struct scmp_arg_cmp userns = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER);
	bool ok = c &&
		  seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, userns) == 0 &&
		  seccomp_rule_add(c, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) == 0 &&
		  seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 0) == 0 &&
		  seccomp_attr_set(c, SCMP_FLTATR_CTL_NNP, 1) == 0 && seccomp_load(c) == 0;
	seccomp_release(c);
	return ok;
}

/* The same in a mount namespace of its own, not chrooted (a systemd service's PrivateTmp=):
 * its mounts are copies with ids of their own, which must not read as a chroot. */
static bool own_mntns_under_profile(void) { return private_mounts(0) && under_profile(); }

/* rung run [--allow allow] -- /bin/true with prep in its child: step refused, with its cause,
 * the message whole, the store empty. */
static void refused_at(bool (*prep)(void), const char *allow, const char *step, const char *cause)
{
	char *sd;
	ck_assert_int_ge(asprintf(&sd, "%s/refused-state-%d", spine_base(), (int)getpid()), 0);
	struct spine_run r;
	const char *const plain[] = {"--state-dir", sd, "run", "--", "/bin/true", NULL};
	const char *const egress[] = {"--state-dir", sd,   "run",	"--allow",
				      allow,	     "--", "/bin/true", NULL};
	spine_cli_run_prep(&r, NULL, allow ? egress : plain, NULL, prep);
	ck_assert_msg(r.status == 1, "status %d, stderr: %s", r.status, r.err);
	char said[200];
	snprintf(said, sizeof(said), "%s: Operation not permitted (", step);
	ck_assert_msg(strstr(r.err, said), "no '%s' in: %s", said, r.err);
	ck_assert_msg(strstr(r.err, cause), "no '%s' in: %s", cause, r.err);
	size_t n = strlen(r.err); /* whole: not cut at the error's 256 bytes */
	ck_assert_msg(n >= 2 && !strcmp(r.err + n - 2, ")\n"), "cut short: %s", r.err);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	spine_run_release(&r);
	free(sd);
}

static void refused(bool (*prep)(void), const char *cause)
{
	refused_at(prep, NULL, "clone the sandbox's namespaces", cause);
}

START_TEST(test_chroot)
{
	RUNG_REQUIRE_ROOT();
	snprintf(jail, sizeof(jail), "%s/jail", spine_base());
	ck_assert_int_eq(mkdir(jail, 0700), 0);
	/* "in a chroot": named as the likely cause (the chroot is in a mount namespace of its
	 * own, not pid 1's: rung cannot compare roots; test_chroot_found does) */
	refused(into_chroot, "in a chroot");
	ck_assert_int_eq(rmdir(jail), 0); /* nothing stayed mounted on it */
}
END_TEST

START_TEST(test_chroot_found)
{
	RUNG_REQUIRE_ROOT();
	snprintf(jail, sizeof(jail), "%s/jail", spine_base());
	ck_assert_int_eq(mkdir(jail, 0700), 0);
	refused(into_chroot_pidns, "rung is in a chroot (its / is not pid 1's)");
	ck_assert_int_eq(rmdir(jail), 0);
}
END_TEST

START_TEST(test_seccomp_profile)
{
	RUNG_REQUIRE_ROOT();
	refused(under_profile, "seccomp filter (Seccomp: 2 in /proc/self/status)");
	/* with an egress allowlist its network namespace comes first, by unshare */
	refused_at(under_profile, "192.0.2.1", "create a network namespace",
		   "seccomp filter (Seccomp: 2 in /proc/self/status)");
	refused(own_mntns_under_profile, "seccomp filter (Seccomp: 2 in /proc/self/status)");
}
END_TEST

/* Not a refusal, or nowhere to write: no words. */
START_TEST(test_hint_none)
{
	char buf[320] = "x";
	ck_assert_str_eq(rung_ns_refusal_hint(ENOMEM, true, buf, sizeof(buf)), "");
	ck_assert_str_eq(rung_ns_refusal_hint(EINVAL, false, buf, sizeof(buf)), "");
	ck_assert_str_eq(rung_ns_refusal_hint(EPERM, true, buf, 0), "");
}
END_TEST

Suite *e2e_cli_refused_suite(void)
{
	Suite *s = suite_create("e2e_cli_refused");
	TCase *tc = spine_tcase(s, "refused", 60);
	tcase_add_test(tc, test_chroot);
	tcase_add_test(tc, test_chroot_found);
	tcase_add_test(tc, test_seccomp_profile);
	tcase_add_test(tc, test_hint_none);
	return s;
}
