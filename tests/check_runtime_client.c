/*
 * tests/check_runtime_client.c: the host side of the agent protocol (runtime/client.c,
 * runtime/agent-io.c) against fake agents on a socketpair: an agent that stops reading while
 * the host writes tens of MB, one that trickles empty frames, one that writes all its output
 * before it reads any stdin, and a caller that hangs up while stdin is still being sent. Each
 * must end at its one deadline (or at once on the hang-up), never block a host thread. Pure:
 * no root needed.
 */
#include <check.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/proto.h"
#include "common/util.h"
#include "runtime/rt-internal.h"
#include "tests/lib/testutil.h"

static void pair(int sv[2])
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

static pid_t fake_agent(int fd, void (*body)(int fd))
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) { /* holds only its own end: the others' hang-ups must be seen */
		syscall(SYS_close_range, 3, (unsigned)fd - 1, 0);
		syscall(SYS_close_range, (unsigned)fd + 1, ~0U, 0);
		signal(SIGPIPE, SIG_IGN);
		body(fd);
		_exit(0);
	}
	return pid;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Reads the request, then never reads again (a SIGSTOPped handler looks the same). */
static void agent_stops_reading(int fd)
{
	struct rung_frame f;
	struct rung_err e;
	if (rung_frame_read(fd, &f, 0, &e) == 0)
		rung_frame_release(&f);
	pause();
}

START_TEST(test_write_file_to_agent_that_stops_reading)
{
	int sv[2];
	pair(sv);
	pid_t pid = fake_agent(sv[1], agent_stops_reading);
	close(sv[1]);
	size_t len = 48u << 20;
	char *data = calloc(1, len);
	ck_assert_ptr_nonnull(data);
	struct rung_err err = {0};
	uint64_t t0 = rung_now_ms();
	int r = rt_agent_write_file(sv[0], "/work/big", data, len, 0644, 1500, -1, &err);
	uint64_t took = rung_now_ms() - t0;
	ck_assert_int_eq(r, -ETIMEDOUT);
	ck_assert_ptr_nonnull(strstr(err.msg, "write_file /work/big"));
	ck_assert_ptr_nonnull(strstr(err.msg, "within 1500 ms (still sending"));
	ck_assert_uint_ge(took, 1400);
	ck_assert_uint_lt(took, 3000);
	free(data);
	close(sv[0]);
	reap(pid);
}
END_TEST

/* An empty FILE_DATA frame every 50 ms, forever. */
static void agent_trickles(int fd)
{
	struct rung_frame f;
	struct rung_err e;
	if (rung_frame_read(fd, &f, 0, &e) == 0)
		rung_frame_release(&f);
	for (;;) {
		if (rung_frame_write(fd, RUNG_MSG_FILE_DATA, NULL, 0, &e) < 0)
			_exit(0);
		usleep(50000);
	}
}

START_TEST(test_read_file_trickle_ends_at_deadline)
{
	int sv[2];
	pair(sv);
	pid_t pid = fake_agent(sv[1], agent_trickles);
	close(sv[1]);
	char *data = NULL;
	size_t len = 0;
	struct rung_err err = {0};
	uint64_t t0 = rung_now_ms();
	int r = rt_agent_read_file(sv[0], "/etc/hostname", 4096, &data, &len, 1000, -1, &err);
	uint64_t took = rung_now_ms() - t0;
	ck_assert_int_eq(r, -ETIMEDOUT);
	ck_assert_ptr_nonnull(strstr(err.msg, "read_file /etc/hostname"));
	ck_assert_ptr_null(data);
	ck_assert_uint_ge(took, 900);
	ck_assert_uint_lt(took, 2500);
	close(sv[0]);
	reap(pid);
}
END_TEST

START_TEST(test_ping_deadline_against_trickle)
{
	int sv[2];
	pair(sv);
	pid_t pid = fake_agent(sv[1], agent_trickles);
	close(sv[1]);
	struct rung_err err = {0};
	/* A trickled frame is not a PONG: the first one answers (EPROTO), it never waits on. */
	uint64_t t0 = rung_now_ms();
	int r = rt_agent_ping(sv[0], 800, &err);
	ck_assert_int_eq(r, -EPROTO);
	ck_assert_uint_lt(rung_now_ms() - t0, 2000);
	close(sv[0]);
	reap(pid);
}
END_TEST

/* Writes 8 MiB of output before reading any stdin, then drains stdin and reports. */
#define OUT_BYTES (8u << 20)
#define IN_BYTES (16u << 20)
static void agent_output_first(int fd)
{
	struct rung_frame f;
	struct rung_err e;
	if (rung_frame_read(fd, &f, 0, &e) < 0 || f.type != RUNG_MSG_EXEC)
		_exit(1);
	rung_frame_release(&f);
	static char chunk[65536];
	memset(chunk, 'o', sizeof(chunk));
	for (size_t off = 0; off < OUT_BYTES; off += sizeof(chunk)) {
		struct rung_buf b = {0};
		rung_buf_put_bytes(&b, RUNG_TAG_DATA, chunk, sizeof(chunk));
		if (rung_frame_write_buf(fd, RUNG_MSG_STDOUT, &b, &e) < 0)
			_exit(1);
		rung_buf_release(&b);
	}
	uint64_t got = 0;
	for (;;) {
		if (rung_frame_read(fd, &f, 0, &e) < 0)
			_exit(1);
		uint8_t t = f.type;
		got += f.len > 6 ? f.len - 6 : 0;
		rung_frame_release(&f);
		if (t == RUNG_MSG_STDIN_EOF)
			break;
	}
	struct rung_proto_exit ex = {.exit_code = got == IN_BYTES ? 0 : 3};
	struct rung_buf b = {0};
	rung_proto_exit_encode(&ex, &b);
	rung_frame_write_buf(fd, RUNG_MSG_EXIT, &b, &e);
	rung_buf_release(&b);
	pause();
}

START_TEST(test_exec_reads_while_writing_stdin)
{
	int sv[2];
	pair(sv);
	pid_t pid = fake_agent(sv[1], agent_output_first);
	close(sv[1]);
	char *in = malloc(IN_BYTES);
	ck_assert_ptr_nonnull(in);
	memset(in, 'i', IN_BYTES);
	const char *argv[] = {"cat", NULL};
	struct rung_exec_req req = {.argv = argv,
				    .stdin_data = in,
				    .stdin_len = IN_BYTES,
				    .timeout_ms = 20000,
				    .max_output = 64u << 20};
	struct rung_spec spec = {0};
	struct rung_exec_res res;
	struct rung_err err = {0};
	int r = rt_agent_exec(sv[0], &req, &spec, NULL, false, NULL, &res, &err);
	ck_assert_msg(r == 0, "exec: %s", err.msg);
	ck_assert_int_eq(res.exit_code, 0);
	ck_assert_uint_eq(res.out_len, OUT_BYTES);
	rung_exec_res_release(&res);
	free(in);
	close(sv[0]);
	reap(pid);
}
END_TEST

static void hang_up_soon(int fd)
{
	(void)fd;
	usleep(300000);
}

START_TEST(test_exec_cancel_while_sending_stdin)
{
	int sv[2], cv[2];
	pair(sv);
	pair(cv);
	pid_t agent = fake_agent(sv[1], agent_stops_reading);
	pid_t caller = fake_agent(cv[1], hang_up_soon); /* the caller's connection, closing */
	close(sv[1]);
	close(cv[1]);
	size_t len = 32u << 20;
	char *in = calloc(1, len);
	ck_assert_ptr_nonnull(in);
	const char *argv[] = {"cat", NULL};
	struct rung_exec_req req = {.argv = argv,
				    .stdin_data = in,
				    .stdin_len = len,
				    .timeout_ms = 60000,
				    .watch_fd = true,
				    .cancel_fd = cv[0]};
	struct rung_spec spec = {0};
	struct rung_exec_res res;
	struct rung_err err = {0};
	uint64_t t0 = rung_now_ms();
	int r = rt_agent_exec(sv[0], &req, &spec, NULL, false, NULL, &res, &err);
	uint64_t took = rung_now_ms() - t0;
	ck_assert_int_eq(r, -ECANCELED);
	ck_assert_ptr_nonnull(strstr(err.msg, "went away"));
	ck_assert_uint_lt(took, 3000);
	free(in);
	close(sv[0]);
	close(cv[0]);
	reap(agent);
	reap(caller);
}
END_TEST

/* The caller hanging up cancels a file operation in every phase: while the data goes out to
 * an agent that stopped reading, and while waiting on one that trickles empty frames. */
START_TEST(test_file_ops_cancel_on_hang_up)
{
	for (int op = 0; op < 2; op++) {
		int sv[2], cv[2];
		pair(sv);
		pair(cv);
		pid_t agent = fake_agent(sv[1], op == 0 ? agent_stops_reading : agent_trickles);
		pid_t caller = fake_agent(cv[1], hang_up_soon);
		close(sv[1]);
		close(cv[1]);
		size_t len = 32u << 20;
		char *data = op == 0 ? calloc(1, len) : NULL;
		size_t got = 0;
		struct rung_err err = {0};
		uint64_t t0 = rung_now_ms();
		int r = op == 0 ? rt_agent_write_file(sv[0], "/work/big", data, len, 0644, 60000,
						      cv[0], &err)
				: rt_agent_read_file(sv[0], "/etc/hostname", 4096, &data, &got,
						     60000, cv[0], &err);
		uint64_t took = rung_now_ms() - t0;
		ck_assert_msg(r == -ECANCELED, "op %d: %d %s", op, r, err.msg);
		ck_assert_uint_lt(took, 3000); /* the hang-up, not the 60 s deadline */
		free(data);
		close(sv[0]);
		close(cv[0]);
		reap(agent);
		reap(caller);
	}
}
END_TEST

Suite *runtime_client_suite(void)
{
	Suite *s = suite_create("runtime_client");
	TCase *tc = tcase_create("deadlines");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_write_file_to_agent_that_stops_reading);
	tcase_add_test(tc, test_read_file_trickle_ends_at_deadline);
	tcase_add_test(tc, test_ping_deadline_against_trickle);
	tcase_add_test(tc, test_exec_reads_while_writing_stdin);
	tcase_add_test(tc, test_exec_cancel_while_sending_stdin);
	tcase_add_test(tc, test_file_ops_cancel_on_hang_up);
	suite_add_tcase(s, tc);
	return s;
}
