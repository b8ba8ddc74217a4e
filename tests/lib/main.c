/* tests/lib/main.c: one SRunner over every suite (registry generated into build/suites.h). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/testutil.h"
#include "suites.h"

int main(int argc, char **argv)
{
	/* Optional filter: check_rung NAME... runs the suites NAME_suite() (or NAME prefixes). */
	SRunner *sr = NULL;
	for (size_t i = 0; i < sizeof(all_suites) / sizeof(all_suites[0]); i++) {
		int want = argc < 2;
		for (int a = 1; a < argc; a++)
			if (!strncmp(argv[a], all_suites[i].name, strlen(argv[a])))
				want = 1;
		if (!want)
			continue;
		Suite *s = all_suites[i].fn();
		if (!sr)
			sr = srunner_create(s);
		else
			srunner_add_suite(sr, s);
	}
	if (!sr) {
		fprintf(stderr, "check_rung: no suite matched\n");
		return 2;
	}
	char skips[4096];
	snprintf(skips, sizeof(skips), "%s/skips.log", rung_test_build_dir());
	unlink(skips);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_ENV); /* CK_VERBOSITY=verbose lists every test; default normal */
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
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
