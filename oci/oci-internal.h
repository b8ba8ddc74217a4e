/* oci/oci-internal.h: what oci/'s files share (never included outside oci/). */
#ifndef RUNG_OCI_INTERNAL_H
#define RUNG_OCI_INTERNAL_H

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
#define OCI_ANN_EGRESS "dev.rung.egress-allow"
int oci_annotations_check(const struct oci_config *c, struct rung_err *err);

/* create.c: connect to --console-socket (an fd, or -errno). */
int oci_console_connect(const char *path, struct rung_err *err);

#endif
