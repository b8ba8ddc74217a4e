/* tests/lib/oci.c: see oci.h. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "common/util.h"
#include "rung/rung.h"
#include "tests/lib/testutil.h"
#include "tests/lib/oci.h"

static void slurp(const char *path, char *buf, size_t n)
{
	memset(buf, 0, n);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)!read(fd, buf, n - 1);
		close(fd);
	}
}

int oci_test_run(const char *bin, const char *root, const char *dir, const char *in,
		 const char *const *args, char *out, size_t outn, char *errb, size_t errn)
{
	const char *argv[32] = {bin, "--root", root};
	size_t n = 3;
	for (; args[n - 3]; n++) {
		ck_assert_uint_lt(n, 31);
		argv[n] = args[n - 3];
	}
	argv[n] = NULL;
	char o[PATH_MAX * 2], er[PATH_MAX * 2];
	snprintf(o, sizeof(o), "%s/stdout", dir);
	snprintf(er, sizeof(er), "%s/stderr", dir);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, in ? in : "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, o, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addopen(&fa, 2, er, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	pid_t pid;
	ck_assert_int_eq(posix_spawn(&pid, bin, &fa, NULL, (char **)argv, (char *[]){NULL}), 0);
	posix_spawn_file_actions_destroy(&fa);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	slurp(o, out, outn);
	slurp(er, errb, errn);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int oci_test_console_master(int listen_fd)
{
	int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(c, 0);
	char name[128] = {0}, cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = name, .iov_len = sizeof(name) - 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	ck_assert_int_gt(recvmsg(c, &mh, 0), 0);
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	ck_assert_ptr_nonnull(cm);
	int master;
	memcpy(&master, CMSG_DATA(cm), sizeof(int));
	close(c);
	return master;
}

void oci_test_busybox(const char *bundle, const char *const *applets)
{
	char p[PATH_MAX * 2];
	struct rung_err err = {0};
	snprintf(p, sizeof(p), "%s/rootfs/bin", bundle);
	ck_assert_int_eq(rung_mkdir_p(p, 0755, &err), 0);
	char *bb = NULL;
	size_t n = 0;
	ck_assert_int_eq(rung_file_load(AT_FDCWD, "/bin/busybox", 8 << 20, &bb, &n, &err), 0);
	snprintf(p, sizeof(p), "%s/rootfs/bin/busybox", bundle);
	ck_assert_int_eq(rung_write_file_replace(AT_FDCWD, p, bb, n, 0755, &err), 0);
	free(bb);
	for (size_t i = 0; applets[i]; i++) {
		snprintf(p, sizeof(p), "%s/rootfs/bin/%s", bundle, applets[i]);
		ck_assert(symlink("busybox", p) == 0 || errno == EEXIST);
	}
}

bool oci_test_vm_runs(char *why, size_t n)
{
	if (geteuid() != 0)
		return snprintf(why, n, "needs root (CI runs as root)"), false;
	char *tmp = rung_test_tmpdir("oci-vm-probe");
	struct rung_router_opts o = {.state_dir = tmp};
	rung_test_router_env(&o);
	struct rung_router *r = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rung_router_new(&o, &r, &err) == 0, "router: %s", err.msg);
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("probe");
	s.image = strdup("probe");
	s.isolation = RUNG_ISO_VM;
	enum rung_isolation iso;
	int rc = rung_router_pick(r, &s, &iso, &err);
	rung_spec_release(&s);
	rung_router_free(r);
	rung_rm_rf(tmp, &err);
	free(tmp);
	if (rc < 0)
		snprintf(why, n, "the vm rung cannot run here (make check-vm runs this suite in its "
			 "L1): %s", err.msg);
	return rc == 0;
}

extern char **environ;

int oci_test_spawn(const char *bin, const char *root, const char *dir, const char *tag,
		   const char *const *args)
{
	const char *argv[24] = {bin, "--root", root};
	size_t n = 3;
	for (size_t i = 0; args[i] && n < 23; i++)
		argv[n++] = args[i];
	char o[PATH_MAX + 64], e[PATH_MAX + 64];
	snprintf(o, sizeof(o), "%s/%s.out", dir, tag);
	snprintf(e, sizeof(e), "%s/%s.err", dir, tag);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, o, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addopen(&fa, 2, e, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	pid_t pid;
	ck_assert_int_eq(posix_spawn(&pid, bin, &fa, NULL, (char **)argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void put_file(const char *path, const char *text)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_write_file_replace(AT_FDCWD, path, text, strlen(text), 0644, &err) == 0,
		      "%s", err.msg);
}

void oci_test_cri_resolv(const char *dir, const char *resolver, char *m, size_t n)
{
	char p[PATH_MAX], txt[256];
	snprintf(p, sizeof(p), "%s/resolv.conf", dir);
	snprintf(txt, sizeof(txt), "search default.svc.cluster.local svc.cluster.local\n"
		 "nameserver %s\noptions ndots:5\n", resolver);
	put_file(p, txt);
	snprintf(m, n, ", {\"destination\": \"/etc/resolv.conf\", \"source\": \"%s\","
		 " \"options\": [\"rbind\", \"ro\", \"nosuid\", \"nodev\", \"noexec\"]}", p);
}

void oci_test_pod_config(const char *bundle, const char *script, const char *ann_json,
			 const char *mounts_json, const char *netns_path)
{
	json_t *sc = json_string(script);
	char *script_json = json_dumps(sc, JSON_ENCODE_ANY);
	json_decref(sc);
	ck_assert_ptr_nonnull(script_json);
	char p[PATH_MAX], cfg[16384];
	int len = snprintf(cfg, sizeof(cfg),
		 "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\"},"
		 " \"annotations\": {\"k\": \"v\"%s},"
		 " \"process\": {\"args\": [\"sh\", \"-c\", %s], \"env\": [\"PATH=/bin\"],"
		 "  \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0}},"
		 " \"mounts\": [{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"}%s],"
		 " \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"ipc\"},"
		 "  {\"type\": \"mount\"}, {\"type\": \"uts\"},"
		 "  {\"type\": \"network\", \"path\": \"%s\"}]}}",
		 ann_json, script_json, mounts_json, netns_path);
	free(script_json);
	ck_assert_int_lt(len, (int)sizeof(cfg));
	snprintf(p, sizeof(p), "%s/config.json", bundle);
	put_file(p, cfg);
}

/* How many processes have argv[0] name; the first one's pid into *first (non-NULL). */
static int each_argv0(const char *name, int *first)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d))) {
		char p[300], arg0[256] = "";
		if (atoi(de->d_name) <= 0)
			continue;
		snprintf(p, sizeof(p), "/proc/%s/cmdline", de->d_name);
		FILE *f = fopen(p, "re");
		size_t k = f ? fread(arg0, 1, sizeof(arg0) - 1, f) : 0;
		arg0[k] = '\0';
		if (f)
			fclose(f);
		if (strcmp(arg0, name))
			continue;
		if (!n++ && first)
			*first = atoi(de->d_name);
	}
	if (d)
		closedir(d);
	return n;
}

int oci_test_procs_argv0(const char *name)
{
	return each_argv0(name, NULL);
}

int oci_test_pid_argv0(const char *name)
{
	int pid = 0;
	each_argv0(name, &pid);
	return pid;
}

long oci_test_cpu_ticks(int pid)
{
	char p[64], buf[1024] = "";
	snprintf(p, sizeof(p), "/proc/%d/stat", pid);
	slurp(p, buf, sizeof(buf));
	const char *s = strrchr(buf, ')'); /* comm may hold spaces */
	unsigned long ut = 0, st = 0;
	/* after ") ": state(3) ... utime is field 14, stime 15 */
	if (!s || sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (long)(ut + st);
}

int oci_test_ns_holder(int flags)
{
	int ready[2];
	ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (unshare(flags) < 0 || write(ready[1], "x", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(ready[1]);
	char c;
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);
	return (int)pid;
}

void oci_test_ns_holder_end(int pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}
