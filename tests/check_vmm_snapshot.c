/*
 * tests/check_vmm_snapshot.c: rung-vmm's snapshot file format (vmm/snapshot-file.c) without
 * KVM: a file built by the writer's own layout code parses back; corrupt, truncated,
 * wrong-version, wrong-build and wrong-shape files are each refused with the error that names
 * what is wrong; random damage to the state bytes never gets past the checks unnoticed.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/testutil.h"
#include "vmm/snapshot-file.h"

#define MEM (64ull << 20)

struct snapfile {
	uint8_t *buf; /* the state bytes: header, table, sections (mem_offset bytes) */
	uint64_t len, file_len;
};

static void snap_build(struct snapfile *f, unsigned ncpus, const uint32_t *ids, unsigned ndevs)
{
	struct vmm_snap_layout *l = calloc(1, sizeof(*l));
	struct vmm_snap_vcpu *vc = calloc(ncpus, sizeof(*vc));
	struct vmm_snap_virtio dev[VMM_MAX_VIRTIO_DEVS];
	struct vmm_snap_vm vm;
	struct vmm_snap_serial ser;
	struct rung_err err = {0};
	ck_assert(l && vc);
	memset(dev, 0, sizeof(dev));
	memset(&vm, 0, sizeof(vm));
	memset(&ser, 0, sizeof(ser));
	vmm_snap_layout_init(l, MEM, ncpus, ids, ndevs);
	for (unsigned i = 0; i < ncpus; i++) {
		vc[i].regs.rip = 0x1000 + i;
		vc[i].nmsrs = 3;
		ck_assert_int_eq(vmm_snap_layout_add(l, VMM_SNAP_VCPU, i, &vc[i], sizeof(vc[i]), &err), 0);
	}
	for (unsigned i = 0; i < ndevs; i++) {
		dev[i].device_id = ids[i];
		dev[i].vq[0] = (struct vmm_snap_vq){.size = 256, .ready = 1, .desc = 0x10000};
		ck_assert_int_eq(vmm_snap_layout_add(l, VMM_SNAP_VIRTIO, i, &dev[i], sizeof(dev[i]), &err), 0);
	}
	vm.chip[2].chip_id = 2;
	ser.lcr = 3;
	ck_assert_int_eq(vmm_snap_layout_add(l, VMM_SNAP_VM, 0, &vm, sizeof(vm), &err), 0);
	ck_assert_int_eq(vmm_snap_layout_add(l, VMM_SNAP_SERIAL, 0, &ser, sizeof(ser), &err), 0);
	f->len = vmm_snap_layout_finish(l, 0x1234);
	ck_assert_uint_eq(f->len % VMM_SNAP_PAGE, 0);
	f->file_len = f->len + MEM;
	f->buf = calloc(1, f->len);
	ck_assert_uint_gt(vmm_snap_layout_head(l, f->buf, f->len), 0);
	const void *src[VMM_SNAP_MAX_SECTIONS];
	unsigned k = 0;
	for (unsigned i = 0; i < ncpus; i++)
		src[k++] = &vc[i];
	for (unsigned i = 0; i < ndevs; i++)
		src[k++] = &dev[i];
	src[k++] = &vm;
	src[k++] = &ser;
	for (unsigned i = 0; i < k; i++)
		memcpy(f->buf + l->sec[i].offset, src[i], l->sec[i].len);
	free(vc);
	free(l);
}

static const uint32_t ids3[] = {2, 19, 1}; /* a disk, vsock, net: the order rung-vmm makes */

static struct vmm_snap_header *hdr(struct snapfile *f)
{
	return (struct vmm_snap_header *)f->buf;
}
static struct vmm_snap_section *sec(struct snapfile *f, unsigned i)
{
	return (struct vmm_snap_section *)(f->buf + sizeof(struct vmm_snap_header)) + i;
}

/* After an edit: section CRCs (when asked), table and header CRCs made right again, so the
 * parser's later checks are the ones reached. */
static void resign(struct snapfile *f, bool sections)
{
	struct vmm_snap_header *h = hdr(f);
	for (unsigned i = 0; sections && i < h->nsections && i < VMM_SNAP_MAX_SECTIONS; i++)
		if (sec(f, i)->offset + sec(f, i)->len <= f->len)
			sec(f, i)->crc = vmm_snap_crc32c(0, f->buf + sec(f, i)->offset, sec(f, i)->len);
	unsigned n = h->nsections < VMM_SNAP_MAX_SECTIONS ? h->nsections : VMM_SNAP_MAX_SECTIONS;
	h->table_crc = vmm_snap_crc32c(0, sec(f, 0), n * sizeof(struct vmm_snap_section));
	h->header_crc = 0;
	h->header_crc = vmm_snap_crc32c(0, h, sizeof(*h));
}

/* Parses f; expects failure with want in the message (or success for want NULL). */
static void expect(struct snapfile *f, const char *want)
{
	struct vmm_snap_info info;
	struct rung_err err = {0};
	int r = vmm_snap_parse(f->buf, f->len, f->file_len, &info, &err);
	if (!want) {
		ck_assert_msg(r == 0, "parse failed: %s", err.msg);
		return;
	}
	ck_assert_msg(r < 0, "parse passed, wanted \"%s\"", want);
	ck_assert_msg(strstr(err.msg, want), "error \"%s\" lacks \"%s\"", err.msg, want);
}

START_TEST(crc32c_vector)
{
	ck_assert_uint_eq(vmm_snap_crc32c(0, "123456789", 9), 0xe3069283u);
	uint32_t part = vmm_snap_crc32c(0, "1234", 4);
	ck_assert_uint_eq(vmm_snap_crc32c(part, "56789", 5), 0xe3069283u);
	ck_assert_uint_eq(vmm_snap_crc32c(0, "", 0), 0);
}
END_TEST

START_TEST(roundtrip)
{
	struct snapfile f;
	snap_build(&f, 2, ids3, 3);
	struct vmm_snap_info info;
	struct rung_err err = {0};
	ck_assert_int_eq(vmm_snap_parse(f.buf, f.len, f.file_len, &info, &err), 0);
	ck_assert_uint_eq(info.hdr.ncpus, 2);
	ck_assert_uint_eq(info.hdr.mem_bytes, MEM);
	ck_assert_uint_eq(info.hdr.mem_offset, f.len);
	ck_assert_uint_eq(info.hdr.mem_crc, 0x1234);
	ck_assert_uint_eq(info.vcpu[1]->regs.rip, 0x1001);
	ck_assert_uint_eq(info.virtio[1]->device_id, 19);
	ck_assert_uint_eq(info.serial->lcr, 3);
	ck_assert_uint_eq(info.vm->chip[2].chip_id, 2);
	ck_assert_ptr_null(info.vcpu[2]);
	/* the same shape on the command line passes; others are refused naming the option */
	struct vmm_config cfg = {.ndisks = 1, .net_fd = 5, .vsock_fd = -1, .kvm_fd = -1};
	ck_assert_int_eq(vmm_snap_check_shape(&info, &cfg, &err), 0);
	cfg.mem_mib = 64;
	cfg.cpus = 2;
	ck_assert_int_eq(vmm_snap_check_shape(&info, &cfg, &err), 0);
	free(f.buf);
}
END_TEST

START_TEST(wrong_shape)
{
	struct snapfile f;
	snap_build(&f, 2, ids3, 3);
	struct vmm_snap_info info;
	struct rung_err err = {0};
	ck_assert_int_eq(vmm_snap_parse(f.buf, f.len, f.file_len, &info, &err), 0);
	struct vmm_config cfg = {.ndisks = 2, .net_fd = 5, .vsock_fd = -1, .kvm_fd = -1};
	ck_assert_int_lt(vmm_snap_check_shape(&info, &cfg, &err), 0);
	ck_assert_str_eq(err.msg, "--restore: the snapshot has 1 disks, --disk gives 2");
	cfg.ndisks = 1;
	cfg.net_fd = -1;
	ck_assert_int_lt(vmm_snap_check_shape(&info, &cfg, &err), 0);
	ck_assert_pstr_eq(strstr(err.msg, "a network device, no --net-fd/--net-tap"),
			  "a network device, no --net-fd/--net-tap");
	cfg.net_tap = "tap0";
	cfg.mem_mib = 128;
	ck_assert_int_lt(vmm_snap_check_shape(&info, &cfg, &err), 0);
	ck_assert_str_eq(err.msg, "--mem 128: the snapshot's guest has 64 MiB");
	cfg.mem_mib = 0;
	cfg.cpus = 1;
	ck_assert_int_lt(vmm_snap_check_shape(&info, &cfg, &err), 0);
	ck_assert_str_eq(err.msg, "--cpus 1: the snapshot's guest has 2");
	free(f.buf);
	/* devices in another order than rung-vmm makes them */
	static const uint32_t swapped[] = {19, 2, 1};
	snap_build(&f, 1, swapped, 3);
	ck_assert_int_eq(vmm_snap_parse(f.buf, f.len, f.file_len, &info, &err), 0);
	cfg = (struct vmm_config){.ndisks = 1, .net_fd = 5, .vsock_fd = -1, .kvm_fd = -1};
	ck_assert_int_lt(vmm_snap_check_shape(&info, &cfg, &err), 0);
	ck_assert(strstr(err.msg, "another order"));
	free(f.buf);
}
END_TEST

START_TEST(header_refused)
{
	struct snapfile f;
	snap_build(&f, 1, ids3, 3);
	hdr(&f)->magic[0] = 'X';
	expect(&f, "not a rung-vmm snapshot (bad magic)");
	hdr(&f)->magic[0] = 'R';
	hdr(&f)->version = 2;
	resign(&f, false);
	expect(&f, "snapshot format version 2, this rung-vmm reads 1");
	hdr(&f)->version = 1;
	char mine[VMM_SNAP_COMPAT_LEN];
	vmm_snap_compat_id(mine);
	snprintf(hdr(&f)->compat, VMM_SNAP_COMPAT_LEN, "rung-vmm/1 x86_64 c1 v2");
	resign(&f, false);
	char want[200];
	snprintf(want, sizeof(want), "incompatible rung-vmm build \"rung-vmm/1 x86_64 c1 v2\"; "
		 "this one is \"%s\"", mine);
	expect(&f, want);
	memset(hdr(&f)->compat, 'x', VMM_SNAP_COMPAT_LEN);
	resign(&f, false);
	expect(&f, "compatibility id not terminated");
	memcpy(hdr(&f)->compat, mine, VMM_SNAP_COMPAT_LEN);
	resign(&f, false);
	expect(&f, NULL);
	hdr(&f)->ncpus = 2; /* not re-signed */
	expect(&f, "header checksum mismatch");
	resign(&f, false);
	expect(&f, "6 sections for 2 vCPUs and 3 devices"); /* 1 vCPU + 3 devices + 2 */
	hdr(&f)->ncpus = 9;
	resign(&f, false);
	expect(&f, "9 vCPUs (1..4)");
	hdr(&f)->ncpus = 1;
	hdr(&f)->mem_bytes = MEM + 1;
	resign(&f, false);
	expect(&f, "memory size 67108865 out of range");
	hdr(&f)->mem_bytes = MEM;
	hdr(&f)->dev_ids[1] = 7;
	resign(&f, false);
	expect(&f, "device 1 has type 7");
	hdr(&f)->dev_ids[1] = 19;
	hdr(&f)->dev_ids[5] = 2; /* past ndevs */
	resign(&f, false);
	expect(&f, "device 5 has type 2");
	hdr(&f)->dev_ids[5] = 0;
	hdr(&f)->nsections = 1000;
	resign(&f, false);
	expect(&f, "1000 sections");
	free(f.buf);
}
END_TEST

START_TEST(truncated_refused)
{
	struct snapfile f;
	snap_build(&f, 1, ids3, 3);
	uint64_t whole = f.file_len;
	f.file_len = whole - 4096; /* memory cut short */
	expect(&f, "truncated or extended");
	f.file_len = whole + 1;
	expect(&f, "truncated or extended");
	f.file_len = 0;
	expect(&f, "truncated or extended");
	f.file_len = whole;
	uint64_t len = f.len;
	f.len = 100;
	expect(&f, "shorter than its header");
	f.len = len - 8; /* state read short */
	expect(&f, "state bytes");
	f.len = len;
	hdr(&f)->mem_offset = 100; /* inside the table */
	hdr(&f)->mem_len = MEM;
	resign(&f, false);
	expect(&f, "memory offset 100");
	hdr(&f)->mem_offset = 64u << 20; /* past the state limit */
	resign(&f, false);
	expect(&f, "memory offset");
	hdr(&f)->mem_offset = len;
	hdr(&f)->mem_len = MEM / 2;
	resign(&f, false);
	expect(&f, "memory image of 33554432 bytes for a 67108864-byte guest");
	free(f.buf);
}
END_TEST

START_TEST(sections_refused)
{
	struct snapfile f;
	snap_build(&f, 2, ids3, 3);
	/* a flipped byte in a payload */
	f.buf[sec(&f, 1)->offset + 5] ^= 1;
	expect(&f, "section 1 (tag 1 index 1): checksum mismatch");
	f.buf[sec(&f, 1)->offset + 5] ^= 1;
	sec(&f, 0)->index = 1; /* not re-signed: the table's own CRC */
	expect(&f, "section table checksum mismatch");
	resign(&f, false);
	expect(&f, "index 1 out of range or repeated");
	sec(&f, 0)->index = 0;
	sec(&f, 2)->tag = 99;
	resign(&f, false);
	expect(&f, "section 2: unknown tag 99");
	sec(&f, 2)->tag = VMM_SNAP_VIRTIO;
	sec(&f, 2)->len -= 8;
	resign(&f, false);
	expect(&f, "section 2 (tag 3):");
	sec(&f, 2)->len += 8;
	uint64_t off = sec(&f, 2)->offset;
	sec(&f, 2)->offset = sec(&f, 1)->offset; /* overlaps section 1 */
	resign(&f, false);
	expect(&f, "section 2: offset");
	sec(&f, 2)->offset = UINT64_MAX - 7; /* would wrap */
	resign(&f, false);
	expect(&f, "section 2: offset");
	sec(&f, 2)->offset = off + 4; /* unaligned */
	resign(&f, false);
	expect(&f, "section 2: offset");
	sec(&f, 2)->offset = off;
	resign(&f, true);
	expect(&f, NULL);
	/* payload fields used as counts */
	struct vmm_snap_vcpu *v = (void *)(f.buf + sec(&f, 0)->offset);
	v->nmsrs = VMM_SNAP_MAX_MSRS + 1;
	resign(&f, true);
	expect(&f, "vCPU 0: 513 MSRs");
	v->nmsrs = 1;
	v->xcrs.nr_xcrs = 17;
	resign(&f, true);
	expect(&f, "vCPU 0: 17 XCRs");
	v->xcrs.nr_xcrs = 0;
	struct vmm_snap_virtio *d = (void *)(f.buf + sec(&f, 3)->offset);
	d->vq[1].size = 100;
	resign(&f, true);
	expect(&f, "device 1 queue 1: size 100");
	d->vq[1].size = 512;
	resign(&f, true);
	expect(&f, "device 1 queue 1: size 512");
	d->vq[1].size = 0;
	d->vq[1].ready = 1;
	resign(&f, true);
	expect(&f, "device 1 queue 1: size 0 ready 1");
	d->vq[1].ready = 0;
	d->device_id = 2;
	resign(&f, true);
	expect(&f, "device 1 is type 2 in its section, 19 in the header");
	d->device_id = 19;
	resign(&f, true);
	expect(&f, NULL);
	free(f.buf);
}
END_TEST

START_TEST(missing_sections_refused)
{
	struct snapfile f;
	snap_build(&f, 2, ids3, 3);
	/* the serial section (last) turned into a second VM section */
	unsigned n = hdr(&f)->nsections;
	sec(&f, n - 1)->tag = VMM_SNAP_VCPU;
	sec(&f, n - 1)->index = 0;
	sec(&f, n - 1)->len = sizeof(struct vmm_snap_vcpu);
	resign(&f, false);
	expect(&f, "section 6:"); /* too long for its place, or repeated */
	free(f.buf);
	snap_build(&f, 2, ids3, 3);
	/* the header says 2 vCPUs; the table lists vCPU 0 twice and vCPU 1 never */
	sec(&f, 1)->index = 0;
	resign(&f, false);
	expect(&f, "index 0 out of range or repeated");
	free(f.buf);
}
END_TEST

/* Random damage to the state bytes: never a crash, never a pass unless the bytes are intact
 * or the damage fell in padding no check covers. */
START_TEST(random_damage)
{
	struct snapfile f;
	snap_build(&f, 2, ids3, 3);
	uint8_t *good = malloc(f.len);
	memcpy(good, f.buf, f.len);
	unsigned passed = 0, runs = 3000;
	srand(19);
	for (unsigned i = 0; i < runs; i++) {
		memcpy(f.buf, good, f.len);
		unsigned flips = 1 + (unsigned)rand() % 4;
		for (unsigned k = 0; k < flips; k++) {
			/* mostly the header, table and first sections, where the fields are */
			uint64_t at = (unsigned)rand() % (rand() % 2 ? 1024 : f.len);
			f.buf[at] ^= (uint8_t)(1 + rand() % 255);
		}
		struct vmm_snap_info info;
		struct rung_err err = {0};
		if (vmm_snap_parse(f.buf, f.len, f.file_len, &info, &err) == 0)
			passed++;
		else
			ck_assert(err.msg[0]);
	}
	/* only flips in inter-section padding or the tail padding pass */
	ck_assert_uint_lt(passed, runs / 4);
	free(good);
	free(f.buf);
}
END_TEST

START_TEST(restore_args)
{
	struct vmm_config cfg;
	struct rung_err err = {0};
	char *ok[] = {"rung-vmm", "--restore", "/s/snap", "--serial-log", "/l",
		      "--vsock-uds", "/v", "--disk", "/d,ro"};
	ck_assert_int_eq(vmm_args_parse(9, ok, &cfg, &err), 0);
	ck_assert_str_eq(cfg.restore, "/s/snap");
	ck_assert_uint_eq(cfg.mem_mib, 0);
	char *withk[] = {"rung-vmm", "--restore", "/s/snap", "--kernel", "/k", "--serial-log",
			 "/l", "--vsock-uds", "/v"};
	ck_assert_int_lt(vmm_args_parse(9, withk, &cfg, &err), 0);
	ck_assert(strstr(err.msg, "--restore: the snapshot holds the booted guest"));
	char *none[] = {"rung-vmm", "--serial-log", "/l", "--vsock-uds", "/v"};
	ck_assert_int_lt(vmm_args_parse(5, none, &cfg, &err), 0);
	ck_assert_str_eq(err.msg, "--kernel (or --restore): required");
}
END_TEST

/* The save thread's filter, in a child: which opens it survives (0) or dies of (SIGSYS). */
static int snap_filtered(const char *dir, int how)
{
	void *prog;
	size_t len;
	struct rung_err err = {0};
	ck_assert_int_eq(vmm_seccomp_build(VMM_THREAD_SNAP, &prog, &len, &err), 0);
	char path[600], tmp[600];
	snprintf(path, sizeof(path), "%s/existing", dir);
	snprintf(tmp, sizeof(tmp), "%s/new", dir);
	unlink(tmp);
	pid_t pid = fork();
	if (pid == 0) {
		if (vmm_seccomp_install(prog, len, &err) < 0)
			_exit(100);
		int fd = -1;
		switch (how) {
		case 0: /* what a save does: create, write, sync, rename, the directory synced */
			fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			if (fd < 0 || write(fd, "x", 1) != 1 || fsync(fd) < 0 ||
			    rename(tmp, path) < 0)
				_exit(101);
			close(fd);
			fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			_exit(fd >= 0 && fsync(fd) == 0 ? 0 : 102);
		case 1: /* an existing file for writing */
			fd = open(path, O_WRONLY | O_CLOEXEC);
			break;
		case 2: /* an existing file for reading */
			fd = open(path, O_RDONLY | O_CLOEXEC);
			break;
		case 3: /* a KVM state setter (the fd does not matter: the filter decides first) */
			syscall(SYS_ioctl, 0, KVM_SET_REGS, 0);
			break;
		case 4:
			syscall(SYS_socket, AF_UNIX, 1, 0);
			break;
		}
		_exit(fd >= 0 ? 103 : 104);
	}
	free(prog);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return status;
}

START_TEST(save_thread_seccomp)
{
	char *dir = rung_test_tmpdir("vmm-snap");
	char path[600];
	snprintf(path, sizeof(path), "%s/existing", dir);
	int st = snap_filtered(dir, 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
	ck_assert_int_eq(access(path, F_OK), 0);
	for (int how = 1; how <= 4; how++) {
		st = snap_filtered(dir, how);
		ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "case %d: status 0x%x",
			      how, st);
	}
	unlink(path);
	rmdir(dir);
	free(dir);
}
END_TEST

/* The background memory check: a match, one flipped bit found in any chunk, a cancel. */
START_TEST(mem_check)
{
	size_t len = (3u << 20) + 4096; /* more than one 1 MiB chunk, not a multiple of it */
	uint8_t *m = malloc(len);
	ck_assert_ptr_nonnull(m);
	for (size_t i = 0; i < len; i++)
		m[i] = (uint8_t)(i * 131 + (i >> 12));
	uint32_t want = vmm_snap_crc32c(0, m, len);
	bool quit = false;
	ck_assert_int_eq(vmm_snap_mem_check(m, len, want, &quit), 0);
	ck_assert_int_eq(vmm_snap_mem_check(m, len, want, NULL), 0);
	m[len - 1] ^= 0x10; /* the last chunk */
	ck_assert_int_eq(vmm_snap_mem_check(m, len, want, &quit), -EBADMSG);
	m[len - 1] ^= 0x10;
	m[5] ^= 1; /* the first */
	ck_assert_int_eq(vmm_snap_mem_check(m, len, want, NULL), -EBADMSG);
	quit = true;
	ck_assert_int_eq(vmm_snap_mem_check(m, len, want, &quit), -ECANCELED);
	free(m);
}
END_TEST

/* How much restore reads before guest memory: the state part the header names, never past
 * the file or VMM_SNAP_MAX_STATE, whatever a hostile header says. */
START_TEST(state_len)
{
	struct snapfile f;
	snap_build(&f, 1, ids3, 3);
	ck_assert_uint_eq(vmm_snap_state_len(f.buf, f.len, f.file_len), f.len);
	ck_assert_uint_eq(vmm_snap_state_len(f.buf, 10, f.file_len), VMM_SNAP_MAX_STATE);
	ck_assert_uint_eq(vmm_snap_state_len(f.buf, 10, 100), 100);
	hdr(&f)->mem_offset = VMM_SNAP_MAX_STATE + 4096; /* unchecked header */
	ck_assert_uint_eq(vmm_snap_state_len(f.buf, f.len, f.file_len), VMM_SNAP_MAX_STATE);
	hdr(&f)->mem_offset = f.file_len + 4096;
	ck_assert_uint_eq(vmm_snap_state_len(f.buf, f.len, 8192), 8192);
	hdr(&f)->mem_offset = 3;
	ck_assert_uint_eq(vmm_snap_state_len(f.buf, f.len, f.file_len), VMM_SNAP_MAX_STATE);
	free(f.buf);
}
END_TEST

/* The memory check's thread filter: the common calls only; no file, no KVM, no socket. */
static int verify_filtered(int how)
{
	void *prog;
	size_t len;
	struct rung_err err = {0};
	ck_assert_int_eq(vmm_seccomp_build(VMM_THREAD_VERIFY, &prog, &len, &err), 0);
	void *view = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(view, MAP_FAILED);
	pid_t pid = fork();
	if (pid == 0) {
		if (vmm_seccomp_install(prog, len, &err) < 0)
			_exit(100);
		switch (how) {
		case 0: /* what the check does: compute, log, unmap its view */
			if (vmm_snap_mem_check(view, 4096, vmm_snap_crc32c(0, view, 4096), NULL) ||
			    write(2, "", 0) < 0 || munmap(view, 4096) < 0)
				_exit(101);
			_exit(0);
		case 1:
			syscall(SYS_openat, AT_FDCWD, "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			break;
		case 2:
			syscall(SYS_pread64, 0, view, 1, 0);
			break;
		case 3:
			syscall(SYS_ioctl, 0, KVM_RUN, 0);
			break;
		case 4:
			syscall(SYS_socket, AF_UNIX, 1, 0);
			break;
		}
		_exit(102);
	}
	free(prog);
	munmap(view, 4096);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return status;
}

START_TEST(verify_thread_seccomp)
{
	int st = verify_filtered(0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
	for (int how = 1; how <= 4; how++) {
		st = verify_filtered(how);
		ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "case %d: status 0x%x",
			      how, st);
	}
}
END_TEST

Suite *vmm_snapshot_suite(void)
{
	Suite *s = suite_create("vmm_snapshot");
	TCase *tc = tcase_create("format");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, crc32c_vector);
	tcase_add_test(tc, roundtrip);
	tcase_add_test(tc, wrong_shape);
	tcase_add_test(tc, header_refused);
	tcase_add_test(tc, truncated_refused);
	tcase_add_test(tc, sections_refused);
	tcase_add_test(tc, missing_sections_refused);
	tcase_add_test(tc, random_damage);
	tcase_add_test(tc, restore_args);
	tcase_add_test(tc, save_thread_seccomp);
	tcase_add_test(tc, mem_check);
	tcase_add_test(tc, state_len);
	tcase_add_test(tc, verify_thread_seccomp);
	suite_add_tcase(s, tc);
	return s;
}
