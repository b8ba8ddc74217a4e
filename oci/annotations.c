/*
 * oci/annotations.c: the dev.rung.* annotations rung-oci reads at create. dev.rung.egress-allow
 * is rung's default-deny egress allowlist for the pod's network namespace (docs/oci.md): the
 * same entries as `rung --allow`, parsed by netpolicy's own parser, separated by commas or
 * white space. It is checked fully here (each entry, and that the spec joins a network namespace
 * by path: a new one has no route out under rung-oci); egress.c applies it.
 */
#include <string.h>

#include "netpolicy/np.h"
#include "oci/oci-internal.h"

#define ANN "annotations." OCI_ANN_EGRESS

/* The entries of text (commas and white space separate them) parsed into out. */
static int entries_parse(const char *text, struct np_policy *out, struct rung_err *err)
{
	static const char sep[] = ", \t\n\r";
	char *copy = strdup(text);
	const char **items = calloc(strlen(text) / 2 + 1, sizeof(char *));
	size_t n = 0;
	int r = 0;
	if (!copy || !items)
		r = rung_err_set(err, ENOMEM, "out of memory");
	for (char *p = copy, *tok; r == 0 && (tok = strsep(&p, sep));)
		if (*tok)
			items[n++] = tok;
	if (r == 0 && (r = np_policy_parse(items, n, out, err)) < 0)
		rung_err_wrap(err, ANN);
	free(items);
	free(copy);
	return r;
}

int oci_egress_parse(const struct oci_config *c, struct np_policy *out, struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	json_t *v = json_object_get(c->annotations, OCI_ANN_EGRESS);
	if (!v)
		return 0;
	if (!json_is_string(v))
		return rung_err_set(err, EINVAL, ANN ": must be a string (entries as for "
				    "`rung --allow`, separated by commas)");
	int r = entries_parse(json_string_value(v), out, err);
	if (r < 0)
		return r;
	if (!c->netns_path) {
		np_policy_release(out);
		return rung_err_set(err, EINVAL, ANN ": needs linux.namespaces[network].path (the "
				    "pod's network namespace, made by the CNI): a new network "
				    "namespace has no route out under rung-oci");
	}
	return 1;
}

int oci_annotations_check(const struct oci_config *c, struct rung_err *err)
{
	struct np_policy pol;
	int r = oci_egress_parse(c, &pol, err);
	if (r > 0)
		np_policy_release(&pol);
	return r < 0 ? r : 0;
}
