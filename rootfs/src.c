/* rootfs/src.c: a hashing, teeing byte source with a reader thread (see rfs-internal.h). */
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
	unsigned char *buf[RFS_SRC_NBUF];
	size_t len[RFS_SRC_NBUF];
	unsigned head, tail, count; /* producer fills head, consumer reads tail */
	bool holding;               /* the consumer holds buf[tail] */
	bool eof, stop;
	int err;
	size_t bufsize;
	EVP_MD_CTX *md;
	int fd, tee_fd;
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
	bool ok = g->md && EVP_DigestInit_ex(g->md, EVP_sha256(), NULL);
	for (int i = 0; ok && i < RFS_SRC_NBUF; i++)
		ok = (g->buf[i] = malloc(g->bufsize)) != NULL;
	if (!ok) {
		rfs_src_release(src);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	return 0;
}

static void *producer(void *arg)
{
	struct rfs_src_ring *g = arg;
	for (;;) {
		pthread_mutex_lock(&g->mu);
		while (g->count == RFS_SRC_NBUF && !g->stop)
			pthread_cond_wait(&g->cv, &g->mu);
		bool stop = g->stop;
		unsigned slot = g->head;
		pthread_mutex_unlock(&g->mu);
		if (stop)
			return NULL;
		ssize_t n;
		do
			n = read(g->fd, g->buf[slot], g->bufsize);
		while (n < 0 && errno == EINTR);
		int e = n < 0 ? errno : 0;
		if (n > 0) {
			EVP_DigestUpdate(g->md, g->buf[slot], (size_t)n);
			if (g->tee_fd >= 0) {
				int w = rung_write_all(g->tee_fd, g->buf[slot], (size_t)n);
				if (w < 0)
					e = -w, n = -1;
			}
		}
		pthread_mutex_lock(&g->mu);
		if (n > 0) {
			g->len[slot] = (size_t)n;
			g->head = (slot + 1) % RFS_SRC_NBUF;
			g->count++;
		} else {
			g->eof = true;
			g->err = e;
		}
		pthread_cond_broadcast(&g->cv);
		pthread_mutex_unlock(&g->mu);
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
	if (g->count > 0) {
		g->holding = true;
		*out = g->buf[g->tail];
		n = (ssize_t)g->len[g->tail];
	} else {
		n = g->err ? -1 : 0;
		src->err = g->err;
		*out = g->buf[0];
	}
	pthread_mutex_unlock(&g->mu);
	if (n > 0) {
		src->done += (uint64_t)n;
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
		return rung_err_sys(err, src->err, "read %s", src->name ? src->name : "layer");
	return 0;
}

void rfs_src_hex(struct rfs_src *src, char out[65])
{
	struct rfs_src_ring *g = src->ring;
	join(g);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	EVP_DigestFinal_ex(g->md, md, &len);
	for (unsigned i = 0; i < len && i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	out[64] = '\0';
}
