/* save.c - the reference save: one process plays every rank in turn. Each rank writes its main
 * replicas into one safetensors file; then, in this order (SPEC 11's commit protocol): every data
 * file fsynced, metadata.json through a temp file + fsync + rename + directory fsync, and `latest`
 * the same way. A crash at any point leaves `latest` naming a complete checkpoint. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>
#include "core/ckpt/internal.h"
#include "core/mutant.h"
#include "core/ckpt/io.h"

typedef struct saver {
  rs__metadata md;
  char **paths; /* data files written, to fsync */
  int npaths, cappaths;
  int64_t block;
} saver;

/* Writes rank r's file (if it holds any main replica) and records its chunks. */
static rs_status save_rank(saver *s, rs__io *io, const rs_state_dict *sd, const char *dir) {
  int n = 0;
  for (int i = 0; i < sd->nt; ++i) {
    const rs_sh_tensor *t = &sd->t[i];
    if (!rs__md_tensor_for(&s->md, t)) return rs_fail(RS_ERR_NOMEM, "out of memory");
    /* RS_MUTANT 304: a non-main replica is written (and counted) as well */
    int main = rs_replica_is_main(&t->replica) || (RS_MUTANT(304) && t->replica.v[0] == 1);
    if (main && t->nbytes > 0) n++;
  }
  for (int i = 0; i < sd->no; ++i) n += rs_replica_is_main(&sd->o[i].replica);
  if (n == 0) return RS_OK;
  rs__st_entry *e = calloc((size_t)n, sizeof *e);
  const uint8_t **src = calloc((size_t)n, sizeof *src);
  int *ti = calloc((size_t)n, sizeof *ti);
  if (!e || !src || !ti) {
    free(e);
    free(src);
    free(ti);
    return rs_fail(RS_ERR_NOMEM, "out of memory");
  }
  int k = 0;
  int64_t at = 0;
  char name[2200];
  rs_status st = RS_OK;
  for (int i = 0; i < sd->nt; ++i) {
    const rs_sh_tensor *t = &sd->t[i];
    int main = rs_replica_is_main(&t->replica) || (RS_MUTANT(304) && t->replica.v[0] == 1);
    if (!main || t->nbytes == 0) continue;
    rs__chunk_name(t->key, t->ndim, t->global_offset, t->has_flat, t->flat_start, name, sizeof name);
    e[k].name = rs__strdup(name);
    e[k].dtype = t->dtype;
    if (t->has_flat) {
      e[k].ndim = 1;
      e[k].shape[0] = t->flat_stop - t->flat_start;
    } else {
      e[k].ndim = t->ndim;
      memcpy(e[k].shape, t->local_shape, sizeof e[k].shape);
    }
    e[k].begin = at;
    e[k].end = at += t->nbytes;
    src[k] = t->data;
    ti[k] = i;
    k++;
  }
  int first_obj = k;
  for (int i = 0; i < sd->no; ++i) {
    const rs_sh_object *o = &sd->o[i];
    if (!rs_replica_is_main(&o->replica)) continue;
    rs_sh_object_unique_key(o, name, sizeof name);
    e[k].name = rs__strdup(name);
    e[k].dtype = RS_U8;
    e[k].ndim = 1;
    e[k].shape[0] = o->len;
    e[k].begin = at;
    e[k].end = at += o->len;
    src[k] = o->data;
    ti[k] = i;
    k++;
  }
  for (int i = 0; i < k; ++i)
    if (!e[i].name) st = rs_fail(RS_ERR_NOMEM, "out of memory");
  rs_kv meta = {"format", (uint8_t *)"pt", 2};
  char *hdr = NULL;
  size_t hl = 0;
  if (!st) st = rs__st_header_bytes(e, k, &meta, 1, &hdr, &hl);
  uint8_t *file = NULL;
  size_t flen = hl + (size_t)at;
  if (!st && !(file = malloc(flen + 1))) st = rs_fail(RS_ERR_NOMEM, "out of memory");
  char fname[64], path[4400];
  snprintf(fname, sizeof fname, "rank_%d.safetensors", sd->rank);
  snprintf(path, sizeof path, "%s/%s", dir, fname);
  if (!st) {
    memcpy(file, hdr, hl);
    for (int i = 0; i < k; ++i)
      if (e[i].end > e[i].begin) memcpy(file + hl + e[i].begin, src[i], (size_t)(e[i].end - e[i].begin));
    st = rs__io_write_file(io, path, file, flen);
  }
  if (!st) {
    /* the file's entry in metadata: size and block digests */
    rs__metadata *m = &s->md;
    if (!rs__grow((void **)&m->f, m->nf, &m->capf, sizeof *m->f)) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    else {
      rs__md_file *f = &m->f[m->nf];
      memset(f, 0, sizeof *f);
      f->name = rs__strdup(fname);
      f->size = (int64_t)flen;
      size_t bs = (size_t)s->block;
      f->block = s->block;
      f->nblocks = (int)((flen + bs - 1) / bs);
      f->digest = malloc(sizeof(uint64_t) * (size_t)(f->nblocks + 1));
      if (!f->name || !f->digest) st = rs_fail(RS_ERR_NOMEM, "out of memory");
      for (int b = 0; !st && b < f->nblocks; ++b) {
        size_t o = (size_t)b * bs, l = flen - o < bs ? flen - o : bs;
        f->digest[b] = XXH3_64bits(file + o, l);
      }
      m->nf++;
    }
  }
  for (int i = 0; !st && i < k; ++i) {
    int fi = s->md.nf - 1;
    if (i < first_obj) {
      const rs_sh_tensor *t = &sd->t[ti[i]];
      rs__md_tensor *mt = rs__md_tensor_for(&s->md, t);
      if (!mt || !rs__grow((void **)&mt->c, mt->nc, &mt->capc, sizeof *mt->c)) {
        st = rs_fail(RS_ERR_NOMEM, "out of memory");
        break;
      }
      rs__chunk *c = &mt->c[mt->nc++];
      memset(c, 0, sizeof *c);
      memcpy(c->off, t->global_offset, sizeof c->off);
      memcpy(c->size, t->local_shape, sizeof c->size);
      c->has_flat = t->has_flat;
      c->flat_start = t->flat_start;
      c->flat_stop = t->flat_stop;
      c->file = fi;
      c->byte_off = (int64_t)hl + e[i].begin;
      c->length = e[i].end - e[i].begin;
    } else {
      rs__metadata *m = &s->md;
      if (!rs__grow((void **)&m->o, m->no, &m->capo, sizeof *m->o)) {
        st = rs_fail(RS_ERR_NOMEM, "out of memory");
        break;
      }
      rs__md_object *o = &m->o[m->no++];
      o->ukey = rs__strdup(e[i].name);
      o->file = fi;
      o->byte_off = (int64_t)hl + e[i].begin;
      o->length = e[i].end - e[i].begin;
    }
  }
  if (!st && rs__grow((void **)&s->paths, s->npaths, &s->cappaths, sizeof *s->paths))
    s->paths[s->npaths++] = rs__strdup(path);
  for (int i = 0; i < k; ++i) free(e[i].name);
  free(e);
  free(src);
  free(ti);
  free(hdr);
  free(file);
  return st;
}

static rs_status commit_file(rs__io *io, const char *dir, const char *name, const void *bytes, size_t len) {
  char tmp[4200], dst[4200];
  snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
  snprintf(dst, sizeof dst, "%s/%s", dir, name);
  rs_status st = rs__io_write_file(io, tmp, bytes, len);
  if (!st) st = rs__io_fsync(io, tmp);
  if (!st) st = rs__io_rename(io, tmp, dst);
  /* RS_MUTANT 309: metadata.json's rename is never made durable (no directory fsync) */
  if (RS_MUTANT(309) && strcmp(name, "metadata.json") == 0) return st;
  if (!st) st = rs__io_fsync_dir(io, dir);
  return st;
}

static rs_status sync_data(saver *s, rs__io *io) {
  for (int i = 0; i < s->npaths; ++i) {
    rs_status st = rs__io_fsync(io, s->paths[i]);
    if (st) return st;
  }
  return RS_OK;
}

static void drop_built(rs_ckpt_world *w) {
  for (int r = 0; r < w->n; ++r) {
    for (int i = 0; i < w->sd[r].nt; ++i) w->sd[r].t[i].loaded = 0;
    rs_sd_apply_factory_merges(&w->sd[r]);
  }
}

rs_status rs_ref_ckpt_save(rs_ckpt_world *w, const char *root, int64_t step,
                           const rs_ckpt_io_opts *iop, int64_t *ops) {
  if (step < 0) return rs_fail(RS_ERR_INVALID, "step: %lld (must be >= 0)", (long long)step);
  if (strlen(root) > 4000) return rs_fail(RS_ERR_INVALID, "root: path too long");
  rs_status st = rs__ckpt_refuse_committed(root, step);
  if (st) return st;
  for (int r = 0; r < w->n && !st; ++r) st = rs_sd_apply_factories(&w->sd[r]);
  if (!st) st = rs_ckpt_validate(w);
  if (st) {
    drop_built(w);
    return st;
  }
  rs__io io;
  rs__io_init(&io, iop);
  saver s;
  memset(&s, 0, sizeof s);
  s.md.step = step;
  s.block = iop && iop->block ? iop->block : RS_CKPT_BLOCK;
  if (s.block < 64 || s.block > (1 << 30) || (s.block & (s.block - 1))) {
    rs__io_free(&io);
    drop_built(w);
    return rs_fail(RS_ERR_INVALID, "block: %lld (a power of two in [64, 2^30])", (long long)s.block);
  }
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/step_%lld", root, (long long)step);
  st = rs__io_mkdir(&io, root);
  if (!st) st = rs__io_mkdir(&io, dir);
  for (int r = 0; r < w->n && !st; ++r) st = save_rank(&s, &io, &w->sd[r], dir);
  /* keys that only non-main or empty entries hold are still part of the checkpoint */
  for (int r = 0; r < w->n && !st; ++r)
    for (int i = 0; i < w->sd[r].nt && !st; ++i)
      if (!rs__md_tensor_for(&s.md, &w->sd[r].t[i])) st = rs_fail(RS_ERR_NOMEM, "out of memory");
  /* RS_MUTANT 303: metadata and latest are committed before the data files are synced */
  if (!st && !RS_MUTANT(303)) st = sync_data(&s, &io);
  if (!st) {
    rs__md_sort(&s.md);
    const rs_state_dict *r0 = &w->sd[0];
    for (int i = 0; i < r0->ncommon && !st; ++i)
      st = rs_sd_add_kv(&s.md.common, &s.md.ncommon, &s.md.capc, r0->common[i].key, r0->common[i].val,
                        r0->common[i].len);
  }
  char *mdb = NULL;
  size_t mdl = 0;
  if (!st) st = rs__md_write(&s.md, &mdb, &mdl);
  if (!st) st = commit_file(&io, dir, "metadata.json", mdb, mdl);
  if (!st) {
    char latest[64];
    int n = snprintf(latest, sizeof latest, "%lld\n", (long long)step);
    st = commit_file(&io, root, "latest", latest, (size_t)n);
  }
  if (!st && RS_MUTANT(303)) st = sync_data(&s, &io);
  /* crash_at past the last operation: the power fails right after the save returned, which
   * loses whatever the commit protocol did not make durable */
  if (!st && io.crash_at > io.ops) {
    rs__io_power_loss(&io);
    st = rs_fail(RS_ERR_IO, "simulated crash after the save completed (%lld I/O operations)", (long long)io.ops);
  }
  free(mdb);
  if (ops) *ops = io.ops;
  for (int i = 0; i < s.npaths; ++i) free(s.paths[i]);
  free(s.paths);
  rs__md_free(&s.md);
  rs__io_free(&io);
  drop_built(w);
  return st;
}
