/* tests/lib/ladder.c: see ladder.h. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/ladder.h"
#include "tests/lib/ladder.h"
#include "tests/lib/testutil.h"

const char *lt_probe_bin(void)
{
	static char abs[PATH_MAX];
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "%s/rung-probe", rung_test_build_dir());
	if (!realpath(rel, abs))
		snprintf(abs, sizeof(abs), "%s", rel);
	return abs;
}

/* Run argv with stdout captured (malloc'd); child_setup runs in the child first. */
static char *capture(char *const argv[], const char *cwd, void (*child_setup)(const void *),
		     const void *arg)
{
	int p[2];
	if (pipe(p) < 0)
		return NULL;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		if (child_setup)
			child_setup(arg);
		if (cwd && chdir(cwd) < 0)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	ssize_t k;
	while ((k = read(p[0], buf + len, cap - len - 1)) > 0)
		if ((len += (size_t)k) + 1 >= cap)
			buf = realloc(buf, cap *= 2);
	close(p[0]);
	waitpid(pid, NULL, 0);
	buf[len] = '\0';
	return buf;
}

size_t lt_list(struct lt_outcome *out, size_t max)
{
	char *argv[] = {(char *)lt_probe_bin(), "--list", NULL};
	char *s = capture(argv, NULL, NULL, NULL);
	size_t n = 0;
	for (char *l = s ? strtok(s, "\n") : NULL; l && n < max; l = strtok(NULL, "\n")) {
		memset(&out[n], 0, sizeof(out[n]));
		snprintf(out[n].name, sizeof(out[n].name), "%.*s", (int)strcspn(l, "\t"), l);
		n++;
	}
	free(s);
	return n;
}

void lt_judge(struct ladder_env *e, struct ladder_target *t, int vmm, struct lt_outcome *o,
	      char **line, const struct rung_err *perr)
{
	ladder_target_fileapi(t, e, o->name, line);
	if (!vmm) {
		ladder_target_vmm(t, o->name, line);
	} else if (!strcmp(o->name, "vm.vmm_jail")) {
		char res[16], ev[700];
		ladder_vmm_check(vmm, res, sizeof(res), ev, sizeof(ev));
		free(*line);
		*line = ladder_probe_line(o->name, res, ev);
	}
	json_t *r = ladder_result(e, o->name, *line, 0, perr);
	snprintf(o->result, sizeof(o->result), "%s",
		 json_string_value(json_object_get(r, "result")) ?: "?");
	snprintf(o->evidence, sizeof(o->evidence), "%s",
		 json_string_value(json_object_get(r, "evidence")) ?: "");
	json_decref(r);
}

const struct lt_outcome *lt_find(const struct lt_outcome *out, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(out[i].name, name))
			return &out[i];
	return NULL;
}

static void keep(struct lt_outcome *o, json_t *r)
{
	snprintf(o->result, sizeof(o->result), "%s",
		 json_string_value(json_object_get(r, "result")) ?: "?");
	snprintf(o->evidence, sizeof(o->evidence), "%s",
		 json_string_value(json_object_get(r, "evidence")) ?: "");
	json_decref(r);
}

bool lt_run_target(const char *target, const char *state, const char *image, struct lt_outcome *out,
		   size_t n, char *why, size_t whyn)
{
	int r, of;
	return lt_run_target_count(target, state, image, out, n, &r, &of, why, whyn);
}

static void count(struct cli *c, struct ladder_target *t, struct ladder_env *e, int *reachable,
		  int *of)
{
	char *o = NULL;
	struct rung_err err = {0};
	*reachable = *of = -1;
	if (ladder_target_run(c, t, e, "--count", &o, &err) >= 0 && o && strchr(o, '{')) {
		json_t *j = json_loads(strrchr(o, '{'), 0, NULL);
		if (json_is_integer(json_object_get(j, "reachable")))
			*reachable = (int)json_integer_value(json_object_get(j, "reachable"));
		if (json_is_integer(json_object_get(j, "of")))
			*of = (int)json_integer_value(json_object_get(j, "of"));
		json_decref(j);
	}
	free(o);
}

bool lt_run_target_count(const char *target, const char *state, const char *image,
			 struct lt_outcome *out, size_t n, int *reachable, int *of, char *why,
			 size_t whyn)
{
	char agent[PATH_MAX], rel[PATH_MAX], helpers[PATH_MAX];
	snprintf(rel, sizeof(rel), "%s/rung-agent", rung_test_build_dir());
	if (!realpath(rel, agent) || !realpath(rung_test_build_dir(), helpers)) {
		snprintf(why, whyn, "%s: %s", rel, strerror(errno));
		return false;
	}
	struct cli c = {.state_dir = state, .root = true};
	c.host.agent_path = agent;
	c.host.helper_dir = helpers;
	rung_test_router_env(&c.host);
	struct ladder_env e;
	struct rung_err err = {0};
	bool ok = false;
	struct ladder_target t = {.name = target};
	t.peer = !strcmp(target, "bwrap") || !strcmp(target, "crun") || !strcmp(target, "runc");
	if (ladder_env_setup(&e, state, &err) < 0) {
		snprintf(why, whyn, "ladder env: %s", err.msg);
	} else if (ladder_target_open(&c, &t, &e, lt_probe_bin(), image) < 0) {
		snprintf(why, whyn, "%s", t.why);
	} else {
		ok = true;
		for (size_t i = 0; i < n; i++) {
			char *o = NULL;
			struct rung_err perr = {0};
			ladder_env_reset(&e);
			int rc = ladder_target_run(&c, &t, &e, out[i].name, &o, &perr);
			ladder_target_fileapi(&t, &e, out[i].name, &o);
			ladder_target_vmm(&t, out[i].name, &o);
			keep(&out[i], ladder_result(&e, out[i].name, o, rc, &perr));
			free(o);
		}
		count(&c, &t, &e, reachable, of);
	}
	ladder_target_close(&c, &t, &e);
	ladder_env_teardown(&e);
	if (c.router)
		rung_router_free(c.router);
	return ok;
}

struct weak_arg {
	const char *dir, *host_dir;
};

static void weaken(const void *p)
{
	const struct weak_arg *w = p;
	char bind[PATH_MAX];
	/* a mount namespace of its own, the host's directory bound into it */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		_exit(125);
	snprintf(bind, sizeof(bind), "%s/hostbind", w->dir);
	mkdir(bind, 0755);
	if (mount(w->host_dir, bind, NULL, MS_BIND, NULL) < 0)
		_exit(125);
	/* an ambient capability: inheritable first, then raised */
	cap_t caps = cap_get_proc();
	cap_value_t v = CAP_NET_BIND_SERVICE;
	if (!caps || cap_set_flag(caps, CAP_INHERITABLE, 1, &v, CAP_SET) < 0 ||
	    cap_set_proc(caps) < 0 ||
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_BIND_SERVICE, 0, 0) < 0)
		_exit(125);
	cap_free(caps);
}

/* The weakened file API: plain open(2) from the working directory, no confinement at all
 * (what rung_read_file / rung_write_file would be without openat2's RESOLVE_IN_ROOT). */
static void weak_fileapi(struct ladder_env *e, const char *dir, const char *probe, char **o)
{
	char p[PATH_MAX + 512], buf[256] = "", ev[512];
	bool wr = !strcmp(probe, "fs.fileapi_link_write");
	if (strcmp(probe, "fs.fileapi_link_read") && strcmp(probe, "fs.fileapi_dotdot") && !wr)
		return;
	free(*o);
	if (!strcmp(probe, "fs.fileapi_link_read"))
		snprintf(p, sizeof(p), "%s/probe-link-r", dir);
	else if (wr)
		snprintf(p, sizeof(p), "%s/probe-link-w", dir);
	else
		snprintf(p, sizeof(p), "%s/../../../../../../../..%s/secret", dir, e->host_dir);
	int fd = open(p, wr ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY, 0644);
	ssize_t k = fd < 0 ? -1
		    : wr   ? write(fd, e->token, strlen(e->token))
			   : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	buf[k > 0 && !wr ? k : 0] = '\0';
	snprintf(ev, sizeof(ev), wr ? "wrote through the link" : "content=%s", buf);
	*o = ladder_probe_line(probe, k > 0 ? "escaped" : "blocked", ev);
}

bool lt_run_weak(struct lt_outcome *out, size_t n, char *why, size_t whyn)
{
	struct ladder_env e;
	struct rung_err err = {0};
	if (ladder_env_setup(&e, "/nonexistent-state", &err) < 0) {
		ladder_env_teardown(&e);
		snprintf(why, whyn, "ladder env: %s", err.msg);
		return false;
	}
	char dir[PATH_MAX], sib[PATH_MAX];
	/* the sibling: a plain host process (the host's pid and network namespaces) */
	snprintf(sib, sizeof(sib), "%s/sibling", e.dir);
	if (ladder_sibling_host(&e, sib, lt_probe_bin(), &err) < 0) {
		ladder_env_teardown(&e);
		snprintf(why, whyn, "sibling: %s", err.msg);
		return false;
	}
	snprintf(dir, sizeof(dir), "%s/weak", e.dir);
	if (ladder_plant_dir(&e, dir, 0755, lt_probe_bin(), &err) < 0) {
		ladder_env_teardown(&e);
		snprintf(why, whyn, "plant: %s", err.msg);
		return false;
	}
	struct weak_arg w = {dir, e.host_dir};
	for (size_t i = 0; i < n; i++) {
		char *argv[] = {(char *)lt_probe_bin(), "--token", e.token, out[i].name, NULL};
		ladder_env_reset(&e);
		char *o = capture(argv, dir, weaken, &w);
		weak_fileapi(&e, dir, out[i].name, &o);
		if (!strcmp(out[i].name, "vm.vmm_jail")) {
			/* the weakened VMM: a host process with no filter, in the host's
			 * namespaces (the sibling's victim), checked as the ladder checks rung-vmm */
			char res[16], ev[700];
			ladder_vmm_check(e.sib_pid, res, sizeof(res), ev, sizeof(ev));
			free(o);
			o = ladder_probe_line(out[i].name, res, ev);
		}
		struct rung_err perr = {0};
		keep(&out[i], ladder_result(&e, out[i].name, o, 0, &perr));
		free(o);
	}
	ladder_env_teardown(&e);
	return true;
}

/* The probes that escape in a rung by design, or through a known gap. */
static const char *const process_escapes[] = {
    "vm.shared_kernel", /* the process rung shares the host's kernel: that is the rung */
    NULL,
};
static const char *const container_escapes[] = {
    "vm.shared_kernel",
    NULL,
};
/* The container rung under containerd (rung-oci, e2e_oci_containerd, on containerd's default
 * overlayfs snapshotter): the container rung's set. The overlay rung-oci makes over the
 * snapshot's layers takes its paths relative to its state directory (oci/overlay.c), so
 * /proc/self/mountinfo names no host path (info.host_mounts blocked; runc's containers show
 * the snapshot's paths; on the native snapshotter the bind's path within its filesystem
 * still shows, docs/oci.md). */
static const char *const containerd_escapes[] = {
    "vm.shared_kernel",
    NULL,
};

/* The vm rung through rung-oci-vm under containerd (e2e_oci_ctrdvm, in the nested stage's L1;
 * measured there on 2 Dec). The guest's kernel is not the host's (vm.shared_kernel blocked)
 * and rung-vmm's jail holds (vm.vmm_jail blocked); what escapes is inside the guest: the
 * boundary is the VM: the battery's container asks for no linux.seccomp (ctr run without
 * --seccomp), so the program runs under no filter in the guest, and ctr run asks for no pids
 * limit (docs/oci.md, "The vm rung"). */
static const char *const containerd_vm_escapes[] = {
    "fs.block_device",	    /* /dev/vdb: the container's own disk */
    "kernel.perf_event_open", "kernel.ptrace", "kernel.personality", /* the guest's kernel */
    "kernel.netlink_uevent", /* the guest's devices' events */
    "kernel.af_vsock",	    /* the socket only: rung-vmm's vsock takes host-made connections */
    "info.dmesg",	    /* the guest kernel's log */
    "res.fork_bomb", /* ctr run sets no pids limit (the guest's cgroup would apply one) */
    "res.disk",		    /* the guest's own disk, no quota from the spec */
    NULL,
};

static bool listed(const char *const *l, const char *name)
{
	for (; *l; l++)
		if (!strcmp(*l, name))
			return true;
	return false;
}

size_t lt_unexpected(const char *rung, const struct lt_outcome *out, size_t n, bool peer_na,
		     char *bad, size_t badn)
{
	const char *const *escapes = !strcmp(rung, "process")	      ? process_escapes
				     : !strcmp(rung, "containerd")    ? containerd_escapes
				     : !strcmp(rung, "containerd-vm") ? containerd_vm_escapes
								      : container_escapes;
	size_t at = 0, count = 0;
	bad[0] = '\0';
	for (size_t i = 0; i < n && at < badn; i++) {
		const char *want = listed(escapes, out[i].name) ? "escaped" : "blocked";
		if (!strcmp(out[i].result, want))
			continue;
		if (!strcmp(out[i].result, "n/a") &&
		    !strncmp(out[i].evidence, "this host has ", 14))
			continue;
		/* the host's check of rung-vmm: a shared-kernel rung has no VMM */
		if (!strcmp(out[i].name, "vm.vmm_jail") && !strcmp(out[i].result, "n/a") &&
		    !strcmp(out[i].evidence, "the vm rung's VMM only"))
			continue;
		if (peer_na && !strcmp(out[i].result, "n/a") &&
		    !strcmp(out[i].evidence, "a peer has no file API"))
			continue;
		count++;
		at += (size_t)snprintf(bad + at, badn - at, "\n  %s: %s, want %s (%s)",
				       out[i].name, out[i].result, want, out[i].evidence);
	}
	return count;
}
