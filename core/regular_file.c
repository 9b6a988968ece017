/* regular_file.c - the shared read rule of regular_file.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include "core/regular_file.h"
#include "core/mutant.h"

const char *rs_file_kind(mode_t m) {
  return S_ISFIFO(m) ? "a FIFO" : S_ISDIR(m) ? "a directory" : S_ISCHR(m) ? "a character device"
       : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : S_ISLNK(m) ? "a symbolic link" : "not a regular file";
}

rs_open_refusal rs_open_regular(const char *path, int extra_flags, int *fd, struct stat *sb) {
  *fd = -1;
  memset(sb, 0, sizeof *sb);
  /* RS_MUTANT 604: the shared read rule follows symbolic links (no O_NOFOLLOW) */
  int f = open(path, O_RDONLY | (RS_MUTANT(604) ? 0 : O_NOFOLLOW) | O_NONBLOCK | O_CLOEXEC | extra_flags);
  if (f < 0) {
    if (errno == ELOOP) return RS_OPEN_LINK;
    if (errno == ENXIO) return RS_OPEN_NOT_REGULAR; /* a socket, or a FIFO device without a reader */
    return RS_OPEN_ERRNO;
  }
  if (fstat(f, sb) != 0) {
    int e = errno;
    close(f);
    errno = e;
    return RS_OPEN_ERRNO;
  }
  /* RS_MUTANT 603: the shared read rule lets a non-regular file (a FIFO) through */
  if (!S_ISREG(sb->st_mode) && !(RS_MUTANT(603) && S_ISFIFO(sb->st_mode))) {
    close(f);
    return RS_OPEN_NOT_REGULAR;
  }
  int fl = fcntl(f, F_GETFL);
  if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(f);
    errno = e;
    return RS_OPEN_ERRNO;
  }
  *fd = f;
  return RS_OPEN_OK;
}
