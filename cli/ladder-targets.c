/*
 * cli/ladder-targets.c: where `rung ladder` runs the battery. The rungs: a sandbox acquired
 * through the public API, rung-probe and its context written into its work dir with
 * rung_write_file (so no rung needs it in an image), each probe one rung_exec. The peers:
 * bubblewrap with the process rung's namespaces (--unshare-all) as an unprivileged uid, and
 * crun and runc with an OCI bundle made by their own `spec` (their defaults), the probe and its
 * context in the rootfs's /work, and the ladder's limits as resources.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/ladder.h"
#include "common/err.h"

#define PEER_UID 65534 /* bubblewrap runs as nobody, as a user would run it */

static int copy_file(const char *from, const char *to, mode_t mode, struct rung_err *err)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return rung_err_sys(err, errno, "open %s", from);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (out < 0) {
		close(in);
		return rung_err_sys(err, errno, "create %s", to);
	}
	char buf[65536];
	ssize_t k;
	int r = 0;
	while ((k = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)k) != k) {
			r = rung_err_sys(err, errno, "write %s", to);
			break;
		}
	fchmod(out, mode);
	close(in);
	close(out);
	return r;
}

static int write_text(const char *path, const char *s, mode_t mode, struct rung_err *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return rung_err_sys(err, errno, "create %s", path);
	ssize_t k = write(fd, s, strlen(s));
	fchmod(fd, mode);
	close(fd);
	return k == (ssize_t)strlen(s) ? 0 : rung_err_sys(err, EIO, "write %s", path);
}

static void child_exec(char *const argv[], const char *cwd, int uid, bool cg_wrap, int out,
		       int errfd)
{
	dup2(out, 1);
	dup2(errfd, 2);
	int null = open("/dev/null", O_RDONLY);
	dup2(null, 0);
	if (cg_wrap) {
		/* crun 1.8 and runc refuse this host's hybrid cgroups with the v2 mount at
		 * /sys/fs/cgroup/unified (docs/platform.md): hide it, in a mount namespace of
		 * the runtime's own */
		if (unshare(CLONE_NEWNS) == 0) {
			mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
			umount2("/sys/fs/cgroup/unified", MNT_DETACH);
		}
	}
	if (cwd && chdir(cwd) < 0)
		_exit(126);
	if (uid >= 0 &&
	    (setgroups(0, NULL) < 0 || setgid((gid_t)uid) < 0 || setuid((uid_t)uid) < 0))
		_exit(126);
	char *envp[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL};
	execve(argv[0], argv, envp);
	_exit(127);
}

/* Run argv; its stdout in *out (malloc'd). The exit status, or -errno with err set. */
static int spawn_capture(char *const argv[], const char *cwd, int uid, bool cg_wrap, int timeout_s,
			 char **out, struct rung_err *err)
{
	int po[2], pe[2];
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe");
	pid_t pid = fork();
	if (pid < 0)
		return rung_err_sys(err, errno, "fork %s", argv[0]);
	if (pid == 0)
		child_exec(argv, cwd, uid, cg_wrap, po[1], pe[1]);
	close(po[1]);
	close(pe[1]);
	size_t len = 0, cap = 4096, elen = 0;
	char *buf = malloc(cap), ebuf[512] = "";
	struct pollfd p[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
	time_t end = time(NULL) + timeout_s;
	bool timed_out = false;
	while (p[0].fd >= 0 || p[1].fd >= 0) {
		if (time(NULL) > end) {
			timed_out = true;
			kill(pid, SIGKILL);
			break;
		}
		if (poll(p, 2, 500) <= 0)
			continue;
		char tmp[4096];
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			ssize_t k = read(p[i].fd, tmp, sizeof(tmp));
			if (k <= 0) {
				close(p[i].fd);
				p[i].fd = -1;
			} else if (i == 0) {
				if (len + (size_t)k + 1 > (1u << 20))
					continue; /* a probe prints one line: a megabyte is plenty
						   */
				if (len + (size_t)k + 1 > cap)
					buf = realloc(buf, cap = 2 * (len + (size_t)k + 1));
				memcpy(buf + len, tmp, (size_t)k);
				len += (size_t)k;
			} else if (elen + 1 < sizeof(ebuf)) {
				size_t n = (size_t)k < sizeof(ebuf) - 1 - elen
					       ? (size_t)k
					       : sizeof(ebuf) - 1 - elen;
				memcpy(ebuf + elen, tmp, n);
				elen += n;
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	int st = 0;
	waitpid(pid, &st, 0);
	buf[len] = '\0';
	*out = buf;
	if (timed_out)
		return rung_err_set(err, ETIMEDOUT, "%s: timed out after %d s", argv[0], timeout_s);
	ebuf[elen] = '\0';
	ebuf[strcspn(ebuf, "\n")] = '\0';
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		rung_err_set(err, EIO, "%s exited %d%s%s", argv[0],
			     WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
			     ebuf[0] ? ": " : "", ebuf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *tool_path(const char *name)
{
	static const char *const dirs[] = {"/usr/bin/", "/usr/sbin/", "/usr/local/bin/", "/bin/",
					   "/sbin/"};
	static char p[64];
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", dirs[i], name);
		if (access(p, X_OK) == 0)
			return p;
	}
	return NULL;
}

/* The probe and its context in dir (made with mode). */
int ladder_plant_dir(struct ladder_env *e, const char *dir, mode_t mode, const char *probe_bin,
		     struct rung_err *err)
{
	char p[PATH_MAX + 32];
	if (mkdir(dir, mode) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s", dir);
	chmod(dir, mode);
	snprintf(p, sizeof(p), "%s/rung-probe", dir);
	int r = copy_file(probe_bin, p, 0755, err);
	if (r < 0)
		return r;
	char *ctx = ladder_env_ctx(e);
	snprintf(p, sizeof(p), "%s/rung-probe.ctx", dir);
	r = ctx ? write_text(p, ctx, 0644, err) : rung_err_set(err, ENOMEM, "context");
	free(ctx);
	return r;
}

/* An OCI bundle for crun or runc: the runtime's own default spec, our rootfs and limits. */
static int oci_bundle(struct ladder_target *t, struct ladder_env *e, const char *probe_bin,
		      const char *role, struct rung_err *err)
{
	const char *rt = tool_path(t->name);
	if (!rt)
		return rung_err_set(err, ENOENT, "%s is not installed", t->name);
	snprintf(t->bundle, sizeof(t->bundle), "%s/%s%s%s", e->dir, t->name, role[0] ? "-" : "",
		 role);
	char root[300], p[PATH_MAX + 32];
	snprintf(root, sizeof(root), "%s/rootfs", t->bundle);
	static const char *const dirs[] = {"", "/bin", "/proc", "/dev", "/sys", "/tmp", "/etc"};
	if (mkdir(t->bundle, 0700) < 0)
		return rung_err_sys(err, errno, "mkdir %s", t->bundle);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", root, dirs[i]);
		mkdir(p, 0755);
	}
	snprintf(p, sizeof(p), "%s/bin/busybox", root);
	if (access("/bin/busybox", R_OK) == 0)
		copy_file("/bin/busybox", p, 0755, err);
	snprintf(t->workdir, sizeof(t->workdir), "%s/work", root);
	int r = ladder_plant_dir(e, t->workdir, 0777, probe_bin, err);
	if (r < 0)
		return r;
	char *out = NULL;
	char *argv[] = {(char *)rt, "spec", NULL};
	r = spawn_capture(argv, t->bundle, -1, false, 30, &out, err);
	free(out);
	return r == 0 ? 0 : rung_err_wrap(err, "%s spec", t->name);
}

/* The bundle's config.json: args (a JSON array, taken) as the process, the ladder's limits. */
static int oci_config(struct ladder_target *t, struct ladder_env *e, json_t *args,
		      struct rung_err *err)
{
	char p[PATH_MAX + 16];
	snprintf(p, sizeof(p), "%s/config.json", t->bundle);
	json_error_t je;
	json_t *c = json_load_file(p, 0, &je);
	if (!c) {
		json_decref(args);
		return rung_err_set(err, EINVAL, "%s: %s", p, je.text);
	}
	json_t *proc = json_object_get(c, "process");
	json_object_set_new(proc, "args", args);
	json_object_set_new(proc, "cwd", json_string("/work"));
	json_object_set_new(proc, "terminal", json_false());
	json_object_set_new(json_object_get(c, "root"), "readonly", json_false());
	json_object_set_new(json_object_get(c, "linux"), "resources",
			    json_pack("{s{sI}s{sIsI}s{sI}}", "memory", "limit",
				      (json_int_t)e->mem_limit, "cpu", "quota",
				      (json_int_t)e->cpus_milli * 100, "period", (json_int_t)100000,
				      "pids", "limit", (json_int_t)e->pids_limit));
	int r = json_dump_file(c, p, JSON_INDENT(1));
	json_decref(c);
	return r < 0 ? rung_err_sys(err, EIO, "write %s", p) : 0;
}

static int open_sandbox(struct cli *c, struct ladder_target *t, struct ladder_env *e,
			const char *probe_bin, const char *image, enum rung_isolation iso,
			const char *role, struct rung_err *err);

int ladder_open_rung(struct cli *c, struct ladder_target *t, struct ladder_env *e,
		     const char *probe_bin, const char *image, const char *role,
		     struct rung_err *err)
{
	enum rung_isolation iso = !strcmp(t->name, "process")	  ? RUNG_ISO_PROCESS
				  : !strcmp(t->name, "container") ? RUNG_ISO_CONTAINER
								  : RUNG_ISO_VM;
	if (iso == RUNG_ISO_VM && access("/dev/kvm", F_OK) < 0)
		return rung_err_set(err, ENODEV,
				    "no /dev/kvm on this host: the vm column comes "
				    "from the nested stage (make check-vm)");
	/* the vm rung needs RAM to boot: its own memory limit (in its context); its CPU and pids
	 * are the ladder's, a quota and pids.max of the guest's command cgroup */
	unsigned long long mem = e->mem_limit;
	if (iso == RUNG_ISO_VM)
		e->mem_limit = 256ULL << 20;
	int rc = open_sandbox(c, t, e, probe_bin, image, iso, role, err);
	e->mem_limit = mem;
	return rc;
}

static int open_sandbox(struct cli *c, struct ladder_target *t, struct ladder_env *e,
			const char *probe_bin, const char *image, enum rung_isolation iso,
			const char *role, struct rung_err *err)
{
	struct rung_router *r = cli_router(c);
	if (!r)
		return rung_err_set(err, EIO, "no router (see the error above)");
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("ladder");
	s.isolation = iso;
	s.image = iso == RUNG_ISO_PROCESS ? NULL : strdup(image);
	s.limits.memory_bytes = e->mem_limit;
	s.limits.disk_bytes = e->disk_limit;
	s.limits.pids = e->pids_limit;
	s.limits.cpus_milli = e->cpus_milli;
	char thread[64];
	snprintf(thread, sizeof(thread), "%.16s-%s%s%s", e->token, t->name, role[0] ? "-" : "",
		 role);
	struct rung_key key = {.scope = "rung-ladder", .thread = thread, .agent = "ladder"};
	bool created;
	int rc = rung_acquire(r, &key, &s, &t->sb, &created, err);
	rung_spec_release(&s);
	if (rc < 0)
		return rc;
	size_t len = 0;
	char *bin = NULL;
	FILE *f = fopen(probe_bin, "re");
	if (f) {
		fseek(f, 0, SEEK_END);
		len = (size_t)ftell(f);
		rewind(f);
		bin = malloc(len);
		if (bin && fread(bin, 1, len, f) != len)
			len = 0;
		fclose(f);
	}
	if (!bin || !len) {
		free(bin);
		return rung_err_sys(err, ENOENT, "read %s", probe_bin);
	}
	rc = rung_write_file(t->sb, "rung-probe", bin, len, 0755, err);
	free(bin);
	char *ctx = ladder_env_ctx(e);
	if (rc >= 0)
		rc = rung_write_file(t->sb, "rung-probe.ctx", ctx, strlen(ctx), 0644, err);
	free(ctx);
	return rc;
}

int ladder_target_open(struct cli *c, struct ladder_target *t, struct ladder_env *e,
		       const char *probe_bin, const char *image)
{
	struct rung_err err = {0};
	int r = 0;
	ladder_sibling_open(c, t, e, probe_bin, image); /* first: t's context names it */
	if (!t->peer) {
		r = ladder_open_rung(c, t, e, probe_bin, image, "", &err);
	} else if (!strcmp(t->name, "bwrap")) {
		if (!tool_path("bwrap"))
			r = rung_err_set(&err, ENOENT, "bwrap is not installed");
		snprintf(t->workdir, sizeof(t->workdir), "%s/bwrap", e->dir);
		if (r >= 0)
			r = ladder_plant_dir(e, t->workdir, 0777, probe_bin, &err);
	} else {
		r = oci_bundle(t, e, probe_bin, "", &err);
	}
	if (r < 0)
		snprintf(t->why, sizeof(t->why), "%s", err.msg);
	return r;
}

void ladder_bwrap_argv(char **argv, size_t max, const char *workdir, char *const *cmd)
{
	static const char *const fixed[] = {
	    "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr",
	    "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink",
	    "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin", "--proc", "/proc", "--dev",
	    "/dev", "--tmpfs", "/tmp", "--bind"};
	size_t n = 0;
	const char *bw = tool_path("bwrap");
	argv[n++] = (char *)(bw ? bw : "/usr/bin/bwrap");
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		argv[n++] = (char *)fixed[i];
	argv[n++] = (char *)workdir;
	argv[n++] = "/work";
	argv[n++] = "--chdir";
	argv[n++] = "/work";
	for (; *cmd && n + 1 < max; cmd++)
		argv[n++] = *cmd;
	argv[n] = NULL;
}

static int run_peer(struct ladder_target *t, struct ladder_env *e, const char *probe, char **out,
		    struct rung_err *err)
{
	if (!strcmp(t->name, "bwrap")) {
		char *argv[48];
		char *cmd[] = {"/work/rung-probe", "--token", e->token, (char *)probe, NULL};
		ladder_bwrap_argv(argv, 48, t->workdir, cmd);
		return spawn_capture(argv, NULL, PEER_UID, false, 60, out, err);
	}
	int r = oci_config(t, e,
			   json_pack("[ssss]", "/work/rung-probe", "--token", e->token, probe), err);
	if (r < 0)
		return r;
	char id[64];
	snprintf(id, sizeof(id), "rung-ladder-%d-%u", (int)getpid(), t->seq++);
	char *argv[] = {(char *)tool_path(t->name), "run", "-b", t->bundle, id, NULL};
	r = spawn_capture(argv, NULL, -1, true, 60, out, err);
	if (r != 0) { /* a runtime that failed may leave its container: delete it */
		char *junk = NULL;
		struct rung_err ignore = {0};
		char *del[] = {(char *)tool_path(t->name), "delete", "-f", id, NULL};
		spawn_capture(del, NULL, -1, true, 30, &junk, &ignore);
		free(junk);
	}
	return r;
}

int ladder_target_run(struct cli *c, struct ladder_target *t, struct ladder_env *e,
		      const char *probe, char **out, struct rung_err *err)
{
	*out = NULL;
	if (t->peer) {
		int r = run_peer(t, e, probe, out, err);
		return r < 0 ? r : 0; /* a non-zero exit with a JSON line is still a result */
	}
	const char *argv[] = {"/work/rung-probe", "--token", e->token, probe, NULL};
	struct rung_exec_req req = {.argv = argv, .cwd = "/work", .timeout_ms = 60000};
	struct rung_exec_res res = {0};
	int r = rung_exec(t->sb, &req, &res, err);
	if (r < 0)
		return r;
	*out = res.out;
	res.out = NULL;
	if (res.exit_code != 0 && !strchr(*out ? *out : "", '{'))
		rung_err_set(err, EIO, "exit %d signal %d: %.200s", res.exit_code, res.signal,
			     res.errout ? res.errout : "");
	rung_exec_res_release(&res);
	return 0;
}

/* Run the runtime with argv[1..] (its own mount namespace as for every run), output
 * discarded: its exit status. */
static int oci_quiet(char *const argv[])
{
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		child_exec(argv, NULL, -1, true, null, null);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int ladder_oci_sibling(struct ladder_target *t, struct ladder_env *e, const char *probe_bin,
		       struct rung_err *err)
{
	struct ladder_target sib = {.name = t->name};
	int r = oci_bundle(&sib, e, probe_bin, "sibling", err);
	char p[PATH_MAX], port[16];
	snprintf(p, sizeof(p), "%.500s/sibling.log", sib.workdir);
	if (r == 0)
		r = write_text(p, "", 0666, err);
	snprintf(port, sizeof(port), "%u", e->sib_port);
	if (r == 0)
		r = oci_config(&sib, e,
			       json_pack("[ssssss]", "/work/rung-probe", "--token", e->token,
					 "--sibling", e->sib_comm, port),
			       err);
	if (r < 0)
		return r;
	snprintf(e->sib_ctr, sizeof(e->sib_ctr), "rung-ladder-%d-sibling", (int)getpid());
	snprintf(e->sib_rt, sizeof(e->sib_rt), "%s", t->name);
	char *argv[] = {(char *)tool_path(t->name), "run", "-d", "-b", sib.bundle, e->sib_ctr, NULL};
	if ((r = oci_quiet(argv)) != 0) {
		ladder_oci_delete(e);
		return rung_err_set(err, EIO, "%s run -d (the sibling) exited %d", t->name, r);
	}
	snprintf(e->sib_dir, sizeof(e->sib_dir), "%s", sib.workdir);
	return 0;
}

void ladder_oci_delete(struct ladder_env *e)
{
	if (!e->sib_ctr[0])
		return;
	const char *rt = tool_path(e->sib_rt);
	char *argv[] = {(char *)rt, "delete", "-f", e->sib_ctr, NULL};
	if (rt && oci_quiet(argv) != 0)
		fprintf(stderr, "rung ladder: %s delete -f %s failed\n", e->sib_rt, e->sib_ctr);
	e->sib_ctr[0] = '\0';
}

void ladder_target_close(struct cli *c, struct ladder_target *t, struct ladder_env *e)
{
	ladder_sibling_close(c, e);
	if (t->sb) {
		struct rung_err err = {0};
		char id[80];
		snprintf(id, sizeof(id), "%s", rung_sandbox_id(t->sb));
		rung_sandbox_close(t->sb);
		t->sb = NULL;
		if (rung_dispose(cli_router(c), id, NULL, &err) < 0)
			fprintf(stderr, "rung ladder: dispose %s: %s\n", id, err.msg);
	}
}

char *ladder_probe_line(const char *probe, const char *result, const char *evidence)
{
	json_t *j = json_pack("{s:s,s:s,s:n,s:s}", "probe", probe, "result", result, "errno",
			      "evidence", evidence);
	char *s = json_dumps(j, 0);
	json_decref(j);
	return s;
}

void ladder_target_fileapi(struct ladder_target *t, struct ladder_env *e, const char *probe,
			   char **out)
{
	bool rd = !strcmp(probe, "fs.fileapi_link_read"), dd = !strcmp(probe, "fs.fileapi_dotdot");
	bool wr = !strcmp(probe, "fs.fileapi_link_write");
	if (!rd && !dd && !wr)
		return;
	free(*out);
	if (t->peer || !t->sb) {
		*out = ladder_probe_line(probe, "n/a", "a peer has no file API");
		return;
	}
	struct rung_err err = {0};
	char ev[800], path[400];
	if (wr) {
		if (rung_write_file(t->sb, "probe-link-w", e->token, strlen(e->token), 0644, &err) <
		    0)
			snprintf(ev, sizeof(ev), "rung_write_file probe-link-w: %s", err.msg);
		else
			snprintf(ev, sizeof(ev), "rung_write_file probe-link-w succeeded");
		*out = ladder_probe_line(probe, "escaped", ev); /* the host's check decides */
		return;
	}
	if (rd)
		snprintf(path, sizeof(path), "probe-link-r");
	else /* host_dir is absolute: ../(...)/tmp/rung-ladder-XXXXXX/host/secret */
		snprintf(path, sizeof(path), "../../../../../../../../..%s/secret", e->host_dir);
	char *data = NULL;
	size_t len = 0;
	if (rung_read_file(t->sb, path, 4096, &data, &len, &err) < 0) {
		snprintf(ev, sizeof(ev), "rung_read_file %s: %s", path, err.msg);
		*out = ladder_probe_line(probe, "blocked", ev);
		return;
	}
	snprintf(ev, sizeof(ev), "content=%.*s", (int)strcspn(data, "\n"), data);
	free(data);
	*out = ladder_probe_line(probe, "escaped", ev);
}
