/* runtime/seccomp-bpf.c: the sandbox's seccomp filter as built at build time (see
 * runtime/main-seccomp.c): what rt_seccomp_build would return, without libseccomp's work. */
#include <stdlib.h>
#include <string.h>

#include "runtime/rt-internal.h"
#include "seccomp_bpf.h"

int rt_seccomp_prebuilt(void **bpf, size_t *len, struct rung_err *err)
{
	void *p = malloc(sizeof(rt_seccomp_bpf_data));
	if (!p)
		return rung_err_set(err, ENOMEM, "out of memory");
	memcpy(p, rt_seccomp_bpf_data, sizeof(rt_seccomp_bpf_data));
	*bpf = p;
	*len = sizeof(rt_seccomp_bpf_data);
	return 0;
}
