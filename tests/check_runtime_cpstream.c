/*
 * tests/check_runtime_cpstream.c: the host side of a tree download (rt_cp_get_stream,
 * runtime/cp.c) against fake agents on a socketpair, each answering TREE_GET with a crafted
 * stream: a good tree is written as a tar; a name with "..", an absolute name, a symlink out,
 * a fifo, a size lie either way, a truncated stream, a root that is not first, a tree over the
 * bound are each refused naming the entry. Pure: no root needed.
 */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/proto.h"
#include "runtime/rt-internal.h"

/* One frame of a fake agent's answer: an entry, data or the end. */
struct step {
	char op; /* 'e' entry, 'd' data (str as bytes), 'r' RESULT, 'x' close */
	const char *name, *target, *data;
	uint32_t kind;
	uint64_t size;
};

static void send_entry(int fd, const struct step *s)
{
	struct rung_buf b = {0};
	/* encoded by hand: the encoder would not write a size on a non-file */
	rung_buf_put_str(&b, RUNG_TAG_NAME, s->name);
	rung_buf_put_u64(&b, RUNG_TAG_FS_KIND, s->kind);
	rung_buf_put_u64(&b, RUNG_TAG_MODE, s->kind == RUNG_FS_DIR ? 0755 : 0644);
	rung_buf_put_u64(&b, RUNG_TAG_MTIME_NS, 1500000000ull * 1000000000ull);
	if (s->kind == RUNG_FS_FILE)
		rung_buf_put_u64(&b, RUNG_TAG_SIZE, s->size);
	if (s->target)
		rung_buf_put_str(&b, RUNG_TAG_TARGET, s->target);
	struct rung_err e;
	rung_frame_write_buf(fd, RUNG_MSG_TREE_ENTRY, &b, &e);
	rung_buf_release(&b);
}

static void agent(int fd, const struct step *v)
{
	struct rung_frame f;
	struct rung_err e;
	if (rung_frame_read(fd, &f, 0, &e) < 0 || f.type != RUNG_MSG_TREE_GET)
		_exit(2);
	rung_frame_release(&f);
	for (; v->op; v++) {
		struct rung_buf b = {0};
		if (v->op == 'e')
			send_entry(fd, v);
		if (v->op == 'd') {
			rung_buf_put_bytes(&b, RUNG_TAG_DATA, v->data, strlen(v->data));
			rung_frame_write_buf(fd, RUNG_MSG_FILE_DATA, &b, &e);
		}
		if (v->op == 'r') {
			rung_buf_put_u64(&b, RUNG_TAG_SIZE, 1);
			rung_frame_write_buf(fd, RUNG_MSG_RESULT, &b, &e);
		}
		rung_buf_release(&b);
		if (v->op == 'x')
			break;
	}
	_exit(0);
}

/* rt_cp_get_stream against an agent playing v; the tar lands in *out (a tmpfile). */
static int run(const struct step *v, uint64_t max, FILE **out, struct rung_err *err)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		signal(SIGPIPE, SIG_IGN);
		agent(sv[1], v);
	}
	close(sv[1]);
	*out = tmpfile();
	struct rung_cp_opts o = {.max_bytes = max};
	int r = rt_cp_get_stream(sv[0], "/t", fileno(*out), &o, -1, err);
	close(sv[0]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return r;
}

#define ROOT {'e', "", NULL, NULL, RUNG_FS_DIR, 0}
#define R {'r', NULL, NULL, NULL, 0, 0}
#define X {'x', NULL, NULL, NULL, 0, 0}
#define D(s) {'d', NULL, NULL, s, 0, 0}
#define END {0, NULL, NULL, NULL, 0, 0}

START_TEST(test_good_tree)
{
	const struct step v[] = {ROOT,
				 {'e', "d", NULL, NULL, RUNG_FS_DIR, 0},
				 {'e', "d/f", NULL, NULL, RUNG_FS_FILE, 10},
				 D("hello"),
				 D("world"),
				 {'e', "d/l", "f", NULL, RUNG_FS_SYMLINK, 0},
				 {'e', "e", NULL, NULL, RUNG_FS_FILE, 0},
				 R,
				 END};
	FILE *f;
	struct rung_err err = {0};
	ck_assert_msg(run(v, 0, &f, &err) == 0, "%s", err.msg);
	rewind(f);
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	ck_assert_int_eq(archive_read_open_FILE(a, f), ARCHIVE_OK);
	struct archive_entry *e;
	const char *want[] = {".", "d", "d/f", "d/l", "e"};
	size_t n = 0;
	char buf[64];
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		ck_assert_uint_lt(n, 5);
		const char *p = archive_entry_pathname(e);
		ck_assert_msg(!strncmp(p, want[n], strlen(want[n])), "%s", p);
		ck_assert_int_eq(archive_entry_mtime(e), 1500000000);
		if (n == 2) {
			la_ssize_t got = archive_read_data(a, buf, sizeof(buf));
			ck_assert_int_eq(got, 10);
			ck_assert(!memcmp(buf, "helloworld", 10));
		}
		if (n == 3)
			ck_assert_str_eq(archive_entry_symlink(e), "f");
		n++;
	}
	ck_assert_uint_eq(n, 5);
	archive_read_free(a);
	fclose(f);
}
END_TEST

struct bad {
	struct step v[6];
	uint64_t max;
	int code;
	const char *named;
};

START_TEST(test_hostile_streams)
{
	const struct bad cases[] = {
	    {{ROOT, {'e', "../up", NULL, NULL, RUNG_FS_FILE, 0}, R}, 0, EPERM, "'../up'"},
	    {{ROOT, {'e', "a/../../up", NULL, NULL, RUNG_FS_DIR, 0}, R}, 0, EPERM,
	     "'a/../../up'"},
	    {{ROOT, {'e', "/etc/x", NULL, NULL, RUNG_FS_FILE, 0}, R}, 0, EPERM, "'/etc/x'"},
	    {{ROOT, {'e', "l", "/etc/passwd", NULL, RUNG_FS_SYMLINK, 0}, R}, 0, EPERM, "'l'"},
	    {{ROOT, {'e', "d/l", "../../x", NULL, RUNG_FS_SYMLINK, 0}, R}, 0, EPERM, "'d/l'"},
	    {{ROOT, {'e', "p", NULL, NULL, RUNG_FS_FIFO, 0}, R}, 0, EPERM, "'p'"},
	    {{ROOT, {'e', "b", NULL, NULL, RUNG_FS_BLOCK, 0}, R}, 0, EPERM, "'b'"},
	    /* a size lie: more data than declared; less, then the next entry; less, then the end */
	    {{ROOT, {'e', "big", NULL, NULL, RUNG_FS_FILE, 3}, D("12345"), R}, 0,
	     EPROTO, "'big'"},
	    {{ROOT, {'e', "short", NULL, NULL, RUNG_FS_FILE, 9}, D("12"),
	      {'e', "next", NULL, NULL, RUNG_FS_FILE, 0}, R}, 0, EPROTO, "'short'"},
	    {{ROOT, {'e', "short", NULL, NULL, RUNG_FS_FILE, 9}, D("12"), R}, 0,
	     EPROTO, "'short'"},
	    /* data with no file before it */
	    {{ROOT, D("12"), R}, 0, EPROTO, "more data"},
	    /* truncated: the agent goes away mid-file */
	    {{ROOT, {'e', "cut", NULL, NULL, RUNG_FS_FILE, 100}, D("12"), X}, 0,
	     0, "'cut'"},
	    /* the root not first, or twice */
	    {{{'e', "a", NULL, NULL, RUNG_FS_DIR, 0}, R}, 0, EPROTO, "'a'"},
	    {{ROOT, ROOT, R}, 0, EPROTO, "root"},
	    /* over the bound, and the end with nothing at all */
	    {{ROOT, {'e', "f", NULL, NULL, RUNG_FS_FILE, 11}, D("12345678901"), R},
	     10, EFBIG, "'f'"},
	    {{R}, 0, EPROTO, "no tree"},
	    /* a size that would wrap the running total past the bound */
	    {{ROOT, {'e', "a", NULL, NULL, RUNG_FS_FILE, 5}, D("12345"),
	      {'e', "huge", NULL, NULL, RUNG_FS_FILE, UINT64_MAX - 2}, R}, 10, EFBIG, "'huge'"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		FILE *f;
		struct rung_err err = {0};
		int r = run(cases[i].v, cases[i].max, &f, &err);
		fclose(f);
		if (cases[i].code)
			ck_assert_msg(r == -cases[i].code, "case %zu: %d %s", i, r, err.msg);
		else
			ck_assert_msg(r < 0, "case %zu: accepted", i);
		ck_assert_msg(strstr(err.msg, cases[i].named), "case %zu: '%s' does not name %s",
			      i, err.msg, cases[i].named);
	}
}
END_TEST

Suite *runtime_cpstream_suite(void)
{
	Suite *s = suite_create("runtime_cpstream");
	TCase *tc = tcase_create("cpstream");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_good_tree);
	tcase_add_test(tc, test_hostile_streams);
	suite_add_tcase(s, tc);
	return s;
}
