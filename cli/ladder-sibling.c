/*
 * cli/ladder-sibling.c: the sibling, for the probes of other sandboxes (ipc.sibling_proc,
 * ipc.sibling_signal, net.sibling_tcp; probe/sibling.c). Per target, the ladder starts a
 * second sandbox of the same rung (or a second bwrap, crun or runc container) holding a
 * victim, `rung-probe --sibling COMM PORT`: a random name, a TCP listener on its own
 * addresses, and a log in its own work dir of every SIGCONT and every message with the run's
 * token that reached it. The probes in the target try to reach it; the host reads the
 * victim's log, and only that decides.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/ladder.h"
#include "common/err.h"

#define PEER_UID 65534 /* as bwrap's column runs */

/* A host process named comm, waiting up to ms for it to appear; 0 if none. */
static int host_pid_of(const char *comm, int ms)
{
	for (int waited = 0; waited <= ms; waited += 50) {
		DIR *d = opendir("/proc");
		struct dirent *de;
		int found = 0;
		while (d && !found && (de = readdir(d))) {
			char p[300], buf[32] = "";
			if (de->d_name[0] < '1' || de->d_name[0] > '9')
				continue;
			snprintf(p, sizeof(p), "/proc/%s/comm", de->d_name);
			int fd = open(p, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				continue;
			ssize_t k = read(fd, buf, sizeof(buf) - 1);
			close(fd);
			buf[k > 0 ? k : 0] = '\0';
			buf[strcspn(buf, "\n")] = '\0';
			if (!strcmp(buf, comm))
				found = atoi(de->d_name);
		}
		if (d)
			closedir(d);
		if (found)
			return found;
		usleep(50000);
	}
	return 0;
}

/* A host-side victim: its pid, once its log says it is ready (3 s at most). */
static int host_ready(struct ladder_env *e, struct rung_err *err)
{
	char p[PATH_MAX + 16], buf[64] = "";
	snprintf(p, sizeof(p), "%s/sibling.log", e->sib_dir);
	for (int i = 0; i < 60 && !strstr(buf, "ready\n"); i++) {
		usleep(50000);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		buf[k > 0 ? k : 0] = '\0';
	}
	e->sib_pid = host_pid_of(e->sib_comm, 0);
	if (!e->sib_pid || !strstr(buf, "ready\n"))
		return rung_err_set(err, ESRCH, "the sibling's victim did not start");
	return 0;
}

/* Fresh names for this target's sibling, from the run's token and the clock. */
static void name_it(struct ladder_env *e)
{
	unsigned long long ns = (unsigned long long)time(NULL) * 7919u + (unsigned)getpid();
	char hex[5];
	memcpy(hex, e->token + 40, 4);
	hex[4] = '\0';
	snprintf(e->sib_comm, sizeof(e->sib_comm), "rs-%.8s%04llx", e->token + 32, ns & 0xffff);
	e->sib_port = 20000 + (unsigned)((strtoul(hex, NULL, 16) + ns) % 40000);
	e->sib_pid = 0;
	e->sib_why[0] = '\0';
}

/* Fork argv in dir, as uid (-1: ours), output to /dev/null: the process's pid. */
static pid_t spawn(char *const *argv, const char *dir, int uid)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	int null = open("/dev/null", O_RDWR);
	dup2(null, 0);
	dup2(null, 1);
	dup2(null, 2);
	if (chdir(dir) < 0)
		_exit(126);
	if (uid >= 0 &&
	    (setgroups(0, NULL) < 0 || setgid((gid_t)uid) < 0 || setuid((uid_t)uid) < 0))
		_exit(126);
	execv(argv[0], argv);
	_exit(127);
}

static int plant(struct ladder_env *e, const char *dir, const char *probe_bin, int uid,
		 struct rung_err *err)
{
	int r = ladder_plant_dir(e, dir, 0777, probe_bin, err);
	if (r < 0)
		return r;
	char log[PATH_MAX + 16];
	snprintf(log, sizeof(log), "%s/sibling.log", dir);
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
	if (fd < 0)
		return rung_err_sys(err, errno, "create %s", log);
	if (uid >= 0 && fchown(fd, (uid_t)uid, (gid_t)uid) < 0) {
		close(fd);
		return rung_err_sys(err, errno, "chown %s", log);
	}
	close(fd);
	snprintf(e->sib_dir, sizeof(e->sib_dir), "%s", dir);
	return 0;
}

int ladder_sibling_host(struct ladder_env *e, const char *dir, const char *probe_bin,
			struct rung_err *err)
{
	name_it(e);
	int r = plant(e, dir, probe_bin, -1, err);
	if (r < 0)
		return r;
	char port[16], bin[PATH_MAX + 16];
	snprintf(port, sizeof(port), "%u", e->sib_port);
	snprintf(bin, sizeof(bin), "%s/rung-probe", dir);
	char *argv[] = {bin, "--token", e->token, "--sibling", e->sib_comm, port, NULL};
	if ((e->sib_proc = spawn(argv, dir, -1)) < 0)
		return rung_err_sys(err, errno, "fork the sibling");
	return host_ready(e, err);
}

static int open_bwrap(struct ladder_env *e, const char *probe_bin, struct rung_err *err)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/bwrap-sibling", e->dir);
	int r = plant(e, dir, probe_bin, PEER_UID, err);
	if (r < 0)
		return r;
	char port[16], *argv[48];
	snprintf(port, sizeof(port), "%u", e->sib_port);
	char *cmd[] = {"/work/rung-probe", "--token", e->token, "--sibling",
		       e->sib_comm,	   port,      NULL};
	ladder_bwrap_argv(argv, 48, dir, cmd);
	if ((e->sib_proc = spawn(argv, dir, PEER_UID)) < 0)
		return rung_err_sys(err, errno, "fork the sibling bwrap");
	return host_ready(e, err);
}

static int open_rung_sibling(struct cli *c, struct ladder_target *t, struct ladder_env *e,
			     const char *probe_bin, const char *image, struct rung_err *err)
{
	struct ladder_target sib = {.name = t->name};
	int r = ladder_open_rung(c, &sib, e, probe_bin, image, "sibling", err);
	e->sib_sb = sib.sb;
	if (r < 0)
		return r;
	char port[16], handle[RUNG_PROC_HANDLE_LEN + 1];
	snprintf(port, sizeof(port), "%u", e->sib_port);
	if ((r = rung_write_file(e->sib_sb, "sibling.log", "", 0, 0666, err)) < 0)
		return r;
	const char *argv[] = {"/work/rung-probe", "--token", e->token, "--sibling",
			      e->sib_comm,	  port,	     NULL};
	struct rung_proc_req req = {.argv = argv, .cwd = "/work", .name = "ladder-sibling"};
	if ((r = rung_proc_start(e->sib_sb, &req, handle, err)) < 0)
		return r;
	/* its host pid where the host sees it (not in a VM): the probes may try that one too */
	e->sib_pid = host_pid_of(e->sib_comm, strcmp(t->name, "vm") ? 3000 : 0);
	for (int i = 0; i < 60; i++) { /* ready: it listens */
		char *data = NULL;
		size_t len = 0;
		struct rung_err ignore = {0};
		bool up =
		    rung_read_file(e->sib_sb, "sibling.log", 4096, &data, &len, &ignore) >= 0 &&
		    data && strstr(data, "ready\n");
		free(data);
		if (up)
			return 0;
		usleep(50000);
	}
	return rung_err_set(err, ETIMEDOUT, "the sibling's victim did not start in 3 s");
}

void ladder_sibling_open(struct cli *c, struct ladder_target *t, struct ladder_env *e,
			 const char *probe_bin, const char *image)
{
	struct rung_err err = {0};
	int r;
	ladder_sibling_close(c, e);
	name_it(e);
	if (!t->peer)
		r = open_rung_sibling(c, t, e, probe_bin, image, &err);
	else if (!strcmp(t->name, "bwrap"))
		r = open_bwrap(e, probe_bin, &err);
	else if ((r = ladder_oci_sibling(t, e, probe_bin, &err)) == 0)
		r = host_ready(e, &err);
	if (r < 0) {
		ladder_sibling_close(c, e);
		snprintf(e->sib_why, sizeof(e->sib_why), "%s", err.msg);
	}
}

void ladder_sibling_close(struct cli *c, struct ladder_env *e)
{
	if (e->sib_sb) {
		struct rung_err err = {0};
		char id[80];
		snprintf(id, sizeof(id), "%s", rung_sandbox_id(e->sib_sb));
		rung_sandbox_close(e->sib_sb);
		e->sib_sb = NULL;
		if (c && rung_dispose(cli_router(c), id, NULL, &err) < 0)
			fprintf(stderr, "rung ladder: dispose the sibling %s: %s\n", id, err.msg);
	} else if (e->sib_ctr[0]) {
		ladder_oci_delete(e);
	} else if (e->sib_proc > 0 && e->sib_pid > 0) {
		kill(e->sib_pid, SIGKILL); /* our own victim, found by its random name */
	}
	if (e->sib_proc > 0) {
		kill(e->sib_proc, SIGKILL);
		waitpid(e->sib_proc, NULL, 0);
	}
	e->sib_proc = 0;
	e->sib_pid = 0;
	e->sib_comm[0] = '\0';
	e->sib_port = 0;
	e->sib_dir[0] = '\0';
}

int ladder_sibling_saw(struct ladder_env *e, const char *probe)
{
	const char *want = !strcmp(probe, "ipc.sibling_signal") ? "sigcont" : probe;
	for (int i = 0; i < 20; i++) { /* the victim logs within 100 ms */
		char *data = NULL;
		size_t len = 0;
		struct rung_err err = {0};
		if (e->sib_sb) {
			if (rung_read_file(e->sib_sb, "sibling.log", 65536, &data, &len, &err) < 0)
				data = NULL;
		} else if (e->sib_dir[0]) {
			char p[PATH_MAX + 16];
			snprintf(p, sizeof(p), "%s/sibling.log", e->sib_dir);
			FILE *f = fopen(p, "re");
			if (f) {
				data = calloc(1, 65536);
				if (data && fread(data, 1, 65535, f) == 0)
					data[0] = '\0';
				fclose(f);
			}
		} else {
			return -1;
		}
		bool seen = false;
		for (char *l = data; l && *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != 0))
			if (strcspn(l, "\n") == strlen(want) && !strncmp(l, want, strlen(want)))
				seen = true;
		free(data);
		if (seen)
			return 1;
		usleep(25000);
	}
	return 0;
}
