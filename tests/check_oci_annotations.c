/* tests/check_oci_annotations.c: oci/annotations.c, the dev.rung.egress-allow annotation: its
 * entries parsed by netpolicy's parser (commas or white space between them), each refusal
 * naming the annotation (create's refusals: the e2e hooks suite). */
#include <check.h>
#include <string.h>

#include "netpolicy/np.h"
#include "oci/oci.h"

/* A minimal config with the annotation set to ann (a JSON value, NULL: none), joining a network
 * namespace by path when netns. */
static int load(const char *ann, bool netns, struct oci_config *c, struct rung_err *err)
{
	char text[4096];
	snprintf(text, sizeof(text),
		 "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\"},"
		 " \"process\": {\"args\": [\"/bin/true\"], \"cwd\": \"/\"},"
		 " \"annotations\": {%s%s},"
		 " \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"ipc\"},"
		 "  {\"type\": \"mount\"}, {\"type\": \"network\"%s}]}}",
		 ann ? "\"" OCI_ANN_EGRESS "\": " : "", ann ? ann : "",
		 netns ? ", \"path\": \"/var/run/netns/pod\"" : "");
	int r = oci_config_parse(text, strlen(text), "/b", c, err);
	ck_assert_msg(r == 0, "config: %s", err->msg);
	return r;
}

START_TEST(test_parsed)
{
	struct oci_config c;
	struct np_policy p;
	struct rung_err err = {0};
	load("\"10.0.0.0/8, example.org:443,*.pypi.org\\n 192.0.2.7 example.org:443\"", true, &c,
	     &err);
	ck_assert_int_eq(oci_egress_parse(&c, &p, &err), 1);
	ck_assert_uint_eq(p.n, 4); /* the duplicate kept once */
	char buf[128];
	np_entry_format(&p.entries[0], buf, sizeof(buf));
	ck_assert_str_eq(buf, "10.0.0.0/8");
	np_entry_format(&p.entries[2], buf, sizeof(buf));
	ck_assert_str_eq(buf, "*.pypi.org");
	np_policy_release(&p);
	oci_config_release(&c);
	/* absent: 0, nothing parsed */
	load(NULL, false, &c, &err);
	ck_assert_int_eq(oci_egress_parse(&c, &p, &err), 0);
	ck_assert_uint_eq(p.n, 0);
	oci_config_release(&c);
	/* empty: a valid allowlist that opens nothing */
	load("\" , \"", true, &c, &err);
	ck_assert_int_eq(oci_egress_parse(&c, &p, &err), 1);
	ck_assert_uint_eq(p.n, 0);
	np_policy_release(&p);
	oci_config_release(&c);
}
END_TEST

static void refused(const char *ann, bool netns, int code, const char *needle)
{
	struct oci_config c;
	struct np_policy p;
	struct rung_err err = {0};
	load(ann, netns, &c, &err);
	ck_assert_int_eq(oci_egress_parse(&c, &p, &err), -code);
	ck_assert_msg(strstr(err.msg, "annotations." OCI_ANN_EGRESS), "'%s' does not name the "
		      "annotation", err.msg);
	ck_assert_msg(strstr(err.msg, needle), "'%s' does not name '%s'", err.msg, needle);
	oci_config_release(&c);
}

START_TEST(test_refused)
{
	refused("\"example.org, exa*mple.org\"", true, EINVAL, "exa*mple.org");
	refused("\"10.0.0.1/8\"", true, EINVAL, "10.0.0.1/8");
	refused("\"example.org:0\"", true, EINVAL, "example.org:0");
	refused("[\"example.org\"]", true, EINVAL, "must be a string");
	refused("\"example.org\"", false, EINVAL, "linux.namespaces[network].path");
}
END_TEST

Suite *oci_annotations_suite(void)
{
	Suite *s = suite_create("oci_annotations");
	TCase *tc = tcase_create("egress");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_parsed);
	tcase_add_test(tc, test_refused);
	suite_add_tcase(s, tc);
	return s;
}
