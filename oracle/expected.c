/* expected.c - the oracle's expected locals: the source pieces (SPEC 8) run through a given event
 * sequence (SPEC 5) with the oracle's own arithmetic, then cut into the destination boxes with the
 * oracle's own mesh and box math. No planner: the events are an input (from a plan or from opt's
 * schedule; rs_oracle_expected uses the canonical sequence).
 *
 * State: for every coordinate over the mesh dims that are Partial at some point (the src Partial
 * dims and the partitioned ones), a block of the global tensor. Coordinates that differ only on a
 * dim not Partial at the moment hold equal copies, which is what a partition starts from and what a
 * later reduction of a partitioned dim folds. The tensor is processed in blocks of elements so the
 * state stays small whatever the rank count. */
#include <stdlib.h>
#include <string.h>
#include "reshard/oracle.h"
#include "oracle/arith.h"
#include "core/mutant.h"
#include "core/values.h"

typedef struct sim {
  const rs_case *c;
  int es;
  int na;                        /* mesh dims in the state, ascending */
  int adim[RS_MAX_MESH_DIMS];
  int64_t astride[RS_MAX_MESH_DIMS]; /* state index stride of each mesh dim (0 when not in it) */
  int64_t nstate;
  int nf;                        /* dims Partial at the end (dst's Partial dims) */
  int fdim[RS_MAX_MESH_DIMS];
  int64_t nfam;
} sim;

/* Replay the event sequence on placements only: every event must fit the Partial state it meets,
 * and the end must be dst's Partial state. */
static rs_status check_events(const rs_case *c, const rs_sharding *dst, const rs_events *ev,
                              int *ever) {
  int cur[RS_MAX_MESH_DIMS]; /* -1: not Partial, else the op */
  int nm = c->mesh.ndim;
  if (ev->n < 0 || ev->n > RS_MAX_EVENTS) return rs_fail(RS_ERR_INVALID, "events: count %d out of range", ev->n);
  for (int m = 0; m < nm; ++m) {
    cur[m] = c->src.p[m].kind == RS_PARTIAL ? c->src.p[m].op : -1;
    ever[m] = cur[m] >= 0;
  }
  for (int i = 0; i < ev->n; ++i) {
    const rs_event *e = &ev->ev[i];
    int m = e->mesh_dim;
    if (m < 0 || m >= nm) return rs_fail(RS_ERR_INVALID, "events[%d]: mesh dim %d out of range", i, m);
    if ((unsigned)e->op > RS_MAX) return rs_fail(RS_ERR_INVALID, "events[%d]: invalid op", i);
    if (c->mesh.size[m] == 1) continue; /* changes no value: plans and schedules may leave it out */
    if (e->kind == RS_EVENT_REDUCE) {
      if (cur[m] != e->op)
        return rs_fail(RS_ERR_INVALID, "events[%d]: reduces mesh dim %d, which is not Partial with that op", i, m);
      cur[m] = -1;
    } else if (e->kind == RS_EVENT_PARTITION) {
      if (cur[m] >= 0) return rs_fail(RS_ERR_INVALID, "events[%d]: partitions mesh dim %d, already Partial", i, m);
      cur[m] = e->op;
      ever[m] = 1;
    } else {
      return rs_fail(RS_ERR_INVALID, "events[%d]: unknown kind %d", i, e->kind);
    }
  }
  for (int m = 0; m < nm; ++m) {
    int want = dst->p[m].kind == RS_PARTIAL ? dst->p[m].op : -1;
    if (cur[m] != want && c->mesh.size[m] > 1)
      return rs_fail(RS_ERR_INVALID, "events: mesh dim %d ends %s, dst has it %s", m,
                     cur[m] >= 0 ? "Partial" : "not Partial", want >= 0 ? "Partial" : "not Partial");
  }
  return RS_OK;
}

/* Initial state of one block: the source piece each coordinate holds (rs_value_piece reads only the
 * src Partial coordinates, so partition-only dims start as equal copies: a state with a non-zero
 * coordinate on such a dim copies the state with that coordinate 0, filled before it). */
static void fill_block(const sim *s, char *state, int64_t k, int64_t b0, int64_t kb) {
  int64_t coord[RS_MAX_MESH_DIMS] = {0};
  for (int64_t a = 0; a < s->nstate; ++a) {
    int64_t rest = a, same = a;
    for (int j = s->na - 1; j >= 0; --j) {
      int m = s->adim[j];
      coord[m] = rest % s->c->mesh.size[m];
      rest /= s->c->mesh.size[m];
      /* Mutant 911: src Partial dims count as copies too, so every piece starts as coordinate 0's. */
      if (s->c->src.p[m].kind != RS_PARTIAL || RS_MUTANT(911)) same -= coord[m] * s->astride[m];
    }
    char *p = state + a * k * s->es;
    if (same != a) memcpy(p, state + same * k * s->es, (size_t)(kb * s->es));
    else rs_value_range(s->c, coord, b0, kb, p);
  }
}

/* Reduce mesh dim m: in every group differing only in m, fold left over coordinates 0..n-1 (avg:
 * one division by n at the end); every member of the group then holds the result. */
static void reduce_block(const sim *s, char *state, char *acc, int64_t k, int64_t kb, int m,
                         rs_redop op) {
  const rs_dtype t = s->c->tensor.dtype;
  const int es = s->es;
  const int64_t n = s->c->mesh.size[m], st = s->astride[m];
  rs_redop fop = op == RS_AVG ? RS_SUM : op;
  for (int64_t a = 0; a < s->nstate; ++a) {
    if ((a / st) % n != 0) continue; /* each group once, from coordinate 0 */
    if (RS_MUTANT(211) && n > 2) {
      /* Mutant 211: the oracle folds right to left (the reverse of SPEC 5's order). */
      memcpy(acc, state + (a + (n - 1) * st) * k * es, (size_t)(kb * es));
      for (int64_t j = n - 2; j >= 0; --j) rs__oracle_op_n(t, fop, acc, state + (a + j * st) * k * es, kb);
    } else {
      memcpy(acc, state + a * k * es, (size_t)(kb * es));
      for (int64_t j = 1; j < n; ++j) rs__oracle_op_n(t, fop, acc, state + (a + j * st) * k * es, kb);
    }
    if (op == RS_AVG) rs__oracle_div_n(t, acc, n, kb);
    for (int64_t j = 0; j < n; ++j) memcpy(state + (a + j * st) * k * es, acc, (size_t)(kb * es));
  }
}

/* Partition on mesh dim m: sum divides every copy by n; avg, min and max keep the value. m is not
 * Partial before its partition, so the n coordinates of each group hold equal copies: the copy at
 * coordinate 0 is divided and the quotient copied to the others. */
static void partition_block(const sim *s, char *state, int64_t k, int64_t kb, int m, rs_redop op) {
  if (op != RS_SUM) return;
  const int64_t n = s->c->mesh.size[m], st = s->astride[m];
  const size_t bytes = (size_t)(kb * s->es);
  for (int64_t a = 0; a < s->nstate; ++a) {
    /* each group once, from coordinate 0 (a dim of size 1 is in no state: every state is its own group) */
    if (st && (a / st) % n != 0) continue;
    char *q = state + a * k * s->es;
    rs__oracle_div_n(s->c->tensor.dtype, q, n, kb);
    for (int64_t j = 1; st && j < n; ++j) memcpy(state + (a + j * st) * k * s->es, q, bytes);
  }
}

/* Family f (a coordinate over dst's Partial dims) lives at state index with those coordinates and 0
 * elsewhere. */
static int64_t family_index(const sim *s, int64_t f) {
  int64_t a = 0;
  for (int j = s->nf - 1; j >= 0; --j) {
    int m = s->fdim[j];
    a += (f % s->c->mesh.size[m]) * s->astride[m];
    f /= s->c->mesh.size[m];
  }
  return a;
}

/* Copy box [start, start+size) of a row-major global tensor into a contiguous local, one run at a
 * time, with its own index arithmetic: a run is the last dim and every dim before it that the box
 * spans whole from there on (the box is contiguous in the global tensor over those dims). */
static void copy_box(const rs_tensor *t, int es, const char *global, const int64_t *start,
                     const int64_t *size, char *out) {
  int nd = t->ndim, lead = nd - 1;
  int64_t numel = 1, idx[RS_MAX_DIMS] = {0}, run = nd ? size[nd - 1] : 1;
  for (int d = 0; d < nd; ++d) numel *= size[d];
  while (lead > 0 && size[lead] == t->shape[lead]) run *= size[--lead];
  for (int64_t k = 0; run > 0 && k < numel; k += run) {
    int64_t flat = 0;
    for (int d = 0; d < nd; ++d) flat = flat * t->shape[d] + start[d] + idx[d];
    memcpy(out + k * es, global + flat * es, (size_t)(run * es));
    for (int d = lead - 1; d >= 0; --d) {
      if (++idx[d] < size[d]) break;
      idx[d] = 0;
    }
  }
}

rs_status rs_oracle_expected_events(const rs_case *c, const rs_sharding *dst, const rs_events *ev,
                                    rs_locals *out) {
  memset(out, 0, sizeof *out);
  if (!c || !dst || !ev) return rs_fail(RS_ERR_INVALID, "oracle: NULL argument");
  int ever[RS_MAX_MESH_DIMS];
  rs_status st = check_events(c, dst, ev, ever);
  if (st) return st;
  sim s;
  memset(&s, 0, sizeof s);
  s.c = c;
  s.es = rs_dtype_size(c->tensor.dtype);
  s.nstate = 1;
  s.nfam = 1;
  for (int m = c->mesh.ndim - 1; m >= 0; --m)
    if (ever[m]) {
      s.astride[m] = s.nstate;
      s.nstate *= c->mesh.size[m];
    }
  for (int m = 0; m < c->mesh.ndim; ++m) {
    if (ever[m]) s.adim[s.na++] = m;
    if (dst->p[m].kind == RS_PARTIAL) {
      s.fdim[s.nf++] = m;
      s.nfam *= c->mesh.size[m];
    }
  }
  int64_t numel;
  if ((st = rs_shape_numel(c->tensor.ndim, c->tensor.shape, &numel))) return st;
  /* blocks of about a million state elements */
  int64_t k = (1 << 20) / s.nstate;
  if (k < 1) k = 1;
  if (k > numel) k = numel > 0 ? numel : 1;
  char *fam = NULL, *state = NULL, *acc = NULL;
  if (numel > INT64_MAX / s.es / s.nfam || s.nstate > INT64_MAX / k / s.es)
    return rs_fail(RS_ERR_OVERFLOW, "oracle: tensor too large");
  fam = malloc((size_t)(numel * s.es * s.nfam) + 1);
  state = malloc((size_t)(s.nstate * k * s.es));
  acc = malloc((size_t)(k * s.es));
  if (!fam || !state || !acc) {
    st = rs_fail(RS_ERR_NOMEM, "oracle: out of memory");
    goto done;
  }
  for (int64_t b0 = 0; b0 < numel; b0 += k) {
    int64_t kb = numel - b0 < k ? numel - b0 : k;
    fill_block(&s, state, k, b0, kb);
    for (int i = 0; i < ev->n; ++i) {
      const rs_event *e = &ev->ev[i];
      if (e->kind == RS_EVENT_REDUCE) reduce_block(&s, state, acc, k, kb, e->mesh_dim, (rs_redop)e->op);
      else partition_block(&s, state, k, kb, e->mesh_dim, (rs_redop)e->op);
    }
    for (int64_t f = 0; f < s.nfam; ++f)
      memcpy(fam + (f * numel + b0) * s.es, state + family_index(&s, f) * k * s.es, (size_t)(kb * s.es));
  }
  if ((st = rs_locals_alloc(out, c->mesh.nranks))) goto done;
  for (int pos = 0; pos < c->mesh.nranks; ++pos) {
    int64_t coord[RS_MAX_MESH_DIMS] = {0}, start[RS_MAX_DIMS], size[RS_MAX_DIMS];
    rs__oracle_coord(&c->mesh, pos, coord);
    rs__oracle_box(&c->mesh, dst, &c->tensor, coord, start, size);
    if ((st = rs_local_resize(&out->r[pos], c->tensor.ndim, size, s.es))) break;
    int64_t f = 0;
    for (int j = 0; j < s.nf; ++j) f = f * c->mesh.size[s.fdim[j]] + coord[s.fdim[j]];
    copy_box(&c->tensor, s.es, fam + f * numel * s.es, start, size, out->r[pos].data);
  }
  if (st) rs_locals_free(out);
done:
  free(fam);
  free(state);
  free(acc);
  return st;
}

rs_status rs_oracle_expected(const rs_case *c, const rs_sharding *dst, rs_locals *out) {
  rs_events ev;
  memset(out, 0, sizeof *out);
  if (!c || !dst) return rs_fail(RS_ERR_INVALID, "oracle: NULL argument");
  rs_status st = rs_events_canonical(&c->mesh, &c->src, dst, &ev);
  if (st) return st;
  return rs_oracle_expected_events(c, dst, &ev, out);
}
