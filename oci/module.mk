# oci/module.mk: rung-oci, the OCI runtime command line (docs/oci.md), and its conformance stage.
OCI := $(call src_of,oci)

$(B)/rung-oci: $(call obj,$(OCI) oci/main-oci.c) $(B)/librung.a
	$(CC) $(LDFLAGS) -Wl,--as-needed -o $@ $^ $(LDLIBS)

all: $(B)/rung-oci

# The OCI runtime-tools validation suite against build/rung-oci and runc in one run (a stage of
# make check; it skips loudly without the suite, root or runc).
check-oci: $(B)/rung-oci
	@sh scripts/check-oci.sh $(B)/rung-oci
CHECK_STAGES += check-oci

.PHONY: check-oci
