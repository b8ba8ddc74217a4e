/*
 * tests/check_common_proto.c: the agent protocol framing (common/proto.c). Round trips, and
 * every kind of hostile input: bad header fields, oversized and truncated frames over a
 * socketpair (an error, never a hang), lying TLV lengths, NULs in strings, bad exec, exit and
 * file requests. Pure: no root needed.
 */
#include <check.h>
#include <string.h>
#include <sys/socket.h>

#include "common/proto.h"
#include "common/util.h"
#include "tests/lib/testutil.h"

static void pair(int sv[2])
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* A raw TLV field, with a length field that may lie. */
static void raw_field(struct rung_buf *b, uint16_t tag, uint32_t claimed, const void *v, size_t n)
{
	uint8_t h[6] = {(uint8_t)(tag >> 8), (uint8_t)tag};
	put32(h + 2, claimed);
	rung_buf_append(b, h, 6);
	rung_buf_append(b, v, n);
}

START_TEST(test_frame_round_trip)
{
	int sv[2];
	pair(sv);
	struct rung_err err = {0};
	uint8_t payload[3000];
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7);
	ck_assert_int_eq(rung_frame_write(sv[0], RUNG_MSG_STDOUT, payload, sizeof(payload), &err),
			 0);
	ck_assert_int_eq(rung_frame_write(sv[0], RUNG_MSG_PING, NULL, 0, &err), 0);
	struct rung_frame f;
	ck_assert_msg(rung_frame_read(sv[1], &f, rung_now_ms() + 2000, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(f.type, RUNG_MSG_STDOUT);
	ck_assert_uint_eq(f.len, sizeof(payload));
	ck_assert_mem_eq(f.payload, payload, sizeof(payload));
	ck_assert_uint_eq(f.payload[f.len], 0); /* NUL guard */
	rung_frame_release(&f);
	ck_assert_int_eq(rung_frame_read(sv[1], &f, 0, &err), 0);
	ck_assert_uint_eq(f.type, RUNG_MSG_PING);
	ck_assert_uint_eq(f.len, 0);
	ck_assert_ptr_null(f.payload);
	rung_frame_release(&f);
	/* EOF before any byte: the peer closed. */
	close(sv[0]);
	ck_assert_int_eq(rung_frame_read(sv[1], &f, rung_now_ms() + 2000, &err), -ECONNRESET);
	close(sv[1]);

	uint8_t hdr[RUNG_FRAME_HDR], type;
	uint32_t len;
	rung_frame_hdr_encode(hdr, RUNG_MSG_EXIT, 1234);
	ck_assert_int_eq(rung_frame_hdr_decode(hdr, &type, &len, &err), 0);
	ck_assert_uint_eq(type, RUNG_MSG_EXIT);
	ck_assert_uint_eq(len, 1234);
	ck_assert_uint_eq(hdr[0], 0x52);
	ck_assert_uint_eq(hdr[1], 0x47);
	ck_assert_uint_eq(hdr[2], RUNG_PROTO_VERSION);
}
END_TEST

START_TEST(test_bad_headers)
{
	struct rung_err err = {0};
	uint8_t hdr[RUNG_FRAME_HDR], type;
	uint32_t len;
	rung_frame_hdr_encode(hdr, RUNG_MSG_PING, 0);
	hdr[0] = 0x00;
	ck_assert_int_eq(rung_frame_hdr_decode(hdr, &type, &len, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "magic"));
	rung_frame_hdr_encode(hdr, RUNG_MSG_PING, 0);
	hdr[2] = RUNG_PROTO_VERSION + 1;
	ck_assert_int_eq(rung_frame_hdr_decode(hdr, &type, &len, &err), -EPROTONOSUPPORT);
	ck_assert_ptr_nonnull(strstr(err.msg, "protocol v3, this side v2"));
	ck_assert_uint_eq(rung_frame_hdr_version(hdr), RUNG_PROTO_VERSION + 1);
	rung_frame_hdr_encode(hdr, RUNG_MSG_PING, RUNG_FRAME_MAX + 1);
	ck_assert_int_eq(rung_frame_hdr_decode(hdr, &type, &len, &err), -EMSGSIZE);
	ck_assert_ptr_nonnull(strstr(err.msg, "exceeds"));
	rung_frame_hdr_encode(hdr, RUNG_MSG_PING, 0xffffffffu);
	ck_assert_int_eq(rung_frame_hdr_decode(hdr, &type, &len, &err), -EMSGSIZE);
	rung_frame_hdr_encode(hdr, RUNG_MSG_PING, RUNG_FRAME_MAX);
	ck_assert_int_eq(rung_frame_hdr_decode(hdr, &type, &len, &err), 0);

	/* The same faults arriving over a socket: rejected before any payload is read. */
	int sv[2];
	pair(sv);
	rung_frame_hdr_encode(hdr, RUNG_MSG_STDOUT, 0x7fffffff);
	ck_assert_int_eq(write(sv[0], hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
	struct rung_frame f;
	ck_assert_int_eq(rung_frame_read(sv[1], &f, rung_now_ms() + 2000, &err), -EMSGSIZE);
	ck_assert_ptr_null(f.payload);
	rung_frame_hdr_encode(hdr, RUNG_MSG_STDOUT, 4);
	hdr[1] = 0x48;
	ck_assert_int_eq(write(sv[0], hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
	ck_assert_int_eq(rung_frame_read(sv[1], &f, rung_now_ms() + 2000, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "magic"));
	close(sv[0]);
	close(sv[1]);

	/* The writer refuses an oversized frame too. */
	pair(sv);
	ck_assert_int_eq(rung_frame_write(sv[0], RUNG_MSG_STDOUT, hdr, RUNG_FRAME_MAX + 1, &err),
			 -EMSGSIZE);
	struct rung_buf b = {0};
	rung_buf_put_bytes(&b, RUNG_TAG_DATA, hdr, (size_t)RUNG_FRAME_MAX + 1);
	ck_assert(b.oom);
	ck_assert_int_eq(rung_frame_write_buf(sv[0], RUNG_MSG_STDOUT, &b, &err), -ENOMEM);
	rung_buf_release(&b);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_truncated)
{
	int sv[2];
	struct rung_err err = {0};
	struct rung_frame f;
	uint8_t hdr[RUNG_FRAME_HDR];
	/* Truncated header, then EOF: an error naming the truncation. */
	pair(sv);
	rung_frame_hdr_encode(hdr, RUNG_MSG_STDOUT, 10);
	ck_assert_int_eq(write(sv[0], hdr, 5), 5);
	close(sv[0]);
	ck_assert_int_eq(rung_frame_read(sv[1], &f, rung_now_ms() + 2000, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "truncated frame header"));
	close(sv[1]);
	/* Truncated payload, then EOF. */
	pair(sv);
	rung_frame_hdr_encode(hdr, RUNG_MSG_STDOUT, 100);
	ck_assert_int_eq(write(sv[0], hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
	ck_assert_int_eq(write(sv[0], "0123456789", 10), 10);
	close(sv[0]);
	ck_assert_int_eq(rung_frame_read(sv[1], &f, rung_now_ms() + 2000, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "10 of 100"));
	ck_assert_ptr_null(f.payload);
	close(sv[1]);
	/* Truncated and the peer stays silent: the deadline ends it, no hang. */
	pair(sv);
	ck_assert_int_eq(write(sv[0], hdr, 3), 3);
	uint64_t t0 = rung_now_ms();
	ck_assert_int_eq(rung_frame_read(sv[1], &f, rung_now_ms() + 300, &err), -ETIMEDOUT);
	ck_assert_uint_lt(rung_now_ms() - t0, 2000);
	close(sv[0]);
	close(sv[1]);
	/* (a timed-out read leaves the stream mid-frame: the caller drops the connection) */
	pair(sv);
	ck_assert_int_eq(write(sv[0], hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
	ck_assert_int_eq(write(sv[0], "abc", 3), 3);
	t0 = rung_now_ms();
	ck_assert_int_eq(rung_frame_read(sv[1], &f, rung_now_ms() + 300, &err), -ETIMEDOUT);
	ck_assert_ptr_nonnull(strstr(err.msg, "inside a frame"));
	ck_assert_uint_lt(rung_now_ms() - t0, 2000);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_tlv)
{
	struct rung_err err = {0};
	struct rung_buf b = {0};
	rung_buf_put_str(&b, RUNG_TAG_PATH, "/work/x");
	rung_buf_put_u64(&b, RUNG_TAG_SIZE, 0x0102030405060708ull);
	rung_buf_put_bytes(&b, RUNG_TAG_DATA, "", 0);
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	uint64_t u;
	char *s = NULL;
	rung_tlv_init(&it, b.data, (uint32_t)b.len);
	ck_assert_int_eq(rung_tlv_next(&it, &tag, &v, &l, &err), 1);
	ck_assert_uint_eq(tag, RUNG_TAG_PATH);
	ck_assert_int_eq(rung_tlv_str(v, l, &s, &err), 0);
	ck_assert_str_eq(s, "/work/x");
	free(s);
	ck_assert_int_eq(rung_tlv_next(&it, &tag, &v, &l, &err), 1);
	ck_assert_int_eq(rung_tlv_u64(v, l, &u, &err), 0);
	ck_assert_uint_eq(u, 0x0102030405060708ull);
	ck_assert_int_eq(rung_tlv_next(&it, &tag, &v, &l, &err), 1);
	ck_assert_uint_eq(l, 0);
	ck_assert_int_eq(rung_tlv_next(&it, &tag, &v, &l, &err), 0);
	rung_buf_release(&b);
	/* empty payload */
	rung_tlv_init(&it, NULL, 0);
	ck_assert_int_eq(rung_tlv_next(&it, &tag, &v, &l, &err), 0);

	/* A field claiming more bytes than present. */
	raw_field(&b, RUNG_TAG_DATA, 100, "abc", 3);
	rung_tlv_init(&it, b.data, (uint32_t)b.len);
	ck_assert_int_eq(rung_tlv_next(&it, &tag, &v, &l, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "claims 100 bytes"));
	rung_buf_release(&b);
	raw_field(&b, RUNG_TAG_DATA, 0xffffffffu, "abc", 3);
	rung_tlv_init(&it, b.data, (uint32_t)b.len);
	ck_assert_int_eq(rung_tlv_next(&it, &tag, &v, &l, &err), -EPROTO);
	rung_buf_release(&b);
	/* A truncated field header. */
	rung_buf_append(&b, "\x00\x07\x00", 3);
	rung_tlv_init(&it, b.data, (uint32_t)b.len);
	ck_assert_int_eq(rung_tlv_next(&it, &tag, &v, &l, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "truncated field header"));
	rung_buf_release(&b);

	/* Strings: no NUL inside, bounded. Integers: exactly 8 bytes. */
	ck_assert_int_eq(rung_tlv_str((const uint8_t *)"ab\0cd", 5, &s, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "NUL"));
	uint8_t *big = calloc(1, RUNG_PROTO_MAX_STR + 1);
	memset(big, 'a', RUNG_PROTO_MAX_STR + 1);
	ck_assert_int_eq(rung_tlv_str(big, RUNG_PROTO_MAX_STR + 1, &s, &err), -EPROTO);
	ck_assert_int_eq(rung_tlv_str(big, RUNG_PROTO_MAX_STR, &s, &err), 0);
	ck_assert_uint_eq(strlen(s), RUNG_PROTO_MAX_STR);
	free(s);
	free(big);
	ck_assert_int_eq(rung_tlv_u64((const uint8_t *)"1234567", 7, &u, &err), -EPROTO);
	ck_assert_int_eq(rung_tlv_u64((const uint8_t *)"123456789", 9, &u, &err), -EPROTO);
}
END_TEST

START_TEST(test_exec_round_trip)
{
	char *argv[] = {"python3", "-c", "print('hi')", NULL};
	char *env[] = {"A=1", "B=x=y", NULL};
	struct rung_proto_exec x = {.argv = argv,
				    .env = env,
				    .cwd = "/work/sub",
				    .timeout_ms = 1500,
				    .max_output = 4096,
				    .has_stdin = true};
	struct rung_buf b = {0};
	ck_assert_int_eq(rung_proto_exec_encode(&x, &b), 0);
	struct rung_proto_exec y;
	struct rung_err err = {0};
	ck_assert_msg(rung_proto_exec_decode(b.data, (uint32_t)b.len, &y, &err) == 0, "%s",
		      err.msg);
	ck_assert_str_eq(y.argv[0], "python3");
	ck_assert_str_eq(y.argv[2], "print('hi')");
	ck_assert_ptr_null(y.argv[3]);
	ck_assert_str_eq(y.env[1], "B=x=y");
	ck_assert_ptr_null(y.env[2]);
	ck_assert_str_eq(y.cwd, "/work/sub");
	ck_assert_uint_eq(y.timeout_ms, 1500);
	ck_assert_uint_eq(y.max_output, 4096);
	ck_assert(y.has_stdin);
	ck_assert_ptr_null(y.seccomp);
	ck_assert(!y.keep);
	ck_assert(!y.last);
	rung_proto_exec_release(&y);
	rung_proto_exec_release(&y); /* idempotent */
	rung_buf_release(&b);
	/* a command's own seccomp filter: its bytes as they were */
	uint8_t prog[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	x.seccomp = prog;
	x.seccomp_len = sizeof(prog);
	ck_assert_int_eq(rung_proto_exec_encode(&x, &b), 0);
	ck_assert_msg(rung_proto_exec_decode(b.data, (uint32_t)b.len, &y, &err) == 0, "%s",
		      err.msg);
	ck_assert_uint_eq(y.seccomp_len, sizeof(prog));
	ck_assert_mem_eq(y.seccomp, prog, sizeof(prog));
	rung_proto_exec_release(&y);
	rung_buf_release(&b);
	/* a kept connection's request (docs/protocol.md, "Kept connections") */
	x.seccomp = NULL;
	x.keep = true;
	ck_assert_int_eq(rung_proto_exec_encode(&x, &b), 0);
	ck_assert_msg(rung_proto_exec_decode(b.data, (uint32_t)b.len, &y, &err) == 0, "%s",
		      err.msg);
	ck_assert(y.keep);
	ck_assert(!y.last);
	rung_proto_exec_release(&y);
	rung_buf_release(&b);
	/* the exec an owned sandbox ends with (docs/protocol.md, LAST) */
	x.keep = false;
	x.last = true;
	ck_assert_int_eq(rung_proto_exec_encode(&x, &b), 0);
	ck_assert_msg(rung_proto_exec_decode(b.data, (uint32_t)b.len, &y, &err) == 0, "%s",
		      err.msg);
	ck_assert(y.last && !y.keep);
	rung_proto_exec_release(&y);
	rung_buf_release(&b);
}
END_TEST

static void exec_bad(struct rung_buf *b, int code, const char *needle)
{
	struct rung_proto_exec y;
	struct rung_err err = {0};
	int r = rung_proto_exec_decode(b->data, (uint32_t)b->len, &y, &err);
	ck_assert_msg(r == -code, "got %d (%s), want %d", r, err.msg, -code);
	ck_assert_msg(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
	ck_assert_ptr_null(y.argv); /* released on failure */
	ck_assert_ptr_null(y.env);
	ck_assert_ptr_null(y.cwd);
	rung_buf_release(b);
}

START_TEST(test_exec_malformed)
{
	struct rung_buf b = {0};
	/* empty argv */
	rung_buf_put_u64(&b, RUNG_TAG_TIMEOUT_MS, 10);
	exec_bad(&b, EINVAL, "empty argv");
	exec_bad(&b, EINVAL, "empty argv"); /* an empty payload */
	rung_buf_put_str(&b, RUNG_TAG_ARGV, "");
	rung_buf_put_str(&b, RUNG_TAG_ARGV, "x");
	exec_bad(&b, EINVAL, "empty argv[0]");
	/* a NUL inside argv */
	rung_buf_put_bytes(&b, RUNG_TAG_ARGV, "/bin/sh\0-c", 10);
	exec_bad(&b, EPROTO, "NUL");
	/* unknown tag */
	rung_buf_put_str(&b, RUNG_TAG_ARGV, "ls");
	rung_buf_put_u64(&b, 999, 1);
	exec_bad(&b, EPROTO, "unknown exec field 999");
	/* a tag valid elsewhere but not in exec */
	rung_buf_put_str(&b, RUNG_TAG_ARGV, "ls");
	rung_buf_put_str(&b, RUNG_TAG_PATH, "/etc/shadow");
	exec_bad(&b, EPROTO, "unknown exec field");
	/* env not KEY=VALUE */
	rung_buf_put_str(&b, RUNG_TAG_ARGV, "ls");
	rung_buf_put_str(&b, RUNG_TAG_ENV, "NOEQUALS");
	exec_bad(&b, EINVAL, "KEY=VALUE");
	rung_buf_put_str(&b, RUNG_TAG_ARGV, "ls");
	rung_buf_put_str(&b, RUNG_TAG_ENV, "=x");
	exec_bad(&b, EINVAL, "KEY=VALUE");
	/* duplicate cwd */
	rung_buf_put_str(&b, RUNG_TAG_ARGV, "ls");
	rung_buf_put_str(&b, RUNG_TAG_CWD, "/a");
	rung_buf_put_str(&b, RUNG_TAG_CWD, "/b");
	exec_bad(&b, EPROTO, "duplicate cwd");
	/* integers of the wrong width */
	rung_buf_put_str(&b, RUNG_TAG_ARGV, "ls");
	rung_buf_put_bytes(&b, RUNG_TAG_TIMEOUT_MS, "\x01\x02", 2);
	exec_bad(&b, EPROTO, "want 8");
	/* a lying length after a good field */
	rung_buf_put_str(&b, RUNG_TAG_ARGV, "ls");
	raw_field(&b, RUNG_TAG_ARGV, 50, "-l", 2);
	exec_bad(&b, EPROTO, "claims 50");
	/* a seccomp filter of no, part of an, or too many instructions; two filters */
	static uint8_t big[(RUNG_PROTO_SECCOMP_MAX + 1) * 8];
	const uint32_t bad_len[] = {0, 7, 12, sizeof(big)};
	for (size_t i = 0; i < sizeof(bad_len) / sizeof(bad_len[0]); i++) {
		rung_buf_put_str(&b, RUNG_TAG_ARGV, "ls");
		rung_buf_put_bytes(&b, RUNG_TAG_SECCOMP, big, bad_len[i]);
		exec_bad(&b, EINVAL, "seccomp");
	}
	rung_buf_put_str(&b, RUNG_TAG_ARGV, "ls");
	rung_buf_put_bytes(&b, RUNG_TAG_SECCOMP, big, 8);
	rung_buf_put_bytes(&b, RUNG_TAG_SECCOMP, big, 8);
	exec_bad(&b, EPROTO, "duplicate seccomp");
	/* more than RUNG_PROTO_MAX_ARGS entries */
	for (int i = 0; i <= RUNG_PROTO_MAX_ARGS; i++)
		rung_buf_put_str(&b, RUNG_TAG_ARGV, "a");
	exec_bad(&b, E2BIG, "argv/env entries");
}
END_TEST

START_TEST(test_exit_frames)
{
	struct rung_err err = {0};
	struct rung_buf b = {0};
	struct rung_proto_exit x = {.exit_code = 255,
				    .signal = 0,
				    .flags = RUNG_EXIT_TIMED_OUT | RUNG_EXIT_TRUNC_STDERR,
				    .duration_us = 123456},
			       y;
	rung_proto_exit_encode(&x, &b);
	ck_assert_int_eq(rung_proto_exit_decode(b.data, (uint32_t)b.len, &y, &err), 0);
	ck_assert_int_eq(y.exit_code, 255);
	ck_assert_uint_eq(y.flags, RUNG_EXIT_TIMED_OUT | RUNG_EXIT_TRUNC_STDERR);
	ck_assert_uint_eq(y.duration_us, 123456);
	rung_buf_release(&b);
	x = (struct rung_proto_exit){.exit_code = -1, .signal = 9};
	rung_proto_exit_encode(&x, &b);
	ck_assert_int_eq(rung_proto_exit_decode(b.data, (uint32_t)b.len, &y, &err), 0);
	ck_assert_int_eq(y.exit_code, -1);
	ck_assert_uint_eq(y.signal, 9);
	rung_buf_release(&b);

	static const struct {
		int64_t code;
		uint64_t sig, flags;
		const char *needle;
	} bad[] = {
	    {256, 0, 0, "exit code 256 out of range"}, {-2, 0, 0, "exit code -2 out of range"},
	    {INT64_MIN, 0, 0, "out of range"},	       {0x100000000ll, 0, 0, "out of range"},
	    {0, 65, 0, "signal 65 out of range"},      {0, 1ull << 40, 0, "signal"},
	    {0, 0, 0x10, "unknown exit flags"},
	};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(bad); i++) {
		rung_buf_put_u64(&b, RUNG_TAG_EXIT_CODE, (uint64_t)bad[i].code);
		rung_buf_put_u64(&b, RUNG_TAG_SIGNAL, bad[i].sig);
		rung_buf_put_u64(&b, RUNG_TAG_FLAGS, bad[i].flags);
		ck_assert_int_eq(rung_proto_exit_decode(b.data, (uint32_t)b.len, &y, &err),
				 -EPROTO);
		ck_assert_msg(strstr(err.msg, bad[i].needle), "%zu: '%s'", i, err.msg);
		rung_buf_release(&b);
	}
	/* no exit code at all */
	rung_buf_put_u64(&b, RUNG_TAG_SIGNAL, 9);
	ck_assert_int_eq(rung_proto_exit_decode(b.data, (uint32_t)b.len, &y, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "without an exit code"));
	rung_buf_release(&b);
	ck_assert_int_eq(rung_proto_exit_decode(NULL, 0, &y, &err), -EPROTO);
	/* unknown tag, non-integer field */
	rung_buf_put_u64(&b, RUNG_TAG_EXIT_CODE, 0);
	rung_buf_put_u64(&b, RUNG_TAG_PATH, 0);
	ck_assert_int_eq(rung_proto_exit_decode(b.data, (uint32_t)b.len, &y, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "unknown exit field"));
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_EXIT_CODE, "zero");
	ck_assert_int_eq(rung_proto_exit_decode(b.data, (uint32_t)b.len, &y, &err), -EPROTO);
	rung_buf_release(&b);
}
END_TEST

START_TEST(test_file_and_error_frames)
{
	struct rung_err err = {0};
	struct rung_buf b = {0};
	struct rung_proto_file f;
	rung_buf_put_str(&b, RUNG_TAG_PATH, "/work/a.txt");
	rung_buf_put_u64(&b, RUNG_TAG_MODE, 0755);
	rung_buf_put_u64(&b, RUNG_TAG_SIZE, 42);
	ck_assert_int_eq(rung_proto_file_decode(b.data, (uint32_t)b.len, &f, &err), 0);
	ck_assert_str_eq(f.path, "/work/a.txt");
	ck_assert_uint_eq(f.mode, 0755);
	ck_assert_uint_eq(f.size, 42);
	rung_proto_file_release(&f);
	rung_buf_release(&b);

	rung_buf_put_u64(&b, RUNG_TAG_SIZE, 1);
	ck_assert_int_eq(rung_proto_file_decode(b.data, (uint32_t)b.len, &f, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "without a path"));
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_PATH, "");
	ck_assert_int_eq(rung_proto_file_decode(b.data, (uint32_t)b.len, &f, &err), -EINVAL);
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_PATH, "/x");
	rung_buf_put_u64(&b, RUNG_TAG_MODE, 010000);
	ck_assert_int_eq(rung_proto_file_decode(b.data, (uint32_t)b.len, &f, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "mode"));
	ck_assert_ptr_null(f.path);
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_PATH, "/x");
	rung_buf_put_str(&b, RUNG_TAG_PATH, "/y");
	ck_assert_int_eq(rung_proto_file_decode(b.data, (uint32_t)b.len, &f, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "duplicate path"));
	rung_buf_release(&b);
	rung_buf_put_bytes(&b, RUNG_TAG_PATH, "/etc\0/x", 7);
	ck_assert_int_eq(rung_proto_file_decode(b.data, (uint32_t)b.len, &f, &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_PATH, "/x");
	rung_buf_put_u64(&b, RUNG_TAG_ARGV, 1);
	ck_assert_int_eq(rung_proto_file_decode(b.data, (uint32_t)b.len, &f, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "unknown file field"));
	rung_buf_release(&b);

	/* ERROR frames: the message is hostile text (control characters replaced). */
	int sv[2];
	pair(sv);
	struct rung_err e = {0};
	rung_err_set(&e, ENOENT, "no such\nfile\x1b[31m");
	ck_assert_int_eq(rung_proto_error_send(sv[0], &e), 0);
	struct rung_frame fr;
	ck_assert_int_eq(rung_frame_read(sv[1], &fr, rung_now_ms() + 2000, &err), 0);
	ck_assert_uint_eq(fr.type, RUNG_MSG_ERROR);
	ck_assert_int_eq(rung_proto_error_decode(fr.payload, fr.len, &err), -ENOENT);
	ck_assert_str_eq(err.msg, "no such?file?[31m");
	rung_frame_release(&fr);
	close(sv[0]);
	close(sv[1]);
	/* errno 0 or absurd: EIO */
	rung_buf_put_u64(&b, RUNG_TAG_ERRNO, 0);
	ck_assert_int_eq(rung_proto_error_decode(b.data, (uint32_t)b.len, &err), -EIO);
	rung_buf_release(&b);
	rung_buf_put_u64(&b, RUNG_TAG_ERRNO, 1ull << 40);
	ck_assert_int_eq(rung_proto_error_decode(b.data, (uint32_t)b.len, &err), -EIO);
	rung_buf_release(&b);
	/* a lying field length does not read past the payload */
	raw_field(&b, RUNG_TAG_MESSAGE, 5000, "hi", 2);
	ck_assert_int_eq(rung_proto_error_decode(b.data, (uint32_t)b.len, &err), -EIO);
	ck_assert_str_eq(err.msg, "unknown error");
	rung_buf_release(&b);
}
END_TEST

Suite *common_proto_suite(void)
{
	Suite *s = suite_create("common_proto");
	TCase *tc = tcase_create("framing");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_frame_round_trip);
	tcase_add_test(tc, test_bad_headers);
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_tlv);
	tcase_add_test(tc, test_exec_round_trip);
	tcase_add_test(tc, test_exec_malformed);
	tcase_add_test(tc, test_exit_frames);
	tcase_add_test(tc, test_file_and_error_frames);
	suite_add_tcase(s, tc);
	return s;
}
