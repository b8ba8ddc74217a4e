/*
 * tests/check_e2e_container_pip.c: installed packages persist. `pip install` of a package the
 * test writes into the sandbox (PyPI is out of reach here, so a local source tree is what
 * "pip install" means) lands in the image's python, and stays importable across execs,
 * run_code, suspend/resume and warm re-acquire, until dispose; after dispose the same key
 * starts from the pristine image again.
 *
 * It needs a Debian image with python3 and pip (`make image-default`, tagged rung/python:3)
 * in a store named by $RUNG_TEST_PYTHON_STATE (image: $RUNG_TEST_PYTHON_IMAGE, default
 * rung/python:3). Building that image (mmdebstrap) reaches the Debian mirror and takes
 * 1.5 min here, so it is not done by the test; without it the test SKIPS LOUDLY. Until
 * `make image-default` lands, a store can be made by hand (what was used to run this test):
 *   mmdebstrap --variant=minbase --include=python3,python3-pip,python3-setuptools,\
 *     python3-wheel bookworm rootfs.tar http://deb.debian.org/debian
 *   umoci init --layout oci && umoci new --image oci:py && umoci unpack --image oci:py b
 *   rm -rf b/rootfs && mkdir b/rootfs && tar -C b/rootfs -xpf rootfs.tar --numeric-owner
 *   find b/rootfs/dev -mindepth 1 -delete     (rung refuses device nodes in layers)
 *   umoci repack --image oci:py b && umoci config --image oci:py --config.env PATH=...
 *   rung --state-dir DIR image import oci --tag rung/python:3
 * Its sandboxes use a scope unique to the run and are disposed by an unchecked fixture
 * (which also runs gc on that store); the store itself is otherwise left as found.
 * Tagged "root".
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rootfs/rfs.h"
#include "tests/lib/container.h"
#include "tests/lib/testutil.h"

/* test-only state, set in the runner before the test forks */
static char py_scope[64];

static const char *py_state(void)
{
	const char *s = getenv("RUNG_TEST_PYTHON_STATE");
	return s && *s ? s : NULL;
}

static const char *py_image(void)
{
	const char *s = getenv("RUNG_TEST_PYTHON_IMAGE");
	return s && *s ? s : "rung/python:3";
}

static void py_setup(void) { snprintf(py_scope, sizeof(py_scope), "ct-pip-%d", (int)getpid()); }

static void py_teardown(void)
{
	if (geteuid() != 0 || !py_state())
		return;
	struct rung_router *r = ct_router(py_state());
	struct rung_err err = {0};
	size_t n = 0;
	if (rung_dispose_scope(r, py_scope, NULL, &n, &err) < 0)
		fprintf(stderr, "pip fixture: dispose scope %s: %s\n", py_scope, err.msg);
	struct rung_gc_report rep; /* and the store's cgroup, if nothing else uses the store */
	if (rung_gc(r, &rep, &err) < 0)
		fprintf(stderr, "pip fixture: gc: %s\n", err.msg);
	rung_router_free(r);
}

static const char setup_py[] =
    "from setuptools import setup\n"
    "setup(name='ctpkg', version='1.0', packages=['ctpkg'],\n"
    "      entry_points={'console_scripts': ['ctpkg-hello=ctpkg:main']})\n";
static const char init_py[] = "def hello():\n    return 'hello from ctpkg'\n"
			      "def main():\n    print(hello())\n";

static const char *const check_sh =
    "cd / && python3 -c 'import ctpkg; print(ctpkg.hello()); print(ctpkg.__file__)' && "
    "ctpkg-hello && python3 -m pip show ctpkg 2>/dev/null | grep '^Version'";

static void check_installed(struct rung_sandbox *sb)
{
	char *out = ct_sh(sb, check_sh);
	static const char want[] = "hello from ctpkg\n/usr/local/lib/python3";
	ck_assert_msg(!strncmp(out, want, strlen(want)), "got: %s", out);
	ck_assert_msg(strstr(out, "\nhello from ctpkg\nVersion: 1.0\n") != NULL, "got: %s", out);
	free(out);
	struct rung_exec_res res;
	struct rung_err err = {0};
	int rc = rung_run_code(sb, "python", "import ctpkg\nprint(ctpkg.hello().upper())\n", NULL,
			       &res, &err);
	ck_assert_msg(rc == 0, "run_code: %s", err.msg);
	ck_assert_int_eq(res.exit_code, 0);
	ck_assert_str_eq(res.out, "HELLO FROM CTPKG\n");
	rung_exec_res_release(&res);
}

START_TEST(test_pip_persists)
{
	CT_REQUIRE();
	if (!py_state())
		RUNG_SKIP("RUNG_TEST_PYTHON_STATE is not set: build the python image "
			  "(make image-default, rung/python:3) and point it at that store");
	struct rfs_store *st = NULL;
	struct rfs_image_info info = {0};
	struct rung_err err = {0};
	if (rfs_store_open(py_state(), &st, &err) < 0 ||
	    rfs_image_resolve(st, py_image(), &info, &err) < 0) {
		char why[600];
		snprintf(why, sizeof(why), "no image %s in %s ($RUNG_TEST_PYTHON_STATE): %s",
			 py_image(), py_state(), err.msg);
		rfs_store_free(st);
		RUNG_SKIP(why);
	}
	rfs_image_info_release(&info);
	rfs_store_free(st);

	struct rung_router *r = ct_router(py_state());
	struct rung_spec s;
	ct_spec(&s, py_image());
	s.requires = RUNG_CAP_EXEC | RUNG_CAP_INSTALL | RUNG_CAP_FS_PERSIST | RUNG_CAP_RUN_CODE;
	bool created;
	struct rung_sandbox *sb = ct_acquire(r, py_scope, "pip", &s, &created);
	ck_assert(created);
	char id[65];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
	ck_assert_int_eq(
	    rung_write_file(sb, "pkg/setup.py", setup_py, strlen(setup_py), 0644, &err), 0);
	ck_assert_int_eq(
	    rung_write_file(sb, "pkg/ctpkg/__init__.py", init_py, strlen(init_py), 0644, &err), 0);
	/* not there before the install */
	const char *const imp[] = {"python3", "-c", "import ctpkg", NULL};
	struct rung_exec_res res;
	ct_exec(sb, imp, 30000, &res);
	ck_assert_int_ne(res.exit_code, 0);
	ck_assert_ptr_nonnull(strstr(res.errout, "No module named 'ctpkg'"));
	rung_exec_res_release(&res);
	/* pip install from the local tree (no index: nothing is fetched) */
	const char *const pip[] = {"python3",
				   "-m",
				   "pip",
				   "install",
				   "--no-index",
				   "--no-build-isolation",
				   "--break-system-packages",
				   "/work/pkg",
				   NULL};
	uint64_t t0 = ct_now_us();
	ct_exec(sb, pip, 180000, &res);
	fprintf(stderr, "container pip: install took %.1f s, exit %d\n",
		(double)(ct_now_us() - t0) / 1e6, res.exit_code);
	ck_assert_msg(res.exit_code == 0, "pip install: %s\n%s", res.out, res.errout);
	ck_assert_ptr_nonnull(strstr(res.out, "Successfully installed ctpkg-1.0"));
	rung_exec_res_release(&res);
	free(ct_sh(sb, "rm -rf /work/pkg")); /* importable from the install, not the source */
	check_installed(sb);
	/* from the host: the install is in this sandbox's upper dir (on its own disk image),
	 * not in the image */
	free(ct_sh(sb, "sync"));
	char p[4400];
	snprintf(p, sizeof(p), "%s/sandboxes/%s/disk.img", py_state(), id);
	char *dbg = ct_debugfs(p, "stat /upper/usr/local/bin/ctpkg-hello");
	ck_assert_msg(dbg && strstr(dbg, "Type: regular"), "%s: no /upper/usr/local/bin/ctpkg-hello",
		      p);
	free(dbg);

	/* across suspend/resume */
	ck_assert_msg(rung_suspend(sb, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_resume(sb, &err) == 0, "%s", err.msg);
	check_installed(sb);
	/* across warm re-acquire, also of a suspended sandbox */
	rung_sandbox_close(sb);
	sb = ct_acquire(r, py_scope, "pip", &s, &created);
	ck_assert(!created);
	check_installed(sb);
	ck_assert_msg(rung_suspend(sb, &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	sb = ct_acquire(r, py_scope, "pip", &s, &created);
	ck_assert(!created);
	ck_assert_str_eq(rung_sandbox_id(sb), id);
	check_installed(sb);
	/* until dispose: then the same key gets the pristine image */
	rung_sandbox_close(sb);
	ck_assert_msg(rung_dispose(r, id, py_scope, &err) == 0, "%s", err.msg);
	ck_assert_msg(access(p, F_OK) < 0, "%s survived dispose", p);
	sb = ct_acquire(r, py_scope, "pip", &s, &created);
	ck_assert(created);
	ct_exec(sb, imp, 30000, &res);
	ck_assert_int_ne(res.exit_code, 0);
	ck_assert_ptr_nonnull(strstr(res.errout, "No module named 'ctpkg'"));
	rung_exec_res_release(&res);
	rung_sandbox_close(sb);
	ck_assert_msg(rung_dispose(r, id, py_scope, &err) == 0, "%s", err.msg);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

Suite *e2e_container_pip_suite(void)
{
	Suite *s = suite_create("e2e_container_pip");
	TCase *tc = tcase_create("pip");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 300);
	tcase_add_unchecked_fixture(tc, ct_setup, ct_teardown);
	tcase_add_unchecked_fixture(tc, py_setup, py_teardown);
	tcase_add_test(tc, test_pip_persists);
	suite_add_tcase(s, tc);
	return s;
}
