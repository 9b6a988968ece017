/* exec.c - opt's P2P executor over a copy service (SPEC 10). For the ranks this process plays:
 * every receive is posted first, then every send, then the local transfers (src == dst) are copied
 * while the messages travel, then the copy service's run() completes them and staged receives are
 * unpacked. On the built-in host services ("local", "mpi") a transfer that travels alone is posted
 * as a strided view of its box on both sides: the bytes go from the source box to the destination
 * box with no staging here (the local matcher copies view to view in one pass; MPI sends a
 * contiguous view in place, stages a strided one itself and unpacks each staged receive as its
 * message completes). On plug-ins and "nccl" (plain bytes) a send whose box is one contiguous byte range of
 * the sender's local tensor goes out in place, else it is packed into a staging buffer; a receive
 * is written back "direct" (received in place: one contiguous byte range), "copy" (staging, then
 * unpacked into the box). An MXFP8 destination is always "transform" (staging, then into the
 * parameter's BF16 accumulator; the accumulator is quantized to MXFP8 once, after every slice has
 * landed). Posts of one direction are issued in plan order on every process, so transports that
 * match in issue order (MPI per tag, NCCL) pair them the same way. Each (sender, receiver) pair
 * gets one message per call for its transfers under 1 MiB (a local world of more than 256 ranks
 * excepted): they are packed back to back in plan order, travel under the first one's task id and
 * are posted at the last one's place in plan order; the receiver unpacks them the same way. Larger
 * transfers travel alone. Destinations are reused from an earlier call's output and staging is
 * pooled in the copy service, so a repeated move allocates and faults in nothing. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/mutant.h"
#include "core/p2p/p2p_internal.h"
#include "opt_internal.h"
#include "p2p/opt_p2p.h"

rs_status rs__mxfp8_quantize_any(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale, const char *what,
                                 int *on_device);

rs_status rs_p2p_opt_plan(const rs_p2p_model *m, rs_p2p_plan *out) { return rs__p2p_opt_plan(m, -1, out); }

rs_status rs_p2p_opt_plan_rank(const rs_p2p_model *m, int32_t rank, rs_p2p_plan *out) {
  /* a rank past the model's world is idle: it keeps nothing, but still gets the plan's figures */
  if (rank < 0) return rs_fail(RS_ERR_INVALID, "opt p2p: rank %d is negative", rank);
  return rs__p2p_opt_plan(m, rank, out);
}

/* 1 when `region` is one contiguous row-major byte range of a buffer holding box `buf`. */
static int contiguous(int nd, const rs_box *buf, const rs_box *region) {
  if (RS_MUTANT(405)) return 1; /* direct writeback for any box */
  int d = 0;
  while (d < nd && region->size[d] == 1) d++;
  for (int k = d + 1; k < nd; ++k)
    if (region->size[k] != buf->size[k]) return 0;
  return 1;
}

static int inside(int nd, const rs_box *buf, const rs_box *region) {
  for (int d = 0; d < nd; ++d)
    if (region->size[d] < 0 || region->start[d] < buf->start[d] ||
        region->start[d] + region->size[d] > buf->start[d] + buf->size[d])
      return 0;
  return 1;
}

static int64_t byte_offset(int nd, int es, const rs_box *buf, const rs_box *region) {
  int64_t off = 0;
  for (int d = 0; d < nd; ++d) off = off * buf->size[d] + (region->start[d] - buf->start[d]);
  return off * es;
}

typedef struct xstate {
  int64_t send_off, recv_off; /* staging offsets, -1: in place or not played */
  int8_t wb;                  /* 0 none, 1 direct, 2 copy, 3 transform, 4 strided (a view, no staging) */
} xstate;

typedef struct ectx {
  const rs_p2p_model *m;
  const rs_p2p_plan *plan;
  rs_p2p_locals *out;
  uint16_t ***acc; /* [param][pos] BF16 accumulators of played MXFP8 destinations */
} ectx;

static void xfer_boxes(const ectx *c, const rs_p2p_xfer *x, int which, rs_box *buf, rs_box *region,
                       int64_t *pos) {
  const rs_tensor *t = &c->m->param[x->param].t;
  *pos = rs_p2p_pos(c->m, which, x->param, which == RS_P2P_SRC ? x->src : x->dst);
  rs_p2p_box(c->m, which, x->param, *pos, buf->start, buf->size);
  if (t->ndim) { /* a plan of scalars only has no coordinates at all */
    memcpy(region->start, c->plan->coords + x->box, (size_t)t->ndim * sizeof(int64_t));
    memcpy(region->size, c->plan->coords + x->box + t->ndim, (size_t)t->ndim * sizeof(int64_t));
  }
}

/* Destination buffer (local tensor, or the BF16 accumulator of an MXFP8 parameter). */
static char *dst_base(const ectx *c, int64_t p, int64_t pos) {
  return c->acc[p] ? (char *)c->acc[p][pos] : c->out->loc[p][pos].data;
}

/* The planted "quantize per slice" bug: quantize what has landed so far, then forget it. */
static rs_status slice_quantize(const ectx *c, int64_t p, int64_t pos) {
  rs_p2p_local *l = &c->out->loc[p][pos];
  int dev;
  rs_status st = rs__mxfp8_quantize_any(c->acc[p][pos], l->numel, (uint8_t *)l->data, l->scale,
                                        c->m->param[p].name, &dev);
  memset(c->acc[p][pos], 0, (size_t)l->numel * 2);
  return st;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Transfers of at least this many bytes travel alone (in place when contiguous): packing them would
 * only add copies. Smaller ones between a pair are coalesced. Both sides know every transfer's size,
 * so they split the same way. */
#define RS_P2P_COALESCE_MAX ((int64_t)1 << 20)

/* The small transfers between this process's rank and one peer in one direction. Two or more travel
 * as one message: packed back to back in plan order at `off` in the staging buffer, tagged `task`. */
typedef struct pair {
  int32_t n;
  int64_t bytes, off, fill, task, first, last;
} pair;

static int coalesced(const pair *p) { return p && p->n >= 2; }

/* Pairs are indexed by peer when one rank is played (rank >= 0), else by src * nw + dst. */
typedef struct pairs {
  pair *send, *recv;
  int32_t nw, rank;
} pairs;

/* A local world of more ranks than this keeps one message per transfer (nw^2 pair slots). */
#define RS_P2P_PAIRS_LOCAL_MAX 256

/* The pair a transfer of `bytes` belongs to on the sending (is_recv 0) or receiving side (NULL: it
 * travels alone). */
static pair *pair_of(const pairs *P, const rs_p2p_xfer *x, int64_t bytes, int is_recv) {
  pair *a = is_recv ? P->recv : P->send;
  if (!a || bytes >= RS_P2P_COALESCE_MAX) return NULL;
  if (P->rank >= 0) return &a[is_recv ? x->src : x->dst];
  return &a[(int64_t)x->src * P->nw + x->dst];
}

/* Count the transfers per peer pair and direction. */
static rs_status count_pairs(const rs_p2p_model *m, const rs_p2p_plan *plan, int32_t rank, pairs *P) {
  int32_t nw = rank + 1;
  for (int64_t i = 0; i < plan->n; ++i) {
    if (plan->x[i].src >= nw) nw = plan->x[i].src + 1;
    if (plan->x[i].dst >= nw) nw = plan->x[i].dst + 1;
  }
  P->nw = nw;
  P->rank = rank;
  if (rank < 0 && nw > RS_P2P_PAIRS_LOCAL_MAX) return RS_OK; /* no coalescing */
  int64_t n = rank >= 0 ? nw : (int64_t)nw * nw;
  P->send = calloc((size_t)n, sizeof *P->send);
  P->recv = calloc((size_t)n, sizeof *P->recv);
  if (!P->send || !P->recv) return rs_fail(RS_ERR_NOMEM, "opt p2p: out of memory");
  for (int64_t i = 0; i < plan->n; ++i) {
    const rs_p2p_xfer *x = &plan->x[i];
    if (x->src == x->dst || (rank >= 0 && x->src != rank && x->dst != rank)) continue;
    const rs_tensor *t = &m->param[x->param].t;
    int64_t bytes = rs__p2p_numel(t->ndim, plan->coords + x->box + t->ndim) * rs_dtype_size(t->dtype);
    if (!bytes) continue;
    for (int side = 0; side < 2; ++side) {
      if (rank >= 0 && (side ? x->dst : x->src) != rank) continue;
      pair *p = pair_of(P, x, bytes, side);
      if (!p) continue;
      if (!p->n++) {
        p->task = x->task;
        p->first = i;
        p->off = -1;
      }
      p->last = i;
      p->bytes += bytes;
    }
  }
  return RS_OK;
}

/* Staging offset of one transfer's bytes inside its pair's message (placing the message first). */
static int64_t pair_slot(pair *p, int64_t *staged, int64_t bytes, int is_recv) {
  if (p->off < 0) {
    p->off = p->fill = *staged;
    *staged += p->bytes;
  }
  int64_t at = p->fill;
  /* Mutant 900: the receiver never advances through a coalesced message: every piece is unpacked
   * from the message's first bytes. */
  if (!(is_recv && RS_MUTANT(900))) p->fill += bytes;
  return at;
}

/* Under MPI (or NCCL) every process posts its messages or none does. A process that could not
 * allocate its destinations or staging would otherwise leave its peers waiting for messages it
 * never sends or receives until their --timeout (exit 4 everywhere, after minutes). One agreement
 * of every process's status: every process then fails at once, out of memory on every process
 * when one ran out (exit 3, no verdict), with its own message where it failed. */
static rs_status agree_before_exchange(rs_copy_service *cs, rs_status st) {
  if (!cs->w || rs_world_is_local(cs->w)) return st;
  int flags;
  /* RS_MUTANT 956: a process that failed before the exchange does not say so (its peers wait) */
  rs_status a = rs_world_agree_status(cs->w, RS_MUTANT(956) ? RS_OK : st, &flags);
  if (a || st) return a ? a : st;
  if (flags & RS_AGREE_NOMEM) return rs_fail(RS_ERR_NOMEM, "opt p2p: another process ran out of memory before the exchange");
  if (flags & RS_AGREE_FAILED) return rs_fail(RS_ERR_TRANSPORT, "opt p2p: another process failed before the exchange (its message is on its own output)");
  return RS_OK;
}

/* Caller-owned destinations (rs_p2p_locals_layout): every played entry has a buffer, and an MXFP8
 * one its scales. RS_MUTANT 905: the executor allocates destinations of its own in their place
 * (the caller's buffers are left as they were). */
static rs_status check_borrowed(const rs_p2p_model *m, int32_t rank, rs_p2p_locals *out) {
  const rs_p2p_config *c = &m->cfg[RS_P2P_DST];
  if (!out->loc || out->which != RS_P2P_DST || out->nparams != m->nparams)
    return rs_fail(RS_ERR_INVALID, "opt p2p: caller-owned destinations: not the destination layout of this model "
                   "(rs_p2p_locals_layout(model, RS_P2P_DST, rank, ...))");
  for (int64_t p = 0; p < m->nparams; ++p) {
    const rs_p2p_mesh *me = &c->mesh[c->place[p].mesh];
    if (out->npos[p] != me->nranks)
      return rs_fail(RS_ERR_INVALID, "opt p2p: caller-owned destinations: %s has %lld positions, the model %d",
                     m->param[p].name, (long long)out->npos[p], (int)me->nranks);
    for (int64_t q = 0; q < me->nranks; ++q) {
      const rs_p2p_local *l = &out->loc[p][q];
      if (rank >= 0 && me->ranks[q] != rank) continue;
      if (!l->data || (m->param[p].transform == RS_XFORM_MXFP8 && !l->scale))
        return rs_fail(RS_ERR_INVALID, "opt p2p: caller-owned destinations: %s on rank %d has no %s buffer",
                       m->param[p].name, (int)me->ranks[q], l->data ? "scale" : "data");
    }
  }
  if (RS_MUTANT(905)) {
    rs_p2p_locals copy;
    if (rs_p2p_locals_alloc(m, RS_P2P_DST, rank, &copy) == RS_OK) {
      rs_p2p_locals_free(out);
      *out = copy;
    }
  }
  return RS_OK;
}

rs_status rs_p2p_opt_execute(const rs_p2p_model *m, const rs_p2p_plan *plan, rs_copy_service *cs,
                             int32_t rank, const rs_p2p_locals *src, rs_p2p_locals *out,
                             rs_p2p_exec_stats *stats) {
  rs_p2p_exec_stats sx;
  memset(&sx, 0, sizeof sx);
  double t0 = now_s();
  sx.reused = out->loc && out->which == RS_P2P_DST && out->nparams == m->nparams;
  /* a failure before the exchange falls through to the agreement below, never returns early */
  rs_status st = out->borrowed ? check_borrowed(m, rank, out)
                 : sx.reused   ? RS_OK
                               : rs_p2p_locals_alloc(m, RS_P2P_DST, rank, out);
  ectx c = {m, plan, out, NULL};
  xstate *xs = malloc((size_t)(plan->n ? plan->n : 1) * sizeof *xs);
  c.acc = calloc((size_t)(m->nparams ? m->nparams : 1), sizeof *c.acc);
  pairs PR = {NULL, NULL, 0, rank};
  char *stage = NULL;
  if (!xs || !c.acc) st = rs_fail(RS_ERR_NOMEM, "opt p2p: out of memory");
  for (int64_t p = 0; p < m->nparams && !st; ++p) {
    if (m->param[p].transform != RS_XFORM_MXFP8) continue;
    if (!(c.acc[p] = calloc((size_t)(out->npos[p] ? out->npos[p] : 1), sizeof **c.acc))) {
      st = rs_fail(RS_ERR_NOMEM, "opt p2p: out of memory");
      break;
    }
    for (int64_t q = 0; q < out->npos[p] && !st; ++q)
      if (out->loc[p][q].data && !(c.acc[p][q] = calloc((size_t)out->loc[p][q].numel + 1, 2)))
        st = rs_fail(RS_ERR_NOMEM, "opt p2p: out of memory");
  }
  if (!st) st = count_pairs(m, plan, rank, &PR);
  double t1 = now_s();
  sx.sec_alloc = t1 - t0;
  /* The built-in host services take strided views: a lone transfer then goes straight from the
   * source box into the destination box (the local matcher copies view to view; MPI sends a
   * contiguous view in place and stages a strided one itself, unpacking it as it lands), never
   * through this executor's staging. */
  struct rs_comm *comm = rs__cs_comm(cs);
  /* pass 1: decide writebacks and staging offsets */
  int64_t staged = 0;
  for (int64_t i = 0; i < plan->n && !st; ++i) {
    const rs_p2p_xfer *x = &plan->x[i];
    const rs_tensor *t = &m->param[x->param].t;
    int es = rs_dtype_size(t->dtype), nd = t->ndim;
    int psrc = rank < 0 || x->src == rank, pdst = rank < 0 || x->dst == rank;
    int64_t bytes = rs__p2p_numel(nd, plan->coords + x->box + nd) * es;
    xs[i].send_off = xs[i].recv_off = -1;
    xs[i].wb = 0;
    rs_box sb, db, region;
    int64_t sq = -1, dq = -1;
    if (psrc) xfer_boxes(&c, x, RS_P2P_SRC, &sb, &region, &sq);
    if (pdst) xfer_boxes(&c, x, RS_P2P_DST, &db, &region, &dq);
    if ((psrc && sq < 0) || (pdst && dq < 0) || (psrc && !inside(nd, &sb, &region)) || (pdst && !inside(nd, &db, &region))) {
      st = rs_fail(RS_ERR_INVALID, "opt p2p: task %lld names a rank that does not hold its box of %s", (long long)x->task,
                   m->param[x->param].name);
      break;
    }
    if (x->src == x->dst || bytes == 0) continue; /* a local copy (after posting), or nothing to move */
    if (psrc) {
      sx.bytes_sent += bytes;
      pair *pp = pair_of(&PR, x, bytes, 0);
      if (coalesced(pp)) {
        xs[i].send_off = pair_slot(pp, &staged, bytes, 0);
      } else if (!comm && !contiguous(nd, &sb, &region) && !RS_MUTANT(410)) { /* 410: in-place send of any box */
        xs[i].send_off = staged;
        staged += bytes;
      }
    }
    if (pdst) {
      pair *pp = pair_of(&PR, x, bytes, 1);
      if (c.acc[x->param]) xs[i].wb = 3;
      else if (contiguous(nd, &db, &region) && !coalesced(pp)) xs[i].wb = 1;
      else if (comm && !coalesced(pp)) xs[i].wb = 4;
      else xs[i].wb = 2;
      if (coalesced(pp)) xs[i].recv_off = pair_slot(pp, &staged, bytes, 1);
      else if (xs[i].wb >= 2 && xs[i].wb <= 3) {
        xs[i].recv_off = staged;
        staged += bytes;
      }
    }
  }
  if (!st && !(stage = rs__cs_stage(cs, staged))) st = rs_fail(RS_ERR_NOMEM, "opt p2p: out of memory");
  if (rank >= 0) st = agree_before_exchange(cs, st);
  /* pass 2a, in plan order: every receive is posted before any send, so that no message arrives
   * unexpected (MPI would buffer it and copy it twice); a coalesced pair's message at its last
   * transfer's place */
  for (int64_t i = 0; i < plan->n && !st; ++i) {
    const rs_p2p_xfer *x = &plan->x[i];
    if (!xs[i].wb) continue; /* not received by a played rank */
    const rs_tensor *t = &m->param[x->param].t;
    int es = rs_dtype_size(t->dtype), nd = t->ndim;
    int64_t bytes = rs__p2p_numel(nd, plan->coords + x->box + nd) * es;
    pair *pp = pair_of(&PR, x, bytes, 1);
    int64_t task = RS_MUTANT(402) && (x->task % 7) == 3 ? x->task + 1 : x->task; /* ids that do not match */
    if (coalesced(pp)) {
      if (pp->last == i) st = rs_copy_service_recv(cs, x->dst, stage + pp->off, pp->bytes, x->src, task == x->task ? pp->task : task);
    } else {
      rs_box b, region;
      int64_t q;
      xfer_boxes(&c, x, RS_P2P_DST, &b, &region, &q);
      rs_view v;
      if (xs[i].recv_off >= 0) rs_view_packed(&v, stage + xs[i].recv_off, es, nd, region.size);
      else rs_view_in_box(&v, out->loc[x->param][q].data, es, nd, &b, &region);
      if (RS_MUTANT(935) && xs[i].wb == 4) { /* 935: a strided receive lands at its buffer's first element */
        memcpy(region.start, b.start, sizeof region.start);
        rs_view_in_box(&v, out->loc[x->param][q].data, es, nd, &b, &region);
      }
      st = comm ? rs__cs_post_view(cs, 1, x->dst, &v, x->src, task)
                : rs_copy_service_recv(cs, x->dst, v.base, bytes, x->src, task);
    }
    if (!st) st = rs_copy_service_tally(cs, x->dst, x->param, bytes, 1);
    sx.direct += xs[i].wb == 1;
    sx.copy += xs[i].wb == 2;
    sx.transform += xs[i].wb == 3;
    sx.strided += xs[i].wb == 4;
  }
  /* pass 2b, in plan order: pack a staged send and post it at once (a coalesced pair's message at
   * its last transfer, once all its pieces are in) */
  for (int64_t i = 0; i < plan->n && !st; ++i) {
    const rs_p2p_xfer *x = &plan->x[i];
    if (x->src == x->dst || (rank >= 0 && x->src != rank)) continue;
    const rs_tensor *t = &m->param[x->param].t;
    int es = rs_dtype_size(t->dtype), nd = t->ndim;
    int64_t bytes = rs__p2p_numel(nd, plan->coords + x->box + nd) * es;
    if (bytes == 0) continue;
    rs_box b, region;
    int64_t q;
    xfer_boxes(&c, x, RS_P2P_SRC, &b, &region, &q);
    char *base = src->loc[x->param][q].data;
    rs_view v;
    rs_view_in_box(&v, base, es, nd, &b, &region);
    if (xs[i].send_off >= 0) rs_views_pack(stage + xs[i].send_off, &v, 1);
    pair *pp = pair_of(&PR, x, bytes, 0);
    if (coalesced(pp)) {
      if (pp->last == i) {
        st = rs_copy_service_send(cs, x->src, stage + pp->off, pp->bytes, x->dst, pp->task);
        sx.messages++;
      }
    } else {
      if (xs[i].send_off >= 0) rs_view_packed(&v, stage + xs[i].send_off, es, nd, region.size);
      else if (RS_MUTANT(410) || contiguous(nd, &b, &region)) /* 410: in-place send of any box */
        rs_view_packed(&v, base + byte_offset(nd, es, &b, &region), es, nd, region.size);
      st = comm ? rs__cs_post_view(cs, 0, x->src, &v, x->dst, x->task)
                : rs_copy_service_send(cs, x->src, v.base, bytes, x->dst, x->task);
      sx.messages++;
    }
    /* each piece counted for its parameter as it goes out (alone or inside its pair's message) */
    if (!st) st = rs_copy_service_tally(cs, x->src, x->param, bytes, 0);
  }
  double t2 = now_s();
  sx.sec_pack = t2 - t1;
  /* pass 2c: local copies while the messages travel */
  for (int64_t i = 0; i < plan->n && !st; ++i) {
    const rs_p2p_xfer *x = &plan->x[i];
    if (x->src != x->dst || (rank >= 0 && x->src != rank)) continue;
    if (sx.reused && RS_MUTANT(901)) continue; /* 901: a reused destination keeps last call's local copies */
    const rs_tensor *t = &m->param[x->param].t;
    int es = rs_dtype_size(t->dtype), nd = t->ndim;
    rs_box sb, db, region;
    int64_t sq, dq;
    xfer_boxes(&c, x, RS_P2P_SRC, &sb, &region, &sq);
    xfer_boxes(&c, x, RS_P2P_DST, &db, &region, &dq);
    rs_view dv, sv;
    rs_view_in_box(&sv, src->loc[x->param][sq].data, es, nd, &sb, &region);
    rs_view_in_box(&dv, dst_base(&c, x->param, dq), es, nd, &db, &region);
    rs_view_copy(&dv, &sv);
    sx.local++;
    sx.bytes_local += rs__p2p_numel(nd, region.size) * es;
    if (c.acc[x->param] && RS_MUTANT(404)) st = slice_quantize(&c, x->param, dq);
  }
  double t3 = now_s();
  sx.sec_local = t3 - t2;
  if (!st) st = rs_copy_service_run(cs);
  double t4 = now_s();
  sx.sec_wait = t4 - t3;
  /* pass 3: copy and transform writebacks */
  for (int64_t i = 0; i < plan->n && !st; ++i) {
    if (xs[i].recv_off < 0) continue;
    const rs_p2p_xfer *x = &plan->x[i];
    const rs_tensor *t = &m->param[x->param].t;
    int es = rs_dtype_size(t->dtype), nd = t->ndim;
    rs_box b, region;
    int64_t q;
    xfer_boxes(&c, x, RS_P2P_DST, &b, &region, &q);
    rs_view v;
    rs_view_in_box(&v, dst_base(&c, x->param, q), es, nd, &b, &region);
    rs_views_unpack(&v, 1, stage + xs[i].recv_off);
    if (xs[i].wb == 3 && RS_MUTANT(404)) st = slice_quantize(&c, x->param, q);
  }
  /* quantize every MXFP8 destination once, after all its slices have landed */
  for (int64_t p = 0; p < m->nparams && !st && !RS_MUTANT(404); ++p) {
    if (!c.acc[p]) continue;
    for (int64_t q = 0; q < out->npos[p] && !st; ++q) {
      rs_p2p_local *l = &out->loc[p][q];
      if (!l->data) continue;
      int dev = 0;
      st = rs__mxfp8_quantize_any(c.acc[p][q], l->numel, (uint8_t *)l->data, l->scale, m->param[p].name, &dev);
      sx.mxfp8_device |= dev;
    }
  }
  sx.sec_unpack = now_s() - t4;
  for (int64_t p = 0; c.acc && p < m->nparams; ++p) {
    if (!c.acc[p]) continue;
    for (int64_t q = 0; q < out->npos[p]; ++q) free(c.acc[p][q]);
    free(c.acc[p]);
  }
  free(c.acc);
  free(xs);
  free(PR.send);
  free(PR.recv);
  if (st && !out->borrowed) rs_p2p_locals_free(out);
  else if (!st && stats) *stats = sx;
  return st;
}
