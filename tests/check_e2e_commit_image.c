/*
 * tests/check_e2e_commit_image.c: image commit. A container sandbox's changes become a layer
 * of a new image, stored, tagged and resolvable like an import: a sandbox from it sees the
 * "installed" module (written, then sourced), a deleted image file stays deleted (whiteout),
 * a hard link stays one inode, modes are kept with set-id bits stripped; a commit of a
 * sandbox of the committed image carries an opaque directory (a directory removed and made
 * again hides the lower one's entries). The process rung's work dir commits under its path on
 * an empty base. The tree walk refuses device nodes and foreign owners, naming the path, and
 * skips fifos. Tagged "root".
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs.h"
#include "tests/lib/container.h"
#include "tests/lib/testutil.h"

/* rung image commit ID REF through the library, as rung-image does it. */
static void commit(struct rung_router *r, const char *id, const char *ref,
		   struct rfs_commit_stats *cs, struct rfs_image_info *info)
{
	struct rung_err err = {0};
	struct rung_changes *ch = NULL;
	struct rfs_store *st = NULL;
	ck_assert_msg(rfs_store_open(rung_router_state_dir(r), &st, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_changes_open(r, id, NULL, &ch, &err) == 0, "%s", err.msg);
	int rc = rfs_image_commit_tree(st, rung_changes_base_image(ch), rung_changes_dirfd(ch),
				       rung_changes_prefix(ch), rung_changes_id_base(ch), ref, cs,
				       info, &err);
	rung_changes_close(ch);
	ck_assert_msg(rc == 0, "commit: %s", err.msg);
	/* verifiable like any image: resolves by tag, every layer present */
	struct rfs_image_info again = {0};
	ck_assert_msg(rfs_image_resolve(st, ref, &again, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(again.digest, info->digest);
	char **lowers = NULL;
	ck_assert_msg(rfs_image_layers(st, &again, &lowers, &err) == 0, "%s", err.msg);
	for (char **l = lowers; *l; l++)
		free(*l);
	free(lowers);
	rfs_image_info_release(&again);
	rfs_store_free(st);
}

START_TEST(test_commit_container)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	struct rung_sandbox *a = ct_acquire(r, "commit", "a", &s, NULL);
	free(ct_sh(a, "mkdir -p /opt/mod && echo 'VALUE=42' > /opt/mod/mod.sh && "
		      "ln /opt/mod/mod.sh /opt/mod/alias.sh && echo s > /opt/mod/suid && "
		      "chmod 4755 /opt/mod/suid && echo p > /opt/mod/private && "
		      "chmod 640 /opt/mod/private && rm /etc/passwd && echo w > /work/w"));
	struct rfs_commit_stats cs;
	struct rfs_image_info info = {0};
	commit(r, rung_sandbox_id(a), "test/committed:1", &cs, &info);
	struct rfs_image_info base = {0};
	struct rfs_store *bst = NULL;
	ck_assert_int_eq(rfs_store_open(ct_state(), &bst, NULL), 0);
	ck_assert_int_eq(rfs_image_resolve(bst, CT_IMAGE, &base, NULL), 0);
	ck_assert_uint_eq(info.n_layers, base.n_layers + 1); /* one layer on top of its image */
	rfs_image_info_release(&base);
	rfs_store_free(bst);
	ck_assert_uint_eq(cs.whiteouts, 1);
	ck_assert_uint_eq(cs.hardlinks, 1);
	ck_assert_uint_ge(cs.stripped_suid, 1);
	/* the source runs on, unchanged */
	char *still = ct_sh(a, "cat /opt/mod/mod.sh");
	ck_assert_str_eq(still, "VALUE=42\n");
	free(still);

	struct rung_spec s2;
	ct_spec(&s2, "test/committed:1");
	struct rung_sandbox *b = ct_acquire(r, "commit", "b", &s2, NULL);
	char *out = ct_sh(b, ". /opt/mod/mod.sh && echo $VALUE; [ -e /etc/passwd ] || echo gone; "
			     "[ $(stat -c %i /opt/mod/mod.sh) = $(stat -c %i /opt/mod/alias.sh) ] "
			     "&& echo same-inode; stat -c '%a %u' /opt/mod/suid /opt/mod/private "
			     "/opt/mod; cat /work/w; [ -f /etc/group ] && echo group-kept");
	ck_assert_str_eq(out, "42\ngone\nsame-inode\n755 0\n640 0\n755 0\nw\ngroup-kept\n");
	free(out);

	/* a directory of the lower image removed and made again: opaque in the next commit */
	free(ct_sh(b, "rm -rf /opt/mod && mkdir /opt/mod && echo new > /opt/mod/only"));
	struct rfs_image_info info2 = {0};
	commit(r, rung_sandbox_id(b), "test/committed:2", &cs, &info2);
	ck_assert_uint_eq(info2.n_layers, info.n_layers + 1);
	ck_assert_uint_eq(cs.opaque_dirs, 1);
	struct rung_spec s3;
	ct_spec(&s3, "test/committed:2");
	struct rung_sandbox *c = ct_acquire(r, "commit", "c", &s3, NULL);
	out = ct_sh(c, "ls -A /opt/mod; [ -e /etc/passwd ] || echo still-gone");
	ck_assert_str_eq(out, "only\nstill-gone\n");
	free(out);

	struct rung_err err = {0};
	size_t n = 0;
	ck_assert_msg(rung_dispose_scope(r, "commit", NULL, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 3);
	rfs_image_info_release(&info);
	rfs_image_info_release(&info2);
	rung_sandbox_close(a);
	rung_sandbox_close(b);
	rung_sandbox_close(c);
	rung_spec_release(&s);
	rung_spec_release(&s2);
	rung_spec_release(&s3);
	rung_router_free(r);
}
END_TEST

START_TEST(test_commit_process_workdir)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("proc");
	struct rung_key k = {"commit-p", "t", "a"};
	struct rung_sandbox *a = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rung_acquire(r, &k, &s, &a, NULL, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_write_file(a, "pkg/mod.py", "X = 1\n", 6, 0644, &err) == 0, "%s",
		      err.msg);
	struct rfs_commit_stats cs;
	struct rfs_image_info info = {0};
	commit(r, rung_sandbox_id(a), "test/workdir:1", &cs, &info);
	ck_assert_uint_eq(info.n_layers, 1); /* an empty base */
	struct rfs_store *st = NULL;
	ck_assert_int_eq(rfs_store_open(rung_router_state_dir(r), &st, &err), 0);
	char **lowers = NULL;
	ck_assert_msg(rfs_image_layers(st, &info, &lowers, &err) == 0, "%s", err.msg);
	char p[4200];
	snprintf(p, sizeof(p), "%s/work/pkg/mod.py", lowers[0]);
	size_t len = 0;
	char *txt = NULL;
	ck_assert_msg(rung_file_load(AT_FDCWD, p, 64, &txt, &len, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(txt, "X = 1\n");
	free(txt);
	for (char **l = lowers; *l; l++)
		free(*l);
	free(lowers);
	rfs_store_free(st);
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(a), NULL, &err), 0);
	rfs_image_info_release(&info);
	rung_sandbox_close(a);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

/* The tree walk on a crafted upper dir: refusals name the path; fifos are skipped. */
START_TEST(test_commit_tree_refusals)
{
	CT_REQUIRE();
	struct rung_err err = {0};
	struct rfs_store *st = NULL;
	ck_assert_int_eq(rfs_store_open(ct_state(), &st, &err), 0);
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/upper-XXXXXX", ct_tmp());
	ck_assert_ptr_nonnull(mkdtemp(dir));
	const uint32_t base = 300000000;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dfd, 0);
	ck_assert_int_eq(mkdirat(dfd, "d", 0755), 0);
	ck_assert_int_eq(mknodat(dfd, "d/fifo", S_IFIFO | 0600, 0), 0);
	ck_assert_int_eq(fchownat(dfd, "d", base, base, 0), 0);
	ck_assert_int_eq(fchownat(dfd, "d/fifo", base, base, 0), 0);
	struct rfs_commit_stats cs;
	struct rfs_image_info info = {0};
	ck_assert_msg(rfs_image_commit_tree(st, NULL, dfd, NULL, base, "test/tree:1", &cs, &info,
					    &err) == 0,
		      "%s", err.msg);
	ck_assert_uint_eq(cs.skipped, 1);
	rfs_image_info_release(&info);
	/* a file of another owner than the sandbox's range */
	ck_assert_int_eq(rung_write_file_atomic(dfd, "d/foreign", "x", 1, 0644, &err), 0);
	ck_assert_int_eq(rfs_image_commit_tree(st, NULL, dfd, NULL, base, "test/tree:2", &cs, &info,
					       &err),
			 -EPERM);
	ck_assert_msg(strstr(err.msg, "'d/foreign'") && strstr(err.msg, "outside"), "%s", err.msg);
	ck_assert_int_eq(fchownat(dfd, "d/foreign", base + 5, base + 5, 0), 0);
	/* a device node */
	ck_assert_int_eq(mknodat(dfd, "d/null", S_IFCHR | 0600, makedev(1, 3)), 0);
	ck_assert_int_eq(fchownat(dfd, "d/null", base, base, 0), 0);
	ck_assert_int_eq(rfs_image_commit_tree(st, NULL, dfd, NULL, base, "test/tree:3", &cs, &info,
					       &err),
			 -EPERM);
	ck_assert_msg(strstr(err.msg, "'d/null' is a device node"), "%s", err.msg);
	/* a bad tag is refused before anything is written */
	ck_assert_int_lt(rfs_image_commit_tree(st, NULL, dfd, NULL, base, "Bad Tag", &cs, &info,
					       &err),
			 0);
	close(dfd);
	rfs_store_free(st);
}
END_TEST

Suite *e2e_commit_image_suite(void)
{
	Suite *s = suite_create("e2e_commit_image");
	ct_add(s, "container", test_commit_container, 240);
	ct_add(s, "process", test_commit_process_workdir, 120);
	ct_add(s, "tree", test_commit_tree_refusals, 60);
	return s;
}
