/*
 * vmm/snapshot.c: saving a paused VM to a snapshot file and building a VM back from one
 * (format: snapshot-file.c; docs/snapshots.md).
 *
 * Save runs on its own thread, started before any seccomp filter, with a filter of its own:
 * it alone may create files (O_CREAT|O_EXCL only), rename and fsync them, and read vCPU and VM
 * state. The VMM thread, which parses guest packets, asks it through run_lock and waits.
 * Order (the KVM API's rules, as Firecracker orders them): per vCPU the MP state first (reading
 * it may latch pending LAPIC events), registers, special registers, XSAVE, XCRs, debug
 * registers, LAPIC, MSRs, events last; then the irqchip, PIT and clock; the devices; the
 * serial port; guest memory last, as the file's tail. Restore is done by the main thread
 * before any filter: the VM state (PIT, clock, irqchip), then per vCPU in the same order
 * (special registers restore the APIC base before the LAPIC; the LAPIC's timer mode before
 * the TSC deadline MSR; events last). Guest memory is checked afterwards, while the guest
 * runs, by a thread of its own (verify_thread; docs/snapshots.md says why that is safe).
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/log.h"
#include "common/util.h"
#include "vmm/snapshot-file.h"
#include "vmm/vm-internal.h"

static int msr_list_get(struct vmm_vm *vm, struct rung_err *err)
{
	if (vm->msr_list)
		return 0;
	struct kvm_msr_list probe = {.nmsrs = 0};
	if (ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG)
		return rung_err_sys(err, errno, "KVM_GET_MSR_INDEX_LIST");
	uint32_t n = probe.nmsrs < VMM_SNAP_MAX_MSRS ? probe.nmsrs : VMM_SNAP_MAX_MSRS;
	if (probe.nmsrs > VMM_SNAP_MAX_MSRS)
		LOG_WARN("snapshot: KVM lists %u MSRs, saving the first %d", probe.nmsrs,
			 VMM_SNAP_MAX_MSRS);
	struct kvm_msr_list *l = calloc(1, sizeof(*l) + (probe.nmsrs + 1) * sizeof(uint32_t));
	if (!l)
		return rung_err_set(err, ENOMEM, "MSR list: out of memory");
	l->nmsrs = probe.nmsrs;
	if (ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, l) < 0) {
		free(l);
		return rung_err_sys(err, errno, "KVM_GET_MSR_INDEX_LIST");
	}
	l->nmsrs = n;
	vm->msr_list = l;
	return 0;
}

union msrs_buf {
	struct kvm_msrs h; /* entries[] follow nmsrs */
	uint8_t raw[sizeof(struct kvm_msrs) + VMM_SNAP_MAX_MSRS * sizeof(struct kvm_msr_entry)];
};

/* KVM_GET_MSRS stops at the first MSR it cannot read: drop that one and go on. */
static int get_msrs(struct vmm_vm *vm, struct vmm_vcpu *c, struct vmm_snap_vcpu *s,
		    struct rung_err *err)
{
	static union msrs_buf b; /* the save thread only */
	struct kvm_msr_entry *e = b.h.entries;
	uint32_t n = vm->msr_list->nmsrs;
	for (uint32_t i = 0; i < n; i++)
		e[i] = (struct kvm_msr_entry){.index = vm->msr_list->indices[i]};
	while (n) {
		memset(&b.h, 0, sizeof(b.h));
		b.h.nmsrs = n;
		int got = ioctl(c->fd, KVM_GET_MSRS, &b);
		if (got < 0)
			return rung_err_sys(err, errno, "vcpu %u: KVM_GET_MSRS", c->id);
		if ((uint32_t)got > n)
			got = (int)n;
		memcpy(s->msrs + s->nmsrs, e, (size_t)got * sizeof(e[0]));
		s->nmsrs += (uint32_t)got;
		if ((uint32_t)got == n)
			break;
		n -= (uint32_t)got + 1;
		memmove(e, e + got + 1, n * sizeof(e[0]));
	}
	return 0;
}

static int vcpu_save(struct vmm_vm *vm, struct vmm_vcpu *c, struct vmm_snap_vcpu *s,
		     struct rung_err *err)
{
	memset(s, 0, sizeof(*s));
	s->xcrs.nr_xcrs = 0;
	if (ioctl(c->fd, KVM_GET_MP_STATE, &s->mp) < 0 || ioctl(c->fd, KVM_GET_REGS, &s->regs) < 0 ||
	    ioctl(c->fd, KVM_GET_SREGS, &s->sregs) < 0 ||
	    ioctl(c->fd, KVM_GET_XSAVE, s->xsave) < 0 || /* the legacy 4 KiB region */
	    ioctl(c->fd, KVM_GET_XCRS, &s->xcrs) < 0 ||
	    ioctl(c->fd, KVM_GET_DEBUGREGS, &s->debugregs) < 0 ||
	    ioctl(c->fd, KVM_GET_LAPIC, &s->lapic) < 0)
		return rung_err_sys(err, errno, "vcpu %u: reading its state", c->id);
	int r = get_msrs(vm, c, s, err);
	if (r == 0 && ioctl(c->fd, KVM_GET_VCPU_EVENTS, &s->events) < 0)
		r = rung_err_sys(err, errno, "vcpu %u: KVM_GET_VCPU_EVENTS", c->id);
	return r;
}

static int set_msrs(struct vmm_vcpu *c, const struct kvm_msr_entry *e, uint32_t n,
		    struct rung_err *err)
{
	static union msrs_buf b; /* the main thread only, before the vCPUs run */
	struct kvm_msr_entry *be = b.h.entries;
	uint32_t k = 0;
	for (uint32_t i = 0; i < n && i < VMM_SNAP_MAX_MSRS; i++)
		be[k++] = e[i];
	while (k) {
		memset(&b.h, 0, sizeof(b.h));
		b.h.nmsrs = k;
		int set = ioctl(c->fd, KVM_SET_MSRS, &b);
		if (set < 0)
			return rung_err_sys(err, errno, "vcpu %u: KVM_SET_MSRS", c->id);
		if ((uint32_t)set >= k)
			break;
		LOG_WARN("vcpu %u: MSR 0x%x not restored", c->id, be[set].index);
		k -= (uint32_t)set + 1;
		memmove(be, be + set + 1, k * sizeof(be[0]));
	}
	return 0;
}

static int vcpu_restore(struct vmm_vcpu *c, const struct vmm_snap_vcpu *s, struct rung_err *err)
{
	struct kvm_sregs sregs = s->sregs;
	struct kvm_lapic_state lapic = s->lapic;
	struct kvm_vcpu_events ev = s->events;
	struct kvm_debugregs dr = s->debugregs;
	struct kvm_xsave xs;
	struct kvm_xcrs xcrs = s->xcrs;
	struct kvm_mp_state mp = s->mp;
	const char *what;
	int r;
	memcpy(xs.region, s->xsave, sizeof(xs.region));
#define SET(req, arg)                         \
	do {                                  \
		what = #req;                  \
		if (ioctl(c->fd, req, arg) < 0) \
			goto fail;            \
	} while (0)
	SET(KVM_SET_MP_STATE, &mp);
	SET(KVM_SET_REGS, &s->regs);
	SET(KVM_SET_SREGS, &sregs); /* restores the APIC base: before the LAPIC */
	SET(KVM_SET_XSAVE, &xs);
	SET(KVM_SET_XCRS, &xcrs);
	dr.flags = 0;
	SET(KVM_SET_DEBUGREGS, &dr);
	SET(KVM_SET_LAPIC, &lapic); /* the timer mode: before the TSC deadline MSR */
	if ((r = set_msrs(c, s->msrs, s->nmsrs, err)) < 0)
		return r;
	ev.flags &= KVM_VCPUEVENT_VALID_NMI_PENDING | KVM_VCPUEVENT_VALID_SIPI_VECTOR |
		    KVM_VCPUEVENT_VALID_SHADOW | KVM_VCPUEVENT_VALID_SMM;
	SET(KVM_SET_VCPU_EVENTS, &ev);
#undef SET
	return 0;
fail:
	return rung_err_sys(err, errno, "vcpu %u: %s", c->id, what);
}

static int vm_save(struct vmm_vm *vm, struct vmm_snap_vm *s, struct rung_err *err)
{
	memset(s, 0, sizeof(*s));
	for (unsigned i = 0; i < 3; i++) {
		s->chip[i].chip_id = i;
		if (ioctl(vm->vm_fd, KVM_GET_IRQCHIP, &s->chip[i]) < 0)
			return rung_err_sys(err, errno, "KVM_GET_IRQCHIP %u", i);
	}
	if (ioctl(vm->vm_fd, KVM_GET_PIT2, &s->pit) < 0)
		return rung_err_sys(err, errno, "KVM_GET_PIT2");
	if (ioctl(vm->vm_fd, KVM_GET_CLOCK, &s->clock) < 0)
		return rung_err_sys(err, errno, "KVM_GET_CLOCK");
	return 0;
}

static int vm_restore(struct vmm_vm *vm, const struct vmm_snap_vm *s, struct rung_err *err)
{
	struct kvm_pit_state2 pit = s->pit;
	struct kvm_clock_data clock = {.clock = s->clock.clock}; /* no flags: plain kvmclock */
	if (ioctl(vm->vm_fd, KVM_SET_PIT2, &pit) < 0)
		return rung_err_sys(err, errno, "KVM_SET_PIT2");
	if (ioctl(vm->vm_fd, KVM_SET_CLOCK, &clock) < 0)
		return rung_err_sys(err, errno, "KVM_SET_CLOCK");
	for (unsigned i = 0; i < 3; i++) {
		struct kvm_irqchip chip = s->chip[i];
		if (chip.chip_id != i)
			return rung_err_set(err, EINVAL, "snapshot: irqchip %u saved as chip %u", i,
					    chip.chip_id);
		if (ioctl(vm->vm_fd, KVM_SET_IRQCHIP, &chip) < 0)
			return rung_err_sys(err, errno, "KVM_SET_IRQCHIP %u", i);
	}
	return 0;
}

static void serial_save(struct vmm_serial *u, struct vmm_snap_serial *s)
{
	pthread_mutex_lock(&u->lock);
	*s = (struct vmm_snap_serial){.ier = u->ier, .lcr = u->lcr, .mcr = u->mcr, .lsr = u->lsr,
				      .msr = u->msr, .scr = u->scr, .dll = u->dll, .dlm = u->dlm,
				      .fcr = u->fcr, .thri_pending = u->thri_pending,
				      .irq_level = (uint8_t)(u->irq_level != 0)};
	pthread_mutex_unlock(&u->lock);
}

static void serial_restore(struct vmm_serial *u, const struct vmm_snap_serial *s)
{
	pthread_mutex_lock(&u->lock);
	u->ier = s->ier & 0x0f;
	u->lcr = s->lcr;
	u->mcr = s->mcr & 0x1f;
	u->lsr = s->lsr;
	u->msr = s->msr;
	u->scr = s->scr;
	u->dll = s->dll;
	u->dlm = s->dlm;
	u->fcr = s->fcr;
	u->thri_pending = s->thri_pending != 0;
	u->irq_level = s->irq_level != 0;
	pthread_mutex_unlock(&u->lock);
}

/* Device state, with the guest-visible identities: the MAC and CID its drivers read. */
static void device_save(struct vmm_vm *vm, unsigned i, struct vmm_snap_virtio *s)
{
	vmm_virtio_save(&vm->virtio[i], s);
	if (vm->net_ok && vm->net.t == &vm->virtio[i])
		memcpy(s->mac, vm->net.mac, 6);
	if (vm->vsock_ok && vm->vsock.t == &vm->virtio[i])
		s->guest_cid = vm->vsock.guest_cid;
}

/* Every piece of state into a layout, then into the file at fd: head, sections, memory. */
static int write_snapshot(struct vmm_vm *vm, int fd, struct rung_err *err)
{
	cleanup_free struct vmm_snap_vcpu *vc = calloc(vm->ncpus, sizeof(*vc));
	cleanup_free struct vmm_snap_layout *l = calloc(1, sizeof(*l));
	struct vmm_snap_vm vs;
	struct vmm_snap_virtio dev[VMM_MAX_VIRTIO_DEVS];
	struct vmm_snap_serial ser;
	uint32_t ids[VMM_MAX_VIRTIO_DEVS] = {0};
	if (!vc || !l)
		return rung_err_set(err, ENOMEM, "snapshot: out of memory");
	int r = 0;
	for (unsigned i = 0; i < vm->ncpus && r == 0; i++)
		r = vcpu_save(vm, &vm->vcpu[i], &vc[i], err);
	if (r < 0 || (r = vm_save(vm, &vs, err)) < 0)
		return r;
	for (unsigned i = 0; i < vm->nvirtio; i++) {
		device_save(vm, i, &dev[i]);
		ids[i] = dev[i].device_id;
	}
	serial_save(&vm->serial, &ser);
	vmm_snap_layout_init(l, vm->mem.total, vm->ncpus, ids, vm->nvirtio);
	for (unsigned i = 0; i < vm->ncpus && r == 0; i++)
		r = vmm_snap_layout_add(l, VMM_SNAP_VCPU, i, &vc[i], sizeof(vc[i]), err);
	for (unsigned i = 0; i < vm->nvirtio && r == 0; i++)
		r = vmm_snap_layout_add(l, VMM_SNAP_VIRTIO, i, &dev[i], sizeof(dev[i]), err);
	if (r < 0 || (r = vmm_snap_layout_add(l, VMM_SNAP_VM, 0, &vs, sizeof(vs), err)) < 0 ||
	    (r = vmm_snap_layout_add(l, VMM_SNAP_SERIAL, 0, &ser, sizeof(ser), err)) < 0)
		return r;
	uint32_t crc = 0;
	for (unsigned i = 0; i < vm->mem.nr; i++)
		crc = vmm_snap_crc32c(crc, vm->mem.r[i].hva, vm->mem.r[i].size);
	uint64_t mem_off = vmm_snap_layout_finish(l, crc);
	cleanup_free uint8_t *head = calloc(1, mem_off);
	if (!head)
		return rung_err_set(err, ENOMEM, "snapshot: out of memory");
	vmm_snap_layout_head(l, head, mem_off);
	const void *src[VMM_SNAP_MAX_SECTIONS];
	unsigned k = 0;
	for (unsigned i = 0; i < vm->ncpus; i++)
		src[k++] = &vc[i];
	for (unsigned i = 0; i < vm->nvirtio; i++)
		src[k++] = &dev[i];
	src[k++] = &vs;
	src[k++] = &ser;
	for (unsigned i = 0; i < k; i++)
		memcpy(head + l->sec[i].offset, src[i], l->sec[i].len);
	if ((r = rung_write_all(fd, head, mem_off)) < 0)
		return rung_err_sys(err, -r, "snapshot: write");
	for (unsigned i = 0; i < vm->mem.nr; i++)
		if ((r = rung_write_all(fd, vm->mem.r[i].hva, vm->mem.r[i].size)) < 0)
			return rung_err_sys(err, -r, "snapshot: write guest memory");
	return 0;
}

/* Temp name beside path, written, fsynced, renamed over path, directory fsynced. */
static int save_to(struct vmm_vm *vm, const char *path, struct rung_err *err)
{
	char tmp[4200], dir[4096];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp-%d", path, getpid()) >= (int)sizeof(tmp))
		return rung_err_set(err, ENAMETOOLONG, "snapshot %s: path too long", path);
	const char *slash = strrchr(path, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return rung_err_sys(err, errno, "snapshot: create %s", tmp);
	uint64_t t0 = rung_now_us();
	int r = write_snapshot(vm, fd, err);
	if (r == 0 && fsync(fd) < 0)
		r = rung_err_sys(err, errno, "snapshot: fsync %s", tmp);
	close(fd);
	if (r == 0 && rename(tmp, path) < 0)
		r = rung_err_sys(err, errno, "snapshot: rename to %s", path);
	if (r < 0) {
		unlink(tmp);
		return rung_err_wrap(err, "snapshot %s", path);
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd) < 0)
			LOG_WARN("snapshot: fsync %s: %s", dir, strerror(errno));
		close(dfd);
	}
	LOG_INFO("snapshot %s: %llu MiB in %llu ms", path,
		 (unsigned long long)(vm->mem.total >> 20),
		 (unsigned long long)((rung_now_us() - t0) / 1000));
	return 0;
}

static void *snap_thread(void *arg)
{
	struct vmm_vm *vm = arg;
	struct rung_err err = {0};
	bool ok = !vm->snap_bpf || vmm_seccomp_install(vm->snap_bpf, vm->snap_bpf_len, &err) == 0;
	if (!ok)
		vmm_vm_end(vm, VMM_EXIT_ERROR, "snapshot thread: seccomp: %s", err.msg);
	pthread_mutex_lock(&vm->run_lock);
	for (;;) {
		while (!vm->snap_path && !vm->snap_quit)
			pthread_cond_wait(&vm->run_cond, &vm->run_lock);
		if (!vm->snap_path)
			break;
		const char *path = vm->snap_path;
		pthread_mutex_unlock(&vm->run_lock);
		err = (struct rung_err){0};
		int r = ok ? save_to(vm, path, &err) : rung_err_set(&err, EPERM, "no seccomp filter");
		pthread_mutex_lock(&vm->run_lock);
		vm->snap_result = r;
		snprintf(vm->snap_msg, sizeof(vm->snap_msg), "%s", err.msg);
		vm->snap_path = NULL;
		vm->snap_busy = false;
		pthread_cond_broadcast(&vm->run_cond);
	}
	pthread_mutex_unlock(&vm->run_lock);
	return NULL;
}

int vmm_snap_thread_start(struct vmm_vm *vm, struct rung_err *err)
{
	int r = msr_list_get(vm, err);
	if (r < 0)
		return r;
	if ((r = pthread_create(&vm->snap_tid, NULL, snap_thread, vm)))
		return rung_err_sys(err, r, "snapshot thread: pthread_create");
	vm->snap_started = true;
	return 0;
}

void vmm_snap_thread_stop(struct vmm_vm *vm)
{
	if (!vm->snap_started)
		return;
	pthread_mutex_lock(&vm->run_lock);
	vm->snap_quit = true;
	pthread_cond_broadcast(&vm->run_cond);
	pthread_mutex_unlock(&vm->run_lock);
	pthread_join(vm->snap_tid, NULL);
	vm->snap_started = false;
}

int vmm_snap_save(struct vmm_vm *vm, const char *path, struct rung_err *err)
{
	if (!vm->snap_started)
		return rung_err_set(err, ENOTSUP, "snapshot: no save thread");
	pthread_mutex_lock(&vm->run_lock);
	vm->snap_path = path;
	vm->snap_busy = true;
	pthread_cond_broadcast(&vm->run_cond);
	while (vm->snap_busy)
		pthread_cond_wait(&vm->run_cond, &vm->run_lock);
	int r = vm->snap_result;
	if (r < 0)
		rung_err_set(err, -r, "%s", vm->snap_msg);
	pthread_mutex_unlock(&vm->run_lock);
	return r;
}

int vmm_snap_open(struct vmm_vm *vm, uint8_t **state, struct rung_err *err)
{
	const char *path = vm->cfg.restore;
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return rung_err_sys(err, errno, "--restore %s", path);
	if (!S_ISREG(st.st_mode))
		return rung_err_set(err, EINVAL, "--restore %s: not a regular file", path);
	/* the header first, then only the state part it names (a few pages, not 4 MiB) */
	struct vmm_snap_header h;
	ssize_t n = pread(fd, &h, sizeof(h), 0);
	if (n < 0)
		return rung_err_sys(err, errno, "--restore %s: read", path);
	size_t want = vmm_snap_state_len(&h, (size_t)n, (uint64_t)st.st_size);
	cleanup_free uint8_t *buf = malloc(want ? want : 1);
	if (!buf)
		return rung_err_set(err, ENOMEM, "--restore: out of memory");
	if ((n = pread(fd, buf, want, 0)) < 0)
		return rung_err_sys(err, errno, "--restore %s: read", path);
	struct vmm_snap_info info;
	int r = vmm_snap_parse(buf, (size_t)n, (uint64_t)st.st_size, &info, err);
	if (r < 0 || (r = vmm_snap_check_shape(&info, &vm->cfg, err)) < 0)
		return rung_err_wrap(err, "--restore %s", path);
	vm->cfg.mem_mib = info.hdr.mem_bytes >> 20;
	vm->cfg.cpus = vm->ncpus = info.hdr.ncpus;
	vm->mem_file_off = info.hdr.mem_offset;
	vm->verify_crc = info.hdr.mem_crc;
	vm->mem_fd = rung_steal_fd(&fd);
	*state = rung_steal_ptr(&buf);
	vm->t_restore[VMM_RT_CHECKED] = rung_now_us();
	return 0;
}

/* The devices' guest-visible identities and registers, the serial port. */
static int devices_restore(struct vmm_vm *vm, const struct vmm_snap_info *info,
			   struct rung_err *err)
{
	for (unsigned i = 0; i < vm->nvirtio; i++) {
		const struct vmm_snap_virtio *s = info->virtio[i];
		int r = vmm_virtio_restore(&vm->virtio[i], s, err);
		if (r < 0)
			return r;
		if (vm->net_ok && vm->net.t == &vm->virtio[i] && !vm->cfg.net_mac_set)
			memcpy(vm->net.mac, s->mac, 6);
		if (vm->vsock_ok && vm->vsock.t == &vm->virtio[i]) {
			if (s->guest_cid < 3 || s->guest_cid > 0xfffffffeu)
				return rung_err_set(err, EINVAL, "snapshot: guest CID %llu",
						    (unsigned long long)s->guest_cid);
			vm->vsock.guest_cid = s->guest_cid;
			vm->vsock_reset_due = vmm_virtio_running(&vm->virtio[i]);
		}
	}
	serial_restore(&vm->serial, info->serial);
	return 0;
}

int vmm_snap_apply(struct vmm_vm *vm, const uint8_t *state, struct rung_err *err)
{
	struct vmm_snap_info info;
	struct stat st;
	vm->t_restore[VMM_RT_BUILT] = rung_now_us();
	if (fstat(vm->mem_fd, &st) < 0)
		return rung_err_sys(err, errno, "--restore: fstat");
	/* the file was parsed from these bytes already; parse again for the pointers */
	int r = vmm_snap_parse(state, (size_t)vm->mem_file_off, (uint64_t)st.st_size, &info, err);
	if (r < 0)
		return rung_err_wrap(err, "--restore %s", vm->cfg.restore);
	/* Guest memory is checked by verify_thread while the guest runs (docs/snapshots.md,
	 * "Guest memory is checked in the background"): from a read-only view of the file,
	 * never from the guest's own mapping, whose pages the guest changes. */
	void *view = mmap(NULL, info.hdr.mem_len, PROT_READ, MAP_SHARED, vm->mem_fd,
			  (off_t)vm->mem_file_off);
	if (view == MAP_FAILED)
		return rung_err_sys(err, errno, "--restore: mmap the memory image to check it");
	vm->verify_map = view;
	vm->verify_len = info.hdr.mem_len;
	if ((r = vm_restore(vm, info.vm, err)) < 0)
		return rung_err_wrap(err, "--restore");
	for (unsigned i = 0; i < vm->ncpus; i++)
		if ((r = vcpu_restore(&vm->vcpu[i], info.vcpu[i], err)) < 0)
			return rung_err_wrap(err, "--restore");
	r = devices_restore(vm, &info, err);
	vm->t_restore[VMM_RT_STATE] = rung_now_us();
	return r;
}

/*
 * The memory image's CRC-32C, read from the file while the guest runs, at SCHED_IDLE (it
 * gets the CPU only when the vCPUs and the event loop leave it idle). A mismatch ends the VM
 * with an error naming the file. Its filter is the smallest of all: computing, logging,
 * ending the VM, unmapping (VMM_THREAD_VERIFY).
 */
static void *verify_thread(void *arg)
{
	struct vmm_vm *vm = arg;
	struct rung_err err = {0};
	struct sched_param sp = {0};
	int e = pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	if (e)
		LOG_WARN("restore: memory check at normal priority: %s", strerror(e));
	if (vm->verify_bpf && vmm_seccomp_install(vm->verify_bpf, vm->verify_bpf_len, &err) < 0) {
		vmm_vm_end(vm, VMM_EXIT_ERROR, "memory check thread: seccomp: %s", err.msg);
		return NULL;
	}
	uint64_t t0 = rung_now_us();
	int r = vmm_snap_mem_check(vm->verify_map, vm->verify_len, vm->verify_crc,
				   &vm->verify_quit);
	if (r == -EBADMSG)
		vmm_vm_end(vm, VMM_EXIT_ERROR, "--restore %s: guest memory checksum mismatch (the "
			   "snapshot is damaged); the restored VM is stopped", vm->cfg.restore);
	else if (r == 0)
		LOG_INFO("restore: guest memory verified in %llu ms (in the background, %llu ms "
			 "after the start)", (unsigned long long)((rung_now_us() - t0) / 1000),
			 (unsigned long long)((rung_now_us() - vm->t_create_us) / 1000));
	munmap((void *)vm->verify_map, vm->verify_len);
	return NULL;
}

int vmm_snap_verify_start(struct vmm_vm *vm, struct rung_err *err)
{
	if (!vm->verify_map)
		return 0;
	int r = pthread_create(&vm->verify_tid, NULL, verify_thread, vm);
	if (r == 0) {
		vm->verify_started = true;
		return 0;
	}
	/* no thread: check it now, before the guest runs, rather than not at all */
	LOG_WARN("restore: memory check thread: %s; checking before the guest runs", strerror(r));
	r = vmm_snap_mem_check(vm->verify_map, vm->verify_len, vm->verify_crc, NULL);
	munmap((void *)vm->verify_map, vm->verify_len);
	vm->verify_map = NULL;
	if (r < 0)
		return rung_err_set(err, EBADMSG, "--restore %s: guest memory checksum mismatch",
				    vm->cfg.restore);
	return 0;
}

void vmm_snap_verify_stop(struct vmm_vm *vm)
{
	if (vm->verify_started) {
		__atomic_store_n(&vm->verify_quit, true, __ATOMIC_RELEASE);
		pthread_join(vm->verify_tid, NULL); /* it unmaps its view */
		vm->verify_started = false;
	} else if (vm->verify_map) {
		munmap((void *)vm->verify_map, vm->verify_len);
	}
	vm->verify_map = NULL;
}

static double ms_at(const struct vmm_vm *vm, uint64_t t)
{
	return t ? (double)(t - vm->t_create_us) / 1000.0 : -1.0;
}

void vmm_snap_timeline(struct vmm_vm *vm, enum vmm_restore_mark mark)
{
	if (!vm->cfg.restore || vm->t_restore[mark])
		return;
	vm->t_restore[mark] = rung_now_us();
	if (mark != VMM_RT_ANSWER)
		return;
	const uint64_t *t = vm->t_restore;
	LOG_INFO("restore timeline (ms since start): file checked %.1f, VM built %.1f, state set "
		 "%.1f, vCPU 0 running %.1f, vsock reset posted %.1f, handled %.1f, first host "
		 "connection %.1f, guest accepted %.1f, first answer %.1f",
		 ms_at(vm, t[VMM_RT_CHECKED]), ms_at(vm, t[VMM_RT_BUILT]),
		 ms_at(vm, t[VMM_RT_STATE]), ms_at(vm, __atomic_load_n(&vm->t_first_run_us,
								       __ATOMIC_ACQUIRE)),
		 ms_at(vm, t[VMM_RT_RESET_POSTED]), ms_at(vm, t[VMM_RT_RESET_DONE]),
		 ms_at(vm, t[VMM_RT_CONNECT]), ms_at(vm, vm->vsock.t_first_response_us),
		 ms_at(vm, vm->vsock.t_first_rw_us));
}
