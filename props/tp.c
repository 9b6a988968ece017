/* tp.c - TP style properties (SPEC 12): the generator of TP cases, the expected layouts and
 * collectives of every style written here again from PyTorch's style.py semantics (independently
 * of core/tp's driver and core/tp_style.c), the properties, and the `reshard tp check` campaign
 * with stream shrinking and regression fixtures. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <cjson/cJSON.h>
#include "core/tp/tp_internal.h"
#include "core/values.h"
#include "props/tp.h"
#include "props/report.h"
#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
#endif

/* ---------------------------------------------------------------- generator */

static rs_placement shard(int d) { return rs_pl_shard(d); }

/* A layout of an activation of nd dims: R, S(1) (sequence), S(nd-1) (features), S(0) (batch, only
 * when DP does not split it), P (hidden states only). */
static rs_placement draw_layout(rs_choices *ch, int nd, int allow_s0, int allow_p) {
  rs_placement opts[5];
  int n = 0;
  opts[n++] = rs_pl_replicate();
  opts[n++] = shard(1);
  if (nd == 3) opts[n++] = shard(2);
  if (allow_s0) opts[n++] = shard(0);
  if (allow_p) opts[n++] = rs_pl_partial(RS_SUM);
  return opts[rs_draw(ch, (uint64_t)n)];
}

static int is_s(rs_placement p, int d) { return p.kind == RS_SHARD && p.dim == d; }

/* The styles a module can take given the layout it receives (cur, local or not). */
static int style_options(rs_tp_module_kind k, rs_placement cur, int local, rs_tp_style_kind *o) {
  int n = 0, lin = k == RS_TP_LINEAR, part = cur.kind == RS_PARTIAL;
  if (k != RS_TP_NORM) {
    o[n++] = RS_TP_COLWISE;
    o[n++] = RS_TP_ROWWISE;
  }
  if (!part && (!local || (cur.kind == RS_SHARD && !(lin && cur.dim == 2)))) o[n++] = RS_TP_SEQUENCE;
  /* plain parameters take local tensors only, and never a slice of the features they multiply */
  if (!part && local && !(k != RS_TP_EMBEDDING && is_s(cur, 2))) {
    o[n++] = RS_TP_REPLICATE;
    if (k != RS_TP_EMBEDDING) o[n++] = RS_TP_PREPARE_OUTPUT;
  }
  if (k != RS_TP_EMBEDDING || !part) o[n++] = RS_TP_PREPARE_INPUT;
  return n;
}

static int flip(rs_choices *ch, int dflt) { return rs_draw(ch, 2) ? !dflt : dflt; }

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
  c->dp_layout = two && rs_draw(ch, 2) ? shard(0) : rs_pl_replicate();
  int allow_s0 = !(two && c->dp_layout.kind == RS_SHARD && c->mesh.size[1 - c->tp_dim] > 1);
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
    return rs_tp_case_validate(c);
  }
  int nmod = 1 + (int)(shape == 2 ? 1 + rs_draw(ch, 3) : 0);
  c->vmax = nmod == 1 ? 1 + (int64_t)rs_draw(ch, 3) : 1;
  rs_placement cur = rs_pl_replicate();
  int local = 1;
  for (int i = 0; i < nmod; i++) {
    rs_tp_module *m = &c->mod[i];
    snprintf(m->path, sizeof m->path, "m%d", i);
    uint64_t k = i == 0 ? rs_draw(ch, 3) : rs_draw(ch, 2) * 2; /* linear, embedding, norm */
    m->kind = k == 0 ? RS_TP_LINEAR : k == 1 ? RS_TP_EMBEDDING : RS_TP_NORM;
    int ids = m->kind == RS_TP_EMBEDDING;
    m->in = i == 0 ? 1 + (int64_t)rs_draw(ch, ids ? 12 : 9) : c->mod[i - 1].out;
    m->out = m->kind == RS_TP_NORM ? m->in : 1 + (int64_t)rs_draw(ch, 9);
    m->bias = m->kind == RS_TP_LINEAR && rs_draw(ch, 2);
    int nd = ids ? 2 : 3;
    if (i == 0) { /* the case's input: local shards of a random layout */
      cur = draw_layout(ch, nd, allow_s0, !ids);
      c->input_layout = cur;
    }
    rs_tp_style_kind opts[8];
    int no = style_options(m->kind, cur, local, opts);
    rs_tp_style_kind sk = opts[rs_draw(ch, (uint64_t)no)];
    rs_tp_style_default(sk, &m->style);
    rs_tp_style *s = &m->style;
    s->input_layout = cur;
    switch (sk) {
    case RS_TP_COLWISE:
    case RS_TP_ROWWISE:
      if (rs_draw(ch, 2)) s->output_layout = draw_layout(ch, 3, allow_s0, 0);
      s->use_local_output = flip(ch, 1);
      break;
    case RS_TP_SEQUENCE:
      if (local) s->sequence_dim = cur.dim;
      else {
        s->sequence_dim = (int)rs_draw(ch, 3) == 1 && allow_s0 ? 0 : 1;
        if (m->kind != RS_TP_EMBEDDING && rs_draw(ch, 4) == 3) s->sequence_dim = 2;
      }
      s->use_local_output = flip(ch, 0);
      break;
    case RS_TP_PREPARE_INPUT:
      s->desired_input = draw_layout(ch, nd, allow_s0, 0);
      if (m->kind != RS_TP_EMBEDDING && is_s(s->desired_input, 2)) s->desired_input = shard(1);
      s->use_local_output = 1; /* the module's parameters stay plain: it must get a local tensor */
      break;
    case RS_TP_PREPARE_OUTPUT:
      s->output_layout = cur; /* declared as what the module computes on */
      s->desired_output = draw_layout(ch, 3, allow_s0, 0);
      s->use_local_output = flip(ch, 1);
      break;
    default:
      break;
    }
    c->nmod = i + 1;
    rs_tp_result r;
    if ((st = rs__tp_forward(NULL, c, &r))) return st;
    cur = r.mod_out_tp[i];
    local = r.mod_out_local[i];
  }
  return rs_tp_case_validate(c);
}

/* ---------------------------------------------------------------- expectations (PyTorch's) */

typedef struct expect_mod {
  rs_placement out;
  int local;
  int64_t comm[RS_COLL_COUNT];
  rs_placement w, b;
} expect_mod;

static rs_placement norm_pl(rs_placement p, int nd) {
  if (p.kind == RS_SHARD && p.dim < 0) p.dim = (int8_t)(p.dim + nd);
  return p;
}

/* The collective PyTorch's redistribute issues for one mesh dim of size n going a -> b. */
static void transition(int64_t n, rs_placement a, rs_placement b, int64_t *comm) {
  if (n <= 1 || rs_pl_equal(a, b)) return;
  if (a.kind == RS_SHARD && b.kind == RS_REPLICATE) comm[RS_COLL_ALL_GATHER]++;
  else if (a.kind == RS_PARTIAL && b.kind == RS_REPLICATE) comm[RS_COLL_ALL_REDUCE]++;
  else if (a.kind == RS_PARTIAL && b.kind == RS_SHARD) comm[RS_COLL_REDUCE_SCATTER]++;
  else if (a.kind == RS_SHARD && b.kind == RS_SHARD) comm[RS_COLL_ALL_TO_ALL]++;
}

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

static void expect_chain(const rs_tp_case *c, expect_mod *e) {
  int64_t n = c->mesh.size[c->tp_dim];
  rs_placement cur = norm_pl(c->input_layout, c->mod[0].kind == RS_TP_EMBEDDING ? 2 : 3);
  int local = 1;
  for (int i = 0; i < c->nmod; i++) {
    const rs_tp_module *m = &c->mod[i];
    const rs_tp_style *s = &m->style;
    expect_mod *x = &e[i];
    memset(x, 0, sizeof *x);
    expect_params(m, x);
    int nd = m->kind == RS_TP_EMBEDDING ? 2 : 3;
    rs_placement in = cur, out;
    switch (s->kind) {
    case RS_TP_COLWISE:
      transition(n, cur, rs_pl_replicate(), x->comm);
      out = norm_pl(s->output_layout, 3);
      transition(n, shard(2), out, x->comm);
      local = s->use_local_output;
      break;
    case RS_TP_ROWWISE:
      in = m->kind == RS_TP_EMBEDDING ? rs_pl_replicate() : shard(2);
      transition(n, cur, in, x->comm);
      out = norm_pl(s->output_layout, 3);
      transition(n, rs_pl_partial(RS_SUM), out, x->comm);
      local = s->use_local_output;
      break;
    case RS_TP_SEQUENCE:
      in = norm_pl(shard(s->sequence_dim), nd);
      transition(n, cur, in, x->comm);
      /* a Linear split on its input features sums partial products (PyTorch's mm strategy) */
      out = m->kind == RS_TP_LINEAR && in.dim == 2 ? rs_pl_partial(RS_SUM) : in;
      local = s->use_local_output;
      break;
    case RS_TP_PREPARE_INPUT:
      in = norm_pl(s->desired_input, nd);
      transition(n, cur, in, x->comm);
      out = in;
      local = s->use_local_output;
      break;
    case RS_TP_PREPARE_OUTPUT:
      out = norm_pl(s->desired_output, 3);
      transition(n, cur, out, x->comm);
      local = s->use_local_output;
      break;
    default:
      out = cur;
      break;
    }
    x->out = out;
    x->local = local;
    cur = out;
  }
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
  if (!diff) return say(RS_FAIL, msg, cap, "out of memory");
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
  int dpd = rs__tp_dp_dim(c);
  for (int pos = 0; pos < c->mesh.nranks; pos++) {
    int64_t coord[RS_MAX_MESH_DIMS], shp[3] = {c->batch, c->seq, c->mod[c->nmod - 1].out};
    rs_mesh_coord(&c->mesh, pos, coord);
    for (int md = 0; md < c->mesh.ndim; md++) {
      rs_placement p = md == c->tp_dim ? out : c->dp_layout;
      if (p.kind == RS_SHARD) shp[p.dim] = chunk(shp[p.dim], c->mesh.size[md], coord[md]);
    }
    (void)dpd;
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
    return say(RS_FAIL, msg, cap, "out of memory");
  }
  expect_chain(c, e);
  rs_outcome o = RS_PASS;
  for (int k = 0; k < 2 && o == RS_PASS; k++) {
    if (!(impls & (1 << k))) continue;
    rs_tp_result r;
    const char *impl = k ? "opt" : "ref";
    if (k == 0) st = rs_tp_ref_forward(c, &r);
    else if (!opt) st = rs_fail(RS_ERR_UNSUPPORTED, "this build has no opt/");
    else st = rs_tp_opt_forward(opt, NULL, c, &r);
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
                                             "prepare_output"};
  return f >= 0 && f < RS_TP_F_COUNT ? names[f] : "?";
}

static void count_features(const rs_tp_case *c, int64_t *feat) {
  int64_t n = c->mesh.size[c->tp_dim];
  int seen[RS_TP_F_COUNT] = {0};
  if (c->mesh.ndim == 2 && c->mesh.size[0] > 1 && c->mesh.size[1] > 1) seen[RS_TP_F_MESH_2D] = 1;
  if (c->input_layout.kind == RS_PARTIAL) seen[RS_TP_F_PARTIAL_INPUT] = 1;
  for (int i = 0; i < c->nmod; i++) {
    const rs_tp_module *m = &c->mod[i];
    const rs_tp_style *s = &m->style;
    seen[RS_TP_F_COLWISE + (int)s->kind] = 1;
    if (n > 1 && ((s->kind == RS_TP_COLWISE && m->out % n) || (s->kind == RS_TP_ROWWISE && m->in % n)))
      seen[RS_TP_F_UNEVEN] = 1;
    if (!s->use_local_output && s->kind != RS_TP_REPLICATE && s->kind != RS_TP_PREPARE_INPUT) seen[RS_TP_F_DTENSOR_OUT] = 1;
    if (s->kind == RS_TP_SEQUENCE && strcmp(m->path, "attention_norm") == 0) seen[RS_TP_F_BLOCK_SP] = 1;
  }
  for (int f = 0; f < RS_TP_F_COUNT; f++) feat[f] += seen[f];
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
  double t0 = rs_now();
  int max_ranks = o->max_ranks > 0 ? o->max_ranks : 18;
  for (int64_t i = 0; st == RS_OK && i < o->cases; i++) {
    rs_choices ch;
    rs_choices_seed(&ch, rs_hash3(o->seed, (uint64_t)i, 0x7470));
    r->cases++;
    if (rs_tp_gen_case(&ch, max_ranks, c) != RS_OK) {
      r->skip++;
      rs_choices_free(&ch);
      continue;
    }
    count_features(c, r->feat);
    pred_ctx x = {max_ranks, o->impls, opt, c, msg, 4096, o};
    rs_outcome out = run_case(&x, r->comm);
    if (out == RS_PASS) {
      r->pass++;
    } else if (out == RS_SKIP) {
      r->skip++;
    } else if (r->fail++ && o->keep_going) {
      /* already reported: one shrunk failure is the report, later ones are counted */
    } else {
      size_t n = ch.n;
      uint64_t *v = malloc((n ? n : 1) * sizeof *v);
      if (v) {
        memcpy(v, ch.v, n * sizeof *v);
        rs_shrink_stream(still_fails, &x, &v, &n, o->shrink_runs > 0 ? o->shrink_runs : 2000);
        rs_choices rc;
        if (rs_choices_replay(&rc, v, n) == RS_OK) {
          still_fails(&x, &rc);
          rs_choices_free(&rc);
        }
        free(v);
      }
      snprintf(r->message, sizeof r->message, "%s", msg);
      r->message[strcspn(r->message, "\n")] = 0;
      const char *dir = o->regress_dir ? o->regress_dir : "fixtures/tp/regressions";
      if (write_regression(dir, c, r->message, r->fixture, sizeof r->fixture) != RS_OK)
        snprintf(r->fixture, sizeof r->fixture, "(not written: %s)", rs_last_error());
      rs_choices_free(&ch);
      if (!o->keep_going) break; /* one shrunk failure is the report */
      continue;
    }
    rs_choices_free(&ch);
  }
  r->seconds = rs_now() - t0;
#ifdef RS_HAVE_OPT
  if (opt) rs_opt_destroy((rs_opt *)opt);
#endif
  free(c);
  free(msg);
  return st;
}
