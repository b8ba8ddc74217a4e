/*
 * probe/sibling.c: other sandboxes. The ladder runs a sibling (a second sandbox of the same
 * rung, or of the same peer) holding a victim (`rung-probe --sibling`) with a random name and
 * a TCP listener; these probes try to see it in /proc, signal it and connect to it. The victim
 * records what reached it in its own sandbox, where the ladder reads it: that record decides.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "probe/probe.h"

static volatile sig_atomic_t conts;
static void on_cont(int sig)
{
	(void)sig;
	conts++;
}

static void log_line(const char *s)
{
	int fd = open("sibling.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, s, strlen(s)) < 0) {
		/* nothing to do: the ladder sees no line */
	}
	close(fd);
}

/* One connection: "NAME TOKEN" with the run's token is logged as NAME. */
static void take(const struct probe_ctx *c, int lfd)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	struct timeval tv = {1, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	char buf[256], name[64], tok[80];
	ssize_t k = recv(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	buf[k > 0 ? k : 0] = '\0';
	if (sscanf(buf, "%63s %79s", name, tok) == 2 && !strcmp(tok, c->token)) {
		char line[80];
		snprintf(line, sizeof(line), "%s\n", name);
		log_line(line);
	}
}

int probe_sibling(const struct probe_ctx *c, const char *comm, const char *port)
{
	prctl(PR_SET_NAME, comm);
	alarm(3600); /* never outlives a run by much, even one killed outright */
	struct sigaction sa = {.sa_handler = on_cont};
	sigaction(SIGCONT, &sa, NULL);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)strtoul(port, NULL, 10))};
	a.sin_addr.s_addr = htonl(INADDR_ANY);
	/* a sandbox without a loopback interface up cannot listen: the signal part still runs */
	if (lfd >= 0 && (bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 8) < 0)) {
		close(lfd);
		lfd = -1;
	}
	log_line("ready\n");
	sig_atomic_t seen = 0;
	for (;;) {
		struct pollfd p = {lfd, POLLIN, 0};
		int n = poll(&p, 1, 100);
		while (seen != conts) {
			seen++;
			log_line("sigcont\n");
		}
		if (n > 0 && (p.revents & POLLIN))
			take(c, lfd);
	}
}

/* A process named comm in this /proc, or 0. */
static int find_comm(const char *comm)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int found = 0;
	while (d && !found && (de = readdir(d))) {
		char p[300], buf[32];
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(p, sizeof(p), "/proc/%s/comm", de->d_name);
		if (probe_read(p, buf, sizeof(buf)) > 0) {
			buf[strcspn(buf, "\n")] = '\0';
			if (!strcmp(buf, comm))
				found = atoi(de->d_name);
		}
	}
	if (d)
		closedir(d);
	return found;
}

static void sibling_proc(const struct probe_ctx *c, struct probe_out *o)
{
	if (!c->sibling_comm[0])
		return probe_na(o, "no sibling in this run");
	if (find_comm(c->sibling_comm))
		return probe_escaped(o, "comm=%s", c->sibling_comm); /* the host compares */
	if (c->sibling_pid <= 0)
		return probe_blocked(o, ESRCH, "no process named %s in /proc", c->sibling_comm);
	char p[64], buf[32];
	snprintf(p, sizeof(p), "/proc/%d/comm", c->sibling_pid);
	long n = probe_read(p, buf, sizeof(buf));
	if (n < 0)
		return probe_blocked(o, (int)-n, "no process named %s in /proc; %s: %s",
				     c->sibling_comm, p, strerror((int)-n));
	buf[strcspn(buf, "\n")] = '\0';
	if (strcmp(buf, c->sibling_comm))
		return probe_blocked(o, 0, "%s is another process here (%s)", p, buf);
	probe_escaped(o, "comm=%s", buf);
}

static void sibling_signal(const struct probe_ctx *c, struct probe_out *o)
{
	if (!c->sibling_comm[0])
		return probe_na(o, "no sibling in this run");
	int pid = find_comm(c->sibling_comm);
	if (!pid)
		pid = c->sibling_pid; /* its host pid: this pid namespace may still reach it */
	if (pid <= 0)
		return probe_blocked(o, ESRCH, "the sibling's victim is nowhere in /proc");
	if (kill(pid, SIGCONT) < 0)
		return probe_blocked(o, errno, "kill(%d, SIGCONT): %s", pid, strerror(errno));
	probe_escaped(o, "kill(%d, SIGCONT) succeeded", pid); /* the sibling's record decides */
}

static void sibling_tcp(const struct probe_ctx *c, struct probe_out *o)
{
	if (!c->sibling_port)
		return probe_na(o, "no sibling in this run");
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return probe_blocked(o, errno, "socket: %s", strerror(errno));
	struct timeval tv = {2, 0};
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)c->sibling_port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;
		close(fd);
		return probe_blocked(o, e, "connect 127.0.0.1:%u: %s", c->sibling_port,
				     strerror(e));
	}
	char msg[160];
	int n = snprintf(msg, sizeof(msg), "net.sibling_tcp %s\n", c->token);
	ssize_t k = send(fd, msg, (size_t)n, MSG_NOSIGNAL);
	int e = errno;
	close(fd);
	if (k != n)
		return probe_blocked(o, e, "send: %s", strerror(e));
	probe_escaped(o, "sent its name to 127.0.0.1:%u", c->sibling_port);
}

const struct probe probes_sibling[] = {
    {"ipc.sibling_proc", "ipc", "another sandbox's process is visible in /proc", sibling_proc},
    {"ipc.sibling_signal", "ipc", "another sandbox's process receives SIGCONT", sibling_signal},
    {"net.sibling_tcp", "network", "another sandbox's listener records a connection", sibling_tcp},
    {NULL, NULL, NULL, NULL},
};
