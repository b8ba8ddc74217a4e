/*
 * runtime/vm-fixup.c: after every restore of a VM (a clone of a template, a resume from disk),
 * the first request to its agent once it answers: RESTORED, with 64 bytes of fresh host
 * randomness (getrandom), the host's wall clock, the sandbox's hostname and, with a network,
 * eth0's address and gateway and the DNS proxy's address (docs/snapshots.md). The agent's answer is a RESULT or an ERROR;
 * nothing else it sends means anything here.
 */
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "netpolicy/np.h"
#include "runtime/agent-io.h"
#include "runtime/rt-internal.h"

/* "rung" for a resumed sandbox (what its boot set), "rung-<12 hex of the id>" for a clone:
 * clones of one template differ. */
static void hostname_of(const struct rt_meta *m, bool clone, char *out, size_t len)
{
	if (clone)
		snprintf(out, len, "rung-%.12s", m->id);
	else
		snprintf(out, len, "rung");
}

static int fixup_build(struct rt_sandbox *sb, bool clone, struct rung_buf *b, struct rung_err *err)
{
	struct rung_proto_restored x = {0};
	if (getrandom(x.seed, sizeof(x.seed), 0) != (ssize_t)sizeof(x.seed))
		return rung_err_sys(err, errno, "getrandom");
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	x.wall_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	hostname_of(&sb->meta, clone, x.hostname, sizeof(x.hostname));
	if (sb->net) {
		struct np_net_info info;
		np_net_info(sb->net, &info);
		if (info.has_network) {
			x.has_net = true;
			x.prefix = 30;
			memcpy(x.addr, info.sb_ip, sizeof(x.addr));
			memcpy(x.gw, info.host_ip, sizeof(x.gw));
			/* the DNS proxy listens on the host end, as the boot's rung.dns= said */
			memcpy(x.dns, info.host_ip, sizeof(x.dns));
		}
	}
	int r = rung_proto_restored_encode(&x, b);
	explicit_bzero(&x, sizeof(x));
	return r < 0 ? rung_err_set(err, ENOMEM, "out of memory") : 0;
}

int rt_vm_fixup(struct rt_sandbox *sb, bool clone, struct rung_err *err)
{
	char sock[4096];
	rt_store_path(&sb->router->store, sb->meta.id, "agent.sock", sock, sizeof(sock));
	struct rung_buf b = {0};
	int r = fixup_build(sb, clone, &b, err);
	cleanup_close int fd = r < 0 ? -1 : rt_agent_connect(sock, err);
	if (r == 0 && fd < 0)
		r = fd;
	struct rt_agent_io io;
	struct rung_frame f = {0};
	if (r == 0 && (r = rt_agent_io_init(&io, fd, 15000, -1, err)) == 0) {
		r = rt_agent_io_queue(&io, RUNG_MSG_RESTORED, &b, err);
		if (r == 0)
			r = rt_agent_io_next(&io, &f, err);
		rt_agent_io_release(&io);
	}
	explicit_bzero(b.data, b.len);
	rung_buf_release(&b);
	if (r == 0 && f.type == RUNG_MSG_ERROR)
		r = rung_proto_error_decode(f.payload, f.len, err);
	else if (r == 0 && f.type != RUNG_MSG_RESULT)
		r = rung_err_set(err, EPROTO, "the agent answered RESTORED with frame type %u",
				 f.type);
	rung_frame_release(&f);
	return r < 0 ? rung_err_wrap(err, "the fix-ups after the restore (RESTORED)") : 0;
}
