/* safetensors.c - the safetensors header (8-byte little-endian length, then a JSON object of
 * {name: {dtype, shape, data_offsets}} and an optional __metadata__ of strings), written and read
 * with every check the format's own reader makes: byte counts that match the shape, offsets
 * contiguous from 0 to the end of the file, distinct names, a header of at most 100 MB. */
#include <stdlib.h>
#include <string.h>
#include "core/checked.h"
#include "core/ckpt/internal.h"
#include "core/json.h"

void rs__st_free(rs__st_header *h) {
  for (int i = 0; i < h->n; ++i) free(h->e[i].name);
  for (int i = 0; i < h->nmeta; ++i) {
    free(h->meta[i].key);
    free(h->meta[i].val);
  }
  free(h->e);
  free(h->byname);
  free(h->meta);
  memset(h, 0, sizeof *h);
}

int rs__st_find(const rs__st_header *h, const char *name) {
  if (h->byname) { /* binary search: a header of many entries is searched once per chunk */
    int lo = 0, hi = h->n;
    while (lo < hi) {
      int mid = (lo + hi) / 2, c = strcmp(h->byname[mid]->name, name);
      if (c == 0) return (int)(h->byname[mid] - h->e);
      if (c < 0) lo = mid + 1;
      else hi = mid;
    }
    return -1;
  }
  for (int i = 0; i < h->n; ++i)
    if (strcmp(h->e[i].name, name) == 0) return i;
  return -1;
}

static int cmp_begin(const void *a, const void *b) {
  const rs__st_entry *x = *(rs__st_entry *const *)a, *y = *(rs__st_entry *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp((*(rs__st_entry *const *)a)->name, (*(rs__st_entry *const *)b)->name);
}

static rs_status parse_entry(const cJSON *it, rs__st_entry *e) {
  const char *nm = it->string;
  const cJSON *dt, *sh, *of;
  rs_status st;
  if ((st = rs_json_member(it, nm, "dtype", cJSON_String, &dt))) return st;
  if ((st = rs_json_member(it, nm, "shape", cJSON_Array, &sh))) return st;
  if ((st = rs_json_member(it, nm, "data_offsets", cJSON_Array, &of))) return st;
  if (!dt || !sh || !of)
    return rs_fail(RS_ERR_INVALID, "safetensors: tensor '%s' lacks dtype, shape or data_offsets", nm);
  if ((st = rs_dtype_parse(dt->valuestring, &e->dtype)))
    return rs_fail(RS_ERR_INVALID, "safetensors: tensor '%s': unknown dtype", nm);
  if ((st = rs_json_i64_array(sh, "safetensors shape", RS_MAX_DIMS, 0, INT64_MAX, e->shape, &e->ndim))) {
    char pre[300];
    snprintf(pre, sizeof pre, "safetensors: tensor '%.200s': ", nm);
    return rs_fail_prefix(RS_ERR_INVALID, pre);
  }
  int64_t off[2];
  int n;
  if ((st = rs_json_i64_array(of, "safetensors data_offsets", 2, 0, INT64_MAX, off, &n)) || n != 2)
    return rs_fail(RS_ERR_INVALID, "safetensors: tensor '%s': data_offsets must be 2 integers", nm);
  e->begin = off[0];
  e->end = off[1];
  int64_t numel, bytes;
  if (!rs__numel_ok(e->shape, e->ndim, &numel) || !rs__mul_ok(numel, rs_dtype_size(e->dtype), &bytes))
    return rs_fail(RS_ERR_OVERFLOW, "safetensors: tensor '%s': byte count overflows int64", nm);
  if (e->end < e->begin || e->end - e->begin != bytes)
    return rs_fail(RS_ERR_INVALID, "safetensors: tensor '%s': data_offsets [%lld, %lld) hold %lld bytes, shape needs %lld",
                   nm, (long long)e->begin, (long long)e->end, (long long)(e->end - e->begin), (long long)bytes);
  return RS_OK;
}

rs_status rs__st_parse(const char *json, size_t len, int64_t file_size, rs__st_header *out) {
  memset(out, 0, sizeof *out);
  if (len > RS_CKPT_MAX_HEADER) return rs_fail(RS_ERR_INVALID, "safetensors: header of %zu bytes (over 100 MB)", len);
  if ((int64_t)len > file_size - 8) return rs_fail(RS_ERR_INVALID, "safetensors: header runs past the end of the file");
  out->header_len = (int64_t)len;
  char *text = malloc(len + 1);
  if (!text) return rs_fail(RS_ERR_NOMEM, "out of memory");
  memcpy(text, json, len);
  text[len] = 0;
  rs_status st = rs__json_no_nul(text, len, "safetensors header");
  if (st) {
    free(text);
    return st;
  }
  cJSON *root;
  st = rs_json_parse(text, &root);
  free(text);
  if (st) return rs_fail_prefix(RS_ERR_INVALID, "safetensors header: ");
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return rs_fail(RS_ERR_INVALID, "safetensors: the header is not a JSON object");
  }
  const cJSON *it;
  int seen_meta = 0;
  cJSON_ArrayForEach(it, root) {
    if (!it->string) continue;
    if (strcmp(it->string, "__metadata__") == 0) {
      if (seen_meta++ || !cJSON_IsObject(it)) {
        st = rs_fail(RS_ERR_INVALID, "safetensors: __metadata__ twice or not an object");
        break;
      }
      const cJSON *m;
      cJSON_ArrayForEach(m, it) {
        if (!cJSON_IsString(m)) {
          st = rs_fail(RS_ERR_INVALID, "safetensors: __metadata__ values must be strings");
          break;
        }
        for (int i = 0; i < out->nmeta && !st; ++i)
          if (strcmp(out->meta[i].key, m->string) == 0)
            st = rs_fail(RS_ERR_INVALID, "safetensors: __metadata__ key '%s' twice", m->string);
        if (!st)
          st = rs_sd_add_kv(&out->meta, &out->nmeta, &out->capm, m->string, m->valuestring,
                            (int64_t)strlen(m->valuestring));
        if (st) break;
      }
      if (st) break;
      continue;
    }
    if (!cJSON_IsObject(it)) {
      st = rs_fail(RS_ERR_INVALID, "safetensors: tensor '%s' is not an object", it->string);
      break;
    }
    if (!rs__grow((void **)&out->e, out->n, &out->cap, sizeof *out->e)) {
      st = rs_fail(RS_ERR_NOMEM, "out of memory");
      break;
    }
    rs__st_entry *e = &out->e[out->n];
    memset(e, 0, sizeof *e);
    if ((st = parse_entry(it, e))) break;
    if (!(e->name = rs__strdup(it->string))) {
      st = rs_fail(RS_ERR_NOMEM, "out of memory");
      break;
    }
    out->n++;
  }
  cJSON_Delete(root);
  if (!st && out->n) {
    rs__st_entry **ix = malloc(sizeof *ix * (size_t)out->n);
    if (!ix) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    for (int i = 0; ix && i < out->n; ++i) ix[i] = &out->e[i];
    if (ix) qsort(ix, (size_t)out->n, sizeof *ix, cmp_name);
    for (int i = 1; ix && i < out->n && !st; ++i)
      if (strcmp(ix[i - 1]->name, ix[i]->name) == 0)
        st = rs_fail(RS_ERR_INVALID, "safetensors: tensor '%s' twice", ix[i]->name);
    if (ix && !st) {
      out->byname = malloc(sizeof *ix * (size_t)out->n);
      if (!out->byname) st = rs_fail(RS_ERR_NOMEM, "out of memory");
      else memcpy(out->byname, ix, sizeof *ix * (size_t)out->n);
    }
    if (ix && !st) {
      qsort(ix, (size_t)out->n, sizeof *ix, cmp_begin);
      int64_t at = 0;
      for (int i = 0; i < out->n && !st; ++i) {
        if (ix[i]->begin != at)
          st = rs_fail(RS_ERR_INVALID, "safetensors: tensor '%s': data_offsets start at %lld, expected %lld (not contiguous)",
                       ix[i]->name, (long long)ix[i]->begin, (long long)at);
        at = ix[i]->end;
      }
    }
    free(ix);
  }
  if (!st) {
    int64_t end = 0;
    for (int i = 0; i < out->n; ++i)
      if (out->e[i].end > end) end = out->e[i].end;
    if (end != file_size - 8 - (int64_t)len)
      st = rs_fail(RS_ERR_INVALID, "safetensors: data section of %lld bytes, tensors cover %lld",
                   (long long)(file_size - 8 - (int64_t)len), (long long)end);
  }
  if (st) rs__st_free(out);
  return st;
}

rs_status rs__st_header_bytes(const rs__st_entry *e, int n, const rs_kv *meta, int nmeta,
                              char **bytes, size_t *len) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return rs_fail(RS_ERR_NOMEM, "out of memory");
  if (nmeta) {
    cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
    for (int i = 0; i < nmeta; ++i) {
      char *v = malloc((size_t)meta[i].len + 1);
      if (!v) continue;
      memcpy(v, meta[i].val, (size_t)meta[i].len);
      v[meta[i].len] = 0;
      cJSON_AddStringToObject(m, meta[i].key, v);
      free(v);
    }
  }
  for (int i = 0; i < n; ++i) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "dtype", rs_dtype_name(e[i].dtype));
    cJSON *sh = cJSON_AddArrayToObject(o, "shape");
    char b[32];
    for (int d = 0; d < e[i].ndim; ++d) {
      snprintf(b, sizeof b, "%lld", (long long)e[i].shape[d]);
      cJSON_AddItemToArray(sh, cJSON_CreateRaw(b));
    }
    cJSON *of = cJSON_AddArrayToObject(o, "data_offsets");
    snprintf(b, sizeof b, "%lld", (long long)e[i].begin);
    cJSON_AddItemToArray(of, cJSON_CreateRaw(b));
    snprintf(b, sizeof b, "%lld", (long long)e[i].end);
    cJSON_AddItemToArray(of, cJSON_CreateRaw(b));
    cJSON_AddItemToObject(root, e[i].name, o);
  }
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text) return rs_fail(RS_ERR_NOMEM, "out of memory");
  size_t tl = strlen(text), hl = (tl + 7) / 8 * 8;
  char *out = malloc(8 + hl);
  if (!out) {
    free(text);
    return rs_fail(RS_ERR_NOMEM, "out of memory");
  }
  uint64_t h = hl;
  for (int i = 0; i < 8; ++i) out[i] = (char)(h >> (8 * i));
  memcpy(out + 8, text, tl);
  memset(out + 8 + tl, ' ', hl - tl);
  free(text);
  *bytes = out;
  *len = 8 + hl;
  return RS_OK;
}

void rs__hex64(uint64_t v, char out[17]) {
  static const char hx[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i, v >>= 4) out[i] = hx[v & 15];
  out[16] = 0;
}

/* Exactly 16 lowercase hex digits: an upper-case digit is one flipped bit away from a lower-case
 * one, so accepting both would let a flip in a digest go unnoticed. */
int rs__parse_hex64(const char *s, uint64_t *out) {
  uint64_t v = 0;
  for (int i = 0; i < 16; ++i) {
    char c = s[i];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return 0;
    v = v << 4 | (uint64_t)d;
  }
  if (s[16]) return 0;
  *out = v;
  return 1;
}
