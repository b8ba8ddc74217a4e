/*
 * cli/ladder-verify.c: the host decides (docs/ladder.md, "Evidence"). For each probe whose
 * effect is visible on the host, the ladder checks that effect there after the probe ran: the
 * random secret it quotes, the marker in the host directory, the message its listener
 * recorded, the signal its victim got, the host's own hostname or kernel. Seen: escaped. Not
 * seen: blocked, whatever the probe said.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/ladder.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif

/* The probe's "KEY=value" evidence equals want. */
static bool evidence_is(const char *ev, const char *key, const char *want)
{
	size_t k = strlen(key);
	return want[0] && !strncmp(ev, key, k) && ev[k] == '=' && !strcmp(ev + k + 1, want);
}

static bool heard_name(struct ladder_env *e, const char *probe)
{
	for (int i = 0; i < 20; i++) { /* the listener thread may still be reading it */
		pthread_mutex_lock(&e->lock);
		bool seen = false;
		for (const char *l = e->heard; *l; l = strchr(l, '\n') + 1) {
			size_t n = strcspn(l, "\n");
			if (n == strlen(probe) && !strncmp(l, probe, n))
				seen = true;
			if (!l[n])
				break;
		}
		pthread_mutex_unlock(&e->lock);
		if (seen)
			return true;
		usleep(25000);
	}
	return false;
}

static bool marker_written(struct ladder_env *e)
{
	char p[PATH_MAX + 16], buf[80] = "";
	snprintf(p, sizeof(p), "%s/marker", e->host_dir);
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[k > 0 ? k : 0] = '\0';
	return !strcmp(buf, e->token);
}

static bool signalled(struct ladder_env *e)
{
	char b[16];
	for (int i = 0; i < 20; i++) {
		if (read(e->victim_fd, b, sizeof(b)) > 0)
			return true;
		usleep(25000);
	}
	return false;
}

/* One of the interface names the probe listed is one of the host's. */
static bool host_ifname(struct ladder_env *e, const char *ev)
{
	if (strncmp(ev, "interfaces=", 11))
		return false;
	char list[512];
	snprintf(list, sizeof(list), "%s", ev + 11);
	for (char *n = strtok(list, ","); n; n = strtok(NULL, ",")) {
		char pat[64];
		snprintf(pat, sizeof(pat), ",%s,", n);
		if (strstr(e->ifnames, pat))
			return true;
	}
	return false;
}

/* -1: the host cannot see this probe's effect; else whether it saw it. */
static int host_saw(struct ladder_env *e, const char *probe, const char *ev)
{
	if (!strcmp(probe, "fs.host_dir_visible")) {
		struct stat st;
		char ino[32];
		if (stat(e->host_dir, &st) < 0)
			return 0;
		snprintf(ino, sizeof(ino), "%llu", (unsigned long long)st.st_ino);
		return evidence_is(ev, "ino", ino);
	}
	if (!strcmp(probe, "fs.host_secret_read") || !strcmp(probe, "fs.fileapi_link_read") ||
	    !strcmp(probe, "fs.fileapi_dotdot"))
		return evidence_is(ev, "content", e->secret);
	if (!strcmp(probe, "fs.host_marker_write") || !strcmp(probe, "fs.fileapi_link_write"))
		return marker_written(e);
	if (!strcmp(probe, "ipc.host_shm"))
		return evidence_is(ev, "content", e->shm_secret);
	if (!strcmp(probe, "ipc.sysv_shm"))
		return evidence_is(ev, "content", e->sysv_secret);
	if (!strcmp(probe, "ipc.proc_host_pid"))
		return evidence_is(ev, "comm", e->victim_comm);
	if (!strcmp(probe, "ipc.sibling_proc"))
		return evidence_is(ev, "comm", e->sib_comm);
	if (!strcmp(probe, "ipc.signal_host"))
		return signalled(e);
	if (!strcmp(probe, "ipc.abstract_unix") || !strcmp(probe, "net.loopback_tcp") ||
	    !strcmp(probe, "net.loopback_tcp6") || !strcmp(probe, "net.loopback_udp") ||
	    !strcmp(probe, "net.icmp") || !strcmp(probe, "net.dns_other"))
		return heard_name(e, probe);
	if (!strcmp(probe, "priv.uid_host_root") || !strcmp(probe, "priv.securebits"))
		return evidence_is(ev, "userns", e->userns);
	if (!strcmp(probe, "info.hostname"))
		return evidence_is(ev, "nodename", e->hostname);
	if (!strcmp(probe, "info.cmdline"))
		return evidence_is(ev, "cmdline", e->cmdline);
	if (!strcmp(probe, "vm.shared_kernel"))
		return evidence_is(ev, "version", e->version);
	if (!strcmp(probe, "net.host_interfaces"))
		return host_ifname(e, ev);
	if (!strcmp(probe, "info.cgroup_names")) {
		const char *b = strrchr(e->cgroup_marker, '/');
		return b && strstr(ev, b + 1) != NULL;
	}
	return -1;
}

/* Does a socket of this family open on the host (no sandbox)? */
static bool host_family(int dom, int type)
{
	int fd = socket(dom, type | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		close(fd);
	return fd >= 0 || errno != EAFNOSUPPORT;
}

/* A route from the host itself (a UDP connect: nothing is sent). */
static bool host_route(int dom, const char *ip)
{
	struct sockaddr_storage a;
	memset(&a, 0, sizeof(a));
	socklen_t len;
	if (dom == AF_INET) {
		struct sockaddr_in *v4 = (struct sockaddr_in *)&a;
		v4->sin_family = AF_INET;
		v4->sin_port = htons(80);
		inet_pton(AF_INET, ip, &v4->sin_addr);
		len = sizeof(*v4);
	} else {
		struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a;
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons(80);
		inet_pton(AF_INET6, ip, &v6->sin6_addr);
		len = sizeof(*v6);
	}
	int fd = socket(dom, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int r = fd >= 0 ? connect(fd, (struct sockaddr *)&a, len) : -1;
	if (fd >= 0)
		close(fd);
	return r == 0;
}

/* The first line of path holds want (a sysctl's value, the lockdown mode). */
static bool file_has(const char *path, const char *want)
{
	char buf[256] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[k > 0 ? k : 0] = '\0';
	return strstr(buf, want) != NULL;
}

static bool dir_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	bool empty = true;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.')
			empty = false;
	if (d)
		closedir(d);
	return empty;
}

/* Switched off on this host, for every process (sysctls, lockdown). */
static const char *host_switched_off(const char *probe)
{
	bool kexec = !strncmp(probe, "kernel.kexec", 12), mod = strstr(probe, "_module") != NULL;
	if (kexec && file_has("/proc/sys/kernel/kexec_load_disabled", "1"))
		return "kexec switched off (kernel.kexec_load_disabled)";
	if (!strcmp(probe, "kernel.kexec_load") &&
	    (file_has("/sys/kernel/security/lockdown", "[integrity]") ||
	     file_has("/sys/kernel/security/lockdown", "[confidentiality]")))
		return "kexec_load switched off (lockdown)";
	if (mod && file_has("/proc/sys/kernel/modules_disabled", "1"))
		return "module loading switched off (kernel.modules_disabled)";
	if (!strcmp(probe, "kernel.io_uring") &&
	    file_has("/proc/sys/kernel/io_uring_disabled", "2"))
		return "io_uring switched off (kernel.io_uring_disabled)";
	if (!strcmp(probe, "info.kallsyms") && file_has("/proc/sys/kernel/kptr_restrict", "2"))
		return "kernel addresses hidden from everyone (kernel.kptr_restrict=2)";
	if ((!strcmp(probe, "fs.sys_write") || !strcmp(probe, "fs.block_device")) &&
	    dir_empty("/sys/block"))
		return "no block device";
	return NULL;
}

/*
 * What this host itself lacks for the probe to have anything to escape to (a facility its
 * kernel was built without, a file it does not have, a route it does not have): then the probe
 * is n/a everywhere on this host, whatever a sandbox reports (inside, a missing facility and a
 * filter's ENOSYS look the same). NULL when the host has it.
 */
static const char *host_lacks(struct ladder_env *e, const char *probe)
{
	static const struct {
		const char *probe, *path, *why;
	} files[] = {
	    {"fs.proc_sysrq", "/proc/sysrq-trigger", "no /proc/sysrq-trigger (CONFIG_MAGIC_SYSRQ)"},
	    {"fs.proc_sys_kernel", "/proc/sys/kernel/modprobe",
	     "no kernel.modprobe (CONFIG_MODULES)"},
	    {"fs.dev_mem", "/dev/mem", "no /dev/mem"},
	    {"kernel.kexec_file_load", "/sys/kernel/kexec_loaded", "no kexec (CONFIG_KEXEC)"},
	    {"kernel.kexec_load", "/sys/kernel/kexec_loaded", "no kexec (CONFIG_KEXEC)"},
	    {"kernel.init_module", "/proc/modules", "no loadable modules (CONFIG_MODULES)"},
	    {"kernel.finit_module", "/proc/modules", "no loadable modules (CONFIG_MODULES)"},
	    {"kernel.delete_module", "/proc/modules", "no loadable modules (CONFIG_MODULES)"},
	    {"vm.dev_kvm", "/dev/kvm", "no /dev/kvm"},
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (!strcmp(probe, files[i].probe) && access(files[i].path, F_OK) < 0)
			return files[i].why;
	const char *off = host_switched_off(probe);
	if (off)
		return off;
	if (!strcmp(probe, "kernel.af_alg") && !host_family(AF_ALG, SOCK_SEQPACKET))
		return "no AF_ALG (CONFIG_CRYPTO_USER_API)";
	if (!strcmp(probe, "kernel.af_vsock") && !host_family(AF_VSOCK, SOCK_STREAM))
		return "no AF_VSOCK (CONFIG_VSOCKETS)";
	if (!strcmp(probe, "kernel.i386_abi") && !e->has_ia32)
		return "no 32-bit syscall ABI (CONFIG_IA32_EMULATION)";
	if (!strcmp(probe, "res.nofile") && prctl(PR_CAPBSET_READ, CAP_SYS_RESOURCE, 0, 0, 0) != 1)
		return "no CAP_SYS_RESOURCE even for root (its bounding set)";
	if (!strcmp(probe, "net.loopback_tcp6") && e->tcp6_fd < 0)
		return "no ::1";
	if (!strcmp(probe, "net.icmp") && e->icmp_fd < 0)
		return "no raw ICMP socket for the ladder's recorder";
	if (!strcmp(probe, "net.dns_other") && e->dns_fd < 0)
		return "no loopback address the ladder's resolver could bind";
	if (!strcmp(probe, "info.cgroup_names") && !e->cgroup_marker[0])
		return "no cgroup the ladder could make";
	if (!strcmp(probe, "net.host_interfaces") && !e->ifnames[0])
		return "no interface but lo";
	static const struct {
		const char *probe, *ip;
		int dom;
	} routes[] = {{"net.route_metadata", "169.254.169.254", AF_INET},
		      {"net.route_metadata_alibaba", "100.100.100.200", AF_INET},
		      {"net.route_azure_wireserver", "168.63.129.16", AF_INET},
		      {"net.route_external", "192.0.2.1", AF_INET},
		      {"net.route_ipv6", "2001:db8::1", AF_INET6}};
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		if (!strcmp(probe, routes[i].probe) && !host_route(routes[i].dom, routes[i].ip))
			return "no such route from the host itself";
	return NULL;
}

void ladder_env_verify(struct ladder_env *e, const char *probe, char *result, size_t rn,
		       char *evidence, size_t en)
{
	const char *lack = host_lacks(e, probe);
	if (lack) {
		snprintf(result, rn, "n/a");
		snprintf(evidence, en, "this host has %s", lack);
		return;
	}
	bool sib = !strcmp(probe, "ipc.sibling_signal") || !strcmp(probe, "net.sibling_tcp");
	if ((sib || !strcmp(probe, "ipc.sibling_proc")) && !e->sib_comm[0]) {
		snprintf(result, rn, "n/a");
		snprintf(evidence, en, "no sibling: %s", e->sib_why[0] ? e->sib_why : "none started");
		return;
	}
	if (!strcmp(result, "n/a"))
		return;
	int saw = sib ? ladder_sibling_saw(e, probe) : host_saw(e, probe, evidence);
	if (saw < 0)
		return;
	bool claimed = !strcmp(result, "escaped");
	snprintf(result, rn, "%s", saw ? "escaped" : "blocked");
	if (saw) {
		char tmp[800];
		snprintf(tmp, sizeof(tmp), "host saw it: %s", evidence);
		snprintf(evidence, en, "%s", tmp);
	} else if (claimed) {
		char tmp[800];
		snprintf(tmp, sizeof(tmp), "the host saw no effect (the probe said: %s)", evidence);
		snprintf(evidence, en, "%s", tmp);
	}
}
