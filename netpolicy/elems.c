/*
 * netpolicy/elems.c: the DNS proxy's hot path, opening addresses in a sandbox's dynamic set.
 *
 * libnftables re-reads the kernel's whole ruleset cache (every table, chain and set of every
 * sandbox) for each command, so an "add element" through it costs O(sandboxes) of user time.
 * Set elements are therefore sent as one nfnetlink batch built with libnftnl (the library under
 * libnftables): add + delete + add with the timeout, so the element ends up with exactly this
 * timeout whether or not it existed. The table itself is still rendered and applied through
 * libnftables (sandbox.c).
 *
 * Both libraries are loaded with dlopen on the first socket opened, as libnftables is (nft.c):
 * only sandboxes with an egress allowlist reach this, and libmnl has no static archive, so
 * linking it would keep build/rung from being linked statically (cli/module.mk).
 */
#include <netinet/in.h> /* before the linux/ headers, whose in.h clashes with it */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <libnftnl/set.h>

#include "common/dl.h"
#include "common/util.h"
#include "netpolicy/np-internal.h"

#define NL_BUF 16384 /* 64 elements x 3 messages of at most ~60 bytes each fit */

struct np_nfsock {
	struct mnl_socket *nl;
	uint32_t portid, seq;
};

static struct {
	__typeof__(&nftnl_set_alloc) nftnl_set_alloc;
	__typeof__(&nftnl_set_set_str) nftnl_set_set_str;
	__typeof__(&nftnl_set_elem_alloc) nftnl_set_elem_alloc;
	__typeof__(&nftnl_set_elem_set) nftnl_set_elem_set;
	__typeof__(&nftnl_set_elem_set_u64) nftnl_set_elem_set_u64;
	__typeof__(&nftnl_set_elem_add) nftnl_set_elem_add;
	__typeof__(&nftnl_set_free) nftnl_set_free;
	__typeof__(&nftnl_batch_begin) nftnl_batch_begin;
	__typeof__(&nftnl_batch_end) nftnl_batch_end;
	__typeof__(&nftnl_nlmsg_build_hdr) nftnl_nlmsg_build_hdr;
	__typeof__(&nftnl_set_elems_nlmsg_build_payload) nftnl_set_elems_nlmsg_build_payload;
	__typeof__(&mnl_socket_open2) mnl_socket_open2;
	__typeof__(&mnl_socket_bind) mnl_socket_bind;
	__typeof__(&mnl_socket_get_portid) mnl_socket_get_portid;
	__typeof__(&mnl_socket_close) mnl_socket_close;
	__typeof__(&mnl_socket_get_fd) mnl_socket_get_fd;
	__typeof__(&mnl_socket_recvfrom) mnl_socket_recvfrom;
	__typeof__(&mnl_socket_sendto) mnl_socket_sendto;
	__typeof__(&mnl_nlmsg_ok) mnl_nlmsg_ok;
	__typeof__(&mnl_nlmsg_next) mnl_nlmsg_next;
	__typeof__(&mnl_nlmsg_get_payload) mnl_nlmsg_get_payload;
	__typeof__(&mnl_nlmsg_batch_start) mnl_nlmsg_batch_start;
	__typeof__(&mnl_nlmsg_batch_current) mnl_nlmsg_batch_current;
	__typeof__(&mnl_nlmsg_batch_next) mnl_nlmsg_batch_next;
	__typeof__(&mnl_nlmsg_batch_head) mnl_nlmsg_batch_head;
	__typeof__(&mnl_nlmsg_batch_size) mnl_nlmsg_batch_size;
	__typeof__(&mnl_nlmsg_batch_stop) mnl_nlmsg_batch_stop;
	char why[200]; /* why loading failed, "" when it did not */
} lib;
static pthread_once_t nl_once = PTHREAD_ONCE_INIT;

#define NL_SYM(f) ((struct rung_dl_sym){(void **)&lib.f, #f})

static void nl_load(void)
{
	static const char *const nftnl[] = {"libnftnl.so.11", NULL};
	static const char *const mnl[] = {"libmnl.so.0", NULL};
	const struct rung_dl_sym a[] = {
	    NL_SYM(nftnl_set_alloc),
	    NL_SYM(nftnl_set_set_str),
	    NL_SYM(nftnl_set_elem_alloc),
	    NL_SYM(nftnl_set_elem_set),
	    NL_SYM(nftnl_set_elem_set_u64),
	    NL_SYM(nftnl_set_elem_add),
	    NL_SYM(nftnl_set_free),
	    NL_SYM(nftnl_batch_begin),
	    NL_SYM(nftnl_batch_end),
	    NL_SYM(nftnl_nlmsg_build_hdr),
	    NL_SYM(nftnl_set_elems_nlmsg_build_payload),
	};
	const struct rung_dl_sym b[] = {
	    NL_SYM(mnl_socket_open2),	   NL_SYM(mnl_socket_bind),
	    NL_SYM(mnl_socket_get_portid), NL_SYM(mnl_socket_close),
	    NL_SYM(mnl_socket_get_fd),	   NL_SYM(mnl_socket_recvfrom),
	    NL_SYM(mnl_socket_sendto),	   NL_SYM(mnl_nlmsg_ok),
	    NL_SYM(mnl_nlmsg_next),	   NL_SYM(mnl_nlmsg_get_payload),
	    NL_SYM(mnl_nlmsg_batch_start), NL_SYM(mnl_nlmsg_batch_current),
	    NL_SYM(mnl_nlmsg_batch_next),  NL_SYM(mnl_nlmsg_batch_head),
	    NL_SYM(mnl_nlmsg_batch_size),  NL_SYM(mnl_nlmsg_batch_stop),
	};
	if (rung_dl_load(nftnl, a, RUNG_ARRAY_SIZE(a), lib.why, sizeof(lib.why)))
		rung_dl_load(mnl, b, RUNG_ARRAY_SIZE(b), lib.why, sizeof(lib.why));
}

int np_nfsock_open(struct np_nfsock **out, struct rung_err *err)
{
	pthread_once(&nl_once, nl_load);
	if (lib.why[0])
		return rung_err_set(
		    err, ENOTSUP,
		    "nfnetlink: cannot load libnftnl.so.11 and libmnl.so.0 (packages "
		    "libnftnl11, libmnl0): %s",
		    lib.why);
	struct np_nfsock *s = calloc(1, sizeof(*s));
	if (!s)
		return rung_err_set(err, ENOMEM, "out of memory");
	s->nl = lib.mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (!s->nl || lib.mnl_socket_bind(s->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		int r = rung_err_sys(err, errno, "nfnetlink socket");
		np_nfsock_close(s);
		return r;
	}
	s->portid = lib.mnl_socket_get_portid(s->nl);
	s->seq = (uint32_t)rung_now_us();
	*out = s;
	return 0;
}

void np_nfsock_close(struct np_nfsock *s)
{
	if (!s)
		return;
	if (s->nl)
		lib.mnl_socket_close(s->nl);
	free(s);
}

static struct nftnl_set *elems_build(const char *table, const char *set, const uint8_t *keys,
				     size_t keylen, size_t n, uint64_t timeout_ms)
{
	struct nftnl_set *s = lib.nftnl_set_alloc();
	if (!s)
		return NULL;
	lib.nftnl_set_set_str(s, NFTNL_SET_TABLE, table);
	lib.nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	for (size_t i = 0; i < n; i++) {
		struct nftnl_set_elem *e = lib.nftnl_set_elem_alloc();
		if (!e) {
			lib.nftnl_set_free(s);
			return NULL;
		}
		lib.nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, keys + i * keylen, (uint32_t)keylen);
		if (timeout_ms)
			lib.nftnl_set_elem_set_u64(e, NFTNL_SET_ELEM_TIMEOUT, timeout_ms);
		lib.nftnl_set_elem_add(s, e);
	}
	return s;
}

/*
 * Reads acks until every message of the batch (sequence numbers lo..hi) is answered; the first
 * error wins. Acks of an earlier, failed batch still queued on the socket are skipped by seq.
 */
static int read_acks(struct np_nfsock *s, uint32_t lo, uint32_t hi, int want, struct rung_err *err)
{
	char buf[NL_BUF];
	int fd = lib.mnl_socket_get_fd(s->nl), got = 0, first = 0;
	while (got < want) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 2000) <= 0)
			return rung_err_set(err, ETIMEDOUT, "nfnetlink: no answer from the kernel");
		ssize_t n = lib.mnl_socket_recvfrom(s->nl, buf, sizeof(buf));
		if (n < 0)
			return rung_err_sys(err, errno, "nfnetlink recv");
		const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
		int len = (int)n;
		for (; lib.mnl_nlmsg_ok(h, len); h = lib.mnl_nlmsg_next(h, &len)) {
			if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_seq < lo || h->nlmsg_seq > hi)
				continue;
			const struct nlmsgerr *e = lib.mnl_nlmsg_get_payload(h);
			got++;
			if (e->error && !first)
				first = e->error;
		}
		if (first) /* the batch was aborted: no more acks will come */
			return rung_err_sys(err, -first, "nfnetlink: set elements");
	}
	return 0;
}

int np_nfsock_set_elems(struct np_nfsock *s, const char *table, const char *set,
			const uint8_t *keys, size_t keylen, size_t n, uint64_t timeout_ms,
			struct rung_err *err)
{
	if (!n)
		return 0;
	if (n > 64 || keylen > 32)
		return rung_err_set(err, E2BIG, "set %s: too many or too long elements", set);
	struct nftnl_set *add = elems_build(table, set, keys, keylen, n, timeout_ms);
	struct nftnl_set *del = elems_build(table, set, keys, keylen, n, 0);
	int r = 0;
	char buf[NL_BUF];
	if (!add || !del) {
		r = rung_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	struct mnl_nlmsg_batch *b = lib.mnl_nlmsg_batch_start(buf, sizeof(buf));
	lib.nftnl_batch_begin(lib.mnl_nlmsg_batch_current(b), s->seq++);
	lib.mnl_nlmsg_batch_next(b);
	static const uint16_t types[] = {NFT_MSG_NEWSETELEM, NFT_MSG_DELSETELEM,
					 NFT_MSG_NEWSETELEM};
	uint32_t lo = s->seq;
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(types); i++) {
		struct nlmsghdr *h = lib.nftnl_nlmsg_build_hdr(
		    lib.mnl_nlmsg_batch_current(b), types[i], NFPROTO_INET,
		    (uint16_t)((i != 1 ? NLM_F_CREATE : 0) | NLM_F_ACK), s->seq++);
		lib.nftnl_set_elems_nlmsg_build_payload(h, i == 1 ? del : add);
		lib.mnl_nlmsg_batch_next(b);
	}
	lib.nftnl_batch_end(lib.mnl_nlmsg_batch_current(b), s->seq++);
	lib.mnl_nlmsg_batch_next(b);
	if (lib.mnl_socket_sendto(s->nl, lib.mnl_nlmsg_batch_head(b), lib.mnl_nlmsg_batch_size(b)) <
	    0)
		r = rung_err_sys(err, errno, "nfnetlink send");
	else
		r = read_acks(s, lo, s->seq, (int)RUNG_ARRAY_SIZE(types), err);
	lib.mnl_nlmsg_batch_stop(b);
	if (r < 0)
		rung_err_wrap(err, "table %s set %s", table, set);
out:
	if (add)
		lib.nftnl_set_free(add);
	if (del)
		lib.nftnl_set_free(del);
	return r;
}
