/* runtime/rt-internal.h: the runtime's internal types. Never included outside runtime/ and tests. */
#ifndef RUNG_RT_INTERNAL_H
#define RUNG_RT_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/proto.h"
#include "common/pid1.h"
#include "common/util.h"
#include "rung/rung.h"

#define RT_DEFAULT_WORK_DIR "/work"
/* In the store's root: the one-time pass over older stores' sandbox dirs is done (store.c). */
#define RT_STORE_TIGHT "modes-tightened"
#define RT_ID_LEN 32         /* hex chars of the sandbox id (checked against full labels) */
#define RT_UID_RANGE 65536   /* ids mapped per sandbox */
#define RT_UID_BASE0 200000000u /* first host uid handed to sandboxes */
#define RT_UID_SLOTS 4096

/* ---- spec / key (spec.c, key.c, egress.c) ---- */
int rt_path_is_clean_abs(const char *p);
int rt_egress_entry_check(const char *entry, struct rung_err *err);
json_t *rt_spec_to_jsonv(const struct rung_spec *s);
/* rung_spec_from_json of an already parsed object (no text round trip); validated. */
int rt_spec_from_jsonv(json_t *root, struct rung_spec *out, struct rung_err *err);
int rt_key_validate(const struct rung_key *k, struct rung_err *err);
/* labels: full SHA-256 hex of each key part; id: from (key, kind). */
struct rt_labels {
	char scope[65], thread[65], agent[65];
};
void rt_labels_compute(const struct rung_key *k, struct rt_labels *out);
void rt_label_of(const char *part, char out[65]);
void rt_id_compute(const struct rung_key *k, const char *kind, char out[RT_ID_LEN + 1]);
bool rt_id_valid(const char *id);

/* ---- metadata and store (meta.c, store.c) ---- */
struct rt_meta {
	char id[RT_ID_LEN + 1];
	struct rt_labels labels;
	enum rung_isolation iso;
	enum rung_state state;
	uint64_t created_ms, last_used_ms;
	pid_t sup_pid;       /* the supervisor (host pid) */
	uint64_t sup_start;  /* its start time, against pid reuse */
	pid_t init_pid;      /* the sandbox's pid 1 (host pid), or the VMM */
	uint32_t uid_base;
	struct rung_spec spec;
	unsigned granted;    /* capabilities granted at creation (spec.requires the rung offers) */
	json_t *backend;     /* backend-private state (owned) */
	char aliased_by[RT_ID_LEN + 1]; /* a claimed pool sandbox: its key's id ("": none) */
};
void rt_meta_release(struct rt_meta *m);
int rt_meta_to_json(const struct rt_meta *m, char **out, struct rung_err *err);
int rt_meta_from_json(const char *txt, size_t len, struct rt_meta *m, struct rung_err *err);

struct rt_store {
	char *root;     /* state dir */
	int root_fd;    /* O_PATH|O_DIRECTORY */
	const char *uid_registry; /* the router's; NULL: /run/rung/uid-slots */
};
int rt_store_open(const char *root, struct rt_store *st, struct rung_err *err);
void rt_store_close(struct rt_store *st);
/* <root>/sandboxes/<id>[/<name>] */
int rt_store_path(const struct rt_store *st, const char *id, const char *name, char *buf,
		  size_t len);
/* flock helpers: return an fd holding the lock (close to release). */
int rt_store_lock_global(const struct rt_store *st, struct rung_err *err);
int rt_store_lock_sandbox(const struct rt_store *st, const char *id, bool create, bool nonblock,
			  struct rung_err *err);
int rt_store_meta_read(const struct rt_store *st, const char *id, struct rt_meta *m,
		       struct rung_err *err);
int rt_store_meta_write(const struct rt_store *st, const struct rt_meta *m, struct rung_err *err);
/* A pool claim's metadata write (pool-claim.c): m is written to RT_META_ASIDE, which is then
 * exchanged with meta.json in one renameat2(RENAME_EXCHANGE), so the metadata it replaces
 * stays behind under RT_META_ASIDE (the claimed sandbox's supervisor removes it). */
#define RT_META_ASIDE "meta.json.aside"
int rt_store_meta_exchange(const struct rt_store *st, const struct rt_meta *m,
			   struct rung_err *err);
/* Every id in the store (directory names that are valid ids). */
int rt_store_ids(const struct rt_store *st, char ***ids, struct rung_err *err);
/* Pick a host uid range no other sandbox on this host uses (any store); release it. */
int rt_store_alloc_uid(const struct rt_store *st, const char *id, uint32_t *base,
		       struct rung_err *err);
void rt_store_release_uid(const struct rt_store *st, const char *id, uint32_t base);
/* A connection to the VMM's control.sock in jail, never through a link (backend-vm.c). */
int rt_vm_control_connect(const char *jail, uid_t owner, struct rung_err *err);
struct rt_sandbox;
/* One line to rung-vmm's control socket, waiting timeout_s for an "ok" answer. */
int rt_vm_control(struct rt_sandbox *sb, const char *cmd, unsigned timeout_s, struct rung_err *err);
/* vm-snap.c: the vm rung's suspend to disk, and its resume from the file. */
int rt_vm_suspend_disk(struct rt_sandbox *sb, struct rung_err *err);
int rt_vm_resume_disk(struct rt_sandbox *sb, struct rung_err *err);
/* A save's file left in the jail by a suspend --to-disk that did not finish (its caller died
 * between the save and the move): removed by the next resume or boot. */
void rt_vm_snap_drop_stale(struct rt_sandbox *sb);
/* vm-template.c: a clone (spec.from_snapshot), in vm_prepare: the template checked against
 * the spec and the image, its upper disk copied, meta.backend.clone and the sandbox's
 * clone.pending mark made. pending: the first start restores from the template's file
 * (filled); done: later starts boot (the disk has moved on). */
int rt_template_clone(struct rt_sandbox *sb, struct rung_err *err);
bool rt_template_pending(struct rt_sandbox *sb, char *file, size_t len);
/* An exec of sync in a vm sandbox's guest (its dirty pages onto the upper disk before the
 * host copies it: fork, snapshot); op names the caller in the error. */
int rt_guest_sync(struct rung_sandbox *h, const char *op, struct rung_err *err);
void rt_template_done(struct rt_sandbox *sb);
/* vm-fixup.c: RESTORED to the agent of a restored guest (its seed, clock, hostname, net). */
struct rt_vm_net;
int rt_vm_fixup(struct rt_sandbox *sb, bool clone, struct rung_err *err);
/* The store's snapshot file of a sandbox (vm.snap): true if it exists (path filled). */
bool rt_vm_snap_path(struct rt_sandbox *sb, char *path, size_t len);
/* create: only with the sandbox lock held. Without it, a dispose may be removing the
 * directory: re-creating the file there would leave it behind (rm -rf: not empty). */
/* A sandbox's last use: the later of its activity file's mtime and its metadata's
 * last_used_ms (a pool claim records the claim in the metadata only; the claimed sandbox's
 * supervisor touches the file when it adopts the claim). */
uint64_t rt_store_used_ms(const struct rt_store *st, const struct rt_meta *m);
void rt_store_touch_activity(const struct rt_store *st, const char *id, bool create);
uint64_t rt_store_activity_ms(const struct rt_store *st, const char *id);
/*
 * In-flight operations (exec, write_file, read_file) hold a shared lock on the sandbox's
 * "busy" file; an idle suspend takes it exclusive and non-blocking, and skips a busy sandbox.
 * Returns the fd holding the lock, or -errno (-EWOULDBLOCK: busy). Exclusive callers hold the
 * sandbox lock and create the file if needed; shared ones never create it.
 */
int rt_store_busy(const struct rt_store *st, const char *id, bool exclusive);

/* ---- backends ---- */
struct np_net;
struct rt_sandbox {
	struct rung_router *router;
	struct rt_meta meta;
	char dir[4096];      /* the sandbox's store directory */
	struct np_net *net;  /* in the supervisor: the egress plumbing and DNS proxy */
	bool owned;          /* its creator is its supervisor (rung_acquire_owned) */
	/* Owned only (-1 otherwise; read only when owned): our end of a socket pair whose other
	 * end pid 1 got at its start (fd 7 of rung-agent --init), a handler already waiting on
	 * it. The first agent request takes it instead of connecting (sandbox.c). */
	int first_conn;
	/* Owned only: the exec its creator makes first (rung_acquire_owned's, compared by
	 * address; NULL: none), and whether its frame is on first_conn already, written before
	 * pid 1 ran (sandbox-ns.c), so that pid 1 starts the command as soon as it is ready. */
	const struct rung_exec_req *first_req;
	bool first_sent;
	/* Owned only: its mount namespace, opened as soon as pid 1 runs (-1: not held; the
	 * dispose's, lifecycle.c), since pid 1 may exit by itself (a first exec is its last). */
	int mntns;
	/* Owned only: its group as its start opened it (NULL: none), for its execs' OOM counts
	 * (no second probe of the hierarchies on the way from the command's end to the dispose;
	 * freed with the handle). */
	struct rt_cgroup *cg;
	/* Owned only: our end of its releaser's gate (-1: none), and the releaser (release.c). */
	int release_gate;
	pid_t release_pid;
	/* Set: the cgroup's removal is handed over there (sandbox-cgroup.h), not done. */
	struct rt_cg_later *cg_later;
	/* Owned only: its metadata may be written while pid 1 builds its root (a new sandbox,
	 * whose directory a failed start removes whole), and was (rt_sandbox_meta_early). */
	bool meta_early_ok, meta_early;
};
/* An owned start's metadata (running, its pid 1 init_pid, its creator the supervisor),
 * written by rt_ns_start while pid 1 builds its root, so that it is not on the way from pid
 * 1's report to the first exec; a failure leaves it to create_locked, as without. */
void rt_sandbox_meta_early(struct rt_sandbox *sb, pid_t init_pid);

/* ---- network (net.c): the same egress policy for every rung ---- */
bool rt_net_wanted(const struct rung_spec *s);
/* In the supervisor: a non-empty allowlist gets a host-owned netns + policy (fd returned,
 * -1 when the sandbox makes its own loopback-only netns) and resolv.conf text. */
int rt_net_setup(struct rt_sandbox *sb, int *netns_fd, char **resolv, struct rung_err *err);
/* In the supervisor, for the vm rung: with an allowlist, a tap behind the same policy, plus
 * what the guest needs (a MAC for rung-vmm, kernel parameters: ip=... and rung.dns=...);
 * tap_fd -1 and nothing else without (the VM gets no network device). The fd belongs to
 * sb->net (closed by rt_net_teardown). */
struct rt_vm_net {
	int tap_fd;
	char mac[18];
	char cmdline[640];
};
int rt_net_setup_vm(struct rt_sandbox *sb, struct rt_vm_net *out, struct rung_err *err);
int rt_net_poll_fd(const struct rt_sandbox *sb);
int rt_net_timeout_ms(const struct rt_sandbox *sb);
void rt_net_serve(struct rt_sandbox *sb);
/* Idempotent, from the supervisor or any process (derives names from the id). */
void rt_net_teardown(struct rt_sandbox *sb);
/* The effective egress policy as JSON (netpolicy's description). */
json_t *rt_net_describe(const struct rung_spec *s);
int rt_net_gc(struct rung_router *r, const char *const *live, size_t n, struct rung_err *err);
/* The sandbox table's counters (netpolicy np_sandbox_counters): -ENOENT without a network. */
int rt_net_counters(const struct rt_sandbox *sb, uint64_t *rx_bytes, uint64_t *tx_bytes,
		    uint64_t *refused, struct rung_err *err);

/* What a started sandbox reports back to the creating process. */
struct rt_started {
	pid_t sup_pid;
	uint64_t sup_start;
	pid_t init_pid;
};

struct rt_cgroup; /* cgroup/cgroup.h */
struct rt_backend_ops {
	const char *name;
	enum rung_isolation iso;
	unsigned caps; /* what it offers */
	/* SIGKILL of pid 1 ends the sandbox even while it is suspended (SIGSTOP, not a freezer
	 * or paused vCPUs): a stop need not resume it first. */
	bool kill_ends_suspended;
	/* Is it usable on this host? Fills err with why not. */
	bool (*available)(const struct rung_router *r, struct rung_err *err);
	/* Optional, in the creating process before the supervisor: resolve what the sandbox
	 * needs (the image) and record it in sb->meta.backend. */
	int (*prepare)(struct rt_sandbox *sb, struct rung_err *err);
	/*
	 * Runs IN the supervisor process: build the sandbox (namespaces, mounts, ...) and start
	 * rung-agent as its pid 1, listening on listen_fd. Returns the host pid of pid 1.
	 */
	int (*start)(struct rt_sandbox *sb, int listen_fd, struct rung_err *err);
	/* Runs in the supervisor after pid 1 died or on dispose: free kernel resources. */
	void (*teardown)(struct rt_sandbox *sb);
	int (*suspend)(struct rt_sandbox *sb, struct rung_err *err);
	int (*resume)(struct rt_sandbox *sb, struct rung_err *err);
	/* Optional, in the caller's process, sandbox lock held: save the sandbox to a file in
	 * its store dir, stop its supervisor, record the file in sb->meta (the caller writes
	 * it). resume then starts it again from the file (rt_meta_on_disk). */
	int (*suspend_disk)(struct rt_sandbox *sb, struct rung_err *err);
	/* Any process: remove leftovers of a sandbox whose supervisor is gone (idempotent). */
	void (*cleanup)(struct rt_sandbox *sb);
	/* Optional: OOM kills so far (for ExecResult.oom); -ENOTSUP if unknown. *cg (NULL the
	 * first time) keeps the sandbox's group open between the reads around one exec (opening
	 * it probes every hierarchy: ~50 syscalls); the caller frees it (rt_cgroup_free). */
	int (*oom_kills)(struct rt_sandbox *sb, struct rt_cgroup **cg, uint64_t *n);
};
extern const struct rt_backend_ops rt_backend_process;
extern const struct rt_backend_ops rt_backend_container;
extern const struct rt_backend_ops rt_backend_vm;
const struct rt_backend_ops *rt_backend_get(enum rung_isolation iso);
/* The image-based rungs (image.c): resolve the spec's image, lease it to the sandbox and record
 * {image, image_digest, image_env} in meta.backend (and, with lowers, its unpacked layers, top
 * first); release the lease. */
int rt_image_lease(struct rt_sandbox *sb, const char *rung, char ***lowers, struct rung_err *err);
void rt_image_release(struct rt_sandbox *sb);
/* vm rung: the vCPU count of the limits, and the guest's CFS quota per 100 ms for a fractional
 * one (0: none) (the disks: rfs_vm_upper_disk, rfs_vm_base_disk). */
int rt_vm_cpus(const struct rung_limits *l, unsigned *out, unsigned *quota_us,
	       struct rung_err *err);
/* The effective limits of a sandbox as JSON (inspect): memory, cpus, pids, disk, tmpfs sizes
 * and what enforces them on its rung (sandbox-cgroup.c). */
json_t *rt_limits_describe(const struct rung_limits *l, enum rung_isolation iso);
/* Remove cgroups of this store's sandboxes that are gone; returns how many. store_empty:
 * the store has no sandbox left, so its own top group goes too (when empty). */
int rt_container_gc(struct rung_router *r, bool store_empty, struct rung_err *err);

/* ---- router (router.c) ---- */
struct rung_router {
	struct rt_store store;
	bool deployed;
	char *agent_path;
	char *vmm_path;
	char *rung_path; /* the CLI, for `rung __supervise` re-execs from threaded callers */
	/* the host settings of rung_router_opts, defaults filled in (NULL: see there) */
	char *vm_kernel, *vm_initrd;
	unsigned vm_boot_timeout_ms;
	char *cgroup_root, *loop_control, *uid_registry;
	char *net_pool, *dns_upstream;
	char *dns_search, *dns_options; /* NULL: none */
	bool net_inbound; /* rung_router_opts.net_inbound */
	bool no_clone_into_cgroup;
	bool keep_agent_conns; /* rung_router_opts.keep_agent_conns (agent-keep.c) */
	bool release_at_exit;  /* rung_router_opts.release_at_exit (release.c) */
};
/* The deployed policy (one table): NULL if allowed, else the reason. Pure. */
const char *rt_policy_check(enum rung_isolation iso, const struct rung_spec *spec, bool deployed);
/* The ladder's evidence (ladder.c): deployed, 1 with why naming the probe when this host's
 * current ladder result saw a critical escape in rung iso; the summary rung_inspect cites. */
int rt_ladder_refusal(const struct rung_router *r, enum rung_isolation iso, char *why, size_t n);
json_t *rt_ladder_describe(const struct rung_router *r, enum rung_isolation iso);
/* Operations on a live sandbox, each checked against the sandbox's granted set. */
enum rt_op { RT_OP_EXEC, RT_OP_RUN_CODE, RT_OP_RUN_SHELL, RT_OP_WRITE_FILE, RT_OP__COUNT };
bool rt_op_allowed(unsigned granted, enum rt_op op);
/* 0, or -EACCES naming the operation, the sandbox, what it was granted and what it needs. */
int rt_op_check(const struct rt_meta *m, enum rt_op op, struct rung_err *err);

/* ---- warm pools (pool.c, pool-claim.c; docs/pools.md) ---- */
/* Store layout: <root>/pools/<name>/{pool.json, ready/<id>, claimed/<id>}; a claimed sandbox
 * keeps its id, and the key's own id directory holds "alias" naming it. */
#define RT_POOL_SCOPE_LABEL "0000000000000000000000000000000000000000000000000000000000000000"
/* In rung_acquire, under the key's lock, when the store has no sandbox for the key: 1 and *out
 * when the key's alias or a pool gave one, 0 to create as usual, <0 an error. */
int rt_pool_acquire(struct rung_router *r, const struct rung_key *key,
		    const struct rung_spec *spec, enum rung_isolation iso, const char *key_id,
		    struct rung_sandbox **out, bool *created, struct rung_err *err);
/* A handle on the metadata m just written with the sandbox's lock held (sandbox.c); m's
 * members move to it (m is left empty). */
int rt_sandbox_adopt(struct rung_router *r, struct rt_meta *m, struct rung_sandbox **out,
		     struct rung_err *err);
/* rung_sandbox_lookup's fallback: the sandbox the key id's alias names (-ENOENT: none). */
int rt_pool_alias_open(struct rung_router *r, const char *key_id, const char *scope,
		       struct rung_sandbox **out, struct rung_err *err);
/* In rung_acquire, before the create: while this thread fills a pool, the pool's labels instead
 * of the key's; while it makes a fork (fork.c), the source's labels and the uid range the fork
 * already holds (its copied files are remapped into it). */
void rt_create_override(struct rt_meta *m);
void rt_pool_filling(bool on);
void rt_fork_creating(const struct rt_labels *l, uint32_t uid_base); /* NULL: off */
/* gc: is id's directory an alias whose sandbox still exists? */
bool rt_pool_alias_live(struct rung_router *r, const char *id);
/* dispose of id (its lock held): drop the alias a claim left for it, if it can now. */
void rt_pool_unalias(struct rung_router *r, const char *id, const struct rt_meta *m);
/* Supervisor: is this a ready (unclaimed) pool sandbox? Once claimed, adopt the claim's
 * created_ms, ttl and idle policy from the store (true when it did). */
bool rt_pool_unclaimed(const struct rt_meta *m);
bool rt_pool_adopt(struct rt_sandbox *sb);
/* rung_gc: remove pools whose owner died, stale claims, orphaned ready sandboxes. */
int rt_pool_gc(struct rung_router *r, size_t *removed, struct rung_err *err);
/* <root>/pools[/<name>[/<sub>]] */
int rt_pool_path(const struct rung_router *r, const char *name, const char *sub, char *buf,
		 size_t len);

/* ---- supervisor (supervisor.c) ---- */
int rt_supervisor_spawn(struct rt_sandbox *sb, const struct rt_backend_ops *ops,
			struct rt_started *out, struct rung_err *err);
/* rung_acquire_owned's start: no supervisor process, the caller is one (pid 1 its child, dying
 * with it). 1 when sb cannot be started so (egress, the vm rung, a threaded caller): spawn. */
int rt_supervisor_inline(struct rt_sandbox *sb, const struct rt_backend_ops *ops,
			 struct rt_started *out, struct rung_err *err);
bool rt_supervisor_alive(const struct rt_meta *m);
/* A supervised sandbox's pid 1's mount namespace (-1: none, or pid 1 not provably the
 * supervisor's live child): held across a stop, pid 1 dies without the disk's umount. */
int rt_supervisor_init_mntns(const struct rt_meta *m);
/* Suspended to disk: no supervisor, a snapshot file recorded in the metadata (vm-snap.c). */
bool rt_meta_on_disk(const struct rt_meta *m);
/* Alive for every purpose but signalling: a live supervisor, or suspended to disk. */
bool rt_sandbox_live(const struct rt_meta *m);
/* Stop the supervisor and the sandbox (SIGTERM, then SIGKILL after grace_ms). From the
 * supervisor of an owned sandbox (its creator): kill and reap pid 1, if not reaped yet. */
void rt_supervisor_stop(const struct rt_meta *m, unsigned grace_ms);
/* The same from a dispose that unlinked the disk's image and removes the directory: pid 1's
 * mount namespace may then be let go after the supervisor's exit (supervisor.c). */
void rt_supervisor_stop_disposing(const struct rt_meta *m, unsigned grace_ms);

/* ---- agent client (client.c) ---- */
int rt_agent_connect(const char *sock_path, struct rung_err *err);
/* image_env: the image's own environment (under the spec's), or NULL. sent: req's EXEC frame
 * is on fd already (rt_agent_exec_frame's). keep (NULL: false): in, ask the agent to keep the
 * connection for another exec (not with stdin or callbacks); out, whether it is fit for one
 * (the whole exchange ended with EXIT). */
int rt_agent_exec(int fd, const struct rung_exec_req *req, const struct rung_spec *spec,
		  const char *const *image_env, bool sent, bool *keep, struct rung_exec_res *res,
		  struct rung_err *err);
/* As rt_agent_exec, with req's callbacks served by cb (runtime/callbacks.h; NULL: none). */
struct rt_cb;
int rt_agent_exec_cb(int fd, const struct rung_exec_req *req, const struct rung_spec *spec,
		     const char *const *image_env, bool sent, struct rt_cb *cb, bool *keep,
		     struct rung_exec_res *res, struct rung_err *err);
/* The description `rung __supervise` and `rung __release` start from (the router's settings and
 * sb's metadata) in a memfd, and its reading there (supervisor.c). */
int rt_handoff_memfd(const struct rt_sandbox *sb, struct rung_err *err);
int rt_handoff_read(int fd, struct rung_router **r, struct rt_sandbox **sb, struct rung_err *err);
/* The whole environment they are exec'd with: PATH alone (none of the caller's variables;
 * their settings, the trace's file included, come in the handoff). */
extern char *const rt_rung_envp[];
/* An owned sandbox's releaser (release.c): started by the dispose (0, or -1 when not
 * started: the dispose forks instead); told to go by the dispose, with the sandbox's
 * moved directory ("": none) once its own copy of the mount namespace is closed (false: it
 * was not told, and will do nothing but close the namespace). */
int rt_release_start(struct rt_sandbox *sb);
bool rt_release_go(struct rt_sandbox *sb, const char *trash);
/* The EXEC frame of sb's first exec (sb->first_req), as its rung_exec will expect it sent. */
int rt_sandbox_first_frame(const struct rt_sandbox *sb, struct rung_buf *frame,
			   struct rung_err *err);
/* The whole EXEC frame (header and payload) of req as rt_agent_exec would send it, appended
 * to frame, marked last (the sandbox ends with it: docs/protocol.md); for an exec written
 * before the agent runs, then made with sent. Not for an exec with callbacks. */
int rt_agent_exec_frame(const struct rung_exec_req *req, const struct rung_spec *spec,
			const char *const *image_env, struct rung_buf *frame, struct rung_err *err);
/* Kept connections (agent-keep.c): the parked connection to sandbox id, or -1, with the
 * sandbox's cgroup parked beside it (*cg, NULL if none); park fd and cg (taken over: freed if
 * not parked); close what is parked for id (its dispose). */
struct rt_cgroup;
int rt_keep_take(const struct rt_store *st, const char *id, struct rt_cgroup **cg);
void rt_keep_put(const struct rt_store *st, const char *id, int fd, struct rt_cgroup *cg);
void rt_keep_drop(const struct rt_store *st, const char *id);
/* File operations: timeout_ms bounds the whole operation (rt_agent_file_timeout_ms(size)). */
/* cancel_fd: -1, or an fd whose peer hanging up ends the operation with -ECANCELED */
int rt_agent_write_file(int fd, const char *path, const void *data, size_t len, unsigned mode,
			unsigned timeout_ms, int cancel_fd, struct rung_err *err);
int rt_agent_read_file(int fd, const char *path, size_t max, char **data, size_t *len,
		       unsigned timeout_ms, int cancel_fd, struct rung_err *err);
unsigned rt_agent_file_timeout_ms(uint64_t size);
int rt_agent_ping(int fd, unsigned timeout_ms, struct rung_err *err);
/* An exec's environment (the request's, the spec's, the image's, the defaults; each key once)
 * and its absolute cwd. *env_out: malloc'd strings. */
/* A request's seccomp_bpf: none, or whole instructions within the protocol's maximum. */
int rt_exec_seccomp_check(const void *bpf, size_t len, struct rung_err *err);
int rt_exec_env(const char *const *req_env, const char *req_cwd, const struct rung_spec *spec,
		const char *const *image_env, char ***env_out, char *cwd, size_t cwd_len,
		struct rung_err *err);

/* ---- for procs.c (sandbox.c) ---- */
struct rt_sandbox *rt_sandbox_inner(struct rung_sandbox *s);
/* Check the exec grant, hold the busy lock (*busy, close it after), resume a suspended
 * sandbox and connect to its agent: the fd, or <0. */
int rt_sandbox_agent(struct rung_sandbox *s, int *busy, struct rung_err *err);
/* port-fwd.c: the detached forwards for rung_inspect, [{"port", "host", "host_port",
 * "protocol", "loopback"}] (NULL: out of memory). */
json_t *rt_ports_describe(struct rung_sandbox *s);
/* runtime/ports.c: after the agent's RESULT(PORT_FD 1) on fd, the one byte carrying one fd
 * (SCM_RIGHTS), which must be a connected TCP socket whose peer is the loopback at port.
 * Returns it, or -EPROTO (anything else; every fd that came along is closed) or -ETIMEDOUT. */
int rt_port_recv_passed(int fd, unsigned port, struct rung_err *err);
/* As rt_sandbox_agent, checking op instead of exec (RT_OP__COUNT: no check). */
int rt_sandbox_agent_for(struct rung_sandbox *s, enum rt_op op, int *busy, struct rung_err *err);
/* A request's path as the agent takes it: relative ones are relative to the work dir. */
int rt_sandbox_path(struct rung_sandbox *s, const char *path, char *buf, size_t len,
		    struct rung_err *err);
char **rt_sandbox_image_env(struct rung_sandbox *s);
void rt_sandbox_touch(struct rung_sandbox *s);
int rt_sandbox_cancel_fd(const struct rung_sandbox *s);
/* runtime/cp.c: a TREE_GET of path on the agent connection fd, its entries (validated as
 * hostile) written as a tar stream onto tar_fd (the body of rung_cp_download). */
int rt_cp_get_stream(int fd, const char *path, int tar_fd, const struct rung_cp_opts *opts,
		     int cancel_fd, struct rung_err *err);
/* How many live background processes the running sandbox id has (procs.c): >= 0, or <0 when
 * its agent could not be asked (it is then not kept from idling). */
int rt_procs_live(const struct rt_store *st, const char *id);

/* ---- process-rung building blocks (ns.c, mounts.c, seccomp.c, caps.c) ---- */
/* Pure: the process rung's root: host system dirs read-only, work dir, /tmp, /dev, /proc. */
struct rt_root_params {
	const char *work_src;   /* host dir backing the work dir */
	const char *work_dir;   /* its path inside */
	const char *hostname;
	const char *resolv_conf; /* contents, or NULL */
	uint64_t tmp_bytes;
	bool host_system;       /* bind host /usr, /bin, /lib*, /etc essentials */
	const char *const *overlay_lowers; /* container: image layers (top first) */
	const char *overlay_upper, *overlay_work;
	bool root_mounted;      /* the root was mounted by the parent (container rung) */
	/* The parent mounts what backs work_src while the root is built: the work dir's bind
	 * comes last, after an RUNG_M_WAIT step (process rung). */
	bool work_late;
};
int rt_root_plan(const struct rt_root_params *p, struct rung_mount_plan *out, struct rung_err *err);
/* seccomp: build (parent, before untrusted input) then load (child). */
int rt_seccomp_build(void **bpf, size_t *len, struct rung_err *err);
/* The same filter, built at build time (runtime/seccomp-bpf.c): a malloc'd copy. */
int rt_seccomp_prebuilt(void **bpf, size_t *len, struct rung_err *err);
/* The x86_64 number of a syscall name; -EINVAL naming it when libseccomp cannot resolve it. */
int rt_seccomp_resolve(const char *name, struct rung_err *err);

#endif
