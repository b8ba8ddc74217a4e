/*
 * agent/call.c: rung-call NAME [JSON], the command-line way for anything in a sandbox to call
 * a host function over its exec's callback channel (docs/callbacks.md). It is rung-agent
 * itself, run by that name. The result (JSON) goes to stdout; an error to stderr with exit 1;
 * no channel or a bad argument: exit 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Read up to the first newline: the answer to our one call. */
static char *read_answer(int fd)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	while (buf) {
		if (len + 1 >= cap) {
			char *nb = cap < ANSWER_MAX ? realloc(buf, cap *= 2) : NULL;
			if (!nb)
				break;
			buf = nb;
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		char *nl = memchr(buf + len, '\n', (size_t)n);
		len += (size_t)n;
		if (nl) {
			*nl = 0;
			return buf;
		}
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
	char *line = NULL;
	int n = args ? asprintf(&line, "{\"id\":1,\"name\":\"%s\",\"args\":%.*s}\n", name,
				(int)alen, args)
		     : -1;
	free(args);
	if (n < 0 || rung_write_all((int)fd, line, (size_t)n) < 0) {
		fprintf(stderr, "rung-call: the callback channel (fd %s): %s\n", fdv,
			strerror(n < 0 ? ENOMEM : errno));
		free(line);
		return 2;
	}
	free(line);
	char *ans = read_answer((int)fd);
	static const char ok[] = "{\"id\":1,\"ok\":true,\"result\":";
	static const char bad[] = "{\"id\":1,\"ok\":false,\"error\":\"";
	int rc = 1;
	if (!ans) {
		fprintf(stderr, "rung-call: %s: the host did not answer (the exec ended?)\n", name);
	} else if (!strncmp(ans, ok, sizeof(ok) - 1)) {
		size_t l = strlen(ans);
		printf("%.*s\n", (int)(l - sizeof(ok)), ans + sizeof(ok) - 1);
		rc = 0;
	} else if (!strncmp(ans, bad, sizeof(bad) - 1)) {
		print_error(name, ans + sizeof(bad) - 1);
	} else {
		fprintf(stderr, "rung-call: %s: unexpected answer: %.200s\n", name, ans);
	}
	free(ans);
	return rc;
}
