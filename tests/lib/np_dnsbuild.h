/* tests/lib/np_dnsbuild.h: a tiny DNS message builder shared by the netpolicy tests and bench. */
#ifndef RUNG_TESTS_LIB_NP_DNSBUILD_H
#define RUNG_TESTS_LIB_NP_DNSBUILD_H

#include <stdint.h>
#include <string.h>

struct dnsb {
	uint8_t b[1500];
	size_t n;
};

static inline void dnsb_u16(struct dnsb *d, uint16_t v)
{
	d->b[d->n++] = (uint8_t)(v >> 8);
	d->b[d->n++] = (uint8_t)v;
}

static inline void dnsb_u32(struct dnsb *d, uint32_t v)
{
	dnsb_u16(d, (uint16_t)(v >> 16));
	dnsb_u16(d, (uint16_t)v);
}

static inline void dnsb_name(struct dnsb *d, const char *name)
{
	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);
		d->b[d->n++] = (uint8_t)l;
		memcpy(d->b + d->n, name, l);
		d->n += l;
		name += l + (dot ? 1 : 0);
	}
	d->b[d->n++] = 0;
}

/* Header + one question. flags: 0x0100 for a query (RD), 0x8180 | rcode for a response. */
static inline void dnsb_start(struct dnsb *d, uint16_t id, uint16_t flags, const char *qname,
			      uint16_t qtype, uint16_t ancount)
{
	d->n = 0;
	dnsb_u16(d, id);
	dnsb_u16(d, flags);
	dnsb_u16(d, 1);
	dnsb_u16(d, ancount);
	dnsb_u16(d, 0);
	dnsb_u16(d, 0);
	dnsb_name(d, qname);
	dnsb_u16(d, qtype);
	dnsb_u16(d, 1);
}

/* An answer whose owner is the question's name (pointer 0xc00c) or an explicit name. */
static inline void dnsb_rr_a(struct dnsb *d, const char *owner, const uint8_t ip[4], uint32_t ttl)
{
	if (owner)
		dnsb_name(d, owner);
	else
		dnsb_u16(d, 0xc00c);
	dnsb_u16(d, 1);
	dnsb_u16(d, 1);
	dnsb_u32(d, ttl);
	dnsb_u16(d, 4);
	memcpy(d->b + d->n, ip, 4);
	d->n += 4;
}

static inline void dnsb_rr_cname(struct dnsb *d, const char *owner, const char *target,
				 uint32_t ttl)
{
	if (owner)
		dnsb_name(d, owner);
	else
		dnsb_u16(d, 0xc00c);
	dnsb_u16(d, 5);
	dnsb_u16(d, 1);
	dnsb_u32(d, ttl);
	size_t lenpos = d->n;
	dnsb_u16(d, 0);
	size_t start = d->n;
	dnsb_name(d, target);
	uint16_t l = (uint16_t)(d->n - start);
	d->b[lenpos] = (uint8_t)(l >> 8);
	d->b[lenpos + 1] = (uint8_t)l;
}

#endif
