/* textfile.c - reading a whole text file (case JSON, fixtures, regressions). */
#include <stdio.h>
#include <stdlib.h>
#include "reshard/case.h"

char *rs_read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    rs_fail(RS_ERR_IO, "%s: cannot open", path);
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
