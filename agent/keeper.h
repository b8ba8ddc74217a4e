/* agent/keeper.h: a keeper's state (keeper.c), shared with its shell sessions (session.c). */
#ifndef RUNG_AGENT_KEEPER_H
#define RUNG_AGENT_KEEPER_H

#include "agent/agent.h"

/* A shell session: the status pipe, the run in progress. */
struct keeper_session {
	bool on;
	int status_fd;    /* the read end of the shell's fd 3; -1 once closed */
	char dir[128];    /* where the runs' command files go */
	uint64_t nrun;
	int run_fd;       /* the host's connection of the run in progress, -1 none */
	uint64_t run_t0, run_deadline, run_kill_at;
	bool run_timed_out;
	int phase;        /* 0 running, 1 interrupted, 2 killed (the shell excepted) */
	char sbuf[32];    /* a status line being read */
	size_t slen;
};

#define MAX_CLIENTS 64
#define STDIN_PENDING_MAX (1u << 20)
#define SEND_TIMEOUT_S 5

enum client_kind { CL_FOLLOW, CL_WAIT };

struct client {
	int fd;
	enum client_kind kind;
	bool attach;       /* a follower that also sends STDIN/RESIZE frames */
	uint64_t deadline; /* CL_WAIT: ms, 0 none */
	uint64_t dropped;  /* CL_FOLLOW: bytes at or after its since that were not buffered */
};

struct keeper {
	char handle[RUNG_PROTO_HANDLE_LEN + 1];
	struct rung_proto_proc *p;
	int lfd;
	pid_t pid;
	int out_fd, err_fd; /* pipes, or the pty master as out_fd (err_fd -1) */
	int in_fd;          /* stdin pipe's write end, the pty master, or -1 once closed */
	int master;         /* the pty master, -1 without */
	bool in_eof_pending;
	struct rung_buf in_pend;
	size_t in_off;
	struct agent_replay log;
	bool exited;
	int status;
	uint64_t started_ms;
	struct client cl[MAX_CLIENTS];
	size_t ncl;
	struct keeper_session ses; /* a shell session's side channel (session.c) */
};


/* keeper.c */
int keeper_send_chunk(void *ud, int stream, uint64_t off, const void *data, size_t len);
void keeper_pump_fd(struct keeper *k, int *fd, int stream);
int keeper_start_process(struct keeper *k, int fd3, struct rung_err *err);
int keeper_stdin_queue(struct keeper *k, const uint8_t *d, size_t n, bool eof, struct rung_err *err);
void keeper_stdin_flush(struct keeper *k);
/* session.c */
int keeper_session_spawn(struct keeper *k, struct rung_err *err);
/* A SESSION_RUN request on fd (kept until the run ends, or answered now). */
void keeper_session_run(struct keeper *k, int fd, const struct rung_proto_proc *q);
void keeper_session_on_status(struct keeper *k);
/* The run's timeout; returns the poll timeout it needs (ms), or 1000. */
int keeper_session_tick(struct keeper *k);
/* The shell exited: a run in progress ends with -EPIPE. */
void keeper_session_ended(struct keeper *k);
/* At kill: the command files and their directory go. */
void keeper_session_cleanup(struct keeper *k);

#endif
