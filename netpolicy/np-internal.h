/* netpolicy/np-internal.h: shared by the .c files of netpolicy/ only. lease.c and link.c
 * declare their functions in lease.h and link.h, so that scripts/check-layers.sh sees who calls
 * whom (lease -> link, never back). */
#ifndef RUNG_NETPOLICY_INTERNAL_H
#define RUNG_NETPOLICY_INTERNAL_H

#include <netinet/in.h>
#include <stdio.h>
#include <stdint.h>

#include "netpolicy/np.h"

#define NP_DEFAULT_POOL "10.213.0.0/16"
#define NP_DEFAULT_TTL_FLOOR 30
#define NP_DEFAULT_TTL_CAP 3600
#define NP_PEER_IFNAME "eth0"

int np_name_normalize(const char *in, char *out, size_t outlen, const char **why);

/* render.c: one set of table p into f: the static elements of kind (with or without a port),
 * or, kind < 0, a dynamic set bounded by NP_DYN_SET_MAX (also pod.c's). */
void np_render_set(FILE *f, const char *name, const char *type, const char *flags,
		   const struct np_policy *p, int kind, bool ported);

/* Names derived from the id alone (so down/gc work without any saved state). */
struct np_names {
	char hash[13];	/* 12 hex of sha256(id) */
	char veth[16];	/* "rg" + hash */
	char table[32]; /* "rung_" + hash */
	char tag[32];	/* "rung-np:" + 12 hex of sha256(state_dir) */
};

/* A /30 leased to a sandbox (lease.h), its host end set up by link.h. */
struct np_lease {
	uint32_t index;
	uint8_t net[4], host_ip[4], sb_ip[4];
};

/* nft.c: libnftables. */
struct nft_ctx;
struct nft_ctx *np_nft_new(struct rung_err *err);
void np_nft_free(struct nft_ctx *c);
int np_nft_run(struct nft_ctx *c, const char *cmd, struct rung_err *err);
int np_nft_table_del(struct nft_ctx *c, const char *table, struct rung_err *err);
/* Calls fn(table name, comment or "") for each "inet rung_*" table. */
int np_nft_foreach_table(struct nft_ctx *c, void (*fn)(const char *, const char *, void *),
			 void *data, struct rung_err *err);

/* elems.c: set elements over nfnetlink (libnftnl), for the proxy's hot path. */
struct np_nfsock;
int np_nfsock_open(struct np_nfsock **out, struct rung_err *err);
void np_nfsock_close(struct np_nfsock *s);
/* In one batch, n keys of keylen bytes each end up in table/set with this timeout (ms). */
int np_nfsock_set_elems(struct np_nfsock *s, const char *table, const char *set,
			const uint8_t *keys, size_t keylen, size_t n, uint64_t timeout_ms,
			struct rung_err *err);

/* proxy.c */
struct np_proxy;
struct np_proxy_params {
	const char *id;
	const struct np_policy *policy; /* borrowed; must outlive the proxy */
	struct sockaddr_in listen;
	struct sockaddr_storage upstream;
	socklen_t upstream_len;
	const char *table;
	uint32_t ttl_floor_s, ttl_cap_s;
	uint32_t pool_base, pool_mask; /* host order: never opened by a DNS answer */
	np_audit_fn audit;
	void *audit_data;
	uint32_t mark; /* non-zero: SO_MARK of the upstream socket (np_pod: exempt from the redirect) */
};
/*
 * addr.c. Pure: may a DNS answer open this IPv4 address (network order)? Never: 0/8, RFC 1918,
 * 100.64/10, loopback, 168.63.129.16, link-local (169.254.169.254), 192.0.0/24, 198.18/15,
 * 224/3 (multicast, 240/4, broadcast), the pool (other sandboxes, the gateway). Explicit CIDR
 * entries are not subject to this. np_addr6_dns_openable: the IPv6 equivalents (IPv6 is not
 * opened today; its AAAA records are filtered from answers the same way).
 */
bool np_addr_dns_openable(const uint8_t a[4], uint32_t pool_base, uint32_t pool_mask);
bool np_addr6_dns_openable(const uint8_t a[16]);
/* The host's own addresses (getifaddrs in the caller's netns), re-read at most once a second. */
#define NP_HOSTADDRS_TTL_MS 1000
struct np_hostaddrs {
	uint64_t at_ms; /* 0: never read */
	size_t n4, n6, cap4, cap6;
	uint8_t (*a4)[4];
	uint8_t (*a6)[16];
};
int np_hostaddrs_refresh(struct np_hostaddrs *h, struct rung_err *err);
void np_hostaddrs_release(struct np_hostaddrs *h);
bool np_hostaddrs_has(const struct np_hostaddrs *h, int family, const uint8_t *a);
int np_proxy_new(const struct np_proxy_params *pp, struct np_proxy **out, struct rung_err *err);
int np_proxy_fd(const struct np_proxy *p);
int np_proxy_handle(struct np_proxy *p, struct rung_err *err);
int np_proxy_timeout_ms(const struct np_proxy *p);
void np_proxy_free(struct np_proxy *p);
/* "IP[:PORT]" (IPv6 as [IP]:PORT) -> sockaddr; default port 53. */
int np_upstream_parse(const char *s, struct sockaddr_storage *ss, socklen_t *len,
		      struct rung_err *err);
/* cfg->upstream, else the first nameserver of /etc/resolv.conf. */
int np_upstream_resolve(const char *cfg_upstream, struct sockaddr_storage *ss, socklen_t *len,
			struct rung_err *err);

#endif
