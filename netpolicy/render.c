/* netpolicy/render.c: np_policy_render(): policy -> one nft table (pure, no syscalls). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "netpolicy/np-internal.h"

static bool ident_ok(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

static bool comment_ok(const char *s)
{
	for (; *s; s++)
		if (*s == '"' || *s == '\\' || *s < 0x20 || *s > 0x7e)
			return false;
	return true;
}

/* Elements of one static set: kind, with or without a port. */
static void put_elements(FILE *f, const struct np_policy *p, enum np_entry_kind kind, bool ported)
{
	bool first = true;
	for (size_t i = 0; i < p->n; i++) {
		const struct np_entry *e = &p->entries[i];
		if (e->kind != kind || (e->port != 0) != ported)
			continue;
		char a[INET6_ADDRSTRLEN];
		inet_ntop(kind == NP_ENTRY_CIDR4 ? AF_INET : AF_INET6, e->addr, a, sizeof(a));
		fprintf(f, "%s%s/%u", first ? "\t\telements = { " : ", ", a, e->prefix);
		if (ported)
			fprintf(f, " . %u", e->port);
		first = false;
	}
	if (!first)
		fputs(" }\n", f);
}

static bool has(const struct np_policy *p, enum np_entry_kind kind, int ported)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->entries[i].kind == kind && (p->entries[i].port != 0) == ported)
			return true;
	return false;
}

void np_render_set(FILE *f, const char *name, const char *type, const char *flags,
		   const struct np_policy *p, int kind, bool ported)
{
	fprintf(f, "\tset %s {\n\t\ttype %s\n\t\tflags %s\n", name, type, flags);
	if (kind >= 0)
		put_elements(f, p, (enum np_entry_kind)kind, ported);
	else /* bounded: a flood of distinct answers cannot grow kernel memory without end */
		fprintf(f, "\t\tsize %d\n", NP_DYN_SET_MAX);
	fputs("\t}\n", f);
}

/* The sets a policy uses: only those exist (every object here is re-read by libnftables for
 * each later command on the host, so fewer is faster for everyone). IPv6 has none: it is
 * disabled in the sandbox and dropped below. */
struct used_sets {
	bool c4, c4p; /* CIDR entries, without and with ports */
	bool h, hp;   /* names (filled by the DNS proxy), without and with ports */
	bool open;    /* 0.0.0.0/0 on every port (np_policy_open): DNS anywhere too */
};

/* Replace atomically: the whole script is one transaction. */
static void put_table_head(FILE *f, const struct np_render_params *rp)
{
	const char *t = rp->table;
	/*
	 * The comment (np_gc's owner mark) only sticks when the table is created: with
	 * create_only it goes on the "create" itself (libnftables 1.0.6 ignores the rest of a
	 * "create table" block, so the content follows in a plain "table" block).
	 */
	if (rp->create_only)
		fprintf(f, "create table inet %s { comment \"%s\"; }\ntable inet %s {\n", t,
			rp->comment, t);
	else
		fprintf(f,
			"add table inet %s\ndelete table inet %s\ntable inet %s {\n"
			"\tcomment \"%s\"\n",
			t, t, t, rp->comment);
}

static void put_sets(FILE *f, const struct np_policy *p, const struct used_sets *u)
{
	if (u->c4)
		np_render_set(f, "s4", "ipv4_addr", "interval", p, NP_ENTRY_CIDR4, false);
	if (u->c4p)
		np_render_set(f, "s4p", "ipv4_addr . inet_service", "interval", p, NP_ENTRY_CIDR4, true);
	/* Filled only by the DNS proxy, each element with timeout = clamped TTL. */
	if (u->h)
		np_render_set(f, "d4", "ipv4_addr", "timeout", p, -1, false);
	if (u->hp)
		np_render_set(f, "d4p", "ipv4_addr . inet_service", "timeout", p, -1, false);
}

/* The sandbox's traffic: only to the sets' addresses, never DNS but through the proxy. */
static void put_egress(FILE *f, const struct used_sets *u, const char *sb)
{
	fprintf(f,
		"\tchain egress {\n"
		"\t\tmeta nfproto ipv6 drop\n"
		"\t\tip saddr != %s drop\n"
		"\t\tct state established,related accept\n"
		"\t\tct state invalid drop\n",
		sb);
	if (!u->open) /* open: every address is reachable, a resolver's too */
		fputs("\t\tmeta l4proto { tcp, udp } th dport 53 jump deny\n", f);
	if (u->c4)
		fputs("\t\tip daddr @s4 accept\n", f);
	if (u->c4p)
		fputs("\t\tmeta l4proto { tcp, udp } ip daddr . th dport @s4p accept\n", f);
	if (u->h)
		fputs("\t\tip daddr @d4 accept\n", f);
	if (u->hp)
		fputs("\t\tmeta l4proto { tcp, udp } ip daddr . th dport @d4p accept\n", f);
	fputs("\t\tjump deny\n\t}\n", f);
}

/* The hooks, the egress chain, the host's DNS only, deny, masquerade. */
static void put_chains(FILE *f, const struct used_sets *u, const char *v, const char *host,
		       const char *sb)
{
	fprintf(f,
		"\tchain forward_hook {\n"
		"\t\ttype filter hook forward priority filter; policy accept;\n"
		"\t\tiifname \"%s\" counter name \"tx\" jump egress\n"
		"\t\toifname \"%s\" counter name \"rx\"\n"
		"\t\toifname \"%s\" ct state established,related accept\n"
		"\t\toifname \"%s\" ct status dnat accept\n"
		"\t\toifname \"%s\" jump deny\n"
		"\t}\n"
		"\tchain input_hook {\n"
		"\t\ttype filter hook input priority filter; policy accept;\n"
		"\t\tiifname \"%s\" jump to_host\n"
		"\t}\n",
		v, v, v, v, v, v);
	put_egress(f, u, sb);
	fprintf(f,
		"\tchain to_host {\n"
		"\t\tmeta nfproto ipv6 drop\n"
		"\t\tip saddr != %s drop\n"
		"\t\tct state established,related accept\n"
		"\t\tip daddr %s udp dport 53 accept\n"
		"\t\tip daddr %s tcp dport 53 accept\n"
		"\t\tjump deny\n"
		"\t}\n"
		"\tchain deny {\n"
		"\t\tcounter name \"refused\"\n"
		"\t\tmeta l4proto tcp reject with tcp reset\n"
		"\t\treject with icmpx type admin-prohibited\n"
		"\t}\n"
		"\tchain nat_post {\n"
		"\t\ttype nat hook postrouting priority srcnat; policy accept;\n"
		"\t\tip saddr %s oifname != \"%s\" masquerade\n"
		"\t}\n",
		sb, host, host, sb, v);
}

char *np_policy_render(const struct np_policy *p, const struct np_render_params *rp,
		       struct rung_err *err)
{
	if (!p || p->n == 0) {
		rung_err_set(err, EINVAL,
			     "np_policy_render: empty policy has no table (no network)");
		return NULL;
	}
	if (!ident_ok(rp->table, sizeof(rp->table) - 1) || strlen(rp->veth) == 0 ||
	    strlen(rp->veth) > 15 || !ident_ok(rp->veth, 15) || !comment_ok(rp->comment)) {
		rung_err_set(err, EINVAL,
			     "np_policy_render: bad table \"%s\", veth \"%s\" or comment",
			     rp->table, rp->veth);
		return NULL;
	}
	char host[INET_ADDRSTRLEN], sb[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, rp->host_ip, host, sizeof(host));
	inet_ntop(AF_INET, rp->sb_ip, sb, sizeof(sb));

	cleanup_free char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f) {
		rung_err_set(err, ENOMEM, "open_memstream");
		return NULL;
	}
	struct used_sets u = {
	    .c4 = has(p, NP_ENTRY_CIDR4, 0),
	    .c4p = has(p, NP_ENTRY_CIDR4, 1),
	    .h = has(p, NP_ENTRY_HOST, 0) || has(p, NP_ENTRY_SUFFIX, 0),
	    .hp = has(p, NP_ENTRY_HOST, 1) || has(p, NP_ENTRY_SUFFIX, 1),
	    .open = np_policy_open(p),
	};
	put_table_head(f, rp);
	put_sets(f, p, &u);
	/* What np_sandbox_counters reads: forwarded bytes each way, packets refused. */
	fputs("\tcounter tx {\n\t}\n\tcounter rx {\n\t}\n\tcounter refused {\n\t}\n", f);
	put_chains(f, &u, rp->veth, host, sb);
	if (rp->inbound) /* connections to this namespace's own addresses: the sandbox's */
		fprintf(f,
			"\tchain inbound {\n"
			"\t\ttype nat hook prerouting priority dstnat; policy accept;\n"
			"\t\tiifname != \"%s\" fib daddr type local meta nfproto ipv4 "
			"meta l4proto { tcp, udp } dnat ip to %s\n"
			"\t}\n",
			rp->veth, sb);
	fputs("}\n", f);
	if (fclose(f) != 0 || !buf) {
		rung_err_set(err, ENOMEM, "rendering nft table %s", rp->table);
		return NULL;
	}
	return rung_steal_ptr(&buf);
}
