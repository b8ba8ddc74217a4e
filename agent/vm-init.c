/* agent/vm-init.c: placeholder until the vm rung's guest init lands (see issue 5). */
#include "agent/vm-init.h"

int agent_vm_init(int *listen_fd, struct rung_err *err)
{
	*listen_fd = -1;
	return rung_err_set(err, ENOSYS, "this rung-agent was built without VM guest support");
}
