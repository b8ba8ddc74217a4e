/*
 * oci/state.c: a container's record under --root: <root>/<id>/state.json (ours: pid, its
 * start time, bundle, cgroup, user id slot, annotations) and <root>/<id>/exec.fifo while the
 * init waits for `start`. The status is computed, never stored: stopped when the pid is gone,
 * a zombie or a different process (start time), created while the fifo exists, else running.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/oci.h"

int oci_id_check(const char *id, struct rung_err *err)
{
	size_t n = strlen(id);
	if (n == 0 || n > 200)
		return rung_err_set(err, EINVAL, "container id: empty or longer than 200 bytes");
	if (strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
		return rung_err_set(err, EINVAL, "container id '%s': invalid", id);
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			  c == '-' || c == '_' || c == '.' || c == '+';
		if (!ok)
			return rung_err_set(err, EINVAL, "container id '%s': only letters, digits and "
					    "'-_.+' are allowed", id);
	}
	return 0;
}

int oci_state_path(const char *root, const char *id, const char *name, char *buf, size_t n)
{
	int w = name ? snprintf(buf, n, "%s/%s/%s", root, id, name) : snprintf(buf, n, "%s/%s", root, id);
	return (w < 0 || (size_t)w >= n) ? -ENAMETOOLONG : 0;
}

int oci_state_write(const char *root, const struct oci_state *s, struct rung_err *err)
{
	cleanup_json json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:I, s:i, s:O, s:O}", "id", s->id,
					   "bundle", s->bundle, "cgroup", s->cgroup, "pid",
					   (int)s->pid, "start_time", (json_int_t)s->start_time,
					   "uid_slot", (int)s->uid_slot, "annotations",
					   s->annotations ? s->annotations : json_object(),
					   "hooks", s->hooks ? s->hooks : json_null());
	if (!j)
		return rung_err_set(err, ENOMEM, "out of memory");
	cleanup_free char *txt = json_dumps(j, JSON_COMPACT);
	char p[4096];
	if (!txt || oci_state_path(root, s->id, "state.json", p, sizeof(p)) < 0)
		return rung_err_set(err, ENOMEM, "state of %s: out of memory", s->id);
	return rung_write_file_replace(AT_FDCWD, p, txt, strlen(txt), 0600, err);
}

int oci_state_read(const char *root, const char *id, struct oci_state *s, struct rung_err *err)
{
	memset(s, 0, sizeof(*s));
	s->uid_slot = OCI_UID_SLOTS;
	char p[4096];
	if (oci_id_check(id, err) < 0)
		return -EINVAL;
	if (oci_state_path(root, id, "state.json", p, sizeof(p)) < 0)
		return rung_err_set(err, ENAMETOOLONG, "container %s: path too long", id);
	cleanup_free char *txt = NULL;
	size_t len;
	struct rung_err e2 = {0};
	int r = rung_file_load(AT_FDCWD, p, 1 << 20, &txt, &len, &e2);
	if (r == -ENOENT)
		return rung_err_set(err, ENOENT, "container %s does not exist", id);
	if (r < 0)
		return rung_err_set(err, -r, "container %s: %s", id, e2.msg);
	cleanup_json json_t *j = json_loadb(txt, len, 0, NULL);
	const char *b = json_string_value(json_object_get(j, "bundle"));
	const char *cg = json_string_value(json_object_get(j, "cgroup"));
	if (!b || !cg)
		return rung_err_set(err, EINVAL, "container %s: state.json is damaged", id);
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->bundle, sizeof(s->bundle), "%s", b);
	snprintf(s->cgroup, sizeof(s->cgroup), "%s", cg);
	s->pid = (pid_t)json_integer_value(json_object_get(j, "pid"));
	s->start_time = (uint64_t)json_integer_value(json_object_get(j, "start_time"));
	s->uid_slot = (uint32_t)json_integer_value(json_object_get(j, "uid_slot"));
	s->annotations = json_incref(json_object_get(j, "annotations"));
	json_t *hk = json_object_get(j, "hooks");
	s->hooks = json_is_object(hk) ? json_incref(hk) : NULL;
	return 0;
}

void oci_state_release(struct oci_state *s)
{
	json_decref(s->annotations);
	json_decref(s->hooks);
	s->annotations = s->hooks = NULL;
}

static bool pid_alive(pid_t pid, uint64_t start_time)
{
	if (pid <= 0 || rung_proc_starttime(pid) != start_time)
		return false;
	char p[64], buf[512];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	cleanup_close int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return false;
	buf[n] = 0;
	const char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

enum oci_status oci_status_of(const char *root, const struct oci_state *s)
{
	if (s->pid == 0)
		return OCI_CREATING;
	if (!pid_alive(s->pid, s->start_time))
		return OCI_STOPPED;
	char p[4096];
	struct stat st;
	if (oci_state_path(root, s->id, "exec.fifo", p, sizeof(p)) == 0 && stat(p, &st) == 0)
		return OCI_CREATED;
	if (oci_state_path(root, s->id, OCI_VM_PAUSED, p, sizeof(p)) == 0 && stat(p, &st) == 0)
		return OCI_PAUSED;
	return oci_cgroup_paused(s->cgroup) ? OCI_PAUSED : OCI_RUNNING;
}

const char *oci_status_name(enum oci_status st)
{
	static const char *const names[] = {"creating", "created", "running", "stopped", "paused"};
	return names[st];
}

json_t *oci_state_json(const char *root, const struct oci_state *s)
{
	enum oci_status st = oci_status_of(root, s);
	bool live = st == OCI_CREATED || st == OCI_RUNNING || st == OCI_PAUSED;
	json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:s, s:O}", "ociVersion", OCI_VERSION, "id",
			      s->id, "status", oci_status_name(st), "pid", live ? (int)s->pid : 0,
			      "bundle",
			      s->bundle, "annotations",
			      s->annotations ? s->annotations : json_object());
	return j;
}

int oci_uid_slot_claim(const char *root, uint32_t *slot, struct rung_err *err)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/.uids", root);
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s", p);
	for (uint32_t i = 0; i < OCI_UID_SLOTS; i++) {
		snprintf(p, sizeof(p), "%s/.uids/%u", root, i);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			close(fd);
			*slot = i;
			return 0;
		}
		if (errno != EEXIST)
			return rung_err_sys(err, errno, "claim user ids %s", p);
	}
	return rung_err_set(err, EAGAIN, "no free user id range under %s/.uids (%u in use)", root,
			    OCI_UID_SLOTS);
}

void oci_uid_slot_release(const char *root, uint32_t slot)
{
	if (slot >= OCI_UID_SLOTS)
		return;
	char p[4096];
	snprintf(p, sizeof(p), "%s/.uids/%u", root, slot);
	unlink(p);
}
