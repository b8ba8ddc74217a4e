/*
 * fuzz/fuzz_frame.c: the agent protocol decoders on arbitrary bytes: the header decode, the
 * frame reader over a socketpair, TLV iteration, and the exec / exit / file / error decoders,
 * and v2's process requests (every type), PROC_INFO and the tree-copy frames.
 * Input: the first byte picks nothing; the bytes are a header followed by a payload, and the
 * payload is also fed to every decoder directly.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/proto.h"
#include "common/util.h"

static void decoders(const uint8_t *p, uint32_t len)
{
	struct rung_err err = {0};
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	int r;
	rung_tlv_init(&it, p, len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, &err)) > 0) {
		if (v < p || v + l > p + len)
			abort(); /* a field outside the payload */
		uint64_t u;
		char *s = NULL;
		if (rung_tlv_str(v, l, &s, &err) == 0) {
			if (strlen(s) != l)
				abort();
			free(s);
		}
		(void)rung_tlv_u64(v, l, &u, &err);
	}
	struct rung_proto_exec x;
	if (rung_proto_exec_decode(p, len, &x, &err) == 0) {
		if (!x.argv || !x.argv[0] || !x.argv[0][0])
			abort();
		struct rung_buf b = {0};
		if (rung_proto_exec_encode(&x, &b) == 0) { /* re-encode, decode again */
			struct rung_proto_exec y;
			if (rung_proto_exec_decode(b.data, (uint32_t)b.len, &y, &err) < 0)
				abort();
			rung_proto_exec_release(&y);
		}
		rung_buf_release(&b);
		rung_proto_exec_release(&x);
	}
	struct rung_proto_exit ex;
	if (rung_proto_exit_decode(p, len, &ex, &err) == 0 &&
	    (ex.exit_code < -1 || ex.exit_code > 255 || ex.signal > 64))
		abort();
	struct rung_proto_file f;
	if (rung_proto_file_decode(p, len, &f, &err) == 0) {
		if (!f.path || !f.path[0] || (f.mode & ~07777u))
			abort();
		rung_proto_file_release(&f);
	}
	/* v2: every process request type, and PROC_INFO, re-encoded and decoded again */
	for (uint8_t t = RUNG_MSG_PROC_START; t <= RUNG_MSG_SESSION_RUN; t++) {
		struct rung_proto_proc q;
		if (rung_proto_proc_decode(t, p, len, &q, &err) < 0)
			continue;
		if (t != RUNG_MSG_PROC_START && !rung_proto_handle_valid(q.handle))
			abort();
		if (q.rows > RUNG_PROTO_TTY_MAX || q.cols > RUNG_PROTO_TTY_MAX || q.sig > 64 ||
		    (q.data && (q.data < p || q.data + q.data_len > p + len)))
			abort();
		struct rung_buf b = {0};
		if (t != RUNG_MSG_PROC_LIST && rung_proto_proc_encode(&q, &b) == 0) {
			struct rung_proto_proc y;
			if (rung_proto_proc_decode(t, b.data, (uint32_t)b.len, &y, &err) < 0)
				abort();
			rung_proto_proc_release(&y);
		}
		rung_buf_release(&b);
		rung_proto_proc_release(&q);
	}
	struct rung_proto_proc_info pi;
	if (rung_proto_proc_info_decode(p, len, &pi, &err) == 0) {
		if (!rung_proto_handle_valid(pi.handle) || !pi.argv || pi.exit_code < -1 ||
		    pi.exit_code > 255 || pi.signal > 64)
			abort();
		rung_proto_proc_info_release(&pi);
	}
	/* v2: tree copies: what decodes keeps every rule, and re-encodes to the same */
	struct rung_proto_tree_entry te;
	if (rung_proto_tree_entry_decode(p, len, &te, &err) == 0) {
		struct rung_err e2 = {0};
		if ((te.name[0] && rung_tree_name_check(te.name, &e2) < 0) || te.mode > 07777 ||
		    (te.kind != RUNG_FS_FILE && te.kind != RUNG_FS_DIR &&
		     te.kind != RUNG_FS_SYMLINK) ||
		    (te.kind != RUNG_FS_FILE && te.size) ||
		    (te.target && !rung_tree_link_inside(te.name, te.target)))
			abort();
		struct rung_buf b = {0};
		rung_proto_tree_entry_encode(&te, &b);
		struct rung_proto_tree_entry y;
		if (!b.oom && rung_proto_tree_entry_decode(b.data, (uint32_t)b.len, &y, &err) < 0)
			abort();
		if (!b.oom)
			rung_proto_tree_entry_release(&y);
		rung_buf_release(&b);
		rung_proto_tree_entry_release(&te);
	}
	for (uint8_t t = RUNG_MSG_TREE_PUT; t <= RUNG_MSG_TREE_GET; t++) {
		struct rung_proto_tree_req tq;
		if (rung_proto_tree_req_decode(t, p, len, &tq, &err) == 0) {
			if (!tq.path || !tq.path[0] || (t == RUNG_MSG_TREE_PUT && tq.max_bytes))
				abort();
			rung_proto_tree_req_release(&tq);
		}
	}
	uint16_t port; /* v2: PORT_CONNECT */
	bool want_fd;
	if (rung_proto_port_decode(p, len, &port, &want_fd, &err) == 0 && port == 0)
		abort();
	r = rung_proto_error_decode(p, len, &err);
	if (r >= 0 || -r > 4095)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rung_err err = {0};
	if (size >= RUNG_FRAME_HDR) {
		uint8_t type;
		uint32_t len;
		if (rung_frame_hdr_decode(data, &type, &len, &err) == 0 && len > RUNG_FRAME_MAX)
			abort();
	}
	if (size <= RUNG_FRAME_MAX)
		decoders(data, (uint32_t)size);
	/* The reader: whatever arrives, then EOF, must give frames or an error, never hang. */
	int sv[2];
	if (size <= 65536 && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
		if (rung_write_all(sv[0], data, size) == 0) {
			close(sv[0]);
			for (int i = 0; i < 64; i++) {
				struct rung_frame fr;
				if (rung_frame_read(sv[1], &fr, rung_now_ms() + 1000, &err) < 0)
					break;
				if (fr.len > RUNG_FRAME_MAX || (fr.len && !fr.payload))
					abort();
				decoders(fr.payload, fr.len);
				rung_frame_release(&fr);
			}
		} else {
			close(sv[0]);
		}
		close(sv[1]);
	}
	return 0;
}
