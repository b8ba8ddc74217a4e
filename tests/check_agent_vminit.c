/* tests/check_agent_vminit.c: agent/vm-init.c (the vm rung's guest bring-up). */
#include <check.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/vm-init.h"
#include "common/util.h"
#include "tests/lib/testutil.h"

static const struct agent_vm_step *find(const struct agent_vm_plan *p,
					enum agent_vm_step_kind kind, const char *target)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->steps[i].kind == kind && !strcmp(p->steps[i].target, target))
			return &p->steps[i];
	return NULL;
}

static size_t index_of(const struct agent_vm_plan *p, const struct agent_vm_step *s)
{
	return (size_t)(s - p->steps);
}

START_TEST(test_opts_defaults)
{
	struct agent_vm_opts o;
	struct rung_err err = { 0 };
	ck_assert_int_eq(agent_vm_opts_parse(NULL, &o, &err), 0);
	ck_assert_str_eq(o.root_dev, "/dev/vda");
	ck_assert_str_eq(o.upper_dev, "/dev/vdb");
	ck_assert_str_eq(o.fstype, "ext4");
	ck_assert_str_eq(o.hostname, "rung");
	ck_assert_uint_eq(o.port, AGENT_VM_PORT);
	ck_assert_uint_eq(o.wait_ms, 5000);
}
END_TEST

START_TEST(test_opts_cmdline)
{
	struct agent_vm_opts o;
	struct rung_err err = { 0 };
	const char *cl = "console=ttyS0 quiet panic=-1 virtio_mmio.device=4K@0xd0000000:5 "
			 "rung.upper=tmpfs rung.hostname=sb-1.local rung.port=2000 "
			 "rung.wait_ms=0 rung.root=/dev/vdc\n";
	ck_assert_int_eq(agent_vm_opts_parse(cl, &o, &err), 0);
	ck_assert_str_eq(o.root_dev, "/dev/vdc");
	ck_assert_str_eq(o.upper_dev, "");
	ck_assert_str_eq(o.hostname, "sb-1.local");
	ck_assert_uint_eq(o.port, 2000);
	ck_assert_uint_eq(o.wait_ms, 0);
	ck_assert(!o.privileged);
	ck_assert_uint_eq(o.pids, 0); /* no key: no command cgroup */
	ck_assert_int_eq(agent_vm_opts_parse("rung.privileged=1 rung.pids=32 rung.cpu_quota=50000",
					     &o, &err), 0);
	ck_assert(o.privileged);
	ck_assert_uint_eq(o.pids, 32);
	ck_assert_uint_eq(o.cpu_quota, 50000);
}
END_TEST

static void bad(const char *cl, const char *needle)
{
	struct agent_vm_opts o;
	struct rung_err err = { 0 };
	ck_assert_int_eq(agent_vm_opts_parse(cl, &o, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, needle), "'%s': message '%s' lacks '%s'", cl, err.msg,
		      needle);
}

START_TEST(test_opts_errors)
{
	bad("rung.bogus=1", "unknown key rung.bogus");
	bad("rung.privileged=yes", "rung.privileged takes only 1");
	bad("rung.root=/etc/passwd", "rung.root must be a /dev/ path");
	bad("rung.root=/dev/../etc/shadow", "rung.root");
	bad("rung.root=/dev/vda,upperdir=/x", "bad value for rung.root");
	bad("rung.upper=/dev/vdb:x", "bad value for rung.upper");
	bad("rung.fstype=ext4,errors=panic", "bad value for rung.fstype");
	bad("rung.hostname=a/b", "bad value for rung.hostname");
	bad("rung.hostname=", "bad value for rung.hostname");
	bad("rung.port=0", "rung.port must be");
	bad("rung.port=99999999999", "rung.port must be");
	bad("rung.wait_ms=-1", "rung.wait_ms must be");
	bad("rung.pids=7", "rung.pids must be 8..1000000");
	bad("rung.pids=1000001", "rung.pids must be 8..1000000");
	bad("rung.pids=max", "rung.pids must be 8..1000000");
	bad("rung.cpu_quota=999", "rung.cpu_quota must be 1000..400000");
	bad("rung.cpu_quota=400001", "rung.cpu_quota must be 1000..400000");
	bad("rung.port", "rung.port needs a value");
	bad("rung.dns=10.0.0.1;rm", "rung.dns must be an IPv4 address");
	bad("rung.dns=::1", "rung.dns must be an IPv4 address");
	bad("rung.dns=10.0.0.1.1", "rung.dns must be an IPv4 address");
	bad("rung.search=a,b,c,d,e,f,g", "at most 6 domains");
	bad("rung.search=a,,b", "at most 6 domains");
	bad("rung.search=svc.local;x", "bad value for rung.search");
	bad("rung.dnsopt=ndots:5/x", "bad value for rung.dnsopt");
	char longcl[5000];
	memset(longcl, 'a', sizeof(longcl) - 1);
	longcl[sizeof(longcl) - 1] = '\0';
	struct agent_vm_opts o;
	struct rung_err err = { 0 };
	ck_assert_int_eq(agent_vm_opts_parse(longcl, &o, &err), -E2BIG);
	ck_assert_ptr_nonnull(strstr(err.msg, "longer than"));
}
END_TEST

START_TEST(test_plan_disks)
{
	struct agent_vm_opts o;
	struct agent_vm_plan p;
	struct rung_err err = { 0 };
	ck_assert_int_eq(agent_vm_opts_parse("rung.wait_ms=250", &o, &err), 0);
	ck_assert_int_eq(agent_vm_plan_build(&o, &p, &err), 0);
	ck_assert_uint_eq(p.wait_ms, 250);

	const struct agent_vm_step *wa = find(&p, AGENT_VM_WAIT, "/dev/vda");
	const struct agent_vm_step *wb = find(&p, AGENT_VM_WAIT, "/dev/vdb");
	const struct agent_vm_step *lower = find(&p, AGENT_VM_MOUNT, "/rung/lower");
	const struct agent_vm_step *upper = find(&p, AGENT_VM_MOUNT, "/rung/upper");
	const struct agent_vm_step *ovl = find(&p, AGENT_VM_MOUNT, "/rung/root");
	ck_assert_ptr_nonnull(wa);
	ck_assert_ptr_nonnull(wb);
	ck_assert_ptr_nonnull(lower);
	ck_assert_ptr_nonnull(upper);
	ck_assert_ptr_nonnull(ovl);
	/* The image disk is shared by every sandbox: it must be mounted read-only. */
	ck_assert_str_eq(lower->source, "/dev/vda");
	ck_assert_str_eq(lower->fstype, "ext4");
	ck_assert(lower->flags & MS_RDONLY);
	ck_assert_str_eq(upper->source, "/dev/vdb");
	ck_assert(!(upper->flags & MS_RDONLY));
	ck_assert_str_eq(upper->data, "noinit_itable,commit=1");
	const struct agent_vm_step *wb_ = find(&p, AGENT_VM_WRITE, "/proc/sys/vm/dirty_expire_centisecs");
	ck_assert_ptr_nonnull(wb_);
	ck_assert_str_eq(wb_->data, "100");
	ck_assert_str_eq(ovl->fstype, "overlay");
	ck_assert_str_eq(ovl->data,
			 "lowerdir=/rung/lower,upperdir=/rung/upper/upper,workdir=/rung/upper/work");
	/* Order: wait before mounting, disks before the overlay, upper/work dirs in between. */
	ck_assert_uint_lt(index_of(&p, wa), index_of(&p, lower));
	ck_assert_uint_lt(index_of(&p, wb), index_of(&p, upper));
	const struct agent_vm_step *mk = find(&p, AGENT_VM_MKDIR, "/rung/upper/work");
	ck_assert_ptr_nonnull(mk);
	ck_assert_uint_lt(index_of(&p, upper), index_of(&p, mk));
	ck_assert_uint_lt(index_of(&p, mk), index_of(&p, ovl));
	/* /proc, /sys and /dev move into the new root before the switch, which is last. */
	static const char *const mv[] = { "/rung/root/proc", "/rung/root/sys", "/rung/root/dev" };
	for (size_t i = 0; i < 3; i++) {
		const struct agent_vm_step *m = find(&p, AGENT_VM_MOVE, mv[i]);
		ck_assert_msg(m != NULL, "no move to %s", mv[i]);
		ck_assert_uint_lt(index_of(&p, ovl), index_of(&p, m));
	}
	/* The command is uid 0 without capabilities: root-owned kernel knobs are read-only. */
	ck_assert(find(&p, AGENT_VM_MOUNT, "/sys")->flags & MS_RDONLY);
	static const char *const ro[] = { "/rung/root/proc/sys", "/rung/root/proc/sysrq-trigger" };
	for (size_t i = 0; i < 2; i++) {
		size_t bind = p.n, remount = p.n;
		for (size_t k = 0; k < p.n; k++) {
			if (p.steps[k].kind != AGENT_VM_MOUNT || strcmp(p.steps[k].target, ro[i]))
				continue;
			if (p.steps[k].flags == MS_BIND && !strcmp(p.steps[k].source, ro[i]))
				bind = k;
			else if (p.steps[k].flags & MS_REMOUNT)
				remount = k;
		}
		ck_assert_msg(bind < remount && remount < p.n, "%s is not bound read-only", ro[i]);
		ck_assert(p.steps[remount].flags & MS_RDONLY);
		ck_assert_uint_gt(bind, index_of(&p, find(&p, AGENT_VM_MOVE, mv[0])));
	}
	const struct agent_vm_step *pts = find(&p, AGENT_VM_MOUNT, "/rung/root/dev/pts");
	ck_assert_ptr_nonnull(pts);
	ck_assert_uint_gt(index_of(&p, pts), index_of(&p, find(&p, AGENT_VM_MOVE, mv[2])));
	ck_assert_int_eq(p.steps[p.n - 1].kind, AGENT_VM_SWITCH);
	ck_assert_str_eq(p.steps[p.n - 1].target, "/rung/root");
	const struct agent_vm_step *tmp = find(&p, AGENT_VM_MKDIR, "/rung/root/tmp");
	ck_assert_ptr_nonnull(tmp);
	ck_assert_uint_eq(tmp->mode, 01777);
	const struct agent_vm_step *dev = find(&p, AGENT_VM_MOUNT, "/dev");
	ck_assert_ptr_nonnull(dev);
	ck_assert_int_eq(dev->ebusy_ok, 1);
}
END_TEST

START_TEST(test_plan_tmpfs_upper)
{
	struct agent_vm_opts o;
	struct agent_vm_plan p;
	struct rung_err err = { 0 };
	ck_assert_int_eq(agent_vm_opts_parse("rung.upper=tmpfs", &o, &err), 0);
	ck_assert_int_eq(agent_vm_plan_build(&o, &p, &err), 0);
	ck_assert_ptr_null(find(&p, AGENT_VM_WAIT, "/dev/vdb"));
	const struct agent_vm_step *upper = find(&p, AGENT_VM_MOUNT, "/rung/upper");
	ck_assert_ptr_nonnull(upper);
	ck_assert_str_eq(upper->fstype, "tmpfs");
}
END_TEST

START_TEST(test_plan_rejects_bad_opts)
{
	struct agent_vm_opts o;
	struct agent_vm_plan p;
	struct rung_err err = { 0 };
	ck_assert_int_eq(agent_vm_opts_parse(NULL, &o, &err), 0);
	strcpy(o.root_dev, "/dev/vda,lowerdir=/");
	ck_assert_int_eq(agent_vm_plan_build(&o, &p, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "vm plan: "));
	ck_assert_ptr_nonnull(strstr(err.msg, "rung.root"));
}
END_TEST

START_TEST(test_apply_wait_timeout)
{
	struct agent_vm_plan p = { .n = 1, .wait_ms = 30 };
	p.steps[0].kind = AGENT_VM_WAIT;
	strcpy(p.steps[0].target, "/dev/rung-test-no-such-disk");
	struct rung_err err = { 0 };
	uint64_t t0 = rung_now_ms();
	ck_assert_int_eq(agent_vm_plan_apply(&p, &err), -ENODEV);
	ck_assert_uint_ge(rung_now_ms() - t0, 30);
	ck_assert_ptr_nonnull(strstr(err.msg, "vm init step 0"));
	ck_assert_ptr_nonnull(strstr(err.msg, "/dev/rung-test-no-such-disk did not appear"));
}
END_TEST

static struct agent_vm_step *step(struct agent_vm_plan *p, enum agent_vm_step_kind k,
				  const char *src, const char *tgt)
{
	struct agent_vm_step *s = &p->steps[p->n++];
	memset(s, 0, sizeof(*s));
	s->kind = k;
	strcpy(s->source, src);
	strcpy(s->target, tgt);
	return s;
}

/* With rung.dns, resolv.conf is a file of the initramfs bound read-only over the image's. */
START_TEST(test_plan_dns)
{
	struct agent_vm_opts o;
	struct agent_vm_plan p;
	struct rung_err err = { 0 };
	ck_assert_int_eq(agent_vm_opts_parse("ip=10.1.0.2::10.1.0.1:255.255.255.252::eth0:off "
					     "rung.dns=10.1.0.1", &o, &err), 0);
	ck_assert_str_eq(o.dns, "10.1.0.1");
	ck_assert_int_eq(agent_vm_plan_build(&o, &p, &err), 0);
	const struct agent_vm_step *c = find(&p, AGENT_VM_CREATE, "/resolv.conf");
	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_nonnull(strstr(c->data, "\nnameserver 10.1.0.1\n"));
	ck_assert(c->keep_fd); /* kept open for RESTORED's fixer (agent/restored.c) */
	const struct agent_vm_step *t = find(&p, AGENT_VM_TOUCH, "/rung/root/etc/resolv.conf");
	ck_assert_ptr_nonnull(t);
	const struct agent_vm_step *sw = find(&p, AGENT_VM_SWITCH, "/rung/root");
	size_t bind = 0, ro = 0;
	for (size_t i = 0; i < p.n; i++)
		if (p.steps[i].kind == AGENT_VM_MOUNT &&
		    !strcmp(p.steps[i].target, "/rung/root/etc/resolv.conf")) {
			if (p.steps[i].flags & MS_REMOUNT) {
				ck_assert(p.steps[i].flags & MS_RDONLY);
				ro = i;
			} else {
				ck_assert_str_eq(p.steps[i].source, "/resolv.conf");
				bind = i;
			}
		}
	/* create, then touch the target, bind, read-only, all before the switch */
	ck_assert(index_of(&p, c) < bind && index_of(&p, t) < bind && bind < ro);
	ck_assert(ro < index_of(&p, sw));
	ck_assert_ptr_null(strstr(c->data, "search"));
	/* the pod's search domains and options (a cluster's short names), after rung's */
	char cl[600];
	snprintf(cl, sizeof(cl), "rung.dns=10.1.0.1 rung.search=%s,svc.cluster.local,cluster.local,"
		 "a,b,c rung.dnsopt=ndots:5,edns0", "default.svc.cluster.local");
	ck_assert_int_eq(agent_vm_opts_parse(cl, &o, &err), 0);
	ck_assert_int_eq(agent_vm_plan_build(&o, &p, &err), 0);
	c = find(&p, AGENT_VM_CREATE, "/resolv.conf");
	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(c->data, "# rung: the sandbox's resolver, as its egress allowlist admits\n"
				  "nameserver 10.1.0.1\n"
				  "search default.svc.cluster.local svc.cluster.local cluster.local "
				  "a b c\noptions attempts:2 timeout:2\noptions ndots:5 edns0\n");
	/* the longest search list fits the step's data whole */
	memset(o.search, 'a', AGENT_VM_SEARCH_MAX);
	o.search[AGENT_VM_SEARCH_MAX] = '\0';
	memset(o.dnsopt, 'b', AGENT_VM_DNSOPT_MAX);
	o.dnsopt[AGENT_VM_DNSOPT_MAX] = '\0';
	ck_assert_int_eq(agent_vm_plan_build(&o, &p, &err), 0);
	c = find(&p, AGENT_VM_CREATE, "/resolv.conf");
	ck_assert_uint_lt(strlen(c->data), sizeof(c->data) - 1);
	ck_assert_ptr_nonnull(strstr(c->data, "bbbbbbbb\n"));
	/* a hand-built opts is checked as a parsed one */
	strcpy(o.search, "x y"); /* the blank would split it: "y" ignored, "x" taken */
	ck_assert_int_lt(agent_vm_plan_build(&o, &p, &err), 0);
	strcpy(o.search, "x");
	strcpy(o.dnsopt, "ndots:1\nnameserver 1.2.3.4");
	ck_assert_int_lt(agent_vm_plan_build(&o, &p, &err), 0);
	/* without rung.dns: no network, no resolv.conf step */
	ck_assert_int_eq(agent_vm_opts_parse(NULL, &o, &err), 0);
	ck_assert_int_eq(agent_vm_plan_build(&o, &p, &err), 0);
	ck_assert_ptr_null(find(&p, AGENT_VM_CREATE, "/resolv.conf"));
}
END_TEST

/* The apply tests' scratch directories live under one made and removed by the parent (an
 * unchecked fixture): a test never leaves its chroot to remove its own. */
static char *scratch_parent;

static void scratch_parent_make(void)
{
	scratch_parent = rung_test_tmpdir("vminit");
}

static void scratch_parent_remove(void)
{
	struct rung_err err = {0};
	if (scratch_parent && rung_rm_rf(scratch_parent, &err) < 0)
		fprintf(stderr, "agent_vminit: %s\n", err.msg);
	free(scratch_parent);
	scratch_parent = NULL;
}

/* A private mount namespace chrooted into a fresh tmpfs: absolute paths never touch the host. */
static void scratch_root(const char *tag)
{
	ck_assert_ptr_nonnull(scratch_parent);
	char *dir = NULL;
	ck_assert_int_gt(asprintf(&dir, "%s/%s", scratch_parent, tag), 0);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	ck_assert_int_eq(mount("tmpfs", dir, "tmpfs", 0, "mode=0755"), 0);
	ck_assert_int_eq(chdir(dir), 0);
	ck_assert_int_eq(chroot("."), 0);
	ck_assert_int_eq(chdir("/"), 0);
	free(dir);
}

/*
 * Apply mkdir/mount/move/switch for real, in a private mount namespace chrooted into a
 * fresh tmpfs (so the plan's absolute paths never touch the host). Runs in Check's fork.
 */
START_TEST(test_apply_switch_root)
{
	RUNG_REQUIRE_ROOT();
	scratch_root("vminit");

	struct agent_vm_plan p = { .wait_ms = 10 };
	struct agent_vm_step *s;
	step(&p, AGENT_VM_MKDIR, "", "/old")->mode = 0755;
	s = step(&p, AGENT_VM_MOUNT, "tmpfs", "/old");
	strcpy(s->fstype, "tmpfs");
	step(&p, AGENT_VM_MKDIR, "", "/new")->mode = 0755;
	s = step(&p, AGENT_VM_MOUNT, "tmpfs", "/new");
	strcpy(s->fstype, "tmpfs");
	step(&p, AGENT_VM_MKDIR, "", "/new/old")->mode = 0755;
	step(&p, AGENT_VM_MOVE, "/old", "/new/old");
	step(&p, AGENT_VM_MKDIR, "", "/new/tmp")->mode = 01777;
	step(&p, AGENT_VM_WAIT, "", "/new/tmp");
	/* A sysctl-like knob in the old root, read back through an fd opened before. */
	int fd = open("/knob", O_CREAT | O_RDONLY, 0644);
	ck_assert_int_ge(fd, 0);
	strcpy(step(&p, AGENT_VM_WRITE, "", "/knob")->data, "100");
	step(&p, AGENT_VM_SWITCH, "", "/new");
	ck_assert_int_eq(mkdir("/marker-outside", 0755), 0);
	struct rung_err err = { 0 };
	int r = agent_vm_plan_apply(&p, &err);
	ck_assert_msg(r == 0, "apply: %s", err.msg);
	struct stat st;
	ck_assert_int_eq(stat("/old", &st), 0);            /* the moved mount is inside */
	ck_assert_int_eq(stat("/marker-outside", &st), -1); /* the old root is gone */
	ck_assert_int_eq(stat("/tmp", &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 01777);
	char buf[8] = { 0 };
	ck_assert_int_eq(pread(fd, buf, sizeof(buf) - 1, 0), 3);
	close(fd);
	ck_assert_str_eq(buf, "100");
	/* Nothing to clean up on the host: every mount lives in this process's namespace. */
}
END_TEST

/* CREATE + TOUCH (over a dangling symlink) + the read-only bind, for real, as for resolv.conf. */
START_TEST(test_apply_resolv_bind)
{
	RUNG_REQUIRE_ROOT();
	scratch_root("vminit-dns");
	ck_assert_int_eq(mkdir("/etc", 0755), 0);
	ck_assert_int_eq(symlink("../run/systemd/resolve/stub-resolv.conf", "/etc/resolv.conf"), 0);

	struct agent_vm_plan p = { .wait_ms = 10 };
	struct agent_vm_step *c = step(&p, AGENT_VM_CREATE, "", "/resolv.conf");
	strcpy(c->data, "nameserver 10.1.0.1\n");
	c->keep_fd = 1;
	step(&p, AGENT_VM_TOUCH, "", "/etc/resolv.conf");
	struct agent_vm_step *s = step(&p, AGENT_VM_MOUNT, "/resolv.conf", "/etc/resolv.conf");
	s->flags = MS_BIND;
	s = step(&p, AGENT_VM_MOUNT, "none", "/etc/resolv.conf");
	s->flags = MS_BIND | MS_REMOUNT | MS_RDONLY;
	struct rung_err err = { 0 };
	int r = agent_vm_plan_apply(&p, &err);
	ck_assert_msg(r == 0, "apply: %s", err.msg);
	char buf[64] = { 0 };
	int fd = open("/etc/resolv.conf", O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(read(fd, buf, sizeof(buf) - 1), 0);
	close(fd);
	ck_assert_str_eq(buf, "nameserver 10.1.0.1\n");
	ck_assert_int_eq(open("/etc/resolv.conf", O_WRONLY), -1); /* read-only, even for root */
	ck_assert_int_eq(errno, EROFS);
	/* the fixer's way in after a restore: the kept fd, under the read-only bind */
	ck_assert_int_ge(agent_vm_resolv_fd, 0);
	char text[AGENT_VM_DATA_MAX];
	agent_vm_resolv_text(text, sizeof(text), "10.9.0.1", NULL, NULL);
	ck_assert_int_eq(ftruncate(agent_vm_resolv_fd, 0), 0);
	ck_assert_int_eq(pwrite(agent_vm_resolv_fd, text, strlen(text), 0), (ssize_t)strlen(text));
	char got[AGENT_VM_DATA_MAX] = { 0 };
	fd = open("/etc/resolv.conf", O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(read(fd, got, sizeof(got) - 1), 0);
	close(fd);
	ck_assert_str_eq(got, text);
	ck_assert_ptr_nonnull(strstr(got, "\nnameserver 10.9.0.1\n"));
	close(agent_vm_resolv_fd);
	agent_vm_resolv_fd = -1;
}
END_TEST

START_TEST(test_apply_mount_error_names_step)
{
	struct agent_vm_plan p = { .n = 1 };
	p.steps[0].kind = AGENT_VM_MOUNT;
	strcpy(p.steps[0].source, "/dev/rung-test-none");
	strcpy(p.steps[0].target, "/nonexistent-rung-test-dir");
	strcpy(p.steps[0].fstype, "ext4");
	struct rung_err err = { 0 };
	ck_assert_int_lt(agent_vm_plan_apply(&p, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "vm init step 0: mount /dev/rung-test-none on "
					      "/nonexistent-rung-test-dir"));
}
END_TEST

START_TEST(test_apply_write_missing)
{
	struct agent_vm_plan p = { .n = 1 };
	p.steps[0].kind = AGENT_VM_WRITE;
	strcpy(p.steps[0].target, "/proc/sys/rung-test-no-such-knob");
	strcpy(p.steps[0].data, "1");
	struct rung_err err = { 0 };
	ck_assert_int_eq(agent_vm_plan_apply(&p, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "vm init step 0: open /proc/sys/rung-test-no-such-knob"));
}
END_TEST

Suite *agent_vminit_suite(void)
{
	Suite *s = suite_create("agent_vminit");
	TCase *tc = tcase_create("plan");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_opts_defaults);
	tcase_add_test(tc, test_opts_cmdline);
	tcase_add_test(tc, test_opts_errors);
	tcase_add_test(tc, test_plan_disks);
	tcase_add_test(tc, test_plan_tmpfs_upper);
	tcase_add_test(tc, test_plan_rejects_bad_opts);
	tcase_add_test(tc, test_plan_dns);
	tcase_add_test(tc, test_apply_wait_timeout);
	tcase_add_test(tc, test_apply_mount_error_names_step);
	tcase_add_test(tc, test_apply_write_missing);
	suite_add_tcase(s, tc);
	TCase *tr = tcase_create("apply");
	tcase_set_timeout(tr, 10);
	tcase_set_tags(tr, "root");
	tcase_add_unchecked_fixture(tr, scratch_parent_make, scratch_parent_remove);
	tcase_add_test(tr, test_apply_switch_root);
	tcase_add_test(tr, test_apply_resolv_bind);
	suite_add_tcase(s, tr);
	return s;
}
