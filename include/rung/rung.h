/*
 * rung: the public C API. The sandbox protocol, nothing else.
 *
 * A sandbox is named by a key (scope, thread, agent) that comes from the HOST's request
 * context, never from model input, plus a workload kind. acquire() is get-or-create: the same
 * key and kind return the same live sandbox (resumed if suspended, files intact). Sandboxes
 * live in an on-disk store (default /var/lib/rung, or $RUNG_STATE_DIR); every process using
 * the same store sees the same sandboxes, and none owns them in its memory: each sandbox has
 * its own supervisor process that outlives the caller and enforces the sandbox's TTL.
 *
 * Conventions: a fallible call returns int (>= 0 success, -errno failure) or a pointer (NULL
 * on failure) and fills struct rung_err, whose message names the bad field or path. Every
 * *_release / *_free is NULL-safe and idempotent. The library never writes to stdout.
 */
#ifndef RUNG_RUNG_H
#define RUNG_RUNG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rung/err.h"

#define RUNG_VERSION "0.1.0"

/* ---- isolation levels and capabilities ----------------------------------------------- */

enum rung_isolation {
	RUNG_ISO_PROCESS,   /* namespaces + seccomp + no capabilities; shared kernel */
	RUNG_ISO_CONTAINER, /* + OCI image root on overlayfs + cgroups; shared kernel */
	RUNG_ISO_VM,        /* own guest kernel under rung-vmm (KVM) */
	RUNG_ISO__COUNT
};
const char *rung_isolation_name(enum rung_isolation iso);
int rung_isolation_parse(const char *name, enum rung_isolation *out);

/* What a spec requires / a backend offers (bit set). */
enum rung_cap {
	RUNG_CAP_EXEC = 1u << 0,           /* arbitrary argv: shell-capable */
	RUNG_CAP_RUN_CODE = 1u << 1,       /* run_code(language, code) */
	RUNG_CAP_HOST_CALLBACKS = 1u << 2, /* the sandbox calls back into the host */
	RUNG_CAP_FS_PERSIST = 1u << 3,     /* files persist across execs until dispose */
	RUNG_CAP_INSTALL = 1u << 4,        /* install packages into the image (pip, apt) */
};
#define RUNG_CAP__ALL 0x1fu
const char *rung_cap_name(unsigned cap_bit);
/* "exec,run_code" -> bits; an unknown name is an error naming it. */
int rung_caps_parse(const char *list, unsigned *out, struct rung_err *err);

/* ---- the spec -------------------------------------------------------------------------- */

struct rung_limits {
	uint64_t memory_bytes;   /* default 512 MiB */
	uint32_t cpus_milli;     /* 1000 = one CPU; default 1000 */
	uint32_t pids;           /* default 256 */
	uint64_t disk_bytes;     /* default 1 GiB (upper dir / guest disk) */
	uint32_t exec_timeout_s; /* default 60 */
	uint64_t output_bytes;   /* per stream; default 16 MiB; past it: truncated */
};

struct rung_spec {
	char *kind;               /* workload kind, e.g. "pytest"; required */
	char *image;              /* OCI reference; NULL for the process rung */
	char **egress_allow;      /* NULL-terminated; empty or NULL: no network at all */
	char *work_dir;           /* absolute path inside the sandbox; default /work */
	unsigned requires;        /* enum rung_cap bits; default RUNG_CAP_EXEC */
	enum rung_isolation isolation; /* minimum rung; default process */
	struct rung_limits limits;
	uint32_t idle_suspend_s;  /* 0: never suspend when idle */
	uint32_t ttl_s;           /* 0: no TTL; default 3600 */
	char **env;               /* NULL-terminated KEY=VALUE */
	char *from_snapshot;      /* vm rung: start from this template (rung_snapshot_create) */
};

/* Safe defaults: see struct rung_limits. */
void rung_spec_init(struct rung_spec *s);
/*
 * Strict JSON parse: an unknown field, a wrong type or an out-of-range value is an error
 * naming the field (e.g. "limits.memory: ..."). Missing fields get the defaults.
 */
int rung_spec_from_json(const char *json, size_t len, struct rung_spec *out, struct rung_err *err);
/* Validate a spec built by hand or from CLI flags (the same checks as from JSON). */
int rung_spec_validate(const struct rung_spec *s, struct rung_err *err);
/* Canonical JSON (malloc'd) of a spec. */
char *rung_spec_to_json(const struct rung_spec *s);
void rung_spec_release(struct rung_spec *s);

/* ---- keys and the router --------------------------------------------------------------- */

/* All three parts are required, non-empty, at most 256 bytes. */
struct rung_key {
	const char *scope;
	const char *thread;
	const char *agent;
};

struct rung_router;

/*
 * Library code reads no environment. A program's main reads each RUNG_* variable once and
 * sets the option it names (rung_router_opts_set, for each of rung_router_env_names); the
 * table of knobs is docs/configuration.md. NULL or 0: the default.
 */
struct rung_router_opts {
	const char *state_dir;  /* RUNG_STATE_DIR; NULL: /var/lib/rung */
	bool deployed;          /* apply the deployed isolation x capability policy */
	/* rung-agent / rung-vmm binaries (RUNG_AGENT, RUNG_VMM); NULL: in helper_dir */
	const char *agent_path;
	const char *vmm_path;
	/* The dir holding rung-agent, rung-vmm (with the guest kernel in vm/) and rung (re-exec'd
	 * as the sandbox supervisor of a multi-threaded caller). A program linking librung passes
	 * the installed one, `pkg-config --variable=helperdir rung`. NULL: found from the running
	 * binary, beside it (the build tree) or in ../libexec/rung (an installed rung). */
	const char *helper_dir;
	const char *rung_path;        /* RUNG_BIN: re-exec'd as `rung __supervise`; NULL: helper */
	const char *vm_kernel;        /* RUNG_VM_KERNEL; NULL: vm/bzImage beside rung-vmm */
	const char *vm_initrd;        /* RUNG_VM_INITRD; NULL: vm/initramfs.cpio.gz beside it */
	unsigned vm_boot_timeout_ms;  /* RUNG_VM_BOOT_TIMEOUT_MS; 0: 60000 */
	const char *cgroup_root;      /* RUNG_CGROUP_ROOT; NULL: /sys/fs/cgroup */
	const char *loop_control;     /* RUNG_LOOP_CONTROL; NULL: /dev/loop-control */
	const char *uid_registry;     /* RUNG_UID_REGISTRY; NULL: /run/rung/uid-slots */
	const char *net_pool;         /* RUNG_NET_POOL; NULL: 10.213.0.0/16 */
	const char *dns_upstream;     /* RUNG_DNS_UPSTREAM (IP[:PORT]); NULL: resolv.conf's */
	bool no_clone_into_cgroup;    /* RUNG_CLONE_INTO_CGROUP=0 */
	/* A sandbox's network also takes the connections that reach the namespace it is made in
	 * (to a local address, on an interface not its own), forwarded to it: rung-oci's vm rung
	 * in a pod's namespace, whose address is the guest's. No variable. */
	bool net_inbound;
	/* A vm sandbox's resolv.conf also gets these (rung-oci's vm rung: the pod's), each
	 * comma-separated: search domains (at most 6, 256 bytes) and options (128 bytes), made of
	 * letters, digits, '.', '-', '_' (and ':' in options). NULL or "": none. No variable. */
	const char *dns_search, *dns_options;
	/* Keep one idle agent connection per sandbox (process and container rungs) for the next
	 * exec from this process: no connect and no handler fork on its path; the sandbox holds
	 * one more process (rung-agent-h) while it is idle, 30 s at most. rung serve sets it.
	 * No variable. */
	bool keep_agent_conns;
	/* The caller exits right after it disposes of an owned sandbox (rung_acquire_owned) and
	 * frees neither that sandbox nor this router: the sandbox's releaser is then a child
	 * that takes this process's memory over once it has exited, instead of an exec of `rung
	 * __release` (runtime/release.c). `rung run` sets it. No variable. */
	bool release_at_exit;
};

/* The RUNG_* variables rung_router_opts_set knows, NULL-terminated. */
extern const char *const rung_router_env_names[];
/* Set the option that the variable name stands for to value (referenced, not copied). NULL
 * or "": left as it is. -EINVAL naming the variable: an unknown name or a bad value. */
int rung_router_opts_set(struct rung_router_opts *o, const char *name, const char *value,
			 struct rung_err *err);
/* Every variable of rung_router_env_names through lookup (a program's main passes its
 * environment's): the first bad one stops it, -EINVAL naming it. */
int rung_router_opts_load(struct rung_router_opts *o, char *(*lookup)(const char *name),
			  struct rung_err *err);

int rung_router_new(const struct rung_router_opts *opts, struct rung_router **out,
		    struct rung_err *err);
void rung_router_free(struct rung_router *r);
const char *rung_router_state_dir(const struct rung_router *r);
/*
 * Which rung would serve this spec, without creating anything: the weakest available backend
 * meeting the spec's minimum isolation and requires, then the deployed policy. Never silently
 * degrades: a refusal is an error naming the capability and the rung.
 */
int rung_router_pick(struct rung_router *r, const struct rung_spec *spec,
		     enum rung_isolation *out, struct rung_err *err);

/* ---- sandboxes -------------------------------------------------------------------------- */

struct rung_sandbox; /* a handle; closing it does not stop the sandbox */

/* get-or-create. *created tells which (created may be NULL). The same key+kind with another
 * spec is an error. */
int rung_acquire(struct rung_router *r, const struct rung_key *key, const struct rung_spec *spec,
		 struct rung_sandbox **out, bool *created, struct rung_err *err);
/*
 * rung_acquire for a sandbox that lives no longer than the calling process (`rung run`'s
 * throwaway sandbox). When it creates one on the process or container rung without an
 * egress allowlist, from a single-threaded caller, the caller is its supervisor: no
 * supervisor process is started, its pid 1 is the caller's child and is killed when the
 * caller dies (PR_SET_PDEATHSIG), and rung_gc removes what a killed caller leaves in the
 * store (its directory, cgroup and uid range); rung_inspect's supervisor_pid is then the
 * caller's. No process enforces its ttl_s (rung_gc does): for callers that end sooner. The
 * caller disposes it with rung_sandbox_dispose before it exits and reaps no child it did not
 * start. Otherwise (a claim from a pool, the key's live sandbox, egress, the vm rung) it is
 * rung_acquire.
 * first (NULL: none): the exec the sandbox lives for, which the caller makes next with
 * rung_exec(sb, first): the same pointer, its command, environment, cwd, limits and stdin
 * unchanged (the output callback and the cancel fd may be set in between). Its request goes
 * to pid 1 before pid 1 runs, so the command starts as soon as the sandbox is ready, and pid
 * 1 exits once it has answered it: the sandbox ends with that exec. Until then any other
 * operation on sb that talks to its agent fails with -EBUSY. (Without callbacks only;
 * otherwise, and where no sandbox of the caller's own is made, it is an ordinary first exec.)
 */
struct rung_exec_req;
int rung_acquire_owned(struct rung_router *r, const struct rung_key *key,
		       const struct rung_spec *spec, const struct rung_exec_req *first,
		       struct rung_sandbox **out, bool *created, struct rung_err *err);
/*
 * Dispose the sandbox sb names (sb is still closed with rung_sandbox_close). For an owned
 * sandbox it never waits on another holder of the sandbox's lock (a concurrent dispose,
 * which waits for the owner to exit): it stops the sandbox and leaves the rest to that holder.
 */
int rung_sandbox_dispose(struct rung_sandbox *sb, struct rung_err *err);
/*
 * Open an existing sandbox by id. With scope non-NULL, a sandbox of another scope is
 * reported as -ENOENT (it does not exist for that caller).
 */
int rung_sandbox_open(struct rung_router *r, const char *id, const char *scope,
		      struct rung_sandbox **out, struct rung_err *err);
/* Open the sandbox of (key, kind) if the store has one (-ENOENT if not); creates nothing. */
int rung_sandbox_lookup(struct rung_router *r, const struct rung_key *key, const char *kind,
			struct rung_sandbox **out, struct rung_err *err);
void rung_sandbox_close(struct rung_sandbox *sb);
const char *rung_sandbox_id(const struct rung_sandbox *sb);
enum rung_isolation rung_sandbox_isolation(const struct rung_sandbox *sb);

enum rung_stream { RUNG_STDOUT = 1, RUNG_STDERR = 2 };
/*
 * Streaming callback: called as output arrives. Return <0 to cancel the exec: the agent
 * then kills everything it started, and rung_exec returns -ECANCELED.
 */
typedef int (*rung_output_fn)(void *ud, enum rung_stream s, const void *data, size_t len);

/* One call from inside the sandbox, as a handler sees it. */
struct rung_callback_call {
	const char *name;
	const char *args; /* its arguments: JSON text (an object or an array), NUL-terminated */
	size_t args_len;
	uint64_t id;	      /* the sandbox's id for it (unique among its live calls) */
	uint64_t deadline_ms; /* CLOCK_MONOTONIC: past it the sandbox was told "timeout" */
};
/*
 * A host function. Runs on a worker thread (up to cb_limits.concurrency at once); returns 0
 * with *result a malloc'd JSON text (NULL: null), or <0 with err filled: the sandbox sees
 * err's message. One still running at its deadline is abandoned (its answer dropped); the
 * exec waits for it to return before it returns itself, so a handler must honour deadline_ms.
 */
typedef int (*rung_callback_fn)(void *ud, const struct rung_callback_call *c, char **result,
				struct rung_err *err);
struct rung_callback {
	const char *name; /* 1..64 of [A-Za-z0-9_.-] */
	rung_callback_fn fn;
	void *ud;
};

struct rung_exec_req {
	const char *const *argv;      /* argv[0] is looked up in PATH inside the sandbox */
	const char *const *env;       /* extra KEY=VALUE, on top of the spec's env */
	const char *cwd;              /* default: the spec's work_dir */
	const void *stdin_data;       /* optional */
	size_t stdin_len;
	uint32_t timeout_ms;          /* 0: the spec's exec timeout */
	uint64_t max_output;          /* per stream; 0 (or more than the spec allows): the spec's limit */
	rung_output_fn on_output;     /* optional streaming */
	void *ud;
	bool no_collect;              /* with on_output: do not also collect into the result */
	/* Optional, with watch_fd: an fd whose peer hanging up (POLLHUP, POLLRDHUP, POLLERR:
	 * e.g. a daemon's client connection) cancels the exec with -ECANCELED; everything it
	 * started is killed. */
	bool watch_fd;
	int cancel_fd;
	/* Optional host callbacks (docs/callbacks.md): the command may call these by name over
	 * its own channel while it runs; a name not in the table is refused without reaching any
	 * handler. Limits: 0 fields take the defaults. */
	const struct rung_callback *callbacks;
	size_t n_callbacks;
	struct rung_callback_limits {
		uint32_t max_bytes;   /* one call, its JSON line; default 1 MiB */
		uint32_t max_depth;   /* nesting of its arguments; default 32 */
		uint32_t rate_per_s;  /* calls per second per exec (burst: as many); default 1000 */
		uint32_t timeout_ms;  /* one call; the sandbox then sees a timeout; default 30000 */
		uint32_t concurrency; /* calls run at once (the rest wait, in order); default 8 */
	} cb_limits;
	/* Optional: a seccomp filter (classic BPF, struct sock_filter[] as libseccomp's
	 * seccomp_export_bpf writes it, 1..4096 instructions) loaded for this command alone, under
	 * no_new_privs, just before its execve; the sandbox's own filter still applies (the
	 * strictest answer wins). rung-oci-vm passes the spec's linux.seccomp this way. */
	const void *seccomp_bpf;
	size_t seccomp_bpf_len;
};

struct rung_exec_res {
	int exit_code;      /* -1 when killed by a signal */
	int signal;         /* the killing signal, 0 if none */
	bool timed_out;     /* the timeout killed every process the exec started */
	bool truncated;     /* an output stream passed its limit */
	bool oom;           /* an OOM kill happened during the exec */
	char *out, *errout; /* collected output, NUL-terminated (may hold NULs) */
	size_t out_len, err_len;
	uint64_t duration_us;
};
void rung_exec_res_release(struct rung_exec_res *res);

int rung_exec(struct rung_sandbox *sb, const struct rung_exec_req *req,
	      struct rung_exec_res *res, struct rung_err *err);
/*
 * Optional: an fd (e.g. a daemon's client connection) whose peer hanging up cancels this
 * handle's file operations with -ECANCELED, in every phase (-1: none, the default). Each
 * operation also has its own deadline either way.
 */
void rung_sandbox_set_cancel_fd(struct rung_sandbox *sb, int fd);
/* Paths are confined to the sandbox root: "..", absolute symlinks and planted links stay inside. */
int rung_write_file(struct rung_sandbox *sb, const char *path, const void *data, size_t len,
		    unsigned mode, struct rung_err *err);
int rung_read_file(struct rung_sandbox *sb, const char *path, size_t max, char **data,
		   size_t *len, struct rung_err *err);
/* language: "python" (python3) or "sh". opts may be NULL (argv/stdin in it are ignored). */
int rung_run_code(struct rung_sandbox *sb, const char *language, const char *code,
		  const struct rung_exec_req *opts, struct rung_exec_res *res,
		  struct rung_err *err);
/*
 * Would the sandbox's granted capabilities allow op ("exec", "run_code" with language,
 * "write_file")? 0, or the -EACCES the operation itself would return (e.g. to refuse a
 * streamed exec before answering). exec, run_code and write_file check it themselves.
 */
int rung_sandbox_allows(const struct rung_sandbox *sb, const char *op, const char *language,
			struct rung_err *err);
/*
 * Stop / continue every process of the sandbox. A suspended sandbox (by rung_suspend or by
 * its idle_suspend_s) is resumed by its next exec, run_code, write_file or read_file, through
 * any handle in any process: rung_resume is needed only to let its processes run unused.
 */
int rung_suspend(struct rung_sandbox *sb, struct rung_err *err);
int rung_resume(struct rung_sandbox *sb, struct rung_err *err);
/*
 * Suspend to disk (the vm rung only; others: -EOPNOTSUPP): the guest is saved into a 0600 file
 * in the sandbox's store directory and its VMM exits, freeing its memory. rung_resume, or any
 * use that resumes (as above), starts a new VMM from the file and deletes it once the guest
 * runs. A file that does not restore fails with an error naming it; the sandbox is then dead.
 */
int rung_suspend_to_disk(struct rung_sandbox *sb, struct rung_err *err);

/* ---- templates (vm rung; docs/snapshots.md) ---- */
/* A template's name: 1-64 of [a-z0-9._-], starting with a letter or digit; -EINVAL naming it. */
int rung_snapshot_name_check(const char *name, struct rung_err *err);
/* Save the running vm sandbox id as the template name (its memory, its upper disk, its spec)
 * and continue it. -EOPNOTSUPP on the other rungs, -EEXIST for a name taken (unless force).
 * With scope non-NULL, another scope's sandbox is -ENOENT; the template belongs to the
 * sandbox's scope. *json (optional, malloc'd): the template's description. */
int rung_snapshot_create(struct rung_router *r, const char *id, const char *scope,
			 const char *name, bool force, char **json, struct rung_err *err);
/* The templates of scope (NULL: all) as a JSON array (malloc'd). */
int rung_snapshot_list(struct rung_router *r, const char *scope, char **json,
		       struct rung_err *err);
/* Remove a template (another scope's: -ENOENT). Clones already running keep their files. */
int rung_snapshot_remove(struct rung_router *r, const char *name, const char *scope,
			 struct rung_err *err);

/* Dispose by id. With scope non-NULL, another scope's sandbox is -ENOENT. */
int rung_dispose(struct rung_router *r, const char *id, const char *scope, struct rung_err *err);
/*
 * Save a `rung ladder --json` result for this host in the router's store (docs/ladder.md),
 * keyed by the kernel, rung's version and the sandbox filter; targets it lacks are kept from a
 * current saved result. A deployed router then refuses a rung whose result has an escaped
 * probe in a critical family, and rung_inspect cites the summary under security.ladder.
 */
int rung_ladder_cache_save(struct rung_router *r, const char *json, struct rung_err *err);
/* Purge by label, from the store: every sandbox of scope (and thread, if non-NULL). */
int rung_dispose_scope(struct rung_router *r, const char *scope, const char *thread,
		       size_t *n_disposed, struct rung_err *err);

/* ---- background processes, terminals, shell sessions ------------------------------------ */
/*
 * A background process belongs to the sandbox, not to the caller: it survives the client
 * that started it, the caller's exit, a daemon restart and suspend/resume; it dies at
 * dispose, at the TTL, or when signalled or killed. A handle names it within its sandbox
 * only (another sandbox's handle is -ENOENT). Its output is kept in a replay log: one byte
 * sequence per process in which stdout and stderr chunks keep their order of arrival; an
 * offset is a byte position in that sequence, never reset while the handle lives. Each
 * stream keeps at most buffer_bytes of its newest output; what fell out is reported as
 * dropped, never silently skipped. docs/procs.md is the whole contract.
 */
#define RUNG_PROC_HANDLE_LEN 16 /* lowercase hex characters */
#define RUNG_PROC_NAME_MAX 64
#define RUNG_PROC_MAX_LIVE 64   /* default live background processes per sandbox */

struct rung_proc_req {
	const char *const *argv;   /* argv[0] looked up in PATH inside the sandbox */
	const char *const *env;    /* extra KEY=VALUE, on top of the spec's env */
	const char *cwd;           /* default: the spec's work_dir */
	const char *name;          /* optional label, at most RUNG_PROC_NAME_MAX bytes */
	bool pty;                  /* a terminal of the sandbox's own devpts */
	uint16_t rows, cols;       /* with pty: 1..4096; 0: 24 x 80 */
	uint64_t buffer_bytes;     /* replay buffer per stream; 0: 1 MiB */
	/* Optional, as in rung_exec_req: a seccomp filter (classic BPF, 1..4096 instructions)
	 * loaded for this process alone, under no_new_privs, just before its execve. */
	const void *seccomp_bpf;
	size_t seccomp_bpf_len;
};

enum rung_proc_state { RUNG_PROC_RUNNING, RUNG_PROC_EXITED };

struct rung_proc_info {
	char handle[RUNG_PROC_HANDLE_LEN + 1];
	char name[RUNG_PROC_NAME_MAX + 1];
	char **argv;               /* NULL-terminated, malloc'd */
	bool pty, session;
	enum rung_proc_state state;
	int exit_code;             /* when exited: 0..255, -1 killed by a signal */
	int signal;                /* the killing signal, 0 if none */
	pid_t pid;                 /* inside the sandbox */
	uint64_t started_ms;       /* wall clock of the sandbox */
	uint64_t end_offset;       /* bytes produced so far (both streams) */
	uint64_t dropped_out, dropped_err; /* bytes that fell out of the replay buffer */
};
void rung_proc_info_release(struct rung_proc_info *v, size_t n); /* n entries; frees v's members */
void rung_proc_info_free(struct rung_proc_info *v, size_t n);    /* ... and v */

/* Start. handle receives RUNG_PROC_HANDLE_LEN + 1 bytes. Past the sandbox's maximum of live
 * processes: -EAGAIN naming the limit. */
int rung_proc_start(struct rung_sandbox *sb, const struct rung_proc_req *req, char *handle,
		    struct rung_err *err);
int rung_proc_list(struct rung_sandbox *sb, struct rung_proc_info **out, size_t *n,
		   struct rung_err *err);
int rung_proc_get(struct rung_sandbox *sb, const char *handle, struct rung_proc_info *out,
		  struct rung_err *err);

/* Replay output from offset `since`, chunk by chunk, with each chunk's own offset. */
typedef int (*rung_proc_output_fn)(void *ud, enum rung_stream s, uint64_t offset,
				   const void *data, size_t len);
struct rung_proc_logs_req {
	uint64_t since;            /* byte offset; past the end: nothing until more comes */
	bool follow;               /* then wait for more until the process exits */
	rung_proc_output_fn on_output; /* required; < 0 stops (the process runs on) */
	void *ud;
	bool watch_fd;             /* as in rung_exec_req: a hang-up on cancel_fd stops */
	int cancel_fd;
};
struct rung_proc_logs_res {
	uint64_t end_offset;       /* where a later call resumes */
	uint64_t dropped;          /* bytes at or after since no longer buffered */
	bool exited;               /* the process had exited and everything was sent */
};
int rung_proc_logs(struct rung_sandbox *sb, const char *handle, const struct rung_proc_logs_req *req,
		   struct rung_proc_logs_res *res, struct rung_err *err);

/* stdin: bytes go to the process's stdin (its terminal with pty); close sends EOF (a pty:
 * the terminal's EOF character). An exited process: -EPIPE. */
int rung_proc_write(struct rung_sandbox *sb, const char *handle, const void *data, size_t len,
		    struct rung_err *err);
int rung_proc_close_stdin(struct rung_sandbox *sb, const char *handle, struct rung_err *err);
/* A signal (1..64) to the process's process group. */
int rung_proc_signal(struct rung_sandbox *sb, const char *handle, int sig, struct rung_err *err);
/* rows, cols 1..4096, else -EINVAL naming the value; the program sees SIGWINCH. Not a pty:
 * -ENOTTY. */
int rung_proc_resize(struct rung_sandbox *sb, const char *handle, unsigned rows, unsigned cols,
		     struct rung_err *err);
/* 1 and *out filled (out may be NULL) when it exited; 0 when still running at timeout_ms
 * (0: do not wait). */
int rung_proc_wait(struct rung_sandbox *sb, const char *handle, uint32_t timeout_ms,
		   struct rung_proc_info *out, struct rung_err *err);
/* Kill the whole tree the process started (daemons included), then forget the handle. */
int rung_proc_kill(struct rung_sandbox *sb, const char *handle, struct rung_err *err);

/*
 * Attach: replay from since, then relay both ways until the process exits (returns 1) or
 * on_input detaches (returns 0). Bytes read from in_fd pass through on_input (optional),
 * which may rewrite them in place (*len) and returns < 0 to detach (e.g. a detach key).
 * EOF on in_fd detaches too. The process runs on after a detach.
 */
struct rung_proc_attach_req {
	uint64_t since;
	int in_fd;
	int (*on_input)(void *ud, void *data, size_t *len);
	rung_proc_output_fn on_output;
	void *ud;
	bool watch_fd;
	int cancel_fd;
};
int rung_proc_attach(struct rung_sandbox *sb, const char *handle,
		     const struct rung_proc_attach_req *req, struct rung_err *err);

/*
 * Shell sessions: a persistent shell (a background process underneath) whose cd, export and
 * functions carry over between runs. Each run returns exit code, stdout and stderr
 * separately; where a run ends travels on a side channel, never in its output. At timeout_ms
 * (0: the spec's exec timeout) the run's job gets SIGINT, then SIGKILL: res->timed_out. A
 * shell that died: -EPIPE ("session ended").
 */
int rung_session_start(struct rung_sandbox *sb, const char *shell, const char *const *env,
		       const char *cwd, char *handle, struct rung_err *err);
int rung_session_run(struct rung_sandbox *sb, const char *handle, const char *command,
		     uint32_t timeout_ms, struct rung_exec_res *res, struct rung_err *err);

/* ---- ports (docs/ports.md) --------------------------------------------------------------- */

/*
 * A forwarded TCP connection to a port on the sandbox's loopback (127.0.0.1, else ::1). It
 * travels through rung's own agent channel (vsock on the vm rung), never the network: a sandbox
 * without any egress serves it, and nothing is opened in its egress policy. TCP only. The port
 * is 1..65535 (else -EINVAL naming it); nothing listening there: -ECONNREFUSED. fd is a stream
 * socket carrying the connection's bytes both ways (shutdown(SHUT_WR) is the TCP half-close);
 * while it is open the sandbox is not suspended for idleness. Close with rung_port_conn_close.
 */
struct rung_port_conn {
	int fd;
	int busy; /* internal */
};
int rung_port_connect(struct rung_sandbox *sb, unsigned port, struct rung_port_conn *c,
		      struct rung_err *err);
void rung_port_conn_close(struct rung_port_conn *c);
/*
 * Relay between c and peer (a connected stream socket the caller owns; both are made
 * non-blocking) until both directions ended, a side failed, or cancel_fd (if >= 0) is
 * readable or hangs up. Buffers are bounded (1 MiB each way): a side that floods while the
 * other does not read is held back, host memory does not grow. Neither fd is closed.
 */
int rung_port_relay(struct rung_port_conn *c, int peer, int cancel_fd, struct rung_err *err);
/*
 * Forward: accept connections on listen_fd and relay each to port in sb (one thread per
 * connection, at most max_conns at a time, 0: 256), until cancel_fd is readable or hangs up.
 * Returns after every relay thread ended; listen_fd is not closed. on_error (optional) hears of
 * connections that could not be forwarded.
 */
int rung_port_forward(struct rung_sandbox *sb, unsigned port, int listen_fd, int cancel_fd,
		      unsigned max_conns, void (*on_error)(void *ud, const struct rung_err *e),
		      void *ud, struct rung_err *err);

/*
 * Detached forwards: a process of their own (forked by rung_port_detach, in a new session)
 * holds the listener and forwards until rung_port_fwd_remove or the sandbox's end (its
 * supervisor exiting: dispose, gc), then exits with its threads and fds. Recorded in the
 * store under the sandbox, with the host address, so `rung port ls` and `rung inspect` show
 * them. listen_fd is the caller's (it may close it after).
 */
struct rung_port_fwd {
	unsigned port;       /* in the sandbox */
	char host[64];       /* the host address it listens on, as given */
	unsigned host_port;
	pid_t pid;           /* the forwarding process */
};
int rung_port_detach(struct rung_sandbox *sb, unsigned port, int listen_fd, const char *host,
		     unsigned host_port, pid_t *pid, struct rung_err *err);
/* Live detached forwards of sb (stale records are dropped). */
int rung_port_fwd_list(struct rung_sandbox *sb, struct rung_port_fwd **out, size_t *n,
		       struct rung_err *err);
/* Stop every detached forward of sb to port (it exits and its record goes): how many. */
int rung_port_fwd_remove(struct rung_sandbox *sb, unsigned port, size_t *removed,
			 struct rung_err *err);
/* ---- file operations (docs/files.md) ---------------------------------------------------- */
/*
 * Paths are confined as read/write_file's are (relative: to the work dir). The last component
 * is never followed: stat reports a symlink as one, remove and move act on the link itself.
 * Errors a program acts on keep their errno, named by rung_errno_code: -ENOENT not_found,
 * -ENOTDIR not_a_directory, -EISDIR is_a_directory, -EACCES/-EPERM/-EROFS permission_denied,
 * -EEXIST exists, -ENOTEMPTY not_empty. Reads (list, stat) need no grant; remove, make_dir and
 * move need the write_file grant.
 */
enum rung_fs_kind_e {
	RUNG_FSK_OTHER, RUNG_FSK_FILE, RUNG_FSK_DIR, RUNG_FSK_SYMLINK,
	RUNG_FSK_FIFO, RUNG_FSK_SOCKET, RUNG_FSK_CHAR, RUNG_FSK_BLOCK,
};
const char *rung_fs_kind_name(unsigned kind); /* "file", "dir", "symlink", ... */
/* The stable code of an error (errno, either sign): "not_found", ... or "error". */
const char *rung_errno_code(int e);
/* The reverse: a code's errno (positive), or 0 for "error" and unknown codes. */
int rung_errno_from_code(const char *code);

struct rung_fs_entry {
	char *name;   /* list: the entry's name; stat: the path as asked */
	char *target; /* a symlink's target, else NULL */
	unsigned kind, mode, uid, gid; /* mode: permission bits (07777) */
	uint64_t size, mtime_ns;
};
void rung_fs_entries_free(struct rung_fs_entry *v, size_t n);
void rung_fs_entry_release(struct rung_fs_entry *e);

/* A directory's entries (not "." or ".."), in the directory's order; at most 100,000. */
int rung_fs_list(struct rung_sandbox *sb, const char *path, struct rung_fs_entry **out,
		 size_t *n, struct rung_err *err);
int rung_fs_stat(struct rung_sandbox *sb, const char *path, struct rung_fs_entry *out,
		 struct rung_err *err);
/* A directory needs recursive (else -EISDIR); the root is refused (-EBUSY); a recursive
 * remove stays on the directory's filesystem. */
int rung_fs_remove(struct rung_sandbox *sb, const char *path, bool recursive,
		   struct rung_err *err);
/* mode 0: 0755. parents: make missing parents (0755) and accept an existing directory. */
int rung_fs_mkdir(struct rung_sandbox *sb, const char *path, unsigned mode, bool parents,
		  struct rung_err *err);
/* rename(2) semantics: dst is the new path (a file there is replaced, an empty directory too). */
int rung_fs_move(struct rung_sandbox *sb, const char *src, const char *dst, struct rung_err *err);

/* ---- copying trees: `rung cp` (docs/files.md, "Copying trees") ------------------------ */
/*
 * A tar stream (ustar/pax/gnu) on tar_fd unpacked into the directory dst of the sandbox
 * (made with parents); or the tree at src packed as a pax tar stream onto tar_fd. One agent
 * request per copy (TREE_PUT / TREE_GET): entries are validated here with libarchive and sent
 * as a framed stream the agent applies confined under the directory; what the agent sends
 * back is validated again. Refused, naming the entry: absolute names, "..", hard links,
 * devices, fifos, sockets, a symlink whose target is absolute or leaves the tree (both ways).
 * Modes, mtimes, empty directories and symlinks inside the tree are kept. A download over
 * max_bytes of file data is -EFBIG naming the bound. Uploads count against the sandbox's disk
 * limit. opts may be NULL; progress, when set, is called after each entry with the file
 * bytes and entries copied so far (from the calling thread).
 */
struct rung_cp_opts {
	uint64_t max_bytes; /* download bound on file data; 0: 1 GiB */
	void (*progress)(void *ud, uint64_t bytes, uint64_t entries);
	void *progress_ud;
};
int rung_cp_upload(struct rung_sandbox *sb, int tar_fd, const char *dst,
		   const struct rung_cp_opts *opts, struct rung_err *err);
int rung_cp_download(struct rung_sandbox *sb, const char *src, int tar_fd,
		     const struct rung_cp_opts *opts, struct rung_err *err);

/* ---- per-sandbox stats (docs/files.md) ------------------------------------------------- */
/*
 * What a sandbox uses now, measured, never estimated. process/container: CPU, memory and pids
 * from its cgroup (memory_peak: v2 memory.peak, 0 on kernels without it; v1
 * memory.max_usage_in_bytes). vm: the guest kernel's view through the agent (CPU time busy,
 * memory in use = MemTotal - MemAvailable; no peak) plus vmm_rss, rung-vmm's resident set on the
 * host. Every rung: disk_used/disk_total from statvfs of the work dir's filesystem inside (the
 * disk that limits.disk sizes), and the background processes from the agent. Network: the
 * sandbox nft table's counters (bytes forwarded out and in, its DNS proxy's traffic excluded;
 * packets the egress policy refused); a sandbox without network has none (net_known false).
 */
struct rung_stats {
	bool from_cgroup;         /* cpu/memory/pids come from the sandbox's cgroup */
	uint64_t cpu_usage_us;
	uint64_t memory_current, memory_peak, memory_limit; /* bytes */
	uint64_t oom_kills;
	uint64_t pids_current, pids_limit;
	uint64_t disk_used, disk_total, disk_limit;
	uint64_t procs_live, procs_exited;
	uint64_t vmm_rss;         /* vm rung: bytes; else 0 */
	bool net_known;
	uint64_t net_rx_bytes, net_tx_bytes, net_refused_packets;
};
int rung_stats(struct rung_sandbox *sb, struct rung_stats *out, struct rung_err *err);
/* The one JSON shape of stats (CLI --json, HTTP), malloc'd: {"id", "source": "cgroup"|"guest",
 * "cpu_usage_us", "memory": {current, peak, limit, oom_kills}, "pids": {current, limit},
 * "disk": {used, total, limit}, "procs": {live, exited}, "vmm_rss",
 * "net": {rx_bytes, tx_bytes, refused_packets} or null (no network)}. */
char *rung_stats_json(const char *id, const struct rung_stats *st);

/* ---- listing, describing, lifecycle ------------------------------------------------------ */

enum rung_state { RUNG_STATE_CREATING, RUNG_STATE_RUNNING, RUNG_STATE_SUSPENDED, RUNG_STATE_DEAD };
const char *rung_state_name(enum rung_state st);

struct rung_sandbox_info {
	char id[65];
	char kind[129];
	enum rung_isolation isolation;
	enum rung_state state;
	char scope_label[65], thread_label[65], agent_label[65]; /* full SHA-256 hex */
	uint64_t created_ms, last_used_ms;                      /* wall clock */
	pid_t supervisor;
};

/* List sandboxes whose labels match scope (and thread); NULL scope lists everything. */
int rung_list(struct rung_router *r, const char *scope, const char *thread,
	      struct rung_sandbox_info **out, size_t *n, struct rung_err *err);
/* A JSON description (malloc'd): state, spec, labels, effective egress, security metadata. */
int rung_inspect(struct rung_router *r, const char *id, const char *scope, char **json,
		 struct rung_err *err);

struct rung_gc_report {
	size_t disposed_dead; /* sandboxes whose supervisor had died */
	size_t suspended_idle; /* running past idle_suspend_s */
	size_t disposed_ttl;  /* past ttl_s */
	size_t debris;        /* half-created or stale entries removed */
	size_t pools_removed; /* pools whose owner died (their ready sandboxes disposed) */
};
/* Sweep the store: the same code serves `rung gc` and the daemon's sweeper. */
int rung_gc(struct rung_router *r, struct rung_gc_report *rep, struct rung_err *err);

/* ---- fork --------------------------------------------------------------------------------- */
/*
 * count (1..64) new sandboxes whose filesystem starts as id's is now, diverging after. On the
 * shared-kernel rungs the source's disk (process rung: its work dir; container rung: its
 * overlay upper dir) is copied while the source is stopped and synced: a reflink where the
 * store's filesystem supports it (*reflinked), else a sparse copy; processes are NOT copied
 * (a fork starts with only its agent, like a fresh sandbox). The vm rung: the guest syncs,
 * the VM is paused while its upper disk is copied the same way, and the fork boots on the
 * copy (memory not copied). A fork has the source's spec, kind, scope and thread labels, and
 * a new agent label; it is addressed by its id (no key acquires it). With scope non-NULL,
 * another scope's sandbox is -ENOENT. *ids: malloc'd, NULL-terminated. Returns count.
 */
int rung_fork(struct rung_router *r, const char *id, const char *scope, unsigned count,
	      char ***ids, bool *reflinked, struct rung_err *err);

/*
 * What `rung image commit` makes a layer of: a private copy of a sandbox's disk, taken while
 * it is stopped and synced (it runs on after), mounted for this process alone. dirfd: the
 * container and vm rungs' overlay upper dir (the vm rung's after the guest synced), or the
 * process rung's work dir; prefix: where that tree goes in the image ("" for the upper dir,
 * the work dir without its '/' otherwise); base: the sandbox's image digest (NULL: an empty
 * base); id_base: the host uid its files' owner 0 has (0 on the vm rung). close removes the
 * copy.
 */
struct rung_changes;
int rung_changes_open(struct rung_router *r, const char *id, const char *scope,
		      struct rung_changes **out, struct rung_err *err);
int rung_changes_dirfd(const struct rung_changes *c);
const char *rung_changes_prefix(const struct rung_changes *c);
const char *rung_changes_base_image(const struct rung_changes *c);
uint32_t rung_changes_id_base(const struct rung_changes *c);
void rung_changes_close(struct rung_changes *c);

/* ---- warm pools ---------------------------------------------------------------------------- */
/*
 * A pool keeps `size` ready sandboxes of one spec in the store, so that every process and
 * daemon replica over the store shares it. rung_acquire of a spec that MATCHES a pool's (the
 * same canonical spec JSON once kind, ttl_s and idle_suspend_s are blanked: rung_pool_match)
 * and finds no sandbox for its key claims a ready one: atomically (one rename in the store, so
 * no sandbox is handed to two claims), binding the key's labels, kind, ttl and idle policy at
 * claim time, never before (a ready sandbox's labels match no key). A ready sandbox has run
 * nothing: an empty work dir, no process besides its agent, no DNS query made. Its id stays
 * its own (the key's id holds an alias to it). docs/pools.md is the whole contract.
 */
#define RUNG_POOL_NAME_MAX 64 /* [A-Za-z0-9_.-] */
#define RUNG_POOL_MAX_SIZE 256

struct rung_pool_info {
	char name[RUNG_POOL_NAME_MAX + 1];
	uint32_t size;           /* ready sandboxes wanted */
	uint32_t ready;          /* ready now */
	uint64_t mem_reserve;    /* MemAvailable kept free; under it the pool shrinks */
	char match[65];          /* rung_pool_match of its spec */
	char *spec_json;         /* its spec, canonical JSON (malloc'd) */
	pid_t owner;             /* the process that refills it; 0: none */
	bool owner_alive;
};
void rung_pool_info_free(struct rung_pool_info *v, size_t n);

/* The match key of a spec (SHA-256 hex of its canonical JSON less kind, ttl, idle suspend). */
int rung_pool_match(const struct rung_spec *spec, char out[65], struct rung_err *err);
/* Create or update pool `name` (size 0..RUNG_POOL_MAX_SIZE; mem_reserve 0: 256 MiB). A
 * changed spec disposes the ready sandboxes of the old one. Creates no sandbox itself. */
int rung_pool_set(struct rung_router *r, const char *name, uint32_t size,
		  const struct rung_spec *spec, uint64_t mem_reserve, struct rung_err *err);
/* Record pid (alive) as the pool's owner: rung_gc removes a pool whose owner died. */
int rung_pool_own(struct rung_router *r, const char *name, pid_t pid, struct rung_err *err);
/* One refill pass: create ready sandboxes up to the size while the host has room (memory
 * over the reserve, free uid slots); under memory pressure dispose ready ones instead. */
int rung_pool_fill(struct rung_router *r, const char *name, size_t *created, size_t *shrunk,
		   struct rung_err *err);
/* Refill whenever a claim takes a sandbox (inotify on the store) until the pool is removed
 * or *stop becomes true (checked at least every second). */
int rung_pool_keep(struct rung_router *r, const char *name, const volatile bool *stop,
		   struct rung_err *err);
int rung_pool_list(struct rung_router *r, struct rung_pool_info **out, size_t *n,
		   struct rung_err *err);
/* Remove the pool and dispose its ready sandboxes (claimed ones are their keys' now). */
int rung_pool_remove(struct rung_router *r, const char *name, size_t *disposed,
		     struct rung_err *err);

/*
 * Internal: the entry point of `rung __supervise`, which the runtime execs (instead of only
 * forking) to start a sandbox's supervisor from a multi-threaded caller. Not for users.
 */
int rung_supervisor_main(void);
/* `rung __release`: an owned sandbox's releaser (runtime/release.c); internal. */
int rung_release_main(void);

#endif
