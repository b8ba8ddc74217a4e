/*
 * tests/lib/sandbox.h: helpers for the spine's integration suites (real sandboxes).
 * Each tcase gets a base directory (unchecked fixture, made in the runner before the forks);
 * each test makes its own state dir under it. The unchecked teardown runs in the runner even
 * when a test failed or timed out: it disposes every sandbox left in every state dir under the
 * base, then removes the base. Nothing of a failed test outlives the tcase.
 */
#ifndef RUNG_TESTS_LIB_SANDBOX_H
#define RUNG_TESTS_LIB_SANDBOX_H

#include <check.h>
#include <stdbool.h>

#include "runtime/rt-internal.h"

/*
 * RUNG_TEST_RUNG=vm (with RUNG_TEST_VM_STORE, a store holding SPINE_VM_IMAGE): the protocol-
 * level suites run on the vm rung (the nested stage does, in L1): spine_router opens that
 * store and spine_acquire turns an image-less spec into a vm spec of that image.
 */
#define SPINE_VM_IMAGE "rung/vmtest:py"
bool spine_vm(void);

void spine_base_setup(void);
void spine_base_teardown(void);
/* build/rung run with args (NULL-terminated) and stdin_text (NULL: empty), PATH alone in its
 * environment: its exit status (or 128+signal), stdout and stderr (malloc'd). */
struct spine_run {
	int status; /* exit status, or 128+signal */
	char *out, *err;
};
void spine_cli_run(struct spine_run *res, const char *stdin_text, const char *const *args);
/* The same with env (NULL-terminated KEY=VALUE, at most 14) after PATH. */
void spine_cli_run_env(struct spine_run *res, const char *stdin_text, const char *const *args,
		       const char *const *env);
/* The same, with prep (NULL: none) called in the child just before its execve of build/rung
 * (a chroot, a seccomp filter: the host rung runs on); prep returns false to fail (126). */
void spine_cli_run_prep(struct spine_run *res, const char *stdin_text, const char *const *args,
			const char *const *env, bool (*prep)(void));
void spine_run_release(struct spine_run *r);
/* A tcase added to s, tagged "root", with timeout_s and the base fixture above. */
TCase *spine_tcase(Suite *s, const char *name, int timeout_s);
/* The tcase's base directory (valid between the fixtures). */
const char *spine_base(void);

/* A router on a fresh state dir under the base (*state_dir: malloc'd path). */
struct rung_router *spine_router(char **state_dir);
/* The same with host settings (rung_router_opts: cgroup_root, rung_path, ...); the
 * environment's fill what host leaves unset (rung_test_router_env). */
struct rung_router *spine_router_with(const struct rung_router_opts *host, char **state_dir);
/* A router (asserting success) on state_dir with host's settings (NULL: none), its agent
 * host's agent_path or else the build's rung-agent; the environment's fill the rest. */
struct rung_router *spine_router_at(const char *state_dir, const struct rung_router_opts *host);
/* acquire (asserting success) with key (scope, thread, "agent") and kind; spec may be NULL. */
struct rung_sandbox *spine_acquire(struct rung_router *r, const char *scope, const char *thread,
				   const char *kind, const struct rung_spec *spec, bool *created);
/* Run /bin/sh -c script; asserts the exec itself worked; returns the exit code. */
int spine_sh(struct rung_sandbox *sb, const char *script, struct rung_exec_res *res);
/* Same, asserting exit 0; returns stdout (malloc'd). */
char *spine_sh_ok(struct rung_sandbox *sb, const char *script);
/* The sandbox's metadata as stored (asserts). */
void spine_meta(struct rung_router *r, const char *id, struct rt_meta *m);
/* Is pid alive (not gone, not a zombie)? */
bool spine_pid_alive(pid_t pid);
/* Wait up to ms for pid to be gone; true if it is. */
bool spine_wait_gone(pid_t pid, unsigned ms);
/* How many host processes have cmdline containing needle. */
int spine_count_cmdline(const char *needle);
/* `check_rung --init` (main.c), run as a sandbox's rung-agent: a pid 1 that reads its setup,
 * waits for the runtime's 'c' (it may serve) and then reports a failed setup (its message
 * names SPINE_FAKE_PID1), as a pid 1 that failed after the runtime wrote its metadata. */
#define SPINE_FAKE_PID1 "fake pid 1 failed after its 'c'"
int spine_fake_pid1(void);
/* Entries in <state>/sandboxes. */
int spine_store_entries(const char *state_dir);
/* A file's whole content (malloc'd), or NULL. */
char *spine_slurp(const char *path, size_t *len);

#endif
