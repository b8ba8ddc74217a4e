/* netpolicy/sandbox.c: a sandbox's network up, down, and garbage collection. */
#include <arpa/inet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/util.h"
#include "netpolicy/lease.h"
#include "netpolicy/link.h"
#include "netpolicy/np-internal.h"

struct np_net {
	char id[160], state_dir[4096];
	struct np_policy policy; /* our own copy: the proxy borrows it */
	struct np_names nm;
	struct np_lease lease;
	struct np_proxy *proxy;
	char upstream[64];
	uint32_t t_us[4];
	/*
	 * Kept until np_net_free: closing an nfnetlink socket after a commit waits for the
	 * kernel's deferred table destruction (an RCU grace period, 3-20 ms here), which must
	 * not land on the setup path.
	 */
	struct nft_ctx *nft;
	int tap_fd; /* np_config.tap: the VM's side of the host end; -1 otherwise */
	bool inbound; /* np_config.inbound */
};

static void fmt_sockaddr(const struct sockaddr_storage *ss, char *out, size_t len)
{
	char t[INET6_ADDRSTRLEN] = "?";
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;
		inet_ntop(AF_INET, &a->sin_addr, t, sizeof(t));
		snprintf(out, len, "%s:%u", t, ntohs(a->sin_port));
	} else {
		const struct sockaddr_in6 *a = (const void *)ss;
		inet_ntop(AF_INET6, &a->sin6_addr, t, sizeof(t));
		snprintf(out, len, "[%s]:%u", t, ntohs(a->sin6_port));
	}
}

static int apply_table(struct np_net *n, struct rung_err *err)
{
	struct np_render_params rp = {0};
	snprintf(rp.table, sizeof(rp.table), "%s", n->nm.table);
	snprintf(rp.veth, sizeof(rp.veth), "%s", n->nm.veth);
	snprintf(rp.comment, sizeof(rp.comment), "%s:%s", n->nm.tag, n->id);
	memcpy(rp.host_ip, n->lease.host_ip, 4);
	memcpy(rp.sb_ip, n->lease.sb_ip, 4);
	rp.inbound = n->inbound;
	if (!n->nft && !(n->nft = np_nft_new(err)))
		return -err->code;
	/* Usually there is no such table: create it. A leftover (a crash) is replaced. */
	int r = -EEXIST;
	for (int pass = 0; pass < 2 && r == -EEXIST; pass++) {
		rp.create_only = pass == 0;
		cleanup_free char *txt = np_policy_render(&n->policy, &rp, err);
		if (!txt)
			return -err->code;
		r = np_nft_run(n->nft, txt, err);
	}
	return r < 0 ? rung_err_wrap(err, "table %s", n->nm.table) : 0;
}

/*
 * The host end (a veth into netns_fd, or a tap) and the DNS proxy on the lease's host address.
 * A clash with another state dir's subnet (EADDRINUSE) gives the lease up and leases again, up
 * to five times. *t3: when the link was last up.
 */
static int link_and_proxy(const struct np_config *cfg, const char *id, struct np_net *n,
			  int netns_fd, struct np_proxy_params *pp, const char *pool, uint64_t *t3,
			  struct rung_err *err)
{
	pp->listen.sin_family = AF_INET;
	pp->listen.sin_port = htons(53);
	int r;
	for (int attempt = 0;; attempt++) {
		r = cfg->tap ? np_tap_up(&n->nm, id, &n->lease, &n->tap_fd, err)
			     : np_link_up(&n->nm, id, netns_fd, &n->lease, err);
		*t3 = rung_now_us();
		if (r == 0) {
			/* our proxy's address taken is a clash too (a store without this check) */
			memcpy(&pp->listen.sin_addr, n->lease.host_ip, 4);
			r = np_proxy_new(pp, &n->proxy, err);
		}
		if (r != -EADDRINUSE || attempt == 5)
			break;
		/* a clash with another state dir: give the subnet up, wait a little, lease again */
		LOG_INFO("sandbox %s: %s; leasing again", id, err->msg);
		struct rung_err e2;
		if (n->tap_fd >= 0)
			close(n->tap_fd);
		n->tap_fd = -1;
		np_link_del(n->nm.veth, &e2);
		np_lease_release(cfg->state_dir, &n->nm, &e2);
		uint16_t jitter;
		if (getrandom(&jitter, sizeof(jitter), 0) != sizeof(jitter))
			jitter = (uint16_t)rung_now_us();
		usleep(500 + jitter % 2000);
		if ((r = np_lease_acquire(cfg->state_dir, pool, id, &n->nm, &n->lease, err)) < 0 ||
		    (r = apply_table(n, err)) < 0)
			break;
	}
	return r;
}

int np_sandbox_up(const struct np_config *cfg, const char *id, int netns_fd,
		  const struct np_policy *p, struct np_net **out, struct rung_err *err)
{
	int r;
	if ((r = np_id_check(id, err)) < 0)
		return r;
	if (!cfg || !cfg->state_dir || !*cfg->state_dir)
		return rung_err_set(err, EINVAL, "np_config.state_dir: required");
	if (netns_fd < 0 && !cfg->tap)
		return rung_err_set(err, EBADF, "netns fd: not open");
	struct np_net *n = calloc(1, sizeof(*n));
	if (!n)
		return rung_err_set(err, ENOMEM, "out of memory");
	n->tap_fd = -1;
	n->inbound = cfg->inbound;
	snprintf(n->id, sizeof(n->id), "%s", id);
	snprintf(n->state_dir, sizeof(n->state_dir), "%s", cfg->state_dir);
	if (!p || p->n == 0) { /* no network at all: loopback only, no veth (a VM: no device) */
		if (!cfg->tap && (r = np_netns_lo_only(netns_fd, err)) < 0) {
			free(n);
			return rung_err_wrap(err, "sandbox %s", id);
		}
		*out = n;
		return 0;
	}
	n->policy.entries = calloc(p->n, sizeof(*p->entries));
	if (!n->policy.entries) {
		free(n);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	memcpy(n->policy.entries, p->entries, p->n * sizeof(*p->entries));
	n->policy.n = p->n;
	/* The state dir must exist first: its canonical path tags our kernel objects for gc. */
	char netdir[4200];
	snprintf(netdir, sizeof(netdir), "%s/net", cfg->state_dir);
	if ((r = rung_mkdir_p(netdir, 0700, err)) < 0)
		goto fail_early;
	np_names_derive(cfg->state_dir, id, &n->nm);
	/* Never touch a live sandbox's network (its table would be replaced, its sets emptied). */
	if (if_nametoindex(n->nm.veth) != 0) {
		r = rung_err_set(err, EEXIST,
				 "sandbox %s: network already up (veth %s); np_sandbox_down it first",
				 id, n->nm.veth); /* before the free: the name is n's */
		np_net_free(n);
		return r;
	}

	struct np_proxy_params pp = {
	    .id = n->id,
	    .policy = &n->policy,
	    .table = n->nm.table,
	    .ttl_floor_s = cfg->ttl_floor_s,
	    .ttl_cap_s = cfg->ttl_cap_s,
	    .audit = cfg->audit,
	    .audit_data = cfg->audit_data,
	};
	if ((r = np_upstream_resolve(cfg->upstream, &pp.upstream, &pp.upstream_len, err)) < 0)
		goto fail_early;
	fmt_sockaddr(&pp.upstream, n->upstream, sizeof(n->upstream));
	uint64_t t0 = rung_now_us();
	const char *pool = cfg->pool, *pool_from = "np_config.pool";
	if (!pool || !*pool)
		pool = NP_DEFAULT_POOL;
	uint32_t slots, plen = 0;
	if ((r = np_pool_parse(pool, &pp.pool_base, &slots, err)) < 0) {
		rung_err_wrap(err, "%s", pool_from);
		goto fail_early;
	}
	while ((1u << plen) < slots)
		plen++;
	pp.pool_mask = ~0u << (plen + 2); /* slots are /30s */
	r = np_lease_acquire(cfg->state_dir, pool, id, &n->nm, &n->lease, err);
	if (r < 0)
		goto fail_early;
	/* The table goes in before the link exists: no moment of unfiltered forwarding. */
	uint64_t t1 = rung_now_us();
	if ((r = apply_table(n, err)) < 0)
		goto fail;
	uint64_t t2 = rung_now_us();
	uint64_t t3 = t2;
	if ((r = link_and_proxy(cfg, id, n, netns_fd, &pp, pool, &t3, err)) < 0)
		goto fail;
	uint64_t t4 = rung_now_us();
	n->t_us[0] = (uint32_t)(t1 - t0);
	n->t_us[1] = (uint32_t)(t2 - t1);
	n->t_us[2] = (uint32_t)(t3 - t2);
	n->t_us[3] = (uint32_t)(t4 - t3);
	*out = n;
	return 0;
fail:
	np_sandbox_down(cfg->state_dir, id, NULL);
fail_early:
	np_net_free(n);
	return rung_err_wrap(err, "sandbox %s network", id);
}

void np_net_info(const struct np_net *n, struct np_net_info *o)
{
	memset(o, 0, sizeof(*o));
	o->has_network = n->policy.n > 0;
	if (!o->has_network)
		return;
	o->tap = n->tap_fd >= 0;
	snprintf(o->veth, sizeof(o->veth), "%s", n->nm.veth);
	snprintf(o->table, sizeof(o->table), "%s", n->nm.table);
	inet_ntop(AF_INET, n->lease.host_ip, o->host_ip, sizeof(o->host_ip));
	inet_ntop(AF_INET, n->lease.sb_ip, o->sb_ip, sizeof(o->sb_ip));
	snprintf(o->upstream, sizeof(o->upstream), "%s", n->upstream);
	o->open = np_policy_open(&n->policy);
	o->t_lease_us = n->t_us[0];
	o->t_table_us = n->t_us[1];
	o->t_link_us = n->t_us[2];
	o->t_proxy_us = n->t_us[3];
}

int np_net_tap_fd(const struct np_net *n) { return n ? n->tap_fd : -1; }

int np_net_proxy_fd(const struct np_net *n) { return n && n->proxy ? np_proxy_fd(n->proxy) : -1; }

int np_net_proxy_handle(struct np_net *n, struct rung_err *err)
{
	return n && n->proxy ? np_proxy_handle(n->proxy, err) : 0;
}

int np_net_proxy_timeout_ms(const struct np_net *n)
{
	return n && n->proxy ? np_proxy_timeout_ms(n->proxy) : -1;
}

void np_net_free(struct np_net *n)
{
	if (!n)
		return;
	np_proxy_free(n->proxy);
	np_nft_free(n->nft);
	if (n->tap_fd >= 0)
		close(n->tap_fd);
	np_policy_release(&n->policy);
	free(n);
}

char *np_sandbox_resolv_conf(const struct np_net *n)
{
	char *s = NULL;
	int r;
	if (!n || n->policy.n == 0) {
		r = asprintf(&s, "# rung: this sandbox has no network (empty egress_allow)\n");
	} else {
		char ip[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, n->lease.host_ip, ip, sizeof(ip));
		r = asprintf(&s,
			     "# rung: the egress allowlist DNS proxy; other resolvers are blocked\n"
			     "nameserver %s\noptions attempts:2 timeout:2\n",
			     ip);
	}
	return r < 0 ? NULL : s;
}

/* Removes the veth, table and lease of one hash; keeps going, returns the first error. */
static int remove_by_names(const char *state_dir, const struct np_names *nm, struct rung_err *err)
{
	struct rung_err e;
	int first = 0, r;
	if ((r = np_link_del(nm->veth, &e)) < 0 && !first) {
		first = r;
		if (err)
			*err = e;
	}
	struct nft_ctx *c = np_nft_new(&e);
	r = c ? np_nft_table_del(c, nm->table, &e) : -e.code;
	np_nft_free(c);
	if (r < 0 && !first) {
		first = r;
		if (err)
			*err = e;
	}
	if ((r = np_lease_release(state_dir, nm, &e)) < 0 && !first) {
		first = r;
		if (err)
			*err = e;
	}
	return first;
}

int np_sandbox_down(const char *state_dir, const char *id, struct rung_err *err)
{
	int r = np_id_check(id, err);
	if (r < 0)
		return r;
	struct np_names nm;
	np_names_derive(state_dir, id, &nm);
	r = remove_by_names(state_dir, &nm, err);
	/* The kernel may finish unregistering the veth after our request returns (on a loaded
	 * host, tens of ms): wait for the name to be gone, so that "down" means down and an
	 * immediate "up" of the same id does not find it. */
	for (int i = 0; i < 200 && if_nametoindex(nm.veth) != 0; i++)
		usleep(10000);
	if (r == 0 && if_nametoindex(nm.veth) != 0)
		r = rung_err_set(err, EBUSY, "sandbox %s: veth %s still present after 2 s", id,
				 nm.veth);
	return r;
}

/* ---- gc ---- */

struct gc {
	const char *tag;
	const char *const *live;
	size_t n_live;
	char (*live_hash)[13];
	char (*orphans)[13];
	size_t n_orphans, cap;
};

static void gc_consider(struct gc *g, const char *hash)
{
	if (strlen(hash) != 12)
		return;
	for (size_t i = 0; i < g->n_live; i++)
		if (!strcmp(g->live_hash[i], hash))
			return;
	for (size_t i = 0; i < g->n_orphans; i++)
		if (!strcmp(g->orphans[i], hash))
			return;
	if (g->n_orphans == g->cap) {
		size_t nc = g->cap ? g->cap * 2 : 16;
		void *nv = realloc(g->orphans, nc * sizeof(*g->orphans));
		if (!nv)
			return;
		g->orphans = nv;
		g->cap = nc;
	}
	snprintf(g->orphans[g->n_orphans++], 13, "%s", hash);
}

/* alias/comment "rung-np:<sdtag>:<id>" of ours? */
static bool ours(const struct gc *g, const char *mark)
{
	size_t n = strlen(g->tag);
	return !strncmp(mark, g->tag, n) && mark[n] == ':';
}

static void gc_lease(const char *id, const char *hash, void *d) { gc_consider(d, hash); }

static void gc_link(const char *name, const char *alias, void *d)
{
	if (ours(d, alias) && strlen(name) == 14)
		gc_consider(d, name + 2);
}

static void gc_table(const char *name, const char *comment, void *d)
{
	if (ours(d, comment) && strlen(name) == 17)
		gc_consider(d, name + 5);
}

int np_gc(const char *state_dir, const char *const *live_ids, size_t n_live, struct rung_err *err)
{
	struct np_names nm;
	np_names_derive(state_dir, "gc", &nm);
	struct gc g = {.tag = nm.tag, .live = live_ids, .n_live = n_live};
	g.live_hash = calloc(n_live + 1, sizeof(*g.live_hash));
	if (!g.live_hash)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n_live; i++) {
		struct np_names ln;
		np_names_derive(state_dir, live_ids[i], &ln);
		memcpy(g.live_hash[i], ln.hash, 13);
	}
	int r, first = 0;
	struct rung_err e;
	if ((r = np_lease_foreach(state_dir, gc_lease, &g, &e)) < 0 && !first) {
		first = r;
		if (err)
			*err = e;
	}
	if ((r = np_link_foreach(gc_link, &g, &e)) < 0 && !first) {
		first = r;
		if (err)
			*err = e;
	}
	struct nft_ctx *c = np_nft_new(&e);
	r = c ? np_nft_foreach_table(c, gc_table, &g, &e) : -e.code;
	np_nft_free(c);
	if (r < 0 && !first) {
		first = r;
		if (err)
			*err = e;
	}
	for (size_t i = 0; i < g.n_orphans; i++) {
		struct np_names on = nm;
		snprintf(on.hash, sizeof(on.hash), "%s", g.orphans[i]);
		snprintf(on.veth, sizeof(on.veth), "rg%s", on.hash);
		snprintf(on.table, sizeof(on.table), "rung_%s", on.hash);
		LOG_INFO("removing orphaned sandbox network %s", on.hash);
		if ((r = remove_by_names(state_dir, &on, &e)) < 0 && !first) {
			first = r;
			if (err)
				*err = e;
		}
	}
	free(g.orphans);
	free(g.live_hash);
	return first;
}
