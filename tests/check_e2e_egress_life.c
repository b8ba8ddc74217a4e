/*
 * tests/check_e2e_egress_life.c: the egress allowlist across a sandbox's life, through rung:
 * dispose and `gc` (after a SIGKILLed supervisor) remove the veth, the table and the lease;
 * suspend/resume keeps the policy (and the DNS proxy) working; 50 acquire/dispose cycles leak
 * nothing; inspect shows the effective policy; and the headline, `rung run --allow`,
 * from the CLI. Process rung, test internet of tests/lib/np_world.h. Tagged "net".
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/container.h"
#include "tests/lib/egress.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

#define P(...)                                                                                     \
	(const char *const[]) { __VA_ARGS__, NULL }

/* dispose, and gc of a sandbox whose supervisor was SIGKILLed, remove veth, table and lease. */
START_TEST(t_dispose_and_gc)
{
	struct np_world w;
	EG_WORLD(&w);
	char *state;
	struct rung_router *r = spine_router(&state);
	struct rung_spec s;
	eg_spec(&s, "egress", P("allowed.test"));
	struct rung_sandbox *a = spine_acquire(r, "eg", "disp", "egress", &s, NULL);
	struct rung_sandbox *b = spine_acquire(r, "eg", "killed", "egress", &s, NULL);
	rung_spec_release(&s);
	char ida[80], idb[80];
	snprintf(ida, sizeof(ida), "%s", rung_sandbox_id(a));
	snprintf(idb, sizeof(idb), "%s", rung_sandbox_id(b));
	eg_assert_net(state, ida, true);
	eg_assert_net(state, idb, true);
	ck_assert_int_eq(eg_lease_count(state), 2);
	char *out = eg_py(b, P("dns allowed.test"));
	eg_expect(out, "dns allowed.test", "rcode=0", 0);
	free(out);

	eg_dispose(r, a, state);
	ck_assert_int_eq(eg_lease_count(state), 1);

	struct rt_meta m;
	spine_meta(r, idb, &m);
	pid_t sup = m.sup_pid, init = m.init_pid;
	rt_meta_release(&m);
	rung_sandbox_close(b);
	ck_assert_int_eq(kill(sup, SIGKILL), 0);
	ck_assert_msg(spine_wait_gone(sup, 3000), "supervisor survived SIGKILL");
	ck_assert_msg(spine_wait_gone(init, 3000), "sandbox pid 1 outlived its supervisor");
	/* Nobody tore the network down: the table and the lease are debris now. */
	char v[16], t[32];
	eg_names(state, idb, v, t, NULL);
	ck_assert(eg_table_exists(t));
	ck_assert(eg_lease_exists(state, idb));
	struct rung_gc_report rep;
	struct rung_err err = {0};
	ck_assert_msg(rung_gc(r, &rep, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(rep.disposed_dead, 1);
	eg_assert_net(state, idb, false);
	ck_assert_int_eq(eg_lease_count(state), 0);
	rung_router_free(r);
	free(state);
	npw_down(&w);
}
END_TEST

/*
 * Two stores on one host (two daemons, two users' RUNG_STATE_DIR, two test runs) give the same
 * key and kind the same sandbox id: their networks must still be apart. Both acquire, each
 * gets its own veth and table, and disposing one leaves the other's network whole.
 */
START_TEST(t_two_stores)
{
	struct np_world w;
	EG_WORLD(&w);
	char *s1, *s2, t10[96];
	snprintf(t10, sizeof(t10), "tcp %s10 80", w.net);
	struct rung_router *r1 = spine_router(&s1), *r2 = spine_router(&s2);
	struct rung_spec s;
	eg_spec(&s, "egress", P("allowed.test"));
	struct rung_sandbox *a = spine_acquire(r1, "eg", "same", "egress", &s, NULL);
	struct rung_sandbox *b = spine_acquire(r2, "eg", "same", "egress", &s, NULL);
	rung_spec_release(&s);
	ck_assert_str_eq(rung_sandbox_id(a), rung_sandbox_id(b)); /* the premise */
	char va[16], ta[32], vb[16], tb[32];
	eg_names(s1, rung_sandbox_id(a), va, ta, NULL);
	eg_names(s2, rung_sandbox_id(b), vb, tb, NULL);
	ck_assert_str_ne(va, vb);
	ck_assert_str_ne(ta, tb);
	eg_assert_net(s1, rung_sandbox_id(a), true);
	eg_assert_net(s2, rung_sandbox_id(b), true);
	eg_dispose(r1, a, s1);
	eg_assert_net(s2, rung_sandbox_id(b), true);
	char *out = eg_py(b, P("dns allowed.test", t10));
	eg_expect(out, t10, "ok hello", 0);
	free(out);
	/* gc in the first store takes nothing of the second's. */
	struct rung_gc_report rep;
	struct rung_err err = {0};
	ck_assert_msg(rung_gc(r1, &rep, &err) == 0, "%s", err.msg);
	eg_assert_net(s2, rung_sandbox_id(b), true);
	eg_dispose(r2, b, s2);
	rung_router_free(r1);
	rung_router_free(r2);
	free(s1);
	free(s2);
	npw_down(&w);
}
END_TEST

/* Suspend/resume keeps the policy: the proxy still answers and opens, denials still hold. */
START_TEST(t_suspend_resume)
{
	struct np_world w;
	EG_WORLD(&w);
	char *state;
	struct rung_router *r = spine_router(&state);
	struct rung_spec s;
	eg_spec(&s, "egress", P("allowed.test", "*.sub.test"));
	struct rung_sandbox *sb = spine_acquire(r, "eg", "susp", "egress", &s, NULL);
	rung_spec_release(&s);
	char t10[96], t11[96], t13[96];
	snprintf(t10, sizeof(t10), "tcp %s10 80", w.net);
	snprintf(t11, sizeof(t11), "tcp %s11 80", w.net);
	snprintf(t13, sizeof(t13), "tcp %s13 80", w.net);
	char *out = eg_py(sb, P("dns allowed.test", t10, t13));
	eg_expect(out, t10, "ok hello", 0);
	eg_expect(out, t13, "refused", EG_FAST_MS);
	free(out);
	char v[16], t[32];
	eg_names(state, rung_sandbox_id(sb), v, t, NULL);
	char *before = eg_table_text(t, true);

	struct rung_err err = {0};
	ck_assert_msg(rung_suspend(sb, &err) == 0, "suspend: %s", err.msg);
	eg_assert_net(state, rung_sandbox_id(sb), true);
	ck_assert_msg(rung_resume(sb, &err) == 0, "resume: %s", err.msg);
	char *after = eg_table_text(t, true);
	ck_assert_str_eq(before, after);
	free(before);
	free(after);
	/* A name first resolved after the resume opens its address (the proxy still serves). */
	out = eg_py(sb, P(t10, "dns a.sub.test", t13, "dns denied.test", t11));
	eg_expect(out, t10, "ok hello", 0);
	eg_expect(out, "dns a.sub.test", "rcode=0", 0);
	eg_expect(out, t13, "ok hello", 0);
	eg_expect(out, "dns denied.test", "rcode=5", 0);
	eg_expect(out, t11, "refused", EG_FAST_MS);
	free(out);
	eg_dispose(r, sb, state);
	rung_router_free(r);
	free(state);
	npw_down(&w);
}
END_TEST

/* inspect: the effective policy (as netpolicy parsed it) and can_exfiltrate. */
static json_t *inspect(struct rung_router *r, const char *id)
{
	char *txt = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rung_inspect(r, id, NULL, &txt, &err) == 0, "inspect: %s", err.msg);
	json_error_t je;
	json_t *o = json_loads(txt, 0, &je);
	ck_assert_msg(o != NULL, "inspect JSON: %s\n%s", je.text, txt);
	free(txt);
	return o;
}

START_TEST(t_inspect)
{
	struct np_world w;
	EG_WORLD(&w);
	char *state, cidr[48];
	snprintf(cidr, sizeof(cidr), "%s12:8080", w.net);
	struct rung_router *r = spine_router(&state);
	struct rung_spec s;
	eg_spec(&s, "egress", P("Allowed.Test.", cidr, "*.sub.test:443"));
	struct rung_sandbox *sb = spine_acquire(r, "eg", "insp", "egress", &s, NULL);
	rung_spec_release(&s);
	json_t *o = inspect(r, rung_sandbox_id(sb));
	ck_assert(json_is_true(json_object_get(json_object_get(o, "security"), "can_exfiltrate")));
	json_t *eff = json_object_get(json_object_get(o, "egress"), "effective");
	ck_assert(json_is_true(json_object_get(eff, "can_exfiltrate")));
	ck_assert_str_eq(json_string_value(json_object_get(eff, "network")), "allowlist");
	json_t *rules = json_object_get(eff, "rules");
	ck_assert_int_eq(json_array_size(rules), 3);
	const char *want[3][3] = {{"allowed.test", "host", "0"},
				  {cidr, "cidr4", "8080"},
				  {"*.sub.test:443", "suffix", "443"}};
	char want_cidr[64];
	snprintf(want_cidr, sizeof(want_cidr), "%s12/32:8080", w.net);
	for (size_t i = 0; i < 3; i++) {
		json_t *e = json_array_get(rules, i);
		const char *entry = json_string_value(json_object_get(e, "entry"));
		ck_assert_ptr_nonnull(entry);
		ck_assert_msg(!strcmp(entry, want[i][0]) || (i == 1 && !strcmp(entry, want_cidr)),
			      "rule %zu: %s", i, entry);
		ck_assert_str_eq(json_string_value(json_object_get(e, "kind")), want[i][1]);
		ck_assert_int_eq(json_integer_value(json_object_get(e, "port")), atoi(want[i][2]));
	}
	json_decref(o);
	eg_dispose(r, sb, state);

	struct rung_spec none;
	eg_spec(&none, "egress", NULL);
	sb = spine_acquire(r, "eg", "insp-none", "egress", &none, NULL);
	rung_spec_release(&none);
	o = inspect(r, rung_sandbox_id(sb));
	ck_assert(json_is_false(json_object_get(json_object_get(o, "security"), "can_exfiltrate")));
	eff = json_object_get(json_object_get(o, "egress"), "effective");
	ck_assert(json_is_false(json_object_get(eff, "can_exfiltrate")));
	ck_assert_str_eq(json_string_value(json_object_get(eff, "network")), "none");
	ck_assert_int_eq(json_array_size(json_object_get(eff, "rules")), 0);
	json_decref(o);
	eg_dispose(r, sb, state);
	rung_router_free(r);
	free(state);
	npw_down(&w);
}
END_TEST

/* ---- leaks ---- */

static unsigned long long boot_ticks(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	long hz = sysconf(_SC_CLK_TCK);
	return (unsigned long long)ts.tv_sec * (unsigned long long)hz +
	       (unsigned long long)ts.tv_nsec / (1000000000ull / (unsigned long long)hz);
}

static unsigned long long proc_start(const char *pid)
{
	char p[300], buf[2048];
	snprintf(p, sizeof(p), "/proc/%s/stat", pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *c = strrchr(buf, ')');
	unsigned long long st = 0;
	/* fields after ")": state(3) ... starttime(22) */
	if (!c || sscanf(c + 2,
			 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			 "%*d %*d %*d %llu",
			 &st) != 1)
		return 0;
	return st;
}

struct ns_rec {
	ino_t ino;
	unsigned long long gone_at; /* boot ticks when its sandbox was disposed */
};

/* Processes that still hold one of the sandboxes' netns and started before its dispose. */
static int netns_holders(const struct ns_rec *v, size_t n, char *who, size_t wlen)
{
	DIR *d = opendir("/proc");
	ck_assert_ptr_nonnull(d);
	int found = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char p[300];
		struct stat st;
		snprintf(p, sizeof(p), "/proc/%s/ns/net", de->d_name);
		if (stat(p, &st) < 0)
			continue;
		for (size_t i = 0; i < n; i++)
			if (st.st_ino == v[i].ino && proc_start(de->d_name) <= v[i].gone_at) {
				found++;
				snprintf(who, wlen, "pid %.16s holds netns %lu", de->d_name,
					 (unsigned long)st.st_ino);
			}
	}
	closedir(d);
	return found;
}

/* fds of this process that are network namespaces */
static int own_netns_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char p[300], l[128];
		snprintf(p, sizeof(p), "/proc/self/fd/%.32s", de->d_name);
		ssize_t k = readlink(p, l, sizeof(l) - 1);
		if (k > 0) {
			l[k] = '\0';
			n += !strncmp(l, "net:[", 5);
		}
	}
	closedir(d);
	return n;
}

#define LEAK_CYCLES 50

START_TEST(t_leak_cycles)
{
	struct np_world w;
	EG_WORLD(&w);
	char *state;
	struct rung_router *r = spine_router(&state);
	struct rung_spec s;
	eg_spec(&s, "egress", P("allowed.test"));
	char t10[96];
	snprintf(t10, sizeof(t10), "tcp %s10 80", w.net);
	/* Warm-up cycle: lazily opened library state is not a leak. */
	struct rung_sandbox *sb = spine_acquire(r, "eg", "leak", "egress", &s, NULL);
	eg_dispose(r, sb, state);
	int fds0 = rung_test_count_fds(), mounts0 = rung_test_count_mounts();
	int nsfd0 = own_netns_fds();
	uint64_t t0 = ct_now_us();
	struct ns_rec recs[LEAK_CYCLES];
	char ids[LEAK_CYCLES][80];
	for (int i = 0; i < LEAK_CYCLES; i++) {
		sb = spine_acquire(r, "eg", "leak", "egress", &s, NULL);
		snprintf(ids[i], sizeof(ids[i]), "%s", rung_sandbox_id(sb));
		char p[64];
		struct stat st;
		snprintf(p, sizeof(p), "/proc/%d/ns/net", (int)eg_init_pid(r, ids[i]));
		ck_assert_int_eq(stat(p, &st), 0);
		recs[i].ino = st.st_ino;
		if (i % 10 == 0) { /* the proxy and the table work in every tenth cycle */
			char *out = eg_py(sb, P("dns allowed.test", t10));
			eg_expect(out, t10, "ok hello", 0);
			free(out);
		}
		eg_dispose(r, sb, state);
		recs[i].gone_at = boot_ticks();
	}
	rung_spec_release(&s);
	fprintf(stderr, "egress_life leak: %d acquire/dispose cycles in %lu ms\n", LEAK_CYCLES,
		(unsigned long)((ct_now_us() - t0) / 1000));
	for (int i = 0; i < LEAK_CYCLES; i++)
		eg_assert_net(state, ids[i], false);
	ck_assert_int_eq(eg_lease_count(state), 0);
	ck_assert_int_eq(spine_store_entries(state), 0);
	ck_assert_int_eq(rung_test_count_fds(), fds0);
	ck_assert_int_eq(rung_test_count_mounts(), mounts0);
	ck_assert_int_eq(own_netns_fds(), nsfd0);
	ck_assert_int_eq(ct_count_store_procs(state), 0); /* supervisors and their sandboxes */
	char who[128] = "";
	ck_assert_msg(netns_holders(recs, LEAK_CYCLES, who, sizeof(who)) == 0, "%s", who);
	rung_router_free(r);
	free(state);
	npw_down(&w);
}
END_TEST

Suite *e2e_egress_life_suite(void)
{
	Suite *s = suite_create("e2e_egress_life");
	TCase *tc = tcase_create("process");
	tcase_set_tags(tc, "net");
	tcase_set_timeout(tc, 300);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, t_dispose_and_gc);
	tcase_add_test(tc, t_two_stores);
	tcase_add_test(tc, t_suspend_resume);
	tcase_add_test(tc, t_inspect);
	tcase_add_test(tc, t_leak_cycles);
	suite_add_tcase(s, tc);
	return s;
}
