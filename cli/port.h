/* cli/port.h: the pieces of `rung port` (cli/cmd-port.c, cli/cmd-port-ls.c). */
#ifndef RUNG_CLI_PORT_H
#define RUNG_CLI_PORT_H

#include <stddef.h>

#include "cli/cli.h"

int cli_port_listen(const char *host, unsigned port, char *addr, size_t addr_len, unsigned *bound,
		    struct rung_err *err);
int cli_port_ls(struct cli *c, int argc, char **argv);
int cli_port_rm(struct cli *c, int argc, char **argv);
int cli_port_detach(struct cli *c, struct rung_sandbox *sb, unsigned port, int lfd,
		    const char *host, unsigned host_port);

#endif
