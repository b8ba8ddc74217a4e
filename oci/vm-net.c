/*
 * oci/vm-net.c: the pod's network for a vm-rung container (docs/oci.md, "The vm rung"). With
 * linux.namespaces[network].path (a CNI-made pod's), create enters that namespace before the
 * sandbox's supervisor is forked, and the vm rung's own network is made there: a tap for
 * rung-vmm's virtio-net, a /30 between it and the guest, the sandbox's default-deny table on the
 * forward and input hooks (masquerading the guest's traffic to the pod's address) and the DNS
 * proxy, forwarding to the pod's resolver. The allowlist is dev.rung.egress-allow's, or without
 * it 0.0.0.0/0 (open: the guest then asks the pod's resolver itself). delete disposes of the
 * sandbox in the same namespace, so that its tap, table and proxy go, and turns forwarding off
 * again when rung turned it on there.
 */
#include <ctype.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "netpolicy/np.h"
#include "oci/oci-internal.h"
#include "oci/vm.h"

#define ANN "annotations." OCI_ANN_EGRESS

/* The allowlist as the spec's strings: the annotation's entries, else 0.0.0.0/0. */
static int allow_list(const struct oci_config *c, char ***out, struct rung_err *err)
{
	struct np_policy pol;
	int r = oci_egress_parse(c, &pol, err);
	if (r < 0)
		return r;
	size_t n = r > 0 ? pol.n : 1;
	char **v = calloc(n + 1, sizeof(*v));
	for (size_t i = 0; v && i < n; i++) {
		char t[NP_NAME_MAX + 16] = "0.0.0.0/0";
		if (r > 0)
			np_entry_format(&pol.entries[i], t, sizeof(t));
		if (!(v[i] = strdup(t)))
			break;
	}
	bool ok = v && (n == 0 || v[n - 1]);
	if (r > 0)
		np_policy_release(&pol);
	if (!ok) {
		rung_strvfreep(&v);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	*out = v;
	return 0;
}

/* Append word to a comma-separated list of at most max bytes (1), else 0: it does not fit or
 * has other characters than letters, digits, '.', '-', '_' and extra. */
static int list_add(char *list, size_t max, const char *word, size_t len, const char *extra)
{
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)word[i]) && !strchr(".-_", word[i]) &&
		    !strchr(extra, word[i]))
			return 0;
	size_t n = strlen(list);
	if (!len || n + (n ? 1 : 0) + len > max)
		return 0;
	snprintf(list + n, max + 1 - n, "%s%.*s", n ? "," : "", (int)len, word);
	return 1;
}

void oci_vm_resolv_lists(const char *text, char *search, char *dnsopt)
{
	search[0] = dnsopt[0] = '\0';
	for (const char *l = text; l && *l;) {
		size_t ll = strcspn(l, "\n");
		const char *k = l + strspn(l, " \t");
		size_t kl = strcspn(k, " \t\n");
		bool srch = (kl == 6 && !strncmp(k, "search", 6)) || (kl == 6 && !strncmp(k, "domain", 6));
		bool opt = kl == 7 && !strncmp(k, "options", 7);
		if (srch)
			search[0] = '\0'; /* the last such line wins */
		size_t words = 0;
		for (const char *w = k + kl; (srch || opt) && w < l + ll;) {
			w += strspn(w, " \t");
			size_t wl = strcspn(w, " \t\n");
			if (wl && srch && words < OCI_VM_SEARCH_DOMAINS)
				words += (size_t)list_add(search, OCI_VM_SEARCH_MAX, w, wl, "");
			else if (wl && opt)
				list_add(dnsopt, OCI_VM_DNSOPT_MAX, w, wl, ":");
			w += wl;
		}
		l += ll + (l[ll] ? 1 : 0);
	}
}

/* The pod's search domains and options: the CRI's bind on /etc/resolv.conf ("" without). */
static void resolv_lists(const struct oci_config *c, struct oci_vm_net *n)
{
	for (size_t i = 0; i < c->nmounts; i++) {
		const struct oci_mount *m = &c->mounts[i];
		if (!m->bind || !m->src || strcmp(m->dst, "/etc/resolv.conf"))
			continue;
		cleanup_free char *txt = NULL;
		struct rung_err e = {0};
		if (rung_file_load(AT_FDCWD, m->src, 1 << 16, &txt, NULL, &e) == 0)
			oci_vm_resolv_lists(txt, n->search, n->dnsopt);
	}
}

int oci_vm_net_enter(const struct oci_config *c, struct oci_vm_net *n, struct rung_err *err)
{
	*n = (struct oci_vm_net){.host_fd = -1};
	/* A pod's app container (the CRI gives it the pause's ipc and uts by path): checked as
	 * the container rung checks them, not joined: the guest has its own kernel, so its ipc
	 * and uts are its own (docs/oci.md, "The vm rung"). */
	int r = oci_ns_check(&c->ipc_join, CLONE_NEWIPC, "ipc", err);
	if (r < 0 || (r = oci_ns_check(&c->uts_join, CLONE_NEWUTS, "uts", err)) < 0)
		return r;
	if (!c->netns_path)
		return 0;
	cleanup_close int pod = open(c->netns_path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (pod < 0 || fstat(pod, &st) < 0)
		return rung_err_sys(err, errno, "linux.namespaces[network].path %s", c->netns_path);
	if (oci_ns_is_hosts("net", &st, getppid())) {
		if (json_object_get(c->annotations, OCI_ANN_EGRESS))
			return rung_err_set(err, EPERM, ANN ": %s is the host's network namespace "
					    "(pid 1's, or the caller's): rung's default deny would "
					    "apply to the whole host", c->netns_path);
		return 0; /* the host's network (hostNetwork): the guest has no device, as before */
	}
	if ((r = allow_list(c, &n->allow, err)) < 0)
		return r;
	if ((r = oci_egress_resolver(c, n->dns, err)) < 0) {
		if (json_object_get(c->annotations, OCI_ANN_EGRESS))
			return r;
		n->dns[0] = '\0'; /* open, no resolver named: the host's resolv.conf's */
		*err = (struct rung_err){0};
	}
	resolv_lists(c, n);
	n->ino = (uint64_t)st.st_ino;
	n->dev = (uint64_t)st.st_dev;
	n->host_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (n->host_fd < 0 || setns(pod, CLONE_NEWNET) < 0)
		return rung_err_sys(err, errno, "enter linux.namespaces[network].path %s",
				    c->netns_path);
	n->joined = true;
	return 0;
}

void oci_vm_net_leave(struct oci_vm_net *n)
{
	if (n->joined && setns(n->host_fd, CLONE_NEWNET) == 0)
		n->joined = false;
	if (n->host_fd >= 0)
		close(n->host_fd);
	n->host_fd = -1;
	rung_strvfreep(&n->allow);
	n->allow = NULL;
}

int oci_vm_net_rejoin(json_t *vm, struct oci_vm_net *n, struct rung_err *err)
{
	*n = (struct oci_vm_net){.host_fd = -1};
	const char *path = json_string_value(json_object_get(vm, "netns"));
	if (!path)
		return 0;
	cleanup_close int pod = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (pod < 0 || fstat(pod, &st) < 0 ||
	    (uint64_t)st.st_ino != (uint64_t)json_integer_value(json_object_get(vm, "netns_ino")) ||
	    (uint64_t)st.st_dev != (uint64_t)json_integer_value(json_object_get(vm, "netns_dev")))
		return 0; /* gone (its tap and table with it), or another namespace now */
	n->host_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (n->host_fd < 0 || setns(pod, CLONE_NEWNET) < 0)
		return rung_err_sys(err, errno, "enter the pod's network namespace %s", path);
	n->joined = true;
	return 0;
}

int oci_vm_net_record(const struct oci_vm_net *n, const struct oci_config *c, json_t *vm)
{
	if (!n->joined)
		return 0;
	if (json_object_set_new(vm, "netns", json_string(c->netns_path)) < 0 ||
	    json_object_set_new(vm, "netns_ino", json_integer((json_int_t)n->ino)) < 0 ||
	    json_object_set_new(vm, "netns_dev", json_integer((json_int_t)n->dev)) < 0)
		return -ENOMEM;
	return 0;
}
