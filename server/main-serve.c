/*
 * server/main-serve.c: build/rung-serve, the program behind `rung serve` (the CLI execs it, so
 * that libmicrohttpd stays out of the CLI's start-up).
 */
#include "server/server.h"

int main(int argc, char **argv)
{
	argv[0] = "serve";
	return rung_serve_main(argc, argv);
}
