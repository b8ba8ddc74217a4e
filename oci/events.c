/*
 * oci/events.c: `events` without --stats, runc's stream: one JSON line per event on stdout,
 * {"type":"stats","id":ID,"data":{...}} every --interval (default 5s, the shape of
 * `events --stats`, oci/manage.c) and {"type":"oom","id":ID} for each OOM kill in the
 * container's memory group, until the container stops (runc ends when its cgroup goes).
 *
 * OOM kills are the group's own counter (memory.events oom_kill on v2, memory.oom_control
 * oom_kill on v1), read when the kernel says the group changed: v2 memory.events wakes poll()
 * with POLLPRI on every change, v1 signals an eventfd registered on memory.oom_control
 * through cgroup.event_control. Where neither can be armed the counter is read once a second,
 * which is also how often the container's liveness is checked.
 *
 * A vm container's stats are the guest's (oci_vm_stats_event, through its agent), with no oom
 * events (an OOM kill in the guest is its kernel's); while it is paused no stats are taken
 * (asking its agent would resume it).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/oci.h"
#include "oci/vm.h"

int64_t oci_duration_ms(const char *s)
{
	static const struct {
		const char *unit;
		double ms;
	} units[] = {{"ns", 1e-6}, {"us", 1e-3}, {"µs", 1e-3}, {"ms", 1}, {"s", 1000},
		     {"m", 60000}, {"h", 3600000}};
	double total = 0;
	if (!s || !*s)
		return -1;
	if (!strcmp(s, "0"))
		return 0; /* Go's one duration without a unit */
	while (*s) {
		char *end;
		if (!((*s >= '0' && *s <= '9') || *s == '.'))
			return -1;
		double v = strtod(s, &end);
		if (end == s || !isfinite(v))
			return -1;
		size_t i = 0, best = 0, blen = 0;
		for (; i < sizeof(units) / sizeof(units[0]); i++) {
			size_t l = strlen(units[i].unit);
			if (!strncmp(end, units[i].unit, l) && l > blen)
				best = i, blen = l;
		}
		if (!blen)
			return -1; /* a unit is required, as in Go */
		total += v * units[best].ms;
		s = end + blen;
	}
	if (total > 365.0 * 24 * 3600 * 1000)
		return -1;
	return total <= 0 ? 0 : total < 1 ? 1 : (int64_t)total;
}

/* An fd that becomes readable (v1 eventfd) or POLLPRI (v2) when the group's OOM state may have
 * changed; -1 when none could be armed. *pri: poll for POLLPRI (and re-read the file). */
static int oom_fd(const struct rt_cgroup *cg, bool *pri)
{
	const char *d = rt_cgroup_dir(cg, RT_CGCTL_MEMORY);
	char p[PATH_MAX];
	if (!d)
		return -1;
	if (rt_cgroup_version(cg) == RT_CGROUP_V2) {
		*pri = true;
		snprintf(p, sizeof(p), "%s/memory.events", d);
		return open(p, O_RDONLY | O_CLOEXEC);
	}
	*pri = false;
	snprintf(p, sizeof(p), "%s/memory.oom_control", d);
	cleanup_close int ofd = open(p, O_RDONLY | O_CLOEXEC);
	snprintf(p, sizeof(p), "%s/cgroup.event_control", d);
	cleanup_close int cfd = open(p, O_WRONLY | O_CLOEXEC);
	cleanup_close int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	char line[64];
	int n = snprintf(line, sizeof(line), "%d %d", efd, ofd);
	if (ofd < 0 || cfd < 0 || efd < 0 || rung_write_all(cfd, line, (size_t)n) < 0)
		return -1;
	return rung_steal_fd(&efd);
}

static int emit(const char *line)
{
	if (printf("%s\n", line) < 0 || fflush(stdout) == EOF)
		return -1;
	return 0;
}

static bool stopped(const char *root, const char *id)
{
	struct oci_state st;
	struct rung_err e = {0};
	if (oci_state_read(root, id, &st, &e) < 0)
		return true; /* deleted */
	bool gone = oci_status_of(root, &st) == OCI_STOPPED;
	oci_state_release(&st);
	return gone;
}

int oci_events_stream(const char *root, const char *id, uint64_t interval_ms,
		      struct rung_err *err)
{
	cleanup_rt_cgroup struct rt_cgroup *cg = NULL;
	int r = oci_events_group(root, id, &cg, err);
	if (r < 0)
		return r;
	if (!cg && stopped(root, id)) /* a vm container: oci_events_group checked only a group */
		return rung_err_set(err, ESRCH, "container %s is not running (stopped)", id);
	bool pri = false;
	cleanup_close int fd = cg ? oom_fd(cg, &pri) : -1;
	uint64_t kills = 0, now_kills;
	if (cg)
		(void)rt_cgroup_oom_kills(cg, &kills, err);
	char oom[512];
	snprintf(oom, sizeof(oom), "{\"type\":\"oom\",\"id\":\"%s\"}", id); /* ids: [\w+-.] */
	uint64_t next = rung_now_ms() + interval_ms;
	for (;;) {
		uint64_t now = rung_now_ms();
		uint64_t wait = next > now ? next - now : 0;
		struct pollfd pf = {.fd = fd, .events = pri ? POLLPRI : POLLIN};
		if (poll(&pf, fd >= 0 ? 1 : 0, (int)(wait < 1000 ? wait : 1000)) < 0 &&
		    errno != EINTR)
			return rung_err_sys(err, errno, "poll");
		if (fd >= 0 && pf.revents) { /* consume: re-arm the notification */
			char b[512];
			if (pri)
				(void)!pread(fd, b, sizeof(b), 0);
			else
				(void)!read(fd, b, sizeof(b));
		}
		struct rung_err e = {0};
		if (cg && rt_cgroup_oom_kills(cg, &now_kills, &e) == 0)
			for (; kills < now_kills; kills++)
				if (emit(oom) < 0)
					return 0; /* the reader went away */
		if (stopped(root, id))
			return 0;
		if (rung_now_ms() >= next) {
			char *t = cg ? oci_stats_event(cg, id, &e) : oci_vm_stats_event(root, id, &e);
			if (t && emit(t) < 0) {
				free(t);
				return 0;
			}
			free(t); /* a failed read: the next tick tries again, as runc logs and goes on */
			next += interval_ms;
			if (next < rung_now_ms())
				next = rung_now_ms() + interval_ms;
		}
	}
}
