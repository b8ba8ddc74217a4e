/* netpolicy/lease.h: names derived from the id, and one /30 per sandbox out of the pool, under
 * <state_dir>/net/ with flock (lease.c). */
#ifndef RUNG_NETPOLICY_LEASE_H
#define RUNG_NETPOLICY_LEASE_H

#include "netpolicy/np-internal.h"

void np_names_derive(const char *state_dir, const char *id, struct np_names *nm);
int np_lease_acquire(const char *state_dir, const char *pool, const char *id,
		     const struct np_names *nm, struct np_lease *out, struct rung_err *err);
int np_lease_release(const char *state_dir, const struct np_names *nm, struct rung_err *err);
/* Calls fn(id, hash) for each lease file in the state dir. */
int np_lease_foreach(const char *state_dir, void (*fn)(const char *id, const char *hash, void *),
		     void *data, struct rung_err *err);
/* Pure: pool "A.B.C.D/N" -> base and slot count (/30 slots). */
int np_pool_parse(const char *pool, uint32_t *base, uint32_t *slots, struct rung_err *err);

#endif
