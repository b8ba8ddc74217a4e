# vmm/module.mk: rung-vmm, a static program (vmm objects + the minimal common files).
VMM_COMMON := common/err.c common/log.c common/util.c
$(B)/rung-vmm: $(call obj,$(VMM) vmm/main.c $(VMM_COMMON))
	$(CC) -static $(LDFLAGS) -Wl,--gc-sections -o $@ $^ -lseccomp -lpthread

all: $(B)/rung-vmm
# The vmm_kvm suite runs the real binary.
check-unit: $(B)/rung-vmm
