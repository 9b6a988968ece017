/* tp.c - TP style properties (SPEC 12): the generator of TP cases, the expected layouts and
 * collectives of every style written here again from PyTorch's style.py semantics (independently
 * of core/tp's driver and core/tp_style.c), the properties, and the `reshard tp check` campaign
 * with stream shrinking and regression fixtures. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "core/tp/tp_internal.h"
#include "core/numflag.h"
#include "core/values.h"
#include "props/tp.h"
#include "props/report.h"
#include "core/mutant.h"
#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
#endif

/* ---------------------------------------------------------------- expectations (PyTorch's) */

/* What PyTorch does with each module, written again here from the styles' semantics and the
 * recorded behaviour of PyTorch 2.15 (docs/tp.md), independently of core/tp's driver: the layout
 * and kind of every module's output, its collectives and parameter placements, or the reason the
 * case is refused. The generator walks its draws through these rules (never through the driver
 * it tests), and a case the rules refuse is a result too: the driver must refuse it. */

typedef struct expect_mod {
  rs_placement out;
  int local;
  int64_t comm[RS_COLL_COUNT];
  rs_placement w, b;
} expect_mod;

static rs_placement shard(int d) { return rs_pl_shard(d); }
static int is_s(rs_placement p, int d) { return p.kind == RS_SHARD && p.dim == d; }
static int is_p(rs_placement p) { return p.kind == RS_PARTIAL; }

static rs_placement norm_pl(rs_placement p, int nd) {
  if (p.kind == RS_SHARD && p.dim < 0) p.dim = (int8_t)(p.dim + nd);
  return p;
}

/* The collective PyTorch's redistribute issues for one mesh dim of size n going a -> b; 0 when
 * PyTorch refuses the move (to a Partial from anything but a Shard). */
static int transition(int64_t n, rs_placement a, rs_placement b, int64_t *comm) {
  if (rs_pl_equal(a, b)) return 1;
  if (b.kind == RS_PARTIAL) return a.kind == RS_SHARD; /* zero-fill, nothing sent */
  if (n <= 1) return 1;
  if (a.kind == RS_SHARD && b.kind == RS_REPLICATE) comm[RS_COLL_ALL_GATHER]++;
  else if (a.kind == RS_PARTIAL && b.kind == RS_REPLICATE) comm[RS_COLL_ALL_REDUCE]++;
  else if (a.kind == RS_PARTIAL && b.kind == RS_SHARD) comm[RS_COLL_REDUCE_SCATTER]++;
  else if (a.kind == RS_SHARD && b.kind == RS_SHARD) comm[RS_COLL_ALL_TO_ALL]++;
  return 1;
}

static int real_norm(rs_tp_module_kind k) { return k == RS_TP_LAYERNORM || k == RS_TP_RMSNORM; }
static int any_norm(rs_tp_module_kind k) { return k == RS_TP_NORM || real_norm(k); }

/* Parameter placements of PyTorch's ColwiseParallel / RowwiseParallel partition functions. */
static void expect_params(const rs_tp_module *m, expect_mod *e) {
  e->w = e->b = rs_pl_replicate();
  if (m->style.kind == RS_TP_COLWISE) {
    e->w = m->kind == RS_TP_EMBEDDING ? shard(1) : shard(0);
    e->b = shard(0);
  } else if (m->style.kind == RS_TP_ROWWISE) {
    e->w = m->kind == RS_TP_EMBEDDING ? shard(0) : shard(1);
  }
}

/* A dim's length as the TP group sees it: DP's largest piece of the batch when DP splits it. */
static int64_t tp_len(const rs_tp_case *c, int d, int64_t len) {
  if (d != 0 || c->mesh.ndim != 2 || c->dp_layout.kind != RS_SHARD) return len;
  int64_t n = c->mesh.size[1 - c->tp_dim];
  return (len + n - 1) / n;
}

static int refuse(char *why, size_t cap, const rs_tp_module *m, const char *what) {
  if (why) snprintf(why, cap, "%s: %s", m->path, what);
  return 0;
}

/* Walks modules [0, nmod) of c; fills e[i]. Returns 1 when the case is defined, 0 when PyTorch
 * (or the contract, for PyTorch's mathematically wrong answers) refuses it, with the reason. */
static int expect_chain(const rs_tp_case *c, int nmod, expect_mod *e, char *why, size_t cap) {
  int64_t n = c->mesh.size[c->tp_dim];
  rs_placement cur = norm_pl(c->input_layout, c->mod[0].kind == RS_TP_EMBEDDING ? 2 : 3);
  int local = 1;
  if (is_p(cur) && c->mod[0].kind == RS_TP_EMBEDDING) return refuse(why, cap, &c->mod[0], "Partial token ids");
  for (int i = 0; i < nmod; i++) {
    const rs_tp_module *m = &c->mod[i];
    const rs_tp_style *s = &m->style;
    expect_mod *x = &e[i];
    memset(x, 0, sizeof *x);
    expect_params(m, x);
    int nd = m->kind == RS_TP_EMBEDDING ? 2 : 3;
    if (cur.kind == RS_SHARD && cur.dim >= nd) return refuse(why, cap, m, "a shard dim out of range");
    int plain = s->kind == RS_TP_REPLICATE || s->kind == RS_TP_PREPARE_INPUT || s->kind == RS_TP_PREPARE_OUTPUT;
    if (any_norm(m->kind) && (s->kind == RS_TP_COLWISE || s->kind == RS_TP_ROWWISE))
      return refuse(why, cap, m, "Colwise/Rowwise on a norm (NotImplementedError)");
    /* the input */
    rs_placement want;
    switch (s->kind) {
    case RS_TP_COLWISE:
    case RS_TP_ROWWISE:
      if (!rs_pl_equal(norm_pl(s->input_layout, nd), cur)) return refuse(why, cap, m, "declared input_layouts");
      want = s->kind == RS_TP_COLWISE || m->kind == RS_TP_EMBEDDING ? rs_pl_replicate() : shard(2);
      transition(n, cur, want, x->comm);
      cur = want;
      local = 0;
      break;
    case RS_TP_SEQUENCE:
      want = norm_pl(shard(s->sequence_dim), nd);
      if (want.dim < 0 || want.dim >= nd) return refuse(why, cap, m, "sequence_dim out of range");
      if (local && !rs_pl_equal(want, cur)) return refuse(why, cap, m, "declared sequence_dim");
      transition(n, cur, want, x->comm);
      cur = want;
      local = 0;
      break;
    case RS_TP_PREPARE_INPUT:
      if (s->omitted & RS_TP_ARG_INPUT) break; /* PrepareModuleInput(): nothing */
      if (!rs_pl_equal(norm_pl(s->input_layout, nd), cur)) return refuse(why, cap, m, "declared input_layouts");
      want = norm_pl(s->desired_input, nd);
      if (want.kind == RS_SHARD && want.dim >= nd) return refuse(why, cap, m, "desired shard dim out of range");
      if (!transition(n, cur, want, x->comm)) return refuse(why, cap, m, "R -> P(sum)");
      cur = want;
      local = s->use_local_output;
      break;
    default:
      break;
    }
    if (plain && !local) return refuse(why, cap, m, "plain parameters meet a DTensor");
    if (plain && any_norm(m->kind) && is_s(cur, 2) && n > 1 && !(m->kind == RS_TP_NORM && m->in == 1))
      return refuse(why, cap, m, "a whole norm weight meets a slice of the features (broadcast)");
    /* the local compute */
    rs_placement out = cur;
    if (m->kind == RS_TP_EMBEDDING) {
      if (is_p(cur)) return refuse(why, cap, m, "Partial token ids");
      if (s->kind == RS_TP_COLWISE) out = shard(2);
      else if (s->kind == RS_TP_ROWWISE) out = rs_pl_partial(RS_SUM);
    } else if (m->kind == RS_TP_LINEAR) {
      if (s->kind == RS_TP_COLWISE) out = shard(2);
      else if (s->kind == RS_TP_ROWWISE) out = rs_pl_partial(RS_SUM);
      else if (s->kind == RS_TP_SEQUENCE && is_s(cur, 2)) out = rs_pl_partial(RS_SUM);
      else if (s->kind == RS_TP_SEQUENCE && n > 1 && tp_len(c, cur.dim, cur.dim == 0 ? c->batch : c->seq) < n) {
        transition(n, cur, rs_pl_replicate(), x->comm); /* a dim shorter than the TP size: gathered */
        out = rs_pl_replicate();
      } else if (plain && is_s(cur, 2) && n > 1) return refuse(why, cap, m, "plain Linear on a feature slice");
      else if (plain && is_p(cur) && m->bias && n > 1) return refuse(why, cap, m, "plain Linear bias on Partial");
    } else if (real_norm(m->kind) && n > 1) {
      if (is_p(cur)) return refuse(why, cap, m, "a real norm of Partial pieces");
      if (is_s(cur, 2)) {
        if (m->kind == RS_TP_RMSNORM) return refuse(why, cap, m, "RMSNorm split on its features (Partial(avg))");
        transition(n, cur, rs_pl_replicate(), x->comm);
        out = rs_pl_replicate();
      }
    }
    /* the output */
    switch (s->kind) {
    case RS_TP_COLWISE:
    case RS_TP_ROWWISE:
      want = norm_pl(s->output_layout, 3);
      /* PyTorch's MaskPartial (a row-parallel Embedding's output) never becomes P(sum) */
      if (s->kind == RS_TP_ROWWISE && m->kind == RS_TP_EMBEDDING && want.kind == RS_PARTIAL)
        return refuse(why, cap, m, "MaskPartial output asked to be P(sum)");
      if (!transition(n, out, want, x->comm)) return refuse(why, cap, m, "R -> P(sum) output");
      out = want;
      local = s->use_local_output;
      break;
    case RS_TP_SEQUENCE:
      local = s->use_local_output;
      break;
    case RS_TP_PREPARE_OUTPUT:
      if (!rs_pl_equal(norm_pl(s->output_layout, 3), out)) return refuse(why, cap, m, "declared output_layouts");
      want = norm_pl(s->desired_output, 3);
      if (!transition(n, out, want, x->comm)) return refuse(why, cap, m, "R -> P(sum) output");
      out = want;
      local = s->use_local_output;
      break;
    default:
      break;
    }
    if (out.kind == RS_SHARD && (out.dim < 0 || out.dim > 2)) return refuse(why, cap, m, "output shard dim out of range");
    x->out = out;
    x->local = local;
    cur = out;
  }
  return 1;
}

int rs_tp_rules(const rs_tp_case *c, char *why, size_t cap) {
  expect_mod *e = calloc(RS_TP_MAX_MODULES, sizeof *e);
  if (!e) {
    snprintf(why, cap, "out of memory");
    return 0;
  }
  int ok = expect_chain(c, c->nmod, e, why, cap);
  free(e);
  return ok;
}

/* ---------------------------------------------------------------- generator */

/* A layout of an activation of nd dims: R, S(1) (sequence), S(nd-1) (features), S(0) (batch),
 * P (hidden states only, where a slot takes it). */
static rs_placement draw_layout(rs_choices *ch, int nd, int allow_p) {
  rs_placement opts[5];
  int n = 0;
  opts[n++] = rs_pl_replicate();
  opts[n++] = shard(1);
  if (nd == 3) opts[n++] = shard(2);
  opts[n++] = shard(0);
  if (allow_p) opts[n++] = rs_pl_partial(RS_SUM);
  return opts[rs_draw(ch, (uint64_t)n)];
}

/* The styles a module can take given the layout it receives (cur, local or not), on a TP size of
 * n: mostly ones the rules define (refused cases come from the layouts drawn afterwards). */
static int style_options(const rs_tp_module *m, rs_placement cur, int local, int64_t n, rs_tp_style_kind *o) {
  int k = 0, lin = m->kind == RS_TP_LINEAR, part = cur.kind == RS_PARTIAL, feat = is_s(cur, 2) && n > 1;
  if (!any_norm(m->kind)) {
    o[k++] = RS_TP_COLWISE;
    o[k++] = RS_TP_ROWWISE;
  }
  if (!part && (!local || (cur.kind == RS_SHARD && !(lin && cur.dim == 2)))) o[k++] = RS_TP_SEQUENCE;
  /* plain parameters take local tensors only: a Partial input (per-rank compute) for a norm or a
   * Linear without bias, never a slice of the features on more than one rank */
  int plain_ok = local && !(m->kind != RS_TP_EMBEDDING && feat) &&
                 !(part && (m->kind == RS_TP_EMBEDDING || (lin && m->bias) || real_norm(m->kind)) && n > 1);
  if (plain_ok) {
    o[k++] = RS_TP_REPLICATE;
    if (m->kind != RS_TP_EMBEDDING) o[k++] = RS_TP_PREPARE_OUTPUT;
  }
  if (m->kind != RS_TP_EMBEDDING || !part) o[k++] = RS_TP_PREPARE_INPUT;
  return k;
}

static int flip(rs_choices *ch, int dflt) { return rs_draw(ch, 2) ? !dflt : dflt; }

/* Leave a style argument out (PyTorch's default applies) one time in three, when its value is the
 * default anyway. */
static void maybe_omit(rs_choices *ch, rs_tp_style *s, unsigned bit, int is_default) {
  if (is_default && rs_draw(ch, 3) == 0) s->omitted |= bit;
  else s->omitted &= ~bit;
}

rs_status rs_tp_gen_case(rs_choices *ch, int max_ranks, rs_tp_case *c) {
  memset(c, 0, sizeof *c);
  int two = (int)rs_draw(ch, 2);
  int64_t sizes[2] = {1 + (int64_t)rs_draw(ch, 6), 1};
  if (two) sizes[1] = 1 + (int64_t)rs_draw(ch, 3);
  if (sizes[0] * sizes[1] > max_ranks) return rs_fail(RS_ERR_INVALID, "gen: more ranks than --max-ranks");
  c->tp_dim = two ? (int)rs_draw(ch, 2) : 0;
  if (two && c->tp_dim == 1) { /* sizes[0] was drawn for TP: keep it on the TP dim */
    int64_t t = sizes[0];
    sizes[0] = sizes[1];
    sizes[1] = t;
  }
  rs_status st = rs_mesh_init(&c->mesh, two ? 2 : 1, sizes, NULL);
  if (st) return st;
  int64_t n = c->mesh.size[c->tp_dim];
  c->dp_layout = two && rs_draw(ch, 2) ? shard(0) : rs_pl_replicate();
  c->batch = 1 + (int64_t)rs_draw(ch, 3);
  c->seq = 1 + (int64_t)rs_draw(ch, 7);
  c->seed = rs_draw(ch, (uint64_t)1 << 40);
  snprintf(c->name, sizeof c->name, "tp-generated");
  uint64_t shape = rs_draw(ch, 5);
  if (shape >= 3) { /* a transformer block plan, with a random output layer */
    c->vmax = 1;
    st = rs_tp_block_plan(shape == 3 ? "tp" : "sp", 1 + (int64_t)rs_draw(ch, 12), 1 + (int64_t)rs_draw(ch, 6),
                          1 + (int64_t)rs_draw(ch, 10), (int)rs_draw(ch, 2), c);
    if (st) return st;
    rs_tp_style *out = &c->mod[c->nmod - 1].style;
    if (rs_draw(ch, 2)) out->output_layout = shard(-1); /* loss parallel */
    out->use_local_output = flip(ch, 1);
    return rs__tp_case_check_static(c);
  }
  int nmod = 1 + (int)(shape == 2 ? 1 + rs_draw(ch, 3) : 0);
  c->vmax = nmod == 1 ? 1 + (int64_t)rs_draw(ch, 3) : 1;
  rs_placement cur = rs_pl_replicate();
  int local = 1;
  expect_mod *e = calloc(RS_TP_MAX_MODULES, sizeof *e);
  if (!e) return rs_fail(RS_ERR_NOMEM, "gen: out of memory");
  for (int i = 0; i < nmod; i++) {
    rs_tp_module *m = &c->mod[i];
    snprintf(m->path, sizeof m->path, "m%d", i);
    uint64_t k = i == 0 ? rs_draw(ch, 3) : rs_draw(ch, 2) * 2; /* linear, embedding, norm */
    m->kind = k == 0 ? RS_TP_LINEAR : k == 1 ? RS_TP_EMBEDDING : RS_TP_NORM;
    /* the last module a real norm one time in four (nn.LayerNorm or nn.RMSNorm) */
    if (i == nmod - 1 && m->kind != RS_TP_EMBEDDING && rs_draw(ch, 4) == 0)
      m->kind = rs_draw(ch, 2) ? RS_TP_LAYERNORM : RS_TP_RMSNORM;
    int ids = m->kind == RS_TP_EMBEDDING;
    m->in = i == 0 ? 1 + (int64_t)rs_draw(ch, ids ? 12 : 9) : c->mod[i - 1].out;
    m->out = any_norm(m->kind) ? m->in : 1 + (int64_t)rs_draw(ch, 9);
    m->bias = (m->kind == RS_TP_LINEAR || m->kind == RS_TP_LAYERNORM) && rs_draw(ch, 2);
    int nd = ids ? 2 : 3;
    if (i == 0) { /* the case's input: local shards of a random layout */
      cur = draw_layout(ch, nd, !ids);
      c->input_layout = cur;
    }
    rs_tp_style_kind opts[8];
    int no = style_options(m, cur, local, n, opts);
    rs_tp_style_kind sk = opts[rs_draw(ch, (uint64_t)no)];
    rs_tp_style_default(sk, &m->style);
    rs_tp_style *s = &m->style;
    s->omitted = 0;
    s->input_layout = cur;
    switch (sk) {
    case RS_TP_COLWISE:
    case RS_TP_ROWWISE:
      if (rs_draw(ch, 2)) s->output_layout = draw_layout(ch, 3, 1);
      s->use_local_output = flip(ch, 1);
      maybe_omit(ch, s, RS_TP_ARG_INPUT, rs_pl_equal(norm_pl(cur, nd), sk == RS_TP_COLWISE ? rs_pl_replicate() : shard(2)));
      maybe_omit(ch, s, RS_TP_ARG_OUTPUT,
                 rs_pl_equal(norm_pl(s->output_layout, 3), sk == RS_TP_COLWISE ? shard(2) : rs_pl_replicate()));
      maybe_omit(ch, s, RS_TP_ARG_USE_LOCAL, s->use_local_output);
      if (s->omitted & RS_TP_ARG_INPUT) s->input_layout = sk == RS_TP_COLWISE ? rs_pl_replicate() : shard(-1);
      break;
    case RS_TP_SEQUENCE:
      if (local) s->sequence_dim = cur.dim;
      else {
        s->sequence_dim = (int)rs_draw(ch, 3) == 1 ? 0 : 1;
        if (!ids && rs_draw(ch, 4) == 3) s->sequence_dim = 2;
      }
      s->use_local_output = flip(ch, 0);
      maybe_omit(ch, s, RS_TP_ARG_SEQUENCE_DIM, s->sequence_dim == 1);
      maybe_omit(ch, s, RS_TP_ARG_USE_LOCAL, !s->use_local_output);
      break;
    case RS_TP_PREPARE_INPUT:
      if (local && rs_draw(ch, 5) == 0) { /* PrepareModuleInput(): nothing */
        s->omitted = RS_TP_ARG_INPUT | RS_TP_ARG_DESIRED_INPUT | RS_TP_ARG_USE_LOCAL;
        s->use_local_output = 0;
        break;
      }
      s->desired_input = draw_layout(ch, nd, !ids && rs_draw(ch, 3) == 0);
      if (!ids && is_s(s->desired_input, 2) && n > 1) s->desired_input = shard(1);
      s->use_local_output = 1; /* the module's parameters stay plain: it must get a local tensor */
      break;
    case RS_TP_PREPARE_OUTPUT:
      s->output_layout = cur; /* declared as what the module computes on */
      s->desired_output = draw_layout(ch, 3, 1);
      s->use_local_output = flip(ch, 1);
      maybe_omit(ch, s, RS_TP_ARG_USE_LOCAL, s->use_local_output);
      break;
    default:
      break;
    }
    c->nmod = i + 1;
    /* where the module leaves the activation, by the rules; a refused case ends here */
    if (!expect_chain(c, i + 1, e, NULL, 0)) break;
    cur = e[i].out;
    local = e[i].local;
  }
  free(e);
  /* a real norm ends the chain (its output is not exact) */
  for (int i = 0; i + 1 < c->nmod; i++)
    if (real_norm(c->mod[i].kind)) c->nmod = i + 1;
  /* the dtype, drawn last (BF16 and F16 one time in four each), F32 when the case's sums would
   * not be exact in it */
  uint64_t dt = rs_draw(ch, 4);
  c->dtype = dt == 1 ? RS_TP_BF16 : dt == 2 ? RS_TP_F16 : RS_TP_F32;
  if (c->dtype != RS_TP_F32 && rs__tp_case_check_static(c) != RS_OK) c->dtype = RS_TP_F32;
  return rs__tp_case_check_static(c);
}

/* torch.chunk's split (SPEC 4), written again here. */
static int64_t chunk(int64_t len, int64_t n, int64_t i) {
  int64_t c = (len + n - 1) / n, start = c * i;
  if (len % n == 0) return len / n;
  return start >= len ? 0 : (len < start + c ? len : start + c) - start;
}

/* ---------------------------------------------------------------- properties */

static rs_outcome say(rs_outcome o, char *msg, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, cap, fmt, ap);
  va_end(ap);
  return o;
}

static void fmt_pl(rs_placement p, char *b) { rs_format_placement(p, b, 32); }

static rs_outcome check_result(const rs_tp_case *c, const char *impl, const float *g,
                               const rs_tp_result *r, const expect_mod *e, char *msg, size_t cap) {
  char a[32], b[32];
  char *diff = malloc(4096);
  if (!diff) return rs_prop_oom(msg, cap, "tp compare");
  int bad = rs_tp_oracle_compare(c, g, r, diff, 4096);
  if (bad) {
    diff[strcspn(diff, "\n")] = 0;
    rs_outcome o = say(RS_FAIL, msg, cap, "tp_oracle (%s): %d rank(s) differ from the unsharded forward: %s",
                       impl, bad, diff);
    free(diff);
    return o;
  }
  free(diff);
  for (int i = 0; i < c->nmod; i++) {
    const rs_tp_module *m = &c->mod[i];
    if (!rs_pl_equal(r->mod_out_tp[i], e[i].out) || r->mod_out_local[i] != e[i].local) {
      fmt_pl(e[i].out, a);
      fmt_pl(r->mod_out_tp[i], b);
      return say(RS_FAIL, msg, cap, "tp_layout (%s): %s (%s): output %s%s, the style names %s%s", impl,
                 m->path, rs_tp_style_name(m->style.kind), b, r->mod_out_local[i] ? " local" : " DTensor", a,
                 e[i].local ? " local" : " DTensor");
    }
    if (!rs_pl_equal(r->param_tp[i][0], e[i].w) || (m->bias && !rs_pl_equal(r->param_tp[i][1], e[i].b))) {
      int wb = !rs_pl_equal(r->param_tp[i][0], e[i].w) ? 0 : 1;
      fmt_pl(wb ? e[i].b : e[i].w, a);
      fmt_pl(r->param_tp[i][wb], b);
      return say(RS_FAIL, msg, cap, "tp_layout (%s): %s.%s (%s %s) placed %s, the style names %s", impl, m->path,
                 wb ? "bias" : "weight", rs_tp_style_name(m->style.kind), rs_tp_module_name(m->kind), b, a);
    }
    for (int k = 0; k < RS_COLL_COUNT; k++)
      if (r->mod_comm[i][k] != e[i].comm[k])
        return say(RS_FAIL, msg, cap, "tp_comm (%s): %s (%s): %lld %s issued, PyTorch issues %lld", impl, m->path,
                   rs_tp_style_name(m->style.kind), (long long)r->mod_comm[i][k],
                   rs_collective_name((rs_collective)k), (long long)e[i].comm[k]);
  }
  /* every rank's local output has the torch.chunk shape of the named layout */
  rs_placement out = e[c->nmod - 1].out;
  int dpd = c->mesh.ndim == 2 ? 1 - c->tp_dim : -1;
  for (int pos = 0; pos < c->mesh.nranks; pos++) {
    int64_t coord[RS_MAX_MESH_DIMS], shp[3] = {c->batch, c->seq, c->mod[c->nmod - 1].out};
    rs_mesh_coord(&c->mesh, pos, coord);
    /* DP's split first, then TP's split of each DP group's piece */
    if (dpd >= 0 && c->dp_layout.kind == RS_SHARD)
      shp[c->dp_layout.dim] = chunk(shp[c->dp_layout.dim], c->mesh.size[dpd], coord[dpd]);
    if (out.kind == RS_SHARD) shp[out.dim] = chunk(shp[out.dim], c->mesh.size[c->tp_dim], coord[c->tp_dim]);
    const rs_local *l = &r->out.r[pos];
    if (l->shape[0] != shp[0] || l->shape[1] != shp[1] || l->shape[2] != shp[2])
      return say(RS_FAIL, msg, cap, "tp_layout (%s): rank %d's output is [%lld,%lld,%lld], torch.chunk gives [%lld,%lld,%lld]",
                 impl, pos, (long long)l->shape[0], (long long)l->shape[1], (long long)l->shape[2],
                 (long long)shp[0], (long long)shp[1], (long long)shp[2]);
  }
  return RS_PASS;
}

rs_outcome rs_tp_prop_run(const rs_tp_case *c, int impls, void *opt, int64_t *comm, char *msg,
                          size_t cap) {
  rs_tensor gt;
  float *g = NULL;
  rs_status st = rs_tp_oracle_forward(c, &gt, &g);
  if (st) return say(RS_FAIL, msg, cap, "oracle: %s", rs_last_error());
  expect_mod *e = calloc(RS_TP_MAX_MODULES, sizeof *e);
  if (!e) {
    free(g);
    return rs_prop_oom(msg, cap, "tp expectations");
  }
  char why[256];
  int defined = expect_chain(c, c->nmod, e, why, sizeof why);
  rs_outcome o = RS_PASS;
  for (int k = 0; k < 2 && o == RS_PASS; k++) {
    if (!(impls & (1 << k))) continue;
    rs_tp_result r;
    const char *impl = k ? "opt" : "ref";
    if (k == 0) st = rs_tp_ref_forward(c, &r);
    else if (!opt) st = rs_fail(RS_ERR_UNSUPPORTED, "this build has no opt/");
    else st = rs_tp_opt_forward(opt, NULL, c, &r);
    /* a refusal is a result: the rules' refusals must be the driver's, and nothing else */
    if (!defined) {
      if (st == RS_OK) {
        o = say(RS_FAIL, msg, cap, "tp_refusal (%s): the forward ran a case PyTorch's rules refuse (%s)", impl, why);
        rs_tp_result_free(&r);
      } else if (st != RS_ERR_INVALID && st != RS_ERR_UNSUPPORTED) {
        o = say(RS_FAIL, msg, cap, "tp_refusal (%s): refused with %s, not as bad input: %s", impl,
                rs_status_name(st), rs_last_error());
      }
      continue;
    }
    if (st) {
      o = say(RS_FAIL, msg, cap, "tp_forward (%s): %s: %s", impl, rs_status_name(st), rs_last_error());
      break;
    }
    o = check_result(c, impl, g, &r, e, msg, cap);
    if (comm && o == RS_PASS && k == (impls & 1 ? 0 : 1))
      for (int j = 0; j < RS_COLL_COUNT; j++) comm[j] += r.comm[j];
    rs_tp_result_free(&r);
  }
  free(e);
  free(g);
  return o;
}

rs_outcome rs_tp_prop_backend(const rs_tp_case *c, const rs_tp_check_opts *o, char *msg, size_t cap) {
  rs_tensor gt;
  float *g = NULL;
  rs_tp_result r;
  rs_status st = rs_tp_oracle_forward(c, &gt, &g);
  if (st) return say(RS_FAIL, msg, cap, "oracle: %s", rs_last_error());
  /* a case the rules refuse (PyTorch raises, or the contract keeps its own answer): a refusal is
   * the backend's result to give; an output there is a failure, "unsupported" a skip */
  char why[256];
  expect_mod *e = calloc(RS_TP_MAX_MODULES, sizeof *e);
  if (!e) {
    free(g);
    return rs_prop_oom(msg, cap, "tp expectations");
  }
  int defined = expect_chain(c, c->nmod, e, why, sizeof why);
  free(e);
  if (!defined) {
    free(g);
    rs_locals none = {0};
    char bmsg[512];
    rs_outcome bo = o->backend(o->backend_ctx, c, &none, bmsg, sizeof bmsg);
    rs_locals_free(&none);
    if (bo == RS_PASS) return say(RS_FAIL, msg, cap, "backend_tp_oracle: the backend ran a case the rules refuse (%s)", why);
    if (bo == RS_SKIP) return say(RS_SKIP, msg, cap, "%s", bmsg);
    return RS_PASS; /* refused, as the rules do */
  }
  /* the output layout the styles name comes from ref's forward (tp_layout holds ref to it) */
  if ((st = rs_tp_ref_forward(c, &r))) {
    free(g);
    return say(RS_FAIL, msg, cap, "tp_forward (ref): %s: %s", rs_status_name(st), rs_last_error());
  }
  rs_locals got = {0};
  rs_outcome out = o->backend(o->backend_ctx, c, &got, msg, cap);
  if (out == RS_PASS) {
    rs_locals_free(&r.out);
    r.out = got;
    got = (rs_locals){0};
    char *diff = malloc(4096);
    int bad = diff ? rs_tp_oracle_compare(c, g, &r, diff, 4096) : 1;
    if (bad) {
      if (diff) diff[strcspn(diff, "\n")] = 0;
      out = say(RS_FAIL, msg, cap, "backend_tp_oracle: %d rank(s) differ from the unsharded forward: %s", bad,
                diff ? diff : "out of memory");
    }
    free(diff);
  }
  rs_locals_free(&got);
  rs_tp_result_free(&r);
  free(g);
  return out;
}

/* ---------------------------------------------------------------- campaign */

typedef struct pred_ctx {
  int max_ranks, impls;
  void *opt;
  rs_tp_case *c;
  char *msg;
  size_t cap;
  const rs_tp_check_opts *o;
} pred_ctx;

static rs_outcome run_case(const pred_ctx *x, int64_t *comm) {
  if (x->o->backend) return rs_tp_prop_backend(x->c, x->o, x->msg, x->cap);
  return rs_tp_prop_run(x->c, x->impls, x->opt, comm, x->msg, x->cap);
}

static int still_fails(void *vx, rs_choices *ch) {
  pred_ctx *x = vx;
  if (rs_tp_gen_case(ch, x->max_ranks, x->c) != RS_OK) return 0;
  return run_case(x, NULL) == RS_FAIL;
}

static rs_status write_regression(const char *dir, const rs_tp_case *c, const char *msg, char *path,
                                  size_t cap) {
  char *text = rs_tp_case_to_json(c);
  if (!text) return RS_ERR_NOMEM;
  cJSON *m = cJSON_CreateString(msg);
  char *ms = m ? cJSON_PrintUnformatted(m) : NULL;
  cJSON_Delete(m);
  uint64_t h = rs_hash3(0x7470, rs_mix64(strlen(text)), 0);
  for (const char *p = text; *p; p++) h = rs_mix64(h ^ (unsigned char)*p);
  mkdir(dir, 0777);
  snprintf(path, cap, "%s/tp-%012llx.json", dir, (unsigned long long)(h & 0xffffffffffffull));
  FILE *f = fopen(path, "w");
  rs_status st = RS_OK;
  if (!f || !ms) st = rs_fail(RS_ERR_IO, "regression: cannot write %s", path);
  else {
    text[strlen(text) - 1] = 0; /* drop the closing brace, append the message */
    fprintf(f, "%s,\"message\":%s}\n", text, ms);
    if (fclose(f)) st = rs_fail(RS_ERR_IO, "regression: cannot write %s", path);
    f = NULL;
  }
  if (f) fclose(f);
  free(text);
  free(ms);
  return st;
}

const char *rs_tp_feature_name(int f) {
  static const char *names[RS_TP_F_COUNT] = {"2-d mesh", "uneven parameter split", "P(sum) input",
                                             "DTensor output", "sequence-parallel block", "colwise",
                                             "rowwise", "sequence", "none", "prepare_input",
                                             "prepare_output", "S(0) on TP with DP split", "P(sum) output",
                                             "plain module on Partial", "TP size 1", "short sequence",
                                             "omitted argument", "PrepareModuleInput()", "layernorm",
                                             "rmsnorm", "refused by the rules", "BF16", "F16"};
  return f >= 0 && f < RS_TP_F_COUNT ? names[f] : "?";
}

static void count_features(const rs_tp_case *c, int64_t *feat) {
  int64_t n = c->mesh.size[c->tp_dim];
  int seen[RS_TP_F_COUNT] = {0};
  expect_mod *e = calloc(RS_TP_MAX_MODULES, sizeof *e);
  if (!e) return;
  int defined = expect_chain(c, c->nmod, e, NULL, 0);
  if (!defined) seen[RS_TP_F_REFUSED] = 1;
  if (c->dtype == RS_TP_BF16) seen[RS_TP_F_BF16] = 1;
  if (c->dtype == RS_TP_F16) seen[RS_TP_F_F16] = 1;
  int two = c->mesh.ndim == 2 && c->mesh.size[0] > 1 && c->mesh.size[1] > 1;
  if (two) seen[RS_TP_F_MESH_2D] = 1;
  if (n == 1) seen[RS_TP_F_TP1] = 1;
  if (c->input_layout.kind == RS_PARTIAL) seen[RS_TP_F_PARTIAL_INPUT] = 1;
  int dp_split = two && c->dp_layout.kind == RS_SHARD;
  rs_placement cur = norm_pl(c->input_layout, c->mod[0].kind == RS_TP_EMBEDDING ? 2 : 3);
  if (dp_split && is_s(cur, 0)) seen[RS_TP_F_S0_DP] = 1;
  for (int i = 0; i < c->nmod; i++) {
    const rs_tp_module *m = &c->mod[i];
    const rs_tp_style *s = &m->style;
    seen[RS_TP_F_COLWISE + (int)s->kind] = 1;
    if (n > 1 && ((s->kind == RS_TP_COLWISE && m->out % n) || (s->kind == RS_TP_ROWWISE && m->in % n)))
      seen[RS_TP_F_UNEVEN] = 1;
    if (!s->use_local_output && s->kind != RS_TP_REPLICATE && s->kind != RS_TP_PREPARE_INPUT) seen[RS_TP_F_DTENSOR_OUT] = 1;
    if (s->kind == RS_TP_SEQUENCE && strcmp(m->path, "attention_norm") == 0) seen[RS_TP_F_BLOCK_SP] = 1;
    if (s->kind != RS_TP_REPLICATE && s->omitted) seen[RS_TP_F_OMITTED] = 1;
    if (s->kind == RS_TP_PREPARE_INPUT && (s->omitted & RS_TP_ARG_INPUT)) seen[RS_TP_F_PMI_NOOP] = 1;
    if (m->kind == RS_TP_LAYERNORM) seen[RS_TP_F_LAYERNORM] = 1;
    if (m->kind == RS_TP_RMSNORM) seen[RS_TP_F_RMSNORM] = 1;
    int plain = s->kind == RS_TP_REPLICATE || s->kind == RS_TP_PREPARE_OUTPUT ||
                (s->kind == RS_TP_PREPARE_INPUT && (s->omitted & RS_TP_ARG_INPUT));
    if (i > 0 && defined) cur = e[i - 1].out;
    if (defined && plain && is_p(cur) && n > 1) seen[RS_TP_F_PLAIN_PARTIAL] = 1;
    if (defined && s->kind == RS_TP_SEQUENCE && m->kind == RS_TP_LINEAR && n > 1 && e[i].out.kind == RS_REPLICATE)
      seen[RS_TP_F_SHORT_SEQ] = 1;
    if (defined && is_p(e[i].out) && (s->kind == RS_TP_COLWISE || s->kind == RS_TP_ROWWISE || s->kind == RS_TP_PREPARE_OUTPUT))
      seen[RS_TP_F_PARTIAL_OUT] = 1;
    if (defined && dp_split && is_s(e[i].out, 0)) seen[RS_TP_F_S0_DP] = 1;
  }
  free(e);
  for (int f = 0; f < RS_TP_F_COUNT; f++) feat[f] += seen[f];
}

/* props' one coverage gate (docs/harness.md, "Minimum rates"). Designed rates: the share of cases
 * per feature at the default --max-ranks (18), the mean of seeds 1-3 at 20,000 cases (`tp check
 * --seed S --cases 20000 --json F`, "features"); other --max-ranks: at least once from 2,000 cases.
 * In rs_tp_feature_name order. */
static const double TP_RATES[] = {
  0.276733 /* 2-d mesh */,
  0.449350 /* uneven parameter split */,
  0.080550 /* P(sum) input */,
  0.521333 /* DTensor output */,
  0.201633 /* sequence-parallel block */,
  0.510050 /* colwise */,
  0.512133 /* rowwise */,
  0.337850 /* sequence */,
  0.355600 /* none */,
  0.240933 /* prepare_input */,
  0.121583 /* prepare_output */,
  0.031800 /* S(0) on TP with DP split */,
  0.034450 /* P(sum) output */,
  0.029467 /* plain module on Partial */,
  0.167633 /* TP size 1 */,
  0.013600 /* short sequence */,
  0.181400 /* omitted argument */,
  0.047183 /* PrepareModuleInput() */,
  0.057633 /* layernorm */,
  0.057283 /* rmsnorm */,
  0.034133 /* refused by the rules */,
  0.147417 /* BF16 */,
  0.149117 /* F16 */};
_Static_assert(sizeof TP_RATES / sizeof TP_RATES[0] == RS_TP_F_COUNT, "one rate per tp feature");

double rs_tp_feature_rate(int f, int max_ranks) {
  if (f < 0 || f >= RS_TP_F_COUNT) return 0;
  return max_ranks == 0 || max_ranks == 18 ? TP_RATES[f] : -1;
}

/* ---- the runner's side of the campaign (props/runner.h) ---- */

typedef struct tp_ctx {
  const rs_tp_check_opts *o;
  int max_ranks;
  void *opt;
  rs_tp_case *c;
  char *msg;
} tp_ctx;

enum { TP_PROP = 0 }; /* one property: every check of the case (the message names which failed) */

static void seed_case(rs_choices *ch, uint64_t seed, int64_t index) {
  rs_choices_seed(ch, rs_hash3(seed, (uint64_t)index, 0x7470));
}

/* Case `index`: an invalid draw is a skip; a valid case counts its features and collectives and
 * runs every check (or the backend's). */
static rs_status tp_eval(void *vx, int64_t index, rs_run_case *rc) {
  tp_ctx *x = vx;
  /* test hooks of tests/jobs_tp.sh (mutation builds only, as check's in props/campaign.c): case 38
   * crashes, hangs or runs out of memory, so the runner's reports of each are seen */
  if (index == 37 && RS_MUTANT(993)) raise(SIGSEGV);
  if (index == 37 && RS_MUTANT(994))
    for (;;) pause();
  if (index == 37 && RS_MUTANT(995)) {
    rc->oom = TP_PROP + 1;
    snprintf(rc->msg[TP_PROP], RS_RUN_MSG, "tp: out of memory (planted)");
    return RS_OK;
  }
  rs_choices ch;
  seed_case(&ch, x->o->seed, index);
  rs_status gst = rs_tp_gen_case(&ch, x->max_ranks, x->c);
  rs_choices_free(&ch);
  if (gst == RS_ERR_NOMEM) return gst;
  if (gst != RS_OK) {
    rc->out[TP_PROP] = RS_RUN_SKIP;
    return RS_OK;
  }
  int64_t feat[RS_TP_F_COUNT] = {0};
  count_features(x->c, feat);
  for (int f = 0; f < RS_TP_F_COUNT; f++) rc->feature[f] = (uint16_t)feat[f];
  pred_ctx pc = {x->max_ranks, x->o->impls, x->opt, x->c, x->msg, 4096, x->o};
  rs_clear_error();
  rs_outcome out = run_case(&pc, rc->counter);
  if (rs_outcome_is_oom(out)) { /* no verdict: the runner stops here, nothing is shrunk */
    rc->oom = TP_PROP + 1;
    snprintf(rc->msg[TP_PROP], RS_RUN_MSG, "%s", x->msg);
    return RS_OK;
  }
  rc->out[TP_PROP] = out == RS_PASS ? RS_RUN_PASS : out == RS_SKIP ? RS_RUN_SKIP : RS_RUN_FAIL;
  if (out == RS_FAIL) snprintf(rc->msg[TP_PROP], RS_RUN_MSG, "%s", x->msg);
  return RS_OK;
}

static rs_status tp_worker_init(void *vx, int w) {
  tp_ctx *x = vx;
  return x->o->worker_init ? x->o->worker_init(x->o->worker_ctx, w) : RS_OK;
}

static void tp_worker_exit(void *vx) {
  tp_ctx *x = vx;
  if (x->o->worker_exit) x->o->worker_exit(x->o->worker_ctx);
}

static void tp_ops(tp_ctx *x, rs_run_ops *ops) {
  memset(ops, 0, sizeof *ops);
  ops->ctx = x;
  ops->eval = tp_eval;
  ops->worker_init = tp_worker_init;
  ops->worker_exit = tp_worker_exit;
  ops->nprops = 1;
  ops->nfeatures = RS_TP_F_COUNT;
  ops->ncounters = RS_COLL_COUNT;
}

static const char *tp_verb(const rs_tp_check_opts *o) {
  if (o->backend) return "conform tp";
  return o->impls == RS_TP_REF ? "tp check --impl ref" : o->impls == RS_TP_OPT ? "tp check --impl opt" : "tp check";
}

static void tp_run_opts(const rs_tp_check_opts *o, rs_run_opts *ro) {
  memset(ro, 0, sizeof *ro);
  ro->verb = tp_verb(o);
  ro->seed = o->seed;
  ro->cases = o->cases > 0 ? o->cases : 0;
  ro->seconds = o->seconds;
  ro->jobs = o->jobs > 1 ? o->jobs : 1;
  ro->shard_k = o->shard_k;
  ro->shard_n = o->shard_n;
  ro->max_failures = o->keep_going ? 0 : 1; /* one shrunk failure is the report */
  ro->case_timeout = o->case_timeout;
  ro->progress = o->print && !o->quiet;
  ro->dist = o->dist;
}

static void tp_names(const rs_tp_check_opts *o, rs_run_names *nm) {
  memset(nm, 0, sizeof *nm);
  nm->prop[TP_PROP] = o->backend ? "backend_tp_oracle" : "tp";
  nm->prop_on[TP_PROP] = 1;
  for (int f = 0; f < RS_TP_F_COUNT; f++) {
    nm->feature[f] = rs_tp_feature_name(f);
    nm->rate[f] = rs_tp_feature_rate(f, o->max_ranks);
  }
  nm->judge_from = RS_FEATURE_MIN_CASES;
  for (int k = 0; k < RS_COLL_COUNT; k++) nm->counter[k] = rs_collective_name((rs_collective)k);
}

cJSON *rs_tp_runner_json(const rs_tp_check_opts *o, const rs_tp_check_result *r, const char *replay) {
  tp_ctx x = {.o = o};
  rs_run_opts ro;
  rs_run_ops ops;
  rs_run_names nm;
  tp_run_opts(o, &ro);
  tp_ops(&x, &ops);
  tp_names(o, &nm);
  rs_run_failure_note notes[RS_RUN_PROPS] = {{0}};
  if (r->fail) notes[TP_PROP] = (rs_run_failure_note){r->message, r->fixture[0] ? r->fixture : NULL, replay};
  return rs_run_json(&ro, &ops, &nm, &r->run, notes);
}

/* Shrinks the failure at case `index` (drawn again here, in the calling process, so the shrunk case
 * does not depend on --jobs) and saves the smallest failing case. */
static void shrink_failure(const rs_tp_check_opts *o, tp_ctx *x, int64_t index, rs_tp_check_result *r) {
  rs_choices ch;
  seed_case(&ch, o->seed, index);
  pred_ctx pc = {x->max_ranks, o->impls, x->opt, x->c, x->msg, 4096, o};
  snprintf(x->msg, 4096, "%s", r->run.first_msg[TP_PROP]);
  int fails = still_fails(&pc, &ch); /* draws the case again (its stream is the shrinker's start) */
  size_t n = ch.n;
  uint64_t *v = malloc((n ? n : 1) * sizeof *v);
  int shrink_out = 0;
  char note[96] = "";
  if (v && fails) {
    memcpy(v, ch.v, n * sizeof *v);
    int max = o->shrink_runs > 0 ? o->shrink_runs : 2000;
    rs_shrink_stream_budget(still_fails, &pc, &v, &n, max, o->shrink_seconds, &shrink_out);
    rs_choices rc;
    if (rs_choices_replay(&rc, v, n) == RS_OK) {
      still_fails(&pc, &rc);
      rs_choices_free(&rc);
    }
    rs_shrink_budget_note(shrink_out, max, o->shrink_seconds, note, sizeof note);
  }
  free(v);
  rs_choices_free(&ch);
  if (!fails) snprintf(x->msg, 4096, "%s (passes when drawn again: flaky, not shrunk)", r->run.first_msg[TP_PROP]);
  snprintf(r->message, sizeof r->message, "%s", x->msg);
  if (note[0] && strlen(r->message) + strlen(note) + 4 < sizeof r->message)
    strcat(strcat(strcat(r->message, " ("), note), ")");
  r->message[strcspn(r->message, "\n")] = 0;
  const char *dir = o->regress_dir ? o->regress_dir : "fixtures/tp/regressions";
  if (write_regression(dir, x->c, r->message, r->fixture, sizeof r->fixture) != RS_OK)
    snprintf(r->fixture, sizeof r->fixture, "(not written: %s)", rs_last_error());
}

rs_status rs_tp_check(const rs_tp_check_opts *o, rs_tp_check_result *r) {
  memset(r, 0, sizeof *r);
  rs_tp_case *c = malloc(sizeof *c);
  char *msg = malloc(4096);
  void *opt = NULL;
  rs_status st = RS_OK;
  if (!c || !msg) st = rs_fail(RS_ERR_NOMEM, "tp check: out of memory");
#ifdef RS_HAVE_OPT
  if (st == RS_OK && (o->impls & RS_TP_OPT) && !o->backend) st = rs_opt_create((rs_opt **)&opt);
#else
  if (st == RS_OK && (o->impls & RS_TP_OPT) && !o->backend) st = rs_fail(RS_ERR_UNSUPPORTED, "--impl opt: this build has no opt/");
#endif
  if (st == RS_OK && o->cases <= 0 && !rs__seconds_ok(o->seconds)) /* NaN or inf would never end */
    st = rs_fail(RS_ERR_INVALID, "seconds: %g, expected 0 < T <= %.0f (or a case count)", o->seconds, RS_MAX_SECONDS);
  tp_ctx x = {o, o->max_ranks > 0 ? o->max_ranks : 18, opt, c, msg};
  if (st == RS_OK) {
    rs_run_opts ro;
    rs_run_ops ops;
    tp_run_opts(o, &ro);
    tp_ops(&x, &ops);
    rs_run_result *rr = &r->run;
    st = rs_run(&ro, &ops, rr);
    r->cases = rr->cases;
    r->pass = rr->pass[TP_PROP];
    r->fail = rr->fail[TP_PROP];
    r->skip = rr->skip[TP_PROP];
    r->seconds = rr->seconds;
    for (int f = 0; f < RS_TP_F_COUNT; f++) r->feat[f] = rr->feature[f];
    for (int k = 0; k < RS_COLL_COUNT; k++) r->comm[k] = rr->counter[k];
    if (st == RS_ERR_NOMEM && rr->oom_prop >= 0)
      st = rs_campaign_oom("tp", (long long)rr->oom_index + 1, rr->oom_msg);
    else if (st == RS_OK && !rr->follower && r->fail) /* a follower rank reports nothing (runner.h) */
      shrink_failure(o, &x, rr->first_fail[TP_PROP], r);
  }
#ifdef RS_HAVE_OPT
  if (opt) rs_opt_destroy((rs_opt *)opt);
#endif
  free(c);
  free(msg);
  return st;
}
