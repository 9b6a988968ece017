/* p2p_gen.c - random cross-config resharding models from a choice stream (draw 0 is always the
 * simplest choice, so shrinking moves toward one small parameter on one rank). */
#include <stdlib.h>
#include <string.h>
#include "props/p2p.h"

void rs_p2p_gen_opts_default(rs_p2p_gen_opts *o) {
  o->max_ranks = 12;
  o->world = 0;
  o->collocate = -1;
}

/* A rank list of n distinct ranks in [0, world): identity, shifted, reversed or shuffled. */
static void draw_ranks(rs_choices *ch, int64_t n, int64_t world, int32_t *out) {
  int mode = (int)rs_draw(ch, 4);
  int64_t shift = world > n ? (int64_t)rs_draw(ch, (uint64_t)(world - n + 1)) : 0;
  for (int64_t i = 0; i < n; ++i) out[i] = (int32_t)(shift + (mode == 2 ? n - 1 - i : i));
  if (mode == 3) {
    /* a random injective map into the whole world */
    int32_t *pool = malloc((size_t)world * sizeof *pool);
    if (!pool) return;
    for (int64_t i = 0; i < world; ++i) pool[i] = (int32_t)i;
    for (int64_t i = 0; i < n; ++i) {
      int64_t j = i + (int64_t)rs_draw(ch, (uint64_t)(world - i));
      int32_t t = pool[i];
      pool[i] = pool[j];
      pool[j] = t;
      out[i] = pool[i];
    }
    free(pool);
  }
}

static int64_t divisor_of(rs_choices *ch, int64_t n) {
  int64_t d[32], k = 0;
  for (int64_t i = 1; i <= n && k < 32; ++i)
    if (n % i == 0) d[k++] = i;
  return d[rs_draw(ch, (uint64_t)k)];
}

static rs_status gen_template(rs_choices *ch, const rs_p2p_gen_opts *o, rs_p2p_model *m, int moe) {
  rs_p2p_arch a;
  memset(&a, 0, sizeof a);
  int mx = rs_draw(ch, 5) == 0;
  a.layers = (int64_t)rs_draw(ch, mx ? 2 : 4);
  a.hidden = mx ? 32 : 1 + (int64_t)rs_draw(ch, 6);
  a.ffn = mx ? 32 : 1 + (int64_t)rs_draw(ch, 8);
  a.vocab = (int64_t)rs_draw(ch, 10);
  a.experts = moe ? 1 + (int64_t)rs_draw(ch, 5) : 0;
  a.bias = (int)rs_draw(ch, 2);
  const rs_dtype dts[] = {RS_BF16, RS_F32, RS_F16, RS_F8_E4M3};
  a.dtype = mx ? RS_BF16 : dts[rs_draw(ch, 4)];
  if (mx) {
    /* weights whose last (input) dim is never split by a template: column-parallel ones */
    const char *suf[] = {"qkv.weight", "fc1.weight", "output.weight", "embedding.weight"};
    a.nmxfp8 = 1 + (int)rs_draw(ch, 4);
    for (int i = 0; i < a.nmxfp8; ++i) snprintf(a.mxfp8[i], sizeof a.mxfp8[i], "%s", suf[i]);
  }
  rs_status st = rs_p2p_arch_params(&a, m);
  if (st) return st;
  int64_t maxr = o->world > 0 ? o->world : o->max_ranks;
  int64_t n[2];
  rs_p2p_template t[2];
  for (int k = 0; k < 2; ++k) {
    t[k].tp = 1 + (int64_t)rs_draw(ch, 4);
    t[k].pp = 1 + (int64_t)rs_draw(ch, 3);
    t[k].dp = 1 + (int64_t)rs_draw(ch, 3);
    while (t[k].tp * t[k].pp * t[k].dp > maxr) {
      if (t[k].dp > 1) t[k].dp--;
      else if (t[k].pp > 1) t[k].pp--;
      else t[k].tp--;
    }
    t[k].ep = moe ? divisor_of(ch, t[k].dp) : 1;
    n[k] = t[k].tp * t[k].pp * t[k].dp;
  }
  int64_t world = o->world > 0 ? o->world : (n[0] > n[1] ? n[0] : n[1]) + (int64_t)rs_draw(ch, 4);
  int32_t *r[2];
  for (int k = 0; k < 2; ++k) {
    r[k] = malloc((size_t)n[k] * sizeof(int32_t));
    if (!r[k]) return rs_fail(RS_ERR_NOMEM, "gen: out of memory");
    if (k == 1 && o->collocate == 1 && n[1] <= n[0]) memcpy(r[1], r[0], (size_t)n[1] * sizeof(int32_t));
    else if (o->collocate == 0 && k == 1 && n[0] + n[1] <= world)
      for (int64_t i = 0; i < n[1]; ++i) r[1][i] = (int32_t)(n[0] + i);
    else draw_ranks(ch, n[k], world, r[k]);
    if (k == 0 && o->collocate == 0 && n[0] + n[1] <= world)
      for (int64_t i = 0; i < n[0]; ++i) r[0][i] = (int32_t)i;
  }
  for (int k = 0; k < 2 && !st; ++k) st = rs_p2p_config_template(m, k, &a, &t[k], r[k], 0);
  free(r[0]);
  free(r[1]);
  return st;
}

static rs_status gen_explicit(rs_choices *ch, const rs_p2p_gen_opts *o, rs_p2p_model *m) {
  size_t np_at = ch->pos;
  int64_t np = 1 + (int64_t)rs_draw(ch, 3);
  int item[3] = {-1, -1, -1}; /* the shrinker's marks: parameter p's draws (rs_choices_item) */
  m->param = calloc((size_t)np, sizeof *m->param);
  if (!m->param) return rs_fail(RS_ERR_NOMEM, "gen: out of memory");
  m->nparams = np;
  const rs_dtype dts[] = {RS_F32, RS_BF16, RS_I8, RS_F64, RS_F8_E5M2, RS_I16, RS_BOOL};
  for (int64_t p = 0; p < np; ++p) {
    rs_p2p_param *pa = &m->param[p];
    char nm[32];
    snprintf(nm, sizeof nm, "p%lld", (long long)p);
    pa->name = strdup(nm);
    if (!pa->name) return rs_fail(RS_ERR_NOMEM, "gen: out of memory");
    size_t at = ch->pos;
    pa->t.ndim = (int)rs_draw(ch, 4);
    pa->t.dtype = dts[rs_draw(ch, 7)];
    for (int d = 0; d < pa->t.ndim; ++d) pa->t.shape[d] = (int64_t)rs_draw(ch, 7);
    if (pa->t.ndim && rs_draw(ch, 6) == 0) {
      pa->transform = RS_XFORM_MXFP8;
      pa->t.dtype = RS_BF16;
      pa->t.shape[pa->t.ndim - 1] = 32 * (1 + (int64_t)rs_draw(ch, 2));
    }
    if (np > 1) item[p] = rs_choices_item(ch, np_at, (uint64_t)np - 2, at, ch->pos);
  }
  int64_t maxr = o->world > 0 ? o->world : o->max_ranks;
  int64_t world = o->world > 0 ? o->world : 1 + (int64_t)rs_draw(ch, (uint64_t)maxr);
  for (int k = 0; k < 2; ++k) {
    rs_p2p_config *c = &m->cfg[k];
    c->nmesh = 1 + (int32_t)rs_draw(ch, 2);
    c->mesh = calloc((size_t)c->nmesh, sizeof *c->mesh);
    c->place = calloc((size_t)np, sizeof *c->place);
    if (!c->mesh || !c->place) return rs_fail(RS_ERR_NOMEM, "gen: out of memory");
    for (int32_t i = 0; i < c->nmesh; ++i) {
      rs_p2p_mesh *me = &c->mesh[i];
      me->ndim = 1 + (int)rs_draw(ch, 3);
      me->nranks = 1;
      for (int d = 0; d < me->ndim; ++d) {
        me->size[d] = 1 + (int64_t)rs_draw(ch, 3);
        while (me->nranks * me->size[d] > world) me->size[d]--;
        me->nranks *= me->size[d];
      }
      me->ranks = malloc((size_t)me->nranks * sizeof(int32_t));
      if (!me->ranks) return rs_fail(RS_ERR_NOMEM, "gen: out of memory");
      if (k == 1 && o->collocate == 1 && i < m->cfg[0].nmesh && m->cfg[0].mesh[i].nranks >= me->nranks)
        memcpy(me->ranks, m->cfg[0].mesh[i].ranks, (size_t)me->nranks * sizeof(int32_t));
      else
        draw_ranks(ch, me->nranks, world, me->ranks);
    }
    for (int64_t p = 0; p < np; ++p) {
      rs_p2p_place *pl = &c->place[p];
      const rs_tensor *t = &m->param[p].t;
      size_t at = ch->pos;
      pl->mesh = (int32_t)rs_draw(ch, (uint64_t)c->nmesh);
      const rs_p2p_mesh *me = &c->mesh[pl->mesh];
      pl->s.mesh_ndim = me->ndim;
      for (int d = 0; d < me->ndim; ++d) {
        int64_t w = (int64_t)rs_draw(ch, (uint64_t)t->ndim + 1);
        /* an MXFP8 destination keeps its last dim whole (multiples of 32 per rank) */
        if (w && !(k == 1 && m->param[p].transform && w - 1 == t->ndim - 1)) pl->s.p[d] = rs_pl_shard((int)(w - 1));
        else pl->s.p[d] = rs_pl_replicate();
      }
      rs_sharding_set_default_order(&pl->s, t->ndim);
      if (rs_draw(ch, 3) == 0) {
        /* a non-default shard order: reverse each dim's list */
        for (int d = 0; d < t->ndim; ++d)
          for (int i = 0, j = pl->s.order_len[d] - 1; i < j; ++i, --j) {
            int8_t x = pl->s.order[d][i];
            pl->s.order[d][i] = pl->s.order[d][j];
            pl->s.order[d][j] = x;
          }
      }
      rs_choices_item_span(ch, item[p], at, ch->pos);
    }
  }
  return RS_OK;
}

rs_status rs_p2p_gen(rs_choices *ch, const rs_p2p_gen_opts *o, rs_p2p_model *out) {
  rs_p2p_model m;
  memset(&m, 0, sizeof m);
  m.seed = rs_draw(ch, 1ull << 32);
  int kind = (int)rs_draw(ch, 3);
  rs_status st = kind == 0 ? gen_explicit(ch, o, &m) : gen_template(ch, o, &m, kind == 2);
  if (!st) st = rs_p2p_model_finish(&m);
  if (st) {
    rs_p2p_model_free(&m);
    return st;
  }
  *out = m;
  return RS_OK;
}
