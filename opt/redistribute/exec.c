/* exec.c - runs a compiled schedule over a world's transport: per round, every message whose sender
 * this process plays is submitted as a send of views into the sender's buffers, every message whose
 * receiver it plays as a receive into views of the receiver's buffers, local segments are copied
 * directly, then the comm runs. Between the rounds of a reduction each job is folded in canonical
 * order; partition divisors are applied to the outputs last. Buffers are host or device memory as
 * the world says. */
#include <stdlib.h>
#include <string.h>
#include "redistribute/exec.h"
#include "cuda/cuda_api.h"
#include "core/mutant.h"
#include "core/values.h"

/* The view of one end of a segment. */
static void seg_view(const rs_sched *s, const rs_exec_bufs *b, const rs_seg *g, int end, rs_view *v) {
  int pos = end ? g->dst : g->src;
  int buf = end ? g->dbuf : g->sbuf;
  switch (buf) {
    case RS_BUF_IN:
      rs_view_in_box(v, b->in[pos], s->esize, s->ndim, &s->in_box[pos], &g->box);
      break;
    case RS_BUF_OUT:
      rs_view_in_box(v, b->out[pos], s->esize, s->ndim, &s->out_box[pos], &g->box);
      break;
    default: {
      const rs_job *j = &s->job[g->job];
      int64_t slot = buf == RS_BUF_SLOT ? g->contrib : 0;
      char *p = b->ws[pos] + j->ws_off + slot * j->numel * s->esize;
      rs_view_in_box(v, p, s->esize, s->ndim, &j->box, &g->box);
      break;
    }
  }
}

static rs_status run_round(const rs_sched *s, const rs_exec_bufs *b, const rs_mesh *m,
                           rs_comm *comm, int round, int stale_ws) {
  const rs_round *rd = &s->round[round];
  rs_status st = RS_OK;
  rs_view *v = malloc(sizeof(rs_view) * (size_t)(rd->nseg * 2 + 2));
  int32_t *vsrc = malloc(sizeof(int32_t) * (size_t)(rd->nmsg + 1));
  int32_t *first_in = malloc(sizeof(int32_t) * (size_t)s->nranks);
  rs_view *sv, *dv;
  int32_t nl = 0;
  if (!v || !vsrc || !first_in) {
    st = rs_fail(RS_ERR_NOMEM, "opt exec: out of memory");
    goto done;
  }
  sv = v;
  dv = v + rd->nseg;
  for (int32_t i = 0; i < rd->nmsg; ++i) vsrc[i] = i;
  if (RS_MUTANT(106)) {
    /* Mutant 106: a receiver's first two incoming messages trade task ids. */
    for (int i = 0; i < s->nranks; ++i) first_in[i] = -1;
    for (int32_t i = 0; i < rd->nmsg; ++i) {
      int32_t d = rd->msg[i].dst;
      if (first_in[d] == -1) first_in[d] = i;
      else if (first_in[d] >= 0) {
        vsrc[i] = first_in[d];
        vsrc[first_in[d]] = i;
        first_in[d] = -2;
      }
    }
  }
  for (int32_t i = 0; i < rd->nseg; ++i) {
    const rs_seg *g = &rd->seg[i];
    if (b->played[g->src]) seg_view(s, b, g, 0, &sv[i]);
    if (b->played[g->dst]) seg_view(s, b, g, 1, &dv[i]);
  }
  for (int32_t i = 0; i < rd->nmsg && !st; ++i) {
    const rs_msg *mg = &rd->msg[i];
    if (b->played[mg->src])
      st = comm->ops->submit_send(comm, m->ranks[mg->src], m->ranks[mg->dst], mg->task,
                                  &sv[mg->first], mg->count);
  }
  for (int32_t i = 0; i < rd->nmsg && !st; ++i) {
    const rs_msg *mg = &rd->msg[i], *vm = &rd->msg[vsrc[i]];
    if (b->played[mg->dst])
      st = comm->ops->submit_recv(comm, m->ranks[mg->dst], m->ranks[mg->src], mg->task,
                                  &dv[vm->first], vm->count);
  }
  /* local segments: no transport */
  for (int32_t i = rd->local0; i < rd->nseg && !st; ++i) {
    const rs_seg *g = &rd->seg[i];
    if (!b->played[g->src]) continue;
    /* Mutant 103: a reused workspace keeps its stale local contributions. */
    if (RS_MUTANT(103) && stale_ws && g->dbuf == RS_BUF_SLOT) continue;
    sv[nl] = sv[i];
    dv[nl] = dv[i];
    nl++;
  }
  /* on the host in-process transport the local copies join the transfers' batch in run() */
  if (!st && nl && !b->device && rs__comm_local_defer(comm, dv, sv, nl)) nl = 0;
  if (!st && nl) st = b->device ? rs_cuda_copy_views(dv, sv, nl) : rs_views_copy_batch(dv, sv, nl);
  if (!st) st = comm->ops->run(comm);
done:
  free(v);
  free(vsrc);
  free(first_in);
  return st;
}

rs_status rs_exec_sched(const rs_sched *s, const rs_exec_bufs *b, const rs_mesh *m, rs_comm *comm,
                        int stale_ws) {
  rs_status st = run_round(s, b, m, comm, 0, stale_ws);
  if (st) return st;
  if (s->nrounds == 2) {
    for (int32_t j = 0; j < s->njob && !st; ++j) {
      const rs_job *jb = &s->job[j];
      if (!b->played[jb->reducer]) continue;
      char *slot0 = b->ws[jb->reducer] + jb->ws_off;
      if (RS_MUTANT(206) && !b->device)
        /* Mutant 206: partition divisions applied to the contributions before the fold. */
        for (int k = 0; k < s->ndiv; ++k) rs_arith_div(s->dtype, slot0, s->div[k], jb->numel * s->ncontrib);
      if (b->device) st = rs_cuda_fold(s->dtype, s->nlevel, s->level_n, s->level_op, slot0, jb->numel);
      else rs_fold_job(s, slot0, jb->numel);
    }
    if (!st) st = run_round(s, b, m, comm, 1, stale_ws);
    if (st) return st;
  }
  for (int p = 0; p < s->nranks && !st; ++p) {
    if (!b->played[p]) continue;
    int64_t n = rs_box_numel(s->ndim, &s->out_box[p]);
    for (int k = 0; k < s->ndiv && !st && !(RS_MUTANT(206) && s->nrounds == 2 && !b->device); ++k) {
      /* Mutant 652: the partitions' divisions in descending mesh dim, not the canonical order. */
      int64_t dv = s->div[RS_MUTANT(652) ? s->ndiv - 1 - k : k];
      if (b->device) st = rs_cuda_div(s->dtype, b->out[p], dv, n);
      else rs_arith_div(s->dtype, b->out[p], dv, n);
    }
  }
  if (!st && b->device) st = rs_cuda_sync();
  return st;
}
