/*
 * runtime/callbacks.c: the host side of an exec's callback channel (docs/callbacks.md).
 * The agent relays the bytes the command writes on its channel; here they are split into
 * lines, each line checked (size, nesting depth, shape, registered name, rate) before any
 * handler sees it, and run by a pool of worker threads (up to the concurrency bound, made
 * as needed, kept until the exec ends), the rest waiting in order of arrival. A call's
 * timeout runs from its arrival. Answers go back as JSON lines. Everything from the sandbox
 * is untrusted.
 */
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/callbacks.h"

#define DEF_MAX_BYTES (1u << 20)
#define DEF_MAX_DEPTH 32
#define DEF_RATE 1000
#define DEF_TIMEOUT_MS 30000
#define DEF_CONCURRENCY 8
#define MAX_QUEUED 1024 /* calls accepted and not yet running */

enum call_state { QUEUED, RUNNING, DONE };

struct call {
	struct rt_cb *cb;
	const struct rung_callback *h;
	struct rung_callback_call c;
	char *args;
	enum call_state state;
	bool abandoned; /* answered "timeout"; its result is dropped */
	int rc;
	char *result;
	struct rung_err err;
	struct call *next;
};

struct rt_cb {
	const struct rung_callback *tab;
	size_t n;
	struct rung_callback_limits lim;
	pthread_mutex_t mu; /* the call list and the workers' state */
	pthread_cond_t cv;  /* a call is waiting, or stop */
	pthread_t *workers;
	size_t n_workers, idle;
	bool stop;
	int wake[2];
	struct call *calls; /* oldest first */
	size_t queued;
	struct rung_buf line;
	bool skipping; /* an oversize line: dropped up to its newline */
	double tokens;
	uint64_t refill_ms;
	struct rt_cb_stats st;
};

int rt_cb_new(const struct rung_exec_req *req, struct rt_cb **out, struct rung_err *err)
{
	for (size_t i = 0; i < req->n_callbacks; i++)
		if (!rt_cb_name_ok(req->callbacks[i].name) || !req->callbacks[i].fn)
			return rung_err_set(err, EINVAL,
					    "callbacks[%zu]: name must be 1..64 of [A-Za-z0-9_.-] "
					    "and a handler given",
					    i);
	struct rt_cb *cb = calloc(1, sizeof(*cb));
	if (!cb)
		return rung_err_set(err, ENOMEM, "out of memory");
	cb->tab = req->callbacks;
	cb->n = req->n_callbacks;
	cb->lim = req->cb_limits;
	if (!cb->lim.max_bytes)
		cb->lim.max_bytes = DEF_MAX_BYTES;
	if (!cb->lim.max_depth)
		cb->lim.max_depth = DEF_MAX_DEPTH;
	if (!cb->lim.rate_per_s)
		cb->lim.rate_per_s = DEF_RATE;
	if (!cb->lim.timeout_ms)
		cb->lim.timeout_ms = DEF_TIMEOUT_MS;
	if (!cb->lim.concurrency)
		cb->lim.concurrency = DEF_CONCURRENCY;
	cb->tokens = cb->lim.rate_per_s;
	cb->refill_ms = rung_now_ms();
	cb->workers = calloc(cb->lim.concurrency, sizeof(pthread_t));
	if (!cb->workers || pipe2(cb->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		int e = cb->workers ? errno : ENOMEM;
		free(cb->workers);
		free(cb);
		return rung_err_sys(err, e, "callbacks: pipe");
	}
	pthread_mutex_init(&cb->mu, NULL);
	pthread_cond_init(&cb->cv, NULL);
	*out = cb;
	return 0;
}

bool rt_cb_name_ok(const char *n)
{
	size_t l = n ? strlen(n) : 0;
	if (l == 0 || l > 64)
		return false;
	for (const char *p = n; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
			return false;
	return true;
}

int rt_cb_wake_fd(const struct rt_cb *cb)
{
	return cb->wake[0];
}

uint32_t rt_cb_max_bytes(const struct rt_cb *cb)
{
	return cb->lim.max_bytes;
}

/* One answer line, {"id":N,"ok":...} in this key order (rung-call relies on it). */
static void answer(struct rung_buf *out, uint64_t id, const char *result, const char *code,
		   const char *msg)
{
	char *s = NULL;
	if (!code) {
		json_t *r = json_loads(result ? result : "null", JSON_DECODE_ANY, NULL);
		char *rs = r ? json_dumps(r, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER)
			     : NULL;
		json_decref(r);
		if (rs && asprintf(&s, "{\"id\":%llu,\"ok\":true,\"result\":%s}\n",
				   (unsigned long long)id, rs) < 0)
			s = NULL;
		free(rs);
		if (!rs) {
			code = "failed";
			msg = "the host function returned something that is not JSON";
		}
	}
	if (code) {
		json_t *m = json_string(msg ? msg : "failed");
		char *ms = m ? json_dumps(m, JSON_ENCODE_ANY) : NULL;
		json_decref(m);
		if (ms && asprintf(&s, "{\"id\":%llu,\"ok\":false,\"error\":%s,\"code\":\"%s\"}\n",
				   (unsigned long long)id, ms, code) < 0)
			s = NULL;
		free(ms);
	}
	if (s)
		rung_buf_append(out, s, strlen(s));
	free(s);
}

/* Nesting depth of JSON text, strings skipped; stops counting past max. */
static uint32_t json_depth(const char *p, size_t len, uint32_t max)
{
	uint32_t d = 0, top = 0;
	bool str = false;
	for (size_t i = 0; i < len && top <= max; i++) {
		char ch = p[i];
		if (str) {
			if (ch == '\\')
				i++;
			else if (ch == '"')
				str = false;
		} else if (ch == '"') {
			str = true;
		} else if (ch == '{' || ch == '[') {
			if (++d > top)
				top = d;
		} else if ((ch == '}' || ch == ']') && d) {
			d--;
		}
	}
	return top;
}

/* {"id":N at the start of a line (the documented order): its id for an answer, else 0. */
static uint64_t prefix_id(const uint8_t *p, size_t len)
{
	char tmp[40];
	size_t n = len < sizeof(tmp) - 1 ? len : sizeof(tmp) - 1;
	memcpy(tmp, p, n);
	tmp[n] = 0;
	/* digits only: %llu would take "-2" as 2^64 - 2, an id no JSON reader takes back */
	if (strncmp(tmp, "{\"id\":", 6) || tmp[6] < '0' || tmp[6] > '9')
		return 0;
	unsigned long long id = 0;
	if (sscanf(tmp, "{\"id\":%llu", &id) != 1 || id > (unsigned long long)INT64_MAX)
		return 0;
	return id;
}

static bool rate_ok(struct rt_cb *cb)
{
	uint64_t now = rung_now_ms();
	cb->tokens += (double)(now - cb->refill_ms) * cb->lim.rate_per_s / 1000.0;
	if (cb->tokens > cb->lim.rate_per_s)
		cb->tokens = cb->lim.rate_per_s;
	cb->refill_ms = now;
	if (cb->tokens < 1.0)
		return false;
	cb->tokens -= 1.0;
	return true;
}

/* A worker: take the oldest waiting call, run it, mark it done, wake the exec's loop. */
static void *worker(void *arg)
{
	struct rt_cb *cb = arg;
	pthread_mutex_lock(&cb->mu);
	for (;;) {
		struct call *k = cb->calls;
		while (k && k->state != QUEUED)
			k = k->next;
		if (cb->stop)
			break;
		if (!k) {
			cb->idle++;
			pthread_cond_wait(&cb->cv, &cb->mu);
			cb->idle--;
			continue;
		}
		k->state = RUNNING;
		cb->queued--;
		pthread_mutex_unlock(&cb->mu);
		char *res = NULL;
		struct rung_err e = {0};
		int rc = k->h->fn(k->h->ud, &k->c, &res, &e);
		pthread_mutex_lock(&cb->mu);
		k->rc = rc;
		k->result = res;
		k->err = e;
		k->state = DONE;
		char one = 1;
		ssize_t w = write(cb->wake[1], &one, 1); /* full pipe: a wake is pending anyway */
		(void)w;
	}
	pthread_mutex_unlock(&cb->mu);
	return NULL;
}

/* Under mu: a worker for a call just queued (an idle one, or a new one up to the bound). */
static void wake_worker(struct rt_cb *cb)
{
	if (cb->idle >= cb->queued) {
		pthread_cond_signal(&cb->cv);
		return;
	}
	if (cb->n_workers < cb->lim.concurrency &&
	    pthread_create(&cb->workers[cb->n_workers], NULL, worker, cb) == 0)
		cb->n_workers++;
	pthread_cond_signal(&cb->cv);
}

/* A whole line from the sandbox: refuse it, or queue its call. */
static void on_line(struct rt_cb *cb, const uint8_t *p, size_t len, struct rung_buf *out)
{
	uint64_t id = prefix_id(p, len);
	cb->st.calls++;
	if (json_depth((const char *)p, len, cb->lim.max_depth) > cb->lim.max_depth) {
		cb->st.refused++;
		return answer(out, id, NULL, "too_deep", "arguments nested too deeply");
	}
	json_error_t je;
	json_t *j = json_loadb((const char *)p, len, JSON_REJECT_DUPLICATES, &je);
	json_t *jid = json_object_get(j, "id"), *jname = json_object_get(j, "name"),
	       *jargs = json_object_get(j, "args");
	const char *name = json_string_value(jname);
	const struct rung_callback *h = NULL;
	for (size_t i = 0; name && i < cb->n && !h; i++)
		if (!strcmp(cb->tab[i].name, name))
			h = &cb->tab[i];
	const char *code = NULL, *msg = NULL;
	char m[200];
	if (!j || !json_is_integer(jid) || json_integer_value(jid) < 0 || !name ||
	    (jargs && !json_is_object(jargs) && !json_is_array(jargs))) {
		code = "bad_request";
		snprintf(m, sizeof(m), "a call is {\"id\":N,\"name\":S,\"args\":{...}}%s%.100s",
			 j ? "" : ": ", j ? "" : je.text);
		msg = m;
	} else if (!h) {
		code = "unknown";
		snprintf(m, sizeof(m), "no host function named '%.64s' is registered", name);
		msg = m;
	} else if (!rate_ok(cb)) {
		code = "rate_limited";
		snprintf(m, sizeof(m), "more than %u calls per second", cb->lim.rate_per_s);
		msg = m;
	} else if (cb->queued >= MAX_QUEUED) {
		code = "busy";
		msg = "too many calls waiting";
	}
	if (j && json_is_integer(jid) && json_integer_value(jid) >= 0)
		id = (uint64_t)json_integer_value(jid);
	struct call *k = code ? NULL : calloc(1, sizeof(*k));
	if (k)
		k->args = jargs ? json_dumps(jargs, JSON_COMPACT | JSON_PRESERVE_ORDER)
				: strdup("{}");
	json_decref(j);
	if (!code && (!k || !k->args)) {
		code = "failed";
		msg = "host out of memory";
	}
	if (code) {
		if (k)
			free(k->args), free(k);
		cb->st.refused++;
		return answer(out, id, NULL, code, msg);
	}
	char *args = k->args;
	*k = (struct call){.cb = cb, .h = h, .args = args, .state = QUEUED};
	k->c = (struct rung_callback_call){h->name, k->args, strlen(k->args), id,
					   rung_now_ms() + cb->lim.timeout_ms};
	pthread_mutex_lock(&cb->mu);
	struct call **tail = &cb->calls;
	while (*tail)
		tail = &(*tail)->next;
	*tail = k;
	cb->queued++;
	wake_worker(cb);
	pthread_mutex_unlock(&cb->mu);
}

void rt_cb_input(struct rt_cb *cb, const uint8_t *data, size_t len, struct rung_buf *out)
{
	while (len) {
		const uint8_t *nl = memchr(data, '\n', len);
		size_t n = nl ? (size_t)(nl - data) : len;
		if (!cb->skipping && cb->line.len + n > cb->lim.max_bytes) {
			uint8_t head[40];
			size_t h = cb->line.len < sizeof(head) ? cb->line.len : sizeof(head);
			memcpy(head, cb->line.data, h);
			if (h < sizeof(head)) {
				size_t more = n < sizeof(head) - h ? n : sizeof(head) - h;
				memcpy(head + h, data, more);
				h += more;
			}
			char m[120];
			snprintf(m, sizeof(m), "a call is limited to %u bytes", cb->lim.max_bytes);
			cb->st.calls++;
			cb->st.refused++;
			answer(out, prefix_id(head, h), NULL, "too_large", m);
			cb->skipping = true;
			rung_buf_release(&cb->line);
		}
		if (!cb->skipping)
			rung_buf_append(&cb->line, data, n);
		if (nl) {
			if (!cb->skipping && cb->line.len)
				on_line(cb, cb->line.data, cb->line.len, out);
			cb->skipping = false;
			cb->line.len = 0;
			if (cb->line.cap > 65536)
				rung_buf_release(&cb->line);
			n++;
		}
		data += n;
		len -= n;
	}
}

/* Completed calls answered and freed; calls past their deadline (waiting or running)
 * answered "timeout". */
uint64_t rt_cb_poll(struct rt_cb *cb, struct rung_buf *out)
{
	char drain[64];
	while (read(cb->wake[0], drain, sizeof(drain)) > 0)
		;
	uint64_t now = rung_now_ms(), next = 0;
	pthread_mutex_lock(&cb->mu);
	for (struct call **pp = &cb->calls, *k; (k = *pp);) {
		if (k->state != DONE && !k->abandoned && now >= k->c.deadline_ms) {
			k->abandoned = true;
			cb->st.timed_out++;
			char m[120];
			snprintf(m, sizeof(m), "the host function %s did not answer within %u ms",
				 k->h->name, cb->lim.timeout_ms);
			answer(out, k->c.id, NULL, "timeout", m);
		}
		bool gone = k->state == DONE || (k->state == QUEUED && k->abandoned);
		if (k->state == DONE && !k->abandoned) {
			if (k->rc < 0)
				cb->st.failed++;
			answer(out, k->c.id, k->result, k->rc < 0 ? "failed" : NULL,
			       k->err.msg[0] ? k->err.msg : "the host function failed");
		}
		if (gone) {
			if (k->state == QUEUED)
				cb->queued--;
			*pp = k->next;
			free(k->result);
			free(k->args);
			free(k);
			continue;
		}
		if (!k->abandoned && (!next || k->c.deadline_ms < next))
			next = k->c.deadline_ms;
		pp = &k->next;
	}
	pthread_mutex_unlock(&cb->mu);
	return next;
}

void rt_cb_stats(const struct rt_cb *cb, struct rt_cb_stats *st)
{
	*st = cb->st;
}

void rt_cb_free(struct rt_cb *cb)
{
	if (!cb)
		return;
	/* Calls not started never will be; running ones are waited for (their answers
	 * dropped): no thread outlives the exec. */
	pthread_mutex_lock(&cb->mu);
	cb->stop = true;
	pthread_cond_broadcast(&cb->cv);
	pthread_mutex_unlock(&cb->mu);
	for (size_t i = 0; i < cb->n_workers; i++)
		pthread_join(cb->workers[i], NULL);
	for (struct call *k = cb->calls, *nx; k; k = nx) {
		nx = k->next;
		free(k->result);
		free(k->args);
		free(k);
	}
	free(cb->workers);
	close(cb->wake[0]);
	close(cb->wake[1]);
	rung_buf_release(&cb->line);
	pthread_cond_destroy(&cb->cv);
	pthread_mutex_destroy(&cb->mu);
	free(cb);
}
