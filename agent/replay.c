/*
 * agent/replay.c: a background process's replay log. One byte sequence in which stdout and
 * stderr chunks keep their order of arrival; an offset is a position in it and never resets.
 * Each stream keeps at most `cap` bytes of its newest output: older bytes of that stream are
 * trimmed from the front of its oldest chunk and counted as dropped.
 */
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

#define CHUNK_MAX 65536

void agent_replay_init(struct agent_replay *r, uint64_t cap)
{
	memset(r, 0, sizeof(*r));
	r->cap = cap;
}

void agent_replay_release(struct agent_replay *r)
{
	for (size_t i = 0; r && i < r->n; i++)
		free(r->c[i].data);
	if (r) {
		free(r->c);
		memset(r, 0, sizeof(*r));
	}
}

/* Drop the emptied chunks at the front once they are many. */
static void compact(struct agent_replay *r)
{
	while (r->head < r->n && r->c[r->head].len == 0)
		r->head++;
	if (r->head < 64 || r->head * 2 < r->n)
		return;
	memmove(r->c, r->c + r->head, (r->n - r->head) * sizeof(*r->c));
	r->n -= r->head;
	for (int s = 0; s < 2; s++)
		r->first[s] = r->first[s] > r->head ? r->first[s] - r->head : 0;
	r->head = 0;
}

/* Trim stream s's oldest bytes until it holds at most cap. */
static void trim(struct agent_replay *r, int s)
{
	while (r->kept[s] > r->cap) {
		size_t i = r->first[s] > r->head ? r->first[s] : r->head;
		while (i < r->n && (r->c[i].stream != s || r->c[i].len == 0))
			i++;
		if (i == r->n)
			break; /* cannot happen: kept counts these chunks' bytes */
		struct agent_replay_chunk *c = &r->c[i];
		uint64_t excess = r->kept[s] - r->cap;
		uint32_t t = excess < c->len ? (uint32_t)excess : c->len;
		memmove(c->data, c->data + t, c->len - t);
		c->len -= t;
		c->off += t;
		r->kept[s] -= t;
		r->dropped[s] += t;
		if (c->len == 0) {
			free(c->data);
			c->data = NULL;
			c->cap = 0;
		}
		r->first[s] = i;
	}
	compact(r);
}

int agent_replay_append(struct agent_replay *r, int s, const void *data, size_t len)
{
	const uint8_t *p = data;
	while (len) {
		struct agent_replay_chunk *last = r->n > r->head ? &r->c[r->n - 1] : NULL;
		if (!last || last->stream != s || last->len == 0 || last->len >= CHUNK_MAX) {
			if (r->n == r->cap_chunks) {
				size_t nc = r->cap_chunks ? r->cap_chunks * 2 : 16;
				struct agent_replay_chunk *nv = realloc(r->c, nc * sizeof(*nv));
				if (!nv)
					return -ENOMEM;
				r->c = nv;
				r->cap_chunks = nc;
			}
			last = &r->c[r->n++];
			*last = (struct agent_replay_chunk){.off = r->end, .stream = (uint8_t)s};
		}
		size_t room = CHUNK_MAX - last->len;
		size_t take = len < room ? len : room;
		if (last->len + take > last->cap) {
			uint32_t nc = last->cap ? last->cap : 256;
			while (nc < last->len + take)
				nc *= 2;
			uint8_t *nd = realloc(last->data, nc);
			if (!nd)
				return -ENOMEM;
			last->data = nd;
			last->cap = nc;
		}
		memcpy(last->data + last->len, p, take);
		last->len += (uint32_t)take;
		r->end += take;
		r->kept[s] += take;
		p += take;
		len -= take;
		trim(r, s);
	}
	return 0;
}

int agent_replay_read(const struct agent_replay *r, uint64_t since, agent_replay_fn fn, void *ud,
		      uint64_t *dropped)
{
	uint64_t present = 0;
	for (size_t i = r->head; i < r->n; i++) {
		const struct agent_replay_chunk *c = &r->c[i];
		if (c->len == 0 || c->off + c->len <= since)
			continue;
		uint64_t start = c->off > since ? c->off : since;
		size_t skip = (size_t)(start - c->off);
		present += c->len - skip;
		int x = fn(ud, c->stream, start, c->data + skip, c->len - skip);
		if (x < 0)
			return x;
	}
	if (dropped)
		*dropped = r->end > since ? r->end - since - present : 0;
	return 0;
}
