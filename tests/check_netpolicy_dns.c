/* Pure tests of the DNS parser the proxy relies on (hostile input, compression, CNAME chains). */
#include <check.h>
#include <string.h>

#include "netpolicy/np.h"
#include "tests/lib/np_dnsbuild.h"
#include "tests/lib/testutil.h"

static struct np_dns_msg m;

START_TEST(test_query)
{
	struct dnsb d;
	dnsb_start(&d, 0x1234, 0x0100, "WWW.Example.org", 1, 0);
	struct rung_err err = {0};
	ck_assert_int_eq(np_dns_parse(d.b, d.n, &m, &err), 0);
	ck_assert_uint_eq(m.id, 0x1234);
	ck_assert_str_eq(m.qname, "www.example.org");
	ck_assert_uint_eq(m.qtype, 1);
	ck_assert_uint_eq(m.qend, d.n);
	uint8_t out[512];
	int n = np_dns_reply_rcode(d.b, d.n, &m, 5, out, sizeof(out));
	ck_assert_int_eq(n, (int)d.n);
	ck_assert_uint_eq(out[2], 0x81); /* QR + RD */
	ck_assert_uint_eq(out[3] & 0xf, 5);
	ck_assert_uint_eq(out[7], 0); /* no answers */
}
END_TEST

START_TEST(test_answers_and_cname_chain)
{
	static const uint8_t ip1[4] = {198, 18, 0, 10}, ip2[4] = {198, 18, 0, 11},
			     ip3[4] = {198, 18, 0, 12};
	struct dnsb d;
	dnsb_start(&d, 7, 0x8180, "a.example.org", 1, 4);
	dnsb_rr_cname(&d, NULL, "cdn.other.net", 300);
	dnsb_rr_a(&d, "cdn.other.net", ip1, 120);
	dnsb_rr_a(&d, NULL, ip2, 60);
	dnsb_rr_a(&d, "unrelated.evil.net", ip3, 5); /* not part of the chain: ignored */
	struct rung_err err = {0};
	ck_assert_int_eq(np_dns_parse(d.b, d.n, &m, &err), 0);
	ck_assert_uint_eq(m.n_answers, 4);
	ck_assert_str_eq(m.answers[0].target, "cdn.other.net");
	uint8_t addrs[8][16];
	uint32_t ttl;
	size_t n = np_dns_answer_addrs(d.b, d.n, &m, 4, addrs, 8, &ttl);
	ck_assert_uint_eq(n, 2);
	ck_assert(!memcmp(addrs[0], ip1, 4) && !memcmp(addrs[1], ip2, 4));
	ck_assert_uint_eq(ttl, 60);
	ck_assert_uint_eq(np_dns_answer_addrs(d.b, d.n, &m, 6, addrs, 8, &ttl), 0);
}
END_TEST

/* The proxy's rebuilt reply: the kept records only, names uncompressed, still parseable. */
START_TEST(test_reply_keep)
{
	static const uint8_t pub[4] = {198, 51, 100, 10}, priv[4] = {10, 1, 2, 3};
	struct dnsb d;
	dnsb_start(&d, 9, 0x8180, "A.Example.org", 1, 4);
	dnsb_rr_cname(&d, NULL, "cdn.other.net", 300);
	dnsb_rr_a(&d, "cdn.other.net", priv, 120);
	dnsb_rr_a(&d, "cdn.other.net", pub, 60);
	dnsb_rr_a(&d, NULL, priv, 60);
	struct rung_err err = {0};
	ck_assert_int_eq(np_dns_parse(d.b, d.n, &m, &err), 0);
	bool keep[4] = {true, false, true, false};
	uint8_t out[1500];
	int n = np_dns_reply_keep(d.b, d.n, &m, keep, out, sizeof(out));
	ck_assert_int_gt(n, 0);
	ck_assert(!memcmp(out + 12, d.b + 12, m.qend - 12)); /* the question as it came */
	ck_assert_uint_eq(out[6] << 8 | out[7], 2);
	ck_assert_uint_eq(out[8] | out[9] | out[10] | out[11], 0);
	ck_assert_int_eq(np_dns_parse(out, (size_t)n, &m, &err), 0);
	ck_assert_uint_eq(m.n_answers, 2);
	ck_assert_str_eq(m.qname, "a.example.org");
	ck_assert_str_eq(m.answers[0].target, "cdn.other.net");
	ck_assert_uint_eq(m.answers[0].ttl, 300);
	uint8_t addrs[8][16];
	uint32_t ttl;
	ck_assert_uint_eq(np_dns_answer_addrs(out, (size_t)n, &m, 4, addrs, 8, &ttl), 1);
	ck_assert(!memcmp(addrs[0], pub, 4));
	ck_assert_uint_eq(ttl, 60);
	/* too small a buffer: refused, never truncated */
	ck_assert_int_eq(np_dns_reply_keep(d.b, d.n, &m, keep, out, m.qend + 4), -EMSGSIZE);
}
END_TEST

START_TEST(test_hostile)
{
	struct rung_err err = {0};
	struct dnsb d = {0};
	/* too short */
	ck_assert_int_eq(np_dns_parse(d.b, 5, &m, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "shorter than a header"));
	/* two questions */
	dnsb_start(&d, 1, 0x0100, "a.org", 1, 0);
	d.b[5] = 2;
	ck_assert_int_eq(np_dns_parse(d.b, d.n, &m, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "question count"));
	/* a compression pointer to itself */
	memset(&d, 0, sizeof(d));
	d.n = 12;
	d.b[5] = 1;
	d.b[12] = 0xc0;
	d.b[13] = 12;
	d.n = 18;
	ck_assert_int_eq(np_dns_parse(d.b, d.n, &m, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "compression pointer loop"));
	/* a forward pointer */
	d.b[13] = 14;
	ck_assert_int_eq(np_dns_parse(d.b, d.n, &m, &err), -EBADMSG);
	/* a label running past the end */
	d.b[12] = 40;
	ck_assert_int_eq(np_dns_parse(d.b, d.n, &m, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "label runs past"));
	/* a dot inside a label would fake a name */
	dnsb_start(&d, 1, 0x0100, "x", 1, 0);
	d.n = 12;
	d.b[d.n++] = 11;
	memcpy(d.b + d.n, "example.org", 11);
	d.n += 11;
	d.b[d.n++] = 0;
	dnsb_u16(&d, 1);
	dnsb_u16(&d, 1);
	ck_assert_int_eq(np_dns_parse(d.b, d.n, &m, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "'.' byte"));
	/* answer count lies: truncated record */
	static const uint8_t ip[4] = {1, 2, 3, 4};
	dnsb_start(&d, 1, 0x8180, "a.org", 1, 2);
	dnsb_rr_a(&d, NULL, ip, 10);
	ck_assert_int_eq(np_dns_parse(d.b, d.n, &m, &err), -EBADMSG);
	/* rdlength past the end */
	dnsb_start(&d, 1, 0x8180, "a.org", 1, 1);
	dnsb_rr_a(&d, NULL, ip, 10);
	d.b[d.n - 5] = 200;
	ck_assert_int_eq(np_dns_parse(d.b, d.n, &m, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "rdata runs past"));
	/* an A record with a wrong rdlength is parsed but never used as an address */
	dnsb_start(&d, 1, 0x8180, "a.org", 1, 1);
	dnsb_rr_a(&d, NULL, ip, 10);
	d.b[d.n - 5] = 3;
	d.n -= 1;
	ck_assert_int_eq(np_dns_parse(d.b, d.n, &m, &err), 0);
	uint8_t addrs[4][16];
	uint32_t ttl;
	ck_assert_uint_eq(np_dns_answer_addrs(d.b, d.n, &m, 4, addrs, 4, &ttl), 0);
}
END_TEST

Suite *netpolicy_dns_suite(void)
{
	Suite *s = suite_create("netpolicy_dns");
	TCase *tc = tcase_create("pure");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_query);
	tcase_add_test(tc, test_answers_and_cname_chain);
	tcase_add_test(tc, test_reply_keep);
	tcase_add_test(tc, test_hostile);
	suite_add_tcase(s, tc);
	return s;
}
