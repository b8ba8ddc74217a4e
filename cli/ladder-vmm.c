/*
 * cli/ladder-vmm.c: vm.vmm_jail, the one row the host measures itself. A probe inside the
 * guest cannot see the VMM; the ladder checks the vm sandbox's rung-vmm from the host: a
 * seccomp filter (Seccomp: 2 in /proc/PID/status), no_new_privs, its own mount, pid, net, ipc
 * and uts namespaces, a root that is not the host's, and not the host's root user. Anything
 * missing is an escape of the VMM's jail, named in the evidence.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/ladder.h"

/* The value of "Key:" in /proc/PID/status (its first field), or "" when absent. */
static void status_field(pid_t pid, const char *key, char *out, size_t n)
{
	char p[64], line[256];
	out[0] = '\0';
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	FILE *f = fopen(p, "re");
	size_t k = strlen(key);
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, k) && line[k] == ':') {
			char v[64] = "";
			sscanf(line + k + 1, "%63s", v);
			snprintf(out, n, "%s", v);
			break;
		}
	if (f)
		fclose(f);
}

static bool same_link(pid_t pid, const char *what)
{
	char a[64], b[64], la[128] = "", lb[128] = "";
	snprintf(a, sizeof(a), "/proc/%d/%s", (int)pid, what);
	snprintf(b, sizeof(b), "/proc/self/%s", what);
	ssize_t x = readlink(a, la, sizeof(la) - 1), y = readlink(b, lb, sizeof(lb) - 1);
	return x > 0 && y > 0 && x == y && !memcmp(la, lb, (size_t)x);
}

int ladder_vmm_check(pid_t pid, char *result, size_t rn, char *evidence, size_t en)
{
	char seccomp[64], nnp[64], uid[64], missing[512] = "";
	size_t at = 0;
	status_field(pid, "Seccomp", seccomp, sizeof(seccomp));
	if (!seccomp[0]) {
		snprintf(result, rn, "n/a");
		snprintf(evidence, en, "no VMM process %d to check", (int)pid);
		return -ESRCH;
	}
	status_field(pid, "NoNewPrivs", nnp, sizeof(nnp));
	status_field(pid, "Uid", uid, sizeof(uid));
#define MISSING(...)                                                                               \
	at += (size_t)snprintf(missing + at, at < sizeof(missing) ? sizeof(missing) - at : 0,      \
			       __VA_ARGS__)
	if (strcmp(seccomp, "2"))
		MISSING("; no seccomp filter (Seccomp: %s)", seccomp);
	if (strcmp(nnp, "1"))
		MISSING("; no_new_privs off");
	if (!strcmp(uid, "0"))
		MISSING("; runs as the host's root");
	static const char *const ns[] = {"ns/mnt", "ns/pid", "ns/net", "ns/ipc", "ns/uts"};
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		if (same_link(pid, ns[i]))
			MISSING("; the host's %s namespace", ns[i] + 3);
	if (same_link(pid, "root"))
		MISSING("; the host's root directory");
#undef MISSING
	if (missing[0]) {
		snprintf(result, rn, "escaped");
		snprintf(evidence, en, "rung-vmm %d (checked on the host):%s", (int)pid,
			 missing + 1);
		return 0;
	}
	snprintf(result, rn, "blocked");
	snprintf(evidence, en,
		 "rung-vmm %d (checked on the host): Seccomp: 2, no_new_privs, uid %s, its own "
		 "mnt/pid/net/ipc/uts namespaces and root",
		 (int)pid, uid);
	return 0;
}

/*
 * The rung-vmm whose root (its jail, <state>/sandboxes/ID/jail) belongs to sandbox id: argv[0]
 * "rung-vmm" (its comm is the exec'd fd's number: it is started with execveat).
 */
pid_t ladder_vmm_find(const char *id)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;
	char tail[128];
	snprintf(tail, sizeof(tail), "/%s/jail", id);
	while (d && !found && (de = readdir(d))) {
		char p[300], arg0[32] = "", root[4096];
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(p, sizeof(p), "/proc/%s/cmdline", de->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		ssize_t k = fd >= 0 ? read(fd, arg0, sizeof(arg0) - 1) : -1;
		if (fd >= 0)
			close(fd);
		arg0[k > 0 ? k : 0] = '\0';
		if (strcmp(arg0, "rung-vmm"))
			continue;
		snprintf(p, sizeof(p), "/proc/%s/root", de->d_name);
		k = readlink(p, root, sizeof(root) - 1);
		root[k > 0 ? k : 0] = '\0';
		size_t rl = strlen(root), tl = strlen(tail);
		if (rl >= tl && !strcmp(root + rl - tl, tail))
			found = (pid_t)atoi(de->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

void ladder_target_vmm(struct ladder_target *t, const char *probe, char **out)
{
	if (strcmp(probe, "vm.vmm_jail"))
		return;
	free(*out);
	char result[16], ev[700];
	if (t->peer || strcmp(t->name, "vm") || !t->sb) {
		*out = ladder_probe_line(probe, "n/a", "the vm rung's VMM only");
		return;
	}
	pid_t pid = ladder_vmm_find(rung_sandbox_id(t->sb));
	if (!pid) {
		*out = ladder_probe_line(probe, "n/a",
					 "no rung-vmm of this sandbox found on the host");
		return;
	}
	ladder_vmm_check(pid, result, sizeof(result), ev, sizeof(ev));
	*out = ladder_probe_line(probe, result, ev);
}
