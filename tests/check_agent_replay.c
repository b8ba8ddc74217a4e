/*
 * tests/check_agent_replay.c: a background process's replay log (agent/replay.c): chunks of
 * both streams in arrival order at absolute offsets; each stream trimmed to its newest `cap`
 * bytes, the rest counted as dropped; replays from any offset, with what is missing counted;
 * memory bounded under many tiny alternating writes.
 */
#include <check.h>
#include <string.h>

#include "agent/agent.h"

struct got {
	char buf[1 << 16];
	int stream[1 << 16];
	size_t len;
	uint64_t first;
};

static int collect(void *ud, int stream, uint64_t off, const void *d, size_t n)
{
	struct got *g = ud;
	if (!g->len)
		g->first = off;
	ck_assert_uint_le(g->len + n, sizeof(g->buf));
	memcpy(g->buf + g->len, d, n);
	for (size_t i = 0; i < n; i++)
		g->stream[g->len + i] = stream;
	g->len += n;
	return 0;
}

START_TEST(test_order_and_offsets)
{
	struct agent_replay r;
	agent_replay_init(&r, 1024);
	ck_assert_int_eq(agent_replay_append(&r, 0, "abc", 3), 0);
	ck_assert_int_eq(agent_replay_append(&r, 1, "XY", 2), 0);
	ck_assert_int_eq(agent_replay_append(&r, 0, "de", 2), 0);
	ck_assert_uint_eq(r.end, 7);
	static struct got g;
	memset(&g, 0, sizeof(g));
	uint64_t dropped = 99;
	ck_assert_int_eq(agent_replay_read(&r, 0, collect, &g, &dropped), 0);
	ck_assert_uint_eq(g.len, 7);
	ck_assert(!memcmp(g.buf, "abcXYde", 7));
	ck_assert(g.stream[2] == 0 && g.stream[3] == 1 && g.stream[5] == 0);
	ck_assert_uint_eq(dropped, 0);
	/* from the middle of a chunk */
	memset(&g, 0, sizeof(g));
	ck_assert_int_eq(agent_replay_read(&r, 4, collect, &g, &dropped), 0);
	ck_assert_uint_eq(g.first, 4);
	ck_assert(g.len == 3 && !memcmp(g.buf, "Yde", 3));
	/* past the end: nothing */
	memset(&g, 0, sizeof(g));
	ck_assert_int_eq(agent_replay_read(&r, 100, collect, &g, &dropped), 0);
	ck_assert_uint_eq(g.len, 0);
	ck_assert_uint_eq(dropped, 0);
	agent_replay_release(&r);
}
END_TEST

START_TEST(test_trim_per_stream)
{
	struct agent_replay r;
	agent_replay_init(&r, 10);
	/* 25 bytes of stdout in pieces, 4 of stderr between them */
	agent_replay_append(&r, 0, "0123456789", 10);
	agent_replay_append(&r, 1, "EEEE", 4);
	agent_replay_append(&r, 0, "abcdefghij", 10);
	agent_replay_append(&r, 0, "ABCDE", 5);
	ck_assert_uint_eq(r.end, 29);
	ck_assert_uint_eq(r.kept[0], 10);
	ck_assert_uint_eq(r.kept[1], 4);
	ck_assert_uint_eq(r.dropped[0], 15);
	ck_assert_uint_eq(r.dropped[1], 0);
	static struct got g;
	memset(&g, 0, sizeof(g));
	uint64_t dropped;
	ck_assert_int_eq(agent_replay_read(&r, 0, collect, &g, &dropped), 0);
	/* stderr kept at its place; stdout's newest 10 bytes */
	ck_assert_uint_eq(g.len, 14);
	ck_assert(!memcmp(g.buf, "EEEEfghijABCDE", 14));
	ck_assert_uint_eq(g.first, 10);
	ck_assert_uint_eq(dropped, 15);
	/* from an offset inside what was dropped: only the missing bytes after it count */
	memset(&g, 0, sizeof(g));
	ck_assert_int_eq(agent_replay_read(&r, 20, collect, &g, &dropped), 0);
	ck_assert(g.len == 9 && !memcmp(g.buf, "ghijABCDE", 9));
	ck_assert_uint_eq(dropped, 0);
	memset(&g, 0, sizeof(g));
	ck_assert_int_eq(agent_replay_read(&r, 16, collect, &g, &dropped), 0);
	ck_assert_uint_eq(dropped, 3); /* 16, 17, 18 of stdout */
	agent_replay_release(&r);
}
END_TEST

START_TEST(test_bounded)
{
	struct agent_replay r;
	agent_replay_init(&r, 4096);
	/* a million one-byte writes, alternating: each stream keeps 4096 bytes, and the chunk
	 * array does not keep what was trimmed */
	for (int i = 0; i < 1000000; i++)
		ck_assert_int_eq(agent_replay_append(&r, i & 1, i & 1 ? "e" : "o", 1), 0);
	ck_assert_uint_eq(r.kept[0], 4096);
	ck_assert_uint_eq(r.kept[1], 4096);
	ck_assert_uint_eq(r.dropped[0] + r.dropped[1], 1000000 - 8192);
	ck_assert_uint_le(r.n, 4 * 8192);
	ck_assert_uint_le(r.cap_chunks, 8 * 8192);
	/* big writes: chunks of at most 64 KiB, the stream trimmed to its cap */
	static char big[300000];
	memset(big, 'x', sizeof(big));
	ck_assert_int_eq(agent_replay_append(&r, 0, big, sizeof(big)), 0);
	ck_assert_uint_eq(r.kept[0], 4096);
	ck_assert_uint_eq(r.end, 1000000 + sizeof(big));
	agent_replay_release(&r);
}
END_TEST

Suite *agent_replay_suite(void)
{
	Suite *s = suite_create("agent_replay");
	TCase *tc = tcase_create("replay");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_order_and_offsets);
	tcase_add_test(tc, test_trim_per_stream);
	tcase_add_test(tc, test_bounded);
	suite_add_tcase(s, tc);
	return s;
}
