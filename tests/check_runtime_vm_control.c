/*
 * tests/check_runtime_vm_control.c: the vm rung's host side reaches rung-vmm's control.sock, in a
 * jail directory the VMM's uid owns, without following anything planted there (issue 10, item 11):
 * a symlink to another host socket, a socket of another uid. No KVM needed: the jail is a
 * scratch directory and the "VMM" a listening socket. Tagged "root" (chown).
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/util.h"
#include "runtime/rt-internal.h"
#include "tests/lib/testutil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define VMM_UID 424242

static int listen_at(const char *path, uid_t owner)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	ck_assert_int_eq(chown(path, owner, owner), 0);
	return fd;
}

static bool pending(int lfd)
{
	struct pollfd p = {.fd = lfd, .events = POLLIN};
	return poll(&p, 1, 0) == 1;
}

START_TEST(test_control_connect_no_links)
{
	RUNG_REQUIRE_ROOT();
	char *t = rung_test_tmpdir("vmctl");
	ck_assert_ptr_nonnull(t);
	char jail[4200], sock[4300], host[4300];
	snprintf(jail, sizeof(jail), "%s/jail", t);
	snprintf(sock, sizeof(sock), "%s/control.sock", jail);
	snprintf(host, sizeof(host), "%s/host.sock", t);
	ck_assert_int_eq(mkdir(jail, 0700), 0);
	ck_assert_int_eq(chown(jail, VMM_UID, VMM_UID), 0);
	struct rung_err err = {0};

	/* the VMM's own socket: connects */
	int vmm = listen_at(sock, VMM_UID);
	int fd = rt_vm_control_connect(jail, VMM_UID, &err);
	ck_assert_msg(fd >= 0, "%s", err.msg);
	ck_assert(pending(vmm));
	close(fd);
	/* a socket of another uid: refused */
	ck_assert_int_eq(rt_vm_control_connect(jail, VMM_UID + 1, &err), -EPERM);
	ck_assert_ptr_nonnull(strstr(err.msg, "uid"));
	close(vmm);
	unlink(sock);

	/* the VMM replaced it with a link (its own) to a host socket: never followed */
	int other = listen_at(host, VMM_UID);
	ck_assert_int_eq(symlink(host, sock), 0);
	ck_assert_int_eq(lchown(sock, VMM_UID, VMM_UID), 0);
	ck_assert_int_eq(rt_vm_control_connect(jail, VMM_UID, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "not a socket"), "%s", err.msg);
	ck_assert_msg(!pending(other), "the planted link was followed to the host socket");
	unlink(sock);
	/* nothing there: a plain error */
	ck_assert_int_eq(rt_vm_control_connect(jail, VMM_UID, &err), -ENOENT);
	close(other);
	ck_assert_int_eq(rung_rm_rf(t, &err), 0);
	free(t);
}
END_TEST

Suite *runtime_vm_control_suite(void)
{
	Suite *s = suite_create("runtime_vm_control");
	TCase *tc = tcase_create("control");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_control_connect_no_links);
	suite_add_tcase(s, tc);
	return s;
}
