/*
 * tests/check_e2e_oci_ctrdvm.c: rung-oci on the vm rung driven by containerd (docs/oci.md,
 * "Under containerd", the vm rung): a private containerd (tests/lib/ctrd.c, the image on the
 * native snapshotter), `ctr run --runc-binary <dir>/rung-oci-vm` (a link named as the vm
 * handler's runtime, what containerd's config names with BinaryName): the output, the program
 * under the guest's kernel and among the guest's processes, an exit code, a TTY, `ctr task exec`,
 * pause/resume (the VM's vCPUs stopped: rung-vmm's CPU time stands still), kill, delete, and
 * nothing left (rung-oci's state and stores, rung-vmm, taps, mounts, processes); rung's escape
 * battery by `ctr task exec` of rung-probe in the guest, judged against the vm rung's expected
 * set under containerd (tests/lib/ladder.c); 5 `ctr run --rm` cycles leaving nothing
 * (RUNG_TEST_OCI_CYCLES more).
 * Needs a host where the vm rung runs: the nested stage's L1 (vmm/guest/l1-oci-ctrd.sh); it
 * skips loudly elsewhere. Tagged "kvm".
 */
#include <check.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "cli/ladder.h"
#include "common/util.h"
#include "tests/lib/ctrd.h"
#include "tests/lib/ladder.h"
#include "tests/lib/oci.h"
#include "tests/lib/testutil.h"

static struct ctrd C;
static bool started;
static char why_[512], vm_root[32];

/* containerd, then the vm runtime: a link rung-oci-vm to rung-oci, and a short --runc-root
 * (rung-oci-vm's --root, <runc-root>/<namespace>, holds a sandbox's socket path: 42 bytes) */
static void setup(void)
{
	started = false;
	if (geteuid() != 0 || access("/usr/bin/containerd", X_OK) < 0 ||
	    access("/usr/bin/ctr", X_OK) < 0 || !oci_test_vm_runs(why_, sizeof(why_)))
		return;
	if (!(started = ctrd_start(&C, true))) {
		fprintf(stderr, "e2e_oci_ctrdvm: %s\n", C.why);
		return;
	}
	char link[PATH_MAX];
	snprintf(link, sizeof(link), "%s/rung-oci-vm", C.dir);
	snprintf(vm_root, sizeof(vm_root), "/tmp/rov-XXXXXX");
	/* the sandboxes' unprivileged uids must search the root (their stores are below it) */
	if (symlink(C.bin, link) < 0 || !mkdtemp(vm_root) || chmod(vm_root, 0711) < 0) {
		snprintf(C.why, sizeof(C.why), "%.200s or %s: cannot make it", link, vm_root);
		started = false;
		return;
	}
	memcpy(C.bin, link, sizeof(C.bin));
	snprintf(C.oci_root, sizeof(C.oci_root), "%s", vm_root);
}

static void teardown(void)
{
	ctrd_stop(&C);
	struct rung_err err = {0};
	if (vm_root[0] && rung_rm_rf(vm_root, &err) < 0)
		fprintf(stderr, "e2e_oci_ctrdvm: remove %s: %s\n", vm_root, err.msg);
	vm_root[0] = '\0';
}

#define REQUIRE()                                                                                  \
	do {                                                                                       \
		RUNG_REQUIRE_ROOT();                                                               \
		if (access("/usr/bin/containerd", X_OK) < 0 || access("/usr/bin/ctr", X_OK) < 0)   \
			RUNG_SKIP("containerd is not installed");                                  \
		if (!oci_test_vm_runs(why_, sizeof(why_)))                                         \
			RUNG_SKIP(why_);                                                           \
		ck_assert_msg(started, "containerd: %s", C.why);                                   \
	} while (0)

static char out_[16384], err_[4096];

#define CTR(...)                                                                                   \
	ctrd_ctr(&C, -1, 600, out_, sizeof(out_), err_, sizeof(err_),                              \
		 (const char *const[]){__VA_ARGS__, NULL})

static int run(const char *const *extra)
{
	const char *argv[64];
	ctrd_run_argv(&C, argv, 64, extra);
	return ctrd_ctr(&C, -1, 600, out_, sizeof(out_), err_, sizeof(err_), argv);
}
#define RUN(...) run((const char *const[]){__VA_ARGS__, NULL})

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What must come back to where it was: containerd's namespace (mounts, cgroups, processes and
 * shims, rung-oci's state dirs and uid slots), rung-vmm processes, network links (taps), and
 * entries of rung-oci-vm's stores. */
struct counts {
	struct ctrd_counts c;
	int vmms, links, stores;
};

static bool same(const struct counts *a, const struct counts *b)
{
	return b->c.mounts <= a->c.mounts && b->c.cgroups <= a->c.cgroups &&
	       b->c.procs <= a->c.procs && b->vmms <= a->vmms && b->links <= a->links;
}

static void count(struct counts *n)
{
	char p[PATH_MAX];
	ctrd_count(&C, &n->c);
	n->vmms = oci_test_procs_argv0("rung-vmm");
	n->links = rung_test_count_entries("/sys/class/net");
	snprintf(p, sizeof(p), "%s/%s/.vm", C.oci_root, C.ns);
	n->stores = rung_test_count_entries(p);
}

START_TEST(test_vm_run_echo_exit)
{
	REQUIRE();
	struct utsname u;
	uname(&u);
	double t0 = now_s();
	ck_assert_msg(RUN("--rm", CTRD_IMAGE, "v1", "sh", "-c",
			  "echo hello from rung-oci-vm; busybox uname -r; n=0; for p in /proc/[0-9]*; "
			  "do n=$((n+1)); done; echo $n; cat /proc/1/comm") == 0,
		      "%s %s", out_, err_);
	double t1 = now_s();
	char kernel[128] = "", comm[64] = "";
	int procs = 0;
	ck_assert_msg(!strncmp(out_, "hello from rung-oci-vm\n", 23), "said: %s", out_);
	ck_assert_int_eq(sscanf(out_ + 23, "%127s %d %63s", kernel, &procs, comm), 3);
	/* a guest: its own kernel (its /proc, the guest's processes, printed) */
	ck_assert_msg(strcmp(kernel, u.release), "the program ran under the host's kernel %s",
		      kernel);
	ck_assert_int_eq(RUN("--rm", CTRD_IMAGE, "v2", "sh", "-c", "exit 7"), 7);
	fprintf(stderr, "e2e_oci_ctrdvm: ctr run --rm echo %.1f s, exit 7 %.1f s; the guest: kernel "
		"%s (host %s), %d processes in its /proc, pid 1 %s\n",
		t1 - t0, now_s() - t1, kernel, u.release, procs, comm);
}
END_TEST

/* rung-vmm's CPU time (clock ticks) over 2 s. */
static long vmm_ticks_2s(int pid)
{
	long t0 = oci_test_cpu_ticks(pid);
	sleep(2);
	long t1 = oci_test_cpu_ticks(pid);
	ck_assert_msg(t0 >= 0 && t1 >= t0, "rung-vmm %d's CPU time: %ld then %ld", pid, t0, t1);
	return t1 - t0;
}

static const char *oci_status(const char *id)
{
	char root[256];
	static char status[32];
	snprintf(root, sizeof(root), "%s/%s", C.oci_root, C.ns);
	int rc = oci_test_run(C.bin, root, C.dir, NULL, (const char *const[]){"state", id, NULL},
			      out_, sizeof(out_), err_, sizeof(err_));
	json_t *j = rc == 0 ? json_loads(out_, 0, NULL) : NULL;
	snprintf(status, sizeof(status), "%s", json_string_value(json_object_get(j, "status")) ?: "");
	json_decref(j);
	return status;
}

/* The counts back to a's (polled 30 s: the shim and rung-vmm exit after delete returns, slowly
 * under TCG), printed under what, and asserted. */
static void nothing_left(const struct counts *a, const char *what)
{
	struct counts b;
	count(&b);
	for (int i = 0; i < 150 && !same(a, &b); i++) {
		usleep(200000);
		count(&b);
	}
	fprintf(stderr, "e2e_oci_ctrdvm: %s, before/after: mounts %d/%d, cgroups %d/%d, processes "
		"%d/%d, state dirs %d/%d, uid slots %d/%d, rung-vmm %d/%d, links %d/%d, stores "
		"%d/%d\n", what, a->c.mounts, b.c.mounts, a->c.cgroups, b.c.cgroups, a->c.procs,
		b.c.procs, a->c.states, b.c.states, a->c.uids, b.c.uids, a->vmms, b.vmms, a->links,
		b.links, a->stores, b.stores);
	ck_assert_msg(same(a, &b), "left after %s (see the line above)", what);
	ck_assert_int_eq(b.c.mounts, 0);
	ck_assert_int_le(b.c.states, 0);
	ck_assert_int_le(b.c.uids, 0);
	ck_assert_int_le(b.stores, 0);
}

START_TEST(test_vm_tty)
{
	REQUIRE();
	ctrd_check_tty(&C, "vt");
}
END_TEST

/*
 * The program spins (a busy loop in the guest's one vCPU), so that rung-vmm's CPU time shows
 * whether the vCPUs run: it grows while running, stands (near) still while paused, grows again
 * after resume; paused is read back through containerd and rung-oci-vm's state.
 */
START_TEST(test_vm_exec_pause_kill_delete)
{
	REQUIRE();
	struct counts a;
	count(&a);
	ck_assert_msg(RUN("-d", CTRD_IMAGE, "v3", "sh", "-c", "while :; do :; done") == 0, "%s %s",
		      out_, err_);
	ck_assert_str_eq(ctrd_task_status(&C, "v3", NULL), "RUNNING");
	ck_assert_int_eq(oci_test_procs_argv0("rung-vmm"), a.vmms + 1);
	ck_assert_int_eq(CTR("tasks", "exec", "--exec-id", "x1", "v3", "sh", "-c",
			     "echo in-exec; exit 5"),
			 5);
	ck_assert_str_eq(out_, "in-exec\n");
	int vmm = oci_test_pid_argv0("rung-vmm");
	long running = vmm_ticks_2s(vmm);
	ck_assert_msg(CTR("tasks", "pause", "v3") == 0, "%s", err_);
	ck_assert_str_eq(ctrd_task_status(&C, "v3", NULL), "PAUSED");
	ck_assert_str_eq(oci_status("v3"), "paused");
	long paused = vmm_ticks_2s(vmm);
	ck_assert_msg(CTR("tasks", "resume", "v3") == 0, "%s", err_);
	ck_assert_str_eq(ctrd_task_status(&C, "v3", NULL), "RUNNING");
	ck_assert_str_eq(oci_status("v3"), "running");
	long resumed = vmm_ticks_2s(vmm);
	fprintf(stderr, "e2e_oci_ctrdvm: rung-vmm's CPU ticks in 2 s, the guest spinning: running "
		"%ld, paused %ld, resumed %ld\n", running, paused, resumed);
	ck_assert_int_ge(running, 20); /* the spin shows (0.2 s of 2) */
	ck_assert_int_lt(paused * 4, running);
	ck_assert_int_lt(paused * 4, resumed);
	ck_assert_int_eq(CTR("tasks", "exec", "--exec-id", "x2", "v3", "true"), 0);
	ck_assert_int_eq(CTR("tasks", "kill", "-s", "SIGKILL", "v3"), 0);
	for (int i = 0; i < 1500 && strcmp(ctrd_task_status(&C, "v3", NULL), "STOPPED"); i++)
		usleep(20000);
	ck_assert_str_eq(ctrd_task_status(&C, "v3", NULL), "STOPPED");
	ck_assert_msg(CTR("tasks", "delete", "v3") == 0, "%s", err_);
	ck_assert_msg(CTR("containers", "delete", "v3") == 0, "%s", err_);
	nothing_left(&a, "exec, pause, kill, delete");
}
END_TEST

/* One probe by `ctr task exec` in the guest, judged as the ladder judges it; vm.vmm_jail by
 * the host's check of the container's rung-vmm vmm (the only one). */
static void probe_one(struct ladder_env *e, struct lt_outcome *o, unsigned seq, int vmm)
{
	char id[32], errb[1024];
	ladder_env_reset(e);
	snprintf(id, sizeof(id), "probe-%u", seq);
	int rc = ctrd_ctr(&C, -1, 300, out_, sizeof(out_), errb, sizeof(errb),
			  (const char *const[]){"tasks", "exec", "--exec-id", id, "--cwd", "/work",
						"vlad", "/bin/rung-probe", "--token", e->token,
						o->name, NULL});
	char *line = strdup(out_);
	struct rung_err perr = {0};
	if (rc != 0 && !strchr(line, '{'))
		rung_err_set(&perr, EIO, "ctr task exec exited %d: %.200s", rc, errb);
	struct ladder_target t = {.name = "containerd-vm", .peer = true}; /* no file API */
	lt_judge(e, &t, vmm, o, &line, &perr);
	free(line);
}

/*
 * rung's battery in a VM containerd started through rung-oci-vm: the ladder's environment
 * (listeners, victim, markers, a host sibling) here in L1, the probe from the image
 * (/bin/rung-probe), its context file bound (copied) into /work, the VM's memory the ladder's
 * limit for the vm rung (256 MiB, --memory-limit), its CPU the ladder's quota (0.25 CPU,
 * --cpu-quota: one vCPU and the guest's cgroup); ctr run has no pids flag. The expected set
 * is the vm rung's under containerd (tests/lib/ladder.c, "containerd-vm").
 */
START_TEST(test_vm_ladder_battery)
{
	REQUIRE();
	static struct lt_outcome out[LT_MAX];
	size_t n = lt_list(out, LT_MAX);
	ck_assert_uint_ge(n, 50);
	struct counts a;
	count(&a);
	struct ladder_env e;
	struct rung_err err = {0};
	ck_assert_msg(ladder_env_setup(&e, C.dir, &err) == 0, "ladder env: %s", err.msg);
	char sib[128], work[128], mnt[300], mem[32];
	snprintf(sib, sizeof(sib), "%s/sibling", C.dir);
	int sr = ladder_sibling_host(&e, sib, lt_probe_bin(), &err);
	e.mem_limit = 256ull << 20;
	snprintf(work, sizeof(work), "%s/work", C.dir);
	int pr = ladder_plant_dir(&e, work, 0755, lt_probe_bin(), &err);
	snprintf(mnt, sizeof(mnt), "type=bind,src=%s/rung-probe.ctx,dst=/work/rung-probe.ctx,"
		 "options=rbind:ro", work);
	snprintf(mem, sizeof(mem), "%llu", e.mem_limit);
	double t0 = now_s();
	char quota[32];
	snprintf(quota, sizeof(quota), "%u", e.cpus_milli * 100);
	int rr = pr == 0 ? RUN("-d", "--mount", mnt, "--memory-limit", mem, "--cpu-quota", quota,
			       "--cpu-period", "100000", CTRD_IMAGE, "vlad", "sleep", "100000")
			 : -1;
	char failed[600];
	snprintf(failed, sizeof(failed), "%.290s %.290s", out_, err_);
	int vmm = rr == 0 && oci_test_procs_argv0("rung-vmm") == a.vmms + 1
			  ? oci_test_pid_argv0("rung-vmm")
			  : 0;
	double t1 = now_s();
	size_t blocked = 0;
	for (size_t i = 0; vmm && i < n; i++) {
		probe_one(&e, &out[i], (unsigned)i, vmm);
		blocked += !strcmp(out[i].result, "blocked");
	}
	double t2 = now_s();
	ctrd_remove(&C, "vlad", 300);
	ladder_sibling_close(NULL, &e);
	ladder_env_teardown(&e);
	ck_assert_msg(sr == 0, "the sibling: %s", err.msg);
	ck_assert_msg(pr == 0, "plant %s: %s", work, err.msg);
	ck_assert_msg(rr == 0 && vmm, "run %d, rung-vmm %d: %s", rr, vmm, failed);
	char seen[8192] = "";
	for (size_t i = 0, at = 0; i < n && at < sizeof(seen); i++)
		if (strcmp(out[i].result, "blocked"))
			at += (size_t)snprintf(seen + at, sizeof(seen) - at, " %s %s (%.80s);",
					       out[i].name, out[i].result, out[i].evidence);
	fprintf(stderr, "e2e_oci_ctrdvm: the battery in rung-oci-vm under containerd: %zu of %zu "
		"blocked (run -d %.1f s, the probes %.1f s); not blocked:%s\n", blocked, n, t1 - t0,
		t2 - t1, seen);
	char bad[8192];
	lt_unexpected("containerd-vm", out, n, true, bad, sizeof(bad));
	ck_assert_msg(!bad[0], "in rung-oci-vm under containerd, unexpected:%s", bad);
	nothing_left(&a, "the battery");
}
END_TEST

/* The leak loop's cycles: 5, or RUNG_TEST_OCI_CYCLES (1..1000; the nested stage's
 * VMTEST_OCI_CYCLES sets it in L1 for a long run: vmm/guest/README.md). */
static int leak_cycles(void)
{
	const char *v = getenv("RUNG_TEST_OCI_CYCLES");
	int n = v ? atoi(v) : 0;
	return n >= 1 && n <= 1000 ? n : 5;
}

/* `ctr run --rm` cycles (each boots a VM): nothing left. */
START_TEST(test_vm_leaks_cycles)
{
	REQUIRE();
	struct counts a;
	count(&a);
	double t0 = now_s();
	int cycles = leak_cycles();
	for (int i = 0; i < cycles; i++) {
		char id[16];
		snprintf(id, sizeof(id), "vlk%d", i);
		ck_assert_msg(RUN("--rm", CTRD_IMAGE, id, "/bin/true") == 0, "cycle %d: %s %s", i,
			      out_, err_);
	}
	char what[64];
	snprintf(what, sizeof(what), "%d run --rm cycles in %.1f s", cycles, now_s() - t0);
	nothing_left(&a, what);
}
END_TEST

Suite *e2e_oci_ctrdvm_suite(void)
{
	Suite *s = suite_create("e2e_oci_ctrdvm");
	TCase *tc = tcase_create("containerd-vm");
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_tags(tc, "kvm");
	tcase_set_timeout(tc, 1200 + 60 * leak_cycles()); /* a cycle: ~14 s in L1 */
	tcase_add_test(tc, test_vm_run_echo_exit);
	tcase_add_test(tc, test_vm_tty);
	tcase_add_test(tc, test_vm_exec_pause_kill_delete);
	tcase_add_test(tc, test_vm_ladder_battery);
	tcase_add_test(tc, test_vm_leaks_cycles);
	suite_add_tcase(s, tc);
	return s;
}
