/*
 * runtime/egress.c: syntax check of one egress_allow entry at spec time. The netpolicy
 * module turns validated entries into rules; this only rejects what can never be valid.
 *   host[:port]  *.suffix[:port]  A.B.C.D[/len][:port]  [v6[/len]][:port]  v6[/len]
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "runtime/rt-internal.h"

static bool valid_port(const char *p)
{
	uint64_t v;
	return rung_parse_u64(p, &v) == 0 && v >= 1 && v <= 65535;
}

static bool valid_host(const char *h, size_t n)
{
	if (n >= 2 && h[0] == '*' && h[1] == '.') {
		h += 2;
		n -= 2;
	}
	if (n == 0 || n > 253)
		return false;
	size_t label = 0;
	bool alpha = false;
	for (size_t i = 0; i < n; i++) {
		char c = (char)tolower((unsigned char)h[i]);
		if (c == '.') {
			if (label == 0 || h[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!(isalnum((unsigned char)c) || c == '-' || c == '_'))
			return false;
		if (label == 0 && c == '-')
			return false;
		if (isalpha((unsigned char)c))
			alpha = true;
		if (++label > 63)
			return false;
	}
	return label > 0 && alpha;
}

static bool valid_cidr(const char *s, int family)
{
	char buf[64];
	if (strlen(s) >= sizeof(buf))
		return false;
	strcpy(buf, s);
	char *slash = strchr(buf, '/');
	unsigned max = family == AF_INET ? 32 : 128;
	if (slash) {
		*slash = '\0';
		uint64_t len;
		if (rung_parse_u64(slash + 1, &len) < 0 || len > max)
			return false;
	}
	unsigned char addr[16];
	return inet_pton(family, buf, addr) == 1;
}

int rt_egress_entry_check(const char *e, struct rung_err *err)
{
	size_t n = strlen(e);
	if (n == 0 || n > 300)
		return rung_err_set(err, EINVAL, "empty or overlong entry");
	char buf[320];
	strcpy(buf, e);
	if (buf[0] == '[') { /* [v6/len]:port */
		char *close = strchr(buf, ']');
		if (!close)
			return rung_err_set(err, EINVAL, "'%s': unclosed '['", e);
		*close = '\0';
		if (close[1] && (close[1] != ':' || !valid_port(close + 2)))
			return rung_err_set(err, EINVAL, "'%s': bad port", e);
		if (!valid_cidr(buf + 1, AF_INET6))
			return rung_err_set(err, EINVAL, "'%s': not an IPv6 address or prefix", e);
		return 0;
	}
	if (strchr(buf, ':') && strchr(buf, ':') != strrchr(buf, ':')) { /* bare v6 */
		if (!valid_cidr(buf, AF_INET6))
			return rung_err_set(err, EINVAL, "'%s': not an IPv6 address or prefix", e);
		return 0;
	}
	char *colon = strchr(buf, ':');
	if (colon) {
		*colon = '\0';
		if (!valid_port(colon + 1))
			return rung_err_set(err, EINVAL, "'%s': port must be 1-65535", e);
	}
	bool digits = true;
	for (char *p = buf; *p; p++)
		if (!isdigit((unsigned char)*p) && *p != '.' && *p != '/')
			digits = false;
	if (digits) {
		if (!valid_cidr(buf, AF_INET))
			return rung_err_set(err, EINVAL, "'%s': not an IPv4 address or prefix", e);
		return 0;
	}
	if (!valid_host(buf, strlen(buf)))
		return rung_err_set(err, EINVAL,
				    "'%s': not a host name, *.suffix, address or CIDR", e);
	return 0;
}
