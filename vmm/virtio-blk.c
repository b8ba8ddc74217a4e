/*
 * vmm/virtio-blk.c: a virtio block device backed by a raw image file (optionally read-only).
 * Requests are handled synchronously in the vCPU thread that notified the queue.
 */
#include <fcntl.h>
#include <linux/virtio_blk.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/log.h"
#include "vmm/vmm.h"

#define SECTOR 512u
#define SEG_MAX 126
#define HDR_LEN 16

int vmm_blk_open(struct vmm_blk *b, const char *path, bool ro, struct rung_err *err)
{
	memset(b, 0, sizeof(*b));
	b->fd = -1;
	cleanup_close int fd = open(path, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0)
		return rung_err_sys(err, errno, "--disk %s", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return rung_err_sys(err, errno, "--disk %s: stat", path);
	if (!S_ISREG(st.st_mode))
		return rung_err_set(err, EINVAL, "--disk %s: not a regular file", path);
	b->sectors = (uint64_t)st.st_size / SECTOR;
	b->ro = ro;
	snprintf(b->serial, sizeof(b->serial), "rung%llx", (unsigned long long)st.st_ino);
	b->fd = rung_steal_fd(&fd);
	return 0;
}

void vmm_blk_close(struct vmm_blk *b)
{
	if (b && b->fd >= 0) {
		close(b->fd);
		b->fd = -1;
	}
}

static int do_io(struct vmm_blk *b, const struct vmm_chain *c, bool write, uint64_t sector,
		 uint64_t len)
{
	if (len % SECTOR)
		return VIRTIO_BLK_S_IOERR;
	if (sector > b->sectors || len / SECTOR > b->sectors - sector)
		return VIRTIO_BLK_S_IOERR;
	off_t pos = (off_t)(sector * SECTOR);
	size_t off = write ? HDR_LEN : 0;
	while (len) {
		struct iovec iov[64];
		unsigned n = vmm_chain_iov(c, !write, off, len, iov, 64);
		if (!n)
			return VIRTIO_BLK_S_IOERR;
		ssize_t k = write ? pwritev(b->fd, iov, (int)n, pos) : preadv(b->fd, iov, (int)n, pos);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return VIRTIO_BLK_S_IOERR;
		pos += k;
		off += (size_t)k;
		len -= (uint64_t)k;
	}
	return VIRTIO_BLK_S_OK;
}

uint32_t vmm_blk_handle(struct vmm_blk *b, const struct vmm_chain *c)
{
	struct virtio_blk_outhdr hdr;
	if (c->wlen < 1)
		return 0; /* nowhere to put a status: drop the request */
	uint8_t status = VIRTIO_BLK_S_IOERR;
	uint32_t data_in = 0;
	if (vmm_chain_read(c, 0, &hdr, HDR_LEN) == HDR_LEN) {
		uint64_t wdata = c->wlen - 1;
		switch (hdr.type) {
		case VIRTIO_BLK_T_IN:
			status = (uint8_t)do_io(b, c, false, hdr.sector, wdata);
			if (status == VIRTIO_BLK_S_OK)
				data_in = (uint32_t)wdata;
			break;
		case VIRTIO_BLK_T_OUT:
			status = b->ro ? VIRTIO_BLK_S_IOERR
				       : (uint8_t)do_io(b, c, true, hdr.sector, c->rlen - HDR_LEN);
			break;
		case VIRTIO_BLK_T_FLUSH:
			status = b->ro || fdatasync(b->fd) == 0 ? VIRTIO_BLK_S_OK : VIRTIO_BLK_S_IOERR;
			break;
		case VIRTIO_BLK_T_GET_ID: {
			char id[VIRTIO_BLK_ID_BYTES] = {0};
			memcpy(id, b->serial, strnlen(b->serial, sizeof(b->serial)));
			size_t n = wdata < sizeof(id) ? wdata : sizeof(id);
			vmm_chain_write(c, 0, id, n);
			data_in = (uint32_t)n;
			status = VIRTIO_BLK_S_OK;
			break;
		}
		default:
			status = VIRTIO_BLK_S_UNSUPP;
		}
	}
	vmm_chain_write(c, c->wlen - 1, &status, 1);
	return data_in + 1;
}

static uint64_t blk_features(void *dev)
{
	struct vmm_blk *b = dev;
	uint64_t f = (1ull << VIRTIO_BLK_F_SEG_MAX) | (1ull << VIRTIO_BLK_F_FLUSH);
	if (b->ro)
		f |= 1ull << VIRTIO_BLK_F_RO;
	return f;
}

static void blk_config_read(void *dev, uint64_t off, void *data, unsigned len)
{
	struct vmm_blk *b = dev;
	struct virtio_blk_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.capacity = b->sectors;
	cfg.seg_max = SEG_MAX;
	if (off < sizeof(cfg))
		memcpy(data, (uint8_t *)&cfg + off, len < sizeof(cfg) - off ? len : sizeof(cfg) - off);
}

static uint32_t blk_chain(void *b, const struct vmm_chain *c) { return vmm_blk_handle(b, c); }

static void blk_notify(struct vmm_virtio *t, unsigned q) { vmm_virtio_drain(t, q, 0, blk_chain, t->dev); }

const struct vmm_virtio_dev_ops vmm_blk_ops = {
	.name = "virtio-blk",
	.device_id = 2,
	.num_queues = 1,
	.features = blk_features,
	.config_read = blk_config_read,
	.queue_notify = blk_notify,
	.reset = NULL,
};
