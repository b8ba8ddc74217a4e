# netpolicy/module.mk: the egress benchmark (bench/README.md, section "egress").
NP_BENCH_OBJ := $(B)/obj/bench/netpolicy.o $(B)/obj/tests/lib/np_world.o

$(B)/bench/netpolicy: $(NP_BENCH_OBJ) $(call obj,$(COMMON) $(NETPOL))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

bench-netpolicy: $(B)/bench/netpolicy
	$(B)/bench/netpolicy 200 500

.PHONY: bench-netpolicy

