/*
 * tests/check_e2e_oci_ctrdvm.c: rung-oci on the vm rung driven by containerd (docs/oci.md,
 * "Under containerd", the vm rung): a private containerd (tests/lib/ctrd.c, the image on the
 * native snapshotter), `ctr run --runc-binary <dir>/rung-oci-vm` (a link named as the vm
 * handler's runtime, what containerd's config names with BinaryName): the output, the program
 * under the guest's kernel and among the guest's processes, an exit code, `ctr task exec`, kill,
 * delete, and nothing left (rung-oci's state and stores, rung-vmm, taps, mounts, processes).
 * Needs a host where the vm rung runs: the nested stage's L1 (vmm/guest/l1-oci-ctrd.sh); it
 * skips loudly elsewhere. Tagged "kvm".
 */
#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/lib/ctrd.h"
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

/* Processes whose argv[0] is name (rung-vmm is exec'd from an fd: its comm is the fd's number). */
static int procs_named(const char *name)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d))) {
		char p[300], arg0[256] = "";
		if (atoi(de->d_name) <= 0)
			continue;
		snprintf(p, sizeof(p), "/proc/%s/cmdline", de->d_name);
		FILE *f = fopen(p, "re");
		size_t k = f ? fread(arg0, 1, sizeof(arg0) - 1, f) : 0;
		arg0[k] = '\0';
		if (f)
			fclose(f);
		n += !strcmp(arg0, name);
	}
	if (d)
		closedir(d);
	return n;
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
	n->vmms = procs_named("rung-vmm");
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

START_TEST(test_vm_exec_kill_delete)
{
	REQUIRE();
	struct counts a, b;
	count(&a);
	ck_assert_msg(RUN("-d", CTRD_IMAGE, "v3", "sleep", "1000") == 0, "%s %s", out_, err_);
	ck_assert_str_eq(ctrd_task_status(&C, "v3", NULL), "RUNNING");
	ck_assert_int_eq(procs_named("rung-vmm"), a.vmms + 1);
	ck_assert_int_eq(CTR("tasks", "exec", "--exec-id", "x1", "v3", "sh", "-c",
			     "echo in-exec; exit 5"),
			 5);
	ck_assert_str_eq(out_, "in-exec\n");
	ck_assert_int_eq(CTR("tasks", "kill", "-s", "SIGKILL", "v3"), 0);
	for (int i = 0; i < 1500 && strcmp(ctrd_task_status(&C, "v3", NULL), "STOPPED"); i++)
		usleep(20000);
	ck_assert_str_eq(ctrd_task_status(&C, "v3", NULL), "STOPPED");
	ck_assert_msg(CTR("tasks", "delete", "v3") == 0, "%s", err_);
	ck_assert_msg(CTR("containers", "delete", "v3") == 0, "%s", err_);
	/* the shim and rung-vmm exit after delete returns: 30 s for them under TCG */
	count(&b);
	for (int i = 0; i < 150 && !same(&a, &b); i++) {
		usleep(200000);
		count(&b);
	}
	fprintf(stderr, "e2e_oci_ctrdvm: before/after: mounts %d/%d, cgroups %d/%d, processes "
		"%d/%d, state dirs %d/%d, uid slots %d/%d, rung-vmm %d/%d, links %d/%d, stores "
		"%d/%d\n", a.c.mounts, b.c.mounts, a.c.cgroups, b.c.cgroups, a.c.procs, b.c.procs,
		a.c.states, b.c.states, a.c.uids, b.c.uids, a.vmms, b.vmms, a.links, b.links,
		a.stores, b.stores);
	ck_assert_msg(same(&a, &b), "left after delete (see the line above)");
	ck_assert_int_eq(b.c.mounts, 0);
	ck_assert_int_le(b.c.cgroups, a.c.cgroups);
	ck_assert_int_le(b.c.procs, a.c.procs);
	ck_assert_int_le(b.c.states, 0);
	ck_assert_int_le(b.c.uids, 0);
	ck_assert_int_le(b.vmms, a.vmms);
	ck_assert_int_le(b.links, a.links);
	ck_assert_int_le(b.stores, 0);
}
END_TEST

Suite *e2e_oci_ctrdvm_suite(void)
{
	Suite *s = suite_create("e2e_oci_ctrdvm");
	TCase *tc = tcase_create("containerd-vm");
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_tags(tc, "kvm");
	tcase_set_timeout(tc, 1200);
	tcase_add_test(tc, test_vm_run_echo_exit);
	tcase_add_test(tc, test_vm_exec_kill_delete);
	suite_add_tcase(s, tc);
	return s;
}
