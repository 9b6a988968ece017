/* ckpt_opt.c - the cross property of opt's checkpoints and its campaign. One case: A saved by ref
 * loads in opt as B (direct or read-once, drawn) equal to the oracle with the reference's strict
 * report and status; A saved by opt verifies, exports byte-identically to ref's checkpoint of A,
 * and loads as B both in ref and in opt (the other read mode), equal to the oracle. Under MPI
 * a case with N <= P ranks runs on P processes (ranks N.. hold empty state dicts), each process
 * holding only its own state dict; ref runs on rank 0 only and every verdict is agreed. */
#define _XOPEN_SOURCE 700
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "core/numflag.h"
#include "core/ckpt/internal.h"
#include "core/json.h"
#include "core/values.h"
#include "props/ckpt_opt.h"
#include "props/report.h"

#define MSG_CAP 1024

/* world of spec s with n >= s->world ranks; under MPI only `me` keeps its state dict */
static rs_status build_padded(const rs_state_spec *s, rs_fill fill, int n, int me, rs_ckpt_world *w) {
  rs_status st = rs_state_spec_build(s, fill, w);
  if (st) return st;
  if (n > w->n) {
    rs_state_dict *sd = realloc(w->sd, sizeof *sd * (size_t)n);
    if (!sd) return rs_fail(RS_ERR_NOMEM, "out of memory");
    w->sd = sd;
    for (int r = w->n; r < n; ++r) {
      memset(&sd[r], 0, sizeof sd[r]);
      sd[r].rank = r;
    }
    w->n = n;
  }
  if (me >= 0)
    for (int r = 0; r < w->n; ++r)
      if (r != me) {
        rs_state_dict_free(&w->sd[r]);
        memset(&w->sd[r], 0, sizeof w->sd[r]);
        w->sd[r].rank = r;
      }
  return RS_OK;
}

static int same_list(char **a, int na, char **b, int nb) {
  if (na != nb) return 0;
  for (int i = 0; i < na; ++i)
    if (strcmp(a[i], b[i]) != 0) return 0;
  return 1;
}


/* A byte that opt's load must read: the first (direct) or the last (read-once) byte of some
 * request's intersection with a stored chunk - inside what either mode reads, whether the chunk
 * is read whole for several ranks or only its requested hull for one. Returns 0 when B requests
 * nothing stored. */
static int pick_byte(const char *root, const rs_state_spec *b, int read_once, char *file, size_t cap, int64_t *at) {
  char path[4400];
  snprintf(path, sizeof path, "%s/step_2/metadata.json", root);
  uint8_t *bytes = NULL;
  size_t n = 0;
  rs__metadata md;
  if (!rs__ckpt_file_bytes(path, &bytes, &n)) return 0;
  int found = 0;
  if (rs__md_parse((const char *)bytes, n, &md) == RS_OK) {
    rs_ckpt_world w;
    if (rs_state_spec_build(b, RS_FILL_INITIAL, &w) == RS_OK) {
      for (int r = 0; r < w.n && !found; ++r) {
        rs_sd_apply_factories(&w.sd[r]);
        for (int i = 0; i < w.sd[r].nt && !found; ++i) {
          const rs_sh_tensor *t = &w.sd[r].t[i];
          int mi = rs__md_find_tensor(&md, t->key);
          if (mi < 0 || md.t[mi].dtype != t->dtype || t->has_flat || t->nbytes == 0) continue;
          for (int c = 0; c < md.t[mi].nc && !found; ++c) {
            const rs__chunk *ch = &md.t[mi].c[c];
            int64_t io[RS_MAX_DIMS], is[RS_MAX_DIMS], rel[RS_MAX_DIMS];
            if (ch->has_flat || ch->length == 0 ||
                !rs__box_intersect(t->ndim, t->global_offset, t->local_shape, ch->off, ch->size, io, is))
              continue;
            for (int d = 0; d < t->ndim; ++d) rel[d] = io[d] - ch->off[d] + (read_once ? is[d] - 1 : 0);
            int es = rs_dtype_size(t->dtype);
            *at = ch->byte_off + rs__flat_index(t->ndim, ch->size, rel) * es + (read_once ? es - 1 : 0);
            snprintf(file, cap, "%s/step_2/%s", root, md.f[ch->file].name);
            found = 1;
          }
        }
      }
      rs_ckpt_world_free(&w);
    }
    rs__md_free(&md);
  }
  free(bytes);
  return found;
}

static int flip(const char *file, int64_t at) {
  FILE *f = fopen(file, "r+b");
  if (!f) return 0;
  int ok = fseek(f, at, SEEK_SET) == 0;
  int c = ok ? fgetc(f) : EOF;
  ok = c != EOF && fseek(f, at, SEEK_SET) == 0 && fputc(c ^ 0x20, f) != EOF;
  fclose(f);
  return ok;
}

typedef struct ctx ctx;
static rs_outcome agree(ctx *x, rs_outcome out, char *msg, size_t cap);

/* one flipped byte that a load reads: opt's load (direct, then read-once) must refuse it */
static rs_outcome corrupt_check(ctx *x, rs_ckpt_case *c, const char *root, char *msg, size_t cap);
struct ctx {
  rs_world *world;
  int P, me, mpi;
  rs_ckpt_opt_opts oo;
  int aligned;               /* the aligned variant: tensor buffers on 4096 bytes (realign_world) */
  int feat[RS_CKPT_OPT_F_COUNT]; /* what this case's step-2 save did (agreed under MPI) */
  int nstage;                /* staging requests of this case's earlier device operations */
  int stage_bufs[32];
  int64_t stage_bytes[32];
};

/* Device worlds pool their staging across operations (opt/ckpt/stage.c): an operation whose
 * buffers fit inside what one earlier operation of this case asked for allocates none. */
static rs_status stage_check(ctx *x, const char *op, const rs_ckpt_opt_stats *s) {
  if (!rs_world_uses_device(x->world) && !(rs_world_is_local(x->world) && rs_opt_ckpt_sim_device())) return RS_OK;
  if (s->stage_bufs <= 0) return RS_OK;
  for (int i = 0; i < x->nstage; ++i)
    if (x->stage_bufs[i] >= s->stage_bufs && x->stage_bytes[i] >= s->stage_bytes && s->stage_allocs)
      return rs_fail(RS_ERR_MISMATCH,
                     "staging pool: opt %s allocated %lld of its %d staging buffers of %lld bytes on a device world "
                     "whose pool already held them (an earlier operation asked for %d of %lld bytes)",
                     op, (long long)s->stage_allocs, s->stage_bufs, (long long)s->stage_bytes, x->stage_bufs[i],
                     (long long)x->stage_bytes[i]);
  if (x->nstage < 32) {
    x->stage_bufs[x->nstage] = s->stage_bufs;
    x->stage_bytes[x->nstage++] = s->stage_bytes;
  }
  return RS_OK;
}

/* the aligned variant: every tensor's host buffer moved onto a 4096-byte boundary, so that a
 * segment of whole 4096-byte chunks can go to an O_DIRECT file straight from it */
static rs_status realign_world(rs_ckpt_world *w) {
  for (int r = 0; r < w->n; ++r)
    for (int i = 0; i < w->sd[r].nt; ++i) {
      rs_sh_tensor *t = &w->sd[r].t[i];
      if (!t->data || t->nbytes <= 0 || !((uintptr_t)t->data & 4095)) continue;
      void *a = NULL;
      if (posix_memalign(&a, 4096, (size_t)t->nbytes)) return rs_fail(RS_ERR_NOMEM, "out of memory");
      memcpy(a, t->data, (size_t)t->nbytes);
      free(t->data);
      t->data = a;
    }
  return RS_OK;
}

/* opt's save and load with the world's tensor data in its device memory when it has one (a
 * local-device world, or RS_SIM_DEVICE=1): moved there before, back to the host after */
static rs_status dev_save(ctx *x, rs_ckpt_world *w, const char *root, int64_t step, const rs_ckpt_opt_opts *o,
                          rs_ckpt_opt_stats *stats) {
  rs_ckpt_opt_stats own;
  if (!stats) stats = &own;
  rs_status st = x->aligned ? realign_world(w) : RS_OK;
  if (!st) st = rs_opt_ckpt_to_device(x->world, w);
  if (st) return st;
  st = rs_opt_ckpt_save(x->world, w, root, step, o, stats);
  if (!st) st = stage_check(x, "save", stats);
  char keep[1024] = "";
  if (st) snprintf(keep, sizeof keep, "%s", rs_last_error());
  rs_status back = rs_opt_ckpt_to_host(x->world, w);
  if (st) return rs_fail(st, "%s", keep);
  return back;
}

/* opt saves spec s (seeds moved by `shift`) at root/step_<step> with options o */
static rs_status save_shifted(ctx *x, const rs_state_spec *s, uint64_t shift, const char *root, int64_t step,
                              const rs_ckpt_opt_opts *o, rs_ckpt_opt_stats *stats) {
  rs_state_spec t;
  rs_status st = rs__ckpt_shifted_spec(s, shift, &t);
  if (st) return st;
  rs_ckpt_world w = {0, NULL};
  st = build_padded(&t, RS_FILL_VALUES, x->mpi ? x->P : t.world, x->mpi ? x->me : -1, &w);
  if (!st) st = dev_save(x, &w, root, step, o, stats);
  rs_ckpt_world_free(&w);
  rs_state_spec_free(&t);
  return st;
}

static rs_status dev_load(ctx *x, rs_ckpt_world *w, const char *root, rs_strict strict, const rs_ckpt_opt_opts *o,
                          rs_ckpt_report *rep) {
  rs_status st = rs_opt_ckpt_to_device(x->world, w);
  if (st) return st;
  rs_ckpt_opt_stats stats;
  st = rs_opt_ckpt_load(x->world, w, root, -1, strict, o, rep, &stats);
  if (!st) st = stage_check(x, "load", &stats);
  char keep[1024] = "";
  if (st) snprintf(keep, sizeof keep, "%s", rs_last_error());
  rs_status back = rs_opt_ckpt_to_host(x->world, w);
  if (st) return rs_fail(st, "%s", keep);
  return back;
}

/* opt load of B from root into a fresh world, compared with the oracle (this process's ranks)
 * and, when ref_st/ref_rep are given, with the reference's status and report */
static rs_outcome opt_load_check(ctx *x, rs_ckpt_case *c, const char *root, int read_once, const rs_ckpt_report *ref_rep,
                                 int check_status, int ref_failed, char *msg, size_t cap) {
  rs_ckpt_world got = {0, NULL}, exp = {0, NULL};
  rs_ckpt_report rep;
  memset(&rep, 0, sizeof rep);
  rs_outcome out = RS_PASS;
  rs_state_spec saved;
  memset(&saved, 0, sizeof saved);
  int n = x->mpi ? x->P : c->b.world;
  if (build_padded(&c->b, RS_FILL_INITIAL, n, x->mpi ? x->me : -1, &got)) {
    snprintf(msg, cap, "build B: %s", rs_last_error());
    return RS_FAIL;
  }
  FILE *devnull = fopen("/dev/null", "w");
  rs_ckpt_opt_opts oo = x->oo;
  oo.read_once = read_once;
  oo.log = devnull;
  rs_status st = dev_load(x, &got, root, c->strict, &oo, &rep);
  if (devnull) fclose(devnull);
  const char *mode = read_once ? "read-once" : "direct";
  rs_ckpt_world e1 = {0, NULL};
  if (check_status) {
    if ((st != RS_OK) != ref_failed) {
      snprintf(msg, cap, "opt load (%s, strict %s) %s where ref %s: %s", mode, rs_strict_name(c->strict),
               st ? "failed" : "succeeded", ref_failed ? "failed" : "succeeded", st ? rs_last_error() : "");
      out = RS_FAIL;
      goto done;
    }
    if (ref_rep && (!same_list(rep.unexpected, rep.nunexpected, ref_rep->unexpected, ref_rep->nunexpected) ||
                    !same_list(rep.missing, rep.nmissing, ref_rep->missing, ref_rep->nmissing))) {
      snprintf(msg, cap, "opt load (%s, strict %s): report differs from ref's (unexpected %d vs %d, missing %d vs %d)",
               mode, rs_strict_name(c->strict), rep.nunexpected, ref_rep->nunexpected, rep.nmissing, ref_rep->nmissing);
      out = RS_FAIL;
      goto done;
    }
    if (ref_failed) goto done;
  } else if (st) {
    snprintf(msg, cap, "opt load (%s) of opt's checkpoint failed: %s", mode, rs_last_error());
    out = RS_FAIL;
    goto done;
  }
  /* expected: the oracle on the load spec, keys the checkpoint lacks keep their initial bytes */
  if (rs_oracle_ckpt_expected(&c->a, &c->b, &e1)) {
    snprintf(msg, cap, "oracle: %s", rs_last_error());
    out = RS_FAIL;
    goto done;
  }
  exp = e1;
  if (n > exp.n) {
    /* padded ranks hold nothing but get the checkpoint's common entries, like every rank */
    rs_state_dict *sd = realloc(exp.sd, sizeof *sd * (size_t)n);
    if (!sd) {
      out = rs_prop_oom(msg, cap, "expected state dicts");
      goto done;
    }
    exp.sd = sd;
    for (int r = exp.n; r < n; ++r) {
      memset(&sd[r], 0, sizeof sd[r]);
      sd[r].rank = r;
      for (int i = 0; i < sd[0].ncommon; ++i)
        rs_sd_add_kv(&sd[r].common, &sd[r].ncommon, &sd[r].capc, sd[0].common[i].key, sd[0].common[i].val,
                     sd[0].common[i].len);
    }
    exp.n = n;
  }
  if (x->mpi)
    for (int r = 0; r < exp.n; ++r)
      if (r != x->me) {
        rs_state_dict_free(&exp.sd[r]);
        memset(&exp.sd[r], 0, sizeof exp.sd[r]);
        exp.sd[r].rank = r;
      }
  char m2[800];
  if (rs_oracle_ckpt_compare(&exp, &got, m2, sizeof m2)) {
    snprintf(msg, cap, "opt load (%s) != oracle: %s", mode, m2);
    out = RS_FAIL;
  }
done:
  rs_state_spec_free(&saved);
  rs_ckpt_report_free(&rep);
  rs_ckpt_world_free(&got);
  rs_ckpt_world_free(&exp);
  return out;
}

/* ref load of B from root on the whole B world (rank 0 only under MPI) == oracle */
static rs_outcome ref_load_check(rs_ckpt_case *c, const char *root, rs_ckpt_report *rep, int *failed, int compare,
                                 char *msg, size_t cap) {
  rs_ckpt_world got = {0, NULL}, exp = {0, NULL};
  rs_outcome out = RS_PASS;
  memset(rep, 0, sizeof *rep);
  if (rs_state_spec_build(&c->b, RS_FILL_INITIAL, &got)) {
    snprintf(msg, cap, "build B: %s", rs_last_error());
    return RS_FAIL;
  }
  FILE *devnull = fopen("/dev/null", "w");
  rs_ckpt_io_opts io = {0, 0, devnull, 0};
  rs_status st = rs_ref_ckpt_load(&got, root, -1, c->strict, &io, rep);
  if (devnull) fclose(devnull);
  *failed = st != RS_OK;
  if (compare && st) {
    snprintf(msg, cap, "ref load of opt's checkpoint failed: %s", rs_last_error());
    out = RS_FAIL;
  } else if (compare) {
    char m2[800];
    if (rs_oracle_ckpt_expected(&c->a, &c->b, &exp)) {
      snprintf(msg, cap, "oracle: %s", rs_last_error());
      out = RS_FAIL;
    } else if (rs_oracle_ckpt_compare(&exp, &got, m2, sizeof m2)) {
      snprintf(msg, cap, "ref load of opt's checkpoint != oracle: %s", m2);
      out = RS_FAIL;
    }
  }
  rs_ckpt_world_free(&got);
  rs_ckpt_world_free(&exp);
  return out;
}

/* every process agrees: any failure fails the case; the first failing rank's message is kept
 * on that rank (rank 0 prints its own or a pointer to the others) */
static rs_outcome agree(ctx *x, rs_outcome out, char *msg, size_t cap) {
  if (!x->mpi) return out;
  /* out of memory on one process is out of memory on all (exit 3 everywhere, nothing shrunk) */
  out = rs_prop_agree_oom(x->world, out, msg, cap);
  if (rs_outcome_is_oom(out)) return out;
  int f = out == RS_FAIL, s = out == RS_SKIP;
  rs_world_agree(x->world, &f);
  rs_world_agree(x->world, &s);
  if (f && out != RS_FAIL) snprintf(msg, cap, "another rank failed (its message is on its own output)");
  return f ? RS_FAIL : s ? RS_SKIP : RS_PASS;
}

static rs_outcome corrupt_check(ctx *x, rs_ckpt_case *c, const char *root, char *msg, size_t cap) {
  rs_outcome out = RS_PASS;
  for (int ro = 0; ro < 2 && out == RS_PASS; ++ro) {
    char file[4400] = "";
    int64_t at = 0;
    int have = 0;
    if (x->me == 0) have = pick_byte(root, &c->b, ro, file, sizeof file, &at) && flip(file, at);
    if (x->mpi) rs_opt_world_bcast(x->world, &have, sizeof have);
    if (!have) return RS_PASS;
    rs_ckpt_world got = {0, NULL};
    int n = x->mpi ? x->P : c->b.world;
    rs_status st = build_padded(&c->b, RS_FILL_INITIAL, n, x->mpi ? x->me : -1, &got);
    rs_ckpt_opt_opts oo = x->oo;
    oo.read_once = ro;
    FILE *devnull = fopen("/dev/null", "w");
    oo.log = devnull;
    if (!st) st = dev_load(x, &got, root, c->strict, &oo, NULL);
    if (devnull) fclose(devnull);
    rs_ckpt_world_free(&got);
    if (st == RS_OK) {
      snprintf(msg, cap, "opt load (%s) accepted a checkpoint with a flipped byte at %s:%lld", ro ? "read-once" : "direct",
               file, (long long)at);
      out = RS_FAIL;
    }
    if (x->me == 0) flip(file, at);
    out = agree(x, out, msg, cap);
  }
  return out;
}

static rs_outcome kind_check(ctx *x, rs_ckpt_case *c, rs_choices *ch, const char *root, char *msg, size_t cap) {
  /* metadata.json, or a data file that B's load must read (pick_byte's) */
  char path[4400], outside[4400];
  int64_t at;
  int which = (int)rs_draw(ch, 2), kind = (int)rs_draw(ch, 2);
  if (which == 0 || !pick_byte(root, &c->b, 0, path, sizeof path, &at))
    snprintf(path, sizeof path, "%s/step_2/metadata.json", root);
  const char *name = strrchr(path, '/') + 1;
  snprintf(outside, sizeof outside, "%s.outside", root);
  uint8_t *keep = NULL;
  size_t kn = 0;
  if (!rs__ckpt_file_bytes(path, &keep, &kn) || !rs__ckpt_plant_kind(path, kind, outside)) {
    free(keep);
    snprintf(msg, cap, "cannot plant a %s at %s", kind ? "FIFO" : "symbolic link", path);
    return RS_FAIL;
  }
  rs_outcome out = rs__ckpt_kind_refused(root, &c->a, path, kind, msg, cap);
  for (int ro = 0; ro < 2 && out == RS_PASS; ++ro) {
    rs_ckpt_world got = {0, NULL};
    rs_ckpt_opt_opts oo = x->oo;
    oo.read_once = ro;
    FILE *devnull = fopen("/dev/null", "w");
    oo.log = devnull;
    rs_status st = build_padded(&c->b, RS_FILL_INITIAL, c->b.world, -1, &got);
    if (!st) st = dev_load(x, &got, root, RS_STRICT_IGNORE_ALL, &oo, NULL);
    if (devnull) fclose(devnull);
    rs_ckpt_world_free(&got);
    if (st != RS_ERR_UNSUPPORTED || !strstr(rs_last_error(), name)) {
      snprintf(msg, cap, "opt load (%s) of a checkpoint whose %s is %s: status %d (want the file kind refused), %s",
               ro ? "read-once" : "direct", name, kind ? "a FIFO" : "a symbolic link", (int)st,
               st ? rs_last_error() : "accepted");
      out = RS_FAIL;
    }
  }
  /* put the file back for what follows */
  unlink(path);
  unlink(outside);
  FILE *f = fopen(path, "wb");
  if (f) {
    if (kn) fwrite(keep, 1, kn, f);
    fclose(f);
  }
  free(keep);
  return out;
}

static rs_outcome crash_check(ctx *x, rs_ckpt_case *c, rs_choices *ch, const char *dir, const char *root, char *msg,
                              size_t cap) {
  /* the same tensors in A2's layout with other values, saved once to count its I/O operations,
   * then again over root with a power loss at a drawn one (or right after the save) */
  char measure[4300];
  snprintf(measure, sizeof measure, "%s/measure", dir);
  rs_ckpt_opt_stats stats;
  rs_ckpt_opt_opts oo = x->oo;
  if (save_shifted(x, &c->a2, 1000003, measure, 3, &oo, &stats)) {
    snprintf(msg, cap, "opt save of A2: %s", rs_last_error());
    return RS_FAIL;
  }
  rs_ckpt_rmtree(measure);
  oo.crash_at = 1 + (int64_t)rs_draw(ch, (uint64_t)stats.io_ops + 1);
  rs_status st = save_shifted(x, &c->a2, 1000003, root, 3, &oo, NULL);
  if (st && !strstr(rs_last_error(), "simulated crash")) {
    snprintf(msg, cap, "opt save of step 3: %s", rs_last_error());
    return RS_FAIL;
  }
  rs_state_spec next;
  if (rs__ckpt_shifted_spec(&c->a2, 1000003, &next)) {
    snprintf(msg, cap, "copy: %s", rs_last_error());
    return RS_FAIL;
  }
  rs_outcome out = rs__ckpt_check_latest(root, 2, &c->a, 3, &next, msg, cap);
  rs_state_spec_free(&next);
  if (out == RS_FAIL) {
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "power loss at I/O operation %lld of %lld of opt's step-3 save: %s", (long long)oo.crash_at,
             (long long)stats.io_ops, msg);
    snprintf(msg, cap, "%s", tmp);
  }
  return out;
}

/* what the step-2 save did: O_DIRECT files, and segments written under O_DIRECT straight from the
 * tensors (its stats, not the draws); every process agrees on each under MPI */
static void save_features(ctx *x, const rs_ckpt_opt_stats *s) {
  x->feat[RS_CKPT_OPT_F_DIRECT] = s->direct;
  x->feat[RS_CKPT_OPT_F_DIRECT_UNSTAGED] = s->direct && s->direct_unstaged > 0;
  if (x->mpi)
    for (int f = 0; f < RS_CKPT_OPT_F_COUNT; ++f) rs_world_agree(x->world, &x->feat[f]);
}

static rs_outcome prop_run(rs_world *world, rs_choices *ch, const char *dir, char *msg, size_t cap, int *feat);

rs_outcome rs_ckpt_opt_prop_run(rs_world *world, rs_choices *ch, const char *dir, char *msg, size_t cap) {
  return prop_run(world, ch, dir, msg, cap, NULL);
}

/* the property; feat (RS_CKPT_OPT_F_COUNT flags, may be NULL) gets what this case exercised */
static rs_outcome prop_run(rs_world *world, rs_choices *ch, const char *dir, char *msg, size_t cap, int *feat) {
  ctx x;
  memset(&x, 0, sizeof x);
  x.world = world;
  x.mpi = !rs_world_is_local(world);
  x.P = rs_world_size(world);
  x.me = rs_world_rank(world);
  rs_ckpt_case c;
  rs_outcome out = RS_PASS;
  if (rs_gen_ckpt_case(ch, &c)) {
    snprintf(msg, cap, "generator: %s", rs_last_error());
    return agree(&x, RS_FAIL, msg, cap);
  }
  static const int64_t BLOCKS[] = {RS_CKPT_BLOCK, 64, 4096};
  static const int64_t SEGS[] = {4096, 8192, (int64_t)1 << 20};
  int64_t block = BLOCKS[rs_draw(ch, 3)];
  x.oo.io_threads = 1 + (int)rs_draw(ch, 3);
  x.oo.segment = SEGS[rs_draw(ch, 3)];
  x.oo.block = block;
  int ro = (int)rs_draw(ch, 2);
  static const int64_t ROUNDS[] = {0, 1, 4096};
  x.oo.round_bytes = ROUNDS[rs_draw(ch, 3)];
  /* drawn last, so older fixtures (shorter streams) replay unchanged with direct = 0. O_DIRECT
   * is real where the scratch directory's file system takes it (ext4: ci/mutation.sh's /tmp);
   * on tmpfs the files fall back to the page cache and only direct mode's logic runs */
  x.oo.direct = rs_draw(ch, 3) == 0;
  /* the aligned variant, 1 in 8 O_DIRECT cases: a tensor of whole 4096-byte chunks (ckpt_gen.c)
   * and every tensor buffer on 4096 bytes, so that O_DIRECT segments can be written unstaged.
   * Drawn only under O_DIRECT and after every older draw, and 1 (not 0, what a fixture's stream
   * reads past its end) picks it: older fixtures replay unchanged */
  x.aligned = x.oo.direct && rs_draw(ch, 8) == 1;
  if (x.aligned && rs_gen_ckpt_aligned(ch, &c)) {
    snprintf(msg, cap, "generator (aligned): %s", rs_last_error());
    rs_ckpt_case_free(&c);
    return agree(&x, RS_FAIL, msg, cap);
  }
  char rr[4200], ro_[4200], e1[4300], e2[4300];
  snprintf(rr, sizeof rr, "%s/ref", dir);
  snprintf(ro_, sizeof ro_, "%s/opt", dir);
  snprintf(e1, sizeof e1, "%s/ref.safetensors", dir);
  snprintf(e2, sizeof e2, "%s/opt.safetensors", dir);
  if (x.mpi && (c.a.world > x.P || c.b.world > x.P)) {
    snprintf(msg, cap, "case needs %d/%d ranks, the world has %d", c.a.world, c.b.world, x.P);
    rs_ckpt_case_free(&c);
    return RS_SKIP;
  }
  rs_ckpt_report ref_rep;
  memset(&ref_rep, 0, sizeof ref_rep);
  int ref_failed = 0;
  /* 1. ref saves A (rank 0), opt loads B */
  if (x.me == 0) {
    rs_ckpt_rmtree(dir);
    mkdir(dir, 0777);
    rs_ckpt_world aw;
    rs_status st = rs_state_spec_build(&c.a, RS_FILL_VALUES, &aw);
    rs_ckpt_io_opts io = {0, 0, NULL, block};
    if (!st) {
      st = rs_ref_ckpt_save(&aw, rr, 1, &io, NULL);
      rs_ckpt_world_free(&aw);
    }
    if (st) {
      snprintf(msg, cap, "ref save A: %s", rs_last_error());
      out = RS_FAIL;
    }
    if (!out) ref_load_check(&c, rr, &ref_rep, &ref_failed, 0, msg, cap);
  }
  /* everyone learns whether ref's load failed (the expected status of opt's) */
  if (x.mpi) {
    int rf = ref_failed;
    rs_opt_world_bcast(world, &rf, sizeof rf);
    ref_failed = rf;
    /* the report lists matter on rank 0 only; the others compare with an empty report */
  }
  if ((out = agree(&x, out, msg, cap)) != RS_PASS) goto done;
  /* the report lists are compared on rank 0, the status everywhere */
  out = opt_load_check(&x, &c, rr, ro, x.me == 0 ? &ref_rep : NULL, 1, ref_failed, msg, cap);
  if ((out = agree(&x, out, msg, cap)) != RS_PASS || ref_failed) goto done;
  /* 2. opt saves A: verify, export == ref's export, ref load == oracle, opt load (other mode) */
  {
    rs_ckpt_world aw = {0, NULL};
    rs_ckpt_opt_stats s2;
    memset(&s2, 0, sizeof s2);
    rs_status st = build_padded(&c.a, RS_FILL_VALUES, x.mpi ? x.P : c.a.world, x.mpi ? x.me : -1, &aw);
    if (!st) st = dev_save(&x, &aw, ro_, 2, &x.oo, &s2);
    rs_ckpt_world_free(&aw);
    save_features(&x, &s2);
    if (st) {
      snprintf(msg, cap, "opt save A: %s", rs_last_error());
      out = RS_FAIL;
    }
  }
  if ((out = agree(&x, out, msg, cap)) != RS_PASS) goto done;
  if (x.me == 0) {
    uint8_t *b1 = NULL, *b2 = NULL;
    size_t n1 = 0, n2 = 0;
    if (rs_ckpt_verify(ro_, NULL)) {
      snprintf(msg, cap, "verify of opt's checkpoint: %s", rs_last_error());
      out = RS_FAIL;
    } else if (rs_ckpt_export(rr, e1) || rs_ckpt_export(ro_, e2)) {
      snprintf(msg, cap, "export: %s", rs_last_error());
      out = RS_FAIL;
    } else if (!rs__ckpt_file_bytes(e1, &b1, &n1) || !rs__ckpt_file_bytes(e2, &b2, &n2) || n1 != n2 || memcmp(b1, b2, n1)) {
      snprintf(msg, cap, "export of opt's checkpoint differs from ref's (%zu vs %zu bytes)", n2, n1);
      out = RS_FAIL;
    } else {
      rs_ckpt_report rep2;
      int f2 = 0;
      out = ref_load_check(&c, ro_, &rep2, &f2, 1, msg, cap);
      rs_ckpt_report_free(&rep2);
    }
    free(b1);
    free(b2);
  }
  if ((out = agree(&x, out, msg, cap)) != RS_PASS) goto done;
  out = opt_load_check(&x, &c, ro_, !ro, NULL, 0, 0, msg, cap);
  if ((out = agree(&x, out, msg, cap)) != RS_PASS) goto done;
  out = corrupt_check(&x, &c, ro_, msg, cap);
  if (out != RS_PASS) goto done;
  /* 4. a second opt save over the committed step is refused, as ref's is (one rule) */
  {
    rs_status st = save_shifted(&x, &c.a, 0, ro_, 2, &x.oo, NULL);
    if (st != RS_ERR_INVALID || !strstr(rs_last_error(), "already holds a checkpoint")) {
      snprintf(msg, cap, "opt save over the committed step_2: %s (want it refused as ref refuses it)",
               st ? rs_last_error() : "accepted");
      out = RS_FAIL;
    }
    if ((out = agree(&x, out, msg, cap)) != RS_PASS) goto done;
  }
  /* 5, 6 (one process only; drawn last, so older fixtures replay unchanged): a data file or
   * metadata.json that is a link or a FIFO is refused by both loads, verify and export; a power
   * loss at any counted I/O operation of a second opt save leaves a `latest` that loads */
  if (!x.mpi) {
    out = kind_check(&x, &c, ch, ro_, msg, cap);
    if (out == RS_PASS) out = crash_check(&x, &c, ch, dir, ro_, msg, cap);
  }
done:
  if (feat) memcpy(feat, x.feat, sizeof x.feat);
  rs_ckpt_report_free(&ref_rep);
  rs_ckpt_case_free(&c);
  return out;
}

const char *rs_ckpt_opt_feature_name(int f) {
  static const char *const names[RS_CKPT_OPT_F_COUNT] = {"odirect_save", "odirect_save_unstaged"};
  return f >= 0 && f < RS_CKPT_OPT_F_COUNT ? names[f] : "?";
}

int rs_ckpt_opt_feature_required(const rs_ckpt_opt_campaign_result *r, int f) {
  /* where the scratch file system takes O_DIRECT (some save had O_DIRECT files), the aligned
   * variant must reach the unstaged O_DIRECT write; on tmpfs nothing can */
  return f == RS_CKPT_OPT_F_DIRECT_UNSTAGED && r->feat[RS_CKPT_OPT_F_DIRECT] > 0;
}

rs_status rs_ckpt_opt_replay(const uint64_t *v, size_t n, const char *scratch, int *failed, char *msg, size_t cap) {
  rs_choices ch;
  rs_status st = rs_choices_replay(&ch, v, n);
  if (st) return st;
  *failed = rs_ckpt_opt_prop_run(NULL, &ch, scratch, msg, cap) == RS_FAIL;
  rs_choices_free(&ch);
  return RS_OK;
}

rs_outcome rs__ckpt_opt_case(rs_world *world, rs_choices *ch, const char *dir, char *msg, size_t cap, int *feat) {
  return prop_run(world, ch, dir, msg, cap, feat);
}

/* the campaign loop is the runner's (props/ckpt_campaign.c drives it for ref, opt and both) */
rs_status rs_ckpt_opt_campaign_run(rs_world *world, const rs_ckpt_campaign *o, rs_ckpt_opt_campaign_result *r) {
  return rs__ckpt_campaign(world, o, RS__CKPT_OPT, NULL, r);
}

rs_status rs_ckpt_both_campaign_run(rs_world *world, const rs_ckpt_campaign *o, rs_ckpt_campaign_result *ref,
                                    rs_ckpt_opt_campaign_result *opt) {
  return rs__ckpt_campaign(world, o, RS__CKPT_REF | RS__CKPT_OPT, ref, opt);
}
