/*
 * oci/vm-proxy.c: the host-side process of a vm-rung container. containerd's shim waits on the
 * pid in --pid-file as it waits on runc's init: this process is it. It blocks on the exec fifo
 * until `start`, starts the bundle's process in the guest as a background process of the
 * sandbox (rung_proc_start, through the agent), relays its stdio to and from its own fds 0/1/2
 * (or a terminal whose master went over --console-socket), and exits with the program's status.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "common/util.h"
#include "oci/oci-internal.h"
#include "oci/vm.h"

struct relay {
	uint64_t end; /* the next byte offset of the process's output */
	bool tty;
};

static int relay_out(void *ud, enum rung_stream s, uint64_t offset, const void *data, size_t len)
{
	struct relay *r = ud;
	if (offset + len <= r->end)
		return 0; /* replayed: already written */
	size_t skip = offset < r->end ? (size_t)(r->end - offset) : 0;
	int fd = r->tty || s == RUNG_STDOUT ? 1 : 2;
	(void)rung_write_all(fd, (const char *)data + skip, len - skip); /* a reader gone: go on */
	r->end = offset + len;
	return 0;
}

static void proxy_fail(const char *what, const struct rung_err *e)
{
	dprintf(2, "rung-oci: %s: %s\n", what, e->msg[0] ? e->msg : "failed");
	_exit(1);
}

/* Relay until the process exits: stdin while it lasts (EOF closes the program's), then output. */
static void relay(struct rung_sandbox *sb, const char *h, struct relay *rl)
{
	struct rung_err e = {0};
	struct rung_proc_attach_req a = {.in_fd = 0, .on_output = relay_out, .ud = rl};
	int r = rung_proc_attach(sb, h, &a, &e);
	if (r < 0)
		proxy_fail("relay", &e);
	if (r == 1)
		return;
	rung_proc_close_stdin(sb, h, &e);
	struct rung_proc_logs_req lq = {.since = rl->end, .follow = true, .on_output = relay_out,
					.ud = rl};
	struct rung_proc_logs_res lr;
	if (rung_proc_logs(sb, h, &lq, &lr, &e) < 0)
		proxy_fail("relay", &e);
}

void oci_vm_proxy_run(struct rung_sandbox *sb, const struct oci_config *c, int fifo, int console,
		      const char *dir, int ready)
{
	struct rung_err e = {0};
	char b, p[4200];
	struct relay rl = {.tty = c->terminal};
	if (console >= 0) {
		if (oci_console_apply(console, &e) < 0)
			proxy_fail("process.terminal", &e);
		close(console);
		struct termios t;
		if (tcgetattr(0, &t) == 0) { /* the guest's terminal echoes and edits, not this one */
			cfmakeraw(&t);
			tcsetattr(0, TCSANOW, &t);
		}
	}
	if (fifo >= 0 && ready >= 0) { /* create's: the terminal is there, the fifo is next */
		if (rung_write_all(ready, "1", 1) < 0)
			_exit(1);
		close(ready);
		ready = -1;
	}
	if (fifo >= 0 && read(fifo, &b, 1) != 1)
		_exit(1);
	char handle[RUNG_PROC_HANDLE_LEN + 1];
	struct rung_proc_req q = {.argv = c->args, .env = c->env, .cwd = c->cwd, .pty = c->terminal};
	/* linux.seccomp: the guest's agent loads it for the program alone (create checked it) */
	void *bpf = NULL;
	json_t *sc = json_object_get(json_object_get(c->doc, "linux"), "seccomp");
	if (oci_seccomp_build(sc, &bpf, &q.seccomp_bpf_len, &e) < 0)
		proxy_fail("linux.seccomp", &e);
	q.seccomp_bpf = bpf;
	int sr = rung_proc_start(sb, &q, handle, &e);
	free(bpf);
	if (sr < 0)
		proxy_fail("process.args", &e);
	snprintf(p, sizeof(p), "%s/vm.proc", dir ? dir : "");
	if (dir && rung_write_file_replace(AT_FDCWD, p, handle, strlen(handle), 0600, &e) < 0)
		proxy_fail("vm.proc", &e);
	if (fifo >= 0)
		close(fifo); /* `start` returns: the program runs */
	if (ready >= 0 && (rung_write_all(ready, "1", 1) < 0 || close(ready) < 0))
		_exit(1);
	relay(sb, handle, &rl);
	struct rung_proc_info info;
	int r;
	while ((r = rung_proc_wait(sb, handle, 60000, &info, &e)) == 0)
		;
	if (r < 0)
		proxy_fail("wait", &e);
	int status = info.signal ? 128 + info.signal : info.exit_code;
	rung_proc_info_release(&info, 1);
	_exit(status & 0xff);
}
