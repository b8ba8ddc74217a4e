/*
 * tests/check_e2e_archive_serve.c: the daemon's archive route, PUT/GET
 * /v1/sandboxes/{id}/archive?path=P (server/archive.c), on the process rung: a tree uploaded as
 * a tar comes back byte for byte; another scope's sandbox is 404, no token 401, a missing path
 * 404 and bad parameters 400 naming them; hostile tars (.., absolute, a device) are refused
 * naming the entry, with nothing written outside; a body over --max-archive is 413 (announced
 * or chunked); 50 requests, and 5 downloads and 5 uploads cut short by the client, leave the
 * daemon no fd or thread. Tagged "root".
 */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "common/util.h"
#include "tests/lib/server.h"

struct tent {
	const char *name;
	mode_t type; /* AE_IFREG, AE_IFDIR, AE_IFCHR */
	const char *data;
	size_t len;
};

/* A tar of v (pax, as rung cp writes it), malloc'd. */
static char *make_tar(const struct tent *v, size_t n, size_t *len)
{
	size_t cap = 8u << 20, used = 0;
	char *buf = malloc(cap);
	struct archive *a = archive_write_new();
	ck_assert_ptr_nonnull(buf);
	archive_write_set_format_pax_restricted(a);
	archive_write_set_bytes_in_last_block(a, 1);
	ck_assert_int_eq(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, v[i].name);
		archive_entry_set_filetype(e, v[i].type);
		archive_entry_set_perm(e, v[i].type == AE_IFDIR ? 0755 : 0640);
		archive_entry_set_size(e, v[i].type == AE_IFREG ? (la_int64_t)v[i].len : 0);
		if (v[i].type == AE_IFCHR)
			archive_entry_set_rdev(e, makedev(1, 3));
		ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
		if (v[i].type == AE_IFREG)
			ck_assert_int_eq(archive_write_data(a, v[i].data, v[i].len),
					 (la_ssize_t)v[i].len);
		archive_entry_free(e);
	}
	ck_assert_int_eq(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	*len = used;
	return buf;
}

/* Each regular file of v is in the tar (name relative to its root), with its bytes and mode. */
static void expect_tree(const char *tar, size_t len, const struct tent *v, size_t n)
{
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	ck_assert_int_eq(archive_read_open_memory(a, tar, len), ARCHIVE_OK);
	size_t found = 0;
	struct archive_entry *e;
	int r;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e);
		if (!strncmp(name, "./", 2))
			name += 2;
		for (size_t i = 0; i < n; i++) {
			if (v[i].type != AE_IFREG || strcmp(v[i].name, name))
				continue;
			ck_assert_msg(archive_entry_size(e) == (la_int64_t)v[i].len,
				      "%s: size %lld", name, (long long)archive_entry_size(e));
			ck_assert_int_eq(archive_entry_perm(e), 0640);
			char *got = malloc(v[i].len + 1);
			ck_assert_int_eq(archive_read_data(a, got, v[i].len + 1),
					 (la_ssize_t)v[i].len);
			ck_assert_msg(!memcmp(got, v[i].data, v[i].len), "%s: bytes differ", name);
			free(got);
			found++;
		}
	}
	ck_assert_msg(r == ARCHIVE_EOF, "the tar does not end well: %s", archive_error_string(a));
	archive_read_free(a);
	size_t files = 0;
	for (size_t i = 0; i < n; i++)
		files += v[i].type == AE_IFREG;
	ck_assert_uint_eq(found, files);
}

static struct srvt_resp put_tar(struct srvt *t, const char *tok, const char *id, const char *query,
				const char *tar, size_t len)
{
	char path[1024];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/archive?%s", id, query);
	struct srvt_resp r = {0};
	int fd = srvt_unix_connect(t->sock[0]);
	ck_assert_int_ge(fd, 0);
	srvt_req_fd(fd, "PUT", path, tok, "Content-Type: application/x-tar\r\n", tar, len, &r,
		    60000);
	close(fd);
	return r;
}

static struct srvt_resp get_tar(struct srvt *t, const char *tok, const char *id, const char *query)
{
	char path[1024];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/archive?%s", id, query);
	return srvt_req(t->sock[0], "GET", path, tok, NULL, NULL);
}

/* r has status st and, if needle, the body says it (r is freed). */
static void expect(struct srvt_resp r, int st, const char *needle, int line)
{
	ck_assert_msg(r.status == st && (!needle || strstr(r.body, needle)),
		      "line %d: want %d '%s', got %d %s", line, st, needle ? needle : "", r.status,
		      r.body);
	srvt_resp_free(&r);
}
#define EXPECT(r, st, needle) expect((r), (st), (needle), __LINE__)

/* A chunked PUT of n bytes of zeros (no Content-Length: the limit is found mid-body). */
static struct srvt_resp put_chunked(struct srvt *t, const char *id, size_t n)
{
	int fd = srvt_unix_connect(t->sock[0]);
	ck_assert_int_ge(fd, 0);
	char head[512];
	int k = snprintf(head, sizeof(head),
			 "PUT /v1/sandboxes/%s/archive?path=big HTTP/1.1\r\nHost: rung\r\n"
			 "Connection: close\r\nAuthorization: Bearer " TOK_A "\r\n"
			 "Transfer-Encoding: chunked\r\n\r\n",
			 id);
	ck_assert_int_eq(rung_write_all(fd, head, (size_t)k), 0);
	static char zeros[65536];
	for (size_t off = 0; off < n; off += sizeof(zeros)) {
		k = snprintf(head, sizeof(head), "%zx\r\n", sizeof(zeros));
		if (send(fd, head, (size_t)k, MSG_NOSIGNAL) != k ||
		    send(fd, zeros, sizeof(zeros), MSG_NOSIGNAL) != (ssize_t)sizeof(zeros) ||
		    send(fd, "\r\n", 2, MSG_NOSIGNAL) != 2)
			break;
	}
	(void)!send(fd, "0\r\n\r\n", 5, MSG_NOSIGNAL);
	char *raw;
	size_t len;
	srvt_read_all(fd, &raw, &len, 60000);
	struct srvt_resp r;
	srvt_parse(raw, len, &r);
	free(raw);
	close(fd);
	return r;
}

/* The daemon's fds, less its pooled routers' (each holds the store directory open, and the
 * pool grows with the requests in flight at once: not a leak). */
static int count_fds(pid_t pid, const char *state)
{
	int n = rung_test_count_fds_of(pid, state, NULL);
	ck_assert_int_ge(n, 0);
	return n;
}

/* A download the client abandons after its head: the daemon ends the worker. */
static void get_abandoned(struct srvt *t, const char *id)
{
	int fd = srvt_unix_connect(t->sock[0]);
	ck_assert_int_ge(fd, 0);
	char req[512];
	int k = snprintf(req, sizeof(req),
			 "GET /v1/sandboxes/%s/archive?path=tree HTTP/1.1\r\nHost: rung\r\n"
			 "Authorization: Bearer " TOK_A "\r\n\r\n",
			 id);
	ck_assert_int_eq(rung_write_all(fd, req, (size_t)k), 0);
	char b[256];
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ck_assert_int_eq(poll(&p, 1, 30000), 1);
	ck_assert_int_gt(read(fd, b, sizeof(b)), 0);
	close(fd);
}

/*
 * A tree the sandbox made hostile (a symlink out of it) fails the download: before the first
 * byte as a plain 403 naming the link, or, after a big file went out first (readdir's order
 * decides), as a response cut short: no last chunk, and no end-of-archive blocks.
 */
static void hostile_download(struct srvt *t, const char *id, const char *tar, size_t len)
{
	EXPECT(put_tar(t, TOK_A, id, "path=cut", tar, len), 200, NULL);
	char path[256];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	EXPECT(srvt_req(t->sock[0], "POST", path, TOK_A, NULL,
			"{\"argv\": [\"ln\", \"-s\", \"/etc/passwd\", \"cut/zz-out\"]}"),
	       200, "\"exit_code\":0");
	int fd = srvt_unix_connect(t->sock[0]);
	ck_assert_int_ge(fd, 0);
	char req[512];
	int k = snprintf(req, sizeof(req),
			 "GET /v1/sandboxes/%s/archive?path=cut HTTP/1.1\r\nHost: rung\r\n"
			 "Authorization: Bearer " TOK_A "\r\nConnection: close\r\n\r\n",
			 id);
	ck_assert_int_eq(rung_write_all(fd, req, (size_t)k), 0);
	char *raw;
	size_t n;
	srvt_read_all(fd, &raw, &n, 30000);
	close(fd);
	struct srvt_resp r;
	srvt_parse(raw, n, &r);
	if (r.status == 200) {
		ck_assert_msg(strcasestr(r.head, "Transfer-Encoding: chunked"), "%s", r.head);
		ck_assert_msg(n < 5 || memcmp(raw + n - 5, "0\r\n\r\n", 5),
			      "a failed download ended like a whole one");
		ck_assert_msg(r.len > 700000, "only %zu bytes before the cut", r.len);
		static const char zeros[1024];
		ck_assert_msg(memcmp(r.body + r.len - 1024, zeros, 1024),
			      "the cut tar ends with an end-of-archive marker");
	} else {
		ck_assert_msg(r.status == 403 && strstr(r.body, "zz-out"), "%d %s", r.status,
			      r.body);
	}
	fprintf(stderr, "hostile download: %d (%zu bytes)\n", r.status, r.len);
	srvt_resp_free(&r);
	free(raw);
}

/* An upload the client abandons halfway through its body: the daemon ends the worker. */
static void put_abandoned(struct srvt *t, const char *id, const char *tar, size_t len)
{
	int fd = srvt_unix_connect(t->sock[0]);
	ck_assert_int_ge(fd, 0);
	char head[512];
	int k = snprintf(head, sizeof(head),
			 "PUT /v1/sandboxes/%s/archive?path=half HTTP/1.1\r\nHost: rung\r\n"
			 "Authorization: Bearer " TOK_A "\r\nContent-Length: %zu\r\n\r\n",
			 id, len);
	ck_assert_int_eq(rung_write_all(fd, head, (size_t)k), 0);
	ck_assert_int_eq(rung_write_all(fd, tar, len / 2), 0);
	usleep(100000);
	close(fd);
}

static void leak_check(struct srvt *t, const char *id, const char *tar, size_t len)
{
	for (int i = 0; i < 3; i++) { /* warm: the router pool keeps what it opened */
		EXPECT(put_tar(t, TOK_A, id, "path=tree", tar, len), 200, NULL);
		EXPECT(get_tar(t, TOK_A, id, "path=tree"), 200, NULL);
	}
	/* the baseline once the warm round's connections are all closed */
	int fd0 = -1, th0 = -1;
	for (int i = 0; i < 50; i++) {
		usleep(200000);
		int f = count_fds(t->pid[0], t->state), th = rung_test_count_tasks(t->pid[0]);
		if (f == fd0 && th == th0)
			break;
		fd0 = f, th0 = th;
	}
	for (int i = 0; i < 25; i++) {
		EXPECT(put_tar(t, TOK_A, id, "path=tree", tar, len), 200, NULL);
		EXPECT(get_tar(t, TOK_A, id, "path=tree"), 200, NULL);
	}
	for (int i = 0; i < 5; i++) {
		get_abandoned(t, id);
		put_abandoned(t, id, tar, len);
	}
	int fd1 = 0, th1 = 0;
	for (int i = 0; i < 100; i++) {
		usleep(100000);
		fd1 = count_fds(t->pid[0], t->state);
		th1 = rung_test_count_tasks(t->pid[0]);
		if (fd1 <= fd0 && th1 <= th0)
			break;
	}
	ck_assert_msg(fd1 <= fd0 && th1 <= th0, "daemon fds %d -> %d, threads %d -> %d", fd0, fd1,
		      th0, th1);
}

START_TEST(t_archive_route)
{
	RUNG_REQUIRE_ROOT();
	struct srvt t;
	srvt_setup(&t, NULL);
	const char *extra[] = {"--max-archive", "4M", NULL};
	srvt_start(&t, 0, extra);
	char id[65];
	srvt_acquire(t.sock[0], TOK_A, "ar", NULL, id);
	size_t big = 700000;
	char *bytes = malloc(big);
	for (size_t i = 0; i < big; i++)
		bytes[i] = (char)((i * 2654435761u) >> 13);
	const struct tent tree[] = {
	    {"d", AE_IFDIR, NULL, 0},	      {"d/a.txt", AE_IFREG, "hello\n", 6},
	    {"d/sub", AE_IFDIR, NULL, 0},     {"d/sub/b.bin", AE_IFREG, bytes, big},
	    {"d/sub/empty", AE_IFREG, "", 0}, {"top.txt", AE_IFREG, "top", 3},
	};
	size_t len;
	char *tar = make_tar(tree, 6, &len);
	/* the round trip */
	EXPECT(put_tar(&t, TOK_A, id, "path=tree", tar, len), 200, "\"path\":\"tree\"");
	struct srvt_resp r = get_tar(&t, TOK_A, id, "path=tree");
	ck_assert_msg(r.status == 200 && strcasestr(r.head, "Content-Type: application/x-tar"),
		      "%d %s", r.status, r.head ? r.head : r.body);
	expect_tree(r.body, r.len, tree, 6);
	srvt_resp_free(&r);
	char path[512];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=tree/d/a.txt", id);
	r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
	ck_assert_msg(r.status == 200 && !strcmp(r.body, "hello\n"), "%d %s", r.status, r.body);
	srvt_resp_free(&r);
	/* the scope rule, credentials, parameters */
	EXPECT(put_tar(&t, TOK_B, id, "path=other", tar, len), 404, "\"code\":\"not_found\"");
	EXPECT(get_tar(&t, TOK_B, id, "path=tree"), 404, "\"code\":\"not_found\"");
	EXPECT(get_tar(&t, NULL, id, "path=tree"), 401, "unauthorized");
	EXPECT(put_tar(&t, NULL, id, "path=tree", tar, len), 401, "unauthorized");
	EXPECT(get_tar(&t, TOK_A, id, "path=nope"), 404, "\"reason\":\"not_found\"");
	EXPECT(get_tar(&t, TOK_A, id, "path=tree/top.txt"), 400, "tree/top.txt");
	EXPECT(get_tar(&t, TOK_A, id, "x=1"), 400, "path");
	EXPECT(get_tar(&t, TOK_A, id, "path=tree&mode=0644"), 400, "mode");
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/fs/stat?path=other", id);
	EXPECT(srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL), 404, "not_found");
	/* hostile tars, refused naming the entry, nothing written outside */
	/* refused early, then a body the daemon reads to its end to answer */
	const struct tent dotdot[] = {{"ok.txt", AE_IFREG, "x", 1},
				      {"../evil", AE_IFREG, "e", 1},
				      {"pad.bin", AE_IFREG, bytes, big}};
	const struct tent abs[] = {{"/evil-abs", AE_IFREG, "e", 1}};
	const struct tent dev[] = {{"null", AE_IFCHR, NULL, 0}};
	const struct {
		const struct tent *v;
		const char *needle;
	} hostile[] = {{dotdot, "../evil"}, {abs, "/evil-abs"}, {dev, "'null'"}};
	for (size_t i = 0; i < 3; i++) {
		size_t hl;
		char *h = make_tar(hostile[i].v, hostile[i].v == dotdot ? 3 : 1, &hl);
		r = put_tar(&t, TOK_A, id, "path=h/in", h, hl);
		ck_assert_msg(r.status >= 400 && r.status < 500 &&
				  strstr(r.body, hostile[i].needle),
			      "%s: %d %s", hostile[i].needle, r.status, r.body);
		srvt_resp_free(&r);
		free(h);
	}
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/fs/ls?path=h", id);
	r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
	ck_assert_msg(r.status == 200 && !strstr(r.body, "evil"), "%d %s", r.status, r.body);
	srvt_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/fs/stat?path=/evil-abs", id);
	EXPECT(srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL), 404, "not_found");
	/* not a tar at all */
	EXPECT(put_tar(&t, TOK_A, id, "path=junk", "this is no tar", 14), 400, "tar");
	/* over --max-archive: announced (answered before the body), then found mid-body */
	int fd = srvt_unix_connect(t.sock[0]);
	char head[512];
	int k = snprintf(head, sizeof(head),
			 "PUT /v1/sandboxes/%s/archive?path=big HTTP/1.1\r\nHost: rung\r\n"
			 "Authorization: Bearer " TOK_A "\r\nContent-Length: 5000000\r\n\r\n",
			 id);
	ck_assert_int_eq(rung_write_all(fd, head, (size_t)k), 0);
	char *raw;
	size_t rl;
	srvt_read_all(fd, &raw, &rl, 30000);
	srvt_parse(raw, rl, &r);
	free(raw);
	close(fd);
	ck_assert_msg(r.status == 413 && strstr(r.body, "--max-archive"), "%d %s", r.status,
		      r.body);
	srvt_resp_free(&r);
	EXPECT(put_chunked(&t, id, 5u << 20), 413, "--max-archive");
	hostile_download(&t, id, tar, len);
	leak_check(&t, id, tar, len);
	free(tar);
	free(bytes);
	srvt_teardown(&t);
}
END_TEST

Suite *e2e_archive_serve_suite(void)
{
	Suite *s = suite_create("e2e_archive_serve");
	TCase *tc = tcase_create("serve");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, t_archive_route);
	suite_add_tcase(s, tc);
	return s;
}
