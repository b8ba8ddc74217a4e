/*
 * bench/callbacks.c: host-callback round trips (docs/callbacks.md), measured in ONE run.
 * The same Python client loop (json.dumps, write a line, read a line, json.loads; N calls,
 * one thread) runs
 *   bare:    on the host, its fd 3 one end of a socketpair whose other end a host thread
 *            serves as the callback engine would (read a line, parse it with jansson,
 *            answer a JSON line): the floor a Unix-socket JSON round trip costs;
 *   library: inside a process-rung sandbox, its fd 3 the exec's callback channel, answered
 *            by an echo handler through rung_exec (agent relay + host library);
 *   rung_host: the same in the sandbox through the rung_host module (the real API).
 * Prints the median and p99 round trip in microseconds, calls/s, and library/bare.
 * usage: callbacks STATE_DIR N   (as root; env RUNG_AGENT as for every library program)
 */
#include <jansson.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "rung/rung.h"

/* argv[1]: N; mode "raw" or "module". Prints "p50_us p99_us calls_per_s". */
static const char *const loop_py =
    "import json, os, sys, time\n"
    "n, mode = int(sys.argv[1]), sys.argv[2]\n"
    "fd = int(os.environ['RUNG_CALLBACK_FD'])\n"
    "buf = b''\n"
    "def raw(i):\n"
    "    global buf\n"
    "    os.write(fd, json.dumps({'id': i, 'name': 'echo', 'args': {'i': i}}).encode() + b'\\n')\n"
    "    while b'\\n' not in buf:\n"
    "        buf += os.read(fd, 65536)\n"
    "    line, _, buf = buf.partition(b'\\n')\n"
    "    return json.loads(line)\n"
    "if mode == 'module':\n"
    "    import rung_host\n"
    "    call = lambda i: rung_host.call('echo', i=i)\n"
    "else:\n"
    "    call = raw\n"
    "for i in range(50): call(i)\n"
    "lat = []\n"
    "t0 = time.perf_counter()\n"
    "for i in range(n):\n"
    "    a = time.perf_counter_ns(); call(i); lat.append(time.perf_counter_ns() - a)\n"
    "el = time.perf_counter() - t0\n"
    "lat.sort()\n"
    "print(lat[len(lat) // 2] / 1000, lat[min(len(lat) - 1, len(lat) * 99 // 100)] / 1000, n / el)\n";

static int echo(void *ud, const struct rung_callback_call *c, char **result,
		struct rung_err *err)
{
	*result = strdup(c->args);
	return *result ? 0 : rung_err_set(err, ENOMEM, "oom");
}

/* The bare peer: line in, jansson parse, compact answer out, until EOF. */
static void *bare_server(void *arg)
{
	int fd = *(int *)arg;
	char buf[65536];
	size_t len = 0;
	for (;;) {
		char *nl;
		while (!(nl = memchr(buf, '\n', len))) {
			ssize_t n = read(fd, buf + len, sizeof(buf) - len);
			if (n <= 0)
				return NULL;
			len += (size_t)n;
		}
		json_t *j = json_loadb(buf, (size_t)(nl - buf), 0, NULL);
		json_t *a = json_pack("{s:O, s:b, s:O}", "id", json_object_get(j, "id"), "ok", 1,
				      "result", json_object_get(j, "args"));
		char *s = json_dumps(a, JSON_COMPACT | JSON_PRESERVE_ORDER);
		json_decref(j);
		json_decref(a);
		size_t sl = strlen(s);
		s[sl] = '\n';
		rung_write_all(fd, s, sl + 1);
		free(s);
		len -= (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, len);
	}
}

extern char **environ;

static int run_bare(const char *n, char *out, size_t outlen)
{
	int sv[2], po[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || pipe(po) < 0)
		return -1;
	pthread_t t;
	pthread_create(&t, NULL, bare_server, &sv[0]);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	char *const argv[] = {"/usr/bin/python3", "-c", (char *)loop_py, (char *)n, "raw", NULL};
	char *const envp[] = {"RUNG_CALLBACK_FD=3", "PATH=/usr/bin:/bin", NULL};
	pid_t pid;
	int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(sv[1]);
	close(po[1]);
	ssize_t got = rc == 0 ? read(po[0], out, outlen - 1) : -1;
	out[got > 0 ? got : 0] = 0;
	close(po[0]);
	if (rc == 0)
		waitpid(pid, NULL, 0);
	shutdown(sv[0], SHUT_RDWR);
	pthread_join(t, NULL);
	close(sv[0]);
	return got > 0 ? 0 : -1;
}

static int run_sandbox(struct rung_sandbox *sb, const char *n, const char *mode, char *out,
		       size_t outlen)
{
	static const struct rung_callback tab[] = {{"echo", echo, NULL}};
	const char *argv[] = {"python3", "-c", loop_py, n, mode, NULL};
	struct rung_exec_req req = {.argv = argv, .timeout_ms = 600000, .callbacks = tab,
				    .n_callbacks = 1, .cb_limits = {.rate_per_s = 1000000}};
	struct rung_exec_res res;
	struct rung_err err = {0};
	if (rung_exec(sb, &req, &res, &err) < 0 || res.exit_code != 0) {
		fprintf(stderr, "sandbox %s: %s %s\n", mode, err.msg, res.errout ? res.errout : "");
		return -1;
	}
	snprintf(out, outlen, "%s", res.out);
	rung_exec_res_release(&res);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: callbacks STATE_DIR N\n");
		return 2;
	}
	struct rung_err err = {0};
	struct rung_router *r;
	struct rung_router_opts o = {0};
	if (rung_router_opts_load(&o, getenv, &err) < 0) { /* this main reads them */
		fprintf(stderr, "%s\n", err.msg);
		return 2;
	}
	o.state_dir = argv[1];
	if (rung_router_new(&o, &r, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	struct rung_spec spec;
	rung_spec_init(&spec);
	spec.kind = strdup("bench");
	spec.requires = RUNG_CAP_EXEC | RUNG_CAP_HOST_CALLBACKS;
	struct rung_key key = {"bench", "callbacks", "bench"};
	struct rung_sandbox *sb;
	bool created;
	if (rung_acquire(r, &key, &spec, &sb, &created, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	char bare[256], lib[256], mod[256];
	int rc = 1;
	/* interleaved twice; the second round is reported (warm caches on both sides) */
	for (int round = 0; round < 2; round++)
		if (run_bare(argv[2], bare, sizeof(bare)) < 0 ||
		    run_sandbox(sb, argv[2], "raw", lib, sizeof(lib)) < 0 ||
		    run_sandbox(sb, argv[2], "module", mod, sizeof(mod)) < 0)
			goto out;
	double b50, b99, bcps, l50, l99, lcps, m50, m99, mcps;
	if (sscanf(bare, "%lf %lf %lf", &b50, &b99, &bcps) != 3 ||
	    sscanf(lib, "%lf %lf %lf", &l50, &l99, &lcps) != 3 ||
	    sscanf(mod, "%lf %lf %lf", &m50, &m99, &mcps) != 3)
		goto out;
	printf("calls %s (one thread each)\n", argv[2]);
	printf("bare_unix_json   p50 %8.1f us  p99 %8.1f us  %9.0f calls/s\n", b50, b99, bcps);
	printf("library          p50 %8.1f us  p99 %8.1f us  %9.0f calls/s\n", l50, l99, lcps);
	printf("library_rung_host p50 %7.1f us  p99 %8.1f us  %9.0f calls/s\n", m50, m99, mcps);
	printf("ratio library/bare p50 = %.2fx (target <= 3)  p99 = %.2fx\n", l50 / b50, l99 / b99);
	rc = 0;
out:
	rung_dispose(r, rung_sandbox_id(sb), NULL, &err);
	rung_sandbox_close(sb);
	rung_spec_release(&spec);
	rung_router_free(r);
	return rc;
}
