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
/* Kill every descendant of this process (it is a child subreaper) and reap them. */
void agent_kill_descendants(void);
/* Accept loop on a listening socket; forks a handler per connection; reaps children. */
int agent_serve(int listen_fd);

#endif
