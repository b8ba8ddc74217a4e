# runtime/module.mk: the seccomp filter, built once at build time (runtime/main-seccomp.c) and
# embedded by runtime/seccomp-bpf.c; rebuilt whenever seccomp.c or libseccomp changes.
$(B)/gen-seccomp: $(call obj,runtime/main-seccomp.c runtime/seccomp.c common/err.c common/util.c)
	$(CC) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs libseccomp 2>/dev/null)

$(B)/gen/seccomp_bpf.h: $(B)/gen-seccomp
	@mkdir -p $(dir $@)
	$(B)/gen-seccomp > $@.tmp && mv $@.tmp $@

$(B)/obj/runtime/seccomp-bpf.o $(B)/fobj/runtime/seccomp-bpf.o: $(B)/gen/seccomp_bpf.h
$(B)/obj/runtime/seccomp-bpf.o: CFLAGS += -I$(B)/gen
$(B)/fobj/runtime/seccomp-bpf.o: FUZZ_CFLAGS += -I$(B)/gen
