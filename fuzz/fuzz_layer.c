/*
 * fuzz/fuzz_layer.c: the layer unpacker on arbitrary bytes (tar, gzip, zstd).
 *
 * Containment: at start the fuzzer moves into a private mount namespace where every mount
 * is read-only except a bind of the current directory (the repository: corpus, artifacts
 * and the unpack dir live under build/). If that setup is impossible (not root), it says so
 * and runs nothing. After every input it checks that nothing appeared next to the unpack
 * dir, the canary of an escape.
 */
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int contained, input_fd = -1; /* setup state, written once in LLVMFuzzerInitialize */
static char base[4096], layer_dir[4200];

static int setattr(const char *path, unsigned flags, uint64_t set, uint64_t clr)
{
	struct mount_attr a = { .attr_set = set, .attr_clr = clr };
	return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &a, sizeof(a));
}

static void cleanup(void)
{
	umount2(base, MNT_DETACH);
	rmdir(base);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char cwd[4000];
	if (!getcwd(cwd, sizeof(cwd)) || geteuid() != 0 || unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount(cwd, cwd, NULL, MS_BIND | MS_REC, NULL) < 0 ||
	    setattr("/", AT_RECURSIVE, MOUNT_ATTR_RDONLY, 0) < 0 ||
	    setattr(cwd, AT_RECURSIVE, 0, MOUNT_ATTR_RDONLY) < 0) {
		fprintf(stderr, "fuzz_layer: no read-only containment (needs root): parsing only\n");
		return 0;
	}
	snprintf(base, sizeof(base), "%s/build/fuzz-layer-%d", cwd, (int)getpid());
	snprintf(layer_dir, sizeof(layer_dir), "%s/root", base);
	/* A private tmpfs: fast, and gone with the namespace when the fuzzer exits. */
	if (rung_mkdir_p(base, 0700, NULL) < 0 ||
	    mount("tmpfs", base, "tmpfs", MS_NOSUID, "size=256m,mode=0700") < 0)
		return 0;
	input_fd = memfd_create("fuzz-layer-input", MFD_CLOEXEC);
	if (input_fd < 0)
		return 0;
	atexit(cleanup);
	contained = 1;
	return 0;
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *de;
	while (d && (de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 16384) /* up to ~30 tar entries: enough structure, cheap enough for make check */
		return 0;
	if (!contained) /* no containment, no writes: this target then tests nothing */
		return 0;
	rung_rm_rf(layer_dir, NULL);
	if (mkdir(layer_dir, 0755) < 0)
		abort();
	if (ftruncate(input_fd, 0) < 0 || pwrite(input_fd, data, size, 0) != (ssize_t)size ||
	    lseek(input_fd, 0, SEEK_SET) < 0)
		abort();
	int dfd = open(layer_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct rung_err err = { 0 };
	struct rfs_unpack_stats st;
	(void)rfs_layer_unpack(input_fd, dfd, &st, &err);
	close(dfd);
	/* The canary: base holds exactly "root". */
	if (count_entries(base) != 1) {
		fprintf(stderr, "fuzz_layer: an entry escaped the layer dir into %s\n", base);
		abort();
	}
	return 0;
}
