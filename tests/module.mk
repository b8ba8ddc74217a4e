# tests/module.mk: `make check-san` (a stage of `make check`), the unit suites once more, in a
# check_rung built with AddressSanitizer and UndefinedBehaviorSanitizer: a memory error or
# undefined behaviour in the code they drive in-process (parsers, the store, policies, the
# daemon's and the agent's pieces) fails the stage. The e2e suites drive the programs, which
# are built without sanitizers: not run again. Nor are three unit suites whose checks the
# sanitizers' own runtime trips: vmm_devices and vmm_snapshot (the VMM's per-thread seccomp
# filters kill the runtime's system calls) and server_boundary (32 MiB of output through the
# test's own parser outlasts its timeout). handle_segv=0: runtime_seccomp's i386 case expects
# its child to die of the SIGSEGV a kernel without i386 emulation gives, not of a report.
# -Wno-format-truncation: at -O1 GCC's range analysis flags snprintf sizes that -O2's proves.
SAN_CFLAGS := -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer $(filter-out -O2,$(CFLAGS)) -Wno-format-truncation
san_obj = $(patsubst %.c,$(B)/sobj/%.o,$(1))

$(B)/sobj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC  $< (sanitizers)"; $(CC) $(SAN_CFLAGS) -c -o $@ $<
$(B)/sobj/tests/lib/main.o: $(B)/suites.h
$(B)/sobj/tests/lib/main.o: SAN_CFLAGS += -I$(B)
$(B)/sobj/agent/callbacks.o: $(B)/gen/rung_host_py.h
$(B)/sobj/agent/callbacks.o: SAN_CFLAGS += -I$(B)/gen
$(B)/sobj/runtime/seccomp-bpf.o: $(B)/gen/seccomp_bpf.h
$(B)/sobj/runtime/seccomp-bpf.o: SAN_CFLAGS += -I$(B)/gen

$(B)/check_rung_san: $(call san_obj,$(TEST_SRC) $(TEST_HELPER_SRC) $(TEST_LIB_SRC))
	$(CC) -fsanitize=address,undefined -o $@ $^ $(LDLIBS) $(shell pkg-config --libs check)

SAN_SUITES := $(filter-out e2e_% vmm_devices vmm_snapshot server_boundary,\
	$(patsubst tests/check_%.c,%,$(TEST_SRC)))
check-san: $(B)/check_rung_san $(B)/rung $(B)/rung-agent $(B)/rung-serve
	@echo "check-san: $(words $(SAN_SUITES)) unit suites under ASan and UBSan"
	RUNG_BUILD_DIR=$(CURDIR)/$(B) ASAN_OPTIONS=detect_leaks=0:handle_segv=0 \
	  UBSAN_OPTIONS=print_stacktrace=1 CK_DEFAULT_TIMEOUT=120 \
	  $(B)/check_rung_san $(SAN_SUITES)
CHECK_STAGES += check-san
.PHONY: check-san
