/* cli/cmd-port-ls.c: `rung port --detach`, `rung port ls`, `rung port rm` (docs/ports.md). */
#include <stdlib.h>
#include <string.h>

#include "cli/port.h"

static bool is_loopback(const char *host)
{
	return !strcmp(host, "127.0.0.1") || !strcmp(host, "::1") || !strcmp(host, "localhost") ||
	       !strncmp(host, "127.", 4);
}

int cli_port_detach(struct cli *c, struct rung_sandbox *sb, unsigned port, int lfd,
		    const char *host, unsigned host_port)
{
	struct rung_err err = {0};
	pid_t pid;
	fflush(stdout);
	fflush(stderr);
	if (rung_port_detach(sb, port, lfd, host, host_port, &pid, &err) < 0)
		return cli_fail(c, &err);
	if (c->json)
		printf("{\"id\": \"%s\", \"port\": %u, \"host\": \"%s\", \"host_port\": %u, "
		       "\"protocol\": \"tcp\", \"pid\": %d, \"loopback\": %s}\n",
		       rung_sandbox_id(sb), port, host, host_port, (int)pid,
		       is_loopback(host) ? "true" : "false");
	else
		printf("forwarding %s:%u -> sandbox %s port %u (TCP), detached (pid %d; stop it "
		       "with: rung port rm %s %u)\n",
		       host, host_port, rung_sandbox_id(sb), port, (int)pid, rung_sandbox_id(sb),
		       port);
	return 0;
}

int cli_port_ls(struct cli *c, int argc, char **argv)
{
	const char *id = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			c->json = true;
		else if (argv[i][0] == '-' || id)
			return cli_usage_error("port", "unexpected '%s'", argv[i]);
		else
			id = argv[i];
	}
	if (!id)
		return cli_usage_error("port", "usage: rung port ls ID [--json]");
	if (c->remote)
		return cli_usage_error("port", "rung port ls reads the local store");
	struct rung_sandbox *sb;
	int st = cli_sandbox_open(c, id, &sb);
	if (st)
		return st;
	struct rung_err err = {0};
	struct rung_port_fwd *v;
	size_t n;
	if (rung_port_fwd_list(sb, &v, &n, &err) < 0) {
		rung_sandbox_close(sb);
		return cli_fail(c, &err);
	}
	if (c->json)
		printf("{\"id\": \"%s\", \"ports\": [", rung_sandbox_id(sb));
	else
		printf("%-6s %-40s %-9s %-6s %s\n", "PORT", "HOST", "HOST_PORT", "PROTO", "PID");
	for (size_t i = 0; i < n; i++) {
		if (c->json)
			printf("%s{\"port\": %u, \"host\": \"%s\", \"host_port\": %u, "
			       "\"protocol\": \"tcp\", \"pid\": %d, \"loopback\": %s}",
			       i ? ", " : "", v[i].port, v[i].host, v[i].host_port, (int)v[i].pid,
			       is_loopback(v[i].host) ? "true" : "false");
		else
			printf("%-6u %-40s %-9u %-6s %d\n", v[i].port, v[i].host, v[i].host_port,
			       "tcp", (int)v[i].pid);
	}
	if (c->json)
		printf("]}\n");
	free(v);
	rung_sandbox_close(sb);
	return 0;
}

int cli_port_rm(struct cli *c, int argc, char **argv)
{
	if (argc != 3)
		return cli_usage_error("port", "usage: rung port rm ID SANDBOX_PORT");
	char *end;
	unsigned long port = strtoul(argv[2], &end, 10);
	if (*end || end == argv[2] || port < 1 || port > 65535)
		return cli_usage_error("port", "SANDBOX_PORT: '%s' is not a TCP port (1..65535)",
				       argv[2]);
	if (c->remote)
		return cli_usage_error("port", "rung port rm works on the local store");
	struct rung_sandbox *sb;
	int st = cli_sandbox_open(c, argv[1], &sb);
	if (st)
		return st;
	struct rung_err err = {0};
	size_t removed;
	if (rung_port_fwd_remove(sb, (unsigned)port, &removed, &err) < 0)
		st = cli_fail(c, &err);
	else if (removed == 0)
		st = cli_usage_error("port", "sandbox %s has no detached forward to port %lu",
				     rung_sandbox_id(sb), port);
	else if (c->json)
		printf("{\"removed\": %zu}\n", removed);
	rung_sandbox_close(sb);
	return st;
}
