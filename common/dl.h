/*
 * common/dl.h: loading a shared library's functions on first use (dlopen), for the libraries
 * only some commands need (libnftables, libnftnl, libcurl): build/rung starts on every CLI
 * call and must not pay their loader time (cli/module.mk).
 *
 * build/rung is linked statically (glibc's libc.a): a dlopen then loads the installed
 * libc.so.6 beside the program's own copy, which is sound only when both are the same build of
 * glibc. The static link records which libc.so.6 it was built beside (rung_libc_id, generated
 * by cli/module.mk); rung_dl_libc_check tells whether the installed one is still that build.
 */
#ifndef RUNG_COMMON_DL_H
#define RUNG_COMMON_DL_H

#include <stdbool.h>
#include <stddef.h>

struct rung_dl_sym {
	void **slot; /* a typed function pointer, cast: `(void **)&f.open` */
	const char *name;
};

/*
 * Opens the first of sonames (NULL-terminated) that loads (RTLD_NOW | RTLD_LOCAL) and fills
 * every slot of syms from it. Returns the handle, or NULL with why (what failed: the loader's
 * message, the missing function, or the refusal below) filled; slots may then be partly
 * filled and must not be used.
 */
void *rung_dl_load(const char *const *sonames, const struct rung_dl_sym *syms, size_t n,
		   char *why, size_t whylen);

/* What the static link recorded of the libc.so.6 beside it (absent from dynamic programs). */
struct rung_libc_id {
	const char *path;     /* libc.so.6, where the dynamic loader finds it */
	const char *ld_path;  /* the dynamic loader in that directory: dlopen's by name */
	const char *build_id; /* libc.so.6's, hex, from its NT_GNU_BUILD_ID note */
	unsigned long long ino, size;
	long long mtime;
};
extern const struct rung_libc_id rung_libc_id __attribute__((weak));

/*
 * True when this program may dlopen: it is dynamic, or its static libc is the installed
 * libc.so.6's build (a stat matching the link's, else the build id read and compared) and the
 * loader a dlopen of it needs is there. False otherwise, and always for a program linked
 * against musl (RUNG_LIBC_MUSL); every rung_dl_load is then refused, saying why.
 */
bool rung_dl_libc_check(void);

#endif
