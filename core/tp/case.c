/* case.c - TP cases: the styles' default arguments (PyTorch's), validation (static fields, the
 * exactness bound of SPEC 8, then a walk of the layouts through the style driver) and the
 * transformer block plans. */
#include <stdio.h>
#include <string.h>
#include "core/checked.h"
#include "core/tp/tp_internal.h"

#define MAX_SIZE ((int64_t)1 << 24)

void rs_tp_style_default(rs_tp_style_kind kind, rs_tp_style *s) {
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->input_layout = s->desired_input = s->output_layout = s->desired_output = rs_pl_replicate();
  s->sequence_dim = 1;
  switch (kind) {
  case RS_TP_COLWISE:
    s->output_layout = rs_pl_shard(-1);
    s->use_local_output = 1;
    break;
  case RS_TP_ROWWISE:
    s->input_layout = s->desired_input = rs_pl_shard(-1);
    s->use_local_output = 1;
    break;
  case RS_TP_PREPARE_OUTPUT: /* no defaults for the layouts: a case must give both */
    s->use_local_output = 1;
    s->omitted = RS_TP_ARG_OUTPUT | RS_TP_ARG_DESIRED_OUTPUT;
    break;
  case RS_TP_PREPARE_INPUT: /* input_layouts=None: the style does nothing */
    s->omitted = RS_TP_ARG_INPUT | RS_TP_ARG_DESIRED_INPUT;
    break;
  default: /* Sequence keeps DTensors by default */
    break;
  }
}

const char *rs_tp_module_name(rs_tp_module_kind k) {
  switch (k) {
  case RS_TP_LINEAR: return "linear";
  case RS_TP_EMBEDDING: return "embedding";
  case RS_TP_NORM: return "norm";
  case RS_TP_LAYERNORM: return "layernorm";
  case RS_TP_RMSNORM: return "rmsnorm";
  default: return "?";
  }
}

/* Every layout slot takes R, S(d) and P(sum) (PyTorch's styles take any placement; P(avg|min|max)
 * cannot be made by a style from a Shard, the only source PyTorch redistributes to a Partial). */
static rs_status check_pl(const rs_tp_module *m, const char *field, rs_placement p) {
  if (p.kind == RS_REPLICATE || p.kind == RS_SHARD) return RS_OK;
  if (p.kind == RS_PARTIAL && p.op == RS_SUM) return RS_OK;
  return rs_fail(RS_ERR_UNSUPPORTED, "%s: %s: %s is not supported here (R, S(d) or P(sum))", m->path,
                 field, p.kind == RS_PARTIAL ? "a Partial other than P(sum)" : "this placement");
}

unsigned rs__tp_style_args(rs_tp_style_kind k) {
  switch (k) {
  case RS_TP_COLWISE:
  case RS_TP_ROWWISE: return RS_TP_ARG_INPUT | RS_TP_ARG_OUTPUT | RS_TP_ARG_USE_LOCAL;
  case RS_TP_SEQUENCE: return RS_TP_ARG_SEQUENCE_DIM | RS_TP_ARG_USE_LOCAL;
  case RS_TP_PREPARE_INPUT: return RS_TP_ARG_INPUT | RS_TP_ARG_DESIRED_INPUT | RS_TP_ARG_USE_LOCAL;
  case RS_TP_PREPARE_OUTPUT: return RS_TP_ARG_OUTPUT | RS_TP_ARG_DESIRED_OUTPUT | RS_TP_ARG_USE_LOCAL;
  default: return 0;
  }
}

int rs__tp_is_norm(rs_tp_module_kind k) { return k == RS_TP_NORM || k == RS_TP_LAYERNORM || k == RS_TP_RMSNORM; }
int rs__tp_is_real_norm(rs_tp_module_kind k) { return k == RS_TP_LAYERNORM || k == RS_TP_RMSNORM; }

/* Largest |value| a partial sum of the forward can reach (values are integers in [-vmax, vmax],
 * biases n times that): every product and sum stays exact in F32 while this is <= 2^24. */
rs_dtype rs_tp_dtype_of(rs_tp_dtype d) { return d == RS_TP_BF16 ? RS_BF16 : d == RS_TP_F16 ? RS_F16 : RS_F32; }

static rs_status exact_bound(const rs_tp_case *c) {
  double n = (double)rs__tp_size(c), v = (double)c->vmax;
  double lim = c->dtype == RS_TP_BF16 ? 256.0 : c->dtype == RS_TP_F16 ? 2048.0 : (double)(1 << 24);
  double b = c->input_layout.kind == RS_PARTIAL ? 2 * n * v : v;
  for (int i = 0; i < c->nmod; i++) {
    const rs_tp_module *m = &c->mod[i];
    if (m->kind == RS_TP_LINEAR) b = (double)m->in * b * v + (m->bias ? n * v : 0);
    else if (m->kind == RS_TP_EMBEDDING) b = v;
    else if (rs__tp_is_real_norm(m->kind)) continue; /* last module; not exact anyway */
    else b = b * v;
    if (b > lim)
      return rs_fail(RS_ERR_INVALID,
                     "%s: sums may reach %.0f > 2^%d, values would not be exact in %s (lower vmax or sizes)",
                     m->path, b, c->dtype == RS_TP_BF16 ? 8 : c->dtype == RS_TP_F16 ? 11 : 24,
                     rs_dtype_name(rs_tp_dtype_of(c->dtype)));
  }
  return RS_OK;
}

rs_status rs__tp_case_check_static(rs_tp_case *c) {
  if (c->mesh.ndim < 1 || c->mesh.ndim > 2)
    return rs_fail(RS_ERR_INVALID, "mesh.shape: %d dims, expected a 1-d (TP) or 2-d (TP x DP) mesh",
                   c->mesh.ndim);
  if (c->tp_dim < 0 || c->tp_dim >= c->mesh.ndim)
    return rs_fail(RS_ERR_INVALID, "tp_dim: %d out of range for a %d-d mesh", c->tp_dim, c->mesh.ndim);
  if (c->mesh.ndim == 1) c->dp_layout = rs_pl_replicate();
  if (!(c->dp_layout.kind == RS_REPLICATE || (c->dp_layout.kind == RS_SHARD && c->dp_layout.dim == 0)))
    return rs_fail(RS_ERR_INVALID, "dp_layout: expected R or S0 (activations on the DP mesh dim)");
  if (c->batch < 1 || c->batch > MAX_SIZE) return rs_fail(RS_ERR_INVALID, "batch: expected 1..2^24");
  if (c->seq < 1 || c->seq > MAX_SIZE) return rs_fail(RS_ERR_INVALID, "seq: expected 1..2^24");
  if (c->vmax < 1 || c->vmax > 1000) return rs_fail(RS_ERR_INVALID, "vmax: expected 1..1000");
  if ((unsigned)c->dtype >= RS_TP_DTYPE_COUNT) return rs_fail(RS_ERR_INVALID, "dtype: expected F32, BF16 or F16");
  if (c->nmod < 1 || c->nmod > RS_TP_MAX_MODULES)
    return rs_fail(RS_ERR_INVALID, "plan: %d modules, expected 1..%d", c->nmod, RS_TP_MAX_MODULES);
  int64_t feat = -1;
  for (int i = 0; i < c->nmod; i++) {
    rs_tp_module *m = &c->mod[i];
    if (!m->path[0]) snprintf(m->path, sizeof m->path, "plan[%d]", i);
    for (int j = 0; j < i; j++)
      if (strcmp(c->mod[j].path, m->path) == 0) return rs_fail(RS_ERR_INVALID, "%s: path appears twice", m->path);
    if ((unsigned)m->kind >= RS_TP_MODULE_COUNT) return rs_fail(RS_ERR_INVALID, "%s: unknown module", m->path);
    if ((unsigned)m->style.kind >= RS_TP_STYLE_COUNT) return rs_fail(RS_ERR_INVALID, "%s: unknown style", m->path);
    if (m->in < 1 || m->in > MAX_SIZE || m->out < 1 || m->out > MAX_SIZE)
      return rs_fail(RS_ERR_INVALID, "%s: sizes must be 1..2^24", m->path);
    if (rs__tp_is_norm(m->kind) && m->in != m->out) return rs_fail(RS_ERR_INVALID, "%s: norm in != out", m->path);
    if (m->kind != RS_TP_LINEAR && m->kind != RS_TP_LAYERNORM && m->bias)
      return rs_fail(RS_ERR_INVALID, "%s: only a Linear or a LayerNorm has a bias", m->path);
    /* a real norm's output is not exact (SPEC 8): a later row-parallel sum would depend on its
     * order, so it ends the chain */
    if (rs__tp_is_real_norm(m->kind) && i != c->nmod - 1)
      return rs_fail(RS_ERR_INVALID, "%s: a %s must be the last module (its output is not exact)", m->path,
                     rs_tp_module_name(m->kind));
    if (m->kind == RS_TP_EMBEDDING && i > 0)
      return rs_fail(RS_ERR_INVALID, "%s: an Embedding must be the first module (it takes token ids)", m->path);
    if (i > 0 && m->in != feat)
      return rs_fail(RS_ERR_INVALID, "%s: in = %lld, but the previous module gives %lld features", m->path,
                     (long long)m->in, (long long)feat);
    feat = m->out;
    int64_t n, k;
    int64_t shp[3] = {c->batch, c->seq, m->in > m->out ? m->in : m->out};
    if (!rs__numel_ok(shp, 3, &n) || !rs__mul_ok(n, 8, &k) || !rs__mul_ok(m->in, m->out, &n) ||
        !rs__mul_ok(n, 4, &k))
      return rs_fail(RS_ERR_OVERFLOW, "%s: sizes overflow", m->path);
    rs_status st;
    const rs_tp_style *s = &m->style;
    if ((st = check_pl(m, "input_layouts", s->input_layout)) ||
        (st = check_pl(m, "desired_input_layouts", s->desired_input)) ||
        (st = check_pl(m, "output_layouts", s->output_layout)) ||
        (st = check_pl(m, "desired_output_layouts", s->desired_output)))
      return st;
    /* PyTorch's constructors: PrepareModuleOutput requires both layouts; PrepareModuleInput with
     * input_layouts requires desired_input_layouts ("desired module inputs should not be None!") */
    if (s->kind == RS_TP_PREPARE_OUTPUT && (s->omitted & (RS_TP_ARG_OUTPUT | RS_TP_ARG_DESIRED_OUTPUT)))
      return rs_fail(RS_ERR_INVALID, "%s: %s: required (PrepareModuleOutput has no default)", m->path,
                     s->omitted & RS_TP_ARG_OUTPUT ? "output_layouts" : "desired_output_layouts");
    if (s->kind == RS_TP_PREPARE_INPUT && !(s->omitted & RS_TP_ARG_INPUT) &&
        (s->omitted & RS_TP_ARG_DESIRED_INPUT))
      return rs_fail(RS_ERR_INVALID, "%s: desired_input_layouts: required when input_layouts is given", m->path);
    if (s->kind == RS_TP_SEQUENCE && (s->sequence_dim < -3 || s->sequence_dim > 2))
      return rs_fail(RS_ERR_INVALID, "%s: sequence_dim %d out of range", m->path, s->sequence_dim);
  }
  rs_status st = check_pl(&c->mod[0], "input_layout", c->input_layout);
  if (st) return st;
  return exact_bound(c);
}

rs_status rs_tp_case_validate(rs_tp_case *c) {
  rs_status st = rs__tp_case_check_static(c);
  if (st) return st;
  return rs__tp_forward(NULL, c, NULL);
}

static void add(rs_tp_case *c, const char *path, rs_tp_module_kind k, int64_t in, int64_t out, int bias,
                rs_tp_style_kind sk) {
  rs_tp_module *m = &c->mod[c->nmod++];
  memset(m, 0, sizeof *m);
  snprintf(m->path, sizeof m->path, "%s", path);
  m->kind = k;
  m->in = in;
  m->out = out;
  m->bias = bias;
  rs_tp_style_default(sk, &m->style);
}

rs_status rs_tp_block_plan(const char *kind, int64_t vocab, int64_t hidden, int64_t ffn, int bias,
                           rs_tp_case *c) {
  int sp;
  if (kind && strcmp(kind, "tp") == 0) sp = 0;
  else if (kind && strcmp(kind, "sp") == 0) sp = 1;
  else return rs_fail(RS_ERR_INVALID, "block.kind: '%s', expected tp or sp", kind ? kind : "");
  rs_tp_style_kind norm = sp ? RS_TP_SEQUENCE : RS_TP_REPLICATE;
  rs_placement seq = rs_pl_shard(1);
  c->nmod = 0;
  c->input_layout = rs_pl_replicate();
  add(c, "tok_embeddings", RS_TP_EMBEDDING, vocab, hidden, 0, RS_TP_ROWWISE);
  c->mod[0].style.input_layout = rs_pl_replicate();
  if (sp) c->mod[0].style.output_layout = seq;
  add(c, "attention_norm", RS_TP_NORM, hidden, hidden, 0, norm);
  add(c, "attention.wqkv", RS_TP_LINEAR, hidden, 3 * hidden, bias, RS_TP_COLWISE);
  add(c, "attention.wo", RS_TP_LINEAR, 3 * hidden, hidden, bias, RS_TP_ROWWISE);
  add(c, "ffn_norm", RS_TP_NORM, hidden, hidden, 0, norm);
  add(c, "feed_forward.w1", RS_TP_LINEAR, hidden, ffn, bias, RS_TP_COLWISE);
  add(c, "feed_forward.w2", RS_TP_LINEAR, ffn, hidden, bias, RS_TP_ROWWISE);
  add(c, "norm", RS_TP_NORM, hidden, hidden, 0, norm);
  add(c, "output", RS_TP_LINEAR, hidden, vocab, 0, RS_TP_COLWISE);
  c->mod[8].style.output_layout = rs_pl_replicate();
  if (sp)
    for (int i = 0; i < c->nmod; i++) {
      rs_tp_style *s = &c->mod[i].style;
      if (s->kind == RS_TP_COLWISE) s->input_layout = seq;
      if (s->kind == RS_TP_ROWWISE) s->output_layout = seq;
    }
  return RS_OK;
}
