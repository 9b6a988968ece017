/* relayout.c - the target of `reshard ckpt reshard` (relayout.h): LAYOUT.json read against the
 * source's metadata, the target ranks' state dicts (the layout's tensors in their new layout, the
 * rest carried over chunk by chunk and object by object), and the checks around the load and the
 * save: every entry filled, the written checkpoint holding the source's keys, dtypes, shapes,
 * objects and common entries. */
#define _POSIX_C_SOURCE 200809L
#include "core/ckpt/relayout.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/ckpt/io.h"
#include "core/json.h"
#include "core/mutant.h"

rs_status rs__relayout_read_md(const char *stepdir, rs__metadata *md) {
  char path[4200];
  memset(md, 0, sizeof *md);
  if (strlen(stepdir) > 4000) return rs_fail(RS_ERR_INVALID, "%s: path too long", stepdir);
  snprintf(path, sizeof path, "%s/metadata.json", stepdir);
  uint8_t *b = NULL;
  size_t n = 0;
  rs_status st = rs__read_file(path, &b, &n);
  if (st) return st;
  st = rs__md_parse((const char *)b, n, md);
  free(b);
  if (st) {
    char pre[4300];
    snprintf(pre, sizeof pre, "%s: ", path);
    return rs_fail_prefix(st, pre);
  }
  return RS_OK;
}

/* ---- LAYOUT.json ---- */
typedef struct layout_ctx {
  const rs__metadata *src;
  rs_state_spec *out;
} layout_ctx;

static const char *const TOP_FIELDS[] = {"world", "tensors", NULL};
static const char *const TENSOR_FIELDS[] = {"key", "mesh", "ranks", "placements", "order", "flatten", "prepend",
                                            "dtype", "shape", NULL};

static int listed(const char *const *v, const char *s) {
  for (; *v; ++v)
    if (strcmp(*v, s) == 0) return 1;
  return 0;
}

static void shape_text(int nd, const int64_t *s, char *buf, size_t cap) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (int d = 0; d < nd && k < cap; ++d) k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? ", " : "", (long long)s[d]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* tensors[i] of the layout against the source: fields, key, optional dtype and shape; then the
 * source's dtype and shape (and seed 0) are written into the copy the state spec parser reads */
static rs_status layout_tensor(cJSON *it, int i, const rs__metadata *src) {
  char f[64];
  snprintf(f, sizeof f, "tensors[%d]", i);
  if (!cJSON_IsObject(it)) return rs_fail(RS_ERR_INVALID, "%s: expected an object", f);
  const cJSON *m;
  cJSON_ArrayForEach(m, it) {
    if (listed(TENSOR_FIELDS, m->string)) continue;
    return rs_fail(RS_ERR_INVALID, "%s.%s: no part of a layout (a layout gives key, mesh, ranks, placements, order, "
                   "flatten, prepend; dtype and shape come from the source)", f, m->string);
  }
  const cJSON *k = cJSON_GetObjectItemCaseSensitive(it, "key");
  if (!cJSON_IsString(k) || !rs__key_ok(k->valuestring))
    return rs_fail(RS_ERR_INVALID, "%s.key: missing or not printable ASCII without quotes", f);
  int ti = rs__md_find_tensor(src, k->valuestring);
  if (ti < 0) {
    size_t kl = strlen(k->valuestring);
    for (int o = 0; o < src->no; ++o)
      if (strncmp(src->o[o].ukey, k->valuestring, kl) == 0 && strncmp(src->o[o].ukey + kl, "/shard_", 7) == 0)
        return rs_fail(RS_ERR_INVALID, "%s.key: '%s' is an object of the source (objects are carried over as they are)",
                       f, k->valuestring);
    return rs_fail(RS_ERR_INVALID, "%s.key: '%s' is not a tensor of the source checkpoint", f, k->valuestring);
  }
  const rs__md_tensor *t = &src->t[ti];
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
  if (dt && (!cJSON_IsString(dt) || strcmp(dt->valuestring, rs_dtype_name(t->dtype))))
    return rs_fail(RS_ERR_INVALID, "%s.dtype: %s, but the source holds '%s' as %s", f,
                   cJSON_IsString(dt) ? dt->valuestring : "not a string", t->key, rs_dtype_name(t->dtype));
  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
  char want[512];
  shape_text(t->ndim, t->shape, want, sizeof want);
  if (sh) {
    int64_t v[RS_MAX_DIMS];
    int nd = -1;
    char fs[80];
    snprintf(fs, sizeof fs, "%s.shape", f);
    rs_status st = cJSON_IsArray(sh) ? rs_json_i64_array(sh, fs, RS_MAX_DIMS, 0, INT64_MAX, v, &nd)
                                     : rs_fail(RS_ERR_INVALID, "%s: expected an array", fs);
    if (st) return st;
    int same = nd == t->ndim;
    for (int d = 0; same && d < nd; ++d) same = v[d] == t->shape[d];
    if (!same) {
      char got[512];
      shape_text(nd, v, got, sizeof got);
      return rs_fail(RS_ERR_INVALID, "%s: %s, but the source's '%s' has global shape %s", fs, got, t->key, want);
    }
  }
  cJSON_DeleteItemFromObjectCaseSensitive(it, "dtype");
  cJSON_DeleteItemFromObjectCaseSensitive(it, "shape");
  cJSON *nd = cJSON_CreateString(rs_dtype_name(t->dtype)), *ns = cJSON_CreateRaw(want), *seed = cJSON_CreateRaw("0");
  if (!nd || !ns || !seed || !cJSON_AddItemToObject(it, "dtype", nd) || !cJSON_AddItemToObject(it, "shape", ns) ||
      !cJSON_AddItemToObject(it, "seed", seed))
    return rs_fail(RS_ERR_NOMEM, "layout: out of memory");
  return RS_OK;
}

static rs_status layout_reader(const cJSON *root, void *p) {
  layout_ctx *c = p;
  if (!cJSON_IsObject(root)) return rs_fail(RS_ERR_INVALID, "layout: expected a JSON object");
  const cJSON *m;
  cJSON_ArrayForEach(m, root) {
    if (listed(TOP_FIELDS, m->string)) continue;
    if (!strcmp(m->string, "objects") || !strcmp(m->string, "common") || !strcmp(m->string, "nonpersistent"))
      return rs_fail(RS_ERR_INVALID, "%s: no part of a layout (objects and common entries are carried over from the "
                     "source as they are)", m->string);
    return rs_fail(RS_ERR_INVALID, "%s: unknown field (a layout holds world and tensors)", m->string);
  }
  int64_t world = 0;
  rs_status st = rs_json_i64_member(root, "", "world", 1, RS_MAX_RANKS, 1, &world);
  if (st) return st;
  const cJSON *ts;
  if ((st = rs_json_member(root, "", "tensors", cJSON_Array, &ts))) return st;
  cJSON *copy = cJSON_Duplicate(root, 1);
  if (!copy) return rs_fail(RS_ERR_NOMEM, "layout: out of memory");
  cJSON *cts = cJSON_GetObjectItemCaseSensitive(copy, "tensors"), *it;
  int i = 0;
  if (cts) cJSON_ArrayForEach(it, cts) {
      if ((st = layout_tensor(it, i++, c->src))) break;
    }
  char *text = st ? NULL : cJSON_PrintUnformatted(copy);
  cJSON_Delete(copy);
  if (!st && !text) st = rs_fail(RS_ERR_NOMEM, "layout: out of memory");
  if (!st) st = rs_state_spec_from_json(text, c->out);
  free(text);
  return st;
}

rs_status rs__relayout_read(const char *path, const char *text, const rs__metadata *src, rs_state_spec *out) {
  memset(out, 0, sizeof *out);
  layout_ctx c = {src, out};
  if (text) return rs__json_from_text(text, layout_reader, &c);
  return rs__json_from_file(path, layout_reader, &c);
}

/* ---- the target world ---- */
/* the rank whose file holds a chunk: N of rank_N.safetensors, else the file's index */
static int file_rank(const rs__metadata *src, int file) {
  const char *n = src->f[file].name;
  int r = -1, len = 0;
  if (sscanf(n, "rank_%d.safetensors%n", &r, &len) == 1 && n[len] == 0 && r >= 0) return r;
  return file;
}

static uint8_t *owned_buffer(int64_t n) {
  void *v = NULL;
  if (n >= 4096) return posix_memalign(&v, 4096, (size_t)n) == 0 ? v : NULL; /* as the state dict's own */
  return malloc(n > 0 ? (size_t)n : 1);
}

/* appends t with a buffer of nbytes it owns, not filled (no copy of a large buffer) */
static rs_status add_unfilled_tensor(rs_state_dict *sd, rs_sh_tensor *t, int64_t nbytes) {
  uint8_t one = 0;
  t->data = &one;
  t->nbytes = 0;
  rs_status st = rs_sd_add_tensor(sd, t);
  if (st) return st;
  rs_sh_tensor *d = &sd->t[sd->nt - 1];
  uint8_t *b = owned_buffer(nbytes);
  if (!b) return rs_fail(RS_ERR_NOMEM, "out of memory (%lld bytes for '%s')", (long long)nbytes, t->key);
  free(d->data);
  d->data = b;
  d->nbytes = nbytes;
  return RS_OK;
}

/* "key/shard_<offsets>_<grid>" -> key, offsets, grid (integers joined by '.') */
static int parse_ukey(const char *uk, char *key, size_t cap, int *nd, int64_t *off, int64_t *grid) {
  const char *s = NULL;
  for (const char *p = strstr(uk, "/shard_"); p; p = strstr(p + 1, "/shard_")) s = p;
  if (!s || (size_t)(s - uk) >= cap) return 0;
  memcpy(key, uk, (size_t)(s - uk));
  key[s - uk] = 0;
  const char *p = s + 7;
  int64_t *dst[2] = {off, grid};
  int n[2] = {0, 0};
  for (int part = 0; part < 2; ++part) {
    while (*p && *p != '_') {
      char *e;
      long long v = strtoll(p, &e, 10);
      if (e == p || v < 0 || n[part] >= RS_MAX_DIMS) return 0;
      dst[part][n[part]++] = v;
      p = *e == '.' ? e + 1 : e;
    }
    if (part == 0 && *p++ != '_') return 0;
  }
  if (*p || n[0] != n[1]) return 0;
  *nd = n[0];
  /* RS_MUTANT 985: ckpt reshard reads a carried-over object's shard offsets in reverse order */
  if (RS_MUTANT(985))
    for (int i = 0; i < n[0] / 2; ++i) {
      int64_t x = off[i];
      off[i] = off[n[0] - 1 - i];
      off[n[0] - 1 - i] = x;
    }
  return 1;
}

rs_status rs__relayout_build(const rs_state_spec *target, const rs__metadata *src, int only, rs_ckpt_world *w,
                             int *carried) {
  rs_status st = rs_state_spec_build_rank(target, RS_FILL_NONE, only, w);
  if (st) return st;
  int W = target->world, nc = 0;
  for (int i = 0; i < src->nt && !st; ++i) {
    const rs__md_tensor *mt = &src->t[i];
    int in_layout = 0;
    for (int j = 0; j < target->nt && !in_layout; ++j) in_layout = strcmp(target->t[j].key, mt->key) == 0;
    if (in_layout) continue;
    nc++;
    /* an empty tensor saved with no chunk (metadata only) keeps its key: one empty entry on rank 0 */
    rs__chunk whole;
    memset(&whole, 0, sizeof whole);
    memcpy(whole.size, mt->shape, sizeof whole.size);
    whole.file = -1;
    for (int k = 0; k < (mt->nc ? mt->nc : 1) && !st; ++k) {
      const rs__chunk *ch = mt->nc ? &mt->c[k] : &whole;
      int r = ch->file < 0 ? 0 : file_rank(src, ch->file) % W;
      if (only >= 0 && r != only) continue;
      rs_sh_tensor e;
      memset(&e, 0, sizeof e);
      e.key = mt->key;
      e.dtype = mt->dtype;
      e.ndim = mt->ndim;
      memcpy(e.global_shape, mt->shape, sizeof e.global_shape);
      memcpy(e.global_offset, ch->off, sizeof e.global_offset);
      memcpy(e.local_shape, ch->size, sizeof e.local_shape);
      e.replica.n = 1;
      e.has_flat = ch->has_flat;
      e.flat_start = ch->flat_start;
      e.flat_stop = ch->flat_stop;
      int64_t nb;
      if ((st = rs_sh_tensor_numel(&e, NULL, &nb))) break;
      if (nb != ch->length) {
        st = rs_fail(RS_ERR_MISMATCH, "key '%s': a chunk of %lld bytes where its box needs %lld", mt->key,
                     (long long)ch->length, (long long)nb);
        break;
      }
      st = add_unfilled_tensor(&w->sd[r], &e, nb);
    }
  }
  for (int i = 0; i < src->no && !st; ++i) {
    const rs__md_object *mo = &src->o[i];
    int r = file_rank(src, mo->file) % W;
    if (only >= 0 && r != only) continue;
    rs_sh_object o;
    memset(&o, 0, sizeof o);
    char key[2048];
    if (!parse_ukey(mo->ukey, key, sizeof key, &o.ndim, o.global_offset, o.global_shape)) {
      st = rs_fail(RS_ERR_MISMATCH, "object '%s': not a unique key of the form key/shard_<offsets>_<grid>", mo->ukey);
      break;
    }
    o.key = key;
    o.replica.n = 1;
    uint8_t one = 0;
    o.data = &one;
    o.len = 0;
    rs_state_dict *sd = &w->sd[r];
    if ((st = rs_sd_add_object(sd, &o))) break;
    uint8_t *b = owned_buffer(mo->length);
    if (!b) {
      st = rs_fail(RS_ERR_NOMEM, "out of memory");
      break;
    }
    free(sd->o[sd->no - 1].data);
    sd->o[sd->no - 1].data = b;
    sd->o[sd->no - 1].len = mo->length;
  }
  if (carried) *carried = nc;
  if (st) rs_ckpt_world_free(w);
  return st;
}

rs_status rs__relayout_all_loaded(const rs_ckpt_world *w, int only) {
  for (int r = 0; r < w->n; ++r) {
    if (only >= 0 && r != only) continue;
    const rs_state_dict *sd = &w->sd[r];
    for (int i = 0; i < sd->nt; ++i)
      if (!sd->t[i].loaded)
        return rs_fail(RS_ERR_MISMATCH, "key '%s' rank %d: the load did not fill this entry (nothing is written)",
                       sd->t[i].key, r);
    for (int i = 0; i < sd->no; ++i)
      if (!sd->o[i].loaded) {
        char uk[2048];
        rs_sh_object_unique_key(&sd->o[i], uk, sizeof uk);
        return rs_fail(RS_ERR_MISMATCH, "object '%s' rank %d: the load did not fill it (nothing is written)", uk, r);
      }
  }
  return RS_OK;
}

rs_status rs__relayout_same_content(const rs__metadata *src, const rs__metadata *dst) {
  if (src->nt != dst->nt || src->no != dst->no || src->ncommon != dst->ncommon)
    return rs_fail(RS_ERR_MISMATCH, "written checkpoint: %d tensors, %d objects, %d common entries; the source has %d, "
                   "%d, %d", dst->nt, dst->no, dst->ncommon, src->nt, src->no, src->ncommon);
  for (int i = 0; i < src->nt; ++i) {
    const rs__md_tensor *a = &src->t[i];
    int j = rs__md_find_tensor(dst, a->key);
    if (j < 0) return rs_fail(RS_ERR_MISMATCH, "written checkpoint: tensor '%s' of the source is missing", a->key);
    const rs__md_tensor *b = &dst->t[j];
    int same = a->dtype == b->dtype && a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; ++d) same = a->shape[d] == b->shape[d];
    if (!same) return rs_fail(RS_ERR_MISMATCH, "written checkpoint: tensor '%s' differs in dtype or shape", a->key);
  }
  for (int i = 0; i < src->no; ++i) {
    int j = rs__md_find_object(dst, src->o[i].ukey);
    if (j < 0 || dst->o[j].length != src->o[i].length)
      return rs_fail(RS_ERR_MISMATCH, "written checkpoint: object '%s' of the source is %s", src->o[i].ukey,
                     j < 0 ? "missing" : "of another length");
  }
  for (int i = 0; i < src->ncommon; ++i) {
    const rs_kv *a = &src->common[i];
    int found = 0;
    for (int j = 0; j < dst->ncommon && !found; ++j)
      found = !strcmp(dst->common[j].key, a->key) && dst->common[j].len == a->len &&
              (a->len == 0 || !memcmp(dst->common[j].val, a->val, (size_t)a->len));
    if (!found) return rs_fail(RS_ERR_MISMATCH, "written checkpoint: common entry '%s' differs from the source's", a->key);
  }
  return RS_OK;
}
