/* agent/agent.h: rung-agent internals (pid 1 of every sandbox). */
#ifndef RUNG_AGENT_H
#define RUNG_AGENT_H

#include "common/proto.h"
#include "common/util.h"

/* Serve one connection: one request, then return. Runs in a forked handler process. */
void agent_handle(int fd);
/* exec: runs the command, streams output, sends EXIT. */
int agent_exec(int fd, const struct rung_frame *req, struct rung_err *err);
/* write_file / read_file, confined to "/" with openat2(RESOLVE_IN_ROOT). */
int agent_write_file(int fd, const struct rung_frame *req, struct rung_err *err);
int agent_read_file(int fd, const struct rung_frame *req, struct rung_err *err);
/* Open path for the agent, confined to the root. flags as openat; mkdirs: create parents. */
int agent_open_confined(const char *path, int flags, mode_t mode, int mkdirs, struct rung_err *err);
/*
 * Start x's command (new session, default signal dispositions, stdio from in/out/errfd, in
 * x->cwd, PATH searched as execvp does) without copying our memory. Returns its pid, or -1
 * with errno when no process could be made. *exec_err: 0, the errno of a failed exec, or
 * minus the errno of a failed chdir to x->cwd (the child has then exited with 127).
 */
pid_t agent_spawn(const struct rung_proto_exec *x, int in, int out, int errfd, int *exec_err);
/* Kill every descendant of this process (it is a child subreaper) and reap them. */
void agent_kill_descendants(void);
/* pid 1: kill every process below us that is not below one of the live handlers. */
void agent_kill_orphans(const pid_t *handlers, size_t n);
/* Privileges (privs.c): a VM's init drops from real root to the agent uid; then every agent
 * keeps only what it needs (CAP_SETUID, CAP_SETGID, CAP_KILL); a handler takes fsuid/fsgid 0
 * and stays dumpable. */
int agent_privs_vm_drop(struct rung_err *err);
int agent_privs_settle(struct rung_err *err);
int agent_privs_handler(struct rung_err *err);
/* Accept loop on a listening socket; forks a handler per connection; reaps children. */
int agent_serve(int listen_fd);

#endif
