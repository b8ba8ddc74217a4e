/* fuzz/fuzz_np_policy.c: egress_allow entries (one per line) -> parse, match, render, describe. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netpolicy/np.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0;
	char *buf = malloc(size + 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	const char *items[64];
	size_t n = 0;
	for (char *save = NULL, *t = strtok_r(buf, "\n", &save); t && n < 64;
	     t = strtok_r(NULL, "\n", &save))
		items[n++] = t;
	struct np_policy p;
	struct rung_err err;
	if (np_policy_parse(items, n, &p, &err) == 0) {
		struct np_render_params rp = {.table = "rung_0123456789ab",
					      .veth = "rg0123456789ab",
					      .comment = "rung-np:0:fuzz",
					      .host_ip = {10, 213, 0, 1},
					      .sb_ip = {10, 213, 0, 2}};
		free(np_policy_render(&p, &rp, &err));
		json_decref(np_policy_describe(&p));
		bool any;
		uint16_t ports[8];
		size_t np;
		for (size_t i = 0; i < n; i++)
			np_policy_match_name(&p, items[i], &any, ports, 8, &np);
		for (size_t i = 0; i < p.n; i++) {
			char txt[320];
			struct np_entry e;
			np_entry_format(&p.entries[i], txt, sizeof(txt));
			/* the canonical text parses back to the same entry */
			if (np_entry_parse(txt, &e, &err) != 0 || e.kind != p.entries[i].kind ||
			    e.port != p.entries[i].port || e.prefix != p.entries[i].prefix)
				abort();
		}
		np_policy_release(&p);
	}
	free(buf);
	return 0;
}
