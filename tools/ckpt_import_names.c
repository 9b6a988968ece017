/* ckpt_import_names.c - which files of an import directory belong to the save being imported:
 * the HF writer's file numbering and its index (ckpt_import.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ckpt_import.h"
#include "core/ckpt/internal.h"
#include "core/ckpt/io.h"
#include "core/json.h"
#include "core/mutant.h"

/* at least 5 decimal digits at *s, at most 12; advances *s */
static int number(const char **s, int64_t *v) {
  const char *p = *s;
  int64_t x = 0;
  int k = 0;
  while (*p >= '0' && *p <= '9' && k < 13) x = x * 10 + (*p++ - '0'), k++;
  if (k < 5 || k > 12) return 0;
  *v = x;
  *s = p;
  return 1;
}

static int lit(const char **s, const char *w) {
  size_t l = strlen(w);
  if (strncmp(*s, w, l)) return 0;
  *s += l;
  return 1;
}

void rs_imp_parse_name(const char *name, rs_imp_name *o) {
  memset(o, 0, sizeof *o);
  const char *s = name;
  int64_t sh = 0, idx, tot;
  int fam = RS_IMP_WHOLE;
  if (lit(&s, "shard-")) {
    if (!number(&s, &sh) || !lit(&s, "-")) return;
    fam = RS_IMP_SHARD;
  }
  if (!lit(&s, "model-") || !number(&s, &idx) || !lit(&s, "-of-") || !number(&s, &tot) || strcmp(s, ".safetensors"))
    return;
  o->family = fam;
  o->shard = sh;
  o->idx = idx;
  o->total = tot;
}

rs_status rs_imp_names_check(const char *dir, char *const *names, int n) {
  rs_imp_name first, p;
  if (n < 1) return RS_OK;
  rs_imp_parse_name(names[0], &first);
  if (n == 1 && first.family == RS_IMP_OTHER) return RS_OK; /* a lone file of any name: one save */
  for (int i = 0; i < n; ++i) {
    rs_imp_parse_name(names[i], &p);
    if (p.family == RS_IMP_OTHER)
      return rs_fail(RS_ERR_INVALID,
                     "%s/%s: not a name PyTorch's HF writer gives (model-NNNNN-of-MMMMM.safetensors or "
                     "shard-SSSSS-model-NNNNN-of-MMMMM.safetensors), and no %s says which files belong to the save",
                     dir, names[i], RS_IMP_INDEX);
    if (p.family != first.family)
      return rs_fail(RS_ERR_INVALID,
                     "%s: %s and %s come from two saves (one with save_distributed, one without); remove the "
                     "stale one",
                     dir, names[0], names[i]);
    if (p.total != first.total)
      return rs_fail(RS_ERR_INVALID,
                     "%s: %s (of %05lld) and %s (of %05lld) come from two saves numbered differently; remove the "
                     "stale files (no %s says which save is current)",
                     dir, names[0], (long long)first.total, names[i], (long long)p.total, RS_IMP_INDEX);
    if (p.idx < 1 || p.idx > p.total)
      return rs_fail(RS_ERR_INVALID, "%s/%s: file number %lld outside 1..%lld", dir, names[i], (long long)p.idx,
                     (long long)p.total);
  }
  if (first.family == RS_IMP_WHOLE)
    for (int64_t k = 1; k <= first.total; ++k) {
      int found = 0;
      for (int i = 0; i < n && !found; ++i) {
        rs_imp_parse_name(names[i], &p);
        found = p.idx == k;
      }
      if (!found)
        return rs_fail(RS_ERR_INVALID, "%s: model-%05lld-of-%05lld.safetensors is missing (the save wrote %lld files)",
                       dir, (long long)k, (long long)first.total, (long long)first.total);
    }
  return RS_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void rs_imp_index_free(rs_imp_index *ix) {
  for (int i = 0; i < ix->n; ++i) free(ix->key[i]), free(ix->file[i]);
  for (int i = 0; i < ix->nfiles; ++i) free(ix->files[i]);
  free(ix->key);
  free(ix->file);
  free(ix->files);
  memset(ix, 0, sizeof *ix);
}

static rs_status index_parse(const char *path, const char *text, rs_imp_index *ix) {
  cJSON *root = NULL;
  rs_status st = rs_json_parse(text, &root);
  if (st) return rs_fail(RS_ERR_INVALID, "%s: %s", path, rs_last_error());
  const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map"), *md, *e;
  if (!cJSON_IsObject(root) || !cJSON_IsObject(wm)) st = rs_fail(RS_ERR_INVALID, "%s: weight_map: missing (an object of key -> file)", path);
  int cap = 0, capf = 0;
  if (!st) cJSON_ArrayForEach(e, wm) {
      if (!cJSON_IsString(e) || !rs__file_name_ok(e->valuestring)) {
        st = rs_fail(RS_ERR_INVALID, "%s: weight_map.%s: not a plain file name", path, e->string);
        break;
      }
      for (int i = 0; i < ix->n && !st; ++i)
        if (!strcmp(ix->key[i], e->string)) st = rs_fail(RS_ERR_INVALID, "%s: weight_map.%s: twice", path, e->string);
      if (st) break;
      if (!rs__grow((void **)&ix->key, ix->n, &cap, sizeof *ix->key) ||
          !rs__grow((void **)&ix->file, ix->n, &capf, sizeof *ix->file)) {
        st = rs_fail(RS_ERR_NOMEM, "out of memory");
        break;
      }
      ix->key[ix->n] = rs__strdup(e->string);
      ix->file[ix->n] = rs__strdup(e->valuestring);
      ix->n++;
      if (!ix->key[ix->n - 1] || !ix->file[ix->n - 1]) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    }
  if (!st && (md = cJSON_GetObjectItemCaseSensitive(root, "metadata")) &&
      (e = cJSON_GetObjectItemCaseSensitive(md, "total_size"))) {
    char fld[64];
    snprintf(fld, sizeof fld, "metadata.total_size");
    if ((st = rs_json_i64(e, fld, 0, INT64_MAX, &ix->total))) st = rs_fail(RS_ERR_INVALID, "%s: %s", path, rs_last_error());
    else ix->has_total = 1;
  }
  /* the distinct files, sorted */
  int capd = 0;
  for (int i = 0; !st && i < ix->n; ++i) {
    int seen = 0;
    for (int j = 0; j < ix->nfiles && !seen; ++j) seen = !strcmp(ix->files[j], ix->file[i]);
    if (seen) continue;
    if (!rs__grow((void **)&ix->files, ix->nfiles, &capd, sizeof *ix->files) ||
        !(ix->files[ix->nfiles] = rs__strdup(ix->file[i])))
      st = rs_fail(RS_ERR_NOMEM, "out of memory");
    else
      ix->nfiles++;
  }
  if (!st) qsort(ix->files, (size_t)ix->nfiles, sizeof *ix->files, cmp_str);
  cJSON_Delete(root);
  return st;
}

rs_status rs_imp_index_read(const char *dir, int *present, rs_imp_index *ix) {
  memset(ix, 0, sizeof *ix);
  *present = 0;
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", dir, RS_IMP_INDEX);
  struct stat sb;
  if (lstat(path, &sb) != 0) return errno == ENOENT ? RS_OK : rs_fail(RS_ERR_IO, "%s: %s", path, strerror(errno));
  int fd;
  rs_status st = rs__ckpt_open_read(path, 0, &fd, &sb);
  if (st) return st;
  *present = 1;
  if (sb.st_size > RS_CKPT_MAX_HEADER) {
    close(fd);
    return rs_fail(RS_ERR_INVALID, "%s: %lld bytes (over 100 MB)", path, (long long)sb.st_size);
  }
  char *text = malloc((size_t)sb.st_size + 1);
  if (!text) {
    close(fd);
    return rs_fail(RS_ERR_NOMEM, "out of memory");
  }
  size_t got = 0;
  while (got < (size_t)sb.st_size) {
    ssize_t r = read(fd, text + got, (size_t)sb.st_size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (got != (size_t)sb.st_size) {
    free(text);
    return rs_fail(RS_ERR_IO, "%s: short read", path);
  }
  text[got] = 0;
  st = rs__json_no_nul(text, got, path);
  if (!st) st = index_parse(path, text, ix);
  free(text);
  if (st) rs_imp_index_free(ix);
  return st;
}

const char *rs_imp_index_file_of(const rs_imp_index *ix, const char *key) {
  for (int i = 0; i < ix->n; ++i)
    if (!strcmp(ix->key[i], key)) return ix->file[i];
  return NULL;
}

int rs_imp_index_names(const rs_imp_index *ix, const char *file) {
  /* RS_MUTANT 971: every file in the directory counts as named by the index (stale files imported) */
  if (RS_MUTANT(971)) return 1;
  return bsearch(&file, ix->files, (size_t)ix->nfiles, sizeof *ix->files, cmp_str) != NULL;
}
