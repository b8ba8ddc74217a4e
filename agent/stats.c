/*
 * agent/stats.c: STATS, the sandbox's own view (rung_stats; docs/files.md): statvfs of a
 * directory (resolved confined: the disk its work dir is on), and the kernel's memory and CPU
 * totals (/proc/meminfo, /proc/stat), which the host uses on the vm rung, where the kernel
 * is the guest's own.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "agent/agent.h"

/* "Key:   N kB" of /proc/meminfo, in bytes; 0 when absent. */
static uint64_t meminfo(const char *text, const char *key)
{
	const char *p = strstr(text, key);
	return p ? strtoull(p + strlen(key), NULL, 10) * 1024 : 0;
}

static void kernel_view(struct rung_buf *b)
{
	char buf[8192];
	cleanup_close int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (n > 0) {
		buf[n] = 0;
		rung_buf_put_u64(b, RUNG_TAG_MEM_TOTAL, meminfo(buf, "MemTotal:"));
		rung_buf_put_u64(b, RUNG_TAG_MEM_AVAIL, meminfo(buf, "MemAvailable:"));
	}
	cleanup_close int sfd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	n = sfd >= 0 ? read(sfd, buf, sizeof(buf) - 1) : -1;
	long hz = sysconf(_SC_CLK_TCK);
	if (n > 5 && hz > 0 && !strncmp(buf, "cpu ", 4)) {
		buf[n] = 0;
		/* /proc/stat columns: user, nice, system, then idle and iowait (skipped), irq,
		 * softirq, steal */
		unsigned long long v[8] = {0};
		if (sscanf(buf + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			   &v[3], &v[4], &v[5], &v[6], &v[7]) >= 3) {
			unsigned long long t = v[0] + v[1] + v[2] + v[5] + v[6];
			rung_buf_put_u64(b, RUNG_TAG_CPU_US,
					 t * 1000000ull / (unsigned long long)hz);
		}
	}
}

int agent_stats(int sock, const struct rung_frame *req, struct rung_err *err)
{
	struct rung_proto_fs x;
	int r = rung_proto_fs_decode(RUNG_MSG_FS_STAT, req->payload, req->len, &x, err);
	if (r < 0)
		return r;
	cleanup_close int fd = agent_open_confined(x.path, O_PATH | O_DIRECTORY, 0, 0, err);
	rung_proto_fs_release(&x);
	if (fd < 0)
		return fd;
	struct statvfs v;
	if (fstatvfs(fd, &v) < 0)
		return rung_err_sys(err, errno, "statvfs");
	struct rung_buf b = {0};
	rung_buf_put_u64(&b, RUNG_TAG_DISK_TOTAL, (uint64_t)v.f_blocks * v.f_frsize);
	rung_buf_put_u64(&b, RUNG_TAG_DISK_FREE, (uint64_t)v.f_bfree * v.f_frsize);
	kernel_view(&b);
	uint64_t pids;
	if (agent_cmd_cgroup_pids(&pids))
		rung_buf_put_u64(&b, RUNG_TAG_PIDS_CUR, pids);
	r = rung_frame_write_buf(sock, RUNG_MSG_RESULT, &b, err);
	rung_buf_release(&b);
	return r;
}
