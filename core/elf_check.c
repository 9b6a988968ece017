/* elf_check.c - rs_elf_check_file: a plug-in must be a complete ELF shared object before dlopen maps
 * it (elf_check.h). Only headers are read; every offset + size is checked for overflow before it
 * is compared with the file size. */
#define _GNU_SOURCE
#include "core/elf_check.h"
#include "core/regular_file.h"
#include <dlfcn.h>
#include <elf.h>
#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/mutant.h"

#if UINTPTR_MAX > 0xffffffffu
typedef Elf64_Ehdr ehdr_t;
typedef Elf64_Phdr phdr_t;
typedef Elf64_Shdr shdr_t;
#define NATIVE_CLASS ELFCLASS64
#else
typedef Elf32_Ehdr ehdr_t;
typedef Elf32_Phdr phdr_t;
typedef Elf32_Shdr shdr_t;
#define NATIVE_CLASS ELFCLASS32
#endif

#if defined(__x86_64__)
#define NATIVE_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define NATIVE_MACHINE EM_AARCH64
#elif defined(__i386__)
#define NATIVE_MACHINE EM_386
#elif defined(__powerpc64__)
#define NATIVE_MACHINE EM_PPC64
#elif defined(__riscv)
#define NATIVE_MACHINE EM_RISCV
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define NATIVE_DATA ELFDATA2LSB
#else
#define NATIVE_DATA ELFDATA2MSB
#endif

static rs_status bad(const char *flag, const char *path, const char *why) {
  return rs_fail(RS_ERR_INVALID, "%s%s'%s': %s", flag && *flag ? flag : "", flag && *flag ? ": " : "", path, why);
}

/* 1 when [off, off + count * entsize) lies inside a file of `size` bytes (no overflow). */
static int inside(uint64_t off, uint64_t count, uint64_t entsize, uint64_t size) {
  uint64_t len, end;
  if (__builtin_mul_overflow(count, entsize, &len) || __builtin_add_overflow(off, len, &end)) return 0;
  return end <= size;
}

static int read_at(int fd, void *buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    got += (size_t)r;
  }
  return 1;
}

static rs_status check_fd(const char *flag, const char *path, int fd, uint64_t size) {
  ehdr_t eh;
  if (size < sizeof eh || !read_at(fd, &eh, sizeof eh, 0))
    return bad(flag, path, "not an ELF shared object (shorter than an ELF header)");
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return bad(flag, path, "not an ELF shared object (no ELF magic)");
  if (eh.e_ident[EI_CLASS] != NATIVE_CLASS || eh.e_ident[EI_DATA] != NATIVE_DATA)
    return bad(flag, path, "an ELF object of another word size or byte order than this machine's");
#ifdef NATIVE_MACHINE
  if (eh.e_machine != NATIVE_MACHINE) return bad(flag, path, "an ELF object for another architecture");
#endif
  if (eh.e_type != ET_DYN) return bad(flag, path, "an ELF object but not a shared library (e_type is not ET_DYN)");
  if (eh.e_ehsize != sizeof eh) return bad(flag, path, "a damaged ELF header (e_ehsize)");
  if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(phdr_t))
    return bad(flag, path, "a damaged ELF header (no program header table)");
  if (!inside(eh.e_phoff, eh.e_phnum, eh.e_phentsize, size))
    return bad(flag, path, "truncated: the program header table lies past the end of the file");
  if (RS_MUTANT(700)) return RS_OK; /* planted: only the ELF identification is checked */
  if (eh.e_shoff != 0) {
    if (eh.e_shentsize != sizeof(shdr_t)) return bad(flag, path, "a damaged ELF header (e_shentsize)");
    if (!inside(eh.e_shoff, eh.e_shnum, eh.e_shentsize, size))
      return bad(flag, path, "truncated: the section header table lies past the end of the file");
  }
  int nload = 0;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    phdr_t ph;
    if (!read_at(fd, &ph, sizeof ph, eh.e_phoff + (uint64_t)i * sizeof ph))
      return bad(flag, path, "truncated: cannot read the program header table");
    if (ph.p_type != PT_LOAD && ph.p_type != PT_DYNAMIC && ph.p_type != PT_INTERP) continue;
    nload += ph.p_type == PT_LOAD;
    if (ph.p_type == PT_LOAD && ph.p_filesz > ph.p_memsz)
      return bad(flag, path, "a damaged program header (a PT_LOAD segment larger in the file than in memory)");
    if (!inside(ph.p_offset, 1, ph.p_filesz, size))
      return bad(flag, path, "truncated: a loadable segment lies past the end of the file");
  }
  if (nload == 0) return bad(flag, path, "a damaged ELF object (no PT_LOAD segment)");
  return RS_OK;
}

/* Opens path (no link, no FIFO, regular file) and checks it; *fd_out keeps the checked file open. */
static rs_status open_checked(const char *flag, const char *path, int *fd_out) {
  struct stat st;
  int fd;
  *fd_out = -1;
  switch (rs_open_regular(path, 0, &fd, &st)) {
  case RS_OPEN_OK: break;
  case RS_OPEN_LINK: return bad(flag, path, "a symbolic link (give the library's own path)");
  case RS_OPEN_NOT_REGULAR: return bad(flag, path, "not a regular file");
  default: {
    int e = errno;
    return rs_fail(RS_ERR_IO, "%s%s'%s': %s", flag && *flag ? flag : "", flag && *flag ? ": " : "", path, strerror(e));
  }
  }
  rs_status r = check_fd(flag, path, fd, (uint64_t)st.st_size);
  if (r == RS_OK) *fd_out = fd;
  else close(fd);
  return r;
}

rs_status rs_elf_check_file(const char *flag, const char *path) {
  int fd;
  rs_status r = open_checked(flag, path, &fd);
  if (fd >= 0) close(fd);
  return r;
}

rs_status rs_elf_dlopen(const char *flag, const char *path, int mode, void **handle) {
  int fd;
  *handle = NULL;
  rs_status r = open_checked(flag, path, &fd);
  if (r) return r;
  char self[64];
  snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
  dlerror();
  /* without /proc the path itself is loaded (the check still ran on it) */
  *handle = dlopen(access("/proc/self/fd", X_OK) == 0 ? self : path, mode);
  close(fd);
  if (*handle) return RS_OK;
  const char *e = dlerror();
  /* the loader names the /proc path: say the user's path instead, and keep only the reason */
  const char *why = e ? strstr(e, ": ") : NULL;
  return rs_fail(RS_ERR_INVALID, "%s%s'%s': cannot load: %s", flag && *flag ? flag : "", flag && *flag ? ": " : "",
                 path, why ? why + 2 : (e ? e : "dlopen failed"));
}
