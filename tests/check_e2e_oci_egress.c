/*
 * tests/check_e2e_oci_egress.c: dev.rung.egress-allow applied by build/rung-oci in a joined
 * network namespace, as a CNI-made pod's. The test makes that namespace (fd-only) with a veth
 * into the test internet (tests/lib/np_world.h: a DNS server and TCP banners on a public-looking
 * /24), and a busybox bundle joining it whose /etc/resolv.conf names the world's DNS server, as
 * the kubelet's cluster DNS would be. Inside, the allowed CIDR:port is reachable and nothing
 * else, an allowed name resolves through rung's DNS proxy and only then is reachable, another
 * name does not resolve (even asked of the upstream directly: redirected), and the container
 * cannot change its network (no CAP_NET_ADMIN there). delete (and delete --force after the init
 * died) leaves no table in the namespace and no proxy; without the annotation the namespace
 * is untouched; a loopback resolver is refused, naming the annotation.
 */
#include <check.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/oci.h"
#include "tests/lib/egress.h"
#include "tests/lib/oci.h"
#include "tests/lib/testutil.h"

struct env {
	char dir[PATH_MAX], bundle[PATH_MAX + 16], root[PATH_MAX + 16], out[PATH_MAX + 16];
	char bin[PATH_MAX], table[32];
	struct np_world w;
	int pod_fd;
	bool cri_resolv; /* resolv.conf bound by the spec, as the CRI does (bundle()) */
	char stdout_[8192], stderr_[8192];
};
static struct env *E;

static int oci(struct env *e, const char *const *args)
{
	return oci_test_run(e->bin, e->root, e->dir, NULL, args, e->stdout_, sizeof(e->stdout_),
			    e->stderr_, sizeof(e->stderr_));
}
#define OCI(e, ...) oci(e, (const char *const[]){__VA_ARGS__, NULL})

static void put(const char *path, const char *text)
{
	struct rung_err err = {0};
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, path, text, strlen(text), 0644, &err), 0);
}

/* The bundle: busybox, resolv.conf naming resolver, script as the program, and (ann != NULL)
 * the annotation; the network namespace is the pod's. With e->cri_resolv the resolv.conf is
 * bound on /etc/resolv.conf as the CRI does (rbind, ro, ...), and the rootfs's own names a
 * server that does not exist: the mount's is the one that counts. */
static void bundle(struct env *e, const char *script, const char *ann, const char *resolver)
{
	static const char *const applets[] = {"sh", "nc", "nslookup", "ip", "echo", "sleep", NULL};
	oci_test_busybox(e->bundle, applets);
	char p[PATH_MAX * 2], txt[256], a[256] = "", ns[64];
	snprintf(p, sizeof(p), "%s/rootfs/etc", e->bundle);
	mkdir(p, 0755);
	char m[PATH_MAX * 2 + 300] = "";
	snprintf(p, sizeof(p), "%s/rootfs/etc/resolv.conf", e->bundle);
	snprintf(txt, sizeof(txt), "nameserver %s\n", e->cri_resolv ? "192.0.2.99" : resolver);
	put(p, txt);
	int k = snprintf(m, sizeof(m), ", {\"destination\": \"/out\", \"source\": \"%s\", "
			 "\"options\": [\"bind\"]}", e->out);
	if (e->cri_resolv)
		oci_test_cri_resolv(e->dir, resolver, m + k, sizeof(m) - (size_t)k);
	if (ann)
		snprintf(a, sizeof(a), ", \"dev.rung.egress-allow\": \"%s\"", ann);
	snprintf(ns, sizeof(ns), "/proc/%d/fd/%d", (int)getpid(), e->pod_fd);
	oci_test_pod_config(e->bundle, script, a, m, ns);
}

static int table_in_pod(void *arg) { return eg_table_exists(arg) ? 1 : 0; }

/* In the pod's namespace: allowed.test over TCP to the world's resolver (redirected to the
 * proxy like any query); 0 when it answered with .10. */
static int tcp_query(void *arg)
{
	struct env *e = arg;
	char server[32], a10[32], ip[64] = "";
	snprintf(server, sizeof(server), "%s53", e->w.net);
	EG_IP(&e->w, 10, a10);
	int rc = npw_dns(server, "allowed.test", true, 3000, ip, sizeof(ip));
	return rc == 0 && !strcmp(ip, a10) ? 0 : 1000 + rc;
}

static bool pod_has_table(struct env *e)
{
	return npw_in_netns(e->pod_fd, table_in_pod, e->table) == 1;
}

/* The proxy's pid from the container's record, and that it holds what it should: nobody,
 * CAP_NET_ADMIN alone. */
static pid_t proxy_pid(struct env *e)
{
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/c1/egress.json", e->root);
	json_error_t je;
	cleanup_json json_t *j = json_load_file(p, 0, &je);
	ck_assert_msg(j, "%s: %s", p, je.text);
	ck_assert_str_eq(json_string_value(json_object_get(j, "table")), e->table);
	pid_t pid = (pid_t)json_integer_value(json_object_get(j, "proxy_pid"));
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(rung_test_status_field(pid, "Uid:\t"), 65534);
	ck_assert_int_eq(rung_test_status_field(pid, "CapEff:\t"), 1L << 12 /* CAP_NET_ADMIN */);
	ck_assert_int_eq(rung_test_status_field(pid, "CapBnd:\t"), 1L << 12);
	ck_assert_int_eq(rung_test_status_field(pid, "Seccomp:\t"), 2);
	ck_assert_int_eq(rung_test_status_field(pid, "NoNewPrivs:\t"), 1);
	return pid;
}

static bool gone(pid_t pid) { return eg_gone(pid); }

static int pod_procs(struct env *e) { return eg_netns_procs(e->pod_fd); }

static char *out_file(struct env *e, const char *name)
{
	char p[PATH_MAX * 2], *txt = NULL;
	struct rung_err err = {0};
	snprintf(p, sizeof(p), "%s/%s", e->out, name);
	ck_assert_msg(rung_file_load(AT_FDCWD, p, 1 << 16, &txt, NULL, &err) == 0, "%s", err.msg);
	return txt;
}

/* The probe's exit status (0 = it worked) as the container's script recorded it; its output
 * on stderr (what a failure shows). */
static int rc_of(struct env *e, const char *name)
{
	char f[64];
	snprintf(f, sizeof(f), "%s.rc", name);
	cleanup_free char *t = out_file(e, f);
	cleanup_free char *o = out_file(e, name);
	fprintf(stderr, "oci_egress: %s => rc %d: %.200s\n", name, atoi(t), o);
	return atoi(t);
}

static void wait_stopped(struct env *e)
{
	for (int i = 0; i < 3000; i++) {
		ck_assert_int_eq(OCI(e, "state", "c1"), 0);
		if (strstr(e->stdout_, "\"stopped\""))
			return;
		usleep(10 * 1000);
	}
	ck_abort_msg("c1 did not stop: %s", e->stdout_);
}

/* SIGKILL c1's init behind rung-oci's back and wait until rung-oci sees it stopped. */
static void kill_init(struct env *e)
{
	ck_assert_int_eq(OCI(e, "state", "c1"), 0);
	cleanup_json json_t *st = json_loads(e->stdout_, 0, NULL);
	pid_t init = (pid_t)json_integer_value(json_object_get(st, "pid"));
	ck_assert_int_gt(init, 0);
	ck_assert_int_eq(kill(init, SIGKILL), 0);
	wait_stopped(e);
}

#define PROBE(name, cmd) cmd " >/out/" name " 2>&1; echo $? >/out/" name ".rc; "

START_TEST(test_allowlist_in_pod)
{
	struct env *e = E;
	char s[4096], ann[128], a53[32];
	const char *n = e->w.net;
	snprintf(a53, sizeof(a53), "%s53", n);
	snprintf(ann, sizeof(ann), "%s12:8080, allowed.test", n);
	snprintf(s, sizeof(s),
		 PROBE("cidr_port", ": | nc -w 3 %s12 8080")
		 PROBE("cidr_other_port", ": | nc -w 3 %s12 80")
		 PROBE("other_addr", ": | nc -w 3 %s11 80")
		 PROBE("name_before", ": | nc -w 3 %s10 80")
		 PROBE("ns_allowed", "nslookup allowed.test")
		 PROBE("name_after", ": | nc -w 3 %s10 80")
		 PROBE("ns_denied", "nslookup denied.test")
		 PROBE("ns_direct", "nslookup allowed.test %s14")
		 PROBE("netadmin", "ip link set lo down"),
		 n, n, n, n, n, n);
	e->cri_resolv = true;
	bundle(e, s, ann, a53);
	e->cri_resolv = false;
	uint64_t t0 = rung_now_us();
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c1") == 0, "%s", e->stderr_);
	fprintf(stderr, "oci_egress: create with the annotation: %.1f ms\n",
		(double)(rung_now_us() - t0) / 1000);
	ck_assert_msg(pod_has_table(e), "no table %s in the pod's namespace", e->table);
	pid_t proxy = proxy_pid(e);
	ck_assert_int_eq(OCI(e, "start", "c1"), 0);
	wait_stopped(e);
	ck_assert_int_eq(rc_of(e, "cidr_port"), 0);
	cleanup_free char *banner = out_file(e, "cidr_port");
	ck_assert_msg(strlen(banner) > 0, "no banner from the allowed address");
	ck_assert_int_ne(rc_of(e, "cidr_other_port"), 0);
	ck_assert_int_ne(rc_of(e, "other_addr"), 0);
	ck_assert_int_ne(rc_of(e, "name_before"), 0); /* not until the name is resolved */
	ck_assert_int_eq(rc_of(e, "ns_allowed"), 0);
	cleanup_free char *res = out_file(e, "ns_allowed");
	char a10[32];
	EG_IP(&e->w, 10, a10);
	ck_assert_msg(strstr(res, a10), "allowed.test: %s", res);
	ck_assert_msg(rc_of(e, "name_after") == 0, "allowed.test's address after the answer");
	ck_assert_int_ne(rc_of(e, "ns_denied"), 0);
	cleanup_free char *denied = out_file(e, "ns_denied");
	ck_assert_msg(strstr(denied, "REFUSED"), "denied.test: %s", denied);
	/* a query to any other server (here .14, which serves no DNS) is the proxy's too */
	ck_assert_int_eq(rc_of(e, "ns_direct"), 0);
	cleanup_free char *direct = out_file(e, "ns_direct");
	ck_assert_msg(strstr(direct, a10), "allowed.test asked of .14: %s", direct);
	ck_assert_int_ne(rc_of(e, "netadmin"), 0);
	cleanup_free char *na = out_file(e, "netadmin");
	ck_assert_msg(strstr(na, "Operation not permitted"), "ip said: %s", na);
	ck_assert_int_eq(npw_in_netns(e->pod_fd, tcp_query, e), 0); /* the proxy's TCP side */
	ck_assert_int_eq(pod_procs(e), 1); /* the proxy alone (the program has exited) */
	/* delete: no table, no proxy, no record */
	ck_assert_msg(OCI(e, "delete", "c1") == 0, "%s", e->stderr_);
	ck_assert_msg(!pod_has_table(e), "table %s left in the pod's namespace", e->table);
	ck_assert_msg(gone(proxy), "proxy %d still running", (int)proxy);
	ck_assert_int_eq(pod_procs(e), 0);
	ck_assert_int_eq(OCI(e, "state", "c1"), 1);
}
END_TEST

/* A bundle running sleep, allowed the world's .12:8080 (the world's resolver). */
static void sleeper(struct env *e)
{
	char ann[64], a53[32];
	snprintf(a53, sizeof(a53), "%s53", e->w.net);
	snprintf(ann, sizeof(ann), "%s12:8080", e->w.net);
	bundle(e, "sleep 100", ann, a53);
}

/* The init killed behind rung-oci's back, then delete --force: the same cleanup. */
START_TEST(test_force_after_init_died)
{
	struct env *e = E;
	sleeper(e);
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c1") == 0, "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "start", "c1"), 0);
	pid_t proxy = proxy_pid(e);
	kill_init(e);
	ck_assert(pod_has_table(e));
	ck_assert_msg(OCI(e, "delete", "--force", "c1") == 0, "%s", e->stderr_);
	ck_assert_msg(!pod_has_table(e), "table %s left after delete --force", e->table);
	ck_assert_msg(gone(proxy), "proxy %d still running", (int)proxy);
	ck_assert_int_eq(pod_procs(e), 0);
}
END_TEST

/* The namespace already gone (its init and proxy killed, its last holder closed): delete
 * --force still succeeds and leaves nothing (the table went with the namespace). */
START_TEST(test_netns_gone)
{
	struct env *e = E;
	int pod = e->pod_fd;
	e->pod_fd = npw_netns_new(); /* a pod of its own: a route (the proxy connects its
				      * upstream socket), no link out */
	ck_assert_int_ge(e->pod_fd, 0);
	ck_assert_int_eq(npw_ip(e->pod_fd, "link set lo up"), 0);
	ck_assert_int_eq(npw_ip(e->pod_fd, "route add default dev lo"), 0);
	sleeper(e);
	int r = OCI(e, "create", "--bundle", e->bundle, "c1");
	int tmp = e->pod_fd;
	e->pod_fd = pod;
	ck_assert_msg(r == 0, "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "start", "c1"), 0);
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/c1/egress.json", e->root);
	json_error_t je;
	cleanup_json json_t *j = json_load_file(p, 0, &je);
	ck_assert_ptr_nonnull(j);
	pid_t proxy = (pid_t)json_integer_value(json_object_get(j, "proxy_pid"));
	kill_init(e);
	ck_assert_int_eq(kill(proxy, SIGKILL), 0);
	for (int i = 0; i < 500 && !gone(proxy); i++)
		usleep(10 * 1000);
	ck_assert(gone(proxy));
	close(tmp); /* the namespace's last holder: it is gone, with its table */
	ck_assert_msg(OCI(e, "delete", "--force", "c1") == 0, "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "state", "c1"), 1);
	ck_assert_int_ne(access(p, F_OK), 0);
}
END_TEST

/* Two containers of one pod (CRI passes pod annotations to each): the first owns the table
 * and the proxy, the second shares them, and its delete leaves them to the first's. */
START_TEST(test_shared_in_pod)
{
	struct env *e = E;
	char ann[64], a53[32];
	snprintf(a53, sizeof(a53), "%s53", e->w.net);
	snprintf(ann, sizeof(ann), "allowed.test");
	bundle(e, "sleep 100", ann, a53);
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c1") == 0, "%s", e->stderr_);
	pid_t proxy = proxy_pid(e);
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c2") == 0, "%s", e->stderr_);
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/c2/egress.json", e->root);
	json_error_t je;
	cleanup_json json_t *j = json_load_file(p, 0, &je);
	ck_assert_msg(j, "%s: %s", p, je.text);
	ck_assert(json_is_false(json_object_get(j, "owner")));
	ck_assert_msg(OCI(e, "delete", "--force", "c2") == 0, "%s", e->stderr_);
	ck_assert(pod_has_table(e));
	ck_assert(!gone(proxy));
	ck_assert_msg(OCI(e, "delete", "--force", "c1") == 0, "%s", e->stderr_);
	ck_assert(!pod_has_table(e));
	ck_assert(gone(proxy));
	ck_assert_int_eq(pod_procs(e), 0);
}
END_TEST

/* Without the annotation the pod's network is the CNI's: no table, no proxy, no record. */
START_TEST(test_untouched_without)
{
	struct env *e = E;
	char a53[32];
	snprintf(a53, sizeof(a53), "%s53", e->w.net);
	bundle(e, "true", NULL, a53);
	uint64_t t0 = rung_now_us();
	ck_assert_msg(OCI(e, "create", "--bundle", e->bundle, "c1") == 0, "%s", e->stderr_);
	fprintf(stderr, "oci_egress: create without it: %.1f ms\n",
		(double)(rung_now_us() - t0) / 1000);
	ck_assert(!pod_has_table(e));
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/c1/egress.json", e->root);
	ck_assert_int_ne(access(p, F_OK), 0);
	ck_assert_int_eq(OCI(e, "delete", "--force", "c1"), 0);
}
END_TEST

/* A loopback resolver in the pod's resolv.conf would be a process of the pod: refused. The
 * image's resolv.conf is read inside the rootfs: a link to a host file finds nothing. */
START_TEST(test_resolver_refused)
{
	struct env *e = E;
	bundle(e, "true", "allowed.test", "127.0.0.53");
	ck_assert_int_eq(OCI(e, "create", "--bundle", e->bundle, "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "annotations.dev.rung.egress-allow") &&
		      strstr(e->stderr_, "loopback resolver"), "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "state", "c1"), 1);
	ck_assert(!pod_has_table(e));
	char a53[32], host[PATH_MAX * 2], link[PATH_MAX * 2], txt[64];
	snprintf(a53, sizeof(a53), "%s53", e->w.net);
	bundle(e, "true", "allowed.test", a53);
	snprintf(host, sizeof(host), "%s/host-resolv.conf", e->dir); /* a good one, on the host */
	snprintf(txt, sizeof(txt), "nameserver %s\n", a53);
	put(host, txt);
	snprintf(link, sizeof(link), "%s/rootfs/etc/resolv.conf", e->bundle);
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(symlink(host, link), 0);
	ck_assert_int_eq(OCI(e, "create", "--bundle", e->bundle, "c1"), 1);
	ck_assert_msg(strstr(e->stderr_, "annotations.dev.rung.egress-allow: the pod's DNS "
				       "resolver"), "%s", e->stderr_);
	ck_assert_int_eq(OCI(e, "state", "c1"), 1);
	ck_assert(!pod_has_table(e));
	ck_assert_int_eq(unlink(link), 0);
}
END_TEST

static void setup_env(void)
{
	struct env *e = E = calloc(1, sizeof(*e));
	e->pod_fd = -1;
	if (geteuid() != 0)
		return;
	char *d = rung_test_tmpdir("ociegress");
	snprintf(e->bundle, sizeof(e->bundle), "%s/bundle", d);
	snprintf(e->root, sizeof(e->root), "%s/root", d);
	snprintf(e->out, sizeof(e->out), "%s/out", d);
	snprintf(e->bin, sizeof(e->bin), "%s/rung-oci", rung_test_build_dir());
	snprintf(e->dir, sizeof(e->dir), "%s", d);
	free(d);
	mkdir(e->bundle, 0755);
	ck_assert_msg(access(e->bin, X_OK) == 0, "%s: build it first (make all)", e->bin);
	eg_world_start(&e->w);
	/* the pod: its own namespace, a veth into the world (a /30 of its own), a default route */
	char v[16];
	snprintf(v, sizeof(v), "pod%d", (int)getpid() % 100000);
	e->pod_fd = eg_pod_netns(&e->w, v);
	struct stat st;
	ck_assert_int_eq(fstat(e->pod_fd, &st), 0);
	snprintf(e->table, sizeof(e->table), "rung_oci_%lx", (unsigned long)st.st_ino);
}

static void teardown_test(void);

/* each test: an empty out directory, writable by the container's unprivileged host uid */
static void setup_out(void)
{
	RUNG_REQUIRE_ROOT();
	teardown_test(); /* a failed test's (its teardown did not run) */
	struct rung_err err = {0};
	rung_rm_rf(E->out, &err);
	mkdir(E->out, 0777);
	chmod(E->out, 0777);
}

static void teardown_test(void)
{
	if (geteuid() == 0) {
		OCI(E, "delete", "--force", "c2");
		OCI(E, "delete", "--force", "c1");
	}
}

static void teardown_env(void)
{
	if (geteuid() == 0) {
		teardown_test();
		npw_down(&E->w);
		if (E->pod_fd >= 0)
			close(E->pod_fd);
		struct rung_err err = {0};
		rung_rm_rf(E->dir, &err);
	}
	free(E);
	E = NULL;
}

Suite *e2e_oci_egress_suite(void)
{
	Suite *s = suite_create("e2e_oci_egress");
	TCase *tc = tcase_create("egress");
	tcase_add_unchecked_fixture(tc, setup_env, teardown_env);
	tcase_add_checked_fixture(tc, setup_out, teardown_test);
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_allowlist_in_pod);
	tcase_add_test(tc, test_force_after_init_died);
	tcase_add_test(tc, test_netns_gone);
	tcase_add_test(tc, test_shared_in_pod);
	tcase_add_test(tc, test_untouched_without);
	tcase_add_test(tc, test_resolver_refused);
	suite_add_tcase(s, tc);
	return s;
}
