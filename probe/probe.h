/*
 * probe/probe.h: rung-probe, the isolation ladder's probe battery (docs/ladder.md).
 *
 * One probe per invocation. A probe tries one escape and reports blocked, escaped or n/a,
 * with the errno or the evidence. A probe never acts on anything but what the ladder planted
 * for it (its context file names them): a marker directory, listeners on loopback, a victim
 * process, a shared memory segment. Where an effect is visible from the host, the ladder
 * checks it there and its check decides (cli/ladder-verify.c).
 */
#ifndef RUNG_PROBE_H
#define RUNG_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum probe_result { PROBE_BLOCKED, PROBE_ESCAPED, PROBE_NA };

/* What the ladder planted, read from the context file (key=value lines) beside the probe. */
struct probe_ctx {
	char token[65];
	char host_dir[256]; /* host directory: "secret" to read, markers to write */
	unsigned tcp_port;  /* host loopback listeners (127.0.0.1 and ::1) */
	unsigned tcp6_port;
	unsigned udp_port;
	char dns_addr[64];  /* the ladder's fake resolver (UDP), on a host loopback address */
	unsigned dns_port;
	char host_addr[64]; /* the host's first non-loopback IPv4 address, or empty */
	char abstract[108]; /* host abstract unix socket name (without the leading NUL) */
	char shm_name[128]; /* /dev/shm/<name> on the host */
	int sysv_shm_key;
	int victim_pid;	    /* a host process of the ladder's that records SIGCONT */
	uint64_t mem_limit; /* the sandbox's limits, as the ladder set them */
	unsigned pids_limit;
	unsigned cpus_milli;
	uint64_t disk_limit;
	char state_dir[256]; /* rung's state dir on the host */
	/* the sibling: another sandbox of the same rung, holding a victim the ladder started */
	char sibling_comm[16]; /* the victim's random name */
	int sibling_pid;       /* its host pid (0: not visible from the host, e.g. in a VM) */
	unsigned sibling_port; /* its TCP listener, on all of its own addresses */
};

struct probe_out {
	enum probe_result result;
	int err; /* the errno that blocked it, 0 if none */
	char evidence[768];
};

struct probe {
	const char *name;
	const char *family;
	const char *what; /* one line: what escaped means */
	void (*run)(const struct probe_ctx *c, struct probe_out *o);
};

/* Each family's table, NULL-name terminated (probe/<family>.c). */
extern const struct probe probes_fs[];
extern const struct probe probes_kernel[];
extern const struct probe probes_priv[];
extern const struct probe probes_ipc[];
extern const struct probe probes_net[];
extern const struct probe probes_res[];
extern const struct probe probes_info[];
extern const struct probe probes_sibling[];

void probe_blocked(struct probe_out *o, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void probe_escaped(struct probe_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void probe_na(struct probe_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * A syscall that returned r (errno set when r < 0): escaped when it succeeded or failed with
 * one of the "reached" errnos (the call got past every permission check: e.g. EBADF for a
 * deliberately bad fd), blocked otherwise. reached is 0-terminated; NULL: success only.
 */
void probe_syscall(struct probe_out *o, long r, const int *reached, const char *what);
/* --count: print {"reachable": N, "of": M}, the syscalls the sandbox's filters allow with
 * zero arguments, measured without running any (probe/count.c). */
int probe_count_syscalls(void);
/*
 * --sibling COMM PORT: the victim in the sibling sandbox (probe/sibling.c). Named COMM, it
 * listens on TCP PORT and appends to ./sibling.log one line per SIGCONT ("sigcont") and per
 * "NAME TOKEN" message with the run's token ("NAME"), until killed (at most an hour).
 */
int probe_sibling(const struct probe_ctx *c, const char *comm, const char *port);
/* Read at most n-1 bytes of path into buf (NUL-terminated): length, or -errno. */
long probe_read(const char *path, char *buf, size_t n);

#endif
