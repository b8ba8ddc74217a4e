/*
 * vmm/vm.c: assembling the VM (memory, devices, boot image, vCPUs, sockets) and the VMM
 * thread's event loop: vsock bridging, the control socket, signals, the VM's end.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/log.h"
#include "common/util.h"
#include "vmm/vm-internal.h"

#define MAX_KERNEL (128u << 20)
#define MAX_INITRD (1u << 30)
#define CTL_CONNS 4
#define CTL_LINE 4200 /* snapshot PATH: a path up to PATH_MAX */
#define HALT_PROBE_MS 1000 /* how often idle vCPUs are asked whether the guest halted */

static int listen_unix(const char *path, struct rung_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return rung_err_set(err, ENAMETOOLONG, "socket path too long: %s", path);
	strcpy(sa.sun_path, path);
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return rung_err_set(err, EEXIST, "%s exists and is not a socket", path);
		unlink(path);
	}
	cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return rung_err_sys(err, errno, "socket");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return rung_err_sys(err, errno, "bind %s", path);
	if (listen(fd, 64) < 0)
		return rung_err_sys(err, errno, "listen %s", path);
	return rung_steal_fd(&fd);
}

static int add_virtio(struct vmm_vm *vm, const struct vmm_virtio_dev_ops *ops, void *dev,
		      struct vmm_virtio **out, struct rung_err *err)
{
	struct vmm_mmio_slot slot;
	int r = vmm_mmio_slot(vm->nvirtio, &slot, err);
	if (r < 0)
		return r;
	struct vmm_virtio *t = &vm->virtio[vm->nvirtio];
	if ((r = vmm_virtio_init(t, ops, dev, &vm->mem, &slot, vmm_kvm_irq_line, vm, err)) < 0)
		return r;
	vm->nvirtio++;
	if ((r = vmm_bus_add(&vm->bus, t, err)) < 0)
		return r;
	if (out)
		*out = t;
	return 0;
}

/* The tap is opened (or taken over) here, before any seccomp filter: no TUNSETIFF later. */
static int setup_net(struct vmm_vm *vm, struct rung_err *err)
{
	const struct vmm_config *cfg = &vm->cfg;
	int fd = cfg->net_fd, r;
	if (fd < 0 && !cfg->net_tap)
		return 0;
	if (fd >= 0 && (rung_fd_set_nonblock(fd, 1) < 0 || rung_fd_set_cloexec(fd, 1) < 0))
		return rung_err_sys(err, errno, "--net-fd %d", fd);
	if (fd < 0 && (fd = vmm_net_tap_open(cfg->net_tap, err)) < 0)
		return fd;
	uint8_t mac[6];
	if (cfg->net_mac_set)
		memcpy(mac, cfg->net_mac, 6);
	else
		vmm_net_mac_default(rung_now_us() ^ ((uint64_t)getpid() << 40), mac);
	r = vmm_net_init(&vm->net, fd, mac, err); /* owns fd from here, even on failure */
	vm->net_ok = true;
	if (r < 0)
		return r;
	LOG_INFO("virtio-net: mac %02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
		 mac[4], mac[5]);
	return add_virtio(vm, &vmm_net_ops, &vm->net, &vm->net.t, err);
}

static int setup_devices(struct vmm_vm *vm, struct rung_err *err)
{
	const struct vmm_config *cfg = &vm->cfg;
	int r = vmm_serial_init(&vm->serial, cfg->serial_log, cfg->serial_cap,
				cfg->serial_timestamps, vmm_kvm_irq_line, vm, err);
	if (r < 0)
		return r;
	vm->serial_ok = true;
	for (unsigned i = 0; i < cfg->ndisks; i++) {
		if ((r = vmm_blk_open(&vm->blk[i], cfg->disks[i].path, cfg->disks[i].ro, err)) < 0)
			return r;
		vm->nblk++;
		if ((r = add_virtio(vm, &vmm_blk_ops, &vm->blk[i], NULL, err)) < 0)
			return r;
	}
	if ((r = vmm_vsock_init(&vm->vsock, cfg->guest_cid, cfg->vsock_port, err)) < 0)
		return r;
	vm->vsock_ok = true;
	if ((r = add_virtio(vm, &vmm_vsock_ops, &vm->vsock, &vm->vsock.t, err)) < 0)
		return r;
	return setup_net(vm, err); /* last: the slots and IRQs of the others never move */
}

static int read_file(const char *path, size_t max, char **out, size_t *len, struct rung_err *err)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rung_err_sys(err, errno, "%s", path);
	int r = rung_read_fd_all(fd, max, out, len, err);
	return r < 0 ? rung_err_wrap(err, "%s", path) : 0;
}

static int load_boot(struct vmm_vm *vm, struct rung_err *err)
{
	cleanup_free char *kernel = NULL, *initrd = NULL;
	size_t klen = 0, ilen = 0;
	int r = read_file(vm->cfg.kernel, MAX_KERNEL, &kernel, &klen, err);
	if (r < 0)
		return rung_err_wrap(err, "--kernel");
	if (vm->cfg.initrd && (r = read_file(vm->cfg.initrd, MAX_INITRD, &initrd, &ilen, err)) < 0)
		return rung_err_wrap(err, "--initrd");
	struct vmm_mmio_slot slots[VMM_MAX_VIRTIO_DEVS];
	for (unsigned i = 0; i < vm->nvirtio; i++)
		slots[i] = vm->virtio[i].slot;
	char cmdline[VMM_CMDLINE_MAX];
	if ((r = vmm_cmdline_build(cmdline, sizeof(cmdline), slots, vm->nvirtio,
				   vm->cfg.cmdline_extra, err)) < 0)
		return r;
	LOG_INFO("cmdline: %s", cmdline);
	if ((r = vmm_boot_load(&vm->mem, (uint8_t *)kernel, klen, (uint8_t *)initrd, ilen, cmdline,
			       &vm->boot, err)) < 0)
		return r;
	size_t mpsz = vmm_mptable_size(vm->ncpus);
	uint8_t *mp = vmm_mem_ptr(&vm->mem, VMM_EBDA_START, mpsz);
	if (!mp)
		return rung_err_set(err, EFAULT, "mptable: not in guest memory");
	r = vmm_mptable_build(mp, mpsz, VMM_EBDA_START, vm->ncpus, err);
	return r < 0 ? r : 0;
}

struct vmm_vm *vmm_vm_create(const struct vmm_config *cfg, struct rung_err *err)
{
	cleanup_free uint8_t *snap_state = NULL;
	struct vmm_vm *vm = calloc(1, sizeof(*vm));
	if (!vm) {
		rung_err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	vm->cfg = *cfg;
	vm->ncpus = cfg->cpus;
	vm->kvm_fd = vm->vm_fd = vm->exit_fd = vm->sig_fd = -1;
	vm->vsock_listen_fd = vm->control_fd = vm->mem_fd = -1;
	vm->vsock.kick_fd = -1;
	vm->net.kick_fd = vm->net.tap_fd = -1;
	for (unsigned i = 0; i < VMM_MAX_CPUS; i++)
		vm->vcpu[i].fd = -1;
	pthread_mutex_init(&vm->run_lock, NULL);
	pthread_cond_init(&vm->run_cond, NULL);
	vm->t_create_us = rung_now_us();
	int r;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1); /* only vCPU threads take kicks */
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	sigdelset(&set, SIGUSR1);
	if ((vm->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0 ||
	    (vm->exit_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		r = rung_err_sys(err, errno, "signalfd/eventfd");
		goto fail;
	}
	if (cfg->restore && (r = vmm_snap_open(vm, &snap_state, err)) < 0)
		goto fail;
	if ((r = vmm_kvm_open(vm, vm->cfg.mem_mib << 20, err)) < 0 ||
	    (r = setup_devices(vm, err)) < 0 || (!cfg->restore && (r = load_boot(vm, err)) < 0))
		goto fail;
	for (unsigned i = 0; i < vm->ncpus; i++)
		if ((r = vmm_vcpu_create(vm, i, err)) < 0)
			goto fail;
	if (cfg->restore && (r = vmm_snap_apply(vm, snap_state, err)) < 0)
		goto fail;
	if (cfg->vsock_fd >= 0) {
		if (rung_fd_set_nonblock(cfg->vsock_fd, 1) < 0 ||
		    rung_fd_set_cloexec(cfg->vsock_fd, 1) < 0) {
			r = rung_err_sys(err, errno, "--vsock-fd %d", cfg->vsock_fd);
			goto fail;
		}
		vm->vsock_listen_fd = cfg->vsock_fd;
	} else if ((r = vm->vsock_listen_fd = listen_unix(cfg->vsock_uds, err)) < 0) {
		goto fail;
	}
	if (cfg->control && (r = vm->control_fd = listen_unix(cfg->control, err)) < 0)
		goto fail;
	if (!cfg->no_seccomp &&
	    ((r = vmm_seccomp_build(VMM_THREAD_VCPU, &vm->vcpu_bpf, &vm->vcpu_bpf_len, err)) < 0 ||
	     (r = vmm_seccomp_build(VMM_THREAD_VMM, &vm->vmm_bpf, &vm->vmm_bpf_len, err)) < 0 ||
	     (r = vmm_seccomp_build(VMM_THREAD_SNAP, &vm->snap_bpf, &vm->snap_bpf_len, err)) < 0 ||
	     (cfg->restore && (r = vmm_seccomp_build(VMM_THREAD_VERIFY, &vm->verify_bpf,
						     &vm->verify_bpf_len, err)) < 0)))
		goto fail;
	LOG_INFO("vm created in %llu us", (unsigned long long)(rung_now_us() - vm->t_create_us));
	return vm;
fail:
	vmm_vm_destroy(vm);
	return NULL;
}

void vmm_vm_destroy(struct vmm_vm *vm)
{
	if (!vm)
		return;
	vmm_vcpus_join(vm);
	vmm_snap_thread_stop(vm);
	vmm_snap_verify_stop(vm);
	for (unsigned i = 0; i < VMM_MAX_CPUS; i++) {
		if (vm->vcpu[i].run)
			munmap(vm->vcpu[i].run, vm->run_size);
		if (vm->vcpu[i].fd >= 0)
			close(vm->vcpu[i].fd);
	}
	if (vm->vsock_ok)
		vmm_vsock_destroy(&vm->vsock);
	if (vm->net_ok)
		vmm_net_destroy(&vm->net);
	else if (vm->cfg.net_fd >= 0)
		close(vm->cfg.net_fd); /* handed in, never taken over */
	for (unsigned i = 0; i < vm->nvirtio; i++)
		vmm_virtio_destroy(&vm->virtio[i]);
	for (unsigned i = 0; i < vm->nblk; i++)
		vmm_blk_close(&vm->blk[i]);
	if (vm->serial_ok)
		vmm_serial_destroy(&vm->serial);
	if (vm->vsock_listen_fd >= 0) {
		close(vm->vsock_listen_fd);
		if (vm->cfg.vsock_fd < 0)
			unlink(vm->cfg.vsock_uds);
	}
	if (vm->control_fd >= 0) {
		close(vm->control_fd);
		unlink(vm->cfg.control);
	}
	vmm_kvm_close(vm);
	if (vm->exit_fd >= 0)
		close(vm->exit_fd);
	if (vm->sig_fd >= 0)
		close(vm->sig_fd);
	if (vm->mem_fd >= 0)
		close(vm->mem_fd);
	free(vm->msr_list);
	free(vm->vcpu_bpf);
	free(vm->vmm_bpf);
	free(vm->snap_bpf);
	free(vm->verify_bpf);
	pthread_mutex_destroy(&vm->run_lock);
	pthread_cond_destroy(&vm->run_cond);
	free(vm);
}

struct ctl_conn {
	int fd;
	char line[CTL_LINE];
	size_t len;
};

static void ctl_reply(int fd, const char *s)
{
	if (rung_write_all(fd, s, strlen(s)) < 0)
		LOG_DEBUG("control: reply lost");
}

/* snapshot PATH: pause (unless paused already), save, resume; answered when the file is whole. */
static void ctl_snapshot(struct vmm_vm *vm, struct ctl_conn *cc, const char *arg, size_t alen)
{
	char path[CTL_LINE], buf[300];
	struct rung_err err = {0};
	snprintf(path, sizeof(path), "%.*s", (int)alen, arg);
	pthread_mutex_lock(&vm->run_lock);
	bool was_paused = vm->pause_req;
	pthread_mutex_unlock(&vm->run_lock);
	vmm_vcpus_pause(vm, true);
	uint64_t t0 = rung_now_us();
	if (!vmm_vcpus_paused(vm, 5000))
		snprintf(buf, sizeof(buf), "error pause timed out\n");
	else if (vmm_snap_save(vm, path, &err) < 0)
		snprintf(buf, sizeof(buf), "error %s\n", err.msg);
	else
		snprintf(buf, sizeof(buf), "ok ms=%llu\n", (unsigned long long)((rung_now_us() - t0) / 1000));
	if (!was_paused)
		vmm_vcpus_pause(vm, false);
	ctl_reply(cc->fd, buf);
}

static void ctl_command(struct vmm_vm *vm, struct ctl_conn *cc, const char *line, size_t len)
{
	char buf[160];
	const char *arg;
	size_t alen;
	switch (vmm_control_parse(line, len, &arg, &alen)) {
	case VMM_CTL_SNAPSHOT:
		ctl_snapshot(vm, cc, arg, alen);
		break;
	case VMM_CTL_PAUSE:
		vmm_vcpus_pause(vm, true);
		ctl_reply(cc->fd, vmm_vcpus_paused(vm, 5000) ? "ok\n" : "error pause timed out\n");
		break;
	case VMM_CTL_RESUME:
		vmm_vcpus_pause(vm, false);
		ctl_reply(cc->fd, "ok\n");
		break;
	case VMM_CTL_STOP:
		ctl_reply(cc->fd, "ok\n");
		vmm_vm_end(vm, VMM_EXIT_STOPPED, "control: stop");
		break;
	case VMM_CTL_STATUS:
		pthread_mutex_lock(&vm->run_lock);
		snprintf(buf, sizeof(buf), "ok %s cpus=%u mem_mib=%llu uptime_ms=%llu\n",
			 vm->pause_req ? "paused" : "running", vm->ncpus,
			 (unsigned long long)vm->cfg.mem_mib,
			 (unsigned long long)((rung_now_us() - vm->t_create_us) / 1000));
		pthread_mutex_unlock(&vm->run_lock);
		ctl_reply(cc->fd, buf);
		break;
	default:
		ctl_reply(cc->fd, "error unknown command (pause, resume, stop, status, snapshot PATH)\n");
	}
}

/* Returns false when the connection is done. */
static bool ctl_read(struct vmm_vm *vm, struct ctl_conn *cc)
{
	ssize_t n = read(cc->fd, cc->line + cc->len, sizeof(cc->line) - cc->len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n <= 0)
		return false;
	cc->len += (size_t)n;
	char *nl;
	while ((nl = memchr(cc->line, '\n', cc->len))) {
		size_t l = (size_t)(nl - cc->line);
		ctl_command(vm, cc, cc->line, l);
		memmove(cc->line, nl + 1, cc->len - l - 1);
		cc->len -= l + 1;
	}
	if (cc->len == sizeof(cc->line)) {
		ctl_reply(cc->fd, "error line too long\n");
		return false;
	}
	return true;
}

static void accept_vsock(struct vmm_vm *vm)
{
	struct rung_err err = {0};
	for (;;) {
		int fd = accept4(vm->vsock_listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		pthread_mutex_lock(&vm->vsock.t->lock);
		int r = vmm_vsock_host_connect(&vm->vsock, fd, &err);
		pthread_mutex_unlock(&vm->vsock.t->lock);
		if (r < 0)
			LOG_WARN("%s", err.msg);
	}
}

/* The event loop's poll set: fixed slots, then the control connections, then vsock's. */
enum {
	P_EXIT,
	P_SIG,
	P_VLISTEN,
	P_KICK,
	P_NKICK,
	P_TAP,
	P_CLISTEN,
	P_CTL,
	P_CONN = P_CTL + CTL_CONNS
};
#define P_ALL (P_CONN + VMM_VSOCK_MAX_CONNS)

/*
 * A restored guest still holds the vsock connections of the process that saved it: post it
 * a transport reset (it drops them and re-reads its CID; listening sockets, the agent's, stay)
 * and take new host connections only once it gave the event buffer back, or after 3 s, so a
 * new connection never meets the reset. Returns true while new connections must wait.
 */
static bool vsock_restore_hold(struct vmm_vm *vm, uint64_t now)
{
	if (!vm->vsock_reset_due)
		return false;
	pthread_mutex_lock(&vm->vsock.t->lock);
	if (!vm->vsock_reset_deadline && vmm_vsock_post_reset(&vm->vsock)) {
		vm->vsock_reset_deadline = now + 3000;
		vmm_snap_timeline(vm, VMM_RT_RESET_POSTED);
	}
	bool done = vm->vsock_reset_deadline &&
		    (vmm_vsock_reset_handled(&vm->vsock) || now >= vm->vsock_reset_deadline);
	pthread_mutex_unlock(&vm->vsock.t->lock);
	if (done) {
		vm->vsock_reset_due = false;
		vmm_snap_timeline(vm, VMM_RT_RESET_DONE);
	}
	return !done;
}

/* What to wait for: while paused, only the exit, signals and the control socket. */
static void fill_pollfds(struct vmm_vm *vm, struct vmm_net *net, bool paused,
			 const struct ctl_conn *ctl, struct pollfd *pfd)
{
	bool hold = paused || vsock_restore_hold(vm, rung_now_ms());
	pfd[P_EXIT] = (struct pollfd){.fd = vm->exit_fd, .events = POLLIN};
	pfd[P_SIG] = (struct pollfd){.fd = vm->sig_fd, .events = POLLIN};
	pfd[P_VLISTEN] = (struct pollfd){.fd = hold ? -1 : vm->vsock_listen_fd, .events = POLLIN};
	pfd[P_KICK] = (struct pollfd){.fd = paused ? -1 : vm->vsock.kick_fd, .events = POLLIN};
	pfd[P_NKICK] = (struct pollfd){.fd = paused || !net ? -1 : net->kick_fd, .events = POLLIN};
	pfd[P_TAP] = (struct pollfd){.fd = -1, .events = POLLIN};
	if (net && !paused) {
		pthread_mutex_lock(&net->t->lock);
		pfd[P_TAP].fd = vmm_net_poll_fd(net);
		pthread_mutex_unlock(&net->t->lock);
	}
	pfd[P_CLISTEN] = (struct pollfd){.fd = vm->control_fd, .events = POLLIN};
	for (unsigned i = 0; i < CTL_CONNS; i++)
		pfd[P_CTL + i] = (struct pollfd){.fd = ctl[i].fd, .events = POLLIN};
	pthread_mutex_lock(&vm->vsock.t->lock);
	for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS; i++) {
		int ev = paused ? -1 : vmm_vsock_poll_events(&vm->vsock, i);
		pfd[P_CONN + i] = (struct pollfd){.fd = ev >= 0 ? vm->vsock.conns[i].fd : -1,
						  .events = (short)(ev > 0 ? ev : 0)};
	}
	pthread_mutex_unlock(&vm->vsock.t->lock);
}

/* The control socket: a new connection into a free slot, then each connection's lines. */
static void serve_control(struct vmm_vm *vm, struct ctl_conn *ctl, const struct pollfd *pfd)
{
	if (pfd[P_CLISTEN].revents) {
		int fd = accept4(vm->control_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		unsigned i = 0;
		while (fd >= 0 && i < CTL_CONNS && ctl[i].fd >= 0)
			i++;
		if (fd >= 0 && i == CTL_CONNS) {
			ctl_reply(fd, "error too many control connections\n");
			close(fd);
		} else if (fd >= 0) {
			ctl[i].fd = fd;
			ctl[i].len = 0;
		}
	}
	for (unsigned i = 0; i < CTL_CONNS; i++)
		if (pfd[P_CTL + i].revents && !ctl_read(vm, &ctl[i])) {
			close(ctl[i].fd);
			ctl[i].fd = -1;
		}
}

/* The devices' host side (not while paused): vsock and net kicks, the tap, new and hung-up
 * vsock connections, then vsock's queues. */
static void serve_devices(struct vmm_vm *vm, struct vmm_net *net, const struct pollfd *pfd)
{
	if (pfd[P_KICK].revents) {
		uint64_t v;
		if (read(vm->vsock.kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			PLOG_WARN("vsock kick");
	}
	if (net && (pfd[P_NKICK].revents || pfd[P_TAP].revents)) {
		uint64_t v;
		if (pfd[P_NKICK].revents && read(net->kick_fd, &v, sizeof(v)) < 0 &&
		    errno != EAGAIN)
			PLOG_WARN("net kick");
		if (pfd[P_TAP].revents & (POLLERR | POLLHUP | POLLNVAL))
			vmm_net_tap_hup(net);
		vmm_net_process(net);
	}
	if (pfd[P_VLISTEN].revents) {
		vmm_snap_timeline(vm, VMM_RT_CONNECT);
		accept_vsock(vm);
	}
	pthread_mutex_lock(&vm->vsock.t->lock);
	for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS; i++)
		if (pfd[P_CONN + i].revents & (POLLHUP | POLLERR | POLLNVAL))
			vmm_vsock_host_hup(&vm->vsock, i);
	pthread_mutex_unlock(&vm->vsock.t->lock);
	vmm_vsock_process(&vm->vsock);
	if (vm->vsock.t_first_rw_us)
		vmm_snap_timeline(vm, VMM_RT_ANSWER);
}

static void event_loop(struct vmm_vm *vm)
{
	struct ctl_conn ctl[CTL_CONNS];
	for (unsigned i = 0; i < CTL_CONNS; i++)
		ctl[i].fd = -1;
	struct vmm_net *net = vm->net_ok && vm->net.t ? &vm->net : NULL;
	struct pollfd pfd[P_ALL];
	uint64_t next_probe = rung_now_ms() + HALT_PROBE_MS;
	unsigned halt_rounds = 0;
	for (;;) {
		pthread_mutex_lock(&vm->run_lock);
		bool paused = vm->pause_req;
		bool stop = vm->stopping;
		pthread_mutex_unlock(&vm->run_lock);
		if (stop)
			break;
		fill_pollfds(vm, net, paused, ctl, pfd);
		uint64_t now = rung_now_ms();
		if (!paused && now >= next_probe) {
			/* two rounds in a row: one sample could catch a transient cli; hlt */
			halt_rounds = vmm_vcpus_probe_halt(vm) ? halt_rounds + 1 : 0;
			if (halt_rounds >= 2) {
				vmm_vm_end(vm, VMM_EXIT_REBOOT,
					   "guest halted (poweroff without ACPI, or halt)");
				break;
			}
			next_probe = now + HALT_PROBE_MS;
		}
		int timeout = paused ? -1 : (int)(next_probe > now ? next_probe - now : 0);
		if (!paused && vm->vsock_reset_due && timeout > 20)
			timeout = 20; /* watching for the guest's answer to the vsock reset */
		if (poll(pfd, P_ALL, timeout) < 0) {
			if (errno == EINTR)
				continue;
			vmm_vm_end(vm, VMM_EXIT_ERROR, "poll: %s", strerror(errno));
			break;
		}
		if (pfd[P_SIG].revents) {
			struct signalfd_siginfo si;
			if (read(vm->sig_fd, &si, sizeof(si)) == sizeof(si))
				vmm_vm_end(vm, VMM_EXIT_STOPPED, "signal %u", si.ssi_signo);
		}
		serve_control(vm, ctl, pfd);
		if (!paused)
			serve_devices(vm, net, pfd);
	}
	for (unsigned i = 0; i < CTL_CONNS; i++)
		if (ctl[i].fd >= 0)
			close(ctl[i].fd);
}

enum vmm_exit vmm_vm_run(struct vmm_vm *vm, struct rung_err *err)
{
	int r = vmm_snap_thread_start(vm, err);
	if (r < 0)
		LOG_WARN("snapshots unavailable: %s", err->msg);
	/* a restored guest gets its vsock reset before it runs (not once the event loop is up) */
	vsock_restore_hold(vm, rung_now_ms());
	if ((r = vmm_snap_verify_start(vm, err)) < 0)
		vmm_vm_end(vm, VMM_EXIT_ERROR, "%s", err->msg);
	else
		r = vmm_vcpus_start(vm, err);
	if (r == 0 && vm->vmm_bpf &&
	    (r = vmm_seccomp_install(vm->vmm_bpf, vm->vmm_bpf_len, err)) < 0)
		vmm_vm_end(vm, VMM_EXIT_ERROR, "vmm thread: seccomp: %s", err->msg);
	if (r == 0)
		event_loop(vm);
	vmm_vm_end(vm, VMM_EXIT_ERROR, "event loop ended");
	vmm_vcpus_join(vm);
	vmm_snap_thread_stop(vm);
	vmm_snap_verify_stop(vm);
	vmm_serial_flush(&vm->serial);
	rung_err_set(err, vm->exit == VMM_EXIT_ERROR ? EIO : 0, "%s", vm->exit_msg);
	err->code = vm->exit == VMM_EXIT_ERROR ? EIO : 0;
	return vm->exit;
}
