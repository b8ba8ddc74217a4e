/* fuzz/fuzz_dns.c: the DNS proxy's parser on hostile bytes (queries and upstream answers). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "netpolicy/np.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct np_dns_msg m;
	struct rung_err err;
	if (np_dns_parse(data, size, &m, &err) < 0)
		return 0;
	uint8_t addrs[8][16], out[512];
	uint32_t ttl;
	np_dns_answer_addrs(data, size, &m, 4, addrs, 8, &ttl);
	np_dns_answer_addrs(data, size, &m, 6, addrs, 8, &ttl);
	np_dns_reply_rcode(data, size, &m, 5, out, sizeof(out));
	bool any;
	uint16_t ports[4];
	size_t np;
	static const char *const items[] = {"example.org", "*.pypi.org:443"};
	static struct np_policy pol;
	if (!pol.n && np_policy_parse(items, 2, &pol, &err) < 0)
		abort();
	np_policy_match_name(&pol, m.qname, &any, ports, 4, &np);
	return 0;
}
