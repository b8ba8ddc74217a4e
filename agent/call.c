/*
 * agent/call.c: rung-call NAME [JSON], the command-line way for anything in a sandbox to call
 * a host function over its exec's callback channel (docs/callbacks.md). It is rung-agent
 * itself, run by that name. The result (JSON) goes to stdout; an error to stderr with exit 1;
 * no channel or a bad argument: exit 2.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "agent/agent.h"

#define ANSWER_MAX (64u << 20)

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: rung-call NAME [JSON|-]\n"
		   "Calls the host function NAME with JSON arguments (an object or an array;\n"
		   "default {}; -: read them from stdin) over this exec's callback channel\n"
		   "($RUNG_CALLBACK_FD) and prints its JSON result. Exit 1: the host refused the\n"
		   "call or its function failed (the reason on stderr); 2: usage or no channel.\n");
	return rc;
}

static bool name_ok(const char *n)
{
	size_t l = strlen(n);
	if (l == 0 || l > RUNG_PROTO_NAME_MAX)
		return false;
	for (const char *p = n; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
			return false;
	return true;
}

/* Print the JSON string starting at s (after its opening quote) to stderr, unescaped enough
 * to read. */
static void print_error(const char *name, const char *s)
{
	fprintf(stderr, "rung-call: %s: ", name);
	for (; *s && *s != '"'; s++) {
		if (*s == '\\' && s[1]) {
			s++;
			fputc(*s == 'n' ? '\n' : *s == 't' ? '\t' : *s, stderr);
		} else {
			fputc(*s, stderr);
		}
	}
	fputc('\n', stderr);
}

#define STUCK_MS 2000

/*
 * Our answer: the channel may be shared by several processes (a command's children inherit
 * it), so answers are taken off it only by their owner. Peek at the first line; ours (its id
 * is our pid): consume exactly it; another's: leave it to its owner and look again shortly.
 * A line nobody takes for STUCK_MS (its caller died) is dropped.
 */
static char *read_answer(int fd, const char *prefix)
{
	size_t cap = 65536;
	char *buf = malloc(cap);
	uint64_t stuck_since = 0;
	while (buf) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			break;
		ssize_t n = recv(fd, buf, cap - 1, MSG_PEEK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		char *nl = memchr(buf, '\n', (size_t)n);
		if (!nl && (size_t)n == cap - 1) {
			char *nb = cap < ANSWER_MAX ? realloc(buf, cap *= 2) : NULL;
			if (!nb)
				break;
			buf = nb;
			continue;
		}
		size_t l = nl ? (size_t)(nl - buf) + 1 : 0;
		bool mine = nl && !strncmp(buf, prefix, strlen(prefix));
		uint64_t now = rung_now_ms();
		if (mine || (nl && stuck_since && now - stuck_since > STUCK_MS)) {
			if (rung_read_exact(fd, buf, l) < 0)
				break;
			buf[l - 1] = 0;
			stuck_since = 0;
			if (mine)
				return buf;
			continue;
		}
		if (nl && !stuck_since)
			stuck_since = now;
		usleep(1000);
	}
	free(buf);
	return NULL;
}

int agent_call_main(int argc, char **argv, const char *fdv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
		return usage(stdout, 0);
	if (argc < 2 || argc > 3)
		return usage(stderr, 2);
	const char *name = argv[1];
	if (!name_ok(name)) {
		fprintf(stderr, "rung-call: NAME: letters, digits, _ - . only (1..%d)\n",
			RUNG_PROTO_NAME_MAX);
		return 2;
	}
	uint64_t fd;
	if (!fdv || rung_parse_u64(fdv, &fd) < 0 || fd > 1024) {
		fprintf(stderr, "rung-call: no host callbacks: this exec was not given any "
				"(RUNG_CALLBACK_FD is not set)\n");
		return 2;
	}
	char *args = NULL;
	size_t alen = 0;
	if (argc == 3 && !strcmp(argv[2], "-")) {
		if (rung_read_fd_all(0, ANSWER_MAX, &args, &alen, NULL) < 0) {
			fprintf(stderr, "rung-call: stdin: cannot read the arguments\n");
			return 2;
		}
	} else {
		args = strdup(argc == 3 ? argv[2] : "{}");
		alen = args ? strlen(args) : 0;
	}
	/* the id: our pid, unique among the processes sharing the channel */
	unsigned long long id = (unsigned long long)getpid();
	char *line = NULL;
	int n = args ? asprintf(&line, "{\"id\":%llu,\"name\":\"%s\",\"args\":%.*s}\n", id,
				name, (int)alen, args)
		     : -1;
	free(args);
	if (n < 0 || rung_write_all((int)fd, line, (size_t)n) < 0) {
		fprintf(stderr, "rung-call: the callback channel (fd %s): %s\n", fdv,
			strerror(n < 0 ? ENOMEM : errno));
		free(line);
		return 2;
	}
	free(line);
	char prefix[40], ok[80], bad[80];
	snprintf(prefix, sizeof(prefix), "{\"id\":%llu,", id);
	snprintf(ok, sizeof(ok), "%s\"ok\":true,\"result\":", prefix);
	snprintf(bad, sizeof(bad), "%s\"ok\":false,\"error\":\"", prefix);
	char *ans = read_answer((int)fd, prefix);
	size_t okl = strlen(ok), badl = strlen(bad);
	int rc = 1;
	if (!ans) {
		fprintf(stderr, "rung-call: %s: the host did not answer (the exec ended?)\n", name);
	} else if (!strncmp(ans, ok, okl)) {
		size_t l = strlen(ans);
		printf("%.*s\n", (int)(l - okl - 1), ans + okl);
		rc = 0;
	} else if (!strncmp(ans, bad, badl)) {
		print_error(name, ans + badl);
	} else {
		fprintf(stderr, "rung-call: %s: unexpected answer: %.200s\n", name, ans);
	}
	free(ans);
	return rc;
}
