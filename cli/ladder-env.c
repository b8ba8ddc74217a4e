/*
 * cli/ladder-env.c: what `rung ladder` plants on the host for the probes, and how it checks
 * their effects there (docs/ladder.md, "Evidence"). Everything lives in the run's own
 * temporary directory, on loopback, or under names with the run's random token: a host
 * directory with a random secret and room for a marker, listeners on 127.0.0.1 and ::1 (TCP and
 * UDP) and an abstract Unix socket, a /dev/shm file and a SysV segment holding random secrets,
 * a victim process with a random name that records SIGCONT, and an empty cgroup.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/ladder.h"
#include "common/util.h"
#include "common/err.h"

static void rand_hex(char *out, size_t bytes)
{
	unsigned char b[64];
	if (getrandom(b, bytes, 0) != (ssize_t)bytes)
		memset(b, 0x5a, bytes);
	for (size_t i = 0; i < bytes; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static int write_str(const char *path, const char *s, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	ssize_t k = write(fd, s, strlen(s));
	int e = errno;
	fchmod(fd, mode);
	close(fd);
	return k == (ssize_t)strlen(s) ? 0 : -e;
}

static void read_str(const char *path, char *buf, size_t n)
{
	buf[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t k = read(fd, buf, n - 1);
	close(fd);
	buf[k > 0 ? k : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

static int victim_fd_w = -1;
static void on_cont(int sig)
{
	(void)sig;
	if (write(victim_fd_w, "c", 1) < 0) {
		/* nothing to do: the ladder sees no byte */
	}
}

/* A host process named victim_comm that writes a byte for each SIGCONT it gets. */
static int start_victim(struct ladder_env *e, struct rung_err *err)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe");
	pid_t pid = fork();
	if (pid < 0)
		return rung_err_sys(err, errno, "fork the victim");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		prctl(PR_SET_NAME, e->victim_comm);
		victim_fd_w = p[1];
		struct sigaction sa = {.sa_handler = on_cont};
		sigaction(SIGCONT, &sa, NULL);
		for (;;)
			pause();
	}
	close(p[1]);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	e->victim = pid;
	e->victim_fd = p[0];
	return 0;
}

static int listen_on(int dom, int type, const void *a, socklen_t len, unsigned *port,
		     struct rung_err *err)
{
	int fd = socket(dom, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return rung_err_sys(err, errno, "socket");
	if (bind(fd, a, len) < 0 || (type == SOCK_STREAM && listen(fd, 16) < 0)) {
		int r = rung_err_sys(err, errno, "bind a loopback listener");
		close(fd);
		return r;
	}
	if (port) {
		struct sockaddr_in6 got;
		socklen_t gl = sizeof(got);
		getsockname(fd, (struct sockaddr *)&got, &gl);
		*port = ntohs(got.sin6_port); /* same offset in sockaddr_in */
	}
	return fd;
}

static void remember(struct ladder_env *e, const char *name)
{
	pthread_mutex_lock(&e->lock);
	size_t at = strlen(e->heard);
	if (at + strlen(name) + 2 < sizeof(e->heard))
		snprintf(e->heard + at, sizeof(e->heard) - at, "%s\n", name);
	pthread_mutex_unlock(&e->lock);
}

/* "NAME TOKEN\n" with our token: remember NAME. */
static void heard(struct ladder_env *e, const char *msg)
{
	char name[64], tok[80];
	if (sscanf(msg, "%63s %79s", name, tok) == 2 && !strcmp(tok, e->token))
		remember(e, name);
}

/* An IPv4 packet from the raw ICMP socket: an echo request's payload is "NAME TOKEN\n". */
static void heard_icmp(struct ladder_env *e, char *pkt, size_t n)
{
	size_t ihl = n ? (size_t)(pkt[0] & 0x0f) * 4 : 0;
	if (ihl < 20 || n < ihl + 8 || (unsigned char)pkt[ihl] != 8 /* echo request */)
		return;
	heard(e, pkt + ihl + 8);
}

/* A DNS query whose first label is the token's first 32 characters: net.dns_other's. */
static void heard_dns(struct ladder_env *e, const char *q, size_t n)
{
	if (n >= 12 + 1 + 32 && q[12] == 32 && !strncmp(q + 13, e->token, 32))
		remember(e, "net.dns_other");
}

static void *listener(void *arg)
{
	struct ladder_env *e = arg;
	struct pollfd p[7] = {{e->stop_fd[0], POLLIN, 0}, {e->tcp_fd, POLLIN, 0},
			      {e->tcp6_fd, POLLIN, 0},	  {e->unix_fd, POLLIN, 0},
			      {e->udp_fd, POLLIN, 0},	  {e->icmp_fd, POLLIN, 0},
			      {e->dns_fd, POLLIN, 0}};
	for (;;) {
		if (poll(p, 7, -1) < 0 && errno != EINTR)
			return NULL;
		if (p[0].revents)
			return NULL;
		char buf[512];
		for (int i = 1; i < 7; i++) {
			if (!(p[i].revents & POLLIN))
				continue;
			ssize_t k;
			if (i >= 5) {
				k = recv(p[i].fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
				if (k > 0) {
					buf[k] = '\0';
					if (i == 5)
						heard_icmp(e, buf, (size_t)k);
					else
						heard_dns(e, buf, (size_t)k);
				}
				continue;
			}
			if (i == 4) {
				k = recv(p[i].fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
			} else {
				int c = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
				if (c < 0)
					continue;
				struct timeval tv = {1, 0};
				setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
				k = recv(c, buf, sizeof(buf) - 1, 0);
				close(c);
			}
			if (k > 0) {
				buf[k] = '\0';
				heard(e, buf);
			}
		}
	}
}

/* The fake resolver: 127.0.0.2 (a host loopback address no sandbox is given as its
 * resolver), port 53 where free, else any port; none at all: net.dns_other is n/a. */
static void start_resolver(struct ladder_env *e)
{
	struct rung_err ignore = {0};
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
	const char *const addrs[] = {"127.0.0.2", "127.0.0.2", "127.0.0.1"};
	for (size_t i = 0; i < 3 && e->dns_fd < 0; i++) {
		inet_pton(AF_INET, addrs[i], &a.sin_addr);
		a.sin_port = i ? 0 : htons(53);
		e->dns_fd = listen_on(AF_INET, SOCK_DGRAM, &a, sizeof(a), &e->dns_port, &ignore);
		if (e->dns_fd >= 0)
			snprintf(e->dns_addr, sizeof(e->dns_addr), "%s", addrs[i]);
	}
}

static int start_listeners(struct ladder_env *e, struct rung_err *err)
{
	struct sockaddr_in a4 = {.sin_family = AF_INET};
	a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	struct sockaddr_un au = {.sun_family = AF_UNIX};
	memcpy(au.sun_path + 1, e->abstract, strlen(e->abstract));
	socklen_t ul =
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(e->abstract));
	if ((e->tcp_fd = listen_on(AF_INET, SOCK_STREAM, &a4, sizeof(a4), &e->tcp_port, err)) < 0 ||
	    (e->udp_fd = listen_on(AF_INET, SOCK_DGRAM, &a4, sizeof(a4), &e->udp_port, err)) < 0 ||
	    (e->unix_fd = listen_on(AF_UNIX, SOCK_STREAM, &au, ul, NULL, err)) < 0)
		return -1;
	/* no ::1 on this host: the v6 probe then has nothing to reach, and says so */
	struct rung_err ignore = {0};
	e->tcp6_fd = listen_on(AF_INET6, SOCK_STREAM, &a6, sizeof(a6), &e->tcp6_port, &ignore);
	/* a raw ICMP socket sees every echo request to the host (probes without one: n/a) */
	e->icmp_fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
	start_resolver(e);
	if (pipe2(e->stop_fd, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe");
	/* the stop signals go to the main thread, which stops between probes and cleans up */
	sigset_t stop, prev;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop, &prev);
	errno = pthread_create(&e->listener, NULL, listener, e);
	pthread_sigmask(SIG_SETMASK, &prev, NULL);
	if (errno)
		return rung_err_sys(err, errno, "the listener thread");
	e->listening = true;
	return 0;
}

static int plant_ipc(struct ladder_env *e, struct rung_err *err)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "/dev/shm/%s", e->shm_name);
	if (write_str(p, e->shm_secret, 0644) < 0)
		return rung_err_sys(err, errno, "write %s", p);
	unsigned char k[4];
	if (getrandom(k, sizeof(k), 0) != sizeof(k))
		memset(k, 0x11, sizeof(k));
	e->sysv_key =
	    (int)(((unsigned)k[0] << 24 | (unsigned)k[1] << 16 | k[2] << 8 | k[3]) & 0x7fffffff);
	e->sysv_id = shmget((key_t)e->sysv_key, 4096, IPC_CREAT | IPC_EXCL | 0644);
	if (e->sysv_id < 0)
		return rung_err_sys(err, errno, "shmget");
	char *m = shmat(e->sysv_id, NULL, 0);
	if (m == (void *)-1)
		return rung_err_sys(err, errno, "shmat");
	snprintf(m, 64, "%s", e->sysv_secret);
	shmdt(m);
	/* another tenant's cgroup: v2 at the root, v1 in the pids hierarchy; none: no probe */
	bool v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
	snprintf(e->cgroup_marker, sizeof(e->cgroup_marker), "%s/rung-ladder-%.16s",
		 v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/pids", e->token);
	if (mkdir(e->cgroup_marker, 0755) < 0)
		e->cgroup_marker[0] = '\0';
	return 0;
}

/* int 0x80 getpid in a child of the host: returns a pid where the kernel has the i386 ABI. */
static bool ia32_abi(void)
{
	pid_t ch = fork();
	if (ch == 0) {
		long r = 20;
		__asm__ volatile("int $0x80" : "+a"(r)::"memory");
		_exit(r > 0 ? 0 : 1);
	}
	int st = 0;
	if (ch < 0 || waitpid(ch, &st, 0) < 0)
		return false;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void host_facts(struct ladder_env *e)
{
	e->has_ia32 = ia32_abi();
	gethostname(e->hostname, sizeof(e->hostname) - 1);
	read_str("/proc/cmdline", e->cmdline, sizeof(e->cmdline));
	e->cmdline[200] = '\0'; /* as much as the probe quotes */
	ssize_t k = readlink("/proc/self/ns/user", e->userns, sizeof(e->userns) - 1);
	e->userns[k > 0 ? k : 0] = '\0';
	read_str("/proc/version", e->version, sizeof(e->version));
	struct if_nameindex *l = if_nameindex();
	size_t at = 0;
	for (struct if_nameindex *i = l; l && i->if_index; i++)
		if (strcmp(i->if_name, "lo") && at + IF_NAMESIZE + 2 < sizeof(e->ifnames))
			at += (size_t)snprintf(e->ifnames + at, sizeof(e->ifnames) - at, ",%s,",
					       i->if_name);
	if (l)
		if_freenameindex(l);
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) == 0)
		for (struct ifaddrs *i = ifa; i && !e->host_addr[0]; i = i->ifa_next)
			if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
			    !(i->ifa_flags & IFF_LOOPBACK))
				inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr,
					  e->host_addr, sizeof(e->host_addr));
	freeifaddrs(ifa);
}

int ladder_env_setup(struct ladder_env *e, const char *state_dir, struct rung_err *err)
{
	memset(e, 0, sizeof(*e));
	e->tcp_fd = e->tcp6_fd = e->udp_fd = e->unix_fd = e->victim_fd = -1;
	e->icmp_fd = e->dns_fd = -1;
	e->stop_fd[0] = e->stop_fd[1] = -1;
	e->sysv_id = -1;
	pthread_mutex_init(&e->lock, NULL);
	snprintf(e->state_dir, sizeof(e->state_dir), "%s", state_dir ? state_dir : "");
	rand_hex(e->token, 32);
	rand_hex(e->secret, 16);
	rand_hex(e->shm_secret, 16);
	rand_hex(e->sysv_secret, 16);
	snprintf(e->abstract, sizeof(e->abstract), "rung-ladder-%.16s", e->token);
	snprintf(e->shm_name, sizeof(e->shm_name), "rung-ladder-%.16s", e->token);
	snprintf(e->victim_comm, sizeof(e->victim_comm), "rl-%.12s", e->secret);
	e->mem_limit = 64ULL << 20;
	e->disk_limit = 64ULL << 20;
	e->pids_limit = 32;
	e->cpus_milli = 250;
	host_facts(e);
	snprintf(e->dir, sizeof(e->dir), "/tmp/rung-ladder-XXXXXX");
	if (!mkdtemp(e->dir))
		return rung_err_sys(err, errno, "mkdtemp /tmp/rung-ladder-*");
	chmod(e->dir, 0711); /* the sandboxes' uids reach their own directories below */
	snprintf(e->host_dir, sizeof(e->host_dir), "%s/host", e->dir);
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/secret", e->host_dir);
	if (mkdir(e->host_dir, 0777) < 0 || chmod(e->host_dir, 0777) < 0 ||
	    write_str(p, e->secret, 0644) < 0)
		return rung_err_sys(err, errno, "plant %s", e->host_dir);
	int r;
	if ((r = start_victim(e, err)) < 0 || (r = plant_ipc(e, err)) < 0 ||
	    (r = start_listeners(e, err)) < 0)
		return r;
	return 0;
}

static void rm_tree(const char *dir);

void ladder_env_teardown(struct ladder_env *e)
{
	ladder_sibling_close(NULL, e);
	if (e->listening) {
		if (write(e->stop_fd[1], "x", 1) == 1)
			pthread_join(e->listener, NULL);
		e->listening = false;
	}
	int *fds[] = {&e->tcp_fd,  &e->tcp6_fd,	  &e->udp_fd,	  &e->unix_fd,	  &e->icmp_fd,
		      &e->dns_fd, &e->victim_fd, &e->stop_fd[0], &e->stop_fd[1]};
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
	if (e->victim > 0) {
		kill(e->victim, SIGKILL);
		waitpid(e->victim, NULL, 0);
		e->victim = 0;
	}
	if (e->sysv_id >= 0)
		shmctl(e->sysv_id, IPC_RMID, NULL);
	e->sysv_id = -1;
	if (e->shm_name[0]) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "/dev/shm/%s", e->shm_name);
		unlink(p);
	}
	if (e->cgroup_marker[0])
		rmdir(e->cgroup_marker);
	e->cgroup_marker[0] = '\0';
	if (e->dir[0] && strncmp(e->dir, "/tmp/rung-ladder-", 17) == 0)
		rm_tree(e->dir);
	e->dir[0] = '\0';
}

/* Remove dir and everything under it (the run's own directory only). */
static void rm_tree(const char *dir)
{
	struct rung_err err = {0};
	if (rung_rm_rf(dir, &err) < 0)
		fprintf(stderr, "rung ladder: %s\n", err.msg);
}

char *ladder_env_ctx(const struct ladder_env *e)
{
	char *s = NULL;
	if (asprintf(&s,
		     "token=%s\nhost_dir=%s\ntcp_port=%u\ntcp6_port=%u\nudp_port=%u\nabstract=%s\n"
		     "dns_addr=%s\ndns_port=%u\nhost_addr=%s\n"
		     "shm_name=%s\nsysv_shm_key=%d\nvictim_pid=%d\nmem_limit=%llu\npids_limit=%u\n"
		     "cpus_milli=%u\ndisk_limit=%llu\nstate_dir=%s\nsibling_comm=%s\n"
		     "sibling_pid=%d\nsibling_port=%u\n",
		     e->token, e->host_dir, e->tcp_port, e->tcp6_port, e->udp_port, e->abstract,
		     e->dns_addr, e->dns_port, e->host_addr,
		     e->shm_name, e->sysv_key, (int)e->victim, e->mem_limit, e->pids_limit,
		     e->cpus_milli, e->disk_limit, e->state_dir, e->sib_comm, e->sib_pid,
		     e->sib_port) < 0)
		return NULL;
	return s;
}

void ladder_env_reset(struct ladder_env *e)
{
	char p[PATH_MAX], b[64];
	snprintf(p, sizeof(p), "%s/marker", e->host_dir);
	unlink(p);
	while (read(e->victim_fd, b, sizeof(b)) > 0)
		;
	pthread_mutex_lock(&e->lock);
	e->heard[0] = '\0';
	pthread_mutex_unlock(&e->lock);
}
