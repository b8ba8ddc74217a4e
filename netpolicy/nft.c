/*
 * netpolicy/nft.c: applying and listing tables through libnftables (never the nft binary).
 *
 * libnftables is loaded with dlopen on the first table operation, not linked: it and its chain
 * (libnftnl, libxtables, libgmp) cost every start of every program linking librung loader time
 * (build/rung starts once per CLI call, cli/module.mk), and only sandboxes with an egress
 * allowlist, gc and the counters use it. The pointers keep the header's types, so a call
 * through them is checked as a direct call would be.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <nftables/libnftables.h>

#include "common/dl.h"
#include "common/util.h"
#include "netpolicy/lease.h"
#include "netpolicy/np-internal.h"

#define NFT_SONAME "libnftables.so.1"

static struct {
	__typeof__(&nft_ctx_new) ctx_new;
	__typeof__(&nft_ctx_free) ctx_free;
	__typeof__(&nft_ctx_buffer_output) buffer_output;
	__typeof__(&nft_ctx_buffer_error) buffer_error;
	__typeof__(&nft_ctx_get_output_buffer) output_buffer;
	__typeof__(&nft_ctx_get_error_buffer) error_buffer;
	__typeof__(&nft_ctx_output_get_flags) get_flags;
	__typeof__(&nft_ctx_output_set_flags) set_flags;
	__typeof__(&nft_run_cmd_from_buffer) run;
	char why[200]; /* why loading failed, "" when it did not */
} nft;
static pthread_once_t nft_once = PTHREAD_ONCE_INIT;

static void nft_load(void)
{
	static const char *const names[] = {NFT_SONAME, NULL};
	const struct rung_dl_sym syms[] = {
	    {(void **)&nft.ctx_new, "nft_ctx_new"},
	    {(void **)&nft.ctx_free, "nft_ctx_free"},
	    {(void **)&nft.buffer_output, "nft_ctx_buffer_output"},
	    {(void **)&nft.buffer_error, "nft_ctx_buffer_error"},
	    {(void **)&nft.output_buffer, "nft_ctx_get_output_buffer"},
	    {(void **)&nft.error_buffer, "nft_ctx_get_error_buffer"},
	    {(void **)&nft.get_flags, "nft_ctx_output_get_flags"},
	    {(void **)&nft.set_flags, "nft_ctx_output_set_flags"},
	    {(void **)&nft.run, "nft_run_cmd_from_buffer"},
	};
	rung_dl_load(names, syms, RUNG_ARRAY_SIZE(syms), nft.why, sizeof(nft.why));
}

struct nft_ctx *np_nft_new(struct rung_err *err)
{
	pthread_once(&nft_once, nft_load);
	if (nft.why[0]) {
		rung_err_set(err, ENOTSUP, "nftables: cannot load %s (package libnftables1): %s",
			     NFT_SONAME, nft.why);
		return NULL;
	}
	struct nft_ctx *c = nft.ctx_new(NFT_CTX_DEFAULT);
	if (!c) {
		rung_err_set(err, ENOMEM, "nft_ctx_new");
		return NULL;
	}
	if (nft.buffer_output(c) < 0 || nft.buffer_error(c) < 0) {
		nft.ctx_free(c);
		rung_err_set(err, ENOMEM, "nft_ctx_buffer_output");
		return NULL;
	}
	return c;
}

void np_nft_free(struct nft_ctx *c)
{
	if (c)
		nft.ctx_free(c);
}

int np_nft_run(struct nft_ctx *c, const char *cmd, struct rung_err *err)
{
	if (nft.run(c, cmd) == 0)
		return 0;
	const char *e = nft.error_buffer(c);
	const char *nl = e ? strchr(e, '\n') : NULL;
	int n = e ? (nl ? (int)(nl - e) : (int)strlen(e)) : 0;
	int code = e && strstr(e, "No such file")	       ? ENOENT
		   : e && strstr(e, "File exists")	       ? EEXIST
		   : e && strstr(e, "Operation not permitted") ? EPERM
							       : EIO;
	return rung_err_set(err, code, "nftables: %.*s", n > 200 ? 200 : n, e ? e : "failed");
}

int np_nft_table_del(struct nft_ctx *c, const char *table, struct rung_err *err)
{
	char cmd[96];
	/* "add" first makes the delete idempotent, in one transaction. */
	snprintf(cmd, sizeof(cmd), "add table inet %s\ndelete table inet %s\n", table, table);
	return np_nft_run(c, cmd, err);
}

/* The comment of table inet name ("" if none), from its terse text listing. */
static void table_comment(struct nft_ctx *c, const char *name, char *out, size_t len)
{
	char cmd[96];
	out[0] = '\0';
	snprintf(cmd, sizeof(cmd), "list table inet %s", name);
	if (nft.run(c, cmd) != 0)
		return;
	const char *o = nft.output_buffer(c);
	const char *p = o ? strstr(o, "\n\tcomment \"") : NULL;
	if (!p)
		return;
	p += strlen("\n\tcomment \"");
	const char *q = strchr(p, '"');
	if (q && (size_t)(q - p) < len) {
		memcpy(out, p, (size_t)(q - p));
		out[q - p] = '\0';
	}
}

int np_nft_foreach_table(struct nft_ctx *c, void (*fn)(const char *, const char *, void *),
			 void *data, struct rung_err *err)
{
	unsigned flags = nft.get_flags(c);
	nft.set_flags(c, flags | NFT_CTX_OUTPUT_JSON);
	int r = nft.run(c, "list tables inet");
	nft.set_flags(c, flags);
	if (r != 0)
		return rung_err_set(err, EIO, "nftables: list tables failed");
	json_error_t je;
	json_t *root = json_loads(nft.output_buffer(c), 0, &je);
	if (!root)
		return rung_err_set(err, EBADMSG, "nftables: list tables: %s", je.text);
	json_t *arr = json_object_get(root, "nftables");
	size_t i, n = json_array_size(arr), k = 0;
	json_t *it;
	char(*names)[64] = calloc(n + 1, sizeof(*names));
	if (!names) {
		json_decref(root);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	json_array_foreach(arr, i, it)
	{
		json_t *t = json_object_get(it, "table");
		const char *nm = json_string_value(json_object_get(t, "name"));
		const char *fam = json_string_value(json_object_get(t, "family"));
		if (nm && fam && !strcmp(fam, "inet") && !strncmp(nm, "rung_", 5) &&
		    strlen(nm) < 64)
			snprintf(names[k++], 64, "%s", nm);
	}
	json_decref(root);
	nft.set_flags(c, flags | NFT_CTX_OUTPUT_TERSE);
	for (i = 0; i < k; i++) {
		char comment[200];
		table_comment(c, names[i], comment, sizeof(comment));
		fn(names[i], comment, data);
	}
	nft.set_flags(c, flags);
	free(names);
	return 0;
}

int np_sandbox_counters(const char *state_dir, const char *id, struct np_counters *out,
			struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	int r = np_id_check(id, err);
	if (r < 0)
		return r;
	struct np_names nm;
	np_names_derive(state_dir, id, &nm);
	struct nft_ctx *c = np_nft_new(err);
	if (!c)
		return -(err->code ? err->code : ENOMEM);
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "list counters table inet %s", nm.table);
	unsigned flags = nft.get_flags(c);
	nft.set_flags(c, flags | NFT_CTX_OUTPUT_JSON);
	r = nft.run(c, cmd);
	json_t *root = r == 0 ? json_loads(nft.output_buffer(c), 0, NULL) : NULL;
	np_nft_free(c);
	if (r != 0)
		return rung_err_set(err, ENOENT, "sandbox %s has no network table", id);
	if (!root)
		return rung_err_set(err, EBADMSG, "nftables: list counters: no JSON");
	size_t i;
	json_t *it;
	int found = 0;
	json_array_foreach(json_object_get(root, "nftables"), i, it)
	{
		json_t *k = json_object_get(it, "counter");
		const char *n = json_string_value(json_object_get(k, "name"));
		const char *t = json_string_value(json_object_get(k, "table"));
		if (!n || !t || strcmp(t, nm.table))
			continue;
		uint64_t p = (uint64_t)json_integer_value(json_object_get(k, "packets"));
		uint64_t b = (uint64_t)json_integer_value(json_object_get(k, "bytes"));
		if (!strcmp(n, "tx"))
			out->tx_bytes = b, out->tx_packets = p, found++;
		else if (!strcmp(n, "rx"))
			out->rx_bytes = b, out->rx_packets = p, found++;
		else if (!strcmp(n, "refused"))
			out->refused_packets = p, found++;
	}
	json_decref(root);
	if (found != 3)
		return rung_err_set(err, ENOENT, "sandbox %s: its table has no counters", id);
	return 0;
}
