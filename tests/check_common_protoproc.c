/*
 * tests/check_common_protoproc.c: the v2 frames of background processes (common/proto-proc.c):
 * round trips of every request type and of PROC_INFO; malformed input (fields of another
 * type, bad handles, out-of-range rows/cols/signals, long names, an info frame out of range);
 * and the version errors both ways, with crafted v1 frames: the host reading a v1 frame
 * names both versions, and the agent answering a v1 request does so in v1, naming both.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/proto.h"
#include "runtime/agent-io.h"

static int roundtrip(struct rung_proto_proc *in, struct rung_proto_proc *out, struct rung_err *err)
{
	struct rung_buf b = {0};
	ck_assert_int_eq(rung_proto_proc_encode(in, &b), 0);
	int r = rung_proto_proc_decode(in->type, b.data, (uint32_t)b.len, out, err);
	rung_buf_release(&b);
	return r;
}

START_TEST(test_start_round_trip)
{
	char *argv[] = {"python3", "-m", "http.server", NULL};
	char *env[] = {"A=1", NULL};
	struct rung_proto_proc in = {.type = RUNG_MSG_PROC_START,
				     .x = {.argv = argv, .env = env, .cwd = "/w"},
				     .name = "web", .pty = true, .rows = 30, .cols = 100,
				     .buffer = 4096};
	struct rung_proto_proc out;
	struct rung_err err = {0};
	ck_assert_msg(roundtrip(&in, &out, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(out.x.argv[2], "http.server");
	ck_assert_ptr_null(out.x.argv[3]);
	ck_assert_str_eq(out.x.env[0], "A=1");
	ck_assert_str_eq(out.x.cwd, "/w");
	ck_assert_str_eq(out.name, "web");
	ck_assert(out.pty && !out.session && !out.default_shell);
	ck_assert_uint_eq(out.rows, 30);
	ck_assert_uint_eq(out.cols, 100);
	ck_assert_uint_eq(out.buffer, 4096);
	rung_proto_proc_release(&out);
	/* a session without argv: the default shell */
	struct rung_proto_proc ses = {.type = RUNG_MSG_PROC_START, .session = true};
	ck_assert_msg(roundtrip(&ses, &out, &err) == 0, "%s", err.msg);
	ck_assert(out.default_shell && out.session);
	ck_assert_str_eq(out.x.argv[0], "/bin/sh");
	rung_proto_proc_release(&out);
	/* a plain process needs its argv */
	struct rung_proto_proc none = {.type = RUNG_MSG_PROC_START};
	ck_assert_int_eq(roundtrip(&none, &out, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "argv"));
	/* the process's own seccomp filter travels with it, and only with PROC_START */
	uint8_t prog[8] = {6, 0, 0, 0, 0, 0, 0xff, 0x7f};
	in.x.seccomp = prog;
	in.x.seccomp_len = sizeof(prog);
	ck_assert_msg(roundtrip(&in, &out, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(out.x.seccomp_len, sizeof(prog));
	ck_assert_mem_eq(out.x.seccomp, prog, sizeof(prog));
	rung_proto_proc_release(&out);
	struct rung_buf b = {0};
	rung_buf_put_str(&b, RUNG_TAG_HANDLE, "0123456789abcdef");
	rung_buf_put_bytes(&b, RUNG_TAG_SECCOMP, prog, sizeof(prog));
	ck_assert_int_eq(rung_proto_proc_decode(RUNG_MSG_PROC_KILL, b.data, (uint32_t)b.len, &out,
						&err), -EPROTO);
	rung_buf_release(&b);
}
END_TEST

START_TEST(test_requests_round_trip)
{
	struct rung_err err = {0};
	struct rung_proto_proc out;
	const char *h = "0123456789abcdef";
	struct rung_proto_proc q = {.type = RUNG_MSG_PROC_LOGS, .since = 77, .follow = true};
	memcpy(q.handle, h, 17);
	ck_assert_msg(roundtrip(&q, &out, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(out.handle, h);
	ck_assert(out.since == 77 && out.follow);
	rung_proto_proc_release(&out);
	q = (struct rung_proto_proc){.type = RUNG_MSG_PROC_STDIN, .data = (const uint8_t *)"a\0b",
				     .data_len = 3, .eof = true};
	memcpy(q.handle, h, 17);
	ck_assert_msg(roundtrip(&q, &out, &err) == 0, "%s", err.msg);
	ck_assert(out.data_len == 3 && out.eof);
	rung_proto_proc_release(&out);
	q = (struct rung_proto_proc){.type = RUNG_MSG_SESSION_RUN, .data = (const uint8_t *)"cd /",
				     .data_len = 4, .timeout_ms = 5};
	memcpy(q.handle, h, 17);
	ck_assert_msg(roundtrip(&q, &out, &err) == 0, "%s", err.msg);
	ck_assert(out.data_len == 4 && out.timeout_ms == 5);
	rung_proto_proc_release(&out);
	/* ranges: signal 1..64, rows/cols 1..4096 (naming the field) */
	q = (struct rung_proto_proc){.type = RUNG_MSG_PROC_SIGNAL, .sig = 65};
	memcpy(q.handle, h, 17);
	ck_assert_int_eq(roundtrip(&q, &out, &err), -EINVAL);
	q.sig = 0;
	ck_assert_int_eq(roundtrip(&q, &out, &err), -EINVAL);
	q = (struct rung_proto_proc){.type = RUNG_MSG_PROC_RESIZE, .rows = 0, .cols = 80};
	memcpy(q.handle, h, 17);
	ck_assert_int_eq(roundtrip(&q, &out, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "rows 0"));
	q.rows = 24;
	q.cols = 100000;
	ck_assert_int_eq(roundtrip(&q, &out, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "cols 100000"));
	q.cols = 4096;
	ck_assert_int_eq(roundtrip(&q, &out, &err), 0);
	rung_proto_proc_release(&out);
}
END_TEST

START_TEST(test_malformed)
{
	struct rung_err err = {0};
	struct rung_proto_proc out;
	struct rung_buf b = {0};
	/* a handle is 16 lowercase hex characters */
	rung_buf_put_str(&b, RUNG_TAG_HANDLE, "0123456789ABCDEF");
	ck_assert_int_eq(rung_proto_proc_decode(RUNG_MSG_PROC_KILL, b.data, (uint32_t)b.len, &out,
						&err), -ENOENT);
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_HANDLE, "../../x");
	ck_assert_int_eq(rung_proto_proc_decode(RUNG_MSG_PROC_KILL, b.data, (uint32_t)b.len, &out,
						&err), -ENOENT);
	rung_buf_release(&b);
	/* no handle */
	ck_assert_int_eq(rung_proto_proc_decode(RUNG_MSG_PROC_KILL, NULL, 0, &out, &err), -EINVAL);
	/* a field of another request type */
	rung_buf_put_str(&b, RUNG_TAG_HANDLE, "0123456789abcdef");
	rung_buf_put_str(&b, RUNG_TAG_ARGV, "sh");
	ck_assert_int_eq(rung_proto_proc_decode(RUNG_MSG_PROC_KILL, b.data, (uint32_t)b.len, &out,
						&err), -EPROTO);
	rung_buf_release(&b);
	/* a name past the limit */
	char name[RUNG_PROTO_NAME_MAX + 2];
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	rung_buf_put_str(&b, RUNG_TAG_ARGV, "sh");
	rung_buf_put_str(&b, RUNG_TAG_NAME, name);
	ck_assert_int_eq(rung_proto_proc_decode(RUNG_MSG_PROC_START, b.data, (uint32_t)b.len, &out,
						&err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "name"));
	rung_buf_release(&b);
	/* a truncated field, a short integer, a type that is no request */
	uint8_t junk[] = {0, 18, 0, 0, 0, 99, 'a'};
	ck_assert_int_eq(rung_proto_proc_decode(RUNG_MSG_PROC_KILL, junk, sizeof(junk), &out, &err),
			 -EPROTO);
	rung_buf_put_str(&b, RUNG_TAG_HANDLE, "0123456789abcdef");
	rung_buf_put_bytes(&b, RUNG_TAG_SIGNAL, "\x09", 1);
	ck_assert_int_eq(rung_proto_proc_decode(RUNG_MSG_PROC_SIGNAL, b.data, (uint32_t)b.len, &out,
						&err), -EPROTO);
	ck_assert_int_eq(rung_proto_proc_decode(RUNG_MSG_PROC_INFO, b.data, (uint32_t)b.len, &out,
						&err), -EPROTO);
	ck_assert_int_eq(rung_proto_proc_decode(RUNG_MSG_EXEC, b.data, (uint32_t)b.len, &out, &err),
			 -EPROTO);
	rung_buf_release(&b);
}
END_TEST

START_TEST(test_info)
{
	char *argv[] = {"sleep", "9", NULL};
	struct rung_proto_proc_info in = {.handle = "00112233445566ff", .name = "n", .argv = argv,
					  .pty = true, .exited = true, .exit_code = -1, .signal = 9,
					  .pid = 42, .started_ms = 5, .end_offset = 100,
					  .dropped_out = 7, .dropped_err = 8};
	struct rung_buf b = {0};
	rung_proto_proc_info_encode(&in, &b);
	struct rung_proto_proc_info out;
	struct rung_err err = {0};
	ck_assert_int_eq(rung_proto_proc_info_decode(b.data, (uint32_t)b.len, &out, &err), 0);
	ck_assert_str_eq(out.handle, in.handle);
	ck_assert_str_eq(out.argv[1], "9");
	ck_assert(out.pty && out.exited && !out.session);
	ck_assert(out.exit_code == -1 && out.signal == 9 && out.pid == 42);
	ck_assert(out.end_offset == 100 && out.dropped_out == 7 && out.dropped_err == 8);
	rung_proto_proc_info_release(&out);
	/* out of range from a hostile agent */
	rung_buf_put_u64(&b, RUNG_TAG_EXIT_CODE, 300);
	ck_assert_int_eq(rung_proto_proc_info_decode(b.data, (uint32_t)b.len, &out, &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_HANDLE, "00112233445566ff");
	rung_buf_put_u64(&b, RUNG_TAG_PID, 1ull << 40);
	ck_assert_int_eq(rung_proto_proc_info_decode(b.data, (uint32_t)b.len, &out, &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_u64(&b, RUNG_TAG_PID, 3);
	ck_assert_int_eq(rung_proto_proc_info_decode(b.data, (uint32_t)b.len, &out, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "handle"));
	rung_buf_release(&b);
}
END_TEST

/* A v1 frame's header: as v2's with version 1. */
static void v1_hdr(uint8_t hdr[RUNG_FRAME_HDR], uint8_t type, uint32_t len)
{
	rung_frame_hdr_encode(hdr, type, len);
	hdr[2] = 1;
}

START_TEST(test_version_host_reads_v1)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	/* what an old (v1) agent answers a v2 request with: a v1 frame */
	uint8_t hdr[RUNG_FRAME_HDR];
	v1_hdr(hdr, RUNG_MSG_PONG, 0);
	ck_assert_int_eq(write(sv[0], hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
	struct rt_agent_io io;
	struct rung_err err = {0};
	ck_assert_int_eq(rt_agent_io_init(&io, sv[1], 2000, -1, &err), 0);
	struct rung_frame f;
	ck_assert_int_eq(rt_agent_io_next(&io, &f, &err), -EPROTONOSUPPORT);
	ck_assert_msg(strstr(err.msg, "rung-agent speaks agent protocol v1, this host v2") &&
			  strstr(err.msg, "use the rung-agent of this rung build"),
		      "%s", err.msg);
	rt_agent_io_release(&io);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_version_agent_answers_v1)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	/* an old (v1) host's request */
	uint8_t hdr[RUNG_FRAME_HDR];
	v1_hdr(hdr, RUNG_MSG_PING, 0);
	ck_assert_int_eq(write(sv[0], hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
	agent_handle(sv[1], false);
	close(sv[1]);
	/* the answer: an ERROR frame in v1, which the old host decodes */
	ck_assert_int_eq(read(sv[0], hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
	ck_assert_uint_eq(hdr[0], 0x52);
	ck_assert_uint_eq(hdr[1], 0x47);
	ck_assert_uint_eq(hdr[2], 1);
	ck_assert_uint_eq(hdr[3], RUNG_MSG_ERROR);
	uint32_t len = ((uint32_t)hdr[4] << 24) | ((uint32_t)hdr[5] << 16) | (hdr[6] << 8) | hdr[7];
	ck_assert_uint_lt(len, 1024);
	uint8_t payload[1024];
	ck_assert_int_eq(read(sv[0], payload, len), (ssize_t)len);
	struct rung_err err = {0};
	rung_proto_error_decode(payload, len, &err);
	ck_assert_int_eq(err.code, EPROTONOSUPPORT);
	ck_assert_msg(strstr(err.msg, "rung-agent speaks agent protocol v2, the host v1"), "%s",
		      err.msg);
	close(sv[0]);
}
END_TEST

Suite *common_protoproc_suite(void)
{
	Suite *s = suite_create("common_protoproc");
	TCase *tc = tcase_create("protoproc");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_start_round_trip);
	tcase_add_test(tc, test_requests_round_trip);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_info);
	tcase_add_test(tc, test_version_host_reads_v1);
	tcase_add_test(tc, test_version_agent_answers_v1);
	suite_add_tcase(s, tc);
	return s;
}
