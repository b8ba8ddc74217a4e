/*
 * rung-agent: pid 1 of every sandbox. It serves the agent protocol (common/proto.h) on a
 * listening socket: a Unix socket inherited from the supervisor (process, container: --init,
 * which first builds the sandbox's root, init.c), or a vsock it opens itself (vm, vm-init.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/vm-init.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: rung-agent --init     (as pid 1 of a process or container sandbox)\n"
		   "       rung-agent            (as pid 1 of a rung VM guest)\n"
		   "Serves the rung agent protocol; not meant to be run by hand.\n");
}

int main(int argc, char **argv)
{
	int listen_fd = -1, first_fd = -1;
	bool privileged = false; /* a vm guest with rung.privileged=1 (agent/vm-init.h) */
	struct rung_err err = {0};
	const char *base = strrchr(argv[0], '/');
	if (!strcmp(base ? base + 1 : argv[0], "rung-call"))
		return agent_call_main(argc, argv, getenv("RUNG_CALLBACK_FD")); /* inside a sandbox: docs/callbacks.md */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--init") && argc == 2 && getpid() == 1) {
			agent_ns_init(&first_fd); /* agent/init.c: exits on failure */
			listen_fd = 3;
		} else if (getpid() == 1) {
			continue; /* a VM's init: the kernel hands us its unknown parameters */
		} else {
			usage(stderr);
			return 2;
		}
	}
	prctl(PR_SET_NAME, "rung-agent");
	if (listen_fd < 0) {
		if (getpid() != 1) {
			usage(stderr);
			return 2;
		}
		if (agent_vm_init(&listen_fd, &privileged, &err) < 0 ||
		    agent_fixer_start(listen_fd, &err) < 0 || (!privileged && agent_privs_vm_drop(&err) < 0)) {
			fprintf(stderr, "rung-agent: vm init: %s\n", err.msg);
			return 1;
		}
		if (privileged)
			fprintf(stderr, "rung-agent: rung.privileged=1: commands keep root (tests)\n");
	}
	/* The command runs as uid 0 without capabilities, we as the agent uid (agent/privs.c):
	 * it can neither signal nor ptrace us or a handler, nor write our /proc files. */
	if (!privileged && agent_privs_settle(&err) < 0) {
		fprintf(stderr, "rung-agent: %s\n", err.msg);
		return 1;
	}
	agent_spawn_oom_check();
	/* pid 1 ignores signals it has no handler for; make that explicit for the ones we get. */
	agent_spawn_signal(SIGPIPE, SIG_IGN);
	return agent_serve(listen_fd, first_fd) < 0 ? 1 : 0;
}
