/* load.c - the reference load: every rank's requested boxes (any layout, any rank count, flat or
 * not) filled element by element from the intersecting stored chunks, read through the checked
 * reader. A tensor is marked loaded only when every requested element arrived; missing and
 * unexpected keys follow Megatron's StrictHandling. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/ckpt/internal.h"
#include "core/mutant.h"
#include "core/ckpt/io.h"
#include "ref/ckpt/reader.h"

static void free_list(char **v, int n) {
  for (int i = 0; i < n; ++i) free(v[i]);
  free(v);
}

rs_status rs_ckpt_latest(const char *root, int64_t *step) { return rs__ckpt_read_latest(root, step); }

rs_status rs_ckpt_resolve_dir(const char *dir, char **stepdir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/metadata.json", dir);
  struct stat sb;
  if (lstat(path, &sb) == 0) {
    /* a step directory (its metadata.json is read, under the read rule, by whoever uses it) */
    *stepdir = rs__strdup(dir);
    return *stepdir ? RS_OK : rs_fail(RS_ERR_NOMEM, "out of memory");
  }
  int64_t step;
  rs_status st = rs_ckpt_latest(dir, &step);
  snprintf(path, sizeof path, "%s/latest", dir);
  if (st && lstat(path, &sb) == 0) return st; /* a latest that is malformed, a link, a FIFO */
  if (st) return rs_fail(RS_ERR_INVALID, "%s: neither a step directory (metadata.json) nor a root (latest)", dir);
  snprintf(path, sizeof path, "%s/step_%lld", dir, (long long)step);
  *stepdir = rs__strdup(path);
  return *stepdir ? RS_OK : rs_fail(RS_ERR_NOMEM, "out of memory");
}

/* ---- strict handling ---- */
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int in_sorted(char **v, int n, const char *k) {
  return n > 0 && bsearch(&k, v, (size_t)n, sizeof *v, cmp_str) != NULL;
}

/* Sorted distinct keys requested by any rank (tensor keys, object unique keys). */
static rs_status requested_keys(const rs_ckpt_world *w, char ***out, int *n) {
  int cap = 0, k = 0;
  char **v = NULL;
  char uk[2048];
  for (int r = 0; r < w->n; ++r) {
    const rs_state_dict *sd = &w->sd[r];
    for (int i = 0; i < sd->nt + sd->no; ++i) {
      const char *key = i < sd->nt ? sd->t[i].key : uk;
      if (i >= sd->nt) rs_sh_object_unique_key(&sd->o[i - sd->nt], uk, sizeof uk);
      if (!rs__grow((void **)&v, k, &cap, sizeof *v) || !(v[k] = rs__strdup(key))) {
        free_list(v, k);
        return rs_fail(RS_ERR_NOMEM, "out of memory");
      }
      k++;
    }
  }
  if (k) qsort(v, (size_t)k, sizeof *v, cmp_str);
  int u = 0;
  for (int i = 0; i < k; ++i) {
    if (u && strcmp(v[u - 1], v[i]) == 0) {
      free(v[i]);
      continue;
    }
    v[u++] = v[i];
  }
  *out = v;
  *n = u;
  return RS_OK;
}

static rs_status strict_check(const rs_ckpt_world *w, const rs__metadata *md, rs_strict mode, FILE *log,
                              rs_ckpt_report *rep, char ***unexpected, int *nun) {
  char **req = NULL;
  int nreq = 0;
  rs_status st = requested_keys(w, &req, &nreq);
  if (st) return st;
  int nck = md->nt + md->no, cap1 = 0, cap2 = 0;
  char **ck = malloc(sizeof *ck * (size_t)(nck + 1));
  if (!ck) {
    free_list(req, nreq);
    return rs_fail(RS_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < md->nt; ++i) ck[i] = md->t[i].key;
  for (int i = 0; i < md->no; ++i) ck[md->nt + i] = md->o[i].ukey;
  qsort(ck, (size_t)nck, sizeof *ck, cmp_str);
  char **un = NULL, **mi = NULL;
  int nu = 0, nm = 0;
  for (int i = 0; i < nreq; ++i)
    if (!in_sorted(ck, nck, req[i]) && rs__grow((void **)&un, nu, &cap1, sizeof *un)) un[nu++] = rs__strdup(req[i]);
  for (int i = 0; i < nck; ++i)
    if (!in_sorted(req, nreq, ck[i]) && rs__grow((void **)&mi, nm, &cap2, sizeof *mi)) mi[nm++] = rs__strdup(ck[i]);
  free(ck);
  free_list(req, nreq);
  int want_un = mode != RS_STRICT_ASSUME_OK_UNEXPECTED && mode != RS_STRICT_IGNORE_ALL;
  int want_mi = mode == RS_STRICT_LOG_ALL || mode == RS_STRICT_RAISE_ALL || mode == RS_STRICT_RETURN_ALL;
  /* RS_MUTANT 305: return_all reports the unexpected keys but drops the missing ones */
  if (RS_MUTANT(305) && mode == RS_STRICT_RETURN_ALL) want_mi = 0;
  if (!log) log = stderr;
  if (mode == RS_STRICT_LOG_UNEXPECTED || mode == RS_STRICT_LOG_ALL) {
    for (int i = 0; i < nu; ++i) fprintf(log, "ckpt load: unexpected key '%s' (not in the checkpoint)\n", un[i]);
    for (int i = 0; want_mi && i < nm; ++i) fprintf(log, "ckpt load: missing key '%s' (requested by no rank)\n", mi[i]);
  }
  if (want_un) {
    rep->unexpected = un;
    rep->nunexpected = nu;
  }
  if (want_mi) {
    rep->missing = mi;
    rep->nmissing = nm;
    mi = NULL;
  }
  free_list(mi, mi ? nm : 0);
  /* the loader skips unexpected keys in every mode but assume_ok_unexpected */
  *unexpected = malloc(sizeof(char *) * (size_t)(nu + 1));
  *nun = 0;
  if (*unexpected)
    for (int i = 0; i < nu; ++i) (*unexpected)[(*nun)++] = rs__strdup(un[i]);
  if (!want_un) free_list(un, nu);
  if (mode == RS_STRICT_ASSUME_OK_UNEXPECTED && nu)
    return rs_fail(RS_ERR_MISMATCH, "ckpt load: key '%s' is not in the checkpoint (strict mode assume_ok_unexpected)",
                   (*unexpected)[0]);
  if ((mode == RS_STRICT_RAISE_UNEXPECTED || mode == RS_STRICT_RAISE_ALL) && nu)
    return rs_fail(RS_ERR_MISMATCH, "ckpt load: %d unexpected key(s), first '%s' (strict mode %s)", nu,
                   (*unexpected)[0], rs_strict_name(mode));
  if (mode == RS_STRICT_RAISE_ALL && rep->nmissing)
    return rs_fail(RS_ERR_MISMATCH, "ckpt load: %d missing key(s), first '%s' (strict mode raise_all)", rep->nmissing,
                   rep->missing[0]);
  return RS_OK;
}

/* ---- filling one requested entry ---- */
static rs_status load_tensor(rs__reader *rd, int rank, rs_sh_tensor *t) {
  int mi = rs__md_find_tensor(&rd->md, t->key);
  const rs__md_tensor *mt = &rd->md.t[mi];
  if (mt->dtype != t->dtype)
    return rs_fail(RS_ERR_MISMATCH, "key '%s' rank %d: dtype %s requested, the checkpoint holds %s", t->key, rank,
                   rs_dtype_name(t->dtype), rs_dtype_name(mt->dtype));
  int same = mt->ndim == t->ndim;
  for (int d = 0; same && d < t->ndim; ++d) same = mt->shape[d] == t->global_shape[d];
  if (!same && (!t->allow_shape_mismatch || mt->ndim != t->ndim))
    return rs_fail(RS_ERR_MISMATCH, "key '%s' rank %d: global shape differs from the checkpoint's%s", t->key, rank,
                   t->allow_shape_mismatch ? " (dims differ)" : " (allow_shape_mismatch is off)");
  int es = rs_dtype_size(t->dtype);
  int64_t lo = t->has_flat ? t->flat_start : 0, hi;
  rs_status st = rs_sh_tensor_numel(t, &hi, NULL);
  if (st) return st;
  hi += lo;
  /* how many requested elements the stored tensor holds */
  int64_t want = 0, idx[RS_MAX_DIMS];
  for (int64_t i = lo; i < hi; ++i) {
    rs__unflatten(t->ndim, t->local_shape, i, idx);
    int in = 1;
    for (int d = 0; d < t->ndim && in; ++d) in = t->global_offset[d] + idx[d] < mt->shape[d];
    want += in;
  }
  uint8_t *stage = malloc(t->nbytes ? (size_t)t->nbytes : 1);
  if (!stage) return rs_fail(RS_ERR_NOMEM, "out of memory");
  if (t->nbytes) memcpy(stage, t->data, (size_t)t->nbytes);
  int64_t got = 0;
  const int *ord = NULL;
  int from = 0, to = 0;
  if (!st) st = rs__reader_chunk_window(rd, mi, t->ndim ? t->global_offset[0] : 0,
                                        t->ndim ? t->global_offset[0] + t->local_shape[0] : 0, &ord, &from, &to);
  for (int k = from; k < to && !st; ++k) {
    const rs__chunk *ch = &mt->c[ord ? ord[k] : k];
    int64_t io[RS_MAX_DIMS], is[RS_MAX_DIMS];
    if (!rs__box_intersect(t->ndim, t->global_offset, t->local_shape, ch->off, ch->size, io, is)) continue;
    if ((st = rs__reader_check_chunk(rd, mt, ch))) break;
    uint8_t *buf = malloc(ch->length ? (size_t)ch->length : 1);
    if (!buf) {
      st = rs_fail(RS_ERR_NOMEM, "out of memory");
      break;
    }
    if (!(st = rs__reader_read(rd, ch->file, ch->byte_off, ch->length, t->key, buf))) {
      int64_t g[RS_MAX_DIMS], lidx[RS_MAX_DIMS], cidx[RS_MAX_DIMS];
      memcpy(g, io, sizeof g);
      int64_t cfs = ch->has_flat ? ch->flat_start : 0, cfe = ch->has_flat ? ch->flat_stop : ch->length / es;
      /* RS_MUTANT 301: a flattened range is applied to the requesting entry's offsets, not the chunk's */
      const int64_t *base = RS_MUTANT(301) && ch->has_flat ? t->global_offset : ch->off;
      do {
        for (int d = 0; d < t->ndim; ++d) {
          lidx[d] = g[d] - t->global_offset[d];
          cidx[d] = g[d] - base[d];
        }
        int64_t li = rs__flat_index(t->ndim, t->local_shape, lidx);
        int64_t ci = rs__flat_index(t->ndim, ch->size, cidx);
        if (li < lo || li >= hi || ci < cfs || ci >= cfe) continue;
        memcpy(stage + (li - lo) * es, buf + (ci - cfs) * es, (size_t)es);
        got++;
      } while (rs__box_next(t->ndim, io, is, g));
    }
    free(buf);
  }
  if (!st && got != want)
    st = rs_fail(RS_ERR_MISMATCH, "key '%s' rank %d: %lld of %lld requested elements found in the checkpoint",
                 t->key, rank, (long long)got, (long long)want);
  if (!st) {
    if (t->nbytes) memcpy(t->data, stage, (size_t)t->nbytes);
    t->loaded = 1;
  }
  free(stage);
  return st;
}

static rs_status load_object(rs__reader *rd, rs_sh_object *o) {
  char uk[2048], tag[2100];
  rs_sh_object_unique_key(o, uk, sizeof uk);
  int i = rs__md_find_object(&rd->md, uk);
  const rs__md_object *mo = &rd->md.o[i];
  int64_t shp = mo->length;
  rs_status st = rs__reader_check_entry(rd, mo->file, uk, RS_U8, 1, &shp, mo->byte_off, mo->length);
  if (st) return st;
  uint8_t *buf = malloc(mo->length ? (size_t)mo->length : 1);
  if (!buf) return rs_fail(RS_ERR_NOMEM, "out of memory");
  snprintf(tag, sizeof tag, "@%s", uk);
  st = rs__reader_read(rd, mo->file, mo->byte_off, mo->length, tag, buf);
  if (st) {
    free(buf);
    return st;
  }
  free(o->data);
  o->data = buf;
  o->len = mo->length;
  o->loaded = 1;
  return RS_OK;
}

rs_status rs_ref_ckpt_load(rs_ckpt_world *w, const char *root, int64_t step, rs_strict strict,
                           const rs_ckpt_io_opts *io, rs_ckpt_report *rep) {
  rs_ckpt_report dummy;
  if (!rep) rep = &dummy;
  memset(rep, 0, sizeof *rep);
  rs_status st;
  if (step < 0 && (st = rs_ckpt_latest(root, &step))) return st;
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/step_%lld", root, (long long)step);
  rs__reader rd;
  if ((st = rs__reader_open(&rd, dir))) return st;
  for (int r = 0; r < w->n && !st; ++r) st = rs_sd_apply_factories(&w->sd[r]);
  char **un = NULL;
  int nun = 0;
  if (!st) st = strict_check(w, &rd.md, strict, io ? io->log : NULL, rep, &un, &nun);
  for (int r = 0; r < w->n && !st; ++r) {
    rs_state_dict *sd = &w->sd[r];
    for (int i = 0; i < sd->nt && !st; ++i) {
      if (in_sorted(un, nun, sd->t[i].key)) continue;
      st = load_tensor(&rd, r, &sd->t[i]);
      if (!st) rep->tensors_loaded++;
    }
    char uk[2048];
    for (int i = 0; i < sd->no && !st; ++i) {
      rs_sh_object_unique_key(&sd->o[i], uk, sizeof uk);
      if (in_sorted(un, nun, uk)) continue;
      st = load_object(&rd, &sd->o[i]);
      if (!st) rep->objects_loaded++;
    }
    if (!st) {
      /* common entries are the checkpoint's, on every rank */
      for (int i = 0; i < sd->ncommon; ++i) {
        free(sd->common[i].key);
        free(sd->common[i].val);
      }
      sd->ncommon = 0;
      for (int i = 0; i < rd.md.ncommon && !st; ++i)
        st = rs_sd_add_kv(&sd->common, &sd->ncommon, &sd->capc, rd.md.common[i].key, rd.md.common[i].val,
                          rd.md.common[i].len);
    }
  }
  for (int r = 0; r < w->n; ++r) rs_sd_apply_factory_merges(&w->sd[r]);
  rep->bytes_read = rd.bytes_read;
  free_list(un, nun);
  rs__reader_close(&rd);
  if (rep == &dummy) rs_ckpt_report_free(&dummy);
  return st;
}
