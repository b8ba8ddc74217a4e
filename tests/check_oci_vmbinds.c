/*
 * tests/check_oci_vmbinds.c: the vm rung's binds (oci/vm-binds.c, vm-bindtree.c) without KVM:
 * which mounts are accepted (the guest's own filesystems, a bind of a regular file or a
 * directory within the limits) and which refused naming mounts[i] (a fifo, a missing source, a
 * file or a total over the limits, a host filesystem); a directory's walk into its tar (read
 * back with libarchive) and its refusals naming the entry; and where a copy lands: the agent's
 * write (agent_open_confined, what a copy into the guest runs, with the guest's root as its
 * "/") in a chroot standing in for the guest, whose destination is a link climbing out of the
 * root, lands inside it, or fails there. The chroot, like the VM, is what holds here: a host-side escape
 * through openat2's resolution is not what this shows (files.md's suites do).
 */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/util.h"
#include "oci/vm.h"
#include "tests/lib/testutil.h"

/* A config whose mounts are /proc's and then extra (JSON objects after a comma, or ""), parsed
 * with bundle dir; the vm rung's verdict. */
static int binds_check(const char *dir, const char *extra, struct rung_err *e)
{
	char t[8 * PATH_MAX];
	snprintf(t, sizeof(t),
		 "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\"},"
		 " \"process\": {\"args\": [\"/bin/true\"], \"cwd\": \"/\", \"user\": {\"uid\": 0, "
		 "\"gid\": 0}},"
		 " \"mounts\": [{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"}%s],"
		 " \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"ipc\"}, {\"type\": \"mount\"}]}}",
		 extra);
	struct oci_config c = {0};
	int r = oci_config_parse(t, strlen(t), dir, &c, e);
	ck_assert_msg(r == 0, "parse: %s", e->msg);
	r = oci_vm_config_check(&c, e);
	oci_config_release(&c);
	return r;
}

static void make_file(const char *dir, const char *name, off_t size)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, size), 0);
	close(fd);
}

/* ", {bind src on dst}" into buf; src relative: the bundle's. */
static const char *bind_json(char *buf, size_t n, const char *src, const char *dst)
{
	snprintf(buf, n, ", {\"destination\": \"%s\", \"type\": \"bind\", \"source\": \"%s\", "
		 "\"options\": [\"rbind\", \"ro\"]}", dst, src);
	return buf;
}

START_TEST(test_binds_accepted_and_refused)
{
	char *d = rung_test_tmpdir("vmbinds");
	char p[PATH_MAX], b[3 * PATH_MAX], all[16 * PATH_MAX];
	struct rung_err e = {0};
	make_file(d, "hosts", 40);
	make_file(d, "big", OCI_VM_BIND_MAX + 1);
	make_file(d, "max", OCI_VM_BIND_MAX);
	snprintf(p, sizeof(p), "%s/dir", d);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/fifo", d);
	ck_assert_int_eq(mkfifo(p, 0600), 0);

	/* the CRI's: files (absolute and the bundle's relative), /dev/shm as tmpfs */
	snprintf(p, sizeof(p), "%s/hosts", d);
	snprintf(all, sizeof(all), "%s", bind_json(b, sizeof(b), p, "/etc/hosts"));
	strcat(all, bind_json(b, sizeof(b), "hosts", "/etc/resolv.conf"));
	strcat(all, bind_json(b, sizeof(b), p, "/etc/hostname"));
	strcat(all, ", {\"destination\": \"/dev/shm\", \"type\": \"tmpfs\", \"source\": \"shm\"}");
	strcat(all, bind_json(b, sizeof(b), "dir", "/dev/shm")); /* an app container's */
	ck_assert_msg(binds_check(d, all, &e) == 0, "%s", e.msg);
	e = (struct rung_err){0};
	ck_assert_msg(binds_check(d, bind_json(b, sizeof(b), "max", "/m"), &e) == 0, "%s", e.msg);
	e = (struct rung_err){0}; /* a directory (an emptyDir's): copied now */
	ck_assert_msg(binds_check(d, bind_json(b, sizeof(b), "dir", "/data"), &e) == 0, "%s", e.msg);

	static const struct {
		const char *src, *dst, *want;
	} t[] = {
		{"fifo", "/f", "not a regular file or a directory"},
		{"missing", "/etc/hosts", "No such file"},
		{"big", "/etc/hosts", "at most 1048576 bytes"},
		{"hosts", "/", "destination"},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		e = (struct rung_err){0};
		ck_assert_msg(binds_check(d, bind_json(b, sizeof(b), t[i].src, t[i].dst), &e) < 0,
			      "case %zu accepted", i);
		ck_assert_msg(strstr(e.msg, "mounts[1]") && strstr(e.msg, t[i].want), "case %zu: %s",
			      i, e.msg);
	}
	/* five files of the most each: over the total, refused at the fifth */
	all[0] = '\0';
	for (int i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "/m%d", i);
		strcat(all, bind_json(b, sizeof(b), "max", p));
	}
	e = (struct rung_err){0};
	ck_assert_int_lt(binds_check(d, all, &e), 0);
	ck_assert_msg(strstr(e.msg, "mounts[5]") && strstr(e.msg, "in all"), "%s", e.msg);
	/* a host filesystem (not the guest's own, not a bind) */
	e = (struct rung_err){0};
	ck_assert_int_lt(binds_check(d, ", {\"destination\": \"/n\", \"type\": \"nfs\", \"source\": "
				     "\"h:/x\"}", &e), 0);
	ck_assert_msg(strstr(e.msg, "mounts[1]") && strstr(e.msg, "nfs"), "%s", e.msg);
	rung_rm_rf(d, &e);
	free(d);
}
END_TEST

/* The guest's copy: the agent's write in a root whose /etc/hostname is a link out of it lands
 * in the root; a link to an absent directory fails (-ENOENT); nothing is made beside it. */
START_TEST(test_copy_confined)
{
	RUNG_REQUIRE_ROOT();
	char *d = rung_test_tmpdir("vmbinds");
	char p[PATH_MAX];
	struct rung_err e = {0};
	snprintf(p, sizeof(p), "%s/root/etc", d);
	ck_assert_int_eq(rung_mkdir_p(p, 0755, &e), 0);
	snprintf(p, sizeof(p), "%s/root/etc/hostname", d);
	ck_assert_int_eq(symlink("../../../../../../../escaped", p), 0);
	snprintf(p, sizeof(p), "%s/root/etc/resolv.conf", d);
	ck_assert_int_eq(symlink("/../../newdir/resolv", p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char r[PATH_MAX];
		snprintf(r, sizeof(r), "%s/root", d);
		if (chroot(r) < 0 || chdir("/") < 0)
			_exit(2);
		/* hostname: made inside; resolv.conf: its target's directory is missing, refused */
		struct rung_err ce = {0};
		int fd = agent_open_confined("/etc/hostname", O_WRONLY | O_CREAT | O_TRUNC, 0444, 1,
					     &ce);
		if (fd < 0 || write(fd, "x\n", 2) != 2) {
			fprintf(stderr, "/etc/hostname: %s\n", ce.msg);
			_exit(3);
		}
		close(fd);
		if (agent_open_confined("/etc/resolv.conf", O_WRONLY | O_CREAT | O_TRUNC, 0444, 1,
					&ce) != -ENOENT)
			_exit(4);
		_exit(0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d", st);
	struct stat s;
	snprintf(p, sizeof(p), "%s/root/escaped", d);
	ck_assert_msg(stat(p, &s) == 0 && S_ISREG(s.st_mode), "%s not made inside", p);
	snprintf(p, sizeof(p), "%s/escaped", d);
	ck_assert_msg(access(p, F_OK) < 0, "%s made outside the root", p);
	ck_assert_int_eq(access("/escaped", F_OK), -1);
	ck_assert_int_eq(access("/newdir", F_OK), -1);
	ck_assert_int_eq(rung_test_count_entries(d), 1); /* root only */
	rung_rm_rf(d, &e);
	free(d);
}
END_TEST

/* The tree under dir: directories (0755 unless named in modes), files (0644) and links. */
static void tree_make(const char *dir, const char *const *dirs, const char *const (*files)[2],
		      const char *const (*links)[2])
{
	char p[PATH_MAX];
	struct rung_err e = {0};
	for (size_t i = 0; dirs && dirs[i]; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, dirs[i]);
		ck_assert_int_eq(rung_mkdir_p(p, 0755, &e), 0);
	}
	for (size_t i = 0; files && files[i][0]; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, files[i][0]);
		ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, p, files[i][1],
							 strlen(files[i][1]), 0644, &e), 0);
	}
	for (size_t i = 0; links && links[i][0]; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, links[i][1]);
		ck_assert_int_eq(symlink(links[i][0], p), 0);
	}
}

/* src walked as mounts[i] bound on dst (ro or not) into a memfd (-1: only walked): its result;
 * *tar the memfd, rewound (when tar is non-NULL). */
static int tree_walk(const char *src, const char *dst, bool ro, uint64_t *bytes, int *tar,
		     struct rung_err *e)
{
	struct oci_mount m = {.src = (char *)src, .dst = (char *)dst, .bind = true,
			      .flags = ro ? MS_RDONLY : 0};
	int d = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(d, 0);
	int out = tar ? memfd_create("t", MFD_CLOEXEC) : -1;
	int r = oci_vm_bind_tree(d, &m, 3, out, bytes, e);
	close(d);
	if (tar) {
		ck_assert_int_eq(lseek(out, 0, SEEK_SET), 0);
		*tar = out;
	}
	return r;
}

/* The tar on fd as lines "name kind perm target-or-content's-first-line\n", in the stream's
 * order (a directory's name ends in "/", as tar writes it). */
static void tar_lines(int fd, char *out, size_t cap)
{
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	ck_assert_int_eq(archive_read_open_fd(a, fd, 4096), ARCHIVE_OK);
	struct archive_entry *e;
	size_t o = 0;
	out[0] = '\0';
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		char data[256] = "";
		unsigned t = archive_entry_filetype(e);
		if (t == AE_IFREG) {
			la_ssize_t n = archive_read_data(a, data, sizeof(data) - 1);
			data[n > 0 ? n : 0] = '\0';
			data[strcspn(data, "\n")] = '\0'; /* one line each */
		}
		o += (size_t)snprintf(out + o, cap - o, "%s %c %o %s\n", archive_entry_pathname(e),
				      t == AE_IFDIR ? 'd' : t == AE_IFLNK ? 'l' : 'f',
				      archive_entry_perm(e),
				      t == AE_IFLNK ? archive_entry_symlink(e) : data);
		ck_assert_uint_lt(o, cap);
	}
	archive_read_free(a);
}

static const char *const sa_dirs[] = {"sa/..2026_12_02_10_00_00.123/sub", NULL};
static const char *const sa_files[][2] = {{"sa/..2026_12_02_10_00_00.123/token", "tok-42\n"},
					  {"sa/..2026_12_02_10_00_00.123/sub/ca.crt", "CERT\n"},
					  {NULL, NULL}};
static const char *const sa_links[][2] = {{"..2026_12_02_10_00_00.123", "sa/..data"},
					  {"..data/token", "sa/token"},
					  {"../token", "sa/..2026_12_02_10_00_00.123/sub/t"},
					  {NULL, NULL}};

/* A service-account token's layout, bound ro: every entry in the tar under the destination's
 * last component, links kept as links, write bits gone; rw keeps them; the walk's cost. */
START_TEST(test_dir_tree)
{
	char *d = rung_test_tmpdir("vmbinds");
	char p[PATH_MAX], got[8192];
	struct rung_err e = {0};
	tree_make(d, sa_dirs, sa_files, sa_links);
	snprintf(p, sizeof(p), "%s/sa", d);
	uint64_t bytes = 0;
	int tar;
	ck_assert_msg(tree_walk(p, "/var/run/secrets/kubernetes.io/serviceaccount/", true, &bytes,
				&tar, &e) == 0, "%s", e.msg);
	ck_assert_uint_eq(bytes, 12);
	tar_lines(tar, got, sizeof(got));
	close(tar);
	static const char *const want[] = {
	    "serviceaccount/ d 555 \n",
	    "serviceaccount/..2026_12_02_10_00_00.123/ d 555 \n",
	    "serviceaccount/..2026_12_02_10_00_00.123/token f 444 tok-42\n",
	    "serviceaccount/..2026_12_02_10_00_00.123/sub/ d 555 \n",
	    "serviceaccount/..2026_12_02_10_00_00.123/sub/ca.crt f 444 CERT\n",
	    "serviceaccount/..2026_12_02_10_00_00.123/sub/t l 555 ../token\n",
	    "serviceaccount/..data l 555 ..2026_12_02_10_00_00.123\n",
	    "serviceaccount/token l 555 ..data/token\n"};
	size_t lines = 0;
	for (const char *q = got; (q = strchr(q, '\n')); q++)
		lines++;
	ck_assert_msg(lines == sizeof(want) / sizeof(want[0]), "%zu entries:\n%s", lines, got);
	ck_assert_msg(!strncmp(got, want[0], strlen(want[0])), "the top first:\n%s", got);
	for (size_t i = 1; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_msg(strstr(got, want[i]), "want %s in:\n%s", want[i], got);
	/* rw: the modes as they are (a symlink's own is 777) */
	snprintf(p, sizeof(p), "%s/sa", d);
	ck_assert_int_eq(tree_walk(p, "data", false, &bytes, &tar, &e), 0);
	tar_lines(tar, got, sizeof(got));
	close(tar);
	ck_assert_msg(strstr(got, "data/ d 755 \n") && strstr(got, "data/token l 777 ..data/token\n") &&
		      strstr(got, "/token f 644 tok-42\n"), "%s", got);
	ck_assert_uint_eq(bytes, 24); /* added to, over the calls */
	/* the copy's host-side cost for this tree: walk and tar into a memfd */
	double ms[51];
	for (int i = 0; i < 51; i++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		ck_assert_int_eq(tree_walk(p, "/sa", true, &bytes, &tar, &e), 0);
		clock_gettime(CLOCK_MONOTONIC, &b);
		close(tar);
		ms[i] = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
	}
	for (int i = 1; i < 51; i++) /* insertion sort: the median */
		for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
			double t = ms[j];
			ms[j] = ms[j - 1];
			ms[j - 1] = t;
		}
	fprintf(stderr, "oci_vmbinds: a token-like directory (8 entries) walked into a tar: median "
		"%.3f ms of 51\n", ms[25]);
	rung_rm_rf(d, &e);
	free(d);
}
END_TEST

/* Refused naming mounts[3] and the entry: a fifo, an absolute link, a link climbing out, too
 * deep, too many entries, too many bytes; a subdirectory replaced by a link to /etc is not
 * followed (the tar written until the refusal holds nothing of /etc). */
START_TEST(test_dir_tree_refused)
{
	char *d = rung_test_tmpdir("vmbinds");
	char p[PATH_MAX], got[8192];
	struct rung_err e = {0};
	static const char *const dirs[] = {"fifo/in", "abs", "out/x", "deep", "many", "big", NULL};
	static const char *const links[][2] = {
	    {"/etc", "abs/sub"}, {"../../../x", "out/x/up"}, {NULL, NULL}};
	tree_make(d, dirs, NULL, links);
	snprintf(p, sizeof(p), "%s/fifo/in/f", d);
	ck_assert_int_eq(mkfifo(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/deep", d);
	for (unsigned i = 0; i <= OCI_VM_DIR_DEPTH; i++) {
		strcat(p, "/d");
		ck_assert_int_eq(mkdir(p, 0755), 0);
	}
	for (unsigned i = 0; i <= OCI_VM_DIR_ENTRIES; i++) {
		snprintf(p, sizeof(p), "%s/many/%u", d, i);
		int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		ck_assert_int_ge(fd, 0);
		close(fd);
	}
	make_file(d, "big/sparse", (off_t)OCI_VM_DIR_BYTES - 10);
	static const struct {
		const char *src, *want;
		bool tar;
	} t[] = {
	    {"fifo", "entry 'in/f': a device, fifo or socket", false},
	    {"abs", "entry 'sub': a symlink to '/etc' leaves", true},
	    {"out", "entry 'x/up': a symlink to '../../../x' leaves", false},
	    {"deep", "deeper than 32 levels", false},
	    {"many", "more than 10000 entries", false},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t bytes = 0;
		int tar = -1;
		e = (struct rung_err){0};
		snprintf(p, sizeof(p), "%s/%s", d, t[i].src);
		ck_assert_msg(tree_walk(p, "/v", false, &bytes, t[i].tar ? &tar : NULL, &e) < 0,
			      "case %zu accepted", i);
		ck_assert_msg(strstr(e.msg, "mounts[3]") && strstr(e.msg, t[i].want), "case %zu: %s",
			      i, e.msg);
		if (tar >= 0) { /* nothing of /etc followed */
			tar_lines(tar, got, sizeof(got));
			close(tar);
			ck_assert_msg(!strstr(got, "passwd") && !strstr(got, "v/sub/"), "%s", got);
		}
	}
	/* bytes: this directory fits alone, not after 11 bytes of another */
	uint64_t bytes = 0;
	snprintf(p, sizeof(p), "%s/big", d);
	ck_assert_msg(tree_walk(p, "/v", false, &bytes, NULL, &e) == 0, "%s", e.msg);
	bytes = 11;
	ck_assert_int_lt(tree_walk(p, "/v", false, &bytes, NULL, &e), 0);
	ck_assert_msg(strstr(e.msg, "mounts[3]") && strstr(e.msg, "entry 'sparse'") &&
		      strstr(e.msg, "in all"), "%s", e.msg);
	/* the config's check: mounts[i] named (the fifo's directory) */
	char b[3 * PATH_MAX];
	e = (struct rung_err){0};
	ck_assert_int_lt(binds_check(d, bind_json(b, sizeof(b), "fifo", "/f"), &e), 0);
	ck_assert_msg(strstr(e.msg, "mounts[1]") && strstr(e.msg, "'in/f'"), "%s", e.msg);
	rung_rm_rf(d, &e);
	free(d);
}
END_TEST

/* Pure: a destination's parent and last component. */
START_TEST(test_dst_split)
{
	static const char *const ok[][3] = {
	    {"/var/run/secrets/kubernetes.io/serviceaccount", "/var/run/secrets/kubernetes.io",
	     "serviceaccount"},
	    {"/data/", "/", "data"}, {"data", "/", "data"}, {"/a//b", "/a/", "b"}};
	char parent[PATH_MAX], top[NAME_MAX + 1];
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		ck_assert_int_eq(oci_vm_dst_split(ok[i][0], parent, sizeof(parent), top, sizeof(top)),
				 0);
		ck_assert_str_eq(parent, ok[i][1]);
		ck_assert_str_eq(top, ok[i][2]);
	}
	static const char *const bad[] = {"/", "//", "/a/..", "/a/.", "."};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(oci_vm_dst_split(bad[i], parent, sizeof(parent), top, sizeof(top)) ==
				  -EINVAL, "%s", bad[i]);
}
END_TEST

Suite *oci_vmbinds_suite(void)
{
	Suite *s = suite_create("oci_vmbinds");
	TCase *tc = tcase_create("vmbinds");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_binds_accepted_and_refused);
	tcase_add_test(tc, test_copy_confined);
	tcase_add_test(tc, test_dir_tree);
	tcase_add_test(tc, test_dir_tree_refused);
	tcase_add_test(tc, test_dst_split);
	suite_add_tcase(s, tc);
	return s;
}
