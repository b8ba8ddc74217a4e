/*
 * common/proto-restore.c: RESTORED, the host's first message to the agent of a VM restored
 * from a snapshot (a clone of a template, or a resume from disk; docs/snapshots.md): fresh
 * randomness, the wall clock, the hostname, eth0's address and the DNS proxy's. Decoded as hostile input:
 * every field exactly once (the network's two together), exact lengths, ranges checked.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto.h"

#define WALL_MIN_NS (1577836800ull * 1000000000ull) /* 2020-01-01: a clock before is wrong */

bool rung_hostname_valid(const char *h)
{
	size_t n = strlen(h);
	if (n == 0 || n > RUNG_RESTORED_HOST_MAX || h[0] == '-' || h[0] == '.')
		return false;
	for (const char *p = h; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
			return false;
	return true;
}

static bool ipv4_valid(const char *s)
{
	struct in_addr a;
	return inet_pton(AF_INET, s, &a) == 1;
}

int rung_proto_restored_encode(const struct rung_proto_restored *x, struct rung_buf *b)
{
	rung_buf_put_bytes(b, RUNG_TAG_SEED, x->seed, sizeof(x->seed));
	rung_buf_put_u64(b, RUNG_TAG_WALL_NS, x->wall_ns);
	rung_buf_put_str(b, RUNG_TAG_HOSTNAME, x->hostname);
	if (x->has_net) {
		char a[24];
		snprintf(a, sizeof(a), "%s/%u", x->addr, x->prefix);
		rung_buf_put_str(b, RUNG_TAG_NET_ADDR, a);
		rung_buf_put_str(b, RUNG_TAG_NET_GW, x->gw);
		if (x->dns[0])
			rung_buf_put_str(b, RUNG_TAG_NET_DNS, x->dns);
	}
	return b->oom ? -ENOMEM : 0;
}

/* A short string field copied into out (at most cap-1 bytes, NUL-free). */
static int short_str(const uint8_t *v, uint32_t l, char *out, size_t cap, const char *what,
		     struct rung_err *err)
{
	if (l == 0 || l >= cap || memchr(v, 0, l))
		return rung_err_set(err, EPROTO, "RESTORED: %s of %u bytes (1..%zu, no NUL)", what,
				    l, cap - 1);
	memcpy(out, v, l);
	out[l] = '\0';
	return 0;
}

static int net_addr(const uint8_t *v, uint32_t l, struct rung_proto_restored *x,
		    struct rung_err *err)
{
	char s[24];
	int r = short_str(v, l, s, sizeof(s), "net address", err);
	if (r < 0)
		return r;
	char *slash = strchr(s, '/'), *end = NULL;
	unsigned long pfx = slash ? strtoul(slash + 1, &end, 10) : 0;
	if (!slash || !end || *end || end == slash + 1 || pfx < 1 || pfx > 32)
		return rung_err_set(err, EPROTO, "RESTORED: net address '%s' is not A.B.C.D/1-32", s);
	*slash = '\0';
	if (!ipv4_valid(s))
		return rung_err_set(err, EPROTO, "RESTORED: net address '%s' is not IPv4", s);
	memcpy(x->addr, s, strlen(s) + 1); /* inet_pton took it: at most 15 bytes */
	x->prefix = (unsigned)pfx;
	return 0;
}

static int restored_field(struct rung_proto_restored *x, uint16_t tag, const uint8_t *v,
			  uint32_t l, unsigned *seen, struct rung_err *err)
{
	unsigned bit = tag >= RUNG_TAG_SEED && tag <= RUNG_TAG_NET_DNS ? 1u << (tag - RUNG_TAG_SEED)
								       : 0;
	if (!bit)
		return rung_err_set(err, EPROTO, "RESTORED: unexpected field %u", tag);
	if (*seen & bit)
		return rung_err_set(err, EPROTO, "RESTORED: field %u given twice", tag);
	*seen |= bit;
	int r;
	switch (tag) {
	case RUNG_TAG_SEED:
		if (l != RUNG_RESTORED_SEED)
			return rung_err_set(err, EPROTO, "RESTORED: seed of %u bytes (want %d)", l,
					    RUNG_RESTORED_SEED);
		memcpy(x->seed, v, l);
		return 0;
	case RUNG_TAG_WALL_NS:
		if ((r = rung_tlv_u64(v, l, &x->wall_ns, err)) < 0)
			return r;
		if (x->wall_ns < WALL_MIN_NS)
			return rung_err_set(err, EPROTO, "RESTORED: wall clock %llu ns is before 2020",
					    (unsigned long long)x->wall_ns);
		return 0;
	case RUNG_TAG_HOSTNAME:
		if ((r = short_str(v, l, x->hostname, sizeof(x->hostname), "hostname", err)) < 0)
			return r;
		if (!rung_hostname_valid(x->hostname))
			return rung_err_set(err, EPROTO, "RESTORED: hostname '%s' is not 1-64 of "
					    "[A-Za-z0-9.-]", x->hostname);
		return 0;
	case RUNG_TAG_NET_ADDR:
		return net_addr(v, l, x, err);
	case RUNG_TAG_NET_GW:
		if ((r = short_str(v, l, x->gw, sizeof(x->gw), "gateway", err)) < 0)
			return r;
		if (!ipv4_valid(x->gw))
			return rung_err_set(err, EPROTO, "RESTORED: gateway '%s' is not IPv4", x->gw);
		return 0;
	default: /* RUNG_TAG_NET_DNS */
		if ((r = short_str(v, l, x->dns, sizeof(x->dns), "dns proxy", err)) < 0)
			return r;
		if (!ipv4_valid(x->dns))
			return rung_err_set(err, EPROTO, "RESTORED: dns proxy '%s' is not IPv4", x->dns);
		return 0;
	}
}

int rung_proto_restored_decode(const uint8_t *p, uint32_t len, struct rung_proto_restored *x,
			       struct rung_err *err)
{
	memset(x, 0, sizeof(*x));
	struct rung_tlv_iter it;
	rung_tlv_init(&it, p, len);
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	unsigned seen = 0;
	int r;
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0)
		if ((r = restored_field(x, tag, v, l, &seen, err)) < 0)
			return r;
	if (r < 0)
		return r;
	const unsigned need = 1u << 0 | 1u << 1 | 1u << 2, net = 1u << 3 | 1u << 4;
	if ((seen & need) != need)
		return rung_err_set(err, EPROTO, "RESTORED: seed, wall clock and hostname are "
				    "required");
	if ((seen & net) && (seen & net) != net)
		return rung_err_set(err, EPROTO, "RESTORED: net address and gateway go together");
	if ((seen & 1u << 5) && !(seen & net))
		return rung_err_set(err, EPROTO, "RESTORED: a dns proxy needs the net address");
	x->has_net = (seen & net) == net;
	return 0;
}
