/* metadata.c - metadata.json of a step directory: format and version, the data files with an
 * xxh3-64 digest per 1 MiB block, per tensor key its dtype, global shape and chunk list (PyTorch
 * DCP's ChunkStorageMetadata: offsets, sizes; plus the flat range, file, byte offset and length),
 * objects by unique key, common entries. The first line holds the xxh3-64 of the rest of the file,
 * so a flipped byte that still parses and still looks consistent is caught as well. Every field a
 * hostile file could use to read outside the root, outside a file or past an int64 is checked. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "core/checked.h"
#include "core/box.h"
#include "core/ckpt/internal.h"
#include "core/json.h"

#define DIGEST_PREFIX "{\"digest\":\"xxh3:"
#define DIGEST_LINE_LEN (sizeof(DIGEST_PREFIX) - 1 + 16 + 3) /* hex, '"', ',', '\n' */

void rs__md_free(rs__metadata *m) {
  for (int i = 0; i < m->nt; ++i) {
    free(m->t[i].key);
    free(m->t[i].c);
  }
  for (int i = 0; i < m->no; ++i) free(m->o[i].ukey);
  for (int i = 0; i < m->nf; ++i) {
    free(m->f[i].name);
    free(m->f[i].digest);
  }
  for (int i = 0; i < m->ncommon; ++i) {
    free(m->common[i].key);
    free(m->common[i].val);
  }
  free(m->t);
  free(m->o);
  free(m->f);
  free(m->common);
  memset(m, 0, sizeof *m);
}

int rs__md_find_tensor(const rs__metadata *m, const char *key) {
  for (int i = 0; i < m->nt; ++i)
    if (strcmp(m->t[i].key, key) == 0) return i;
  return -1;
}

rs__md_tensor *rs__md_tensor_for(rs__metadata *m, const rs_sh_tensor *t) {
  int i = rs__md_find_tensor(m, t->key);
  if (i >= 0) return &m->t[i];
  if (!rs__grow((void **)&m->t, m->nt, &m->capt, sizeof *m->t)) return NULL;
  rs__md_tensor *d = &m->t[m->nt];
  memset(d, 0, sizeof *d);
  if (!(d->key = rs__strdup(t->key))) return NULL;
  d->dtype = t->dtype;
  d->ndim = t->ndim;
  memcpy(d->shape, t->global_shape, sizeof d->shape);
  m->nt++;
  return d;
}

static int cmp_md_tensor(const void *a, const void *b) {
  return strcmp(((const rs__md_tensor *)a)->key, ((const rs__md_tensor *)b)->key);
}

static int cmp_md_object(const void *a, const void *b) {
  return strcmp(((const rs__md_object *)a)->ukey, ((const rs__md_object *)b)->ukey);
}

void rs__md_sort(rs__metadata *m) {
  if (m->nt) qsort(m->t, (size_t)m->nt, sizeof *m->t, cmp_md_tensor);
  if (m->no) qsort(m->o, (size_t)m->no, sizeof *m->o, cmp_md_object);
}

int rs__md_find_object(const rs__metadata *m, const char *ukey) {
  for (int i = 0; i < m->no; ++i)
    if (strcmp(m->o[i].ukey, ukey) == 0) return i;
  return -1;
}

static int find_file(const rs__metadata *m, const char *name) {
  for (int i = 0; i < m->nf; ++i)
    if (strcmp(m->f[i].name, name) == 0) return i;
  return -1;
}

/* ---- writing ---- */
static cJSON *ints(const int64_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  char b[32];
  for (int i = 0; i < n; ++i) {
    snprintf(b, sizeof b, "%lld", (long long)v[i]);
    cJSON_AddItemToArray(a, cJSON_CreateRaw(b));
  }
  return a;
}

static void add_i(cJSON *o, const char *name, int64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%lld", (long long)v);
  cJSON_AddRawToObject(o, name, b);
}

static void add_str(cJSON *o, const char *name, const uint8_t *v, int64_t len) {
  char *s = malloc((size_t)len + 1);
  if (!s) return;
  memcpy(s, v, (size_t)len);
  s[len] = 0;
  cJSON_AddStringToObject(o, name, s);
  free(s);
}

rs_status rs__md_write(const rs__metadata *m, char **bytes, size_t *len) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", RS_CKPT_FORMAT);
  add_i(root, "version", RS_CKPT_VERSION);
  add_i(root, "step", m->step);
  cJSON *fs = cJSON_AddArrayToObject(root, "files");
  for (int i = 0; i < m->nf; ++i) {
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "name", m->f[i].name);
    add_i(f, "size", m->f[i].size);
    add_i(f, "block", m->f[i].block);
    cJSON *d = cJSON_AddArrayToObject(f, "xxh3");
    for (int b = 0; b < m->f[i].nblocks; ++b) {
      char hx[17];
      rs__hex64(m->f[i].digest[b], hx);
      cJSON_AddItemToArray(d, cJSON_CreateString(hx));
    }
    cJSON_AddItemToArray(fs, f);
  }
  cJSON *ts = cJSON_AddObjectToObject(root, "tensors");
  for (int i = 0; i < m->nt; ++i) {
    const rs__md_tensor *t = &m->t[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "dtype", rs_dtype_name(t->dtype));
    cJSON_AddItemToObject(o, "shape", ints(t->shape, t->ndim));
    cJSON *cs = cJSON_AddArrayToObject(o, "chunks");
    for (int k = 0; k < t->nc; ++k) {
      const rs__chunk *c = &t->c[k];
      cJSON *co = cJSON_CreateObject();
      cJSON_AddItemToObject(co, "offsets", ints(c->off, t->ndim));
      cJSON_AddItemToObject(co, "sizes", ints(c->size, t->ndim));
      if (c->has_flat) {
        int64_t fr[2] = {c->flat_start, c->flat_stop};
        cJSON_AddItemToObject(co, "flat", ints(fr, 2));
      }
      cJSON_AddStringToObject(co, "file", m->f[c->file].name);
      add_i(co, "offset", c->byte_off);
      add_i(co, "length", c->length);
      cJSON_AddItemToArray(cs, co);
    }
    cJSON_AddItemToObject(ts, t->key, o);
  }
  cJSON *os = cJSON_AddObjectToObject(root, "objects");
  for (int i = 0; i < m->no; ++i) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", m->f[m->o[i].file].name);
    add_i(o, "offset", m->o[i].byte_off);
    add_i(o, "length", m->o[i].length);
    cJSON_AddItemToObject(os, m->o[i].ukey, o);
  }
  cJSON *cm = cJSON_AddObjectToObject(root, "common");
  for (int i = 0; i < m->ncommon; ++i) add_str(cm, m->common[i].key, m->common[i].val, m->common[i].len);
  char *body = cJSON_Print(root);
  cJSON_Delete(root);
  if (!body) return rs_fail(RS_ERR_NOMEM, "metadata: out of memory");
  size_t bl = strlen(body) - 1; /* without the leading '{' */
  char *out = malloc(DIGEST_LINE_LEN + bl + 2);
  if (!out) {
    free(body);
    return rs_fail(RS_ERR_NOMEM, "metadata: out of memory");
  }
  char hx[17];
  rs__hex64(XXH3_64bits(body + 1, bl), hx);
  snprintf(out, DIGEST_LINE_LEN + 1, "%s%s\",\n", DIGEST_PREFIX, hx);
  memcpy(out + DIGEST_LINE_LEN, body + 1, bl);
  free(body);
  *bytes = out;
  *len = DIGEST_LINE_LEN + bl;
  return RS_OK;
}

/* ---- reading ---- */
static int cmp_strp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static rs_status dup_names(const cJSON *obj, const char *what) {
  int n = cJSON_GetArraySize(obj);
  const char **v = malloc(sizeof *v * (size_t)(n + 1));
  if (!v) return rs_fail(RS_ERR_NOMEM, "out of memory");
  int k = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, obj) v[k++] = it->string ? it->string : "";
  qsort(v, (size_t)k, sizeof *v, cmp_strp);
  rs_status st = RS_OK;
  for (int i = 1; i < k && !st; ++i)
    if (strcmp(v[i - 1], v[i]) == 0) st = rs_fail(RS_ERR_INVALID, "metadata: %s '%s' twice", what, v[i]);
  free(v);
  return st;
}

static int cmp_range(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

static rs_status parse_files(const cJSON *fs, rs__metadata *m) {
  const cJSON *it;
  cJSON_ArrayForEach(it, fs) {
    if (!rs__grow((void **)&m->f, m->nf, &m->capf, sizeof *m->f)) return rs_fail(RS_ERR_NOMEM, "out of memory");
    rs__md_file *f = &m->f[m->nf];
    memset(f, 0, sizeof *f);
    const cJSON *nm, *sz, *bl, *dg;
    char fld[64];
    snprintf(fld, sizeof fld, "files[%d]", m->nf);
    rs_status st;
    if ((st = rs_json_member(it, fld, "name", cJSON_String, &nm))) return st;
    if ((st = rs_json_member(it, fld, "size", cJSON_Number, &sz))) return st;
    if ((st = rs_json_member(it, fld, "block", cJSON_Number, &bl))) return st;
    if ((st = rs_json_member(it, fld, "xxh3", cJSON_Array, &dg))) return st;
    if (!nm || !sz || !bl || !dg) return rs_fail(RS_ERR_INVALID, "metadata %s: needs name, size, block, xxh3", fld);
    if (!rs__file_name_ok(nm->valuestring))
      return rs_fail(RS_ERR_INVALID, "metadata %s.name: '%s' is not a plain file name (no paths)", fld, nm->valuestring);
    if (find_file(m, nm->valuestring) >= 0)
      return rs_fail(RS_ERR_INVALID, "metadata: file '%s' listed twice", nm->valuestring);
    int64_t block;
    char f2[96];
    snprintf(f2, sizeof f2, "metadata %s.size", fld);
    if ((st = rs_json_i64(sz, f2, 0, INT64_MAX, &f->size))) return st;
    snprintf(f2, sizeof f2, "metadata %s.block", fld);
    if ((st = rs_json_i64(bl, f2, 64, 1 << 30, &block))) return st;
    if (block & (block - 1)) return rs_fail(RS_ERR_INVALID, "%s: %lld is not a power of two", f2, (long long)block);
    f->block = block;
    int64_t nb = f->size / block + (f->size % block != 0);
    if (cJSON_GetArraySize(dg) != nb)
      return rs_fail(RS_ERR_INVALID, "metadata %s: %d digests for %lld blocks", fld, cJSON_GetArraySize(dg),
                     (long long)nb);
    f->digest = malloc(sizeof(uint64_t) * (size_t)(nb + 1));
    if (!(f->name = rs__strdup(nm->valuestring)) || !f->digest) {
      free(f->name);
      free(f->digest);
      return rs_fail(RS_ERR_NOMEM, "out of memory");
    }
    m->nf++;
    f->nblocks = (int)nb;
    int b = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, dg) {
      if (!cJSON_IsString(d) || !rs__parse_hex64(d->valuestring, &f->digest[b]))
        return rs_fail(RS_ERR_INVALID, "metadata %s.xxh3[%d]: expected 16 lowercase hex digits", fld, b);
      b++;
    }
  }
  return RS_OK;
}

static rs_status read_ref(const cJSON *o, const char *what, const rs__metadata *m, int *file,
                          int64_t *off, int64_t *len) {
  const cJSON *fi, *of, *ln;
  rs_status st;
  if ((st = rs_json_member(o, what, "file", cJSON_String, &fi))) return st;
  if ((st = rs_json_member(o, what, "offset", cJSON_Number, &of))) return st;
  if ((st = rs_json_member(o, what, "length", cJSON_Number, &ln))) return st;
  if (!fi || !of || !ln) return rs_fail(RS_ERR_INVALID, "metadata %s: needs file, offset, length", what);
  *file = find_file(m, fi->valuestring);
  if (*file < 0) return rs_fail(RS_ERR_INVALID, "metadata %s: file '%s' is not listed in files", what, fi->valuestring);
  char f[300];
  snprintf(f, sizeof f, "metadata %s.offset", what);
  if ((st = rs_json_i64(of, f, 0, INT64_MAX, off))) return st;
  snprintf(f, sizeof f, "metadata %s.length", what);
  if ((st = rs_json_i64(ln, f, 0, INT64_MAX, len))) return st;
  int64_t end;
  if (!rs__add_ok(*off, *len, &end) || end > m->f[*file].size)
    return rs_fail(RS_ERR_INVALID, "metadata %s: bytes [%lld, +%lld) past the end of '%s' (%lld bytes)", what,
                   (long long)*off, (long long)*len, m->f[*file].name, (long long)m->f[*file].size);
  return RS_OK;
}

static rs_status parse_chunk(const cJSON *co, const char *what, rs__md_tensor *t, const rs__metadata *m,
                             rs__chunk *c) {
  memset(c, 0, sizeof *c);
  const cJSON *of, *sz, *fl;
  rs_status st;
  if ((st = rs_json_member(co, what, "offsets", cJSON_Array, &of))) return st;
  if ((st = rs_json_member(co, what, "sizes", cJSON_Array, &sz))) return st;
  if ((st = rs_json_member(co, what, "flat", cJSON_Array, &fl))) return st;
  if (!of || !sz) return rs_fail(RS_ERR_INVALID, "metadata %s: needs offsets and sizes", what);
  int n1, n2;
  if ((st = rs_json_i64_array(of, what, RS_MAX_DIMS, 0, INT64_MAX, c->off, &n1))) return st;
  if ((st = rs_json_i64_array(sz, what, RS_MAX_DIMS, 0, INT64_MAX, c->size, &n2))) return st;
  if (n1 != t->ndim || n2 != t->ndim)
    return rs_fail(RS_ERR_INVALID, "metadata %s: offsets/sizes of %d/%d dims for a %d-d tensor", what, n1, n2, t->ndim);
  for (int d = 0; d < t->ndim; ++d) {
    int64_t e;
    if (!rs__add_ok(c->off[d], c->size[d], &e) || e > t->shape[d])
      return rs_fail(RS_ERR_INVALID, "metadata %s: chunk outside the global shape on dim %d", what, d);
  }
  int64_t numel, bytes;
  if (!rs__numel_ok(c->size, t->ndim, &numel))
    return rs_fail(RS_ERR_OVERFLOW, "metadata %s: chunk element count overflows int64", what);
  if (fl) {
    int64_t fr[2];
    int n;
    if ((st = rs_json_i64_array(fl, what, 2, 0, INT64_MAX, fr, &n)) || n != 2 || fr[1] < fr[0] || fr[1] > numel)
      return rs_fail(RS_ERR_INVALID, "metadata %s: flat range must be [start, stop] inside the chunk", what);
    c->has_flat = 1;
    c->flat_start = fr[0];
    c->flat_stop = fr[1];
    numel = fr[1] - fr[0];
  }
  if (!rs__mul_ok(numel, rs_dtype_size(t->dtype), &bytes))
    return rs_fail(RS_ERR_OVERFLOW, "metadata %s: chunk byte count overflows int64", what);
  if ((st = read_ref(co, what, m, &c->file, &c->byte_off, &c->length))) return st;
  if (c->length != bytes)
    return rs_fail(RS_ERR_INVALID, "metadata %s: length %lld, the chunk needs %lld bytes", what,
                   (long long)c->length, (long long)bytes);
  return RS_OK;
}

static rs_status parse_tensors(const cJSON *ts, rs__metadata *m) {
  rs_status st = dup_names(ts, "tensor");
  if (st) return st;
  const cJSON *it;
  cJSON_ArrayForEach(it, ts) {
    if (!rs__grow((void **)&m->t, m->nt, &m->capt, sizeof *m->t)) return rs_fail(RS_ERR_NOMEM, "out of memory");
    rs__md_tensor *t = &m->t[m->nt];
    memset(t, 0, sizeof *t);
    if (!rs__key_ok(it->string)) return rs_fail(RS_ERR_INVALID, "metadata: a tensor key is empty or not printable");
    if (!(t->key = rs__strdup(it->string))) return rs_fail(RS_ERR_NOMEM, "out of memory");
    m->nt++;
    char what[1200];
    snprintf(what, sizeof what, "tensors['%s']", t->key);
    const cJSON *dt, *sh, *cs, *co;
    if ((st = rs_json_member(it, what, "dtype", cJSON_String, &dt))) return st;
    if ((st = rs_json_member(it, what, "shape", cJSON_Array, &sh))) return st;
    if ((st = rs_json_member(it, what, "chunks", cJSON_Array, &cs))) return st;
    if (!dt || !sh || !cs) return rs_fail(RS_ERR_INVALID, "metadata %s: needs dtype, shape, chunks", what);
    if ((st = rs_dtype_parse(dt->valuestring, &t->dtype)))
      return rs_fail(RS_ERR_INVALID, "metadata %s.dtype: unknown dtype", what);
    if ((st = rs_json_i64_array(sh, what, RS_MAX_DIMS, 0, INT64_MAX, t->shape, &t->ndim))) return st;
    rs_tensor tt = {t->dtype, t->ndim, {0}};
    memcpy(tt.shape, t->shape, sizeof tt.shape);
    int64_t nb;
    char field[400];
    snprintf(field, sizeof field, "metadata %.300s.shape", what);
    if ((st = rs__tensor_nbytes_at(&tt, field, &nb))) return st;
    cJSON_ArrayForEach(co, cs) {
      if (!rs__grow((void **)&t->c, t->nc, &t->capc, sizeof *t->c)) return rs_fail(RS_ERR_NOMEM, "out of memory");
      char cw[1300];
      snprintf(cw, sizeof cw, "%s.chunks[%d]", what, t->nc);
      if ((st = parse_chunk(co, cw, t, m, &t->c[t->nc]))) return st;
      t->nc++;
    }
    if ((st = rs__md_check_tiling(t))) return rs_fail_prefix(st == RS_ERR_NOMEM ? st : RS_ERR_INVALID, "metadata: ");
  }
  return RS_OK;
}

static rs_status parse_root(const cJSON *root, rs__metadata *m) {
  const cJSON *fm, *vs, *sp, *fs, *ts, *os, *cm, *it;
  rs_status st;
  if ((st = rs_json_member(root, "metadata", "format", cJSON_String, &fm))) return st;
  if (!fm || strcmp(fm->valuestring, RS_CKPT_FORMAT) != 0)
    return rs_fail(RS_ERR_INVALID, "metadata.format: expected '%s'", RS_CKPT_FORMAT);
  if ((st = rs_json_member(root, "metadata", "version", cJSON_Number, &vs))) return st;
  int64_t v;
  if (!vs || rs_json_i64(vs, "metadata.version", 0, INT64_MAX, &v))
    return rs_fail(RS_ERR_INVALID, "metadata.version: missing or not an integer");
  if (v != RS_CKPT_VERSION)
    return rs_fail(RS_ERR_INVALID, "metadata.version: %lld, this reader knows version %d", (long long)v, RS_CKPT_VERSION);
  if ((st = rs_json_member(root, "metadata", "step", cJSON_Number, &sp))) return st;
  if (!sp) return rs_fail(RS_ERR_INVALID, "metadata.step: missing");
  if ((st = rs_json_i64(sp, "metadata.step", 0, INT64_MAX, &m->step))) return st;
  if ((st = rs_json_member(root, "metadata", "files", cJSON_Array, &fs))) return st;
  if ((st = rs_json_member(root, "metadata", "tensors", cJSON_Object, &ts))) return st;
  if ((st = rs_json_member(root, "metadata", "objects", cJSON_Object, &os))) return st;
  if ((st = rs_json_member(root, "metadata", "common", cJSON_Object, &cm))) return st;
  if (!fs || !ts || !os || !cm) return rs_fail(RS_ERR_INVALID, "metadata: needs files, tensors, objects, common");
  if ((st = dup_names(root, "member"))) return st;
  if ((st = parse_files(fs, m))) return st;
  if ((st = parse_tensors(ts, m))) return st;
  if ((st = dup_names(os, "object"))) return st;
  cJSON_ArrayForEach(it, os) {
    if (!rs__grow((void **)&m->o, m->no, &m->capo, sizeof *m->o)) return rs_fail(RS_ERR_NOMEM, "out of memory");
    rs__md_object *o = &m->o[m->no];
    memset(o, 0, sizeof *o);
    if (!rs__key_ok(it->string)) return rs_fail(RS_ERR_INVALID, "metadata: an object key is empty or not printable");
    if (!(o->ukey = rs__strdup(it->string))) return rs_fail(RS_ERR_NOMEM, "out of memory");
    m->no++;
    char what[1200];
    snprintf(what, sizeof what, "objects['%s']", o->ukey);
    if ((st = read_ref(it, what, m, &o->file, &o->byte_off, &o->length))) return st;
  }
  if ((st = dup_names(cm, "common key"))) return st;
  cJSON_ArrayForEach(it, cm) {
    if (!cJSON_IsString(it)) return rs_fail(RS_ERR_INVALID, "metadata common['%s']: expected a string", it->string);
    if ((st = rs_sd_add_kv(&m->common, &m->ncommon, &m->capc, it->string, it->valuestring,
                           (int64_t)strlen(it->valuestring))))
      return st;
  }
  /* chunk byte ranges in one file never overlap (a hostile file could alias two chunks) */
  for (int f = 0; f < m->nf; ++f) {
    int n = 0;
    for (int i = 0; i < m->nt; ++i)
      for (int k = 0; k < m->t[i].nc; ++k) n += m->t[i].c[k].file == f;
    for (int i = 0; i < m->no; ++i) n += m->o[i].file == f;
    int64_t(*r)[2] = malloc(sizeof *r * (size_t)(n + 1));
    if (!r) return rs_fail(RS_ERR_NOMEM, "out of memory");
    int k2 = 0;
    for (int i = 0; i < m->nt; ++i)
      for (int k = 0; k < m->t[i].nc; ++k)
        if (m->t[i].c[k].file == f) {
          r[k2][0] = m->t[i].c[k].byte_off;
          r[k2++][1] = m->t[i].c[k].length;
        }
    for (int i = 0; i < m->no; ++i)
      if (m->o[i].file == f) {
        r[k2][0] = m->o[i].byte_off;
        r[k2++][1] = m->o[i].length;
      }
    qsort(r, (size_t)n, sizeof *r, cmp_range);
    int64_t end = 0;
    rs_status bad = RS_OK;
    for (int i = 0; i < n && !bad; ++i) {
      if (r[i][1] == 0) continue;
      if (r[i][0] < end)
        bad = rs_fail(RS_ERR_INVALID, "metadata: two entries share bytes of '%s' at offset %lld", m->f[f].name,
                      (long long)r[i][0]);
      end = r[i][0] + r[i][1];
    }
    free(r);
    if (bad) return bad;
  }
  return RS_OK;
}

rs_status rs__md_parse(const char *bytes, size_t len, rs__metadata *out) {
  memset(out, 0, sizeof *out);
  if (len < DIGEST_LINE_LEN || memcmp(bytes, DIGEST_PREFIX, sizeof(DIGEST_PREFIX) - 1) != 0)
    return rs_fail(RS_ERR_INVALID, "metadata.json: no digest line (not a %s metadata file)", RS_CKPT_FORMAT);
  char hx[17];
  memcpy(hx, bytes + sizeof(DIGEST_PREFIX) - 1, 16);
  hx[16] = 0;
  uint64_t want;
  const char *tail = bytes + sizeof(DIGEST_PREFIX) - 1 + 16;
  if (!rs__parse_hex64(hx, &want) || tail[0] != '"' || tail[1] != ',' || tail[2] != '\n')
    return rs_fail(RS_ERR_IO, "metadata.json: malformed digest line");
  if (XXH3_64bits(bytes + DIGEST_LINE_LEN, len - DIGEST_LINE_LEN) != want)
    return rs_fail(RS_ERR_IO, "metadata.json: digest mismatch (the file is corrupt)");
  char *text = malloc(len + 1);
  if (!text) return rs_fail(RS_ERR_NOMEM, "out of memory");
  memcpy(text, bytes, len);
  text[len] = 0;
  if (strlen(text) != len) {
    free(text);
    return rs_fail(RS_ERR_INVALID, "metadata.json: NUL byte");
  }
  cJSON *root;
  rs_status st = rs_json_parse(text, &root);
  free(text);
  if (st) return rs_fail_prefix(RS_ERR_INVALID, "metadata.json: ");
  st = cJSON_IsObject(root) ? parse_root(root, out) : rs_fail(RS_ERR_INVALID, "metadata.json: not an object");
  cJSON_Delete(root);
  if (st) rs__md_free(out);
  return st;
}
