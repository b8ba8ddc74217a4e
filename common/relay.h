/*
 * common/relay.h: a bidirectional byte relay between two stream sockets, used by both ends of a
 * forwarded port (rung-agent inside, the host outside). Each direction has one bounded buffer:
 * nothing is read from a side while what it sent before has not been written on, so a peer
 * that floods while the other does not read is held back by TCP flow control, never by memory.
 * A side's EOF is passed on as a half-close (shutdown SHUT_WR) once its bytes are out; the relay
 * ends when both directions have ended, on an error of either side, or when cancel_fd (if >= 0)
 * becomes readable or hangs up.
 */
#ifndef RUNG_COMMON_RELAY_H
#define RUNG_COMMON_RELAY_H

#include <stdint.h>

#include "common/err.h"

#define RUNG_RELAY_BUF (1u << 20) /* per direction */

struct rung_relay_stats {
	uint64_t a_to_b, b_to_a; /* bytes */
};

/* Makes both fds non-blocking. Returns 0 when both directions ended with EOF, -ECANCELED on
 * cancel_fd, or -errno (ECONNRESET, EPIPE, ...) when a side failed (the other is then shut). */
int rung_relay(int a, int b, int cancel_fd, struct rung_relay_stats *st, struct rung_err *err);

/* b's open file description may be shared with a hostile process (a socket the agent passed):
 * that process can clear its O_NONBLOCK or read from it between a poll and a read, and
 * splice(2) follows the file's flag. So nothing splices: every read and write is a
 * recv/send with MSG_DONTWAIT, through the direction's buffer. */
#define RUNG_RELAY_B_FOREIGN 1u

/* rung_relay with flags (RUNG_RELAY_B_FOREIGN). */
int rung_relay_ex(int a, int b, unsigned flags, int cancel_fd, struct rung_relay_stats *st,
		  struct rung_err *err);

#endif
