/* server/op.c: what the routes on one sandbox share, collected or streamed: the exec request
 * from the decoded body. (Use resumes a suspended sandbox in the runtime, for every entry
 * point.) */
#include <string.h>

#include "server/op.h"

void srv_exec_req_fill(const struct srv_exec *x, struct rung_exec_req *q)
{
	memset(q, 0, sizeof(*q));
	q->argv = (const char *const *)x->argv;
	q->env = (const char *const *)x->env;
	q->cwd = x->cwd;
	q->stdin_data = x->stdin_data;
	q->stdin_len = x->stdin_len;
	q->timeout_ms = x->timeout_ms;
	q->max_output = x->output_bytes; /* the runtime keeps it within the spec's */
}

