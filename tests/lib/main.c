/* tests/lib/main.c: one SRunner per suite (registry generated into build/suites.h), with
 * leak guards between suites: a store cgroup (`rung-*` at the top of a cgroup hierarchy) that
 * appeared during a suite and is still there after it is named with the suite; so is a
 * temporary dir of rung_test_tmpdir still there, which is then removed. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "suites.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

#define GUARD_MAX 256

/* Every rung-* group at the top of each hierarchy (v1: per controller; v2: the root), as
 * "hierarchy/name" strings; their count. */
static size_t store_groups(char names[][300], size_t max)
{
	static const char *const roots[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/pids",
					    "/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified"};
	size_t n = 0;
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		DIR *d = opendir(roots[i]);
		if (!d)
			continue;
		for (struct dirent *e; (e = readdir(d)) && n < max;)
			if (!strncmp(e->d_name, "rung-", 5) && e->d_type == DT_DIR)
				snprintf(names[n++], 300, "%s/%s", roots[i] + 14, e->d_name);
		closedir(d);
	}
	return n;
}

/* Groups of after[] not in before[]: their count; reported when report is set. */
static size_t guard_new(const char *suite, char before[][300], size_t nb, bool report)
{
	static char after[GUARD_MAX][300];
	size_t na = store_groups(after, GUARD_MAX), n = 0;
	for (size_t i = 0; i < na; i++) {
		bool old = false;
		for (size_t j = 0; j < nb && !old; j++)
			old = !strcmp(after[i], before[j]);
		if (!old && ++n && report)
			fprintf(stderr, "\n*** LEAK GUARD: after suite %s: cgroup %s is left ***\n",
				suite, after[i]);
	}
	return n;
}

/* An owned sandbox's releaser (runtime/release.c) removes its groups after `rung run` has
 * returned: up to 3 s for the last run's, then whatever is still there is named. */
static void guard_report(const char *suite, char before[][300], size_t nb)
{
	for (int i = 0; i < 60 && guard_new(suite, before, nb, false); i++)
		usleep(50000);
	guard_new(suite, before, nb, true);
}

/* Temporary dirs of rung_test_tmpdir still there after a suite: named, then removed. */
static void tmpdirs_sweep(const char *suite)
{
	FILE *f = fopen(rung_test_tmpdirs_list, "r");
	char line[4200];
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		struct stat st;
		if (strncmp(line, "/tmp/rung-test-", 15) || lstat(line, &st) < 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		int r = rung_test_rmtree(line);
		fprintf(stderr,
			"\n*** LEAK GUARD: after suite %s: temporary dir %s was left (%s) ***\n",
			suite, line, r == 0 ? "removed" : "not all of it removed");
	}
	if (f)
		fclose(f);
	int t = open(rung_test_tmpdirs_list, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (t >= 0)
		close(t);
}

/* A filter that names a suite exactly runs that suite only (e2e_oci_vm, not e2e_oci_vmnet too). */
static bool exact_name(const char *arg)
{
	for (size_t i = 0; i < sizeof(all_suites) / sizeof(all_suites[0]); i++)
		if (!strcmp(arg, all_suites[i].name))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--init")) /* as a sandbox's pid 1 (sandbox.h) */
		return spine_fake_pid1();
	/* Optional filter: check_rung NAME... runs the suites NAME_suite() (or NAME prefixes). */
	char skips[4096];
	snprintf(skips, sizeof(skips), "%s/skips.log", rung_test_build_dir());
	unlink(skips);
	int failed = 0, ran = 0;
	static char before[GUARD_MAX][300];
	snprintf(rung_test_tmpdirs_list, sizeof(rung_test_tmpdirs_list),
		 "/tmp/rung-check-tmpdirs-%d.list", (int)getpid());
	int lfd = open(rung_test_tmpdirs_list, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (lfd < 0)
		rung_test_tmpdirs_list[0] = '\0'; /* no sweep: tests still remove their own */
	else
		close(lfd);
	for (size_t i = 0; i < sizeof(all_suites) / sizeof(all_suites[0]); i++) {
		int want = argc < 2;
		for (int a = 1; a < argc; a++)
			if (exact_name(argv[a]) ? !strcmp(argv[a], all_suites[i].name)
						: !strncmp(argv[a], all_suites[i].name, strlen(argv[a])))
				want = 1;
		if (!want)
			continue;
		size_t nb = store_groups(before, GUARD_MAX);
		SRunner *sr = srunner_create(all_suites[i].fn());
		srunner_set_fork_status(sr, CK_FORK);
		srunner_run_all(sr, CK_ENV); /* CK_VERBOSITY=verbose lists every test */
		failed += srunner_ntests_failed(sr);
		srunner_free(sr);
		guard_report(all_suites[i].name, before, nb);
		if (rung_test_tmpdirs_list[0])
			tmpdirs_sweep(all_suites[i].name);
		ran++;
	}
	if (rung_test_tmpdirs_list[0])
		unlink(rung_test_tmpdirs_list);
	if (!ran) {
		fprintf(stderr, "check_rung: no suite matched\n");
		return 2;
	}
	if (ran > 1)
		fprintf(stderr, "\ncheck_rung: %d suite(s), %d failed check(s)\n", ran, failed);
	FILE *f = fopen(skips, "r");
	if (f) {
		char line[1024];
		int n = 0;
		fprintf(stderr, "\n======== SKIPPED TESTS (facility absent) ========\n");
		while (fgets(line, sizeof(line), f)) {
			fprintf(stderr, "  %s", line);
			n++;
		}
		fprintf(stderr, "======== %d test(s) skipped ========\n", n);
		fclose(f);
	}
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
