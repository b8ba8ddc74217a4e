/*
 * vmm/vmm.h: rung-vmm, a minimal KVM VMM (the one public header of vmm/).
 *
 * The runtime only execs the rung-vmm binary; this header serves the program's own files
 * and the unit tests. Everything that can be plain data + a pure function is one (guest
 * memory layout, bzImage parsing, boot_params/e820/page tables, MP table, kernel command
 * line, virtqueue walking, virtio-mmio register semantics, virtio-blk and virtio-vsock
 * packet handling), tested against a fake guest-memory buffer without /dev/kvm.
 */
#ifndef RUNG_VMM_H
#define RUNG_VMM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/err.h"

/* ---- limits and the fixed guest-physical layout ------------------------------------------ */
#define VMM_MAX_CPUS 4
#define VMM_MAX_DISKS 6
#define VMM_MAX_VIRTIO_DEVS 8
#define VMM_MIN_MEM_MIB 32
#define VMM_MAX_MEM_MIB (64 * 1024)

#define VMM_GAP_START 0xC0000000ull /* RAM stops here; [3G, 4G) holds MMIO, LAPIC, IOAPIC */
#define VMM_GAP_END 0x100000000ull
#define VMM_VIRTIO_MMIO_BASE 0xD0000000ull
#define VMM_VIRTIO_MMIO_SIZE 0x1000ull

#define VMM_BOOT_GDT 0x500ull
#define VMM_BOOT_IDT 0x540ull
#define VMM_BOOT_PARAMS 0x7000ull
#define VMM_BOOT_STACK 0x8ff0ull
#define VMM_BOOT_PML4 0x9000ull /* PDPT at +0x1000, 4 PDs at +0x2000..+0x5fff */
#define VMM_BOOT_CMDLINE 0x20000ull
#define VMM_CMDLINE_MAX 4096
#define VMM_EBDA_START 0x9fc00ull /* the MP table lives here, reserved in e820 */
#define VMM_KERNEL_LOAD 0x100000ull
#define VMM_SERIAL_IRQ 4

/* ---- guest memory ------------------------------------------------------------------------ */
#define VMM_MEM_MAX_REGIONS 2
struct vmm_mem_region {
	uint64_t gpa, size;
	uint8_t *hva;
};
struct vmm_mem {
	struct vmm_mem_region r[VMM_MEM_MAX_REGIONS];
	unsigned nr;
	uint64_t total;
};
/* Pure: the RAM regions of a guest of mem bytes (below the 32-bit gap, then from 4 GiB). */
int vmm_mem_plan(uint64_t mem, struct vmm_mem *m, struct rung_err *err);
/* Host pointer for [gpa, gpa+len) when it lies inside one region, else NULL. */
void *vmm_mem_ptr(const struct vmm_mem *m, uint64_t gpa, uint64_t len);

/* ---- boot (x86-64 Linux boot protocol) --------------------------------------------------- */
struct vmm_bzimage {
	uint16_t version;
	uint8_t loadflags;
	uint16_t xloadflags;
	uint64_t setup_len;   /* bytes before the protected-mode kernel */
	uint64_t kernel_len;  /* bytes of the protected-mode kernel */
	uint32_t init_size;   /* memory the kernel needs from its load address */
	uint32_t initrd_addr_max;
	uint32_t cmdline_size;
	uint32_t hdr_end;     /* end offset of the setup header in the image */
};
/* Pure: validate a bzImage (boot flag, "HdrS", protocol >= 2.12, 64-bit entry, sizes). */
int vmm_bzimage_parse(const uint8_t *img, size_t len, struct vmm_bzimage *bz, struct rung_err *err);

#define VMM_E820_MAX 8
#define VMM_E820_RAM 1
#define VMM_E820_RESERVED 2
struct vmm_e820 {
	uint64_t addr, size;
	uint32_t type;
};
/* Pure: the e820 map for m. Returns the number of entries. */
int vmm_e820_build(const struct vmm_mem *m, struct vmm_e820 *out, unsigned max, struct rung_err *err);
/* Writes identity-mapping page tables (first 4 GiB, 2 MiB pages) at VMM_BOOT_PML4. */
int vmm_pagetables_build(const struct vmm_mem *m, struct rung_err *err);
/* Writes the boot GDT (null, null, code 0x10, data 0x18, tss 0x20) at VMM_BOOT_GDT. */
int vmm_gdt_build(const struct vmm_mem *m, struct rung_err *err);
uint64_t vmm_gdt_entry(uint16_t flags, uint32_t base, uint32_t limit);

struct vmm_boot_plan {
	uint64_t kernel_gpa, kernel_len, initrd_gpa, initrd_len, entry, boot_params;
};
/* Loads kernel, initrd, command line, boot_params, GDT and page tables into guest memory. */
int vmm_boot_load(const struct vmm_mem *m, const uint8_t *img, size_t img_len, const uint8_t *initrd,
		  size_t initrd_len, const char *cmdline, struct vmm_boot_plan *plan,
		  struct rung_err *err);

/* ---- MP table ---------------------------------------------------------------------------- */
size_t vmm_mptable_size(unsigned ncpus);
/* Pure: writes the MP floating pointer + config table for ncpus (1..4) into buf, which will
 * sit at guest-physical base. Returns the size written. */
int vmm_mptable_build(uint8_t *buf, size_t len, uint64_t base, unsigned ncpus, struct rung_err *err);

/* ---- kernel command line and MMIO layout ------------------------------------------------- */
struct vmm_mmio_slot {
	uint64_t base, size;
	unsigned irq;
};
/* Pure: slot i of the virtio-mmio window (base, 4 KiB, an IRQ that is not the UART's). */
int vmm_mmio_slot(unsigned i, struct vmm_mmio_slot *slot, struct rung_err *err);
/* Pure: "console=ttyS0 reboot=k panic=-1 pci=off ... virtio_mmio.device=4K@0x...:5 ... EXTRA". */
int vmm_cmdline_build(char *buf, size_t cap, const struct vmm_mmio_slot *slots, unsigned n,
		      const char *extra, struct rung_err *err);

/* ---- command line of the program --------------------------------------------------------- */
struct vmm_disk_cfg {
	char path[4096];
	bool ro;
};
struct vmm_config {
	const char *kernel, *initrd, *cmdline_extra, *serial_log, *vsock_uds, *control;
	const char *restore; /* --restore FILE: the VM comes from a snapshot, not a boot */
	struct vmm_disk_cfg disks[VMM_MAX_DISKS];
	unsigned ndisks, cpus;
	uint64_t mem_mib, serial_cap;
	uint32_t vsock_port;
	uint64_t guest_cid;
	int vsock_fd, kvm_fd; /* -1 unless handed in (--vsock-fd, --kvm-fd) */
	int net_fd;           /* --net-fd: an open tap, -1 if none */
	const char *net_tap;  /* --net-tap: an existing tap to attach to */
	uint8_t net_mac[6];   /* --net-mac, valid when net_mac_set */
	bool net_mac_set;
	bool no_seccomp, help, serial_timestamps, probe;
};
/* Pure: parse argv (argv[0] is the program). help set: print usage, nothing else checked. */
int vmm_args_parse(int argc, char *const *argv, struct vmm_config *cfg, struct rung_err *err);
extern const char vmm_usage[];

/* ---- split virtqueue --------------------------------------------------------------------- */
#define VMM_VQ_MAX_SIZE 256
#define VMM_CHAIN_MAX_BYTES (64u << 20) /* a chain describing more is rejected */
struct vmm_vq {
	uint16_t size;
	bool ready;
	uint64_t desc, avail, used;
	uint16_t last_avail, used_idx;
};
struct vmm_chain_seg {
	uint8_t *hva;
	uint32_t len;
	bool write;
};
struct vmm_chain {
	uint16_t head;
	unsigned n;
	uint64_t rlen, wlen; /* readable (driver->device) and writable bytes */
	struct vmm_chain_seg seg[VMM_VQ_MAX_SIZE];
};
/* 1: a chain popped; 0: ring empty; <0: the guest broke the ring (err says how). */
int vmm_vq_pop(struct vmm_vq *vq, const struct vmm_mem *m, struct vmm_chain *c, struct rung_err *err);
/* Give back the last popped chain (not yet pushed) so the next pop returns it again. */
void vmm_vq_unpop(struct vmm_vq *vq);
int vmm_vq_push(struct vmm_vq *vq, const struct vmm_mem *m, uint16_t head, uint32_t len,
		struct rung_err *err);
/* The driver did not ask to be spared an interrupt (VRING_AVAIL_F_NO_INTERRUPT clear). */
bool vmm_vq_want_irq(const struct vmm_vq *vq, const struct vmm_mem *m);
/* Copy from the readable part / to the writable part, at a byte offset. Return bytes copied. */
size_t vmm_chain_read(const struct vmm_chain *c, size_t off, void *buf, size_t len);
size_t vmm_chain_write(const struct vmm_chain *c, size_t off, const void *buf, size_t len);
/* iovecs for [off, off+len) of the readable (write=false) or writable part; returns count. */
unsigned vmm_chain_iov(const struct vmm_chain *c, bool write, size_t off, size_t len,
		       struct iovec *iov, unsigned max);

/* ---- virtio-mmio transport --------------------------------------------------------------- */
#define VMM_VIRTIO_MAX_QUEUES 4
struct vmm_virtio;
typedef void (*vmm_irq_fn)(void *ctx, unsigned irq, int level);

struct vmm_virtio_dev_ops {
	const char *name;
	uint32_t device_id;
	unsigned num_queues;
	uint64_t (*features)(void *dev);
	/* Device config space (offset from 0x100); bytes past the end read as 0. */
	void (*config_read)(void *dev, uint64_t off, void *data, unsigned len);
	/* Called with the transport lock held, from a vCPU thread. */
	void (*queue_notify)(struct vmm_virtio *t, unsigned q);
	void (*reset)(void *dev);
};

struct vmm_virtio {
	const struct vmm_virtio_dev_ops *ops;
	void *dev;
	const struct vmm_mem *mem;
	struct vmm_mmio_slot slot;
	vmm_irq_fn irq_fn;
	void *irq_ctx;
	pthread_mutex_t lock;
	uint32_t status, dev_feat_sel, drv_feat_sel, queue_sel, isr, config_gen;
	uint64_t drv_features;
	struct vmm_vq vq[VMM_VIRTIO_MAX_QUEUES];
};
#define VMM_VIRTIO_MMIO_VERSION 2
#define VMM_VIRTIO_VENDOR 0x676e7572 /* "rung" */

int vmm_virtio_init(struct vmm_virtio *t, const struct vmm_virtio_dev_ops *ops, void *dev,
		    const struct vmm_mem *mem, const struct vmm_mmio_slot *slot, vmm_irq_fn irq_fn,
		    void *irq_ctx, struct rung_err *err) __attribute__((warn_unused_result));
void vmm_virtio_destroy(struct vmm_virtio *t);
/* Register access at offset from the device's base (takes the lock). */
void vmm_virtio_read(struct vmm_virtio *t, uint64_t off, void *data, unsigned len);
void vmm_virtio_write(struct vmm_virtio *t, uint64_t off, const void *data, unsigned len);
/* For devices, lock held: queue q if the driver is running and the queue is ready, else NULL. */
struct vmm_vq *vmm_virtio_queue(struct vmm_virtio *t, unsigned q);
/* For devices, lock held: raise the used-buffer interrupt (if the driver wants one). */
void vmm_virtio_signal_used(struct vmm_virtio *t, unsigned q);
/*
 * For devices, lock held: pop the chains the driver made available on queue q (at most max;
 * 0: all), give each to handle, which returns the bytes it wrote for the guest, and push it
 * back used with that length; one interrupt at the end. A broken ring fails the device.
 */
void vmm_virtio_drain(struct vmm_virtio *t, unsigned q, unsigned max,
		      uint32_t (*handle)(void *ctx, const struct vmm_chain *c), void *ctx);
/* For devices, lock held: the guest broke the device's rules; stop it until reset. */
void vmm_virtio_fail(struct vmm_virtio *t, const char *why);
bool vmm_virtio_running(const struct vmm_virtio *t);

/* Snapshots: the transport's registers and queue indices (struct in snapshot-file.h). */
struct vmm_snap_virtio;
void vmm_virtio_save(struct vmm_virtio *t, struct vmm_snap_virtio *s);
int vmm_virtio_restore(struct vmm_virtio *t, const struct vmm_snap_virtio *s, struct rung_err *err);

/* The MMIO bus: explicit registration, dispatch by address. */
struct vmm_bus {
	struct vmm_virtio *dev[VMM_MAX_VIRTIO_DEVS];
	unsigned n;
};
int vmm_bus_add(struct vmm_bus *bus, struct vmm_virtio *t, struct rung_err *err)
	__attribute__((warn_unused_result));
/* Returns false when no device covers gpa (reads are then all-ones). */
bool vmm_bus_access(struct vmm_bus *bus, uint64_t gpa, void *data, unsigned len, bool write);

/* ---- virtio-blk -------------------------------------------------------------------------- */
struct vmm_blk {
	int fd;
	bool ro;
	uint64_t sectors;
	char serial[20];
};
extern const struct vmm_virtio_dev_ops vmm_blk_ops;
int vmm_blk_open(struct vmm_blk *b, const char *path, bool ro, struct rung_err *err);
void vmm_blk_close(struct vmm_blk *b);
/* Pure-ish (file I/O only): one request chain; returns bytes written to the guest. */
uint32_t vmm_blk_handle(struct vmm_blk *b, const struct vmm_chain *c);

/* ---- virtio-vsock (host side bridged to a Unix socket) ----------------------------------- */
#define VMM_VSOCK_HOST_CID 2
#define VMM_VSOCK_MAX_CONNS 64
#define VMM_VSOCK_BUF (256u * 1024) /* our buf_alloc per connection */
#define VMM_VSOCK_MAX_PKT (64u * 1024)
#define VMM_VSOCK_RST_RING 16

enum vmm_vsock_state { VS_FREE, VS_CONNECTING, VS_ESTABLISHED };
struct vmm_vsock_conn {
	enum vmm_vsock_state state;
	int fd;
	uint32_t local_port;
	uint32_t peer_buf_alloc, peer_fwd_cnt, tx_cnt; /* host->guest credit */
	uint32_t fwd_cnt, fwd_sent;                    /* guest->host bytes delivered */
	uint8_t *buf;                                  /* guest->host bytes the host fd has not taken */
	uint32_t buf_len;
	bool host_eof, hup, peer_shut_send, peer_shut_rcv, shut_wr_done;
	bool want_request, want_credit, want_shutdown, want_rst;
};
struct vmm_vsock_rst {
	uint32_t src_port, dst_port;
};
struct vmm_vsock {
	uint64_t guest_cid;
	uint32_t guest_port, next_port;
	int kick_fd;            /* eventfd: a vCPU saw a queue notify */
	struct vmm_virtio *t;   /* set by the caller after vmm_virtio_init */
	bool reset_pending, rx_starved;
	unsigned rr;            /* round-robin start for RX fairness */
	struct vmm_vsock_conn conns[VMM_VSOCK_MAX_CONNS];
	struct vmm_vsock_rst rst[VMM_VSOCK_RST_RING];
	unsigned nrst;
	uint64_t dropped;       /* malformed guest packets dropped */
	uint16_t reset_avail;   /* the event ring's avail index when a reset was posted */
	uint64_t t_first_response_us, t_first_rw_us; /* the guest's first accept, first data */
};
extern const struct vmm_virtio_dev_ops vmm_vsock_ops;
int vmm_vsock_init(struct vmm_vsock *vs, uint64_t guest_cid, uint32_t guest_port, struct rung_err *err);
void vmm_vsock_destroy(struct vmm_vsock *vs);
/* Bridge a new host connection (fd, non-blocking; ownership taken) to the guest port. */
int vmm_vsock_host_connect(struct vmm_vsock *vs, int fd, struct rung_err *err);
/* One pass: guest TX, host writes, guest RX. Takes the transport lock. */
void vmm_vsock_process(struct vmm_vsock *vs);
/* The host end of connection i hung up or failed (poll said so): stop polling it. */
void vmm_vsock_host_hup(struct vmm_vsock *vs, unsigned i);
/* After a restore (lock held): post VIRTIO_VSOCK_EVENT_TRANSPORT_RESET, so the guest drops
 * the connections the old process had and re-reads its CID. 1: posted, 0: no event buffer. */
int vmm_vsock_post_reset(struct vmm_vsock *vs);
/* Lock held: the guest gave the event buffer back (it handled the reset). */
bool vmm_vsock_reset_handled(const struct vmm_vsock *vs);
/* poll() interest for connection i: -1 when its fd is not to be polled at all, else an
 * event mask (0: only hang-ups, which poll always reports). */
int vmm_vsock_poll_events(const struct vmm_vsock *vs, unsigned i);

/* ---- virtio-net (one tap fd: plain Ethernet frames, IFF_TAP | IFF_NO_PI) ---------------- */
#define VMM_NET_HDR_LEN 12     /* struct virtio_net_hdr_v1 (VERSION_1, no offloads) */
#define VMM_NET_MIN_FRAME 14
#define VMM_NET_MAX_FRAME 1518 /* 1514 + a VLAN tag */
#define VMM_NET_RX_BUDGET 64   /* frames per RX pass: the loop must serve vsock and control too */
struct vmm_net_stats {
	uint64_t tx_frames, tx_malformed, tx_dropped; /* dropped: the tap did not take it */
	uint64_t rx_frames, rx_dropped, rx_bad_chain; /* dropped: the frame did not fit the chain */
};
struct vmm_net {
	int tap_fd;            /* owned */
	int kick_fd;           /* eventfd: the guest posted RX buffers (or reset) */
	uint8_t mac[6];
	struct vmm_virtio *t;  /* set by the caller after vmm_virtio_init */
	bool rx_starved, reset_pending, tap_dead;
	struct vmm_net_stats st;
};
enum vmm_net_tx { VMM_NET_TX_SENT, VMM_NET_TX_MALFORMED, VMM_NET_TX_DROPPED };
enum vmm_net_rx {
	VMM_NET_RX_NONE,      /* no frame waiting (or the tap is gone): give the chain back unused */
	VMM_NET_RX_DELIVERED, /* *used_len = 12 + frame */
	VMM_NET_RX_DROPPED,   /* a frame too big for the chain was read and dropped */
	VMM_NET_RX_BAD_CHAIN, /* the chain can never hold a frame: push it back with len 0 */
};
extern const struct vmm_virtio_dev_ops vmm_net_ops;
/* Takes ownership of tap_fd (non-blocking). */
int vmm_net_init(struct vmm_net *n, int tap_fd, const uint8_t mac[6], struct rung_err *err);
void vmm_net_destroy(struct vmm_net *n);
/* Opens /dev/net/tun and attaches to the EXISTING tap name (IFF_TAP | IFF_NO_PI). */
int vmm_net_tap_open(const char *name, struct rung_err *err);
/* Pure: "XX:XX:XX:XX:XX:XX" -> mac; multicast and all-zero are refused (naming --net-mac). */
int vmm_net_mac_parse(const char *s, uint8_t mac[6], struct rung_err *err);
/* Pure: a unicast, locally administered address derived from seed (pid, time). */
void vmm_net_mac_default(uint64_t seed, uint8_t mac[6]);
/* One TX chain -> one frame written to the tap (counted in st). Lock held. */
enum vmm_net_tx vmm_net_tx_chain(struct vmm_net *n, const struct vmm_chain *c);
/* One RX chain <- at most one frame read from the tap (counted in st). Lock held. */
enum vmm_net_rx vmm_net_rx_chain(struct vmm_net *n, const struct vmm_chain *c, uint32_t *used_len);
/* One RX pass (up to VMM_NET_RX_BUDGET frames); takes the transport lock. */
void vmm_net_process(struct vmm_net *n);
/* Lock held: the fd to poll for POLLIN (the guest has RX buffers, the tap works), else -1. */
int vmm_net_poll_fd(const struct vmm_net *n);
/* poll() reported an error/hang-up on the tap: stop polling it. Takes the lock. */
void vmm_net_tap_hup(struct vmm_net *n);

/* ---- 16550 UART -------------------------------------------------------------------------- */
#define VMM_SERIAL_BASE 0x3f8
struct vmm_serial {
	pthread_mutex_t lock;
	int fd;                 /* log file, O_APPEND */
	uint64_t cap, written;  /* the log is truncated when it reaches cap */
	uint64_t t0_us;
	bool timestamps, at_line_start;
	uint8_t ier, lcr, mcr, lsr, msr, scr, dll, dlm, fcr;
	bool thri_pending;
	int irq_level;
	vmm_irq_fn irq_fn;
	void *irq_ctx;
	uint8_t out[4096];
	size_t out_len;
};
int vmm_serial_init(struct vmm_serial *s, const char *log_path, uint64_t cap, bool timestamps,
		    vmm_irq_fn irq_fn, void *irq_ctx, struct rung_err *err);
void vmm_serial_destroy(struct vmm_serial *s);
uint8_t vmm_serial_in(struct vmm_serial *s, unsigned off);
void vmm_serial_out(struct vmm_serial *s, unsigned off, uint8_t v);
void vmm_serial_flush(struct vmm_serial *s);

/* ---- control socket ---------------------------------------------------------------------- */
enum vmm_ctl_cmd {
	VMM_CTL_BAD,
	VMM_CTL_PAUSE,
	VMM_CTL_RESUME,
	VMM_CTL_STOP,
	VMM_CTL_STATUS,
	VMM_CTL_SNAPSHOT, /* "snapshot PATH": *arg is PATH (not NUL-terminated, *arg_len bytes) */
};
/* Pure: one line (without its newline) -> command (and its argument, where it takes one). */
enum vmm_ctl_cmd vmm_control_parse(const char *line, size_t len, const char **arg,
				   size_t *arg_len);

/* ---- seccomp (per thread) ---------------------------------------------------------------- */
/* VERIFY: a restore's background memory check (nothing beyond the common calls). */
enum vmm_thread_kind { VMM_THREAD_VMM, VMM_THREAD_VCPU, VMM_THREAD_SNAP, VMM_THREAD_VERIFY };
/* Builds the allow-list for kind and exports it as BPF into *prog (malloc'd, *len insns). */
int vmm_seccomp_build(enum vmm_thread_kind kind, void **prog, size_t *len, struct rung_err *err);
/* Installs a BPF program on the calling thread only (no TSYNC); sets no_new_privs. */
int vmm_seccomp_install(const void *prog, size_t len, struct rung_err *err);

/* ---- the VM (kvm.c, vcpu.c, vm.c) -------------------------------------------------------- */
enum vmm_exit {
	VMM_EXIT_NONE,
	VMM_EXIT_REBOOT,   /* guest reboot/poweroff (i8042 reset, port 0xcf9) */
	VMM_EXIT_SHUTDOWN, /* KVM_EXIT_SHUTDOWN: triple fault */
	VMM_EXIT_STOPPED,  /* the control socket said stop */
	VMM_EXIT_ERROR,    /* internal error */
};
const char *vmm_exit_name(enum vmm_exit e);
int vmm_exit_status(enum vmm_exit e);

struct vmm_vm;
/* Can this host's KVM run our guests? 0, or why not (see probe.c). */
int vmm_probe(const struct vmm_config *cfg, struct rung_err *err);
struct vmm_vm *vmm_vm_create(const struct vmm_config *cfg, struct rung_err *err);
/* Runs until the guest or the control socket ends the VM. Returns the exit reason. */
enum vmm_exit vmm_vm_run(struct vmm_vm *vm, struct rung_err *err);
void vmm_vm_destroy(struct vmm_vm *vm);

#endif
