/*
 * tests/check_vmm_kvm.c: build/rung-vmm end to end on real KVM (tag "kvm"): a hand-made
 * bzImage whose 64-bit entry writes "OK" to the UART and resets through the i8042, and one
 * that triple-faults. Exercises /dev/kvm, guest memory, the irqchip, long-mode vCPU setup,
 * port I/O exits, seccomp on every thread, exit reasons and statuses. Skips loudly where
 * /dev/kvm is absent (this project's build machines: `make check-vm` runs it nested, see
 * vmm/guest/README.md).
 */
#include <asm/bootparam.h>
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/lib/testutil.h"

static const uint8_t code_ok[] = {
	0x66, 0xba, 0xf8, 0x03, /* mov dx, 0x3f8 */
	0xb0, 'O',  0xee,       /* mov al, 'O'; out dx, al */
	0xb0, 'K',  0xee,       /* mov al, 'K'; out dx, al */
	0xb0, '\n', 0xee,       /* newline */
	0xb0, 0xfe, 0xe6, 0x64, /* mov al, 0xfe; out 0x64, al: i8042 reset */
	0xf4, 0xeb, 0xfd,       /* hlt; jmp hlt */
};
static const uint8_t code_triple[] = {0x0f, 0x0b}; /* ud2 with an empty IDT: triple fault */
static const uint8_t code_halt[] = {0xfa, 0xf4, 0xeb, 0xfd}; /* cli; hlt: Linux's poweroff sans ACPI */

static void write_kernel(const char *path, const uint8_t *code, size_t len)
{
	uint8_t img[5 * 512 + 4096] = {0};
	struct setup_header *h = (void *)(img + 0x1f1);
	h->setup_sects = 4;
	h->boot_flag = 0xAA55;
	h->header = 0x53726448;
	h->version = 0x020f;
	h->loadflags = LOADED_HIGH;
	h->xloadflags = XLF_KERNEL_64;
	h->init_size = 0x10000;
	h->cmdline_size = 2047;
	img[0x201] = 0x6a;
	memcpy(img + 5 * 512 + 0x200, code, len); /* the 64-bit entry is load address + 0x200 */
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(rung_write_all(fd, img, sizeof(img)), 0);
	close(fd);
}

/* Runs rung-vmm on code; returns its exit status, fills its stderr and serial output. */
static int run_vmm(const uint8_t *code, size_t len, const char *cpus, char *errbuf, char *serial,
		   size_t cap)
{
	char *dir = rung_test_tmpdir("vmm-kvm");
	char kernel[512], slog[512], vsock[512], ctl[512], elog[512], vmm[512];
	snprintf(kernel, sizeof(kernel), "%s/bzImage", dir);
	snprintf(slog, sizeof(slog), "%s/serial.log", dir);
	snprintf(vsock, sizeof(vsock), "%s/v.sock", dir);
	snprintf(ctl, sizeof(ctl), "%s/c.sock", dir);
	snprintf(elog, sizeof(elog), "%s/stderr", dir);
	snprintf(vmm, sizeof(vmm), "%s/rung-vmm", rung_test_build_dir());
	write_kernel(kernel, code, len);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(elog, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 2);
		char *argv[] = {vmm, "--kernel", kernel, "--mem", "64", "--cpus", (char *)cpus,
				"--serial-log", slog, "--vsock-uds", vsock, "--control", ctl, NULL};
		char *envp[] = {NULL};
		execve(vmm, argv, envp);
		_exit(127);
	}
	int status = 0;
	for (int i = 0; i < 200; i++) { /* 20 s, then kill: never hang the suite */
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		if (i == 199) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
		}
		usleep(100 * 1000);
	}
	char *s = NULL;
	size_t n = 0;
	int fd = open(elog, O_RDONLY);
	errbuf[0] = serial[0] = '\0';
	if (fd >= 0 && rung_read_fd_all(fd, cap - 1, &s, &n, NULL) == 0) {
		snprintf(errbuf, cap, "%s", s);
		free(s);
	}
	if (fd >= 0)
		close(fd);
	fd = open(slog, O_RDONLY);
	if (fd >= 0 && rung_read_fd_all(fd, cap - 1, &s, &n, NULL) == 0) {
		snprintf(serial, cap, "%s", s);
		free(s);
	}
	if (fd >= 0)
		close(fd);
	rung_rm_rf(dir, NULL);
	free(dir);
	return status;
}

START_TEST(kvm_boot_reset_and_triple_fault)
{
	if (access("/dev/kvm", R_OK | W_OK) != 0)
		RUNG_SKIP("no /dev/kvm (run under nested KVM: make check-vm, vmm/guest/README.md)");
	char vmm[512];
	snprintf(vmm, sizeof(vmm), "%s/rung-vmm", rung_test_build_dir());
	if (access(vmm, X_OK) != 0)
		ck_abort_msg("build/rung-vmm missing: make build/rung-vmm");
	char err[2048], serial[2048];
	int st = run_vmm(code_ok, sizeof(code_ok), "2", err, serial, sizeof(err));
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d stderr %s", st, err);
	ck_assert_ptr_nonnull(strstr(err, "guest reboot"));
	ck_assert_str_eq(serial, "OK\n");
	st = run_vmm(code_triple, sizeof(code_triple), "1", err, serial, sizeof(err));
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %d stderr %s", st, err);
	ck_assert_ptr_nonnull(strstr(err, "triple fault"));
	st = run_vmm(code_halt, sizeof(code_halt), "2", err, serial, sizeof(err));
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d stderr %s", st, err);
	ck_assert_ptr_nonnull(strstr(err, "guest halted"));
}
END_TEST

START_TEST(vmm_bad_kernel_exit_status)
{
	/* Needs no KVM when /dev/kvm is absent: then the error names /dev/kvm. */
	char err[2048], serial[2048];
	char vmm[512];
	snprintf(vmm, sizeof(vmm), "%s/rung-vmm", rung_test_build_dir());
	if (access(vmm, X_OK) != 0)
		ck_abort_msg("build/rung-vmm missing: make build/rung-vmm");
	static const uint8_t nothing[] = {0};
	int st = run_vmm(nothing, 0, "9", err, serial, sizeof(err));
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2); /* usage: --cpus 9 */
	ck_assert_ptr_nonnull(strstr(err, "--cpus"));
	/* exec'd with fds 0-2 closed, as a jailer may: still a clean usage error */
	pid_t pid = fork();
	if (pid == 0) {
		close(0);
		close(1);
		close(2);
		char *argv[] = {vmm, "--cpus", "9", NULL};
		char *envp[] = {NULL};
		execve(vmm, argv, envp);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
}
END_TEST

static bool cpuinfo_has_hw_virt(void)
{
	char *s = NULL;
	size_t n;
	int fd = open("/proc/cpuinfo", O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(rung_read_fd_all(fd, 1 << 22, &s, &n, NULL), 0);
	close(fd);
	bool r = strstr(s, " vmx") || strstr(s, " svm");
	free(s);
	return r;
}

START_TEST(vmm_probe_matches_host)
{
	char vmm[512], elog[] = "/tmp/rung-vmm-probe-XXXXXX";
	snprintf(vmm, sizeof(vmm), "%s/rung-vmm", rung_test_build_dir());
	int efd = mkstemp(elog);
	ck_assert_int_ge(efd, 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(efd, 2);
		char *argv[] = {vmm, "--probe", NULL};
		char *envp[] = {NULL};
		execve(vmm, argv, envp);
		_exit(127);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	char buf[512] = {0};
	ck_assert_int_ge(pread(efd, buf, sizeof(buf) - 1, 0), 0);
	close(efd);
	unlink(elog);
	ck_assert_msg(WIFEXITED(st), "probe died: %d", st);
	if (!cpuinfo_has_hw_virt()) {
		ck_assert_int_eq(WEXITSTATUS(st), 1);
		ck_assert_ptr_nonnull(strstr(buf, "neither VMX nor SVM"));
	} else if (access("/dev/kvm", R_OK | W_OK) != 0) {
		ck_assert_int_eq(WEXITSTATUS(st), 1);
		ck_assert_ptr_nonnull(strstr(buf, "/dev/kvm"));
	} else {
		ck_assert_msg(WEXITSTATUS(st) == 0, "hardware KVM here, but the probe says: %s", buf);
	}
}
END_TEST

Suite *vmm_kvm_suite(void)
{
	Suite *s = suite_create("vmm_kvm");
	TCase *tc = tcase_create("kvm");
	tcase_set_timeout(tc, 60);
	tcase_set_tags(tc, "kvm");
	tcase_add_test(tc, kvm_boot_reset_and_triple_fault);
	suite_add_tcase(s, tc);
	TCase *cli = tcase_create("cli");
	tcase_set_timeout(cli, 20);
	tcase_add_test(cli, vmm_bad_kernel_exit_status);
	tcase_add_test(cli, vmm_probe_matches_host);
	suite_add_tcase(s, cli);
	return s;
}
