# rootfs/module.mk: the rfs-tool driver, the default images, the import benchmark.

RUNG_STATE_DIR ?= /var/lib/rung
# The Debian mirror configured on this machine (/etc/apt/sources.list.d/debian.sources).
DEBIAN_MIRROR ?= $(shell sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
DEBIAN_SECURITY ?= $(shell sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | sed -n 2p)
DEBIAN_MIRROR := $(or $(DEBIAN_MIRROR),http://deb.debian.org/debian)

$(B)/rfs-tool: $(B)/obj/rootfs/main-tool.o $(B)/librung.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

all: $(B)/rfs-tool

# rung/busybox:latest: busybox-static as one layer (tests build their own in a temp dir).
image-busybox: $(B)/rfs-tool
	@rm -rf $(B)/image-busybox && mkdir -p $(B)/image-busybox
	$(B)/rfs-tool busybox-tar $(B)/image-busybox/rootfs.tar
	$(B)/rfs-tool layout --out $(B)/image-busybox/oci --tar $(B)/image-busybox/rootfs.tar \
	  --tag rung/busybox:latest --compress gzip --env PATH=/bin --cmd /bin/sh --workdir /work
	$(B)/rfs-tool import --state $(RUNG_STATE_DIR) $(B)/image-busybox/oci rung/busybox:latest

# rung/python:3: Debian bookworm (apt variant) with python3 and pip, from the configured
# mirror, one gzip layer. No /dev entries (the runtime mounts its own /dev).
image-default: $(B)/rfs-tool
	@rm -rf $(B)/image-default && mkdir -p $(B)/image-default
	mmdebstrap --variant=apt --include=python3,python3-pip --skip=output/dev --format=tar \
	  bookworm $(B)/image-default/rootfs.tar \
	  "deb $(DEBIAN_MIRROR) bookworm main" "deb $(DEBIAN_MIRROR) bookworm-updates main" \
	  $(if $(DEBIAN_SECURITY),"deb $(DEBIAN_SECURITY) bookworm-security main")
	$(B)/rfs-tool layout --out $(B)/image-default/oci --tar $(B)/image-default/rootfs.tar \
	  --tag rung/python:3 --compress gzip \
	  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	  --env LANG=C.UTF-8 --env PYTHONUNBUFFERED=1 --cmd python3 --workdir /work
	$(B)/rfs-tool import --state $(RUNG_STATE_DIR) $(B)/image-default/oci rung/python:3

bench-image: $(B)/rfs-tool
	sh bench/image-import.sh

.PHONY: image-busybox image-default bench-image
