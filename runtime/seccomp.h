/* runtime/seccomp.h: rung's syscall allow-list as BPF (runtime/seccomp.c), for programs
 * outside runtime/ that load it themselves (rung-oci's container init). */
#ifndef RUNG_RT_SECCOMP_H
#define RUNG_RT_SECCOMP_H

#include <stddef.h>

#include "common/err.h"

/* Build the filter; *bpf is malloc'd (struct sock_filter[], *len bytes). */
int rt_seccomp_build(void **bpf, size_t *len, struct rung_err *err);

#endif
