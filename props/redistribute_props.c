/* redistribute_props.c - the properties every redistribute case must satisfy, each a function of
 * one case: box tiling, ref's planners against the plan-free oracle, round trips, plan legality,
 * rejection of contract violations and (with opt/) opt against ref and the oracle; and the dispatch
 * from a property's id (its table is in props.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "reshard/oracle.h"
#include "props/props.h"
#include "props/report_html.h"
#include "oracle/partial_sum.h"
#include "reshard/ref.h"
#include "core/values.h"
#include "oracle/arith.h"
#include "memo.h"
#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
#endif

/* ---- helpers ---- */

typedef struct scratch {
  rs_locals in, out, exp, back;
} scratch;

static void scratch_free(scratch *s) {
  rs_locals_free(&s->in);
  rs_locals_free(&s->out);
  rs_locals_free(&s->exp);
  rs_locals_free(&s->back);
}

static rs_outcome say(rs_outcome o, char *msg, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, cap, fmt, ap);
  va_end(ap);
  return o;
}

static rs_outcome fail_st(char *msg, size_t cap, const char *what, rs_status st) {
  const char *e = rs_last_error();
  return say(RS_FAIL, msg, cap, "%s failed: %s: %s", what, rs_status_name(st), e[0] ? e : "(no message)");
}

/* The reference graph planner makes Partial only as Partial(sum) from Replicate, and cannot move a
 * Partial between mesh dims: a dst Partial(op != sum) is reachable only where src has it already.
 * Searching for an unreachable state explores the whole state space, so it is skipped up front. */
static int graph_reachable(const rs_case *c) {
  if (c->enumeration == RS_ENUM_PYTORCH) return 1; /* R -> P(avg|min|max) exists there */
  for (int m = 0; m < c->mesh.ndim; m++) {
    rs_placement d = c->dst.p[m], s = c->src.p[m];
    if (d.kind == RS_PARTIAL && d.op != RS_SUM && !(s.kind == RS_PARTIAL && s.op == d.op)) return 0;
  }
  return 1;
}

/* Plan with a named planner; RS_SKIP when the planner does not apply to this case. */
static rs_outcome make_plan(const rs_prop_env *env, const rs_case *c, rs_planner_kind k, rs_plan *p,
                            char *msg, size_t cap) {
  rs_status st;
  rs_prop_memo *memo = env ? env->memo : NULL;
  memset(p, 0, sizeof *p);
  if (k == RS_PLANNER_GREEDY) {
    /* PyTorch's greedy planner ignores shard order: it only means something for default orders. */
    if (!rs_sharding_is_default_order(&c->src, c->tensor.ndim) ||
        !rs_sharding_is_default_order(&c->dst, c->tensor.ndim))
      return say(RS_SKIP, msg, cap, "greedy: non-default shard order");
    st = rs_memo_plan(memo, c, RS_PLANNER_GREEDY, p);
    if (st) return fail_st(msg, cap, "rs_ref_plan_greedy", st);
  } else if (k == RS_PLANNER_GRAPH) {
    if (!graph_reachable(c)) return say(RS_SKIP, msg, cap, "graph: dst Partial not reachable");
    /* The generator keeps such cases to default orders (greedy); the campaign counts them. */
    if (rs_gen_graph_bounded(NULL, c))
      return say(RS_SKIP, msg, cap, "graph: state space of %d mesh dims x %d tensor dims beyond the bound",
                 c->mesh.ndim, c->tensor.ndim);
    st = rs_memo_plan(memo, c, RS_PLANNER_GRAPH, p);
    if (st) return fail_st(msg, cap, "rs_ref_plan_graph", st);
  } else {
    if (rs_case_resolve_planner(c) == RS_PLANNER_GRAPH && !graph_reachable(c))
      return say(RS_SKIP, msg, cap, "graph: dst Partial not reachable");
    st = rs_memo_plan(memo, c, RS_PLANNER_AUTO, p);
    if (st) return fail_st(msg, cap, "rs_ref_plan", st);
  }
  return RS_PASS;
}

/* PyTorch's trace; for a plan whose bookkeeping breaks (no trace exists), its raw steps. */
static void trace_of(const rs_case *c, const rs_plan *p, char *buf, size_t cap) {
  if (rs_plan_trace(&c->mesh, &c->src, c->tensor.ndim, p, buf, cap) == RS_OK) return;
  size_t n = (size_t)snprintf(buf, cap, "steps");
  for (int i = 0; i < p->nsteps && n < cap; i++) {
    char a[32], b[32];
    rs_format_placement(p->step[i].from, a, sizeof a);
    rs_format_placement(p->step[i].to, b, sizeof b);
    n += (size_t)snprintf(buf + n, cap - n, " [mesh dim %d: %s->%s]", p->step[i].mesh_dim, a, b);
  }
}

/* The trace plus the plan's value-changing events (what the oracle was given). */
static void trace_with_events(const rs_case *c, const rs_plan *p, const rs_events *ev, char *buf,
                              size_t cap) {
  trace_of(c, p, buf, cap);
  size_t n = strlen(buf);
  if (ev->n && n + 12 < cap) {
    n += (size_t)snprintf(buf + n, cap - n, "; events ");
    rs_events_format(ev, buf + n, cap - n);
  }
}

/* The plan(s) a failure message names: the trace of p (with its events when ev is set) and, for a
 * round trip, ", back " and the trace of p2 on `back`. Formatted only when a comparison fails. */
typedef struct trace_src {
  const rs_case *c;
  const rs_plan *p;
  const rs_events *ev;
  const rs_case *back;
  const rs_plan *p2;
} trace_src;

static void trace_format(const trace_src *t, char *buf, size_t cap) {
  if (t->ev) trace_with_events(t->c, t->p, t->ev, buf, cap);
  else trace_of(t->c, t->p, buf, cap);
  if (!t->back) return;
  char t2[1024];
  trace_of(t->back, t->p2, t2, sizeof t2);
  size_t n = strlen(buf);
  snprintf(buf + n, cap - n, ", back %s", t2);
}

/* Compare against expected locals; the message carries the trace and the oracle's diff lines. */
static rs_outcome compare(const rs_prop_env *env, const rs_case *c, const rs_sharding *layout,
                          const rs_locals *exp, const rs_locals *act, const char *what, const trace_src *trace,
                          char *msg, size_t cap) {
  rs_diff *d = calloc(1, sizeof *d);
  if (!d) return rs_prop_oom(msg, cap, what);
  int bad = rs_oracle_compare(c, layout, exp, act, d);
  rs_outcome o = RS_PASS;
  if (bad) {
    char tr[2100] = "";
    if (trace) trace_format(trace, tr, sizeof tr);
    o = say(RS_FAIL, msg, cap, "%s: %d rank(s), %lld element(s) differ%s%s%s\n%s", what, bad,
            (long long)d->nbad_elems, trace ? " (plan " : "", tr, trace ? ")" : "",
            d->text);
    /* a report that draws the case wants every differing element, not only the first few */
    if (env && env->diff && rs_html_diff_collect(c, layout, exp, act, env->diff) != RS_OK) rs_clear_error();
  }
  free(d);
  return o;
}

/* A plan that zero-fills (pytorch enumeration) puts PyTorch's pieces on those mesh dims: their
 * sums are held to the oracle's tensor before partition (oracle/partial_sum.h). */
static rs_outcome compare_zero_fill(const rs_case *c, const rs_plan *p, rs_locals *act, char *msg, size_t cap) {
  rs_diff *d = calloc(1, sizeof *d);
  if (!d) return rs_prop_oom(msg, cap, "zero-fill compare");
  rs_status st;
  char tr[1024];
  trace_of(c, p, tr, sizeof tr);
  int bad = rs__oracle_compare_zero_fill(c, p, rs__plan_zero_fill_dims(c, p), act, d, &st);
  rs_outcome o = RS_PASS;
  if (bad < 0) o = fail_st(msg, cap, "zero-fill sums", st);
  else if (bad)
    o = say(RS_FAIL, msg, cap, "ref vs oracle (sums over the zero-filled mesh dims): %d rank(s), %lld element(s) differ (plan %s)\n%s",
            bad, (long long)d->nbad_elems, tr, d->text);
  free(d);
  return o;
}

/* ---- 1. boxes ---- */

/* SPEC 4 written again here, independently of core/box.c, so the two check each other. */
static void my_box(const rs_case *c, const rs_sharding *s, const int64_t *coord, int64_t *start,
                   int64_t *size) {
  for (int d = 0; d < c->tensor.ndim; d++) {
    int64_t lo = 0, len = c->tensor.shape[d];
    for (int k = 0; k < s->order_len[d]; k++) {
      int64_t n = c->mesh.size[s->order[d][k]], i = coord[s->order[d][k]], sz, off;
      if (len % n == 0) {
        sz = len / n;
        off = i * sz;
      } else {
        int64_t ch = (len + n - 1) / n;
        off = ch * i;
        if (off >= len) {
          sz = 0;
          off = len;
        } else {
          sz = (off + ch < len ? off + ch : len) - off;
        }
      }
      lo += off;
      len = sz;
    }
    start[d] = lo;
    size[d] = len;
  }
}

static rs_outcome check_layout_boxes(const rs_case *c, const rs_sharding *s, const char *which,
                                     const rs_locals *locals, char *msg, size_t cap) {
  const rs_tensor *t = &c->tensor;
  /* The shard order lists exactly the mesh dims that shard each tensor dim. */
  int seen[RS_MAX_MESH_DIMS] = {0};
  for (int d = 0; d < t->ndim; d++)
    for (int k = 0; k < s->order_len[d]; k++) {
      int m = s->order[d][k];
      if (m < 0 || m >= c->mesh.ndim || s->p[m].kind != RS_SHARD || s->p[m].dim != d || seen[m]++)
        return say(RS_FAIL, msg, cap, "%s: shard order of dim %d lists mesh dim %d wrongly", which, d, m);
    }
  int64_t mult = 1;
  for (int m = 0; m < c->mesh.ndim; m++) {
    if (s->p[m].kind == RS_SHARD && !seen[m])
      return say(RS_FAIL, msg, cap, "%s: mesh dim %d shards but is in no shard order", which, m);
    if (s->p[m].kind != RS_SHARD) mult *= c->mesh.size[m];
  }
  int64_t numel = 1;
  for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
  int32_t *cover = numel <= (1 << 22) ? calloc((size_t)numel + 1, sizeof *cover) : NULL;
  /* Ranks with equal boxes (replicas) are counted once, with their number as the weight: the
   * counts are what a walk per rank gives, at a cost per distinct box. */
  typedef struct wbox { int64_t st[RS_MAX_DIMS], sz[RS_MAX_DIMS]; int32_t weight; } wbox;
  wbox *boxes = cover ? calloc((size_t)c->mesh.nranks + 1, sizeof *boxes) : NULL;
  int nboxes = 0;
  if (cover && !boxes) { /* no memory for the coverage count: the per-rank checks still run */
    free(cover);
    cover = NULL;
  }
  rs_outcome o = RS_PASS;
  for (int pos = 0; pos < c->mesh.nranks && o == RS_PASS; pos++) {
    int64_t coord[RS_MAX_MESH_DIMS] = {0}, st[RS_MAX_DIMS], sz[RS_MAX_DIMS], mst[RS_MAX_DIMS],
            msz[RS_MAX_DIMS], shp[RS_MAX_DIMS], off[RS_MAX_DIMS];
    rs_mesh_coord(&c->mesh, pos, coord);
    if (rs_mesh_pos(&c->mesh, coord) != pos) {
      o = say(RS_FAIL, msg, cap, "mesh: position %d -> coord -> position %d", pos, rs_mesh_pos(&c->mesh, coord));
      break;
    }
    rs_local_box(&c->mesh, s, t, coord, st, sz);
    my_box(c, s, coord, mst, msz);
    rs_local_shape_offset(&c->mesh, s, t, coord, shp, off);
    for (int d = 0; d < t->ndim; d++) {
      if (sz[d] != msz[d] || (sz[d] > 0 && st[d] != mst[d])) {
        o = say(RS_FAIL, msg, cap, "%s: rank pos %d dim %d: box [%lld +%lld], SPEC 4 gives [%lld +%lld]",
                which, pos, d, (long long)st[d], (long long)sz[d], (long long)mst[d], (long long)msz[d]);
        break;
      }
      int64_t want_off = sz[d] == 0 ? t->shape[d] : st[d];
      if (shp[d] != sz[d] || off[d] != want_off) {
        o = say(RS_FAIL, msg, cap,
                "%s: rank pos %d dim %d: local_shape/offset %lld/%lld, box gives %lld/%lld", which,
                pos, d, (long long)shp[d], (long long)off[d], (long long)sz[d], (long long)want_off);
        break;
      }
    }
    if (o != RS_PASS) break;
    if (locals) {
      const rs_local *l = &locals->r[pos];
      int same = l->ndim == t->ndim;
      int64_t n = 1;
      for (int d = 0; same && d < t->ndim; d++) {
        same = l->shape[d] == sz[d];
        n *= sz[d];
      }
      if (!same || l->nbytes != n * rs_dtype_size(t->dtype)) {
        o = say(RS_FAIL, msg, cap, "%s: rank pos %d: local tensor shape differs from its box", which, pos);
        break;
      }
    }
    if (!cover) continue;
    wbox b;
    memset(&b, 0, sizeof b);
    memcpy(b.st, st, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(b.sz, sz, sizeof(int64_t) * (size_t)t->ndim);
    int q = 0;
    while (q < nboxes && (memcmp(boxes[q].st, b.st, sizeof b.st) || memcmp(boxes[q].sz, b.sz, sizeof b.sz))) q++;
    if (q == nboxes) boxes[nboxes++] = b;
    boxes[q].weight++;
  }
  for (int q = 0; q < nboxes && o == RS_PASS; q++) {
    /* Count every element of the box (row-major walk, one contiguous run at a time: the last dim
     * and the dims before it while the box spans every dim after them whole). */
    const int64_t *st = boxes[q].st, *sz = boxes[q].sz;
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= sz[d];
    int lead = t->ndim - 1;
    int64_t idx[RS_MAX_DIMS] = {0}, run = t->ndim ? sz[t->ndim - 1] : 1;
    while (lead > 0 && sz[lead] == t->shape[lead]) run *= sz[--lead];
    for (int64_t e = 0; run > 0 && e < n; e += run) {
      int64_t flat = 0;
      for (int d = 0; d < t->ndim; d++) flat = flat * t->shape[d] + st[d] + idx[d];
      for (int64_t k = 0; k < run; k++) cover[flat + k] += boxes[q].weight;
      for (int d = lead - 1; d >= 0; d--) {
        if (++idx[d] < sz[d]) break;
        idx[d] = 0;
      }
    }
  }
  for (int64_t i = 0; cover && o == RS_PASS && i < numel; i++)
    if (cover[i] != mult)
      o = say(RS_FAIL, msg, cap, "%s: element %lld covered %d times, expected %lld", which,
              (long long)i, cover[i], (long long)mult);
  free(cover);
  free(boxes);
  return o;
}

static rs_outcome prop_boxes(const rs_prop_env *env, const rs_case *c, char *msg, size_t cap) {
  scratch s = {0};
  const rs_locals *in, *exp;
  rs_status st = rs_memo_source(env->memo, c, &s.in, &in);
  rs_outcome o;
  if (st) {
    o = fail_st(msg, cap, "rs_make_source", st);
  } else if ((st = rs_memo_expected(env->memo, c, NULL, &s.exp, &exp)) != RS_OK) {
    o = fail_st(msg, cap, "rs_oracle_expected", st);
  } else if ((o = check_layout_boxes(c, &c->src, "src", in, msg, cap)) == RS_PASS) {
    o = check_layout_boxes(c, &c->dst, "dst", exp, msg, cap);
  }
  scratch_free(&s);
  return o;
}

/* ---- 2, 3. ref planner + ref execute == oracle ---- */

static rs_outcome prop_oracle(const rs_prop_env *env, const rs_case *c, rs_planner_kind k,
                              char *msg, size_t cap) {
  rs_plan p;
  rs_outcome o = make_plan(env, c, k, &p, msg, cap);
  if (o != RS_PASS) return o;
  return rs_prop_plan_oracle(env, c, &p, msg, cap);
}

rs_outcome rs_prop_plan_oracle(const rs_prop_env *env, const rs_case *c, const rs_plan *plan,
                               char *msg, size_t cap) {
  rs_prop_memo *memo = env ? env->memo : NULL;
  const rs_plan p = *plan;
  rs_outcome o = RS_PASS;
  scratch s = {0};
  const rs_locals *in, *exp;
  rs_status st;
  rs_events ev;
  const rs_locals *out;
  int zero_fill = rs__plan_zero_fill_dims(c, &p) != 0; /* its compare sums the result in place: not shared */
  if ((st = rs_memo_source(memo, c, &s.in, &in))) o = fail_st(msg, cap, "rs_make_source", st);
  else if ((st = zero_fill ? rs_ref_execute(c, &p, in, &s.out) : rs_memo_run(memo, c, &p, in, &s.out, &out)))
    o = fail_st(msg, cap, "rs_ref_execute", st);
  else if (zero_fill) o = compare_zero_fill(c, &p, &s.out, msg, cap);
  else if ((st = rs_events_from_plan(&c->mesh, &p, &ev))) o = fail_st(msg, cap, "rs_events_from_plan", st);
  else if ((st = rs_memo_expected(memo, c, &ev, &s.exp, &exp))) o = fail_st(msg, cap, "rs_oracle_expected", st);
  else {
    trace_src tr = {c, &p, &ev, NULL, NULL};
    o = compare(env, c, &c->dst, exp, out, "ref vs oracle", &tr, msg, cap);
  }
  scratch_free(&s);
  return o;
}

/* ---- 4. round trip ---- */

static rs_outcome prop_roundtrip(const rs_prop_env *env, const rs_case *c, rs_planner_kind k,
                                 char *msg, size_t cap) {
  if (rs_sharding_has_partial(&c->src)) return say(RS_SKIP, msg, cap, "src has Partial");
  rs_case back = *c;
  back.src = c->dst;
  back.dst = c->src;
  rs_plan p1, p2;
  rs_outcome o = make_plan(env, c, k, &p1, msg, cap);
  if (o != RS_PASS) return o;
  /* The oracle's events model Partial(sum) pieces as partitions; zero-filled pieces (pytorch
   * enumeration) are held to the oracle by the *_oracle properties' sums instead. */
  if (rs__plan_zero_fill_dims(c, &p1))
    return say(RS_SKIP, msg, cap, "round trip: the plan zero-fills (pieces the events do not model)");
  if ((o = make_plan(env, &back, k, &p2, msg, cap)) != RS_PASS) return o;
  scratch s = {0};
  const rs_locals *in, *there;
  rs_status st;
  if ((st = rs_memo_source(env->memo, c, &s.in, &in))) o = fail_st(msg, cap, "rs_make_source", st);
  else if ((st = rs_memo_run(env->memo, c, &p1, in, &s.out, &there))) o = fail_st(msg, cap, "rs_ref_execute (there)", st);
  else if ((st = rs_ref_execute(&back, &p2, there, &s.back))) o = fail_st(msg, cap, "rs_ref_execute (back)", st);
  else {
    trace_src tr = {c, &p1, NULL, &back, &p2};
    if ((c->values == RS_VALUES_ORDER || c->values == RS_VALUES_WRAP) && rs_sharding_has_partial(&c->dst)) {
      /* Partition there and reduction back round order values: the truth is the oracle's run of
       * both plans' events, from the source layout back to it. */
      rs_events ev, ev2;
      if ((st = rs_events_from_plan(&c->mesh, &p1, &ev)) || (st = rs_events_from_plan(&c->mesh, &p2, &ev2))) {
        o = fail_st(msg, cap, "rs_events_from_plan", st);
      } else if (ev.n + ev2.n > RS_MAX_EVENTS) {
        o = say(RS_SKIP, msg, cap, "round trip: too many events");
      } else {
        for (int i = 0; i < ev2.n; i++) ev.ev[ev.n++] = ev2.ev[i];
        if ((st = rs_oracle_expected_events(c, &c->src, &ev, &s.exp)))
          o = fail_st(msg, cap, "rs_oracle_expected_events", st);
        else
          o = compare(env, c, &c->src, &s.exp, &s.back, "round trip vs oracle", &tr, msg, cap);
      }
    } else {
      o = compare(env, c, &c->src, in, &s.back, "round trip vs source", &tr, msg, cap);
    }
  }
  scratch_free(&s);
  return o;
}

/* ---- 5. plan legality ---- */

static rs_outcome prop_plan_legal(const rs_prop_env *env, const rs_case *c, rs_planner_kind k,
                                  char *msg, size_t cap) {
  rs_plan p;
  rs_outcome o = make_plan(env, c, k, &p, msg, cap);
  if (o != RS_PASS) return o;
  return rs_prop_plan_legal(c, &p, NULL, msg, cap);
}

rs_outcome rs_prop_plan_legal(const rs_case *c, const rs_plan *plan, int *bad_step, char *msg,
                              size_t cap) {
  const rs_plan p = *plan;
  char tr[1024];
  if (bad_step) *bad_step = -1;
  for (int i = 0; i < p.nsteps; i++) {
    rs_collective coll;
    rs_status st = rs_step_collective_enum(&p.step[i], p.enumeration, &coll);
    if (st) {
      if (bad_step) *bad_step = i;
      trace_of(c, &p, tr, sizeof tr);
      return say(RS_FAIL, msg, cap, "step %d: %s (plan %s)", i, rs_last_error(), tr);
    }
    if (p.step[i].mesh_dim < 0 || p.step[i].mesh_dim >= c->mesh.ndim) {
      if (bad_step) *bad_step = i;
      return say(RS_FAIL, msg, cap, "step %d: mesh dim %d out of range", i, p.step[i].mesh_dim);
    }
  }
  rs_status st = rs_plan_check(&c->mesh, &c->src, &c->dst, c->tensor.ndim, &p);
  if (st) {
    if (bad_step) { /* which step broke the bookkeeping; none: the plan ends elsewhere */
      rs_sharding cur = c->src;
      *bad_step = p.nsteps;
      for (int i = 0; i < p.nsteps; i++)
        if (rs_mesh_apply_step_enum(&c->mesh, &cur, &p.step[i], c->tensor.ndim, p.enumeration)) {
          *bad_step = i;
          break;
        }
      rs_plan_check(&c->mesh, &c->src, &c->dst, c->tensor.ndim, &p); /* its message again */
    }
    trace_of(c, &p, tr, sizeof tr);
    return say(RS_FAIL, msg, cap, "rs_plan_check: %s (plan %s)", rs_last_error(), tr);
  }
  if ((st = rs_plan_trace(&c->mesh, &c->src, c->tensor.ndim, &p, tr, sizeof tr)))
    return fail_st(msg, cap, "rs_plan_trace", st);
  return RS_PASS;
}

/* ---- 6. contract violations are rejected ---- */

/* What the contract says is wrong with a case, apart from per-mesh-dim transitions. */
static const char *static_violation(const rs_case *c) {
  int nd = c->tensor.ndim, sumavg = 0, mn = 0, mx = 0, part = 0;
  const rs_sharding *ss[2] = {&c->src, &c->dst};
  for (int k = 0; k < 2; k++)
    for (int m = 0; m < c->mesh.ndim; m++) {
      rs_placement p = ss[k]->p[m];
      if (p.kind == RS_SHARD && (p.dim >= nd || p.dim < -nd)) return "shard dim out of range";
      if (p.kind == RS_PARTIAL) {
        part = 1;
        if (p.op == RS_MIN) mn = 1;
        else if (p.op == RS_MAX) mx = 1;
        else sumavg = 1;
      }
    }
  if (part && !rs_dtype_reducible(c->tensor.dtype)) return "Partial on a copy-only dtype";
  if (sumavg + mn + mx > 1) return "mixed Partial ops";
  return NULL;
}

static int transition_violation(const rs_case *c, int *pp) {
  int bad = 0;
  *pp = 0;
  for (int m = 0; m < c->mesh.ndim; m++) {
    rs_placement a = c->src.p[m], b = c->dst.p[m];
    if (b.kind == RS_PARTIAL && a.kind == RS_SHARD) bad = 1;
    if (b.kind == RS_PARTIAL && a.kind == RS_PARTIAL && a.op != b.op) bad = *pp = 1;
  }
  return bad;
}

static rs_outcome rejected(const char *stage, char *msg, size_t cap) {
  const char *e = rs_last_error();
  if (!e[0]) return say(RS_FAIL, msg, cap, "%s rejected the case with an empty message", stage);
  return RS_PASS;
}

static rs_outcome prop_reject(const rs_prop_env *env, const rs_case *c0, char *msg, size_t cap) {
  rs_case c = *c0;
  rs_clear_error();
  const char *why = static_violation(c0);
  int pp;
  if (rs_case_validate(&c) != RS_OK) {
    rs_outcome v = rejected("rs_case_validate", msg, cap);
    /* A bad layout stops here; a bad transition between two valid layouts must also be refused
     * by the planner's bookkeeping and by both executors, which never see rs_case_validate. */
    if (v != RS_PASS || why || !transition_violation(&c, &pp)) return v;
  } else {
    if (why) return say(RS_FAIL, msg, cap, "rs_case_validate accepted a case with %s", why);
    if (!transition_violation(&c, &pp)) return say(RS_SKIP, msg, cap, "no violation planted");
  }
  /* Greedy takes S->P / P(x)->P(y) as one direct step: that step must be refused. */
  rs_plan p;
  rs_clear_error();
  if (rs_ref_plan_greedy(&c.mesh, &c.tensor, &c.src, &c.dst, &p) != RS_OK)
    return rejected("rs_ref_plan_greedy", msg, cap);
  if (rs_plan_check(&c.mesh, &c.src, &c.dst, c.tensor.ndim, &p) == RS_OK) {
    char tr[1024];
    trace_of(&c, &p, tr, sizeof tr);
    return say(RS_FAIL, msg, cap, "rs_plan_check accepted an illegal greedy plan %s", tr);
  }
  if (!rs_last_error()[0]) return say(RS_FAIL, msg, cap, "rs_plan_check: empty message");
  scratch s = {0};
  rs_outcome o = RS_PASS;
  const rs_locals *in; /* memoized: the graph run below starts from the same source */
  rs_status st = rs_memo_source(env->memo, &c, &s.in, &in);
  if (st) {
    o = fail_st(msg, cap, "rs_make_source", st);
  } else {
    rs_clear_error();
    if (rs_ref_execute(&c, &p, in, &s.out) == RS_OK)
      o = say(RS_FAIL, msg, cap, "rs_ref_execute ran an illegal greedy plan");
    else
      o = rejected("rs_ref_execute", msg, cap);
  }
  rs_locals_free(&s.out);
#ifdef RS_HAVE_OPT
  if (o == RS_PASS && env->impl == RS_IMPL_OPT && env->opt && !env->distributed) {
    rs_clear_error();
    if (rs_opt_execute_plan(env->opt, env->world, &c, &p, in, &s.out, NULL) == RS_OK)
      o = say(RS_FAIL, msg, cap, "rs_opt_execute_plan ran an illegal greedy plan");
    else
      o = rejected("rs_opt_execute_plan", msg, cap);
  }
#endif
  rs_locals_free(&s.out);
  /* The graph planner may reach dst S->R->P legally; then the result must be right. A
   * P(x)->P(y) change has no oracle meaning, so only S->P cases are run. */
  if (o == RS_PASS && !pp && graph_reachable(&c)) {
    scratch_free(&s);
    o = prop_oracle(env, &c, RS_PLANNER_GRAPH, msg, cap);
  }
  scratch_free(&s);
  return o;
}

/* ---- 6b. the comparator itself ---- */

/* Every verdict rests on rs_oracle_compare: flip one bit of one element of the expected locals
 * (rank and element drawn from the case seed, so every rank and the last element come up) and
 * require exactly that element to be reported, at its rank and global index; unchanged locals
 * must compare equal. */
static rs_outcome prop_compare_sees(const rs_prop_env *env, const rs_case *c, char *msg, size_t cap) {
  scratch s = {0};
  const rs_locals *exp;
  rs_status st = rs_memo_expected(env->memo, c, NULL, &s.exp, &exp);
  if (st) {
    scratch_free(&s);
    return fail_st(msg, cap, "rs_oracle_expected", st);
  }
  int es = rs_dtype_size(c->tensor.dtype), n = c->mesh.nranks, pos = -1;
  uint64_t h = rs_mix64(c->seed ^ 0xC0FFEEull);
  for (int k = 0; k < n && pos < 0; k++) {
    int p = (int)((h >> 20) % (uint64_t)n + (uint64_t)k) % n;
    if (exp->r[p].nbytes >= es && es > 0) pos = p;
  }
  rs_outcome o = RS_PASS;
  rs_diff *d = calloc(1, sizeof *d);
  rs_local *r = n > 0 ? calloc((size_t)n, sizeof *r) : NULL;
  char *buf = pos >= 0 ? malloc((size_t)exp->r[pos].nbytes) : NULL;
  if (!d || !r || (pos >= 0 && !buf)) { /* n >= 1 for every valid mesh */
    o = rs_prop_oom(msg, cap, "compare_sees");
  } else if (rs_oracle_compare(c, &c->dst, exp, exp, d) != 0) {
    o = say(RS_FAIL, msg, cap, "compare_sees: identical locals reported as differing\n%s", d->text);
  } else if (pos >= 0) {
    const rs_local *e = &exp->r[pos];
    int64_t numel = e->nbytes / es, k = (int64_t)(h % (uint64_t)numel);
    /* Half the cases flip the last element: the end of a buffer is where loops stop early. */
    if (h & (1ull << 40)) k = numel - 1;
    memcpy(r, exp->r, sizeof *r * (size_t)n);
    memcpy(buf, e->data, (size_t)e->nbytes);
    buf[k * es + (int64_t)((h >> 8) % (uint64_t)es)] ^= (char)(1 << ((h >> 12) % 8));
    r[pos].data = buf;
    rs_locals act = {n, r};
    int64_t coord[RS_MAX_MESH_DIMS], start[RS_MAX_DIMS], size[RS_MAX_DIMS], gi[RS_MAX_DIMS];
    rs_mesh_coord(&c->mesh, pos, coord);
    rs_local_box(&c->mesh, &c->dst, &c->tensor, coord, start, size);
    /* The core's box and the oracle's local are two truths: when they disagree on the element
     * count (an empty core box, say) that is the finding, never a division by zero. */
    int64_t boxn = 1, rest = k;
    for (int dd = 0; dd < c->tensor.ndim; dd++) boxn *= size[dd];
    for (int dd = c->tensor.ndim - 1; dd >= 0 && boxn == numel; dd--) { /* boxn == numel > 0: no size is 0 */
      gi[dd] = start[dd] + rest % size[dd];
      rest /= size[dd];
    }
    int bad = boxn == numel ? rs_oracle_compare(c, &c->dst, exp, &act, d) : 0;
    int index_ok = 1;
    for (int dd = 0; dd < c->tensor.ndim && bad; dd++) index_ok &= d->index[dd] == gi[dd];
    if (boxn != numel)
      o = say(RS_FAIL, msg, cap,
              "compare_sees: rank position %d: the oracle's local has %lld element(s), the core's box %lld",
              pos, (long long)numel, (long long)boxn);
    else if (bad != 1 || d->nbad_elems != 1 || d->pos != pos || !index_ok)
      o = say(RS_FAIL, msg, cap,
              "compare_sees: one bit flipped in element %lld of rank position %d: reported %d rank(s), "
              "%lld element(s), first at position %d%s",
              (long long)k, pos, bad, (long long)d->nbad_elems, d->pos, index_ok ? "" : ", wrong global index");
  }
  free(buf);
  free(r);
  free(d);
  scratch_free(&s);
  return o;
}

/* ---- 7. opt (when built) ---- */

#ifdef RS_HAVE_OPT
/* Distributed worlds fill only the position this process plays: compare that one. */
static rs_outcome compare_own(const rs_prop_env *env, const rs_case *c, const rs_locals *exp,
                              const rs_locals *act, const char *what, char *msg, size_t cap) {
  int pos = rs_mesh_pos_of_rank(&c->mesh, rs_world_rank(env->world));
  if (pos < 0) return RS_PASS;
  const rs_local *e = &exp->r[pos], *a = pos < act->n ? &act->r[pos] : NULL;
  if (!a || a->ndim != e->ndim || a->nbytes != e->nbytes ||
      memcmp(a->shape, e->shape, sizeof(int64_t) * (size_t)e->ndim) != 0)
    return say(RS_FAIL, msg, cap, "%s: world rank %d: local shape differs", what, rs_world_rank(env->world));
  int es = rs_dtype_size(c->tensor.dtype);
  for (int64_t i = 0; es && i < e->nbytes / es; i++)
    if (memcmp((char *)a->data + i * es, (char *)e->data + i * es, (size_t)es) != 0)
      return say(RS_FAIL, msg, cap, "%s: world rank %d: element %lld is %llx, expected %llx", what,
                 rs_world_rank(env->world), (long long)i,
                 (unsigned long long)rs_elem_bits(c->tensor.dtype, a->data, i),
                 (unsigned long long)rs_elem_bits(c->tensor.dtype, e->data, i));
  return RS_PASS;
}

static rs_outcome check_opt(const rs_prop_env *env, const rs_case *c, const rs_locals *exp,
                            const rs_locals *ref, const rs_locals *act, const rs_plan *p,
                            const char *what, char *msg, size_t cap) {
  trace_src tr = {c, p, NULL, NULL, NULL};
  if (env->distributed) return compare_own(env, c, exp, act, what, msg, cap);
  char w[128];
  snprintf(w, sizeof w, "%s vs oracle", what);
  rs_outcome o = compare(env, c, &c->dst, exp, act, w, p ? &tr : NULL, msg, cap);
  if (o == RS_PASS && ref) {
    snprintf(w, sizeof w, "%s vs ref", what);
    o = compare(env, c, &c->dst, ref, act, w, p ? &tr : NULL, msg, cap);
  }
  return o;
}

/* The bytes the transport layer counted against what opt meant to send: per (sender, receiver)
 * pair of world ranks against its own schedule, or in total against the step schedules of a ref
 * plan; a copy-only case with opt's own schedule must also meet SPEC 7's lower bound exactly.
 * Under MPI a process sees its own sends and receives only: those pairs are compared. */
static rs_outcome check_posted(const rs_prop_env *env, const rs_case *c, int use_ref_plan,
                               const rs_opt_stats *stats, char *msg, size_t cap) {
  if (!env->world) return RS_PASS;
  rs_world *w = (rs_world *)env->world;
  int me = rs_world_rank(w), all = !env->distributed;
  rs_posted *got = NULL, *want = NULL;
  int64_t ng = 0, nw = 0, sent = 0;
  rs_outcome o = RS_PASS;
  rs_status st = rs_world_posted(w, &got, &ng);
  if (st) return fail_st(msg, cap, "rs_world_posted", st);
  for (int64_t i = 0; i < ng; i++) sent += got[i].sent;
  if (use_ref_plan) {
    if (all && sent != stats->bytes_sent)
      o = say(RS_FAIL, msg, cap, "byte count: the transport was handed %lld bytes, the step schedules send %lld",
              (long long)sent, (long long)stats->bytes_sent);
    free(got);
    return o;
  }
  if ((st = rs_opt_sched_pairs((rs_opt *)env->opt, c, &want, &nw))) {
    free(got);
    return fail_st(msg, cap, "rs_opt_sched_pairs", st);
  }
  /* Every counted pair must be in the schedule with the same bytes, and the other way round. */
  for (int pass = 0; pass < 2 && o == RS_PASS; pass++) {
    const rs_posted *a = pass ? want : got, *b = pass ? got : want;
    int64_t na = pass ? nw : ng, nb = pass ? ng : nw;
    for (int64_t i = 0; i < na && o == RS_PASS; i++) {
      int64_t j = 0;
      while (j < nb && !(b[j].from == a[i].from && b[j].to == a[i].to)) j++;
      const rs_posted *g = pass ? (j < nb ? &b[j] : NULL) : &a[i], *x = pass ? &a[i] : (j < nb ? &b[j] : NULL);
      int64_t gs = g ? g->sent : 0, gr = g ? g->recvd : 0, xs = x ? x->sent : 0;
      int32_t from = a[i].from, to = a[i].to;
      if ((all || from == me) && gs != xs)
        o = say(RS_FAIL, msg, cap, "byte count: rank %d -> %d posted %lld bytes of sends, the schedule sends %lld",
                from, to, (long long)gs, (long long)xs);
      else if ((all || to == me) && gr != xs)
        o = say(RS_FAIL, msg, cap, "byte count: rank %d -> %d posted %lld bytes of receives, the schedule sends %lld",
                from, to, (long long)gr, (long long)xs);
    }
  }
  if (o == RS_PASS && all && !rs_sharding_has_partial(&c->src) && !rs_sharding_has_partial(&c->dst)) {
    int64_t lb = -1;
    rs_case cc = *c;
    if ((st = rs_case_validate(&cc)) || (st = rs_traffic_lower_bound(&cc.mesh, &cc.tensor, &cc.src, &cc.dst, &lb)))
      o = fail_st(msg, cap, "rs_traffic_lower_bound", st);
    else if (sent != lb)
      o = say(RS_FAIL, msg, cap, "byte count: a copy-only case posted %lld bytes, SPEC 7's lower bound is %lld",
              (long long)sent, (long long)lb);
  }
  free(got);
  free(want);
  return o;
}

static rs_outcome prop_opt(const rs_prop_env *env, const rs_case *c, int use_ref_plan, char *msg,
                           size_t cap) {
  if (env->impl != RS_IMPL_OPT || !env->opt) return say(RS_SKIP, msg, cap, "opt not selected");
  rs_plan p;
  rs_outcome po = make_plan(env, c, RS_PLANNER_AUTO, &p, msg, cap);
  if (use_ref_plan && po != RS_PASS) return po;
  /* opt implements the seed enumeration's pieces: PyTorch's zero-fill (Shard -> P(sum)) is ref's */
  if (po == RS_PASS && rs__plan_zero_fill_dims(c, &p))
    return say(RS_SKIP, msg, cap, "opt: the plan zero-fills (pytorch enumeration; ref only)");
  scratch s = {0};
  rs_status st;
  rs_outcome o = RS_PASS;
  int have_ref = 0;
  const rs_locals *in = NULL, *exp = NULL;
  /* opt's own schedule follows the canonical event sequence, a given plan its own (SPEC 5); ref
   * runs its plan, so it is the same truth only when the two sequences agree. */
  rs_events canon, planned, *ev = &canon;
  int same_events = 1;
  if ((st = rs_events_canonical(&c->mesh, &c->src, &c->dst, &canon))) return fail_st(msg, cap, "rs_events_canonical", st);
  if (po == RS_PASS) {
    if ((st = rs_events_from_plan(&c->mesh, &p, &planned))) return fail_st(msg, cap, "rs_events_from_plan", st);
    if (use_ref_plan) ev = &planned;
    else same_events = rs_events_equal(&canon, &planned) || (c->values != RS_VALUES_ORDER && c->values != RS_VALUES_WRAP);
  }
  if ((st = rs_memo_source(env->memo, c, &s.in, &in))) o = fail_st(msg, cap, "rs_make_source", st);
  else if ((st = rs_memo_expected(env->memo, c, ev, &s.exp, &exp))) o = fail_st(msg, cap, "rs_oracle_expected", st);
  else if (po == RS_PASS) {
    /* ref's own failures are other properties' business; here they only decide what opt is
     * compared with - except that a plan ref refuses must be refused by opt too. */
    have_ref = rs_ref_execute(c, &p, in, &s.back) == RS_OK;
    if (!have_ref && use_ref_plan) {
      char ref_err[512];
      snprintf(ref_err, sizeof ref_err, "%s", rs_last_error());
      st = rs_opt_execute_plan(env->opt, env->world, c, &p, in, &s.out, NULL);
      o = st ? RS_PASS
             : say(RS_FAIL, msg, cap, "rs_opt_execute_plan ran a plan ref refuses (%s)", ref_err);
      scratch_free(&s);
      return o;
    }
  }
  if (o == RS_PASS) {
    rs_opt_stats stats;
    rs_world_posted_reset((rs_world *)env->world);
    if (use_ref_plan) {
      st = rs_opt_execute_plan(env->opt, env->world, c, &p, in, &s.out, &stats);
      o = st ? fail_st(msg, cap, "rs_opt_execute_plan", st)
             : check_opt(env, c, exp, have_ref ? &s.back : NULL, &s.out, &p, "opt(ref plan)", msg, cap);
    } else {
      st = rs_opt_redistribute(env->opt, env->world, c, in, &s.out, &stats);
      o = st ? fail_st(msg, cap, "rs_opt_redistribute", st)
             : check_opt(env, c, exp, have_ref && same_events ? &s.back : NULL, &s.out, NULL, "opt", msg, cap);
    }
    if (o == RS_PASS) o = check_posted(env, c, use_ref_plan, &stats, msg, cap);
  }
  scratch_free(&s);
  return o;
}
#endif

/* ---- 9. a backend under test (reshard conform) ---- */

/* The backend runs the case from the source locals; what it answers is held to the oracle's result
 * of the canonical event sequence (SPEC 5), as opt's own schedule is. The hook judges the answer
 * (conform/ owns the comparison, the protocol and the faults). */
static rs_outcome prop_backend(const rs_prop_env *env, const rs_case *c, char *msg, size_t cap) {
  if (!env->backend) return say(RS_SKIP, msg, cap, "no backend under test");
  scratch s = {0};
  const rs_locals *in = NULL, *exp = NULL;
  rs_events canon;
  rs_status st;
  rs_outcome o;
  if ((st = rs_events_canonical(&c->mesh, &c->src, &c->dst, &canon))) o = fail_st(msg, cap, "rs_events_canonical", st);
  else if ((st = rs_memo_source(env->memo, c, &s.in, &in))) o = fail_st(msg, cap, "rs_make_source", st);
  else if ((st = rs_memo_expected(env->memo, c, &canon, &s.exp, &exp))) o = fail_st(msg, cap, "rs_oracle_expected", st);
  else o = env->backend(env->backend_ctx, c, in, exp, msg, cap);
  scratch_free(&s);
  return o;
}

/* ---- 8. the test values themselves (SPEC 8) ---- */

/* Every rank's source local is the values generator's piece at the rank's coordinate over the rank's
 * src box, both worked out with the oracle's own coordinate and box code (rs_make_source uses
 * core's): a core mesh or box bug, or a source builder that reads the wrong piece, shows here. */
static rs_outcome source_matches(const rs_case *c, const rs_locals *in, char *msg, size_t cap) {
  int es = rs_dtype_size(c->tensor.dtype), nd = c->tensor.ndim;
  unsigned char g[8];
  if (in->n != c->mesh.nranks)
    return say(RS_FAIL, msg, cap, "values: %d source locals for %d ranks", in->n, (int)c->mesh.nranks);
  /* A rank whose box and src Partial coordinates (the only coordinates the generator reads) equal
   * an earlier, checked rank's must hold that rank's bytes: compared with them, not generated again. */
  typedef struct seen_box { int64_t start[RS_MAX_DIMS], size[RS_MAX_DIMS], pc[RS_MAX_MESH_DIMS]; } seen_box;
  seen_box *seen = calloc((size_t)in->n + 1, sizeof *seen);
  for (int pos = 0; pos < in->n; pos++) {
    int64_t coord[RS_MAX_MESH_DIMS] = {0}, start[RS_MAX_DIMS], size[RS_MAX_DIMS], idx[RS_MAX_DIMS] = {0};
    rs__oracle_coord(&c->mesh, pos, coord);
    rs__oracle_box(&c->mesh, &c->src, &c->tensor, coord, start, size);
    const rs_local *l = &in->r[pos];
    int64_t numel = 1;
    int shape_ok = l->ndim == nd;
    for (int d = 0; d < nd; d++) {
      numel *= size[d];
      shape_ok = shape_ok && l->shape[d] == size[d];
    }
    if (!shape_ok || l->nbytes != numel * es) {
      free(seen);
      return say(RS_FAIL, msg, cap, "values: rank position %d holds a source of %lld bytes, its src box %lld elements",
                 pos, (long long)l->nbytes, (long long)numel);
    }
    const unsigned char *p = l->data;
    int twin = -1;
    if (seen) {
      memcpy(seen[pos].start, start, sizeof(int64_t) * (size_t)nd);
      memcpy(seen[pos].size, size, sizeof(int64_t) * (size_t)nd);
      for (int m = 0, k = 0; m < c->src.mesh_ndim; m++)
        if (c->src.p[m].kind == RS_PARTIAL) seen[pos].pc[k++] = coord[m];
      for (int q = 0; q < pos && twin < 0 && numel; q++)
        if (!memcmp(&seen[q], &seen[pos], sizeof *seen)) twin = q;
    }
    int same;
    if (twin >= 0) {
      same = memcmp(in->r[twin].data, p, (size_t)(numel * es)) == 0;
    } else {
      /* the whole box from the generator at once; the element walk below only names a difference */
      unsigned char *want = numel ? malloc((size_t)(numel * es)) : NULL;
      if (want) rs_value_pieces(c, coord, start, size, want);
      same = want && memcmp(want, p, (size_t)(numel * es)) == 0;
      free(want);
    }
    if (same || !numel) continue;
    free(seen);
    seen = NULL;
    for (int64_t k = 0; k < numel; k++) {
      int64_t flat = 0;
      for (int d = 0; d < nd; d++) flat = flat * c->tensor.shape[d] + start[d] + idx[d];
      rs_value_piece(c, coord, flat, g);
      if (memcmp(g, p + k * es, (size_t)es) != 0)
        return say(RS_FAIL, msg, cap,
                   "values: rank position %d holds 0x%llx at global flat index %lld, the values generator's "
                   "piece for its coordinate is 0x%llx", pos, (unsigned long long)rs_elem_bits(c->tensor.dtype, p, k),
                   (long long)flat, (unsigned long long)rs_elem_bits(c->tensor.dtype, g, 0));
      for (int d = nd - 1; d >= 0; d--) {
        if (++idx[d] < size[d]) break;
        idx[d] = 0;
      }
    }
  }
  free(seen);
  return RS_PASS;
}

static int is_finite_elem(rs_dtype t, const unsigned char *p, int64_t i) {
  uint64_t b = rs_elem_bits(t, p, i);
  switch (t) {
    case RS_F64: return ((b >> 52) & 0x7FF) != 0x7FF;
    case RS_F32: return ((b >> 23) & 0xFF) != 0xFF;
    case RS_F16: return ((b >> 10) & 0x1F) != 0x1F;
    case RS_BF16: return ((b >> 7) & 0xFF) != 0xFF;
    default: return 1;
  }
}

/* Integer order values (SPEC 8: "sums cannot overflow the dtype"): the same reduction of the
 * pieces (the src Partial dims in ascending order, left folds, avg truncated once per dim) in 64-bit
 * arithmetic must stay inside the dtype at every step; a wrapped sum is deterministic, so ref, opt
 * and the oracle would all agree on it and only this sees it. I64 (bounded at 2^40 / ranks) is
 * not checked. */
static rs_outcome int_order_fits(const rs_case *c, int64_t numel, char *msg, size_t cap) {
  int64_t lo, hi;
  switch (c->tensor.dtype) {
    case RS_I8: lo = INT8_MIN, hi = INT8_MAX; break;
    case RS_U8: lo = 0, hi = UINT8_MAX; break;
    case RS_I16: lo = INT16_MIN, hi = INT16_MAX; break;
    case RS_I32: lo = INT32_MIN, hi = INT32_MAX; break;
    default: return RS_PASS;
  }
  int pd[RS_MAX_MESH_DIMS], np = 0;
  int64_t stride[RS_MAX_MESH_DIMS], nstate = 1;
  for (int m = 0; m < c->mesh.ndim; m++)
    if (c->src.p[m].kind == RS_PARTIAL && c->mesh.size[m] > 1) {
      pd[np] = m;
      stride[np++] = nstate;
      nstate *= c->mesh.size[m];
    }
  if (np == 0) return RS_PASS;
  /* the pieces of every state generated a block of elements at a time */
  enum { BLOCK = 256 };
  int es = rs_dtype_size(c->tensor.dtype);
  int64_t *v = malloc(sizeof *v * (size_t)nstate);
  unsigned char *piece = malloc((size_t)(nstate * BLOCK * es));
  if (!v || !piece) {
    free(v);
    free(piece);
    return fail_st(msg, cap, "values", rs_fail(RS_ERR_NOMEM, "values: out of memory"));
  }
  int bits = es * 8;
  rs_outcome o = RS_PASS;
  for (int64_t idx = 0; idx < numel && o == RS_PASS; idx++) {
    int64_t i = idx % BLOCK;
    if (i == 0)
      for (int64_t a = 0; a < nstate; a++) {
        int64_t coord[RS_MAX_MESH_DIMS] = {0};
        for (int j = 0; j < np; j++) coord[pd[j]] = (a / stride[j]) % c->mesh.size[pd[j]];
        rs_value_range(c, coord, idx, numel - idx < BLOCK ? numel - idx : BLOCK, piece + a * BLOCK * es);
      }
    for (int64_t a = 0; a < nstate; a++) {
      uint64_t u = rs_elem_bits(c->tensor.dtype, piece + a * BLOCK * es, i), top = (uint64_t)1 << (bits - 1);
      v[a] = c->tensor.dtype == RS_U8 ? (int64_t)u : (int64_t)((u ^ top) - top);
    }
    for (int j = 0; j < np && o == RS_PASS; j++) {
      int64_t n = c->mesh.size[pd[j]];
      int op = c->src.p[pd[j]].op;
      for (int64_t a = 0; a < nstate && o == RS_PASS; a++) {
        if ((a / stride[j]) % n != 0) continue;
        int64_t acc = v[a];
        for (int64_t k = 1; k < n; k++) {
          int64_t x = v[a + k * stride[j]];
          acc = op == RS_MIN ? (x < acc ? x : acc) : op == RS_MAX ? (x > acc ? x : acc) : acc + x;
          if (acc < lo || acc > hi) {
            o = say(RS_FAIL, msg, cap, "values: integer order values overflow %s at flat index %lld: a partial "
                    "%s over mesh dim %d reaches %lld", rs_dtype_name(c->tensor.dtype), (long long)idx,
                    op == RS_AVG ? "avg sum" : "sum", pd[j], (long long)acc);
            break;
          }
        }
        if (op == RS_AVG) acc /= n;
        v[a] = acc;
      }
    }
  }
  free(v);
  free(piece);
  return o;
}

/* SPEC 8 on every case: each rank's source is the generator's piece over its box (any value mode);
 * sources of a non-empty tensor are not all zero; with Partial sources, the pieces reduced with the
 * case's events up to every mesh dim replicated give the logical tensor (exact values), or finite
 * numbers (order values: the ranges must not overflow). */
static rs_outcome prop_values(const rs_prop_env *env, const rs_case *c, char *msg, size_t cap) {
  int64_t numel = 1;
  for (int d = 0; d < c->tensor.ndim; d++) numel *= c->tensor.shape[d];
  scratch s = {0};
  const rs_locals *in;
  rs_status st = rs_memo_source(env->memo, c, &s.in, &in);
  if (st) return fail_st(msg, cap, "rs_make_source", st);
  rs_outcome o = source_matches(c, in, msg, cap);
  if (o != RS_PASS || c->values == RS_VALUES_BITS || !rs_dtype_reducible(c->tensor.dtype)) {
    scratch_free(&s);
    return o;
  }
  int nonzero = 0;
  for (int pos = 0; pos < in->n && !nonzero; pos++) {
    const unsigned char *b = in->r[pos].data;
    for (int64_t i = 0; i < in->r[pos].nbytes; i++)
      if (b[i]) {
        nonzero = 1;
        break;
      }
  }
  if (numel > 0 && !nonzero) {
    o = say(RS_FAIL, msg, cap, "values: all %lld source elements of every rank are zero (%s values, %s)",
            (long long)numel, c->values == RS_VALUES_EXACT ? "exact" : "order", rs_dtype_name(c->tensor.dtype));
  } else if (rs_sharding_has_partial(&c->src) && numel > 0) {
    rs_sharding whole;
    memset(&whole, 0, sizeof whole);
    whole.mesh_ndim = c->mesh.ndim; /* every mesh dim Replicate: each rank holds the reduced tensor */
    rs_events ev;
    if ((st = rs_events_canonical(&c->mesh, &c->src, &whole, &ev)) ||
        (st = rs_oracle_expected_events(c, &whole, &ev, &s.exp))) {
      o = fail_st(msg, cap, "rs_oracle_expected_events", st);
    } else {
      int es = rs_dtype_size(c->tensor.dtype);
      unsigned char g[8];
      const unsigned char *r0 = s.exp.r[0].data;
      if (c->values == RS_VALUES_ORDER) o = int_order_fits(c, numel, msg, cap);
      /* exact values: the logical tensor generated at once; the walk below only names a difference */
      unsigned char *want = c->values == RS_VALUES_EXACT ? malloc((size_t)(numel * es)) : NULL;
      if (want) rs_value_range(c, NULL, 0, numel, want);
      int same = want && memcmp(want, r0, (size_t)(numel * es)) == 0;
      free(want);
      for (int64_t i = 0; i < numel && o == RS_PASS && !same; i++) {
        /* wrap values: integer sums leave the dtype by design, every integer is a value */
        if (c->values == RS_VALUES_WRAP && !rs_dtype_is_float(c->tensor.dtype)) break;
        if (c->values == RS_VALUES_ORDER) {
          if (is_finite_elem(c->tensor.dtype, r0, i)) continue;
          o = say(RS_FAIL, msg, cap, "values: the order-value pieces reduce to 0x%llx (not finite) at flat index "
                  "%lld (%s): the value range overflows", (unsigned long long)rs_elem_bits(c->tensor.dtype, r0, i),
                  (long long)i, rs_dtype_name(c->tensor.dtype));
          break;
        }
        rs_value_global(c, i, g);
        if (memcmp(g, r0 + i * es, (size_t)es) != 0) {
          o = say(RS_FAIL, msg, cap,
                  "values: the source pieces reduce to 0x%llx at flat index %lld, the logical tensor "
                  "holds 0x%llx (%s, exact values)", (unsigned long long)rs_elem_bits(c->tensor.dtype, r0, i),
                  (long long)i, (unsigned long long)rs_elem_bits(c->tensor.dtype, g, 0),
                  rs_dtype_name(c->tensor.dtype));
          break;
        }
      }
    }
  }
  scratch_free(&s);
  return o;
}

/* ---- dispatch ---- */

rs_outcome rs_prop_run(rs_prop_id id, const rs_prop_env *env, const rs_case *c, char *msg,
                       size_t cap) {
  rs_prop_env none = {0};
  if (!env) env = &none;
  if (cap) msg[0] = 0;
  switch (id) {
    case RS_PROP_BOXES: return prop_boxes(env, c, msg, cap);
    case RS_PROP_GREEDY_ORACLE: return prop_oracle(env, c, RS_PLANNER_GREEDY, msg, cap);
    case RS_PROP_GRAPH_ORACLE: return prop_oracle(env, c, RS_PLANNER_GRAPH, msg, cap);
    case RS_PROP_ROUNDTRIP_GREEDY: return prop_roundtrip(env, c, RS_PLANNER_GREEDY, msg, cap);
    case RS_PROP_ROUNDTRIP_GRAPH: return prop_roundtrip(env, c, RS_PLANNER_GRAPH, msg, cap);
    case RS_PROP_PLAN_LEGAL_GREEDY: return prop_plan_legal(env, c, RS_PLANNER_GREEDY, msg, cap);
    case RS_PROP_PLAN_LEGAL_GRAPH: return prop_plan_legal(env, c, RS_PLANNER_GRAPH, msg, cap);
    case RS_PROP_REJECT_BAD: return prop_reject(env, c, msg, cap);
    case RS_PROP_COMPARE_SEES: return prop_compare_sees(env, c, msg, cap);
    case RS_PROP_VALUES: return prop_values(env, c, msg, cap);
    case RS_PROP_BACKEND: return prop_backend(env, c, msg, cap);
#ifdef RS_HAVE_OPT
    case RS_PROP_OPT_ORACLE: return prop_opt(env, c, 0, msg, cap);
    case RS_PROP_OPT_PLAN: return prop_opt(env, c, 1, msg, cap);
#endif
    default: return say(RS_SKIP, msg, cap, "%s: not built (no opt/)", rs_prop_name(id));
  }
}

rs_outcome rs_prop_run_stream(rs_prop_id id, const rs_prop_env *env, const rs_gen_opts *o,
                              rs_choices *ch, rs_case *c, char *msg, size_t cap) {
  rs_status st = rs_prop_bad_cases(id) ? rs_gen_bad_case(ch, o, c) : rs_gen_case(ch, o, c);
  if (st) {
    /* A generator that cannot produce a valid case is itself a failure of the contract. */
    return say(RS_FAIL, msg, cap, "generator: %s: %s", rs_status_name(st), rs_last_error());
  }
  return rs_prop_run(id, env, c, msg, cap);
}
