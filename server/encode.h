/* server/encode.h: a collected exec's reply (encode.c). */
#ifndef RUNG_SERVER_ENCODE_H
#define RUNG_SERVER_ENCODE_H

#include "server/srv-internal.h"

/* encode.c: a collected exec's result, encoded as it is sent (takes res's buffers). */
enum MHD_Result srv_reply_exec(struct srv_call *call, struct MHD_Connection *c,
			       struct rung_exec_res *res);

/* One background process as every route answers it: {"handle", "name", "argv", "pty",
 * "session", "state", "exit_code", "signal", "pid", "started_ms", "end_offset",
 * "dropped_out", "dropped_err"} (exit_code and signal null while it runs). */
json_t *srv_proc_info_json(const struct rung_proc_info *pi);

#endif
