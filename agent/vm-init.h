/*
 * agent/vm-init.h: rung-agent's guest bring-up on the vm rung.
 *
 * When rung-agent is pid 1 of a rung-vmm guest (the /init of the initramfs, no
 * --init), main() calls agent_vm_init(). It mounts /proc, /sys, /dev, waits for the
 * image disk (/dev/vda, shared READ-ONLY by every sandbox of that image) and the
 * per-sandbox upper disk (/dev/vdb, ext4, persistent), mounts an overlayfs of the two
 * and moves into it (chdir + mount --move + chroot), with /proc, /sys, /dev (plus
 * /dev/pts, /dev/shm) usable inside. Writes reach the upper disk within about a second
 * (ext4 commit=1, vm.dirty_expire/writeback 1 s), so a VM stopped without a sync loses at
 * most the last second; a host that stops a VM whose upper disk it keeps still runs
 * `sync` in the guest first. It sets the hostname, PATH, HOME and umask and
 * returns a listening AF_VSOCK stream socket on port 1024 (VMADDR_CID_ANY), which
 * rung-vmm bridges to its --vsock-uds Unix socket on the host.
 *
 * Optional kernel command line keys (rung-vmm --cmdline), all strict: an unknown
 * "rung.*" key or a bad value is an error naming it.
 *   rung.root=/dev/vda      image disk (read-only ext4)
 *   rung.upper=/dev/vdb     upper disk (ext4), or "tmpfs" for a throwaway upper
 *   rung.fstype=ext4        filesystem of both disks
 *   rung.hostname=rung      guest hostname
 *   rung.port=1024          vsock port to listen on
 *   rung.wait_ms=5000       how long to wait for the disks to appear
 *   rung.dns=A.B.C.D        the sandbox has egress: its DNS server (the host's allowlist
 *                           proxy), bound read-only over the image's /etc/resolv.conf
 *                           (eth0 itself is configured by the kernel, from ip=)
 *   rung.search=D1,D2,...   with rung.dns: the resolv.conf's search domains (at most 6, 256
 *                           bytes; letters, digits, '.', '-', '_')
 *   rung.dnsopt=O1,O2,...   with rung.dns: its options besides rung's (ndots:5, edns0, ...)
 *   rung.pids=N             8..1000000: every command runs in the guest's cgroup "cmd"
 *                           (agent/vm-cgroup.c) with pids.max N; the agent stays outside
 *   rung.cpu_quota=US       1000..400000, with rung.pids: the group's cpu.max is US per
 *                           100000 us (a fractional limits.cpus)
 *
 * Plan, then apply: agent_vm_opts_parse() and agent_vm_plan_build() are pure and tested
 * without root; agent_vm_plan_apply() makes the syscalls.
 */
#ifndef RUNG_AGENT_VM_INIT_H
#define RUNG_AGENT_VM_INIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define AGENT_VM_PORT 1024
#define AGENT_VM_PATH_MAX 64
#define AGENT_VM_DATA_MAX 640
/* The pod's resolv.conf search list as glibc bounds it (6 domains, 256 bytes) and options. */
#define AGENT_VM_SEARCH_MAX 256
#define AGENT_VM_SEARCH_DOMAINS 6
#define AGENT_VM_DNSOPT_MAX 128
#define AGENT_VM_STEPS_MAX 48

struct agent_vm_opts {
	char root_dev[AGENT_VM_PATH_MAX];  /* "/dev/vda" */
	char upper_dev[AGENT_VM_PATH_MAX]; /* "/dev/vdb", or "" for a tmpfs upper */
	char fstype[16];                   /* "ext4" */
	char hostname[64];                 /* "rung" */
	uint32_t port;                     /* 1024 */
	uint32_t wait_ms;                  /* 5000 */
	char dns[16];                      /* "" (no network), or the DNS server's IPv4 */
	char search[AGENT_VM_SEARCH_MAX + 1]; /* rung.search: "" or domains, comma-separated */
	char dnsopt[AGENT_VM_DNSOPT_MAX + 1]; /* rung.dnsopt: "" or resolv.conf options, ditto */
	uint32_t pids;                     /* rung.pids: the commands' pids.max; 0: none */
	uint32_t cpu_quota;                /* rung.cpu_quota: their CFS quota (us); 0: none */
	bool privileged;                   /* rung.privileged=1: test stages only (below) */
};

enum agent_vm_step_kind {
	AGENT_VM_MKDIR,  /* mkdir target, mode; an existing directory is fine */
	AGENT_VM_MOUNT,  /* mount source on target (fstype, flags, data) */
	AGENT_VM_WAIT,   /* wait until target (a device node) exists, up to wait_ms */
	AGENT_VM_MOVE,   /* mount --move source target */
	AGENT_VM_SWITCH, /* chdir target; mount --move . /; chroot .; chdir / */
	AGENT_VM_WRITE,  /* write data to the existing file target (a sysctl) */
	AGENT_VM_CREATE, /* create or replace the regular file target with data (0644) */
	AGENT_VM_TOUCH,  /* target exists as a regular file afterwards (a symlink is replaced) */
};

struct agent_vm_step {
	enum agent_vm_step_kind kind;
	char source[AGENT_VM_PATH_MAX];
	char target[AGENT_VM_PATH_MAX];
	char fstype[16];
	unsigned long flags;
	char data[AGENT_VM_DATA_MAX]; /* MOUNT: options; WRITE: the bytes */
	unsigned mode;    /* MKDIR */
	int ebusy_ok;     /* MOUNT: already mounted (devtmpfs automount) is fine */
	int keep_fd;      /* CREATE: the file stays open read-write in agent_vm_resolv_fd */
};

struct agent_vm_plan {
	struct agent_vm_step steps[AGENT_VM_STEPS_MAX];
	size_t n;
	uint32_t wait_ms;
};

/* Pure: defaults, then "rung.*" keys from a kernel command line (NULL: defaults only). */
int agent_vm_opts_parse(const char *cmdline, struct agent_vm_opts *o, struct rung_err *err);
/* Pure: the mount plan for opts. */
int agent_vm_plan_build(const struct agent_vm_opts *o, struct agent_vm_plan *p,
			struct rung_err *err);
/* Makes the syscalls of a plan, in order; the error names the step that failed. */
int agent_vm_plan_apply(const struct agent_vm_plan *p, struct rung_err *err);
/* Listening AF_VSOCK SOCK_STREAM socket on (VMADDR_CID_ANY, port), CLOEXEC. */
int agent_vm_listen(uint32_t port, struct rung_err *err);

/*
 * All of the above for pid 1: parse /proc/cmdline, apply the plan, set hostname and
 * environment, and return the listening vsock fd in *listen_fd. Returns 0 or -errno.
 */
/* *privileged: rung.privileged=1 was given. The nested test stage sets it for the guests that
 * must own their kernel (writing garbage into virtio registers through /dev/mem); the runtime
 * never does, and the guest cannot change its command line. Then the agent keeps root and
 * commands run with root's capabilities, in that guest only. */
/* The guest's /etc/resolv.conf naming the DNS proxy dns (the egress allowlist's), with the
 * search domains and options (comma-separated, as rung.search/rung.dnsopt; "" or NULL: none). */
void agent_vm_resolv_text(char *out, size_t cap, const char *dns, const char *search,
			  const char *dnsopt);
/* The boot's rung.search and rung.dnsopt, for a restore's rewrite of the file. */
extern char agent_vm_resolv_search[AGENT_VM_SEARCH_MAX + 1];
extern char agent_vm_resolv_dnsopt[AGENT_VM_DNSOPT_MAX + 1];
/* The initramfs file bound read-only over the guest's /etc/resolv.conf, kept open read-write
 * by the plan (-1 without a network): RESTORED's fixer rewrites it for a restored guest's own
 * DNS proxy (agent/restored.c). */
extern int agent_vm_resolv_fd;

int agent_vm_init(int *listen_fd, bool *privileged, struct rung_err *err);

/* pid 1, before the root switch: the commands' cgroup with pids.max = pids and cpu.max =
 * cpu_quota per 100 ms (vm-cgroup.c); 0: none (no pids: no group at all). */
int agent_vm_cgroup_setup(uint32_t pids, uint32_t cpu_quota, struct rung_err *err);

#endif
