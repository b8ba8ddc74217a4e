/*
 * tests/check_rootfs_pull.c: pull from a REAL registry on loopback: Debian's docker-registry
 * started on 127.0.0.1:<free port> with a temp config and storage, filled with skopeo, killed
 * after (only the PID this test started; PR_SET_PDEATHSIG covers a failed assertion).
 */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs.h"
#include "tests/lib/rootfs.h"
#include "tests/lib/testutil.h"

#define REGISTRY "/usr/bin/docker-registry"
#define SKOPEO "/usr/bin/skopeo"
/* bcrypt of "s3cret-pw" (made with python3 crypt, METHOD_BLOWFISH). */
#define HTPASSWD "rung:$2b$12$gYlT.D/dkSTT5MvEc92XfOo80Wf6U6Vd0vOxMoQc9T1qZf7MRlXru\n"

struct reg {
	char *tmp;
	char state[4096], layout[4096], name[128];
	int port;
	pid_t pid;
	struct rfs_store *s;
};

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static bool port_open(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	bool ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

static void write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* fork + execve (absolute path, argv), output to log; returns the exit status. */
static int run(const char *log, char *const argv[], bool wait_it, pid_t *pid_out)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		char *envp[] = { "PATH=/usr/bin:/bin", "HOME=/tmp", NULL };
		execve(argv[0], argv, envp);
		_exit(127);
	}
	if (pid_out)
		*pid_out = pid;
	if (!wait_it)
		return 0;
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void reg_start(struct reg *g, bool with_auth)
{
	if (access(REGISTRY, X_OK) || access(SKOPEO, X_OK))
		ck_abort_msg("docker-registry or skopeo missing: scripts/setup-deps.sh test");
	g->tmp = rung_test_tmpdir("rfs-pull");
	ck_assert_ptr_nonnull(g->tmp);
	g->port = free_port();
	char cfg[8192], p[4200], log[4200];
	snprintf(cfg, sizeof(cfg),
		 "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: "
		 "%s/data\nhttp:\n  addr: 127.0.0.1:%d\n  secret: rung-test-secret\n%s%s%s",
		 g->tmp, g->port, with_auth ? "auth:\n  htpasswd:\n    realm: rung-test\n    path: " : "",
		 with_auth ? g->tmp : "", with_auth ? "/htpasswd\n" : "");
	snprintf(p, sizeof(p), "%s/config.yml", g->tmp);
	write_text(p, cfg);
	if (with_auth) {
		char hp[4200];
		snprintf(hp, sizeof(hp), "%s/htpasswd", g->tmp);
		write_text(hp, HTPASSWD);
	}
	snprintf(log, sizeof(log), "%s/registry.log", g->tmp);
	char *argv[] = { REGISTRY, "serve", p, NULL };
	run(log, argv, false, &g->pid);
	for (int i = 0; i < 200 && !port_open(g->port); i++)
		usleep(50 * 1000);
	ck_assert_msg(port_open(g->port), "docker-registry did not listen on %d (see %s)", g->port,
		      log);
	snprintf(g->state, sizeof(g->state), "%s/state", g->tmp);
	snprintf(g->layout, sizeof(g->layout), "%s/layout", g->tmp);
	tb_busybox_layout(g->layout, g->tmp, RFS_COMPRESS_GZIP, "rung/busybox:latest");
	/* Push with skopeo. */
	char src[4200], dst[256];
	snprintf(src, sizeof(src), "oci:%s", g->layout);
	snprintf(g->name, sizeof(g->name), "127.0.0.1:%d/rung/busybox", g->port);
	snprintf(dst, sizeof(dst), "docker://%s:latest", g->name);
	char *push[] = { SKOPEO, "--insecure-policy", "copy", "--dest-tls-verify=false",
			 "--dest-creds", "rung:s3cret-pw", src, dst, NULL };
	if (!with_auth)
		push[4] = "--quiet", push[5] = "--quiet";
	char slog[4200];
	snprintf(slog, sizeof(slog), "%s/skopeo.log", g->tmp);
	ck_assert_msg(run(slog, push, true, NULL) == 0, "skopeo copy failed (see %s)", slog);
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_store_open(g->state, &g->s, &err) == 0, "%s", err.msg);
}

static void reg_stop(struct reg *g)
{
	if (g->pid > 0) {
		kill(g->pid, SIGTERM);
		waitpid(g->pid, NULL, 0);
	}
	rfs_store_free(g->s);
	struct rung_err err = { 0 };
	rung_rm_rf(g->tmp, &err);
	free(g->tmp);
}

static int store_count(struct reg *g, const char *sub)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/images/%s", g->state, sub);
	return tb_count_dir(p);
}

struct prog {
	int calls;
	uint64_t last_done, last_total;
};
static void on_progress(const char *layer, uint64_t done, uint64_t total, void *ud)
{
	struct prog *p = ud;
	ck_assert(rfs_digest_valid(layer));
	p->calls++;
	p->last_done = done;
	p->last_total = total;
}

START_TEST(test_pull)
{
	RUNG_REQUIRE_ROOT();
	struct reg g = { 0 };
	reg_start(&g, false);
	struct rung_err err = { 0 };
	struct rfs_image_info info, r2;
	struct prog pg = { 0 };
	int fds = rung_test_count_fds();
	char ref[256];
	snprintf(ref, sizeof(ref), "%s:latest", g.name);
	int r = rfs_image_pull(g.s, ref, NULL, on_progress, &pg, &info, &err);
	ck_assert_msg(r == 0, "pull: %s", err.msg);
	ck_assert_int_eq(info.n_layers, 2);
	ck_assert_str_eq(info.config.working_dir, "/work");
	ck_assert_str_eq(info.config.env[1], "GREETING=hi");
	ck_assert_int_gt(pg.calls, 0);
	ck_assert_int_eq(pg.last_done, pg.last_total);
	ck_assert_msg(rfs_image_resolve(g.s, g.name, &r2, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(r2.digest, info.digest);
	rfs_image_info_release(&r2);
	char **dirs = NULL;
	ck_assert_msg(rfs_image_layers(g.s, &info, &dirs, &err) == 0, "%s", err.msg);
	char p[4200];
	struct stat st;
	snprintf(p, sizeof(p), "%s/bin/busybox", dirs[1]);
	ck_assert_int_eq(stat(p, &st), 0);
	for (char **d = dirs; *d; d++)
		free(*d);
	free(dirs);
	/* By digest, stored under another tag. */
	char byd[300];
	snprintf(byd, sizeof(byd), "%s@%s", g.name, info.digest);
	struct rfs_pull_opts o = { .tag = "rung/pinned:1" };
	ck_assert_msg(rfs_image_pull(g.s, byd, &o, NULL, NULL, &r2, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(r2.digest, info.digest);
	ck_assert_str_eq(r2.ref, "rung/pinned:1");
	rfs_image_info_release(&r2);
	/* A tag the registry does not have. */
	snprintf(ref, sizeof(ref), "%s:nope", g.name);
	ck_assert_int_eq(rfs_image_pull(g.s, ref, NULL, NULL, NULL, &r2, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "404"), "%s", err.msg);
	ck_assert_int_eq(store_count(&g, "tmp"), 0);
	ck_assert_int_eq(rung_test_count_fds(), fds);
	rfs_image_info_release(&info);
	reg_stop(&g);
}
END_TEST

START_TEST(test_pull_basic_auth)
{
	RUNG_REQUIRE_ROOT();
	struct reg g = { 0 };
	reg_start(&g, true);
	struct rung_err err = { 0 };
	struct rfs_image_info info;
	char ref[256];
	snprintf(ref, sizeof(ref), "%s:latest", g.name);
	unsetenv("RUNG_REGISTRY_USER");
	ck_assert_int_eq(rfs_image_pull(g.s, ref, NULL, NULL, NULL, &info, &err), -EACCES);
	ck_assert_msg(strstr(err.msg, "credentials"), "%s", err.msg);
	struct rfs_pull_opts bad = { .username = "rung", .password = "wrong" };
	ck_assert_int_eq(rfs_image_pull(g.s, ref, &bad, NULL, NULL, &info, &err), -EACCES);
	struct rfs_pull_opts good = { .username = "rung", .password = "s3cret-pw" };
	ck_assert_msg(rfs_image_pull(g.s, ref, &good, NULL, NULL, &info, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(info.n_layers, 2);
	rfs_image_info_release(&info);
	reg_stop(&g);
}
END_TEST

/* Corrupt the registry's copy of the biggest blob: the pull must refuse it. */
START_TEST(test_pull_tampered_blob)
{
	RUNG_REQUIRE_ROOT();
	struct reg g = { 0 };
	reg_start(&g, false);
	char bdir[4200];
	snprintf(bdir, sizeof(bdir), "%s/data/docker/registry/v2/blobs/sha256", g.tmp);
	/* blobs/sha256/<2 hex>/<hex>/data */
	char best[4600] = "";
	off_t bsize = 0;
	DIR *d1 = opendir(bdir);
	ck_assert_ptr_nonnull(d1);
	struct dirent *a;
	while ((a = readdir(d1))) {
		if (a->d_name[0] == '.')
			continue;
		char p2[4400];
		snprintf(p2, sizeof(p2), "%s/%.8s", bdir, a->d_name);
		DIR *d2 = opendir(p2);
		struct dirent *b;
		while (d2 && (b = readdir(d2))) {
			if (b->d_name[0] == '.')
				continue;
			char p3[4600];
			struct stat st;
			snprintf(p3, sizeof(p3), "%s/%.80s/data", p2, b->d_name);
			if (stat(p3, &st) == 0 && st.st_size > bsize)
				bsize = st.st_size, snprintf(best, sizeof(best), "%s", p3);
		}
		if (d2)
			closedir(d2);
	}
	closedir(d1);
	ck_assert_int_gt(bsize, 1000);
	int fd = open(best, O_RDWR);
	char c;
	ck_assert_int_eq(pread(fd, &c, 1, bsize / 2), 1);
	c ^= 0x5a;
	ck_assert_int_eq(pwrite(fd, &c, 1, bsize / 2), 1);
	close(fd);
	struct rung_err err = { 0 };
	struct rfs_image_info info;
	char ref[256];
	snprintf(ref, sizeof(ref), "%s:latest", g.name);
	ck_assert_int_eq(rfs_image_pull(g.s, ref, NULL, NULL, NULL, &info, &err), -EBADMSG);
	ck_assert_msg(strstr(err.msg, "does not match"), "%s", err.msg);
	ck_assert_int_eq(store_count(&g, "layers/sha256"), 0);
	ck_assert_int_eq(store_count(&g, "tmp"), 0);
	ck_assert_int_eq(rfs_image_resolve(g.s, ref, &info, &err), -ENOENT);
	reg_stop(&g);
}
END_TEST


/*
 * A minimal registry with Bearer auth, serving one OCI layout (tests the token dance and the
 * index path: the tag answers with the layout's index.json). Forked; one request at a time.
 */
#define FAKE_TOKEN "tok-rung-123"

static void http_reply(int c, int code, const char *extra, const char *ctype, const void *body,
		       size_t len)
{
	char h[1024];
	int n = snprintf(h, sizeof(h),
			 "HTTP/1.1 %d X\r\nConnection: close\r\nContent-Length: %zu\r\n%s%s%s%s\r\n",
			 code, len, ctype ? "Content-Type: " : "", ctype ? ctype : "",
			 ctype ? "\r\n" : "", extra ? extra : "");
	if (write(c, h, (size_t)n) != n)
		return;
	if (len && write(c, body, len) != (ssize_t)len)
		return;
}

static void fake_serve(int lfd, const char *layout, int port, const char *realm_host,
		       const char *marker)
{
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			continue;
		char req[8192];
		size_t got = 0;
		while (got < sizeof(req) - 1 && !memmem(req, got, "\r\n\r\n", 4)) {
			ssize_t n = read(c, req + got, sizeof(req) - 1 - got);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		req[got] = '\0';
		char path[2048] = "";
		sscanf(req, "GET %2047s", path);
		bool authed = strstr(req, "Authorization: Bearer " FAKE_TOKEN "\r\n") != NULL;
		char chal[512];
		snprintf(chal, sizeof(chal),
			 "WWW-Authenticate: Bearer realm=\"http://%s:%d/token\",service=\"fake\","
			 "scope=\"repository:rung/busybox:pull\"\r\n",
			 realm_host, port);
		static char body[4 << 20];
		if (!strncmp(path, "/token?", 7)) {
			if (marker) /* the test sees whether the token server was asked */
				close(open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
			bool ok = strstr(path, "service=fake") && strstr(path, "scope=repository%3Arung%2Fbusybox%3Apull");
			const char *tok = "{\"token\":\"" FAKE_TOKEN "\"}";
			if (ok)
				http_reply(c, 200, NULL, "application/json", tok, strlen(tok));
			else
				http_reply(c, 400, NULL, NULL, "", 0);
		} else if (!authed) {
			http_reply(c, 401, chal, NULL, "", 0);
		} else {
			char file[4300] = "";
			const char *ctype = NULL;
			const char *m = "/v2/rung/busybox/manifests/", *b = "/v2/rung/busybox/blobs/sha256:";
			if (!strcmp(path, "/v2/rung/busybox/manifests/latest")) {
				snprintf(file, sizeof(file), "%s/index.json", layout);
				ctype = "application/vnd.oci.image.index.v1+json";
			} else if (!strncmp(path, m, strlen(m)) && !strncmp(path + strlen(m), "sha256:", 7)) {
				snprintf(file, sizeof(file), "%s/blobs/sha256/%.64s", layout,
					 path + strlen(m) + 7);
				ctype = "application/vnd.oci.image.manifest.v1+json";
			} else if (!strncmp(path, b, strlen(b))) {
				snprintf(file, sizeof(file), "%s/blobs/sha256/%.64s", layout,
					 path + strlen(b));
			}
			ssize_t n = file[0] ? tb_read(file, body, sizeof(body)) : -1;
			if (n < 0)
				http_reply(c, 404, NULL, NULL, "", 0);
			else
				http_reply(c, 200, NULL, ctype, body, (size_t)n);
		}
		close(c);
	}
}

/* The fake registry on 127.0.0.1:port, its token realm on realm_host; returns its pid. */
static pid_t fake_start(const char *layout, const char *realm_host, const char *marker, int *port)
{
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(lfd, 16), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &l), 0);
	*port = ntohs(a.sin_port);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		fake_serve(lfd, layout, *port, realm_host, marker);
		_exit(0);
	}
	close(lfd);
	return pid;
}

START_TEST(test_pull_bearer)
{
	RUNG_REQUIRE_ROOT();
	char *tmp = rung_test_tmpdir("rfs-bearer");
	char layout[4200], state[4200];
	snprintf(layout, sizeof(layout), "%s/layout", tmp);
	snprintf(state, sizeof(state), "%s/state", tmp);
	tb_busybox_layout(layout, tmp, RFS_COMPRESS_ZSTD, "rung/busybox:latest");
	int port;
	pid_t pid = fake_start(layout, "127.0.0.1", NULL, &port);
	struct rfs_store *s;
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_store_open(state, &s, &err) == 0, "%s", err.msg);
	char ref[128];
	snprintf(ref, sizeof(ref), "127.0.0.1:%d/rung/busybox:latest", port);
	struct rfs_image_info info;
	int r = rfs_image_pull(s, ref, NULL, NULL, NULL, &info, &err);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ck_assert_msg(r == 0, "pull: %s", err.msg);
	ck_assert_int_eq(info.n_layers, 2);
	ck_assert_str_eq(info.config.working_dir, "/work");
	rfs_image_info_release(&info);
	rfs_store_free(s);
	rung_rm_rf(tmp, &err);
	free(tmp);
}
END_TEST

/* A registry (localhost:port) whose token realm is on another host (127.0.0.1): refused,
 * the credentials never reach the realm, unless the operator names that host. */
START_TEST(test_pull_foreign_realm)
{
	RUNG_REQUIRE_ROOT();
	char *tmp = rung_test_tmpdir("rfs-realm");
	char layout[4200], state[4200], marker[4200];
	snprintf(layout, sizeof(layout), "%s/layout", tmp);
	snprintf(state, sizeof(state), "%s/state", tmp);
	snprintf(marker, sizeof(marker), "%s/token-asked", tmp);
	tb_busybox_layout(layout, tmp, RFS_COMPRESS_GZIP, "rung/busybox:latest");
	int port;
	pid_t pid = fake_start(layout, "127.0.0.1", marker, &port);
	struct rfs_store *s;
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_store_open(state, &s, &err) == 0, "%s", err.msg);
	char ref[128];
	snprintf(ref, sizeof(ref), "localhost:%d/rung/busybox:latest", port);
	struct rfs_image_info info;
	unsetenv("RUNG_REGISTRY_TOKEN_HOSTS");
	struct rfs_pull_opts o = { .username = "alice", .password = "s3cret" };
	int r = rfs_image_pull(s, ref, &o, NULL, NULL, &info, &err);
	ck_assert_int_eq(r, -EACCES);
	ck_assert_msg(strstr(err.msg, "127.0.0.1") && strstr(err.msg, "RUNG_REGISTRY_TOKEN_HOSTS"),
		      "%s", err.msg);
	ck_assert_msg(access(marker, F_OK) < 0, "the foreign token realm was asked");
	/* allowed by the operator (the option; rung-image's main sets it from
	 * RUNG_REGISTRY_TOKEN_HOSTS: the library reads no environment) */
	o.token_hosts = "other.example, 127.0.0.1";
	r = rfs_image_pull(s, ref, &o, NULL, NULL, &info, &err);
	ck_assert_msg(r == 0, "pull: %s", err.msg);
	rfs_image_info_release(&info);
	ck_assert_int_eq(access(marker, F_OK), 0);
	o.token_hosts = NULL;
	setenv("RUNG_REGISTRY_TOKEN_HOSTS", "127.0.0.1", 1);
	o.tag = "again:1";
	r = rfs_image_pull(s, ref, &o, NULL, NULL, &info, &err);
	unsetenv("RUNG_REGISTRY_TOKEN_HOSTS");
	ck_assert_int_eq(r, -EACCES);
	ck_assert_msg(strstr(err.msg, "RUNG_REGISTRY_TOKEN_HOSTS"), "%s", err.msg);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	rfs_store_free(s);
	rung_rm_rf(tmp, &err);
	free(tmp);
}
END_TEST

static int auth(const char *reg, bool plain, const char *scheme, const char *realm,
		const char *hosts, struct rung_err *err)
{
	struct rfs_www_auth w = { 0 };
	snprintf(w.scheme, sizeof(w.scheme), "%s", scheme);
	snprintf(w.realm, sizeof(w.realm), "%s", realm);
	return rfs_auth_check(reg, plain, &w, hosts, err);
}

START_TEST(test_auth_check)
{
	struct rung_err err = { 0 };
	/* same host, https: fine; docker hub's auth host is built in */
	ck_assert_int_eq(auth("reg.example", false, "Bearer", "https://reg.example/token", NULL, &err), 0);
	ck_assert_int_eq(auth("reg.example:5000", false, "Bearer", "https://REG.example:443/t", NULL, &err), 0);
	ck_assert_int_eq(auth("registry-1.docker.io", false, "Bearer", "https://auth.docker.io/token", NULL, &err), 0);
	/* another host: refused, unless listed */
	ck_assert_int_eq(auth("reg.example", false, "Bearer", "https://evil.example/token", NULL, &err), -EACCES);
	ck_assert_ptr_nonnull(strstr(err.msg, "evil.example"));
	ck_assert_int_eq(auth("reg.example", false, "Bearer", "https://evil.example/token", "a.example,evil.example", &err), 0);
	ck_assert_int_eq(auth("reg.example", false, "Bearer", "https://evil.example.com/token", "evil.example", &err), -EACCES);
	ck_assert_int_eq(auth("reg.example", false, "Bearer", "https://x@reg.example/token", NULL, &err), -EACCES);
	/* clear text outside loopback: never */
	ck_assert_int_eq(auth("reg.example", false, "Bearer", "http://reg.example/token", NULL, &err), -EACCES);
	ck_assert_ptr_nonnull(strstr(err.msg, "clear text"));
	ck_assert_int_eq(auth("reg.example", true, "Basic", "x", NULL, &err), -EACCES);
	ck_assert_ptr_nonnull(strstr(err.msg, "clear text"));
	ck_assert_int_eq(auth("reg.example", true, "Bearer", "https://reg.example/token", NULL, &err), -EACCES);
	/* loopback: plain is fine */
	ck_assert_int_eq(auth("127.0.0.1:5000", true, "Basic", "x", NULL, &err), 0);
	ck_assert_int_eq(auth("localhost:5000", true, "Bearer", "http://localhost:5000/token", NULL, &err), 0);
	ck_assert_int_eq(auth("[::1]:5000", true, "Bearer", "http://[::1]:5000/token", NULL, &err), 0);
	ck_assert_int_eq(auth("reg.example", false, "Bearer", "ftp://reg.example/token", NULL, &err), -EACCES);
}
END_TEST

START_TEST(test_www_auth_parse)
{
	struct rfs_www_auth w;
	struct rung_err err = { 0 };
	ck_assert_int_eq(rfs_www_auth_parse("Bearer realm=\"https://auth.example/token\","
					    "service=\"registry.example\",scope=\"repository:a/b:pull\"",
					    &w, &err),
			 0);
	ck_assert_str_eq(w.scheme, "Bearer");
	ck_assert_str_eq(w.realm, "https://auth.example/token");
	ck_assert_str_eq(w.service, "registry.example");
	ck_assert_str_eq(w.scope, "repository:a/b:pull");
	ck_assert_int_eq(rfs_www_auth_parse("Basic realm=\"x\"", &w, &err), 0);
	ck_assert_str_eq(w.scheme, "Basic");
	ck_assert_int_eq(rfs_www_auth_parse("Negotiate abc", &w, &err), -ENOTSUP);
	ck_assert_int_eq(rfs_www_auth_parse("Bearer realm=\"file:///etc/passwd\"", &w, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "not a URL"));
	ck_assert_int_eq(rfs_www_auth_parse("Bearer realm=\"unterminated", &w, &err), -EINVAL);
}
END_TEST

Suite *rootfs_pull_suite(void)
{
	Suite *s = suite_create("rootfs_pull");
	TCase *tc = tcase_create("registry");
	tcase_set_tags(tc, "net root");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_pull);
	tcase_add_test(tc, test_pull_basic_auth);
	tcase_add_test(tc, test_pull_tampered_blob);
	tcase_add_test(tc, test_pull_bearer);
	tcase_add_test(tc, test_pull_foreign_realm);
	suite_add_tcase(s, tc);
	TCase *tp = tcase_create("www-auth");
	tcase_set_timeout(tp, 10);
	tcase_add_test(tp, test_www_auth_parse);
	tcase_add_test(tp, test_auth_check);
	suite_add_tcase(s, tp);
	return s;
}
