#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rung/rung.h"
#include "tests/lib/testutil.h"

void rung_test_skip(const char *test, const char *why)
{
	fprintf(stderr, "\n*** SKIP %s: %s ***\n", test, why);
	char path[4096];
	snprintf(path, sizeof(path), "%s/skips.log", rung_test_build_dir());
	FILE *f = fopen(path, "a");
	if (f) {
		fprintf(f, "%s: %s\n", test, why);
		fclose(f);
	}
}

const char *rung_test_build_dir(void)
{
	const char *b = getenv("RUNG_BUILD_DIR");
	return b && *b ? b : "build";
}

void rung_test_router_env(struct rung_router_opts *o)
{
	struct rung_router_opts e = {0};
	struct rung_err err = {0};
	ck_assert_msg(rung_router_opts_load(&e, getenv, &err) == 0, "%s", err.msg);
	/* what the test set itself wins; the tests give their own stores (no RUNG_STATE_DIR) */
#define UNSET_TAKES(f) o->f = o->f ? o->f : e.f
	UNSET_TAKES(agent_path);
	UNSET_TAKES(vmm_path);
	UNSET_TAKES(rung_path);
	UNSET_TAKES(vm_kernel);
	UNSET_TAKES(vm_initrd);
	UNSET_TAKES(vm_boot_timeout_ms);
	UNSET_TAKES(cgroup_root);
	UNSET_TAKES(loop_control);
	UNSET_TAKES(uid_registry);
	UNSET_TAKES(net_pool);
	UNSET_TAKES(dns_upstream);
	UNSET_TAKES(no_clone_into_cgroup);
#undef UNSET_TAKES
}

char *rung_test_tmpdir(const char *tag)
{
	char *p;
	if (asprintf(&p, "/tmp/rung-test-%s-XXXXXX", tag) < 0)
		return NULL;
	if (!mkdtemp(p)) {
		free(p);
		return NULL;
	}
	chmod(p, 0711);
	return p;
}

int rung_test_count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

int rung_test_count_fds(void)
{
	return rung_test_count_entries("/proc/self/fd") - 1; /* minus the opendir fd */
}

int rung_test_count_fds_of(pid_t pid, const char *skip, const char *prefix)
{
	char d[64], l[384], to[4096];
	snprintf(d, sizeof(d), "/proc/%d/fd", (int)pid);
	DIR *dir = opendir(d);
	if (!dir)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(l, sizeof(l), "%s/%s", d, e->d_name);
		ssize_t k = readlink(l, to, sizeof(to) - 1);
		to[k > 0 ? k : 0] = 0;
		if ((!skip || strcmp(to, skip)) && (!prefix || !strncmp(to, prefix, strlen(prefix))))
			n++;
	}
	closedir(dir);
	return n;
}

int rung_test_count_tasks(pid_t pid)
{
	char d[64];
	snprintf(d, sizeof(d), "/proc/%d/task", (int)pid);
	return rung_test_count_entries(d);
}

int rung_test_count_mounts(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		return -1;
	int n = 0, c;
	while ((c = fgetc(f)) != EOF)
		if (c == '\n')
			n++;
	fclose(f);
	return n;
}

int rung_test_count_procs(void)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] >= '1' && de->d_name[0] <= '9')
			n++;
	closedir(d);
	return n;
}
