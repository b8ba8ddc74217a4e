/*
 * cli/cmd-port.c: `rung port` (docs/ports.md). Listens on the host (loopback unless --host says
 * otherwise) and forwards every accepted TCP connection to a port on the sandbox's loopback,
 * through the agent channel (rung_port_forward), until SIGINT/SIGTERM/SIGHUP.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/port.h"
#include "common/err.h"

static int parse_port(const char *s, bool zero_ok, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > 65535 || (!zero_ok && v == 0) || s[0] == '-')
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* A listening TCP socket on host:port (numeric addresses and names, first that binds). */
int cli_port_listen(const char *host, unsigned port, char *addr, size_t addr_len, unsigned *bound,
		    struct rung_err *err)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
			*res;
	char ps[8];
	snprintf(ps, sizeof(ps), "%u", port);
	int g = getaddrinfo(host, ps, &hints, &res);
	if (g)
		return rung_err_set(err, EINVAL, "--host %s: %s", host, gai_strerror(g));
	int fd = -1, e = 0;
	for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			e = errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) < 0 || listen(fd, 128) < 0) {
			e = errno;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd < 0)
		return rung_err_sys(err, e, "listen on %s port %u", host, port);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	char h[INET6_ADDRSTRLEN] = "?";
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &s6->sin6_addr, h, sizeof(h));
		*bound = ntohs(s6->sin6_port);
		snprintf(addr, addr_len, "[%s]", h);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &s4->sin_addr, h, sizeof(h));
		*bound = ntohs(s4->sin_port);
		snprintf(addr, addr_len, "%s", h);
	}
	return fd;
}

static void on_conn_error(void *ud, const struct rung_err *e)
{
	(void)ud;
	fprintf(stderr, "rung port: %s\n", e->msg);
}

/* Forward until a stop signal (or, with watch_pid > 0, that process's end). */
static int cli_port_serve(struct rung_sandbox *sb, unsigned port, int lfd, struct rung_err *err)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sfd < 0)
		return rung_err_sys(err, errno, "signalfd");
	int r = rung_port_forward(sb, port, lfd, sfd, 0, on_conn_error, NULL, err);
	close(sfd);
	return r;
}

struct port_args {
	const char *id, *host;
	unsigned port, host_port;
	bool detach, host_given, host_port_given;
};

static int parse_args(int argc, char **argv, struct port_args *a)
{
	*a = (struct port_args){.host = "127.0.0.1"};
	const char *pos[2] = {0};
	int np = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--host") && i + 1 < argc) {
			a->host = argv[++i];
			a->host_given = true;
		} else if (!strcmp(argv[i], "--host-port") && i + 1 < argc) {
			if (parse_port(argv[++i], true, &a->host_port) < 0)
				return cli_usage_error("port",
						       "--host-port: '%s' is not a TCP "
						       "port (0..65535; 0: any free one)",
						       argv[i]);
			a->host_port_given = true;
		} else if (!strcmp(argv[i], "--detach")) {
			a->detach = true;
		} else if (argv[i][0] == '-' || np == 2) {
			return cli_usage_error("port", "unexpected '%s'", argv[i]);
		} else {
			pos[np++] = argv[i];
		}
	}
	if (np != 2)
		return cli_usage_error("port", "usage: rung port ID SANDBOX_PORT [--host ADDR] "
					       "[--host-port P] [--detach]");
	if (parse_port(pos[1], false, &a->port) < 0)
		return cli_usage_error("port", "SANDBOX_PORT: '%s' is not a TCP port (1..65535)",
				       pos[1]);
	a->id = pos[0];
	if (!a->host_port_given)
		a->host_port = a->port;
	return 0;
}

int cli_cmd_port(struct cli *c, int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "ls"))
		return cli_port_ls(c, argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "rm"))
		return cli_port_rm(c, argc - 1, argv + 1);
	struct port_args a;
	int st = parse_args(argc, argv, &a);
	if (st)
		return st;
	if (c->remote)
		return cli_usage_error(
		    "port", "rung port runs against the local store; through "
			    "the daemon use its preview route /v1/sandboxes/ID/ports/PORT/");
	struct rung_err err = {0};
	struct rung_router *r = cli_router(c);
	if (!r)
		return 1;
	struct rung_sandbox *sb;
	if (rung_sandbox_open(r, a.id, NULL, &sb, &err) < 0)
		return cli_fail(c, &err);
	char addr[INET6_ADDRSTRLEN + 2];
	unsigned bound;
	int lfd = cli_port_listen(a.host, a.host_port, addr, sizeof(addr), &bound, &err);
	if (lfd < 0) {
		rung_sandbox_close(sb);
		return cli_fail(c, &err);
	}
	if (a.detach) {
		st = cli_port_detach(c, sb, a.port, lfd, a.host, bound);
		close(lfd);
		rung_sandbox_close(sb);
		return st;
	}
	if (c->json)
		printf("{\"id\": \"%s\", \"port\": %u, \"host\": \"%s\", \"host_port\": %u, "
		       "\"protocol\": \"tcp\"}\n",
		       rung_sandbox_id(sb), a.port, addr, bound);
	else
		printf("forwarding %s:%u -> sandbox %s port %u (TCP) until interrupted\n", addr,
		       bound, rung_sandbox_id(sb), a.port);
	fflush(stdout);
	st = cli_port_serve(sb, a.port, lfd, &err) < 0 ? cli_fail(c, &err) : 0;
	close(lfd);
	rung_sandbox_close(sb);
	return st;
}
