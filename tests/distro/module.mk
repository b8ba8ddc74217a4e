# tests/distro/module.mk: the distro stage. The process, container, cgroup and egress suites on
# Debian 12's own kernel (6.1 cloud) with a pure cgroup2 hierarchy and the stores on ext4, in an
# L1 under QEMU TCG (tests/distro/run.sh). Part of `make check`.
#   make check-distro   DISTRO_SUITES="..." narrows it; DISTRO_VERBOSE=1 prints every log
check-distro: $(B)/check_rung $(B)/rung $(B)/rung-dyn $(B)/rung-agent $(B)/rung-serve $(B)/rung-image $(B)/rfs-tool $(B)/rung-oci $(B)/rung-probe
	@RUNG_BUILD=$(CURDIR)/$(B) OUT=$(CURDIR)/$(B)/distro sh tests/distro/run.sh

CHECK_STAGES += check-distro
.PHONY: check-distro
