/* common/cleanup.h: scope-bound resources (see docs/style.md, "Cleanup"). */
#ifndef RUNG_COMMON_CLEANUP_H
#define RUNG_COMMON_CLEANUP_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Cleanups preserve errno so that an error path can still report it. */
static inline void rung_freep(void *p)
{
	int e = errno;
	free(*(void **)p);
	errno = e;
}
static inline void rung_closep(int *fd)
{
	if (*fd >= 0) {
		int e = errno;
		close(*fd);
		errno = e;
		*fd = -1;
	}
}
static inline void rung_fclosep(FILE **f)
{
	if (*f) {
		int e = errno;
		fclose(*f);
		errno = e;
	}
}
static inline void rung_closedirp(DIR **d)
{
	if (*d) {
		int e = errno;
		closedir(*d);
		errno = e;
	}
}
static inline void rung_strvfreep(char ***v)
{
	if (*v) {
		for (char **p = *v; *p; p++)
			free(*p);
		free(*v);
	}
}

#define cleanup_free __attribute__((cleanup(rung_freep)))
#define cleanup_close __attribute__((cleanup(rung_closep)))
#define cleanup_fclose __attribute__((cleanup(rung_fclosep)))
#define cleanup_dir __attribute__((cleanup(rung_closedirp)))
#define cleanup_strv __attribute__((cleanup(rung_strvfreep)))

static inline int rung_steal_fd(int *fd)
{
	int r = *fd;
	*fd = -1;
	return r;
}
static inline void *rung_steal_ptr_(void **p)
{
	void *r = *p;
	*p = NULL;
	return r;
}
#define rung_steal_ptr(pp) rung_steal_ptr_((void **)(pp))

#endif
