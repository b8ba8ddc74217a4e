/*
 * tests/check_oci_vmselect.c: which rung rung-oci runs a bundle on (oci/vm-select.c): the
 * program's name, --isolation, the dev.rung.isolation annotation that may only raise it, bad
 * values refused naming the field, and what the vm rung refuses in a config. The binary's part
 * runs build/rung-oci (as itself and through a rung-oci-vm link) up to the refusal: no KVM needed.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "oci/vm.h"
#include "tests/lib/oci.h"
#include "tests/lib/testutil.h"

START_TEST(test_argv0_and_names)
{
	ck_assert(oci_rung_from_argv0("rung-oci-vm"));
	ck_assert(oci_rung_from_argv0("/usr/local/bin/rung-oci-vm"));
	ck_assert(!oci_rung_from_argv0("rung-oci"));
	ck_assert(!oci_rung_from_argv0("/x/rung-oci-vm/rung-oci"));
	ck_assert(!oci_rung_from_argv0("rung-oci-vmx"));
	ck_assert(!oci_rung_from_argv0(NULL));
	bool vm = true;
	ck_assert_int_eq(oci_rung_parse("container", &vm), 0);
	ck_assert(!vm);
	ck_assert_int_eq(oci_rung_parse("vm", &vm), 0);
	ck_assert(vm);
	ck_assert_int_eq(oci_rung_parse("VM", &vm), -EINVAL);
	ck_assert_int_eq(oci_rung_parse("process", &vm), -EINVAL);
	ck_assert_int_eq(oci_rung_parse("", &vm), -EINVAL);
	ck_assert_int_eq(oci_rung_parse(NULL, &vm), -EINVAL);
}
END_TEST

/* runtime's rung x annotation -> the rung, or a refusal naming the key */
START_TEST(test_annotation_raises_only)
{
	static const struct {
		bool runtime;
		const char *ann; /* the annotations object */
		int want;        /* 0 container, 1 vm, -1 refused */
	} t[] = {
		{false, "{}", 0},
		{true, "{}", 1},
		{false, "{\"other\": \"vm\"}", 0},
		{false, "{\"dev.rung.isolation\": \"container\"}", 0},
		{false, "{\"dev.rung.isolation\": \"vm\"}", 1},
		{true, "{\"dev.rung.isolation\": \"vm\"}", 1},
		{true, "{\"dev.rung.isolation\": \"container\"}", -1},
		{false, "{\"dev.rung.isolation\": \"process\"}", -1},
		{true, "{\"dev.rung.isolation\": \"Vm\"}", -1},
		{false, "{\"dev.rung.isolation\": 1}", -1},
		{false, "{\"dev.rung.isolation\": null}", -1},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		json_t *a = json_loads(t[i].ann, 0, NULL);
		ck_assert_ptr_nonnull(a);
		struct rung_err e = {0};
		bool vm = !t[i].runtime;
		int r = oci_rung_resolve(t[i].runtime, a, &vm, &e);
		json_decref(a);
		if (t[i].want < 0) {
			ck_assert_msg(r < 0, "case %zu: accepted", i);
			ck_assert_msg(strstr(e.msg, "annotations.dev.rung.isolation"), "case %zu: %s",
				      i, e.msg);
		} else {
			ck_assert_msg(r == 0, "case %zu: %s", i, e.msg);
			ck_assert_msg(vm == (t[i].want == 1), "case %zu: vm=%d", i, vm);
		}
	}
	struct rung_err e = {0};
	bool vm = false;
	ck_assert_int_eq(oci_rung_resolve(true, NULL, &vm, &e), 0);
	ck_assert(vm);
	json_t *a = json_pack("{s:s}", OCI_ISOLATION_KEY, "container");
	ck_assert_int_lt(oci_rung_resolve(true, a, &vm, &e), 0);
	ck_assert_ptr_nonnull(strstr(e.msg, "only raise"));
	json_decref(a);
}
END_TEST

static const char vmbase[] =
	"{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\"},"
	" \"process\": {\"args\": [\"/bin/true\"], \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0}},"
	" \"mounts\": [{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"},"
	"   {\"destination\": \"/dev\", \"type\": \"tmpfs\", \"source\": \"tmpfs\"}],"
	" \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"ipc\"}, {\"type\": \"mount\"}]}}";

/* vmbase with key (a top-level or process's) set to the JSON value; the check's verdict. */
static int vm_check(const char *obj, const char *key, const char *value, struct rung_err *e)
{
	json_t *doc = json_loads(vmbase, 0, NULL);
	ck_assert_ptr_nonnull(doc);
	json_t *o = obj ? json_object_get(doc, obj) : doc;
	if (key)
		json_object_set_new(o, key, json_loads(value, JSON_DECODE_ANY, NULL));
	char *t = json_dumps(doc, 0);
	json_decref(doc);
	struct oci_config c = {0};
	int r = oci_config_parse(t, strlen(t), "/bundle", &c, e);
	free(t);
	ck_assert_msg(r == 0, "parse: %s", e->msg);
	r = oci_vm_config_check(&c, e);
	oci_config_release(&c);
	return r;
}

START_TEST(test_vm_refusals)
{
	struct rung_err e = {0};
	ck_assert_msg(vm_check(NULL, NULL, NULL, &e) == 0, "%s", e.msg);
	static const struct {
		const char *obj, *key, *value, *field;
	} t[] = {
		{"process", "user", "{\"uid\": 5, \"gid\": 0}", "process.user"},
		{"process", "user", "{\"uid\": 0, \"gid\": 0, \"additionalGids\": [3]}", "process.user"},
		{NULL, "mounts", "[{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"},"
				 " {\"destination\": \"/data\", \"source\": \"/etc\", \"options\": [\"rbind\"]}]",
		 "mounts[1]"},
		{NULL, "hooks", "{\"prestart\": [{\"path\": \"/bin/true\"}]}", "hooks.prestart"},
		{NULL, "hooks", "{\"createContainer\": [{\"path\": \"/bin/true\"}]}",
		 "hooks.createContainer"},
		{"linux", "resources", "{\"pids\": {\"limit\": 5}}", "linux.resources.pids.limit: 5"},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		e = (struct rung_err){0};
		ck_assert_msg(vm_check(t[i].obj, t[i].key, t[i].value, &e) < 0, "case %zu accepted", i);
		ck_assert_msg(strstr(e.msg, t[i].field), "case %zu: %s", i, e.msg);
	}
	e = (struct rung_err){0}; /* containerd's root: the primary gid 0 repeated is no change */
	ck_assert_msg(vm_check("process", "user", "{\"uid\": 0, \"gid\": 0, \"additionalGids\": [0]}",
			       &e) == 0, "%s", e.msg);
	e = (struct rung_err){0}; /* the allowlist: the guest's network is the pod's (vm-net.c) */
	ck_assert_msg(vm_check(NULL, "annotations", "{\"dev.rung.egress-allow\": \"example.org\"}",
			       &e) == 0, "%s", e.msg);
	e = (struct rung_err){0}; /* empty hook lists are nothing to run */
	ck_assert_msg(vm_check(NULL, "hooks", "{\"prestart\": []}", &e) == 0, "%s", e.msg);
	e = (struct rung_err){0}; /* the guest's command cgroup takes 8 and more */
	ck_assert_msg(vm_check("linux", "resources", "{\"pids\": {\"limit\": 8}}", &e) == 0, "%s",
		      e.msg);
}
END_TEST

/* linux.resources.cpu as the vm rung's cpus: the quota's share of its period, 0.01 to 4. */
START_TEST(test_vm_cpus)
{
	static const struct {
		int64_t quota;
		uint64_t period;
		uint32_t milli;
	} t[] = {{0, 0, 1000},	       {-1, 100000, 1000}, {50000, 100000, 500}, {25000, 50000, 500},
		 {150000, 0, 1500},    {800000, 100000, 4000}, {1000, 1000000, 10},
		 {200000, 100000, 2000}};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct oci_cpu c = {.quota = t[i].quota, .period = t[i].period};
		ck_assert_msg(oci_vm_cpus_milli(&c) == t[i].milli, "case %zu: %u", i,
			      oci_vm_cpus_milli(&c));
	}
}
END_TEST

/* The binary: --isolation, its name, features, and create refusing before it makes anything. */
START_TEST(test_binary_selection)
{
	char dir[] = "/tmp/rung-vmsel-XXXXXX", bin[PATH_MAX], link[PATH_MAX + 16], root[PATH_MAX];
	char out[8192], err[4096], p[PATH_MAX + 32];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(bin, sizeof(bin), "%s/rung-oci", rung_test_build_dir());
	snprintf(link, sizeof(link), "%s/rung-oci-vm", dir);
	ck_assert_int_eq(symlink(bin, link), 0);
	snprintf(root, sizeof(root), "%s/root", dir);
	const char *feat[] = {"features", NULL};
	ck_assert_int_eq(oci_test_run(bin, root, dir, NULL, feat, out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_msg(strstr(out, "\"dev.rung.isolation\": \"container\""), "%s", out);
	ck_assert_int_eq(oci_test_run(link, root, dir, NULL, feat, out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_msg(strstr(out, "\"dev.rung.isolation\": \"vm\""), "%s", out);
	const char *iso_vm[] = {"--isolation", "vm", "features", NULL};
	ck_assert_int_eq(oci_test_run(bin, root, dir, NULL, iso_vm, out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_msg(strstr(out, "\"dev.rung.isolation\": \"vm\""), "%s", out);
	const char *iso_bad[] = {"--isolation", "process", "features", NULL};
	ck_assert_int_eq(oci_test_run(bin, root, dir, NULL, iso_bad, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, "--isolation"), "%s", err);
	/* a bundle asking for the container rung: rung-oci-vm refuses, naming the annotation */
	snprintf(p, sizeof(p), "%s/bundle", dir);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/bundle/config.json", dir);
	const char *cfg = "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\"},"
			  " \"process\": {\"args\": [\"/bin/true\"], \"cwd\": \"/\"},"
			  " \"annotations\": {\"dev.rung.isolation\": \"container\"}}";
	struct rung_err we = {0};
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, p, cfg, strlen(cfg), 0600, &we), 0);
	snprintf(p, sizeof(p), "%s/bundle", dir);
	const char *create[] = {"create", "--bundle", p, "c1", NULL};
	ck_assert_int_eq(oci_test_run(link, root, dir, NULL, create, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, "annotations.dev.rung.isolation") && strstr(err, "only raise"),
		      "%s", err);
	const char *iso_c[] = {"--isolation", "vm", "create", "--bundle", p, "c1", NULL};
	ck_assert_int_eq(oci_test_run(bin, root, dir, NULL, iso_c, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, "only raise"), "%s", err);
	snprintf(p, sizeof(p), "%s/c1", root);
	ck_assert_msg(access(p, F_OK) < 0, "%s left behind", p);
	rung_rm_rf(dir, &we);
}
END_TEST

/* A vm container's paused status is its state directory's vm.paused (the VM's vCPUs stopped by
 * pause): state says paused, pause again is refused, and a resume that cannot reach the VM
 * keeps it paused (the mark goes only after the vCPUs run). No KVM needed: the container's
 * "proxy" is this process, its vm.json names no sandbox. */
START_TEST(test_vm_paused_state)
{
	char root[] = "/tmp/rung-vmpause-XXXXXX", p[PATH_MAX];
	ck_assert_ptr_nonnull(mkdtemp(root));
	struct oci_state st = {.pid = getpid(), .uid_slot = OCI_UID_SLOTS};
	snprintf(st.id, sizeof(st.id), "pz");
	st.start_time = rung_proc_starttime(st.pid);
	struct rung_err e = {0};
	snprintf(p, sizeof(p), "%s/pz", root);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	ck_assert_msg(oci_state_write(root, &st, &e) == 0, "%s", e.msg);
	oci_state_path(root, "pz", "vm.json", p, sizeof(p));
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, p, "{}", 2, 0600, &e), 0);
	ck_assert(oci_vm_is(root, "pz"));
	ck_assert_int_eq(oci_status_of(root, &st), OCI_RUNNING);
	ck_assert_int_eq(oci_vm_pause(root, "pz", false, &e), -EINVAL);
	ck_assert_msg(strstr(e.msg, "is not paused (running)"), "%s", e.msg);
	oci_state_path(root, "pz", OCI_VM_PAUSED, p, sizeof(p));
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, p, "", 0, 0600, &e), 0);
	ck_assert_int_eq(oci_status_of(root, &st), OCI_PAUSED);
	e = (struct rung_err){0};
	ck_assert_int_eq(oci_pause(root, "pz", true, &e), -EINVAL);
	ck_assert_msg(strstr(e.msg, "is not running (paused)"), "%s", e.msg);
	e = (struct rung_err){0};
	ck_assert_int_lt(oci_pause(root, "pz", false, &e), 0); /* no sandbox to resume */
	ck_assert_msg(strstr(e.msg, "resume its VM"), "%s", e.msg);
	ck_assert_int_eq(oci_status_of(root, &st), OCI_PAUSED);
	ck_assert_int_eq(access(p, F_OK), 0);
	e = (struct rung_err){0};
	ck_assert_int_eq(rung_rm_rf(root, &e), 0);
}
END_TEST

/* A pod's app container on the vm rung (the CRI gives it the pause's ipc and uts by path): the
 * paths are checked as the container rung checks them, not joined (the guest has its own
 * kernel); the host's refused, naming the field. */
static int vm_pod_enter(const char *ipc, const char *uts, struct rung_err *e)
{
	char t[2048];
	snprintf(t, sizeof(t),
		 "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\"},"
		 " \"process\": {\"args\": [\"/bin/true\"], \"cwd\": \"/\","
		 "  \"user\": {\"uid\": 0, \"gid\": 0}},"
		 " \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"mount\"},"
		 "  {\"type\": \"ipc\", \"path\": \"%s\"}, {\"type\": \"uts\", \"path\": \"%s\"}]}}",
		 ipc, uts);
	struct oci_config c = {0};
	int r = oci_config_parse(t, strlen(t), "/bundle", &c, e);
	ck_assert_msg(r == 0, "parse: %s", e->msg);
	struct oci_vm_net n;
	r = oci_vm_net_enter(&c, &n, e);
	oci_vm_net_leave(&n);
	oci_config_release(&c);
	return r;
}

START_TEST(test_vm_pod_namespaces)
{
	if (geteuid() != 0)
		RUNG_SKIP("needs root (a user namespace holding the pod's ipc and uts)");
	int pod = oci_test_ns_holder(CLONE_NEWUSER | CLONE_NEWIPC | CLONE_NEWUTS);
	char ipc[64], uts[64], self_ipc[64];
	snprintf(ipc, sizeof(ipc), "/proc/%d/ns/ipc", pod);
	snprintf(uts, sizeof(uts), "/proc/%d/ns/uts", pod);
	snprintf(self_ipc, sizeof(self_ipc), "/proc/%d/ns/ipc", (int)getpid());
	struct rung_err e = {0};
	ck_assert_msg(vm_pod_enter(ipc, uts, &e) == 0, "a pod's namespaces: %s", e.msg);
	e = (struct rung_err){0};
	ck_assert_int_lt(vm_pod_enter(self_ipc, uts, &e), 0);
	ck_assert_msg(strstr(e.msg, "linux.namespaces[2].path") && strstr(e.msg, "the host's ipc"),
		      "%s", e.msg);
	e = (struct rung_err){0};
	ck_assert_int_lt(vm_pod_enter(ipc, ipc, &e), 0); /* an ipc namespace given as the uts one */
	ck_assert_msg(strstr(e.msg, "linux.namespaces[3].path") && strstr(e.msg, "not a uts"),
		      "%s", e.msg);
	oci_test_ns_holder_end(pod);
}
END_TEST

/* Pure: the pod's resolv.conf's search domains and options as the guest's lists: the last
 * search/domain line, 6 domains within 256 bytes, every options line, odd tokens left out. */
START_TEST(test_resolv_lists)
{
	char s[OCI_VM_SEARCH_MAX + 1], o[OCI_VM_DNSOPT_MAX + 1];
	oci_vm_resolv_lists("search old.example\nnameserver 10.96.0.10\n"
			    "search default.svc.cluster.local svc.cluster.local\tcluster.local\n"
			    "options ndots:5\n  options edns0 timeout:1 bad;opt\n", s, o);
	ck_assert_str_eq(s, "default.svc.cluster.local,svc.cluster.local,cluster.local");
	ck_assert_str_eq(o, "ndots:5,edns0,timeout:1");
	oci_vm_resolv_lists("search a b\ndomain only.example\n", s, o);
	ck_assert_str_eq(s, "only.example");
	ck_assert_str_eq(o, "");
	/* 6 domains at most; a bad one (a quote, a colon) does not count, nor is it kept */
	oci_vm_resolv_lists("search d1 \"x d2 a:b d3 d4 d5 d6 d7\n", s, o);
	ck_assert_str_eq(s, "d1,d2,d3,d4,d5,d6");
	/* 256 bytes at most: a domain past them is left out */
	char t[600], dom[101];
	memset(dom, 'a', 100);
	dom[100] = '\0';
	snprintf(t, sizeof(t), "search %s %s %s short\noptions", dom, dom, dom);
	oci_vm_resolv_lists(t, s, o);
	ck_assert_uint_eq(strlen(s), 201 + 6);
	ck_assert(strstr(s, ",short") && strlen(s) <= OCI_VM_SEARCH_MAX);
	oci_vm_resolv_lists("", s, o);
	ck_assert(!s[0] && !o[0]);
}
END_TEST

Suite *oci_vmselect_suite(void)
{
	Suite *s = suite_create("oci_vmselect");
	TCase *tc = tcase_create("vmselect");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_argv0_and_names);
	tcase_add_test(tc, test_annotation_raises_only);
	tcase_add_test(tc, test_vm_refusals);
	tcase_add_test(tc, test_vm_cpus);
	tcase_add_test(tc, test_binary_selection);
	tcase_add_test(tc, test_vm_paused_state);
	tcase_add_test(tc, test_vm_pod_namespaces);
	tcase_add_test(tc, test_resolv_lists);
	suite_add_tcase(s, tc);
	return s;
}
