/*
 * oci/rootfd.c: the create process hands the container's init its root as an open
 * directory (SCM_RIGHTS with the OCI_SYNC_ROOT message), so the init never resolves
 * root.path itself: under containerd the bundle directory is the runtime's 0700 root-owned
 * directory, which the init (root of its user namespace only, an unprivileged uid on the
 * host) may not search.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "oci/oci-internal.h"

int oci_sync_send_fd(int sock, char tag, int fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	memset(&u, 0, sizeof(u));
	struct iovec iov = {.iov_base = &tag, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &m, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

int oci_sync_recv_fd(int sock, char want, int *fd, struct rung_err *err)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	char tag = 0;
	struct iovec iov = {.iov_base = &tag, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	*fd = -1;
	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1 || tag != want)
		return rung_err_set(err, EPIPE, "the runtime went away during create");
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(fd, CMSG_DATA(c), sizeof(int));
	return 0;
}
