/* tests/lib/np_sb.c: helpers of tests/lib/np_sb.h (no suite here). */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "netpolicy/np.h"
#include "tests/lib/np_sb.h"
#include "tests/lib/testutil.h"

struct np_world npt_W;
char npt_state_dir[128];
char npt_audit_buf[8192];

static void audit_cb(void *data, const char *line)
{
	size_t n = strlen(npt_audit_buf);
	snprintf(npt_audit_buf + n, sizeof(npt_audit_buf) - n, "%s\n", line);
}

static bool npt_world_is_up;

void npt_world_teardown(void)
{
	if (!npt_world_is_up)
		return;
	npt_world_is_up = false;
	struct rung_err err;
	np_gc(npt_state_dir, NULL, 0, &err);
	npw_down(&npt_W);
	rung_rm_rf(npt_state_dir, &err);
}

/* State dirs of earlier runs that were killed (timeout): their tables outlive them. */
static void reap_stale_runs(void)
{
	DIR *d = opendir("/tmp");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		int pid;
		char sd[300];
		if (sscanf(de->d_name, "rung-np-test-%d", &pid) != 1 || kill(pid, 0) == 0)
			continue;
		snprintf(sd, sizeof(sd), "/tmp/%s", de->d_name);
		struct rung_err err;
		np_gc(sd, NULL, 0, &err);
		rung_rm_rf(sd, &err);
	}
	if (d)
		closedir(d);
}

void npt_world_setup(void)
{
	if (geteuid() != 0)
		return;
	reap_stale_runs();
	snprintf(npt_state_dir, sizeof(npt_state_dir), "/tmp/rung-np-test-%d", (int)getpid());
	ck_assert_int_eq(npw_up(&npt_W), 0);
	npt_world_is_up = true;
	atexit(npt_world_teardown); /* a failed assertion exits the test process */
}

void npt_cfg_init(struct np_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->state_dir = npt_state_dir;
	cfg->upstream = npt_W.upstream;
	cfg->audit = audit_cb;
}

void npt_sb_up_fd(struct npt_sb *s, const char *id, const struct np_config *cfg,
		  const char *const *items, size_t n, int netns_fd)
{
	struct np_policy p;
	struct rung_err err = {0};
	memset(s, 0, sizeof(*s));
	snprintf(s->id, sizeof(s->id), "%s", id);
	ck_assert_int_eq(np_policy_parse(items, n, &p, &err), 0);
	s->fd = netns_fd >= 0 ? netns_fd : npw_netns_new();
	ck_assert_int_ge(s->fd, 0);
	int r = np_sandbox_up(cfg, id, s->fd, &p, &s->net, &err);
	ck_assert_msg(r == 0, "np_sandbox_up: %s", err.msg);
	np_policy_release(&p);
	np_net_info(s->net, &s->info);
	if (s->info.has_network)
		ck_assert_int_eq(npw_proxy_start(&s->loop, s->net), 0);
}

void npt_sb_up_cfg(struct npt_sb *s, const char *id, const struct np_config *cfg,
		   const char *const *items, size_t n)
{
	npt_sb_up_fd(s, id, cfg, items, n, -1);
}

void npt_sb_up(struct npt_sb *s, const char *id, const char *const *items, size_t n)
{
	struct np_config cfg;
	npt_cfg_init(&cfg);
	npt_sb_up_cfg(s, id, &cfg, items, n);
}

void npt_proxy_stop_free(struct npt_sb *s)
{
	npw_proxy_stop(&s->loop);
	np_net_free(s->net);
	s->net = NULL;
}

void npt_sb_down(struct npt_sb *s)
{
	struct rung_err err = {0};
	npw_proxy_stop(&s->loop);
	np_net_free(s->net);
	s->net = NULL;
	ck_assert_msg(np_sandbox_down(npt_state_dir, s->id, &err) == 0, "down: %s", err.msg);
	close(s->fd);
}

/* ---- probes run inside a sandbox ---- */

struct probe {
	char ip[32], name[64], server[32];
	int port;
	bool tcp;
	uint64_t elapsed_ms;
};

int npt_p_tcp(void *a)
{
	struct probe *p = a;
	return npw_tcp(p->ip, p->port, 3000);
}
int npt_p_udp(void *a)
{
	struct probe *p = a;
	return npw_udp(p->ip, p->port, 3000);
}
int npt_p_ping(void *a)
{
	struct probe *p = a;
	return npw_ping(p->ip, 3000);
}

int npt_sb_probe(struct npt_sb *s, int (*fn)(void *), const char *ip, int port, uint64_t *ms)
{
	struct probe p = {.port = port};
	snprintf(p.ip, sizeof(p.ip), "%s", ip);
	uint64_t t0 = rung_now_ms();
	int r = npw_in_netns(s->fd, fn, &p);
	if (ms)
		*ms = rung_now_ms() - t0;
	return r;
}

int npt_sb_tcp(struct npt_sb *s, int host, int port, uint64_t *ms)
{
	char ip[32];
	npw_addr(&npt_W, host, ip, sizeof(ip));
	return npt_sb_probe(s, npt_p_tcp, ip, port, ms);
}

/* Resolve through a server from inside the sandbox; the first A lands in out. */
struct dnsq {
	char server[32], name[128], out[32];
	bool tcp;
};
static int p_dns(void *a)
{
	struct dnsq *q = a;
	return npw_dns(q->server, q->name, q->tcp, 3000, q->out, sizeof(q->out));
}

int npt_sb_resolve_via(struct npt_sb *s, const char *server, const char *name, bool tcp, char *out,
		       uint64_t *ms)
{
	/* shared with the probe child, which writes the address */
	struct dnsq *q =
	    mmap(NULL, sizeof(*q), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(q, MAP_FAILED);
	memset(q, 0, sizeof(*q));
	q->tcp = tcp;
	snprintf(q->server, sizeof(q->server), "%s", server);
	snprintf(q->name, sizeof(q->name), "%s", name);
	uint64_t t0 = rung_now_ms();
	int r = npw_in_netns(s->fd, p_dns, q);
	if (ms)
		*ms = rung_now_ms() - t0;
	if (out)
		snprintf(out, 32, "%s", q->out);
	munmap(q, sizeof(*q));
	return r;
}

int npt_sb_resolve(struct npt_sb *s, const char *name, char *out)
{
	return npt_sb_resolve_via(s, s->info.host_ip, name, false, out, NULL);
}

void npt_want_ip(const char *got, int host)
{
	char ip[32];
	npw_addr(&npt_W, host, ip, sizeof(ip));
	ck_assert_str_eq(got, ip);
}
