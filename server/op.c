/* server/op.c: what the routes on one sandbox share, collected or streamed: the exec request
 * from the decoded body, and resume on use. */
#include <string.h>

#include "common/log.h"
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

/*
 * The sweeper suspends idle sandboxes behind their clients' backs, so an op refused because
 * the sandbox is suspended (-EBADFD, before anything ran) resumes it and is retried once.
 */
bool srv_wake(struct rung_sandbox *sb, int rc)
{
	struct rung_err e2 = {0};
	if (rc != -EBADFD || rung_resume(sb, &e2) < 0)
		return false;
	LOG_INFO("op=resume id=%s reason=use", rung_sandbox_id(sb));
	return true;
}
