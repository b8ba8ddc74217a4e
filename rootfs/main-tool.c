/*
 * rootfs/main-tool.c: build/rfs-tool, a small driver of the rootfs API for `make image-*`,
 * benchmarks and debugging (the user-facing commands are `rung image ...`).
 *
 *   rfs-tool layout  --out DIR --tag REF [--tar T]... [--compress none|gzip|zstd]
 *                    [--env K=V]... [--cmd ARG]... [--entrypoint ARG]... [--workdir D] [--user U]
 *   rfs-tool busybox-tar OUT.tar          a busybox-static rootfs tar (applets as symlinks)
 *   rfs-tool import  --state DIR PATH [TAG]
 *   rfs-tool pull    --state DIR REF [--insecure] [--tag TAG]
 *   rfs-tool list|gc --state DIR
 *   rfs-tool inspect|layers|rm --state DIR REF
 *   rfs-tool tag     --state DIR REF NEWTAG
 *   rfs-tool unpack  LAYER.tar DIR        one layer, as the store would unpack it
 */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs.h"

#define MAXV 64

static int usage(void)
{
	fprintf(stderr,
		"usage: rfs-tool layout|busybox-tar|import|pull|list|gc|inspect|layers|tag|rm|"
		"unpack ... (see rootfs/main-tool.c)\n");
	return 2;
}

static void progress(const char *layer, uint64_t done, uint64_t total, void *ud)
{
	uint64_t *last = ud;
	if (done == total || done - *last >= (64u << 20)) {
		*last = done;
		fprintf(stderr, "  %.19s: %llu/%llu MiB\n", layer, (unsigned long long)(done >> 20),
			(unsigned long long)(total >> 20));
	}
}

static int busybox_tar(const char *out, struct rung_err *err)
{
	static const char *const applets[] = {
	    "sh",    "ash",  "ls",   "cat",   "echo",  "true",	"false", "id",	   "env",
	    "mkdir", "rm",   "cp",   "mv",    "sleep", "touch", "head",	 "tail",   "wc",
	    "grep",  "sed",  "ps",   "kill",  "chmod", "pwd",	"uname", "printf", "test",
	    "[",     "stat", "find", "xargs", "sort",  "dd"};
	static const struct {
		const char *path, *body;
	} files[] = {
	    {"etc/passwd",
	     "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"},
	    {"etc/group", "root:x:0:\nnogroup:x:65534:\n"},
	    {"etc/hostname", "rung\n"},
	};
	static const char *const dirs[] = {"bin",  "etc",  "tmp", "root",
					   "work", "proc", "dev", "sys"};
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	if (archive_write_open_filename(a, out) != ARCHIVE_OK)
		return rung_err_set(err, EIO, "%s: %s", out, archive_error_string(a));
	int r = 0;
	struct archive_entry *e = archive_entry_new();
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(dirs); i++) {
		archive_entry_clear(e);
		archive_entry_set_pathname(e, dirs[i]);
		archive_entry_set_filetype(e, AE_IFDIR);
		archive_entry_set_perm(e, !strcmp(dirs[i], "tmp") ? 01777 : 0755);
		archive_write_header(a, e);
	}
	cleanup_free char *bb = NULL;
	size_t bblen = 0;
	cleanup_close int bfd = open("/bin/busybox", O_RDONLY | O_CLOEXEC);
	if (bfd < 0) {
		r = rung_err_sys(err, errno, "open /bin/busybox (apt-get install busybox-static)");
		goto out;
	}
	if ((r = rung_read_fd_all(bfd, 64u << 20, &bb, &bblen, err)) < 0)
		goto out;
	archive_entry_clear(e);
	archive_entry_set_pathname(e, "bin/busybox");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0755);
	archive_entry_set_size(e, (la_int64_t)bblen);
	archive_write_header(a, e);
	archive_write_data(a, bb, bblen);
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(applets); i++) {
		char p[64];
		snprintf(p, sizeof(p), "bin/%s", applets[i]);
		archive_entry_clear(e);
		archive_entry_set_pathname(e, p);
		archive_entry_set_filetype(e, AE_IFLNK);
		archive_entry_set_perm(e, 0777);
		archive_entry_set_symlink(e, "busybox");
		archive_write_header(a, e);
	}
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(files); i++) {
		archive_entry_clear(e);
		archive_entry_set_pathname(e, files[i].path);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_size(e, (la_int64_t)strlen(files[i].body));
		archive_write_header(a, e);
		archive_write_data(a, files[i].body, strlen(files[i].body));
	}
	if (archive_write_close(a) != ARCHIVE_OK)
		r = rung_err_set(err, EIO, "%s: %s", out, archive_error_string(a));
out:
	archive_entry_free(e);
	archive_write_free(a);
	return r;
}

static int cmd_layout(int argc, char **argv, struct rung_err *err)
{
	const char *tars[MAXV + 1] = {0}, *env[MAXV + 1] = {0}, *cmd[MAXV + 1] = {0},
				*ep[MAXV + 1] = {0};
	size_t nt = 0, ne = 0, nc = 0, np = 0;
	struct rfs_layout_opts o = {.compress = RFS_COMPRESS_GZIP};
	const char *out = NULL;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			return rung_err_set(err, EINVAL, "option %s needs a value", a);
		i++;
		if (!strcmp(a, "--out"))
			out = v;
		else if (!strcmp(a, "--tag"))
			o.tag = v;
		else if (!strcmp(a, "--workdir"))
			o.working_dir = v;
		else if (!strcmp(a, "--user"))
			o.user = v;
		else if (!strcmp(a, "--tar") && nt < MAXV)
			tars[nt++] = v;
		else if (!strcmp(a, "--env") && ne < MAXV)
			env[ne++] = v;
		else if (!strcmp(a, "--cmd") && nc < MAXV)
			cmd[nc++] = v;
		else if (!strcmp(a, "--entrypoint") && np < MAXV)
			ep[np++] = v;
		else if (!strcmp(a, "--compress"))
			o.compress = !strcmp(v, "none")	  ? RFS_COMPRESS_NONE
				     : !strcmp(v, "zstd") ? RFS_COMPRESS_ZSTD
							  : RFS_COMPRESS_GZIP;
		else
			return rung_err_set(err, EINVAL, "unknown option %s", a);
	}
	if (!out || !nt)
		return rung_err_set(err, EINVAL, "layout needs --out and --tar");
	o.layer_tars = tars;
	o.env = ne ? env : NULL;
	o.cmd = nc ? cmd : NULL;
	o.entrypoint = np ? ep : NULL;
	return rfs_layout_write(out, &o, err);
}

static void print_info(const struct rfs_image_info *i)
{
	printf("%s %s %llu bytes, %zu layers\n", i->ref[0] ? i->ref : "-", i->digest,
	       (unsigned long long)i->size, i->n_layers);
}

/* rfs-tool CMD --state DIR [ARG...]: the image store's commands. Returns 0, < 0 with err
 * set, or 2 (usage). */
static int store_cmd(const char *cmd, int argc, char **argv, const struct rfs_unpack_limits *lim,
		     struct rung_err *err)
{
	struct rfs_store *s;
	int r;
	if ((r = rfs_store_open(argv[3], &s, err)) < 0)
		return r;
	rfs_store_set_limits(s, lim);
	const char *arg = argc > 4 ? argv[4] : NULL;
	struct rfs_image_info info;
	if (!strcmp(cmd, "import") && arg) {
		uint64_t last = 0;
		r = rfs_image_import(s, arg, argc > 5 ? argv[5] : NULL, progress, &last, &info,
				     err);
		if (r == 0)
			print_info(&info), rfs_image_info_release(&info);
	} else if (!strcmp(cmd, "pull") && arg) {
		struct rfs_pull_opts o = {
		    .username = getenv("RUNG_REGISTRY_USER"),
		    .password = getenv("RUNG_REGISTRY_PASSWORD"),
		    .token_hosts = getenv("RUNG_REGISTRY_TOKEN_HOSTS"),
		};
		for (int i = 5; i < argc; i++)
			if (!strcmp(argv[i], "--insecure"))
				o.insecure = true;
			else if (!strcmp(argv[i], "--tag") && i + 1 < argc)
				o.tag = argv[++i];
		uint64_t last = 0;
		r = rfs_image_pull(s, arg, &o, progress, &last, &info, err);
		if (r == 0)
			print_info(&info), rfs_image_info_release(&info);
	} else if (!strcmp(cmd, "list")) {
		struct rfs_image_entry *v;
		size_t n;
		if ((r = rfs_image_list(s, &v, &n, err)) == 0) {
			for (size_t i = 0; i < n; i++)
				printf("%-40s %s %llu\n", v[i].ref, v[i].digest,
				       (unsigned long long)v[i].size);
			free(v);
		}
	} else if (!strcmp(cmd, "gc")) {
		uint64_t freed;
		if ((r = rfs_store_gc(s, &freed, err)) == 0)
			printf("freed %llu bytes\n", (unsigned long long)freed);
	} else if (!strcmp(cmd, "inspect") && arg) {
		char *js;
		if ((r = rfs_image_inspect(s, arg, &js, err)) == 0)
			printf("%s\n", js), free(js);
	} else if (!strcmp(cmd, "layers") && arg) {
		char **dirs;
		if ((r = rfs_image_resolve(s, arg, &info, err)) == 0) {
			r = rfs_image_layers(s, &info, &dirs, err);
			for (char **d = r == 0 ? dirs : NULL; d && *d; d++)
				printf("%s\n", *d), free(*d);
			if (r == 0)
				free(dirs);
			rfs_image_info_release(&info);
		}
	} else if (!strcmp(cmd, "tag") && arg && argc > 5) {
		r = rfs_image_tag(s, arg, argv[5], err);
	} else if (!strcmp(cmd, "rm") && arg) {
		r = rfs_image_remove(s, arg, NULL, NULL, err);
	} else {
		r = usage();
	}
	rfs_store_free(s);
	return r;
}

int main(int argc, char **argv)
{
	struct rung_err err = {0};
	if (argc < 2)
		return usage();
	/* the environment, read here once (docs/configuration.md) */
	struct rfs_unpack_limits lim;
	rfs_unpack_limits_default(&lim);
	for (const char *const *n = rfs_limits_env_names; *n; n++)
		if (rfs_unpack_limits_set(&lim, *n, getenv(*n), &err) < 0) {
			fprintf(stderr, "rfs-tool: %s\n", err.msg);
			return 2;
		}
	const char *cmd = argv[1];
	int r;
	if (!strcmp(cmd, "layout")) {
		r = cmd_layout(argc - 2, argv + 2, &err);
	} else if (!strcmp(cmd, "busybox-tar") && argc == 3) {
		r = busybox_tar(argv[2], &err);
	} else if (!strcmp(cmd, "unpack") && argc == 4) {
		int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
		mkdir(argv[3], 0755);
		int dfd = open(argv[3], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct rfs_unpack_stats st;
		r = fd < 0 || dfd < 0 ? rung_err_sys(&err, errno, "open")
				      : rfs_layer_unpack_limited(fd, dfd, &lim, &st, &err);
		if (r == 0)
			printf("%llu entries, %llu bytes\n", (unsigned long long)st.entries,
			       (unsigned long long)st.bytes);
	} else if (argc >= 4 && !strcmp(argv[2], "--state")) {
		if ((r = store_cmd(cmd, argc, argv, &lim, &err)) == 2)
			return 2;
	} else {
		return usage();
	}
	if (r < 0) {
		fprintf(stderr, "rfs-tool %s: %s\n", cmd, err.msg);
		return 1;
	}
	return 0;
}
