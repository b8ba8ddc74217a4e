/* netpolicy/sandbox.c: a sandbox's network up, down, and garbage collection. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "netpolicy/np-internal.h"

struct np_net {
	char id[160], state_dir[4096];
	struct np_policy policy; /* our own copy: the proxy borrows it */
	struct np_names nm;
	struct np_lease lease;
	struct np_proxy *proxy;
	char upstream[64];
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

static int apply_table(const struct np_net *n, struct rung_err *err)
{
	struct np_render_params rp = {0};
	snprintf(rp.table, sizeof(rp.table), "%s", n->nm.table);
	snprintf(rp.veth, sizeof(rp.veth), "%s", n->nm.veth);
	snprintf(rp.comment, sizeof(rp.comment), "%s:%s", n->nm.tag, n->id);
	memcpy(rp.host_ip, n->lease.host_ip, 4);
	memcpy(rp.sb_ip, n->lease.sb_ip, 4);
	cleanup_free char *txt = np_policy_render(&n->policy, &rp, err);
	if (!txt)
		return -err->code;
	struct nft_ctx *c = np_nft_new(err);
	if (!c)
		return -err->code;
	int r = np_nft_run(c, txt, err);
	np_nft_free(c);
	return r < 0 ? rung_err_wrap(err, "table %s", n->nm.table) : 0;
}

int np_sandbox_up(const struct np_config *cfg, const char *id, int netns_fd,
		  const struct np_policy *p, struct np_net **out, struct rung_err *err)
{
	int r;
	if ((r = np_id_check(id, err)) < 0)
		return r;
	if (!cfg || !cfg->state_dir || !*cfg->state_dir)
		return rung_err_set(err, EINVAL, "np_config.state_dir: required");
	if (netns_fd < 0)
		return rung_err_set(err, EBADF, "netns fd: not open");
	struct np_net *n = calloc(1, sizeof(*n));
	if (!n)
		return rung_err_set(err, ENOMEM, "out of memory");
	snprintf(n->id, sizeof(n->id), "%s", id);
	snprintf(n->state_dir, sizeof(n->state_dir), "%s", cfg->state_dir);
	if (!p || p->n == 0) { /* no network at all: loopback only, no veth */
		if ((r = np_netns_lo_only(netns_fd, err)) < 0) {
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
	np_names_derive(cfg->state_dir, id, &n->nm);

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
	r = np_lease_acquire(cfg->state_dir, cfg->pool ? cfg->pool : NP_DEFAULT_POOL, id, &n->nm,
			     &n->lease, err);
	if (r < 0)
		goto fail_early;
	/* The table goes in before the link exists: no moment of unfiltered forwarding. */
	if ((r = apply_table(n, err)) < 0 || (r = np_link_up(&n->nm, id, netns_fd, &n->lease, err)) < 0)
		goto fail;
	pp.listen.sin_family = AF_INET;
	pp.listen.sin_port = htons(53);
	memcpy(&pp.listen.sin_addr, n->lease.host_ip, 4);
	if ((r = np_proxy_new(&pp, &n->proxy, err)) < 0)
		goto fail;
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
	snprintf(o->veth, sizeof(o->veth), "%s", n->nm.veth);
	snprintf(o->table, sizeof(o->table), "%s", n->nm.table);
	inet_ntop(AF_INET, n->lease.host_ip, o->host_ip, sizeof(o->host_ip));
	inet_ntop(AF_INET, n->lease.sb_ip, o->sb_ip, sizeof(o->sb_ip));
	snprintf(o->upstream, sizeof(o->upstream), "%s", n->upstream);
}

int np_net_proxy_fd(const struct np_net *n)
{
	return n && n->proxy ? np_proxy_fd(n->proxy) : -1;
}

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
static int remove_by_names(const char *state_dir, const struct np_names *nm,
			   struct rung_err *err)
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
	return remove_by_names(state_dir, &nm, err);
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

static void gc_lease(const char *id, const char *hash, void *d)
{
	gc_consider(d, hash);
}

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

int np_gc(const char *state_dir, const char *const *live_ids, size_t n_live,
	  struct rung_err *err)
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
