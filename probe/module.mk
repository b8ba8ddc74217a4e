# probe/module.mk: rung-probe, the isolation ladder's probe battery (docs/ladder.md). Static,
# like rung-agent, so it runs in any sandbox whatever its image holds. It links nothing of
# rung's: only libc.
PROBE_SRC := $(wildcard probe/*.c)
$(B)/rung-probe: $(call obj,$(PROBE_SRC))
	$(CC) -static $(LDFLAGS) -Wl,--gc-sections -o $@ $^
all: $(B)/rung-probe
