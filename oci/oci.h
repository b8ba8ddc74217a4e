/*
 * oci/oci.h: rung-oci, the OCI runtime command line on the container rung (docs/oci.md).
 * config.c reads a bundle's config.json into struct oci_config and refuses what rung does not
 * run (naming the field); state.c keeps one directory per container under --root; start.c
 * creates the container's init, which waits on the exec fifo until `start`.
 */
#ifndef RUNG_OCI_H
#define RUNG_OCI_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>

#include "cgroup/cgroup.h"
#include "common/err.h"

static inline void oci_json_decrefp(json_t **j) { json_decref(*j); }
#define cleanup_json __attribute__((cleanup(oci_json_decrefp)))

#define OCI_VERSION "1.0.2"
#define OCI_UID_BASE0 500000000u /* host ids for rung-oci's user namespaces (rung's end below) */
#define OCI_UID_RANGE 65536u
#define OCI_CGROUP_PARENT "rung-oci" /* the default linux.cgroupsPath is rung-oci/<id> */
#define OCI_UID_SLOTS 4096u

struct oci_mount {
	char *dst, *src, *type, *data;
	unsigned long flags;	/* MS_* set */
	unsigned long clear;	/* MS_* the options cleared ("rw", "suid", ...) */
	unsigned long prop;	/* MS_PRIVATE/SLAVE/SHARED/UNBINDABLE (| MS_REC) or 0 */
	bool bind, rec;
};

struct oci_idmap {
	uint32_t inner, outer, count;
};

struct oci_rlimit {
	int resource;
	uint64_t soft, hard;
};

enum oci_capset { OCI_CAP_BOUNDING, OCI_CAP_EFFECTIVE, OCI_CAP_INHERITABLE, OCI_CAP_PERMITTED,
		  OCI_CAP_AMBIENT, OCI_CAP__COUNT };

struct oci_config {
	json_t *doc;		/* the whole config.json (the strings below point into it) */
	char *bundle;		/* absolute */
	char *rootfs;		/* absolute (root.path against the bundle) */
	bool rootfs_ro;
	const char **args, **env; /* NULL-terminated */
	const char *cwd;
	uid_t uid;
	gid_t gid;
	gid_t *gids;
	size_t ngids;
	bool terminal, no_new_privs, has_oom_score_adj;
	int oom_score_adj;
	struct oci_rlimit *rlimits;
	size_t nrlimits;
	uint64_t caps[OCI_CAP__COUNT]; /* bit masks, already within rung's policy */
	struct oci_mount *mounts;
	size_t nmounts;
	const char **masked, **readonly; /* NULL-terminated */
	const char *hostname;
	int ns_flags;		/* CLONE_NEW* to create */
	const char *netns_path; /* join this network namespace (NULL: per ns_flags) */
	struct oci_ns_join {	/* a pod's ipc or uts namespace, by path (oci/nsjoin.c) */
		const char *path; /* NULL: its own (ns_flags) */
		size_t index;	  /* in linux.namespaces, for errors */
	} ipc_join, uts_join;
	int mqueue_fd; /* the joined ipc namespace's mqueue, an fs context (nsjoin.c); 0: none */
	bool spec_userns;	/* the spec asked for a user namespace */
	struct oci_idmap *uid_maps, *gid_maps;
	size_t nuid_maps, ngid_maps;
	const char *cgroups_path; /* NULL: rung-oci/<id> */
	struct rt_cgroup_limits limits; /* memory and pids (the cgroup library's) */
	struct oci_cpu {	/* linux.resources.cpu, written exactly (oci/cgroup.c) */
		uint64_t shares, period, rt_period;
		int64_t quota, rt_runtime;
		const char *cpus, *mems;
	} cpu;
	const char **sysctl_keys, **sysctl_values;
	json_t *annotations;	/* borrowed from doc, never NULL */
};

/* Parse the config.json text of the bundle at bundle (absolute). Refusals name the field. */
int oci_config_parse(const char *text, size_t len, const char *bundle, struct oci_config *out,
		     struct rung_err *err);
/* Read <bundle>/config.json and parse it. */
int oci_config_load(const char *bundle, struct oci_config *out, struct rung_err *err);
void oci_config_release(struct oci_config *c); /* idempotent */
/* Pure: the capability named ("CAP_CHOWN"), or -1. */
int oci_cap_from_name(const char *name);
/* The spec's name of capability cap ("CAP_KILL") in buf; NULL when libcap does not know it. */
const char *oci_cap_name(int cap, char *buf, size_t n);
/* Pure: rung's capability policy (Docker's default set) as a mask. */
uint64_t oci_cap_policy(void);

/* dev.rung.egress-allow (annotations.c): rung's egress allowlist for the joined network
 * namespace, entries as for `rung --allow` separated by commas or white space. 0: absent (out
 * empty); 1: parsed into out (np_policy_release it); or refused, naming the annotation (a bad
 * entry, not a string, or no linux.namespaces[network].path). */
#define OCI_ANN_EGRESS "dev.rung.egress-allow"
/* In a vm-rung container's state directory while its VM's vCPUs are paused (oci/vm-ops.c). */
#define OCI_VM_PAUSED "vm.paused"
struct np_policy;
int oci_egress_parse(const struct oci_config *c, struct np_policy *out, struct rung_err *err);

/* One container's record (state.json under <root>/<id>/). */
struct oci_state {
	char id[256];
	char bundle[4096];
	char cgroup[512];	/* the group's name under the cgroup root */
	pid_t pid;
	uint64_t start_time;	/* /proc/<pid>/stat field 22: tells a reused pid apart */
	uint32_t uid_slot;	/* OCI_UID_SLOTS: none */
	json_t *annotations;	/* owned */
	json_t *hooks;		/* owned: the spec's hooks, kept from create (or NULL) */
};
enum oci_status { OCI_CREATING, OCI_CREATED, OCI_RUNNING, OCI_STOPPED, OCI_PAUSED };

int oci_id_check(const char *id, struct rung_err *err);
int oci_state_path(const char *root, const char *id, const char *name, char *buf, size_t n);
int oci_state_write(const char *root, const struct oci_state *s, struct rung_err *err);
int oci_state_read(const char *root, const char *id, struct oci_state *s, struct rung_err *err);
void oci_state_release(struct oci_state *s);
enum oci_status oci_status_of(const char *root, const struct oci_state *s);
const char *oci_status_name(enum oci_status st);
/* The OCI state document of the container. */
json_t *oci_state_json(const char *root, const struct oci_state *s);
/* Claim a free slot of user ids (a file under <root>/.uids), or give one back. */
int oci_uid_slot_claim(const char *root, uint32_t *slot, struct rung_err *err);
void oci_uid_slot_release(const char *root, uint32_t slot);

struct oci_create_opts {
	const char *root, *id, *bundle, *pid_file, *console_socket;
	bool no_pivot;
	bool vm; /* the runtime's rung is vm (rung-oci-vm, --isolation vm): oci/vm.h */
};
/* Create the container: its init waits on the exec fifo. Returns 0 or -errno. */
int oci_create(const struct oci_create_opts *o, struct rung_err *err);
/* Let the created container's init exec the user program. */
int oci_start(const char *root, const char *id, struct rung_err *err);
/* cgroup.c: linux.resources.cpu on the container's group (after rt_cgroup_create), and the
 * cpuset group it may add (removed by oci_cgroup_cpuset_remove). */
int oci_cgroup_cpu_apply(const struct rt_cgroup *cg, const struct oci_cpu *cpu, pid_t pid,
			 struct rung_err *err);
void oci_cgroup_cpuset_remove(const char *name);
/* seccomp.c: linux.seccomp (NULL: none) as BPF, to load after rung's filter (*bpf NULL: none). */
int oci_seccomp_build(json_t *spec, void **bpf, size_t *len, struct rung_err *err);
/* ops.c: signal the init (or every process of its cgroup); remove a container. */
int oci_kill(const char *root, const char *id, int sig, bool all, struct rung_err *err);
int oci_delete(const char *root, const char *id, bool force, struct rung_err *err);

/* exec.c: a process in the container, confined as its init (docs/oci.md). */
struct oci_exec_opts {
	const char *root, *id, *process, *pid_file, *console_socket, *cwd, *user;
	const char *const *args; /* NULL-terminated, without --process */
	const char **env;	 /* NULL-terminated K=V to append, or NULL */
	bool detach, tty;
};
/* 0 and *status (the process's exit status, 128+signal; 0 when detached), or -errno. */
int oci_exec(const struct oci_exec_opts *o, int *status, struct rung_err *err);
/* manage.c: ps, pause/resume (the freezer), events --stats, update. */
bool oci_cgroup_paused(const char *name); /* the group's freezer says frozen */
int oci_ps(const char *root, const char *id, bool json, struct rung_err *err);
int oci_pause(const char *root, const char *id, bool pause, struct rung_err *err);
int oci_events_stats(const char *root, const char *id, struct rung_err *err);
/* events: a container that is not stopped, its group (released by the caller); NULL for a vm
 * container (its figures are its guest's, oci_vm_stats_event). */
int oci_events_group(const char *root, const char *id, struct rt_cgroup **cg,
		     struct rung_err *err);
/* One stats event line in runc's shape (malloc'd JSON, no newline), or NULL. */
char *oci_stats_event(const struct rt_cgroup *cg, const char *id, struct rung_err *err);
/* events.c: runc's event stream: a stats event every interval_ms and an oom event per OOM kill
 * in the container's group, until the container stops (or stdout goes away). */
int oci_events_stream(const char *root, const char *id, uint64_t interval_ms,
		      struct rung_err *err);
/* A Go duration ("5s", "250ms", "1m30s", "1.5s"), in ms (a positive one at least 1): -1 if bad. */
int64_t oci_duration_ms(const char *s);
/* linux.resources (a JSON object), written to the container's cgroup */
int oci_update(const char *root, const char *id, json_t *resources, struct rung_err *err);

#endif
