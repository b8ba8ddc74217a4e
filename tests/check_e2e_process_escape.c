/*
 * tests/check_e2e_process_escape.c: real escape attempts from a process-rung sandbox, through the
 * public API. Each must FAIL: host files outside the view, writes to the read-only binds,
 * host processes, mount/keyctl/unshare/bpf/ptrace, network egress, privileges, and
 * write_file/read_file path tricks. Tagged "root" (CI runs as root).
 */
#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

struct fx {
	char *dir;
	struct rung_router *r;
	struct rung_sandbox *sb;
};

static void fx_open(struct fx *f)
{
	f->r = spine_router(&f->dir);
	f->sb = spine_acquire(f->r, "escape", "t", "k", NULL, NULL);
}

static void fx_close(struct fx *f)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(f->r, rung_sandbox_id(f->sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(f->sb);
	rung_router_free(f->r);
	free(f->dir);
}

START_TEST(test_host_files_hidden)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f);
	/* Another sandbox in the same store, with a secret in its work dir. */
	struct rung_sandbox *other = spine_acquire(f.r, "escape", "other", "k", NULL, NULL);
	struct rung_err err = {0};
	ck_assert_msg(
	    rung_write_file(other, "/work/secret-b7e1.txt", "TOPSECRET-b7e1", 14, 0600, &err) == 0,
	    "%s", err.msg);
	/* The work dir is on the other sandbox's own disk image, mounted only in its mount
	 * namespace: the host reaches it through its pid 1's root, never at a host path. */
	char w2[8192];
	snprintf(w2, sizeof(w2), "%s/sandboxes/%s/disk.img", f.dir, rung_sandbox_id(other));
	struct rt_meta om;
	spine_meta(f.r, rung_sandbox_id(other), &om);
	char host_secret[8300];
	snprintf(host_secret, sizeof(host_secret), "/proc/%d/root/work/secret-b7e1.txt",
		 (int)om.init_pid);
	rt_meta_release(&om);
	ck_assert_msg(access(host_secret, F_OK) == 0, "the secret is not where expected");

	char script[32768];
	snprintf(script, sizeof(script),
		 "for p in /root /home /var /run /srv /opt /mnt /boot /media /sys /etc/shadow "
		 "/etc/gshadow /etc/sudoers /etc/ssh /proc/kcore/x '%s' '%s' '%s' '%s' '%s'; do "
		 "  if [ -e \"$p\" ] || [ -L \"$p\" ]; then echo \"VISIBLE $p\"; fi; "
		 "done; "
		 "cat /etc/shadow >/dev/null 2>&1 && echo READ-SHADOW; "
		 "find / -path /proc -prune -o -name 'secret-b7e1*' -print 2>/dev/null; "
		 "grep -rl TOPSECRET-b7e1 /work /tmp /etc /dev/shm 2>/dev/null; "
		 "ls /",
		 f.dir, w2, host_secret, spine_base(), rung_test_build_dir());
	char *out = spine_sh_ok(f.sb, script);
	/* Only the sandbox's own root entries. */
	static const char *const allowed[] = {"bin",	"dev",	"etc",	"lib", "lib32", "lib64",
					      "libx32", "proc", "sbin", "tmp", "usr",	"work"};
	char *save = NULL;
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		bool ok = false;
		for (size_t i = 0; i < RUNG_ARRAY_SIZE(allowed); i++)
			ok |= !strcmp(line, allowed[i]);
		ck_assert_msg(ok, "the sandbox sees '%s'", line);
	}
	free(out);
	/* The host itself still has what the sandbox could not see. */
	ck_assert_int_eq(access("/etc/shadow", F_OK), 0);
	ck_assert_msg(rung_dispose(f.r, rung_sandbox_id(other), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(other);
	fx_close(&f);
}
END_TEST

START_TEST(test_readonly_binds)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f);
	char *pw_before = spine_slurp("/etc/passwd", NULL);
	ck_assert_ptr_nonnull(pw_before);
	char *out = spine_sh_ok(
	    f.sb, "for p in /usr/rung-esc /usr/bin/rung-esc /bin/rung-esc /lib/rung-esc "
		  "/sbin/rung-esc /etc/rung-esc /rung-esc /dev/rung-esc /proc/rung-esc; do "
		  "  touch $p 2>/dev/null && echo WROTE $p; "
		  "done; "
		  "(echo 'evil:x:0:0::/:/bin/sh' >> /etc/passwd) 2>/dev/null && echo WROTE passwd; "
		  "(echo x > /etc/hosts) 2>/dev/null && echo WROTE hosts; "
		  "(echo x > /etc/ld.so.cache) 2>/dev/null && echo WROTE ld.so.cache; "
		  "(echo x > /usr/bin/env) 2>/dev/null && echo WROTE env; "
		  "rm -f /bin/sh 2>/dev/null; [ -e /bin/sh ] || echo REMOVED sh; "
		  "(echo h > /proc/sys/kernel/hostname) 2>/dev/null && echo WROTE proc-sys; "
		  "(echo 1 > /proc/sysrq-trigger) 2>/dev/null && echo WROTE sysrq; "
		  "touch /work/ok /tmp/ok && echo CONTROL-OK");
	ck_assert_msg(!strcmp(out, "CONTROL-OK\n"), "writes that should fail: %s", out);
	free(out);
	static const char *const host[] = {"/usr/rung-esc", "/usr/bin/rung-esc", "/bin/rung-esc",
					   "/lib/rung-esc", "/sbin/rung-esc",	 "/etc/rung-esc",
					   "/rung-esc"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(host); i++)
		ck_assert_msg(access(host[i], F_OK) < 0, "%s appeared on the host", host[i]);
	char *pw_after = spine_slurp("/etc/passwd", NULL);
	ck_assert_str_eq(pw_before, pw_after);
	free(pw_before);
	free(pw_after);
	fx_close(&f);
}
END_TEST

START_TEST(test_host_processes)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f);
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	char script[1024];
	snprintf(script, sizeof(script),
		 "kill -0 %d 2>/dev/null && echo SEES-HOST-PID; "
		 "kill -9 %d 2>/dev/null && echo KILLED-HOST-PID; "
		 "kill -9 %d 2>/dev/null && echo KILLED-TEST; "
		 "[ -e /proc/%d ] && echo PROC-HOST-PID; "
		 "ps -eo pid=,comm=",
		 (int)child, (int)child, (int)getpid(), (int)getpid());
	char *out = spine_sh_ok(f.sb, script);
	ck_assert_msg(!strstr(out, "SEES") && !strstr(out, "KILLED") && !strstr(out, "PROC-"), "%s",
		      out);
	/* ps shows the sandbox's own handful of processes, nothing of the host. */
	int n = 0;
	char *save = NULL;
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int pid;
		char comm[64];
		ck_assert_int_eq(sscanf(line, "%d %63s", &pid, comm), 2);
		ck_assert_msg(!strcmp(comm, "rung-agent") || !strcmp(comm, "rung-agent-h") ||
				  !strcmp(comm, "sh") || !strcmp(comm, "ps"),
			      "the sandbox sees process %d %s", pid, comm);
		ck_assert_int_lt(pid, 1000);
		n++;
	}
	ck_assert_int_ge(n, 3);
	ck_assert_int_le(n, 6);
	free(out);
	/* Our child is untouched. */
	ck_assert_int_eq(waitpid(child, NULL, WNOHANG), 0);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	fx_close(&f);
}
END_TEST

START_TEST(test_syscalls_denied)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f);
	/* x86_64 numbers: mount 165, umount2 166, pivot_root 155, chroot 161, keyctl 250,
	 * add_key 248, request_key 249, bpf 321, ptrace 101, unshare 272, setns 308,
	 * perf_event_open 298, userfaultfd 323, open_by_handle_at 304, init_module 175,
	 * clone(CLONE_NEWUSER|SIGCHLD) 56. */
	char *out = spine_sh_ok(
	    f.sb,
	    "perl -e '"
	    "for $n (165, 166, 155, 161, 250, 248, 249, 321, 101, 272, 308, 298, 323, 304, 175) {"
	    "  $! = 0; $r = syscall($n, 0, 0, 0, 0, 0); printf(\"%d=%d:%d\\n\", $n, $r, $!+0); }"
	    "$r = syscall(272, 0x10000000); printf(\"unshare-user=%d:%d\\n\", $r, $!+0);"
	    "$r = syscall(272, 0x40000000); printf(\"unshare-net=%d:%d\\n\", $r, $!+0);"
	    "$r = syscall(56, 0x10000011, 0, 0, 0, 0); if ($r == 0) { exit 0 }"
	    "printf(\"clone-newuser=%d:%d\\n\", $r, $!+0);"
	    "'");
	char want[64];
	static const int nrs[] = {165, 166, 155, 161, 250, 248, 249, 321,
				  101, 272, 308, 298, 323, 304, 175};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(nrs); i++) {
		snprintf(want, sizeof(want), "%d=-1:%d\n", nrs[i], EPERM);
		ck_assert_msg(strstr(out, want), "syscall %d not denied with EPERM: %s", nrs[i],
			      out);
	}
	ck_assert_msg(strstr(out, "unshare-user=-1:1\n"), "%s", out);
	ck_assert_msg(strstr(out, "unshare-net=-1:1\n"), "%s", out);
	ck_assert_msg(strstr(out, "clone-newuser=-1:1\n"), "%s", out);
	free(out);
	/* x32 syscalls (nr | 0x40000000) are another ABI on the same arch: killed (SIGSYS). */
	struct rung_exec_res res;
	ck_assert_int_eq(spine_sh(f.sb,
				  "exec perl -e 'syscall(0x40000000 + 272, 0x10000000); "
				  "print \"x32 went through\\n\"'",
				  &res),
			 -1);
	ck_assert_int_eq(res.signal, SIGSYS);
	ck_assert_ptr_null(strstr(res.out, "went through"));
	rung_exec_res_release(&res);
	/* The agent (pid 1) and the exec's handler cannot be taken over through /proc. */
	out = spine_sh_ok(
	    f.sb, "for p in 1 $PPID; do "
		  "  perl -e \"open(F, q(+<), q(/proc/$p/mem)) and print qq(MEM $p\\n)\"; "
		  "  perl -e \"open(F, q(<), q(/proc/$p/environ)) and print qq(ENV $p\\n)\"; "
		  "done; perl -e \"open(F, q(+<), q(/proc/$$/mem)) and print qq(own\\n)\"");
	ck_assert_msg(!strcmp(out, "own\n"), "agent memory reachable: %s", out);
	free(out);
	/* The same through the usual tools. */
	out = spine_sh_ok(f.sb, "unshare -U true 2>/dev/null && echo UNSHARE-U; "
				"unshare -r true 2>/dev/null && echo UNSHARE-R; "
				"unshare -m true 2>/dev/null && echo UNSHARE-M; "
				"mount -t tmpfs none /tmp 2>/dev/null && echo MOUNT; "
				"mount --bind /work /tmp 2>/dev/null && echo BIND; "
				"umount /proc 2>/dev/null && echo UMOUNT; "
				"chroot /tmp /bin/true 2>/dev/null && echo CHROOT; "
				"hostname evil 2>/dev/null && echo HOSTNAME; "
				"echo done");
	ck_assert_str_eq(out, "done\n");
	free(out);
	fx_close(&f);
}
END_TEST

START_TEST(test_network)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f);
	/* A listener on the host's loopback, and one on an abstract unix socket. */
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ck_assert_int_ge(ls, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	ck_assert_int_eq(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(ls, 8), 0);
	socklen_t al = sizeof(a);
	ck_assert_int_eq(getsockname(ls, (struct sockaddr *)&a, &al), 0);
	int port = ntohs(a.sin_port);
	int us = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_un ua = {.sun_family = AF_UNIX};
	char aname[64];
	snprintf(aname, sizeof(aname), "rung-escape-test-%d", (int)getpid());
	memcpy(ua.sun_path + 1, aname, strlen(aname));
	socklen_t ulen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(aname));
	ck_assert_int_eq(bind(us, (struct sockaddr *)&ua, ulen), 0);
	ck_assert_int_eq(listen(us, 8), 0);

	char script[2048];
	snprintf(script, sizeof(script),
		 "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "
		 "ip -4 route show | grep . && echo HAS-ROUTE; "
		 "ip -o -4 addr show | grep -v ' lo ' && echo HAS-ADDR; "
		 "perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(PeerAddr => "
		 "\"127.0.0.1:%d\", Timeout => 2) ? \"CONNECTED\\n\" : \"\"'; "
		 "perl -MIO::Socket::UNIX -e 'print IO::Socket::UNIX->new(Peer => "
		 "\"\\0%s\") ? \"CONNECTED-UNIX\\n\" : \"\"'; "
		 "echo done",
		 port, aname);
	char *out = spine_sh_ok(f.sb, script);
	ck_assert_msg(!strcmp(out, "lo\ndone\n"), "network visible from the sandbox: %s", out);
	free(out);
	/* Nothing arrived on the host side. */
	ck_assert_int_lt(accept(ls, NULL, NULL), 0);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_int_lt(accept(us, NULL, NULL), 0);
	ck_assert_int_eq(errno, EAGAIN);
	close(ls);
	close(us);
	fx_close(&f);
}
END_TEST

START_TEST(test_privileges)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f);
	char *out = spine_sh_ok(f.sb, "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' "
				      "/proc/self/status | tr -d '\\t'; id -u; touch /work/owned");
	static const char *const want[] = {"CapInh:0000000000000000",
					   "CapPrm:0000000000000000",
					   "CapEff:0000000000000000",
					   "CapBnd:0000000000000000",
					   "CapAmb:0000000000000000",
					   "NoNewPrivs:1",
					   "Seccomp:2"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(want); i++)
		ck_assert_msg(strstr(out, want[i]), "missing '%s' in: %s", want[i], out);
	ck_assert_msg(strstr(out, "\n0\n"), "uid inside is not 0: %s", out);
	free(out);
	/* From the host: uid 0 inside is an unprivileged host uid of its own. */
	struct rt_meta m;
	spine_meta(f.r, rung_sandbox_id(f.sb), &m);
	ck_assert_uint_ge(m.uid_base, RT_UID_BASE0);
	ck_assert(spine_pid_alive(m.init_pid));
	char p[128];
	snprintf(p, sizeof(p), "/proc/%d/uid_map", (int)m.init_pid);
	char *map = spine_slurp(p, NULL);
	ck_assert_ptr_nonnull(map);
	unsigned inside, outside, count;
	ck_assert_int_eq(sscanf(map, " %u %u %u", &inside, &outside, &count), 3);
	ck_assert_uint_eq(inside, 0);
	ck_assert_uint_eq(outside, m.uid_base);
	ck_assert_uint_ne(outside, 0);
	ck_assert_uint_eq(count, RT_UID_RANGE);
	free(map);
	snprintf(p, sizeof(p), "/proc/%d/gid_map", (int)m.init_pid);
	map = spine_slurp(p, NULL);
	ck_assert_int_eq(sscanf(map, " %u %u %u", &inside, &outside, &count), 3);
	ck_assert_uint_ne(outside, 0);
	free(map);
	snprintf(p, sizeof(p), "/proc/%d/status", (int)m.init_pid);
	char *st = spine_slurp(p, NULL);
	char *uid = strstr(st, "\nUid:");
	ck_assert_ptr_nonnull(uid);
	unsigned ru, eu, su, fu;
	ck_assert_int_eq(sscanf(uid, "\nUid: %u %u %u %u", &ru, &eu, &su, &fu), 4);
	/* pid 1 (rung-agent) runs as the agent uid, not the command's (agent/privs.c) */
	ck_assert_uint_eq(ru, m.uid_base + RUNG_AGENT_UID);
	ck_assert_uint_eq(eu, m.uid_base + RUNG_AGENT_UID);
	ck_assert_uint_eq(su, m.uid_base + RUNG_AGENT_UID);
	ck_assert_ptr_nonnull(strstr(st, "NoNewPrivs:\t1"));
	ck_assert_ptr_nonnull(strstr(st, "Seccomp:\t2"));
	ck_assert_ptr_nonnull(strstr(st, "CapEff:\t00000000000000e0")); /* KILL, SETGID, SETUID */
	ck_assert_ptr_nonnull(strstr(st, "CapBnd:\t0000000000000000"));
	free(st);
	/* A file root creates inside belongs to that host uid. */
	char owned[8192];
	snprintf(owned, sizeof(owned), "/proc/%d/root/work/owned", (int)m.init_pid);
	struct stat sst;
	ck_assert_int_eq(stat(owned, &sst), 0);
	ck_assert_uint_eq(sst.st_uid, m.uid_base);
	rt_meta_release(&m);
	fx_close(&f);
}
END_TEST

/* A path trick: the write must fail or land inside; the host file must not change. */
static void write_must_not_reach(struct rung_sandbox *sb, const char *path, const char *host)
{
	char *before = spine_slurp(host, NULL);
	struct rung_err err = {0};
	int r = rung_write_file(sb, path, "PWNED-by-sandbox", 16, 0644, &err);
	char *after = spine_slurp(host, NULL);
	if (before) {
		ck_assert_msg(after && !strcmp(before, after), "write_file %s changed host %s",
			      path, host);
	} else {
		ck_assert_msg(!after, "write_file %s (r=%d) created host %s", path, r, host);
	}
	free(before);
	free(after);
}

static void read_must_not_reach(struct rung_sandbox *sb, const char *path, const char *host_needle)
{
	char *data = NULL;
	size_t len = 0;
	struct rung_err err = {0};
	int r = rung_read_file(sb, path, 0, &data, &len, &err);
	if (r == 0)
		ck_assert_msg(!strstr(data, host_needle), "read_file %s returned host content",
			      path);
	else
		ck_assert_msg(err.msg[0], "read_file %s failed without a message", path);
	free(data);
}

START_TEST(test_file_tricks)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f);
	struct rung_err err = {0};
	const char *id = rung_sandbox_id(f.sb);
	char work[8192], meta[8300], hostlink[8300], marker[64];
	struct rt_meta fm;
	spine_meta(f.r, id, &fm);
	/* the work dir as the host reaches it (it is on the sandbox's own disk) */
	snprintf(work, sizeof(work), "/proc/%d/root/work", (int)fm.init_pid);
	rt_meta_release(&fm);
	snprintf(meta, sizeof(meta), "%s/sandboxes/%s/meta.json", f.dir, id);
	snprintf(marker, sizeof(marker), "/rung-escape-%d", (int)getpid());
	/* The host's root entry in /etc/passwd (home /root) tells host from sandbox content. */
	char *hostpw = spine_slurp("/etc/passwd", NULL);
	ck_assert_ptr_nonnull(strstr(hostpw, ":/root:"));
	free(hostpw);

	/* ".." out of the work dir, relative and absolute. */
	write_must_not_reach(f.sb, "../../etc/passwd", "/etc/passwd");
	write_must_not_reach(f.sb, "/../../etc/passwd", "/etc/passwd");
	write_must_not_reach(f.sb, "/work/../../../../etc/shadow", "/etc/shadow");
	write_must_not_reach(f.sb, marker, marker);
	char rel[300];
	snprintf(rel, sizeof(rel), "/../..%s", marker);
	write_must_not_reach(f.sb, rel, marker);
	char *data = NULL;
	size_t len = 0;
	ck_assert_msg(rung_read_file(f.sb, "../../etc/passwd", 0, &data, &len, &err) == 0, "%s",
		      err.msg);
	ck_assert_ptr_nonnull(strstr(data, "root:x:0:0:root:/work:/bin/sh")); /* the sandbox's */
	ck_assert_ptr_null(strstr(data, ":/root:"));
	free(data);
	read_must_not_reach(f.sb, "/../../etc/shadow", "root:");

	/* Absolute symlinks planted inside, to host secrets and to the host store. */
	char script[20000];
	snprintf(
	    script, sizeof(script),
	    "ln -s /etc/shadow /work/shadow; ln -s '%s' /work/meta; ln -s '%s' /work/store; "
	    "ln -s /proc/1/root/etc/hostname /work/p1; ln -s /proc/self/root/etc/shadow /work/ps; "
	    "ln -s /etc /work/etcdir; ln -s '%s' /work/basedir; ln -s ../../../../.. /work/up",
	    meta, f.dir, spine_base());
	free(spine_sh_ok(f.sb, script));
	/* ... and one planted from the host side, straight into the work dir. */
	snprintf(hostlink, sizeof(hostlink), "%s/hostlink", work);
	ck_assert_int_eq(symlink("/etc/shadow", hostlink), 0);

	read_must_not_reach(f.sb, "/work/shadow", "root:");
	read_must_not_reach(f.sb, "/work/hostlink", "root:");
	read_must_not_reach(f.sb, "/work/meta", "supervisor_pid");
	read_must_not_reach(f.sb, "/work/store/sandboxes", "supervisor_pid");
	read_must_not_reach(f.sb, "/work/ps", "root:");
	read_must_not_reach(f.sb, "/work/up/etc/shadow", "root:");
	data = NULL;
	if (rung_read_file(f.sb, "/work/p1", 0, &data, &len, &err) == 0)
		ck_assert_str_eq(data, "rung\n"); /* the sandbox's own hostname, at most */
	free(data);
	write_must_not_reach(f.sb, "/work/shadow", "/etc/shadow");
	write_must_not_reach(f.sb, "/work/hostlink", "/etc/shadow");
	write_must_not_reach(f.sb, "/work/meta", meta);
	write_must_not_reach(f.sb, "/work/ps", "/etc/shadow");
	/* A symlinked parent directory. */
	write_must_not_reach(f.sb, "/work/etcdir/rung-esc", "/etc/rung-esc");
	write_must_not_reach(f.sb, "/work/etcdir/passwd", "/etc/passwd");
	char inbase[8192];
	snprintf(inbase, sizeof(inbase), "%s/pwned", spine_base());
	write_must_not_reach(f.sb, "/work/basedir/pwned", inbase);
	write_must_not_reach(f.sb, "/work/up/etc/passwd", "/etc/passwd");
	write_must_not_reach(f.sb, "/work/up/rung-esc-up", "/rung-esc-up");
	/* The host store is intact and the sandbox still works. */
	struct rt_meta m;
	spine_meta(f.r, id, &m);
	rt_meta_release(&m);
	ck_assert_msg(rung_write_file(f.sb, "sub/dir/ok.txt", "fine", 4, 0600, &err) == 0, "%s",
		      err.msg);
	ck_assert_msg(rung_read_file(f.sb, "/work/sub/dir/ok.txt", 0, &data, &len, &err) == 0, "%s",
		      err.msg);
	ck_assert_uint_eq(len, 4);
	ck_assert_str_eq(data, "fine");
	free(data);
	/* A FIFO planted where the host will write or read: an error at once, no hang. */
	free(spine_sh_ok(f.sb, "mkfifo /work/fifo"));
	uint64_t t0 = rung_now_ms();
	ck_assert_int_lt(rung_write_file(f.sb, "/work/fifo", "x", 1, 0, &err), 0);
	ck_assert_int_lt(rung_read_file(f.sb, "/work/fifo", 0, &data, &len, &err), 0);
	ck_assert_msg(rung_now_ms() - t0 < 5000, "a planted FIFO stalled the host for %llu ms",
		      (unsigned long long)(rung_now_ms() - t0));
	/* Reading a directory or /dev/zero is refused (not a regular file). */
	ck_assert_int_lt(rung_read_file(f.sb, "/work", 0, &data, &len, &err), 0);
	ck_assert_int_lt(rung_read_file(f.sb, "/dev/zero", 0, &data, &len, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "not a regular file"));
	fx_close(&f);
}
END_TEST

Suite *e2e_process_escape_suite(void)
{
	Suite *s = suite_create("e2e_process_escape");
	TCase *tc = tcase_create("escape");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, test_host_files_hidden);
	tcase_add_test(tc, test_readonly_binds);
	tcase_add_test(tc, test_host_processes);
	tcase_add_test(tc, test_syscalls_denied);
	tcase_add_test(tc, test_network);
	tcase_add_test(tc, test_privileges);
	tcase_add_test(tc, test_file_tricks);
	suite_add_tcase(s, tc);
	return s;
}
