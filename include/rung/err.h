/* rung: the error type shared by every public call. */
#ifndef RUNG_ERR_H
#define RUNG_ERR_H

/*
 * A fallible call returns an int (>= 0 on success, -errno on failure) or a
 * pointer (NULL on failure) and fills a struct rung_err. It is inline and
 * fixed-size: fork-safe, nothing to release.
 */
struct rung_err {
	int code;      /* positive errno value, 0 when no error */
	char msg[256]; /* human-readable, names the bad field or path */
};

#endif
