/* server/serve.c: rung_serve_main: listeners, the sweeper, signals, shutdown. */
#include <arpa/inet.h>
#include <grp.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/log.h"
#include "common/util.h"
#include "server/http.h"
#include "server/ports.h"
#include "server/pool.h"
#include "server/ws.h"
#include "server/srv-internal.h"

/* ---- the sweeper: rung_gc every gc_interval_s ------------------------------------------ */

static bool wait_stop(struct srv *s, unsigned ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L)
		ts.tv_sec++, ts.tv_nsec -= 1000000000L;
	pthread_mutex_lock(&s->stop_mu);
	while (!s->stopping)
		if (pthread_cond_timedwait(&s->stop_cv, &s->stop_mu, &ts) == ETIMEDOUT)
			break;
	bool stop = s->stopping;
	pthread_mutex_unlock(&s->stop_mu);
	return stop;
}

static void *sweeper_main(void *arg)
{
	struct srv *s = arg;
	while (!wait_stop(s, s->o.gc_interval_s * 1000)) {
		struct rung_err err = {0};
		struct rung_router *r;
		if (srv_router_get(s, &r, &err) < 0) {
			atomic_fetch_add(&s->metrics.gc_errors, 1);
			LOG_WARN("op=gc error=\"%s\"", err.msg);
			continue;
		}
		struct rung_gc_report rep = {0};
		int rc = rung_gc(r, &rep, &err);
		srv_router_put(s, r);
		atomic_fetch_add(&s->metrics.gc_runs, 1);
		if (rc < 0) {
			atomic_fetch_add(&s->metrics.gc_errors, 1);
			LOG_WARN("op=gc error=\"%s\"", err.msg);
			continue;
		}
		size_t disposed = rep.disposed_dead + rep.disposed_ttl + rep.debris;
		atomic_fetch_add(&s->metrics.gc_disposed, disposed);
		atomic_fetch_add(&s->metrics.gc_suspended, rep.suspended_idle);
		if (disposed || rep.suspended_idle)
			LOG_INFO(
			    "op=gc suspended=%zu disposed_ttl=%zu disposed_dead=%zu debris=%zu",
			    rep.suspended_idle, rep.disposed_ttl, rep.disposed_dead, rep.debris);
	}
	return NULL;
}

/* ---- listeners -------------------------------------------------------------------------- */

static int unix_listen(const struct srv_opts *o, struct rung_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(o->socket_path) >= sizeof(sa.sun_path))
		return rung_err_set(err, ENAMETOOLONG, "--socket %s: path too long",
				    o->socket_path);
	strcpy(sa.sun_path, o->socket_path);
	cleanup_free char *dir = strdup(o->socket_path);
	char *slash = dir ? strrchr(dir, '/') : NULL;
	if (slash && slash != dir) {
		*slash = '\0';
		if (rung_mkdir_p(dir, 0755, err) < 0)
			return rung_err_wrap(err, "--socket");
	}
	cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return rung_err_sys(err, errno, "socket");
	/* A stale socket is replaced; a live one (another daemon answering) is an error. */
	struct stat st;
	if (lstat(o->socket_path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return rung_err_set(err, EEXIST, "--socket %s: exists and is not a socket",
					    o->socket_path);
		cleanup_close int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return rung_err_set(err, EADDRINUSE,
					    "--socket %s: another daemon is listening",
					    o->socket_path);
		unlink(o->socket_path);
	}
	/* Created with no access for others, then opened up to socket_mode. */
	mode_t old = umask(0177);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0)
		return rung_err_sys(err, errno, "bind %s", o->socket_path);
	if (o->socket_group) {
		struct group *g = getgrnam(o->socket_group);
		if (!g)
			return rung_err_set(err, ENOENT, "--socket-group %s: no such group",
					    o->socket_group);
		if (chown(o->socket_path, (uid_t)-1, g->gr_gid) < 0)
			return rung_err_sys(err, errno, "chown %s", o->socket_path);
	}
	if (chmod(o->socket_path, o->socket_mode) < 0)
		return rung_err_sys(err, errno, "chmod %s", o->socket_path);
	if (listen(fd, 128) < 0)
		return rung_err_sys(err, errno, "listen %s", o->socket_path);
	return rung_steal_fd(&fd);
}

static int tcp_listen(const char *hostport, struct rung_err *err)
{
	cleanup_free char *h = strdup(hostport);
	char *colon = h ? strrchr(h, ':') : NULL;
	if (!colon || colon == h)
		return rung_err_set(err, EINVAL, "--listen %s: expected HOST:PORT", hostport);
	*colon = '\0';
	char *host = h, *port = colon + 1;
	if (host[0] == '[' && colon[-1] == ']') {
		host++;
		colon[-1] = '\0';
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV | AI_PASSIVE};
	struct addrinfo *ai = NULL;
	int gr = getaddrinfo(host, port, &hints, &ai);
	if (gr != 0)
		return rung_err_set(err, EINVAL, "--listen %s: %s", hostport, gai_strerror(gr));
	cleanup_close int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1, r = -1;
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		r = bind(fd, ai->ai_addr, ai->ai_addrlen);
	}
	freeaddrinfo(ai);
	if (fd < 0 || r < 0 || listen(fd, 128) < 0)
		return rung_err_sys(err, errno, "--listen %s", hostport);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char addr[INET6_ADDRSTRLEN] = "?";
	unsigned p = 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr));
			p = ntohs(in->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
			inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
			p = ntohs(in6->sin6_port);
		}
	}
	LOG_WARN("op=listen tcp=%s:%u", addr, p); /* at WARN: tests and operators need the port */
	return rung_steal_fd(&fd);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	rung_log(RUNG_LOG_DEBUG, "mhd", "%s", line);
}

/*
 * Each connection's memory (its request head and read buffer): 32 KiB, which libmicrohttpd
 * takes from malloc. Above 32 KiB it maps a fresh region per connection instead, and its page
 * faults and unmapping cost every request ~0.28 ms on a virtualised host (bench/README.md,
 * "serve"); the header block's limit is what is left of it (431 beyond, docs/configuration.md).
 */
#define SRV_CONN_MEMORY (32 * 1024)

static int start_listener(struct srv *s, struct srv_listener *l, int fd, bool is_unix,
			  struct rung_err *err)
{
	l->s = s;
	l->is_unix = is_unix;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD |
			 MHD_USE_ERROR_LOG | MHD_USE_ITC | MHD_ALLOW_UPGRADE;
	l->d = MHD_start_daemon(
	    flags, 0, NULL, NULL, srv_access, l, MHD_OPTION_LISTEN_SOCKET, fd,
	    MHD_OPTION_NOTIFY_COMPLETED, srv_completed, l, MHD_OPTION_NOTIFY_CONNECTION,
	    srv_notify_conn, l, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->o.idle_timeout_s,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->o.max_connections,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, is_unix ? 0u : (unsigned)s->o.max_per_ip,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SRV_CONN_MEMORY, MHD_OPTION_EXTERNAL_LOGGER,
	    mhd_log, NULL, MHD_OPTION_END);
	if (!l->d) {
		close(fd);
		return rung_err_set(err, EIO, "cannot start the HTTP daemon on the %s listener",
				    is_unix ? "unix" : "tcp");
	}
	return 0;
}

/* ---- main ------------------------------------------------------------------------------- */

/*
 * key=value lines: "ts=... rung LEVEL: FUNC: MSG". With --json, one JSON object per line:
 * {"ts","level","func"} plus the message's own fields when it is a JSON object (request
 * lines), else "msg".
 */
static void log_sink(enum rung_log_level lvl, const char *line, void *data)
{
	const struct srv_opts *o = data;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char t[40], t2[64];
	strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(t2, sizeof(t2), "%s.%03dZ", t, (int)(ts.tv_nsec / 1000000));
	if (!o || !o->log_json) {
		fprintf(stderr, "ts=%s %s\n", t2, line);
		return;
	}
	static const char *const names[] = {"error", "warn", "info", "debug"};
	/* line: "rung LEVEL: FUNC: MSG" */
	const char *func = strstr(line, ": "), *msg = func ? strstr(func + 2, ": ") : NULL;
	char fn[64] = "";
	if (func && msg)
		snprintf(fn, sizeof(fn), "%.*s", (int)(msg - func - 2), func + 2);
	msg = msg ? msg + 2 : line;
	json_t *j = msg[0] == '{' ? json_loads(msg, 0, NULL) : NULL;
	if (!json_is_object(j)) {
		json_decref(j);
		j = json_pack("{s:s}", "msg", msg);
	}
	json_object_set_new(j, "ts", json_string(t2));
	json_object_set_new(j, "level", json_string(names[lvl <= RUNG_LOG_DEBUG ? lvl : 0]));
	json_object_set_new(j, "func", json_string(fn));
	char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
	json_decref(j);
	if (s)
		fprintf(stderr, "%s\n", s);
	free(s);
}

static void shutdown_all(struct srv *s, pthread_t *threads, size_t n_threads)
{
	pthread_mutex_lock(&s->stop_mu);
	s->stopping = true;
	pthread_cond_broadcast(&s->stop_cv);
	pthread_mutex_unlock(&s->stop_mu);
	for (size_t i = 0; i < n_threads; i++)
		pthread_join(threads[i], NULL);
	struct srv_listener *ls[2] = {&s->unix_l, &s->tcp_l};
	for (int i = 0; i < 2; i++)
		if (ls[i]->d) {
			MHD_socket fd = MHD_quiesce_daemon(ls[i]->d);
			if (fd != MHD_INVALID_SOCKET)
				close(fd);
		}
	srv_ws_shutdown(s); /* attaches detach; their processes run on */
	srv_ports_shutdown(); /* upgraded previews: MHD_stop_daemon would wait for them */
	uint64_t deadline = rung_now_ms() + (uint64_t)s->o.drain_s * 1000;
	while (atomic_load(&s->metrics.inflight) > 0 && rung_now_ms() < deadline)
		usleep(20000);
	long left = atomic_load(&s->metrics.inflight);
	if (left > 0) {
		/* MHD_stop_daemon would wait for them: leave, the store keeps every sandbox. */
		LOG_WARN("op=shutdown inflight=%ld: exiting without waiting", left);
		return;
	}
	for (int i = 0; i < 2; i++)
		if (ls[i]->d)
			MHD_stop_daemon(ls[i]->d);
	pthread_mutex_lock(&s->pool_mu);
	for (size_t i = 0; i < s->pool_n; i++)
		rung_router_free(s->pool[i]);
	free(s->pool);
	s->pool = NULL;
	s->pool_n = 0;
	pthread_mutex_unlock(&s->pool_mu);
	srv_tokens_release(&s->tokens);
}

/* SIGHUP: re-read the tokens file; a bad file keeps the old credentials. */
static void reload_tokens(struct srv *s)
{
	struct srv_tokens fresh = {0};
	struct rung_err err = {0};
	if (srv_tokens_load(s->o.tokens_path, &fresh, &err) < 0) {
		LOG_ERR("op=reload error=\"%s\": keeping the previous %zu credentials", err.msg,
			s->tokens.n);
		return;
	}
	pthread_rwlock_wrlock(&s->tokens_lock);
	struct srv_tokens old = s->tokens;
	s->tokens = fresh;
	pthread_rwlock_unlock(&s->tokens_lock);
	srv_tokens_release(&old);
	LOG_WARN("op=reload tokens=%zu", fresh.n);
}

int rung_serve_main(int argc, char **argv, const struct rung_router_opts *host)
{
	struct srv s = {0};
	struct rung_err err = {0};
	int r = srv_opts_parse(argc, argv, &s.o, &err);
	if (host)
		s.o.host = *host;
	if (r == 1) {
		fputs(srv_usage, stdout);
		return 0;
	}
	if (r < 0) {
		fprintf(stderr, "rung serve: %s\n%s", err.msg, srv_usage);
		return 2;
	}
	rung_log_set_level(s.o.log_level);
	rung_log_set_sink(log_sink, &s.o);
	if (srv_tokens_load(s.o.tokens_path, &s.tokens, &err) < 0) {
		fprintf(stderr, "rung serve: %s\n", err.msg);
		return 1;
	}
	pthread_rwlock_init(&s.tokens_lock, NULL);
	pthread_mutex_init(&s.pool_mu, NULL);
	pthread_mutex_init(&s.conn_mu, NULL);
	pthread_mutex_init(&s.scope_mu, NULL);
	pthread_mutex_init(&s.stop_mu, NULL);
	pthread_mutex_init(&s.ws_mu, NULL);
	pthread_cond_init(&s.stop_cv, NULL);
	/* Check the store once, so that a bad --state-dir fails now rather than per request. */
	struct rung_router *r0;
	if (srv_router_get(&s, &r0, &err) < 0) {
		fprintf(stderr, "rung serve: %s\n", err.msg);
		return 1;
	}
	snprintf(s.state_path, sizeof(s.state_path), "%s", rung_router_state_dir(r0));
	srv_router_put(&s, r0);

	/* Signals are taken by sigwait below; every thread inherits the blocked mask. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	int fd;
	if (s.o.socket_path[0]) {
		if ((fd = unix_listen(&s.o, &err)) < 0 ||
		    start_listener(&s, &s.unix_l, fd, true, &err) < 0)
			goto fail;
	}
	if (s.o.listen) {
		if ((fd = tcp_listen(s.o.listen, &err)) < 0 ||
		    start_listener(&s, &s.tcp_l, fd, false, &err) < 0)
			goto fail;
	}
	pthread_t threads[2 + SRV_MAX_POOLS];
	size_t nt = 0;
	if (srv_warm_start(&s, threads, &nt, &err) < 0) {
		shutdown_all(&s, threads, nt);
		fprintf(stderr, "rung serve: %s\n", err.msg);
		return 1;
	}
	if (pthread_create(&threads[nt], NULL, srv_watchdog_main, &s) == 0)
		nt++;
	if (s.o.gc_interval_s && pthread_create(&threads[nt], NULL, sweeper_main, &s) == 0)
		nt++;
	LOG_WARN("op=ready socket=%s tcp=%s tokens=%zu gc_interval=%u", s.o.socket_path,
		 s.o.listen ? s.o.listen : "-", s.tokens.n, s.o.gc_interval_s);
	int sig = 0;
	do {
		if (sigwait(&set, &sig) != 0)
			break;
		if (sig == SIGHUP)
			reload_tokens(&s);
	} while (sig == SIGHUP);
	LOG_WARN("op=shutdown signal=%d", sig);
	shutdown_all(&s, threads, nt);
	if (s.o.socket_path[0])
		unlink(s.o.socket_path);
	return 0;
fail:
	fprintf(stderr, "rung serve: %s\n", err.msg);
	shutdown_all(&s, NULL, 0);
	return 1;
}
