/* tests/check_common_protofs.c: FS_* requests and FS_ENTRY answers, decoded as hostile input. */
#include <check.h>
#include <string.h>

#include "common/proto.h"

START_TEST(test_roundtrip)
{
	struct rung_proto_fs q = {
	    .type = RUNG_MSG_FS_MOVE, .path = "/a", .target = "/b", .flags = RUNG_FS_RECURSIVE};
	struct rung_buf b = {0};
	ck_assert_int_eq(rung_proto_fs_encode(&q, &b), 0);
	struct rung_proto_fs x;
	struct rung_err err = {0};
	ck_assert_int_eq(rung_proto_fs_decode(RUNG_MSG_FS_MOVE, b.data, (uint32_t)b.len, &x, &err),
			 0);
	ck_assert_str_eq(x.path, "/a");
	ck_assert_str_eq(x.target, "/b");
	ck_assert_uint_eq(x.flags, RUNG_FS_RECURSIVE);
	rung_proto_fs_release(&x);
	/* a target is a move's field only */
	int r = rung_proto_fs_decode(RUNG_MSG_FS_REMOVE, b.data, (uint32_t)b.len, &x, &err);
	ck_assert_int_eq(r, -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "not allowed"));
	rung_buf_release(&b);

	struct rung_proto_fs_entry e = {.name = "n",
					.target = "t",
					.kind = RUNG_FS_SYMLINK,
					.mode = 0777,
					.size = 1,
					.mtime_ns = 2};
	rung_proto_fs_entry_encode(&e, &b);
	struct rung_proto_fs_entry d;
	ck_assert_int_eq(rung_proto_fs_entry_decode(b.data, (uint32_t)b.len, &d, &err), 0);
	ck_assert_str_eq(d.name, "n");
	ck_assert_str_eq(d.target, "t");
	ck_assert_uint_eq(d.mode, 0777);
	ck_assert_uint_eq(d.mtime_ns, 2);
	rung_proto_fs_entry_release(&d);
	rung_buf_release(&b);
}
END_TEST

START_TEST(test_hostile)
{
	struct rung_proto_fs x;
	struct rung_err err = {0};
	struct rung_buf b = {0};
	/* no path */
	rung_buf_put_u64(&b, RUNG_TAG_FLAGS, 1);
	ck_assert_int_eq(rung_proto_fs_decode(RUNG_MSG_FS_STAT, b.data, (uint32_t)b.len, &x, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "path"));
	rung_buf_release(&b);
	/* unknown flags, a mode out of range, a move without target, a type not ours */
	rung_buf_put_str(&b, RUNG_TAG_PATH, "/p");
	rung_buf_put_u64(&b, RUNG_TAG_FLAGS, 6);
	ck_assert_int_eq(rung_proto_fs_decode(RUNG_MSG_FS_LIST, b.data, (uint32_t)b.len, &x, &err),
			 -EINVAL);
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_PATH, "/p");
	rung_buf_put_u64(&b, RUNG_TAG_MODE, 070000);
	ck_assert_int_eq(rung_proto_fs_decode(RUNG_MSG_FS_MKDIR, b.data, (uint32_t)b.len, &x, &err),
			 -EINVAL);
	ck_assert_int_eq(rung_proto_fs_decode(RUNG_MSG_FS_MOVE, b.data, (uint32_t)b.len, &x, &err),
			 -EPROTO);
	ck_assert_int_eq(rung_proto_fs_decode(RUNG_MSG_EXEC, b.data, (uint32_t)b.len, &x, &err),
			 -EPROTO);
	rung_buf_release(&b);
	/* a path given twice, a path with a NUL */
	rung_buf_put_str(&b, RUNG_TAG_PATH, "/p");
	rung_buf_put_str(&b, RUNG_TAG_PATH, "/q");
	ck_assert_int_eq(rung_proto_fs_decode(RUNG_MSG_FS_STAT, b.data, (uint32_t)b.len, &x, &err),
			 -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_bytes(&b, RUNG_TAG_PATH, "/a\0b", 4);
	ck_assert_int_eq(rung_proto_fs_decode(RUNG_MSG_FS_STAT, b.data, (uint32_t)b.len, &x, &err),
			 -EPROTO);
	rung_buf_release(&b);
	/* entries: no name, a kind out of range, a target on a file, an unknown field */
	struct rung_proto_fs_entry e;
	rung_buf_put_u64(&b, RUNG_TAG_SIZE, 1);
	ck_assert_int_eq(rung_proto_fs_entry_decode(b.data, (uint32_t)b.len, &e, &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_NAME, "n");
	rung_buf_put_u64(&b, RUNG_TAG_FS_KIND, 99);
	ck_assert_int_eq(rung_proto_fs_entry_decode(b.data, (uint32_t)b.len, &e, &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_NAME, "n");
	rung_buf_put_str(&b, RUNG_TAG_TARGET, "/t");
	rung_buf_put_u64(&b, RUNG_TAG_FS_KIND, RUNG_FS_FILE);
	ck_assert_int_eq(rung_proto_fs_entry_decode(b.data, (uint32_t)b.len, &e, &err), -EPROTO);
	rung_buf_release(&b);
	rung_buf_put_str(&b, RUNG_TAG_NAME, "n");
	rung_buf_put_u64(&b, RUNG_TAG_PID, 1);
	ck_assert_int_eq(rung_proto_fs_entry_decode(b.data, (uint32_t)b.len, &e, &err), -EPROTO);
	rung_buf_release(&b);
}
END_TEST

Suite *common_protofs_suite(void)
{
	Suite *s = suite_create("common_protofs");
	TCase *tc = tcase_create("protofs");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_hostile);
	suite_add_tcase(s, tc);
	return s;
}
