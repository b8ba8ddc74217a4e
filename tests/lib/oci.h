/* tests/lib/oci.h: running build/rung-oci from the e2e_oci_* suites (tests/lib/oci.c). */
#ifndef RUNG_TESTS_LIB_OCI_H
#define RUNG_TESTS_LIB_OCI_H

#include <stdbool.h>
#include <stddef.h>

/* bin --root root args... with stdin from in (NULL: /dev/null); its stdout and stderr into out
 * and errb (NUL-terminated, cut at their sizes; scratch files under dir). The exit status, or
 * 128 + the signal that killed it. */
int oci_test_run(const char *bin, const char *root, const char *dir, const char *in,
		 const char *const *args, char *out, size_t outn, char *errb, size_t errn);

/* bin --root root args...: stdin /dev/null, stdout and stderr into <dir>/<tag>.out and .err,
 * this process's environment (the RUNG_* knobs). The exit status, or 128 + the signal. A
 * create's proxy (the vm rung's) stays the caller's child and keeps writing those files. */
int oci_test_spawn(const char *bin, const char *root, const char *dir, const char *tag,
		   const char *const *args);

/* A resolv.conf bound on /etc/resolv.conf as the CRI does: <dir>/resolv.conf (a search line and
 * nameserver resolver) and, into m, the mount's JSON with a leading ", ". */
void oci_test_cri_resolv(const char *dir, const char *resolver, char *m, size_t n);

/* <bundle>/config.json of a pod's container: `sh -c script` as uid 0 (PATH=/bin, cwd /),
 * annotations {"k": "v"} and ann_json (", ..." or ""), mounts /proc and mounts_json (likewise),
 * the pid, ipc, mount and uts namespaces new, the network one joined at netns_path. */
void oci_test_pod_config(const char *bundle, const char *script, const char *ann_json,
			 const char *mounts_json, const char *netns_path);

/* A child of the test in new namespaces of its own (flags: CLONE_NEWNET, CLONE_NEWIPC, ...),
 * made outside any container, waiting until oci_test_ns_holder_end (or the test's end); its
 * pid, whose /proc/PID/ns/... a bundle may name. */
int oci_test_ns_holder(int flags);
void oci_test_ns_holder_end(int pid);

/* The terminal master a runtime sends over a --console-socket listening on listen_fd (the
 * connection accepted and closed). */
int oci_test_console_master(int listen_fd);

/* bundle/rootfs/bin with /bin/busybox and the applets named (NULL-terminated) linked to it. */
void oci_test_busybox(const char *bundle, const char *const *applets);

/* Can the vm rung run here (root, and a router on a scratch store picks it)? false with why set
 * (the nested stage's L1 runs the vm suites). */
bool oci_test_vm_runs(char *why, size_t n);

/* Processes whose argv[0] is name: rung-vmm is exec'd from an fd, so its comm is the fd's
 * number, and counting by comm finds none. */
int oci_test_procs_argv0(const char *name);
/* utime + stime of pid's thread group in clock ticks (/proc/PID/stat), or -1. */
long oci_test_cpu_ticks(int pid);
/* The pid of the first process whose argv[0] is name, or 0. */
int oci_test_pid_argv0(const char *name);

#endif
