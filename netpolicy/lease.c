/* netpolicy/lease.c: names derived from the id, and /30 leases from the pool (flock'd files). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "common/digest.h"
#include "common/util.h"
#include "netpolicy/lease.h"
#include "netpolicy/link.h"

void np_names_derive(const char *state_dir, const char *id, struct np_names *nm)
{
	char h[RUNG_SHA256_HEX_LEN + 1], real[PATH_MAX];
	rung_sha256_hex(id, strlen(id), h);
	memcpy(nm->hash, h, 12);
	nm->hash[12] = '\0';
	snprintf(nm->veth, sizeof(nm->veth), "rg%s", nm->hash);
	snprintf(nm->table, sizeof(nm->table), "rung_%s", nm->hash);
	const char *sd = realpath(state_dir, real) ? real : state_dir;
	rung_sha256_hex(sd, strlen(sd), h);
	snprintf(nm->tag, sizeof(nm->tag), "rung-np:%.12s", h);
}

int np_pool_parse(const char *pool, uint32_t *base, uint32_t *slots, struct rung_err *err)
{
	char buf[32];
	uint64_t plen;
	const char *slash = strchr(pool, '/');
	if (!slash || (size_t)(slash - pool) >= sizeof(buf) ||
	    rung_parse_u64(slash + 1, &plen) < 0 || plen < 8 || plen > 30)
		return rung_err_set(err, EINVAL, "pool \"%s\": want A.B.C.D/N with 8 <= N <= 30",
				    pool);
	memcpy(buf, pool, (size_t)(slash - pool));
	buf[slash - pool] = '\0';
	struct in_addr a;
	if (inet_pton(AF_INET, buf, &a) != 1)
		return rung_err_set(err, EINVAL, "pool \"%s\": bad IPv4 address", pool);
	uint32_t b = ntohl(a.s_addr), mask = ~0u << (32 - plen);
	if (b & ~mask)
		return rung_err_set(err, EINVAL, "pool \"%s\": host bits set", pool);
	*base = b;
	*slots = 1u << (30 - plen);
	return 0;
}

static int net_dir(const char *state_dir, char *out, size_t len, const char *sub,
		   struct rung_err *err)
{
	if ((size_t)snprintf(out, len, "%s/net%s%s", state_dir, sub ? "/" : "", sub ? sub : "") >=
	    len)
		return rung_err_set(err, ENAMETOOLONG, "state dir path too long: %s", state_dir);
	return rung_mkdir_p(out, 0700, err);
}

/* The store-wide lock for the pool: flock on <state_dir>/net/lock. Returns the fd. */
static int pool_lock(const char *state_dir, struct rung_err *err)
{
	char dir[PATH_MAX], path[PATH_MAX + 8];
	int r = net_dir(state_dir, dir, sizeof(dir), NULL, err);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%s/lock", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return rung_err_sys(err, errno, "open %s", path);
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			r = rung_err_sys(err, errno, "flock %s", path);
			close(fd);
			return r;
		}
	}
	return fd;
}

/*
 * A lease is the file "<hash>-<index>" holding "id=<id>\n": the directory listing alone tells
 * which slots are taken. Leases only describe kernel state (veths, addresses), which does not
 * survive a reboot, so they are written atomically (temp + rename) but not fsync'd.
 */
static bool lease_name(const char *name, char hash[13], uint32_t *index)
{
	size_t n = strlen(name);
	if (n < 14 || n > 24 || name[12] != '-')
		return false;
	for (size_t i = 0; i < 12; i++)
		if (!strchr("0123456789abcdef", name[i]))
			return false;
	uint64_t v;
	if (rung_parse_u64(name + 13, &v) < 0 || v > UINT32_MAX)
		return false;
	memcpy(hash, name, 12);
	hash[12] = '\0';
	*index = (uint32_t)v;
	return true;
}

static int lease_read_id(int dfd, const char *name, char *id, size_t idlen)
{
	cleanup_free char *txt = NULL;
	struct rung_err e;
	if (rung_file_load(dfd, name, 4096, &txt, NULL, &e) < 0)
		return -e.code;
	if (strncmp(txt, "id=", 3))
		return -EBADMSG;
	char *nl = strchr(txt, '\n');
	if (nl)
		*nl = '\0';
	if (strlen(txt + 3) >= idlen)
		return -EBADMSG;
	strcpy(id, txt + 3);
	return 0;
}

static int lease_write(int dfd, const char *name, const char *id, struct rung_err *err)
{
	char tmp[64], txt[200];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", name, (int)getpid());
	int n = snprintf(txt, sizeof(txt), "id=%s\n", id);
	cleanup_close int fd =
	    openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return rung_err_sys(err, errno, "lease %s", tmp);
	int r = rung_write_all(fd, txt, (size_t)n);
	if (r == 0 && renameat(dfd, tmp, dfd, name) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(dfd, tmp, 0);
		return rung_err_sys(err, -r, "lease %s", name);
	}
	return 0;
}

static void fill_lease(uint32_t base, uint32_t index, struct np_lease *l)
{
	uint32_t net = base + 4 * index, h = htonl(net + 1), s = htonl(net + 2), n = htonl(net);
	l->index = index;
	memcpy(l->net, &n, 4);
	memcpy(l->host_ip, &h, 4);
	memcpy(l->sb_ip, &s, 4);
}

static DIR *opendir_at(int dfd)
{
	int d2 = dup(dfd);
	DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
	if (!d && d2 >= 0)
		close(d2);
	return d;
}

int np_lease_acquire(const char *state_dir, const char *pool, const char *id,
		     const struct np_names *nm, struct np_lease *out, struct rung_err *err)
{
	uint32_t base, slots;
	int r = np_pool_parse(pool, &base, &slots, err);
	if (r < 0)
		return r;
	char dir[PATH_MAX];
	if ((r = net_dir(state_dir, dir, sizeof(dir), "leases", err)) < 0)
		return r;
	cleanup_close int lock = pool_lock(state_dir, err);
	if (lock < 0)
		return lock;
	cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return rung_err_sys(err, errno, "open %s", dir);
	cleanup_free uint8_t *used = calloc(slots / 8 + 1, 1);
	if (!used)
		return rung_err_set(err, ENOMEM, "out of memory");
	cleanup_dir DIR *d = opendir_at(dfd);
	if (!d)
		return rung_err_sys(err, errno, "opendir %s", dir);
	struct dirent *de;
	while ((de = readdir(d))) {
		char hash[13], lid[160];
		uint32_t idx;
		if (!lease_name(de->d_name, hash, &idx) || idx >= slots)
			continue;
		if (!strcmp(hash, nm->hash) &&
		    lease_read_id(dfd, de->d_name, lid, sizeof(lid)) == 0 && !strcmp(lid, id)) {
			fill_lease(base, idx, out); /* this sandbox already holds one */
			return 0;
		}
		used[idx / 8] |= (uint8_t)(1u << (idx % 8));
	}
	cleanup_free struct np_route4 *routes = NULL;
	size_t nroutes = 0;
	if ((r = np_routes_dump(&routes, &nroutes, err)) < 0)
		return r;
	for (uint32_t i = 0; i < slots; i++) {
		if (used[i / 8] & (1u << (i % 8)))
			continue;
		if (np_routes_overlap(routes, nroutes, base + 4 * i, 30, 0))
			continue;
		char name[32];
		snprintf(name, sizeof(name), "%s-%u", nm->hash, i);
		if ((r = lease_write(dfd, name, id, err)) < 0)
			return r;
		fill_lease(base, i, out);
		return 0;
	}
	return rung_err_set(err, EADDRNOTAVAIL,
			    "pool %s: no free /30 (all leased or overlapping host routes)", pool);
}

/* Calls fn for each lease file of the state dir (none if the dir does not exist yet); fn's
 * first error is returned, after the walk. */
static int leases_walk(const char *state_dir,
		       int (*fn)(int dfd, const char *dir, const char *name, const char *hash,
				 void *data, struct rung_err *err),
		       void *data, struct rung_err *err)
{
	char dir[PATH_MAX];
	if ((size_t)snprintf(dir, sizeof(dir), "%s/net/leases", state_dir) >= sizeof(dir))
		return rung_err_set(err, ENAMETOOLONG, "state dir path too long: %s", state_dir);
	cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : rung_err_sys(err, errno, "open %s", dir);
	cleanup_dir DIR *d = opendir_at(dfd);
	if (!d)
		return rung_err_sys(err, errno, "opendir %s", dir);
	struct dirent *de;
	int first = 0;
	while ((de = readdir(d))) {
		char hash[13];
		uint32_t idx;
		if (!lease_name(de->d_name, hash, &idx))
			continue;
		int r = fn(dfd, dir, de->d_name, hash, data, err);
		if (r < 0 && !first)
			first = r;
	}
	return first;
}

static int release_one(int dfd, const char *dir, const char *name, const char *hash, void *nm,
		       struct rung_err *err)
{
	if (strcmp(hash, ((const struct np_names *)nm)->hash))
		return 0;
	if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
		return rung_err_sys(err, errno, "unlink %s/%s", dir, name);
	return 0;
}

int np_lease_release(const char *state_dir, const struct np_names *nm, struct rung_err *err)
{
	return leases_walk(state_dir, release_one, (void *)nm, err);
}

struct foreach_ctx {
	void (*fn)(const char *id, const char *hash, void *);
	void *data;
};

static int report_one(int dfd, const char *dir, const char *name, const char *hash, void *p,
		      struct rung_err *err)
{
	struct foreach_ctx *c = p;
	char lid[160];
	if (lease_read_id(dfd, name, lid, sizeof(lid)) < 0)
		lid[0] = '\0'; /* unreadable: still reported, with no id */
	c->fn(lid, hash, c->data);
	return 0;
}

int np_lease_foreach(const char *state_dir, void (*fn)(const char *id, const char *hash, void *),
		     void *data, struct rung_err *err)
{
	struct foreach_ctx c = {fn, data};
	return leases_walk(state_dir, report_one, &c, err);
}
