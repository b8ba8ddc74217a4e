/*
 * tests/lib/ctrd.h: a private containerd for e2e_oci_containerd (tests/lib/ctrd.c): started on
 * its own config, root, state and socket under a temporary directory, with the test image
 * imported; ctr run against it with build/rung-oci as the runc binary; everything stopped,
 * unmounted and removed at the end, whatever the tests left.
 */
#ifndef RUNG_TESTS_LIB_CTRD_H
#define RUNG_TESTS_LIB_CTRD_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define CTRD_IMAGE "rung.test/busybox:latest"

struct ctrd {
	char dir[64];		/* the temporary directory: config, root, state, socket */
	char sock[128];
	char ns[32];		/* the containerd namespace: rung-test-<pid> */
	char oci_root[128];	/* --runc-root; rung-oci's --root is oci_root/ns */
	char bin[PATH_MAX];	/* build/rung-oci, absolute */
	pid_t pid;		/* containerd */
	bool native;		/* the image for the native snapshotter only, and every run on it */
	bool run_dir_made;	/* /run/containerd was not there before (containerd makes its
				 * shim socket and fifo dirs there whatever its config says) */
	char why[512];		/* why it did not start */
};

/* Start containerd and import the image (busybox, its applets, /bin/rung-probe; unpacked for
 * the overlayfs and native snapshotters, or with native for native alone, which every run then
 * takes). false with c->why set when it cannot. */
bool ctrd_start(struct ctrd *c, bool native);
/* Every task and container killed and deleted, containerd and its shims stopped, the mounts
 * under dir detached, the namespace's cgroups and dir removed. */
void ctrd_stop(struct ctrd *c);
/*
 * ctr --address --namespace args... with stdin from in_fd (-1: /dev/null); stdout and stderr
 * into out and errb (NUL-terminated, cut; errb may be NULL: stderr goes with stdout). Killed
 * after timeout_s. The exit status, or 128 + the signal.
 */
int ctrd_ctr(struct ctrd *c, int in_fd, int timeout_s, char *out, size_t outn, char *errb,
	     size_t errn, const char *const *args);
/* The same in the background with stdio on fds (setsid and the controlling tty when tty is
 * set); its pid. */
pid_t ctrd_spawn(struct ctrd *c, int in_fd, int out_fd, bool tty, const char *const *args);
/* The task's status as `ctr task ls` prints it (RUNNING, PAUSED, STOPPED; "" when it is not
 * listed), and its pid (static buffer). */
const char *ctrd_task_status(struct ctrd *c, const char *id, int *pid);
/* The argv of `run` with rung-oci as runtime (--runc-binary, --runc-root; the default overlayfs
 * snapshotter unless extra names one) then extra (NULL-ended): into argv (max entries). */
void ctrd_run_argv(struct ctrd *c, const char **argv, size_t max, const char *const *extra);

/* ctr run (ctrd_run_argv) of extra under a terminal: on a pty pair, its slave ctr's controlling
 * tty and stdio (ctr run -t passes it through as the container's terminal). What the master
 * read until EIO (the last slave closed) into buf; ctr's exit status (-1, why in buf: no
 * pty pair). */
int ctrd_run_tty(struct ctrd *c, const char *const *extra, char *buf, size_t n);

/* ctr run --rm -t of `tty; test -t 0` as id through ctrd_run_tty: asserts a /dev/pts terminal
 * on its stdin and stdout, and its exit status (3). */
void ctrd_check_tty(struct ctrd *c, const char *id);
/* Task id killed (SIGKILL), waited for (timeout_s) until stopped, deleted with its container;
 * whatever fails is let be (ctrd_stop removes what is left). */
void ctrd_remove(struct ctrd *c, const char *id, int timeout_s);

/* Leak counters for the namespace: host mounts naming dir, cgroups below NS in every
 * hierarchy (v1 and v2), its processes (in those cgroups, and its shims), rung-oci's state
 * directories and uid slots. */
struct ctrd_counts {
	int mounts, cgroups, procs, states, uids;
};
void ctrd_count(struct ctrd *c, struct ctrd_counts *n);

#endif
