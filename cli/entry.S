/*
 * cli/entry.S: build/rung's entry point (x86-64, the static link only; cli/module.mk), run
 * before glibc's _start. It maps at once what the start would fault in one page at a time:
 * everything from the ELF header to the writable segment (headers, relocations, text, read-only
 * data) read, and the writable segment (RELRO data, .got, .data, .bss) written. glibc's static
 * start alone faulted ~35 times (its tunables, the IRELATIVE resolvers spread over the text, the
 * static-pie relocations copying each page of .data.rel.ro on write), 20-40 us each on a
 * paravirtualised host: `rung --version` 47 -> 8 page faults (bench/README.md, "spine"). Two
 * madvise calls with no libc (nothing is relocated yet: every address is %rip-relative); their
 * result is ignored (a kernel before 5.14 has no MADV_POPULATE_*, a hole stops one early:
 * best effort), and the kernel's %rdx (the exit handler to register, 0 for a static program)
 * and %rsp reach _start untouched.
 */
	.text
	.globl rung_entry
	.type rung_entry, @function
rung_entry:
	mov	%rdx, %r12			/* the syscalls clobber %rdx (their 3rd argument) */
	lea	__executable_start(%rip), %rdi
	and	$-4096, %rdi
	lea	__init_array_start(%rip), %rsi	/* the writable segment, after .tdata */
	and	$-4096, %rsi
	sub	%rdi, %rsi
	mov	$22, %edx			/* MADV_POPULATE_READ */
	mov	$28, %eax			/* SYS_madvise */
	syscall
	lea	__init_array_start(%rip), %rdi
	and	$-4096, %rdi
	lea	_end(%rip), %rsi
	sub	%rdi, %rsi
	mov	$23, %edx			/* MADV_POPULATE_WRITE */
	mov	$28, %eax
	syscall
	mov	%r12, %rdx
	jmp	_start
	.size	rung_entry, .-rung_entry

	/* common/util.c's rung_prefault: the code is mapped already */
	.section .rodata
	.globl	rung_code_mapped
	.type	rung_code_mapped, @object
rung_code_mapped:
	.byte	1
	.size	rung_code_mapped, 1
	.section .note.GNU-stack,"",@progbits
