/*
 * rootfs/pull.c: the OCI distribution API over HTTP(S) with libcurl.
 *
 * GET /v2/<repo>/manifests/<ref> with OCI + Docker Accept types, then config and layer
 * blobs, each verified against its descriptor (digest AND size; a blob is cut off the moment
 * it grows past its size). A 401 with "WWW-Authenticate: Bearer ..." fetches a token from the
 * realm (with basic credentials when given); "Basic" uses the credentials directly. Plain HTTP
 * only for loopback registries or opts->insecure. Only http/https, also on redirects.
 */
#include <curl/curl.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/util.h"
#include "rootfs/rfs-internal.h"

#define ACCEPT                                                                                     \
	"Accept: application/vnd.oci.image.index.v1+json, "                                        \
	"application/vnd.oci.image.manifest.v1+json, "                                             \
	"application/vnd.docker.distribution.manifest.list.v2+json, "                              \
	"application/vnd.docker.distribution.manifest.v2+json"
#define MAX_TOKEN (16u << 10)

struct reg {
	CURL *c;
	char base[300]; /* scheme://host[:port] */
	char repo[RFS_REF_MAX];
	char auth[MAX_TOKEN + 64]; /* "Authorization: ..." or "" */
	char user[256], pass[256];
	char host[256];         /* the registry's host[:port] */
	char token_hosts[1024]; /* other hosts allowed to serve its tokens */
	long timeout_s;
	bool plain; /* plain HTTP allowed (loopback or insecure) */
};

/* One response. Bodies go to memory (mem_max) or to fd (hashing, bounded by limit). */
struct resp {
	char *mem;
	size_t len, mem_max;
	int fd;
	EVP_MD_CTX *md;
	uint64_t limit;
	bool over;
	int werr;
	char www_auth[1024];
	char content_digest[RFS_DIGEST_MAX]; /* Docker-Content-Digest, when sent */
	bool blob;                           /* no total timeout: a low-speed limit instead */
	const char *name;
	rfs_progress_fn progress;
	void *ud;
};

static size_t on_header(char *b, size_t sz, size_t n, void *ud)
{
	struct resp *r = ud;
	size_t len = sz * n;
	if (len > 17 && !strncasecmp(b, "WWW-Authenticate:", 17)) {
		size_t v = 17;
		while (v < len && (b[v] == ' ' || b[v] == '\t'))
			v++;
		size_t e = len;
		while (e > v && (b[e - 1] == '\r' || b[e - 1] == '\n'))
			e--;
		snprintf(r->www_auth, sizeof(r->www_auth), "%.*s", (int)(e - v), b + v);
	} else if (len > 22 && !strncasecmp(b, "Docker-Content-Digest:", 22)) {
		size_t v = 22;
		while (v < len && b[v] == ' ')
			v++;
		size_t e = len;
		while (e > v && (b[e - 1] == '\r' || b[e - 1] == '\n' || b[e - 1] == ' '))
			e--;
		snprintf(r->content_digest, sizeof(r->content_digest), "%.*s",
			 (int)(e - v < RFS_DIGEST_MAX - 1 ? e - v : RFS_DIGEST_MAX - 1), b + v);
	}
	return len;
}

static size_t on_body(char *b, size_t sz, size_t n, void *ud)
{
	struct resp *r = ud;
	size_t len = sz * n;
	if (r->fd >= 0) {
		if (r->len + len > r->limit) {
			r->over = true;
			return 0;
		}
		int w = rung_write_all(r->fd, b, len);
		if (w < 0) {
			r->werr = -w;
			return 0;
		}
		EVP_DigestUpdate(r->md, b, len);
		r->len += len;
		if (r->progress)
			r->progress(r->name, r->len, r->limit, r->ud);
		return len;
	}
	if (r->len + len > r->mem_max) {
		r->over = true;
		return 0;
	}
	char *m = realloc(r->mem, r->len + len + 1);
	if (!m)
		return 0;
	memcpy(m + r->len, b, len);
	r->mem = m;
	r->len += len;
	m[r->len] = '\0';
	return len;
}

/* ---- WWW-Authenticate -------------------------------------------------------------------- */

int rfs_www_auth_parse(const char *h, struct rfs_www_auth *out, struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	if (!h)
		return rung_err_set(err, EINVAL, "WWW-Authenticate: missing");
	size_t sl = strcspn(h, " ");
	if (!sl || sl >= sizeof(out->scheme))
		return rung_err_set(err, EINVAL, "WWW-Authenticate: no scheme in '%.80s'", h);
	memcpy(out->scheme, h, sl);
	if (strcasecmp(out->scheme, "Bearer") && strcasecmp(out->scheme, "Basic"))
		return rung_err_set(err, ENOTSUP, "WWW-Authenticate: unsupported scheme '%s'",
				    out->scheme);
	const char *p = h + sl;
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		if (!*p)
			break;
		const char *eq = strchr(p, '=');
		if (!eq)
			return rung_err_set(err, EINVAL, "WWW-Authenticate: bad parameter at '%.60s'", p);
		size_t kl = (size_t)(eq - p);
		char val[1024];
		size_t vl = 0;
		const char *q = eq + 1;
		if (*q == '"') {
			for (q++; *q && *q != '"'; q++) {
				if (*q == '\\' && q[1])
					q++;
				if (vl + 1 >= sizeof(val))
					return rung_err_set(err, E2BIG, "WWW-Authenticate: value too long");
				val[vl++] = *q;
			}
			if (*q != '"')
				return rung_err_set(err, EINVAL, "WWW-Authenticate: unterminated quote");
			q++;
		} else {
			for (; *q && *q != ','; q++) {
				if (vl + 1 >= sizeof(val))
					return rung_err_set(err, E2BIG, "WWW-Authenticate: value too long");
				val[vl++] = *q;
			}
		}
		val[vl] = '\0';
		char *dst = NULL;
		size_t dn = 0;
		if (kl == 5 && !strncasecmp(p, "realm", 5))
			dst = out->realm, dn = sizeof(out->realm);
		else if (kl == 7 && !strncasecmp(p, "service", 7))
			dst = out->service, dn = sizeof(out->service);
		else if (kl == 5 && !strncasecmp(p, "scope", 5))
			dst = out->scope, dn = sizeof(out->scope);
		if (dst) {
			if (vl >= dn)
				return rung_err_set(err, E2BIG, "WWW-Authenticate: %.*s too long", (int)kl, p);
			memcpy(dst, val, vl + 1);
		}
		p = q;
	}
	if (!strcasecmp(out->scheme, "Bearer") && strncmp(out->realm, "https://", 8) &&
	    strncmp(out->realm, "http://", 7))
		return rung_err_set(err, EINVAL, "WWW-Authenticate: Bearer realm '%.100s' is not a URL",
				    out->realm);
	return 0;
}

/* ---- requests ------------------------------------------------------------------------------ */

static bool is_loopback(const char *host)
{
	char h[128];
	snprintf(h, sizeof(h), "%s", host);
	if (h[0] == '[') { /* [::1]:5000 */
		char *e = strchr(h, ']');
		if (e)
			*e = '\0';
		return !strcmp(h + 1, "::1");
	}
	char *colon = strchr(h, ':');
	if (colon)
		*colon = '\0';
	return !strcmp(h, "localhost") || !strncmp(h, "127.", 4);
}

/* "host" of "host[:port]" / "[v6]:port", lower-cased, into out. */
static void host_only(const char *hp, size_t len, char *out, size_t n)
{
	snprintf(out, n, "%.*s", (int)len, hp);
	if (out[0] == '[') {
		char *e = strchr(out, ']');
		if (e)
			e[1] = '\0';
	} else {
		char *c = strchr(out, ':');
		if (c)
			*c = '\0';
	}
	for (char *c = out; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
}

static bool host_listed(const char *name, const char *list)
{
	for (const char *p = list; p && *p;) {
		size_t n = strcspn(p, ", ");
		char h[256];
		host_only(p, n, h, sizeof(h));
		if (n && !strcmp(h, name))
			return true;
		p += n;
		p += strspn(p, ", ");
	}
	return false;
}

int rfs_auth_check(const char *registry_host, bool plain, const struct rfs_www_auth *wa,
		   const char *token_hosts, struct rung_err *err)
{
	char reg[256];
	host_only(registry_host, strlen(registry_host), reg, sizeof(reg));
	if (plain && !is_loopback(registry_host))
		return rung_err_set(err, EACCES,
				    "registry %s is plain HTTP: rung never sends credentials or "
				    "tokens in clear text outside loopback (serve it over https)",
				    registry_host);
	if (strcasecmp(wa->scheme, "Bearer"))
		return 0;
	bool https = !strncmp(wa->realm, "https://", 8);
	const char *hp = wa->realm + (https ? 8 : !strncmp(wa->realm, "http://", 7) ? 7 : 0);
	if (hp == wa->realm)
		return rung_err_set(err, EACCES, "token realm '%.100s' is not an http(s) URL",
				    wa->realm);
	size_t hl = strcspn(hp, "/?#");
	if (memchr(hp, '@', hl))
		return rung_err_set(err, EACCES, "token realm '%.100s' carries user info", wa->realm);
	char realm_hp[256], realm[256];
	snprintf(realm_hp, sizeof(realm_hp), "%.*s", (int)hl, hp);
	host_only(hp, hl, realm, sizeof(realm));
	if (!realm[0])
		return rung_err_set(err, EACCES, "token realm '%.100s' has no host", wa->realm);
	if (!https && !is_loopback(realm_hp))
		return rung_err_set(err, EACCES,
				    "token realm '%.100s' is not https: rung never sends credentials "
				    "in clear text outside loopback",
				    wa->realm);
	if (strcmp(realm, reg) && !host_listed(realm, token_hosts) &&
	    !(!strcmp(reg, "registry-1.docker.io") && !strcmp(realm, "auth.docker.io")))
		return rung_err_set(err, EACCES,
				    "token realm host %s is not the registry's (%s): refused; an "
				    "operator allows it with RUNG_REGISTRY_TOKEN_HOSTS=%s",
				    realm, reg, realm);
	return 0;
}

static int perform(struct reg *g, const char *url, const char *accept, struct resp *rs,
		   long *status, struct rung_err *err)
{
	curl_easy_reset(g->c);
	struct curl_slist *hdrs = NULL;
	if (accept)
		hdrs = curl_slist_append(hdrs, accept);
	if (g->auth[0])
		hdrs = curl_slist_append(hdrs, g->auth);
	curl_easy_setopt(g->c, CURLOPT_URL, url);
	curl_easy_setopt(g->c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(g->c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(g->c, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(g->c, CURLOPT_PROTOCOLS_STR, "http,https");
	/* an https registry is never followed down to plain http */
	curl_easy_setopt(g->c, CURLOPT_REDIR_PROTOCOLS_STR, g->plain ? "http,https" : "https");
	curl_easy_setopt(g->c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(g->c, CURLOPT_CONNECTTIMEOUT, 30L);
	if (rs->blob) { /* big layers on slow links: give up only when it stalls */
		curl_easy_setopt(g->c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
		curl_easy_setopt(g->c, CURLOPT_LOW_SPEED_TIME, g->timeout_s < 60 ? g->timeout_s : 60L);
	} else {
		curl_easy_setopt(g->c, CURLOPT_TIMEOUT, g->timeout_s);
	}
	curl_easy_setopt(g->c, CURLOPT_USERAGENT, "rung/0.1");
	curl_easy_setopt(g->c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(g->c, CURLOPT_HEADERDATA, rs);
	curl_easy_setopt(g->c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(g->c, CURLOPT_WRITEDATA, rs);
	CURLcode cc = curl_easy_perform(g->c);
	curl_slist_free_all(hdrs);
	if (rs->over)
		return rung_err_set(err, EFBIG, "GET %s: response larger than expected", url);
	if (rs->werr)
		return rung_err_sys(err, rs->werr, "GET %s: write", url);
	if (cc != CURLE_OK)
		return rung_err_set(err, cc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : ECONNREFUSED,
				    "GET %s: %s", url, curl_easy_strerror(cc));
	curl_easy_getinfo(g->c, CURLINFO_RESPONSE_CODE, status);
	return 0;
}

static int fetch_token(struct reg *g, const struct rfs_www_auth *wa, struct rung_err *err)
{
	char *svc = curl_easy_escape(g->c, wa->service, 0);
	char *scope = curl_easy_escape(g->c, wa->scope, 0);
	char url[2048];
	int n = snprintf(url, sizeof(url), "%s%sservice=%s&scope=%s", wa->realm,
			 strchr(wa->realm, '?') ? "&" : "?", svc ? svc : "", scope ? scope : "");
	curl_free(svc);
	curl_free(scope);
	if (n < 0 || (size_t)n >= sizeof(url))
		return rung_err_set(err, E2BIG, "token URL too long");
	g->auth[0] = '\0';
	if (g->user[0]) {
		cleanup_free char *cred = NULL;
		if (asprintf(&cred, "%s:%s", g->user, g->pass) < 0)
			return rung_err_set(err, ENOMEM, "out of memory");
		unsigned char b64[700];
		int bl = EVP_EncodeBlock(b64, (const unsigned char *)cred, (int)strlen(cred));
		if (bl < 0 || strlen(cred) > 500)
			return rung_err_set(err, E2BIG, "credentials too long");
		snprintf(g->auth, sizeof(g->auth), "Authorization: Basic %s", b64);
	}
	struct resp rs = { .fd = -1, .mem_max = MAX_TOKEN * 4 };
	long status = 0;
	int r = perform(g, url, NULL, &rs, &status, err);
	g->auth[0] = '\0';
	if (r < 0) {
		free(rs.mem);
		return rung_err_wrap(err, "token");
	}
	if (status != 200) {
		free(rs.mem);
		return rung_err_set(err, status == 401 || status == 403 ? EACCES : EPROTO,
				    "token server %s answered HTTP %ld", wa->realm, status);
	}
	json_t *j = rs.mem ? json_loadb(rs.mem, rs.len, 0, NULL) : NULL;
	free(rs.mem);
	json_t *t = json_object_get(j, "token");
	if (!json_is_string(t))
		t = json_object_get(j, "access_token");
	if (!json_is_string(t) || json_string_length(t) > MAX_TOKEN ||
	    strpbrk(json_string_value(t), "\r\n")) {
		json_decref(j);
		return rung_err_set(err, EPROTO, "token server %s: no usable token", wa->realm);
	}
	snprintf(g->auth, sizeof(g->auth), "Authorization: Bearer %s", json_string_value(t));
	json_decref(j);
	return 0;
}

/* GET with one round of authentication on 401. */
static int get(struct reg *g, const char *path, const char *accept, struct resp *rs,
	       struct rung_err *err)
{
	char url[1024];
	snprintf(url, sizeof(url), "%s%s", g->base, path);
	for (int attempt = 0;; attempt++) {
		long status = 0;
		rs->www_auth[0] = '\0';
		int r = perform(g, url, accept, rs, &status, err);
		if (r < 0)
			return r;
		if (status == 200)
			return 0;
		if (status == 401 && attempt == 0) {
			struct rfs_www_auth wa;
			if ((r = rfs_www_auth_parse(rs->www_auth, &wa, err)) < 0)
				return rung_err_wrap(err, "GET %s: HTTP 401", url);
			if ((r = rfs_auth_check(g->host, g->plain, &wa, g->token_hosts, err)) < 0)
				return rung_err_wrap(err, "GET %s: HTTP 401", url);
			if (!strcasecmp(wa.scheme, "Basic")) {
				if (!g->user[0])
					return rung_err_set(err, EACCES,
							    "GET %s: registry wants credentials "
							    "(RUNG_REGISTRY_USER/RUNG_REGISTRY_PASSWORD)",
							    url);
				cleanup_free char *cred = NULL;
				unsigned char b64[700];
				if (asprintf(&cred, "%s:%s", g->user, g->pass) < 0 || strlen(cred) > 500)
					return rung_err_set(err, E2BIG, "credentials too long");
				EVP_EncodeBlock(b64, (const unsigned char *)cred, (int)strlen(cred));
				snprintf(g->auth, sizeof(g->auth), "Authorization: Basic %s", b64);
			} else if ((r = fetch_token(g, &wa, err)) < 0) {
				return rung_err_wrap(err, "GET %s", url);
			}
			/* Start the body over. */
			if (rs->fd >= 0) {
				if (ftruncate(rs->fd, 0) < 0 || lseek(rs->fd, 0, SEEK_SET) < 0)
					return rung_err_sys(err, errno, "truncate download");
				EVP_DigestInit_ex(rs->md, EVP_sha256(), NULL);
			}
			free(rs->mem);
			rs->mem = NULL;
			rs->len = 0;
			continue;
		}
		return rung_err_set(err, status == 404 ? ENOENT : status == 401 || status == 403 ? EACCES : EPROTO,
				    "GET %s: HTTP %ld", url, status);
	}
}

/* A small document (manifest/config), verified when digest is known. */
static int get_doc(struct reg *g, const char *kind, const char *ref, const char *want_digest,
		   uint64_t want_size, char **out, size_t *len, char digest_out[RFS_DIGEST_MAX],
		   struct rung_err *err)
{
	char path[600];
	snprintf(path, sizeof(path), "/v2/%s/%s/%s", g->repo, kind, ref);
	struct resp rs = { .fd = -1, .mem_max = RFS_MAX_JSON };
	int r = get(g, path, strcmp(kind, "manifests") ? NULL : ACCEPT, &rs, err);
	if (r < 0) {
		free(rs.mem);
		return r;
	}
	char hex[RUNG_SHA256_HEX_LEN + 1];
	rung_sha256_hex(rs.mem ? rs.mem : "", rs.len, hex);
	if (!strcmp(kind, "manifests") && rfs_digest_valid(rs.content_digest) &&
	    strcmp(rs.content_digest + 7, hex)) {
		free(rs.mem);
		return rung_err_set(err, EBADMSG,
				    "manifest %s: content has sha256:%s but the registry says %s", ref,
				    hex, rs.content_digest);
	}
	if ((want_digest && strcmp(hex, want_digest + 7)) ||
	    (want_size != UINT64_MAX && rs.len != want_size)) {
		free(rs.mem);
		return rung_err_set(err, EBADMSG,
				    "%s %s: content does not match its descriptor (sha256:%s, %zu bytes)",
				    kind, ref, hex, rs.len);
	}
	snprintf(digest_out, RFS_DIGEST_MAX, "sha256:%s", hex);
	*out = rs.mem ? rs.mem : strdup("");
	*len = rs.len;
	return 0;
}

static int get_layer(struct reg *g, struct rfs_store *s, struct rfs_stage *st,
		     const struct rfs_desc *d, rfs_progress_fn progress, void *ud,
		     struct rung_err *err)
{
	if (rfs_blob_present(s, d->digest, d->size) && rfs_layer_present(s, d->digest)) {
		if (progress)
			progress(d->digest, d->size, d->size, ud);
		return 0;
	}
	char name[32], path[600];
	snprintf(name, sizeof(name), "dl-%u", st->seq++);
	cleanup_close int fd = openat(st->dfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return rung_err_sys(err, errno, "stage download");
	struct resp rs = { .fd = fd, .md = EVP_MD_CTX_new(), .limit = d->size, .name = d->digest,
			   .progress = progress, .ud = ud, .blob = true };
	if (!rs.md)
		return rung_err_set(err, ENOMEM, "out of memory");
	EVP_DigestInit_ex(rs.md, EVP_sha256(), NULL);
	snprintf(path, sizeof(path), "/v2/%s/blobs/%s", g->repo, d->digest);
	int r = get(g, path, NULL, &rs, err);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned ml = 0;
	EVP_DigestFinal_ex(rs.md, md, &ml);
	EVP_MD_CTX_free(rs.md);
	if (r < 0)
		return rung_err_wrap(err, "layer %s", d->digest);
	char hex[65];
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	if (strcmp(hex, d->digest + 7) || rs.len != d->size)
		return rung_err_set(err, EBADMSG,
				    "layer %s: download does not match its descriptor (sha256:%s, %zu "
				    "bytes; expected %llu)",
				    d->digest, hex, rs.len, (unsigned long long)d->size);
	return rfs_layer_ingest_staged(s, st, name, d, err);
}

static int pull(struct reg *g, struct rfs_store *s, struct rfs_stage *st, const struct rfs_ref *pr,
		const char *key, rfs_progress_fn progress, void *ud, struct rfs_image_info *out,
		struct rung_err *err)
{
	cleanup_free char *mbuf = NULL;
	size_t mlen = 0;
	char mdigest[RFS_DIGEST_MAX];
	const char *ref = pr->digest[0] ? pr->digest : pr->tag;
	int r = get_doc(g, "manifests", ref, pr->digest[0] ? pr->digest : NULL, UINT64_MAX, &mbuf,
			&mlen, mdigest, err);
	if (r < 0)
		return r;
	struct rfs_manifest m;
	if ((r = rfs_manifest_parse(mbuf, mlen, RFS_MEDIA_UNKNOWN, &m, err)) < 0)
		return rung_err_wrap(err, "manifest %s", ref);
	if (m.media == RFS_MEDIA_OCI_INDEX || m.media == RFS_MEDIA_DOCKER_LIST) {
		const struct rfs_desc *d;
		char want[RFS_DIGEST_MAX];
		uint64_t wsize = 0;
		r = rfs_index_pick(&m, "linux", "amd64", &d, err);
		if (r == 0)
			snprintf(want, sizeof(want), "%s", d->digest), wsize = d->size;
		rfs_manifest_release(&m);
		if (r < 0)
			return r;
		free(mbuf);
		mbuf = NULL;
		if ((r = get_doc(g, "manifests", want, want, wsize, &mbuf, &mlen, mdigest, err)) < 0)
			return r;
		if ((r = rfs_manifest_parse(mbuf, mlen, RFS_MEDIA_UNKNOWN, &m, err)) < 0)
			return rung_err_wrap(err, "manifest %s", want);
		if (m.media != RFS_MEDIA_OCI_MANIFEST && m.media != RFS_MEDIA_DOCKER_MANIFEST) {
			rfs_manifest_release(&m);
			return rung_err_set(err, EINVAL, "manifest %s: nested index", want);
		}
	}
	cleanup_free char *cbuf = NULL;
	size_t clen = 0;
	char cdig[RFS_DIGEST_MAX];
	struct rfs_image_config cfg = { 0 };
	r = get_doc(g, "blobs", m.config.digest, m.config.digest, m.config.size, &cbuf, &clen, cdig,
		    err);
	if (r == 0)
		r = rfs_config_parse(cbuf, clen, &cfg, err);
	rfs_config_release(&cfg);
	for (size_t i = 0; r == 0 && i < m.n_descs; i++)
		r = get_layer(g, s, st, &m.descs[i], progress, ud, err);
	if (r == 0)
		r = rfs_blob_put(s, st, m.config.digest, cbuf, clen, err);
	rfs_manifest_release(&m);
	if (r == 0)
		r = rfs_image_commit(s, st, mdigest, mbuf, mlen, key, out, err);
	return r;
}

int rfs_image_pull(struct rfs_store *s, const char *refstr, const struct rfs_pull_opts *opts,
		   rfs_progress_fn progress, void *ud, struct rfs_image_info *out,
		   struct rung_err *err)
{
	static const struct rfs_pull_opts none = { 0 };
	if (!opts)
		opts = &none;
	if (out)
		memset(out, 0, sizeof(*out));
	struct rfs_ref pr;
	int r = rfs_ref_parse(refstr, &pr, err);
	if (r < 0)
		return r;
	if (!pr.repo[0])
		return rung_err_set(err, EINVAL, "pull '%s': a repository name is needed", refstr);
	char key[RFS_REF_MAX];
	if (opts->tag) {
		struct rfs_ref tr;
		if ((r = rfs_ref_parse(opts->tag, &tr, err)) < 0)
			return rung_err_wrap(err, "tag");
		rfs_ref_tag_key(&tr, key, sizeof(key));
	} else if (pr.tag[0]) {
		rfs_ref_tag_key(&pr, key, sizeof(key));
	} else {
		return rung_err_set(err, EINVAL, "pull '%s' by digest: give opts->tag", refstr);
	}
	struct reg *g = calloc(1, sizeof(*g));
	if (!g)
		return rung_err_set(err, ENOMEM, "out of memory");
	const char *host = strcmp(pr.registry, "docker.io") ? pr.registry : "registry-1.docker.io";
	bool plain = opts->insecure || is_loopback(host);
	snprintf(g->base, sizeof(g->base), "%s://%s", plain ? "http" : "https", host);
	g->plain = plain;
	snprintf(g->host, sizeof(g->host), "%s", host);
	const char *th = opts->token_hosts;
	snprintf(g->token_hosts, sizeof(g->token_hosts), "%s", th ? th : "");
	snprintf(g->repo, sizeof(g->repo), "%s", pr.repo);
	const char *u = opts->username, *p = opts->password;
	snprintf(g->user, sizeof(g->user), "%s", u ? u : "");
	snprintf(g->pass, sizeof(g->pass), "%s", p ? p : "");
	g->timeout_s = opts->timeout_s > 0 ? opts->timeout_s : 300;
	g->c = curl_easy_init();
	if (!g->c) {
		free(g);
		return rung_err_set(err, ENOMEM, "curl_easy_init failed");
	}
	struct rfs_stage st;
	r = rfs_stage_begin(s, &st, err);
	if (r == 0) {
		r = pull(g, s, &st, &pr, key, progress, ud, out, err);
		rfs_stage_end(s, &st);
	}
	if (r < 0)
		rung_err_wrap(err, "pull %s", refstr);
	curl_easy_cleanup(g->c);
	explicit_bzero(g, sizeof(*g));
	free(g);
	return r;
}
