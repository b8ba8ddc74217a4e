/* netpolicy/link.c: veth or tap, addresses, routes, sysctls, through libnl-route-3 (no `ip`). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <pthread.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <stdio.h>
#include <string.h>

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>

#include "common/util.h"
#include "netpolicy/link.h"

static void nlsock_freep(struct nl_sock **s)
{
	if (*s)
		nl_socket_free(*s);
}
static void rtnl_link_putp(struct rtnl_link **l)
{
	if (*l)
		rtnl_link_put(*l);
}
static void nl_cache_freep(struct nl_cache **c)
{
	if (*c)
		nl_cache_free(*c);
}
#define cleanup_nlsock __attribute__((cleanup(nlsock_freep)))
#define cleanup_rtnl_link __attribute__((cleanup(rtnl_link_putp)))
#define cleanup_nlcache __attribute__((cleanup(nl_cache_freep)))

static int nl2errno(int nle)
{
	switch (-nle < 0 ? nle : -nle) {
	case NLE_EXIST:
		return EEXIST;
	case NLE_NODEV:
	case NLE_OBJ_NOTFOUND:
		return ENODEV;
	case NLE_PERM:
		return EPERM;
	case NLE_NOMEM:
		return ENOMEM;
	case NLE_INVAL:
		return EINVAL;
	case NLE_BUSY:
		return EBUSY;
	case NLE_NOADDR:
		return EADDRNOTAVAIL;
	default:
		return EIO;
	}
}

static int sock_open(struct nl_sock **out, struct rung_err *err)
{
	struct nl_sock *sk = nl_socket_alloc();
	if (!sk)
		return rung_err_set(err, ENOMEM, "nl_socket_alloc");
	int r = nl_connect(sk, NETLINK_ROUTE);
	if (r < 0) {
		nl_socket_free(sk);
		return rung_err_set(err, nl2errno(r), "netlink connect: %s", nl_geterror(r));
	}
	*out = sk;
	return 0;
}

int np_sysctl_write(const char *path, const char *val, struct rung_err *err)
{
	cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return rung_err_sys(err, errno, "open %s", path);
	int r = rung_write_all(fd, val, strlen(val));
	if (r < 0)
		return rung_err_sys(err, -r, "write %s", path);
	return 0;
}

/* Set flags (IFF_UP) and, optionally, the alias of the link called name. */
static int link_set_up(struct nl_sock *sk, const char *name, const char *alias, int *ifindex,
		       struct rung_err *err)
{
	cleanup_rtnl_link struct rtnl_link *cur = NULL;
	int r = rtnl_link_get_kernel(sk, 0, name, &cur);
	if (r < 0)
		return rung_err_set(err, nl2errno(r), "link %s: %s", name, nl_geterror(r));
	cleanup_rtnl_link struct rtnl_link *chg = rtnl_link_alloc();
	if (!chg)
		return rung_err_set(err, ENOMEM, "rtnl_link_alloc");
	rtnl_link_set_flags(chg, IFF_UP);
	if (alias)
		rtnl_link_set_ifalias(chg, alias);
	r = rtnl_link_change(sk, cur, chg, 0);
	if (r < 0)
		return rung_err_set(err, nl2errno(r), "link %s up: %s", name, nl_geterror(r));
	if (ifindex)
		*ifindex = rtnl_link_get_ifindex(cur);
	return 0;
}

static int addr_add(struct nl_sock *sk, int ifindex, const uint8_t ip[4], int plen,
		    struct rung_err *err)
{
	struct rtnl_addr *a = rtnl_addr_alloc();
	struct nl_addr *la = nl_addr_build(AF_INET, ip, 4);
	int r = -NLE_NOMEM;
	if (a && la) {
		nl_addr_set_prefixlen(la, plen);
		rtnl_addr_set_ifindex(a, ifindex);
		r = rtnl_addr_set_local(a, la);
		if (r >= 0)
			r = rtnl_addr_add(sk, a, 0);
	}
	if (la)
		nl_addr_put(la);
	if (a)
		rtnl_addr_put(a);
	if (r < 0) {
		char t[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, ip, t, sizeof(t));
		return rung_err_set(err, nl2errno(r), "address %s/%d: %s", t, plen, nl_geterror(r));
	}
	return 0;
}

static int default_route_add(struct nl_sock *sk, int ifindex, const uint8_t gw[4],
			     struct rung_err *err)
{
	static const uint8_t zero[4];
	struct rtnl_route *rt = rtnl_route_alloc();
	struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
	struct nl_addr *dst = nl_addr_build(AF_INET, zero, 4);
	struct nl_addr *gwa = nl_addr_build(AF_INET, gw, 4);
	int r = -NLE_NOMEM;
	if (rt && nh && dst && gwa) {
		nl_addr_set_prefixlen(dst, 0);
		rtnl_route_set_family(rt, AF_INET);
		rtnl_route_set_dst(rt, dst);
		rtnl_route_nh_set_ifindex(nh, ifindex);
		rtnl_route_nh_set_gateway(nh, gwa);
		rtnl_route_add_nexthop(rt, nh); /* rt owns nh now */
		nh = NULL;
		r = rtnl_route_add(sk, rt, NLM_F_CREATE);
	}
	if (nh)
		rtnl_route_nh_free(nh);
	if (dst)
		nl_addr_put(dst);
	if (gwa)
		nl_addr_put(gwa);
	if (rt)
		rtnl_route_put(rt);
	if (r < 0)
		return rung_err_set(err, nl2errno(r), "default route: %s", nl_geterror(r));
	return 0;
}

/*
 * A veth only transmits once the kernel's linkwatch has activated its qdisc, which it does
 * when it marks the link operationally up; until then packets (an RST, an ICMP error) are
 * silently dropped. Wait for that, bounded.
 */
static int wait_oper_up(struct nl_sock *sk, const char *name, struct rung_err *err)
{
	uint64_t deadline = rung_now_ms() + 2000;
	for (;;) {
		cleanup_rtnl_link struct rtnl_link *l = NULL;
		int r = rtnl_link_get_kernel(sk, 0, name, &l);
		if (r < 0)
			return rung_err_set(err, nl2errno(r), "link %s: %s", name, nl_geterror(r));
		uint8_t st = rtnl_link_get_operstate(l);
		if (st == IF_OPER_UP ||
		    (st == IF_OPER_UNKNOWN && (rtnl_link_get_flags(l) & IFF_LOWER_UP)))
			return 0;
		if (rung_now_ms() > deadline)
			return rung_err_set(err, ETIMEDOUT,
					    "link %s: not operationally up after 2 s", name);
		usleep(200);
	}
}

/* Runs fn in a short-lived thread that has joined netns_fd (setns is per thread). */
struct ns_job {
	int netns_fd;
	int (*fn)(void *arg, struct rung_err *err);
	void *arg;
	struct rung_err err;
	int r;
};

static void *ns_thread(void *p)
{
	struct ns_job *j = p;
	if (setns(j->netns_fd, CLONE_NEWNET) < 0)
		j->r = rung_err_sys(&j->err, errno, "setns into the sandbox netns");
	else
		j->r = j->fn(j->arg, &j->err);
	return NULL;
}

static int in_netns(int netns_fd, int (*fn)(void *, struct rung_err *), void *arg,
		    struct rung_err *err)
{
	struct ns_job j = {.netns_fd = netns_fd, .fn = fn, .arg = arg};
	pthread_t t;
	int r = pthread_create(&t, NULL, ns_thread, &j);
	if (r)
		return rung_err_sys(err, r, "pthread_create");
	pthread_join(t, NULL);
	if (j.r < 0 && err)
		*err = j.err;
	return j.r;
}

static int lo_up_fn(void *arg, struct rung_err *err)
{
	cleanup_nlsock struct nl_sock *sk = NULL;
	int r = sock_open(&sk, err);
	if (r < 0)
		return r;
	return link_set_up(sk, "lo", NULL, NULL, err);
}

int np_netns_lo_only(int netns_fd, struct rung_err *err)
{
	return in_netns(netns_fd, lo_up_fn, NULL, err);
}

/* Inside the sandbox netns: no IPv6 at all, lo and eth0 up, address, default route. */
static int sandbox_side_fn(void *arg, struct rung_err *err)
{
	const struct np_lease *l = arg;
	int r, ifindex;
	if ((r = np_sysctl_write("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1", err)) < 0 ||
	    (r = np_sysctl_write("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1", err)) < 0)
		return r;
	cleanup_nlsock struct nl_sock *sk = NULL;
	if ((r = sock_open(&sk, err)) < 0)
		return r;
	if ((r = link_set_up(sk, "lo", NULL, NULL, err)) < 0)
		return r;
	if ((r = link_set_up(sk, NP_PEER_IFNAME, NULL, &ifindex, err)) < 0)
		return r;
	if ((r = addr_add(sk, ifindex, l->sb_ip, 30, err)) < 0)
		return r;
	if ((r = default_route_add(sk, ifindex, l->host_ip, err)) < 0)
		return r;
	return wait_oper_up(sk, NP_PEER_IFNAME, err);
}

/*
 * The host end, once the link nm->veth exists: no IPv6, the owner's alias, up, the /30's host
 * address, and the clash check against every other route.
 */
static int host_end_up(struct nl_sock *sk, const struct np_names *nm, const char *id,
		       const struct np_lease *l, struct rung_err *err)
{
	char path[128], alias[200];
	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", nm->veth);
	int r = np_sysctl_write(path, "1", err);
	if (r < 0)
		return r;
	/* The alias names the owner, so gc can tell our orphans from other state dirs' links. */
	snprintf(alias, sizeof(alias), "%s:%s", nm->tag, id);
	int ifindex;
	if ((r = link_set_up(sk, nm->veth, alias, &ifindex, err)) < 0)
		return r;
	if ((r = addr_add(sk, ifindex, l->host_ip, 30, err)) < 0)
		return r;
	/*
	 * Leases are exclusive within a state dir; another state dir (or other software) may have
	 * taken the same subnet at the same moment. Now that ours is in the routing table, any
	 * other route over it means a clash: back off (the caller retries elsewhere).
	 */
	cleanup_free struct np_route4 *routes = NULL;
	size_t nroutes = 0;
	uint32_t net;
	memcpy(&net, l->net, 4);
	if ((r = np_routes_dump(&routes, &nroutes, err)) < 0)
		return r;
	if (np_routes_overlap(routes, nroutes, ntohl(net), 30, ifindex)) {
		char t[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, l->net, t, sizeof(t));
		return rung_err_set(err, EADDRINUSE, "%s/30: taken by another interface meanwhile",
				    t);
	}
	return np_forward_enable(NULL, err);
}

int np_link_up(const struct np_names *nm, const char *id, int netns_fd, const struct np_lease *l,
	       struct rung_err *err)
{
	cleanup_nlsock struct nl_sock *sk = NULL;
	int r = sock_open(&sk, err);
	if (r < 0)
		return r;
	cleanup_rtnl_link struct rtnl_link *veth = rtnl_link_veth_alloc();
	if (!veth)
		return rung_err_set(err, ENOMEM, "rtnl_link_veth_alloc");
	rtnl_link_set_name(veth, nm->veth);
	struct rtnl_link *peer = rtnl_link_veth_get_peer(veth);
	rtnl_link_set_name(peer, NP_PEER_IFNAME);
	rtnl_link_set_ns_fd(peer, netns_fd);
	rtnl_link_put(peer);
	/* docs/platform.md: IFF_UP in the create request fails; up comes in a second request. */
	r = rtnl_link_add(sk, veth, NLM_F_CREATE | NLM_F_EXCL);
	if (r < 0)
		return rung_err_set(err, nl2errno(r), "create veth %s: %s", nm->veth,
				    nl_geterror(r));
	if ((r = host_end_up(sk, nm, id, l, err)) < 0)
		return r;
	if ((r = in_netns(netns_fd, sandbox_side_fn, (void *)l, err)) < 0)
		return r;
	return wait_oper_up(sk, nm->veth, err);
}

/*
 * A tap has no rtnetlink "create": TUNSETIFF on /dev/net/tun makes it, owned by that fd (not
 * persistent: it goes when the last fd to it closes). IFF_TUN_EXCL: never attach to a device
 * of that name that already exists.
 */
int np_tap_up(const struct np_names *nm, const char *id, const struct np_lease *l, int *tap_fd,
	      struct rung_err *err)
{
	*tap_fd = -1;
	cleanup_close int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return rung_err_sys(err, errno, "open /dev/net/tun");
	struct ifreq ifr = {.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_TUN_EXCL};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", nm->veth);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0)
		return rung_err_sys(err, errno, "create tap %s", nm->veth);
	cleanup_nlsock struct nl_sock *sk = NULL;
	int r = sock_open(&sk, err);
	if (r < 0 || (r = host_end_up(sk, nm, id, l, err)) < 0 ||
	    (r = wait_oper_up(sk, nm->veth, err)) < 0)
		return r;
	*tap_fd = rung_steal_fd(&fd);
	return 0;
}

int np_link_del(const char *veth, struct rung_err *err)
{
	cleanup_nlsock struct nl_sock *sk = NULL;
	int r = sock_open(&sk, err);
	if (r < 0)
		return r;
	cleanup_rtnl_link struct rtnl_link *l = rtnl_link_alloc();
	if (!l)
		return rung_err_set(err, ENOMEM, "rtnl_link_alloc");
	rtnl_link_set_name(l, veth);
	r = rtnl_link_delete(sk, l);
	if (r < 0 && nl2errno(r) != ENODEV)
		return rung_err_set(err, nl2errno(r), "delete link %s: %s", veth, nl_geterror(r));
	return 0;
}

int np_routes_dump(struct np_route4 **out, size_t *n, struct rung_err *err)
{
	cleanup_nlsock struct nl_sock *sk = NULL;
	int r = sock_open(&sk, err);
	if (r < 0)
		return r;
	cleanup_nlcache struct nl_cache *c = NULL;
	r = rtnl_route_alloc_cache(sk, AF_INET, 0, &c);
	if (r < 0)
		return rung_err_set(err, nl2errno(r), "dump routes: %s", nl_geterror(r));
	size_t cap = (size_t)nl_cache_nitems(c) + 1, k = 0;
	struct np_route4 *v = calloc(cap, sizeof(*v));
	if (!v)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (struct nl_object *o = nl_cache_get_first(c); o && k < cap; o = nl_cache_get_next(o)) {
		struct nl_addr *dst = rtnl_route_get_dst((struct rtnl_route *)o);
		if (!dst || nl_addr_get_family(dst) != AF_INET || nl_addr_get_len(dst) != 4 ||
		    nl_addr_get_prefixlen(dst) == 0)
			continue;
		uint32_t a;
		memcpy(&a, nl_addr_get_binary_addr(dst), 4);
		v[k].net = ntohl(a);
		v[k].len = (uint8_t)nl_addr_get_prefixlen(dst);
		struct rtnl_nexthop *nh = rtnl_route_nexthop_n((struct rtnl_route *)o, 0);
		v[k].oif = nh ? rtnl_route_nh_get_ifindex(nh) : 0;
		k++;
	}
	*out = v;
	*n = k;
	return 0;
}

bool np_routes_overlap(const struct np_route4 *r, size_t n, uint32_t net, uint8_t len, int skip_oif)
{
	for (size_t i = 0; i < n; i++) {
		if (skip_oif && r[i].oif == skip_oif)
			continue;
		uint8_t l = r[i].len < len ? r[i].len : len;
		uint32_t mask = l ? ~0u << (32 - l) : 0;
		if (l && (r[i].net & mask) == (net & mask))
			return true;
	}
	return false;
}

int np_link_foreach(void (*fn)(const char *name, const char *alias, void *), void *data,
		    struct rung_err *err)
{
	cleanup_nlsock struct nl_sock *sk = NULL;
	int r = sock_open(&sk, err);
	if (r < 0)
		return r;
	cleanup_nlcache struct nl_cache *c = NULL;
	r = rtnl_link_alloc_cache(sk, AF_UNSPEC, &c);
	if (r < 0)
		return rung_err_set(err, nl2errno(r), "dump links: %s", nl_geterror(r));
	for (struct nl_object *o = nl_cache_get_first(c); o; o = nl_cache_get_next(o)) {
		struct rtnl_link *l = (struct rtnl_link *)o;
		const char *name = rtnl_link_get_name(l), *alias = rtnl_link_get_ifalias(l);
		if (name && !strncmp(name, "rg", 2))
			fn(name, alias ? alias : "", data);
	}
	return 0;
}
