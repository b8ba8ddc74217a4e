# probe/module.mk: rung-probe, the isolation ladder's probe battery (docs/ladder.md). Static,
# like rung-agent, so it runs in any sandbox whatever its image holds. It links nothing of
# rung's: only libc.
PROBE_SRC := $(wildcard probe/*.c)
$(B)/rung-probe: $(call obj,$(PROBE_SRC))
	$(CC) -static $(LDFLAGS) -Wl,--gc-sections -o $@ $^
all: $(B)/rung-probe
# the nested stage carries it into L1 for the vm column (vmm/guest/payload-rung.sh)
check-vm: $(B)/rung-probe
# installed beside rung-agent, where `rung ladder` looks for it (../libexec/rung/rung-probe)
install: install-probe
install-probe: $(B)/rung-probe
	install -d $(DESTDIR)$(LIBEXECDIR)
	install -m 0755 $(B)/rung-probe $(DESTDIR)$(LIBEXECDIR)/
.PHONY: install-probe
