/* netpolicy/dns.c: a defensive DNS message parser and tiny reply builder (pure). */
#include <string.h>

#include "common/util.h"
#include "netpolicy/np-internal.h"

#define DNS_HDR 12
#define MAX_HOPS 32
#define CNAME_DEPTH 16
#define T_A 1
#define T_CNAME 5
#define T_AAAA 28
#define C_IN 1

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/*
 * Decode the name at *off into out (lower case, dot separated, no trailing dot). Follows
 * compression pointers, each strictly backwards and at most MAX_HOPS of them; *off is moved
 * past the name as it appears at its first position.
 */
static int read_name(const uint8_t *b, size_t len, size_t *off, char *out, size_t outlen,
		     const char **why)
{
	size_t p = *off, o = 0, end = 0;
	int hops = 0;
	bool jumped = false;
	for (;;) {
		if (p >= len) {
			*why = "name runs past the message";
			return -EBADMSG;
		}
		uint8_t l = b[p];
		if ((l & 0xc0) == 0xc0) {
			if (p + 1 >= len) {
				*why = "truncated compression pointer";
				return -EBADMSG;
			}
			size_t target = (size_t)(l & 0x3f) << 8 | b[p + 1];
			if (target >= p || ++hops > MAX_HOPS) {
				*why = "compression pointer loop";
				return -EBADMSG;
			}
			if (!jumped)
				end = p + 2;
			jumped = true;
			p = target;
			continue;
		}
		if (l & 0xc0) {
			*why = "bad label type";
			return -EBADMSG;
		}
		if (l == 0) {
			if (!jumped)
				end = p + 1;
			break;
		}
		if (p + 1 + l > len) {
			*why = "label runs past the message";
			return -EBADMSG;
		}
		if (o + l + 1 >= outlen || o + l > NP_NAME_MAX) {
			*why = "name too long";
			return -EBADMSG;
		}
		if (o)
			out[o++] = '.';
		for (size_t i = 0; i < l; i++) {
			uint8_t c = b[p + 1 + i];
			if (c <= 0x20 || c >= 0x7f || c == '.') {
				*why = "unprintable or '.' byte in a label";
				return -EBADMSG;
			}
			out[o++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
		}
		p += 1 + l;
	}
	out[o] = '\0';
	*off = end;
	return 0;
}

int np_dns_parse(const uint8_t *buf, size_t len, struct np_dns_msg *m, struct rung_err *err)
{
	const char *why = NULL;
	memset(m, 0, offsetof(struct np_dns_msg, answers));
	if (len < DNS_HDR) {
		why = "shorter than a header";
		goto bad;
	}
	m->id = rd16(buf);
	m->flags = rd16(buf + 2);
	m->qdcount = rd16(buf + 4);
	m->ancount = rd16(buf + 6);
	m->nscount = rd16(buf + 8);
	m->arcount = rd16(buf + 10);
	if (m->qdcount != 1) {
		why = "question count is not 1";
		goto bad;
	}
	size_t off = DNS_HDR;
	if (read_name(buf, len, &off, m->qname, sizeof(m->qname), &why) < 0)
		goto bad;
	if (off + 4 > len) {
		why = "truncated question";
		goto bad;
	}
	m->qtype = rd16(buf + off);
	m->qclass = rd16(buf + off + 2);
	off += 4;
	m->qend = off;
	if (!(m->flags & 0x8000))
		return 0; /* a query: the answer section is not ours to read */
	size_t n = m->ancount < NP_DNS_MAX_RR ? m->ancount : NP_DNS_MAX_RR;
	for (size_t i = 0; i < n; i++) {
		struct np_dns_rr *rr = &m->answers[i];
		memset(rr, 0, sizeof(*rr));
		if (read_name(buf, len, &off, rr->name, sizeof(rr->name), &why) < 0)
			goto bad;
		if (off + 10 > len) {
			why = "truncated resource record";
			goto bad;
		}
		rr->type = rd16(buf + off);
		rr->klass = rd16(buf + off + 2);
		rr->ttl = rd32(buf + off + 4);
		rr->rdlen = rd16(buf + off + 8);
		off += 10;
		if (off + rr->rdlen > len) {
			why = "rdata runs past the message";
			goto bad;
		}
		rr->rdoff = (uint16_t)off;
		if (rr->type == T_CNAME) {
			size_t t = off;
			if (read_name(buf, off + rr->rdlen, &t, rr->target, sizeof(rr->target),
				      &why) < 0)
				goto bad;
		}
		off += rr->rdlen;
		m->n_answers = i + 1;
	}
	return 0;
bad:
	return rung_err_set(err, EBADMSG, "dns message: %s", why);
}

size_t np_dns_answer_addrs(const uint8_t *buf, size_t len, const struct np_dns_msg *m, int family,
			   uint8_t (*addrs)[16], size_t max, uint32_t *min_ttl)
{
	const char *names[CNAME_DEPTH + 1];
	size_t nn = 0;
	names[nn++] = m->qname;
	/* Grow the chain of names that stand for qname: qname -> CNAME -> CNAME ... */
	for (size_t k = 0; k < nn && nn <= CNAME_DEPTH; k++)
		for (size_t i = 0; i < m->n_answers && nn <= CNAME_DEPTH; i++) {
			const struct np_dns_rr *rr = &m->answers[i];
			if (rr->type != T_CNAME || rr->klass != C_IN || strcmp(rr->name, names[k]))
				continue;
			bool seen = false;
			for (size_t j = 0; j < nn; j++)
				seen = seen || !strcmp(names[j], rr->target);
			if (!seen)
				names[nn++] = rr->target;
		}
	uint16_t want = family == 6 ? T_AAAA : T_A;
	size_t alen = family == 6 ? 16 : 4, cnt = 0;
	*min_ttl = UINT32_MAX;
	for (size_t i = 0; i < m->n_answers && cnt < max; i++) {
		const struct np_dns_rr *rr = &m->answers[i];
		if (rr->type != want || rr->klass != C_IN || rr->rdlen != alen ||
		    (size_t)rr->rdoff + alen > len)
			continue;
		bool ours = false;
		for (size_t j = 0; j < nn && !ours; j++)
			ours = !strcmp(rr->name, names[j]);
		if (!ours)
			continue;
		memset(addrs[cnt], 0, 16);
		memcpy(addrs[cnt], buf + rr->rdoff, alen);
		cnt++;
		if (rr->ttl < *min_ttl)
			*min_ttl = rr->ttl;
	}
	if (!cnt)
		*min_ttl = 0;
	return cnt;
}

int np_dns_reply_rcode(const uint8_t *query, size_t qlen, const struct np_dns_msg *q, int rcode,
		       uint8_t *out, size_t out_max)
{
	if (q->qend > qlen || q->qend > out_max || q->qend < DNS_HDR)
		return -EMSGSIZE;
	memcpy(out, query, q->qend);
	uint16_t fl = (uint16_t)(0x8000 | (q->flags & 0x7900) | 0x0080 | (rcode & 0xf));
	out[2] = (uint8_t)(fl >> 8);
	out[3] = (uint8_t)fl;
	out[4] = 0;
	out[5] = 1;
	memset(out + 6, 0, 6);
	return (int)q->qend;
}

/* Writes name (dotted, "" = root) uncompressed at out[*o]; false when it does not fit. */
static bool put_name(uint8_t *out, size_t *o, size_t max, const char *name)
{
	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);
		if (l == 0 || l > 63 || *o + 1 + l > max)
			return false;
		out[(*o)++] = (uint8_t)l;
		memcpy(out + *o, name, l);
		*o += l;
		name += l + (dot ? 1 : 0);
	}
	if (*o + 1 > max)
		return false;
	out[(*o)++] = 0;
	return true;
}

static bool put16(uint8_t *out, size_t *o, size_t max, uint16_t v)
{
	if (*o + 2 > max)
		return false;
	out[(*o)++] = (uint8_t)(v >> 8);
	out[(*o)++] = (uint8_t)v;
	return true;
}

int np_dns_reply_keep(const uint8_t *buf, size_t len, const struct np_dns_msg *m,
		      const bool *keep, uint8_t *out, size_t out_max)
{
	if (m->qend > len || m->qend > out_max || m->qend < DNS_HDR)
		return -EMSGSIZE;
	memcpy(out, buf, m->qend); /* header and the question exactly as they came */
	size_t o = m->qend;
	uint16_t kept = 0;
	for (size_t i = 0; i < m->n_answers; i++) {
		const struct np_dns_rr *rr = &m->answers[i];
		bool addr = (rr->type == T_A && rr->rdlen == 4) ||
			    (rr->type == T_AAAA && rr->rdlen == 16);
		if (!keep[i] || (!addr && rr->type != T_CNAME) ||
		    (size_t)rr->rdoff + rr->rdlen > len)
			continue;
		bool ok = put_name(out, &o, out_max, rr->name) && put16(out, &o, out_max, rr->type) &&
			  put16(out, &o, out_max, rr->klass) &&
			  put16(out, &o, out_max, (uint16_t)(rr->ttl >> 16)) &&
			  put16(out, &o, out_max, (uint16_t)rr->ttl);
		if (ok && addr) {
			ok = put16(out, &o, out_max, rr->rdlen) && o + rr->rdlen <= out_max;
			if (ok) {
				memcpy(out + o, buf + rr->rdoff, rr->rdlen);
				o += rr->rdlen;
			}
		} else if (ok) { /* CNAME: the target, uncompressed (its pointers are gone) */
			size_t at = o;
			ok = put16(out, &o, out_max, 0) && put_name(out, &o, out_max, rr->target);
			if (ok) {
				out[at] = (uint8_t)((o - at - 2) >> 8);
				out[at + 1] = (uint8_t)(o - at - 2);
			}
		}
		if (!ok)
			return -EMSGSIZE;
		kept++;
	}
	out[6] = (uint8_t)(kept >> 8);
	out[7] = (uint8_t)kept;
	memset(out + 8, 0, 4); /* no authority, no additional section */
	return (int)o;
}
