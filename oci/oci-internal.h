/* oci/oci-internal.h: what oci/'s files share (never included outside oci/). */
#ifndef RUNG_OCI_INTERNAL_H
#define RUNG_OCI_INTERNAL_H

#include <sys/stat.h>

#include "oci/oci.h"

/* mount.c, run by the container's init */
int oci_mounts_apply(const struct oci_config *c, struct rung_err *err);
int oci_paths_apply(const struct oci_config *c, struct rung_err *err);
int oci_remount(const char *target, unsigned long flags, unsigned long clear, struct rung_err *err);

/* The init's side of create (init.c); the messages on the sync socket. */
enum { OCI_SYNC_MAPPED = 'M', OCI_SYNC_PRIVATE = 'P', OCI_SYNC_ROOT = 'R', OCI_SYNC_READY = 'K',
       OCI_SYNC_ERROR = 'E' };
struct oci_sync_msg {
	char tag;
	struct rung_err err;
};
/* overlay.c: is rootfs an overlay mount; its options (opts) read and the mount detached, in the
 * host's namespace; then, in the container's, the same stack mounted on rootfs with its lower
 * layers idmapped for userns (host_root: the container's root on the host); scratch: an
 * absolute private directory for the layers' clones while the overlay is made. */
bool oci_rootfs_is_overlay(const char *rootfs);
int oci_overlay_take(const char *rootfs, char *opts, size_t n, struct rung_err *err);
int oci_overlay_idmapped(const char *rootfs, const char *opts, int userns, uint32_t host_root,
			 const char *scratch, struct rung_err *err);
/* rootfd.c: one tag byte with fd (-1: none) attached; the receiving side (*fd -1: none). */
int oci_sync_send_fd(int sock, char tag, int fd);
int oci_sync_recv_fd(int sock, char want, int *fd, struct rung_err *err);
struct oci_init_args {
	int sync_fd, fifo_fd, console_fd;
	const void *bpf, *spec_bpf; /* rung's filter; the spec's (NULL: none) */
	size_t bpf_len, spec_bpf_len;
	bool no_pivot;
};
/* Never returns: execs process.args after `start`, or _exits 127 having reported. */
void oci_init_run(const struct oci_config *c, const struct oci_init_args *a)
	__attribute__((noreturn));
/* init.c's steps, shared with exec.c: the pty (sent over sock), process.user and
 * capabilities, one seccomp filter, and the execve of c->args (PATH from c->env). */
int oci_console_apply(int sock, struct rung_err *err);
int oci_identity_apply(const struct oci_config *c, struct rung_err *err);
int oci_seccomp_load(const void *bpf, size_t len, struct rung_err *err);
/* The last steps before a container process execs (the init and exec's): rung's filter, then
 * the spec's (spec_bpf may be NULL), the process's identity, its cwd, no_new_privs. */
int oci_process_finish(const struct oci_config *c, const void *bpf, size_t bpf_len,
		       const void *spec_bpf, size_t spec_bpf_len, struct rung_err *err);
void oci_exec_program(const struct oci_config *c) __attribute__((noreturn));
/* create.c, shared with the vm rung's (vm.c): check the id, make the pid file's path absolute
 * (pid_file, n), load the bundle's config into cfg, match process.terminal and
 * --console-socket; and, once the container's pid is known, write state.json and the pid file
 * (atomically). */
int oci_create_load(const struct oci_create_opts *o, struct oci_config *cfg, char *pid_file,
		    size_t n, struct rung_err *err);
int oci_create_record(const char *root, struct oci_state *st, pid_t pid, json_t *annotations,
		      const char *pid_file, struct rung_err *err);
/* exec.c: the process exec runs (the bundle's config with o's process), parsed into cfg. */
int oci_exec_config(const struct oci_exec_opts *o, const struct oci_state *st,
		    struct oci_config *cfg, struct rung_err *err);

/* egress.c: dev.rung.egress-allow applied in the joined network namespace, which the caller
 * is in (create), and its table and DNS proxy removed (delete; idempotent, a no-op without). */
/* In create's own process, before the init is cloned: check and join the pod's ipc and uts
 * namespaces the spec gives by path (nsjoin.c); a spec's hostname must then be the pod's. With
 * ipc joined and an mqueue mount, c->mqueue_fd is that namespace's (mount.c moves it in). */
int oci_ns_join(struct oci_config *c, struct rung_err *err);
/* Whether st (a namespace's stat) is pid 1's namespace of that /proc name ("net", "ipc")
 * or process also's: the host's, never a pod's. */
bool oci_ns_is_hosts(const char *name, const struct stat *st, pid_t also);
/* The checks of oci_ns_join on j (when it has a path: of type flag, not the host's, owned by a
 * container's user namespace), without joining: the vm rung's guest has its own ipc and uts. */
int oci_ns_check(const struct oci_ns_join *j, int flag, const char *name, struct rung_err *err);
int oci_egress_up(const struct oci_config *c, const char *root, const char *id,
		  struct rung_err *err);
int oci_egress_down(const char *root, const char *id, struct rung_err *err);
/* The pod's resolver: the first nameserver of the resolv.conf the container gets (the spec's
 * bind on /etc/resolv.conf, as CRI gives, else the rootfs's); IPv4, not loopback. */
int oci_egress_resolver(const struct oci_config *c, char ip[64], struct rung_err *err);

/* exec.c: the CLONE_NEW* flags of the namespaces pid is in that are not rung-oci's own. */
int oci_ns_flags_of(pid_t pid);

/* hooks.c: the spec's hooks (docs/oci.md, "Hooks"). check refuses a malformed hooks object,
 * naming the field; run runs hooks.<kind> (from the object kept in the state) in order, with
 * the state document (this status) on stdin, in the container's namespaces when ns is given;
 * the first failure is the error, except for poststart and poststop (a warning on stderr and
 * the rest goes on, as the spec says). The create/start/delete steps: */
struct oci_hook_ns {
	int pidfd, flags;
};
int oci_hooks_check(json_t *doc, struct rung_err *err);
int oci_hooks_run(const struct oci_state *s, const char *kind, const char *status,
		  const struct oci_hook_ns *ns, struct rung_err *err);
/* prestart, createRuntime (here), createContainer (in the namespaces of the init, s->pid):
 * "creating" */
int oci_hooks_create(const struct oci_state *s, struct rung_err *err);
/* startContainer (the init's namespaces, "created") before the program; poststart after */
int oci_hooks_start(const struct oci_state *s, bool after, struct rung_err *err);

/* annotations.c: refuse the dev.rung.* annotations create does not apply (naming them). */
int oci_annotations_check(const struct oci_config *c, struct rung_err *err);

/* create.c: connect to --console-socket (an fd, or -errno). */
int oci_console_connect(const char *path, struct rung_err *err);

#endif
