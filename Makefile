# rung: one Makefile. `make` builds, `make check` runs every test (as root in CI).
# Modules add their own targets in <module>/module.mk (included below).

CC      ?= gcc
B       := build
PKGS    := libseccomp libcap libnl-3.0 libnl-route-3.0 libnftables jansson libmicrohttpd \
           libarchive libcurl libcrypto
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
WARN    := -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wformat=2 -Wvla
CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 $(WARN) -D_GNU_SOURCE -D_FORTIFY_SOURCE=2 -fstack-protector-strong \
           -MMD -MP -Iinclude -I. $(PKG_CFLAGS)
LDLIBS  := $(PKG_LIBS) -lpthread

# Sources by module. Files named main*.c hold a program's main() and stay out of libraries.
src_of   = $(filter-out $(1)/main%.c,$(wildcard $(1)/*.c))
COMMON   := $(call src_of,common)
ROOTFS   := $(call src_of,rootfs)
NETPOL   := $(call src_of,netpolicy)
CGROUP   := $(call src_of,cgroup)
VMM      := $(call src_of,vmm)
RUNTIME  := $(call src_of,runtime)
SERVER   := $(call src_of,server)
AGENT    := $(call src_of,agent)
CLI      := $(call src_of,cli)
obj      = $(patsubst %.c,$(B)/obj/%.o,$(1))

LIB_SRC  := $(COMMON) $(ROOTFS) $(NETPOL) $(CGROUP) $(RUNTIME)
# What the static programs (agent, vmm) may link from common: no libcrypto.
COMMON_MIN := common/err.c common/log.c common/util.c common/proto.c common/proto-proc.c \
	common/root.c common/pid1.c \
	common/relay.c common/proto-fs.c common/proto-tree.c common/proto-restore.c

all: $(B)/rung $(B)/rung-dyn $(B)/rung-agent $(B)/rung-serve $(B)/rung-image $(B)/librung.a

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC  $<"; $(CC) $(CFLAGS) -c -o $@ $<

$(B)/librung.a: $(call obj,$(LIB_SRC))
	@rm -f $@
	ar rcs $@ $^

$(B)/rung-image: $(call obj,$(CLI) cli/main-image.c cli/main-image-cp.c) $(B)/librung.a
	$(CC) $(LDFLAGS) -Wl,--as-needed -o $@ $^ $(LDLIBS)

# The sandbox-side Python module rung_host, embedded in rung-agent (agent/callbacks.c).
$(B)/gen/rung_host_py.h: agent/py/rung_host.py
	@mkdir -p $(dir $@)
	{ echo 'static const char agent_rung_host_py[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; \
	  echo ';'; } > $@.tmp && mv $@.tmp $@
$(B)/obj/agent/callbacks.o $(B)/fobj/agent/callbacks.o: $(B)/gen/rung_host_py.h
$(B)/obj/agent/callbacks.o: CFLAGS += -I$(B)/gen
$(B)/fobj/agent/callbacks.o: FUZZ_CFLAGS += -I$(B)/gen

# --- tests (Check) -------------------------------------------------------------------------
# tests/check_<suite>.c: one suite each; tests/lib/: the runner (main.c), helpers, fixtures.
TEST_SRC := $(wildcard tests/check_*.c)
TEST_HELPER_SRC := $(wildcard tests/lib/*.c)
TEST_LIB_SRC := $(LIB_SRC) $(VMM) $(SERVER) $(AGENT) $(CLI) $(call src_of,oci)

$(B)/suites.h: $(TEST_SRC) tests/gen-suites.sh
	@mkdir -p $(B)
	sh tests/gen-suites.sh $(TEST_SRC) > $@.tmp && mv $@.tmp $@

$(B)/obj/tests/lib/main.o: $(B)/suites.h
$(B)/obj/tests/lib/main.o: CFLAGS += -I$(B)

$(B)/check_rung: $(call obj,$(TEST_SRC) $(TEST_HELPER_SRC) $(TEST_LIB_SRC))
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(shell pkg-config --libs check)

# `make check`: every suite, every tag (root, net, kvm). Python client tests, fuzz smoke
# runs and the nested-KVM stage are added by their modules as check-* prerequisites.
CHECK_STAGES := check-unit
check:
	@sh scripts/setup-deps.sh test
	@$(MAKE) --no-print-directory all $(B)/check_rung
	@$(MAKE) --no-print-directory $(CHECK_STAGES)
	@echo "make check: all stages passed ($(CHECK_STAGES))"

# The main job on the embedded default: a real sandboxed run on the process rung.
demo:
	@sh scripts/setup-deps.sh build
	@$(MAKE) --no-print-directory all
	@sh scripts/demo.sh

# The python image the pip-persistence test runs in: built once per machine into a cache store
# (mmdebstrap from the Debian mirror, about a minute and a half). Without it that test skips,
# loudly.
TEST_PY_STATE ?= /var/cache/rung/test-python-store
test-python-image: $(B)/rung $(B)/rung-image $(B)/rfs-tool
	@mkdir -p $(dir $(TEST_PY_STATE)) && chmod 0755 $(dir $(TEST_PY_STATE))
	@$(B)/rung --state-dir $(TEST_PY_STATE) image inspect rung/python:3 >/dev/null 2>&1 || \
	  $(MAKE) --no-print-directory image-default RUNG_STATE_DIR=$(TEST_PY_STATE) || \
	  echo "*** WARNING: could not build rung/python:3; the pip test will skip ***"

# `make check-unit SUITE="runtime_store e2e_egress"`: only the suites named (names or prefixes:
# SUITE=runtime is the runtime module's suites); names in tests/README.md.
# The python image is made only when the suites run include e2e_container_pip.
SUITE ?=
CHECK_UNIT_PY := $(if $(SUITE),$(strip $(foreach w,$(SUITE),$(filter $(w)%,e2e_container_pip))),all)
check-unit: $(B)/check_rung $(B)/rung $(B)/rung-agent $(if $(CHECK_UNIT_PY),test-python-image)
	@$(if $(SUITE),echo "check-unit: suites $(SUITE)",echo "check-unit: every suite; one suite or module: make check-unit SUITE=runtime_store (or SUITE=runtime, SUITE=e2e_egress; tests/README.md)")
	RUNG_BUILD_DIR=$(CURDIR)/$(B) RUNG_TEST_PYTHON_STATE=$(TEST_PY_STATE) \
	  CK_DEFAULT_TIMEOUT=60 $(B)/check_rung $(SUITE)
	@$(if $(SUITE),,echo "check-unit: to run one suite or one module's suites: make check-unit SUITE=NAME (tests/README.md)")

# --- fuzzing (libFuzzer) --------------------------------------------------------------------
FUZZ_SRC := $(wildcard fuzz/fuzz_*.c)
FUZZ_LIB := $(COMMON) $(ROOTFS) $(NETPOL) $(CGROUP) $(VMM) $(RUNTIME) $(SERVER) $(filter-out agent/main%.c,$(AGENT))
FUZZ_CFLAGS := -std=gnu11 -g -O1 -fsanitize=fuzzer-no-link,address,undefined \
               -fno-sanitize-recover=undefined -D_GNU_SOURCE \
               -DRUNG_FUZZING -Iinclude -I. $(PKG_CFLAGS) -MMD -MP
$(B)/fobj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -c -o $@ $<
$(B)/fuzz/%: $(B)/fobj/fuzz/%.o $(patsubst %.c,$(B)/fobj/%.o,$(FUZZ_LIB))
	@mkdir -p $(dir $@)
	clang -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS)
FUZZERS := $(patsubst fuzz/%.c,$(B)/fuzz/%,$(FUZZ_SRC))
fuzz: $(FUZZERS)
# A bounded smoke run of every fuzzer (part of make check).
check-fuzz: $(FUZZERS)
	@for f in $(FUZZERS); do n=$$(basename $$f); mkdir -p $(B)/corpus/$$n; \
	  echo "fuzz: $$n (60000 runs)"; \
	  $$f -runs=60000 -max_len=65536 -timeout=10 $$([ -f fuzz/$$n.dict ] && echo -dict=fuzz/$$n.dict) $(B)/corpus/$$n fuzz/corpus/$$n 2>$(B)/fuzz-$$n.log \
	  || { tail -40 $(B)/fuzz-$$n.log; exit 1; }; done
CHECK_STAGES += check-fuzz

# --- layering rule: includes point down only (docs/style.md) -------------------------------
check-layers:
	@sh scripts/check-layers.sh
CHECK_STAGES += check-layers

# --- docs: relative links resolve, nothing refers to notes outside the repository ----------
check-docs:
	@sh scripts/check-docs.sh
CHECK_STAGES += check-docs

setup:
	sh scripts/setup-deps.sh test

clean:
	rm -rf $(B)

-include $(wildcard */module.mk */*/module.mk)
-include $(shell find $(B) -name '*.d' 2>/dev/null)

.SECONDARY:
.PHONY: all demo check check-unit test-python-image check-fuzz check-layers check-docs fuzz setup clean

# --- benchmarks (bench/README.md) ------------------------------------------------------------
$(B)/bench/%: bench/%.c $(B)/librung.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(B)/librung.a $(LDLIBS)
bench: all $(B)/bench/exec-rate $(B)/bench/procs
	sh bench/spine.sh
.PHONY: bench

# --- install (PREFIX, DESTDIR) ----------------------------------------------------------------
# Programs in $(PREFIX)/bin; helpers where the FHS puts them, $(PREFIX)/libexec/rung (rung
# finds them from its own path: $(PREFIX)/bin/rung -> $(PREFIX)/libexec/rung, so only PREFIX
# moves them); the guest kernel and initramfs, when built, in its vm/ (beside rung-vmm, where
# the vm rung looks); and a link to rung, so that helperdir (rung.pc) names all three for
# programs linking librung. The header, librung.a and rung.pc; the systemd unit with its paths
# substituted; man pages generated from each program's --help (help2man). Tested by
# `make check-install` (tests/install.sh).
PREFIX     ?= /usr/local
BINDIR     := $(PREFIX)/bin
LIBEXECDIR := $(PREFIX)/libexec/rung
LIBDIR     := $(PREFIX)/lib
INCLUDEDIR := $(PREFIX)/include
MANDIR     := $(PREFIX)/share/man
DOCDIR     := $(PREFIX)/share/doc/rung
UNITDIR    := $(PREFIX)/lib/systemd/system
VERSION    := $(shell sed -n 's/^\#define RUNG_VERSION "\(.*\)"/\1/p' include/rung/rung.h)
INSTALL_PROGS   := rung rung-serve rung-image
INSTALL_HELPERS := rung-agent rung-vmm rung-dyn
# The static library's dependencies, for `pkg-config --static` (LDLIBS above, as packages).
# libarchive and libcurl are plain -l flags: their .pc files' own static closure (acl, zstd,
# nghttp2, ldap, ...) needs -dev packages Debian's libarchive-dev/libcurl4-openssl-dev do not
# pull in, and the shared libraries bring their dependencies themselves.
# helperdir: where a program linking librung finds rung-agent and rung-vmm (rung_router_opts).
PC_REQUIRES := libseccomp libcap libnl-3.0 libnl-route-3.0 libnftables jansson libcrypto
PC_LIBS_PRIVATE := -larchive -lcurl -lpthread

$(B)/rung.pc: include/rung/rung.h Makefile
	@mkdir -p $(B)
	printf '%s\n' 'prefix=$(PREFIX)' 'exec_prefix=$${prefix}' 'libdir=$${exec_prefix}/lib' \
	  'includedir=$${prefix}/include' 'helperdir=$${exec_prefix}/libexec/rung' '' \
	  'Name: rung' 'Description: rung local sandbox runtime: the public C API (static library)' \
	  'Version: $(VERSION)' 'Requires.private: $(PC_REQUIRES)' \
	  'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lrung' 'Libs.private: $(PC_LIBS_PRIVATE)' > $@.tmp
	mv $@.tmp $@
.PHONY: $(B)/rung.pc

MAN_NAME_rung       := run agent-written code in local sandboxes (process, container, vm)
MAN_NAME_rung-serve := the rung sandbox API daemon (HTTP/JSON on a Unix socket)
MAN_NAME_rung-image := import, pull and manage OCI images in the rung store
# and one page per CLI command (rung-run(1), ...), from `rung CMD --help`
RUNG_CMDS := run acquire exec write read run-code ls inspect suspend resume dispose \
             dispose-scope gc ladder
MAN_PAGES := $(patsubst %,$(B)/man/%.1,$(INSTALL_PROGS) $(addprefix rung-,$(RUNG_CMDS)))
HELP2MAN = @command -v help2man >/dev/null || \
	{ echo "make install: help2man missing (sh scripts/setup-deps.sh build)" >&2; exit 1; }; \
	mkdir -p $(B)/man; help2man --no-info --no-discard-stderr --version-string=$(VERSION)

$(patsubst %,$(B)/man/%.1,$(INSTALL_PROGS)): $(B)/man/%.1: $(B)/%
	$(HELP2MAN) --name="$(MAN_NAME_$*)" -o $@ $<

$(patsubst %,$(B)/man/rung-%.1,$(RUNG_CMDS)): $(B)/man/rung-%.1: $(B)/rung
	$(HELP2MAN) --name="$$($< $* --help 2>&1 | sed -n '3{s/\..*//;p;}')" -o $@ \
	  "$$(mkdir -p $(B)/man/bin && f=$(CURDIR)/$(B)/man/bin/rung-$* && \
	      printf '#!/bin/sh\nexec %s %s "$$@"\n' $(CURDIR)/$< $* > $$f && chmod +x $$f && echo $$f)"

install: all $(B)/rung.pc $(MAN_PAGES)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
	  $(DESTDIR)$(INCLUDEDIR)/rung $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(UNITDIR) \
	  $(DESTDIR)$(DOCDIR)/server $(DESTDIR)$(DOCDIR)/clients/python
	install -m 0755 $(addprefix $(B)/,$(INSTALL_PROGS)) $(DESTDIR)$(BINDIR)/
	install -m 0755 $(addprefix $(B)/,$(INSTALL_HELPERS)) $(DESTDIR)$(LIBEXECDIR)/
	ln -sf ../../bin/rung $(DESTDIR)$(LIBEXECDIR)/rung
	@k=$$(sh vmm/guest/build-kernel.sh --path 2>/dev/null || true); \
	if [ -n "$$k" ] && [ -f "$$k" ]; then \
	  echo "install -D -m 0644 $$k $(DESTDIR)$(LIBEXECDIR)/vm/bzImage"; \
	  install -D -m 0644 "$$k" $(DESTDIR)$(LIBEXECDIR)/vm/bzImage; \
	else echo "make install: no guest kernel built (make guest-kernel): the vm rung is not installed"; fi
	@if [ -f $(VM_OUT)/initramfs.cpio.gz ]; then \
	  echo "install -D -m 0644 $(VM_OUT)/initramfs.cpio.gz $(DESTDIR)$(LIBEXECDIR)/vm/"; \
	  install -D -m 0644 $(VM_OUT)/initramfs.cpio.gz $(DESTDIR)$(LIBEXECDIR)/vm/initramfs.cpio.gz; \
	else echo "make install: no initramfs built (make vm-initramfs): the vm rung is not installed"; fi
	install -m 0644 include/rung/rung.h include/rung/err.h $(DESTDIR)$(INCLUDEDIR)/rung/
	install -m 0644 $(B)/librung.a $(DESTDIR)$(LIBDIR)/
	install -m 0644 $(B)/rung.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -m 0644 $(MAN_PAGES) $(DESTDIR)$(MANDIR)/man1/
	sed -e 's|/usr/local/bin/|$(BINDIR)/|g' -e 's|/usr/share/doc/rung/|$(DOCDIR)/|g' \
	  contrib/rung.service > $(DESTDIR)$(UNITDIR)/rung.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/rung.service
	install -m 0644 README.md $(DESTDIR)$(DOCDIR)/
	install -m 0644 server/README.md $(DESTDIR)$(DOCDIR)/server/
	install -m 0644 clients/python/README.md $(DESTDIR)$(DOCDIR)/clients/python/

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(INSTALL_PROGS)) \
	  $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN_PAGES))) \
	  $(DESTDIR)$(INCLUDEDIR)/rung/rung.h $(DESTDIR)$(INCLUDEDIR)/rung/err.h \
	  $(DESTDIR)$(LIBDIR)/librung.a $(DESTDIR)$(LIBDIR)/pkgconfig/rung.pc \
	  $(DESTDIR)$(UNITDIR)/rung.service
	rm -rf $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(DOCDIR)
	-rmdir $(DESTDIR)$(INCLUDEDIR)/rung

# A DESTDIR install, run from there with the build tree out of reach: a process sandbox, a C
# program built with pkg-config against the installed header, the Python client pip-installed
# offline.
check-install: all
	@sh scripts/setup-deps.sh test
	sh tests/install.sh
CHECK_STAGES += check-install

.PHONY: install uninstall check-install
