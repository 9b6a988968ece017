/* tools.c - verify, inspect and export of a checkpoint (root or step directory). Verify reads every
 * byte through the checked reader and holds the safetensors headers to metadata.json entry by
 * entry; export assembles whole tensors in key order so its bytes never depend on the layout. */
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/checked.h"
#include "core/mutant.h"
#include "core/ckpt/internal.h"
#include "core/ckpt/io.h"
#include "ref/ckpt/reader.h"

static rs_status open_any(const char *dir, rs__reader *rd) {
  char *sd;
  rs_status st = rs_ckpt_resolve_dir(dir, &sd);
  if (st) return st;
  st = rs__reader_open(rd, sd);
  free(sd);
  return st;
}

rs_status rs_ckpt_verify(const char *dir, FILE *out) {
  rs__reader rd;
  rs_status st = open_any(dir, &rd);
  if (st) return st;
  int64_t nchunks = 0, bytes = 0;
  for (int f = 0; f < rd.md.nf && !st; ++f) {
    const rs__md_file *mf = &rd.md.f[f];
    /* block by block: the sizes come from the (checked, but possibly hostile) metadata, so
     * never allocate a whole file's size */
    uint8_t *blk = malloc((size_t)(mf->block < mf->size ? mf->block : mf->size) + 1);
    if (!blk) {
      st = rs_fail(RS_ERR_NOMEM, "out of memory");
      break;
    }
    for (int64_t o = 0; o < mf->size && !st; o += mf->block) {
      /* RS_MUTANT 310: verify never reads (so never checks) the last block of a data file */
      if (RS_MUTANT(310) && o + mf->block >= mf->size && o > 0) break;
      st = rs__reader_read(&rd, f, o, mf->size - o < mf->block ? mf->size - o : mf->block, "(whole file)", blk);
    }
    free(blk);
    bytes += mf->size;
    if (st) break;
    const rs__st_header *h;
    if ((st = rs__reader_header(&rd, f, &h))) break;
    /* every header entry is a chunk or an object of metadata.json */
    int used = 0;
    for (int i = 0; i < rd.md.nt; ++i)
      for (int k = 0; k < rd.md.t[i].nc; ++k) used += rd.md.t[i].c[k].file == f;
    for (int i = 0; i < rd.md.no; ++i) used += rd.md.o[i].file == f;
    if (used != h->n)
      st = rs_fail(RS_ERR_IO, "file %s: %d tensors in its safetensors header, metadata.json lists %d", mf->name, h->n,
                   used);
  }
  for (int i = 0; i < rd.md.nt && !st; ++i)
    for (int k = 0; k < rd.md.t[i].nc && !st; ++k, ++nchunks) st = rs__reader_check_chunk(&rd, &rd.md.t[i], &rd.md.t[i].c[k]);
  for (int i = 0; i < rd.md.no && !st; ++i) {
    const rs__md_object *o = &rd.md.o[i];
    int64_t shp = o->length;
    st = rs__reader_check_entry(&rd, o->file, o->ukey, RS_U8, 1, &shp, o->byte_off, o->length);
  }
  if (!st && out)
    fprintf(out, "ok: %s step %lld: %d tensors, %lld chunks, %d objects, %d common, %d files, %lld bytes, every digest matches\n",
            rd.dir, (long long)rd.md.step, rd.md.nt, (long long)nchunks, rd.md.no, rd.md.ncommon, rd.md.nf,
            (long long)bytes);
  rs__reader_close(&rd);
  return st;
}

static void print_ints(FILE *o, const int64_t *v, int n) {
  fputc('[', o);
  for (int i = 0; i < n; ++i) fprintf(o, "%s%lld", i ? "," : "", (long long)v[i]);
  fputc(']', o);
}

static void print_str(FILE *o, const char *s) {
  fputc('"', o);
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\') fputc('\\', o);
    fputc(*s, o);
  }
  fputc('"', o);
}

rs_status rs_ckpt_inspect(const char *dir, int json, FILE *out) {
  rs__reader rd;
  rs_status st = open_any(dir, &rd);
  if (st) return st;
  const rs__metadata *m = &rd.md;
  int64_t bytes = 0;
  for (int f = 0; f < m->nf; ++f) bytes += m->f[f].size;
  if (json) {
    fprintf(out, "{\"dir\":");
    print_str(out, rd.dir);
    fprintf(out, ",\"step\":%lld,\"version\":%d,\"bytes\":%lld,\"files\":[", (long long)m->step, RS_CKPT_VERSION,
            (long long)bytes);
    for (int f = 0; f < m->nf; ++f) {
      fprintf(out, "%s{\"name\":", f ? "," : "");
      print_str(out, m->f[f].name);
      fprintf(out, ",\"size\":%lld,\"blocks\":%d}", (long long)m->f[f].size, m->f[f].nblocks);
    }
    fprintf(out, "],\"tensors\":[");
    for (int i = 0; i < m->nt; ++i) {
      const rs__md_tensor *t = &m->t[i];
      fprintf(out, "%s{\"key\":", i ? "," : "");
      print_str(out, t->key);
      fprintf(out, ",\"dtype\":\"%s\",\"shape\":", rs_dtype_name(t->dtype));
      print_ints(out, t->shape, t->ndim);
      fprintf(out, ",\"chunks\":[");
      for (int k = 0; k < t->nc; ++k) {
        const rs__chunk *c = &t->c[k];
        fprintf(out, "%s{\"offsets\":", k ? "," : "");
        print_ints(out, c->off, t->ndim);
        fprintf(out, ",\"sizes\":");
        print_ints(out, c->size, t->ndim);
        if (c->has_flat) fprintf(out, ",\"flat\":[%lld,%lld]", (long long)c->flat_start, (long long)c->flat_stop);
        fprintf(out, ",\"file\":");
        print_str(out, m->f[c->file].name);
        fprintf(out, ",\"offset\":%lld,\"length\":%lld}", (long long)c->byte_off, (long long)c->length);
      }
      fprintf(out, "]}");
    }
    fprintf(out, "],\"objects\":[");
    for (int i = 0; i < m->no; ++i) {
      fprintf(out, "%s{\"key\":", i ? "," : "");
      print_str(out, m->o[i].ukey);
      fprintf(out, ",\"file\":");
      print_str(out, m->f[m->o[i].file].name);
      fprintf(out, ",\"length\":%lld}", (long long)m->o[i].length);
    }
    fprintf(out, "],\"common\":[");
    for (int i = 0; i < m->ncommon; ++i) {
      fprintf(out, "%s", i ? "," : "");
      print_str(out, m->common[i].key);
    }
    fprintf(out, "]}\n");
  } else {
    fprintf(out, "%s: step %lld, format %s v%d, %d files (%lld bytes), %d tensors, %d objects, %d common entries\n",
            rd.dir, (long long)m->step, RS_CKPT_FORMAT, RS_CKPT_VERSION, m->nf, (long long)bytes, m->nt, m->no,
            m->ncommon);
    for (int i = 0; i < m->nt; ++i) {
      const rs__md_tensor *t = &m->t[i];
      int flat = 0;
      for (int k = 0; k < t->nc; ++k) flat += t->c[k].has_flat;
      fprintf(out, "  tensor %-40s %-8s ", t->key, rs_dtype_name(t->dtype));
      print_ints(out, t->shape, t->ndim);
      fprintf(out, "  %d chunks%s\n", t->nc, flat ? " (flattened)" : "");
    }
    for (int i = 0; i < m->no; ++i)
      fprintf(out, "  object %-40s %lld bytes\n", m->o[i].ukey, (long long)m->o[i].length);
    for (int i = 0; i < m->ncommon; ++i) fprintf(out, "  common %s\n", m->common[i].key);
  }
  rs__reader_close(&rd);
  return RS_OK;
}

/* A whole tensor assembled from its chunks. */
static rs_status whole_tensor(rs__reader *rd, const rs__md_tensor *t, uint8_t *out) {
  int es = rs_dtype_size(t->dtype);
  for (int k = 0; k < t->nc; ++k) {
    const rs__chunk *c = &t->c[k];
    rs_status st = rs__reader_check_chunk(rd, t, c);
    if (st) return st;
    uint8_t *buf = malloc(c->length ? (size_t)c->length : 1);
    if (!buf) return rs_fail(RS_ERR_NOMEM, "out of memory");
    if ((st = rs__reader_read(rd, c->file, c->byte_off, c->length, t->key, buf))) {
      free(buf);
      return st;
    }
    int64_t n = c->length / es, first = c->has_flat ? c->flat_start : 0, idx[RS_MAX_DIMS];
    for (int64_t i = 0; i < n; ++i) {
      rs__unflatten(t->ndim, c->size, first + i, idx);
      for (int d = 0; d < t->ndim; ++d) idx[d] += c->off[d];
      memcpy(out + rs__flat_index(t->ndim, t->shape, idx) * es, buf + i * es, (size_t)es);
    }
    free(buf);
  }
  return RS_OK;
}

/* OUT is written whole or not at all: into "OUT.tmp-<pid>" beside it (created, never through a
 * link), fsynced, renamed over OUT (a symbolic link at OUT is replaced, not written through; an
 * earlier OUT stays until the new one is complete), then its directory fsynced. An OUT in the
 * step directory being exported is refused: the rename would replace one of its files. */
static rs_status write_out(const char *out, const char *stepdir, const char *hdr, size_t hl, const rs__st_entry *e,
                           uint8_t *const *data, int n) {
  char parent[4200], rp_parent[PATH_MAX], rp_step[PATH_MAX];
  const char *slash = strrchr(out, '/');
  if (slash) snprintf(parent, sizeof parent, "%.*s", (int)(slash - out) ? (int)(slash - out) : 1, out);
  else snprintf(parent, sizeof parent, ".");
  /* RS_MUTANT 960: the export writes into the step directory it reads */
  if (realpath(parent, rp_parent) && realpath(stepdir, rp_step) && !RS_MUTANT(960)) {
    if (strcmp(rp_parent, rp_step) == 0)
      return rs_fail(RS_ERR_UNSUPPORTED, "%s: inside the checkpoint's step directory %s (it would replace a file of "
                     "the checkpoint it exports)", out, stepdir);
    /* the root beside the step directories: its `latest` is the checkpoint's pointer */
    char *up = strrchr(rp_step, '/');
    if (up) *up = 0;
    if (strcmp(rp_parent, *rp_step ? rp_step : "/") == 0 && strcmp(slash ? slash + 1 : out, "latest") == 0)
      return rs_fail(RS_ERR_UNSUPPORTED, "%s: the checkpoint root's latest pointer (refused)", out);
  }
  char tmp[4300];
  snprintf(tmp, sizeof tmp, "%s.tmp-%ld", out, (long)getpid());
  /* the checkpoint layer's counted I/O: create, write, fsync, rename, directory fsync */
  rs__io io;
  rs__io_init(&io, NULL);
  int fd = -1;
  rs_status st = rs__io_create(&io, tmp, O_EXCL | O_NOFOLLOW, &fd);
  for (int i = -1; i < n && !st; ++i)
    st = rs__io_write_all(fd, tmp, i < 0 ? (const void *)hdr : data[i], i < 0 ? hl : (size_t)(e[i].end - e[i].begin));
  if (!st) st = rs__io_fsync_fd(&io, fd, tmp);
  if (fd >= 0 && close(fd) != 0 && !st) st = rs_fail(RS_ERR_IO, "%s: close failed (%s)", tmp, strerror(errno));
  if (!st) st = rs__io_rename(&io, tmp, out);
  if (st && fd >= 0) unlink(tmp);
  if (!st) st = rs__io_fsync_dir(&io, parent);
  rs__io_free(&io);
  return st;
}

rs_status rs_ckpt_export(const char *dir, const char *out_path) {
  rs__reader rd;
  rs_status st = open_any(dir, &rd);
  if (st) return st;
  const rs__metadata *m = &rd.md;
  int n = m->nt + m->no;
  rs__st_entry *e = calloc((size_t)n + 1, sizeof *e);
  uint8_t **data = calloc((size_t)n + 1, sizeof *data);
  rs_kv *meta = calloc((size_t)m->ncommon + 2, sizeof *meta);
  char **mkeys = calloc((size_t)m->ncommon + 1, sizeof *mkeys);
  if (!e || !data || !meta || !mkeys) st = rs_fail(RS_ERR_NOMEM, "out of memory");
  int64_t at = 0;
  /* metadata tensors and objects are sorted by key already (the saver sorts; the parser keeps order) */
  for (int i = 0; i < m->nt && !st; ++i) {
    const rs__md_tensor *t = &m->t[i];
    int64_t nb;
    rs_tensor tt = {t->dtype, t->ndim, {0}};
    memcpy(tt.shape, t->shape, sizeof tt.shape);
    if ((st = rs_tensor_nbytes(&tt, &nb))) break;
    e[i].name = t->key;
    e[i].dtype = t->dtype;
    e[i].ndim = t->ndim;
    memcpy(e[i].shape, t->shape, sizeof e[i].shape);
    e[i].begin = at;
    e[i].end = at += nb;
    if (!(data[i] = malloc(nb ? (size_t)nb : 1))) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    else st = whole_tensor(&rd, t, data[i]);
  }
  for (int i = 0; i < m->no && !st; ++i) {
    const rs__md_object *o = &m->o[i];
    int k = m->nt + i;
    e[k].name = o->ukey;
    e[k].dtype = RS_U8;
    e[k].ndim = 1;
    e[k].shape[0] = o->length;
    e[k].begin = at;
    e[k].end = at += o->length;
    if (!(data[k] = malloc(o->length ? (size_t)o->length : 1))) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    else if (!(st = rs__reader_check_entry(&rd, o->file, o->ukey, RS_U8, 1, &o->length, o->byte_off, o->length))) {
      char tag[2100];
      snprintf(tag, sizeof tag, "@%s", o->ukey);
      st = rs__reader_read(&rd, o->file, o->byte_off, o->length, tag, data[k]);
    }
  }
  int nmeta = 0;
  if (!st) {
    meta[nmeta++] = (rs_kv){"format", (uint8_t *)"pt", 2};
    /* RS_MUTANT 308: the export records the step, so two saves of the same state differ */
    static char stepbuf[32];
    if (RS_MUTANT(308))
      meta[nmeta++] = (rs_kv){"step", (uint8_t *)stepbuf, snprintf(stepbuf, sizeof stepbuf, "%lld", (long long)m->step)};
    for (int i = 0; i < m->ncommon; ++i) {
      size_t l = strlen(m->common[i].key) + 8;
      if (!(mkeys[i] = malloc(l))) {
        st = rs_fail(RS_ERR_NOMEM, "out of memory");
        break;
      }
      snprintf(mkeys[i], l, "common.%s", m->common[i].key);
      meta[nmeta++] = (rs_kv){mkeys[i], m->common[i].val, m->common[i].len};
    }
  }
  char *hdr = NULL;
  size_t hl = 0;
  if (!st) st = rs__st_header_bytes(e, n, meta, nmeta, &hdr, &hl);
  if (!st) st = write_out(out_path, rd.dir, hdr, hl, e, data, n);
  free(hdr);
  for (int i = 0; data && i < n; ++i) free(data[i]);
  for (int i = 0; mkeys && i < m->ncommon; ++i) free(mkeys[i]);
  free(data);
  free(e);
  free(meta);
  free(mkeys);
  rs__reader_close(&rd);
  return st;
}

rs_status rs_ref_ckpt_catalog(const char *root, int64_t step, const rs_state_spec *load, rs_state_spec *saved) {
  memset(saved, 0, sizeof *saved);
  rs_status st;
  if (step < 0 && (st = rs_ckpt_latest(root, &step))) return st;
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/step_%lld", root, (long long)step);
  rs__reader rd;
  if ((st = rs__reader_open(&rd, dir))) return st;
  if ((st = rs_state_spec_copy(load, saved))) {
    rs__reader_close(&rd);
    return st;
  }
  int k = 0;
  for (int i = 0; i < saved->nt; ++i) {
    int m = rs__md_find_tensor(&rd.md, saved->t[i].key);
    if (m < 0) {
      free(saved->t[i].key);
      continue;
    }
    rs_spec_tensor t = saved->t[i];
    t.dtype = t.t.dtype = rd.md.t[m].dtype;
    t.t.ndim = rd.md.t[m].ndim;
    memcpy(t.t.shape, rd.md.t[m].shape, sizeof t.t.shape);
    saved->t[k++] = t;
  }
  saved->nt = k;
  k = 0;
  for (int i = 0; i < saved->no; ++i) {
    int found = 0;
    char prefix[1100];
    snprintf(prefix, sizeof prefix, "%s/shard_", saved->o[i].key);
    int jf = -1;
    for (int j = 0; j < rd.md.no && !found; ++j)
      if ((found = strncmp(rd.md.o[j].ukey, prefix, strlen(prefix)) == 0)) jf = j;
    /* the shard grid is the checkpoint's (the load spec may ask for another one): read it back
     * from the unique key "key/shard_<offsets>_<grid>" so the oracle enumerates saved shards */
    if (found) {
      const char *g = strrchr(rd.md.o[jf].ukey + strlen(prefix), '_');
      int nd = 0;
      int64_t sz[RS_MAX_MESH_DIMS];
      for (const char *q = g ? g + 1 : ""; g && *q && nd < RS_MAX_MESH_DIMS;) {
        char *e;
        long long v = strtoll(q, &e, 10);
        if (e == q || v < 1) break;
        sz[nd++] = v;
        q = *e == '.' ? e + 1 : e;
      }
      rs_spec_object *o = &saved->o[i];
      o->mesh.ndim = o->ndims = nd;
      for (int d = 0; d < nd; ++d) {
        o->mesh.size[d] = sz[d];
        o->dims[d] = d;
      }
    }
    if (!found) {
      free(saved->o[i].key);
      continue;
    }
    saved->o[k++] = saved->o[i];
  }
  saved->no = k;
  rs__reader_close(&rd);
  return RS_OK;
}
