/* tests/lib/np_sb.h: sandboxes on the test internet, shared by the netpolicy "net" suites. */
#ifndef RUNG_TESTS_LIB_NP_SB_H
#define RUNG_TESTS_LIB_NP_SB_H

#include <stdbool.h>
#include <stdint.h>

#include "netpolicy/np.h"
#include "tests/lib/np_world.h"

#define FAST_MS 500 /* a denial must be an RST/ICMP error well within this, not a timeout */

extern struct np_world npt_W;
extern char npt_state_dir[128];
extern char npt_audit_buf[8192];

/* One sandbox: its netns, its np_net, its proxy loop. */
struct npt_sb {
	int fd;
	struct np_net *net;
	struct npw_proxy_loop loop;
	struct np_net_info info;
	char id[64];
};

/* checked fixture: the test internet, and cleanup even when an assertion fails */
void npt_world_setup(void);
void npt_world_teardown(void);
void npt_cfg_init(struct np_config *cfg);
void npt_sb_up_fd(struct npt_sb *s, const char *id, const struct np_config *cfg,
		  const char *const *items, size_t n, int netns_fd);
void npt_sb_up_cfg(struct npt_sb *s, const char *id, const struct np_config *cfg,
		   const char *const *items, size_t n);
void npt_sb_up(struct npt_sb *s, const char *id, const char *const *items, size_t n);
void npt_sb_down(struct npt_sb *s);
/* what a crashed supervisor leaves: the proxy and object gone, kernel state still there */
void npt_proxy_stop_free(struct npt_sb *s);
/* probes, run in a child inside the sandbox (npw_in_netns) */
int npt_p_tcp(void *a);
int npt_p_udp(void *a);
int npt_p_ping(void *a);
int npt_sb_probe(struct npt_sb *s, int (*fn)(void *), const char *ip, int port, uint64_t *ms);
int npt_sb_tcp(struct npt_sb *s, int host, int port, uint64_t *ms);
int npt_sb_resolve_via(struct npt_sb *s, const char *server, const char *name, bool tcp, char *out,
		       uint64_t *ms);
int npt_sb_resolve(struct npt_sb *s, const char *name, char *out);
void npt_want_ip(const char *got, int host);

#define REQUIRE_NET()                                                                              \
	do {                                                                                       \
		RUNG_REQUIRE_ROOT();                                                               \
		if (access("/usr/sbin/ip", X_OK) != 0)                                             \
			RUNG_SKIP("iproute2 (/usr/sbin/ip) missing: the test world needs it");     \
	} while (0)

#endif
