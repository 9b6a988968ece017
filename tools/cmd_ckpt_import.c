/* cmd_ckpt_import.c - `reshard ckpt import DIR --root OUT --step N [--shapes SHAPES.json | --hull]
 * [--ignore-unindexed]`: a checkpoint that PyTorch's safetensors DCP writer wrote
 * (torch.distributed.checkpoint.HuggingFaceStorageWriter) becomes a reshard checkpoint: every file a
 * "rank", every tensor in it a chunk at its saved offsets (DCP_SHARDING_INFO in the header's
 * __metadata__; zero without it). What the writer recorded decides, never the order of file names:
 * - its index (model.safetensors.index.json, written by a save without save_distributed) names
 *   the files of the save: a file it does not name is refused (a stale or stray file), unless
 *   --ignore-unindexed; every key sits in the file the index maps it to; total_size holds;
 * - without an index, the file names must be one save's numbering (ckpt_import_names.c);
 * - two chunks of one key at the same offsets are replicas only when dtype, shape and bytes are
 *   equal; anything else is refused naming both files and the chunk;
 * - the global shape: a whole tensor's own shape (a file that is not a shard-* file, at offsets
 *   0); for shard-* files (save_distributed=True) torch 2.15 records none, so it comes from
 *   --shapes, or, only when the user says so with --hull, from the outer bounds of the chunks.
 * The reference save then validates the tiling (a region no chunk covers is refused naming the key
 * and the region) and commits with digests, so `load` and `verify` hold it to the same rules. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ckpt_import.h"
#include "cli.h"
#include "cmd_ckpt_opt.h"
#include "core/ckpt/internal.h"
#include "core/ckpt/io.h"
#include "core/json.h"
#include "reshard/case.h"
#include "core/mutant.h"

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static rs_status read_range(FILE *f, int64_t off, int64_t len, uint8_t *out, const char *path) {
  if (fseek(f, (long)off, SEEK_SET) != 0 || (len && fread(out, 1, (size_t)len, f) != (size_t)len))
    return rs_fail(RS_ERR_IO, "%s: short read at %lld", path, (long long)off);
  return RS_OK;
}

/* one safetensors file into rank state dict sd */
static rs_status import_file(const char *path, rs_state_dict *sd) {
  int fd;
  struct stat sb;
  rs_status st = rs__ckpt_open_read(path, 0, &fd, &sb); /* the shared read rule: no links, no FIFOs */
  if (st) return st;
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return rs_fail(RS_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
  }
  uint8_t lb[8];
  uint64_t hl = 0;
  if (!st && sb.st_size < 8) st = rs_fail(RS_ERR_INVALID, "%s: too short for a safetensors file", path);
  if (!st) st = read_range(f, 0, 8, lb, path);
  for (int i = 7; !st && i >= 0; --i) hl = hl << 8 | lb[i];
  if (!st && (hl > RS_CKPT_MAX_HEADER || (int64_t)hl > (int64_t)sb.st_size - 8))
    st = rs_fail(RS_ERR_INVALID, "%s: safetensors header of %llu bytes (over 100 MB or past the end)", path,
                 (unsigned long long)hl);
  char *json = st ? NULL : malloc(hl + 1);
  if (!st && !json) st = rs_fail(RS_ERR_NOMEM, "out of memory");
  if (!st) st = read_range(f, 8, (int64_t)hl, (uint8_t *)json, path);
  rs__st_header h;
  memset(&h, 0, sizeof h);
  if (!st) {
    json[hl] = 0;
    st = rs__st_parse(json, hl, (int64_t)sb.st_size, &h);
    if (st) st = rs_fail(RS_ERR_INVALID, "%s: %s", path, rs_last_error());
  }
  free(json);
  cJSON *info = NULL;
  for (int i = 0; !st && i < h.nmeta; ++i)
    if (!strcmp(h.meta[i].key, "DCP_SHARDING_INFO")) {
      char *t = malloc((size_t)h.meta[i].len + 1);
      if (!t) st = rs_fail(RS_ERR_NOMEM, "out of memory");
      else {
        memcpy(t, h.meta[i].val, (size_t)h.meta[i].len);
        t[h.meta[i].len] = 0;
        st = rs_json_parse(t, &info);
        free(t);
        if (st) st = rs_fail(RS_ERR_INVALID, "%s: DCP_SHARDING_INFO: %s", path, rs_last_error());
      }
    }
  for (int i = 0; !st && i < h.n; ++i) {
    const rs__st_entry *e = &h.e[i];
    rs_sh_tensor t;
    memset(&t, 0, sizeof t);
    t.key = e->name;
    t.dtype = e->dtype;
    t.ndim = e->ndim;
    memcpy(t.local_shape, e->shape, sizeof t.local_shape);
    t.replica.n = 1;
    if (info) {
      const cJSON *ent = cJSON_GetObjectItemCaseSensitive(info, e->name), *so;
      char fld[2200];
      snprintf(fld, sizeof fld, "DCP_SHARDING_INFO.%s.saved_offsets", e->name);
      int n = 0;
      if (!cJSON_IsObject(ent) || !cJSON_IsArray(so = cJSON_GetObjectItemCaseSensitive(ent, "saved_offsets")))
        st = rs_fail(RS_ERR_INVALID, "%s: %s: missing", path, fld);
      else if (!(st = rs_json_i64_array(so, fld, RS_MAX_DIMS, 0, INT64_MAX / 2, t.global_offset, &n)) && n != e->ndim)
        st = rs_fail(RS_ERR_INVALID, "%s: %s: %d entries for a %d-d tensor", path, fld, n, e->ndim);
    }
    for (int d = 0; !st && d < t.ndim; ++d) t.global_shape[d] = t.global_offset[d] + t.local_shape[d];
    int64_t nb = e->end - e->begin;
    t.nbytes = nb;
    t.data = malloc(nb ? (size_t)nb : 1);
    if (!st && !t.data) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    if (!st) st = read_range(f, 8 + (int64_t)hl + e->begin, nb, t.data, path);
    if (!st) st = rs_sd_add_tensor(sd, &t);
    free(t.data);
  }
  cJSON_Delete(info);
  rs__st_free(&h);
  fclose(f);
  return st;
}

/* ---- chunks across files: replicas, global shapes ---- */
typedef struct chunk_ref {
  int file, i;
  rs_sh_tensor *t;
} chunk_ref;

static int cmp_chunk(const void *a, const void *b) {
  const chunk_ref *x = a, *y = b;
  int c = strcmp(x->t->key, y->t->key);
  if (c) return c;
  if (x->t->ndim != y->t->ndim) return x->t->ndim < y->t->ndim ? -1 : 1;
  for (int d = 0; d < x->t->ndim; ++d)
    if (x->t->global_offset[d] != y->t->global_offset[d]) return x->t->global_offset[d] < y->t->global_offset[d] ? -1 : 1;
  return x->file != y->file ? (x->file < y->file ? -1 : 1) : (x->i < y->i ? -1 : x->i > y->i);
}

static int same_offsets(const rs_sh_tensor *a, const rs_sh_tensor *b) {
  if (strcmp(a->key, b->key) || a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; ++d)
    if (a->global_offset[d] != b->global_offset[d]) return 0;
  return 1;
}

static void shape_text(int nd, const int64_t *s, char *buf, size_t cap) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (int d = 0; d < nd && k < cap; ++d) k += (size_t)snprintf(buf + k, cap - k, d ? ", %lld" : "%lld", (long long)s[d]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* b is a replica of a (same key and offsets) only when dtype, shape and bytes are equal */
static rs_status replica_check(const char *dir, char **names, const chunk_ref *a, const chunk_ref *b) {
  /* RS_MUTANT 972: any later chunk at the same offsets is taken as a replica (file order decides) */
  if (RS_MUTANT(972)) return RS_OK;
  const rs_sh_tensor *x = a->t, *y = b->t;
  char off[512], sx[512], sy[512], why[1200] = "";
  shape_text(x->ndim, x->global_offset, off, sizeof off);
  shape_text(x->ndim, x->local_shape, sx, sizeof sx);
  shape_text(y->ndim, y->local_shape, sy, sizeof sy);
  int same_shape = !memcmp(x->local_shape, y->local_shape, sizeof x->local_shape);
  if (x->dtype != y->dtype) snprintf(why, sizeof why, "dtype %s, not %s", rs_dtype_name(y->dtype), rs_dtype_name(x->dtype));
  else if (!same_shape) snprintf(why, sizeof why, "shape %s, not %s", sy, sx);
  else if (x->nbytes != y->nbytes) snprintf(why, sizeof why, "%lld bytes, not %lld", (long long)y->nbytes, (long long)x->nbytes);
  else
    for (int64_t k = 0; k < x->nbytes; ++k)
      if (x->data[k] != y->data[k]) {
        snprintf(why, sizeof why, "other bytes (the first at byte %lld of the chunk)", (long long)k);
        break;
      }
  if (!why[0]) return RS_OK;
  return rs_fail(RS_ERR_INVALID,
                 "%s: key '%s' chunk at offsets %s: %s holds shape %s %s, %s holds %s: two files hold that chunk "
                 "and they are not replicas (a stale or stray file?); remove the one that is not part of the save",
                 dir, x->key, off, names[a->file], sx, rs_dtype_name(x->dtype), names[b->file], why);
}

/* --shapes FILE: {"key": [dims], ...} */
static rs_status read_shapes(const char *path, cJSON **out) {
  char *text = rs_read_text(path);
  if (!text) return rs_fail(RS_ERR_INVALID, "--shapes %s: %s", path, rs_last_error());
  rs_status st = rs_json_parse(text, out);
  free(text);
  if (st) return rs_fail(RS_ERR_INVALID, "--shapes %s: %s", path, rs_last_error());
  if (!cJSON_IsObject(*out)) {
    cJSON_Delete(*out);
    *out = NULL;
    return rs_fail(RS_ERR_INVALID, "--shapes %s: expected an object of key -> global shape", path);
  }
  return RS_OK;
}

/* global shape of the key of chunks c[lo..hi) (sorted; replicas already marked) */
static rs_status key_shape(const char *dir, char **names, const rs_imp_name *fam, const chunk_ref *c, int lo, int hi,
                           const cJSON *shapes, const char *shapes_path, int hull, int64_t *g) {
  const rs_sh_tensor *t0 = c[lo].t;
  memset(g, 0, sizeof(int64_t) * RS_MAX_DIMS);
  for (int k = lo; k < hi; ++k)
    if (c[k].t->ndim != t0->ndim)
      return rs_fail(RS_ERR_INVALID, "%s: key '%s' is %d-d in %s and %d-d in %s", dir, t0->key, t0->ndim,
                     names[c[lo].file], c[k].t->ndim, names[c[k].file]);
  if (shapes) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(shapes, t0->key);
    char fld[1200];
    snprintf(fld, sizeof fld, "--shapes %s: '%s'", shapes_path, t0->key);
    if (!s) return rs_fail(RS_ERR_INVALID, "%s: key '%s' (in %s) is not in --shapes %s", dir, t0->key, names[c[lo].file], shapes_path);
    int n = 0;
    if (rs_json_i64_array(s, fld, RS_MAX_DIMS, 0, INT64_MAX / 2, g, &n)) return rs_fail(RS_ERR_INVALID, "%s", rs_last_error());
    if (n != t0->ndim) return rs_fail(RS_ERR_INVALID, "%s: %d dims, the chunks in %s have %d", fld, n, names[c[lo].file], t0->ndim);
    return RS_OK;
  }
  /* recorded: a whole tensor (a file that is not one rank's shard, at offsets 0) */
  int recorded = 1;
  for (int k = lo; k < hi && recorded; ++k) {
    if (fam[c[k].file].family == RS_IMP_SHARD) recorded = 0;
    for (int d = 0; d < c[k].t->ndim; ++d)
      if (c[k].t->global_offset[d]) recorded = 0;
  }
  if (recorded || hull) {
    for (int k = lo; k < hi; ++k)
      for (int d = 0; d < t0->ndim; ++d)
        if (c[k].t->global_offset[d] + c[k].t->local_shape[d] > g[d]) g[d] = c[k].t->global_offset[d] + c[k].t->local_shape[d];
    return RS_OK;
  }
  return rs_fail(RS_ERR_INVALID,
                 "%s: key '%s' (%s): the writer recorded no global shape (PyTorch's distributed HF writer saves only "
                 "each chunk's offsets), so a missing shard would import as a smaller tensor; pass --shapes "
                 "SHAPES.json ({\"key\": [global shape], ...}) or --hull (take the outer bounds of the chunks present, "
                 "as PyTorch's HuggingFaceStorageReader does)",
                 dir, t0->key, names[c[lo].file]);
}

/* the index's keys and files against what the files hold */
static rs_status index_keys(const char *dir, char **names, const rs_ckpt_world *w, const rs_imp_index *ix) {
  int64_t total = 0;
  for (int a = 0; a < w->n; ++a)
    for (int i = 0; i < w->sd[a].nt; ++i) {
      const rs_sh_tensor *t = &w->sd[a].t[i];
      const char *want = rs_imp_index_file_of(ix, t->key);
      total += t->nbytes;
      if (!want)
        return rs_fail(RS_ERR_INVALID, "%s/%s: key '%s' is not in %s's weight_map", dir, names[a], t->key, RS_IMP_INDEX);
      if (strcmp(want, names[a]))
        return rs_fail(RS_ERR_INVALID, "%s/%s: key '%s', which %s maps to %s", dir, names[a], t->key, RS_IMP_INDEX, want);
    }
  for (int k = 0; k < ix->n; ++k) {
    int found = 0;
    for (int a = 0; a < w->n && !found; ++a)
      for (int i = 0; i < w->sd[a].nt && !found; ++i) found = !strcmp(w->sd[a].t[i].key, ix->key[k]);
    if (!found)
      return rs_fail(RS_ERR_INVALID, "%s/%s: weight_map.%s names %s, which does not hold it", dir, RS_IMP_INDEX, ix->key[k],
                     ix->file[k]);
  }
  if (ix->has_total && total != ix->total)
    return rs_fail(RS_ERR_INVALID, "%s/%s: metadata.total_size is %lld, the files it names hold %lld bytes of tensors", dir,
                   RS_IMP_INDEX, (long long)ix->total, (long long)total);
  return RS_OK;
}

static rs_status chunks_resolve(const char *dir, char **names, rs_ckpt_world *w, const cJSON *shapes,
                                const char *shapes_path, int hull, int64_t *nchunks) {
  int n = 0, cap = 0;
  chunk_ref *c = NULL;
  rs_status st = RS_OK;
  rs_imp_name *fam = calloc((size_t)w->n + 1, sizeof *fam);
  if (!fam) return rs_fail(RS_ERR_NOMEM, "out of memory");
  for (int a = 0; a < w->n; ++a) rs_imp_parse_name(names[a], &fam[a]);
  for (int a = 0; !st && a < w->n; ++a)
    for (int i = 0; i < w->sd[a].nt; ++i) {
      if (!rs__grow((void **)&c, n, &cap, sizeof *c)) {
        st = rs_fail(RS_ERR_NOMEM, "out of memory");
        break;
      }
      c[n++] = (chunk_ref){a, i, &w->sd[a].t[i]};
    }
  *nchunks = n;
  if (!st && n) qsort(c, (size_t)n, sizeof *c, cmp_chunk);
  /* replicas: the first of a run at the same offsets is the main one, the others must equal it */
  for (int k = 1; !st && k < n; ++k) {
    int j = k - 1;
    while (j > 0 && same_offsets(c[j - 1].t, c[k].t)) --j;
    if (!same_offsets(c[j].t, c[k].t)) continue;
    if (!(st = replica_check(dir, names, &c[j], &c[k]))) c[k].t->replica.v[0] = 1;
  }
  /* global shape per key */
  for (int lo = 0, hi; !st && lo < n; lo = hi) {
    for (hi = lo + 1; hi < n && !strcmp(c[hi].t->key, c[lo].t->key); ++hi) {}
    int64_t g[RS_MAX_DIMS];
    st = key_shape(dir, names, fam, c, lo, hi, shapes, shapes_path, hull, g);
    for (int k = lo; !st && k < hi; ++k) memcpy(c[k].t->global_shape, g, sizeof g);
  }
  /* every key --shapes lists must have chunks */
  const cJSON *s;
  if (!st && shapes) cJSON_ArrayForEach(s, shapes) {
      int found = 0;
      for (int k = 0; k < n && !found; ++k) found = !strcmp(c[k].t->key, s->string);
      if (!found) {
        st = rs_fail(RS_ERR_INVALID, "%s: key '%s' (in --shapes %s) has no chunk in any file", dir, s->string, shapes_path);
        break;
      }
    }
  free(c);
  free(fam);
  return st;
}

/* names[0..n) without the files the index does not name (refused unless ignore) */
static rs_status select_files(const char *C, const char *dir, char **names, int *n, const rs_imp_index *ix, int ignore) {
  for (int k = 0; k < ix->nfiles; ++k)
    if (!bsearch(&ix->files[k], names, (size_t)*n, sizeof *names, cmp_name))
      return rs_fail(RS_ERR_INVALID, "%s/%s names %s, which is not in %s", dir, RS_IMP_INDEX, ix->files[k], dir);
  int m = 0;
  for (int i = 0; i < *n; ++i) {
    if (rs_imp_index_names(ix, names[i])) {
      names[m++] = names[i];
      continue;
    }
    if (!ignore) {
      rs_status st = rs_fail(RS_ERR_INVALID,
                             "%s/%s: not named by %s (a file of another save?): remove it, or pass --ignore-unindexed "
                             "to import only the files the index names",
                             dir, names[i], RS_IMP_INDEX);
      for (int j = i; j < *n; ++j) names[m + j - i] = names[j];
      *n = m + *n - i;
      return st;
    }
    fprintf(stderr, "reshard %s: skipped %s/%s (not named by %s; --ignore-unindexed)\n", C, dir, names[i], RS_IMP_INDEX);
    free(names[i]);
  }
  *n = m;
  return RS_OK;
}

int cmd_ckpt_import(int argc, char **argv) {
  const char *C = "ckpt import", *dir = NULL, *root = NULL, *stepv = NULL, *shapes_path = NULL, *v;
  int r, hull = 0, ignore = 0;
  for (int i = 1; i < argc; ++i) {
    CLI_OPT(C, "--root", root);
    CLI_OPT(C, "--step", stepv);
    CLI_OPT(C, "--shapes", shapes_path);
    if (cli_flag(argv, i, "--hull")) {
      hull = 1;
      continue;
    }
    if (cli_flag(argv, i, "--ignore-unindexed")) {
      ignore = 1;
      continue;
    }
    if (argv[i][0] == '-') return cli_usage_error(C, "unknown option '%s'", argv[i]);
    if (dir) return cli_usage_error(C, "one DIR only");
    dir = argv[i];
  }
  long long step;
  if (!dir || !root || !stepv) return cli_usage_error(C, "needs DIR --root OUT --step N");
  if (cli_int(stepv, 0, INT64_MAX, &step)) return cli_usage_error(C, "--step: expected an integer >= 0");
  if (hull && shapes_path) return cli_usage_error(C, "--hull and --shapes exclude each other");
  cJSON *shapes = NULL;
  rs_status st = shapes_path ? read_shapes(shapes_path, &shapes) : RS_OK;
  if (st) return cli_usage_error(C, "%s", rs_last_error());
  DIR *d = opendir(dir);
  if (!d) {
    cJSON_Delete(shapes);
    return cli_usage_error(C, "%s: cannot open the directory", dir);
  }
  char **names = NULL;
  int n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l > 12 && !strcmp(e->d_name + l - 12, ".safetensors") && rs__grow((void **)&names, n, &cap, sizeof *names))
      names[n++] = rs__strdup(e->d_name);
  }
  closedir(d);
  if (!n) {
    free(names);
    cJSON_Delete(shapes);
    char dmd[4200]; /* PyTorch DCP's default format (dcp.save(sd, path)): say what imports it */
    snprintf(dmd, sizeof dmd, "%s/.metadata", dir);
    if (access(dmd, F_OK) == 0)
      return cli_usage_error(C, "%s: no .safetensors files: a PyTorch DCP checkpoint in its default format (.metadata, "
                             "*.distcp); import it with: python -m reshard_dcp import-dcp %s --root %s --step %lld "
                             "(pip install tools/pytorch; needs torch)", dir, dir, root, step);
    return cli_usage_error(C, "%s: no .safetensors files", dir);
  }
  qsort(names, (size_t)n, sizeof *names, cmp_name);
  rs_imp_index ix;
  int has_index = 0;
  st = rs_imp_index_read(dir, &has_index, &ix);
  if (!st && ignore && !has_index)
    st = rs_fail(RS_ERR_INVALID, "--ignore-unindexed: %s has no %s to say which files belong to the save", dir, RS_IMP_INDEX);
  if (!st) st = has_index ? select_files(C, dir, names, &n, &ix, ignore) : rs_imp_names_check(dir, names, n);
  if (!st && !n) st = rs_fail(RS_ERR_INVALID, "%s: no .safetensors file left to import", dir);
  rs_ckpt_world w = {0, NULL};
  if (!st) st = rs_ckpt_world_init(&w, n);
  char path[4400];
  for (int i = 0; !st && i < n; ++i) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    st = import_file(path, &w.sd[i]);
  }
  if (!st && has_index) st = index_keys(dir, names, &w, &ix);
  int64_t chunks = 0;
  if (!st) st = chunks_resolve(dir, names, &w, shapes, shapes_path, hull, &chunks);
  int saving = 0;
  if (!st) {
    rs_ckpt_io_opts io = {0, 0, NULL, 0};
    saving = 1;
    st = rs_ref_ckpt_save(&w, root, step, &io, NULL);
  }
  if (st) {
    if (saving && st == RS_ERR_INVALID) fprintf(stderr, "reshard %s: %s: %s\n", C, dir, rs_last_error());
    else fprintf(stderr, "reshard %s: %s\n", C, rs_last_error());
    /* validation names "ranks": here each rank is one file */
    if (saving && st == RS_ERR_INVALID && strstr(rs_last_error(), "rank"))
      for (int i = 0; i < n && i < 64; ++i) fprintf(stderr, "  rank %d = %s/%s\n", i, dir, names[i]);
  } else {
    printf("imported %s (%d safetensors files%s, %lld chunks) as %s/step_%lld; latest = %lld\n", dir, n,
           has_index ? ", as " RS_IMP_INDEX " names them" : "", (long long)chunks, root, step, step);
  }
  for (int i = 0; i < n; ++i) free(names[i]);
  free(names);
  if (has_index) rs_imp_index_free(&ix);
  cJSON_Delete(shapes);
  rs_ckpt_world_free(&w);
  if (st) return st == RS_ERR_INVALID ? CLI_USAGE : ckpt_exit_code(st);
  return CLI_OK;
}
