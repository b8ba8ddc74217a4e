/*
 * vmm/mptable.c: Intel MultiProcessor Specification 1.4 tables, so that an SMP guest
 * without ACPI finds all its CPUs and the IOAPIC. Pure: writes bytes into a buffer.
 */
#include <string.h>

#include "common/err.h"
#include "vmm/vmm.h"

#define APIC_VERSION 0x14
#define IOAPIC_VERSION 0x11
#define IOAPIC_ADDR 0xfec00000u
#define LAPIC_ADDR 0xfee00000u
#define IOAPIC_PINS 24

struct mpf_intel {
	char signature[4];
	uint32_t physptr;
	uint8_t length, specification, checksum, feature1, feature2, feature3, feature4, feature5;
} __attribute__((packed));
struct mpc_table {
	char signature[4];
	uint16_t length;
	uint8_t spec, checksum;
	char oem[8], productid[12];
	uint32_t oemptr;
	uint16_t oemsize, oemcount;
	uint32_t lapic, reserved;
} __attribute__((packed));
struct mpc_cpu {
	uint8_t type, apicid, apicver, cpuflag;
	uint32_t cpufeature, featureflag, reserved[2];
} __attribute__((packed));
struct mpc_bus {
	uint8_t type, busid;
	char bustype[6];
} __attribute__((packed));
struct mpc_ioapic {
	uint8_t type, apicid, apicver, flags;
	uint32_t apicaddr;
} __attribute__((packed));
struct mpc_intsrc {
	uint8_t type, irqtype;
	uint16_t irqflag;
	uint8_t srcbus, srcbusirq, dstapic, dstirq;
} __attribute__((packed));

_Static_assert(sizeof(struct mpf_intel) == 16, "mpf size");
_Static_assert(sizeof(struct mpc_table) == 44, "mpc size");
_Static_assert(sizeof(struct mpc_cpu) == 20, "cpu size");

enum { MP_PROCESSOR, MP_BUS, MP_IOAPIC, MP_INTSRC, MP_LINTSRC };
enum { MP_INT, MP_NMI, MP_SMI, MP_EXTINT };

static uint8_t checksum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;
	for (size_t i = 0; i < n; i++)
		s += p[i];
	return (uint8_t)-s;
}

size_t vmm_mptable_size(unsigned ncpus)
{
	return sizeof(struct mpf_intel) + sizeof(struct mpc_table) + ncpus * sizeof(struct mpc_cpu) +
	       sizeof(struct mpc_bus) + sizeof(struct mpc_ioapic) +
	       (IOAPIC_PINS + 2) * sizeof(struct mpc_intsrc);
}

int vmm_mptable_build(uint8_t *buf, size_t len, uint64_t base, unsigned ncpus, struct rung_err *err)
{
	if (ncpus < 1 || ncpus > VMM_MAX_CPUS)
		return rung_err_set(err, EINVAL, "mptable: cpus %u out of range 1..%d", ncpus,
				    VMM_MAX_CPUS);
	size_t size = vmm_mptable_size(ncpus);
	if (len < size)
		return rung_err_set(err, ENOSPC, "mptable: needs %zu bytes, have %zu", size, len);
	if (base + size > 0x100000)
		return rung_err_set(err, EINVAL, "mptable: base 0x%llx is not below 1 MiB",
				    (unsigned long long)base);
	memset(buf, 0, size);
	struct mpf_intel *mpf = (void *)buf;
	struct mpc_table *mpc = (void *)(buf + sizeof(*mpf));
	uint8_t *p = (uint8_t *)(mpc + 1);
	uint16_t count = 0;

	for (unsigned i = 0; i < ncpus; i++, count++) {
		struct mpc_cpu cpu = {
			.type = MP_PROCESSOR,
			.apicid = (uint8_t)i,
			.apicver = APIC_VERSION,
			.cpuflag = 1 /* enabled */ | (i == 0 ? 2 /* boot processor */ : 0),
			.cpufeature = 0x600,
			.featureflag = (1u << 0) | (1u << 9), /* FPU, APIC */
		};
		memcpy(p, &cpu, sizeof(cpu));
		p += sizeof(cpu);
	}
	struct mpc_bus bus = {.type = MP_BUS, .busid = 0};
	memcpy(bus.bustype, "ISA   ", 6);
	memcpy(p, &bus, sizeof(bus));
	p += sizeof(bus);
	count++;
	uint8_t ioapic_id = (uint8_t)ncpus;
	struct mpc_ioapic io = {.type = MP_IOAPIC, .apicid = ioapic_id, .apicver = IOAPIC_VERSION,
				.flags = 1, .apicaddr = IOAPIC_ADDR};
	memcpy(p, &io, sizeof(io));
	p += sizeof(io);
	count++;
	for (unsigned i = 0; i < IOAPIC_PINS; i++, count++) {
		struct mpc_intsrc is = {.type = MP_INTSRC, .irqtype = MP_INT, .irqflag = 0,
					.srcbus = 0, .srcbusirq = (uint8_t)i, .dstapic = ioapic_id,
					.dstirq = (uint8_t)i};
		memcpy(p, &is, sizeof(is));
		p += sizeof(is);
	}
	struct mpc_intsrc l0 = {.type = MP_LINTSRC, .irqtype = MP_EXTINT, .srcbus = 0,
				.srcbusirq = 0, .dstapic = 0, .dstirq = 0};
	struct mpc_intsrc l1 = {.type = MP_LINTSRC, .irqtype = MP_NMI, .srcbus = 0,
				.srcbusirq = 0, .dstapic = 0xff, .dstirq = 1};
	memcpy(p, &l0, sizeof(l0));
	p += sizeof(l0);
	memcpy(p, &l1, sizeof(l1));
	p += sizeof(l1);
	count += 2;

	memcpy(mpc->signature, "PCMP", 4);
	mpc->length = (uint16_t)(p - (uint8_t *)mpc);
	mpc->spec = 4;
	memcpy(mpc->oem, "RUNG    ", 8);
	memcpy(mpc->productid, "RUNG-VMM    ", 12);
	mpc->oemcount = count;
	mpc->lapic = LAPIC_ADDR;
	mpc->checksum = checksum((uint8_t *)mpc, mpc->length);

	memcpy(mpf->signature, "_MP_", 4);
	mpf->physptr = (uint32_t)(base + sizeof(*mpf));
	mpf->length = 1; /* in 16-byte paragraphs */
	mpf->specification = 4;
	mpf->checksum = checksum(buf, sizeof(*mpf));
	return (int)size;
}
