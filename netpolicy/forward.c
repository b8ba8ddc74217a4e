/*
 * netpolicy/forward.c: IPv4 forwarding without making the host a router for anyone else.
 *
 * Egress needs net.ipv4.ip_forward = 1, which is host-wide: every interface starts forwarding.
 * When rung is the one that turns it on (it was 0), it first installs a guard table whose
 * forward chain drops every forwarded packet that neither enters nor leaves through a rung
 * interface ("rg*": sandbox veths and VM taps), so the host forwards exactly what it forwarded
 * before plus rung's own traffic. When forwarding was already on, whoever turned it on owns the
 * host's forward policy (docker, a router) and rung adds nothing: a drop in any base chain is
 * final for that packet in every table, so a guard there would break their traffic.
 *
 * The guard stays after the last sandbox (forwarding stays on too): other software that starts
 * forwarding later must delete it ("nft delete table inet rung_forward_guard"), see README.md.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "netpolicy/link.h"
#include "netpolicy/np-internal.h"

#define IP_FORWARD "/proc/sys/net/ipv4/ip_forward"

/* Priority filter - 10: before the per-sandbox tables' forward chains. */
static const char guard[] =
    "add table inet " NP_FORWARD_GUARD "\n"
    "delete table inet " NP_FORWARD_GUARD "\n"
    "table inet " NP_FORWARD_GUARD " {\n"
    "\tcomment \"rung: IPv4 forwarding was off; only rung's interfaces (rg*) forward\"\n"
    "\tchain forward {\n"
    "\t\ttype filter hook forward priority filter - 10; policy accept;\n"
    "\t\tiifname \"rg*\" accept\n"
    "\t\toifname \"rg*\" accept\n"
    "\t\tcounter drop\n"
    "\t}\n"
    "}\n";

const char *np_forward_guard_text(void) { return guard; }

int np_forward_enable(bool *guarded, struct rung_err *err)
{
	char v[8] = {0};
	cleanup_close int fd = open(IP_FORWARD, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, v, sizeof(v) - 1) < 0)
		return rung_err_sys(err, errno, "read %s", IP_FORWARD);
	if (guarded)
		*guarded = false;
	if (v[0] == '1')
		return 0; /* on already: the host's forward policy is its owner's */
	struct nft_ctx *c = np_nft_new(err);
	if (!c)
		return -ENOMEM;
	int r = np_nft_run(c, guard, err);
	np_nft_free(c);
	if (r < 0)
		return rung_err_wrap(err, "forward guard table %s (IPv4 forwarding left off)",
				     NP_FORWARD_GUARD);
	if (guarded)
		*guarded = true;
	return np_sysctl_write(IP_FORWARD, "1", err);
}

static void guard_seen(const char *name, const char *comment, void *data)
{
	(void)comment;
	if (!strcmp(name, NP_FORWARD_GUARD))
		*(bool *)data = true;
}

static void link_seen(const char *name, const char *alias, void *data)
{
	(void)name, (void)alias;
	*(bool *)data = true;
}

int np_forward_release(struct rung_err *err)
{
	bool ours = false, seen = false;
	int r = np_link_foreach(link_seen, &ours, err); /* every "rg*" link */
	if (r < 0 || ours)
		return r; /* another sandbox's interface still forwards */
	struct nft_ctx *c = np_nft_new(err);
	if (!c)
		return -ENOMEM;
	r = np_nft_foreach_table(c, guard_seen, &seen, err);
	if (r == 0 && seen)
		r = np_nft_table_del(c, NP_FORWARD_GUARD, err);
	np_nft_free(c);
	if (r == 0 && seen)
		r = np_sysctl_write(IP_FORWARD, "0", err);
	return r;
}
