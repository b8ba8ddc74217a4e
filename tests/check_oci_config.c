/* tests/check_oci_config.c: oci/config.c, a bundle's config.json: what is read, what is
 * refused (each refusal naming its field), and the ids and signals the command line takes. */
#include <check.h>
#include <sched.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <linux/capability.h>

#include "oci/oci.h"

static const char base[] =
	"{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\", \"readonly\": true},"
	" \"hostname\": \"h\", \"annotations\": {\"a\": \"b\"},"
	" \"process\": {\"args\": [\"/bin/true\"], \"env\": [\"PATH=/bin\"], \"cwd\": \"/\","
	"   \"user\": {\"uid\": 5, \"gid\": 6, \"additionalGids\": [7, 8]},"
	"   \"rlimits\": [{\"type\": \"RLIMIT_NOFILE\", \"soft\": 10, \"hard\": 20}],"
	"   \"capabilities\": {\"bounding\": [\"CAP_CHOWN\", \"CAP_SYS_ADMIN\"],"
	"                      \"effective\": [\"CAP_CHOWN\"]}},"
	" \"mounts\": [{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\","
	"   \"options\": [\"nosuid\", \"ro\", \"rprivate\"]},"
	"   {\"destination\": \"/m\", \"source\": \"/etc\", \"options\": [\"rbind\", \"size=1k\"]}],"
	" \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"ipc\"},"
	"   {\"type\": \"network\", \"path\": \"/var/run/netns/x\"}, {\"type\": \"mount\"}],"
	"   \"resources\": {\"memory\": {\"limit\": 1048576}, \"pids\": {\"limit\": 9},"
	"     \"cpu\": {\"quota\": 50000, \"period\": 100000}},"
	"   \"maskedPaths\": [\"/proc/kcore\"], \"readonlyPaths\": [\"/proc/sys\"]}}";

/* Parse base with one change made by edit (a JSON path set to a value, or removed). */
static int parse_with(const char *obj, const char *key, json_t *value, struct oci_config *c,
		      struct rung_err *err)
{
	json_t *doc = json_loads(base, 0, NULL);
	ck_assert_ptr_nonnull(doc);
	json_t *o = doc;
	if (obj)
		for (char *p = strdupa(obj), *part; (part = strsep(&p, "."));)
			o = json_object_get(o, part);
	ck_assert_ptr_nonnull(o);
	if (key && value)
		json_object_set_new(o, key, value);
	else if (key)
		json_object_del(o, key);
	char *text = json_dumps(doc, 0);
	json_decref(doc);
	int r = oci_config_parse(text, strlen(text), "/b", c, err);
	free(text);
	return r;
}

static void refused(const char *obj, const char *key, json_t *value, int code, const char *needle)
{
	struct oci_config c;
	struct rung_err err = {0};
	int r = parse_with(obj, key, value, &c, &err);
	ck_assert_int_eq(r, -code);
	ck_assert_msg(strstr(err.msg, needle), "'%s' does not name '%s'", err.msg, needle);
	oci_config_release(&c);
}

START_TEST(test_parse_ok)
{
	struct oci_config c;
	struct rung_err err = {0};
	ck_assert_int_eq(parse_with(NULL, NULL, NULL, &c, &err), 0);
	ck_assert_str_eq(c.rootfs, "/b/rootfs");
	ck_assert(c.rootfs_ro);
	ck_assert_str_eq(c.args[0], "/bin/true");
	ck_assert_ptr_null(c.args[1]);
	ck_assert_int_eq(c.uid, 5);
	ck_assert_int_eq(c.gid, 6);
	ck_assert_int_eq(c.ngids, 2);
	ck_assert_int_eq(c.gids[1], 8);
	ck_assert_int_eq(c.nrlimits, 1);
	ck_assert_int_eq(c.rlimits[0].hard, 20);
	/* CAP_SYS_ADMIN is beyond rung's policy: dropped, CAP_CHOWN kept */
	ck_assert_uint_eq(c.caps[OCI_CAP_BOUNDING], 1ull << CAP_CHOWN);
	ck_assert_uint_eq(c.caps[OCI_CAP_EFFECTIVE], 1ull << CAP_CHOWN);
	ck_assert_int_eq(c.nmounts, 2);
	ck_assert_uint_eq(c.mounts[0].flags, MS_NOSUID | MS_RDONLY);
	ck_assert_uint_eq(c.mounts[0].prop, MS_PRIVATE | MS_REC);
	ck_assert(c.mounts[1].bind && c.mounts[1].rec);
	ck_assert_str_eq(c.mounts[1].data, "size=1k");
	/* rung's own user, uts and mount namespaces always; the network one joined by path */
	ck_assert(c.ns_flags & CLONE_NEWUSER);
	ck_assert(c.ns_flags & CLONE_NEWUTS);
	ck_assert(!(c.ns_flags & CLONE_NEWNET));
	ck_assert(!c.spec_userns);
	ck_assert_str_eq(c.netns_path, "/var/run/netns/x");
	ck_assert_uint_eq(c.limits.memory_bytes, 1048576);
	ck_assert_uint_eq(c.limits.pids_max, 9);
	ck_assert_int_eq(c.cpu.quota, 50000);
	ck_assert_uint_eq(c.cpu.period, 100000);
	ck_assert_str_eq(c.masked[0], "/proc/kcore");
	ck_assert_str_eq(c.readonly[0], "/proc/sys");
	ck_assert_str_eq(json_string_value(json_object_get(c.annotations, "a")), "b");
	oci_config_release(&c);
	oci_config_release(&c); /* idempotent */
}
END_TEST

START_TEST(test_refusals)
{
	refused("process", "args", json_array(), EINVAL, "process.args");
	refused("process", "cwd", json_string("rel"), EINVAL, "process.cwd");
	refused(NULL, "ociVersion", json_string("2.0"), EINVAL, "ociVersion");
	refused("root", "path", NULL, EINVAL, "root.path");
	refused("process", "rlimits",
		json_pack("[{s:s, s:i, s:i}]", "type", "RLIMIT_BOGUS", "soft", 1, "hard", 1), EINVAL,
		"process.rlimits[0].type");
	refused("linux", "resources", json_pack("{s:{s:i}}", "cpu", "period", 10), EINVAL,
		"linux.resources.cpu.period");
	refused("process", "oomScoreAdj", json_integer(5000), EINVAL, "process.oomScoreAdj");
	refused("linux", "namespaces", json_pack("[{s:s}, {s:s, s:s}]", "type", "ipc", "type", "pid",
						 "path", "/proc/1/ns/pid"),
		EPERM, "linux.namespaces[1].path");
	refused("linux", "namespaces", json_pack("[{s:s}]", "type", "ipc"), EPERM, "pid namespace");
	refused("linux", "namespaces", json_pack("[{s:s}]", "type", "pid"), EPERM, "ipc namespace");
	refused("linux", "namespaces", json_pack("[{s:s}, {s:s}, {s:s}]", "type", "pid", "type",
						 "ipc", "type", "bogus"),
		EINVAL, "linux.namespaces[2].type");
	refused("linux", "devices", json_pack("[{s:s, s:s}]", "path", "/dev/sda", "type", "b"), EPERM,
		"linux.devices[0]");
	refused("linux", "cgroupsPath", json_string("system.slice:rung:x"), ENOTSUP,
		"linux.cgroupsPath");
	refused("linux", "sysctl", json_pack("{s:s}", "vm.swappiness", "1"), EPERM,
		"linux.sysctl.vm.swappiness");
}
END_TEST

/* A pod's app container (the CRI's): ipc and uts given by path are recorded to be joined
 * (create checks and joins them, e2e_oci_pod), no uts namespace of its own; mount, user and
 * cgroup by path stay refused, and so does a sysctl of a joined namespace. */
START_TEST(test_pod_namespaces)
{
	json_t *ns = json_pack("[{s:s}, {s:s}, {s:s, s:s}, {s:s, s:s}]", "type", "pid", "type",
			       "mount", "type", "ipc", "path", "/proc/7/ns/ipc", "type", "uts",
			       "path", "/proc/7/ns/uts");
	struct oci_config c;
	struct rung_err err = {0};
	ck_assert_int_eq(parse_with("linux", "namespaces", json_incref(ns), &c, &err), 0);
	ck_assert_str_eq(c.ipc_join.path, "/proc/7/ns/ipc");
	ck_assert_uint_eq(c.ipc_join.index, 2);
	ck_assert_str_eq(c.uts_join.path, "/proc/7/ns/uts");
	ck_assert_uint_eq(c.uts_join.index, 3);
	ck_assert(!(c.ns_flags & (CLONE_NEWIPC | CLONE_NEWUTS)));
	ck_assert(c.ns_flags & CLONE_NEWUSER);
	oci_config_release(&c);
	static const char *const refused_types[] = {"mount", "user", "cgroup"};
	for (size_t i = 0; i < 3; i++)
		refused("linux", "namespaces",
			json_pack("[{s:s}, {s:s}, {s:s, s:s}]", "type", "pid", "type", "ipc", "type",
				  refused_types[i], "path", "/proc/7/ns/x"),
			EPERM, "linux.namespaces[2].path: joining an existing");
	/* the sysctls of a joined namespace are the pod's: its sandbox sets them */
	json_t *doc = json_loads(base, 0, NULL);
	json_t *lx = json_object_get(doc, "linux");
	json_object_set(lx, "namespaces", ns);
	json_object_set_new(lx, "sysctl", json_pack("{s:s}", "kernel.domainname", "x"));
	char *text = json_dumps(doc, 0);
	ck_assert_int_eq(oci_config_parse(text, strlen(text), "/b", &c, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "linux.sysctl.kernel.domainname") &&
			      strstr(err.msg, "linux.namespaces[3].path"), "%s", err.msg);
	oci_config_release(&c);
	free(text);
	json_decref(doc);
	json_decref(ns);
}
END_TEST

START_TEST(test_privileged_and_userns)
{
	json_t *all = json_array();
	/* every capability libcap knows, by the name the spec uses */
	const char *names[CAP_LAST_CAP + 1];
	char upper[CAP_LAST_CAP + 1][40];
	for (int c = 0; c <= CAP_LAST_CAP; c++) {
		names[c] = oci_cap_name(c, upper[c], sizeof(upper[c]));
		ck_assert_msg(names[c], "capability %d has no name", c);
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		json_array_append_new(all, json_string(names[i]));
	refused("process", "capabilities", json_pack("{s:o}", "bounding", all), EPERM,
		"process.capabilities.bounding: all capabilities");
	refused("process", "capabilities", json_pack("{s:[s]}", "bounding", "CAP_NOPE"), EINVAL,
		"process.capabilities.bounding[0]");
	/* the spec's own user namespace: its map may not reach host root */
	json_t *ns = json_pack("[{s:s}, {s:s}, {s:s}]", "type", "pid", "type", "ipc", "type", "user");
	json_t *doc = json_loads(base, 0, NULL);
	json_t *lx = json_object_get(doc, "linux");
	json_object_set_new(lx, "namespaces", ns);
	json_object_set_new(lx, "uidMappings",
			    json_pack("[{s:i, s:i, s:i}]", "containerID", 0, "hostID", 0, "size", 10));
	char *text = json_dumps(doc, 0);
	struct oci_config c;
	struct rung_err err = {0};
	ck_assert_int_eq(oci_config_parse(text, strlen(text), "/b", &c, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "linux.uidMappings[0].hostID"), "%s", err.msg);
	oci_config_release(&c);
	free(text);
	json_object_set_new(lx, "uidMappings", json_pack("[{s:i, s:i, s:i}]", "containerID", 0,
							 "hostID", 100000, "size", 10));
	text = json_dumps(doc, 0);
	ck_assert_int_eq(oci_config_parse(text, strlen(text), "/b", &c, &err), 0);
	ck_assert(c.spec_userns);
	ck_assert_int_eq(c.nuid_maps, 1);
	ck_assert_uint_eq(c.uid_maps[0].outer, 100000);
	oci_config_release(&c);
	free(text);
	json_decref(doc);
}
END_TEST

START_TEST(test_bad_json_and_mounts)
{
	struct oci_config c;
	struct rung_err err = {0};
	ck_assert_int_eq(oci_config_parse("{nope", 5, "/b", &c, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "config.json: line 1"), "%s", err.msg);
	oci_config_release(&c);
	refused(NULL, "mounts", json_pack("[{s:s}]", "destination", "rel"), EINVAL,
		"mounts[0].destination");
	refused(NULL, "mounts", json_pack("[{s:s}]", "destination", "/x"), EINVAL, "mounts[0].type");
	refused(NULL, "mounts", json_pack("[{s:s, s:[s]}]", "destination", "/x", "options", "bind"),
		EINVAL, "mounts[0].source");
}
END_TEST

START_TEST(test_ids)
{
	struct rung_err err = {0};
	ck_assert_int_eq(oci_id_check("abc-DEF_1.2+x", &err), 0);
	ck_assert_int_eq(oci_id_check("", &err), -EINVAL);
	ck_assert_int_eq(oci_id_check("..", &err), -EINVAL);
	ck_assert_int_eq(oci_id_check("a/b", &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "container id 'a/b'"), "%s", err.msg);
	ck_assert_int_eq(oci_cap_from_name("CAP_SYS_ADMIN"), CAP_SYS_ADMIN);
	ck_assert_int_eq(oci_cap_from_name("CAP_NONE"), -1);
	ck_assert(!(oci_cap_policy() & (1ull << CAP_SYS_ADMIN)));
	ck_assert(oci_cap_policy() & (1ull << CAP_CHOWN));
}
END_TEST

/* events --interval: Go's durations, in ms (a positive one at least 1 ms); the rest refused. */
START_TEST(test_durations)
{
	static const struct {
		const char *s;
		int64_t ms;
	} t[] = {{"5s", 5000},	 {"250ms", 250}, {"1m30s", 90000}, {"1.5s", 1500}, {"2h", 7200000},
		 {"100us", 1},	 {"0", 0},	 {"0s", 0},	   {"5", -1},	    {"", -1},
		 {"-1s", -1},	 {"s", -1},	 {"1x", -1},	   {"1s ", -1},	    {"9999999h", -1}};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		ck_assert_msg(oci_duration_ms(t[i].s) == t[i].ms, "'%s': %lld", t[i].s,
			      (long long)oci_duration_ms(t[i].s));
}
END_TEST

Suite *oci_config_suite(void)
{
	Suite *s = suite_create("oci_config");
	TCase *tc = tcase_create("config");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_parse_ok);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_pod_namespaces);
	tcase_add_test(tc, test_privileged_and_userns);
	tcase_add_test(tc, test_bad_json_and_mounts);
	tcase_add_test(tc, test_ids);
	tcase_add_test(tc, test_durations);
	suite_add_tcase(s, tc);
	return s;
}
