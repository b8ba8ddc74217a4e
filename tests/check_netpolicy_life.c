/*
 * Lifecycle of netpolicy's kernel state: down, gc across state dirs, the 200-cycle leak test.
 * Tagged "net"; needs root.
 */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/util.h"
#include "netpolicy/np.h"
#include "tests/lib/egress.h"
#include "tests/lib/np_sb.h"
#include "tests/lib/testutil.h"

/* ---- lifecycle: down, gc, leaks ---- */

/* Our tables ("rung_*" with this state dir's comment) and links, by listing everything. */
/* "rung-np:<12 hex of sha256(realpath(sd))>:" marks what netpolicy made for that store. */
static void store_tag(const char *sd, char *out, size_t len)
{
	char real[PATH_MAX], h[RUNG_SHA256_HEX_LEN + 1];
	const char *p = realpath(sd, real) ? real : sd;
	rung_sha256_hex(p, strlen(p), h);
	snprintf(out, len, "rung-np:%.12s:", h);
}

/* Tables and links of this store only: other stores (other tests, a daemon) may run alongside. */
static int count_rung_tables(const char *sd)
{
	char tag[64], cmd[96];
	store_tag(sd, tag, sizeof(tag));
	struct nft_ctx *c = nft_ctx_new(NFT_CTX_DEFAULT);
	nft_ctx_buffer_error(c);
	nft_ctx_buffer_output(c);
	nft_ctx_output_set_flags(c, NFT_CTX_OUTPUT_TERSE);
	int n = 0;
	char *names = NULL;
	if (nft_run_cmd_from_buffer(c, "list tables inet") == 0)
		names = strdup(nft_ctx_get_output_buffer(c));
	for (char *p = names; p && (p = strstr(p, "table inet rung_")); p++) {
		char name[64];
		if (sscanf(p, "table inet %63s", name) != 1)
			continue;
		snprintf(cmd, sizeof(cmd), "list table inet %s", name);
		if (nft_run_cmd_from_buffer(c, cmd) == 0 &&
		    strstr(nft_ctx_get_output_buffer(c), tag))
			n++;
	}
	free(names);
	nft_ctx_free(c);
	return n;
}

static int count_rg_links(const char *sd)
{
	char tag[64];
	store_tag(sd, tag, sizeof(tag));
	int n = 0;
	struct if_nameindex *ifs = if_nameindex();
	for (struct if_nameindex *i = ifs; i && i->if_name; i++) {
		if (strncmp(i->if_name, "rg", 2))
			continue;
		char path[128], alias[256] = "";
		snprintf(path, sizeof(path), "/sys/class/net/%s/ifalias", i->if_name);
		FILE *f = fopen(path, "r");
		if (f) {
			if (!fgets(alias, sizeof(alias), f))
				alias[0] = '\0';
			fclose(f);
		}
		n += !strncmp(alias, tag, strlen(tag));
	}
	if_freenameindex(ifs);
	return n;
}

static int count_leases(const char *sd)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/net/leases", sd);
	DIR *d = opendir(p);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

START_TEST(test_down_idempotent_and_gc)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test"};
	int tables0 = count_rung_tables(npt_state_dir), links0 = count_rg_links(npt_state_dir);
	struct npt_sb a, b, g;
	npt_sb_up(&a, "t-gc-a", allow, 1);
	npt_sb_up(&b, "t-gc-b", allow, 1);
	npt_sb_up(&g, "t-gc-ghost", allow, 1);
	ck_assert_int_eq(count_rung_tables(npt_state_dir), tables0 + 3);
	ck_assert_int_eq(count_rg_links(npt_state_dir), links0 + 3);
	ck_assert_int_eq(count_leases(npt_state_dir), 3);
	/* another state dir's sandbox: gc of ours must not touch it */
	char other_sd[160];
	snprintf(other_sd, sizeof(other_sd), "%s-other", npt_state_dir);
	struct np_config ocfg;
	npt_cfg_init(&ocfg);
	ocfg.state_dir = other_sd;
	struct npt_sb o;
	npt_sb_up_cfg(&o, "t-gc-other", &ocfg, allow, 1);
	/* "crash" all three: the supervisor's objects vanish without down; the ghost's netns dies
	 */
	struct npt_sb *all[] = {&a, &b, &g, &o};
	for (size_t i = 0; i < 4; i++) {
		npw_proxy_stop(&all[i]->loop);
		np_net_free(all[i]->net);
	}
	close(g.fd);
	/* and a table alone (its lease and veth already gone): found by its owner mark */
	struct npt_sb t;
	npt_sb_up(&t, "t-gc-tableonly", allow, 1);
	npt_proxy_stop_free(&t);
	ck_assert_int_eq(npw_ip(-1, "link del %s", t.info.veth), 0);
	close(t.fd);
	{
		char lp[300];
		struct dirent *de;
		snprintf(lp, sizeof(lp), "%s/net/leases", npt_state_dir);
		DIR *d = opendir(lp);
		ck_assert_ptr_nonnull(d);
		while ((de = readdir(d)))
			if (!strncmp(de->d_name, t.info.table + 5, 12)) {
				char f[600];
				snprintf(f, sizeof(f), "%s/%s", lp, de->d_name);
				ck_assert_int_eq(unlink(f), 0);
			}
		closedir(d);
	}
	ck_assert(eg_table_exists(t.info.table));
	struct rung_err err = {0};
	const char *live[] = {"t-gc-a"};
	ck_assert_msg(np_gc(npt_state_dir, live, 1, &err) == 0, "gc: %s", err.msg);
	ck_assert(!eg_table_exists(t.info.table));
	ck_assert(eg_table_exists(a.info.table));
	ck_assert_uint_ne(if_nametoindex(a.info.veth), 0);
	ck_assert(!eg_table_exists(b.info.table));
	ck_assert_uint_eq(if_nametoindex(b.info.veth), 0);
	ck_assert(!eg_table_exists(g.info.table));
	ck_assert_int_eq(count_leases(npt_state_dir), 1);
	ck_assert(eg_table_exists(o.info.table)); /* not ours */
	ck_assert_uint_ne(if_nametoindex(o.info.veth), 0);
	/* down is idempotent and works from the id alone */
	ck_assert_int_eq(np_sandbox_down(npt_state_dir, "t-gc-a", &err), 0);
	ck_assert_int_eq(np_sandbox_down(npt_state_dir, "t-gc-a", &err), 0);
	ck_assert(!eg_table_exists(a.info.table));
	ck_assert_uint_eq(if_nametoindex(a.info.veth), 0);
	ck_assert_int_eq(np_sandbox_down(npt_state_dir, "bad/id", &err), -EINVAL);
	ck_assert_int_eq(np_sandbox_down(other_sd, "t-gc-other", &err), 0);
	ck_assert(!eg_table_exists(o.info.table));
	ck_assert_int_eq(count_rung_tables(npt_state_dir), tables0);
	ck_assert_int_eq(count_rg_links(npt_state_dir), links0);
	ck_assert_int_eq(count_rung_tables(other_sd), 0);
	ck_assert_int_eq(count_rg_links(other_sd), 0);
	ck_assert_int_eq(count_leases(npt_state_dir), 0);
	close(a.fd);
	close(b.fd);
	close(o.fd);
	rung_rm_rf(other_sd, &err);
}
END_TEST

static int count_tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	struct dirent *de;
	while (d && (de = readdir(d)))
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

START_TEST(test_leak_200_cycles)
{
	REQUIRE_NET();
	char e[48];
	snprintf(e, sizeof(e), "%s12:8080", npt_W.net);
	const char *const allow[] = {"allowed.test", e};
	struct np_policy p;
	struct rung_err err = {0};
	ck_assert_int_eq(np_policy_parse(allow, 2, &p, &err), 0);
	struct np_config cfg;
	npt_cfg_init(&cfg);
	int fds0 = rung_test_count_fds(), tables0 = count_rung_tables(npt_state_dir),
	    links0 = count_rg_links(npt_state_dir);
	int tasks0 = count_tasks();
	for (int i = 0; i < 200; i++) {
		int fd = npw_netns_new();
		ck_assert_int_ge(fd, 0);
		struct np_net *n = NULL;
		int r = np_sandbox_up(&cfg, "t-leak", fd, &p, &n, &err);
		ck_assert_msg(r == 0, "cycle %d: %s", i, err.msg);
		ck_assert_int_ge(np_net_proxy_fd(n), 0);
		np_net_free(n);
		ck_assert_msg(np_sandbox_down(npt_state_dir, "t-leak", &err) == 0, "%s", err.msg);
		close(fd);
	}
	np_policy_release(&p);
	ck_assert_int_eq(rung_test_count_fds(), fds0);
	ck_assert_int_eq(count_rung_tables(npt_state_dir), tables0);
	ck_assert_int_eq(count_rg_links(npt_state_dir), links0);
	ck_assert_int_eq(count_leases(npt_state_dir), 0);
	ck_assert_int_eq(count_tasks(), tasks0); /* no thread left behind (np spawns no process) */
}
END_TEST

/* A crash left the table and lease but the veth went with the netns: up again replaces them. */
START_TEST(test_up_over_leftovers)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test"};
	struct npt_sb s;
	npt_sb_up(&s, "t-leftover", allow, 1);
	char ip[32];
	ck_assert_int_eq(npt_sb_resolve(&s, "allowed.test", ip), 0);
	npt_proxy_stop_free(&s);
	ck_assert_int_eq(npw_ip(-1, "link del %s", s.info.veth), 0);
	close(s.fd);
	ck_assert(eg_table_exists(s.info.table));
	ck_assert_int_eq(count_leases(npt_state_dir), 1);
	struct npt_sb s2;
	npt_sb_up(&s2, "t-leftover", allow, 1);
	ck_assert_str_eq(s2.info.table, s.info.table);
	ck_assert_str_eq(s2.info.sb_ip, s.info.sb_ip); /* the lease was reused */
	ck_assert_int_eq(count_leases(npt_state_dir), 1);
	ck_assert_int_eq(count_rung_tables(npt_state_dir), 1); /* replaced, still marked as ours */
	ck_assert_int_eq(count_rg_links(npt_state_dir), 1);
	/* a fresh table: the old dynamic set is gone, so .10 is closed until resolved again */
	ck_assert_int_eq(npt_sb_tcp(&s2, 10, 80, NULL), -ECONNREFUSED);
	ck_assert_int_eq(npt_sb_resolve(&s2, "allowed.test", ip), 0);
	ck_assert_int_eq(npt_sb_tcp(&s2, 10, 80, NULL), 0);
	npt_sb_down(&s2);
}
END_TEST

/*
 * Leases are coordinated across processes (flock): concurrent ups get distinct /30s. Half of
 * them use a second state dir (another store on the same host): the clash check after the
 * address is in place keeps those distinct too.
 */
START_TEST(test_concurrent_leases)
{
	REQUIRE_NET();
	enum { N = 8 };
	struct res {
		int r;
		char ip[16], msg[256];
	} *res =
	    mmap(NULL, N * sizeof(*res), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(res, MAP_FAILED);
	int fds[N];
	pid_t pids[N];
	char other_sd[160];
	snprintf(other_sd, sizeof(other_sd), "%s-other", npt_state_dir);
	for (int i = 0; i < N; i++)
		fds[i] = npw_netns_new();
	for (int i = 0; i < N; i++) {
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0) {
			static const char *const allow[] = {"allowed.test"};
			struct np_policy p;
			struct rung_err err = {0};
			struct np_config cfg;
			npt_cfg_init(&cfg);
			if (i % 2)
				cfg.state_dir = other_sd;
			char id[32];
			snprintf(id, sizeof(id), "t-conc-%d", i);
			struct np_net *n = NULL;
			int r = np_policy_parse(allow, 1, &p, &err);
			if (r == 0)
				r = np_sandbox_up(&cfg, id, fds[i], &p, &n, &err);
			res[i].r = r;
			snprintf(res[i].msg, sizeof(res[i].msg), "%s", err.msg);
			if (n) {
				struct np_net_info inf;
				np_net_info(n, &inf);
				snprintf(res[i].ip, sizeof(res[i].ip), "%s", inf.sb_ip);
			}
			_exit(0); /* the kernel state stays; the parent takes it down */
		}
	}
	for (int i = 0; i < N; i++)
		waitpid(pids[i], NULL, 0);
	for (int i = 0; i < N; i++) {
		ck_assert_msg(res[i].r == 0, "up %d: %s", i, res[i].msg);
		for (int j = 0; j < i; j++)
			ck_assert_str_ne(res[i].ip, res[j].ip);
	}
	ck_assert_int_eq(count_leases(npt_state_dir), N / 2);
	ck_assert_int_eq(count_leases(other_sd), N / 2);
	for (int i = 0; i < N; i++) {
		char id[32];
		struct rung_err err = {0};
		snprintf(id, sizeof(id), "t-conc-%d", i);
		ck_assert_int_eq(np_sandbox_down(i % 2 ? other_sd : npt_state_dir, id, &err), 0);
		close(fds[i]);
	}
	ck_assert_int_eq(count_leases(npt_state_dir), 0);
	ck_assert_int_eq(count_leases(other_sd), 0);
	struct rung_err err = {0};
	rung_rm_rf(other_sd, &err);
	munmap(res, N * sizeof(*res));
}
END_TEST

START_TEST(test_resolv_conf_and_info)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test"};
	struct npt_sb s;
	npt_sb_up(&s, "t-info", allow, 1);
	char *rc = np_sandbox_resolv_conf(s.net);
	char want[64];
	snprintf(want, sizeof(want), "nameserver %s\n", s.info.host_ip);
	ck_assert_ptr_nonnull(strstr(rc, want));
	free(rc);
	ck_assert_str_eq(s.info.upstream, npt_W.upstream);
	/* a second up of a live sandbox is refused and leaves it working */
	{
		struct np_config c2;
		npt_cfg_init(&c2);
		struct np_policy p2;
		struct rung_err e2 = {0};
		ck_assert_int_eq(np_policy_parse(allow, 1, &p2, &e2), 0);
		int fd2 = npw_netns_new();
		struct np_net *n2 = NULL;
		ck_assert_int_eq(np_sandbox_up(&c2, "t-info", fd2, &p2, &n2, &e2), -EEXIST);
		ck_assert_ptr_nonnull(strstr(e2.msg, "already up"));
		np_policy_release(&p2);
		close(fd2);
		char ip2[32];
		ck_assert_int_eq(npt_sb_resolve(&s, "allowed.test", ip2), 0);
		ck_assert_int_eq(npt_sb_tcp(&s, 10, 80, NULL), 0);
	}
	ck_assert_int_eq((int)strlen(s.info.veth), 14);
	ck_assert(!strncmp(s.info.table, "rung_", 5));
	/* a bad config is refused, naming the field, with nothing left behind */
	struct np_config cfg;
	npt_cfg_init(&cfg);
	cfg.pool = "10.213.0.0/31";
	struct np_policy p;
	struct rung_err err = {0};
	ck_assert_int_eq(np_policy_parse(allow, 1, &p, &err), 0);
	int fd = npw_netns_new();
	struct np_net *n = NULL;
	ck_assert_int_eq(np_sandbox_up(&cfg, "t-info-bad", fd, &p, &n, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "pool"));
	ck_assert_ptr_nonnull(strstr(err.msg, "np_config.pool"));
	cfg.pool = NULL; /* (RUNG_NET_POOL is the router's net_pool: check_runtime_policy) */
	cfg.upstream = "not-an-ip";
	ck_assert_int_eq(np_sandbox_up(&cfg, "t-info-bad", fd, &p, &n, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "not-an-ip"));
	/* a pool that is entirely a host route is refused */
	cfg.upstream = npt_W.upstream;
	char pool[32];
	snprintf(pool, sizeof(pool), "%s0/24", npt_W.net);
	cfg.pool = pool;
	ck_assert_int_eq(np_sandbox_up(&cfg, "t-info-bad", fd, &p, &n, &err), -EADDRNOTAVAIL);
	ck_assert_ptr_nonnull(strstr(err.msg, "overlapping host routes"));
	np_policy_release(&p);
	close(fd);
	npt_sb_down(&s);
}
END_TEST

Suite *netpolicy_life_suite(void)
{
	Suite *s = suite_create("netpolicy_life");
	TCase *tc = tcase_create("life");
	tcase_set_tags(tc, "net");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, npt_world_setup, npt_world_teardown);
	tcase_add_test(tc, test_down_idempotent_and_gc);
	tcase_add_test(tc, test_resolv_conf_and_info);
	tcase_add_test(tc, test_up_over_leftovers);
	tcase_add_test(tc, test_concurrent_leases);
	suite_add_tcase(s, tc);
	TCase *leak = tcase_create("leak");
	tcase_set_tags(leak, "net");
	tcase_set_timeout(leak, 240);
	tcase_add_checked_fixture(leak, npt_world_setup, npt_world_teardown);
	tcase_add_test(leak, test_leak_200_cycles);
	suite_add_tcase(s, leak);
	return s;
}
