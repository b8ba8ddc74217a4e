/* tests/check_vmm_devices.c: virtio-vsock bridging, the 16550 UART and per-thread seccomp,
 * without /dev/kvm (fake guest memory, socketpairs, a temporary log file). */
#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <linux/virtio_vsock.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/testutil.h"
#include "tests/lib/vmm_fake.h"

#define HDRSZ sizeof(struct virtio_vsock_hdr)
#define RX_BASE 0x40000ull
#define TX_BASE 0x80000ull

struct vfix {
	struct fake_guest g;
	struct vmm_vsock vs;
	uint16_t rx_seen;
	unsigned tx_n, rx_n;
};

static void rx_post(struct vfix *f, unsigned n)
{
	for (unsigned i = 0; i < n; i++, f->rx_n++) {
		struct fake_desc d = {RX_BASE + (f->rx_n % FAKE_QSIZE) * 0x2000, 0x1000, true};
		fake_post(&f->g, 0, &d, 1);
	}
}

static void vfix_init(struct vfix *f)
{
	memset(f, 0, sizeof(*f));
	ck_assert_int_eq(vmm_vsock_init(&f->vs, 3, 1024, NULL), 0);
	ck_assert_int_eq(fake_guest_init(&f->g, &vmm_vsock_ops, &f->vs), 0);
	f->vs.t = &f->g.t;
	ck_assert(fake_driver_init(&f->g, 1ull << 32) & VIRTIO_CONFIG_S_DRIVER_OK);
	vmm_vsock_process(&f->vs); /* the reset on driver init is handled */
	rx_post(f, 8);
}

static void vfix_free(struct vfix *f)
{
	vmm_vsock_destroy(&f->vs);
	fake_guest_free(&f->g);
}

/* Next packet the device put in the guest's RX queue; false when none. */
static bool rx_next(struct vfix *f, struct virtio_vsock_hdr *h, char *payload, size_t cap)
{
	struct vring_used *u = fake_used(&f->g, 0);
	if (u->idx == f->rx_seen)
		return false;
	struct vring_used_elem e = u->ring[f->rx_seen % FAKE_QSIZE];
	f->rx_seen++;
	struct vring_desc *desc = vmm_mem_ptr(&f->g.mem, FAKE_DESC(0), 16 * FAKE_QSIZE);
	uint8_t *buf = vmm_mem_ptr(&f->g.mem, desc[e.id].addr, 0x1000);
	ck_assert_uint_ge(e.len, HDRSZ);
	memcpy(h, buf, HDRSZ);
	ck_assert_uint_eq(e.len, HDRSZ + h->len);
	if (payload)
		memcpy(payload, buf + HDRSZ, h->len < cap ? h->len : cap);
	rx_post(f, 1);
	return true;
}

static void tx_send(struct vfix *f, const struct virtio_vsock_hdr *h, const void *data, size_t len,
		    uint32_t desc_len)
{
	uint64_t at = TX_BASE + (f->tx_n++ % FAKE_QSIZE) * 0x2000;
	uint8_t *p = vmm_mem_ptr(&f->g.mem, at, HDRSZ + len);
	memcpy(p, h, HDRSZ);
	if (len)
		memcpy(p + HDRSZ, data, len);
	struct fake_desc d = {at, desc_len ? desc_len : (uint32_t)(HDRSZ + len), false};
	fake_post(&f->g, 1, &d, 1);
	fake_wr(&f->g, VIRTIO_MMIO_QUEUE_NOTIFY, 1);
	uint64_t kick;
	ck_assert_int_eq(read(f->vs.kick_fd, &kick, 8), 8); /* the vCPU side only kicks */
	vmm_vsock_process(&f->vs);
}

static struct virtio_vsock_hdr ghdr(uint32_t host_port, uint16_t op, uint32_t len)
{
	return (struct virtio_vsock_hdr){.src_cid = 3, .dst_cid = 2, .src_port = 1024,
					 .dst_port = host_port, .len = len, .type = 1, .op = op,
					 .buf_alloc = 1 << 16};
}

/* Host connects; the guest answers. Returns the host-side local port. */
static uint32_t connect_pair(struct vfix *f, int *client, uint32_t guest_buf)
{
	int sp[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	ck_assert_int_eq(vmm_vsock_host_connect(&f->vs, sp[0], NULL), 0);
	*client = sp[1];
	vmm_vsock_process(&f->vs);
	struct virtio_vsock_hdr h;
	ck_assert(rx_next(f, &h, NULL, 0));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_REQUEST);
	ck_assert_uint_eq(h.src_cid, 2);
	ck_assert_uint_eq(h.dst_cid, 3);
	ck_assert_uint_eq(h.dst_port, 1024);
	ck_assert_uint_eq(h.type, VIRTIO_VSOCK_TYPE_STREAM);
	struct virtio_vsock_hdr r = ghdr(h.src_port, VIRTIO_VSOCK_OP_RESPONSE, 0);
	r.buf_alloc = guest_buf;
	tx_send(f, &r, NULL, 0, 0);
	return h.src_port;
}

START_TEST(vsock_data_and_credit)
{
	struct vfix f;
	vfix_init(&f);
	int cl;
	uint32_t port = connect_pair(&f, &cl, 64);
	char msg[100], got[4096];
	memset(msg, 'x', sizeof(msg));
	ck_assert_int_eq(write(cl, msg, sizeof(msg)), (int)sizeof(msg));
	vmm_vsock_process(&f.vs);
	struct virtio_vsock_hdr h;
	ck_assert(rx_next(&f, &h, got, sizeof(got)));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_RW);
	ck_assert_uint_eq(h.len, 64); /* the guest advertised 64 bytes of buffer */
	ck_assert(!rx_next(&f, &h, got, sizeof(got)));
	struct virtio_vsock_hdr cu = ghdr(port, VIRTIO_VSOCK_OP_CREDIT_UPDATE, 0);
	cu.buf_alloc = 64;
	cu.fwd_cnt = 64;
	tx_send(&f, &cu, NULL, 0, 0);
	ck_assert(rx_next(&f, &h, got, sizeof(got)));
	ck_assert_uint_eq(h.len, 36);

	struct virtio_vsock_hdr rw = ghdr(port, VIRTIO_VSOCK_OP_RW, 5);
	tx_send(&f, &rw, "world", 5, 0);
	ck_assert_int_eq(read(cl, got, sizeof(got)), 5);
	ck_assert_int_eq(memcmp(got, "world", 5), 0);

	/* the guest asks for credit: it gets our fwd_cnt */
	struct virtio_vsock_hdr cr = ghdr(port, VIRTIO_VSOCK_OP_CREDIT_REQUEST, 0);
	tx_send(&f, &cr, NULL, 0, 0);
	ck_assert(rx_next(&f, &h, NULL, 0));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
	ck_assert_uint_eq(h.fwd_cnt, 5);
	ck_assert_uint_eq(h.buf_alloc, VMM_VSOCK_BUF);

	/* orderly close: host half-closes, guest shuts both ways, then RST */
	shutdown(cl, SHUT_WR);
	vmm_vsock_process(&f.vs);
	ck_assert(rx_next(&f, &h, NULL, 0));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_SHUTDOWN);
	ck_assert_uint_eq(h.flags, VIRTIO_VSOCK_SHUTDOWN_SEND);
	struct virtio_vsock_hdr sd = ghdr(port, VIRTIO_VSOCK_OP_SHUTDOWN, 0);
	sd.flags = VIRTIO_VSOCK_SHUTDOWN_SEND | VIRTIO_VSOCK_SHUTDOWN_RCV;
	tx_send(&f, &sd, NULL, 0, 0);
	ck_assert(rx_next(&f, &h, NULL, 0));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_RST);
	ck_assert_int_eq(read(cl, got, sizeof(got)), 0); /* EOF on the host side */
	for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS; i++)
		ck_assert_int_eq(f.vs.conns[i].state, VS_FREE);
	close(cl);
	vfix_free(&f);
}
END_TEST

START_TEST(vsock_hostile_guest)
{
	struct vfix f;
	vfix_init(&f);
	int cl;
	uint32_t port = connect_pair(&f, &cl, 1 << 16);
	struct virtio_vsock_hdr h;

	/* wrong source CID: dropped, nothing answered, connection intact */
	struct virtio_vsock_hdr bad = ghdr(port, VIRTIO_VSOCK_OP_RW, 3);
	bad.src_cid = 77;
	tx_send(&f, &bad, "abc", 3, 0);
	ck_assert_uint_eq(f.vs.dropped, 1);
	ck_assert(!rx_next(&f, &h, NULL, 0));
	/* a header shorter than a header */
	struct virtio_vsock_hdr any = ghdr(port, VIRTIO_VSOCK_OP_RW, 0);
	tx_send(&f, &any, NULL, 0, 10);
	ck_assert_uint_eq(f.vs.dropped, 2);
	/* unknown port: an RST comes back */
	struct virtio_vsock_hdr stray = ghdr(4242, VIRTIO_VSOCK_OP_RW, 0);
	tx_send(&f, &stray, NULL, 0, 0);
	ck_assert(rx_next(&f, &h, NULL, 0));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_RST);
	ck_assert_uint_eq(h.src_port, 4242);
	/* the guest tries to connect to the host: refused */
	struct virtio_vsock_hdr req = ghdr(9999, VIRTIO_VSOCK_OP_REQUEST, 0);
	tx_send(&f, &req, NULL, 0, 0);
	ck_assert(rx_next(&f, &h, NULL, 0));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_RST);
	/* a length far past the buffer: dropped, and the connection is reset */
	struct virtio_vsock_hdr huge = ghdr(port, VIRTIO_VSOCK_OP_RW, 0x7fffffff);
	tx_send(&f, &huge, "abc", 3, 0);
	ck_assert(rx_next(&f, &h, NULL, 0));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_RST);
	ck_assert_uint_eq(h.src_port, port);
	char buf[8];
	ck_assert_int_eq(read(cl, buf, sizeof(buf)), 0);
	close(cl);

	/* data on a connection that is not established yet: reset */
	int sp[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	ck_assert_int_eq(vmm_vsock_host_connect(&f.vs, sp[0], NULL), 0);
	vmm_vsock_process(&f.vs);
	ck_assert(rx_next(&f, &h, NULL, 0));
	uint32_t p2 = h.src_port;
	struct virtio_vsock_hdr early = ghdr(p2, VIRTIO_VSOCK_OP_RW, 3);
	tx_send(&f, &early, "abc", 3, 0);
	ck_assert(rx_next(&f, &h, NULL, 0));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_RST);
	close(sp[1]);
	ck_assert_uint_ge(f.vs.dropped, 3);
	vfix_free(&f);
}
END_TEST

START_TEST(vsock_limits_and_hup)
{
	struct vfix f;
	vfix_init(&f);
	int cls[VMM_VSOCK_MAX_CONNS];
	for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS; i++) {
		int sp[2];
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
		ck_assert_int_eq(vmm_vsock_host_connect(&f.vs, sp[0], NULL), 0);
		cls[i] = sp[1];
	}
	int sp[2];
	struct rung_err err = {0};
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	ck_assert_int_eq(vmm_vsock_host_connect(&f.vs, sp[0], &err), -EAGAIN);
	ck_assert_ptr_nonnull(strstr(err.msg, "connections"));
	close(sp[1]);
	/* a host end that hangs up before the guest heard of it is simply forgotten */
	ck_assert_int_eq(vmm_vsock_poll_events(&f.vs, 0), 0);
	vmm_vsock_host_hup(&f.vs, 0);
	ck_assert_int_eq(f.vs.conns[0].state, VS_FREE);
	ck_assert_int_eq(vmm_vsock_poll_events(&f.vs, 0), -1);
	for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS; i++)
		close(cls[i]);
	/* a driver reset drops every connection */
	fake_wr(&f.g, VIRTIO_MMIO_STATUS, 0);
	vmm_vsock_process(&f.vs);
	for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS; i++)
		ck_assert_int_eq(f.vs.conns[i].state, VS_FREE);
	vfix_free(&f);
}
END_TEST

START_TEST(vsock_guest_ignores_credit)
{
	struct vfix f;
	vfix_init(&f);
	int cl;
	uint32_t port = connect_pair(&f, &cl, 1 << 16);
	int small = 4096;
	for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS; i++)
		if (f.vs.conns[i].state == VS_ESTABLISHED)
			setsockopt(f.vs.conns[i].fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	/* the host never reads; the guest sends 64 KiB packets past our 256 KiB buf_alloc */
	struct virtio_vsock_hdr h = ghdr(port, VIRTIO_VSOCK_OP_RW, VMM_VSOCK_MAX_PKT);
	uint8_t *p = vmm_mem_ptr(&f.g.mem, 0x100000, HDRSZ + VMM_VSOCK_MAX_PKT);
	memcpy(p, &h, HDRSZ);
	memset(p + HDRSZ, 'q', VMM_VSOCK_MAX_PKT);
	struct virtio_vsock_hdr r;
	bool reset = false;
	for (unsigned i = 0; i < 8 && !reset; i++) {
		struct fake_desc d = {0x100000, (uint32_t)(HDRSZ + VMM_VSOCK_MAX_PKT), false};
		fake_post(&f.g, 1, &d, 1);
		vmm_vsock_process(&f.vs);
		while (rx_next(&f, &r, NULL, 0))
			if (r.op == VIRTIO_VSOCK_OP_RST && r.src_port == port)
				reset = true;
	}
	ck_assert(reset);
	for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS; i++)
		ck_assert_int_eq(f.vs.conns[i].state, VS_FREE);
	close(cl);
	vfix_free(&f);
}
END_TEST

START_TEST(vsock_tiny_rx_buffers)
{
	struct vfix f;
	vfix_init(&f);
	int cl;
	connect_pair(&f, &cl, 1 << 16);
	/* host data fills every good RX buffer (8 x 4 KiB) */
	static char big[60000];
	ck_assert_int_eq(write(cl, big, sizeof(big)), (int)sizeof(big));
	vmm_vsock_process(&f.vs);
	ck_assert(f.vs.rx_starved);
	struct vring_used *u = fake_used(&f.g, 0);
	uint16_t used_before = u->idx;
	uint64_t dropped = f.vs.dropped;
	/* then the guest only offers buffers with room for a header and no data */
	for (unsigned i = 0; i < 4; i++) {
		struct fake_desc d = {RX_BASE, (uint32_t)HDRSZ, true};
		fake_post(&f.g, 0, &d, 1);
	}
	vmm_vsock_process(&f.vs);
	ck_assert_uint_eq(f.vs.dropped, dropped + 4);
	ck_assert_uint_eq((uint16_t)(u->idx - used_before), 4);
	for (unsigned i = 0; i < 4; i++)
		ck_assert_uint_eq(u->ring[(used_before + i) % FAKE_QSIZE].len, 0);
	ck_assert(f.vs.rx_starved); /* so poll() stops asking for POLLIN: no busy loop */
	for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS; i++)
		if (f.vs.conns[i].state == VS_ESTABLISHED)
			ck_assert_int_eq(vmm_vsock_poll_events(&f.vs, i) & POLLIN, 0);
	close(cl);
	vfix_free(&f);
}
END_TEST

static unsigned irq_up, irq_down;
static void count_irq(void *ctx, unsigned irq, int level)
{
	ck_assert_uint_eq(irq, VMM_SERIAL_IRQ);
	if (level)
		irq_up++;
	else
		irq_down++;
}

START_TEST(serial_uart_and_cap)
{
	char path[] = "/tmp/rung-vmm-serial-XXXXXX";
	close(mkstemp(path));
	struct vmm_serial s;
	ck_assert_int_eq(vmm_serial_init(&s, path, 4096, false, count_irq, NULL, NULL), 0);
	/* scratch register, loopback MSR (Linux's 8250 autoconfig checks 0x90) */
	vmm_serial_out(&s, 7, 0x5a);
	ck_assert_uint_eq(vmm_serial_in(&s, 7), 0x5a);
	vmm_serial_out(&s, 4, 0x1a);
	ck_assert_uint_eq(vmm_serial_in(&s, 6) & 0xf0, 0x90);
	vmm_serial_out(&s, 4, 0x0b);
	ck_assert_uint_eq(vmm_serial_in(&s, 5) & 0x60, 0x60); /* THR empty */
	/* THRE interrupt: raised when enabled, cleared by reading IIR */
	irq_up = irq_down = 0;
	vmm_serial_out(&s, 1, 0x02);
	ck_assert_uint_eq(irq_up, 1);
	ck_assert_uint_eq(vmm_serial_in(&s, 2) & 0x0f, 0x02);
	ck_assert_uint_eq(irq_down, 1);
	ck_assert_uint_eq(vmm_serial_in(&s, 2) & 0x0f, 0x01);
	vmm_serial_out(&s, 1, 0);
	/* a flood: the log never passes its cap */
	for (int i = 0; i < 20000; i++)
		vmm_serial_out(&s, 0, i % 80 == 79 ? '\n' : 'a');
	vmm_serial_out(&s, 0, 'Z');
	vmm_serial_flush(&s);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_le(st.st_size, 4096);
	ck_assert_int_gt(st.st_size, 0);
	char buf[4097] = {0};
	int fd = open(path, O_RDONLY);
	ck_assert_int_gt(read(fd, buf, 4096), 0);
	close(fd);
	ck_assert_ptr_nonnull(strstr(buf, "truncated"));
	ck_assert_int_eq(buf[strlen(buf) - 1], 'Z'); /* the newest output is kept */
	vmm_serial_destroy(&s);
	unlink(path);
	struct rung_err err = {0};
	ck_assert_int_eq(vmm_serial_init(&s, "/nonexistent/x/serial.log", 4096, false, NULL, NULL,
					 &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "--serial-log"));
}
END_TEST

static int run_filtered(enum vmm_thread_kind kind, int forbidden);

/* mmap is allowed for memory, never for code */
static int run_mmap(int prot)
{
	void *prog;
	size_t len;
	ck_assert_int_eq(vmm_seccomp_build(VMM_THREAD_VCPU, &prog, &len, NULL), 0);
	pid_t pid = fork();
	if (pid == 0) {
		if (vmm_seccomp_install(prog, len, NULL) < 0)
			_exit(100);
		void *p = mmap(NULL, 4096, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		_exit(p == MAP_FAILED ? 101 : 0);
	}
	free(prog);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return status;
}

static int run_filtered(enum vmm_thread_kind kind, int forbidden)
{
	void *prog;
	size_t len;
	struct rung_err err = {0};
	ck_assert_int_eq(vmm_seccomp_build(kind, &prog, &len, &err), 0);
	ck_assert_uint_gt(len, 10);
	pid_t pid = fork();
	if (pid == 0) {
		if (vmm_seccomp_install(prog, len, &err) < 0)
			_exit(100);
		if (forbidden)
			syscall(forbidden, 0, 0, 0);
		if (write(1, "", 0) < 0)
			_exit(101);
		_exit(0);
	}
	free(prog);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return status;
}

START_TEST(seccomp_filters)
{
	int st = run_filtered(VMM_THREAD_VCPU, 0);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	st = run_filtered(VMM_THREAD_VCPU, SYS_socket); /* a vCPU never opens sockets */
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
	st = run_filtered(VMM_THREAD_VCPU, SYS_accept4);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
	st = run_filtered(VMM_THREAD_VMM, SYS_execve);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
	st = run_filtered(VMM_THREAD_VMM, SYS_openat); /* nothing opens files once running */
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
	st = run_mmap(PROT_READ | PROT_WRITE);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	st = run_mmap(PROT_READ | PROT_EXEC);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
	struct rung_err err = {0};
	ck_assert_int_eq(vmm_seccomp_install(NULL, 0, &err), -EINVAL);
}
END_TEST

Suite *vmm_devices_suite(void)
{
	Suite *s = suite_create("vmm_devices");
	TCase *tc = tcase_create("fake-guest");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, vsock_data_and_credit);
	tcase_add_test(tc, vsock_hostile_guest);
	tcase_add_test(tc, vsock_limits_and_hup);
	tcase_add_test(tc, vsock_guest_ignores_credit);
	tcase_add_test(tc, vsock_tiny_rx_buffers);
	tcase_add_test(tc, serial_uart_and_cap);
	tcase_add_test(tc, seccomp_filters);
	suite_add_tcase(s, tc);
	return s;
}
