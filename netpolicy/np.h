/*
 * netpolicy/np.h: a sandbox's egress, kernel-enforced: default deny, plus the spec's allowlist.
 *
 * Given a network namespace fd, a sandbox id and a parsed policy, np_sandbox_up():
 *   - empty policy: brings up loopback only; no veth, no route, no DNS (no network at all).
 *   - otherwise: a veth pair (host end "rg" + 12 hex of sha256(id) in the host netns, peer
 *     "eth0" created directly in the sandbox netns), a /30 from the pool (lease file + flock under
 *     <state_dir>/net/, skipping anything that overlaps a host route; a clash with another store
 *     on the same host is detected once the address is in place, and leased again), the table
 *     (applied BEFORE the veth exists, so nothing is ever forwarded unfiltered), a route via the
 *     host end, IPv6 disabled in the sandbox (and on the host end, and dropped by the table),
 *     ip_forward on, and ONE nftables table "inet rung_<12hex>" in the HOST netns that is
 *     default-deny for everything entering from that veth (forward + input hooks), masquerades
 *     allowed egress, and holds (only those the policy needs):
 *       s4 + s4p   static interval sets of the IPv4 CIDR entries (without / with port)
 *       d4 + d4p   dynamic sets (flags timeout) filled ONLY by this sandbox's DNS proxy
 *     IPv6 entries are accepted and described but open nothing: IPv6 is absent.
 *     DNS (udp/tcp 53) is allowed only to the proxy on the host end; denied TCP gets a reset,
 *     everything else denied gets ICMP admin-prohibited.
 *   - a DNS allowlist proxy (UDP and TCP, port 53 on the host-end address). It is an object with
 *     one pollable fd (an epoll fd); the owner (the per-sandbox supervisor) calls
 *     np_net_proxy_handle() when it is readable and at least every np_net_proxy_timeout_ms().
 *     It answers only names the allowlist matches (exact, or "*.suffix" = any strict subdomain),
 *     forwarding them upstream; the rest get REFUSED. A answers (including through a CNAME
 *     chain from the queried name) are inserted into the sandbox's dynamic sets BEFORE the answer
 *     is relayed, with timeout = clamp(TTL, floor, cap), and only with the ports of the matching
 *     entries (AAAA answers are relayed and open nothing). If the insert fails the client gets
 *     SERVFAIL, never an address it cannot use. A name never opens 0/8, 127/8, 169.254/16 (cloud
 *     metadata), 224/3 or the pool (only an explicit CIDR entry can). Queries go upstream with a
 *     fresh random id from a connected socket; an answer must match id AND question. TCP
 *     clients may send several queries per connection (answered as they come back); those go
 *     upstream over UDP with EDNS0 (4096). The proxy is single-threaded: only its owner's
 *     thread may call np_net_proxy_*().
 * For a VM (np_config.tap), the host end is a tap instead of a veth: same name, same table, same
 * address plan and proxy, in the host netns, with no netns of its own; the VMM gets the tap's fd
 * and the guest behind it takes the sandbox address with the host end as gateway and DNS server.
 * Nothing here runs a program: links go through libnl-route-3, the table through libnftables
 * (nft_run_cmd_from_buffer), the proxy's set elements through libnftnl (one nfnetlink batch:
 * libnftables would re-read every table on the host for each answer).
 */
#ifndef RUNG_NETPOLICY_NP_H
#define RUNG_NETPOLICY_NP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/err.h"

/* ---- policy: the parsed egress_allow ---------------------------------------------------- */

#define NP_MAX_ENTRIES 512
#define NP_DYN_SET_MAX 4096 /* addresses a sandbox's DNS answers may hold open at once */
#define NP_NAME_MAX 253

enum np_entry_kind {
	NP_ENTRY_HOST,	 /* "example.org": exactly that name */
	NP_ENTRY_SUFFIX, /* "*.example.org": any strict subdomain (name holds "example.org") */
	NP_ENTRY_CIDR4,	 /* "192.0.2.0/24", "192.0.2.7" (= /32) */
	NP_ENTRY_CIDR6,	 /* "2001:db8::/32", "[2001:db8::1]:443" */
};

struct np_entry {
	enum np_entry_kind kind;
	char name[NP_NAME_MAX + 1]; /* HOST/SUFFIX: lower case, no trailing dot */
	uint8_t addr[16];	    /* CIDR: network address, host bits zero (v4 in the first 4) */
	uint8_t prefix;		    /* CIDR prefix length */
	uint16_t port;		    /* 0: any port; else this TCP/UDP port only */
};

struct np_policy {
	size_t n;
	struct np_entry *entries;
};

/*
 * Pure. Parses one entry: "example.org", "*.example.org", "10.0.0.0/8", "10.1.2.3",
 * "2001:db8::/32", each optionally with ":PORT" (IPv6 then in brackets: "[2001:db8::/32]:443").
 * Rejects (-EINVAL, err naming the entry) bad names, globs other than a leading "*.", host bits
 * set in a CIDR, port 0 or > 65535, numeric top-level labels.
 */
int np_entry_parse(const char *s, struct np_entry *out, struct rung_err *err);
/* Pure. Parses n entries; an empty list is valid (no network). Duplicates are kept once. */
int np_policy_parse(const char *const *items, size_t n, struct np_policy *out,
		    struct rung_err *err);
void np_policy_release(struct np_policy *p);
/* Canonical text of an entry ("*.example.org:443", "[2001:db8::/32]:443"). */
void np_entry_format(const struct np_entry *e, char *buf, size_t len);

/*
 * Pure. Does the name (any case, optional trailing dot) match a host-name entry? Returns
 * 0 no, 1 yes. *any_port is set when a matching entry has no port; otherwise ports[] gets the
 * distinct ports of the matching entries (up to max_ports, *n_ports their count).
 */
int np_policy_match_name(const struct np_policy *p, const char *name, bool *any_port,
			 uint16_t *ports, size_t max_ports, size_t *n_ports);

/*
 * Pure. The policy holds 0.0.0.0/0 on every port: every IPv4 address is reachable, so DNS is not
 * confined to the proxy either (a sandbox may ask any resolver; names open nothing more).
 */
bool np_policy_open(const struct np_policy *p);

/* ---- rendering (pure) ------------------------------------------------------------------ */

struct np_render_params {
	char table[32];	    /* "rung_<12hex>" */
	char veth[16];	    /* host end, "rg<12hex>" */
	char comment[200];  /* "rung-np:<state dir tag>:<id>", for np_gc */
	uint8_t host_ip[4]; /* host end: gateway, DNS proxy */
	uint8_t sb_ip[4];   /* the sandbox's only source address */
	bool create_only;   /* "create table" (fails if it exists) instead of replacing it */
	bool inbound;	    /* np_config.inbound: the chain "inbound" (prerouting DNAT) */
};

/*
 * Pure. The whole nft script for one sandbox: it (re)creates table inet <table> atomically
 * ("add table; delete table; table {...}"), or with create_only creates it ("create table;
 * table {...}", cheaper, fails if it exists). Returns a malloc'd string or NULL with err set.
 */
char *np_policy_render(const struct np_policy *p, const struct np_render_params *rp,
		       struct rung_err *err);

/*
 * Pure. A JSON summary for `rung inspect`: {"can_exfiltrate": bool, "network": "none"|"allowlist",
 * "ipv6": ..., "dns": ..., "default": "deny", "rules": [{"entry","kind","port",...}]}.
 * can_exfiltrate is false iff the allowlist is empty. Caller json_decref()s.
 */
json_t *np_policy_describe(const struct np_policy *p);

/* ---- the sandbox's network -------------------------------------------------------------- */

/*
 * One line per DNS query: "sandbox=<id> q=<name> type=<qtype> decision=<d>[ details]", d one of
 * allow (details: v4=<opened> v6=<relayed> ttl=<s>[ filtered=yes]), refuse, servfail,
 * malformed, timeout. Names are printable (the parser rejects control bytes). Without a
 * callback the lines go to the log sink at debug level.
 */
typedef void (*np_audit_fn)(void *data, const char *line);

struct np_config {
	const char *state_dir; /* required: leases in <state_dir>/net/ */
	const char *pool; /* IPv4 pool, /30 per sandbox; NULL: 10.213.0.0/16 */
	const char *upstream; /* DNS "IP[:PORT]"; NULL: resolv.conf's */
	uint32_t ttl_floor_s; /* 0: 30 */
	uint32_t ttl_cap_s;   /* 0: 3600 */
	np_audit_fn audit;    /* optional */
	void *audit_data;
	bool tap; /* a VM's network: a tap (np_net_tap_fd) instead of a veth into a netns */
	/* TCP and UDP connections to a local address of the host end's namespace, arriving on
	 * another interface, forwarded (DNAT) to the sandbox's address (rung-oci's vm rung: the
	 * pod's address is the guest's); incoming, like replies, is not filtered */
	bool inbound;
};

struct np_net; /* opaque; owned by the supervisor for the sandbox's lifetime */

struct np_net_info {
	bool has_network;  /* false: empty allowlist, loopback only */
	bool tap;	   /* the host end is a tap (np_config.tap), not a veth */
	char veth[16];	   /* host end */
	char table[32];	   /* nft table (inet family) */
	char host_ip[16];  /* host end = gateway = DNS proxy */
	char sb_ip[16];	   /* the sandbox's address on eth0 */
	char upstream[64]; /* DNS upstream "IP:PORT" */
	bool open;	   /* np_policy_open: DNS need not go through the proxy */
	/* where np_sandbox_up's time went (us): lease, nft table, links, proxy */
	uint32_t t_lease_us, t_table_us, t_link_us, t_proxy_us;
};

/* Sandbox ids: 1..128 chars of [A-Za-z0-9._-]. */
int np_id_check(const char *id, struct rung_err *err);

/*
 * Sets up the sandbox's network in netns_fd (see the top of this file) and, when the policy is
 * not empty, starts its DNS proxy. On failure everything done so far is undone. With cfg->tap,
 * netns_fd is not used (pass -1) and an empty policy sets up nothing at all.
 */
int np_sandbox_up(const struct np_config *cfg, const char *id, int netns_fd,
		  const struct np_policy *p, struct np_net **out, struct rung_err *err);
void np_net_info(const struct np_net *n, struct np_net_info *out);
/*
 * With np_config.tap: the tap's fd (IFF_TAP | IFF_NO_PI: plain Ethernet frames; close-on-exec),
 * owned by n; else -1. The tap is not persistent: it goes when its last fd closes (or at
 * np_sandbox_down). Frames written to it enter the host as if from the sandbox.
 */
int np_net_tap_fd(const struct np_net *n);
/* The proxy's pollable fd (POLLIN), or -1 when the sandbox has no network. */
int np_net_proxy_fd(const struct np_net *n);
/* Serve whatever is ready (never blocks) and expire stale queries. */
int np_net_proxy_handle(struct np_net *n, struct rung_err *err);
/* Longest the owner may wait before calling np_net_proxy_handle() again (-1: forever). */
int np_net_proxy_timeout_ms(const struct np_net *n);
/* Frees the object and closes the proxy; the kernel state stays (np_sandbox_down removes it). */
void np_net_free(struct np_net *n);

/*
 * The text of the sandbox's /etc/resolv.conf: the proxy's address, or (no network) a comment
 * only. Returns a malloc'd string or NULL (ENOMEM).
 */
char *np_sandbox_resolv_conf(const struct np_net *n);

/*
 * Removes the sandbox's veth, nft table (with its sets) and lease, derived from the id alone.
 * Idempotent; keeps going past failures (returns the first). Usable on a crashed sandbox.
 */
int np_sandbox_down(const char *state_dir, const char *id, struct rung_err *err);

/* The sandbox table's counters: bytes and packets forwarded out of (tx) and into (rx) the
 * sandbox (its DNS proxy traffic excluded), and packets the policy refused (to the outside or
 * to the host). -ENOENT when the sandbox has no table (no network). */
struct np_counters {
	uint64_t tx_bytes, tx_packets, rx_bytes, rx_packets, refused_packets;
};
int np_sandbox_counters(const char *state_dir, const char *id, struct np_counters *out,
			struct rung_err *err);
/*
 * Removes what belongs to this state dir (leases, "rg*" veths and "rung_*" tables carrying its
 * tag) and whose id is not in live_ids. Objects of other state dirs are left alone.
 */
int np_gc(const char *state_dir, const char *const *live_ids, size_t n_live, struct rung_err *err);

/*
 * Turns on IPv4 forwarding in the caller's netns (what egress needs). When it was off, first
 * installs table inet NP_FORWARD_GUARD, which drops forwarded packets that neither enter nor
 * leave a rung interface ("rg*"), so the host routes nothing but rung's own traffic; *guarded
 * (may be NULL) says whether it did. When it was on already, nothing is added (forward.c).
 */
#define NP_FORWARD_GUARD "rung_forward_guard"
int np_forward_enable(bool *guarded, struct rung_err *err);
/*
 * The guard's undoing, in the caller's netns (rung-oci's vm rung, in a pod's when its last
 * guest is gone): when no rung interface ("rg*") is left and NP_FORWARD_GUARD is there (rung
 * turned forwarding on), removes the table and turns IPv4 forwarding off again. Else nothing.
 */
int np_forward_release(struct rung_err *err);
/* The guard's nft script (for tests and docs). */
const char *np_forward_guard_text(void);

/* ---- a joined network namespace (rung-oci: a pod's, made by the CNI; netpolicy/pod.c) ----- */

/*
 * In the CALLER's network namespace: one table "inet <table>" (created, never replaced: -EEXIST
 * when it is there) on the output hook, default deny: loopback, replies, the policy's CIDRs and
 * the DNS proxy's dynamic sets (s4, s4p, d4, d4p as above); IPv6 and DNS elsewhere refused; every
 * DNS query (udp/tcp 53) redirected to the proxy on NP_POD_PROXY_IP:53, except those carrying
 * NP_POD_MARK (the proxy's own, which may go only to upstream_ip:upstream_port over UDP).
 * Setting a socket's mark needs CAP_NET_ADMIN over the namespace: nothing without it can pass.
 */
#define NP_POD_MARK 0x72756e67u
#define NP_POD_PROXY_IP "127.82.85.53"
char *np_pod_render(const struct np_policy *p, const char *table, const char *comment,
		    const char *upstream_ip, uint16_t upstream_port, struct rung_err *err);
int np_pod_up(const char *table, const char *comment, const struct np_policy *p,
	      const char *upstream_ip, uint16_t upstream_port, struct rung_err *err);
/* Removes the table from the caller's netns; idempotent. */
int np_pod_down(const char *table, struct rung_err *err);
/*
 * The DNS proxy (as np_net's) for that table, in the caller's netns: it listens on
 * NP_POD_PROXY_IP:53 (binding port 53 needs the privilege), forwards to upstream ("IP[:PORT]")
 * from a socket marked NP_POD_MARK (set here: CAP_NET_ADMIN), and fills the table's sets over
 * nfnetlink (CAP_NET_ADMIN for as long as it runs). Single-threaded, as np_net_proxy_*().
 */
struct np_pod_proxy;
int np_pod_proxy_new(const char *id, const struct np_policy *p, const char *table,
		     const char *upstream, np_audit_fn audit, void *audit_data,
		     struct np_pod_proxy **out, struct rung_err *err);
int np_pod_proxy_fd(const struct np_pod_proxy *x);
int np_pod_proxy_handle(struct np_pod_proxy *x, struct rung_err *err);
int np_pod_proxy_timeout_ms(const struct np_pod_proxy *x);
void np_pod_proxy_free(struct np_pod_proxy *x);

/* ---- DNS messages (pure; exposed for the proxy's tests and the fuzzer) ------------------ */

#define NP_DNS_MAX_RR 64

struct np_dns_rr {
	char name[NP_NAME_MAX + 2]; /* lower case, no trailing dot ("" = root) */
	uint16_t type, klass;
	uint32_t ttl;
	uint16_t rdlen;
	uint16_t rdoff;		      /* offset of rdata in the message */
	char target[NP_NAME_MAX + 2]; /* CNAME: the decoded target */
};

struct np_dns_msg {
	uint16_t id, flags;
	uint16_t qdcount, ancount, nscount, arcount;
	char qname[NP_NAME_MAX + 2];
	uint16_t qtype, qclass;
	size_t qend;	  /* offset just past the question */
	size_t n_answers; /* parsed answers, at most NP_DNS_MAX_RR */
	struct np_dns_rr answers[NP_DNS_MAX_RR];
};

/*
 * Parses a DNS message defensively (bounds, compression loops, counts): header, exactly one
 * question, and (for a response) the answer section. Returns 0 or -EBADMSG with err saying why.
 */
int np_dns_parse(const uint8_t *buf, size_t len, struct np_dns_msg *m, struct rung_err *err);
/*
 * Collects the A (family 4) / AAAA (6) addresses of the answers that belong to qname, directly
 * or through a CNAME chain starting at it. Returns the count written to addrs (16 bytes each,
 * v4 in the first 4) and the smallest TTL among them in *min_ttl.
 */
size_t np_dns_answer_addrs(const uint8_t *buf, size_t len, const struct np_dns_msg *m, int family,
			   uint8_t (*addrs)[16], size_t max, uint32_t *min_ttl);
/* Builds a header+question-only reply with rcode (REFUSED=5, SERVFAIL=2) to query q. */
int np_dns_reply_rcode(const uint8_t *query, size_t qlen, const struct np_dns_msg *q, int rcode,
		       uint8_t *out, size_t out_max);
/*
 * Rebuilds reply buf (parsed into m) with only the answers i whose keep[i] is set (A, AAAA and
 * CNAME records; names written uncompressed), the header and question as they came, and no
 * authority or additional section (answers past NP_DNS_MAX_RR are dropped too). Returns the
 * length written to out, or -EMSGSIZE.
 */
int np_dns_reply_keep(const uint8_t *buf, size_t len, const struct np_dns_msg *m,
		      const bool *keep, uint8_t *out, size_t out_max);

#endif
