/* agent/vm-init.h: set up a VM guest as rung-agent's init and open its vsock listener. */
#ifndef RUNG_AGENT_VM_INIT_H
#define RUNG_AGENT_VM_INIT_H

#include "common/err.h"

/* Mount the guest's filesystems, move into the sandbox root, return a listening vsock fd. */
int agent_vm_init(int *listen_fd, struct rung_err *err);

#endif
