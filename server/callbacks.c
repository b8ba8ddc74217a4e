/* server/callbacks.c: host callbacks through the daemon (see callbacks.h, docs/callbacks.md). */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/util.h"
#include "server/callbacks.h"
#include "server/reply.h"

#define SLICE_MS 100

struct pending {
	char id[33];
	const struct srv_cb_exec *e;
	bool answered;
	char *result; /* JSON text */
	char *error;
	struct pending *next;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_cv = PTHREAD_COND_INITIALIZER;
static struct pending *reg;
static size_t reg_n;

static bool name_ok(const char *n)
{
	size_t l = strlen(n);
	if (!l || l > 64)
		return false;
	for (; *n; n++)
		if (!((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') ||
		      (*n >= '0' && *n <= '9') || *n == '_' || *n == '-' || *n == '.'))
			return false;
	return true;
}

int srv_cb_names_parse(json_t *v, char ***out, struct rung_err *err)
{
	size_t n = json_is_array(v) ? json_array_size(v) : 0;
	if (!n || n > 64)
		return rung_err_set(err, EINVAL, "callbacks: must be an array of 1..64 names");
	char **names = calloc(n + 1, sizeof(char *));
	if (!names)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const char *s = json_string_value(json_array_get(v, i));
		bool dup = false;
		for (size_t k = 0; s && k < i; k++)
			dup |= !strcmp(names[k], s);
		if (!s || !name_ok(s) || dup || !(names[i] = strdup(s))) {
			rung_strvfreep(&names);
			return rung_err_set(err, EINVAL,
					    "callbacks[%zu]: a distinct name of 1..64 [A-Za-z0-9_.-]",
					    i);
		}
	}
	*out = names;
	return 0;
}

static bool client_gone(int fd)
{
	struct pollfd p = {fd, POLLRDHUP, 0};
	return fd >= 0 && poll(&p, 1, 0) > 0 &&
	       (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL));
}

static int post_event(const struct srv_cb_exec *e, const char *id,
		      const struct rung_callback_call *c)
{
	/* args is the engine's compact re-encoding of validated JSON: embedded as it is */
	char *line = NULL;
	json_t *jn = json_string(c->name);
	char *ns = jn ? json_dumps(jn, JSON_ENCODE_ANY) : NULL;
	json_decref(jn);
	int n = ns ? asprintf(&line, "{\"callback\":{\"id\":\"%s\",\"name\":%s,\"args\":%s}}\n", id,
			      ns, c->args)
		   : -1;
	free(ns);
	if (n < 0)
		return -ENOMEM;
	pthread_mutex_lock(e->wlock);
	int r = rung_write_all(e->wfd, line, (size_t)n);
	pthread_mutex_unlock(e->wlock);
	free(line);
	return r;
}

static int handler(void *ud, const struct rung_callback_call *c, char **result,
		   struct rung_err *err)
{
	const struct srv_cb_exec *e = ud;
	struct pending p = {.e = e};
	uint8_t rnd[16];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return rung_err_set(err, EIO, "host: no randomness for a callback id");
	for (int i = 0; i < 16; i++)
		snprintf(p.id + 2 * i, 3, "%02x", rnd[i]);
	pthread_mutex_lock(&reg_mu);
	p.next = reg;
	reg = &p;
	reg_n++;
	pthread_mutex_unlock(&reg_mu);
	int r = post_event(e, p.id, c);
	pthread_mutex_lock(&reg_mu);
	while (r == 0 && !p.answered) {
		if (rung_now_ms() >= c->deadline_ms) {
			r = rung_err_set(err, ETIMEDOUT, "the client did not answer in time");
			break;
		}
		if (client_gone(e->conn_fd)) {
			r = rung_err_set(err, ECANCELED, "the client went away");
			break;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += SLICE_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L)
			ts.tv_sec++, ts.tv_nsec -= 1000000000L;
		pthread_cond_timedwait(&reg_cv, &reg_mu, &ts);
	}
	if (r == -EPIPE || (r < 0 && r != -ETIMEDOUT && r != -ECANCELED && !err->msg[0]))
		r = rung_err_set(err, ECANCELED, "the client's stream is gone");
	for (struct pending **pp = &reg; *pp; pp = &(*pp)->next)
		if (*pp == &p) {
			*pp = p.next;
			reg_n--;
			break;
		}
	pthread_mutex_unlock(&reg_mu);
	if (r == 0 && p.error)
		r = rung_err_set(err, EIO, "%s", p.error);
	if (r == 0)
		*result = p.result, p.result = NULL;
	free(p.result);
	free(p.error);
	return r;
}

int srv_cb_exec_init(struct srv_cb_exec *e, char **names, struct rung_err *err)
{
	size_t n = 0;
	while (names && names[n])
		n++;
	e->tab = calloc(n ? n : 1, sizeof(*e->tab));
	if (!e->tab)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		e->tab[i] = (struct rung_callback){names[i], handler, e};
	e->n = n;
	return 0;
}

void srv_cb_exec_release(struct srv_cb_exec *e)
{
	free(e->tab);
	e->tab = NULL;
}

size_t srv_cb_pending(void)
{
	pthread_mutex_lock(&reg_mu);
	size_t n = reg_n;
	pthread_mutex_unlock(&reg_mu);
	return n;
}

/* {"result": any} or {"error": "message"}: the JSON text of result, or the message. */
static int answer_parse(const char *body, size_t len, char **result, char **error,
			struct rung_err *err)
{
	json_error_t je;
	json_t *j = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
	json_t *res = json_object_get(j, "result"), *er = json_object_get(j, "error");
	int r = 0;
	if (!json_is_object(j) || json_object_size(j) != 1 || (!res && !json_is_string(er)))
		r = rung_err_set(err, EINVAL,
				 "the body is {\"result\": JSON} or {\"error\": \"message\"}");
	else if (res)
		*result = json_dumps(res, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
	else
		*error = strdup(json_string_value(er));
	json_decref(j);
	if (r == 0 && !*result && !*error)
		r = rung_err_set(err, ENOMEM, "out of memory");
	return r;
}

enum MHD_Result srv_cb_answer(struct srv_call *call, struct MHD_Connection *c)
{
	struct rung_err err = {0};
	char *result = NULL, *error = NULL;
	if (answer_parse(call->body, call->body_len, &result, &error, &err) < 0)
		return srv_reply_error(call, c, SRV_E_BAD_REQUEST, "%s", err.msg);
	bool found = false;
	pthread_mutex_lock(&reg_mu);
	for (struct pending *p = reg; p && !found; p = p->next)
		if (!strcmp(p->id, call->req.cb_id) && !p->answered &&
		    !strcmp(p->e->sb_id, call->req.id) &&
		    !strcmp(p->e->scope, call->scope ? call->scope : "")) {
			p->result = result;
			p->error = error;
			p->answered = found = true;
		}
	if (found)
		pthread_cond_broadcast(&reg_cv);
	pthread_mutex_unlock(&reg_mu);
	if (!found) {
		free(result);
		free(error);
		return srv_reply_error(call, c, SRV_E_NOT_FOUND,
				       "callback %s: no such pending call (answered, timed out, or "
				       "not this sandbox's)",
				       call->req.cb_id);
	}
	return srv_reply_json(call, c, 200,
			      json_pack("{s:s, s:b}", "id", call->req.cb_id, "accepted", 1));
}
