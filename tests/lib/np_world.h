/*
 * tests/lib/np_world.h: a self-contained "internet" for the netpolicy tests and bench.
 *
 * An `inet` network namespace (held only by an fd, so it dies with the test process) joined to
 * the host by a veth "npt<pid>" on a public-looking, unrouted /24 (RFC 5737 and 7526 nets, one
 * per concurrent run, held under an flock). Inside it, a thread
 * serves: DNS on .53:53 (a fixed test zone), TCP banners on :80 and :8080, UDP echo on :9000,
 * on the addresses .10 .. .14. Sandboxes are further fd-only netns; client probes run in a
 * forked child that joined the sandbox netns and report one int back.
 */
#ifndef RUNG_TESTS_LIB_NP_WORLD_H
#define RUNG_TESTS_LIB_NP_WORLD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "netpolicy/np.h"

struct np_world {
	int inet_fd;
	unsigned k;	   /* which of the world's /24s */
	int lock_fd;	   /* holds that /24 for this run */
	char veth[16];	   /* host end of the inet link */
	char net[16];	   /* "A.B.C." */
	char upstream[32]; /* "A.B.C.53:53" */
	pthread_t srv;
	int stop_fd;		/* eventfd: stops the server thread */
	atomic_int dns_queries; /* queries the upstream DNS server has seen */
	bool up;
};

/* A fresh fd-only network namespace (a thread unshares, opens it, exits). */
int npw_netns_new(void);
/* Runs /usr/sbin/ip with space-separated args, in netns_fd (or the host when < 0). */
int npw_ip(int netns_fd, const char *args_fmt, ...) __attribute__((format(printf, 2, 3)));
int npw_up(struct np_world *w);
void npw_down(struct np_world *w);
/* "A.B.C.<host>" */
void npw_addr(const struct np_world *w, int host, char *out, size_t len);

/* The proxy's event loop in a thread (what the supervisor does). */
struct npw_proxy_loop {
	struct np_net *net;
	pthread_t t;
	atomic_int stop;
	bool running;
};
int npw_proxy_start(struct npw_proxy_loop *l, struct np_net *net);
void npw_proxy_stop(struct npw_proxy_loop *l);

/* Runs fn(arg) in a child that joined netns_fd; returns fn's int (or -ECHILD). */
int npw_in_netns(int netns_fd, int (*fn)(void *), void *arg);

/* Client probes (call them inside the sandbox). */
/* TCP connect + read a banner: 0, or -errno (-ECONNREFUSED for a reset, -ETIMEDOUT...). */
int npw_tcp(const char *ip, int port, int timeout_ms);
/* UDP echo: 0 answered, -EHOSTUNREACH (ICMP error), -ETIMEDOUT... */
int npw_udp(const char *ip, int port, int timeout_ms);
/* ICMP echo: 0 reply, -EHOSTUNREACH (unreachable/prohibited), -ETIMEDOUT. */
int npw_ping(const char *ip, int timeout_ms);
/* A DNS query (A) to server:53 over udp (tcp when use_tcp). Returns rcode >= 0 and the first
 * A address in ip_out (or ""), or -errno. */
int npw_dns(const char *server, const char *name, bool use_tcp, int timeout_ms, char *ip_out,
	    size_t len);

#endif
