# vmm/guest/module.mk: the vm rung's guest side and its nested-KVM test stage.
#   make guest-kernel   build (or reuse) the guest bzImage, cached under $(RUNG_CACHE_DIR)
#   make vm-initramfs   build/vm/initramfs.cpio.gz with rung-agent as /init
#   make check-vm       the vm-rung tests under nested KVM (QEMU TCG L1, or /dev/kvm here)
#   make bench-vm       bench/vm-boot.sh (rung-vmm vs QEMU microvm boot to agent-ready)
#   make bench-vm-snapshot  bench/vm-snapshot.sh (restore vs cold boot, 10 clones' memory)
#   make bench-vm-exec  bench/vm-exec.sh (an exec after a pause vs back to back, 2 vCPUs)
# RUNG_VM_AGENT overrides the agent put in the initramfs (default: build/rung-agent).

VM_OUT        := $(B)/vm
RUNG_VM_AGENT ?= $(B)/rung-agent
VM_VMM        := $(if $(wildcard vmm/main*.c),$(B)/rung-vmm)
VM_AGENT_DEP  := $(if $(filter $(B)/rung-agent,$(RUNG_VM_AGENT)),$(B)/rung-agent)

guest-kernel:
	@sh scripts/setup-deps.sh vm
	sh vmm/guest/build-kernel.sh

$(VM_OUT)/rung-vmtest: $(call obj,vmm/guest/vmtest.c $(filter $(COMMON_MIN),$(COMMON)))
	@mkdir -p $(dir $@)
	$(CC) -static $(LDFLAGS) -Wl,--gc-sections -o $@ $^

$(VM_OUT)/initramfs.cpio.gz: $(VM_AGENT_DEP) vmm/guest/mkinitramfs.sh
	sh vmm/guest/mkinitramfs.sh $(RUNG_VM_AGENT) $@

vm-initramfs: $(VM_OUT)/initramfs.cpio.gz

# Rebuilt every time (the agent may be an override); cheap.
.PHONY: $(VM_OUT)/initramfs.cpio.gz

VM_STAGE_ENV = RUNG_BUILD=$(CURDIR)/$(B) KERNEL="$$(sh vmm/guest/build-kernel.sh)" INITRAMFS=$(VM_OUT)/initramfs.cpio.gz \
	VMTEST=$(VM_OUT)/rung-vmtest VMM=$(VM_VMM) OUT=$(VM_OUT)

check-vm: $(VM_OUT)/initramfs.cpio.gz $(VM_OUT)/rung-vmtest $(VM_VMM) $(B)/rung $(B)/rung-dyn \
	  $(B)/rfs-tool $(B)/check_rung $(B)/rung-oci
	@sh scripts/setup-deps.sh vm
	@sh vmm/guest/build-kernel.sh >/dev/null
	@$(VM_STAGE_ENV) sh vmm/guest/run-l1.sh

bench-vm: $(VM_OUT)/initramfs.cpio.gz $(VM_OUT)/rung-vmtest $(VM_VMM)
	@sh vmm/guest/build-kernel.sh >/dev/null
	@$(VM_STAGE_ENV) sh bench/vm-boot.sh

bench-vm-snapshot: $(VM_OUT)/initramfs.cpio.gz $(VM_OUT)/rung-vmtest $(VM_VMM)
	@sh vmm/guest/build-kernel.sh >/dev/null
	@$(VM_STAGE_ENV) sh bench/vm-snapshot.sh

bench-vm-exec: $(VM_OUT)/initramfs.cpio.gz $(VM_OUT)/rung-vmtest $(VM_VMM)
	@sh vmm/guest/build-kernel.sh >/dev/null
	@$(VM_STAGE_ENV) sh bench/vm-exec.sh

CHECK_STAGES += check-vm
.PHONY: guest-kernel vm-initramfs check-vm bench-vm bench-vm-snapshot bench-vm-exec
