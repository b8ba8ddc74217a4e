/* tests/lib/cgroup.h: helpers shared by the real-cgroup suites (v1 and v2). */
#ifndef RUNG_TESTS_LIB_CGROUP_H
#define RUNG_TESTS_LIB_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup/cgroup.h"

/*
 * A child that waits on a pipe before running its body, so the test can put it in a
 * group first. body writes what it wants the test to know to out_fd and returns its
 * exit status.
 */
typedef int (*cgt_body_fn)(int out_fd, long arg);
struct cgt_child {
	pid_t pid;
	int go_fd;  /* write a byte: the child starts its body */
	int out_fd; /* the child's reports */
};
int cgt_spawn(struct cgt_child *c, cgt_body_fn body, long arg);
void cgt_go(struct cgt_child *c);
void cgt_child_close(struct cgt_child *c);
/* Read one int the child reported (-1 on EOF/timeout after ms). */
long cgt_read_long(struct cgt_child *c, int ms);
/* waitpid with a deadline; returns the status, or -1 (after SIGKILLing it) on timeout. */
int cgt_wait(pid_t pid, int ms);

/* Bodies. */
int cgt_body_sleep(int out_fd, long arg); /* pause() forever */
int cgt_body_busy(int out_fd, long arg);  /* spin forever */
int cgt_body_alloc(int out_fd, long mib); /* touch mib MiB, report progress */
int cgt_body_forks(int out_fd, long max); /* fork sleepers until fork fails: report n, errno */
int cgt_body_daemon(int out_fd,
		    long arg); /* double-fork a setsid daemon, report its pid, spin forking */

/* CPU time (ns) of a live process (clock_getcpuclockid). */
uint64_t cgt_cpu_ns(pid_t pid);
/* Whether pid is in state D/R/S (alive, not a zombie). */
bool cgt_alive(pid_t pid);

/* "rung-test-<runner pid>": set by the unchecked fixture, inherited by forked tests. */
const char *cgt_parent(void);
void cgt_parent_init(void);
/* Destroy "<parent>" (and everything under it) in root; used by unchecked teardowns. */
void cgt_parent_destroy(const char *root);
/* A path exists. */
bool cgt_exists(const char *path);

/*
 * Test bodies against a real cgroup root (v1 or v2), shared by check_cgroup_v1.c and
 * check_cgroup_v2.c. Each uses a group "<cgt_parent()>/<case>" and removes it; the
 * suites' unchecked teardown removes "<cgt_parent()>" even when a case fails.
 */
void cgt_case_lifecycle(const char *root);
void cgt_case_oom(const char *root);
void cgt_case_pids(const char *root);
void cgt_case_cpu(const char *root);
void cgt_case_freeze(const char *root);
void cgt_case_kill_tree(const char *root);
void cgt_case_exec_groups(const char *root);
void cgt_case_leak(const char *root);
void cgt_case_gc(const char *root);
void cgt_case_clone_into(const char *root);
#endif
