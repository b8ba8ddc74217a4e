/* rootfs/ref.c: image references and digests (pure). */
#include <stdio.h>
#include <string.h>

#include "rootfs/rfs.h"

bool rfs_digest_valid(const char *d)
{
	if (!d || strncmp(d, "sha256:", 7))
		return false;
	size_t n = 0;
	for (const char *p = d + 7; *p; p++, n++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return n == 64;
}

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One path component: [a-z0-9]+ ((\.|_|__|-+)[a-z0-9]+)* */
static bool component_valid(const char *s, size_t n)
{
	if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (is_lower_alnum(c) || c == '-')
			continue;
		if (c == '.' || c == '_') {
			if (c == '_' && i + 1 < n && s[i + 1] == '_')
				i++;
			if (i + 1 >= n || !is_lower_alnum(s[i + 1]))
				return false;
			continue;
		}
		return false;
	}
	return true;
}

static bool repo_valid(const char *r)
{
	if (!*r)
		return false;
	for (const char *p = r;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (!component_valid(p, n))
			return false;
		if (!slash)
			return true;
		p = slash + 1;
	}
}

static bool tag_valid(const char *t)
{
	size_t n = strlen(t);
	if (n == 0 || n > 127)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = t[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			  c == '_' || (i > 0 && (c == '.' || c == '-'));
		if (!ok)
			return false;
	}
	return true;
}

static bool host_valid(const char *h)
{
	if (!*h)
		return false;
	for (const char *p = h; *p; p++) {
		char c = *p;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '-' || c == ':' || c == '[' || c == ']'))
			return false;
	}
	return true;
}

int rfs_ref_parse(const char *s, struct rfs_ref *out, struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	if (!s || !*s)
		return rung_err_set(err, EINVAL, "image reference is empty");
	char buf[512];
	if (strlen(s) >= sizeof(buf))
		return rung_err_set(err, ENAMETOOLONG, "image reference too long: %.64s...", s);
	snprintf(buf, sizeof(buf), "%s", s);
	snprintf(out->registry, sizeof(out->registry), "docker.io");

	/* A bare digest: "sha256:<hex>" or "@sha256:<hex>". */
	char *at = strchr(buf, '@');
	if (!at && !strncmp(buf, "sha256:", 7)) {
		if (!rfs_digest_valid(buf))
			return rung_err_set(err, EINVAL,
					    "image reference '%s': bad digest (want sha256:<64 hex>)",
					    s);
		snprintf(out->digest, sizeof(out->digest), "%.71s", buf);
		return 0;
	}
	if (at) {
		*at = '\0';
		if (!rfs_digest_valid(at + 1))
			return rung_err_set(err, EINVAL,
					    "image reference '%s': bad digest (want sha256:<64 hex>)",
					    s);
		snprintf(out->digest, sizeof(out->digest), "%.71s", at + 1);
		if (!buf[0])
			return 0;
	}

	char *name = buf;
	char *slash = strchr(name, '/');
	if (slash) {
		size_t hl = (size_t)(slash - name);
		bool is_host = memchr(name, '.', hl) || memchr(name, ':', hl) ||
			       (hl == 9 && !strncmp(name, "localhost", 9));
		if (is_host) {
			*slash = '\0';
			if (!host_valid(name) || strlen(name) >= sizeof(out->registry))
				return rung_err_set(err, EINVAL,
						    "image reference '%s': bad registry host '%s'",
						    s, name);
			snprintf(out->registry, sizeof(out->registry), "%.127s", name);
			out->explicit_registry = true;
			name = slash + 1;
		}
	}
	char *colon = strrchr(name, ':');
	if (colon && !strchr(colon, '/')) {
		*colon = '\0';
		if (!tag_valid(colon + 1))
			return rung_err_set(err, EINVAL, "image reference '%s': bad tag '%s'", s,
					    colon + 1);
		snprintf(out->tag, sizeof(out->tag), "%.127s", colon + 1);
	}
	if (!strcmp(out->registry, "index.docker.io") ||
	    !strcmp(out->registry, "registry-1.docker.io"))
		snprintf(out->registry, sizeof(out->registry), "docker.io");
	if (!repo_valid(name))
		return rung_err_set(err, EINVAL,
				    "image reference '%s': bad repository name '%s' (lowercase "
				    "[a-z0-9._-] components)",
				    s, name);
	bool docker = !strcmp(out->registry, "docker.io");
	int n = snprintf(out->repo, sizeof(out->repo), "%s%s",
			 docker && !strchr(name, '/') ? "library/" : "", name);
	if (n < 0 || (size_t)n >= sizeof(out->repo))
		return rung_err_set(err, ENAMETOOLONG, "image reference '%s': name too long", s);
	if (!out->tag[0] && !out->digest[0])
		snprintf(out->tag, sizeof(out->tag), "latest");
	return 0;
}

void rfs_ref_tag_key(const struct rfs_ref *r, char *out, size_t n)
{
	const char *tag = r->tag[0] ? r->tag : "latest";
	if (!strcmp(r->registry, "docker.io")) {
		const char *repo = r->repo;
		if (!strncmp(repo, "library/", 8))
			repo += 8;
		snprintf(out, n, "%s:%s", repo, tag);
	} else {
		snprintf(out, n, "%s/%s:%s", r->registry, r->repo, tag);
	}
}
