/* runtime/egress.c: a spec's egress entries are checked by the netpolicy parser itself. */
#include "netpolicy/np.h"
#include "runtime/rt-internal.h"

int rt_egress_entry_check(const char *entry, struct rung_err *err)
{
	struct np_entry e;
	return np_entry_parse(entry, &e, err);
}
