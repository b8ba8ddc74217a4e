/* common/dl.c: a library's functions loaded on first use (common/dl.h). */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dl.h"

#ifdef RUNG_LIBC_MUSL
/* build/rung against musl (cli/module.mk): a static musl program has no dynamic loader */
static char refused[160] = "this rung is linked statically against musl, which cannot load "
			   "a shared library; rung-dyn (beside it) can";
#else
static char refused[160]; /* why a dlopen is refused, "" when it is not */
#endif

void *rung_dl_load(const char *const *sonames, const struct rung_dl_sym *syms, size_t n,
		   char *why, size_t whylen)
{
	if (refused[0]) {
		snprintf(why, whylen, "%s", refused);
		return NULL;
	}
	void *h = NULL;
	const char *got = NULL;
	for (const char *const *s = sonames; *s && !h; s++)
		if ((h = dlopen(*s, RTLD_NOW | RTLD_LOCAL)))
			got = *s;
	if (!h) {
		const char *e = dlerror();
		snprintf(why, whylen, "%s", e ? e : "no such library");
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (!(*syms[i].slot = dlsym(h, syms[i].name))) {
			snprintf(why, whylen, "%s has no %s", got, syms[i].name);
			dlclose(h);
			return NULL;
		}
	return h;
}

/* The hex NT_GNU_BUILD_ID of the ELF file at fd, from the notes within its first 4 KiB. */
static bool build_id_of(int fd, char *hex, size_t hexlen)
{
	unsigned char b[4096];
	ssize_t got = pread(fd, b, sizeof(b), 0);
	Elf64_Ehdr eh;
	if (got < (ssize_t)sizeof(eh))
		return false;
	memcpy(&eh, b, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr))
		return false;
	for (size_t i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		size_t at = eh.e_phoff + i * sizeof(ph);
		if (at > (size_t)got || (size_t)got - at < sizeof(ph))
			return false;
		memcpy(&ph, b + at, sizeof(ph));
		if (ph.p_type != PT_NOTE || ph.p_offset > (size_t)got ||
		    ph.p_filesz > (size_t)got - ph.p_offset)
			continue;
		for (size_t o = ph.p_offset, end = o + ph.p_filesz;
		     o < end && end - o >= sizeof(Elf64_Nhdr);) {
			Elf64_Nhdr nh;
			memcpy(&nh, b + o, sizeof(nh));
			size_t name = o + sizeof(nh), desc = name + ((nh.n_namesz + 3u) & ~3u);
			if (desc > end || nh.n_descsz > end - desc)
				break;
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    !memcmp(b + name, "GNU", 4) && nh.n_descsz * 2 < hexlen) {
				for (size_t k = 0; k < nh.n_descsz; k++)
					snprintf(hex + 2 * k, 3, "%02x", b[desc + k]);
				return true;
			}
			o = desc + ((nh.n_descsz + 3u) & ~3u);
		}
	}
	return false;
}

bool rung_dl_libc_check(void)
{
	static bool ok; /* checked already, and may */
	if (ok || refused[0])
		return ok;
	const struct rung_libc_id *id = &rung_libc_id;
	if (!id)
		return ok = true; /* a dynamic program: its libc is the installed one */
	struct stat st;
	if (access(id->ld_path, F_OK) != 0) {
		snprintf(refused, sizeof(refused),
			 "no %s, which a static rung needs to load a shared library: rebuild rung "
			 "(make)",
			 id->ld_path);
		return false;
	}
	if (stat(id->path, &st) == 0 && (unsigned long long)st.st_ino == id->ino &&
	    (unsigned long long)st.st_size == id->size && (long long)st.st_mtime == id->mtime)
		return ok = true;
	char hex[2 * 64 + 1] = "";
	int fd = open(id->path, O_RDONLY | O_CLOEXEC);
	bool same = fd >= 0 && build_id_of(fd, hex, sizeof(hex)) && !strcmp(hex, id->build_id);
	if (fd >= 0)
		close(fd);
	if (same)
		return ok = true;
	snprintf(refused, sizeof(refused),
		 "libc.so.6 changed since rung was linked statically (build id %.12s, not %.12s): "
		 "rebuild rung (make)",
		 hex[0] ? hex : "unreadable", id->build_id);
	return false;
}
