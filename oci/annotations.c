/*
 * oci/annotations.c: the dev.rung.* annotations rung-oci reads at create. dev.rung.egress-allow
 * (rung's default-deny egress allowlist inside the pod's network namespace, docs/oci.md) is not
 * applied yet: a container asking for it is refused rather than run with the network it
 * asked not to have.
 */
#include "oci/oci-internal.h"

int oci_annotations_check(const struct oci_config *c, struct rung_err *err)
{
	if (json_object_get(c->annotations, OCI_ANN_EGRESS))
		return rung_err_set(err, ENOTSUP, "annotations." OCI_ANN_EGRESS ": not supported "
				    "by rung-oci yet (the pod's network would not be restricted); "
				    "remove it, or use the CNI's network policy");
	return 0;
}
