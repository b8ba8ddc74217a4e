/*
 * runtime/agent-keep.c: kept agent connections (docs/protocol.md, "Kept connections").
 *
 * With rung_router_opts.keep_agent_conns (the daemon sets it), an exec without stdin or
 * callbacks asks the agent to keep its connection; once the EXIT frame came, the connection
 * is parked here, and the process's next exec on that sandbox takes it: no connect, no
 * accept, no handler fork on its path (the handler waits for the next request, having killed
 * whatever the last one started). At most one connection per sandbox is parked, and at most
 * KEEP_MAX in all, each for at most KEEP_IDLE_MS: a sandbox then holds one more process
 * (rung-agent-h) while a parked connection is idle, never an unbounded number.
 *
 * A parked connection's handler sends nothing until it gets a request, so one that is
 * readable (EOF: its sandbox or handler is gone) is closed, never used. Only a sandbox of the
 * process and container rungs (rung-agent's own Unix socket) is kept.
 */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "runtime/rt-internal.h"

#define KEEP_MAX 64
#define KEEP_IDLE_MS 30000

struct keep_ent {
	char *key; /* "<store root>/<id>"; NULL: free */
	int fd;
	struct rt_cgroup *cg; /* the sandbox's group as its last exec opened it, or NULL */
	uint64_t at_ms;	      /* parked at */
};

static pthread_mutex_t keep_mu = PTHREAD_MUTEX_INITIALIZER;
static struct keep_ent keep_v[KEEP_MAX];

static void ent_close(struct keep_ent *e)
{
	free(e->key);
	close(e->fd);
	rt_cgroup_free(e->cg);
	*e = (struct keep_ent){.fd = -1};
}

/* An idle handler sends nothing: anything readable (EOF, an error) means it is gone. */
static bool ent_dead(const struct keep_ent *e)
{
	struct pollfd p = {.fd = e->fd, .events = POLLIN | POLLRDHUP};
	return poll(&p, 1, 0) != 0;
}

static void key_of(const struct rt_store *st, const char *id, char *k, size_t n)
{
	snprintf(k, n, "%s/%s", st->root, id);
}

int rt_keep_take(const struct rt_store *st, const char *id, struct rt_cgroup **cg)
{
	char k[4200];
	key_of(st, id, k, sizeof(k));
	int fd = -1;
	pthread_mutex_lock(&keep_mu);
	for (size_t i = 0; i < KEEP_MAX; i++) {
		struct keep_ent *e = &keep_v[i];
		if (!e->key || strcmp(e->key, k))
			continue;
		if (ent_dead(e) || rung_now_ms() - e->at_ms > KEEP_IDLE_MS) {
			ent_close(e);
			break;
		}
		fd = e->fd;
		*cg = e->cg;
		free(e->key);
		*e = (struct keep_ent){.fd = -1};
		break;
	}
	pthread_mutex_unlock(&keep_mu);
	return fd;
}

void rt_keep_put(const struct rt_store *st, const char *id, int fd, struct rt_cgroup *cg)
{
	char k[4200];
	key_of(st, id, k, sizeof(k));
	uint64_t now = rung_now_ms();
	struct keep_ent *slot = NULL, *oldest = NULL;
	pthread_mutex_lock(&keep_mu);
	for (size_t i = 0; i < KEEP_MAX; i++) {
		struct keep_ent *e = &keep_v[i];
		if (e->key && (ent_dead(e) || now - e->at_ms > KEEP_IDLE_MS))
			ent_close(e); /* the sweep: parked connections never outlive their use */
		if (e->key && !strcmp(e->key, k)) {
			pthread_mutex_unlock(&keep_mu);
			close(fd); /* one per sandbox: the one parked first stays */
			rt_cgroup_free(cg);
			return;
		}
		if (!e->key && !slot)
			slot = e;
		if (e->key && (!oldest || e->at_ms < oldest->at_ms))
			oldest = e;
	}
	if (!slot) {
		ent_close(oldest);
		slot = oldest;
	}
	slot->key = strdup(k);
	if (slot->key) {
		slot->fd = fd;
		slot->cg = cg;
		slot->at_ms = now;
	} else {
		close(fd);
		rt_cgroup_free(cg);
	}
	pthread_mutex_unlock(&keep_mu);
}

void rt_keep_drop(const struct rt_store *st, const char *id)
{
	char k[4200];
	key_of(st, id, k, sizeof(k));
	pthread_mutex_lock(&keep_mu);
	for (size_t i = 0; i < KEEP_MAX; i++)
		if (keep_v[i].key && !strcmp(keep_v[i].key, k))
			ent_close(&keep_v[i]);
	pthread_mutex_unlock(&keep_mu);
}
