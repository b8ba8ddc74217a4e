/*
 * agent/restored.c: RESTORED, the fix-ups of a VM guest restored from a snapshot
 * (docs/snapshots.md): mix the host's seed into the kernel's pool and reseed the CRNG, set
 * the wall clock, the hostname, eth0's address and default route, and the DNS proxy that
 * /etc/resolv.conf names (rewritten through the initramfs file the boot bound read-only over
 * it, which the fixer alone keeps open read-write).
 *
 * The agent keeps no capability that can do these (privs.c), so a VM's init forks a "fixer"
 * before it drops them: it keeps CAP_SYS_ADMIN, CAP_SYS_TIME and CAP_NET_ADMIN as the agent
 * uid (a command, uid 0 without capabilities, can neither signal nor ptrace it) and does
 * nothing but apply a decoded RESTORED sent on its socketpair, which only pid 1 and its
 * handlers hold (CLOEXEC: no command inherits it). It checks what it gets again.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/random.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/vm-init.h"

int agent_fixer_fd = -1;
pid_t agent_fixer_pid = -1;

#define FIXER_CAPS ((1u << CAP_SYS_ADMIN) | (1u << CAP_SYS_TIME) | (1u << CAP_NET_ADMIN))

static int reseed(const uint8_t *seed, struct rung_err *err)
{
	struct {
		struct rand_pool_info info;
		uint32_t words[RUNG_RESTORED_SEED / 4];
	} p = {.info = {.entropy_count = RUNG_RESTORED_SEED * 8, .buf_size = RUNG_RESTORED_SEED}};
	memcpy(p.words, seed, RUNG_RESTORED_SEED);
	cleanup_close int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || ioctl(fd, RNDADDENTROPY, &p) < 0)
		return rung_err_sys(err, errno, "RNDADDENTROPY");
	if (ioctl(fd, RNDRESEEDCRNG) < 0 && errno != ENODATA) /* ENODATA: not seeded yet */
		return rung_err_sys(err, errno, "RNDRESEEDCRNG");
	return 0;
}

static int inet_ifreq(int s, unsigned long req, const char *ip, struct rung_err *err)
{
	struct ifreq ifr = {0};
	struct sockaddr_in *a = (struct sockaddr_in *)&ifr.ifr_addr;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "eth0");
	a->sin_family = AF_INET;
	if (inet_pton(AF_INET, ip, &a->sin_addr) != 1 || ioctl(s, req, &ifr) < 0)
		return rung_err_sys(err, errno, "eth0: set %s", ip);
	return 0;
}

/* eth0's address replaced (its old routes go with the old one), then the default route. */
static int net_apply(const struct rung_proto_restored *x, struct rung_err *err)
{
	cleanup_close int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return rung_err_sys(err, errno, "socket");
	struct in_addr m = {.s_addr = htonl(x->prefix >= 32 ? ~0u : ~(~0u >> x->prefix))};
	char mask[16];
	inet_ntop(AF_INET, &m, mask, sizeof(mask));
	int r;
	if ((r = inet_ifreq(s, SIOCSIFADDR, x->addr, err)) < 0 ||
	    (r = inet_ifreq(s, SIOCSIFNETMASK, mask, err)) < 0)
		return r;
	struct rtentry rt = {.rt_flags = RTF_UP | RTF_GATEWAY};
	struct sockaddr_in *gw = (struct sockaddr_in *)&rt.rt_gateway;
	((struct sockaddr_in *)&rt.rt_dst)->sin_family = AF_INET;
	((struct sockaddr_in *)&rt.rt_genmask)->sin_family = AF_INET;
	gw->sin_family = AF_INET;
	inet_pton(AF_INET, x->gw, &gw->sin_addr);
	ioctl(s, SIOCDELRT, &rt); /* a default route that survived the address change */
	if (ioctl(s, SIOCADDRT, &rt) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "default route via %s", x->gw);
	/* The host end is a new tap with a new MAC (a resume's gateway keeps its address): the
	 * guest's neighbour entry for it would send every frame to the old MAC, which the new tap
	 * drops as another host's. Forget it: the next frame asks again. */
	struct arpreq ar = {0};
	struct sockaddr_in *pa = (struct sockaddr_in *)&ar.arp_pa;
	pa->sin_family = AF_INET;
	pa->sin_addr = gw->sin_addr;
	snprintf(ar.arp_dev, sizeof(ar.arp_dev), "eth0");
	if (ioctl(s, SIOCDARP, &ar) < 0 && errno != ENXIO)
		return rung_err_sys(err, errno, "eth0: forget the old neighbour %s", x->gw);
	return 0;
}

/* The resolv.conf's file, kept by the boot's plan; readers see the old or the new text. */
static int dns_apply(const char *dns, struct rung_err *err)
{
	struct in_addr a;
	if (inet_pton(AF_INET, dns, &a) != 1)
		return rung_err_set(err, EINVAL, "RESTORED: refused by the fixer");
	if (agent_vm_resolv_fd < 0)
		return rung_err_set(err, ENOENT, "RESTORED: a dns proxy for a guest booted without "
				    "one");
	char text[AGENT_VM_DATA_MAX];
	agent_vm_resolv_text(text, sizeof(text), dns, agent_vm_resolv_search,
			     agent_vm_resolv_dnsopt);
	size_t n = strlen(text);
	if (ftruncate(agent_vm_resolv_fd, 0) < 0 ||
	    pwrite(agent_vm_resolv_fd, text, n, 0) != (ssize_t)n)
		return rung_err_sys(err, errno ? errno : EIO, "rewrite /etc/resolv.conf");
	return 0;
}

static int fixer_apply(const struct rung_proto_restored *x, struct rung_err *err)
{
	if (!rung_hostname_valid(x->hostname) || (x->has_net && (x->prefix < 1 || x->prefix > 32)))
		return rung_err_set(err, EINVAL, "RESTORED: refused by the fixer");
	int r = reseed(x->seed, err);
	if (r < 0)
		return r;
	struct timespec ts = {.tv_sec = (time_t)(x->wall_ns / 1000000000ull),
			      .tv_nsec = (long)(x->wall_ns % 1000000000ull)};
	if (clock_settime(CLOCK_REALTIME, &ts) < 0)
		return rung_err_sys(err, errno, "clock_settime");
	if (sethostname(x->hostname, strlen(x->hostname)) < 0)
		return rung_err_sys(err, errno, "sethostname %s", x->hostname);
	if (x->has_net && (r = net_apply(x, err)) < 0)
		return r;
	return x->has_net && x->dns[0] ? dns_apply(x->dns, err) : 0;
}

static int fixer_drop(struct rung_err *err)
{
	unsigned bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_KEEP_CAPS |
			SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
		return rung_err_sys(err, errno, "set securebits");
	for (int c = 0; c <= CAP_LAST_CAP; c++)
		if (!(FIXER_CAPS & (1u << c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 &&
		    errno != EINVAL)
			return rung_err_sys(err, errno, "drop capability %d", c);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    setresgid(RUNG_AGENT_UID, RUNG_AGENT_UID, RUNG_AGENT_UID) < 0 ||
	    setresuid(RUNG_AGENT_UID, RUNG_AGENT_UID, RUNG_AGENT_UID) < 0)
		return rung_err_sys(err, errno, "become the agent uid");
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {{.effective = FIXER_CAPS, .permitted = FIXER_CAPS}};
	if (syscall(SYS_capset, &h, d) < 0 || prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		return rung_err_sys(err, errno, "keep the fixer's capabilities");
	return 0;
}

static void fixer_loop(int s)
{
	struct rung_err err = {0};
	if (fixer_drop(&err) < 0) {
		fprintf(stderr, "rung-agent: fixer: %s\n", err.msg);
		_exit(1);
	}
	for (;;) {
		struct rung_proto_restored x;
		ssize_t n = recv(s, &x, sizeof(x), 0);
		if (n == 0 || (n < 0 && errno != EINTR))
			_exit(0);
		memset(&err, 0, sizeof(err));
		if (n != (ssize_t)sizeof(x))
			rung_err_set(&err, EPROTO, "fixer: a message of %zd bytes", n);
		else
			fixer_apply(&x, &err);
		if (send(s, &err, sizeof(err), MSG_NOSIGNAL) < 0)
			_exit(0);
	}
}

int agent_fixer_start(int listen_fd, struct rung_err *err)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return rung_err_sys(err, errno, "fixer socketpair");
	pid_t pid = fork();
	if (pid < 0) {
		close(sp[0]), close(sp[1]);
		return rung_err_sys(err, errno, "fork the fixer");
	}
	if (pid == 0) {
		close(sp[0]);
		close(listen_fd); /* the fixer serves nobody but pid 1 and its handlers */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		prctl(PR_SET_NAME, "rung-fixer");
		fixer_loop(sp[1]);
	}
	close(sp[1]);
	if (agent_vm_resolv_fd >= 0) /* the fixer's alone: pid 1 and its commands never write it */
		close(agent_vm_resolv_fd);
	agent_vm_resolv_fd = -1;
	agent_fixer_fd = sp[0];
	agent_fixer_pid = pid;
	return 0;
}

int agent_restored(int sock, const struct rung_frame *req, struct rung_err *err)
{
	struct rung_proto_restored x;
	int r = rung_proto_restored_decode(req->payload, req->len, &x, err);
	if (r < 0)
		return r;
	if (agent_fixer_fd < 0)
		return rung_err_set(err, EOPNOTSUPP, "RESTORED: only a VM guest's agent applies it "
				    "(this sandbox was not restored from a snapshot)");
	struct rung_err got = {0};
	struct timeval tv = {.tv_sec = 10};
	setsockopt(agent_fixer_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (send(agent_fixer_fd, &x, sizeof(x), MSG_NOSIGNAL) != (ssize_t)sizeof(x) ||
	    recv(agent_fixer_fd, &got, sizeof(got), 0) != (ssize_t)sizeof(got))
		return rung_err_sys(err, errno ? errno : EIO, "RESTORED: the fixer did not answer");
	explicit_bzero(&x, sizeof(x));
	got.msg[sizeof(got.msg) - 1] = '\0';
	if (got.code)
		return rung_err_set(err, got.code, "RESTORED: %s", got.msg);
	return rung_frame_write(sock, RUNG_MSG_RESULT, NULL, 0, err);
}
