/* server/pool.c: the router pool: a request takes a router for its duration (no shared router
 * state between requests). */
#include <stdlib.h>

#include "common/err.h"
#include "server/pool.h"

int srv_router_get(struct srv *s, struct rung_router **out, struct rung_err *err)
{
	pthread_mutex_lock(&s->pool_mu);
	if (s->pool_n > 0) {
		*out = s->pool[--s->pool_n];
		pthread_mutex_unlock(&s->pool_mu);
		return 0;
	}
	pthread_mutex_unlock(&s->pool_mu);
	struct rung_router_opts ro = s->o.host;
	if (s->o.state_dir)
		ro.state_dir = s->o.state_dir;
	ro.deployed = s->o.deployed;
	ro.keep_agent_conns = true; /* an exec per request: kept connections (agent-keep.c) */
	int r = rung_router_new(&ro, out, err);
	return r < 0 ? rung_err_wrap(err, "router") : 0;
}

void srv_router_put(struct srv *s, struct rung_router *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&s->pool_mu);
	if (s->pool_n == s->pool_cap) {
		size_t cap = s->pool_cap ? s->pool_cap * 2 : 16;
		struct rung_router **nv = cap <= 1024 ? realloc(s->pool, cap * sizeof(*nv)) : NULL;
		if (!nv) {
			pthread_mutex_unlock(&s->pool_mu);
			rung_router_free(r);
			return;
		}
		s->pool = nv;
		s->pool_cap = cap;
	}
	s->pool[s->pool_n++] = r;
	pthread_mutex_unlock(&s->pool_mu);
}
