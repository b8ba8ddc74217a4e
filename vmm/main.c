/* vmm/main.c: rung-vmm's entry point. Exit status and one stderr line give the exit reason. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "vmm/vmm.h"

/*
 * A jailer may exec us with fds 0-2 closed. Then the first files we open would become
 * "stderr", and a log line could land in a disk image or the serial log: fill the holes
 * first (/dev/null, or an in-memory file in a chroot without one).
 */
static int fill_stdio(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		int n = open("/dev/null", O_RDWR);
		if (n < 0)
			n = memfd_create("rung-vmm-stdio", 0);
		if (n != fd)
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct vmm_config cfg;
	struct rung_err err = {0};
	if (fill_stdio() < 0)
		return 1;
	if (getenv("RUNG_VMM_DEBUG"))
		rung_log_set_level(RUNG_LOG_DEBUG);
	if (vmm_args_parse(argc, argv, &cfg, &err) < 0) {
		fprintf(stderr, "rung-vmm: error: %s\n%s", err.msg, vmm_usage);
		return 2;
	}
	if (cfg.help) {
		fputs(vmm_usage, stdout);
		return 0;
	}
	if (cfg.probe) {
		if (vmm_probe(&cfg, &err) < 0) {
			fprintf(stderr, "rung-vmm: probe: %s\n", err.msg);
			return 1;
		}
		fprintf(stderr, "rung-vmm: probe: ok\n");
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	struct vmm_vm *vm = vmm_vm_create(&cfg, &err);
	if (!vm) {
		fprintf(stderr, "rung-vmm: error: %s\n", err.msg);
		return 1;
	}
	enum vmm_exit e = vmm_vm_run(vm, &err);
	fprintf(stderr, "rung-vmm: exit: %s%s%s\n", vmm_exit_name(e), err.msg[0] ? ": " : "",
		err.msg);
	vmm_vm_destroy(vm);
	return vmm_exit_status(e);
}
