/*
 * common/pid1.c: the setup message from the runtime to a sandbox's pid 1 (common/pid1.h), and
 * the small steps of pid 1's setup that are not its root (common/root.c).
 *
 * The message: "RGP1", u32 flags, the new root, the trace target, the filter (u32 length,
 * bytes), u32 steps, then per step u8 op, u8 optional, src, dst, opts. A string is a u32
 * length (0xffffffff: none) and its bytes, no NUL in them. Little-endian, host order: both
 * ends are this host.
 */
#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "common/pid1.h"
#include "common/proto.h"
#include "common/util.h"

#define MAGIC "RGP1"
#define NONE 0xffffffffu
#define MAX_STEPS 4096
enum { F_SESSION = 1, F_LO = 2, F_FIRST = 4 };

static void put_u32(struct rung_buf *w, uint32_t v) { rung_buf_append(w, &v, sizeof(v)); }

static void put_str(struct rung_buf *w, const char *s)
{
	put_u32(w, s ? (uint32_t)strlen(s) : NONE);
	if (s)
		rung_buf_append(w, s, strlen(s));
}

int rung_pid1_setup_encode(const struct rung_pid1_setup *s, void **out, size_t *len,
			   struct rung_err *err)
{
	struct rung_buf w = {0};
	rung_buf_append(&w, MAGIC, 4);
	put_u32(&w, (s->new_session ? F_SESSION : 0) | (s->lo_up ? F_LO : 0) |
			(s->first_conn ? F_FIRST : 0));
	put_str(&w, s->newroot);
	put_str(&w, s->trace ? s->trace : "");
	put_u32(&w, (uint32_t)s->bpf_len);
	rung_buf_append(&w, s->bpf, s->bpf_len);
	put_u32(&w, (uint32_t)s->plan.n);
	for (size_t i = 0; i < s->plan.n; i++) {
		const struct rung_mount *m = &s->plan.m[i];
		uint8_t b[2] = {(uint8_t)m->op, m->optional};
		rung_buf_append(&w, b, 2);
		put_str(&w, m->src);
		put_str(&w, m->dst);
		put_str(&w, m->opts);
	}
	if (w.oom || w.len > RUNG_PID1_SETUP_MAX) {
		size_t n = w.len;
		bool oom = w.oom;
		rung_buf_release(&w);
		return oom ? rung_err_set(err, ENOMEM, "pid 1 setup: out of memory")
			   : rung_err_set(err, E2BIG, "pid 1 setup: %zu bytes (at most %u)", n,
					  RUNG_PID1_SETUP_MAX);
	}
	*out = w.data;
	*len = w.len;
	return 0;
}

struct rbuf {
	const char *p;
	size_t len, off;
};

static int get(struct rbuf *r, void *d, size_t n)
{
	if (n > r->len - r->off)
		return -1;
	memcpy(d, r->p + r->off, n);
	r->off += n;
	return 0;
}

/* A string (malloc'd, NUL-terminated; NULL for none): 0, or -1 when short or not a string. */
static int get_str(struct rbuf *r, char **s)
{
	uint32_t n;
	*s = NULL;
	if (get(r, &n, sizeof(n)) < 0)
		return -1;
	if (n == NONE)
		return 0;
	if (n > r->len - r->off || memchr(r->p + r->off, '\0', n))
		return -1;
	if (!(*s = strndup(r->p + r->off, n)))
		return -1;
	r->off += n;
	return 0;
}

static int bad(struct rung_pid1_setup *s, struct rung_err *err, const char *what)
{
	rung_pid1_setup_release(s);
	return rung_err_set(err, EINVAL, "pid 1 setup: bad message (%s)", what);
}

int rung_pid1_setup_decode(const void *buf, size_t len, struct rung_pid1_setup *s,
			   struct rung_err *err)
{
	memset(s, 0, sizeof(*s));
	struct rbuf r = {.p = buf, .len = len};
	char magic[4];
	uint32_t flags, blen, n;
	if (len > RUNG_PID1_SETUP_MAX || get(&r, magic, 4) < 0 || memcmp(magic, MAGIC, 4))
		return bad(s, err, "not a setup message");
	if (get(&r, &flags, 4) < 0 || (flags & ~(uint32_t)(F_SESSION | F_LO | F_FIRST)))
		return bad(s, err, "flags");
	s->new_session = flags & F_SESSION;
	s->lo_up = flags & F_LO;
	s->first_conn = flags & F_FIRST;
	if (get_str(&r, &s->newroot) < 0 || !s->newroot || s->newroot[0] != '/')
		return bad(s, err, "new root");
	if (get_str(&r, &s->trace) < 0 || !s->trace)
		return bad(s, err, "trace");
	if (get(&r, &blen, 4) < 0 || !blen || blen % sizeof(struct sock_filter) ||
	    blen / sizeof(struct sock_filter) > BPF_MAXINSNS || blen > len - r.off)
		return bad(s, err, "seccomp filter");
	if (!(s->bpf = malloc(blen)) || get(&r, s->bpf, blen) < 0)
		return bad(s, err, "seccomp filter");
	s->bpf_len = blen;
	if (get(&r, &n, 4) < 0 || n > MAX_STEPS)
		return bad(s, err, "step count");
	for (uint32_t i = 0; i < n; i++) {
		uint8_t b[2];
		char *src = NULL, *dst = NULL, *opts = NULL;
		int ok = get(&r, b, 2) == 0 && b[0] <= RUNG_M_WAIT && b[1] <= 1 &&
			 get_str(&r, &src) == 0 && get_str(&r, &dst) == 0 && dst &&
			 get_str(&r, &opts) == 0 &&
			 rung_mount_plan_add(&s->plan, (enum rung_mount_op)b[0], src, dst, opts,
					     b[1]) == 0;
		free(src);
		free(dst);
		free(opts);
		if (!ok)
			return bad(s, err, "a mount step");
	}
	if (r.off != len)
		return bad(s, err, "trailing bytes");
	return 0;
}

void rung_pid1_setup_release(struct rung_pid1_setup *s)
{
	if (!s)
		return;
	free(s->newroot);
	free(s->trace);
	free(s->bpf);
	rung_mount_plan_release(&s->plan);
	memset(s, 0, sizeof(*s));
}

/* Fixed hygiene limits only. The spec's limits are a cgroup's (memory, cpus, pids) and a
 * size-limited filesystem's (disk): an rlimit at the same value would only trip first
 * (ENOMEM instead of an OOM kill, EAGAIN before pids.max, SIGXFSZ instead of ENOSPC), and
 * none of them bounds the sandbox as a whole. */
int rung_rlimits_apply(struct rung_err *err)
{
	struct {
		int res;
		rlim_t v;
		const char *name;
	} lim[] = {
		{RLIMIT_NOFILE, 4096, "nofile"},
		{RLIMIT_CORE, 0, "core"},
		{RLIMIT_MEMLOCK, 64 << 10, "memlock"},
		{RLIMIT_MSGQUEUE, 0, "msgqueue"},
	};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(lim); i++) {
		struct rlimit rl = {lim[i].v, lim[i].v};
		if (setrlimit(lim[i].res, &rl) < 0)
			return rung_err_sys(err, errno, "rlimit %s", lim[i].name);
	}
	return 0;
}

int rung_seccomp_load(const void *bpf, size_t len, struct rung_err *err)
{
	struct sock_fprog prog = {.len = (unsigned short)(len / sizeof(struct sock_filter)),
				  .filter = (struct sock_filter *)bpf};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return rung_err_sys(err, errno, "no_new_privs");
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return rung_err_sys(err, errno, "load seccomp filter");
	return 0;
}

int rung_lo_up(struct rung_err *err)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return rung_err_sys(err, errno, "socket");
	struct ifreq ifr = {0};
	strcpy(ifr.ifr_name, "lo");
	int r = 0;
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		r = rung_err_sys(err, errno, "get lo flags");
	ifr.ifr_flags |= IFF_UP;
	if (r == 0 && ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		r = rung_err_sys(err, errno, "bring lo up");
	close(s);
	return r;
}
