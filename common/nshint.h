/* common/nshint.h: why the kernel may have refused new namespaces here, in words. */
#ifndef RUNG_COMMON_NSHINT_H
#define RUNG_COMMON_NSHINT_H

#include <stdbool.h>
#include <stddef.h>

/*
 * After a clone or unshare of new namespaces (a user namespace among them: userns) failed
 * with code (an errno): a short reason found on this host, as " (...)" ready to append to
 * the error's message, or "" where code is not a refusal or nothing here explains it. Looks,
 * in order, for a chroot (our / is not pid 1's: the kernel refuses a new user namespace
 * there), a seccomp filter on us (a container runtime's default profile refuses namespace
 * flags), and user.max_user_namespaces at 0. Returns buf ("" where len is 0).
 */
const char *rung_ns_refusal_hint(int code, bool userns, char *buf, size_t len);

struct rung_err;
/* Fills e with "what: strerror(code)" and the hint above; returns -(code ?: EINVAL), as
 * rung_err_sys does. */
int rung_err_ns(struct rung_err *e, int code, bool userns, const char *what);

#endif
