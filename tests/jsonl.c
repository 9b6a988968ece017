/* jsonl.c - see jsonl.h; linked into the tests that read recorded corpora (tests/extra.cmake). */
#include "jsonl.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int rs_test_list_dir(const char *dir, const char *suffix, char ***out) {
  DIR *d = opendir(dir);
  *out = NULL;
  if (!d) return 0;
  int n = 0, cap = 0;
  struct dirent *e;
  size_t sl = strlen(suffix);
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l <= sl || strcmp(e->d_name + l - sl, suffix)) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      *out = realloc(*out, (size_t)cap * sizeof **out);
    }
    (*out)[n++] = strdup(e->d_name);
  }
  closedir(d);
  if (n) qsort(*out, (size_t)n, sizeof **out, cmp_str);
  return n;
}

int rs_test_jsonl_gz(const char *path, const char *name, rs_test_line_fn fn, void *ctx) {
  gzFile gz = gzopen(path, "rb");
  if (!gz) return -1;
  size_t cap = 1 << 16;
  char *line = malloc(cap);
  for (int lineno = 1; line; lineno++) {
    size_t len = 0;
    int eof = 0;
    line[0] = 0;
    for (;;) { /* a whole line, however long */
      if (!gzgets(gz, line + len, (int)(cap - len))) {
        eof = 1;
        break;
      }
      len += strlen(line + len);
      if (len && line[len - 1] == '\n') break;
      if (len + 1 >= cap) {
        char *bigger = realloc(line, cap * 2);
        if (!bigger) break;
        line = bigger;
        cap *= 2;
      }
    }
    if (len == 0 && eof) break;
    char where[300];
    snprintf(where, sizeof where, "%s:%d", name, lineno);
    fn(ctx, line, where);
    if (eof) break;
  }
  free(line);
  gzclose(gz);
  return 0;
}
