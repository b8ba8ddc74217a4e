/*
 * tests/check_common_restored.c: RESTORED (common/proto-restore.c), the host's fix-ups to a
 * restored VM's agent, decoded as hostile input: a round trip, then every malformation the
 * decoder must refuse, each naming what is wrong.
 */
#include <check.h>
#include <string.h>

#include "common/proto.h"

static void good(struct rung_proto_restored *x, bool net)
{
	memset(x, 0, sizeof(*x));
	for (int i = 0; i < RUNG_RESTORED_SEED; i++)
		x->seed[i] = (uint8_t)(i * 7 + 1);
	x->wall_ns = 1764662400ull * 1000000000ull + 123;
	strcpy(x->hostname, "rung-0123456789ab");
	if (net) {
		x->has_net = true;
		strcpy(x->addr, "10.200.0.2");
		strcpy(x->gw, "10.200.0.1");
		x->prefix = 30;
		strcpy(x->dns, "10.200.0.1");
	}
}

START_TEST(test_round_trip)
{
	for (int net = 0; net < 2; net++) {
		struct rung_proto_restored a, b;
		struct rung_buf buf = {0};
		struct rung_err err = {0};
		good(&a, net);
		ck_assert_int_eq(rung_proto_restored_encode(&a, &buf), 0);
		ck_assert_msg(rung_proto_restored_decode(buf.data, (uint32_t)buf.len, &b, &err) == 0,
			      "%s", err.msg);
		ck_assert(!memcmp(a.seed, b.seed, sizeof(a.seed)));
		ck_assert_uint_eq(a.wall_ns, b.wall_ns);
		ck_assert_str_eq(a.hostname, b.hostname);
		ck_assert_int_eq(b.has_net, net);
		if (net) {
			ck_assert_str_eq(b.addr, "10.200.0.2");
			ck_assert_str_eq(b.gw, "10.200.0.1");
			ck_assert_uint_eq(b.prefix, 30);
			ck_assert_str_eq(b.dns, "10.200.0.1");
		}
		ck_assert_str_eq(b.dns, net ? "10.200.0.1" : "");
		rung_buf_release(&buf);
	}
}
END_TEST

/* A payload of the good fields, with one field replaced or added. */
static int decode_with(uint16_t tag, const void *v, size_t len, bool replace, struct rung_err *err)
{
	struct rung_proto_restored a, b;
	good(&a, false);
	struct rung_buf buf = {0};
	uint8_t seed[RUNG_RESTORED_SEED];
	memcpy(seed, a.seed, sizeof(seed));
	if (!(replace && tag == RUNG_TAG_SEED))
		rung_buf_put_bytes(&buf, RUNG_TAG_SEED, seed, sizeof(seed));
	if (!(replace && tag == RUNG_TAG_WALL_NS))
		rung_buf_put_u64(&buf, RUNG_TAG_WALL_NS, a.wall_ns);
	if (!(replace && tag == RUNG_TAG_HOSTNAME))
		rung_buf_put_str(&buf, RUNG_TAG_HOSTNAME, a.hostname);
	if (v)
		rung_buf_put_bytes(&buf, tag, v, len);
	int r = rung_proto_restored_decode(buf.data, (uint32_t)buf.len, &b, err);
	rung_buf_release(&buf);
	return r;
}

START_TEST(test_malformed)
{
	struct rung_err err = {0};
	uint8_t seed[RUNG_RESTORED_SEED + 1] = {0}, w[8] = {0};
	/* the seed: exactly 64 bytes, once */
	ck_assert_int_eq(decode_with(RUNG_TAG_SEED, seed, 63, true, &err), -EPROTO);
	ck_assert_msg(strstr(err.msg, "seed of 63 bytes"), "%s", err.msg);
	ck_assert_int_eq(decode_with(RUNG_TAG_SEED, seed, 65, true, &err), -EPROTO);
	ck_assert_int_eq(decode_with(RUNG_TAG_SEED, seed, 64, false, &err), -EPROTO);
	ck_assert_msg(strstr(err.msg, "given twice"), "%s", err.msg);
	/* missing: each of the three */
	ck_assert_int_eq(decode_with(RUNG_TAG_SEED, NULL, 0, true, &err), -EPROTO);
	ck_assert_msg(strstr(err.msg, "required"), "%s", err.msg);
	ck_assert_int_eq(decode_with(RUNG_TAG_HOSTNAME, NULL, 0, true, &err), -EPROTO);
	ck_assert_int_eq(decode_with(RUNG_TAG_WALL_NS, NULL, 0, true, &err), -EPROTO);
	/* the clock: 8 bytes, not before 2020 */
	ck_assert_int_eq(decode_with(RUNG_TAG_WALL_NS, w, 4, true, &err), -EPROTO);
	ck_assert_int_eq(decode_with(RUNG_TAG_WALL_NS, w, 8, true, &err), -EPROTO);
	ck_assert_msg(strstr(err.msg, "before 2020"), "%s", err.msg);
	/* hostnames */
	const char *bad_names[] = {"", "-x", ".x", "a b", "a/b", "a\nb",
				   "0123456789012345678901234567890123456789012345678901234567890123"
				   "4"};
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(*bad_names); i++)
		ck_assert_msg(decode_with(RUNG_TAG_HOSTNAME, bad_names[i], strlen(bad_names[i]),
					  true, &err) == -EPROTO,
			      "hostname '%s' accepted", bad_names[i]);
	ck_assert_int_eq(decode_with(RUNG_TAG_HOSTNAME, "a\0b", 3, true, &err), -EPROTO);
	/* the network: both or neither, IPv4, prefix 1..32 */
	ck_assert_int_eq(decode_with(RUNG_TAG_NET_ADDR, "10.0.0.2/30", 11, false, &err), -EPROTO);
	ck_assert_msg(strstr(err.msg, "go together"), "%s", err.msg);
	ck_assert_int_eq(decode_with(RUNG_TAG_NET_GW, "10.0.0.1", 8, false, &err), -EPROTO);
	/* an unknown tag, and one of another message */
	ck_assert_int_eq(decode_with(99, "x", 1, false, &err), -EPROTO);
	ck_assert_msg(strstr(err.msg, "unexpected field 99"), "%s", err.msg);
	ck_assert_int_eq(decode_with(RUNG_TAG_PATH, "/x", 2, false, &err), -EPROTO);
	/* a lying field length */
	uint8_t raw[] = {0, RUNG_TAG_SEED, 0, 0, 0x10, 0, 1, 2};
	struct rung_proto_restored x;
	ck_assert_int_eq(rung_proto_restored_decode(raw, sizeof(raw), &x, &err), -EPROTO);
}
END_TEST

/* Net fields checked one by one (both given, one of them bad). */
START_TEST(test_bad_net)
{
	const char *addrs[] = {"10.0.0.2", "10.0.0.2/0", "10.0.0.2/33", "10.0.0.2/", "::1/64",
			       "10.0.0.256/30", "10.0.0.2/30x"};
	for (size_t i = 0; i < sizeof(addrs) / sizeof(*addrs); i++) {
		struct rung_proto_restored a, b;
		struct rung_err err = {0};
		struct rung_buf buf = {0};
		good(&a, false);
		rung_proto_restored_encode(&a, &buf);
		rung_buf_put_str(&buf, RUNG_TAG_NET_ADDR, addrs[i]);
		rung_buf_put_str(&buf, RUNG_TAG_NET_GW, "10.0.0.1");
		ck_assert_msg(rung_proto_restored_decode(buf.data, (uint32_t)buf.len, &b, &err) ==
				  -EPROTO, "address '%s' accepted", addrs[i]);
		rung_buf_release(&buf);
		good(&a, false);
		rung_proto_restored_encode(&a, &buf);
		rung_buf_put_str(&buf, RUNG_TAG_NET_ADDR, "10.0.0.2/30");
		rung_buf_put_str(&buf, RUNG_TAG_NET_GW, i ? addrs[i] : "gw");
		ck_assert_int_eq(rung_proto_restored_decode(buf.data, (uint32_t)buf.len, &b, &err),
				 -EPROTO);
		rung_buf_release(&buf);
	}
}
END_TEST

/* The DNS proxy: optional with the network (a sender that has none leaves it ""), never
 * without it, IPv4, once. */
START_TEST(test_dns)
{
	struct rung_proto_restored a, b;
	struct rung_err err = {0};
	struct rung_buf buf = {0};
	good(&a, true);
	a.dns[0] = '\0';
	rung_proto_restored_encode(&a, &buf);
	ck_assert_msg(rung_proto_restored_decode(buf.data, (uint32_t)buf.len, &b, &err) == 0, "%s",
		      err.msg);
	ck_assert(b.has_net);
	ck_assert_str_eq(b.dns, "");
	rung_buf_release(&buf);
	ck_assert_int_eq(decode_with(RUNG_TAG_NET_DNS, "10.0.0.1", 8, false, &err), -EPROTO);
	ck_assert_msg(strstr(err.msg, "dns proxy needs the net address"), "%s", err.msg);
	const char *bad[] = {"", "10.0.0", "::1", "10.0.0.1 ", "10.0.0.1\nnameserver 8.8.8.8",
			     "0123456789012345"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		good(&a, true);
		a.dns[0] = '\0';
		rung_proto_restored_encode(&a, &buf);
		rung_buf_put_str(&buf, RUNG_TAG_NET_DNS, bad[i]);
		ck_assert_msg(rung_proto_restored_decode(buf.data, (uint32_t)buf.len, &b, &err) ==
				  -EPROTO, "dns '%s' accepted", bad[i]);
		ck_assert_msg(strstr(err.msg, "dns proxy"), "%s", err.msg);
		rung_buf_release(&buf);
	}
	good(&a, true);
	rung_proto_restored_encode(&a, &buf);
	rung_buf_put_str(&buf, RUNG_TAG_NET_DNS, "10.0.0.1");
	ck_assert_int_eq(rung_proto_restored_decode(buf.data, (uint32_t)buf.len, &b, &err), -EPROTO);
	ck_assert_msg(strstr(err.msg, "given twice"), "%s", err.msg);
	rung_buf_release(&buf);
}
END_TEST

Suite *common_restored_suite(void)
{
	Suite *s = suite_create("common_restored");
	TCase *tc = tcase_create("restored");
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_bad_net);
	tcase_add_test(tc, test_dns);
	suite_add_tcase(s, tc);
	return s;
}
