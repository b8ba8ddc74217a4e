/*
 * runtime/port-fwd.c: detached port forwards (rung_port_detach, rung_port_fwd_*; docs/ports.md).
 * The forwarding process is forked here, in a new session, with stdio on /dev/null; it waits
 * on an epoll set of its SIGTERM signalfd and the supervisor's pidfd, so that the sandbox's end
 * ends it. Its record, <store>/<id>/port-<host_port>, holds "port host_port pid starttime host".
 */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/rt-internal.h"

#define REC_PREFIX "port-"

static void rec_path(struct rt_sandbox *in, unsigned host_port, char *p, size_t n)
{
	snprintf(p, n, "%s/" REC_PREFIX "%u", in->dir, host_port);
}

/* In the forwarding process: an fd readable at SIGTERM/SIGINT/SIGHUP or the supervisor's end. */
static int stop_fd(pid_t sup)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC);
	int pfd = (int)syscall(SYS_pidfd_open, sup, 0);
	if (ep < 0 || sfd < 0 || pfd < 0)
		return -1;
	struct epoll_event ev = {.events = EPOLLIN};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, pfd, &ev) < 0)
		return -1;
	return ep; /* sfd and pfd stay open for the process's life */
}

static void fwd_child(struct rung_sandbox *s, unsigned port, int lfd, const char *rec, int ready)
{
	setsid();
	signal(SIGPIPE, SIG_IGN);
	int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (dn >= 0) {
		dup2(dn, 0);
		dup2(dn, 1);
		dup2(dn, 2);
		close(dn);
	}
	struct rt_sandbox *in = rt_sandbox_inner(s);
	int stop = stop_fd(in->meta.sup_pid);
	char ok = stop >= 0 && rung_proc_starttime(in->meta.sup_pid) == in->meta.sup_start;
	ssize_t w = write(ready, &ok, 1);
	close(ready);
	if (!ok || w != 1)
		_exit(1);
	struct rung_err err = {0};
	rung_port_forward(s, port, lfd, stop, 0, NULL, NULL, &err);
	unlink(rec);
	_exit(0);
}

int rung_port_detach(struct rung_sandbox *s, unsigned port, int lfd, const char *host,
		     unsigned host_port, pid_t *pid, struct rung_err *err)
{
	struct rt_sandbox *in = rt_sandbox_inner(s);
	if (port < 1 || port > 65535)
		return rung_err_set(err, EINVAL, "port %u out of range (a TCP port is 1..65535)",
				    port);
	char rec[4200], tmp[4300];
	rec_path(in, host_port, rec, sizeof(rec));
	int pp[2];
	if (pipe2(pp, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe");
	pid_t p = fork();
	if (p < 0) {
		close(pp[0]);
		close(pp[1]);
		return rung_err_sys(err, errno, "fork the forwarding process");
	}
	if (p == 0) {
		close(pp[0]);
		fwd_child(s, port, lfd, rec, pp[1]);
	}
	close(pp[1]);
	char ok = 0;
	ssize_t n = read(pp[0], &ok, 1);
	close(pp[0]);
	if (n != 1 || !ok) {
		kill(p, SIGKILL);
		return rung_err_set(err, ESRCH, "sandbox %s: its supervisor is gone", in->meta.id);
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", rec);
	FILE *f = fopen(tmp, "we");
	int r = 0;
	if (!f ||
	    fprintf(f, "%u %u %d %llu %.63s\n", port, host_port, (int)p,
		    (unsigned long long)rung_proc_starttime(p), host) < 0 ||
	    fclose(f) != 0 || rename(tmp, rec) < 0) {
		r = rung_err_sys(err, errno, "record the forward in %s", rec);
		kill(p, SIGTERM);
	}
	if (r == 0 && pid)
		*pid = p;
	return r;
}

/* One record, if its process still runs (else the record is removed). */
static bool rec_read(const char *path, struct rung_port_fwd *o)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	unsigned long long st = 0;
	int pid = 0;
	memset(o, 0, sizeof(*o));
	int n = fscanf(f, "%u %u %d %llu %63s", &o->port, &o->host_port, &pid, &st, o->host);
	fclose(f);
	o->pid = pid;
	if (n == 5 && pid > 0 && rung_proc_starttime(pid) == st)
		return true;
	unlink(path);
	return false;
}

int rung_port_fwd_list(struct rung_sandbox *s, struct rung_port_fwd **out, size_t *n,
		       struct rung_err *err)
{
	struct rt_sandbox *in = rt_sandbox_inner(s);
	*out = NULL;
	*n = 0;
	DIR *d = opendir(in->dir);
	if (!d)
		return rung_err_sys(err, errno, "open %s", in->dir);
	struct dirent *e;
	size_t cap = 0;
	int r = 0;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, REC_PREFIX, strlen(REC_PREFIX)) || strchr(e->d_name, '.'))
			continue;
		char p[4400];
		struct rung_port_fwd one;
		snprintf(p, sizeof(p), "%s/%s", in->dir, e->d_name);
		if (!rec_read(p, &one))
			continue;
		if (*n == cap) {
			size_t nc = cap ? cap * 2 : 8;
			struct rung_port_fwd *np = realloc(*out, nc * sizeof(*np));
			if (!np) {
				r = rung_err_set(err, ENOMEM, "out of memory");
				break;
			}
			*out = np;
			cap = nc;
		}
		(*out)[(*n)++] = one;
	}
	closedir(d);
	if (r < 0) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return r;
}

int rung_port_fwd_remove(struct rung_sandbox *s, unsigned port, size_t *removed,
			 struct rung_err *err)
{
	struct rung_port_fwd *v;
	size_t n;
	*removed = 0;
	int r = rung_port_fwd_list(s, &v, &n, err);
	if (r < 0)
		return r;
	struct rt_sandbox *in = rt_sandbox_inner(s);
	for (size_t i = 0; i < n; i++) {
		if (v[i].port != port)
			continue;
		char p[4200];
		rec_path(in, v[i].host_port, p, sizeof(p));
		/* the process unlinks its record as it ends; here too, so ls is right at once */
		if (kill(v[i].pid, SIGTERM) == 0 || errno == ESRCH)
			(*removed)++;
		unlink(p);
	}
	free(v);
	return 0;
}

/* Not a loopback address: what an operator must see (rung inspect, rung port ls). */
static bool host_loopback(const char *h)
{
	return !strncmp(h, "127.", 4) || !strcmp(h, "::1") || !strcmp(h, "localhost");
}

json_t *rt_ports_describe(struct rung_sandbox *s)
{
	struct rung_port_fwd *v;
	size_t n;
	struct rung_err err = {0};
	json_t *a = json_array();
	if (!a || rung_port_fwd_list(s, &v, &n, &err) < 0)
		return a;
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_pack("{s:i, s:s, s:i, s:s, s:b}", "port",
						   (int)v[i].port, "host", v[i].host, "host_port",
						   (int)v[i].host_port, "protocol", "tcp",
						   "loopback", host_loopback(v[i].host)));
	free(v);
	return a;
}
