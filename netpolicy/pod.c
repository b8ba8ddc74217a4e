/*
 * netpolicy/pod.c: the egress allowlist inside a network namespace someone else made (rung-oci:
 * a Kubernetes pod's, made by the CNI). No veth, no lease: one table in that namespace, on the
 * output hook (the pod's own traffic), and the DNS proxy on a loopback address there, to which
 * the table redirects every DNS query but the proxy's own (its upstream socket's mark).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "netpolicy/np-internal.h"

struct np_pod_proxy {
	struct np_policy policy; /* our own copy: the proxy borrows it */
	struct np_proxy *proxy;
};

static bool pod_has(const struct np_policy *p, bool name, bool ported)
{
	for (size_t i = 0; i < p->n; i++) {
		enum np_entry_kind k = p->entries[i].kind;
		bool is_name = k == NP_ENTRY_HOST || k == NP_ENTRY_SUFFIX;
		if ((name ? is_name : k == NP_ENTRY_CIDR4) && (p->entries[i].port != 0) == ported)
			return true;
	}
	return false;
}

static void pod_sets(FILE *f, const struct np_policy *p, bool u[4])
{
	static const char *const name[4] = {"s4", "s4p", "d4", "d4p"};
	for (int i = 0; i < 4; i++)
		if ((u[i] = pod_has(p, i >= 2, i % 2)))
			np_render_set(f, name[i], i % 2 ? "ipv4_addr . inet_service" : "ipv4_addr",
				      i < 2 ? "interval" : "timeout", p, i < 2 ? NP_ENTRY_CIDR4 : -1,
				      i % 2);
}

char *np_pod_render(const struct np_policy *p, const char *table, const char *comment,
		    const char *upstream_ip, uint16_t upstream_port, struct rung_err *err)
{
	struct in_addr up;
	if (strlen(table) >= 32 || strspn(table, "abcdefghijklmnopqrstuvwxyz0123456789_") !=
					   strlen(table) || !*table || strpbrk(comment, "\"\\\n") ||
	    inet_pton(AF_INET, upstream_ip, &up) != 1) {
		rung_err_set(err, EINVAL, "np_pod_render: bad table \"%s\", comment or upstream %s",
			     table, upstream_ip);
		return NULL;
	}
	cleanup_free char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f) {
		rung_err_set(err, ENOMEM, "open_memstream");
		return NULL;
	}
	bool u[4];
	fprintf(f, "create table inet %s { comment \"%s\"; }\ntable inet %s {\n", table, comment,
		table);
	pod_sets(f, p, u);
	/* The filter chain still sees a redirected query's first route (oif eth0, not lo: a
	 * hook's devices are fixed before its chains run), so the proxy is accepted by address. */
	fprintf(f,
		"\tcounter refused {\n\t}\n"
		"\tchain dns_redirect {\n"
		"\t\ttype nat hook output priority -100; policy accept;\n"
		"\t\tmeta mark 0x%x return\n"
		"\t\tmeta nfproto ipv4 udp dport 53 dnat ip to %s:53\n"
		"\t\tmeta nfproto ipv4 tcp dport 53 dnat ip to %s:53\n"
		"\t}\n"
		"\tchain egress {\n"
		"\t\ttype filter hook output priority filter; policy drop;\n"
		"\t\toifname \"lo\" accept\n"
		"\t\tip daddr %s meta l4proto { tcp, udp } th dport 53 accept\n"
		"\t\tmeta mark 0x%x meta nfproto ipv4 ip daddr %s udp dport %u accept\n"
		"\t\tmeta nfproto ipv6 jump deny\n"
		"\t\tct state established,related accept\n"
		"\t\tct state invalid drop\n"
		"\t\tmeta l4proto { tcp, udp } th dport 53 jump deny\n",
		NP_POD_MARK, NP_POD_PROXY_IP, NP_POD_PROXY_IP, NP_POD_PROXY_IP, NP_POD_MARK, upstream_ip,
		upstream_port);
	if (u[0])
		fputs("\t\tip daddr @s4 accept\n", f);
	if (u[1])
		fputs("\t\tmeta l4proto { tcp, udp } ip daddr . th dport @s4p accept\n", f);
	if (u[2])
		fputs("\t\tip daddr @d4 accept\n", f);
	if (u[3])
		fputs("\t\tmeta l4proto { tcp, udp } ip daddr . th dport @d4p accept\n", f);
	fputs("\t\tjump deny\n\t}\n"
	      "\tchain deny {\n"
	      "\t\tcounter name \"refused\"\n"
	      "\t\tmeta l4proto tcp reject with tcp reset\n"
	      "\t\treject with icmpx type admin-prohibited\n"
	      "\t}\n}\n",
	      f);
	if (fclose(f) != 0 || !buf) {
		rung_err_set(err, ENOMEM, "rendering nft table %s", table);
		return NULL;
	}
	return rung_steal_ptr(&buf);
}

int np_pod_up(const char *table, const char *comment, const struct np_policy *p,
	      const char *upstream_ip, uint16_t upstream_port, struct rung_err *err)
{
	cleanup_free char *txt = np_pod_render(p, table, comment, upstream_ip, upstream_port, err);
	if (!txt)
		return -err->code;
	struct nft_ctx *c = np_nft_new(err);
	if (!c)
		return -err->code;
	int r = np_nft_run(c, txt, err);
	np_nft_free(c);
	return r < 0 ? rung_err_wrap(err, "table %s", table) : 0;
}

int np_pod_down(const char *table, struct rung_err *err)
{
	struct nft_ctx *c = np_nft_new(err);
	if (!c)
		return -err->code;
	int r = np_nft_table_del(c, table, err);
	np_nft_free(c);
	return r;
}

int np_pod_proxy_new(const char *id, const struct np_policy *p, const char *table,
		     const char *upstream, np_audit_fn audit, void *audit_data,
		     struct np_pod_proxy **out, struct rung_err *err)
{
	struct np_pod_proxy *x = calloc(1, sizeof(*x));
	if (!x)
		return rung_err_set(err, ENOMEM, "out of memory");
	if (p->n && !(x->policy.entries = calloc(p->n, sizeof(*p->entries)))) {
		free(x);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	if (p->n)
		memcpy(x->policy.entries, p->entries, p->n * sizeof(*p->entries));
	x->policy.n = p->n;
	struct np_proxy_params pp = {.id = id, .policy = &x->policy, .table = table,
				     .audit = audit, .audit_data = audit_data,
				     .mark = NP_POD_MARK};
	pp.listen.sin_family = AF_INET;
	pp.listen.sin_port = htons(53);
	inet_pton(AF_INET, NP_POD_PROXY_IP, &pp.listen.sin_addr);
	int r = np_upstream_parse(upstream, &pp.upstream, &pp.upstream_len, err);
	if (r == 0)
		r = np_proxy_new(&pp, &x->proxy, err);
	if (r < 0) {
		np_pod_proxy_free(x);
		return r;
	}
	*out = x;
	return 0;
}

int np_pod_proxy_fd(const struct np_pod_proxy *x) { return np_proxy_fd(x->proxy); }

int np_pod_proxy_handle(struct np_pod_proxy *x, struct rung_err *err)
{
	return np_proxy_handle(x->proxy, err);
}

int np_pod_proxy_timeout_ms(const struct np_pod_proxy *x) { return np_proxy_timeout_ms(x->proxy); }

void np_pod_proxy_free(struct np_pod_proxy *x)
{
	if (!x)
		return;
	np_proxy_free(x->proxy);
	free(x->policy.entries);
	free(x);
}
