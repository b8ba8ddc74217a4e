/* tests/lib/sandbox.c: see tests/lib/sandbox.h. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

/* The tcase's base dir: set by the unchecked setup in the runner, read by the forked tests. */
static char base_dir[PATH_MAX];

const char *spine_base(void) { return base_dir; }

void spine_base_setup(void)
{
	char *d = rung_test_tmpdir("spine");
	if (!d) {
		base_dir[0] = '\0';
		return;
	}
	snprintf(base_dir, sizeof(base_dir), "%s", d);
	free(d);
}

TCase *spine_tcase(Suite *s, const char *name, int timeout_s)
{
	TCase *tc = tcase_create(name);
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, timeout_s);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	suite_add_tcase(s, tc);
	return tc;
}

void spine_run_release(struct spine_run *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

void spine_cli_run(struct spine_run *res, const char *stdin_text, const char *const *args)
{
	spine_cli_run_env(res, stdin_text, args, NULL);
}

void spine_cli_run_env(struct spine_run *res, const char *stdin_text, const char *const *args,
		       const char *const *env)
{
	spine_cli_run_prep(res, stdin_text, args, env, NULL);
}

void spine_cli_run_prep(struct spine_run *res, const char *stdin_text, const char *const *args,
			const char *const *env, bool (*prep)(void))
{
	static int seq;
	char bin[4096], outp[4200], errp[4200], inp[4200];
	snprintf(bin, sizeof(bin), "%s/rung", rung_test_build_dir());
	ck_assert_msg(access(bin, X_OK) == 0, "%s is not built", bin);
	snprintf(outp, sizeof(outp), "%s/cli-%d-%d.out", spine_base(), (int)getpid(), seq);
	snprintf(errp, sizeof(errp), "%s/cli-%d-%d.err", spine_base(), (int)getpid(), seq);
	snprintf(inp, sizeof(inp), "%s/cli-%d-%d.in", spine_base(), (int)getpid(), seq++);
	struct rung_err e = {0};
	const char *in = stdin_text ? stdin_text : "";
	ck_assert_int_eq(rung_write_file_atomic(AT_FDCWD, inp, in, strlen(in), 0600, &e), 0);
	const char *argv[64] = {bin};
	int n = 1;
	for (; args[n - 1] && n < 63; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	pid_t p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		int i = open(inp, O_RDONLY), o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600),
		    x = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (i < 0 || o < 0 || x < 0 || dup2(i, 0) < 0 || dup2(o, 1) < 0 || dup2(x, 2) < 0 ||
		    (prep && !prep()))
			_exit(126);
		const char *envp[16] = {"PATH=/usr/bin:/bin"};
		for (int k = 0; env && env[k] && k < 14; k++)
			envp[k + 1] = env[k];
		execve(bin, (char **)argv, (char **)envp);
		_exit(127);
	}
	int st;
	ck_assert_int_eq(waitpid(p, &st, 0), p);
	res->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	res->out = spine_slurp(outp, NULL);
	res->err = spine_slurp(errp, NULL);
	ck_assert(res->out && res->err);
	unlink(outp);
	unlink(errp);
	unlink(inp);
}

static void agent_path(char *buf, size_t len)
{
	snprintf(buf, len, "%s/rung-agent", rung_test_build_dir());
}

/* Dispose every sandbox of one state dir. */
static void sweep_state_dir(const char *dir)
{
	char ap[PATH_MAX];
	agent_path(ap, sizeof(ap));
	struct rung_router_opts o = {.state_dir = dir, .agent_path = ap};
	rung_test_router_env(&o);
	struct rung_router *r = NULL;
	struct rung_err err = {0};
	if (rung_router_new(&o, &r, &err) < 0)
		return;
	struct rung_sandbox_info *v = NULL;
	size_t n = 0;
	if (rung_list(r, NULL, NULL, &v, &n, &err) == 0) {
		for (size_t i = 0; i < n; i++) {
			fprintf(stderr, "spine teardown: disposing leftover sandbox %s in %s\n",
				v[i].id, dir);
			rung_dispose(r, v[i].id, NULL, &err);
		}
		free(v);
	}
	/* an emptied test store also drops its cgroup parent (rung-<store>), which the process
	 * and container rungs create; the vm test store is shared: left alone */
	struct rung_gc_report rep;
	if (!spine_vm() && rung_gc(r, &rep, &err) < 0)
		fprintf(stderr, "spine teardown: gc of %s: %s\n", dir, err.msg);
	rung_router_free(r);
}

bool spine_vm(void)
{
	const char *r = getenv("RUNG_TEST_RUNG");
	return r && !strcmp(r, "vm");
}

void spine_base_teardown(void)
{
	if (spine_vm() && getenv("RUNG_TEST_VM_STORE"))
		sweep_state_dir(getenv("RUNG_TEST_VM_STORE"));
	if (!base_dir[0])
		return;
	DIR *d = opendir(base_dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			char p[PATH_MAX + 300];
			snprintf(p, sizeof(p), "%s/%s", base_dir, de->d_name);
			struct stat st;
			if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
				sweep_state_dir(p);
		}
		closedir(d);
	}
	/* A `rung run`'s hand-off child may still be filling a store's spare disk images
	 * (runtime/diskimg.c) after the CLI returned: a file that appears behind the removal
	 * makes it fail with ENOTEMPTY, and the next try takes it. */
	struct rung_err err = {0};
	int r = -ENOTEMPTY;
	for (int i = 0; i < 40 && r == -ENOTEMPTY; i++) {
		if (i)
			usleep(50000);
		err = (struct rung_err){0};
		r = rung_rm_rf(base_dir, &err);
	}
	if (r < 0)
		fprintf(stderr, "spine teardown: rm -rf %s: %s\n", base_dir, err.msg);
	base_dir[0] = '\0';
}

struct rung_router *spine_router(char **state_dir)
{
	return spine_router_with(NULL, state_dir);
}

struct rung_router *spine_router_at(const char *state_dir, const struct rung_router_opts *host)
{
	char ap[PATH_MAX];
	agent_path(ap, sizeof(ap));
	struct rung_router_opts o = host ? *host : (struct rung_router_opts){0};
	o.state_dir = state_dir;
	if (!o.agent_path)
		o.agent_path = ap;
	rung_test_router_env(&o);
	struct rung_router *r = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rung_router_new(&o, &r, &err) == 0, "router on %s: %s", state_dir, err.msg);
	return r;
}

struct rung_router *spine_router_with(const struct rung_router_opts *host, char **state_dir)
{
	ck_assert_msg(base_dir[0], "no base dir (fixture failed)");
	if (spine_vm()) { /* the one store that holds the vm test image */
		const char *vs = getenv("RUNG_TEST_VM_STORE");
		ck_assert_msg(vs && *vs, "RUNG_TEST_RUNG=vm needs $RUNG_TEST_VM_STORE");
		struct rung_router_opts o = host ? *host : (struct rung_router_opts){0};
		o.state_dir = vs;
		rung_test_router_env(&o);
		struct rung_router *r = NULL;
		struct rung_err err = {0};
		ck_assert_msg(rung_router_new(&o, &r, &err) == 0, "%s", err.msg);
		if (state_dir)
			*state_dir = strdup(vs);
		return r;
	}
	char *p;
	ck_assert_int_ge(asprintf(&p, "%s/state-XXXXXX", base_dir), 0);
	ck_assert_ptr_nonnull(mkdtemp(p));
	chmod(p, 0711);
	struct rung_router_opts o = host ? *host : (struct rung_router_opts){0};
	o.agent_path = NULL; /* the build's, whatever host says */
	struct rung_router *r = spine_router_at(p, &o);
	if (state_dir)
		*state_dir = p;
	else
		free(p);
	return r;
}

struct rung_sandbox *spine_acquire(struct rung_router *r, const char *scope, const char *thread,
				   const char *kind, const struct rung_spec *spec, bool *created)
{
	struct rung_spec def, vm;
	bool own = !spec;
	if (own) {
		rung_spec_init(&def);
		def.kind = strdup(kind);
		spec = &def;
	}
	if (spine_vm() && !spec->image) { /* the same test, on the vm rung (a shallow copy) */
		vm = *spec;
		vm.image = (char *)SPINE_VM_IMAGE;
		vm.isolation = RUNG_ISO_VM;
		vm.limits.memory_bytes = 256ull << 20;
		spec = &vm;
	}
	struct rung_key key = {scope, thread, "agent"};
	struct rung_sandbox *sb = NULL;
	bool c = false;
	struct rung_err err = {0};
	int rc = rung_acquire(r, &key, spec, &sb, &c, &err);
	if (own)
		rung_spec_release(&def);
	ck_assert_msg(rc == 0, "acquire %s/%s: %s", scope, thread, err.msg);
	if (created)
		*created = c;
	return sb;
}

int spine_sh(struct rung_sandbox *sb, const char *script, struct rung_exec_res *res)
{
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct rung_exec_req req = {.argv = argv, .timeout_ms = 30000};
	struct rung_err err = {0};
	int rc = rung_exec(sb, &req, res, &err);
	ck_assert_msg(rc == 0, "exec '%s': %s", script, err.msg);
	return res->exit_code;
}

char *spine_sh_ok(struct rung_sandbox *sb, const char *script)
{
	struct rung_exec_res res;
	int code = spine_sh(sb, script, &res);
	ck_assert_msg(code == 0, "'%s' exited %d (signal %d): %s", script, code, res.signal,
		      res.errout);
	char *out = res.out;
	res.out = NULL;
	rung_exec_res_release(&res);
	return out;
}

void spine_meta(struct rung_router *r, const char *id, struct rt_meta *m)
{
	struct rung_err err = {0};
	ck_assert_msg(rt_store_meta_read(&r->store, id, m, &err) == 0, "%s", err.msg);
}

bool spine_pid_alive(pid_t pid)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	char *txt = spine_slurp(p, NULL);
	if (!txt)
		return false;
	char *c = strrchr(txt, ')');
	bool alive = c && c[1] && c[2] != 'Z' && c[2] != 'X';
	free(txt);
	return alive;
}

bool spine_wait_gone(pid_t pid, unsigned ms)
{
	for (unsigned t = 0; t <= ms; t += 20) {
		if (!spine_pid_alive(pid))
			return true;
		usleep(20000);
	}
	return false;
}

int spine_count_cmdline(const char *needle)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char p[300];
		size_t len = 0;
		snprintf(p, sizeof(p), "/proc/%s/cmdline", de->d_name);
		char *c = spine_slurp(p, &len);
		if (!c)
			continue;
		for (size_t i = 0; i < len; i++)
			if (!c[i])
				c[i] = ' ';
		if (strstr(c, needle) && spine_pid_alive(atoi(de->d_name)))
			n++;
		free(c);
	}
	closedir(d);
	return n;
}

int spine_store_entries(const char *state_dir)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/sandboxes", state_dir);
	return rung_test_count_entries(p);
}

char *spine_slurp(const char *path, size_t *len)
{
	char *out = NULL;
	struct rung_err err = {0};
	if (rung_file_load(AT_FDCWD, path, 64 << 20, &out, len, &err) < 0)
		return NULL;
	return out;
}

int spine_fake_pid1(void)
{
	enum { ERR_FD = 4, GO_FD = 6 }; /* agent/init.c's */
	uint32_t len = 0;
	char c = 0;
	if (rung_read_exact(GO_FD, &len, sizeof(len)) < 0 || len > (1u << 24))
		return 126;
	while (len--) /* the setup */
		if (rung_read_exact(GO_FD, &c, 1) < 0)
			return 126;
	while (c != 'c') /* a 'd' may come first */
		if (rung_read_exact(GO_FD, &c, 1) < 0)
			return 126;
	struct rung_err e = {0};
	rung_err_set(&e, EPROTO, "%s", SPINE_FAKE_PID1);
	rung_write_all(ERR_FD, &e, sizeof(e));
	return 127;
}
