/* model.c - models and parallel configurations of cross-config resharding (SPEC 10): Megatron-style
 * templates expanded to per-parameter layouts, validation, rank lookups and boxes. The parser and
 * the JSON writer live in model_json.c. */
#include <stdlib.h>
#include <string.h>
#include "core/box.h"
#include "core/checked.h"
#include "core/p2p/p2p_internal.h"
#include "core/tp_style.h"
#include "core/values.h"

/* Largest world rank a configuration may name: pos_of tables are world-sized. */
#define RS_P2P_MAX_WORLD (1 << 24)

void rs__p2p_config_free(rs_p2p_config *c) {
  for (int32_t i = 0; i < c->nmesh; ++i) {
    free(c->mesh[i].ranks);
    free(c->mesh[i].pos_of);
  }
  free(c->mesh);
  free(c->place);
  memset(c, 0, sizeof *c);
}

void rs_p2p_model_free(rs_p2p_model *m) {
  if (!m) return;
  for (int64_t i = 0; i < m->nparams; ++i) free(m->param[i].name);
  free(m->param);
  for (int k = 0; k < 2; ++k) rs__p2p_config_free(&m->cfg[k]);
  memset(m, 0, sizeof *m);
}

/* ---- templates ---- */

/* What a template parameter is, so a config template can place it. */
typedef enum role {
  R_EMBED, R_NORM, R_QKV_W, R_QKV_B, R_PROJ_W, R_PROJ_B, R_FC1_W, R_FC1_B, R_FC2_W, R_FC2_B,
  R_ROUTER, R_EXP_FC1, R_EXP_FC2, R_FINAL_NORM, R_OUTPUT
} role;

typedef struct tparam {
  role r;
  int64_t layer; /* -1 for embedding (first stage) and final norm / output (last stage) */
} tparam;

/* Parameters of the arch in model order; fills names/shapes when m != NULL. Returns the count. */
static int64_t arch_walk(const rs_p2p_arch *a, rs_p2p_model *m, tparam *tp) {
  int64_t n = 0, h = a->hidden, f = a->ffn, E = a->experts;
#define ADD(R, L, NM, ND, ...)                                             \
  do {                                                                     \
    if (m) {                                                               \
      rs_p2p_param *p = &m->param[n];                                      \
      p->name = strdup(NM);                                                \
      p->t.dtype = a->dtype;                                               \
      p->t.ndim = ND;                                                      \
      int64_t sh_[] = {__VA_ARGS__};                                       \
      memcpy(p->t.shape, sh_, sizeof sh_);                                 \
      tp[n].r = R;                                                         \
      tp[n].layer = L;                                                     \
    }                                                                      \
    n++;                                                                   \
  } while (0)
  char nm[96];
  ADD(R_EMBED, -1, "embedding.weight", 2, a->vocab, h);
  for (int64_t l = 0; l < a->layers; ++l) {
#define NAME(s) (snprintf(nm, sizeof nm, "layers.%lld.%s", (long long)l, s), nm)
    ADD(R_NORM, l, NAME("input_norm.weight"), 1, h);
    ADD(R_QKV_W, l, NAME("attn.qkv.weight"), 2, 3 * h, h);
    if (a->bias) ADD(R_QKV_B, l, NAME("attn.qkv.bias"), 1, 3 * h);
    ADD(R_PROJ_W, l, NAME("attn.proj.weight"), 2, h, h);
    if (a->bias) ADD(R_PROJ_B, l, NAME("attn.proj.bias"), 1, h);
    ADD(R_NORM, l, NAME("post_norm.weight"), 1, h);
    if (E > 0) {
      ADD(R_ROUTER, l, NAME("mlp.router.weight"), 2, E, h);
      ADD(R_EXP_FC1, l, NAME("mlp.experts.fc1.weight"), 3, E, f, h);
      ADD(R_EXP_FC2, l, NAME("mlp.experts.fc2.weight"), 3, E, h, f);
    } else {
      ADD(R_FC1_W, l, NAME("mlp.fc1.weight"), 2, f, h);
      if (a->bias) ADD(R_FC1_B, l, NAME("mlp.fc1.bias"), 1, f);
      ADD(R_FC2_W, l, NAME("mlp.fc2.weight"), 2, h, f);
      if (a->bias) ADD(R_FC2_B, l, NAME("mlp.fc2.bias"), 1, h);
    }
#undef NAME
  }
  ADD(R_FINAL_NORM, -1, "final_norm.weight", 1, h);
  ADD(R_OUTPUT, -1, "output.weight", 2, a->vocab, h);
#undef ADD
  return n;
}

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return b <= a && !strcmp(s + a - b, suf);
}

static rs_status arch_check(const rs_p2p_arch *a) {
  const struct { const char *f; int64_t v; } f[] = {
      {"layers", a->layers}, {"hidden", a->hidden}, {"ffn", a->ffn}, {"vocab", a->vocab},
      {"experts", a->experts}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; ++i)
    if (f[i].v < 0 || f[i].v > (1ll << 31))
      return rs_fail(RS_ERR_INVALID, "model.template.%s: %lld out of range [0, 2^31]", f[i].f,
                     (long long)f[i].v);
  if (a->layers > 100000) return rs_fail(RS_ERR_INVALID, "model.template.layers: at most 100000");
  if ((unsigned)a->dtype >= RS_DTYPE_COUNT) return rs_fail(RS_ERR_INVALID, "model.template.dtype: invalid");
  return RS_OK;
}

rs_status rs_p2p_arch_params(const rs_p2p_arch *a, rs_p2p_model *m) {
  rs_status st = arch_check(a);
  if (st) return st;
  int64_t n = arch_walk(a, NULL, NULL);
  m->param = calloc((size_t)n, sizeof *m->param);
  tparam *tp = calloc((size_t)n, sizeof *tp);
  if (!m->param || !tp) {
    free(tp);
    return rs_fail(RS_ERR_NOMEM, "model: out of memory");
  }
  m->nparams = n;
  arch_walk(a, m, tp);
  free(tp);
  for (int64_t i = 0; i < n; ++i) {
    if (!m->param[i].name) return rs_fail(RS_ERR_NOMEM, "model: out of memory");
    for (int k = 0; k < a->nmxfp8; ++k)
      if (ends_with(m->param[i].name, a->mxfp8[k])) m->param[i].transform = RS_XFORM_MXFP8;
  }
  return RS_OK;
}

/* Placement of a template parameter on the TP mesh dim (from the one definition in tp_style). */
static rs_status role_tp_placement(role r, rs_placement *out) {
  rs_tp_style_kind s = RS_TP_REPLICATE;
  rs_tp_module_kind mod = RS_TP_LINEAR;
  rs_tp_param_kind par = RS_TP_WEIGHT;
  switch (r) {
    case R_EMBED: s = RS_TP_ROWWISE; mod = RS_TP_EMBEDDING; break; /* vocab-parallel: S(0) */
    case R_OUTPUT: s = RS_TP_COLWISE; break;                       /* vocab-parallel: S(0) */
    case R_QKV_W: case R_FC1_W: case R_EXP_FC1: s = RS_TP_COLWISE; break;
    case R_QKV_B: case R_FC1_B: s = RS_TP_COLWISE; par = RS_TP_BIAS; break;
    case R_PROJ_W: case R_FC2_W: case R_EXP_FC2: s = RS_TP_ROWWISE; break;
    case R_PROJ_B: case R_FC2_B: s = RS_TP_ROWWISE; par = RS_TP_BIAS; break;
    case R_NORM: case R_FINAL_NORM: mod = RS_TP_NORM; break;
    case R_ROUTER: break;
  }
  rs_status st = rs_tp_param_placement(s, mod, par, out);
  /* expert weights are stacked [experts, out, in]: the Linear's dims move up by one */
  if (!st && (r == R_EXP_FC1 || r == R_EXP_FC2) && out->kind == RS_SHARD) out->dim++;
  return st;
}

static rs_status mesh_alloc(rs_p2p_mesh *me, int ndim, const int64_t *size, const int32_t *ranks) {
  me->ndim = ndim;
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) {
    me->size[i] = size[i];
    n *= size[i];
  }
  me->nranks = n;
  me->ranks = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
  if (!me->ranks) return rs_fail(RS_ERR_NOMEM, "config: out of memory");
  memcpy(me->ranks, ranks, (size_t)n * sizeof(int32_t));
  return RS_OK;
}

rs_status rs_p2p_config_template(rs_p2p_model *m, int which, const rs_p2p_arch *a,
                                 const rs_p2p_template *t, const int32_t *ranks, int32_t first_rank) {
  const char *cn = which == RS_P2P_SRC ? "src" : "dst";
  const struct { const char *f; int64_t v; } f[] = {{"tp", t->tp}, {"pp", t->pp}, {"dp", t->dp}, {"ep", t->ep}};
  for (int i = 0; i < 4; ++i)
    if (f[i].v < 1 || f[i].v > (1 << 24))
      return rs_fail(RS_ERR_INVALID, "%s.template.%s: %lld out of range [1, 2^24]", cn, f[i].f, (long long)f[i].v);
  if (t->dp % t->ep)
    return rs_fail(RS_ERR_INVALID, "%s.template.ep: %lld does not divide dp %lld", cn, (long long)t->ep, (long long)t->dp);
  int64_t stage, world;
  if (!rs__mul_ok(t->tp, t->dp, &stage) || !rs__mul_ok(stage, t->pp, &world) || world > RS_P2P_MAX_WORLD)
    return rs_fail(RS_ERR_INVALID, "%s.template: tp*pp*dp exceeds 2^24 ranks", cn);
  if (!ranks && ((int64_t)first_rank < 0 || first_rank + world > RS_P2P_MAX_WORLD))
    return rs_fail(RS_ERR_INVALID, "%s.first_rank: out of range", cn);
  int32_t *own = NULL;
  if (!ranks) {
    own = malloc((size_t)world * sizeof(int32_t));
    if (!own) return rs_fail(RS_ERR_NOMEM, "config: out of memory");
    for (int64_t i = 0; i < world; ++i) own[i] = (int32_t)(first_rank + i);
    ranks = own;
  }
  rs_p2p_config *c = &m->cfg[which];
  rs__p2p_config_free(c);
  c->is_template = 1;
  c->tmpl = *t;
  int moe = a->experts > 0;
  c->nmesh = (int32_t)(t->pp * (moe ? 2 : 1));
  c->mesh = calloc((size_t)c->nmesh, sizeof *c->mesh);
  c->place = calloc((size_t)(m->nparams ? m->nparams : 1), sizeof *c->place);
  tparam *tpar = calloc((size_t)(m->nparams ? m->nparams : 1), sizeof *tpar);
  rs_status st = RS_OK;
  if (!c->mesh || !c->place || !tpar) st = rs_fail(RS_ERR_NOMEM, "config: out of memory");
  /* Megatron's rank order tp-ep-dp-pp (tp fastest): a stage is a [dp, tp] block of the rank list,
   * and the same block read as [dp/ep, ep, tp] is the expert mesh. */
  for (int64_t s = 0; s < t->pp && !st; ++s) {
    int64_t dense[2] = {t->dp, t->tp}, exp[3] = {t->dp / t->ep, t->ep, t->tp};
    st = mesh_alloc(&c->mesh[s * (moe ? 2 : 1)], 2, dense, ranks + s * stage);
    if (!st && moe) st = mesh_alloc(&c->mesh[s * 2 + 1], 3, exp, ranks + s * stage);
  }
  if (!st) {
    rs_p2p_model tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.param = calloc((size_t)(m->nparams ? m->nparams : 1), sizeof *tmp.param);
    if (!tmp.param) st = rs_fail(RS_ERR_NOMEM, "config: out of memory");
    else if (arch_walk(a, NULL, NULL) != m->nparams)
      st = rs_fail(RS_ERR_INVALID, "%s.template: the model is not this template's", cn);
    else {
      arch_walk(a, &tmp, tpar);
      tmp.nparams = m->nparams;
    }
    rs_p2p_model_free(&tmp);
  }
  for (int64_t i = 0; i < m->nparams && !st; ++i) {
    rs_p2p_place *pl = &c->place[i];
    int64_t stg = tpar[i].layer >= 0 ? -1 : (tpar[i].r == R_EMBED ? 0 : t->pp - 1);
    if (stg < 0) {
      /* layers to stages by split(layers, pp, stage): the stage whose range holds the layer */
      for (int64_t s = 0; s < t->pp; ++s) {
        int64_t sz, off;
        rs_split(a->layers, t->pp, s, &sz, &off);
        if (tpar[i].layer >= off && tpar[i].layer < off + sz) stg = s;
      }
    }
    int expert = tpar[i].r == R_EXP_FC1 || tpar[i].r == R_EXP_FC2;
    pl->mesh = (int32_t)(stg * (moe ? 2 : 1) + (expert ? 1 : 0));
    memset(&pl->s, 0, sizeof pl->s);
    rs_placement tpp;
    if ((st = role_tp_placement(tpar[i].r, &tpp))) break;
    if (expert) {
      pl->s.mesh_ndim = 3;
      pl->s.p[0] = rs_pl_replicate();
      pl->s.p[1] = rs_pl_shard(0);
      pl->s.p[2] = tpp;
    } else {
      pl->s.mesh_ndim = 2;
      pl->s.p[0] = rs_pl_replicate();
      pl->s.p[1] = tpp;
    }
    st = rs_sharding_set_default_order(&pl->s, m->param[i].t.ndim);
  }
  free(tpar);
  free(own);
  if (st) rs__p2p_config_free(c);
  return st;
}

/* ---- validation and lookups ---- */

static rs_status check_config(rs_p2p_model *m, int which) {
  const char *cn = which == RS_P2P_SRC ? "src" : "dst";
  rs_p2p_config *c = &m->cfg[which];
  if (!c->mesh || !c->place) return rs_fail(RS_ERR_INVALID, "%s: missing", cn);
  for (int32_t i = 0; i < c->nmesh; ++i) {
    rs_p2p_mesh *me = &c->mesh[i];
    for (int64_t k = 0; k < me->nranks; ++k) {
      if (me->ranks[k] < 0 || me->ranks[k] >= RS_P2P_MAX_WORLD)
        return rs_fail(RS_ERR_INVALID, "%s.meshes[%d].ranks[%lld]: %d out of range [0, 2^24)", cn, i,
                       (long long)k, me->ranks[k]);
      if (me->ranks[k] + 1 > m->world) m->world = me->ranks[k] + 1;
    }
  }
  for (int64_t p = 0; p < m->nparams; ++p) {
    rs_p2p_place *pl = &c->place[p];
    if (pl->mesh < 0 || pl->mesh >= c->nmesh)
      return rs_fail(RS_ERR_INVALID, "%s.params.%s.mesh: %d out of range", cn, m->param[p].name, pl->mesh);
    /* rs_sharding_validate reads only the mesh's dims and sizes */
    rs_mesh *shape = calloc(1, sizeof *shape);
    if (!shape) return rs_fail(RS_ERR_NOMEM, "config: out of memory");
    shape->ndim = c->mesh[pl->mesh].ndim;
    memcpy(shape->size, c->mesh[pl->mesh].size, sizeof shape->size);
    rs_status st = rs_sharding_validate(&pl->s, shape, &m->param[p].t);
    free(shape);
    if (st) {
      char pre[160];
      snprintf(pre, sizeof pre, "%s.params.%s.", cn, m->param[p].name);
      return rs_fail_prefix(st, pre);
    }
    if (rs_sharding_has_partial(&pl->s))
      return rs_fail(RS_ERR_INVALID, "%s.params.%s.placements: Partial is not allowed (parameters are whole values)",
                     cn, m->param[p].name);
  }
  return RS_OK;
}

rs_status rs_p2p_model_finish(rs_p2p_model *m) {
  rs_status st;
  for (int64_t p = 0; p < m->nparams; ++p) {
    int64_t nb;
    m->param[p].key = 0x7032700000000000ull ^ rs__p2p_name_hash(m->param[p].name);
    char field[160];
    snprintf(field, sizeof field, "model.params.%s.shape", m->param[p].name);
    if ((st = rs__tensor_nbytes_at(&m->param[p].t, field, &nb))) return st;
    if (m->param[p].transform == RS_XFORM_MXFP8 && m->param[p].t.dtype != RS_BF16)
      return rs_fail(RS_ERR_INVALID, "model.params.%s.transform: mxfp8 needs a BF16 parameter", m->param[p].name);
    if (m->param[p].transform == RS_XFORM_MXFP8 && m->param[p].t.ndim == 0)
      return rs_fail(RS_ERR_INVALID, "model.params.%s.transform: mxfp8 needs at least one dim", m->param[p].name);
  }
  m->world = 0;
  for (int k = 0; k < 2; ++k)
    if ((st = check_config(m, k))) return st;
  for (int k = 0; k < 2; ++k) {
    rs_p2p_config *c = &m->cfg[k];
    for (int32_t i = 0; i < c->nmesh; ++i) {
      rs_p2p_mesh *me = &c->mesh[i];
      free(me->pos_of);
      me->pos_of = malloc((size_t)(m->world ? m->world : 1) * sizeof(int32_t));
      if (!me->pos_of) return rs_fail(RS_ERR_NOMEM, "config: out of memory");
      memset(me->pos_of, 0xff, (size_t)m->world * sizeof(int32_t));
      for (int64_t q = 0; q < me->nranks; ++q) {
        if (me->pos_of[me->ranks[q]] >= 0)
          return rs_fail(RS_ERR_INVALID, "%s.meshes[%d].ranks: rank %d appears twice",
                         k ? "dst" : "src", i, me->ranks[q]);
        me->pos_of[me->ranks[q]] = (int32_t)q;
      }
    }
  }
  return RS_OK;
}

void rs_p2p_box(const rs_p2p_model *m, int which, int64_t p, int64_t pos, int64_t *start,
                int64_t *size) {
  const rs_p2p_place *pl = &m->cfg[which].place[p];
  const rs_p2p_mesh *me = &m->cfg[which].mesh[pl->mesh];
  int64_t coord[RS_MAX_MESH_DIMS];
  rs_coord_of_pos(me->ndim, me->size, pos, coord);
  rs_box_of_coord(me->size, &pl->s, &m->param[p].t, coord, start, size);
}

int64_t rs_p2p_pos(const rs_p2p_model *m, int which, int64_t p, int32_t r) {
  if (r < 0 || r >= m->world) return -1;
  const rs_p2p_mesh *me = &m->cfg[which].mesh[m->cfg[which].place[p].mesh];
  return me->pos_of[r];
}

/* ---- values (SPEC 8 bits, finite BF16 for transformed parameters) ---- */

uint64_t rs__p2p_name_hash(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; ++s) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
  return h;
}

void rs_p2p_value(const rs_p2p_model *m, int64_t p, int64_t idx, void *out) {
  const rs_p2p_param *pa = &m->param[p];
  uint64_t h = rs_hash3(m->seed, pa->key, (uint64_t)idx);
  if (pa->transform == RS_XFORM_MXFP8) {
    uint16_t b = (uint16_t)h;
    /* most elements within 2^+-16 of 1 so blocks exercise rounding; some raw (zeros, subnormals) */
    if ((h >> 16) % 8) b = (uint16_t)((b & 0x807F) | ((uint16_t)(111 + (h >> 20) % 33) << 7));
    if ((b & 0x7F80) == 0x7F80) b &= (uint16_t)~0x4000;
    memcpy(out, &b, 2);
    return;
  }
  if (pa->t.dtype == RS_BOOL) h &= 1;
  memcpy(out, &h, (size_t)rs_dtype_size(pa->t.dtype));
}

rs_status rs_p2p_check_transforms(const rs_p2p_model *m) {
  for (int64_t p = 0; p < m->nparams; ++p) {
    if (m->param[p].transform != RS_XFORM_MXFP8) continue;
    const rs_tensor *t = &m->param[p].t;
    const rs_p2p_mesh *me = &m->cfg[RS_P2P_DST].mesh[m->cfg[RS_P2P_DST].place[p].mesh];
    for (int64_t q = 0; q < me->nranks; ++q) {
      int64_t s[RS_MAX_DIMS], z[RS_MAX_DIMS];
      rs_p2p_box(m, RS_P2P_DST, p, q, s, z);
      if (rs__p2p_numel(t->ndim, z) && z[t->ndim - 1] % RS_MXFP8_BLOCK)
        return rs_fail(RS_ERR_INVALID,
                       "dst.params.%s: MXFP8 needs the local last dim to be a multiple of 32 (rank %d holds %lld)",
                       m->param[p].name, me->ranks[q], (long long)z[t->ndim - 1]);
    }
  }
  return RS_OK;
}
