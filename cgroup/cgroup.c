/* cgroup/cgroup.c: version detection, the group object, plans, and dispatch to v1/v2. */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "cgroup/cgroup-internal.h"

static const struct rt_cgroup_ops *const rt_cgroup_managers[RT_CGROUP__COUNT] = {
    [RT_CGROUP_V1] = &rt_cgroup_v1_ops,
    [RT_CGROUP_V2] = &rt_cgroup_v2_ops,
};

static const char *const ctl_names[RT_CGCTL__COUNT] = {
    [RT_CGCTL_MEMORY] = "memory",   [RT_CGCTL_CPU] = "cpu",	    [RT_CGCTL_PIDS] = "pids",
    [RT_CGCTL_FREEZER] = "freezer", [RT_CGCTL_CPUACCT] = "cpuacct",
};

const char *rt_cgroup_ctl_name(enum rt_cgroup_ctl ctl)
{
	return (unsigned)ctl < RT_CGCTL__COUNT ? ctl_names[ctl] : "?";
}

static bool is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool file_exists(const char *dir, const char *file)
{
	char p[4096];
	if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, file) >= sizeof(p))
		return false;
	return access(p, F_OK) == 0;
}

static int check_component(const char *c, size_t len, const char *name, struct rung_err *err)
{
	if (len == 0)
		return rung_err_set(err, EINVAL, "cgroup name \"%s\": empty component", name);
	if (len > 128)
		return rung_err_set(err, ENAMETOOLONG, "cgroup name \"%s\": component too long",
				    name);
	if (!isalnum((unsigned char)c[0]))
		return rung_err_set(
		    err, EINVAL,
		    "cgroup name \"%s\": a component must start with a letter or digit", name);
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)c[i];
		if (!isalnum(ch) && ch != '-' && ch != '_' && ch != '.')
			return rung_err_set(err, EINVAL, "cgroup name \"%s\": bad character '%c'",
					    name, isprint(ch) ? ch : '?');
	}
	return 0;
}

int rt_cgroup_name_check(const char *name, struct rung_err *err)
{
	if (!name || !*name)
		return rung_err_set(err, EINVAL, "cgroup name: empty");
	if (strlen(name) > 1024)
		return rung_err_set(err, ENAMETOOLONG, "cgroup name: longer than 1024 bytes");
	const char *p = name;
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		int r = check_component(p, len, name, err);
		if (r < 0)
			return r;
		if (!slash)
			return 0;
		p = slash + 1;
	}
}

int rt_cgroup_detect(const char *root, enum rt_cgroup_version *out, bool *hybrid,
		     struct rung_err *err)
{
	struct statfs sf;
	bool hyb = false;
	if (statfs(root, &sf) < 0)
		return rung_err_sys(err, errno, "cgroup root %s", root);
	if (sf.f_type == CGROUP2_SUPER_MAGIC || file_exists(root, "cgroup.controllers")) {
		*out = RT_CGROUP_V2;
	} else if (sf.f_type == CGROUP_SUPER_MAGIC) {
		return rung_err_set(err, EINVAL,
				    "cgroup root %s is one v1 hierarchy: give its parent (e.g. "
				    "/sys/fs/cgroup)",
				    root);
	} else {
		bool any = false;
		char p[4096];
		for (int c = 0; c < RT_CGCTL__COUNT; c++) {
			snprintf(p, sizeof(p), "%s/%s", root, ctl_names[c]);
			any |= is_dir(p) && file_exists(p, "cgroup.procs");
		}
		if (!any)
			return rung_err_set(err, ENOENT,
					    "cgroup root %s: neither cgroup2 nor v1 controller "
					    "hierarchies (memory, cpu, pids, freezer)",
					    root);
		snprintf(p, sizeof(p), "%s/unified", root);
		hyb = is_dir(p) && file_exists(p, "cgroup.controllers");
		*out = RT_CGROUP_V1;
	}
	if (hybrid)
		*hybrid = hyb;
	return 0;
}

void rt_cgroup_drop_if_empty(const char *root, const char *name)
{
	struct rt_cgroup *cg = NULL;
	struct rung_err e = {0};
	if (rt_cgroup_open(root, name, &cg, &e) < 0)
		return;
	for (int c = 0; c < RT_CGCTL__COUNT; c++)
		if (cg->dir[c])
			rmdir(cg->dir[c]);
	rt_cgroup_free(cg);
}

void rt_cgroup_free(struct rt_cgroup *cg)
{
	if (!cg)
		return;
	for (int c = 0; c < RT_CGCTL__COUNT; c++) {
		free(cg->hier[c]);
		free(cg->dir[c]);
	}
	free(cg->root);
	free(cg->name);
	free(cg);
}

static int open_common(const char *root, const char *name, enum rt_cgroup_version ver, bool hyb,
		       struct rt_cgroup **out, struct rung_err *err)
{
	cleanup_rt_cgroup struct rt_cgroup *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return rung_err_set(err, ENOMEM, "out of memory");
	cg->version = ver;
	cg->hybrid = hyb;
	cg->root = strdup(root);
	cg->name = strdup(name);
	if (!cg->root || !cg->name)
		return rung_err_set(err, ENOMEM, "out of memory");
	size_t l = strlen(cg->root);
	while (l > 1 && cg->root[l - 1] == '/')
		cg->root[--l] = '\0';
	int r = rt_cgroup_managers[ver]->probe(cg, err);
	if (r < 0)
		return rung_err_wrap(err, "cgroup %s", name);
	*out = rung_steal_ptr(&cg);
	return 0;
}

int rt_cgroup_open(const char *root, const char *name, struct rt_cgroup **out, struct rung_err *err)
{
	enum rt_cgroup_version ver;
	bool hyb;
	int r = rt_cgroup_name_check(name, err);
	if (r < 0)
		return r;
	if (!root || !*root)
		return rung_err_set(err, EINVAL, "cgroup root: empty");
	if ((r = rt_cgroup_detect(root, &ver, &hyb, err)) < 0)
		return r;
	return open_common(root, name, ver, hyb, out, err);
}

int rt_cgroup_open_child(const struct rt_cgroup *parent, const char *leaf, struct rt_cgroup **out,
			 struct rung_err *err)
{
	if (!leaf || strchr(leaf, '/'))
		return rung_err_set(err, EINVAL, "cgroup child \"%s\": must be one component",
				    leaf ? leaf : "");
	cleanup_free char *name = NULL;
	if (asprintf(&name, "%s/%s", parent->name, leaf) < 0)
		return rung_err_set(err, ENOMEM, "out of memory");
	int r = rt_cgroup_name_check(name, err);
	if (r < 0)
		return r;
	return open_common(parent->root, name, parent->version, parent->hybrid, out, err);
}

enum rt_cgroup_version rt_cgroup_version(const struct rt_cgroup *cg) { return cg->version; }
bool rt_cgroup_is_hybrid(const struct rt_cgroup *cg) { return cg->hybrid; }
const char *rt_cgroup_name(const struct rt_cgroup *cg) { return cg->name; }
bool rt_cgroup_has(const struct rt_cgroup *cg, enum rt_cgroup_ctl ctl)
{
	return (unsigned)ctl < RT_CGCTL__COUNT && cg->has[ctl];
}
const char *rt_cgroup_dir(const struct rt_cgroup *cg, enum rt_cgroup_ctl ctl)
{
	return (unsigned)ctl < RT_CGCTL__COUNT ? cg->dir[ctl] : NULL;
}

/* --- plans --------------------------------------------------------------------------------- */

void rt_cgroup_plan_release(struct rt_cgroup_plan *plan)
{
	if (!plan)
		return;
	for (size_t i = 0; i < plan->n; i++) {
		free(plan->ops[i].dir);
		free(plan->ops[i].file);
		free(plan->ops[i].value);
	}
	free(plan->ops);
	plan->ops = NULL;
	plan->n = plan->cap = 0;
}

static struct rt_cgroup_op *plan_push(struct rt_cgroup_plan *p)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		struct rt_cgroup_op *ops = realloc(p->ops, cap * sizeof(*ops));
		if (!ops)
			return NULL;
		p->ops = ops;
		p->cap = cap;
	}
	struct rt_cgroup_op *op = &p->ops[p->n++];
	memset(op, 0, sizeof(*op));
	return op;
}

int rt_cg_plan_mkdir(struct rt_cgroup_plan *p, const char *dir, struct rung_err *err)
{
	struct rt_cgroup_op *op = plan_push(p);
	if (!op || !(op->dir = strdup(dir)))
		return rung_err_set(err, ENOMEM, "out of memory");
	op->kind = RT_CGROUP_OP_MKDIR;
	return 0;
}

int rt_cg_plan_write(struct rt_cgroup_plan *p, const char *dir, const char *file, bool optional,
		     struct rung_err *err, const char *fmt, ...)
{
	struct rt_cgroup_op *op = plan_push(p);
	if (!op)
		return rung_err_set(err, ENOMEM, "out of memory");
	op->kind = RT_CGROUP_OP_WRITE;
	op->optional = optional;
	va_list ap;
	va_start(ap, fmt);
	int r = vasprintf(&op->value, fmt, ap);
	va_end(ap);
	if (r < 0)
		op->value = NULL;
	op->dir = strdup(dir);
	op->file = strdup(file);
	if (!op->value || !op->dir || !op->file)
		return rung_err_set(err, ENOMEM, "out of memory");
	return 0;
}

int rt_cgroup_plan(const struct rt_cgroup *cg, const struct rt_cgroup_limits *lim,
		   struct rt_cgroup_plan *out, struct rung_err *err)
{
	static const struct rt_cgroup_limits none;
	if (lim && lim->cpu_millis && lim->cpu_millis < 10)
		return rung_err_set(err, EINVAL,
				    "limits.cpu_millis %u: below the minimum of 10 (1%% of a CPU)",
				    lim->cpu_millis);
	if (lim && lim->memory_bytes && lim->memory_bytes < 1 << 20)
		return rung_err_set(err, EINVAL,
				    "limits.memory_bytes %llu: below the minimum of 1 MiB",
				    (unsigned long long)lim->memory_bytes);
	int r = rt_cgroup_managers[cg->version]->plan(cg, lim ? lim : &none, out, err);
	if (r < 0) {
		rt_cgroup_plan_release(out);
		return rung_err_wrap(err, "cgroup %s", cg->name);
	}
	return 0;
}

/* v2 refuses to enable domain controllers for the children of a group that holds processes. */
static int explain_busy_subtree(const struct rt_cgroup_op *op, struct rung_err *err)
{
	return rung_err_set(err, EBUSY,
			    "enable \"%s\" in %s/cgroup.subtree_control: the group holds processes, "
			    "and cgroup v2's no-internal-processes rule forbids domain controllers "
			    "(memory) for its children then: move those processes into a leaf group, "
			    "or give rung a cgroup root (RUNG_CGROUP_ROOT) that holds none",
			    op->value, op->dir);
}

int rt_cgroup_apply(const struct rt_cgroup_plan *plan, struct rung_err *err)
{
	for (size_t i = 0; i < plan->n; i++) {
		const struct rt_cgroup_op *op = &plan->ops[i];
		if (op->kind == RT_CGROUP_OP_MKDIR) {
			if (mkdir(op->dir, 0755) < 0 && errno != EEXIST)
				return rung_err_sys(err, errno, "mkdir %s", op->dir);
			continue;
		}
		int r = rt_cg_write(op->dir, op->file, op->value, err);
		if (r == -EBUSY && !strcmp(op->file, "cgroup.subtree_control"))
			return explain_busy_subtree(op, err);
		if (r == -ENOENT && op->optional) {
			LOG_DEBUG("%s/%s absent: skipped", op->dir, op->file);
			continue;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

int rt_cgroup_create(const struct rt_cgroup *cg, const struct rt_cgroup_limits *lim,
		     struct rung_err *err)
{
	cleanup_rt_cgroup_plan struct rt_cgroup_plan plan = {0};
	int r = rt_cgroup_plan(cg, lim, &plan, err);
	return r < 0 ? r : rt_cgroup_apply(&plan, err);
}

/* --- dispatch ------------------------------------------------------------------------------ */

int rt_cgroup_enter(const struct rt_cgroup *cg, pid_t pid, struct rung_err *err)
{
	if (pid <= 0)
		return rung_err_set(err, EINVAL, "cgroup %s: enter: bad pid %d", cg->name,
				    (int)pid);
	int r = rt_cgroup_managers[cg->version]->enter(cg, pid, err);
	return r < 0 ? rung_err_wrap(err, "cgroup %s: enter pid %d", cg->name, (int)pid) : 0;
}

int rt_cgroup_dirfd(const struct rt_cgroup *cg, struct rung_err *err)
{
	if (cg->version != RT_CGROUP_V2)
		return rung_err_set(err, ENOTSUP,
				    "cgroup %s: CLONE_INTO_CGROUP needs cgroup v2, this root is v1",
				    cg->name);
	int fd = open(cg->dir[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return rung_err_sys(err, errno, "cgroup %s: open %s", cg->name, cg->dir[0]);
	return fd;
}

int rt_cgroup_tasks_fds(const struct rt_cgroup *cg, int fds[RT_CGCTL__COUNT],
			struct rung_err *err)
{
	if (cg->version != RT_CGROUP_V1)
		return rung_err_set(err, ENOTSUP,
				    "cgroup %s: tasks files are cgroup v1's, this is v2", cg->name);
	const char *dirs[RT_CGCTL__COUNT];
	size_t n = rt_cgroup_managers[cg->version]->dirs(cg, dirs);
	for (size_t i = 0; i < n; i++) {
		char p[4096];
		snprintf(p, sizeof(p), "%s/tasks", dirs[i]);
		fds[i] = open(p, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fds[i] < 0) {
			int e = errno;
			while (i)
				close(fds[--i]);
			return rung_err_sys(err, e, "cgroup %s: open %s", cg->name, p);
		}
	}
	return (int)n;
}

int rt_cgroup_birth_open(const struct rt_cgroup *cg, struct rt_cgroup_birth *b,
			 struct rung_err *err)
{
	*b = RT_CGROUP_BIRTH_NONE;
	if (cg->version == RT_CGROUP_V2) {
		int fd = rt_cgroup_dirfd(cg, err);
		if (fd < 0)
			return fd;
		b->dirfd = fd;
		return 0;
	}
	int n = rt_cgroup_tasks_fds(cg, b->tasks, err);
	if (n < 0)
		return n;
	b->ntasks = (size_t)n;
	return 0;
}

void rt_cgroup_birth_close(struct rt_cgroup_birth *b)
{
	if (b->dirfd >= 0)
		close(b->dirfd);
	for (size_t i = 0; i < b->ntasks; i++)
		close(b->tasks[i]);
	*b = RT_CGROUP_BIRTH_NONE;
}

long rt_cgroup_birth_clone(struct rt_cgroup_birth *b, unsigned long flags)
{
	if (b->dirfd >= 0) {
		struct clone_args ca = {.flags = (flags & ~0xffUL) | CLONE_INTO_CGROUP,
					.exit_signal = flags & 0xff,
					.cgroup = (uint64_t)b->dirfd};
		long pid = syscall(SYS_clone3, &ca, sizeof(ca));
		if (pid >= 0)
			return pid;
		if (errno != ENOSYS && errno != E2BIG && errno != EINVAL)
			return -errno;
		close(b->dirfd); /* a kernel before 5.7: the parent moves the child */
		b->dirfd = -1;
	}
	long pid = syscall(SYS_clone, flags, NULL, NULL, NULL, 0);
	return pid < 0 ? -errno : pid;
}

int rt_cgroup_birth_enter(struct rt_cgroup_birth *b)
{
	int r = 0;
	for (size_t i = 0; i < b->ntasks; i++) {
		if (r == 0 && write(b->tasks[i], "0", 1) != 1)
			r = -errno;
		close(b->tasks[i]);
	}
	b->ntasks = 0;
	if (b->dirfd >= 0)
		close(b->dirfd);
	b->dirfd = -1;
	return r;
}

int rt_cgroup_freeze(const struct rt_cgroup *cg, bool frozen, struct rung_err *err)
{
	int r = rt_cgroup_managers[cg->version]->freeze(cg, frozen, err);
	return r < 0 ? rung_err_wrap(err, "cgroup %s: %s", cg->name, frozen ? "freeze" : "thaw")
		     : 0;
}

int rt_cgroup_kill_all(const struct rt_cgroup *cg, struct rung_err *err)
{
	int r = rt_cgroup_managers[cg->version]->kill_all(cg, err);
	return r < 0 ? rung_err_wrap(err, "cgroup %s: kill all", cg->name) : 0;
}

int rt_cgroup_stats(const struct rt_cgroup *cg, struct rt_cgroup_stats *out, struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	int r = rt_cgroup_managers[cg->version]->stats(cg, out, err);
	return r < 0 ? rung_err_wrap(err, "cgroup %s: stats", cg->name) : 0;
}

int rt_cgroup_oom_kills(const struct rt_cgroup *cg, uint64_t *out, struct rung_err *err)
{
	int r = rt_cgroup_managers[cg->version]->oom_kills(cg, out, err);
	return r < 0 ? rung_err_wrap(err, "cgroup %s: oom kills", cg->name) : 0;
}

int rt_cgroup_pids(const struct rt_cgroup *cg, pid_t **out, size_t *n, struct rung_err *err)
{
	const char *dirs[RT_CGCTL__COUNT];
	size_t nd = rt_cgroup_managers[cg->version]->dirs(cg, dirs);
	cleanup_free pid_t *pids = NULL;
	size_t cnt = 0, cap = 0;
	for (size_t i = 0; i < nd; i++) {
		int r = rt_cg_collect_pids(dirs[i], &pids, &cnt, &cap, err);
		if (r < 0)
			return rung_err_wrap(err, "cgroup %s", cg->name);
	}
	/* Union: drop duplicates (a pid is in one group per hierarchy). */
	size_t u = 0;
	for (size_t i = 0; i < cnt; i++) {
		size_t j = 0;
		while (j < u && pids[j] != pids[i])
			j++;
		if (j == u)
			pids[u++] = pids[i];
	}
	*out = rung_steal_ptr(&pids);
	*n = u;
	return 0;
}

int rt_cgroup_destroy(const struct rt_cgroup *cg, struct rung_err *err)
{
	int r = rt_cgroup_kill_all(cg, err);
	if (r < 0)
		return r;
	const char *dirs[RT_CGCTL__COUNT];
	size_t nd = rt_cgroup_managers[cg->version]->dirs(cg, dirs);
	int first = 0;
	struct rung_err e2;
	for (size_t i = 0; i < nd; i++) {
		r = rt_cg_rmdir_tree(dirs[i], first ? &e2 : err);
		if (r < 0 && !first)
			first = r;
	}
	return first < 0 ? rung_err_wrap(err, "cgroup %s: destroy", cg->name) : 0;
}

/* --- gc ------------------------------------------------------------------------------------ */

static int gc_dir(const char *root, const char *parent, const char *dir, rt_cgroup_live_fn is_live,
		  void *data, int *removed, struct rung_err *err)
{
	cleanup_dir DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : rung_err_sys(err, errno, "cgroup gc: open %s", dir);
	struct dirent *de;
	int first = 0;
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if (rt_cgroup_name_check(de->d_name, NULL) < 0 || is_live(de->d_name, data))
			continue;
		cleanup_free char *name = NULL;
		if (asprintf(&name, "%s/%s", parent, de->d_name) < 0)
			return rung_err_set(err, ENOMEM, "out of memory");
		cleanup_rt_cgroup struct rt_cgroup *cg = NULL;
		struct rung_err e2;
		struct rung_err *ep = first ? &e2 : err;
		int r = rt_cgroup_open(root, name, &cg, ep);
		if (r == 0)
			r = rt_cgroup_destroy(cg, ep);
		if (r < 0) {
			LOG_WARN("cgroup gc: %s: %s", name, ep->msg);
			if (!first)
				first = r;
			continue;
		}
		LOG_INFO("cgroup gc: removed orphan %s", name);
		(*removed)++;
	}
	return first;
}

int rt_cgroup_gc(const char *root, const char *parent, rt_cgroup_live_fn is_live, void *data,
		 struct rung_err *err)
{
	/* Opening the parent itself gives its directory in each hierarchy. */
	cleanup_rt_cgroup struct rt_cgroup *pcg = NULL;
	int r = rt_cgroup_open(root, parent, &pcg, err);
	if (r < 0)
		return r;
	const char *dirs[RT_CGCTL__COUNT];
	size_t nd = rt_cgroup_managers[pcg->version]->dirs(pcg, dirs);
	int removed = 0, first = 0;
	struct rung_err e2;
	for (size_t i = 0; i < nd; i++) {
		r = gc_dir(pcg->root, parent, dirs[i], is_live, data, &removed, first ? &e2 : err);
		if (r < 0 && !first)
			first = r;
	}
	return first < 0 ? first : removed;
}
