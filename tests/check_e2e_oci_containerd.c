/*
 * tests/check_e2e_oci_containerd.c: rung-oci driven by containerd (docs/oci.md, "Under
 * containerd"): a private containerd (tests/lib/ctrd.c), the test image imported with
 * `ctr images import`, and `ctr run --runc-binary build/rung-oci` on the container rung:
 * output, exit codes, a TTY, `ctr task exec`, kill, pause/resume read back, delete; rung's
 * boundary seen from the host; rung's escape battery (rung-probe) through it, against the
 * ladder's expected set for the container rung; 100 run --rm cycles leaving nothing.
 */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/ladder.h"
#include "oci/oci.h"
#include "tests/lib/ctrd.h"
#include "tests/lib/ladder.h"
#include "tests/lib/oci.h"
#include "tests/lib/testutil.h"

static struct ctrd C;
static bool started;

static void setup(void)
{
	started = false;
	if (geteuid() != 0 || access("/usr/bin/containerd", X_OK) < 0 ||
	    access("/usr/bin/ctr", X_OK) < 0)
		return;
	started = ctrd_start(&C, false);
	if (!started)
		fprintf(stderr, "e2e_oci_containerd: %s\n", C.why);
}

static void teardown(void)
{
	ctrd_stop(&C);
}

#define REQUIRE()                                                                                  \
	do {                                                                                       \
		RUNG_REQUIRE_ROOT();                                                               \
		if (access("/usr/bin/containerd", X_OK) < 0 || access("/usr/bin/ctr", X_OK) < 0)   \
			RUNG_SKIP("containerd is not installed (scripts/setup-deps.sh installs "  \
				  "it)");                                                          \
		ck_assert_msg(started, "containerd: %s", C.why);                                   \
	} while (0)

static char out_[16384], err_[4096];

/* ctr args... (NULL-ended): its exit status; output in out_, err_. */
static int ctr(const char *const *args)
{
	return ctrd_ctr(&C, -1, 60, out_, sizeof(out_), err_, sizeof(err_), args);
}
#define CTR(...) ctr((const char *const[]){__VA_ARGS__, NULL})

/* ctr run (rung-oci, native snapshotter) extra...: its exit status. */
static int run(const char *const *extra)
{
	const char *argv[64];
	ctrd_run_argv(&C, argv, 64, extra);
	return ctr(argv);
}
#define RUN(...) run((const char *const[]){__VA_ARGS__, NULL})

static int oci(const char *const *args)
{
	char root[256];
	snprintf(root, sizeof(root), "%s/%s", C.oci_root, C.ns);
	return oci_test_run(C.bin, root, C.dir, NULL, args, out_, sizeof(out_), err_, sizeof(err_));
}
#define OCI(...) oci((const char *const[]){__VA_ARGS__, NULL})

static const char *task_status(const char *id, int *pid)
{
	return ctrd_task_status(&C, id, pid);
}

START_TEST(test_run_output_and_exit_codes)
{
	REQUIRE();
	ck_assert_msg(RUN("--rm", CTRD_IMAGE, "r1", "echo", "hello from rung-oci") == 0, "%s %s",
		      out_, err_);
	ck_assert_str_eq(out_, "hello from rung-oci\n");
	ck_assert_int_eq(RUN("--rm", CTRD_IMAGE, "r2", "sh", "-c", "exit 7"), 7);
	ck_assert_int_eq(RUN("--rm", CTRD_IMAGE, "r3", "/bin/true"), 0);
	/* the native snapshotter: the rootfs a plain directory, idmapped itself */
	ck_assert_msg(RUN("--rm", "--snapshotter", "native", CTRD_IMAGE, "r5", "sh", "-c",
			  "echo native > /written && cat /written") == 0,
		      "%s %s", out_, err_);
	ck_assert_str_eq(out_, "native\n");
	/* killed: ctr run waits and exits 128 + 9 */
	char log[256];
	snprintf(log, sizeof(log), "%s/r4.out", C.dir);
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	const char *argv[48];
	ctrd_run_argv(&C, argv, 48, (const char *const[]){"--rm", CTRD_IMAGE, "r4", "sleep", "100",
							   NULL});
	pid_t pid = ctrd_spawn(&C, -1, fd, false, argv);
	close(fd);
	for (int i = 0; i < 300 && strcmp(task_status("r4", NULL), "RUNNING"); i++)
		usleep(20000);
	ck_assert_str_eq(task_status("r4", NULL), "RUNNING");
	ck_assert_int_eq(CTR("tasks", "kill", "-s", "SIGKILL", "r4"), 0);
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(WEXITSTATUS(st), 137);
	ck_assert_int_eq(CTR("containers", "ls", "-q"), 0);
	ck_assert_msg(!strstr(out_, "r4"), "--rm left %s", out_);
}
END_TEST

START_TEST(test_tty)
{
	REQUIRE();
	ctrd_check_tty(&C, "t1");
}
END_TEST

START_TEST(test_exec_pause_kill_delete)
{
	REQUIRE();
	ck_assert_msg(RUN("-d", CTRD_IMAGE, "e1", "sleep", "1000") == 0, "%s %s", out_, err_);
	int pid = 0;
	ck_assert_str_eq(task_status("e1", &pid), "RUNNING");
	/* the boundary, seen from the host, of a task containerd started */
	ck_assert_int_ge(rung_test_status_field(pid, "Uid:\t"), (long)OCI_UID_BASE0);
	ck_assert_int_eq(rung_test_status_field(pid, "Seccomp:\t"), 2);
	long policy = 0;
	static const int caps[] = {0 /* CHOWN */, 1 /* DAC_OVERRIDE */, 4 /* FSETID */,
				   3 /* FOWNER */, 27 /* MKNOD */, 13 /* NET_RAW */, 6 /* SETGID */,
				   7 /* SETUID */, 31 /* SETFCAP */, 8 /* SETPCAP */,
				   10 /* NET_BIND_SERVICE */, 18 /* SYS_CHROOT */, 5 /* KILL */,
				   29 /* AUDIT_WRITE */};
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		policy |= 1L << caps[i];
	long bnd = rung_test_status_field(pid, "CapBnd:\t");
	ck_assert_msg((bnd & ~policy) == 0, "CapBnd %lx beyond the policy's %lx", bnd, policy);
	ck_assert_int_eq(rung_test_status_field(pid, "CapEff:\t") & ~policy, 0);
	/* ctr task exec: output and exit status */
	ck_assert_int_eq(CTR("tasks", "exec", "--exec-id", "x1", "e1", "sh", "-c",
			     "echo in-exec; exit 5"),
			 5);
	ck_assert_str_eq(out_, "in-exec\n");
	/* the rootfs's overlay, made from paths relative to rung-oci's state dir, names no host
	 * path in the container's mountinfo (oci/overlay.c) */
	ck_assert_int_eq(CTR("tasks", "exec", "--exec-id", "x2", "e1", "cat", "/proc/self/mountinfo"),
			 0);
	const char *root = strstr(out_, " / / ");
	ck_assert_msg(root && strstr(root, "upperdir=u/fs"), "no relative overlay on /: %s", out_);
	ck_assert_msg(!strstr(out_, C.dir), "mountinfo names %s: %s", C.dir, out_);
	fprintf(stderr, "e2e_oci_containerd: the container's root in its mountinfo: %.*s\n",
		(int)strcspn(root, "\n"), root);
	/* pause / resume, read back through containerd and through rung-oci */
	ck_assert_msg(CTR("tasks", "pause", "e1") == 0, "%s", err_);
	ck_assert_str_eq(task_status("e1", NULL), "PAUSED");
	ck_assert_int_eq(OCI("state", "e1"), 0);
	json_t *j = json_loads(out_, 0, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "paused");
	json_decref(j);
	ck_assert_msg(CTR("tasks", "resume", "e1") == 0, "%s", err_);
	ck_assert_str_eq(task_status("e1", NULL), "RUNNING");
	/* kill, delete: nothing of it left */
	ck_assert_int_eq(CTR("tasks", "kill", "-s", "SIGKILL", "e1"), 0);
	for (int i = 0; i < 300 && strcmp(task_status("e1", NULL), "STOPPED"); i++)
		usleep(20000);
	ck_assert_str_eq(task_status("e1", NULL), "STOPPED");
	ck_assert_msg(CTR("tasks", "delete", "e1") == 0, "%s", err_);
	ck_assert_msg(CTR("containers", "delete", "e1") == 0, "%s", err_);
	ck_assert_int_eq(OCI("state", "e1"), 1);
	ck_assert_int_ne(kill(pid, 0), 0);
}
END_TEST

/* One probe by `ctr task exec` in the ladder's container, judged as the ladder judges it. */
static void probe_one(struct ladder_env *e, struct ladder_target *t, struct lt_outcome *o,
		      unsigned seq)
{
	char id[32], errb[1024];
	int rc = 0;
	/* Seen once in a CI run on a loaded host: `ctr task exec` exited 0 with no output at all
	 * (the probe's line lost between the exec and ctr; cause not found). Such a run is tried
	 * once more, loudly; a probe that answers is judged as it answered. */
	for (int attempt = 0; attempt < 2; attempt++) {
		ladder_env_reset(e);
		snprintf(id, sizeof(id), "probe-%u-%d", seq, attempt);
		rc = ctrd_ctr(&C, -1, 120, out_, sizeof(out_), errb, sizeof(errb),
			      (const char *const[]){"tasks", "exec", "--exec-id", id, "--cwd", "/work",
						    "lad", "/bin/rung-probe", "--token", e->token,
						    o->name, NULL});
		if (rc != 0 || strchr(out_, '{'))
			break;
		fprintf(stderr, "e2e_oci_containerd: RETRIED probe %s once: ctr task exec exited 0 "
			"with no output (stderr: %.200s)\n", o->name, errb);
	}
	char *line = strdup(out_);
	struct rung_err perr = {0};
	if (rc != 0 && !strchr(line, '{'))
		rung_err_set(&perr, EIO, "ctr task exec exited %d: %.200s", rc, errb);
	lt_judge(e, t, 0, o, &line, &perr);
	free(line);
}

/* Every capability of the policy dropped, as Kubernetes' restricted profile has it (drop ALL;
 * ctr 1.6 takes no ALL) */
#define DROP_ALL                                                                                   \
	"--cap-drop", "CAP_CHOWN", "--cap-drop", "CAP_DAC_OVERRIDE", "--cap-drop", "CAP_FSETID",   \
	    "--cap-drop", "CAP_FOWNER", "--cap-drop", "CAP_MKNOD", "--cap-drop", "CAP_NET_RAW",    \
	    "--cap-drop", "CAP_SETGID", "--cap-drop", "CAP_SETUID", "--cap-drop", "CAP_SETFCAP",   \
	    "--cap-drop", "CAP_SETPCAP", "--cap-drop", "CAP_NET_BIND_SERVICE", "--cap-drop",       \
	    "CAP_SYS_CHROOT", "--cap-drop", "CAP_KILL", "--cap-drop", "CAP_AUDIT_WRITE"

/*
 * rung's battery in a container containerd started through rung-oci: the ladder's environment
 * (listeners, victim, markers, a host sibling), the probe from the image (/bin/rung-probe), its
 * context in /work, a host directory bound in (a tmpfs of the ladder's disk limit: containerd's
 * snapshotters have no quota, the disk limit of a pod is its volume's), the ladder's memory,
 * pids and CPU limits set with rung-oci update (what the shim's Update calls; ctr 1.6 has no
 * `task update`), every capability dropped. The expected set is the container rung's, with
 * its known gap under containerd (tests/lib/ladder.c).
 */
START_TEST(test_ladder_battery)
{
	REQUIRE();
	static struct lt_outcome out[LT_MAX];
	size_t n = lt_list(out, LT_MAX);
	ck_assert_uint_ge(n, 50);
	struct ladder_env e;
	struct rung_err err = {0};
	ck_assert_msg(ladder_env_setup(&e, C.dir, &err) == 0, "ladder env: %s", err.msg);
	char sib[128], work[128], opts[64], mnt[256], mem[32], quota[32];
	snprintf(sib, sizeof(sib), "%s/sibling", C.dir);
	int sr = ladder_sibling_host(&e, sib, lt_probe_bin(), &err);
	/* the memory limit above the disk's: the work dir's tmpfs is charged to the container */
	e.mem_limit = 2 * e.disk_limit;
	snprintf(work, sizeof(work), "%s/work", C.dir);
	mkdir(work, 0777);
	snprintf(opts, sizeof(opts), "size=%llu,mode=0777", e.disk_limit);
	int mr = mount("tmpfs", work, "tmpfs", MS_NOSUID | MS_NODEV, opts);
	int pr = mr == 0 ? ladder_plant_dir(&e, work, 0777, lt_probe_bin(), &err) : -1;
	snprintf(mnt, sizeof(mnt), "type=bind,src=%s,dst=/work,options=rbind:rw", work);
	snprintf(mem, sizeof(mem), "%llu", e.mem_limit);
	snprintf(quota, sizeof(quota), "%u", e.cpus_milli * 100);
	int rr = pr == 0 ? RUN("-d", "--mount", mnt, DROP_ALL, CTRD_IMAGE, "lad", "sleep", "100000") : -1;
	int ur = rr == 0 ? OCI("update", "--memory", mem, "--pids-limit", "32", "--cpu-quota", quota,
			       "--cpu-period", "100000", "lad")
			 : -1;
	char failed[600];
	snprintf(failed, sizeof(failed), "%.290s %.290s", out_, err_);
	struct ladder_target t = {.name = "containerd", .peer = true};
	size_t blocked = 0;
	for (size_t i = 0; ur == 0 && i < n; i++) {
		probe_one(&e, &t, &out[i], (unsigned)i);
		blocked += !strcmp(out[i].result, "blocked");
	}
	ctrd_remove(&C, "lad", 60);
	ladder_sibling_close(NULL, &e);
	ladder_env_teardown(&e);
	if (mr == 0)
		umount2(work, MNT_DETACH);
	ck_assert_msg(sr == 0, "the sibling: %s", err.msg);
	ck_assert_msg(mr == 0 && pr == 0, "the work dir %s: %s", work, err.msg);
	ck_assert_msg(rr == 0 && ur == 0, "run %d, update %d: %s", rr, ur, failed);
	char bad[8192];
	lt_unexpected("containerd", out, n, true, bad, sizeof(bad));
	fprintf(stderr, "e2e_oci_containerd: the battery under containerd: %zu of %zu blocked\n",
		blocked, n);
	ck_assert_msg(!bad[0], "under containerd, unexpected:%s", bad);
}
END_TEST

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 100 `ctr run --rm` cycles: no mount, cgroup (v1 and v2), process, state dir or uid slot left. */
START_TEST(test_leaks_100_cycles)
{
	REQUIRE();
	struct ctrd_counts a, b;
	ctrd_count(&C, &a);
	double t0 = now_s();
	for (int i = 0; i < 100; i++) {
		char id[16];
		snprintf(id, sizeof(id), "lk%d", i);
		ck_assert_msg(RUN("--rm", CTRD_IMAGE, id, "/bin/true") == 0, "cycle %d: %s %s", i,
			      out_, err_);
	}
	double dt = now_s() - t0;
	ctrd_count(&C, &b);
	fprintf(stderr,
		"e2e_oci_containerd: 100 run --rm cycles in %.1f s (%.0f ms each); before/after:"
		" mounts %d/%d, cgroups %d/%d, processes %d/%d, state dirs %d/%d, uid slots %d/%d\n",
		dt, dt * 10, a.mounts, b.mounts, a.cgroups, b.cgroups, a.procs, b.procs, a.states,
		b.states, a.uids, b.uids);
	ck_assert_int_eq(b.mounts, a.mounts); /* those naming the directory: none while idle */
	ck_assert_int_eq(b.mounts, 0);
	ck_assert_int_eq(b.cgroups, a.cgroups);
	ck_assert_int_eq(b.procs, a.procs);
	ck_assert_int_eq(b.states, 0);
	ck_assert_int_eq(b.uids, 0);
}
END_TEST

/* A pod as ctr makes one: a "pause" task, then a task joining its ipc and uts namespaces with
 * --with-ns (the CRI's paths): the pause's hostname (its id: ctr sets none) and ipc namespace
 * seen inside; both removed. */
START_TEST(test_with_ns_pod)
{
	REQUIRE();
	ck_assert_msg(RUN("-d", CTRD_IMAGE, "p1", "sleep", "1000") == 0, "%s %s", out_, err_);
	int pid = 0;
	ck_assert_str_eq(task_status("p1", &pid), "RUNNING");
	char ipc[64], uts[64], link[64];
	snprintf(ipc, sizeof(ipc), "ipc:/proc/%d/ns/ipc", pid);
	snprintf(uts, sizeof(uts), "uts:/proc/%d/ns/uts", pid);
	ssize_t n = readlink(ipc + 4, link, sizeof(link) - 1);
	ck_assert_int_gt(n, 0);
	link[n] = '\0';
	ck_assert_msg(RUN("--rm", "--with-ns", ipc, "--with-ns", uts, CTRD_IMAGE, "a1", "sh", "-c",
			  "hostname; readlink /proc/self/ns/ipc") == 0,
		      "%s %s", out_, err_);
	char want[128];
	snprintf(want, sizeof(want), "p1\n%s\n", link);
	ck_assert_str_eq(out_, want);
	ctrd_remove(&C, "p1", 30);
	ck_assert_int_eq(CTR("containers", "ls", "-q"), 0);
	ck_assert_msg(!strstr(out_, "p1") && !strstr(out_, "a1"), "left: %s", out_);
}
END_TEST

Suite *e2e_oci_containerd_suite(void)
{
	Suite *s = suite_create("e2e_oci_containerd");
	TCase *tc = tcase_create("containerd");
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_run_output_and_exit_codes);
	tcase_add_test(tc, test_tty);
	tcase_add_test(tc, test_exec_pause_kill_delete);
	tcase_add_test(tc, test_ladder_battery);
	tcase_add_test(tc, test_leaks_100_cycles);
	suite_add_tcase(s, tc);
	TCase *pod = tcase_create("pod"); /* CK_RUN_CASE=pod runs it alone */
	tcase_add_unchecked_fixture(pod, setup, teardown);
	tcase_set_tags(pod, "root");
	tcase_set_timeout(pod, 300);
	tcase_add_test(pod, test_with_ns_pod);
	suite_add_tcase(s, pod);
	return s;
}
