/* runtime/key.c: SandboxKey validation, labels (full SHA-256 hex, never truncated) and ids. */
#include <string.h>

#include "common/digest.h"
#include "runtime/rt-internal.h"

static int part_check(const char *v, const char *name, struct rung_err *err)
{
	if (!v || !*v)
		return rung_err_set(err, EINVAL, "key.%s: required", name);
	if (strlen(v) > 256)
		return rung_err_set(err, EINVAL, "key.%s: longer than 256 bytes", name);
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return rung_err_set(err, EINVAL, "key.%s: holds a control character", name);
	return 0;
}

int rt_key_validate(const struct rung_key *k, struct rung_err *err)
{
	int r;
	if (!k)
		return rung_err_set(err, EINVAL, "key: required");
	if ((r = part_check(k->scope, "scope", err)) < 0 ||
	    (r = part_check(k->thread, "thread", err)) < 0 ||
	    (r = part_check(k->agent, "agent", err)) < 0)
		return r;
	return 0;
}

void rt_label_of(const char *part, char out[65])
{
	rung_sha256_hex(part, strlen(part), out);
}

void rt_labels_compute(const struct rung_key *k, struct rt_labels *out)
{
	rt_label_of(k->scope, out->scope);
	rt_label_of(k->thread, out->thread);
	rt_label_of(k->agent, out->agent);
}

void rt_id_compute(const struct rung_key *k, const char *kind, char out[RT_ID_LEN + 1])
{
	/* Domain-separated hash of every part; acquire also checks the full labels on reuse. */
	const char *parts[] = {"rung-sandbox-id-v1", k->scope, k->thread, k->agent, kind};
	char hex[RUNG_SHA256_HEX_LEN + 1];
	rung_sha256_parts_hex(parts, 5, hex);
	memcpy(out, hex, RT_ID_LEN);
	out[RT_ID_LEN] = '\0';
}

bool rt_id_valid(const char *id)
{
	if (!id || strlen(id) != RT_ID_LEN)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}
