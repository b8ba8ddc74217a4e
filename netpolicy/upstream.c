/* netpolicy/upstream.c: where the DNS proxy forwards allowed queries. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "netpolicy/np-internal.h"

int np_upstream_parse(const char *s, struct sockaddr_storage *ss, socklen_t *len,
		      struct rung_err *err)
{
	char host[64];
	uint64_t port = 53;
	const char *ps = NULL;
	memset(ss, 0, sizeof(*ss));
	if (!s || strlen(s) >= sizeof(host))
		return rung_err_set(err, EINVAL, "DNS upstream \"%s\": want IP[:PORT]", s ? s : "");
	if (s[0] == '[') {
		const char *c = strchr(s, ']');
		if (!c || (c[1] && c[1] != ':'))
			return rung_err_set(err, EINVAL, "DNS upstream \"%s\": want [IPv6]:PORT",
					    s);
		snprintf(host, sizeof(host), "%.*s", (int)(c - s - 1), s + 1);
		ps = c[1] ? c + 2 : NULL;
	} else if (strchr(s, ':') && strchr(s, ':') == strrchr(s, ':')) {
		const char *c = strchr(s, ':');
		snprintf(host, sizeof(host), "%.*s", (int)(c - s), s);
		ps = c + 1;
	} else {
		snprintf(host, sizeof(host), "%s", s);
	}
	if (ps && (rung_parse_u64(ps, &port) < 0 || port == 0 || port > 65535))
		return rung_err_set(err, EINVAL, "DNS upstream \"%s\": bad port", s);
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		*len = sizeof(*a4);
	} else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a6);
	} else {
		return rung_err_set(err, EINVAL, "DNS upstream \"%s\": not an IP address", s);
	}
	return 0;
}

int np_upstream_resolve(const char *cfg_upstream, struct sockaddr_storage *ss, socklen_t *len,
			struct rung_err *err)
{
	if (cfg_upstream && *cfg_upstream)
		return np_upstream_parse(cfg_upstream, ss, len, err);
	cleanup_free char *txt = NULL;
	int r = rung_file_load(AT_FDCWD, "/etc/resolv.conf", 1 << 16, &txt, NULL, err);
	if (r < 0)
		return rung_err_wrap(err, "no DNS upstream configured");
	char *save = NULL;
	for (char *line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char ns[64];
		if (sscanf(line, " nameserver %63s", ns) == 1) {
			r = np_upstream_parse(ns, ss, len, err);
			return r < 0 ? rung_err_wrap(err, "/etc/resolv.conf") : 0;
		}
	}
	return rung_err_set(err, ENOENT, "/etc/resolv.conf: no nameserver line");
}
