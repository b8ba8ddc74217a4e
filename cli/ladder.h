/*
 * cli/ladder.h: `rung ladder` (docs/ladder.md): rung-probe's battery run in each rung and, with
 * --peers, under bubblewrap, crun and runc, with every effect a probe claims checked on the host.
 */
#ifndef RUNG_CLI_LADDER_H
#define RUNG_CLI_LADDER_H

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "cli/cli.h"

/* What the ladder plants on the host for one run, and what it saw happen to it. */
struct ladder_env {
	char dir[64];	    /* the run's temporary directory (0711) */
	char host_dir[128]; /* dir/host (0777): "secret" to read, "marker" to write */
	char token[65];	    /* random, per run: the probe's context and every message */
	char secret[33], shm_secret[33], sysv_secret[33];
	char abstract[64], shm_name[64], cgroup_marker[PATH_MAX], victim_comm[16];
	char state_dir[PATH_MAX];
	int tcp_fd, tcp6_fd, udp_fd, unix_fd, stop_fd[2];
	int icmp_fd; /* raw ICMP: records echo requests carrying the token (-1: none here) */
	int dns_fd;  /* a fake resolver (UDP): records queries for TOKEN32.rung-ladder.invalid */
	unsigned tcp_port, tcp6_port, udp_port, dns_port;
	char dns_addr[16];
	char host_addr[16]; /* the host's first non-loopback IPv4 address (net.icmp), or "" */
	int sysv_key, sysv_id;
	pid_t victim;
	int victim_fd; /* a byte per SIGCONT the victim received */
	pthread_t listener;
	bool listening;
	pthread_mutex_t lock;
	char heard[4096]; /* "NAME\n" per message the listeners received, with our token */
	/* the host's, for the probes the host decides */
	char hostname[256], cmdline[1024], version[512], ifnames[1024], userns[64];
	bool has_ia32; /* the kernel runs 32-bit syscalls (int 0x80) */
	/* the sibling of the target being run (cli/ladder-sibling.c): a second sandbox of the
	 * same rung, or a second instance of the peer, holding a victim that records signals
	 * and connections in sibling.log, in its own directory */
	struct rung_sandbox *sib_sb; /* a rung's: its log is read with rung_read_file */
	pid_t sib_proc;		     /* a host process to kill at the end (bwrap, the test's) */
	char sib_dir[PATH_MAX];	     /* else: the host directory holding its log */
	char sib_comm[16];
	unsigned sib_port;
	int sib_pid;	    /* the victim's host pid (0: not visible from the host) */
	char sib_why[256]; /* none for this target: why */
	char sib_rt[16], sib_ctr[64]; /* crun, runc: the runtime and the sibling's container id */
	/* the limits the sandboxes get */
	unsigned long long mem_limit, disk_limit;
	unsigned pids_limit, cpus_milli;
};

/* Plant everything (the victim is forked before the listener thread starts); undo it all. */
int ladder_env_setup(struct ladder_env *e, const char *state_dir, struct rung_err *err);
void ladder_env_teardown(struct ladder_env *e);
/* The context file's text (malloc'd) for the probes. */
char *ladder_env_ctx(const struct ladder_env *e);
/* Before a probe runs: forget its earlier effects (marker, signals, messages). */
void ladder_env_reset(struct ladder_env *e);
/*
 * After a probe ran: the host decides probes whose effect it can see. result/evidence hold the
 * probe's own report and are replaced with what the host saw. Probes the host cannot see keep
 * the probe's report.
 */
void ladder_env_verify(struct ladder_env *e, const char *probe, char *result, size_t rn,
		       char *evidence, size_t en);

/* Put rung-probe (from probe_bin) and the context file into dir, made with mode. */
int ladder_plant_dir(struct ladder_env *e, const char *dir, mode_t mode, const char *probe_bin,
		     struct rung_err *err);
/* One probe's output (its JSON line in out, or rc/err when it gave none) as the JSON object
 * {result, errno, evidence}, after the host's check (ladder_env_verify). */
json_t *ladder_result(struct ladder_env *e, const char *probe, const char *out, int rc,
		      const struct rung_err *err);

/* One place to run the battery: a rung or a peer. */
struct ladder_target {
	const char *name; /* process, container, vm, bwrap, crun, runc */
	bool peer;
	char why[512]; /* when it cannot run: why */
	/* set by ladder_target_open */
	struct rung_sandbox *sb;
	char bundle[256];
	char workdir[512];
	unsigned seq;
};

/* Prepare target t (a sandbox, a bundle, a directory) with rung-probe and its context.
 * -errno with t->why set when it cannot run here. */
int ladder_target_open(struct cli *c, struct ladder_target *t, struct ladder_env *e,
		       const char *probe_bin, const char *image);
/* Run one probe: its JSON line (malloc'd) in *out, or an error (n/a with the reason). */
int ladder_target_run(struct cli *c, struct ladder_target *t, struct ladder_env *e,
		      const char *probe, char **out, struct rung_err *err);
void ladder_target_close(struct cli *c, struct ladder_target *t, struct ladder_env *e);
/*
 * After a file API probe (fs.fileapi_*) planted its link: the host's side of it, through
 * rung_read_file / rung_write_file on a rung (a peer has no file API: n/a). *out is replaced
 * with the JSON line of what the file API did, for ladder_result to check on the host.
 */
void ladder_target_fileapi(struct ladder_target *t, struct ladder_env *e, const char *probe,
			   char **out);
/*
 * The sibling for target t (a rung: a second sandbox, acquired as t's; bwrap: a second bwrap;
 * crun, runc: a second container; one that cannot start: none, e->sib_why says why). Before
 * t's own context is written: it names the
 * sibling. ladder_sibling_host starts the victim as a plain host process in dir (the
 * weakened test's sibling). Close stops it; saw reads what its victim recorded: 1 when probe's
 * effect reached it, 0 not, -1 no sibling.
 */
void ladder_sibling_open(struct cli *c, struct ladder_target *t, struct ladder_env *e,
			 const char *probe_bin, const char *image);
int ladder_sibling_host(struct ladder_env *e, const char *dir, const char *probe_bin,
			struct rung_err *err);
void ladder_sibling_close(struct cli *c, struct ladder_env *e);
int ladder_sibling_saw(struct ladder_env *e, const char *probe);
/* Acquire a rung's sandbox for t, as role ("" or "sibling"), with rung-probe and its context. */
int ladder_open_rung(struct cli *c, struct ladder_target *t, struct ladder_env *e,
		     const char *probe_bin, const char *image, const char *role,
		     struct rung_err *err);
/* crun, runc: the sibling as a second container (`run -d`) of its own bundle; and its removal
 * (`delete -f`, nothing when none). */
int ladder_oci_sibling(struct ladder_target *t, struct ladder_env *e, const char *probe_bin,
		       struct rung_err *err);
void ladder_oci_delete(struct ladder_env *e);
/* bwrap's argv (the process rung's namespaces) running cmd (NULL-terminated) in workdir. */
void ladder_bwrap_argv(char **argv, size_t max, const char *workdir, char *const *cmd);
/*
 * vm.vmm_jail, measured on the host: pid (a rung-vmm) has a seccomp filter, no_new_privs, a
 * uid that is not root, its own mnt/pid/net/ipc/uts namespaces and root. result "blocked"
 * when all hold, "escaped" naming what is missing, "n/a" (-ESRCH) when there is no pid.
 */
int ladder_vmm_check(pid_t pid, char *result, size_t rn, char *evidence, size_t en);
/* The host pid of sandbox id's rung-vmm (argv[0] "rung-vmm", root .../ID/jail), or 0. */
pid_t ladder_vmm_find(const char *id);
/* After vm.vmm_jail ran in t: *out replaced with the host's check of t's rung-vmm (the vm
 * rung), or n/a elsewhere. */
void ladder_target_vmm(struct ladder_target *t, const char *probe, char **out);
/* The JSON line of a probe's result, as rung-probe prints it (malloc'd). */
char *ladder_probe_line(const char *probe, const char *result, const char *evidence);

#endif
