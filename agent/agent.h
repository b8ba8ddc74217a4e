/* agent/agent.h: rung-agent internals (pid 1 of every sandbox). */
#ifndef RUNG_AGENT_H
#define RUNG_AGENT_H

#include "common/proto.h"
#include "common/util.h"

/* Serve one request of a connection. Runs in a forked handler process. patient: wait for
 * the request without a deadline (--init's first connection, a kept one). Returns true when
 * the connection serves another request (an exec that asked to keep it, ended cleanly). */
bool agent_handle(int fd, bool patient);
/* The same for a request already read (released here). */
bool agent_dispatch(int fd, struct rung_frame *req);
/* exec: runs the command, streams output, sends EXIT. 1: the host asked to keep the
 * connection and it is fit for another request; 0: done with it; <0: an error to send. */
int agent_exec(int fd, const struct rung_frame *req, struct rung_err *err);
/* write_file / read_file, confined to "/" with openat2(RESOLVE_IN_ROOT). */
int agent_write_file(int fd, const struct rung_frame *req, struct rung_err *err);
int agent_read_file(int fd, const struct rung_frame *req, struct rung_err *err);
/* Open path for the agent, confined to the root. flags as openat; mkdirs: create parents. */
int agent_open_confined(const char *path, int flags, mode_t mode, int mkdirs, struct rung_err *err);
/*
 * Start x's command (new session, default signal dispositions, stdio from in/out/errfd, in
 * x->cwd, under x->seccomp when it has one, PATH searched as execvp does) without copying our
 * memory. Returns its pid, or -1 with errno when no process could be made. se->err: 0, or the
 * errno of the step that failed (the child has then exited with 127): se->step "cwd" (the
 * chdir to x->cwd), "seccomp" (loading x->seccomp), NULL (the exec).
 */
struct agent_start_err {
	int err;
	const char *step;
};
pid_t agent_spawn(const struct rung_proto_exec *x, int in, int out, int errfd,
		  struct agent_start_err *se);
/* The line a command that could not start shows on its stderr (at most n bytes). */
void agent_start_error_msg(const struct rung_proto_exec *x, const struct agent_start_err *se,
			   char *msg, size_t n);
/* Kill every descendant of this process (it is a child subreaper) and reap them. */
void agent_kill_descendants(void);
/* pid 1: kill every process below us that is not below one of the live handlers. */
void agent_kill_orphans(const pid_t *handlers, size_t n);
/* Privileges (privs.c): a VM's init drops from real root to the agent uid, a process or
 * container sandbox's pid 1 (init.c) from root of its user namespace; then every agent
 * keeps only what it needs (CAP_SETUID, CAP_SETGID, CAP_KILL); a handler takes fsuid/fsgid 0
 * and stays dumpable. */
int agent_privs_vm_drop(struct rung_err *err);
int agent_privs_ns_drop(struct rung_err *err);
/* rung-agent --init (init.c): pid 1 of a process or container sandbox, exec'd right after
 * its clone: reads its setup (common/pid1.h) from fd 6, builds its root, drops to the agent
 * uid, loads the seccomp filter, waits to be in its cgroup; *first_fd is 7 or -1. Writes a
 * failure's rung_err to fd 4 and exits; on success fd 4 is closed (the runtime's EOF). */
void agent_ns_init(int *first_fd);
int agent_privs_settle(struct rung_err *err);
int agent_privs_handler(struct rung_err *err);
/* Accept loop on a listening socket; forks a handler per connection; reaps children.
 * first_fd (-1: none): a connection made before we ran, served by a handler started at once. */
int agent_serve(int listen_fd, int first_fd);
/* RESTORED (restored.c): a VM's init starts the fixer before dropping its capabilities; the
 * handler decodes the request and has the fixer apply it (EOPNOTSUPP without a fixer). */
int agent_fixer_start(int listen_fd, struct rung_err *err);
int agent_restored(int fd, const struct rung_frame *req, struct rung_err *err);
extern int agent_fixer_fd;
extern pid_t agent_fixer_pid;
/* A vm guest's command cgroup's cgroup.procs (vm-cgroup.c, agent/vm-init.h's rung.pids),
 * written by each command before its execve (spawn.c); -1 on the other rungs, whose cgroup
 * is the host's. */
extern int agent_cmd_cgroup_fd;
/* Its pids.current (for STATS): false without the group. */
bool agent_cmd_cgroup_pids(uint64_t *out);
/* pid 1's memfd whose record lock serialises background process starts (procs.c) */
extern int agent_start_lock_fd;

/* In pid 1, once its OOM score is what it will be: where it is not pinned at -1000 (a host
 * root without CAP_SYS_RESOURCE could not), each command starts at 1000 instead of 0, so that
 * an OOM kill in a full sandbox takes a command (or what it started), never pid 1 or a
 * handler, whose score stays pid 1's. */
void agent_spawn_oom_check(void);
/* signal(sig, handler) in the agent: every change of a disposition after the process's first
 * spawn goes through it, so that the next command starts with it reset (spawn.c). */
void agent_spawn_signal(int sig, void (*handler)(int));
/* As agent_spawn; fd3 (-1: none) becomes the command's fd 3; with ctty, in is a terminal
 * that becomes the command's controlling one. */
pid_t agent_spawn_tty(const struct rung_proto_exec *x, int in, int out, int errfd, int fd3,
		      bool ctty, struct agent_start_err *se);
/* Kill every descendant of ours except `keep` itself (its descendants too), and reap. */
void agent_kill_descendants_except(pid_t keep);

/* ---- background processes (procs.c, keeper.c, replay.c; docs/procs.md) ---- */
struct agent_replay_chunk {
	uint64_t off; /* of data[0] in the log */
	uint32_t len, cap;
	uint8_t stream; /* 0 stdout, 1 stderr */
	uint8_t *data;
};
struct agent_replay {
	struct agent_replay_chunk *c;
	size_t head, n, cap_chunks, first[2];
	uint64_t cap, end, kept[2], dropped[2];
};
typedef int (*agent_replay_fn)(void *ud, int stream, uint64_t off, const void *data, size_t len);
void agent_replay_init(struct agent_replay *r, uint64_t cap);
void agent_replay_release(struct agent_replay *r);
int agent_replay_append(struct agent_replay *r, int stream, const void *data, size_t len);
/* Every buffered byte at or after since, in order; *dropped: those no longer buffered. */
int agent_replay_read(const struct agent_replay *r, uint64_t since, agent_replay_fn fn, void *ud,
		      uint64_t *dropped);

#define AGENT_PROC_SOCK_PREFIX "rung-proc-"
#define AGENT_PROC_MAX_LIVE 64
#define AGENT_PROC_MAX_EXITED 64
/* A handler's PROC_* / SESSION_RUN request: start becomes the keeper (never returns on
 * success), the others are relayed to the keeper of their handle. */
int agent_proc_request(int fd, const struct rung_frame *req, struct rung_err *err);
/* PORT_CONNECT: connect to a loopback TCP port and relay (agent/ports.c) */
int agent_port_connect(int fd, const struct rung_frame *req, struct rung_err *err);
/* agent/fs.c: FS_* requests (docs/files.md) */
int agent_fs_request(int fd, const struct rung_frame *req, struct rung_err *err);
/* agent/tree.c: TREE_PUT, TREE_GET (`rung cp`, docs/files.md) */
int agent_tree_request(int fd, const struct rung_frame *req, struct rung_err *err);
/* agent/stats.c: STATS (a path, as FS_STAT takes it) */
int agent_stats(int fd, const struct rung_frame *req, struct rung_err *err);
/* The keeper: start p's process, answer the host on fd, then serve its socket until killed.
 * Never returns once the process started. */
int agent_keeper_run(int fd, struct rung_proto_proc *p, int listen_fd, const char *handle,
		     struct rung_err *err);
/* Connect to the keeper of handle (its credentials checked): fd, or -ENOENT. */
int agent_keeper_connect(const char *handle, struct rung_err *err);

/* ---- host callbacks (callbacks.c, call.c; docs/callbacks.md) ---- */
struct agent_cb {
	int fd; /* our end of the command's channel; -1: none */
	struct rung_buf out; /* answers not yet read by the command */
	size_t out_off;
};
/* With x->callbacks: a socketpair (*child_fd becomes the command's fd 3), the tools put in
 * place, x->env extended. Without: cb->fd and *child_fd are -1. */
int agent_cb_open(struct agent_cb *cb, struct rung_proto_exec *x, int *child_fd,
		  struct rung_err *err);
short agent_cb_events(const struct agent_cb *cb);
int agent_cb_ready(struct agent_cb *cb, short revents, int sock, struct rung_err *err);
void agent_cb_answer(struct agent_cb *cb, const struct rung_frame *f);
void agent_cb_close(struct agent_cb *cb);
/* rung-call NAME [JSON]: the sandbox-side command line tool (this binary by that name);
 * fdv: $RUNG_CALLBACK_FD. */
int agent_call_main(int argc, char **argv, const char *fdv);

#endif
