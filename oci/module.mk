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

# make install: rung-oci, and rung-oci-vm, a link to it that runs the vm rung (containerd's runc
# shim can change only the binary it calls: one runtime entry per rung; docs/oci.md).
install: install-oci
install-oci: $(B)/rung-oci
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 $(B)/rung-oci $(DESTDIR)$(BINDIR)/
	ln -sf rung-oci $(DESTDIR)$(BINDIR)/rung-oci-vm

uninstall: uninstall-oci
uninstall-oci:
	rm -f $(DESTDIR)$(BINDIR)/rung-oci $(DESTDIR)$(BINDIR)/rung-oci-vm

.PHONY: install-oci uninstall-oci
