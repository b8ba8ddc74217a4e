/*
 * rung-probe: one probe of the isolation ladder per invocation (probe/probe.h).
 *
 *   rung-probe --list                      every probe: name, family, what escaped means
 *   rung-probe --token TOKEN NAME          run probe NAME; one JSON line on stdout
 *   rung-probe --token TOKEN --count       the syscalls the filters leave reachable
 *
 * It refuses to run unless it was planted by `rung ladder`: the working directory must hold
 * the context file rung-probe.ctx (a regular file, not a link) whose token= line equals
 * TOKEN. The ladder writes that file into the sandbox's own writable directory with a fresh
 * random token per run, so a rung-probe started by hand on the host finds none and does
 * nothing (docs/ladder.md, "Safety").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe/probe.h"

static const struct probe *const families[] = {probes_fs,	probes_kernel, probes_priv,
					       probes_ipc,	probes_sibling, probes_net,
					       probes_res,	probes_info};

static void vset(struct probe_out *o, enum probe_result r, int err, const char *fmt, va_list ap)
{
	o->result = r;
	o->err = err;
	vsnprintf(o->evidence, sizeof(o->evidence), fmt, ap);
}

void probe_blocked(struct probe_out *o, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vset(o, PROBE_BLOCKED, err, fmt, ap);
	va_end(ap);
}

void probe_escaped(struct probe_out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vset(o, PROBE_ESCAPED, 0, fmt, ap);
	va_end(ap);
}

void probe_na(struct probe_out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vset(o, PROBE_NA, 0, fmt, ap);
	va_end(ap);
}

void probe_syscall(struct probe_out *o, long r, const int *reached, const char *what)
{
	int e = errno;
	if (r >= 0) {
		probe_escaped(o, "%s: succeeded", what);
		return;
	}
	for (const int *p = reached; p && *p; p++)
		if (*p == e) {
			probe_escaped(o, "%s: reached the kernel past its permission checks (%s)",
				      what, strerrorname_np(e) ?: "?");
			return;
		}
	probe_blocked(o, e, "%s: %s", what, strerror(e));
}

long probe_read(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	ssize_t k = read(fd, buf, n - 1);
	int e = errno;
	close(fd);
	if (k < 0)
		return -e;
	buf[k] = '\0';
	return k;
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static int ctx_set(struct probe_ctx *c, const char *k, const char *v)
{
	struct {
		const char *key;
		char *s;
		size_t n;
	} strs[] = {{"token", c->token, sizeof(c->token)},
		    {"host_dir", c->host_dir, sizeof(c->host_dir)},
		    {"abstract", c->abstract, sizeof(c->abstract)},
		    {"dns_addr", c->dns_addr, sizeof(c->dns_addr)},
		    {"host_addr", c->host_addr, sizeof(c->host_addr)},
		    {"sibling_comm", c->sibling_comm, sizeof(c->sibling_comm)},
		    {"shm_name", c->shm_name, sizeof(c->shm_name)},
		    {"state_dir", c->state_dir, sizeof(c->state_dir)}};
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		if (!strcmp(k, strs[i].key)) {
			snprintf(strs[i].s, strs[i].n, "%s", v);
			return 0;
		}
	unsigned long long n = strtoull(v, NULL, 10);
	if (!strcmp(k, "tcp_port"))
		c->tcp_port = (unsigned)n;
	else if (!strcmp(k, "tcp6_port"))
		c->tcp6_port = (unsigned)n;
	else if (!strcmp(k, "udp_port"))
		c->udp_port = (unsigned)n;
	else if (!strcmp(k, "dns_port"))
		c->dns_port = (unsigned)n;
	else if (!strcmp(k, "sibling_pid"))
		c->sibling_pid = (int)n;
	else if (!strcmp(k, "sibling_port"))
		c->sibling_port = (unsigned)n;
	else if (!strcmp(k, "sysv_shm_key"))
		c->sysv_shm_key = (int)n;
	else if (!strcmp(k, "victim_pid"))
		c->victim_pid = (int)n;
	else if (!strcmp(k, "mem_limit"))
		c->mem_limit = n;
	else if (!strcmp(k, "pids_limit"))
		c->pids_limit = (unsigned)n;
	else if (!strcmp(k, "cpus_milli"))
		c->cpus_milli = (unsigned)n;
	else if (!strcmp(k, "disk_limit"))
		c->disk_limit = n;
	else
		return -1;
	return 0;
}

/* The planted context, or an error naming what is missing: the refusal to run elsewhere. */
static int ctx_load(struct probe_ctx *c, const char *token)
{
	struct stat st;
	if (lstat("rung-probe.ctx", &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "rung-probe: no ./rung-probe.ctx: it runs only where `rung ladder` "
				"planted it, inside a sandbox (docs/ladder.md)\n");
		return -1;
	}
	FILE *f = fopen("rung-probe.ctx", "re");
	if (!f)
		return -1;
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *eq = strchr(line, '=');
		if (eq) {
			*eq = '\0';
			ctx_set(c, line, eq + 1);
		}
	}
	fclose(f);
	if (strlen(token) < 32 || strcmp(c->token, token)) {
		fprintf(stderr,
			"rung-probe: the token does not match ./rung-probe.ctx: refusing\n");
		return -1;
	}
	return 0;
}

static const struct probe *find(const char *name)
{
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
		for (const struct probe *p = families[i]; p->name; p++)
			if (!strcmp(p->name, name))
				return p;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
			for (const struct probe *p = families[i]; p->name; p++)
				printf("%s\t%s\t%s\n", p->name, p->family, p->what);
		return 0;
	}
	if (argc == 6 && !strcmp(argv[1], "--token") && !strcmp(argv[3], "--sibling")) {
		struct probe_ctx sc = {0};
		if (ctx_load(&sc, argv[2]) < 0)
			return 3;
		return probe_sibling(&sc, argv[4], argv[5]);
	}
	if (argc != 4 || strcmp(argv[1], "--token")) {
		fprintf(stderr,
			"usage: rung-probe --list | rung-probe --token TOKEN NAME|--count\n"
			"       rung-probe --token TOKEN --sibling COMM PORT\n"
			"Runs one probe of `rung ladder` (docs/ladder.md); it refuses to run\n"
			"outside a sandbox the ladder planted it in.\n");
		return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
	}
	if (!strcmp(argv[3], "--count")) {
		struct probe_ctx cc = {0};
		if (ctx_load(&cc, argv[2]) < 0)
			return 3;
		return probe_count_syscalls();
	}
	const struct probe *p = find(argv[3]);
	if (!p) {
		fprintf(stderr, "rung-probe: no probe '%s' (--list)\n", argv[3]);
		return 2;
	}
	struct probe_ctx c = {0};
	if (ctx_load(&c, argv[2]) < 0)
		return 3;
	struct probe_out o = {.result = PROBE_NA};
	snprintf(o.evidence, sizeof(o.evidence), "no result");
	p->run(&c, &o);
	static const char *const names[] = {"blocked", "escaped", "n/a"};
	printf("{\"probe\": ");
	json_str(p->name);
	printf(", \"family\": \"%s\", \"result\": \"%s\", \"errno\": ", p->family, names[o.result]);
	if (o.err)
		json_str(strerrorname_np(o.err) ?: "?");
	else
		printf("null");
	printf(", \"evidence\": ");
	json_str(o.evidence);
	printf("}\n");
	return 0;
}
