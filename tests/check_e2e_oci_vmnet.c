/*
 * tests/check_e2e_oci_vmnet.c: the pod's network for rung-oci on the vm rung (oci/vm-net.c).
 * The test makes a pod's network namespace the way a CNI does (fd-only: a veth from the test
 * internet of tests/lib/np_world.h into it, an address and a default route) and a busybox
 * bundle joining it, whose /etc/resolv.conf names the world's DNS server (the pod's resolver;
 * RUNG_DNS_UPSTREAM is unset, so only the bundle can name it). build/rung-oci as rung-oci-vm:
 * without dev.rung.egress-allow the guest reaches the world through the pod (0.0.0.0/0) and
 * resolves any name of the pod's resolver, and a connection from the world to the pod's address
 * reaches the guest's listener; with it the allowed CIDR:port is reachable and not
 * another address, an allowed name resolves through rung's DNS proxy (then its address is
 * reachable) and a denied one is refused. After delete the pod's namespace has no tap, no rung
 * table (nor the forward guard) and no process of ours. The guest's probes print their results
 * on the program's stdout (the proxy's, our create's file). Needs a host where the vm rung runs:
 * the nested stage (make check-vm, vmm/guest/l1-oci-vm.sh, VMTEST_ONLY rung-oci-vmnet) runs it
 * in its L1 guest; elsewhere it skips, loudly. Tagged "kvm".
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/oci.h"
#include "tests/lib/egress.h"
#include "tests/lib/oci.h"
#include "tests/lib/testutil.h"

struct vn {
	char dir[PATH_MAX], root[PATH_MAX + 16], vmbin[PATH_MAX + 16], bundle[PATH_MAX + 16];
	struct np_world w;
	int pod_fd;
};

static int vn_spawn(const struct vn *v, const char *tag, const char *const *args)
{
	return oci_test_spawn(v->vmbin, v->root, v->dir, tag, args);
}
#define VN(v, tag, ...) vn_spawn(v, tag, (const char *const[]){__VA_ARGS__, NULL})

/* <dir>/<tag>.<ext> (malloc'd, "" when missing). */
static char *vn_text(const struct vn *v, const char *tag, const char *ext)
{
	char p[PATH_MAX + 64], *t = NULL;
	snprintf(p, sizeof(p), "%s/%s.%s", v->dir, tag, ext);
	if (rung_file_load(AT_FDCWD, p, 1 << 20, &t, NULL, NULL) < 0)
		t = strdup("");
	return t;
}

static void put(const char *path, const char *text)
{
	struct rung_err err = {0};
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, path, text, strlen(text), 0644, &err), 0);
}

/* The bundle: busybox, resolv.conf naming the world's DNS server (cri: bound on
 * /etc/resolv.conf as the CRI does), script as the program, the pod's network namespace, and
 * (ann != NULL) the annotation. */
static void vn_bundle(struct vn *v, const char *script, const char *ann, bool cri)
{
	static const char *const applets[] = {"sh", "nc", "nslookup", "echo", "cat", "tr", NULL};
	oci_test_busybox(v->bundle, applets);
	char p[PATH_MAX * 2], txt[128], a[256] = "", m[PATH_MAX + 200] = "", ns[64];
	static const char *const dirs[] = {"proc", "sys", "dev", "tmp", "etc", "root"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/rootfs/%s", v->bundle, dirs[i]);
		mkdir(p, 0755);
	}
	snprintf(p, sizeof(p), "%s/rootfs/etc/resolv.conf", v->bundle);
	snprintf(txt, sizeof(txt), "nameserver %s53\n", cri ? "10.255.255." : v->w.net);
	put(p, txt);
	if (cri) { /* the rootfs's names a server that does not exist: the bind's counts */
		snprintf(txt, sizeof(txt), "%s53", v->w.net);
		oci_test_cri_resolv(v->dir, txt, m, sizeof(m));
	}
	if (ann)
		snprintf(a, sizeof(a), ", \"dev.rung.egress-allow\": \"%s\"", ann);
	snprintf(ns, sizeof(ns), "/proc/%d/fd/%d", (int)getpid(), v->pod_fd);
	oci_test_pod_config(v->bundle, script, a, m, ns);
}

/* In the pod's namespace: 1 per rg* link, 10 per rung table (the guard's too). */
static int pod_census(void *arg)
{
	(void)arg;
	int n = 0;
	struct if_nameindex *ifs = if_nameindex();
	for (struct if_nameindex *i = ifs; i && i->if_index; i++)
		n += !strncmp(i->if_name, "rg", 2);
	if (ifs)
		if_freenameindex(ifs);
	cleanup_free char *all = eg_table_text_all();
	for (const char *p = all; p && (p = strstr(p, "table inet rung_")); p++)
		n += 10;
	return n;
}

/* Each test's directory is under vn_base (made by the TCase's unchecked setup, in the parent):
 * a failed test exits at once (no teardown of its own), and the parent's deletes its guest. */
static char vn_base[PATH_MAX / 2];

static void vn_base_make(void)
{
	char *d = rung_test_tmpdir("oci-vmnet");
	snprintf(vn_base, sizeof(vn_base), "%s", d);
	free(d);
}

/* The test's pod: a fresh namespace, a veth from the world into it, an address, a route. */
static void vn_setup(struct vn *v)
{
	snprintf(v->dir, sizeof(v->dir), "%s/XXXXXX", vn_base);
	ck_assert_ptr_nonnull(mkdtemp(v->dir));
	ck_assert_int_eq(chmod(v->dir, 0711), 0); /* the sandboxes' uids reach their stores */
	snprintf(v->root, sizeof(v->root), "%s/r", v->dir);
	snprintf(v->bundle, sizeof(v->bundle), "%s/b", v->dir);
	snprintf(v->vmbin, sizeof(v->vmbin), "%s/rung-oci-vm", v->dir);
	char bin[PATH_MAX];
	snprintf(bin, sizeof(bin), "%s/rung-oci", rung_test_build_dir());
	ck_assert_int_eq(symlink(bin, v->vmbin), 0);
	ck_assert_int_eq(mkdir(v->bundle, 0755), 0);
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0); /* as the shim: we reap the proxy */
	eg_world_start(&v->w);
	unsetenv("RUNG_DNS_UPSTREAM"); /* the pod's resolver is the bundle's resolv.conf's */
	char veth[16];
	snprintf(veth, sizeof(veth), "vpod%d", (int)getpid() % 100000);
	v->pod_fd = eg_pod_netns(&v->w, veth);
	ck_assert_int_eq(npw_in_netns(v->pod_fd, pod_census, NULL), 0);
}

/* In the world: a connection to the pod's address, port 8000 (the guest's listener's "hello"). */
static int pod_connect(void *arg)
{
	(void)arg;
	return npw_tcp("10.250.0.2", 8000, 3000);
}

/* Until the guest listens (its kernel resets before), at most 60 s: pod_connect's last. */
static int vn_inbound(struct vn *v)
{
	int r = -1;
	for (int i = 0; i < 120 && (r = npw_in_netns(v->w.inet_fd, pod_connect, NULL)) != 0; i++)
		usleep(500 * 1000);
	return r;
}

/* create, start, (inbound) a connection from the world to the pod's address while the program
 * runs, its exit (through its proxy, our child); its stdout. */
static char *vn_run(struct vn *v, const char *id, bool inbound)
{
	char pf[PATH_MAX + 64], tag[64];
	snprintf(pf, sizeof(pf), "%s/%s.pid", v->dir, id);
	snprintf(tag, sizeof(tag), "%s-create", id);
	int rc = VN(v, tag, "create", "--bundle", v->bundle, "--pid-file", pf, id);
	cleanup_free char *cerr = vn_text(v, tag, "err");
	ck_assert_msg(rc == 0, "create %s: %d %s", id, rc, cerr);
	cleanup_free char *pidt = vn_text(v, id, "pid");
	pid_t pid = (pid_t)atoi(pidt);
	ck_assert_int_gt(pid, 0);
	ck_assert_msg(npw_in_netns(v->pod_fd, pod_census, NULL) >= 11, "no tap or table in the pod");
	ck_assert_int_eq(VN(v, "start", "start", id), 0);
	int in = inbound ? vn_inbound(v) : 0;
	ck_assert_msg(in == 0, "no connection to the guest through the pod's address: %d", in);
	int st = -1;
	for (int i = 0; i < 1200 && waitpid(pid, &st, WNOHANG) == 0; i++)
		usleep(100 * 1000);
	ck_assert_msg(WIFEXITED(st), "the program did not exit: %d", st);
	char *out = vn_text(v, tag, "out");
	fprintf(stderr, "e2e_oci_vmnet: %s's output: %s\n", id, out);
	return out;
}

/* delete; then nothing of ours in the pod's namespace. */
static void vn_delete(struct vn *v, const char *id)
{
	int rc = VN(v, "delete", "delete", id);
	cleanup_free char *e = vn_text(v, "delete", "err");
	ck_assert_msg(rc == 0, "delete %s: %s", id, e);
	int census = -1, procs = -1;
	for (int i = 0; i < 50; i++) { /* the supervisor and rung-vmm die as delete returns */
		census = npw_in_netns(v->pod_fd, pod_census, NULL);
		procs = eg_netns_procs(v->pod_fd);
		if (census == 0 && procs == 0)
			break;
		usleep(100 * 1000);
	}
	ck_assert_msg(census == 0, "left in the pod: %d (rg* links, 10 per rung table)", census);
	ck_assert_msg(procs == 0, "%d processes left in the pod's namespace", procs);
}

static void vn_finish(struct vn *v)
{
	npw_down(&v->w);
	close(v->pod_fd);
	struct rung_err e = {0};
	rung_rm_rf(v->dir, &e);
}

/* The probe's "@name=<status> <output>" line in out: its status (-1: none). */
static int probe(const char *out, const char *name, char *text, size_t n)
{
	char key[64];
	snprintf(key, sizeof(key), "@%s=", name);
	const char *p = strstr(out, key);
	if (!p)
		return -1;
	p += strlen(key);
	int rc = atoi(p);
	const char *sp = strchr(p, ' '), *nl = strchr(p, '\n');
	snprintf(text, n, "%.*s", sp && nl && sp < nl ? (int)(nl - sp) : 0, sp ? sp : "");
	return rc;
}

#define PROBE(name, cmd) cmd " >/tmp/o 2>&1; echo \"@" name "=$? $(tr '\\n' ' ' </tmp/o)\"; "

#define VN_BEGIN(v)                                                                                \
	struct vn v = {.pod_fd = -1};                                                              \
	do {                                                                                       \
		char why_[512];                                                                    \
		if (!oci_test_vm_runs(why_, sizeof(why_)))                                         \
			RUNG_SKIP(why_);                                                           \
		vn_setup(&v);                                                                      \
	} while (0)

/* Without the annotation: the pod's network, the pod's resolver, any name. */
START_TEST(t_oci_vmnet_open)
{
	VN_BEGIN(v);
	char s[2048], t[512], a10[32], a11[32];
	const char *n = v.w.net;
	EG_IP(&v.w, 10, a10);
	EG_IP(&v.w, 11, a11);
	snprintf(s, sizeof(s),
		 PROBE("resolv", "cat /etc/resolv.conf")
		 PROBE("tcp80", ": | nc -w 5 %s12 80")
		 PROBE("tcp8080", ": | nc -w 5 %s11 8080")
		 PROBE("ns_allowed", "nslookup allowed.test")
		 PROBE("ns_denied", "nslookup denied.test")
		 "echo hello | nc -l -p 8000; echo \"@inbound=$?\"",
		 n, n);
	vn_bundle(&v, s, NULL, true);
	cleanup_free char *out = vn_run(&v, "c1", true);
	char want[64];
	snprintf(want, sizeof(want), "nameserver %s53", n);
	ck_assert_msg(probe(out, "resolv", t, sizeof(t)) == 0 && strstr(t, want), "%s", out);
	/* the pod's search domains and options (the CRI's resolv.conf's), after rung's options */
	ck_assert_msg(strstr(t, " search default.svc.cluster.local svc.cluster.local ") &&
		      strstr(t, "timeout:2 options ndots:5 "), "%s", out);
	ck_assert_msg(probe(out, "tcp80", t, sizeof(t)) == 0 && *t, "%s", out);
	ck_assert_msg(probe(out, "tcp8080", t, sizeof(t)) == 0 && *t, "%s", out);
	ck_assert_msg(probe(out, "ns_allowed", t, sizeof(t)) == 0 && strstr(t, a10), "%s", out);
	ck_assert_msg(probe(out, "ns_denied", t, sizeof(t)) == 0 && strstr(t, a11), "%s", out);
	ck_assert_msg(probe(out, "inbound", t, sizeof(t)) == 0, "%s", out);
	vn_delete(&v, "c1");
	vn_finish(&v);
}
END_TEST

/* With dev.rung.egress-allow: the allowlist, on the guest's forwarded traffic. */
START_TEST(t_oci_vmnet_allowlist)
{
	VN_BEGIN(v);
	char s[2048], t[512], a10[32], ann[128];
	const char *n = v.w.net;
	EG_IP(&v.w, 10, a10);
	snprintf(ann, sizeof(ann), "%s12:8080, allowed.test", n);
	snprintf(s, sizeof(s),
		 PROBE("cidr_port", ": | nc -w 3 %s12 8080")
		 PROBE("cidr_other_port", ": | nc -w 3 %s12 80")
		 PROBE("other_addr", ": | nc -w 3 %s11 80")
		 PROBE("name_before", ": | nc -w 3 %s10 80")
		 PROBE("ns_allowed", "nslookup allowed.test")
		 PROBE("name_after", ": | nc -w 3 %s10 80")
		 PROBE("ns_denied", "nslookup denied.test")
		 PROBE("ns_direct", "nslookup denied.test %s53"),
		 n, n, n, n, n, n);
	vn_bundle(&v, s, ann, false);
	cleanup_free char *out = vn_run(&v, "c1", false);
	ck_assert_msg(probe(out, "cidr_port", t, sizeof(t)) == 0 && *t, "%s", out);
	ck_assert_msg(probe(out, "cidr_other_port", t, sizeof(t)) > 0, "%s", out);
	ck_assert_msg(probe(out, "other_addr", t, sizeof(t)) > 0, "%s", out);
	ck_assert_msg(probe(out, "name_before", t, sizeof(t)) > 0, "%s", out);
	ck_assert_msg(probe(out, "ns_allowed", t, sizeof(t)) == 0 && strstr(t, a10), "%s", out);
	ck_assert_msg(probe(out, "name_after", t, sizeof(t)) == 0 && *t, "%s", out);
	ck_assert_msg(probe(out, "ns_denied", t, sizeof(t)) > 0, "%s", out);
	/* the pod's resolver asked directly: refused by the table (DNS goes to the proxy only) */
	ck_assert_msg(probe(out, "ns_direct", t, sizeof(t)) > 0, "%s", out);
	vn_delete(&v, "c1");
	vn_finish(&v);
}
END_TEST

/* delete --force what a failed test left (its namespaces died with it), then the directories. */
static void vn_base_clean(void)
{
	DIR *b = opendir(vn_base);
	struct dirent *t;
	while (b && (t = readdir(b))) {
		struct vn v = {.pod_fd = -1};
		snprintf(v.dir, sizeof(v.dir), "%s/%.200s", vn_base, t->d_name);
		snprintf(v.root, sizeof(v.root), "%s/r/c1", v.dir);
		snprintf(v.vmbin, sizeof(v.vmbin), "%s/rung-oci-vm", v.dir);
		if (t->d_name[0] == '.' || access(v.root, F_OK) < 0)
			continue;
		snprintf(v.root, sizeof(v.root), "%s/r", v.dir);
		fprintf(stderr, "e2e_oci_vmnet: a test left c1 in %s: delete --force: %d\n", v.dir,
			VN(&v, "cleanup", "delete", "--force", "c1"));
	}
	if (b)
		closedir(b);
	struct rung_err e = {0};
	rung_rm_rf(vn_base, &e);
}

Suite *e2e_oci_vmnet_suite(void)
{
	Suite *s = suite_create("e2e_oci_vmnet");
	TCase *tc = tcase_create("oci_vmnet");
	tcase_set_tags(tc, "kvm");
	tcase_set_timeout(tc, 900);
	tcase_add_unchecked_fixture(tc, vn_base_make, vn_base_clean);
	tcase_add_test(tc, t_oci_vmnet_open);
	tcase_add_test(tc, t_oci_vmnet_allowlist);
	suite_add_tcase(s, tc);
	return s;
}
