/* probe/priv.c: privileges (capabilities, no_new_privs, setuid, uid mapping) and information
 * the host leaks (hostname, kernel command line, kallsyms, dmesg, cgroup names, mounts). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/securebits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "probe/probe.h"

static void cap_line(struct probe_out *o, const char *key)
{
	char buf[4096];
	long n = probe_read("/proc/self/status", buf, sizeof(buf));
	if (n < 0)
		return probe_na(o, "/proc/self/status: %s", strerror((int)-n));
	const char *p = strstr(buf, key);
	if (!p)
		return probe_na(o, "no %s in /proc/self/status", key);
	unsigned long long v = strtoull(p + strlen(key), NULL, 16);
	if (v)
		return probe_escaped(o, "%s %016llx", key, v);
	probe_blocked(o, 0, "%s 0", key);
}

static void cap_eff(const struct probe_ctx *c, struct probe_out *o) { cap_line(o, "CapEff:"); }

static void cap_prm(const struct probe_ctx *c, struct probe_out *o) { cap_line(o, "CapPrm:"); }

static void cap_bnd(const struct probe_ctx *c, struct probe_out *o) { cap_line(o, "CapBnd:"); }

static void cap_amb(const struct probe_ctx *c, struct probe_out *o) { cap_line(o, "CapAmb:"); }

static void no_new_privs(const struct probe_ctx *c, struct probe_out *o)
{
	int v = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	if (v == 1)
		return probe_blocked(o, 0, "no_new_privs is set");
	probe_escaped(o, "no_new_privs is off: an exec may gain privileges");
}

/* A setuid-root program on a mount without nosuid, with no_new_privs off: a way up. */
static void setuid_binary(const struct probe_ctx *c, struct probe_out *o)
{
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1)
		return probe_blocked(o, 0, "no_new_privs is set: setuid bits do nothing");
	static const char *const dirs[] = {"/usr/bin", "/bin", "/usr/sbin", "/sbin"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		DIR *d = opendir(dirs[i]);
		struct dirent *e;
		struct statvfs vs;
		if (!d)
			continue;
		if (statvfs(dirs[i], &vs) == 0 && (vs.f_flag & ST_NOSUID)) {
			closedir(d);
			continue;
		}
		while ((e = readdir(d))) {
			char p[512];
			struct stat st;
			snprintf(p, sizeof(p), "%s/%s", dirs[i], e->d_name);
			if (lstat(p, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & S_ISUID) &&
			    st.st_uid == 0 && (st.st_mode & S_IXOTH)) {
				closedir(d);
				return probe_escaped(o, "%s is setuid root on a suid mount", p);
			}
		}
		closedir(d);
	}
	probe_blocked(o, 0, "no setuid-root program on a suid mount");
}

/* Root of the initial user namespace: euid 0 and the identity map of every uid. Its
 * namespace's inode goes in the evidence; the ladder checks that it is the host's own. */
static bool init_root(char *ns, size_t n)
{
	char buf[256];
	unsigned long in = 1, out = 1, cnt = 0;
	ssize_t k = readlink("/proc/self/ns/user", ns, n - 1);
	ns[k > 0 ? k : 0] = '\0';
	if (probe_read("/proc/self/uid_map", buf, sizeof(buf)) < 0 ||
	    sscanf(buf, "%lu %lu %lu", &in, &out, &cnt) != 3)
		return false;
	return geteuid() == 0 && in == 0 && out == 0 && cnt == 4294967295UL;
}

static void uid_host_root(const struct probe_ctx *c, struct probe_out *o)
{
	char ns[64];
	if (init_root(ns, sizeof(ns)))
		return probe_escaped(o, "userns=%s", ns);
	probe_blocked(o, 0, "euid %u in %s is not the root of the initial user namespace",
		      geteuid(), ns);
}

static void securebits(const struct probe_ctx *c, struct probe_out *o)
{
	char ns[64];
	int sb = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	if (!init_root(ns, sizeof(ns)))
		return probe_blocked(o, 0,
				     "not root of the initial user namespace (securebits %#x)", sb);
	if (sb >= 0 && (sb & SECBIT_NOROOT))
		return probe_blocked(o, 0, "SECBIT_NOROOT is set (%#x)", sb);
	probe_escaped(o, "userns=%s", ns);
}

static void hostname(const struct probe_ctx *c, struct probe_out *o)
{
	struct utsname u;
	uname(&u);
	probe_escaped(o, "nodename=%s", u.nodename); /* the ladder compares with the host's */
}

static void cmdline(const struct probe_ctx *c, struct probe_out *o)
{
	char buf[4096];
	long n = probe_read("/proc/cmdline", buf, sizeof(buf));
	if (n < 0)
		return probe_blocked(o, (int)-n, "/proc/cmdline: %s", strerror((int)-n));
	buf[strcspn(buf, "\n")] = '\0';
	buf[200] = '\0'; /* the ladder compares this much with the host's */
	probe_escaped(o, "cmdline=%s", buf);
}

static void kallsyms(const struct probe_ctx *c, struct probe_out *o)
{
	char buf[256];
	long n = probe_read("/proc/kallsyms", buf, sizeof(buf));
	if (n < 0)
		return probe_blocked(o, (int)-n, "/proc/kallsyms: %s", strerror((int)-n));
	unsigned long long a = strtoull(buf, NULL, 16);
	if (!a)
		return probe_blocked(o, 0, "/proc/kallsyms shows zeroed addresses");
	probe_escaped(o, "kernel address %llx", a);
}

static void dmesg(const struct probe_ctx *c, struct probe_out *o)
{
	char buf[256];
	int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, sizeof(buf) - 1);
	if (n < 0)
		return probe_blocked(o, errno, "syslog(READ_ALL): %s", strerror(errno));
	if (n == 0)
		return probe_blocked(o, 0, "the kernel log reads empty");
	probe_escaped(o, "read %d bytes of the kernel log", n);
}

/* A "rung-ladder-*" entry of dir in found: 2 when it is this run's own (want), 1 another run's
 * (kept only while found is empty: another tenant all the same), 0 none, -errno. */
static int scan_cgroups(const char *dir, const char *want, char *found, size_t n)
{
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	struct dirent *e;
	int r = 0;
	while (r < 2 && (e = readdir(d))) {
		if (!strstr(e->d_name, "rung-ladder-"))
			continue;
		bool own = strstr(e->d_name, want) != NULL;
		if (own || !found[0])
			snprintf(found, n, "%s/%s", dir, e->d_name);
		r = own ? 2 : 1;
	}
	closedir(d);
	return r;
}

static void cgroup_names(const struct probe_ctx *c, struct probe_out *o)
{
	char found[512] = "", want[40];
	snprintf(want, sizeof(want), "rung-ladder-%.16s", c->token);
	int r = scan_cgroups("/sys/fs/cgroup", want, found, sizeof(found));
	if (r < 0)
		return probe_blocked(o, -r, "/sys/fs/cgroup: %s", strerror(-r));
	static const char *const v1[] = {"/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory",
					 "/sys/fs/cgroup/unified"};
	for (size_t i = 0; r < 2 && i < sizeof(v1) / sizeof(v1[0]); i++) {
		int k = scan_cgroups(v1[i], want, found, sizeof(found));
		r = k > r ? k : r;
	}
	if (r > 0)
		return probe_escaped(o, "saw %s", found);
	probe_blocked(o, 0, "no other tenant's cgroup is visible");
}

static void host_mounts(const struct probe_ctx *c, struct probe_out *o)
{
	char buf[65536];
	long n = probe_read("/proc/self/mountinfo", buf, sizeof(buf));
	if (n < 0)
		return probe_blocked(o, (int)-n, "mountinfo: %s", strerror((int)-n));
	const char *p = c->state_dir[0] ? strstr(buf, c->state_dir) : NULL;
	if (!p)
		p = strstr(buf, c->host_dir);
	if (!p)
		return probe_blocked(o, 0,
				     "mountinfo names no host path of rung's or the ladder's");
	const char *s = p;
	while (s > buf && s[-1] != '\n')
		s--;
	probe_escaped(o, "mountinfo: %.*s", (int)strcspn(s, "\n"), s);
}

static void shared_kernel(const struct probe_ctx *c, struct probe_out *o)
{
	char buf[512];
	long n = probe_read("/proc/version", buf, sizeof(buf));
	if (n < 0) {
		struct utsname u;
		uname(&u);
		snprintf(buf, sizeof(buf), "%s %s %s", u.sysname, u.release, u.version);
	}
	buf[strcspn(buf, "\n")] = '\0';
	probe_escaped(o, "version=%s", buf); /* the ladder compares with the host's */
}

static void dev_kvm(const struct probe_ctx *c, struct probe_out *o)
{
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return probe_blocked(o, errno, "open /dev/kvm: %s", strerror(errno));
	close(fd);
	probe_escaped(o, "opened /dev/kvm");
}

/* Inside, nothing to see: the ladder checks the VMM from the host (cli/ladder-vmm.c). */
static void vmm_jail(const struct probe_ctx *c, struct probe_out *o)
{
	(void)c;
	probe_na(o, "the VMM is checked on the host, by the ladder");
}

const struct probe probes_priv[] = {
    {"priv.cap_effective", "privileges", "an effective capability", cap_eff},
    {"priv.cap_permitted", "privileges", "a permitted capability", cap_prm},
    {"priv.cap_bounding", "privileges", "a capability in the bounding set", cap_bnd},
    {"priv.cap_ambient", "privileges", "an ambient capability", cap_amb},
    {"priv.no_new_privs", "privileges", "no_new_privs is off", no_new_privs},
    {"priv.setuid_binary", "privileges", "a usable setuid-root program", setuid_binary},
    {"priv.uid_host_root", "privileges", "the probe's uid is the host's root", uid_host_root},
    {"priv.securebits", "privileges", "host root without SECBIT_NOROOT", securebits},
    {NULL, NULL, NULL, NULL},
};

const struct probe probes_info[] = {
    {"info.hostname", "information", "the host's hostname", hostname},
    {"info.cmdline", "information", "the host kernel's command line", cmdline},
    {"info.kallsyms", "information", "kernel symbol addresses", kallsyms},
    {"info.dmesg", "information", "the kernel log", dmesg},
    {"info.cgroup_names", "information", "another tenant's cgroup name", cgroup_names},
    {"info.host_mounts", "information", "host paths of rung's in mountinfo", host_mounts},
    {"vm.shared_kernel", "vm", "the host's kernel (same /proc/version)", shared_kernel},
    {"vm.dev_kvm", "vm", "/dev/kvm opens inside", dev_kvm},
    {"vm.vmm_jail", "vm", "the VMM lacks its seccomp filter or its jail (checked on the host)",
     vmm_jail},
    {NULL, NULL, NULL, NULL},
};
