/*
 * server/main-serve.c: build/rung-serve, the program behind `rung serve` (the CLI execs it, so
 * that libmicrohttpd stays out of the CLI's start-up). It reads the environment, once, here
 * (docs/configuration.md): the router's settings and the trace target.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "rung/rung.h"
#include "server/server.h"

int main(int argc, char **argv)
{
	struct rung_router_opts host = {0};
	struct rung_err err = {0};
	rung_trace_start(getenv("RUNG_TRACE"));
	if (rung_router_opts_load(&host, getenv, &err) < 0) {
		fprintf(stderr, "rung serve: %s\n", err.msg);
		return 2;
	}
	argv[0] = "serve";
	return rung_serve_main(argc, argv, &host);
}
