/*
 * fuzz/fuzz_spec.c: rung_spec_from_json on arbitrary bytes. A spec that parses must validate,
 * serialise to canonical JSON, and parse back to the same canonical JSON.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rung/rung.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rung_spec s;
	struct rung_err err = {0};
	if (rung_spec_from_json((const char *)data, size, &s, &err) < 0) {
		if (!err.msg[0] || err.code <= 0)
			abort(); /* every failure explains itself */
		return 0;
	}
	if (rung_spec_validate(&s, &err) < 0)
		abort();
	char *j = rung_spec_to_json(&s);
	if (!j)
		abort();
	struct rung_spec s2;
	if (rung_spec_from_json(j, strlen(j), &s2, &err) < 0)
		abort(); /* canonical JSON must parse */
	char *j2 = rung_spec_to_json(&s2);
	if (!j2 || strcmp(j, j2))
		abort();
	free(j);
	free(j2);
	rung_spec_release(&s2);
	rung_spec_release(&s);
	return 0;
}
