/* textfile.c - reading a whole text file (case JSON, fixtures, regressions, state specs, models).
 * Like every reader: a symbolic link or anything but a regular file (a FIFO would block the read
 * for ever, a directory reads as garbage) is refused, with the path named once. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "reshard/case.h"
#include "core/regular_file.h"

char *rs_read_text(const char *path) {
  int fd;
  struct stat sb;
  switch (rs_open_regular(path, 0, &fd, &sb)) {
  case RS_OPEN_OK: break;
  case RS_OPEN_LINK: rs_fail(RS_ERR_INVALID, "%s: a symbolic link (give the file itself)", path); return NULL;
  case RS_OPEN_NOT_REGULAR: rs_fail(RS_ERR_INVALID, "%s: not a regular file", path); return NULL;
  default: rs_fail(RS_ERR_IO, "%s: cannot open (%s)", path, strerror(errno)); return NULL;
  }
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    rs_fail(RS_ERR_NOMEM, "%s: out of memory", path);
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap);
  while (b) {
    n += fread(b + n, 1, cap - n - 1, f);
    if (n + 1 < cap) break;
    char *nb = realloc(b, cap *= 2);
    if (!nb) free(b);
    b = nb;
  }
  int err = ferror(f);
  fclose(f);
  if (!b) {
    rs_fail(RS_ERR_NOMEM, "%s: out of memory", path);
    return NULL;
  }
  if (err) {
    free(b);
    rs_fail(RS_ERR_IO, "%s: read error", path);
    return NULL;
  }
  b[n] = 0;
  return b;
}
