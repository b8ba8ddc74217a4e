/*
 * tests/lib/egress.h: helpers for the end-to-end egress suites (e2e_egress_process,
 * e2e_egress_container).
 *
 * The test "internet" is tests/lib/np_world.h (a netns on a public-looking /24 with a DNS
 * server, TCP banners on :80/:8080, UDP echo on :9000 at .10-.15); nothing else is ever
 * contacted. The sandboxes are real ones, acquired through include/rung/rung.h; the runtime
 * gets the world's DNS server as its upstream (RUNG_DNS_UPSTREAM) and a /24 of its own
 * (RUNG_NET_POOL), so that concurrent runs on the default pool never share an address with
 * these tests.
 *
 * Probes run INSIDE the sandbox: on the process rung a Python script (host /usr/bin/python3),
 * printing one line "<probe> => <result> <ms>ms" per probe; on the container rung busybox
 * applets. ICMP, which an unprivileged sandbox cannot send, is probed from the host side in
 * the sandbox's own network namespace (same source address, same path, same table).
 */
#ifndef RUNG_TESTS_LIB_EGRESS_H
#define RUNG_TESTS_LIB_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "rung/rung.h"
#include "tests/lib/np_world.h"

/*
 * A refusal (TCP reset, ICMP prohibited) is answered at once; a probe's own timeout is 3 s
 * (busybox nc -w 3), so a hang shows as "timeout". Under a loaded CI host a refused connect
 * can still take a scheduler's while: the bound is 2 s, below any timeout.
 */
#define EG_FAST_MS 2000

/* Brings the world up and sets RUNG_DNS_UPSTREAM / RUNG_NET_POOL; false + why if it cannot. */
bool eg_world_up(struct np_world *w, char *why, size_t n);
/* The same without eg_world_up's host checks (root, the host's python3 for the probes). */
void eg_world_start(struct np_world *w);
#define EG_WORLD(w)                                                                                \
	do {                                                                                       \
		char why_[256];                                                                    \
		if (!eg_world_up(w, why_, sizeof(why_)))                                           \
			RUNG_SKIP(why_);                                                           \
	} while (0)

/* "<world net>.<host>" into a static-free caller buffer. */
#define EG_IP(w, host, buf) npw_addr(w, host, buf, sizeof(buf))

/* A process-rung spec (kind) with the given allowlist (NULL-terminated, may be empty). */
void eg_spec(struct rung_spec *s, const char *kind, const char *const *allow);

/* The Python probe (process rung): runs each probe in cmds (NULL-terminated); stdout. */
extern const char eg_probe_py[];
char *eg_py(struct rung_sandbox *sb, const char *const *cmds);
/* The result of one probe in eg_py's output ("ok hello", "refused", ...), and its ms. */
const char *eg_res(const char *out, const char *probe, char *buf, size_t len, int *ms);
/* Assert the result of probe starts with want (and took < max_ms when max_ms > 0). */
void eg_expect(const char *out, const char *probe, const char *want, int max_ms);

/* The host-wide names of a sandbox of store state: veth "rg<12hex>", table "rung_<12hex>". */
void eg_names(const char *state, const char *id, char veth[16], char table[32], char hash[13]);
bool eg_link_exists(const char *name);
bool eg_table_exists(const char *table);
/* `list table inet <table>` through libnftables (terse: without set elements); malloc'd. */
char *eg_table_text(const char *table, bool terse);
/* `list ruleset` (terse), every table on the host; malloc'd. */
char *eg_table_text_all(void);
/* nft tables on the host whose comment carries this store's netpolicy tag. */
int eg_store_tables(const char *state);
bool eg_lease_exists(const char *state, const char *id);
int eg_lease_count(const char *state);
/* veth, table and lease of id all present (want true) / all absent (want false): asserts. */
void eg_assert_net(const char *state, const char *id, bool want);

/* Close the handle, dispose the sandbox (asserts), and assert its veth, table, lease are gone. */
void eg_dispose(struct rung_router *r, struct rung_sandbox *sb, const char *state);

/* A pod's network namespace as a CNI makes one (fd-only): a veth veth (in w) / eth0 (in it),
 * 10.250.0.1/30 and 10.250.0.2/30, a default route to the world. Its fd. */
int eg_pod_netns(const struct np_world *w, const char *veth);
/* No such process, or a zombie left to whoever reaps orphans (never running). */
bool eg_gone(pid_t pid);
/* Running processes in the network namespace netns_fd (a leaked proxy would be one). */
int eg_netns_procs(int netns_fd);

/* The sandbox's pid 1 (from the store). */
pid_t eg_init_pid(struct rung_router *r, const char *id);
/* ICMP echo from inside the sandbox's netns (host side, CAP_NET_RAW): npw_ping's result. */
int eg_ping_from(pid_t init_pid, const char *ip);

#endif
