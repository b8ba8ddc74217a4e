/*
 * runtime/mounts.c: a sandbox's root filesystem plan. rt_root_plan() is pure (unit-tested
 * without root); pid 1 applies it (common/root.c) in its own user and mount namespaces.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <linux/openat2.h>
#include <sys/syscall.h>

#include "runtime/rt-internal.h"

/* Host system entries a process-rung sandbox sees read-only (symlinks are replicated). */
static const char *const host_sys[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32",
				       "/libx32"};
/*
 * Host files under /etc bound into a process-rung sandbox: only ones that carry no secrets
 * (the README lists them). Never a site configuration a tool reads credentials or proxies
 * from: not /etc/pip.conf or /etc/xdg (pip's index URLs with tokens), /etc/profile or
 * /etc/bash.bashrc (exported proxies), /etc/ssl/private (keys). pip gets a pip.conf of ours.
 */
static const char *const host_etc[] = {
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/nsswitch.conf",
	"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates", "/etc/alternatives",
	"/etc/localtime", "/etc/mime.types", "/etc/python3", "/etc/python3.11", "/etc/protocols",
	"/etc/services", "/etc/debian_version", "/etc/os-release", "/etc/timezone"};
static const char etc_pip_conf[] = "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n";

static const char etc_passwd[] = "root:x:0:0:root:%s:/bin/sh\n"
				 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char etc_group[] = "root:x:0:\nnogroup:x:65534:\n";

int rt_root_plan(const struct rt_root_params *p, struct rung_mount_plan *out, struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	if (!p->work_dir || !rt_path_is_clean_abs(p->work_dir) || !strcmp(p->work_dir, "/"))
		return rung_err_set(err, EINVAL, "work_dir: must be an absolute path below /");
	static const char *const reserved[] = {"/proc", "/dev", "/sys", "/etc", "/usr", "/tmp",
					       "/bin", "/sbin", "/lib", "/lib64"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(reserved); i++) {
		size_t n = strlen(reserved[i]);
		if (!strncmp(p->work_dir, reserved[i], n) &&
		    (p->work_dir[n] == '\0' || p->work_dir[n] == '/'))
			return rung_err_set(err, EINVAL, "work_dir: %s is reserved for the system",
					    p->work_dir);
	}
	char opts[256], buf[512];
	int r = 0;
	bool work_last = false; /* work_late on a root built here: the bind waits, last */
#define ADD(...)                                                                               \
	do {                                                                                   \
		if ((r = rung_mount_plan_add(out, __VA_ARGS__)) < 0)                           \
			goto oom;                                                              \
	} while (0)
	if (p->root_mounted) {
		ADD(RUNG_M_MKDIR, NULL, p->work_dir, NULL, false);
	} else if (p->overlay_lowers) {
		/* overlayfs options: lowerdir=top:...:bottom,upperdir=...,workdir=... */
		size_t len = 0;
		for (size_t i = 0; p->overlay_lowers[i]; i++)
			len += strlen(p->overlay_lowers[i]) + 1;
		cleanup_free char *o = malloc(len + strlen(p->overlay_upper) +
					      strlen(p->overlay_work) + 64);
		if (!o)
			goto oom;
		char *w = o + sprintf(o, "lowerdir=");
		for (size_t i = 0; p->overlay_lowers[i]; i++)
			w += sprintf(w, "%s%s", i ? ":" : "", p->overlay_lowers[i]);
		sprintf(w, ",upperdir=%s,workdir=%s", p->overlay_upper, p->overlay_work);
		ADD(RUNG_M_OVERLAY, NULL, "/", o, false);
		ADD(RUNG_M_MKDIR, NULL, p->work_dir, NULL, false);
	} else {
		ADD(RUNG_M_TMPFS, NULL, "/", "mode=0755,size=16m", false);
		if (p->host_system)
			for (size_t i = 0; i < RUNG_ARRAY_SIZE(host_sys); i++)
				ADD(RUNG_M_BIND_RO, host_sys[i], host_sys[i], NULL, true);
		ADD(RUNG_M_MKDIR, NULL, "/etc", NULL, false);
		if (p->host_system)
			for (size_t i = 0; i < RUNG_ARRAY_SIZE(host_etc); i++)
				ADD(RUNG_M_BIND_RO, host_etc[i], host_etc[i], NULL, true);
		if (p->host_system)
			ADD(RUNG_M_FILE, etc_pip_conf, "/etc/pip.conf", NULL, false);
		snprintf(buf, sizeof(buf), etc_passwd, p->work_dir);
		ADD(RUNG_M_FILE, buf, "/etc/passwd", NULL, false);
		ADD(RUNG_M_FILE, etc_group, "/etc/group", NULL, false);
		work_last = p->work_late;
		if (!work_last)
			ADD(RUNG_M_BIND_RW, p->work_src, p->work_dir, NULL, false);
	}
	snprintf(buf, sizeof(buf), "127.0.0.1 localhost %s\n::1 localhost\n",
		 p->hostname ? p->hostname : "rung");
	ADD(RUNG_M_FILE, buf, "/etc/hosts", NULL, false);
	snprintf(buf, sizeof(buf), "%s\n", p->hostname ? p->hostname : "rung");
	ADD(RUNG_M_FILE, buf, "/etc/hostname", NULL, false);
	ADD(RUNG_M_FILE, p->resolv_conf ? p->resolv_conf : "", "/etc/resolv.conf", NULL, false);
	snprintf(opts, sizeof(opts), "mode=1777,size=%llu",
		 (unsigned long long)(p->tmp_bytes ? p->tmp_bytes : 64ull << 20));
	ADD(RUNG_M_TMPFS, NULL, "/tmp", opts, false);
	ADD(RUNG_M_DEV, NULL, "/dev", NULL, false);
	ADD(RUNG_M_PROC, NULL, "/proc", NULL, false);
	if (work_last) {
		ADD(RUNG_M_WAIT, NULL, p->work_dir, NULL, false);
		ADD(RUNG_M_BIND_RW, p->work_src, p->work_dir, NULL, false);
	}
#undef ADD
	return 0;
oom:
	rung_mount_plan_release(out);
	return rung_err_set(err, -r, "mount plan: out of memory");
}

