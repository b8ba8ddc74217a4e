/*
 * cli/remote.c: the CLI as a client of `rung serve` (HTTP/1.1 on its Unix socket), for users
 * who are not root: which socket, whether it is usable, one request, HTTP errors as rung_errs.
 *
 * libcurl is loaded with dlopen on the first remote request: build/rung starts on every
 * command (see cli/module.mk), and the local (root) path must not pay libcurl's loader time.
 */
#include <curl/curl.h>
#include <errno.h>
#include <grp.h>
#include <jansson.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "common/dl.h"
#include "common/err.h"
#include "common/util.h"

struct curl_fns {
	void *dl;
	CURL *(*init)(void);
	CURLcode (*setopt)(CURL *, CURLoption, ...);
	CURLcode (*perform)(CURL *);
	CURLcode (*getinfo)(CURL *, CURLINFO, ...);
	void (*cleanup)(CURL *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	const char *(*strerror)(CURLcode);
};

static int curl_load(struct curl_fns *f, struct rung_err *err)
{
	static const char *const names[] = {"libcurl.so.4", "libcurl-gnutls.so.4", NULL};
	const struct rung_dl_sym syms[] = {
	    {(void **)&f->init, "curl_easy_init"},
	    {(void **)&f->setopt, "curl_easy_setopt"},
	    {(void **)&f->perform, "curl_easy_perform"},
	    {(void **)&f->getinfo, "curl_easy_getinfo"},
	    {(void **)&f->cleanup, "curl_easy_cleanup"},
	    {(void **)&f->slist_append, "curl_slist_append"},
	    {(void **)&f->slist_free_all, "curl_slist_free_all"},
	    {(void **)&f->strerror, "curl_easy_strerror"},
	};
	char why[200];
	if (!(f->dl = rung_dl_load(names, syms, RUNG_ARRAY_SIZE(syms), why, sizeof(why))))
		return rung_err_set(err, ENOENT,
				    "the daemon client needs libcurl (libcurl.so.4): install "
				    "libcurl4 (%s)",
				    why);
	return 0;
}

void cli_remote_close(struct cli *c)
{
	/* libcurl stays loaded (no dlclose): build/rung is linked statically, and the destructors
	 * of libcurl's TLS library fault when run by a static program's dlclose; the process is
	 * about to exit anyway. */
	free(c->curl);
	c->curl = NULL;
}

int cli_remote_check(struct cli *c, struct rung_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(c->socket) >= sizeof(sa.sun_path))
		return rung_err_set(err, ENAMETOOLONG, "socket path %s: too long", c->socket);
	memcpy(sa.sun_path, c->socket, strlen(c->socket) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return rung_err_sys(err, errno, "socket");
	int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	int e = errno;
	close(fd);
	if (r == 0)
		return 0;
	struct stat st;
	if ((e == EACCES || e == EPERM) && stat(c->socket, &st) == 0) {
		struct group *g = getgrgid(st.st_gid);
		struct passwd *p = getpwuid(st.st_uid);
		snprintf(
		    c->hint, sizeof(c->hint),
		    "rung: the socket's owner is %s, its group %s, its mode %04o: join that "
		    "group (sudo usermod -aG %s $USER, then log in again), or run rung as root\n",
		    p ? p->pw_name : "?", g ? g->gr_name : "?", (unsigned)(st.st_mode & 07777),
		    g ? g->gr_name : "GROUP");
		return rung_err_set(err, EACCES,
				    "cannot use the rung daemon's socket %s: permission denied",
				    c->socket);
	}
	if (e == ENOENT || e == ECONNREFUSED) { /* (not ENOENT: exit 3 means "no such sandbox") */
		snprintf(
		    c->hint, sizeof(c->hint),
		    "rung: start it (sudo systemctl start rung, or as root: rung serve --socket "
		    "%s --tokens FILE), or run rung as root\n",
		    c->socket);
		return rung_err_set(err, ECONNREFUSED, "no rung daemon listens on %s", c->socket);
	}
	return rung_err_sys(err, e, "connect %s", c->socket);
}

int cli_remote_select(struct cli *c, const char *env_socket, bool local, struct rung_err *err)
{
	if (!c->socket && env_socket && *env_socket)
		c->socket = env_socket;
	if (c->socket) {
		c->remote = true;
		return 0;
	}
	if (local || c->state_dir)
		return 0; /* the local store, as before */
	struct stat st;
	if (stat(CLI_DEFAULT_SOCKET, &st) == 0 && S_ISSOCK(st.st_mode)) {
		c->socket = CLI_DEFAULT_SOCKET;
		c->remote = true;
		return 0;
	}
	snprintf(
	    c->hint, sizeof(c->hint),
	    "rung: either run rung as root (sudo rung ...),\n"
	    "rung: or start the daemon (sudo systemctl start rung) and join the group that "
	    "owns its socket,\n"
	    "rung: or point --socket PATH or RUNG_SOCKET at a running `rung serve`;\n"
	    "rung: the daemon's tokens file maps your uid to a scope: a line \"uid %u SCOPE\"\n",
	    (unsigned)getuid());
	return rung_err_set(err, EACCES, "not root, and no rung daemon socket at %s",
			    CLI_DEFAULT_SOCKET);
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct cli_http *h = ud;
	size_t len = size * n;
	if (h->on_data)
		return h->on_data(h, p, len) < 0 ? 0 : len;
	if (h->len + len + 1 > h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 65536;
		while (cap < h->len + len + 1)
			cap *= 2;
		char *nb = realloc(h->body, cap);
		if (!nb)
			return 0;
		h->body = nb;
		h->cap = cap;
	}
	memcpy(h->body + h->len, p, len);
	h->len += len;
	h->body[h->len] = '\0';
	return len;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c_, curl_off_t d)
{
	struct cli_http *h = ud;
	return h->cancel && h->cancel(h) ? 1 : 0;
}

/* errno for an HTTP error status: the inverse of server/request.c's srv_code_from_errno. */
static int status_errno(long s)
{
	switch (s) {
	case 400:
	case 405:
	case 415:
		return EINVAL;
	case 401:
	case 403:
		return EACCES;
	case 404:
		return ENOENT;
	case 409:
		return EBUSY;
	case 413:
		return EFBIG;
	case 429:
	case 503:
		return EAGAIN;
	case 504:
		return ETIMEDOUT;
	default:
		return EIO;
	}
}

int cli_http_error(struct cli *c, struct cli_http *h, struct rung_err *err)
{
	json_t *j = h->body ? json_loadb(h->body, h->len, 0, NULL) : NULL;
	int r = cli_http_error_of(c, h->status, j ? json_object_get(j, "error") : NULL, err);
	json_decref(j);
	return r;
}

int cli_http_error_of(struct cli *c, long status, json_t *e, struct rung_err *err)
{
	const char *msg = e ? json_string_value(json_object_get(e, "message")) : NULL;
	int code = status_errno(status);
	/* the errno's stable name, where the daemon gives one, is more precise than the status */
	int precise = e ? rung_errno_from_code(json_string_value(json_object_get(e, "reason"))) : 0;
	if (precise)
		code = precise;
	if (status == 401 && !c->token) {
		snprintf(c->hint, sizeof(c->hint),
			 "rung: ask its administrator for a line \"uid %u SCOPE\" in its tokens "
			 "file, or set RUNG_TOKEN to a token of yours\n",
			 (unsigned)getuid());
		return rung_err_set(err, code, "the rung daemon on %s has no scope for uid %u",
				    c->socket, (unsigned)getuid());
	}
	return rung_err_set(err, code, "%s", msg ? msg : "the daemon answered an error");
}

int cli_lines_feed(struct cli_lines *l, const char *p, size_t len,
		   int (*fn)(void *ud, const char *line, size_t len), void *ud)
{
	for (size_t i = 0; i < len; i++) {
		if (p[i] == '\n') {
			if (fn(ud, l->line ? l->line : "", l->len) < 0)
				return -1;
			l->len = 0;
			continue;
		}
		if (l->len + 1 >= l->cap) {
			size_t cap = l->cap ? l->cap * 2 : 65536;
			char *nl = realloc(l->line, cap);
			if (!nl)
				return -1;
			l->line = nl;
			l->cap = cap;
		}
		l->line[l->len++] = p[i];
	}
	return 0;
}

json_t *cli_env_json(const char *const *env)
{
	json_t *e = json_object();
	for (; env && *env; env++) {
		const char *eq = strchr(*env, '=');
		char *k = eq ? strndup(*env, (size_t)(eq - *env)) : NULL;
		if (k)
			json_object_set_new(e, k, json_string(eq + 1));
		free(k);
	}
	return e;
}

int cli_lines_end(struct cli_lines *l, int (*fn)(void *ud, const char *line, size_t len),
		  void *ud)
{
	int r = l->len ? fn(ud, l->line, l->len) : 0;
	free(l->line);
	*l = (struct cli_lines){0};
	return r;
}

/* Percent-encode s (every byte but RFC 3986's unreserved ones) onto out. */
void cli_url_pct(char *out, size_t n, const char *s)
{
	size_t o = strlen(out);
	for (; *s && o + 4 < n; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '~')
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, n - o, "%%%02X", ch);
	}
	out[o] = '\0';
}

void cli_url_sb(char *out, size_t n, const char *id, const char *tail)
{
	snprintf(out, n, "/v1/sandboxes/");
	cli_url_pct(out, n, id);
	if (tail)
		snprintf(out + strlen(out), n - strlen(out), "%s", tail);
}

/* One request that must answer 2xx; the body is in h. */
int cli_http_call(struct cli *c, struct cli_http *h, const char *method, const char *path,
		  const char *const *hdrs, const void *body, size_t blen, struct rung_err *err)
{
	int r = cli_http_do(c, h, method, path, hdrs, body, blen, err);
	if (r < 0)
		return r;
	if (h->status < 200 || h->status > 299)
		return cli_http_error(c, h, err);
	return 0;
}

void cli_http_release(struct cli_http *h)
{
	free(h->body);
	h->body = NULL;
	h->len = h->cap = 0;
}

int cli_http_do(struct cli *c, struct cli_http *h, const char *method, const char *path,
		const char *const *headers, const void *body, size_t blen, struct rung_err *err)
{
	int r;
	if (!c->curl) {
		if (!(c->curl = calloc(1, sizeof(*c->curl))))
			return rung_err_set(err, ENOMEM, "out of memory");
		if ((r = curl_load(c->curl, err)) < 0)
			return r;
	}
	const struct curl_fns *f = c->curl;
	CURL *k = f->init();
	if (!k)
		return rung_err_set(err, ENOMEM, "curl_easy_init failed");
	struct curl_slist *hl = NULL;
	char auth[600], url[4200];
	if (c->token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->token);
		hl = f->slist_append(hl, auth);
	}
	hl = f->slist_append(hl, "Expect:");
	for (; headers && *headers; headers++)
		hl = f->slist_append(hl, *headers);
	snprintf(url, sizeof(url), "http://rung%s", path);
	f->setopt(k, CURLOPT_UNIX_SOCKET_PATH, c->socket);
	f->setopt(k, CURLOPT_URL, url);
	f->setopt(k, CURLOPT_CUSTOMREQUEST, method);
	f->setopt(k, CURLOPT_HTTPHEADER, hl);
	f->setopt(k, CURLOPT_WRITEFUNCTION, on_body);
	f->setopt(k, CURLOPT_WRITEDATA, h);
	f->setopt(k, CURLOPT_NOSIGNAL, 1L);
	f->setopt(k, CURLOPT_XFERINFOFUNCTION, on_progress);
	f->setopt(k, CURLOPT_XFERINFODATA, h);
	f->setopt(k, CURLOPT_NOPROGRESS, 0L);
	if (body || !strcmp(method, "POST") || !strcmp(method, "PUT")) {
		f->setopt(k, CURLOPT_POSTFIELDS, body ? body : "");
		f->setopt(k, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? blen : 0));
	}
	CURLcode cc = f->perform(k);
	long status = 0;
	f->getinfo(k, CURLINFO_RESPONSE_CODE, &status);
	h->status = status;
	f->cleanup(k);
	f->slist_free_all(hl);
	if (cc == CURLE_ABORTED_BY_CALLBACK || (cc == CURLE_WRITE_ERROR && h->on_data))
		return rung_err_set(err, ECANCELED, "request cancelled");
	if (cc != CURLE_OK) {
		if ((r = cli_remote_check(c, err)) < 0)
			return r;
		return rung_err_set(err, EIO, "the rung daemon on %s: %s", c->socket,
				    f->strerror(cc));
	}
	return 0;
}
