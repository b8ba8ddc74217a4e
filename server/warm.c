/*
 * server/warm.c: the daemon's warm pools (--pool NAME=SIZE:SPEC.json, docs/pools.md). Each
 * is set in the store at start and kept filled by a thread of its own (rung_pool_keep: a
 * refill after every claim, from any process or replica on the store). Replicas configured
 * with the same pool share it: fills serialise on the pool's lock; the pool is owned by the
 * replica that set it last, and a replica that finds it gone (removed by gc after its owner
 * died, or by `rung pool rm`) sets it again and owns it.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "server/pool.h"
#include "server/srv-internal.h"

struct warm {
	struct srv *s;
	char name[RUNG_POOL_NAME_MAX + 1];
	uint32_t size;
	struct rung_spec spec;
};

/* NAME=SIZE:FILE -> w (spec loaded and validated). */
static int warm_parse(const char *arg, struct warm *w, struct rung_err *err)
{
	const char *eq = strchr(arg, '='), *colon = eq ? strchr(eq, ':') : NULL;
	uint64_t size;
	if (!eq || !colon || eq == arg || (size_t)(eq - arg) > RUNG_POOL_NAME_MAX)
		return rung_err_set(err, EINVAL, "--pool %s: expected NAME=SIZE:SPEC.json", arg);
	char num[24];
	snprintf(num, sizeof(num), "%.*s", (int)(colon - eq - 1), eq + 1);
	if (rung_parse_u64(num, &size) < 0 || size > RUNG_POOL_MAX_SIZE)
		return rung_err_set(err, EINVAL, "--pool %s: SIZE '%s' is not 0..%d", arg, num,
				    RUNG_POOL_MAX_SIZE);
	snprintf(w->name, sizeof(w->name), "%.*s", (int)(eq - arg), arg);
	w->size = (uint32_t)size;
	cleanup_free char *txt = NULL;
	size_t len = 0;
	int rc = rung_file_load(AT_FDCWD, colon + 1, 1 << 20, &txt, &len, err);
	if (rc == 0)
		rc = rung_spec_from_json(txt, len, &w->spec, err);
	if (rc < 0)
		return rung_err_wrap(err, "--pool %s: %s", w->name, colon + 1);
	return 0;
}

static bool stopping(struct srv *s)
{
	pthread_mutex_lock(&s->stop_mu);
	bool st = s->stopping;
	pthread_mutex_unlock(&s->stop_mu);
	return st;
}

/* Is the pool there, owned by a live process? If not: set it (again) and own it. */
static int warm_ensure(struct rung_router *r, struct warm *w, struct rung_err *err)
{
	struct rung_pool_info *v = NULL;
	size_t n = 0;
	bool fine = false;
	char match[65];
	int rc = rung_pool_match(&w->spec, match, err);
	if (rc < 0 || (rc = rung_pool_list(r, &v, &n, err)) < 0)
		return rc;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].name, w->name))
			fine = v[i].owner_alive && v[i].size == w->size &&
			       !strcmp(v[i].match, match);
	rung_pool_info_free(v, n);
	if (fine)
		return 0;
	if ((rc = rung_pool_set(r, w->name, w->size, &w->spec, 0, err)) < 0)
		return rc;
	return rung_pool_own(r, w->name, getpid(), err);
}

static void *warm_main(void *arg)
{
	struct warm *w = arg;
	struct rung_router *r = NULL;
	struct rung_err err = {0};
	while (!stopping(w->s)) {
		if (!r && srv_router_get(w->s, &r, &err) < 0) {
			LOG_WARN("op=pool name=%s error=\"%s\"", w->name, err.msg);
			sleep(1);
			continue;
		}
		/* keep returns when the pool is removed (then set it again) or at stopping */
		if (warm_ensure(r, w, &err) < 0 ||
		    rung_pool_keep(r, w->name, (const volatile bool *)&w->s->stopping, &err) < 0) {
			LOG_WARN("op=pool name=%s error=\"%s\"", w->name, err.msg);
			sleep(1);
		}
	}
	if (r)
		srv_router_put(w->s, r);
	rung_spec_release(&w->spec);
	free(w);
	return NULL;
}

int srv_warm_start(struct srv *s, pthread_t *threads, size_t *nt, struct rung_err *err)
{
	struct rung_router *r;
	int rc;
	if (!s->o.n_pools)
		return 0;
	if ((rc = srv_router_get(s, &r, err)) < 0)
		return rc;
	for (size_t i = 0; i < s->o.n_pools; i++) {
		struct warm *w = calloc(1, sizeof(*w));
		if (!w) {
			rc = rung_err_set(err, ENOMEM, "out of memory");
			break;
		}
		w->s = s;
		if ((rc = warm_parse(s->o.pools[i], w, err)) < 0 ||
		    (rc = warm_ensure(r, w, err)) < 0) {
			rung_spec_release(&w->spec);
			free(w);
			break;
		}
		if (pthread_create(&threads[*nt], NULL, warm_main, w) != 0) {
			rung_spec_release(&w->spec);
			free(w);
			rc = rung_err_set(err, EAGAIN, "--pool %s: cannot start its thread",
					  s->o.pools[i]);
			break;
		}
		++*nt;
		LOG_WARN("op=pool name=%s size=%u", w->name, w->size);
	}
	srv_router_put(s, r);
	return rc < 0 ? rc : 0;
}
