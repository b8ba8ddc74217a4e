/*
 * fuzz/fuzz_pid1_setup.c: rung_pid1_setup_decode (what rung-agent --init reads from its go
 * pipe, common/pid1.c) on arbitrary bytes. A failure explains itself; a message that decodes
 * encodes back to the very same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/pid1.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rung_pid1_setup s;
	struct rung_err err = {0};
	if (rung_pid1_setup_decode(data, size, &s, &err) < 0) {
		if (!err.msg[0] || err.code <= 0 || s.newroot || s.plan.n)
			abort(); /* every failure explains itself and keeps nothing */
		return 0;
	}
	void *out;
	size_t len;
	if (rung_pid1_setup_encode(&s, &out, &len, &err) < 0)
		abort();
	if (len != size || memcmp(out, data, size))
		abort();
	free(out);
	rung_pid1_setup_release(&s);
	return 0;
}
