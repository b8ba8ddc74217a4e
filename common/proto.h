/*
 * common/proto.h: the agent protocol, one framing for all three rungs.
 *
 * A frame is an 8-byte header followed by a payload:
 *   u16 magic 0x5247 ("RG"), u8 version (RUNG_PROTO_VERSION), u8 type, u32 payload length
 * (all big-endian). The payload is a sequence of TLV fields: u16 tag, u32 length, bytes.
 * Strings carry no NUL; integers are u64 big-endian. A payload is at most RUNG_FRAME_MAX.
 *
 * One connection carries one operation (process/container: a Unix socket connection;
 * vm: one session on the virtio channel). The host sends a request frame and, for exec,
 * STDIN frames then STDIN_EOF; the agent answers with STDOUT/STDERR frames and ends with
 * EXIT, or with FILE_DATA frames and RESULT, or with ERROR. Everything decoded here is
 * treated as hostile: bounded lengths, validated tags, no trust in counts.
 */
#ifndef RUNG_COMMON_PROTO_H
#define RUNG_COMMON_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define RUNG_PROTO_MAGIC 0x5247
#define RUNG_PROTO_VERSION 2
#define RUNG_FRAME_HDR 8
#define RUNG_FRAME_MAX (1u << 20)
#define RUNG_PROTO_MAX_ARGS 4096
#define RUNG_PROTO_MAX_STR 65536
#define RUNG_PROTO_STDIN_MAX (64u << 20) /* an exec's stdin, in all */
/*
 * Inside every sandbox, rung-agent and its handlers run as this uid and gid (fsuid/fsgid 0,
 * so the files they write are root's, as the command's are), holding only CAP_SETUID,
 * CAP_SETGID and CAP_KILL; commands run as uid 0 with no capability at all. A command can
 * therefore not signal, ptrace or write /proc files of the agent side.
 */
#define RUNG_AGENT_UID 65533

enum rung_msg {
	RUNG_MSG_PING = 1,
	RUNG_MSG_PONG = 2,
	RUNG_MSG_EXEC = 10,
	RUNG_MSG_STDIN = 11,
	RUNG_MSG_STDIN_EOF = 12,
	RUNG_MSG_STDOUT = 13,
	RUNG_MSG_STDERR = 14,
	RUNG_MSG_EXIT = 15,
	RUNG_MSG_SIGNAL = 16,
	RUNG_MSG_WRITE_FILE = 20,
	RUNG_MSG_READ_FILE = 21,
	RUNG_MSG_FILE_DATA = 22,
	RUNG_MSG_FILE_END = 23,
	RUNG_MSG_RESULT = 40,
	RUNG_MSG_ERROR = 41,
	/* v2: background processes, terminals, shell sessions (docs/procs.md) */
	RUNG_MSG_PROC_START = 50,
	RUNG_MSG_PROC_LIST = 51,
	RUNG_MSG_PROC_INFO = 52,
	RUNG_MSG_PROC_LOGS = 53,
	RUNG_MSG_PROC_STDIN = 54,
	RUNG_MSG_PROC_SIGNAL = 55,
	RUNG_MSG_PROC_RESIZE = 56,
	RUNG_MSG_PROC_WAIT = 57,
	RUNG_MSG_PROC_KILL = 58,
	RUNG_MSG_PROC_ATTACH = 59,
	RUNG_MSG_SESSION_RUN = 60,
	/* v2: ports (docs/ports.md): after RESULT the connection is a raw TCP byte stream */
	RUNG_MSG_PORT_CONNECT = 80,
	/* v2: file operations (docs/files.md) */
	RUNG_MSG_FS_LIST = 70,
	RUNG_MSG_FS_STAT = 71,
	RUNG_MSG_FS_REMOVE = 72,
	RUNG_MSG_FS_MKDIR = 73,
	RUNG_MSG_FS_MOVE = 74,
	RUNG_MSG_FS_ENTRY = 75, /* agent -> host: one entry of a FS_LIST / FS_STAT answer */
	RUNG_MSG_STATS = 76,    /* the agent's view: statvfs(PATH), the kernel's memory and CPU */
	/* v2: tree copies (`rung cp`, docs/files.md); file data in FILE_DATA, FILE_END ends a put */
	RUNG_MSG_TREE_PUT = 77,	  /* host -> agent: PATH, then TREE_ENTRY/FILE_DATA..., FILE_END */
	RUNG_MSG_TREE_GET = 78,	  /* host -> agent: PATH, MAX_BYTES; answered by entries, RESULT */
	RUNG_MSG_TREE_ENTRY = 79, /* either way: one entry of a tree, its data after it */
	/* v2: host callbacks (docs/callbacks.md): the bytes of an exec's callback channel */
	RUNG_MSG_CALLBACK = 90,	       /* agent -> host: what the command wrote on its fd */
	RUNG_MSG_CALLBACK_ANSWER = 91, /* host -> agent: bytes for the command to read */
	RUNG_MSG_RESTORED = 95, /* host -> agent, after a VM restore: seed, clock, name, net */
};

enum rung_tag {
	RUNG_TAG_ARGV = 1,
	RUNG_TAG_ENV = 2,
	RUNG_TAG_CWD = 3,
	RUNG_TAG_TIMEOUT_MS = 4,
	RUNG_TAG_MAX_OUTPUT = 5,
	RUNG_TAG_STDIN = 6, /* u64 1: STDIN frames follow */
	RUNG_TAG_DATA = 7,
	RUNG_TAG_EXIT_CODE = 8,
	RUNG_TAG_SIGNAL = 9,
	RUNG_TAG_FLAGS = 10,
	RUNG_TAG_DURATION_US = 11,
	RUNG_TAG_PATH = 12,
	RUNG_TAG_MODE = 13,
	RUNG_TAG_SIZE = 14,
	RUNG_TAG_ERRNO = 15,
	RUNG_TAG_MESSAGE = 16,
	RUNG_TAG_VERSION = 17,
	/* v2 */
	RUNG_TAG_HANDLE = 18,
	RUNG_TAG_NAME = 19,
	RUNG_TAG_PTY = 20,
	RUNG_TAG_ROWS = 21,
	RUNG_TAG_COLS = 22,
	RUNG_TAG_BUFFER = 23,
	RUNG_TAG_OFFSET = 24,
	RUNG_TAG_FOLLOW = 25,
	RUNG_TAG_PID = 26,
	RUNG_TAG_STATE = 27,
	RUNG_TAG_STARTED_MS = 28,
	RUNG_TAG_END_OFFSET = 29,
	RUNG_TAG_DROPPED_OUT = 30,
	RUNG_TAG_DROPPED_ERR = 31,
	RUNG_TAG_DROPPED = 32,
	RUNG_TAG_SESSION = 33,
	RUNG_TAG_EOF = 34,
	RUNG_TAG_STREAM = 35,
	RUNG_TAG_MAX_BYTES = 36, /* TREE_GET: the bound on file data, in all */
	RUNG_TAG_SECCOMP = 37,	 /* exec, PROC_START: a classic-BPF filter for the command */
	RUNG_TAG_PIDS_CUR = 38,	 /* STATS answer: a vm guest's command cgroup's pids.current */
	RUNG_TAG_KEEP = 39,	 /* exec: u64 1: the connection serves another exec after it */
	RUNG_TAG_PORT = 50,	 /* u64 1..65535 */
	RUNG_TAG_PORT_FD = 51,	 /* PORT_CONNECT: u64 1: pass the socket (Unix channel only) */
	RUNG_TAG_LAST = 52,	 /* exec: u64 1: pid 1 ends the sandbox after it (first connection) */
	/* v2: file operations */
	RUNG_TAG_FS_KIND = 40,
	RUNG_TAG_MTIME_NS = 41,
	RUNG_TAG_TARGET = 42, /* FS_MOVE: the destination; FS_ENTRY: a symlink's target */
	RUNG_TAG_UID = 43,
	RUNG_TAG_GID = 44,
	RUNG_TAG_DISK_TOTAL = 45, /* STATS answer: bytes */
	RUNG_TAG_DISK_FREE = 46,
	RUNG_TAG_MEM_TOTAL = 47,
	RUNG_TAG_MEM_AVAIL = 48,
	RUNG_TAG_CPU_US = 49,
	/* host callbacks */
	RUNG_TAG_CALLBACKS = 60, /* exec: u64 per-call byte limit: give a callback channel */
	/* RESTORED (docs/snapshots.md) */
	RUNG_TAG_SEED = 61,     /* exactly RUNG_RESTORED_SEED bytes of host randomness */
	RUNG_TAG_WALL_NS = 62,  /* u64: the host's CLOCK_REALTIME in ns */
	RUNG_TAG_HOSTNAME = 63, /* string */
	RUNG_TAG_NET_ADDR = 64, /* string "A.B.C.D/PREFIX": eth0's address */
	RUNG_TAG_NET_GW = 65,   /* string "A.B.C.D": the default route's gateway */
	RUNG_TAG_NET_DNS = 66,  /* string "A.B.C.D": the DNS proxy resolv.conf names */
};

/* EXIT flags */
#define RUNG_EXIT_TIMED_OUT (1u << 0)
#define RUNG_EXIT_TRUNC_STDOUT (1u << 1)
#define RUNG_EXIT_TRUNC_STDERR (1u << 2)
#define RUNG_EXIT_OOM (1u << 3)

struct rung_frame {
	uint8_t type;
	uint8_t version; /* set on -EPROTONOSUPPORT too: the peer's protocol version */
	uint32_t len;
	uint8_t *payload; /* malloc'd, len bytes (+1 NUL guard); NULL when len == 0 */
};
void rung_frame_release(struct rung_frame *f);

/* A growable byte buffer for building payloads. */
struct rung_buf {
	uint8_t *data;
	size_t len, cap;
	bool oom;
};
void rung_buf_release(struct rung_buf *b);
/* Raw bytes, no TLV header. */
void rung_buf_append(struct rung_buf *b, const void *v, size_t len);
void rung_buf_put_bytes(struct rung_buf *b, uint16_t tag, const void *v, size_t len);
void rung_buf_put_str(struct rung_buf *b, uint16_t tag, const char *s);
void rung_buf_put_u64(struct rung_buf *b, uint16_t tag, uint64_t v);

/* Pure: validate a header. Returns 0, or -EPROTO/-EMSGSIZE with err naming the fault, or
 * -EPROTONOSUPPORT for a frame of another protocol version (the peer is of another build:
 * err names both versions; rung_frame_hdr_version gives the peer's). */
int rung_frame_hdr_decode(const uint8_t hdr[RUNG_FRAME_HDR], uint8_t *type, uint32_t *len,
			  struct rung_err *err);
void rung_frame_hdr_encode(uint8_t hdr[RUNG_FRAME_HDR], uint8_t type, uint32_t len);
uint8_t rung_frame_hdr_version(const uint8_t hdr[RUNG_FRAME_HDR]);

/*
 * Blocking I/O with an optional deadline (CLOCK_MONOTONIC ms; 0 = none). A read that
 * hits EOF before any byte returns -ECONNRESET; mid-frame, -EPROTO ("truncated frame");
 * past the deadline, -ETIMEDOUT.
 */
int rung_frame_read(int fd, struct rung_frame *f, uint64_t deadline_ms, struct rung_err *err);
int rung_frame_write(int fd, uint8_t type, const void *payload, size_t len, struct rung_err *err);
int rung_frame_write_buf(int fd, uint8_t type, const struct rung_buf *b, struct rung_err *err);

/* TLV iteration over a payload. next() returns 1 with a field, 0 at the end, <0 if malformed. */
struct rung_tlv_iter {
	const uint8_t *p, *end;
};
void rung_tlv_init(struct rung_tlv_iter *it, const uint8_t *payload, uint32_t len);
int rung_tlv_next(struct rung_tlv_iter *it, uint16_t *tag, const uint8_t **val, uint32_t *len,
		  struct rung_err *err);
/* Field value helpers: u64 must be exactly 8 bytes; strings are copied, NUL-free, bounded. */
int rung_tlv_u64(const uint8_t *val, uint32_t len, uint64_t *out, struct rung_err *err);
int rung_tlv_str(const uint8_t *val, uint32_t len, char **out, struct rung_err *err);

/* The exec request, decoded. */
struct rung_proto_exec {
	char **argv; /* NULL-terminated, argc >= 1 */
	char **env;  /* NULL-terminated "K=V" strings */
	char *cwd;   /* NULL: the sandbox's work dir */
	uint64_t timeout_ms, max_output;
	bool has_stdin;
	uint64_t callbacks; /* 0, or the per-call byte limit of the command's callback channel */
	/* A seccomp filter (struct sock_filter[], 8 bytes each, 1..RUNG_PROTO_SECCOMP_MAX of them)
	 * the agent loads for this command alone, after no_new_privs, just before its execve;
	 * NULL: none but the sandbox's own. */
	uint8_t *seccomp;
	uint32_t seccomp_len;
	/* Keep the connection: once EXIT is sent, its handler waits for the next exec on it
	 * (honoured only without stdin and callbacks; docs/protocol.md, "Kept connections"). */
	bool keep;
	/* The sandbox ends with this exec: served on an owned sandbox's first connection, pid 1
	 * exits once EXIT is sent (docs/protocol.md); ignored anywhere else. */
	bool last;
};
#define RUNG_PROTO_SECCOMP_MAX 4096 /* instructions: the kernel's BPF_MAXINSNS */
int rung_proto_exec_encode(const struct rung_proto_exec *x, struct rung_buf *b);
int rung_proto_exec_decode(const uint8_t *p, uint32_t len, struct rung_proto_exec *x,
			   struct rung_err *err);
void rung_proto_exec_release(struct rung_proto_exec *x);

/* The exec result (EXIT frame). */
struct rung_proto_exit {
	int64_t exit_code; /* -1 when killed by a signal */
	uint32_t signal, flags;
	uint64_t duration_us;
};
void rung_proto_exit_encode(const struct rung_proto_exit *x, struct rung_buf *b);
int rung_proto_exit_decode(const uint8_t *p, uint32_t len, struct rung_proto_exit *x,
			   struct rung_err *err);

/* File requests (WRITE_FILE/READ_FILE): path, mode, size. */
struct rung_proto_file {
	char *path;
	uint32_t mode;
	uint64_t size;
};
int rung_proto_file_decode(const uint8_t *p, uint32_t len, struct rung_proto_file *x,
			   struct rung_err *err);
void rung_proto_file_release(struct rung_proto_file *x);

/* ERROR frame: errno + message. Decoding fills err with "agent: <message>". */
int rung_proto_error_send(int fd, const struct rung_err *e);
int rung_proto_error_decode(const uint8_t *p, uint32_t len, struct rung_err *err);
/* An ERROR frame in protocol version `version` (the header only differs): the answer to a
 * peer of another version, which it can decode. */
int rung_proto_error_send_version(int fd, uint8_t version, const struct rung_err *e);

/* ---- v2: background processes (common/proto-proc.c) ---- */
#define RUNG_PROTO_HANDLE_LEN 16 /* lowercase hex */
#define RUNG_PROTO_NAME_MAX 64
#define RUNG_PROTO_TTY_MAX 4096 /* rows and cols: 1..4096 */
#define RUNG_PROTO_BUFFER_MAX (64ull << 20) /* a replay buffer, per stream */

/* Every PROC_* / SESSION_RUN request, decoded; which fields a type takes is checked. */
struct rung_proto_proc {
	uint8_t type;
	char handle[RUNG_PROTO_HANDLE_LEN + 1]; /* "" when absent */
	struct rung_proto_exec x; /* PROC_START: argv, env, cwd (timeout: none) */
	char *name;
	bool pty, session, follow, eof;
	bool default_shell; /* a session started without argv: x.argv is /bin/sh, bash preferred */
	uint64_t rows, cols, buffer, since, timeout_ms, sig;
	const uint8_t *data; /* PROC_STDIN, SESSION_RUN: into the payload, not owned */
	uint32_t data_len;
};
int rung_proto_proc_encode(const struct rung_proto_proc *p, struct rung_buf *b);
int rung_proto_proc_decode(uint8_t type, const uint8_t *p, uint32_t len,
			   struct rung_proto_proc *x, struct rung_err *err);
void rung_proto_proc_release(struct rung_proto_proc *x);
bool rung_proto_handle_valid(const char *h);

/* PROC_INFO: one process, as the agent reports it. */
struct rung_proto_proc_info {
	char handle[RUNG_PROTO_HANDLE_LEN + 1];
	char *name;  /* may be NULL */
	char **argv; /* NULL-terminated */
	bool pty, session, exited;
	int64_t exit_code; /* -1 killed by a signal */
	uint32_t signal;
	uint64_t pid, started_ms, end_offset, dropped_out, dropped_err;
};
void rung_proto_proc_info_encode(const struct rung_proto_proc_info *x, struct rung_buf *b);
int rung_proto_proc_info_decode(const uint8_t *p, uint32_t len, struct rung_proto_proc_info *x,
				struct rung_err *err);
void rung_proto_proc_info_release(struct rung_proto_proc_info *x);

/* ---- v2: ports (common/relay.c) ---- */
/* PORT_CONNECT: the TCP port (1..65535) on the sandbox's loopback, and PORT_FD (optional, 0 or
 * 1: the host takes the connected socket itself, passed with SCM_RIGHTS; docs/protocol.md). */
int rung_proto_port_decode(const uint8_t *p, uint32_t len, uint16_t *port, bool *want_fd,
			   struct rung_err *err);

/* ---- v2: file operations (common/proto-fs.c) ---- */
#define RUNG_FS_RECURSIVE (1u << 0) /* FS_REMOVE -r, FS_MKDIR -p */
#define RUNG_FS_LIST_MAX 100000u   /* entries of one FS_LIST answer, at most */
enum rung_fs_kind {
	RUNG_FS_OTHER = 0,
	RUNG_FS_FILE = 1,
	RUNG_FS_DIR = 2,
	RUNG_FS_SYMLINK = 3,
	RUNG_FS_FIFO = 4,
	RUNG_FS_SOCKET = 5,
	RUNG_FS_CHAR = 6,
	RUNG_FS_BLOCK = 7,
};

/* FS_* requests: path, target (FS_MOVE), mode (FS_MKDIR), flags. */
struct rung_proto_fs {
	uint8_t type;
	char *path, *target;
	uint32_t mode, flags;
};
int rung_proto_fs_encode(const struct rung_proto_fs *x, struct rung_buf *b);
int rung_proto_fs_decode(uint8_t type, const uint8_t *p, uint32_t len, struct rung_proto_fs *x,
			 struct rung_err *err);
void rung_proto_fs_release(struct rung_proto_fs *x);

/* FS_ENTRY: one file's metadata (never followed: a symlink is reported as one). */
struct rung_proto_fs_entry {
	char *name;   /* the entry's name (FS_LIST) or the path asked for (FS_STAT) */
	char *target; /* a symlink's target, else NULL */
	uint32_t kind, mode, uid, gid;
	uint64_t size, mtime_ns;
};
void rung_proto_fs_entry_encode(const struct rung_proto_fs_entry *x, struct rung_buf *b);
int rung_proto_fs_entry_decode(const uint8_t *p, uint32_t len, struct rung_proto_fs_entry *x,
			       struct rung_err *err);
void rung_proto_fs_entry_release(struct rung_proto_fs_entry *x);


/* ---- v2: tree copies (common/proto-tree.c) ---- */
#define RUNG_TREE_NAME_MAX 4095
#define RUNG_TREE_DEPTH_MAX 256
#define RUNG_TREE_CHUNK (256u << 10) /* file data per FILE_DATA frame, at most (sender side) */
/* TREE_PUT / TREE_GET: the directory (made with parents by a put), the download's bound. */
struct rung_proto_tree_req {
	char *path;
	uint64_t max_bytes; /* TREE_GET; 0: none */
};
int rung_proto_tree_req_encode(uint8_t type, const struct rung_proto_tree_req *x,
			       struct rung_buf *b);
int rung_proto_tree_req_decode(uint8_t type, const uint8_t *p, uint32_t len,
			       struct rung_proto_tree_req *x, struct rung_err *err);
void rung_proto_tree_req_release(struct rung_proto_tree_req *x);
/* TREE_ENTRY: name relative to the tree ("" only for its root directory), kind (file, dir or
 * symlink only), mode, mtime; a file's size (its FILE_DATA follow, exactly size bytes); a
 * symlink's target (relative, inside the tree). Decoding checks all of that: -EPERM naming
 * the entry for a name or link that would leave the tree or a refused kind. */
struct rung_proto_tree_entry {
	char *name, *target;
	uint32_t kind, mode;
	uint64_t size, mtime_ns;
};
void rung_proto_tree_entry_encode(const struct rung_proto_tree_entry *x, struct rung_buf *b);
int rung_proto_tree_entry_decode(const uint8_t *p, uint32_t len,
				 struct rung_proto_tree_entry *x, struct rung_err *err);
void rung_proto_tree_entry_release(struct rung_proto_tree_entry *x);
/* A canonical relative name: 0, or -EPERM/-ENAMETOOLONG/-ELOOP naming it. */
int rung_tree_name_check(const char *name, struct rung_err *err);
/* Does a symlink at rel with this target stay inside the tree? ".." only as a leading run no
 * deeper than the link's directory ("x/.." through a link x would climb from where x points). */
bool rung_tree_link_inside(const char *rel, const char *target);

/* ---- RESTORED (common/proto-restore.c): the fix-ups after a VM restore ---- */
#define RUNG_RESTORED_SEED 64
#define RUNG_RESTORED_HOST_MAX 64
struct rung_proto_restored {
	uint8_t seed[RUNG_RESTORED_SEED];
	uint64_t wall_ns;
	char hostname[RUNG_RESTORED_HOST_MAX + 1];
	bool has_net; /* eth0 gets addr/prefix and a default route via gw */
	char addr[16], gw[16];
	unsigned prefix; /* 1..32 */
	char dns[16];    /* "" or the DNS proxy: the guest's resolv.conf is rewritten to it */
};
int rung_proto_restored_encode(const struct rung_proto_restored *x, struct rung_buf *b);
/* Strict: SEED (exactly 64 bytes), WALL_NS (past 2020) and HOSTNAME (1-64 of [A-Za-z0-9.-],
 * no leading '-' or '.') exactly once; NET_ADDR and NET_GW both or neither, NET_DNS only
 * with them, IPv4 only; any
 * other tag, or one given twice, is -EPROTO naming it. */
int rung_proto_restored_decode(const uint8_t *p, uint32_t len, struct rung_proto_restored *x,
			       struct rung_err *err);
bool rung_hostname_valid(const char *h);

#endif
