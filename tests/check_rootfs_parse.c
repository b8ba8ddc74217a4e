/* tests/check_rootfs_parse.c: references, manifests, configs, overlay plans (pure). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "rootfs/rfs.h"
#include "tests/lib/testutil.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"

static void ref_ok(const char *in, const char *registry, const char *repo, const char *tag,
		   const char *key)
{
	struct rfs_ref r;
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_ref_parse(in, &r, &err) == 0, "%s: %s", in, err.msg);
	ck_assert_str_eq(r.registry, registry);
	ck_assert_str_eq(r.repo, repo);
	ck_assert_str_eq(r.tag, tag);
	char k[RFS_REF_MAX];
	rfs_ref_tag_key(&r, k, sizeof(k));
	ck_assert_str_eq(k, key);
}

static void ref_bad(const char *in, const char *substr)
{
	struct rfs_ref r;
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_ref_parse(in, &r, &err) < 0, "'%s' accepted", in);
	ck_assert_msg(strstr(err.msg, substr), "'%s': error '%s' lacks '%s'", in, err.msg, substr);
}

START_TEST(test_refs)
{
	ref_ok("busybox", "docker.io", "library/busybox", "latest", "busybox:latest");
	ref_ok("busybox:1.36", "docker.io", "library/busybox", "1.36", "busybox:1.36");
	ref_ok("docker.io/library/busybox", "docker.io", "library/busybox", "latest",
	       "busybox:latest");
	ref_ok("index.docker.io/library/busybox:x", "docker.io", "library/busybox", "x",
	       "busybox:x");
	ref_ok("rung/python:3", "docker.io", "rung/python", "3", "rung/python:3");
	ref_ok("localhost:5000/a/b:t", "localhost:5000", "a/b", "t", "localhost:5000/a/b:t");
	ref_ok("127.0.0.1:39999/x", "127.0.0.1:39999", "x", "latest", "127.0.0.1:39999/x:latest");
	ref_ok("localhost/x", "localhost", "x", "latest", "localhost/x:latest");
	ref_ok("ghcr.io/o/r-1.x_y:v1.2-rc", "ghcr.io", "o/r-1.x_y", "v1.2-rc",
	       "ghcr.io/o/r-1.x_y:v1.2-rc");
	struct rfs_ref r;
	struct rung_err err = { 0 };
	ck_assert_int_eq(rfs_ref_parse("@" D1, &r, &err), 0);
	ck_assert_str_eq(r.digest, D1);
	ck_assert_str_eq(r.repo, "");
	ck_assert_int_eq(rfs_ref_parse(D1, &r, &err), 0);
	ck_assert_str_eq(r.digest, D1);
	ck_assert_int_eq(rfs_ref_parse("busybox@" D2, &r, &err), 0);
	ck_assert_str_eq(r.digest, D2);
	ck_assert_str_eq(r.repo, "library/busybox");
	ck_assert_str_eq(r.tag, "");
	ref_bad("", "empty");
	ref_bad("Busybox", "bad repository");
	ref_bad("busybox:", "bad tag");
	ref_bad("busybox:-x", "bad tag");
	ref_bad("a//b", "bad repository");
	ref_bad("busybox@sha256:abc", "bad digest");
	ref_bad("busybox@md5:" "1111111111111111111111111111111111111111111111111111111111111111",
		"bad digest");
	ref_bad("bad host!/x", "bad");
	ck_assert(rfs_digest_valid(D1));
	ck_assert(!rfs_digest_valid("sha256:ABCD"));
	ck_assert(!rfs_digest_valid(NULL));
}
END_TEST

static const char oci_manifest[] =
	"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
	"\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"" D1
	"\",\"size\":10},\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\","
	"\"digest\":\"" D2 "\",\"size\":20},{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+zstd\","
	"\"digest\":\"" D3 "\",\"size\":30}]}";

START_TEST(test_manifest)
{
	struct rfs_manifest m;
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_manifest_parse(oci_manifest, strlen(oci_manifest), RFS_MEDIA_UNKNOWN, &m,
					 &err) == 0,
		      "%s", err.msg);
	ck_assert_int_eq(m.media, RFS_MEDIA_OCI_MANIFEST);
	ck_assert_str_eq(m.config.digest, D1);
	ck_assert_int_eq(m.n_descs, 2);
	ck_assert_int_eq(m.descs[0].media, RFS_MEDIA_LAYER_GZIP);
	ck_assert_int_eq(m.descs[1].media, RFS_MEDIA_LAYER_ZSTD);
	ck_assert_int_eq(m.descs[1].size, 30);
	rfs_manifest_release(&m);

	static const char docker[] =
		"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\","
		"\"config\":{\"mediaType\":\"application/vnd.docker.container.image.v1+json\",\"digest\":\"" D1
		"\",\"size\":10},\"layers\":[{\"mediaType\":\"application/vnd.docker.image.rootfs.diff.tar.gzip\","
		"\"digest\":\"" D2 "\",\"size\":20}]}";
	ck_assert_int_eq(rfs_manifest_parse(docker, strlen(docker), 0, &m, &err), 0);
	ck_assert_int_eq(m.media, RFS_MEDIA_DOCKER_MANIFEST);
	ck_assert_int_eq(m.descs[0].media, RFS_MEDIA_LAYER_GZIP);
	rfs_manifest_release(&m);

	static const char list[] =
		"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest.list.v2+json\","
		"\"manifests\":[{\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\",\"digest\":\"" D1
		"\",\"size\":1,\"platform\":{\"architecture\":\"arm64\",\"os\":\"linux\",\"variant\":\"v8\"}},"
		"{\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\",\"digest\":\"" D2
		"\",\"size\":2,\"platform\":{\"architecture\":\"amd64\",\"os\":\"linux\"}}]}";
	ck_assert_int_eq(rfs_manifest_parse(list, strlen(list), 0, &m, &err), 0);
	ck_assert_int_eq(m.media, RFS_MEDIA_DOCKER_LIST);
	const struct rfs_desc *d;
	ck_assert_int_eq(rfs_index_pick(&m, "linux", "amd64", &d, &err), 0);
	ck_assert_str_eq(d->digest, D2);
	ck_assert_int_eq(rfs_index_pick(&m, "linux", "s390x", &d, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "linux/arm64") && strstr(err.msg, "s390x"), "%s", err.msg);
	rfs_manifest_release(&m);

	/* OCI index without mediaType (hint) and with a ref.name annotation. */
	static const char idx[] =
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		"\"digest\":\"" D3 "\",\"size\":3,\"annotations\":{\"org.opencontainers.image.ref.name\":\"v1\"}}]}";
	ck_assert_int_eq(rfs_manifest_parse(idx, strlen(idx), RFS_MEDIA_OCI_INDEX, &m, &err), 0);
	ck_assert_int_eq(m.media, RFS_MEDIA_OCI_INDEX);
	ck_assert_str_eq(m.descs[0].ref_name, "v1");
	ck_assert_int_eq(rfs_index_pick(&m, "linux", "amd64", &d, &err), 0);
	rfs_manifest_release(&m);
}
END_TEST

static void manifest_bad(const char *json, const char *substr)
{
	struct rfs_manifest m;
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_manifest_parse(json, strlen(json), 0, &m, &err) < 0, "accepted: %s", json);
	ck_assert_msg(strstr(err.msg, substr), "error '%s' lacks '%s'", err.msg, substr);
	ck_assert_ptr_null(m.descs);
}

START_TEST(test_manifest_bad)
{
	manifest_bad("", "bad JSON");
	manifest_bad("[]", "not a JSON object");
	manifest_bad("{\"schemaVersion\":1,\"layers\":[]}", "schemaVersion");
	manifest_bad("{\"schemaVersion\":2,\"mediaType\":\"text/html\",\"layers\":[]}",
		     "unsupported mediaType");
	manifest_bad("{\"schemaVersion\":2}", "neither");
	manifest_bad("{\"schemaVersion\":2,\"layers\":{}}", "not an array");
	manifest_bad("{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\","
		     "\"digest\":\"sha256:xyz\",\"size\":1}]}",
		     "layers[0]: digest");
	manifest_bad("{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\","
		     "\"digest\":\"" D1 "\",\"size\":-1}]}",
		     "size");
	manifest_bad("{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"application/x-evil\","
		     "\"digest\":\"" D1 "\",\"size\":1}]}",
		     "unsupported mediaType");
	manifest_bad("{\"schemaVersion\":2,\"layers\":[]}", "config");
	manifest_bad("{\"schemaVersion\":2,\"schemaVersion\":2,\"layers\":[]}", "bad JSON");
	manifest_bad("{\"schemaVersion\":2,\"manifests\":[]}", "empty");
}
END_TEST

START_TEST(test_config)
{
	static const char cfg[] =
		"{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"PATH=/usr/bin\",\"A=b=c\"],"
		"\"Entrypoint\":null,\"Cmd\":[\"python3\"],\"WorkingDir\":\"/app\",\"User\":\"\"},"
		"\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"" D1 "\"]}}";
	struct rfs_image_config c;
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_config_parse(cfg, strlen(cfg), &c, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(c.env[1], "A=b=c");
	ck_assert_ptr_null(c.entrypoint);
	ck_assert_str_eq(c.cmd[0], "python3");
	ck_assert_str_eq(c.working_dir, "/app");
	ck_assert_ptr_null(c.user);
	ck_assert_str_eq(c.arch, "amd64");
	ck_assert_str_eq(c.diff_ids[0], D1);
	rfs_config_release(&c);
	static const char minimal[] = "{}";
	ck_assert_int_eq(rfs_config_parse(minimal, 2, &c, &err), 0);
	ck_assert_ptr_nonnull(c.env);
	ck_assert_ptr_null(c.env[0]);
	rfs_config_release(&c);
	static const char badenv[] = "{\"config\":{\"Env\":[\"NOEQUALS\"]}}";
	ck_assert_int_eq(rfs_config_parse(badenv, strlen(badenv), &c, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "NOEQUALS"));
	static const char badcmd[] = "{\"config\":{\"Cmd\":[1]}}";
	ck_assert_int_eq(rfs_config_parse(badcmd, strlen(badcmd), &c, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "Cmd"));
	static const char nul[] = "{\"config\":{\"WorkingDir\":\"/a\\u0000b\"}}";
	ck_assert_int_eq(rfs_config_parse(nul, strlen(nul), &c, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "image config"));
}
END_TEST

START_TEST(test_overlay_plan)
{
	const char *const lowers[] = { "/s/l/top", "/s/l/mid", "/s/l/base", NULL };
	struct rfs_mount_plan p;
	struct rung_err err = { 0 };
	ck_assert_int_eq(rfs_overlay_plan(lowers, "/sb/upper", "/sb/work", "/sb/root", &p, &err), 0);
	ck_assert_str_eq(p.data,
			 "lowerdir=/s/l/top:/s/l/mid:/s/l/base,upperdir=/sb/upper,workdir=/sb/work");
	ck_assert_str_eq(p.fstype, "overlay");
	ck_assert_str_eq(p.target, "/sb/root");
	ck_assert(!p.read_only);
	ck_assert_uint_eq(p.flags, MS_NODEV | MS_NOSUID);
	ck_assert_int_eq(rfs_overlay_plan(lowers, NULL, NULL, "/sb/root", &p, &err), 0);
	ck_assert(p.read_only);
	ck_assert_uint_eq(p.flags, MS_NODEV | MS_NOSUID | MS_RDONLY);
	ck_assert_str_eq(p.data, "lowerdir=/s/l/top:/s/l/mid:/s/l/base");
	ck_assert(!p.bind);
	/* One layer, no upper: overlayfs refuses that, so the plan is a read-only bind. */
	ck_assert_int_eq(rfs_overlay_plan(lowers + 2, NULL, NULL, "/sb/root", &p, &err), 0);
	ck_assert(p.bind && p.read_only);
	ck_assert_str_eq(p.data, "lowerdir=/s/l/base");
	ck_assert_int_eq(rfs_overlay_plan(lowers + 2, "/u", "/w", "/t", &p, &err), 0);
	ck_assert(!p.bind);
	ck_assert_int_eq(rfs_overlay_plan(lowers, "/u", NULL, "/t", &p, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "together"));
	const char *const bad[] = { "/a:b", NULL };
	ck_assert_int_eq(rfs_overlay_plan(bad, "/u", "/w", "/t", &p, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "/a:b"));
	const char *const rel[] = { "rel", NULL };
	ck_assert_int_eq(rfs_overlay_plan(rel, "/u", "/w", "/t", &p, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "absolute"));
	ck_assert_int_eq(rfs_overlay_plan(lowers, "/u,x", "/w", "/t", &p, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "upperdir"));
	const char *const empty[] = { NULL };
	ck_assert_int_eq(rfs_overlay_plan(empty, "/u", "/w", "/t", &p, &err), -EINVAL);
	/* Past RFS_MOUNT_DATA_MAX the plan is refused (apply uses lowerdir+ for > 1 page). */
	char *many[201];
	for (int i = 0; i < 200; i++) {
		many[i] = malloc(128);
		snprintf(many[i], 128, "/var/lib/rung/images/layers/sha256/%040d", i);
	}
	many[200] = NULL;
	ck_assert_int_eq(rfs_overlay_plan((const char *const *)many, NULL, NULL, "/t", &p, &err),
			 -E2BIG);
	for (int i = 0; i < 200; i++)
		free(many[i]);
}
END_TEST

/* Without lowerdir+ a stack must fit one page of options: past it, E2BIG names both limits
 * (nothing is mounted or attached before that check). */
START_TEST(test_overlay_classic_page)
{
	char *lowers[61], target[] = "/nonexistent-rung-target";
	for (size_t i = 0; i < 60; i++) {
		ck_assert_int_ge(asprintf(&lowers[i], "/nonexistent/%0120zu", i), 0);
	}
	lowers[60] = NULL;
	struct rfs_mount_plan plan;
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_overlay_plan((const char *const *)lowers, "/u", "/w", target, &plan,
				       &err) == 0,
		      "%s", err.msg);
	plan.classic = true;
	ck_assert_int_eq(rfs_overlay_apply(&plan, &err), -E2BIG);
	ck_assert_msg(strstr(err.msg, "60 layers") && strstr(err.msg, "Linux 6.8"), "%s", err.msg);
	for (size_t i = 0; i < 60; i++)
		free(lowers[i]);
}
END_TEST

Suite *rootfs_parse_suite(void)
{
	Suite *s = suite_create("rootfs_parse");
	TCase *tc = tcase_create("parse");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_refs);
	tcase_add_test(tc, test_manifest);
	tcase_add_test(tc, test_manifest_bad);
	tcase_add_test(tc, test_config);
	tcase_add_test(tc, test_overlay_plan);
	tcase_add_test(tc, test_overlay_classic_page);
	suite_add_tcase(s, tc);
	return s;
}
