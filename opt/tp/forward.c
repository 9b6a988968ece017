/* forward.c - opt's sharded TP forward: the style driver (core/tp) with opt's redistribute (its own
 * minimal-traffic schedule, any transport) and a blocked Linear kernel that keeps a tile of
 * accumulators in registers. Each output element still sums its products in ascending reduction
 * index, one F32 add at a time, then adds the bias: the same bits as ref's loop. With a CUDA device
 * the kernel of opt/cuda/tp_linear.cu runs instead (same order per element, no FMA). */
#include <stdlib.h>
#include <string.h>
#include "core/mutant.h"
#include "core/tp/tp_internal.h"
#include "cuda/cuda_api.h"
#include "reshard/opt.h"

typedef struct ctx {
  rs_opt *o;
  rs_world *w;
} ctx;

/* opt runs its own schedule; the collectives it stands for are the per-mesh-dim transitions
 * from src to dst (the styles change one mesh dim at a time). */
static rs_status redistribute(void *vc, const rs_case *c, const rs_locals *in, rs_locals *out,
                              rs_plan *issued, int64_t *traffic) {
  ctx *x = vc;
  memset(issued, 0, sizeof *issued);
  for (int m = 0; m < c->mesh.ndim; m++)
    if (!rs_pl_equal(c->src.p[m], c->dst.p[m])) {
      if (issued->nsteps >= RS_MAX_STEPS) return rs_fail(RS_ERR_INVALID, "tp: too many steps");
      issued->step[issued->nsteps].mesh_dim = m;
      issued->step[issued->nsteps].from = c->src.p[m];
      issued->step[issued->nsteps].to = c->dst.p[m];
      issued->nsteps++;
    }
  if (x->w) rs_world_posted_reset(x->w);
  rs_status st = rs_opt_redistribute(x->o, x->w, c, in, out, NULL);
  rs_posted *p = NULL;
  int64_t np = 0;
  if (st == RS_OK && x->w && rs_world_posted(x->w, &p, &np) == RS_OK) { /* counted at the transport */
    traffic[0] = traffic[1] = 0;
    for (int64_t i = 0; i < np; i++)
      if (p[i].from != p[i].to && p[i].sent > 0) {
        traffic[0] += p[i].sent;
        traffic[1]++;
      }
    free(p);
  }
  return st;
}

enum { TR = 4, TO = 8 }; /* tile: rows x outputs */

static void tile(const float *x, int64_t r0, int64_t nr, int64_t k, const float *w, int64_t o0, int64_t no,
                 int64_t n, const float *b, float *y) {
  float acc[TR][TO];
  memset(acc, 0, sizeof acc);
  for (int64_t i = 0; i < k; i++)
    for (int64_t r = 0; r < nr; r++) {
      float xv = x[(r0 + r) * k + i];
      for (int64_t o = 0; o < no; o++) acc[r][o] += xv * w[(o0 + o) * k + i];
    }
  for (int64_t r = 0; r < nr; r++)
    for (int64_t o = 0; o < no; o++) y[(r0 + r) * n + o0 + o] = b ? acc[r][o] + b[o0 + o] : acc[r][o];
}

static rs_status linear(void *vc, const float *x, int64_t rows, int64_t k, const float *w, int64_t n,
                        const float *b, float *y) {
  (void)vc;
  if (rows * n >= 4096 && rs_cuda_device_count() > 0 &&
      rs_cuda_tp_linear(x, rows, k, w, n, b, y) == RS_OK)
    return RS_OK;
  for (int64_t r0 = 0; r0 < rows; r0 += TR)
    for (int64_t o0 = 0; o0 < n; o0 += TO)
      tile(x, r0, rows - r0 < TR ? rows - r0 : TR, k, w, o0, n - o0 < TO ? n - o0 : TO, n, b, y);
  /* planted bug: the last output column of every row drops its final product */
  if (RS_MUTANT(504) && k > 1 && n > 0)
    for (int64_t r = 0; r < rows; r++) y[r * n + n - 1] -= x[r * k + k - 1] * w[(n - 1) * k + k - 1];
  return RS_OK;
}

rs_status rs_tp_opt_forward(void *o, void *w, const rs_tp_case *c, rs_tp_result *out) {
  if (!o) return rs_fail(RS_ERR_INVALID, "tp: opt handle is NULL");
  ctx x = {(rs_opt *)o, (rs_world *)w};
  rs__tp_ops ops = {&x, redistribute, linear, 0, -1};
  if (w && !rs_world_is_local((rs_world *)w)) { /* one process per rank: mesh position = world rank */
    if (rs_world_size((rs_world *)w) != c->mesh.nranks)
      return rs_fail(RS_ERR_INVALID, "tp: %d processes for a mesh of %d ranks (--transport mpi runs one per rank)",
                     rs_world_size((rs_world *)w), (int)c->mesh.nranks);
    ops.distributed = 1;
    ops.played = rs_world_rank((rs_world *)w);
  }
  return rs__tp_forward(&ops, c, out);
}
