/* tests/lib/testutil.h: helpers shared by the Check suites. */
#ifndef RUNG_TESTS_LIB_TESTUTIL_H
#define RUNG_TESTS_LIB_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * A test whose facility is truly absent (no /dev/kvm, not root, ...) skips
 * loudly: a line on stderr and a line in $RUNG_BUILD_DIR/skips.log, which
 * check_main counts and prints at the end. It never passes silently.
 */
void rung_test_skip(const char *test, const char *why);
#define RUNG_SKIP(why)                                                                             \
	do {                                                                                       \
		rung_test_skip(__func__, why);                                                     \
		return;                                                                            \
	} while (0)
/* A Check test that runs one case of a shared case file against this suite's environment:
 * RUNG_CASE_TEST(test_x, procs_cases_run, &env, PROCS_LOGS). */
#define RUNG_CASE_TEST(name, run, envp, c)                                                         \
	START_TEST(name) { run(envp, c); }                                                         \
	END_TEST

#define RUNG_REQUIRE_ROOT()                                                                        \
	do {                                                                                       \
		if (geteuid() != 0)                                                                \
			RUNG_SKIP("needs root (CI runs as root)");                                 \
	} while (0)

/* build/ directory holding rung, rung-agent (from $RUNG_BUILD_DIR, else ./build). */
const char *rung_test_build_dir(void);
/* The router settings from this test program's environment (RUNG_VM_KERNEL, RUNG_UID_REGISTRY,
 * ... as the nested stage exports them; RUNG_DNS_UPSTREAM and RUNG_NET_POOL as the egress
 * world sets them for the programs it runs), read as a program's main reads them: the library
 * reads no environment. Fails the test on a bad value. */
struct rung_router_opts;
void rung_test_router_env(struct rung_router_opts *o);
/* A fresh temporary directory under /tmp (mode 0711); caller removes it. Its path is also
 * appended to rung_test_tmpdirs_list when that names a file (the runner's: tests/lib/main.c
 * removes and names any left after a suite, e.g. by a test that failed before its cleanup). */
char *rung_test_tmpdir(const char *tag);
extern char rung_test_tmpdirs_list[64];
/* Entries of dir not starting with a dot; -1 if it cannot be opened. */
int rung_test_count_entries(const char *dir);
/* Count of open fds of this process, entries in /proc/self/mountinfo, processes on the host. */
int rung_test_count_fds(void);
int rung_test_count_mounts(void);
int rung_test_count_procs(void);
/* How far a sampled pids.current may pass pids.max during a fork bomb: the pids controller
 * charges a fork before it checks the limit and takes a refused charge back after, so a read
 * can see one in-flight refused fork per running task: the host's CPUs. */
unsigned rung_test_pids_inflight(void);
/* Open fds of process pid whose link target is not `skip` (NULL: none skipped) and starts with
 * `prefix` (NULL: any); -1 if its /proc/PID/fd cannot be read. */
int rung_test_count_fds_of(pid_t pid, const char *skip, const char *prefix);
/* A shell snippet run inside a sandbox: prints how many processes its /proc lists (zombies
 * included), kernel threads left out. On the vm rung /proc is the guest kernel's, whose
 * workers come and go on their own (a kworker started under load lingers for minutes); a
 * kernel thread is told by PF_KTHREAD (0x00200000) in stat's 9th field, which no user process
 * can set. The counting shell itself is counted. */
#define RUNG_TEST_PROCS_SH                                                                         \
	"n=0; for p in /proc/[0-9]*; do read -r l < $p/stat 2>/dev/null || continue; "           \
	"set -- ${l##*) }; [ $(($7 / 2097152 % 2)) = 1 ] || n=$((n + 1)); done; echo $n"
/* Threads of process pid; -1 if it is gone. */
int rung_test_count_tasks(pid_t pid);
/* The value of field ("Uid:\t", "Seccomp:\t", "CapBnd:\t": hex for the Cap fields) in
 * /proc/PID/status; fails the test when it cannot be read. */
long rung_test_status_field(int pid, const char *field);
/* Whether this process has capability cap (a CAP_* number) in its effective set. */
bool rung_test_has_cap(int cap);
/* The OOM score a command starts with on a shared-kernel rung: 0 where the host pins pid 1's
 * at -1000 (its root has CAP_SYS_RESOURCE), else 1000 (agent/spawn.c, agent_spawn_oom_check). */
int rung_test_cmd_oom_adj(void);
/*
 * Run a program by argv (found on PATH), no shell: its exit status (128 + signal if killed,
 * -1 if it could not start). With out != NULL, its stdout is read into out (NUL-terminated,
 * at most len - 1 bytes; the rest is drained). stdin is /dev/null.
 */
int rung_test_run(const char *const *argv, char *out, size_t len);
/* The same with its stderr read into out too, interleaved as written. */
int rung_test_run_all(const char *const *argv, char *out, size_t len);
/* A test's own shell script run as `sh -c SCRIPT sh ARG...`: the arguments reach it as $1, $2,
 * ... and are never pasted into its text. NULL-terminated arguments; status as rung_test_run. */
int rung_test_sh(const char *script, ...) __attribute__((sentinel));
/* A store's leftovers in the cgroup hierarchies, for a test's teardown before it deletes the
 * store (gc leaves a create's debris younger than its 60 s grace): for every sandbox directory
 * of state_dir, its group (rung-<store>/<id>, in every hierarchy) destroyed as the runtime
 * does (rt_cgroup_destroy: the processes still in it killed and waited for), then the store's
 * group if that left it empty. The groups removed (one per hierarchy). */
int rung_test_cgroup_debris_drop(const char *state_dir);
/* Cgroup directories of sandbox id on any hierarchy (v1 or v2): how many; the first max of
 * them into out (NULL: counted only). */
size_t rung_test_cgroup_dirs(const char *id, char (*out)[4096], size_t max);
/* Sandbox id's pids.current, read from its cgroup (0 where it has no pids counter). */
uint64_t rung_test_cgroup_pids(const char *id);
/* To stderr, for a failure's report: the directory of sandbox id's cgroup that counts its
 * pids, its pids.current and each process it lists (/proc/PID/stat: pid, comm, state, ppid). */
void rung_test_cgroup_dump(const char *id);
/* Process pid's group as its /proc/PID/cgroup says ("id:controllers:path" lines): the path on
 * the v1 hierarchy holding controller ctl ("memory"), or on v2's "0::" line (ctl NULL); into
 * out, false where no line names it. */
bool rung_test_proc_cgroup(pid_t pid, const char *ctl, char *out, size_t n);
/* A child in a user namespace of its own mapping ids 0..65535 to 100000..165535, waiting: an
 * open fd (O_CLOEXEC) of its /proc/PID/ns/user; its pid in *holder, for the caller to kill
 * and reap. Fails the test when it cannot be made. */
int rung_test_userns(pid_t *holder);
/* Remove a tree (no links followed, never below a mount point: what is mounted inside it,
 * and the directory it is mounted on, stay); 0 or -1. */
int rung_test_rmtree(const char *path);

#endif
