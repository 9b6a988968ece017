/* count.c - the byte-counting layer every transport is wrapped in (local, local-device, MPI, NCCL
 * and any transport added behind comm.h): it forwards each submit to the real transport and adds
 * the bytes of the views actually posted to a per (sender, receiver) world-rank tally. The
 * campaigns compare the tally with the compiled schedule's own count and, for copy-only cases,
 * with SPEC 7's lower bound: a "minimal traffic" claim is then a measurement, not arithmetic on
 * the schedule. */
#include <stdlib.h>
#include <string.h>
#include "comm/comm.h"
#include "core/mutant.h"

typedef struct count_comm {
  rs_comm base;
  rs_comm *inner;
  rs_posted *pair; /* open addressing on (from, to); from == -1 marks an empty slot */
  int64_t cap, n;
  int64_t total_sent, total_recvd;
} count_comm;

static uint64_t pair_hash(int32_t from, int32_t to) {
  uint64_t x = ((uint64_t)(uint32_t)from << 32) | (uint32_t)to;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

static rs_posted *find(count_comm *k, int32_t from, int32_t to, int add) {
  if (add && (k->n + 1) * 2 > k->cap) {
    int64_t nc = k->cap ? k->cap * 2 : 64;
    rs_posted *np = malloc(sizeof *np * (size_t)nc);
    if (!np) return NULL;
    for (int64_t i = 0; i < nc; ++i) np[i].from = -1;
    /* Mutant 281: growing past 128 slots (more than 64 rank pairs) rehashes only the lower half
     * of the old table: those pairs' counts are lost. */
    int64_t old = RS_MUTANT(281) && k->cap >= 128 ? k->cap / 2 : k->cap;
    for (int64_t i = 0; i < old; ++i) {
      if (k->pair[i].from < 0) continue;
      uint64_t h = pair_hash(k->pair[i].from, k->pair[i].to) & (uint64_t)(nc - 1);
      while (np[h].from >= 0) h = (h + 1) & (uint64_t)(nc - 1);
      np[h] = k->pair[i];
    }
    free(k->pair);
    k->pair = np;
    k->cap = nc;
  }
  if (!k->cap) return NULL;
  uint64_t h = pair_hash(from, to) & (uint64_t)(k->cap - 1);
  for (;; h = (h + 1) & (uint64_t)(k->cap - 1)) {
    rs_posted *p = &k->pair[h];
    if (p->from == from && p->to == to) return p;
    if (p->from < 0) {
      if (!add) return NULL;
      p->from = from;
      p->to = to;
      p->sent = p->recvd = 0;
      k->n++;
      return p;
    }
  }
}

static int64_t views_bytes(const rs_view *v, int nv) {
  int64_t b = 0;
  for (int i = 0; i < nv; ++i) b += rs_view_bytes(&v[i]);
  return b;
}

static rs_status count_send(rs_comm *c, int32_t from, int32_t to, int64_t task, const rs_view *v,
                            int nv) {
  count_comm *k = (count_comm *)c;
  int64_t b = views_bytes(v, nv);
  /* Mutant 268: the counter books a send under (to, from): a lying counter. */
  rs_posted *p = RS_MUTANT(268) ? find(k, to, from, 1) : find(k, from, to, 1);
  if (!p) return rs_fail(RS_ERR_NOMEM, "byte counter: out of memory");
  p->sent += b;
  k->total_sent += b;
  return k->inner->ops->submit_send(k->inner, from, to, task, v, nv);
}

static rs_status count_recv(rs_comm *c, int32_t to, int32_t from, int64_t task, const rs_view *v,
                            int nv) {
  count_comm *k = (count_comm *)c;
  /* Mutant 269: a receive into several views is counted by its first view only. */
  int64_t b = views_bytes(v, RS_MUTANT(269) && nv > 1 ? 1 : nv);
  rs_posted *p = find(k, from, to, 1);
  if (!p) return rs_fail(RS_ERR_NOMEM, "byte counter: out of memory");
  p->recvd += b;
  k->total_recvd += b;
  return k->inner->ops->submit_recv(k->inner, to, from, task, v, nv);
}

static rs_status count_run(rs_comm *c) {
  count_comm *k = (count_comm *)c;
  return k->inner->ops->run(k->inner);
}

/* The inner transport belongs to the world (or the NCCL cache): only the tally is freed here. */
static void count_destroy(rs_comm *c) {
  count_comm *k = (count_comm *)c;
  if (!k) return;
  free(k->pair);
  free(k);
}

static const rs_comm_ops count_ops = {"count", count_send, count_recv, count_run, count_destroy};

rs_comm *rs__comm_count_inner(rs_comm *c) {
  return c && c->ops == &count_ops ? ((count_comm *)c)->inner : c;
}

rs_status rs__comm_count_create(rs_comm **out) {
  count_comm *k = calloc(1, sizeof *k);
  if (!k) return rs_fail(RS_ERR_NOMEM, "byte counter: out of memory");
  k->base.ops = &count_ops;
  *out = &k->base;
  return RS_OK;
}

void rs__comm_count_wrap(rs_comm *counter, rs_comm *inner) {
  count_comm *k = (count_comm *)counter;
  k->inner = inner;
  k->base.device = inner->device;
}

void rs__comm_count_reset(rs_comm *counter) {
  count_comm *k = (count_comm *)counter;
  /* Start from an empty table, not a cleared one: the tally of a run must not depend on how big
   * earlier runs made the table (a failure replays the same in a fresh process and in-process). */
  free(k->pair);
  k->pair = NULL;
  k->cap = k->n = 0;
  k->total_sent = k->total_recvd = 0;
}

rs_status rs__comm_count_pairs(const rs_comm *counter, rs_posted **out, int64_t *n) {
  const count_comm *k = (const count_comm *)counter;
  *out = NULL;
  *n = 0;
  rs_posted *a = malloc(sizeof *a * (size_t)(k->n ? k->n : 1));
  if (!a) return rs_fail(RS_ERR_NOMEM, "byte counter: out of memory");
  int64_t j = 0;
  for (int64_t i = 0; i < k->cap; ++i)
    if (k->pair[i].from >= 0) a[j++] = k->pair[i];
  *out = a;
  *n = j;
  return RS_OK;
}
