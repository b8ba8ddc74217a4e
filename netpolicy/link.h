/* netpolicy/link.h: the libnl plumbing (link.c): veth or tap, routes, sysctls. */
#ifndef RUNG_NETPOLICY_LINK_H
#define RUNG_NETPOLICY_LINK_H

#include "netpolicy/np-internal.h"

int np_link_up(const struct np_names *nm, const char *id, int netns_fd, const struct np_lease *l,
	       struct rung_err *err);
/* A VM's host end instead of a veth: a tap (its fd in *tap_fd) with the host end's setup. */
int np_tap_up(const struct np_names *nm, const char *id, const struct np_lease *l, int *tap_fd,
	      struct rung_err *err);
int np_link_del(const char *veth, struct rung_err *err);
/* Loopback up only (no network). */
int np_netns_lo_only(int netns_fd, struct rung_err *err);
/* The host's IPv4 routes (all tables), default routes left out. */
struct np_route4 {
	uint32_t net; /* host byte order */
	uint8_t len;
	int oif; /* first nexthop's ifindex (0: none) */
};
int np_routes_dump(struct np_route4 **out, size_t *n, struct rung_err *err);
/* Pure: does net/len overlap any of the routes (those via skip_oif left out; 0: none)? */
bool np_routes_overlap(const struct np_route4 *r, size_t n, uint32_t net, uint8_t len,
		       int skip_oif);
/* Calls fn(veth name, ifalias) for each host link named "rg*". */
int np_link_foreach(void (*fn)(const char *name, const char *alias, void *), void *data,
		    struct rung_err *err);
int np_sysctl_write(const char *path, const char *val, struct rung_err *err);

#endif
