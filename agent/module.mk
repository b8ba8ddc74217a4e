# agent/module.mk: rung-agent, pid 1 and the request handlers of every sandbox (docs/
# architecture.md). Static: it runs in any sandbox whatever its image holds, and links nothing
# but libc. Linked against musl where musl-gcc is (scripts/setup-deps.sh installs musl-tools):
# its start maps 9 pages where static glibc's maps 31 (tunables, IRELATIVE resolvers, TLS
# set-up), and each page fault costs 20-40 us on a paravirtualised host; pid 1 execs it on
# every sandbox's start (bench/README.md, "Start-up page faults"). Its objects are compiled
# apart (build/aobj), against musl's headers and the kernel's uapi headers; without musl-gcc,
# static glibc as before, said once.
AGENT_OBJ_SRC := $(AGENT) agent/main.c $(filter $(COMMON_MIN),$(COMMON))
MUSL_GCC := $(shell command -v musl-gcc 2>/dev/null)
ifneq ($(MUSL_GCC),)
# The kernel's uapi headers (linux/, asm/, asm-generic/) and nothing else of /usr/include.
AGENT_KH := $(B)/agent-kh
AGENT_ASM := $(firstword $(wildcard /usr/include/$(shell $(CC) -print-multiarch)/asm \
	     /usr/include/asm))
$(AGENT_KH)/.made:
	@mkdir -p $(AGENT_KH)
	ln -sfn /usr/include/linux $(AGENT_KH)/linux
	ln -sfn /usr/include/asm-generic $(AGENT_KH)/asm-generic
	ln -sfn $(AGENT_ASM) $(AGENT_KH)/asm
	@touch $@
AGENT_CFLAGS := $(filter-out $(PKG_CFLAGS),$(CFLAGS)) -isystem $(AGENT_KH)
$(B)/aobj/%.o: %.c | $(AGENT_KH)/.made
	@mkdir -p $(dir $@)
	@echo "  CC  $< (musl)"; $(MUSL_GCC) $(AGENT_CFLAGS) -c -o $@ $<
$(B)/aobj/agent/callbacks.o: $(B)/gen/rung_host_py.h
$(B)/aobj/agent/callbacks.o: AGENT_CFLAGS += -I$(B)/gen
# musl's C memcpy and memmove, where scripts/musl-deps.sh built them (from musl's own source)
# into MUSL_PREFIX: its x86_64 assembly's `rep movsq` costs ~30 ns whatever the size on this
# project's hosts, the C ~3 ns for 8 bytes (bench/README.md, "Fewer store inodes, musl's C
# memcpy"). Linked whole, ahead of libc.a: they replace its copies for every caller, printf's
# and the libraries' too.
MUSL_PREFIX ?= /var/cache/rung/musl
MUSL_STRING := $(wildcard $(MUSL_PREFIX)/lib/libmuslstring.a)
comma := ,
MUSL_STRING_LINK := $(if $(MUSL_STRING),-Wl$(comma)--whole-archive $(MUSL_STRING) \
	-Wl$(comma)--no-whole-archive)
$(B)/rung-agent: $(patsubst %.c,$(B)/aobj/%.o,$(AGENT_OBJ_SRC)) $(MUSL_STRING)
	$(MUSL_GCC) -static $(LDFLAGS) -Wl,--gc-sections -o $@ $(filter %.o,$^) $(MUSL_STRING_LINK)
else
$(B)/rung-agent: $(call obj,$(AGENT_OBJ_SRC))
	@echo "*** rung-agent: no musl-gcc (scripts/setup-deps.sh installs musl-tools): static glibc, a slower start ***"
	$(CC) -static $(LDFLAGS) -Wl,--gc-sections -o $@ $^
endif
