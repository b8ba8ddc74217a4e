/* agent/vm-init.c: rung-agent as pid 1 of a vm-rung guest (see vm-init.h). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "agent/vm-init.h"
#include "common/util.h"

#define NEWROOT "/rung/root"
#define LOWER "/rung/lower"
#define UPPER "/rung/upper"
#define CMDLINE_MAX 4096

static const char *const env_defaults[][2] = {
	{ "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" },
	{ "HOME", "/root" },
	{ "LANG", "C.UTF-8" },
};

/* Dirty pages reach the upper disk within ~1 s instead of 30 s. */
static const char *const sysctls[][2] = {
	{ "/proc/sys/vm/dirty_expire_centisecs", "100" },
	{ "/proc/sys/vm/dirty_writeback_centisecs", "100" },
};

/* Device paths and fs types go into mount(2) and overlay options: keep them plain. */
static int plain_word(const char *s, const char *extra)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || strchr(extra, *s)))
			return 0;
	return 1;
}

static int set_str(char *dst, size_t cap, const char *key, const char *val, const char *extra,
		   struct rung_err *err)
{
	if (strlen(val) >= cap || !plain_word(val, extra))
		return rung_err_set(err, EINVAL, "kernel command line: bad value for %s: '%.64s'",
				    key, val);
	strcpy(dst, val);
	return 0;
}

static int set_u32(uint32_t *dst, const char *key, const char *val, uint64_t min, uint64_t max,
		   struct rung_err *err)
{
	uint64_t v;
	if (rung_parse_u64(val, &v) < 0 || v < min || v > max)
		return rung_err_set(err, EINVAL,
				    "kernel command line: %s must be %llu..%llu, got '%.32s'", key,
				    (unsigned long long)min, (unsigned long long)max, val);
	*dst = (uint32_t)v;
	return 0;
}

static int dev_path(char *dst, const char *key, const char *val, struct rung_err *err)
{
	if (strncmp(val, "/dev/", 5) != 0 || strstr(val, ".."))
		return rung_err_set(err, EINVAL, "kernel command line: %s must be a /dev/ path, got '%.64s'",
				    key, val);
	return set_str(dst, AGENT_VM_PATH_MAX, key, val, "/_-", err);
}

static int apply_key(struct agent_vm_opts *o, const char *key, const char *val,
		     struct rung_err *err)
{
	if (!val)
		return rung_err_set(err, EINVAL, "kernel command line: %s needs a value", key);
	if (!strcmp(key, "rung.root"))
		return dev_path(o->root_dev, key, val, err);
	if (!strcmp(key, "rung.upper")) {
		if (!strcmp(val, "tmpfs")) {
			o->upper_dev[0] = '\0';
			return 0;
		}
		return dev_path(o->upper_dev, key, val, err);
	}
	if (!strcmp(key, "rung.fstype"))
		return set_str(o->fstype, sizeof(o->fstype), key, val, "", err);
	if (!strcmp(key, "rung.hostname"))
		return set_str(o->hostname, sizeof(o->hostname), key, val, ".-", err);
	if (!strcmp(key, "rung.port"))
		return set_u32(&o->port, key, val, 1, UINT32_MAX - 1, err);
	if (!strcmp(key, "rung.wait_ms"))
		return set_u32(&o->wait_ms, key, val, 0, 600000, err);
	if (!strcmp(key, "rung.pids"))
		return set_u32(&o->pids, key, val, 8, 1000000, err);
	if (!strcmp(key, "rung.cpu_quota"))
		return set_u32(&o->cpu_quota, key, val, 1000, 400000, err);
	if (!strcmp(key, "rung.privileged")) {
		if (strcmp(val, "1"))
			return rung_err_set(err, EINVAL,
					    "kernel command line: rung.privileged takes only 1");
		o->privileged = true;
		return 0;
	}
	if (!strcmp(key, "rung.dns")) {
		struct in_addr a;
		if (strlen(val) >= sizeof(o->dns) || inet_pton(AF_INET, val, &a) != 1)
			return rung_err_set(err, EINVAL,
					    "kernel command line: rung.dns must be an IPv4 address, "
					    "got '%.32s'", val);
		strcpy(o->dns, val);
		return 0;
	}
	if (!strcmp(key, "rung.search")) {
		size_t n = 1;
		for (const char *c = val; *c; c++)
			n += *c == ',';
		if (n > AGENT_VM_SEARCH_DOMAINS || strstr(val, ",,") || val[0] == ',')
			return rung_err_set(err, EINVAL, "kernel command line: rung.search takes at "
					    "most %d domains, got '%.64s'", AGENT_VM_SEARCH_DOMAINS,
					    val);
		return set_str(o->search, sizeof(o->search), key, val, ".-_,", err);
	}
	if (!strcmp(key, "rung.dnsopt"))
		return set_str(o->dnsopt, sizeof(o->dnsopt), key, val, ".-_:,", err);
	return rung_err_set(err, EINVAL, "kernel command line: unknown key %.64s", key);
}

int agent_vm_opts_parse(const char *cmdline, struct agent_vm_opts *o, struct rung_err *err)
{
	memset(o, 0, sizeof(*o));
	strcpy(o->root_dev, "/dev/vda");
	strcpy(o->upper_dev, "/dev/vdb");
	strcpy(o->fstype, "ext4");
	strcpy(o->hostname, "rung");
	o->port = AGENT_VM_PORT;
	o->wait_ms = 5000;
	if (!cmdline)
		return 0;
	if (strlen(cmdline) > CMDLINE_MAX)
		return rung_err_set(err, E2BIG, "kernel command line longer than %d bytes",
				    CMDLINE_MAX);
	char buf[CMDLINE_MAX + 1];
	strcpy(buf, cmdline);
	char *save = NULL;
	for (char *w = strtok_r(buf, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save)) {
		if (strncmp(w, "rung.", 5) != 0)
			continue; /* the kernel's and rung-vmm's own parameters */
		char *eq = strchr(w, '=');
		if (eq)
			*eq = '\0';
		int r = apply_key(o, w, eq ? eq + 1 : NULL, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static struct agent_vm_step *add(struct agent_vm_plan *p, enum agent_vm_step_kind kind,
				 const char *source, const char *target)
{
	if (p->n >= AGENT_VM_STEPS_MAX)
		return NULL;
	struct agent_vm_step *s = &p->steps[p->n++];
	memset(s, 0, sizeof(*s));
	s->kind = kind;
	snprintf(s->source, sizeof(s->source), "%s", source ? source : "");
	snprintf(s->target, sizeof(s->target), "%s", target ? target : "");
	return s;
}

static struct agent_vm_step *add_mkdir(struct agent_vm_plan *p, const char *target, unsigned mode)
{
	struct agent_vm_step *s = add(p, AGENT_VM_MKDIR, NULL, target);
	if (s)
		s->mode = mode;
	return s;
}

static struct agent_vm_step *add_mount(struct agent_vm_plan *p, const char *source,
				       const char *target, const char *fstype,
				       unsigned long flags, const char *data)
{
	if (!add_mkdir(p, target, 0755))
		return NULL;
	struct agent_vm_step *s = add(p, AGENT_VM_MOUNT, source, target);
	if (s) {
		snprintf(s->fstype, sizeof(s->fstype), "%s", fstype);
		s->flags = flags;
		snprintf(s->data, sizeof(s->data), "%s", data ? data : "");
	}
	return s;
}

int agent_vm_resolv_fd = -1;

char agent_vm_resolv_search[AGENT_VM_SEARCH_MAX + 1];
char agent_vm_resolv_dnsopt[AGENT_VM_DNSOPT_MAX + 1];

/* "word word ...": a comma-separated list's words, after prefix, on a line; "" none. */
static void list_line(char *out, size_t cap, const char *prefix, const char *list)
{
	out[0] = '\0';
	if (!list || !list[0])
		return;
	snprintf(out, cap, "%s %s\n", prefix, list);
	for (char *c = out; *c; c++)
		if (*c == ',')
			*c = ' ';
}

void agent_vm_resolv_text(char *out, size_t cap, const char *dns, const char *search,
			  const char *dnsopt)
{
	/* the host's choice (rung.dns): the egress proxy, or with an open allowlist (0.0.0.0/0)
	 * the upstream resolver itself; the pod's search domains and options after rung's (a
	 * later option wins) */
	char s[AGENT_VM_SEARCH_MAX + 16], o[AGENT_VM_DNSOPT_MAX + 16];
	list_line(s, sizeof(s), "search", search);
	list_line(o, sizeof(o), "options", dnsopt);
	snprintf(out, cap, "# rung: the sandbox's resolver, as its egress allowlist admits\n"
		 "nameserver %s\n%soptions attempts:2 timeout:2\n%s", dns, s, o);
}

int agent_vm_plan_build(const struct agent_vm_opts *o, struct agent_vm_plan *p,
			struct rung_err *err)
{
	static const char *const moved[] = { "/proc", "/sys", "/dev" };
	static const char *const proc_ro[] = { NEWROOT "/proc/sys", NEWROOT "/proc/sysrq-trigger" };
	const unsigned long nosuid_nodev = MS_NOSUID | MS_NODEV;
	struct rung_err e2;
	struct agent_vm_opts chk;

	memset(p, 0, sizeof(*p));
	p->wait_ms = o->wait_ms;
	/* Re-validate: a hand-built opts gets the same checks as a parsed one. */
	char line[1024];
	snprintf(line, sizeof(line),
		 "rung.root=%s rung.upper=%s rung.fstype=%s rung.hostname=%s%s%s%s%s%s%s", o->root_dev,
		 o->upper_dev[0] ? o->upper_dev : "tmpfs", o->fstype, o->hostname,
		 o->dns[0] ? " rung.dns=" : "", o->dns, o->search[0] ? " rung.search=" : "",
		 o->search, o->dnsopt[0] ? " rung.dnsopt=" : "", o->dnsopt);
	if (agent_vm_opts_parse(line, &chk, &e2) < 0)
		return rung_err_set(err, EINVAL, "vm plan: %s", e2.msg);
	if (strcmp(chk.search, o->search) || strcmp(chk.dnsopt, o->dnsopt)) /* a blank split */
		return rung_err_set(err, EINVAL, "vm plan: bad search domains or dns options");

	/* /proc is mounted by agent_vm_init() before the plan (it reads /proc/cmdline). */
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(sysctls); i++) {
		struct agent_vm_step *w = add(p, AGENT_VM_WRITE, NULL, sysctls[i][0]);
		if (w)
			snprintf(w->data, sizeof(w->data), "%s", sysctls[i][1]);
	}
	/* Read-only: the command runs as uid 0 without capabilities (agent/privs.c), and many
	 * root-owned kernel knobs check nothing but the file mode. */
	add_mount(p, "sysfs", "/sys", "sysfs", nosuid_nodev | MS_NOEXEC | MS_RDONLY, NULL);
	struct agent_vm_step *dev = add_mount(p, "devtmpfs", "/dev", "devtmpfs", MS_NOSUID,
					      "mode=0755");
	if (dev)
		dev->ebusy_ok = 1;
	add(p, AGENT_VM_WAIT, NULL, o->root_dev);
	if (o->upper_dev[0])
		add(p, AGENT_VM_WAIT, NULL, o->upper_dev);
	/* The image: read-only, shared by every sandbox of that image. */
	add_mount(p, o->root_dev, LOWER, o->fstype, MS_RDONLY, NULL);
	/* The sandbox's own disk: upper and work dirs of the overlay, persistent. */
	/*
	 * mkdisk.sh makes the upper with lazy inode tables: do not zero them from the guest.
	 * commit=1 (and the 1 s writeback below) bound what an unclean VM stop can lose.
	 */
	if (o->upper_dev[0])
		add_mount(p, o->upper_dev, UPPER, o->fstype, 0,
			  !strcmp(o->fstype, "ext4") ? "noinit_itable,commit=1" : NULL);
	else
		add_mount(p, "tmpfs", UPPER, "tmpfs", 0, "mode=0755");
	add_mkdir(p, UPPER "/upper", 0755);
	add_mkdir(p, UPPER "/work", 0755);
	add_mount(p, "overlay", NEWROOT, "overlay", 0,
		  "lowerdir=" LOWER ",upperdir=" UPPER "/upper,workdir=" UPPER "/work");
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(moved); i++) {
		char t[AGENT_VM_PATH_MAX];
		snprintf(t, sizeof(t), NEWROOT "%s", moved[i]);
		add_mkdir(p, t, 0755);
		add(p, AGENT_VM_MOVE, moved[i], t);
	}
	/* Likewise /proc/sys (kernel.core_pattern would run a helper as full root) and
	 * /proc/sysrq-trigger (which kills every process but init). */
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(proc_ro); i++) {
		struct agent_vm_step *b = add(p, AGENT_VM_MOUNT, proc_ro[i], proc_ro[i]);
		struct agent_vm_step *ro = add(p, AGENT_VM_MOUNT, "none", proc_ro[i]);
		if (b && ro) {
			b->flags = MS_BIND;
			ro->flags = MS_BIND | MS_REMOUNT | MS_RDONLY | nosuid_nodev | MS_NOEXEC;
		}
	}
	add_mount(p, "devpts", NEWROOT "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620");
	add_mount(p, "shm", NEWROOT "/dev/shm", "tmpfs", nosuid_nodev, "mode=1777");
	add_mkdir(p, NEWROOT "/tmp", 01777);
	add_mkdir(p, NEWROOT "/root", 0700);
	if (o->dns[0]) {
		/* The sandbox's only resolver, the egress proxy: a file in the initramfs, bound
		 * read-only over the image's /etc/resolv.conf (which the guest kernel configured
		 * eth0 for, from rung-vmm's ip= parameter). */
		struct agent_vm_step *f = add(p, AGENT_VM_CREATE, NULL, "/resolv.conf");
		if (f) {
			agent_vm_resolv_text(f->data, sizeof(f->data), o->dns, o->search,
					     o->dnsopt);
			f->keep_fd = 1;
		}
		add_mkdir(p, NEWROOT "/etc", 0755);
		add(p, AGENT_VM_TOUCH, NULL, NEWROOT "/etc/resolv.conf");
		add_mount(p, "/resolv.conf", NEWROOT "/etc/resolv.conf", "", MS_BIND, NULL);
		add_mount(p, "none", NEWROOT "/etc/resolv.conf", "",
			  MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	}
	if (!add(p, AGENT_VM_SWITCH, NULL, NEWROOT))
		return rung_err_set(err, E2BIG, "vm plan: more than %d steps", AGENT_VM_STEPS_MAX);
	return 0;
}

static int wait_for(const char *path, uint32_t wait_ms, struct rung_err *err)
{
	uint64_t deadline = rung_now_ms() + wait_ms;
	struct stat st;
	while (stat(path, &st) < 0) {
		if (errno != ENOENT)
			return rung_err_sys(err, errno, "stat %s", path);
		if (rung_now_ms() >= deadline)
			return rung_err_set(err, ENODEV, "%s did not appear within %u ms", path,
					    wait_ms);
		nanosleep(&(struct timespec){ .tv_nsec = 2 * 1000 * 1000 }, NULL);
	}
	return 0;
}

static int apply_step(const struct agent_vm_step *s, uint32_t wait_ms, struct rung_err *err)
{
	switch (s->kind) {
	case AGENT_VM_MKDIR:
		if (mkdir(s->target, s->mode) < 0 && errno != EEXIST)
			return rung_err_sys(err, errno, "mkdir %s", s->target);
		if (s->mode & 07000) /* mkdir(2) honours the umask and may drop sticky bits */
			(void)chmod(s->target, s->mode);
		return 0;
	case AGENT_VM_MOUNT:
		if (mount(s->source, s->target, s->fstype, s->flags, s->data[0] ? s->data : NULL) < 0) {
			if (errno == EBUSY && s->ebusy_ok)
				return 0;
			return rung_err_sys(err, errno, "mount %s on %s (%s, %s)", s->source,
					    s->target, s->fstype, s->data);
		}
		return 0;
	case AGENT_VM_WAIT:
		return wait_for(s->target, wait_ms, err);
	case AGENT_VM_MOVE:
		if (mount(s->source, s->target, NULL, MS_MOVE, NULL) < 0)
			return rung_err_sys(err, errno, "mount --move %s %s", s->source, s->target);
		return 0;
	case AGENT_VM_WRITE: {
		cleanup_close int fd = open(s->target, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return rung_err_sys(err, errno, "open %s", s->target);
		int r = rung_write_all(fd, s->data, strlen(s->data));
		if (r < 0)
			return rung_err_sys(err, -r, "write %s", s->target);
		return 0;
	}
	case AGENT_VM_CREATE:
	case AGENT_VM_TOUCH: {
		int fl = (s->keep_fd ? O_RDWR : O_WRONLY) | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
		cleanup_close int fd = open(s->target, fl | (s->kind == AGENT_VM_CREATE ? O_TRUNC : 0),
					    0644);
		if (fd < 0 && errno == ELOOP) { /* a symlink (maybe dangling): a file instead */
			if (unlink(s->target) < 0)
				return rung_err_sys(err, errno, "unlink %s", s->target);
			fd = open(s->target, fl, 0644);
		}
		if (fd < 0)
			return rung_err_sys(err, errno, "create %s", s->target);
		int r = rung_write_all(fd, s->data, strlen(s->data));
		if (r < 0)
			return rung_err_sys(err, -r, "write %s", s->target);
		if (s->keep_fd) {
			if (agent_vm_resolv_fd >= 0)
				close(agent_vm_resolv_fd);
			agent_vm_resolv_fd = rung_steal_fd(&fd);
		}
		return 0;
	}
	case AGENT_VM_SWITCH:
		/* The initramfs is rootfs and cannot be pivot_root'ed: move over it instead. */
		if (chdir(s->target) < 0)
			return rung_err_sys(err, errno, "chdir %s", s->target);
		if (mount(".", "/", NULL, MS_MOVE, NULL) < 0)
			return rung_err_sys(err, errno, "mount --move %s /", s->target);
		if (chroot(".") < 0)
			return rung_err_sys(err, errno, "chroot %s", s->target);
		if (chdir("/") < 0)
			return rung_err_sys(err, errno, "chdir / in %s", s->target);
		return 0;
	}
	return rung_err_set(err, EINVAL, "vm plan: bad step kind %d", (int)s->kind);
}

int agent_vm_plan_apply(const struct agent_vm_plan *p, struct rung_err *err)
{
	for (size_t i = 0; i < p->n; i++) {
		int r = apply_step(&p->steps[i], p->wait_ms, err);
		if (r < 0)
			return rung_err_wrap(err, "vm init step %zu", i);
	}
	return 0;
}

int agent_vm_listen(uint32_t port, struct rung_err *err)
{
	cleanup_close int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return rung_err_sys(err, errno, "socket(AF_VSOCK)");
	struct sockaddr_vm sa = {
		.svm_family = AF_VSOCK,
		.svm_cid = VMADDR_CID_ANY,
		.svm_port = port,
	};
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return rung_err_sys(err, errno, "bind vsock port %u", port);
	if (listen(fd, 64) < 0)
		return rung_err_sys(err, errno, "listen vsock port %u", port);
	return rung_steal_fd(&fd);
}

/*
 * Loopback up (the kernel gives it 127.0.0.1 and ::1): a guest without egress has no ip= on
 * its command line, whose autoconfiguration is what brings lo up otherwise, and a server a
 * background process starts on 127.0.0.1 must be reachable from a later exec.
 */
static int loopback_up(struct rung_err *err)
{
	cleanup_close int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return rung_err_sys(err, errno, "loopback: get flags");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		return rung_err_sys(err, errno, "loopback: up");
	return 0;
}

int agent_vm_init(int *listen_fd, bool *privileged, struct rung_err *err)
{
	uint64_t t0 = rung_now_us();
	struct agent_vm_opts o;
	struct agent_vm_plan plan;
	cleanup_free char *cmdline = NULL;
	int r;

	*listen_fd = -1;
	umask(022);
	if (mkdir("/proc", 0555) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir /proc");
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 &&
	    errno != EBUSY)
		return rung_err_sys(err, errno, "mount proc on /proc");
	if ((r = rung_file_load(AT_FDCWD, "/proc/cmdline", CMDLINE_MAX, &cmdline, NULL, err)) < 0)
		return r;
	if ((r = agent_vm_opts_parse(cmdline, &o, err)) < 0)
		return r;
	*privileged = o.privileged;
	memcpy(agent_vm_resolv_search, o.search, sizeof(o.search)); /* a restore's rewrite */
	memcpy(agent_vm_resolv_dnsopt, o.dnsopt, sizeof(o.dnsopt));
	if ((r = agent_vm_plan_build(&o, &plan, err)) < 0)
		return r;
	if ((r = agent_vm_cgroup_setup(o.pids, o.cpu_quota, err)) < 0) /* before the switch */
		return r;
	if ((r = agent_vm_plan_apply(&plan, err)) < 0)
		return r;
	if ((r = loopback_up(err)) < 0)
		return r;
	if (sethostname(o.hostname, strlen(o.hostname)) < 0)
		return rung_err_sys(err, errno, "sethostname %s", o.hostname);
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(env_defaults); i++)
		if (setenv(env_defaults[i][0], env_defaults[i][1], 1) < 0)
			return rung_err_sys(err, errno, "setenv %s", env_defaults[i][0]);
	unsetenv("TERM"); /* the kernel's TERM=linux describes the serial console, not exec */
	if ((r = agent_vm_listen(o.port, err)) < 0)
		return r;
	*listen_fd = r;
	LOG_INFO("vm init done in %llu us: root %s, upper %s, vsock port %u",
		 (unsigned long long)(rung_now_us() - t0), o.root_dev,
		 o.upper_dev[0] ? o.upper_dev : "tmpfs", o.port);
	return 0;
}
