# cli/module.mk: how build/rung is linked.
#
# build/rung starts once per CLI call (`rung exec` is a round trip of its own), and each
# shared library costs loader time at every start: hyperfine -N, 400 runs, an empty main()
# linked against one library: +0.65 ms libcrypto, +0.4 ms libnl-3/libnl-route-3, +0.3 ms
# libseccomp+libcap, +0.6 ms libnftables.
#
# build/rung is linked statically: against musl where it can (below), else (-static-pie: glibc's
# libc.a, and the archives of the libraries whose Debian -dev package ships one: only the objects
# it uses, e.g. the low-level SHA-256, SHA-1
# and base64 of libcrypto, no TLS): no loader, no libc.so.6 to map and relocate at each start
# (hyperfine -N, an empty main(): 2.0-2.1 ms dynamic, 1.4 ms static-pie; `rung --version`
# interleaved with runs 4.84 -> 3.43 ms; bench/README.md "spine"). No EVP digest in build/rung:
# one EVP_Digest links OpenSSL's provider machinery, 340 KiB of pointer tables and 16600 relative
# relocations at every start (bench/README.md "pool"). libnftables, libnftnl and libmnl (no static
# archives) and libcurl are loaded with dlopen by the first operation that needs them
# (common/dl.h): only egress allowlists, gc, the counters and the daemon client reach them. A
# static program's dlopen loads the installed libc.so.6 beside its own, sound only for the same
# glibc build: the link records which libc.so.6 it was built beside ($(B)/gen/libc-id.c), and a
# start that finds another one (an upgrade of libc6 since the build) runs $(B)/rung-dyn instead,
# the same program linked dynamically (cli/util.c, cli_dyn). The linker's warnings that dlopen,
# getpwuid and getaddrinfo "require at runtime the shared libraries from the glibc version used
# for linking" are that: the files and dns lookups are built into libc.a, the rest is guarded so.
# Without the archives, build/rung links as rung-dyn does.
CLI_STATIC_LIBS := seccomp cap nl-route-3 nl-3 crypto jansson
CLI_STATIC_OK := $(strip $(foreach l,$(CLI_STATIC_LIBS) c,\
	$(if $(filter /%,$(shell $(CC) -print-file-name=lib$(l).a)),,missing)))
LIBC_SO := $(realpath $(shell $(CC) -print-file-name=libc.so.6))
CLI_OBJ := $(call obj,$(CLI) cli/main.c)
CLI_GLIBC_STATIC := $(if $(CLI_STATIC_OK)$(if $(LIBC_SO),,missing),,yes)
CLI_X86_64 := $(if $(filter x86_64,$(shell $(CC) -dumpmachine | cut -d- -f1)),yes)
CLI_ENTRY := -Wl,-e,rung_entry

# build/rung against musl, where scripts/musl-deps.sh has built its libraries' archives
# (MUSL_PREFIX; scripts/setup-deps.sh runs it): glibc's start runs ~65 CPUID instructions (its
# cpu features and cache sizes), each one trapped by the hypervisor on a virtualised host (7.7 us
# each here: `rung --version` 0.820 ms against 0.164 ms with musl; bench/README.md, "build/rung
# on musl"). The whole CLI and librung are compiled apart (build/mobj) against musl's headers, the
# kernel's uapi headers, MUSL_PREFIX's and (declarations only) the glibc side's headers of the
# libraries it loads with dlopen; common/compat-musl.h adds what musl 1.2.3 lacks. musl cannot
# dlopen: a call that would (an egress allowlist, gc, a pool's keeper, the daemon's client, ...)
# runs rung-dyn from its start instead (cli/util.c, cli_dyn). Without the archives or musl-gcc,
# build/rung is glibc's static link below, said once. (MUSL_PREFIX, MUSL_GCC and MUSL_STRING:
# agent/module.mk, read first.)
CLI_MUSL_LIBS := seccomp cap nl-route-3 nl-3 crypto jansson
CLI_MUSL_OK := $(if $(MUSL_GCC),$(if $(strip $(foreach l,$(CLI_MUSL_LIBS),\
	$(if $(wildcard $(MUSL_PREFIX)/lib/lib$(l).a),,missing))),,yes))
# Which libc build/rung is linked against (its tests read it): a change relinks it.
CLI_LIBC := $(if $(filter yes,$(CLI_MUSL_OK)),musl $(MUSL_PREFIX),\
	$(if $(filter yes,$(CLI_GLIBC_STATIC)),glibc static,glibc dynamic))
$(B)/gen/cli-libc: FORCE
	@mkdir -p $(dir $@)
	@[ "$$(cat $@ 2>/dev/null)" = "$(CLI_LIBC)" ] || echo "$(CLI_LIBC)" > $@
$(B)/rung: $(B)/gen/cli-libc
FORCE:
.PHONY: FORCE
ifeq ($(CLI_MUSL_OK),yes)
MUSL_LIBDIR := $(patsubst %/musl-gcc.specs,%,$(shell sed -n 's/.*-specs "\([^"]*\)".*/\1/p' \
	$(MUSL_GCC)))
CLI_MUSL_XH := $(B)/musl-xh
CLI_MUSL_CFLAGS := $(filter-out $(PKG_CFLAGS) -D_FORTIFY_SOURCE=2,$(CFLAGS)) -fPIE \
	-DRUNG_LIBC_MUSL -include common/compat-musl.h -isystem $(AGENT_KH) \
	-isystem $(MUSL_PREFIX)/include -isystem $(MUSL_PREFIX)/include/libnl3 \
	-idirafter $(CLI_MUSL_XH)
# the headers of the libraries loaded with dlopen (their declarations), and libarchive's
$(CLI_MUSL_XH)/.made:
	@mkdir -p $(CLI_MUSL_XH)
	for h in nftables libnftnl libmnl curl archive.h archive_entry.h; do \
	  f=$$(ls -d /usr/include/$$h /usr/include/$(shell $(CC) -print-multiarch)/$$h 2>/dev/null \
	       | head -1); \
	  [ -n "$$f" ] || { echo "no /usr/include/$$h (sh scripts/setup-deps.sh build)"; exit 1; }; \
	  ln -sfn $$f $(CLI_MUSL_XH)/$$h; done
	@touch $@
$(B)/mobj/%.o: %.c | $(AGENT_KH)/.made $(CLI_MUSL_XH)/.made
	@mkdir -p $(dir $@)
	@echo "  CC  $< (musl)"; $(MUSL_GCC) $(CLI_MUSL_CFLAGS) -c -o $@ $<
$(B)/mobj/runtime/seccomp-bpf.o: $(B)/gen/seccomp_bpf.h
$(B)/mobj/runtime/seccomp-bpf.o: CLI_MUSL_CFLAGS += -I$(B)/gen
$(B)/mobj/librung.a: $(patsubst %.c,$(B)/mobj/%.o,$(LIB_SRC))
	@rm -f $@
	ar rcs $@ $^
# A static-pie link by hand: musl-gcc's specs know only -static (a fixed address).
CLI_MUSL_LINK := $(MUSL_LIBDIR)/rcrt1.o $(MUSL_LIBDIR)/crti.o \
	$(shell $(CC) -print-file-name=crtbeginS.o)
# (the archives too: rebuilt by musl-deps.sh after a -dev package's update, they relink it)
$(B)/rung: $(patsubst %.c,$(B)/mobj/%.o,$(CLI) cli/main.c) $(B)/mobj/librung.a \
	   $(if $(CLI_X86_64),$(B)/obj/cli/entry.o) \
	   $(patsubst %,$(MUSL_PREFIX)/lib/lib%.a,$(CLI_MUSL_LIBS)) $(MUSL_STRING)
	$(CC) -static-pie -nostdlib -nostartfiles $(LDFLAGS) -Wl,-z,relro,-z,now \
	  $(if $(CLI_X86_64),$(CLI_ENTRY)) -o $@ $(CLI_MUSL_LINK) $(filter $(B)/%.o $(B)/%.a,$^) \
	  -L$(MUSL_PREFIX)/lib $(addprefix -l,$(CLI_MUSL_LIBS)) $(MUSL_STRING_LINK) \
	  -L$(MUSL_LIBDIR) -lc \
	  $(shell $(CC) -print-libgcc-file-name) $(shell $(CC) -print-file-name=crtendS.o) \
	  $(MUSL_LIBDIR)/crtn.o
else
$(B)/rung: $(CLI_OBJ) $(B)/librung.a
	@echo "*** rung: linked against glibc: no musl archives in $(MUSL_PREFIX) \
(sh scripts/setup-deps.sh build) or no musl-gcc: a slower start ***"
	$(CC) $(LDFLAGS) -Wl,-z,relro,-z,now -Wl,--as-needed -o $@ $(filter %.o %.a,$^) $(LDLIBS)
ifeq ($(CLI_GLIBC_STATIC),yes)
$(B)/rung: $(B)/obj/gen/libc-id.o
$(B)/rung: LDFLAGS += -static-pie
$(B)/rung: LDLIBS := $(addprefix -l,$(CLI_STATIC_LIBS)) -ldl -lpthread
# x86-64: the entry point maps the program's pages at once, before libc's start (cli/entry.S)
ifeq ($(CLI_X86_64),yes)
# (LDLIBS, not LDFLAGS: a target's LDFLAGS reach the programs its prerequisites link too)
$(B)/rung: $(B)/obj/cli/entry.o
$(B)/rung: LDLIBS += -Wl,-e,rung_entry
endif
endif
endif
$(B)/obj/cli/entry.o: cli/entry.S
	@mkdir -p $(dir $@)
	$(CC) -c -o $@ $<
ifeq ($(CLI_GLIBC_STATIC),yes)
$(B)/rung-dyn: LDLIBS := -Wl,-Bstatic $(addprefix -l,$(CLI_STATIC_LIBS)) -Wl,-Bdynamic -ldl \
	-lpthread
endif
$(B)/rung-dyn: LDFLAGS += -Wl,-z,relro,-z,now

$(B)/rung-dyn: $(CLI_OBJ) $(B)/librung.a
	$(CC) $(LDFLAGS) -Wl,--as-needed -o $@ $^ $(LDLIBS)

# The libc.so.6 the static link is built beside, at the path the dynamic loader gives a program
# (which a root without /usr merged also has), and the loader by its name in that directory,
# where a static program's dlopen looks for it; libc's build id (gen/libc-so.h, also for the
# tests' fixtures), then its stat.
$(B)/gen/libc-so.h: $(LIBC_SO) cli/module.mk
	@mkdir -p $(dir $@)
	set -e; echo 'int main(void) { return 0; }' | $(CC) -x c -o $@.probe -; \
	so=$$(ldd $@.probe | sed -n 's/^[[:space:]]*libc\.so\.6 => \([^ ]*\) .*/\1/p'); \
	ld=$$(dirname "$$so")/$$(basename "$$(readelf -l $@.probe | \
	  sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')"); \
	rm -f $@.probe; test -f "$$so"; test -f "$$ld"; \
	id=$$(readelf -n "$$so" | sed -n 's/^ *Build ID: *//p'); test -n "$$id"; \
	printf '#define RUNG_LIBC_%s "%s"\n' SO "$$so" LD "$$ld" BUILD_ID "$$id" > $@.tmp; \
	mv $@.tmp $@
$(B)/gen/libc-id.c: $(B)/gen/libc-so.h
	set -e; so=$$(sed -n 's/^#define RUNG_LIBC_SO "\(.*\)"$$/\1/p' $<); \
	set -- $$(stat -L -c '%i %s %Y' "$$so"); \
	printf '%s\n' '/* generated by cli/module.mk */' '#include "common/dl.h"' \
	  '#include "gen/libc-so.h"' \
	  'const struct rung_libc_id rung_libc_id = {RUNG_LIBC_SO, RUNG_LIBC_LD, RUNG_LIBC_BUILD_ID,' \
	  "	$${1}ULL, $${2}ULL, $${3}LL};" > $@.tmp && mv $@.tmp $@
$(B)/obj/gen/libc-id.o: $(B)/gen/libc-id.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(B) -c -o $@ $<

# For tests/check_e2e_cli_static.c: the static rung as if its libc.so.6 had been upgraded.
ifeq ($(CLI_GLIBC_STATIC),yes)
CLI_FIXTURES := $(B)/tests/rung-libc-moved $(B)/tests/rung-ld-missing
$(B)/obj/tests/fixtures/libc-moved.o: CFLAGS += -I$(B)
$(B)/obj/tests/fixtures/libc-moved.o: $(B)/gen/libc-so.h
$(B)/obj/tests/fixtures/ld-missing.o: tests/fixtures/libc-moved.c $(B)/gen/libc-so.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(B) -DRUNG_FIXTURE_LD_MISSING -c -o $@ $<
$(CLI_FIXTURES): $(B)/tests/rung-%: $(CLI_OBJ) $(B)/librung.a $(B)/obj/tests/fixtures/%.o
	@mkdir -p $(dir $@)
	$(CC) -static-pie -Wl,-z,relro,-z,now -Wl,--as-needed -o $@ $^ \
	  $(addprefix -l,$(CLI_STATIC_LIBS)) -ldl -lpthread
$(B)/check_rung: | $(CLI_FIXTURES)
check-distro: $(CLI_FIXTURES)
endif
