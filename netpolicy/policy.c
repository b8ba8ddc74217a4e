/* netpolicy/policy.c: egress_allow entries -> typed, validated structs (pure). */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "netpolicy/np-internal.h"

int np_id_check(const char *id, struct rung_err *err)
{
	size_t n = id ? strlen(id) : 0;
	if (n == 0 || n > 128)
		return rung_err_set(err, EINVAL, "sandbox id: must be 1..128 characters");
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!isalnum((unsigned char)c) && c != '.' && c != '_' && c != '-')
			return rung_err_set(err, EINVAL, "sandbox id \"%s\": bad character", id);
	}
	return 0;
}

/* Port after ':'; strict decimal 1..65535. */
static int parse_port(const char *s, uint16_t *port)
{
	uint64_t v;
	if (strlen(s) > 5 || rung_parse_u64(s, &v) < 0 || v == 0 || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

/* "ADDR" or "ADDR/LEN" of one family; host bits must be zero. */
static int parse_cidr(const char *s, int family, struct np_entry *e, const char **why)
{
	char buf[64];
	if (strlen(s) >= sizeof(buf)) {
		*why = "address too long";
		return -EINVAL;
	}
	strcpy(buf, s);
	int maxlen = family == AF_INET ? 32 : 128;
	int plen = maxlen;
	char *slash = strchr(buf, '/');
	if (slash) {
		*slash = '\0';
		uint64_t v;
		if (strlen(slash + 1) > 3 || rung_parse_u64(slash + 1, &v) < 0 ||
		    v > (uint64_t)maxlen) {
			*why = "bad prefix length";
			return -EINVAL;
		}
		plen = (int)v;
	}
	uint8_t a[16] = {0};
	if (inet_pton(family, buf, a) != 1) {
		*why = family == AF_INET ? "bad IPv4 address" : "bad IPv6 address";
		return -EINVAL;
	}
	int nbytes = maxlen / 8;
	for (int bit = plen; bit < maxlen; bit++)
		if (a[bit / 8] & (0x80 >> (bit % 8))) {
			*why = "host bits set after the prefix length";
			return -EINVAL;
		}
	memset(e->addr, 0, sizeof(e->addr));
	memcpy(e->addr, a, (size_t)nbytes);
	e->prefix = (uint8_t)plen;
	e->kind = family == AF_INET ? NP_ENTRY_CIDR4 : NP_ENTRY_CIDR6;
	return 0;
}

/* Host name: labels of [a-z0-9_-] (1..63, no leading/trailing '-'), total <= 253. */
int np_name_normalize(const char *in, char *out, size_t outlen, const char **why)
{
	size_t n = strlen(in);
	if (n > 0 && in[n - 1] == '.')
		n--;
	if (n == 0) {
		*why = "empty host name";
		return -EINVAL;
	}
	if (n > NP_NAME_MAX || n >= outlen) {
		*why = "host name longer than 253 characters";
		return -EINVAL;
	}
	size_t lab = 0, lab_start = 0;
	bool all_digits = true;
	for (size_t i = 0; i <= n; i++) {
		char c = i < n ? (char)tolower((unsigned char)in[i]) : '.';
		if (c == '.') {
			if (lab == 0) {
				*why = "empty label in host name";
				return -EINVAL;
			}
			if (out[lab_start] == '-' || out[i - 1] == '-') {
				*why = "label starts or ends with '-'";
				return -EINVAL;
			}
			if (i < n) {
				lab = 0;
				lab_start = i + 1;
				all_digits = true;
			}
		} else if (isalnum((unsigned char)c) || c == '-' || c == '_') {
			if (++lab > 63) {
				*why = "label longer than 63 characters";
				return -EINVAL;
			}
			if (!isdigit((unsigned char)c))
				all_digits = false;
		} else {
			*why = c == '*' ? "'*' is only allowed as a leading \"*.\""
					: "bad character in host name";
			return -EINVAL;
		}
		if (i < n)
			out[i] = c;
	}
	out[n] = '\0';
	if (all_digits) {
		*why = "numeric top-level label (not an address, not a name)";
		return -EINVAL;
	}
	return 0;
}

int np_entry_parse(const char *s, struct np_entry *out, struct rung_err *err)
{
	if (!s)
		return rung_err_set(err, EINVAL, "egress_allow: null entry");
	if (strlen(s) > 300)
		return rung_err_set(err, EINVAL, "egress_allow entry \"%.40s...\": too long", s);
	char buf[304];
	strcpy(buf, s);
	struct np_entry e = {0};
	const char *why = NULL;
	char *host = buf, *port = NULL;

	if (buf[0] == '[') { /* [v6]:port or [v6] */
		char *close = strchr(buf, ']');
		if (!close) {
			why = "missing ']'";
			goto bad;
		}
		*close = '\0';
		host = buf + 1;
		if (close[1] == ':')
			port = close + 2;
		else if (close[1] != '\0') {
			why = "junk after ']'";
			goto bad;
		}
		if (parse_cidr(host, AF_INET6, &e, &why) < 0)
			goto bad;
	} else if (strchr(buf, ':') && strchr(buf, ':') != strrchr(buf, ':')) {
		/* Bare IPv6 (two or more colons): no port possible. */
		if (parse_cidr(buf, AF_INET6, &e, &why) < 0)
			goto bad;
	} else {
		char *colon = strchr(buf, ':');
		if (colon) {
			*colon = '\0';
			port = colon + 1;
		}
		bool looks_v4 = host[0] && strspn(host, "0123456789./") == strlen(host);
		if (looks_v4) {
			if (parse_cidr(host, AF_INET, &e, &why) < 0)
				goto bad;
		} else {
			if (!strncmp(host, "*.", 2)) {
				e.kind = NP_ENTRY_SUFFIX;
				host += 2;
			} else {
				e.kind = NP_ENTRY_HOST;
			}
			if (np_name_normalize(host, e.name, sizeof(e.name), &why) < 0)
				goto bad;
		}
	}
	if (port && parse_port(port, &e.port) < 0) {
		why = "port must be 1..65535";
		goto bad;
	}
	*out = e;
	return 0;
bad:
	return rung_err_set(err, EINVAL, "egress_allow entry \"%s\": %s", s, why);
}

static bool entry_eq(const struct np_entry *a, const struct np_entry *b)
{
	return a->kind == b->kind && a->port == b->port && a->prefix == b->prefix &&
	       !memcmp(a->addr, b->addr, sizeof(a->addr)) && !strcmp(a->name, b->name);
}

int np_policy_parse(const char *const *items, size_t n, struct np_policy *out, struct rung_err *err)
{
	out->n = 0;
	out->entries = NULL;
	if (n > NP_MAX_ENTRIES)
		return rung_err_set(err, E2BIG, "egress_allow: %zu entries (at most %d)", n,
				    NP_MAX_ENTRIES);
	if (n == 0)
		return 0;
	cleanup_free struct np_entry *v = calloc(n, sizeof(*v));
	if (!v)
		return rung_err_set(err, ENOMEM, "out of memory");
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		struct np_entry e;
		int r = np_entry_parse(items[i], &e, err);
		if (r < 0)
			return r;
		bool dup = false;
		for (size_t j = 0; j < k && !dup; j++)
			dup = entry_eq(&v[j], &e);
		if (!dup)
			v[k++] = e;
	}
	out->n = k;
	out->entries = rung_steal_ptr(&v);
	return 0;
}

void np_policy_release(struct np_policy *p)
{
	if (!p)
		return;
	free(p->entries);
	p->entries = NULL;
	p->n = 0;
}

void np_entry_format(const struct np_entry *e, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "", port[8] = "";
	if (e->port)
		snprintf(port, sizeof(port), ":%u", e->port);
	switch (e->kind) {
	case NP_ENTRY_HOST:
		snprintf(buf, len, "%s%s", e->name, port);
		break;
	case NP_ENTRY_SUFFIX:
		snprintf(buf, len, "*.%s%s", e->name, port);
		break;
	case NP_ENTRY_CIDR4:
		inet_ntop(AF_INET, e->addr, a, sizeof(a));
		snprintf(buf, len, "%s/%u%s", a, e->prefix, port);
		break;
	case NP_ENTRY_CIDR6:
		inet_ntop(AF_INET6, e->addr, a, sizeof(a));
		if (e->port)
			snprintf(buf, len, "[%s/%u]%s", a, e->prefix, port);
		else
			snprintf(buf, len, "%s/%u", a, e->prefix);
		break;
	}
}

int np_policy_match_name(const struct np_policy *p, const char *name, bool *any_port,
			 uint16_t *ports, size_t max_ports, size_t *n_ports)
{
	char norm[NP_NAME_MAX + 1];
	const char *why;
	*any_port = false;
	*n_ports = 0;
	if (!p || np_name_normalize(name, norm, sizeof(norm), &why) < 0)
		return 0;
	size_t nl = strlen(norm);
	int match = 0;
	for (size_t i = 0; i < p->n; i++) {
		const struct np_entry *e = &p->entries[i];
		bool m = false;
		if (e->kind == NP_ENTRY_HOST) {
			m = !strcmp(norm, e->name);
		} else if (e->kind == NP_ENTRY_SUFFIX) {
			size_t el = strlen(e->name);
			m = nl > el + 1 && norm[nl - el - 1] == '.' &&
			    !strcmp(norm + nl - el, e->name);
		}
		if (!m)
			continue;
		match = 1;
		if (!e->port) {
			*any_port = true;
			continue;
		}
		bool seen = false;
		for (size_t j = 0; j < *n_ports; j++)
			seen = seen || ports[j] == e->port;
		if (!seen && *n_ports < max_ports)
			ports[(*n_ports)++] = e->port;
	}
	return match;
}

static const char *const kind_names[] = {
    [NP_ENTRY_HOST] = "host",
    [NP_ENTRY_SUFFIX] = "suffix",
    [NP_ENTRY_CIDR4] = "cidr4",
    [NP_ENTRY_CIDR6] = "cidr6",
};

bool np_policy_open(const struct np_policy *p)
{
	for (size_t i = 0; p && i < p->n; i++)
		if (p->entries[i].kind == NP_ENTRY_CIDR4 && p->entries[i].prefix == 0 &&
		    p->entries[i].port == 0)
			return true;
	return false;
}

json_t *np_policy_describe(const struct np_policy *p)
{
	size_t n = p ? p->n : 0;
	json_t *rules = json_array();
	for (size_t i = 0; i < n; i++) {
		const struct np_entry *e = &p->entries[i];
		char txt[320];
		np_entry_format(e, txt, sizeof(txt));
		const char *how = e->kind == NP_ENTRY_HOST ? "addresses the DNS proxy resolves for "
							     "this exact name, for their TTL"
				  : e->kind == NP_ENTRY_SUFFIX
				      ? "addresses the DNS proxy resolves for any strict "
					"subdomain, for their TTL"
				  : e->kind == NP_ENTRY_CIDR4 ? "static IPv4 set"
							      : "nothing: IPv6 is disabled in the "
								"sandbox (recorded, unreachable)";
		json_array_append_new(rules, json_pack("{s:s, s:s, s:s, s:s, s:i}", "entry", txt,
						       "kind", kind_names[e->kind], "protocols",
						       e->port ? "tcp,udp" : "any", "opens", how,
						       "port", (int)e->port));
	}
	return json_pack(
	    "{s:b, s:s, s:s, s:s, s:s, s:s, s:o}", "can_exfiltrate", n > 0, "network",
	    n ? "allowlist" : "none", "default", "deny (tcp: reset, other: icmp prohibited)",
	    "ipv6", n ? "disabled in the sandbox; dropped at the host" : "none", "dns",
	    n ? "only via rung's proxy on the gateway; unlisted names REFUSED" : "none",
	    "enforced_by",
	    n ? "nftables table in the host netns (forward+input hooks)"
	      : "no "
		"interfaces but loopback",
	    "rules", rules);
}
