/* test_p2p_template_ranks.c - template expansion (SPEC 10) pinned to an outside truth: Megatron-Core's
 * documented rank order. Its RankGenerator numbers ranks over the parallel sizes in the order
 * "tp-cp-ep-dp-pp" with tp fastest (rank = tp_i + tp*(cp_i + cp*(ep_i + ep*(dp_i + dp*pp_i)))); the
 * dense layers use a generator with ep = 1, the expert layers one with cp = 1, the expert tensor size
 * = tp and the expert data-parallel size = world / (tp * ep * pp). The groups below are written out
 * by hand from that rule (the 16-GPU, tp 2, pp 4 example of initialize_model_parallel's docstring
 * among them), not computed by the code under test: plans, executors and the oracle all share the
 * expansion, so only a table from outside can see a swapped mesh dim. */
#include <string.h>
#include "check.h"
#include "reshard/p2p.h"

/* The world ranks of mesh `mi` of config `which` that differ from position `pos` only along mesh dim
 * `md`, in coordinate order: one process group of that mesh dim. */
static void group_along(const rs_p2p_model *m, int which, int mi, int64_t pos, int md, int32_t *out) {
  const rs_p2p_mesh *me = &m->cfg[which].mesh[mi];
  int64_t stride = 1;
  for (int d = me->ndim - 1; d > md; --d) stride *= me->size[d];
  int64_t coord = (pos / stride) % me->size[md], base = pos - coord * stride;
  for (int64_t i = 0; i < me->size[md]; ++i) out[i] = me->ranks[base + i * stride];
}

/* Every group of mesh dim md over all meshes of config `which` of one kind (dense: even mesh
 * indices of a MoE config, expert: odd; all meshes when moe == 0), listed once from the member
 * whose coordinate on md is 0, compared with want (n groups of size g, in the order found). */
static void check_groups(const rs_p2p_model *m, int which, int moe, int expert, int md, const int32_t *want,
                         int n, int g, const char *what) {
  const rs_p2p_config *c = &m->cfg[which];
  int found = 0;
  for (int mi = 0; mi < c->nmesh; ++mi) {
    if (moe && (mi % 2) != expert) continue;
    const rs_p2p_mesh *me = &c->mesh[mi];
    int64_t stride = 1;
    for (int d = me->ndim - 1; d > md; --d) stride *= me->size[d];
    for (int64_t pos = 0; pos < me->nranks; ++pos) {
      if ((pos / stride) % me->size[md]) continue;
      int32_t grp[64];
      group_along(m, which, mi, pos, md, grp);
      if (found >= n || memcmp(grp, want + found * g, sizeof(int32_t) * (size_t)g)) {
        fprintf(stderr, "%s: group %d differs from Megatron's (first rank %d, want %d)\n", what, found, grp[0],
                found < n ? want[found * g] : -1);
        rs_test_failures++;
        return;
      }
      found++;
    }
  }
  CHECK_EQ_I(found, n);
}

/* Box of parameter `name` on world rank r in the source config; 0 when r holds none. */
static int src_box(const rs_p2p_model *m, const char *name, int32_t r, int64_t *s, int64_t *z) {
  for (int64_t p = 0; p < m->nparams; ++p) {
    if (strcmp(m->param[p].name, name)) continue;
    int64_t q = rs_p2p_pos(m, RS_P2P_SRC, p, r);
    if (q < 0) return 0;
    rs_p2p_box(m, RS_P2P_SRC, p, q, s, z);
    return 1;
  }
  CHECK(!"parameter not in the model");
  return 0;
}

static rs_p2p_model build(int64_t layers, int64_t experts, rs_p2p_template t) {
  rs_p2p_model m;
  memset(&m, 0, sizeof m);
  rs_p2p_arch a;
  memset(&a, 0, sizeof a);
  a.layers = layers;
  a.hidden = 8;
  a.ffn = 8;
  a.vocab = 8;
  a.experts = experts;
  a.dtype = RS_F32;
  CHECK(rs_p2p_arch_params(&a, &m) == RS_OK);
  CHECK(rs_p2p_config_template(&m, RS_P2P_SRC, &a, &t, NULL, 0) == RS_OK);
  CHECK(rs_p2p_config_template(&m, RS_P2P_DST, &a, &t, NULL, 0) == RS_OK);
  CHECK(rs_p2p_model_finish(&m) == RS_OK);
  return m;
}

/* Megatron's docstring example: 16 GPUs, tp 2, pp 4 (dp 2). Our dense mesh is [dp, tp] per stage. */
static void dense_tp2_pp4_dp2(void) {
  rs_p2p_template t = {2, 4, 2, 1};
  rs_p2p_model m = build(4, 0, t);
  static const int32_t TP[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  static const int32_t DP[] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
  check_groups(&m, RS_P2P_SRC, 0, 0, 1, TP, 8, 2, "dense tp groups");
  check_groups(&m, RS_P2P_SRC, 0, 0, 0, DP, 8, 2, "dense dp groups");
  /* pipeline groups [0,4,8,12], [1,5,9,13], ...: layer l (one per stage) sits on stage l, and the
   * rank at one (dp, tp) position of every stage's mesh is that pipeline group */
  static const int32_t PP[4][4] = {{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}};
  for (int pos = 0; pos < 4; ++pos)
    for (int s = 0; s < 4; ++s) CHECK_EQ_I(m.cfg[0].mesh[s].ranks[pos], PP[pos][s]);
  /* the layer's weights are on its stage: layers.L.attn.qkv.weight of rank r covers TP rank r % 2 */
  for (int32_t r = 0; r < 16; ++r) {
    int64_t s[RS_MAX_DIMS], z[RS_MAX_DIMS];
    int has = src_box(&m, "layers.2.attn.qkv.weight", r, s, z);
    CHECK_EQ_I(has, r / 4 == 2); /* stage = r / (tp * dp) */
    if (has) CHECK_EQ_I(s[0], (r % 2) * 12); /* column-parallel [3h, h]: TP rank r % tp holds rows 12*(r%2).. */
  }
  rs_p2p_model_free(&m);
}

/* MoE, tp 2, ep 2, dp 4, pp 2 (16 ranks). Dense generator: rank = tp_i + 2*dp_i + 8*pp_i. Expert
 * generator (etp 2, ep 2, edp = 16 / (2*2*2) = 2): rank = tp_i + 2*ep_i + 4*edp_i + 8*pp_i. */
static void moe_tp2_ep2_dp4_pp2(void) {
  rs_p2p_template t = {2, 2, 4, 2};
  rs_p2p_model m = build(2, 4, t);
  static const int32_t ETP[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  static const int32_t EP[] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
  static const int32_t EDP[] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15};
  static const int32_t DDP[] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
  /* the expert mesh is [edp, ep, tp]: dims 2, 1, 0 are Megatron's expert tp, ep and dp groups */
  check_groups(&m, RS_P2P_SRC, 1, 1, 2, ETP, 8, 2, "expert tp groups");
  check_groups(&m, RS_P2P_SRC, 1, 1, 1, EP, 8, 2, "expert ep groups");
  check_groups(&m, RS_P2P_SRC, 1, 1, 0, EDP, 8, 2, "expert dp groups");
  check_groups(&m, RS_P2P_SRC, 1, 0, 0, DDP, 4, 4, "dense dp groups");
  /* expert weights [E, ffn, h] are S(0) over ep: EP rank (r / tp) % ep holds experts 2*ep_i, 2*ep_i+1 */
  for (int32_t r = 0; r < 16; ++r) {
    int64_t s[RS_MAX_DIMS], z[RS_MAX_DIMS];
    int has = src_box(&m, "layers.1.mlp.experts.fc1.weight", r, s, z);
    CHECK_EQ_I(has, r >= 8); /* layer 1 of 2 on stage 1 */
    if (!has) continue;
    CHECK_EQ_I(s[0], ((r / 2) % 2) * 2);
    CHECK_EQ_I(z[0], 2);
    CHECK_EQ_I(s[1], (r % 2) * 4); /* column-parallel fc1 rows over expert tp */
  }
  rs_p2p_model_free(&m);
}

/* ep = dp (no expert data parallelism): tp 1, ep 4, dp 4, pp 1; the expert ep group is the whole
 * dp group, ranks 0..3 in order. */
static void moe_ep_equals_dp(void) {
  rs_p2p_template t = {1, 1, 4, 4};
  rs_p2p_model m = build(1, 8, t);
  static const int32_t EP[] = {0, 1, 2, 3};
  check_groups(&m, RS_P2P_SRC, 1, 1, 1, EP, 1, 4, "ep == dp groups");
  rs_p2p_model_free(&m);
}

/* ep differs from the expert dp size: tp 1, ep 2, dp 6 (expert dp 3), pp 1. Expert generator:
 * rank = ep_i + 2*edp_i, so the ep groups are [0,1], [2,3], [4,5] and the expert dp groups
 * [0,2,4], [1,3,5]; expert e of 4 lives on ep rank e / 2. */
static void moe_ep2_edp3(void) {
  rs_p2p_template t = {1, 1, 6, 2};
  rs_p2p_model m = build(1, 4, t);
  static const int32_t EP[] = {0, 1, 2, 3, 4, 5};
  static const int32_t EDP[] = {0, 2, 4, 1, 3, 5};
  check_groups(&m, RS_P2P_SRC, 1, 1, 1, EP, 3, 2, "ep 2 of expert dp 3: ep groups");
  check_groups(&m, RS_P2P_SRC, 1, 1, 0, EDP, 2, 3, "ep 2 of expert dp 3: expert dp groups");
  for (int32_t r = 0; r < 6; ++r) {
    int64_t s[RS_MAX_DIMS], z[RS_MAX_DIMS];
    CHECK(src_box(&m, "layers.0.mlp.experts.fc2.weight", r, s, z));
    CHECK_EQ_I(s[0], (r % 2) * 2);
  }
  rs_p2p_model_free(&m);
}

int main(void) {
  moe_ep2_edp3();
  dense_tp2_pp4_dp2();
  moe_tp2_ep2_dp4_pp2();
  moe_ep_equals_dp();
  TEST_DONE();
}
