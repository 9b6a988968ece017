/* cmd_ckpt_import.c - `reshard ckpt import DIR --root OUT --step N`: a checkpoint that PyTorch's
 * safetensors DCP writer wrote (torch.distributed.checkpoint.HuggingFaceStorageWriter; with
 * save_distributed=True one shard-*.safetensors file per rank whose __metadata__ holds
 * DCP_SHARDING_INFO = {fqn: {"saved_offsets": [...]}}; without it, whole tensors) becomes a
 * reshard checkpoint: every file a "rank", every tensor in it a chunk at its saved offsets, the
 * global shape the hull of the chunks (as PyTorch's HuggingFaceStorageReader infers it), a second
 * copy of one chunk a non-main replica. The reference save then validates the tiling and commits
 * with digests, so `reshard ckpt load` and `verify` hold it to the same rules as any other. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "cmd_ckpt_opt.h"
#include "core/ckpt/internal.h"
#include "core/ckpt/io.h"
#include "core/json.h"

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

int cmd_ckpt_import(int argc, char **argv) {
  const char *C = "ckpt import", *dir = NULL, *root = NULL, *stepv = NULL, *v;
  int r;
  for (int i = 1; i < argc; ++i) {
    CLI_OPT(C, "--root", root);
    CLI_OPT(C, "--step", stepv);
    if (argv[i][0] == '-') return cli_usage_error(C, "unknown option '%s'", argv[i]);
    if (dir) return cli_usage_error(C, "one DIR only");
    dir = argv[i];
  }
  long long step;
  if (!dir || !root || !stepv) return cli_usage_error(C, "needs DIR --root OUT --step N");
  if (cli_int(stepv, 0, INT64_MAX, &step)) return cli_usage_error(C, "--step: expected an integer >= 0");
  DIR *d = opendir(dir);
  if (!d) return cli_usage_error(C, "%s: cannot open the directory", dir);
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
    return cli_usage_error(C, "%s: no .safetensors files", dir);
  }
  qsort(names, (size_t)n, sizeof *names, cmp_name);
  rs_ckpt_world w;
  rs_status st = rs_ckpt_world_init(&w, n);
  char path[4400];
  for (int i = 0; !st && i < n; ++i) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    st = import_file(path, &w.sd[i]);
  }
  /* global shapes: the hull over every file; a repeated chunk is a replica */
  int64_t chunks = 0;
  for (int a = 0; !st && a < n; ++a)
    for (int i = 0; i < w.sd[a].nt; ++i) {
      rs_sh_tensor *t = &w.sd[a].t[i];
      chunks++;
      for (int b = 0; b < n; ++b)
        for (int j = 0; j < w.sd[b].nt; ++j) {
          rs_sh_tensor *u = &w.sd[b].t[j];
          if (strcmp(t->key, u->key) || t->ndim != u->ndim) continue;
          for (int k = 0; k < t->ndim; ++k)
            if (u->global_offset[k] + u->local_shape[k] > t->global_shape[k])
              t->global_shape[k] = u->global_offset[k] + u->local_shape[k];
          if ((b < a || (b == a && j < i)) && !memcmp(t->global_offset, u->global_offset, sizeof t->global_offset))
            t->replica.v[0] = 1;
        }
    }
  if (!st) {
    rs_ckpt_io_opts io = {0, 0, NULL, 0};
    st = rs_ref_ckpt_save(&w, root, step, &io, NULL);
  }
  for (int i = 0; i < n; ++i) free(names[i]);
  free(names);
  rs_ckpt_world_free(&w);
  if (st) {
    fprintf(stderr, "reshard %s: %s\n", C, rs_last_error());
    return st == RS_ERR_INVALID ? CLI_USAGE : ckpt_exit_code(st);
  }
  printf("imported %s (%d safetensors files, %lld chunks) as %s/step_%lld; latest = %lld\n", dir, n, (long long)chunks,
         root, step, step);
  return CLI_OK;
}
