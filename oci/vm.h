/*
 * oci/vm.h: rung-oci on the vm rung (docs/oci.md, "The vm rung"). vm-select.c picks the rung
 * (the program's name, --isolation, the bundle's dev.rung.isolation annotation, which may only
 * raise it) and refuses what a VM cannot honour; vm.c runs the container in rung-vmm through
 * rung's library (one vm sandbox per container) behind a host-side proxy process.
 */
#ifndef RUNG_OCI_VM_H
#define RUNG_OCI_VM_H

#include "oci/oci.h"
#include "rung/rung.h"

#define OCI_ISOLATION_KEY "dev.rung.isolation"

/* Pure: "container" / "vm" (0), else -EINVAL. */
int oci_rung_parse(const char *name, bool *vm);
/* Pure: the program is called rung-oci-vm (argv[0]'s basename). */
bool oci_rung_from_argv0(const char *argv0);
/* Pure: the rung of a bundle: the runtime's (vm), raised by annotations' dev.rung.isolation
 * (NULL or no key: unchanged). A lowering or an unknown value is refused naming the key. */
int oci_rung_resolve(bool runtime_vm, json_t *annotations, bool *vm, struct rung_err *err);
/* The rung create runs o's bundle on (o->vm raised by its config.json's annotation). */
int oci_vm_wanted(const struct oci_create_opts *o, bool *vm, struct rung_err *err);
/* What the vm rung cannot honour in a parsed config, refused naming the field (it opens the
 * file binds' sources: oci_vm_mounts_check). */
int oci_vm_config_check(const struct oci_config *c, struct rung_err *err);

/* vm-binds.c: a bind's source is copied into the guest: a regular file of at most
 * OCI_VM_BIND_MAX bytes, OCI_VM_BINDS_TOTAL in all; a directory within OCI_VM_DIR_DEPTH levels
 * and OCI_VM_DIR_ENTRIES entries each, its files OCI_VM_DIR_BYTES for all directories together
 * (a pod's Secret or ConfigMap is at most 1 MiB, a token a few KiB: dozens of volumes, and an
 * emptyDir an init container filled a little, fit; the tar is held in memory once). */
#define OCI_VM_BIND_MAX (1u << 20)
#define OCI_VM_BINDS_TOTAL (4u << 20)
#define OCI_VM_DIR_BYTES (64u << 20)
#define OCI_VM_DIR_ENTRIES 10000u
#define OCI_VM_DIR_DEPTH 32u
/* The mounts: the guest's own (proc, sysfs, tmpfs, devpts, mqueue, cgroup: ignored) or a bind
 * of a regular file or a directory within the limits (a directory walked as the copy walks it,
 * nothing read); anything else refused naming mounts[i]. */
int oci_vm_mounts_check(const struct oci_config *c, struct rung_err *err);
/* Copy every bind's source (a file, or a directory's tree) to its destination in sb's root
 * (the agent makes missing parents), with the source's mode less the write bits when the mount says ro; own_resolv (the
 * guest has a network, whose resolv.conf the agent made read-only): not /etc/resolv.conf. */
int oci_vm_binds_copy(struct rung_sandbox *sb, const struct oci_config *c, bool own_resolv,
		      struct rung_err *err);

/* vm-bindtree.c: mount m's (mounts[i]) source directory dirfd walked as hostile (never a link
 * followed, one filesystem, within the bounds; a device, fifo, socket, or a symlink absolute or
 * leaving the directory refused naming mounts[i] and the entry) into a pax tar on out (-1:
 * only walked) whose top directory is the destination's last component, write bits dropped
 * when m is ro; its file bytes added to *bytes (all directory binds' so far). */
int oci_vm_bind_tree(int dirfd, const struct oci_mount *m, size_t i, int out, uint64_t *bytes,
		     struct rung_err *err);
/* Pure: a destination as its parent's guest path and its last component; -EINVAL when there
 * is none (the root, ".", ".."). */
int oci_vm_dst_split(const char *dst, char *parent, size_t pn, char *top, size_t tn);

/* The router's options (the RUNG_* variables main read); NULL with why: they were bad. */
void oci_vm_router_opts(const struct rung_router_opts *o, const char *why);
/* The container under root is a vm-rung one (its state directory says so). */
bool oci_vm_is(const char *root, const char *id);
int oci_vm_create(const struct oci_create_opts *o, struct rung_err *err);
int oci_vm_kill(const char *root, const char *id, int sig, bool all, struct rung_err *err);
int oci_vm_delete(const char *root, const char *id, bool force, struct rung_err *err);
int oci_vm_ps(const char *root, const char *id, bool json, struct rung_err *err);
/* pause: the VM's vCPUs stopped (rung_suspend), vm.paused (OCI_VM_PAUSED) in the state
 * directory while they are; resume: started again. Only a running container pauses. */
int oci_vm_pause(const char *root, const char *id, bool pause, struct rung_err *err);
/* A command the vm rung does not run (events, update): the reason. */
int oci_vm_refuse(const char *cmd, const char *id, struct rung_err *err);
/* A running vm container's stats event line (runc's shape, the guest's figures), or NULL. */
char *oci_vm_stats_event(const char *root, const char *id, struct rung_err *err);
/* rung-oci-vm's linux.resources.pids.limit when the spec has none: limits.pids's largest */
#define OCI_VM_PIDS_MAX 1000000
/* vm.c: the container's sandbox (through a router on its store) and the program's handle
 * ("" before start). */
int oci_vm_sandbox(const char *root, const char *id, struct rung_router **r,
		   struct rung_sandbox **sb, char *store, size_t sn, char *handle,
		   struct rung_err *err);
/* Remove a container's store (only one under <root>/.vm), and .vm with the last. */
void oci_vm_store_remove(const char *root, const char *store);

/* vm-net.c: the pod's network (linux.namespaces[network].path) for the guest. */
#define OCI_VM_SEARCH_MAX 256
#define OCI_VM_SEARCH_DOMAINS 6
#define OCI_VM_DNSOPT_MAX 128
/* Pure: a resolv.conf's search domains (its last search or domain line's, as glibc: the first
 * 6 within 256 bytes) and options (every options line's, within 128 bytes) as comma-separated
 * lists; a token of other characters than letters, digits, '.', '-', '_' (and ':' in an
 * option) is left out, as one past the bounds. */
void oci_vm_resolv_lists(const char *text, char *search, char *dnsopt);
struct oci_vm_net {
	int host_fd;	/* create's own namespace, to come back to */
	bool joined;	/* in the pod's namespace now */
	char **allow;	/* the spec's egress_allow (the annotation's, else 0.0.0.0/0) */
	char dns[64];	/* the pod's resolver ("": none named) */
	char search[OCI_VM_SEARCH_MAX + 1]; /* its search domains, comma-separated ("": none) */
	char dnsopt[OCI_VM_DNSOPT_MAX + 1]; /* its options, comma-separated ("": none) */
	uint64_t ino, dev; /* the pod's namespace */
};
/* create, before the sandbox is acquired: enter the pod's namespace (not the host's: then
 * nothing, or the annotation refused) with the allowlist and resolver for the guest. */
int oci_vm_net_enter(const struct oci_config *c, struct oci_vm_net *n, struct rung_err *err);
/* Back to create's namespace (when joined); frees what is left of n. */
void oci_vm_net_leave(struct oci_vm_net *n);
/* vm.json's netns fields (none when not joined); -ENOMEM. */
int oci_vm_net_record(const struct oci_vm_net *n, const struct oci_config *c, json_t *vm);
/* delete: enter the namespace vm.json names, when it is still that one (else nothing). */
int oci_vm_net_rejoin(json_t *vm, struct oci_vm_net *n, struct rung_err *err);

/* vm-proxy.c: the container's host-side process (the pid the shim waits on). It waits for
 * `start` on fifo (-1: starts at once), starts c's process in the sandbox through the agent
 * (its handle in <dir>/vm.proc; dir NULL: not kept), writes a byte to ready (-1: none) once
 * it waits on the fifo (its terminal made), or without a fifo once the process started, relays
 * stdio (console: the socket to send a terminal's master to, else -1) and exits with the
 * program's status (128 + the signal when killed). */
void oci_vm_proxy_run(struct rung_sandbox *sb, const struct oci_config *c, int fifo,
		      int console, const char *dir, int ready) __attribute__((noreturn));
/* vm-exec.c: exec in a vm container: a proxy as create's, without the fifo. */
int oci_vm_exec(const struct oci_exec_opts *o, int *status, struct rung_err *err);

/* linux.resources.cpu as the vm rung's limits.cpus, in thousandths (oci/vm.c). */
uint32_t oci_vm_cpus_milli(const struct oci_cpu *c);

#endif
