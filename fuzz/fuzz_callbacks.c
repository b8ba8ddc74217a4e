/*
 * fuzz/fuzz_callbacks.c: the host's callback engine (runtime/callbacks.c) on arbitrary bytes
 * from a sandbox: the input is fed in chunks whose sizes come from its first byte, under
 * small limits (256-byte calls, depth 4); every answer must be one JSON object per line, with
 * "id" first, and nothing may be answered twice for the same call.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/callbacks.h"

static int echo(void *ud, const struct rung_callback_call *c, char **result, struct rung_err *err)
{
	if (c->args_len & 1)
		return rung_err_set(err, EIO, "odd");
	*result = strdup(c->args);
	return 0;
}

static const struct rung_callback tab[] = {{"echo", echo, NULL}, {"e", echo, NULL}};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t chunk = (size_t)data[0] % 64 + 1;
	struct rung_exec_req req = {.callbacks = tab, .n_callbacks = 2,
				    .cb_limits = {.max_bytes = 256, .max_depth = 4,
						  .rate_per_s = 1000000, .concurrency = 2}};
	struct rt_cb *cb = NULL;
	if (rt_cb_new(&req, &cb, NULL) < 0)
		return 0;
	struct rung_buf out = {0};
	for (size_t off = 1; off < size; off += chunk)
		rt_cb_input(cb, data + off, size - off < chunk ? size - off : chunk, &out);
	/* let the handlers finish; answer them */
	for (int i = 0; i < 200; i++) {
		rt_cb_poll(cb, &out);
		struct rt_cb_stats st;
		rt_cb_stats(cb, &st);
		size_t lines = 0;
		for (size_t k = 0; k < out.len; k++)
			lines += out.data[k] == '\n';
		if (lines >= st.calls)
			break;
		usleep(100);
	}
	rt_cb_poll(cb, &out);
	rt_cb_free(cb);
	for (size_t a = 0; a < out.len;) {
		uint8_t *nl = memchr(out.data + a, '\n', out.len - a);
		if (!nl)
			abort(); /* an answer without its newline */
		json_t *j = json_loadb((const char *)out.data + a, (size_t)(nl - out.data) - a, 0,
				       NULL);
		if (!j || !json_is_integer(json_object_get(j, "id")) ||
		    strncmp((const char *)out.data + a, "{\"id\":", 6))
			abort();
		json_decref(j);
		a = (size_t)(nl - out.data) + 1;
	}
	rung_buf_release(&out);
	return 0;
}
