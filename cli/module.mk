# cli/module.mk: how build/rung is linked.
#
# build/rung starts once per CLI call (`rung exec` is a round trip of its own), and each
# shared library costs loader time at every start: hyperfine -N, 400 runs, an empty main()
# linked against one library: +0.65 ms libcrypto, +0.4 ms libnl-3/libnl-route-3, +0.3 ms
# libseccomp+libcap, +0.6 ms libnftables. The libraries whose Debian -dev package ships a
# static archive are linked into build/rung statically (only the objects it uses: the low-level
# SHA-256 and SHA-1 and base64 of libcrypto, no TLS), and so are jansson and libnftnl. No EVP
# digest in build/rung: one EVP_Digest links OpenSSL's provider machinery statically, 340 KiB
# of pointer tables and 16600 relative relocations at every start (bench/README.md "pool"). libnftables has no static archive: it is
# not linked at all but loaded with dlopen by the first nftables operation (netpolicy/nft.c),
# which only sandboxes with an egress allowlist, gc and the counters reach; its chain (libnftnl,
# libxtables, libgmp, jansson) comes with it then. That leaves libmnl (no static archive) and libc
# at every start. Without the archives, build/rung links as the other programs do.
CLI_STATIC_LIBS := seccomp cap nl-route-3 nl-3 crypto nftnl jansson
CLI_STATIC_OK := $(strip $(foreach l,$(CLI_STATIC_LIBS),\
	$(if $(filter /%,$(shell $(CC) -print-file-name=lib$(l).a)),,missing)))
ifeq ($(CLI_STATIC_OK),)
$(B)/rung: LDLIBS := -Wl,-Bstatic $(addprefix -l,$(CLI_STATIC_LIBS)) -Wl,-Bdynamic \
	$(shell pkg-config --libs libmnl 2>/dev/null) -ldl -lpthread
endif
$(B)/rung: LDFLAGS += -Wl,-z,relro,-z,now
