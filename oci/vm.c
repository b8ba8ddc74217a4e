/*
 * oci/vm.c: a container on the vm rung. create commits the bundle's rootfs as an image into a
 * store of the container's own (<root>/<id>/store) and acquires one vm sandbox of it through
 * rung's library: the vm rung's base disk (ext4 of the tree), jailed rung-vmm and rung-agent as
 * the guest's init, exactly as `rung run --isolation vm`. The pid the shim waits on is a proxy
 * (vm-proxy.c), a child of create; `kill` reaches the program through the agent, `delete`
 * disposes of the sandbox and removes the state directory with its store.
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/oci-internal.h"
#include "oci/vm.h"
#include "rootfs/rfs.h"

#define OCI_VM_STORE_MAX 53 /* 107 - strlen("/sandboxes/") - 32 - strlen("/agent.sock") */

static const struct rung_router_opts *router_opts;
static const char *router_why;

void oci_vm_router_opts(const struct rung_router_opts *o, const char *why)
{
	router_opts = o;
	router_why = why;
}

/* net: the pod's network when joined (its resolver, its inbound connections), else NULL. */
static int router_open(const char *store, const struct oci_vm_net *net, struct rung_router **r,
		       struct rung_err *err)
{
	if (!router_opts)
		return rung_err_set(err, EINVAL, "the vm rung: %s", router_why ? router_why
						     : "no router options");
	struct rung_router_opts o = *router_opts;
	o.state_dir = store;
	if (net && net->joined) {
		o.net_inbound = true;
		if (net->dns[0])
			o.dns_upstream = net->dns;
		o.dns_search = net->search; /* the pod's resolv.conf's ("": none) */
		o.dns_options = net->dnsopt;
	}
	return rung_router_new(&o, r, err);
}

bool oci_vm_is(const char *root, const char *id)
{
	char p[PATH_MAX];
	struct rung_err e = {0};
	return oci_id_check(id, &e) == 0 && oci_state_path(root, id, "vm.json", p, sizeof(p)) == 0 &&
	       access(p, F_OK) == 0;
}

/* vm.json: the sandbox's id and its store; handle: the program's, from vm.proc ("" before
 * start). */
static int vm_read(const char *root, const char *id, char *sbid, size_t n, char *store,
		   size_t sn, char *handle, struct rung_err *err)
{
	char p[PATH_MAX];
	cleanup_free char *h = NULL;
	oci_state_path(root, id, "vm.json", p, sizeof(p));
	json_error_t je;
	cleanup_json json_t *j = json_load_file(p, 0, &je);
	const char *s = json_string_value(json_object_get(j, "sandbox"));
	const char *d = json_string_value(json_object_get(j, "store"));
	if (!s || !d)
		return rung_err_set(err, EIO, "%s: no sandbox or store", p);
	snprintf(sbid, n, "%s", s);
	snprintf(store, sn, "%s", d);
	handle[0] = '\0';
	oci_state_path(root, id, "vm.proc", p, sizeof(p));
	if (rung_file_load(AT_FDCWD, p, 64, &h, NULL, NULL) == 0)
		snprintf(handle, RUNG_PROC_HANDLE_LEN + 1, "%s", h);
	return 0;
}

struct vm_ctx {
	const struct oci_create_opts *o;
	struct oci_config cfg;
	struct oci_state st;
	char dir[PATH_MAX], pid_file[PATH_MAX];
	char store[PATH_MAX]; /* <root>/.vm/XXXXXX: short (the agent's socket path is in it) */
	struct rung_router *router;
	struct rung_sandbox *sb;
	struct oci_vm_net net; /* the pod's network namespace, joined for the acquire */
	pid_t proxy;
	int fifo, console;
	bool dir_made;
};

/* The bundle's rootfs as the image rung-oci/bundle:latest of the container's store. */
static int rootfs_commit(struct vm_ctx *x, const char *store, struct rung_err *err)
{
	struct rfs_store *st = NULL;
	struct rfs_image_info info = {0};
	struct rfs_commit_stats cs = {0};
	cleanup_close int dfd = open(x->cfg.rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return rung_err_sys(err, errno, "root.path %s", x->cfg.rootfs);
	int r = rfs_store_open(store, &st, err);
	if (r == 0)
		r = rfs_image_commit_tree(st, NULL, dfd, NULL, 0, "rung-oci/bundle:latest", &cs,
					  &info, err);
	rfs_image_info_release(&info);
	rfs_store_free(st);
	return r < 0 ? rung_err_wrap(err, "root.path %s", x->cfg.rootfs) : 0;
}

/*
 * linux.resources.cpu.quota/period as the vm rung's cpus (runtime/backend-vm.c): ceil of it
 * vCPUs, and a fractional one the guest's quota per 100 ms (the ratio kept, the period not);
 * at most 4 (the rung's most vCPUs), at least 0.01. Without a quota: one vCPU, no quota.
 */
uint32_t oci_vm_cpus_milli(const struct oci_cpu *c)
{
	if (c->quota <= 0)
		return 1000;
	uint64_t period = c->period ? c->period : 100000;
	uint64_t m = ((uint64_t)c->quota * 1000 + period / 2) / period;
	return m < 10 ? 10 : m > 4000 ? 4000 : (uint32_t)m;
}

static int sandbox_boot(struct vm_ctx *x, struct rung_err *err)
{
	int r = oci_vm_net_enter(&x->cfg, &x->net, err);
	if (r == 0)
		r = router_open(x->store, &x->net, &x->router, err);
	if (r == 0)
		r = rootfs_commit(x, x->store, err);
	if (r < 0)
		return r;
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("oci");
	s.image = strdup("rung-oci/bundle:latest");
	if (x->cfg.cwd && x->cfg.cwd[0] == '/' && x->cfg.cwd[1]) /* "/": the spec's default */
		s.work_dir = strdup(x->cfg.cwd);
	s.isolation = RUNG_ISO_VM;
	s.ttl_s = 0;
	s.egress_allow = x->net.allow; /* the spec's now */
	x->net.allow = NULL;
	if (x->cfg.limits.memory_bytes)
		s.limits.memory_bytes = x->cfg.limits.memory_bytes;
	/* linux.resources.pids.limit: pids.max of the guest's command cgroup (agent/vm-cgroup.c);
	 * without one, none in effect (the rung's largest), as on the container rung */
	uint32_t pids = x->cfg.limits.pids_max;
	s.limits.pids = pids && pids < OCI_VM_PIDS_MAX ? pids : OCI_VM_PIDS_MAX;
	s.limits.cpus_milli = oci_vm_cpus_milli(&x->cfg.cpu);
	struct rung_key key = {.scope = "rung-oci", .thread = x->o->id, .agent = "oci"};
	r = s.kind && s.image ? 0 : rung_err_set(err, ENOMEM, "out of memory");
	if (r == 0)
		r = rung_acquire(x->router, &key, &s, &x->sb, NULL, err);
	rung_spec_release(&s);
	if (r < 0)
		return rung_err_wrap(err, "the vm rung");
	if ((r = oci_vm_binds_copy(x->sb, &x->cfg, x->net.joined, err)) < 0)
		return r;
	char p[PATH_MAX];
	oci_state_path(x->o->root, x->o->id, "vm.json", p, sizeof(p));
	cleanup_free char *t = NULL;
	cleanup_json json_t *j = json_pack("{s:s, s:s}", "sandbox", rung_sandbox_id(x->sb),
					   "store", x->store);
	if (!j || oci_vm_net_record(&x->net, &x->cfg, j) < 0 || !(t = json_dumps(j, 0)))
		return rung_err_set(err, ENOMEM, "out of memory");
	return rung_write_file_replace(AT_FDCWD, p, t, strlen(t), 0600, err);
}

/* The container's store, <root>/.vm/XXXXXX: a sandbox's agent socket is
 * <store>/sandboxes/<32 hex>/agent.sock, within a socket address's 107 bytes. */
static int store_make(struct vm_ctx *x, struct rung_err *err)
{
	char vmdir[PATH_MAX];
	snprintf(vmdir, sizeof(vmdir), "%s/.vm", x->o->root);
	if (mkdir(vmdir, 0711) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s", vmdir);
	if (snprintf(x->store, sizeof(x->store), "%s/XXXXXX", vmdir) > OCI_VM_STORE_MAX)
		return rung_err_set(err, ENAMETOOLONG, "--root %s: too long for the vm rung (its "
				    "store's sockets; at most %d bytes)", x->o->root,
				    OCI_VM_STORE_MAX - 11);
	if (!mkdtemp(x->store) || chmod(x->store, 0711) < 0)
		return x->store[0] = '\0', rung_err_sys(err, errno, "mkdir %s", vmdir);
	return 0;
}

static int vm_prepare(struct vm_ctx *x, struct rung_err *err)
{
	const struct oci_create_opts *o = x->o;
	int r = oci_create_load(o, &x->cfg, x->pid_file, sizeof(x->pid_file), err);
	if (r == 0)
		r = oci_vm_config_check(&x->cfg, err);
	if (r < 0)
		return r;
	if ((r = rung_mkdir_p(o->root, 0711, err)) < 0)
		return rung_err_wrap(err, "--root");
	chmod(o->root, 0711); /* the jailed VMM's uid reaches its jail under it */
	oci_state_path(o->root, o->id, NULL, x->dir, sizeof(x->dir));
	if (mkdir(x->dir, 0711) < 0)
		return errno == EEXIST ? rung_err_set(err, EEXIST, "container %s already exists", o->id)
				       : rung_err_sys(err, errno, "mkdir %s", x->dir);
	x->dir_made = true;
	snprintf(x->st.id, sizeof(x->st.id), "%s", o->id);
	snprintf(x->st.bundle, sizeof(x->st.bundle), "%s", x->cfg.bundle);
	snprintf(x->st.cgroup, sizeof(x->st.cgroup), "rung-oci-vm/%s", o->id); /* none: a VM */
	return store_make(x, err);
}

/* After the sandbox's supervisor is forked (it must not hold these): the fifo, the console. */
static int proxy_spawn(struct vm_ctx *x, struct rung_err *err)
{
	char fifo[PATH_MAX + 16];
	snprintf(fifo, sizeof(fifo), "%s/exec.fifo", x->dir);
	if (mkfifo(fifo, 0600) < 0 || (x->fifo = open(fifo, O_RDWR | O_CLOEXEC)) < 0)
		return rung_err_sys(err, errno, "exec fifo %s", fifo);
	if (x->o->console_socket &&
	    (x->console = oci_console_connect(x->o->console_socket, err)) < 0)
		return x->console;
	int rd[2];
	if (pipe2(rd, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe");
	pid_t pid = fork();
	if (pid == 0) {
		close(rd[0]);
		oci_vm_proxy_run(x->sb, &x->cfg, x->fifo, x->console, x->dir, rd[1]);
	}
	close(rd[1]);
	char b;
	ssize_t n = pid < 0 ? -1 : read(rd[0], &b, 1);
	close(rd[0]);
	if (pid < 0)
		return rung_err_sys(err, errno, "fork the container's proxy");
	if (n != 1) {
		waitpid(pid, NULL, 0);
		return rung_err_set(err, EIO, "the container's proxy failed before start (its "
				    "reason above)");
	}
	x->proxy = pid;
	return oci_create_record(x->o->root, &x->st, pid, x->cfg.annotations, x->pid_file, err);
}

static void vm_undo(struct vm_ctx *x)
{
	struct rung_err e = {0};
	if (x->proxy > 0)
		kill(x->proxy, SIGKILL);
	if (x->sb)
		rung_dispose(x->router, rung_sandbox_id(x->sb), NULL, &e);
	if (x->dir_made)
		rung_rm_rf(x->dir, &e);
	oci_vm_store_remove(x->o->root, x->store);
}

int oci_vm_create(const struct oci_create_opts *o, struct rung_err *err)
{
	struct vm_ctx x = {.o = o, .fifo = -1, .console = -1, .st.uid_slot = OCI_UID_SLOTS,
			   .net.host_fd = -1};
	syscall(SYS_close_range, 3, ~0u, 4 /* CLOSE_RANGE_CLOEXEC */);
	int r = vm_prepare(&x, err);
	if (r == 0)
		r = sandbox_boot(&x, err);
	if (r == 0)
		r = proxy_spawn(&x, err);
	if (r < 0)
		vm_undo(&x); /* still in the pod's namespace: the tap and table go there */
	oci_vm_net_leave(&x.net);
	if (x.fifo >= 0)
		close(x.fifo);
	if (x.console >= 0)
		close(x.console);
	rung_sandbox_close(x.sb);
	rung_router_free(x.router);
	oci_state_release(&x.st);
	oci_config_release(&x.cfg);
	return r;
}

/* The container's sandbox, opened through a router on its store; handle: vm.proc's ("" none). */
int oci_vm_sandbox(const char *root, const char *id, struct rung_router **r,
		   struct rung_sandbox **sb, char *store, size_t sn, char *handle,
		   struct rung_err *err)
{
	char sbid[128];
	int rc = vm_read(root, id, sbid, sizeof(sbid), store, sn, handle, err);
	if (rc < 0)
		return rc;
	rc = router_open(store, NULL, r, err);
	return rc < 0 ? rc : rung_sandbox_open(*r, sbid, NULL, sb, err);
}

void oci_vm_store_remove(const char *root, const char *store)
{
	char vmdir[PATH_MAX];
	int n = snprintf(vmdir, sizeof(vmdir), "%s/.vm/", root);
	struct rung_err e = {0};
	if (!store || strncmp(store, vmdir, (size_t)n) != 0 || strchr(store + n, '/') ||
	    !store[n])
		return; /* only a store of ours */
	rung_rm_rf(store, &e);
	vmdir[n - 1] = '\0';
	rmdir(vmdir); /* with the last vm container */
}
