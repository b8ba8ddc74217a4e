/*
 * rootfs/src.c: a hashing, teeing byte source with a reader thread (see rfs-internal.h).
 *
 * The reader thread reads the blob, hashes it and copies it into the store (tee). When the
 * blob is gzip or zstd it also decompresses it (libarchive "raw" format), so the consumer
 * (the unpacker, on the caller's thread) only parses tar and writes files: the two halves
 * of an import run on two cores, as `tar -xz` runs with gzip in a second process.
 */
#include <archive.h>
#include <archive_entry.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs-internal.h"

struct rfs_src_ring {
	pthread_t th;
	bool started, joined;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned char *buf[RFS_SRC_NBUF]; /* chunks for the consumer */
	size_t len[RFS_SRC_NBUF];
	unsigned head, tail, count; /* producer fills head, consumer reads tail */
	bool holding;               /* the consumer holds buf[tail] */
	bool eof, stop;
	int err;
	char errmsg[160];
	size_t bufsize;
	EVP_MD_CTX *md;
	int fd, tee_fd;
	bool consumer_tees; /* plain blobs: the consumer copies into the store (balance) */
	unsigned char *raw; /* compressed input (producer only) */
	size_t raw_len;     /* bytes already in raw, not yet handed to libarchive */
	int raw_err;
	uint64_t raw_total; /* producer: raw bytes read so far */
	uint64_t raw_done;  /* raw_total as of the last publish (under mu) */
};

int rfs_src_init(struct rfs_src *src, int fd, struct rung_err *err)
{
	memset(src, 0, sizeof(*src));
	src->fd = fd;
	src->tee_fd = -1;
	struct rfs_src_ring *g = calloc(1, sizeof(*g));
	if (!g)
		return rung_err_set(err, ENOMEM, "out of memory");
	src->ring = g;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	/* Small files get small buffers (a small layer, a fuzz input). */
	struct stat st;
	g->bufsize = RFS_IO_BUF;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size < RFS_IO_BUF)
		g->bufsize = st.st_size < 65536 ? 65536 : (size_t)st.st_size + 1;
	g->md = EVP_MD_CTX_new();
	bool ok = g->md && EVP_DigestInit_ex(g->md, EVP_sha256(), NULL) &&
		  (g->raw = malloc(g->bufsize)) != NULL;
	for (int i = 0; ok && i < RFS_SRC_NBUF; i++)
		ok = (g->buf[i] = malloc(g->bufsize)) != NULL;
	if (!ok) {
		rfs_src_release(src);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	return 0;
}

static int tee(int fd, const void *p, size_t n)
{
	return fd >= 0 ? rung_write_all(fd, p, n) : 0;
}

/* Read raw bytes into dst, hash and (unless the consumer does) tee them. */
static ssize_t raw_read(struct rfs_src_ring *g, unsigned char *dst, size_t cap)
{
	ssize_t n;
	do
		n = read(g->fd, dst, cap);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n > 0) {
		g->raw_total += (uint64_t)n;
		EVP_DigestUpdate(g->md, dst, (size_t)n);
		int w = g->consumer_tees ? 0 : tee(g->tee_fd, dst, (size_t)n);
		if (w < 0)
			return w;
	}
	return n;
}

/* Wait for a free slot; false when told to stop. */
static bool slot_wait(struct rfs_src_ring *g, unsigned *slot)
{
	pthread_mutex_lock(&g->mu);
	while (g->count == RFS_SRC_NBUF && !g->stop)
		pthread_cond_wait(&g->cv, &g->mu);
	bool stop = g->stop;
	*slot = g->head;
	pthread_mutex_unlock(&g->mu);
	return !stop;
}

/* n > 0: a chunk in slot; else EOF (e = errno, 0 for a clean end). */
static void publish(struct rfs_src_ring *g, unsigned slot, ssize_t n, int e, const char *msg)
{
	pthread_mutex_lock(&g->mu);
	g->raw_done = g->raw_total;
	if (n > 0) {
		g->len[slot] = (size_t)n;
		g->head = (slot + 1) % RFS_SRC_NBUF;
		g->count++;
	} else {
		g->eof = true;
		g->err = e;
		if (msg)
			snprintf(g->errmsg, sizeof(g->errmsg), "%s", msg);
	}
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

static la_ssize_t raw_cb(struct archive *a, void *ud, const void **out)
{
	struct rfs_src_ring *g = ud;
	*out = g->raw;
	if (g->raw_len) { /* the bytes read to sniff the compression */
		la_ssize_t n = (la_ssize_t)g->raw_len;
		g->raw_len = 0;
		return n;
	}
	ssize_t n = raw_read(g, g->raw, g->bufsize);
	if (n < 0) {
		g->raw_err = (int)-n;
		archive_set_error(a, (int)-n, "read: %s", strerror((int)-n));
		return -1;
	}
	return n;
}

/* A compressed blob: decompress here, hand tar bytes to the consumer. */
static void produce_decompressed(struct rfs_src_ring *g)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	int e_no = 0;
	char msg[160] = "";
	if (!a) {
		publish(g, 0, -1, ENOMEM, "out of memory");
		return;
	}
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_format_raw(a);
	if (archive_read_open(a, g, NULL, raw_cb, NULL) != ARCHIVE_OK ||
	    archive_read_next_header(a, &e) != ARCHIVE_OK) {
		e_no = g->raw_err ? g->raw_err : EINVAL;
		snprintf(msg, sizeof(msg), "decompress: %s", archive_error_string(a));
	}
	for (unsigned slot; !e_no;) {
		if (!slot_wait(g, &slot))
			break;
		la_ssize_t n = archive_read_data(a, g->buf[slot], g->bufsize);
		if (n < 0) {
			e_no = g->raw_err ? g->raw_err : EINVAL;
			snprintf(msg, sizeof(msg), "decompress: %s", archive_error_string(a));
		} else if (n == 0) {
			break;
		} else {
			publish(g, slot, n, 0, NULL);
		}
	}
	archive_read_free(a);
	/* Whatever follows the compressed stream still belongs to the blob's digest. */
	ssize_t n;
	while (!g->raw_err && (n = raw_read(g, g->raw, g->bufsize)) != 0)
		if (n < 0)
			g->raw_err = (int)-n;
	if (!e_no && g->raw_err)
		e_no = g->raw_err, snprintf(msg, sizeof(msg), "read: %s", strerror(e_no));
	publish(g, 0, -1, e_no, msg[0] ? msg : NULL);
}

static void *producer(void *arg)
{
	struct rfs_src_ring *g = arg;
	/* Sniff (not yet teed): gzip 1f 8b, zstd 28 b5 2f fd. */
	g->consumer_tees = true;
	ssize_t n = raw_read(g, g->raw, g->bufsize);
	if (n < 0) {
		publish(g, 0, -1, (int)-n, NULL);
		return NULL;
	}
	g->raw_len = (size_t)n;
	static const unsigned char gz[] = { 0x1f, 0x8b }, zst[] = { 0x28, 0xb5, 0x2f, 0xfd };
	if ((n >= 2 && !memcmp(g->raw, gz, 2)) || (n >= 4 && !memcmp(g->raw, zst, 4))) {
		/* Decompressing is the heavy half: the consumer tees nothing. */
		g->consumer_tees = false;
		int w = tee(g->tee_fd, g->raw, (size_t)n);
		if (w < 0) {
			publish(g, 0, -1, -w, NULL);
			return NULL;
		}
		produce_decompressed(g);
		return NULL;
	}
	/* Plain: chunks go to the consumer as read; the sniffed bytes first. */
	for (unsigned slot;;) {
		if (!slot_wait(g, &slot))
			return NULL;
		if (g->raw_len) {
			memcpy(g->buf[slot], g->raw, g->raw_len);
			n = (ssize_t)g->raw_len;
			g->raw_len = 0;
		} else {
			n = raw_read(g, g->buf[slot], g->bufsize);
		}
		publish(g, slot, n, n < 0 ? (int)-n : 0, NULL);
		if (n <= 0)
			return NULL;
	}
}

static void join(struct rfs_src_ring *g)
{
	if (!g->started || g->joined)
		return;
	pthread_mutex_lock(&g->mu);
	g->stop = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	pthread_join(g->th, NULL);
	g->joined = true;
}

void rfs_src_release(struct rfs_src *src)
{
	struct rfs_src_ring *g = src->ring;
	if (!g)
		return;
	join(g);
	for (int i = 0; i < RFS_SRC_NBUF; i++)
		free(g->buf[i]);
	free(g->raw);
	EVP_MD_CTX_free(g->md);
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->mu);
	free(g);
	src->ring = NULL;
}

ssize_t rfs_src_read(struct rfs_src *src, const void **out)
{
	struct rfs_src_ring *g = src->ring;
	if (!g->started) {
		g->fd = src->fd;
		g->tee_fd = src->tee_fd;
		int e = pthread_create(&g->th, NULL, producer, g);
		if (e) {
			src->err = e;
			return -1;
		}
		g->started = true;
	}
	pthread_mutex_lock(&g->mu);
	if (g->holding) { /* the previous chunk is consumed: hand its slot back */
		g->holding = false;
		g->tail = (g->tail + 1) % RFS_SRC_NBUF;
		g->count--;
		pthread_cond_broadcast(&g->cv);
	}
	while (g->count == 0 && !g->eof)
		pthread_cond_wait(&g->cv, &g->mu);
	ssize_t n;
	uint64_t raw_done = g->raw_done;
	if (g->count > 0) {
		g->holding = true;
		*out = g->buf[g->tail];
		n = (ssize_t)g->len[g->tail];
	} else {
		n = g->err ? -1 : 0;
		src->err = g->err;
		snprintf(src->errmsg, sizeof(src->errmsg), "%s",
			 g->errmsg[0] ? g->errmsg : (g->err ? strerror(g->err) : ""));
		*out = g->buf[0];
	}
	bool consumer_tees = g->consumer_tees;
	pthread_mutex_unlock(&g->mu);
	if (n > 0 && consumer_tees) {
		int w = tee(g->tee_fd, *out, (size_t)n);
		if (w < 0) {
			src->err = -w;
			snprintf(src->errmsg, sizeof(src->errmsg), "copy into the store: %s",
				 strerror(-w));
			return -1;
		}
	}
	if (n > 0 && raw_done != src->done) {
		src->done = raw_done;
		if (src->progress)
			src->progress(src->name ? src->name : "", src->done, src->total, src->ud);
	}
	return n;
}

int rfs_src_drain(struct rfs_src *src, struct rung_err *err)
{
	const void *p;
	ssize_t n;
	while ((n = rfs_src_read(src, &p)) > 0)
		;
	if (n < 0)
		return rung_err_set(err, src->err, "%s: %s", src->name ? src->name : "layer",
				    src->errmsg);
	return 0;
}

void rfs_src_hex(struct rfs_src *src, char out[65])
{
	struct rfs_src_ring *g = src->ring;
	join(g);
	src->done = g->raw_total;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	EVP_DigestFinal_ex(g->md, md, &len);
	for (unsigned i = 0; i < len && i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	out[64] = '\0';
}
