/* server/tokens.c: the tokens file and authentication (constant-time, digests only). */
#include <ctype.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/util.h"
#include "server/server.h"

#define TOKEN_MIN 16
#define TOKEN_MAX 512
#define TOKENS_FILE_MAX (1u << 20)
#define TOKENS_MAX_ENTRIES 65536

void srv_tokens_release(struct srv_tokens *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++) {
		free(t->v[i].scope);
		OPENSSL_cleanse(t->v[i].digest, sizeof(t->v[i].digest));
	}
	free(t->v);
	t->v = NULL;
	t->n = 0;
	for (size_t i = 0; i < t->n_lim; i++)
		free(t->lim[i].scope);
	free(t->lim);
	t->lim = NULL;
	t->n_lim = 0;
}

static bool scope_ok(const char *s, size_t len)
{
	if (len == 0 || len > SRV_MAX_KEY_PART)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isgraph((unsigned char)s[i]))
			return false;
	return true;
}

static int parse_uid(const char *s, size_t len, uid_t *out)
{
	char buf[16];
	uint64_t v;
	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (rung_parse_u64(buf, &v) < 0 || v >= (uid_t)-1)
		return -EINVAL;
	*out = (uid_t)v;
	return 0;
}

/* Split a line into exactly two whitespace-separated words. */
static int two_words(const char *line, size_t len, const char **w1, size_t *l1, const char **w2,
		     size_t *l2)
{
	const char *p = line, *end = line + len;
	const char *w[3] = {0};
	size_t l[3] = {0};
	int n = 0;
	while (p < end) {
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (p == end)
			break;
		if (n == 3)
			return -EINVAL;
		w[n] = p;
		while (p < end && *p != ' ' && *p != '\t')
			p++;
		l[n] = (size_t)(p - w[n]);
		n++;
	}
	if (n != 2)
		return -EINVAL;
	*w1 = w[0], *l1 = l[0], *w2 = w[1], *l2 = l[1];
	return 0;
}

static int add_entry(struct srv_tokens *t, struct srv_cred *c, struct rung_err *err)
{
	if (t->n >= TOKENS_MAX_ENTRIES)
		return rung_err_set(err, E2BIG, "line %u: more than %u entries", c->line,
				    TOKENS_MAX_ENTRIES);
	for (size_t i = 0; i < t->n; i++) {
		const struct srv_cred *o = &t->v[i];
		bool tokenish = (o->kind == SRV_CRED_TOKEN || o->kind == SRV_CRED_ADMIN) &&
				(c->kind == SRV_CRED_TOKEN || c->kind == SRV_CRED_ADMIN);
		if (o->kind != c->kind && !tokenish)
			continue;
		bool same = tokenish			   ? !memcmp(o->digest, c->digest, 32)
			    : c->kind == SRV_CRED_UNIX_UID ? o->uid == c->uid
							   : true;
		if (same)
			return rung_err_set(
			    err, EEXIST,
			    "line %u: credential already given on line %u (each maps "
			    "to exactly one scope)",
			    c->line, o->line);
	}
	struct srv_cred *nv = realloc(t->v, (t->n + 1) * sizeof(*nv));
	if (!nv)
		return rung_err_set(err, ENOMEM, "out of memory");
	t->v = nv;
	t->v[t->n++] = *c;
	return 0;
}

/* "limits SCOPE|* KEY=VALUE...": starts from the defaults; one line per scope. */
static int limits_line(struct srv_tokens *t, const char *p, size_t len, unsigned line,
		       struct rung_err *err)
{
	const char *end = p + len;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	const char *sc = p;
	while (p < end && *p != ' ' && *p != '\t')
		p++;
	size_t sl = (size_t)(p - sc);
	if (!(sl == 1 && *sc == '*') && !scope_ok(sc, sl))
		return rung_err_set(err, EINVAL, "line %u: limits: expected a scope or *", line);
	for (size_t i = 0; i < t->n_lim; i++)
		if (strlen(t->lim[i].scope) == sl && !memcmp(t->lim[i].scope, sc, sl))
			return rung_err_set(err, EEXIST,
					    "line %u: limits for %.*s already on line %u", line,
					    (int)sl, sc, t->lim[i].line);
	struct srv_scope_limits e = {.l = srv_limits_default, .line = line};
	int r = srv_limits_line_parse(p, (size_t)(end - p), &e.l, err);
	if (r < 0)
		return rung_err_wrap(err, "line %u: limits", line);
	struct srv_scope_limits *nv = realloc(t->lim, (t->n_lim + 1) * sizeof(*nv));
	if (!nv || !(e.scope = strndup(sc, sl))) {
		if (nv)
			t->lim = nv;
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	t->lim = nv;
	t->lim[t->n_lim++] = e;
	return 0;
}

static bool word_is(const char *p, const char *end, const char *w)
{
	size_t n = strlen(w);
	return (size_t)(end - p) > n && !memcmp(p, w, n) && (p[n] == ' ' || p[n] == '\t');
}

/* The two words of a credential line: "TOKEN SCOPE", "uid UID SCOPE" (a Unix-socket client
 * running as UID), "admin TOKEN" (the scope is fixed); ce ends the line's content. */
static int cred_words(const char *q, const char *ce, unsigned lineno, const char **w1, size_t *l1,
		      const char **w2, size_t *l2, bool *admin, bool *uidline, struct rung_err *err)
{
	if (word_is(q, ce, "uid")) {
		/* "uid UID SCOPE": a Unix-socket client running as UID */
		if (two_words(q + 3, (size_t)(ce - q - 3), w1, l1, w2, l2) < 0) {
			return rung_err_set(err, EINVAL, "line %u: expected \"uid UID SCOPE\"",
					    lineno);
		}
		*uidline = true;
	} else if (word_is(q, ce, "admin")) {
		/* "admin TOKEN": the token is the second word, the scope is fixed */
		*w1 = q + 5;
		while (**w1 == ' ' || **w1 == '\t')
			(*w1)++;
		*l1 = (size_t)(ce - *w1);
		if (memchr(*w1, ' ', *l1) || memchr(*w1, '\t', *l1)) {
			return rung_err_set(err, EINVAL, "line %u: expected \"admin TOKEN\"",
					    lineno);
		}
		*admin = true;
		*w2 = SRV_ADMIN_SCOPE;
		*l2 = strlen(*w2);
	} else if (two_words(q, (size_t)(ce - q), w1, l1, w2, l2) < 0) {
		return rung_err_set(err, EINVAL, "line %u: expected \"TOKEN SCOPE\"", lineno);
	}
	if (!*admin && !scope_ok(*w2, *l2)) {
		return rung_err_set(err, EINVAL, "line %u: bad scope", lineno);
	}
	return 0;
}

/* One credential line (not a limits line) into t. */
static int cred_line(struct srv_tokens *t, const char *q, const char *ce, unsigned lineno,
		     struct rung_err *err)
{
	const char *w1, *w2;
	size_t l1, l2;
	bool admin = false, uidline = false;
	int r = cred_words(q, ce, lineno, &w1, &l1, &w2, &l2, &admin, &uidline, err);
	if (r < 0)
		return r;
	struct srv_cred c = {.line = lineno};
	static const char uidp[] = "unix-peer-uid:";
	if (admin) {
		c.kind = SRV_CRED_ADMIN;
	} else if (uidline) {
		c.kind = SRV_CRED_UNIX_UID;
		if (parse_uid(w1, l1, &c.uid) < 0) {
			return rung_err_set(err, EINVAL, "line %u: bad uid", lineno);
		}
	} else if (l1 == 1 && w1[0] == '-') {
		c.kind = SRV_CRED_UNIX_ANY;
	} else if (l1 > sizeof(uidp) - 1 && !memcmp(w1, uidp, sizeof(uidp) - 1)) {
		c.kind = SRV_CRED_UNIX_UID;
		if (parse_uid(w1 + sizeof(uidp) - 1, l1 - (sizeof(uidp) - 1), &c.uid) < 0) {
			return rung_err_set(err, EINVAL, "line %u: bad uid", lineno);
		}
	}
	if (c.kind == SRV_CRED_TOKEN || c.kind == SRV_CRED_ADMIN) {
		if (l1 < TOKEN_MIN || l1 > TOKEN_MAX) {
			return rung_err_set(err, EINVAL, "line %u: token must be %d..%d bytes",
					    lineno, TOKEN_MIN, TOKEN_MAX);
		}
		for (size_t i = 0; i < l1; i++)
			if (!isgraph((unsigned char)w1[i])) {
				return rung_err_set(err, EINVAL,
						    "line %u: token has a non-printable "
						    "byte",
						    lineno);
			}
		SHA256((const unsigned char *)w1, l1, c.digest);
	}
	if (!(c.scope = strndup(w2, l2))) {
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	if ((r = add_entry(t, &c, err)) < 0)
		free(c.scope);
	return r;
}

int srv_tokens_parse(const char *text, size_t len, struct srv_tokens *out, struct rung_err *err)
{
	struct srv_tokens t = {0};
	const char *p = text, *end = text + len;
	unsigned lineno = 0;
	int r = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		lineno++;
		const char *hash = memchr(p, '#', (size_t)(le - p));
		const char *ce = hash ? hash : le;
		while (ce > p && (ce[-1] == '\r' || ce[-1] == ' ' || ce[-1] == '\t'))
			ce--;
		const char *q = p;
		while (q < ce && (*q == ' ' || *q == '\t'))
			q++;
		if (q < ce) {
			if (memchr(q, '\0', (size_t)(ce - q))) {
				r = rung_err_set(err, EINVAL, "line %u: NUL byte", lineno);
				goto fail;
			}
			if (word_is(q, ce, "limits")) {
				if ((r = limits_line(&t, q + 6, (size_t)(ce - q - 6), lineno,
						     err)) < 0)
					goto fail;
				p = nl ? nl + 1 : end;
				continue;
			}
			if ((r = cred_line(&t, q, ce, lineno, err)) < 0)
				goto fail;
		}
		p = nl ? nl + 1 : end;
	}
	*out = t;
	return 0;
fail:
	srv_tokens_release(&t);
	return r;
}

int srv_tokens_load(const char *path, struct srv_tokens *out, struct rung_err *err)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
	if (fd < 0)
		return rung_err_sys(err, errno, "tokens file %s", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return rung_err_sys(err, errno, "tokens file %s", path);
	if (!S_ISREG(st.st_mode))
		return rung_err_set(err, EINVAL, "tokens file %s: not a regular file", path);
	if (st.st_mode & 0007)
		return rung_err_set(err, EPERM,
				    "tokens file %s: mode %04o is world-accessible (chmod o-rwx)",
				    path, (unsigned)(st.st_mode & 07777));
	cleanup_free char *text = NULL;
	size_t len;
	int r = rung_read_fd_all(fd, TOKENS_FILE_MAX, &text, &len, err);
	if (r < 0)
		return rung_err_wrap(err, "tokens file %s", path);
	r = srv_tokens_parse(text, len, out, err);
	OPENSSL_cleanse(text, len);
	if (r < 0)
		return rung_err_wrap(err, "tokens file %s", path);
	return 0;
}

const char *srv_auth(const struct srv_tokens *t, const struct srv_caller *c)
{
	if (c->bad_authorization)
		return NULL;
	if (c->bearer) {
		unsigned char d[32];
		size_t blen = strlen(c->bearer);
		SHA256((const unsigned char *)c->bearer, blen, d);
		const char *scope = NULL;
		/* Compare against every token so the time does not depend on which matched. */
		for (size_t i = 0; i < t->n; i++) {
			const struct srv_cred *e = &t->v[i];
			if (e->kind != SRV_CRED_TOKEN && e->kind != SRV_CRED_ADMIN)
				continue;
			if (CRYPTO_memcmp(e->digest, d, sizeof(d)) == 0)
				scope = e->scope;
		}
		if (blen < TOKEN_MIN || blen > TOKEN_MAX)
			scope = NULL;
		return scope;
	}
	if (!c->unix_peer)
		return NULL;
	const char *any = NULL;
	for (size_t i = 0; i < t->n; i++) {
		const struct srv_cred *e = &t->v[i];
		if (e->kind == SRV_CRED_UNIX_UID && e->uid == c->uid)
			return e->scope;
		if (e->kind == SRV_CRED_UNIX_ANY)
			any = e->scope;
	}
	return any;
}
