/*
 * tests/check_e2e_egress_vm.c: the egress allowlist on the vm rung, end to end: a real guest under
 * KVM whose virtio-net frames reach the host through a tap behind the sandbox's netpolicy
 * table. Probes run inside the guest (the image's python3, tests' eg_probe_py); the test
 * internet is tests/lib/np_world.h. Tagged "kvm".
 *
 * It needs a KVM that runs guests and a store holding the test image rung/vmtest:py with its
 * base disk, named by $RUNG_TEST_VM_STORE: the nested stage (make check-vm) prepares both and
 * runs this suite inside its L1 guest (vmm/guest/l1-rung.sh). Elsewhere it skips, loudly.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "rung/rung.h"
#include "tests/lib/egress.h"
#include "tests/lib/testutil.h"

#define P(...)                                                                                     \
	(const char *const[]) { __VA_ARGS__, NULL }
#define VM_IMAGE "rung/vmtest:py"

/* The router on the prepared store, if this host can run the vm rung; NULL + why if not. */
static struct rung_router *vm_router(char *why, size_t n)
{
	if (geteuid() != 0) {
		snprintf(why, n, "needs root (CI runs as root)");
		return NULL;
	}
	const char *store = getenv("RUNG_TEST_VM_STORE");
	char *tmp = NULL;
	if (!store || !*store)
		store = tmp = rung_test_tmpdir("vm-egress"); /* only to ask whether KVM works */
	ck_assert_ptr_nonnull(store);
	struct rung_router_opts o = {.state_dir = store};
	rung_test_router_env(&o);
	struct rung_router *r = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rung_router_new(&o, &r, &err) == 0, "router on %s: %s", store, err.msg);
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("vm-egress");
	s.image = strdup(VM_IMAGE);
	s.isolation = RUNG_ISO_VM;
	enum rung_isolation iso;
	int rc = rung_router_pick(r, &s, &iso, &err);
	rung_spec_release(&s);
	if (rc < 0)
		snprintf(why, n, "the vm rung cannot run here: %s", err.msg);
	else if (tmp)
		snprintf(why, n,
			 "no $RUNG_TEST_VM_STORE with %s: the nested stage (make check-vm) "
			 "runs this suite",
			 VM_IMAGE);
	if (rc < 0 || tmp) {
		rung_router_free(r);
		if (tmp) {
			rung_rm_rf(tmp, &err);
			free(tmp);
		}
		return NULL;
	}
	return r;
}

/* The router, made once the test world is up: routers take the host settings when they are
 * made (rung_test_router_env), and the world sets RUNG_DNS_UPSTREAM and RUNG_NET_POOL. So:
 * probe (skip if the vm rung cannot run here), bring the world up, make the router. */
#define VM_ROUTER_IN(r, w)                                                                         \
	do {                                                                                       \
		char why_[512];                                                                    \
		if (!((r) = vm_router(why_, sizeof(why_))))                                        \
			RUNG_SKIP(why_);                                                           \
		rung_router_free(r);                                                               \
		eg_world_start(w);                                                                 \
		(r) = vm_router(why_, sizeof(why_));                                               \
		ck_assert_msg((r) != NULL, "%s", why_);                                            \
	} while (0)

/* Acquire on thread; from: a template (rung_snapshot_create) or NULL. The rc; *sb or err. */
static int vm_try(struct rung_router *r, const char *thread, const char *const *allow,
		  const char *from, struct rung_sandbox **sb, struct rung_err *err)
{
	struct rung_spec s;
	eg_spec(&s, "vm-egress", allow);
	s.image = strdup(VM_IMAGE);
	s.isolation = RUNG_ISO_VM;
	s.limits.memory_bytes = 256ull << 20;
	s.from_snapshot = from ? strdup(from) : NULL;
	struct rung_key key = {"vm-egress", thread, "agent"};
	*sb = NULL;
	int rc = rung_acquire(r, &key, &s, sb, NULL, err);
	rung_spec_release(&s);
	return rc;
}

static struct rung_sandbox *vm_acquire(struct rung_router *r, const char *thread,
				       const char *const *allow)
{
	struct rung_sandbox *sb = NULL;
	struct rung_err err = {0};
	ck_assert_msg(vm_try(r, thread, allow, NULL, &sb, &err) == 0,
		      "acquire a vm with egress: %s", err.msg);
	return sb;
}

START_TEST(t_vm_allowlist)
{
	struct rung_router *r;
	struct np_world w;
	VM_ROUTER_IN(r, &w);
	char a10[32], a11[32], a12[32], a53[32], cidr[48], pr[12][96];
	EG_IP(&w, 10, a10);
	EG_IP(&w, 11, a11);
	EG_IP(&w, 12, a12);
	EG_IP(&w, 53, a53);
	snprintf(cidr, sizeof(cidr), "%s:8080", a12);
	struct rung_sandbox *sb = vm_acquire(r, "allow", P("allowed.test", cidr));

	/* one device, configured by the guest kernel; nothing opened before a lookup */
	snprintf(pr[0], sizeof(pr[0]), "tcp %s 80", a10);
	char *out = eg_py(sb, P("ifaces", pr[0]));
	eg_expect(out, "ifaces", "eth0,lo", 0);
	eg_expect(out, pr[0], "refused", EG_FAST_MS);
	free(out);

	/* the allowed name resolves through the proxy (resolv.conf) and is reachable */
	snprintf(pr[1], sizeof(pr[1]), "tcp %s 80", a10);
	snprintf(pr[2], sizeof(pr[2]), "udp %s 9000", a10);
	out = eg_py(sb,
		    P("gai allowed.test", "dns allowed.test", "dnstcp allowed.test", pr[1], pr[2]));
	char want[64];
	snprintf(want, sizeof(want), "ip=%s", a10);
	eg_expect(out, "gai allowed.test", want, 0);
	snprintf(want, sizeof(want), "rcode=0 ip=%s", a10);
	eg_expect(out, "dns allowed.test", want, 0);
	eg_expect(out, "dnstcp allowed.test", want, 0);
	eg_expect(out, pr[1], "ok hello", 0);
	eg_expect(out, pr[2], "ok", 0);
	free(out);

	/* everything else: refused names, closed addresses, other resolvers, the CIDR's port */
	snprintf(pr[3], sizeof(pr[3]), "tcp %s 80", a11);
	snprintf(pr[4], sizeof(pr[4]), "dns allowed.test %s", a53);
	snprintf(pr[5], sizeof(pr[5]), "tcp %s 8080", a12);
	snprintf(pr[6], sizeof(pr[6]), "tcp %s 80", a12);
	int q0 = atomic_load(&w.dns_queries);
	out = eg_py(sb, P("dns denied.test", pr[3], pr[4], pr[5], pr[6], "tcp6 2001:db8::1 80"));
	eg_expect(out, "dns denied.test", "rcode=5", 0); /* REFUSED by the proxy */
	eg_expect(out, pr[3], "refused", EG_FAST_MS);
	eg_expect(out, pr[4], "unreach", EG_FAST_MS);
	eg_expect(out, pr[5], "ok hello", 0);
	eg_expect(out, pr[6], "refused", EG_FAST_MS);
	eg_expect(out, "tcp6 2001:db8::1 80", "afnosupport", 0); /* no IPv6 in the guest */
	free(out);
	ck_assert_int_eq(atomic_load(&w.dns_queries), q0); /* the world's resolver never reached */

	const char *state = rung_router_state_dir(r);
	eg_assert_net(state, rung_sandbox_id(sb), true);
	eg_dispose(r, sb, state); /* asserts the tap, the table and the lease are gone */
	rung_router_free(r);
	npw_down(&w);
}
END_TEST

/* With no allowlist the VM has no network device at all. */
START_TEST(t_vm_no_network)
{
	struct rung_router *r;
	struct np_world w;
	VM_ROUTER_IN(r, &w);
	char a10[32], pr[96];
	EG_IP(&w, 10, a10);
	snprintf(pr, sizeof(pr), "tcp %s 80", a10);
	struct rung_sandbox *sb = vm_acquire(r, "none", NULL);
	char *out = eg_py(sb, P("ifaces", pr, "gai allowed.test"));
	char b[128];
	eg_res(out, "ifaces", b, sizeof(b), NULL);
	ck_assert_msg(!strcmp(b, "lo"), "a network device without an allowlist: %s", b);
	eg_expect(out, pr, "netunreach", EG_FAST_MS);
	eg_expect(out, "gai allowed.test", "gaierror", 0);
	free(out);
	eg_dispose(r, sb, rung_router_state_dir(r));
	rung_router_free(r);
	npw_down(&w);
}
END_TEST

/* The allowed name resolves (through the DNS proxy resolv.conf names) and answers; another
 * address and another name are refused: the guest uses its own tap, lease and proxy. */
static void vm_reach(struct rung_sandbox *sb, const char *a10, const char *a11, const char *who)
{
	char p1[96], p2[96], want[64];
	snprintf(p1, sizeof(p1), "tcp %s 80", a10);
	snprintf(p2, sizeof(p2), "tcp %s 80", a11);
	char *out = eg_py(sb, P("gai allowed.test", p1, p2, "dns denied.test"));
	fprintf(stderr, "%s: %s\n", who, out);
	snprintf(want, sizeof(want), "ip=%s", a10);
	eg_expect(out, "gai allowed.test", want, 0);
	eg_expect(out, p1, "ok hello", 0);
	eg_expect(out, p2, "refused", EG_FAST_MS);
	eg_expect(out, "dns denied.test", "rcode=5", 0);
	free(out);
}

/* A template with an allowlist gives two clones, each on its own network (docs/snapshots.md);
 * a clone whose allowlist differs is refused naming egress_allow; the source suspended to disk
 * and resumed still reaches its name; nothing is left after dispose. */
START_TEST(t_vm_snapshot_egress)
{
	struct rung_router *r;
	struct np_world w;
	VM_ROUTER_IN(r, &w);
	char a10[32], a11[32];
	EG_IP(&w, 10, a10);
	EG_IP(&w, 11, a11);
	const char *state = rung_router_state_dir(r);
	struct rung_sandbox *src = vm_acquire(r, "tsrc", P("allowed.test"));
	vm_reach(src, a10, a11, "source");
	struct rung_err err = {0};
	ck_assert_msg(rung_snapshot_create(r, rung_sandbox_id(src), NULL, "egress", false, NULL,
					   &err) == 0, "snapshot: %s", err.msg);
	struct rung_sandbox *c[2] = {NULL, NULL};
	for (int i = 0; i < 2; i++) {
		ck_assert_msg(vm_try(r, i ? "tc2" : "tc1", P("allowed.test"), "egress", &c[i],
				     &err) == 0, "clone %d: %s", i + 1, err.msg);
		eg_assert_net(state, rung_sandbox_id(c[i]), true);
		vm_reach(c[i], a10, a11, i ? "clone 2" : "clone 1");
	}
	struct rung_sandbox *bad = NULL;
	ck_assert_int_eq(vm_try(r, "tc3", P("other.test"), "egress", &bad, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "egress_allow"), "%s", err.msg);
	ck_assert_ptr_null(bad);
	for (int i = 0; i < 2; i++)
		eg_dispose(r, c[i], state);
	/* suspend to disk: the VMM exits; the resumed guest is told its network (a new tap) */
	ck_assert_msg(rung_suspend_to_disk(src, &err) == 0, "suspend --to-disk: %s", err.msg);
	ck_assert_msg(rung_resume(src, &err) == 0, "resume: %s", err.msg);
	vm_reach(src, a10, a11, "resumed");
	eg_dispose(r, src, state);
	ck_assert_msg(rung_snapshot_remove(r, "egress", NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(eg_store_tables(state), 0);
	ck_assert_int_eq(eg_lease_count(state), 0);
	rung_router_free(r);
	npw_down(&w);
}
END_TEST

Suite *e2e_egress_vm_suite(void)
{
	Suite *s = suite_create("e2e_egress_vm");
	TCase *tc = tcase_create("vm_egress");
	tcase_set_tags(tc, "kvm");
	/* a nested guest boots in seconds to a minute under TCG */
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, t_vm_allowlist);
	tcase_add_test(tc, t_vm_no_network);
	tcase_add_test(tc, t_vm_snapshot_egress);
	suite_add_tcase(s, tc);
	return s;
}
