/*
 * runtime/net.c: a sandbox's network, shared by every rung. An empty allowlist means no
 * network at all: the sandbox gets its own network namespace with loopback only (created with
 * its other namespaces). A non-empty one gets a network namespace owned by the HOST's user
 * namespace (so nothing inside holds CAP_NET_ADMIN over it), plumbed and filtered by
 * netpolicy/: a veth, a default-deny nft table in the host namespace, and a DNS proxy that the
 * supervisor serves for the sandbox's lifetime. The vm rung gets the same policy with a tap in
 * the host netns instead of the veth (rung-vmm's virtio-net writes the guest's frames to it).
 */
#include <ctype.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/stat.h>

#include "common/nshint.h"
#include "netpolicy/np.h"
#include "runtime/rt-internal.h"

bool rt_net_wanted(const struct rung_spec *s)
{
	return s->egress_allow && s->egress_allow[0];
}

/* A fresh network namespace owned by our (the host's) user namespace. */
static int new_netns(struct rung_err *err)
{
	cleanup_close int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return rung_err_sys(err, errno, "open own netns");
	if (unshare(CLONE_NEWNET) < 0)
		return rung_err_ns(err, errno, false, "create a network namespace");
	int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int e = errno;
	if (setns(self, CLONE_NEWNET) < 0) {
		if (fd >= 0)
			close(fd);
		return rung_err_sys(err, errno, "return to the host network namespace");
	}
	if (fd < 0)
		return rung_err_sys(err, e, "open the new netns");
	return fd;
}

/*
 * The id netpolicy knows a sandbox by. Its names (veth "rg<hash>", table "rung_<hash>") are
 * host-wide and derive from this id alone, but a sandbox id is the same in two stores for the
 * same key and kind: so the store's identity (its inode, as for cgroups) goes in. Otherwise a
 * second store's sandbox fails to create ("veth exists"), and disposing one store's sandbox
 * removes the other's veth and nft table.
 */
static int net_id(const struct rung_router *r, const char *id, char out[RT_ID_LEN + 1],
		  struct rung_err *err)
{
	struct stat st;
	if (stat(r->store.root, &st) < 0)
		return rung_err_sys(err, errno, "stat state dir %s", r->store.root);
	char key[256], hex[65];
	snprintf(key, sizeof(key), "rung-net-v1:%lx:%lx:%s", (unsigned long)st.st_dev,
		 (unsigned long)st.st_ino, id);
	rt_label_of(key, hex);
	memcpy(out, hex, RT_ID_LEN);
	out[RT_ID_LEN] = '\0';
	return 0;
}

/* The policy up, in netns_fd (or, netns_fd < 0, as a tap): sb->net and its netpolicy id. */
static int net_up(struct rt_sandbox *sb, int netns_fd, char nid[RT_ID_LEN + 1],
		  struct rung_err *err)
{
	struct np_policy pol;
	size_t n = 0;
	while (sb->meta.spec.egress_allow[n])
		n++;
	int r = net_id(sb->router, sb->meta.id, nid, err);
	if (r < 0)
		return r;
	r = np_policy_parse((const char *const *)sb->meta.spec.egress_allow, n, &pol, err);
	if (r < 0)
		return rung_err_wrap(err, "egress_allow");
	/* the router's net_pool: the IPv4 pool the /30s come from (default netpolicy's
	 * 10.213.0.0/16), e.g. to keep concurrent test runs or two stores on one host apart;
	 * its dns_upstream: where the DNS proxy forwards (default resolv.conf's) */
	struct np_config cfg = {.state_dir = sb->router->store.root,
				.pool = sb->router->net_pool,
				.upstream = sb->router->dns_upstream,
				.tap = netns_fd < 0,
				.inbound = sb->router->net_inbound};
	r = np_sandbox_up(&cfg, nid, netns_fd, &pol, &sb->net, err);
	np_policy_release(&pol);
	return r;
}

int rt_net_setup(struct rt_sandbox *sb, int *netns_fd, char **resolv, struct rung_err *err)
{
	*netns_fd = -1;
	*resolv = NULL;
	if (!rt_net_wanted(&sb->meta.spec))
		return 0;
	char nid[RT_ID_LEN + 1];
	cleanup_close int fd = new_netns(err);
	if (fd < 0)
		return fd;
	int r = net_up(sb, fd, nid, err);
	if (r < 0)
		return r;
	*resolv = np_sandbox_resolv_conf(sb->net);
	if (!*resolv) {
		np_net_free(sb->net);
		sb->net = NULL;
		np_sandbox_down(sb->router->store.root, nid, NULL);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	*netns_fd = rung_steal_fd(&fd);
	return 0;
}

/* A router's comma-separated DNS list as the guest's command line takes it (agent/vm-init.c
 * checks it again): at most max bytes and (words > 0) that many words, none empty, of letters,
 * digits, '.', '-', '_' and extra. */
static int dns_list_check(const char *name, const char *v, size_t max, size_t words,
			  const char *extra, struct rung_err *err)
{
	if (!v)
		return 0;
	size_t n = 1;
	bool ok = *v && strlen(v) <= max && v[0] != ',' && v[strlen(v) - 1] != ',' &&
		  !strstr(v, ",,");
	for (const char *c = v; ok && *c; c++) {
		n += *c == ',';
		ok = isalnum((unsigned char)*c) || strchr(".-_,", *c) || strchr(extra, *c);
	}
	if (!ok || (words && n > words))
		return rung_err_set(err, EINVAL, "%s: '%.64s': at most %zu bytes (and %zu entries, "
				    "0: any) of letters, digits, '.', '-', '_'%s, comma-separated",
				    name, v, max, words, *extra ? ", ':'" : "");
	return 0;
}

int rt_net_setup_vm(struct rt_sandbox *sb, struct rt_vm_net *out, struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	out->tap_fd = -1;
	if (!rt_net_wanted(&sb->meta.spec))
		return 0;
	char nid[RT_ID_LEN + 1];
	int r = net_up(sb, -1, nid, err);
	if (r < 0)
		return r;
	struct np_net_info info;
	np_net_info(sb->net, &info);
	out->tap_fd = np_net_tap_fd(sb->net);
	/* locally administered unicast, stable per sandbox: 02:72 + 4 bytes of the net id */
	snprintf(out->mac, sizeof(out->mac), "02:72:%.2s:%.2s:%.2s:%.2s", nid, nid + 2, nid + 4,
		 nid + 6);
	/* An open policy (0.0.0.0/0): the guest asks the upstream itself (names open nothing
	 * more there, and the proxy would refuse every one), when it is a non-loopback :53. */
	char dns[16];
	snprintf(dns, sizeof(dns), "%s", info.host_ip);
	size_t ul = strlen(info.upstream);
	if (info.open && ul > 3 && !strcmp(info.upstream + ul - 3, ":53") &&
	    strncmp(info.upstream, "127.", 4) != 0 && info.upstream[0] != '[')
		snprintf(dns, sizeof(dns), "%.*s", (int)(ul - 3 < 15 ? ul - 3 : 15), info.upstream);
	/* the guest kernel configures eth0 itself (CONFIG_IP_PNP); rung-agent writes resolv.conf
	 * (with the router's search domains and options: rung-oci's vm rung, the pod's) */
	const char *s = sb->router->dns_search, *o = sb->router->dns_options;
	if ((r = dns_list_check("dns_search", s, 256, 6, "", err)) < 0 ||
	    (r = dns_list_check("dns_options", o, 128, 0, ":", err)) < 0)
		return r;
	snprintf(out->cmdline, sizeof(out->cmdline),
		 "ip=%s::%s:255.255.255.252::eth0:off:%s rung.dns=%s%s%s%s%s", info.sb_ip,
		 info.host_ip, dns, dns, s ? " rung.search=" : "", s ? s : "",
		 o ? " rung.dnsopt=" : "", o ? o : "");
	return 0;
}

int rt_net_poll_fd(const struct rt_sandbox *sb)
{
	return sb->net ? np_net_proxy_fd(sb->net) : -1;
}

int rt_net_timeout_ms(const struct rt_sandbox *sb)
{
	return sb->net ? np_net_proxy_timeout_ms(sb->net) : -1;
}

void rt_net_serve(struct rt_sandbox *sb)
{
	struct rung_err err = {0};
	if (sb->net && np_net_proxy_handle(sb->net, &err) < 0)
		LOG_WARN("sandbox %s dns proxy: %s", sb->meta.id, err.msg);
}

void rt_net_teardown(struct rt_sandbox *sb)
{
	struct rung_err err = {0};
	np_net_free(sb->net);
	sb->net = NULL;
	char nid[RT_ID_LEN + 1];
	if (rt_net_wanted(&sb->meta.spec) &&
	    (net_id(sb->router, sb->meta.id, nid, &err) < 0 ||
	     np_sandbox_down(sb->router->store.root, nid, &err) < 0))
		LOG_WARN("sandbox %s network teardown: %s", sb->meta.id, err.msg);
}

int rt_net_gc(struct rung_router *r, const char *const *live, size_t n, struct rung_err *err)
{
	cleanup_free char *ids = calloc(n ? n : 1, RT_ID_LEN + 1);
	cleanup_free const char **v = calloc(n ? n : 1, sizeof(char *));
	if (!ids || !v)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		int rc = net_id(r, live[i], ids + i * (RT_ID_LEN + 1), err);
		if (rc < 0)
			return rc;
		v[i] = ids + i * (RT_ID_LEN + 1);
	}
	return np_gc(r->store.root, v, n, err);
}

json_t *rt_net_describe(const struct rung_spec *s)
{
	struct np_policy pol;
	struct rung_err err = {0};
	size_t n = 0;
	while (s->egress_allow && s->egress_allow[n])
		n++;
	if (np_policy_parse((const char *const *)s->egress_allow, n, &pol, &err) < 0)
		return json_pack("{s:s}", "error", err.msg);
	json_t *d = np_policy_describe(&pol);
	np_policy_release(&pol);
	return d ? d : json_null();
}

int rt_net_counters(const struct rt_sandbox *sb, uint64_t *rx_bytes, uint64_t *tx_bytes,
		    uint64_t *refused, struct rung_err *err)
{
	char nid[RT_ID_LEN + 1];
	struct np_counters c;
	if (!rt_net_wanted(&sb->meta.spec))
		return rung_err_set(err, ENOENT, "sandbox %s has no network", sb->meta.id);
	int r = net_id(sb->router, sb->meta.id, nid, err);
	if (r == 0)
		r = np_sandbox_counters(sb->router->store.root, nid, &c, err);
	if (r < 0)
		return r;
	*rx_bytes = c.rx_bytes;
	*tx_bytes = c.tx_bytes;
	*refused = c.refused_packets;
	return 0;
}
