/*
 * common/nshint.c: why the kernel may have refused new namespaces here (nshint.h). A bare
 * "Operation not permitted" from the clone that starts a sandbox says nothing of the two
 * usual causes, a chroot and a container's seccomp profile; both can be seen from here. The
 * words are short: with the clone's own they fit a struct rung_err's 256 bytes.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/nshint.h"
#include "common/util.h"

enum root_is { ROOT_UNKNOWN, ROOT_PID1S, ROOT_CHROOT };

/* The kernel's test (current_chrooted) is our root against the mount namespace's; pid 1's
 * root stands for the latter where pid 1 is in our mount namespace. Same inode and same
 * mount: not chrooted. Unknown where pid 1's root is not ours to look at (no /proc, a host
 * that keeps pid 1 from us) or pid 1 is in another mount namespace (a service's own, as
 * systemd's PrivateTmp= makes: its mounts are copies, with ids of their own). */
static enum root_is root_is(void)
{
	struct stat ns_self, ns_init;
	if (stat("/proc/self/ns/mnt", &ns_self) < 0 || stat("/proc/1/ns/mnt", &ns_init) < 0 ||
	    ns_self.st_ino != ns_init.st_ino || ns_self.st_dev != ns_init.st_dev)
		return ROOT_UNKNOWN;
	struct statx self, init;
	unsigned mask = STATX_INO | STATX_MNT_ID;
	if (statx(AT_FDCWD, "/", 0, mask, &self) < 0 ||
	    statx(AT_FDCWD, "/proc/1/root/", 0, mask, &init) < 0)
		return ROOT_UNKNOWN;
	bool mnt = (self.stx_mask & init.stx_mask & STATX_MNT_ID) != 0;
	bool same = self.stx_dev_major == init.stx_dev_major &&
		    self.stx_dev_minor == init.stx_dev_minor && self.stx_ino == init.stx_ino &&
		    (!mnt || self.stx_mnt_id == init.stx_mnt_id);
	return same ? ROOT_PID1S : ROOT_CHROOT;
}

/* A seccomp filter on us: "Seccomp:\t2" in /proc/self/status. */
static bool filtered(void)
{
	cleanup_free char *st = NULL;
	return rung_file_load(AT_FDCWD, "/proc/self/status", 1 << 16, &st, NULL, NULL) == 0 &&
	       strstr(st, "\nSeccomp:\t2\n");
}

static bool no_user_namespaces(void)
{
	cleanup_free char *v = NULL;
	return rung_file_load(AT_FDCWD, "/proc/sys/user/max_user_namespaces", 64, &v, NULL, NULL) ==
		   0 &&
	       !strcmp(v, "0\n");
}

/* The first cause found, or NULL. */
static const char *refusal_cause(bool userns)
{
	enum root_is root = userns ? root_is() : ROOT_PID1S;
	if (root == ROOT_CHROOT)
		return "rung is in a chroot (its / is not pid 1's), where the kernel refuses new "
		       "user namespaces";
	if (filtered())
		return "rung is under a seccomp filter (Seccomp: 2 in /proc/self/status), as in a "
		       "container whose default profile refuses new namespaces";
	if (userns && no_user_namespaces())
		return "user.max_user_namespaces is 0";
	if (root == ROOT_UNKNOWN)
		return "rung may be in a chroot, where the kernel refuses new user namespaces (pid "
		       "1's root cannot be read here to tell), or under a security module's policy "
		       "that does";
	return NULL;
}

const char *rung_ns_refusal_hint(int code, bool userns, char *buf, size_t len)
{
	bool refused = code == EPERM || code == EACCES || code == ENOSPC;
	const char *why = refused ? refusal_cause(userns) : NULL;
	if (!len)
		return "";
	snprintf(buf, len, "%s%s%s", why ? " (" : "", why ? why : "", why ? ")" : "");
	return buf;
}

int rung_err_ns(struct rung_err *e, int code, bool userns, const char *what)
{
	char hint[320];
	return rung_err_set(e, code, "%s: %s%s", what, strerror(code),
			    rung_ns_refusal_hint(code, userns, hint, sizeof(hint)));
}
