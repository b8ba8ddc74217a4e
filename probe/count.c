/*
 * probe/count.c: how many syscalls the sandbox's filter leaves reachable (rung-probe --count),
 * measured without running any of them.
 *
 * A second thread installs a filter of its own that answers every syscall with
 * SECCOMP_RET_USER_NOTIF, and then calls each x86_64 syscall number once with zero arguments.
 * Filters stack and the strictest action wins: where the sandbox's filter returns an errno
 * (or kills), that happens and no notification comes; where it allows the call, ours
 * notifies, and the first thread (which has no filter of its own) records the number and
 * answers with an error, so the call never runs. Reachable therefore means "allowed by every
 * filter above, with zero arguments"; arguments-dependent rules may allow more with others.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probe/probe.h"

/* The x86_64 numbers: 0..334 and 424..450 (335..423 are unused on x86_64). */
#define LAST_NR 450
static bool valid_nr(int nr) { return nr <= 334 || (nr >= 424 && nr <= LAST_NR); }

struct counter {
	int listener;
	volatile int current; /* the number being tried; -1: done */
	bool reached[LAST_NR + 1];
	int err;
};

static void *caller(void *arg)
{
	struct counter *c = arg;
	struct sock_filter f[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF)};
	struct sock_fprog prog = {1, f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		c->err = errno;
		return NULL;
	}
	long fd =
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (fd < 0) {
		c->err = errno;
		__atomic_store_n(&c->current, -2, __ATOMIC_SEQ_CST);
		return NULL;
	}
	__atomic_store_n(&c->listener, (int)fd, __ATOMIC_SEQ_CST);
	for (int nr = 0; nr <= LAST_NR; nr++) {
		if (!valid_nr(nr))
			continue;
		__atomic_store_n(&c->current, nr, __ATOMIC_SEQ_CST);
		syscall(nr, 0, 0, 0, 0, 0, 0);
	}
	__atomic_store_n(&c->current, -1, __ATOMIC_SEQ_CST);
	return NULL; /* pthread's exit syscalls get CONTINUE below */
}

/* Answer notifications until the caller is done and gone. */
static void serve(struct counter *c, pthread_t t)
{
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	for (;;) {
		memset(&req, 0, sizeof(req));
		if (ioctl(c->listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
			if (errno == EINTR)
				continue;
			break; /* ENOENT/EBADF: the filtered thread is gone */
		}
		memset(&resp, 0, sizeof(resp));
		resp.id = req.id;
		int cur = __atomic_load_n(&c->current, __ATOMIC_SEQ_CST);
		if (cur >= 0 && req.data.nr == cur && req.data.arch == AUDIT_ARCH_X86_64) {
			c->reached[cur] = true;
			resp.error = -ENOSYS; /* the call never runs */
		} else {
			resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE; /* the thread's own exit */
		}
		ioctl(c->listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
	}
	pthread_join(t, NULL);
}

int probe_count_syscalls(void)
{
	static struct counter c = {.listener = -1, .current = 0};
	pthread_t t;
	if (pthread_create(&t, NULL, caller, &c) != 0) {
		printf("{\"reachable\": null, \"error\": \"pthread_create\"}\n");
		return 1;
	}
	while (__atomic_load_n(&c.listener, __ATOMIC_SEQ_CST) < 0 &&
	       __atomic_load_n(&c.current, __ATOMIC_SEQ_CST) != -2)
		usleep(1000);
	if (c.listener < 0) {
		pthread_join(t, NULL);
		printf("{\"reachable\": null, \"error\": \"seccomp(NEW_LISTENER): %s\"}\n",
		       strerror(c.err));
		return 0;
	}
	serve(&c, t);
	int n = 0, total = 0;
	for (int nr = 0; nr <= LAST_NR; nr++) {
		total += valid_nr(nr);
		n += c.reached[nr];
	}
	printf("{\"reachable\": %d, \"of\": %d}\n", n, total);
	return 0;
}
