/*
 * netpolicy/addr.c: which addresses a DNS answer may open.
 *
 * A name on the allowlist is a promise about a name, not about where it points: its DNS may be
 * controlled by someone else (a "*." entry with user-made subdomains, a CNAME, a rebinding
 * answer). So an answer never opens what is not public internet: private, shared, special,
 * reserved and cloud-internal ranges, and the host's own addresses. Those are reachable only
 * through explicit CIDR entries, which are not subject to this.
 */
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "netpolicy/np-internal.h"

struct range4 {
	uint8_t net[4];
	uint8_t len;
};

static const struct range4 never4[] = {
	{{0, 0, 0, 0}, 8},	    /* "this network" */
	{{10, 0, 0, 0}, 8},	    /* RFC 1918 */
	{{100, 64, 0, 0}, 10},	    /* shared address space (CGNAT; 100.100.100.200 metadata) */
	{{127, 0, 0, 0}, 8},	    /* loopback */
	{{168, 63, 129, 16}, 32},   /* Azure's host endpoint (wireserver) */
	{{169, 254, 0, 0}, 16},	    /* link-local (169.254.169.254 metadata) */
	{{172, 16, 0, 0}, 12},	    /* RFC 1918 */
	{{192, 0, 0, 0}, 24},	    /* IETF protocol assignments (192.0.0.192 metadata) */
	{{192, 168, 0, 0}, 16},	    /* RFC 1918 */
	{{198, 18, 0, 0}, 15},	    /* benchmarking */
	{{224, 0, 0, 0}, 3},	    /* multicast, 240/4 reserved, 255.255.255.255 */
};

static uint32_t h32(const uint8_t a[4])
{
	return (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | (uint32_t)a[2] << 8 | a[3];
}

bool np_addr_dns_openable(const uint8_t a[4], uint32_t pool_base, uint32_t pool_mask)
{
	uint32_t h = h32(a);
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(never4); i++) {
		uint32_t mask = never4[i].len ? ~0u << (32 - never4[i].len) : 0;
		if ((h & mask) == (h32(never4[i].net) & mask))
			return false;
	}
	return pool_mask == 0 || (h & pool_mask) != (pool_base & pool_mask);
}

bool np_addr6_dns_openable(const uint8_t a[16])
{
	static const uint8_t zero[16], mapped[12] = {[10] = 0xff, [11] = 0xff},
				       nat64[12] = {0, 0x64, 0xff, 0x9b};
	if (!memcmp(a, zero, 15)) /* :: and ::1 */
		return false;
	if (!memcmp(a, mapped, 12) || !memcmp(a, nat64, 12)) /* an IPv4 address inside */
		return np_addr_dns_openable(a + 12, 0, 0);
	if (a[0] == 0x20 && a[1] == 0x02) /* 6to4: 2002:V4ADDR::/48 */
		return np_addr_dns_openable(a + 2, 0, 0);
	if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) /* Teredo */
		return false;
	if (a[0] == 0x01 && a[1] == 0 && !memcmp(a + 2, zero, 6)) /* 100::/64 discard */
		return false;
	if ((a[0] & 0xfe) == 0xfc) /* fc00::/7 unique local (fd00:ec2::254 metadata) */
		return false;
	if (a[0] == 0xfe && (a[1] & 0x80)) /* fe80::/10 link-local, fec0::/10 site-local */
		return false;
	return a[0] != 0xff; /* multicast */
}

/* Appends addr (len bytes) to *arr (n used, cap allocated); false when out of memory. */
static bool push(void *arr, size_t *n, size_t *cap, const void *addr, size_t len)
{
	uint8_t **a = arr;
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		uint8_t *m = realloc(*a, c * len);
		if (!m)
			return false;
		*a = m;
		*cap = c;
	}
	memcpy(*a + *n * len, addr, len);
	(*n)++;
	return true;
}

int np_hostaddrs_refresh(struct np_hostaddrs *h, struct rung_err *err)
{
	uint64_t now = rung_now_ms();
	if (h->at_ms && now - h->at_ms < NP_HOSTADDRS_TTL_MS)
		return 0;
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) < 0)
		return rung_err_sys(err, errno, "getifaddrs (the host's own addresses)");
	h->n4 = h->n6 = 0;
	bool ok = true;
	for (struct ifaddrs *i = ifa; i && ok; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			ok = push(&h->a4, &h->n4, &h->cap4,
				  &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
		else if (i->ifa_addr->sa_family == AF_INET6)
			ok = push(&h->a6, &h->n6, &h->cap6,
				  &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
	}
	freeifaddrs(ifa);
	if (!ok) { /* cannot tell them all apart: open nothing rather than guess */
		h->at_ms = 0;
		return rung_err_set(err, ENOMEM, "out of memory (the host's own addresses)");
	}
	h->at_ms = now ? now : 1;
	return 0;
}

void np_hostaddrs_release(struct np_hostaddrs *h)
{
	free(h->a4);
	free(h->a6);
	memset(h, 0, sizeof(*h));
}

bool np_hostaddrs_has(const struct np_hostaddrs *h, int family, const uint8_t *a)
{
	if (family == 6) {
		for (size_t i = 0; i < h->n6; i++)
			if (!memcmp(h->a6[i], a, 16))
				return true;
		return false;
	}
	for (size_t i = 0; i < h->n4; i++)
		if (!memcmp(h->a4[i], a, 4))
			return true;
	return false;
}
