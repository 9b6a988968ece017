/* exec.c - the reference step executor: every mesh rank simulated in one process, each plan step
 * run as the plain collective of SPEC 6 over every group of ranks that differ only in the step's
 * mesh dim coordinate. After each step every rank's local shape is checked against the box the
 * new sharding gives it, and at the end the sharding must be the case's destination. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "core/mutant.h"
#include "reshard/ref.h"
#include "core/values.h"

typedef struct ref_exec {
  const rs_case *c;
  int esize;
  ref_buf *buf;  /* per mesh position: the current local tensor */
  ref_buf *next; /* per mesh position: the result of the step being run */
} ref_exec;

static const char *pl_str(rs_placement p, char *buf, size_t cap) {
  rs_format_placement(p, buf, cap);
  return buf;
}

/* The mesh positions of the group that contains `pos` and varies mesh dim md, by coordinate. */
static void group_of(const rs_mesh *m, int pos, int md, int *members) {
  int64_t coord[RS_MAX_MESH_DIMS];
  rs_mesh_coord(m, pos, coord);
  for (int64_t i = 0; i < m->size[md]; i++) {
    coord[md] = i;
    members[i] = rs_mesh_pos(m, coord);
  }
}

/* Run one step whose collective is coll on mesh dim md (size n > 1), filling x->next. */
static rs_status run_step(ref_exec *x, const rs_step *step, rs_collective coll) {
  const rs_case *c = x->c;
  const rs_mesh *m = &c->mesh;
  const int md = step->mesh_dim;
  const int n = (int)m->size[md];
  const int es = x->esize;
  const rs_dtype dt = c->tensor.dtype;
  rs_placement from = step->from, to = step->to;
  if (from.kind == RS_SHARD && from.dim < 0) from.dim = (int8_t)(from.dim + c->tensor.ndim);
  if (to.kind == RS_SHARD && to.dim < 0) to.dim = (int8_t)(to.dim + c->tensor.ndim);

  if ((coll == RS_COLL_ALL_REDUCE || coll == RS_COLL_REDUCE_SCATTER ||
       coll == RS_COLL_PARTITION || coll == RS_COLL_SHARD_TO_PARTIAL) && !rs_dtype_reducible(dt))
    return rs_fail(RS_ERR_UNSUPPORTED, "step on mesh dim %d: %s is copy-only, no Partial", md,
                   rs_dtype_name(dt));

  int *members = malloc((size_t)n * sizeof *members);
  const ref_buf **pieces = malloc((size_t)n * sizeof *pieces);
  ref_buf whole;
  memset(&whole, 0, sizeof whole);
  rs_status st = RS_OK;
  if (!members || !pieces) {
    st = rs_fail(RS_ERR_NOMEM, "ref: out of memory");
    goto done;
  }
  for (int pos = 0; pos < m->nranks && st == RS_OK; pos++) {
    int64_t coord[RS_MAX_MESH_DIMS];
    rs_mesh_coord(m, pos, coord);
    if (coord[md] != 0) continue; /* each group once, from its coordinate-0 member */
    group_of(m, pos, md, members);
    for (int i = 0; i < n; i++) pieces[i] = &x->buf[members[i]];

    switch (coll) {
    case RS_COLL_ALL_GATHER:
      /* S(d) -> R: every member ends with the pieces concatenated in coordinate order */
      if ((st = ref_concat(pieces, n, from.dim, es, 0, RS_MUTANT(14), &whole)) != RS_OK) break;
      for (int i = 0; i < n && st == RS_OK; i++) {
        if (RS_MUTANT(2) && i == n - 1) /* planted bug: the last rank concatenates backwards */
          st = ref_concat(pieces, n, from.dim, es, 1, 0, &x->next[members[i]]);
        else
          st = ref_buf_copy(&x->next[members[i]], &whole, es);
      }
      break;
    case RS_COLL_ALL_REDUCE:
      /* P -> R: every member ends with the canonical reduction */
      if ((st = ref_reduce(pieces, n, dt, (rs_redop)from.op, &whole)) != RS_OK) break;
      for (int i = 0; i < n && st == RS_OK; i++)
        st = ref_buf_copy(&x->next[members[i]], &whole, es);
      break;
    case RS_COLL_REDUCE_SCATTER:
      /* P -> S(d): reduce, then each member keeps its split of d */
      if ((st = ref_reduce(pieces, n, dt, (rs_redop)from.op, &whole)) != RS_OK) break;
      for (int i = 0; i < n && st == RS_OK; i++) {
        int64_t size, off;
        int keep = RS_MUTANT(8) ? n - 1 - i : i; /* planted bug: the mirrored coordinate */
        ref_split(whole.shape[to.dim], n, keep, 0, &size, &off);
        st = ref_narrow(&whole, to.dim, off, size, es, &x->next[members[i]]);
      }
      break;
    case RS_COLL_CHUNK:
      /* R -> S(d): each member keeps its split of its own copy; nothing moves */
      for (int i = 0; i < n && st == RS_OK; i++) {
        int64_t size, off;
        ref_split(pieces[i]->shape[to.dim], n, i, 1, &size, &off);
        st = ref_narrow(pieces[i], to.dim, off, size, es, &x->next[members[i]]);
      }
      break;
    case RS_COLL_ALL_TO_ALL:
      /* S(a) -> S(b): gather along a, then each member keeps its split of b */
      if ((st = ref_concat(pieces, n, from.dim, es, 0, 0, &whole)) != RS_OK) break;
      for (int i = 0; i < n && st == RS_OK; i++) {
        int64_t size, off;
        int keep = RS_MUTANT(11) ? (i + 1) % n : i; /* planted bug: the neighbour's split */
        ref_split(whole.shape[to.dim], n, keep, 0, &size, &off);
        st = ref_narrow(&whole, to.dim, off, size, es, &x->next[members[i]]);
      }
      break;
    case RS_COLL_PARTITION:
      /* R -> P(sum): value / n so the sum over the group is the value; avg/min/max: unchanged */
      for (int i = 0; i < n && st == RS_OK; i++) {
        ref_buf *o = &x->next[members[i]];
        if ((st = ref_buf_copy(o, pieces[i], es)) != RS_OK) break;
        if (to.op == RS_SUM && !RS_MUTANT(7) && !RS_MUTANT(203)) rs_arith_div(dt, o->data, n, o->numel);
      }
      break;
    case RS_COLL_SHARD_TO_PARTIAL:
      /* S(d) -> P(sum) by zero-fill (pytorch enumeration, Shard._to_partial_tensor): each member
       * holds the group's whole extent of d, zeros except its own split at its offset */
      if ((st = ref_concat(pieces, n, from.dim, es, 0, 0, &whole)) != RS_OK) break;
      for (int i = 0; i < n && st == RS_OK; i++) {
        ref_buf *o = &x->next[members[i]];
        if ((st = ref_buf_alloc(o, whole.ndim, whole.shape, es)) != RS_OK) break;
        if (o->numel) memset(o->data, 0, (size_t)(o->numel * es));
        int64_t size, off;
        /* Mutant 650: each member's shard lands at the mirrored member's offset (n-1-i). */
        ref_split(whole.shape[from.dim], n, RS_MUTANT(243) ? 0 : RS_MUTANT(650) ? n - 1 - i : i, 0, &size, &off);
        if (size != pieces[i]->shape[from.dim]) {
          st = rs_fail(RS_ERR_MISMATCH, "zero-fill on mesh dim %d: piece %d has %lld rows, its split %lld", md,
                       i, (long long)pieces[i]->shape[from.dim], (long long)size);
          break;
        }
        int64_t outer = 1, inner = (int64_t)es;
        for (int d = 0; d < from.dim; d++) outer *= whole.shape[d];
        for (int d = from.dim + 1; d < whole.ndim; d++) inner *= whole.shape[d];
        for (int64_t k = 0; k < outer && size; k++)
          memcpy(o->data + (k * whole.shape[from.dim] + off) * inner, pieces[i]->data + k * size * inner,
                 (size_t)(size * inner));
      }
      break;
    default:
      st = rs_fail(RS_ERR_UNSUPPORTED, "step on mesh dim %d: no collective", md);
    }
  }
done:
  ref_buf_free(&whole);
  free(members);
  free(pieces);
  return st;
}

/* Every rank's local shape must be the box the sharding gives it. */
static rs_status check_shapes(const ref_exec *x, const rs_sharding *s, int stepno) {
  const rs_case *c = x->c;
  for (int pos = 0; pos < c->mesh.nranks; pos++) {
    int64_t coord[RS_MAX_MESH_DIMS], start[RS_MAX_DIMS], size[RS_MAX_DIMS];
    rs_mesh_coord(&c->mesh, pos, coord);
    rs_local_box(&c->mesh, s, &c->tensor, coord, start, size);
    const ref_buf *b = &x->buf[pos];
    int bad = b->ndim != c->tensor.ndim;
    int d = 0;
    for (; !bad && d < c->tensor.ndim; d++)
      if (b->shape[d] != size[d]) bad = 1;
    if (bad) {
      d = d > 0 ? d - 1 : 0;
      return rs_fail(RS_ERR_MISMATCH,
                     "ref exec: after step %d rank at mesh position %d has size %lld on dim %d, "
                     "its box %lld", stepno, pos, (long long)(d < b->ndim ? b->shape[d] : -1), d,
                     (long long)size[d]);
    }
  }
  return RS_OK;
}

static void exec_free(ref_exec *x) {
  int n = x->c->mesh.nranks;
  if (x->buf)
    for (int i = 0; i < n; i++) ref_buf_free(&x->buf[i]);
  if (x->next)
    for (int i = 0; i < n; i++) ref_buf_free(&x->next[i]);
  free(x->buf);
  free(x->next);
}

rs_status rs_ref_execute(const rs_case *c, const rs_plan *p, const rs_locals *in, rs_locals *out) {
  if (!c || !p || !in || !out) return rs_fail(RS_ERR_INVALID, "ref exec: NULL argument");
  const int nranks = c->mesh.nranks;
  if (in->n != nranks)
    return rs_fail(RS_ERR_INVALID, "ref exec: %d input locals for a mesh of %d ranks", in->n,
                   nranks);
  if (p->nsteps < 0 || p->nsteps > RS_MAX_STEPS)
    return rs_fail(RS_ERR_INVALID, "plan: nsteps %d out of range", p->nsteps);
  ref_exec x;
  memset(&x, 0, sizeof x);
  x.c = c;
  x.esize = rs_dtype_size(c->tensor.dtype);
  x.buf = calloc((size_t)nranks, sizeof *x.buf);
  x.next = calloc((size_t)nranks, sizeof *x.next);
  rs_status st = RS_OK;
  char a[32], b[32];
  rs_sharding cur = c->src;
  if (!x.buf || !x.next) {
    st = rs_fail(RS_ERR_NOMEM, "ref exec: out of memory");
    goto done;
  }
  for (int pos = 0; pos < nranks; pos++) {
    const rs_local *l = &in->r[pos];
    ref_buf *w = &x.buf[pos];
    if ((st = ref_buf_alloc(w, l->ndim, l->shape, x.esize)) != RS_OK) goto done;
    if (w->numel * x.esize != l->nbytes) {
      st = rs_fail(RS_ERR_INVALID, "ref exec: input local %d holds %lld bytes for shape of %lld",
                   pos, (long long)l->nbytes, (long long)(w->numel * x.esize));
      goto done;
    }
    if (l->nbytes) memcpy(w->data, l->data, (size_t)l->nbytes);
  }
  if ((st = check_shapes(&x, &cur, -1)) != RS_OK) goto done;

  for (int k = 0; k < p->nsteps; k++) {
    const rs_step *step = &p->step[k];
    rs_sharding nxt = cur;
    if ((st = rs_mesh_apply_step_enum(&c->mesh, &nxt, step, c->tensor.ndim, p->enumeration)) != RS_OK) {
      char where[128];
      snprintf(where, sizeof where, "ref exec: plan step %d (mesh dim %d, %s -> %s): ", k,
               step->mesh_dim, pl_str(step->from, a, sizeof a), pl_str(step->to, b, sizeof b));
      st = rs_fail_prefix(st, where);
      goto done;
    }
    rs_collective coll;
    if ((st = rs_step_collective_enum(step, p->enumeration, &coll)) != RS_OK) goto done;
    if (RS_MUTANT(5) && coll == RS_COLL_ALL_TO_ALL) {
      /* planted bug: the all-to-all swaps placements but leaves the shard order alone */
      memcpy(nxt.order_len, cur.order_len, sizeof nxt.order_len);
      memcpy(nxt.order, cur.order, sizeof nxt.order);
    }
    if (coll != RS_COLL_NONE && c->mesh.size[step->mesh_dim] > 1) {
      if ((st = run_step(&x, step, coll)) != RS_OK) goto done;
      ref_buf *t = x.buf;
      x.buf = x.next;
      x.next = t;
      for (int pos = 0; pos < nranks; pos++) ref_buf_free(&x.next[pos]);
    }
    cur = nxt;
    if ((st = check_shapes(&x, &cur, k)) != RS_OK) goto done;
  }
  if (!rs_sharding_equivalent(&c->mesh, &cur, &c->dst, c->tensor.ndim)) {
    char got[256], want[256];
    rs_format_sharding(&cur, got, sizeof got);
    rs_format_sharding(&c->dst, want, sizeof want);
    st = rs_fail(RS_ERR_ILLEGAL, "ref exec: the %s plan ends at %s, not at the destination %s",
                 rs_planner_name(rs_case_resolve_planner(c)), got, want);
    goto done;
  }
  if (RS_MUTANT(203)) {
    /* planted bug: R -> P(sum) partitions divide at the end of the plan, not at their event */
    for (int k = 0; k < p->nsteps; k++) {
      const rs_step *s = &p->step[k];
      int64_t n = c->mesh.size[s->mesh_dim];
      if (s->from.kind != RS_PARTIAL && s->to.kind == RS_PARTIAL && s->to.op == RS_SUM && n > 1)
        for (int pos = 0; pos < nranks; pos++)
          rs_arith_div(c->tensor.dtype, x.buf[pos].data, n, x.buf[pos].numel);
    }
  }
  if ((st = rs_locals_alloc(out, nranks)) != RS_OK) goto done;
  for (int pos = 0; pos < nranks; pos++) {
    /* the result buffers are handed over (malloc'd, as rs_locals_free expects), not copied */
    ref_buf *w = &x.buf[pos];
    rs_local *l = &out->r[pos];
    l->ndim = w->ndim;
    memcpy(l->shape, w->shape, sizeof l->shape);
    l->nbytes = w->numel * x.esize;
    l->data = w->data;
    w->data = NULL;
  }
done:
  exec_free(&x);
  return st;
}
