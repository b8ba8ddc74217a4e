/*
 * vmm/args.c: rung-vmm's command line, parsed into struct vmm_config (pure, no I/O).
 */
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/util.h"
#include "vmm/vmm.h"

const char vmm_usage[] =
	"usage: rung-vmm --kernel BZIMAGE [--initrd FILE] [--disk PATH[,ro]]... --mem MIB\n"
	"                --cpus N(1-4) [--cmdline EXTRA] --serial-log PATH --vsock-uds PATH\n"
	"                [--vsock-port PORT] [--control PATH] [--serial-cap BYTES]\n"
	"                [--vsock-fd FD] [--kvm-fd FD]\n"
	"                [--net-fd FD | --net-tap NAME] [--net-mac XX:XX:XX:XX:XX:XX]\n"
	"                [--serial-timestamps] [--no-seccomp] [--help]\n"
	"       rung-vmm --restore SNAPSHOT [--mem MIB] [--cpus N] (then the same --disk,\n"
	"                --vsock-*, --net-*, --serial-*, --control options as the boot)\n"
	"       rung-vmm --probe [--kvm-fd FD]\n"
	"Boots a Linux bzImage under KVM. Each connection to --vsock-uds is bridged to a new\n"
	"vsock connection to guest CID 3, port --vsock-port (default 1024). --control accepts\n"
	"the lines pause, resume, stop, status, snapshot PATH (pauses, writes the guest to PATH,\n"
	"answers when the file is complete, resumes). A jailer may hand in the listening agent socket\n"
	"(--vsock-fd, instead of --vsock-uds) and an open /dev/kvm (--kvm-fd).\n"
	"--net-fd (an open tap, IFF_TAP|IFF_NO_PI) or --net-tap (attach to an existing tap) adds\n"
	"a virtio-net device; --net-mac sets its address (default: a random local unicast one).\n"
	"Exit status: 0 guest reboot/poweroff or stop, 3 guest triple fault/shutdown,\n"
	"1 internal error, 2 usage.\n"
	"--probe: exit 0 iff this host's KVM runs a long-mode guest to its first I/O exit\n"
	"within 2 s on a CPU with VMX/SVM (else 1, and one line on stderr saying why).\n"
	"--no-seccomp is for debugging only.\n";

static int want_value(int argc, char *const *argv, int *i, const char *name, const char **eq,
		      const char **out, struct rung_err *err)
{
	if (*eq) {
		*out = *eq;
		return 0;
	}
	if (*i + 1 >= argc)
		return rung_err_set(err, EINVAL, "%s: needs a value", name);
	*out = argv[++*i];
	return 0;
}

static int parse_disk(struct vmm_config *cfg, const char *v, struct rung_err *err)
{
	if (cfg->ndisks == VMM_MAX_DISKS)
		return rung_err_set(err, E2BIG, "--disk: at most %d disks", VMM_MAX_DISKS);
	struct vmm_disk_cfg *d = &cfg->disks[cfg->ndisks];
	size_t n = strlen(v);
	d->ro = false;
	if (n > 3 && (!strcmp(v + n - 3, ",ro") || !strcmp(v + n - 3, ",rw"))) {
		d->ro = v[n - 1] == 'o';
		n -= 3;
	}
	if (n >= sizeof(d->path))
		return rung_err_set(err, ENAMETOOLONG, "--disk: path too long");
	memcpy(d->path, v, n);
	d->path[n] = '\0';
	if (!n)
		return rung_err_set(err, EINVAL, "--disk: empty path");
	cfg->ndisks++;
	return 0;
}

static int parse_num(const char *name, const char *v, uint64_t min, uint64_t max, uint64_t *out,
		     struct rung_err *err)
{
	if (rung_parse_u64(v, out) < 0)
		return rung_err_set(err, EINVAL, "%s: \"%s\" is not a number", name, v);
	if (*out < min || *out > max)
		return rung_err_set(err, ERANGE, "%s: %llu out of range %llu..%llu", name,
				    (unsigned long long)*out, (unsigned long long)min,
				    (unsigned long long)max);
	return 0;
}

/* After the options: what a run needs is there, and no two options contradict each other. */
static int args_complete(const struct vmm_config *cfg, bool have_mem, bool have_cpus,
			 struct rung_err *err)
{
	if (cfg->restore && (cfg->kernel || cfg->initrd || cfg->cmdline_extra))
		return rung_err_set(err, EINVAL, "--restore: the snapshot holds the booted guest; "
				    "--kernel, --initrd and --cmdline do not apply");
	if (!cfg->kernel && !cfg->restore)
		return rung_err_set(err, EINVAL, "--kernel (or --restore): required");
	if (!have_mem && !cfg->restore)
		return rung_err_set(err, EINVAL, "--mem: required");
	if (!have_cpus && !cfg->restore)
		return rung_err_set(err, EINVAL, "--cpus: required");
	if (!cfg->serial_log)
		return rung_err_set(err, EINVAL, "--serial-log: required");
	if (!cfg->vsock_uds && cfg->vsock_fd < 0)
		return rung_err_set(err, EINVAL, "--vsock-uds (or --vsock-fd): required");
	if (cfg->vsock_uds && cfg->vsock_fd >= 0)
		return rung_err_set(err, EINVAL, "--vsock-uds and --vsock-fd: give one");
	if (cfg->vsock_fd >= 0 && cfg->vsock_fd == cfg->kvm_fd)
		return rung_err_set(err, EINVAL, "--vsock-fd and --kvm-fd: the same fd");
	if (cfg->net_fd >= 0 && cfg->net_tap)
		return rung_err_set(err, EINVAL, "--net-fd and --net-tap: give one");
	if (cfg->net_fd >= 0 && (cfg->net_fd == cfg->vsock_fd || cfg->net_fd == cfg->kvm_fd))
		return rung_err_set(err, EINVAL, "--net-fd %d: also given as --vsock-fd or --kvm-fd",
				    cfg->net_fd);
	if (cfg->net_mac_set && cfg->net_fd < 0 && !cfg->net_tap)
		return rung_err_set(err, EINVAL, "--net-mac: needs --net-fd or --net-tap");
	return 0;
}

int vmm_args_parse(int argc, char *const *argv, struct vmm_config *cfg, struct rung_err *err)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->vsock_port = 1024;
	cfg->guest_cid = 3;
	cfg->serial_cap = 1u << 20;
	cfg->vsock_fd = cfg->kvm_fd = cfg->net_fd = -1;
	bool have_mem = false, have_cpus = false;
	for (int i = 1; i < argc; i++) {
		char name[32];
		const char *a = argv[i], *eq = strchr(a, '='), *v = NULL;
		size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
		if (nlen >= sizeof(name))
			return rung_err_set(err, EINVAL, "unknown option %.40s", a);
		memcpy(name, a, nlen);
		name[nlen] = '\0';
		if (eq)
			eq++;
		int r = 0;
		uint64_t n;
#define VAL() (r = want_value(argc, argv, &i, name, &eq, &v, err))
		if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
			cfg->help = true;
			return 0;
		} else if (!strcmp(name, "--kernel")) {
			if (VAL() == 0)
				cfg->kernel = v;
		} else if (!strcmp(name, "--restore")) {
			if (VAL() == 0)
				cfg->restore = v;
		} else if (!strcmp(name, "--initrd")) {
			if (VAL() == 0)
				cfg->initrd = v;
		} else if (!strcmp(name, "--disk")) {
			if (VAL() == 0)
				r = parse_disk(cfg, v, err);
		} else if (!strcmp(name, "--mem")) {
			if (VAL() == 0 && (r = parse_num(name, v, VMM_MIN_MEM_MIB, VMM_MAX_MEM_MIB,
							 &cfg->mem_mib, err)) == 0)
				have_mem = true;
		} else if (!strcmp(name, "--cpus")) {
			if (VAL() == 0 && (r = parse_num(name, v, 1, VMM_MAX_CPUS, &n, err)) == 0) {
				cfg->cpus = (unsigned)n;
				have_cpus = true;
			}
		} else if (!strcmp(name, "--cmdline")) {
			if (VAL() == 0)
				cfg->cmdline_extra = v;
		} else if (!strcmp(name, "--serial-log")) {
			if (VAL() == 0)
				cfg->serial_log = v;
		} else if (!strcmp(name, "--serial-cap")) {
			if (VAL() == 0 && rung_parse_size(v, &cfg->serial_cap) < 0)
				r = rung_err_set(err, EINVAL, "--serial-cap: bad size \"%s\"", v);
			else if (r == 0 && cfg->serial_cap < 4096)
				r = rung_err_set(err, ERANGE, "--serial-cap: at least 4096 bytes");
		} else if (!strcmp(name, "--serial-timestamps") && !eq) {
			cfg->serial_timestamps = true;
		} else if (!strcmp(name, "--vsock-uds")) {
			if (VAL() == 0)
				cfg->vsock_uds = v;
		} else if (!strcmp(name, "--vsock-fd")) {
			if (VAL() == 0 && (r = parse_num(name, v, 3, 65535, &n, err)) == 0)
				cfg->vsock_fd = (int)n;
		} else if (!strcmp(name, "--kvm-fd")) {
			if (VAL() == 0 && (r = parse_num(name, v, 3, 65535, &n, err)) == 0)
				cfg->kvm_fd = (int)n;
		} else if (!strcmp(name, "--net-fd")) {
			if (VAL() == 0 && (r = parse_num(name, v, 3, 65535, &n, err)) == 0)
				cfg->net_fd = (int)n;
		} else if (!strcmp(name, "--net-tap")) {
			if (VAL() == 0)
				cfg->net_tap = v;
		} else if (!strcmp(name, "--net-mac")) {
			if (VAL() == 0 && (r = vmm_net_mac_parse(v, cfg->net_mac, err)) == 0)
				cfg->net_mac_set = true;
		} else if (!strcmp(name, "--vsock-port")) {
			if (VAL() == 0 && (r = parse_num(name, v, 1, 0xfffffffeu, &n, err)) == 0)
				cfg->vsock_port = (uint32_t)n;
		} else if (!strcmp(name, "--control")) {
			if (VAL() == 0)
				cfg->control = v;
		} else if (!strcmp(name, "--probe") && !eq) {
			cfg->probe = true;
		} else if (!strcmp(name, "--no-seccomp") && !eq) {
			cfg->no_seccomp = true;
		} else {
			return rung_err_set(err, EINVAL, "unknown option %.40s", a);
		}
#undef VAL
		if (r < 0)
			return r;
	}
	if (cfg->probe)
		return 0; /* --probe [--kvm-fd N] needs nothing else */
	return args_complete(cfg, have_mem, have_cpus, err);
}

enum vmm_ctl_cmd vmm_control_parse(const char *line, size_t len, const char **arg,
				   size_t *arg_len)
{
	static const struct {
		const char *s;
		enum vmm_ctl_cmd c;
	} cmds[] = {{"pause", VMM_CTL_PAUSE},
		    {"resume", VMM_CTL_RESUME},
		    {"stop", VMM_CTL_STOP},
		    {"status", VMM_CTL_STATUS}};
	while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
		len--;
	*arg = NULL;
	*arg_len = 0;
	if (len > 9 && !memcmp(line, "snapshot ", 9)) {
		if (memchr(line + 9, '\0', len - 9))
			return VMM_CTL_BAD;
		*arg = line + 9;
		*arg_len = len - 9;
		return VMM_CTL_SNAPSHOT;
	}
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(cmds); i++)
		if (strlen(cmds[i].s) == len && !memcmp(cmds[i].s, line, len))
			return cmds[i].c;
	return VMM_CTL_BAD;
}

const char *vmm_exit_name(enum vmm_exit e)
{
	switch (e) {
	case VMM_EXIT_REBOOT:
		return "guest reboot/poweroff";
	case VMM_EXIT_SHUTDOWN:
		return "guest shutdown (triple fault)";
	case VMM_EXIT_STOPPED:
		return "stopped (control socket or signal)";
	case VMM_EXIT_ERROR:
		return "internal error";
	case VMM_EXIT_NONE:
		break;
	}
	return "running";
}

int vmm_exit_status(enum vmm_exit e)
{
	switch (e) {
	case VMM_EXIT_REBOOT:
	case VMM_EXIT_STOPPED:
		return 0;
	case VMM_EXIT_SHUTDOWN:
		return 3;
	default:
		return 1;
	}
}
