/*
 * Egress turns on IPv4 forwarding, which is host-wide: it must not make the host a router for
 * anything but rung's own interfaces (issue 10, item 6). A "host" netns H with two neighbours
 * A and B on their own links (as a LAN and a VPN would be) and one rung sandbox S: before,
 * A reached B through H as soon as a sandbox came up; now only S's traffic is forwarded.
 * Everything runs in namespaces the test creates. Tagged "net"; needs root.
 */
#include <check.h>
#include <fcntl.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/util.h"
#include "netpolicy/np.h"
#include "tests/lib/egress.h"
#include "tests/lib/np_world.h"
#include "tests/lib/testutil.h"

struct fwd_run {
	int h, a, b;	    /* netns fds */
	char state_dir[96]; /* for np_sandbox_up inside H */
	/* results, written by the child in H */
	int up, fwd_before, a_to_b, s_to_b, guarded, sb_fd;
	char msg[256];
};

static int sysctl_set(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = write(fd, v, strlen(v)) == (ssize_t)strlen(v) ? 0 : -EIO;
	close(fd);
	return r;
}

static int p_ping_b(void *arg)
{
	(void)arg;
	return npw_ping("172.31.2.2", 500);
}

static int p_ping_fwd(void *arg)
{
	(void)arg;
	return npw_ping("172.31.1.2", 500) == 0 && npw_ping("172.31.2.2", 500) == 0 ? 0 : -1;
}

/* In H: a sandbox comes up (forwarding was off), then who can reach B through H? */
static int in_h(void *arg)
{
	struct fwd_run *f = arg;
	if (sysctl_set("/proc/sys/net/ipv4/ip_forward", "0") < 0)
		return -EIO;
	f->fwd_before = npw_in_netns(f->a, p_ping_b, NULL);
	static const char *const allow[] = {"172.31.2.0/24"};
	struct np_policy p;
	struct rung_err err = {0};
	if (np_policy_parse(allow, 1, &p, &err) < 0)
		return -EINVAL;
	struct np_config cfg = {.state_dir = f->state_dir, .upstream = "172.31.1.2:53"};
	int s = npw_netns_new();
	struct np_net *net = NULL;
	f->up = np_sandbox_up(&cfg, "fwd-guard", s, &p, &net, &err);
	np_policy_release(&p);
	snprintf(f->msg, sizeof(f->msg), "%s", err.msg);
	if (f->up == 0) {
		f->a_to_b = npw_in_netns(f->a, p_ping_b, NULL);
		f->s_to_b = npw_in_netns(s, p_ping_b, NULL);
		f->guarded = eg_table_exists(NP_FORWARD_GUARD);
		np_net_free(net);
		np_sandbox_down(f->state_dir, "fwd-guard", &err);
	}
	close(s);
	return 0;
}

/* H with a neighbour on each of two links (oa: 172.31.1.0/24, ob: 172.31.2.0/24). */
static void topology(struct fwd_run *f)
{
	f->h = npw_netns_new();
	f->a = npw_netns_new();
	f->b = npw_netns_new();
	ck_assert(f->h >= 0 && f->a >= 0 && f->b >= 0);
	int pid = (int)getpid();
	ck_assert_int_eq(npw_ip(f->h, "link set lo up"), 0);
	const int peer[2] = {f->a, f->b};
	for (int i = 0; i < 2; i++) {
		int n = i + 1;
		ck_assert_int_eq(npw_ip(f->h, "link add o%c type veth peer name eth0 netns "
					      "/proc/%d/fd/%d",
					i ? 'b' : 'a', pid, peer[i]),
				 0);
		ck_assert_int_eq(npw_ip(f->h, "addr add 172.31.%d.1/24 dev o%c", n, i ? 'b' : 'a'),
				 0);
		ck_assert_int_eq(npw_ip(f->h, "link set o%c up", i ? 'b' : 'a'), 0);
		ck_assert_int_eq(npw_ip(peer[i], "link set lo up"), 0);
		ck_assert_int_eq(npw_ip(peer[i], "addr add 172.31.%d.2/24 dev eth0", n), 0);
		ck_assert_int_eq(npw_ip(peer[i], "link set eth0 up"), 0);
		ck_assert_int_eq(npw_ip(peer[i], "route add default via 172.31.%d.1", n), 0);
	}
}

START_TEST(test_forwarding_only_for_rung)
{
	RUNG_REQUIRE_ROOT();
	if (access("/usr/sbin/ip", X_OK) != 0)
		RUNG_SKIP("iproute2 (/usr/sbin/ip) missing: the test topology needs it");
	struct fwd_run *f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(f, MAP_FAILED);
	memset(f, 0, sizeof(*f));
	snprintf(f->state_dir, sizeof(f->state_dir), "/tmp/rung-np-fwd-%d", (int)getpid());
	topology(f);
	/* the topology works: with forwarding on and no guard, A reaches B through H */
	ck_assert_int_eq(npw_in_netns(f->h, p_ping_fwd, NULL), 0);
	ck_assert_int_eq(npw_in_netns(f->h, in_h, f), 0);
	struct rung_err err = {0};
	rung_rm_rf(f->state_dir, &err);
	ck_assert_msg(f->up == 0, "np_sandbox_up in H: %s", f->msg);
	ck_assert_int_ne(f->fwd_before, 0); /* forwarding was off: A did not reach B */
	ck_assert_msg(f->a_to_b != 0, "the host routes A to B once a sandbox is up");
	ck_assert_int_eq(f->s_to_b, 0); /* the sandbox's own traffic is forwarded */
	ck_assert(f->guarded);
	close(f->h);
	close(f->a);
	close(f->b);
	munmap(f, sizeof(*f));
}
END_TEST

/* Forwarding already on (docker, a router): its owner's policy stands; no guard is added. */
static int enable_when_on(void *arg)
{
	(void)arg;
	if (sysctl_set("/proc/sys/net/ipv4/ip_forward", "1") < 0)
		return -EIO;
	bool g = true;
	struct rung_err err = {0};
	int r = np_forward_enable(&g, &err);
	if (r < 0)
		return r;
	return g ? 1 : eg_table_exists(NP_FORWARD_GUARD) ? 2 : 0;
}

static int enable_when_off(void *arg)
{
	(void)arg;
	if (sysctl_set("/proc/sys/net/ipv4/ip_forward", "0") < 0)
		return -EIO;
	bool g = false;
	struct rung_err err = {0};
	int r = np_forward_enable(&g, &err);
	if (r < 0)
		return r;
	char v[4] = {0};
	int fd = open("/proc/sys/net/ipv4/ip_forward", O_RDONLY | O_CLOEXEC);
	(void)!read(fd, v, 1);
	close(fd);
	return !g ? 1 : !eg_table_exists(NP_FORWARD_GUARD) ? 2 : v[0] != '1' ? 3 : 0;
}

START_TEST(test_forwarding_already_on_left_alone)
{
	RUNG_REQUIRE_ROOT();
	int h = npw_netns_new();
	ck_assert_int_ge(h, 0);
	ck_assert_int_eq(npw_in_netns(h, enable_when_on, NULL), 0);
	ck_assert_int_eq(npw_in_netns(h, enable_when_off, NULL), 0);
	close(h);
}
END_TEST

/* ip_forward's first byte in the caller's netns. */
static char forward_now(void)
{
	char v[4] = {0};
	int fd = open("/proc/sys/net/ipv4/ip_forward", O_RDONLY | O_CLOEXEC);
	(void)!read(fd, v, 1);
	close(fd);
	return v[0];
}

/* np_forward_release: nothing while an rg* link is there; then the guard goes and forwarding
 * is off again; nothing when rung did not turn it on (no guard). Codes say which step failed. */
static int release_steps(void *arg)
{
	(void)arg;
	struct rung_err err = {0};
	bool g = false;
	if (sysctl_set("/proc/sys/net/ipv4/ip_forward", "0") < 0 || np_forward_enable(&g, &err) < 0)
		return 1;
	if (npw_ip(-1, "link add rgtest0 type veth peer name vtest1") != 0)
		return 2;
	if (np_forward_release(&err) < 0 || !eg_table_exists(NP_FORWARD_GUARD) ||
	    forward_now() != '1')
		return 3; /* a rung interface still forwards */
	if (npw_ip(-1, "link del rgtest0") != 0)
		return 4;
	if (np_forward_release(&err) < 0 || eg_table_exists(NP_FORWARD_GUARD) ||
	    forward_now() != '0')
		return 5;
	if (sysctl_set("/proc/sys/net/ipv4/ip_forward", "1") < 0 || np_forward_release(&err) < 0 ||
	    forward_now() != '1')
		return 6; /* forwarding its owner turned on stays */
	return 0;
}

START_TEST(test_forward_release)
{
	RUNG_REQUIRE_ROOT();
	if (access("/usr/sbin/ip", X_OK) != 0)
		RUNG_SKIP("iproute2 (/usr/sbin/ip) missing: the test makes a link with it");
	int h = npw_netns_new();
	ck_assert_int_ge(h, 0);
	ck_assert_int_eq(npw_in_netns(h, release_steps, NULL), 0);
	close(h);
}
END_TEST

Suite *netpolicy_forward_suite(void)
{
	Suite *s = suite_create("netpolicy_forward");
	TCase *tc = tcase_create("net");
	tcase_set_tags(tc, "net");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_forwarding_only_for_rung);
	tcase_add_test(tc, test_forwarding_already_on_left_alone);
	tcase_add_test(tc, test_forward_release);
	suite_add_tcase(s, tc);
	return s;
}
