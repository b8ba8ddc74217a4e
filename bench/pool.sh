#!/bin/sh
# Benchmark for issue 16 (warm pools): run from the repository root, as root:  sh bench/pool.sh
# One run, rows interleaved round by round (bench/pool.c): the library's and the CLI's claim
# from a warm pool against a cold acquire and against bubblewrap's cold start (bench/spine.sh's
# namespaces), and `rung run -- /bin/true` served by the pool against a cold one.
# ROUNDS=N (default 60). RUNG_OLD=/path/to/another/rung adds its claim and --version rows to
# the same loop (a build copied aside before a change: the before/after in one run).
set -eu
cd "$(dirname "$0")/.."
make -s build/rung build/rung-agent build/bench/pool >/dev/null
ST=$(mktemp -d /tmp/rung-bench-pool-XXXXXX)
chmod 711 "$ST"
trap 'build/rung --state-dir "$ST" pool rm bench >/dev/null 2>&1 || true
      build/rung --state-dir "$ST" dispose-scope --scope bench >/dev/null 2>&1 || true
      rm -rf "$ST"' EXIT
RUNG_AGENT=$PWD/build/rung-agent build/bench/pool "$ST" "${ROUNDS:-60}" "$PWD/build/rung" \
	"$(command -v bwrap)" ${RUNG_OLD:+"$RUNG_OLD"}
