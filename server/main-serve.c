/*
 * server/main-serve.c: build/rung-serve, a thin entry point running `rung serve` (for tests and
 * benchmarks while cli/ does not dispatch to it yet). The product entry point is `rung serve`.
 */
#include "server/server.h"

int main(int argc, char **argv)
{
	argv[0] = "serve";
	return rung_serve_main(argc, argv);
}
