/*
 * tests/check_common_prototree.c: the tree-copy frames (TREE_PUT, TREE_GET, TREE_ENTRY;
 * common/proto-tree.c) decoded as hostile input: names, kinds, links, sizes, fields.
 */
#include <check.h>
#include <string.h>

#include "common/proto.h"

static int decode(const struct rung_proto_tree_entry *e, struct rung_err *err)
{
	struct rung_buf b = {0};
	rung_proto_tree_entry_encode(e, &b);
	struct rung_proto_tree_entry d;
	int r = rung_proto_tree_entry_decode(b.data, (uint32_t)b.len, &d, err);
	if (r == 0) {
		ck_assert_str_eq(d.name, e->name);
		ck_assert_uint_eq(d.kind, e->kind);
		ck_assert_uint_eq(d.mode, e->mode);
		ck_assert_uint_eq(d.size, e->size);
		ck_assert_uint_eq(d.mtime_ns, e->mtime_ns);
		ck_assert(!e->target == !d.target);
		if (e->target)
			ck_assert_str_eq(d.target, e->target);
		rung_proto_tree_entry_release(&d);
	}
	rung_buf_release(&b);
	return r;
}

START_TEST(test_roundtrip)
{
	struct rung_err err = {0};
	struct rung_proto_tree_entry ok[] = {
	    {.name = "", .kind = RUNG_FS_DIR, .mode = 0755, .mtime_ns = 1},
	    {.name = "a/b", .kind = RUNG_FS_FILE, .mode = 04755, .size = 1ull << 40, .mtime_ns = 2},
	    {.name = "a/l", .target = "b", .kind = RUNG_FS_SYMLINK, .mode = 0777},
	    {.name = "a/c/l", .target = "../../x/./y", .kind = RUNG_FS_SYMLINK, .mode = 0777},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		ck_assert_msg(decode(&ok[i], &err) == 0, "%s: %s", ok[i].name, err.msg);

	struct rung_proto_tree_req q = {.path = "/work/x", .max_bytes = 7}, x;
	struct rung_buf b = {0};
	ck_assert_int_eq(rung_proto_tree_req_encode(RUNG_MSG_TREE_GET, &q, &b), 0);
	ck_assert_int_eq(rung_proto_tree_req_decode(RUNG_MSG_TREE_GET, b.data, (uint32_t)b.len, &x,
						    &err), 0);
	ck_assert_str_eq(x.path, "/work/x");
	ck_assert_uint_eq(x.max_bytes, 7);
	rung_proto_tree_req_release(&x);
	/* a bound is a get's field only; other types are no tree requests */
	ck_assert_int_eq(rung_proto_tree_req_decode(RUNG_MSG_TREE_PUT, b.data, (uint32_t)b.len, &x,
						    &err), -EPROTO);
	ck_assert_int_eq(rung_proto_tree_req_decode(RUNG_MSG_FS_LIST, b.data, (uint32_t)b.len, &x,
						    &err), -EPROTO);
	rung_buf_release(&b);
	ck_assert_int_eq(rung_proto_tree_req_decode(RUNG_MSG_TREE_PUT, NULL, 0, &x, &err), -EINVAL);
}
END_TEST

struct bad {
	struct rung_proto_tree_entry e;
	int code;
	const char *named;
};

START_TEST(test_hostile_entries)
{
	char longname[5000];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	const struct bad v[] = {
	    {{.name = "../x", .kind = RUNG_FS_FILE}, EPERM, "'../x'"},
	    {{.name = "a/../../x", .kind = RUNG_FS_DIR}, EPERM, "'a/../../x'"},
	    {{.name = "/etc/passwd", .kind = RUNG_FS_FILE}, EPERM, "'/etc/passwd'"},
	    {{.name = "a//b", .kind = RUNG_FS_FILE}, EPERM, "'a//b'"},
	    {{.name = "a/./b", .kind = RUNG_FS_FILE}, EPERM, "'a/./b'"},
	    {{.name = "a/", .kind = RUNG_FS_DIR}, EPERM, "'a/'"},
	    {{.name = "f", .kind = RUNG_FS_FIFO}, EPERM, "'f'"},
	    {{.name = "c", .kind = RUNG_FS_CHAR}, EPERM, "'c'"},
	    {{.name = "s", .kind = RUNG_FS_SOCKET}, EPERM, "'s'"},
	    {{.name = "", .kind = RUNG_FS_FILE}, EPERM, "root"},
	    {{.name = "l", .target = "/etc", .kind = RUNG_FS_SYMLINK}, EPERM, "'l'"},
	    {{.name = "l", .target = "..", .kind = RUNG_FS_SYMLINK}, EPERM, "'l'"},
	    {{.name = "d/l", .target = "x/../../..", .kind = RUNG_FS_SYMLINK}, EPERM, "'d/l'"},
	    {{.name = "l", .target = "", .kind = RUNG_FS_SYMLINK}, EPERM, "'l'"},
	    {{.name = "l", .target = "x", .kind = RUNG_FS_FILE}, EPROTO, "'l'"},
	    {{.name = longname, .kind = RUNG_FS_FILE}, ENAMETOOLONG, "longer than"},
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct rung_err err = {0};
		ck_assert_msg(decode(&v[i].e, &err) == -v[i].code, "case %zu: %d %s", i, err.code,
			      err.msg);
		ck_assert_msg(strstr(err.msg, v[i].named), "case %zu: '%s' does not name %s", i,
			      err.msg, v[i].named);
	}
}
END_TEST

START_TEST(test_hostile_fields)
{
	struct rung_err err = {0};
	struct rung_proto_tree_entry d;
	struct rung_buf b = {0};
	/* a size on a directory; a file without one; a field given twice; an unknown field; a
	 * NUL in a name; a mode out of range; no kind */
	rung_buf_put_str(&b, RUNG_TAG_NAME, "d");
	rung_buf_put_u64(&b, RUNG_TAG_FS_KIND, RUNG_FS_DIR);
	rung_buf_put_u64(&b, RUNG_TAG_SIZE, 5);
	ck_assert_int_eq(rung_proto_tree_entry_decode(b.data, (uint32_t)b.len, &d, &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_NAME, "f");
	rung_buf_put_u64(&b, RUNG_TAG_FS_KIND, RUNG_FS_FILE);
	ck_assert_int_eq(rung_proto_tree_entry_decode(b.data, (uint32_t)b.len, &d, &err), -EPROTO);
	rung_buf_put_u64(&b, RUNG_TAG_SIZE, 1);
	ck_assert_int_eq(rung_proto_tree_entry_decode(b.data, (uint32_t)b.len, &d, &err), 0);
	rung_proto_tree_entry_release(&d);
	rung_buf_put_u64(&b, RUNG_TAG_SIZE, 2);
	ck_assert_int_eq(rung_proto_tree_entry_decode(b.data, (uint32_t)b.len, &d, &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_NAME, "f");
	rung_buf_put_u64(&b, RUNG_TAG_FS_KIND, RUNG_FS_DIR);
	rung_buf_put_u64(&b, RUNG_TAG_PID, 1);
	ck_assert_int_eq(rung_proto_tree_entry_decode(b.data, (uint32_t)b.len, &d, &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_bytes(&b, RUNG_TAG_NAME, "a\0b", 3);
	rung_buf_put_u64(&b, RUNG_TAG_FS_KIND, RUNG_FS_DIR);
	ck_assert_int_eq(rung_proto_tree_entry_decode(b.data, (uint32_t)b.len, &d, &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_NAME, "m");
	rung_buf_put_u64(&b, RUNG_TAG_FS_KIND, RUNG_FS_DIR);
	rung_buf_put_u64(&b, RUNG_TAG_MODE, 010000);
	ck_assert_int_eq(rung_proto_tree_entry_decode(b.data, (uint32_t)b.len, &d, &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_NAME, "k");
	ck_assert_int_eq(rung_proto_tree_entry_decode(b.data, (uint32_t)b.len, &d, &err), -EPROTO);
	rung_buf_release(&b);
	/* requests: a path twice, a NUL in it, an empty one */
	struct rung_proto_tree_req x;
	rung_buf_put_str(&b, RUNG_TAG_PATH, "/a");
	rung_buf_put_str(&b, RUNG_TAG_PATH, "/b");
	ck_assert_int_eq(rung_proto_tree_req_decode(RUNG_MSG_TREE_PUT, b.data, (uint32_t)b.len, &x,
						    &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_bytes(&b, RUNG_TAG_PATH, "/a\0", 3);
	ck_assert_int_eq(rung_proto_tree_req_decode(RUNG_MSG_TREE_PUT, b.data, (uint32_t)b.len, &x,
						    &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_bytes(&b, RUNG_TAG_PATH, "", 0);
	ck_assert_int_eq(rung_proto_tree_req_decode(RUNG_MSG_TREE_GET, b.data, (uint32_t)b.len, &x,
						    &err), -EINVAL);
	rung_buf_release(&b);
}
END_TEST

Suite *common_prototree_suite(void)
{
	Suite *s = suite_create("common_prototree");
	TCase *tc = tcase_create("prototree");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_hostile_entries);
	tcase_add_test(tc, test_hostile_fields);
	suite_add_tcase(s, tc);
	return s;
}
