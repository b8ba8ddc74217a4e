/*
 * server/quota.c: what each scope holds right now (requests in flight, sandboxes being
 * created), against its limits (struct srv_limits), so that one tenant cannot starve another.
 */
#include <stdbool.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "server/srv-internal.h"

/* The scope's state, created on first use. Scopes come from the tokens file only, so the
 * list is bounded by it (entries of scopes a reload removed stay, idle). */
static struct srv_scope *scope_get(struct srv *s, const char *scope)
{
	for (struct srv_scope *q = s->scopes; q; q = q->next)
		if (!strcmp(q->name, scope))
			return q;
	struct srv_scope *q = calloc(1, sizeof(*q));
	if (!q || !(q->name = strdup(scope))) {
		free(q);
		return NULL;
	}
	q->next = s->scopes;
	s->scopes = q;
	return q;
}

/* What a scope counts against a limit: requests in flight, or open connections. */
static unsigned *count_of(struct srv_scope *q, bool conns)
{
	return conns ? &q->conns : &q->inflight;
}

/* Take one more of the scope's count if it holds fewer than limit; otherwise count a refusal. */
static int scope_take(struct srv *s, const char *scope, uint32_t limit, bool conns,
		      struct srv_scope **out, struct rung_err *err)
{
	pthread_mutex_lock(&s->scope_mu);
	struct srv_scope *q = scope_get(s, scope);
	int r = 0;
	if (!q)
		r = rung_err_set(err, ENOMEM, "out of memory");
	else if (*count_of(q, conns) >= limit) {
		q->refused++;
		if (conns)
			r = rung_err_set(err, EAGAIN,
					 "this scope holds %u open connections (its limit): close "
					 "idle ones",
					 q->conns);
		else
			r = rung_err_set(
			    err, EAGAIN,
			    "this scope already has %u requests in flight (its limit): "
			    "retry when one has finished",
			    q->inflight);
	} else {
		(*count_of(q, conns))++;
		*out = q;
	}
	pthread_mutex_unlock(&s->scope_mu);
	return r;
}

static void scope_put(struct srv *s, struct srv_scope *q, bool conns)
{
	if (!q)
		return;
	pthread_mutex_lock(&s->scope_mu);
	(*count_of(q, conns))--;
	pthread_mutex_unlock(&s->scope_mu);
}

int srv_scope_enter(struct srv *s, const char *scope, uint32_t limit, struct srv_scope **out,
		    struct rung_err *err)
{
	return scope_take(s, scope, limit, false, out, err);
}

void srv_scope_leave(struct srv *s, struct srv_scope *q) { scope_put(s, q, false); }

int srv_scope_attach(struct srv *s, const char *scope, uint32_t limit, struct srv_scope **out,
		     struct rung_err *err)
{
	return scope_take(s, scope, limit, true, out, err);
}

void srv_scope_detach(struct srv *s, struct srv_scope *q) { scope_put(s, q, true); }

void srv_scope_snapshot(struct srv *s, const char *scope, unsigned *inflight, unsigned long *refused)
{
	*inflight = 0;
	*refused = 0;
	pthread_mutex_lock(&s->scope_mu);
	for (struct srv_scope *q = s->scopes; q; q = q->next)
		if (!strcmp(q->name, scope)) {
			*inflight = q->inflight;
			*refused = q->refused;
		}
	pthread_mutex_unlock(&s->scope_mu);
}

int srv_create_enter(struct srv *s, struct rung_router *r, const char *scope,
		     const struct rung_key *key, const char *kind, uint32_t limit,
		     struct srv_scope **out, struct rung_err *err)
{
	/* acquire is get-or-create: the key's own sandbox is not a new one (one metadata read,
	 * so a warm acquire does not pay for listing the store) */
	struct rung_sandbox *own = NULL;
	struct rung_err e2 = {0};
	if (rung_sandbox_lookup(r, key, kind, &own, &e2) == 0) {
		rung_sandbox_close(own);
		*out = NULL;
		return 0;
	}
	struct rung_sandbox_info *v = NULL;
	size_t n = 0;
	int rc = rung_list(r, scope, NULL, &v, &n, err);
	if (rc < 0)
		return rc;
	free(v);
	pthread_mutex_lock(&s->scope_mu);
	struct srv_scope *q = scope_get(s, scope);
	if (!q)
		rc = rung_err_set(err, ENOMEM, "out of memory");
	else if (n + q->creating >= limit) {
		q->refused++;
		rc = rung_err_set(err, EAGAIN,
				  "this scope has %zu sandboxes (its limit is %u): dispose one first",
				  n + q->creating, limit);
	} else {
		q->creating++;
		*out = q;
	}
	pthread_mutex_unlock(&s->scope_mu);
	return rc;
}

void srv_create_leave(struct srv *s, struct srv_scope *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&s->scope_mu);
	q->creating--;
	pthread_mutex_unlock(&s->scope_mu);
}
