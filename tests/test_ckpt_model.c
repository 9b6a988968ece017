/* test_ckpt_model.c - the small fixed facts of the checkpoint model that the properties take for
 * granted: Megatron's main-replica rule and ShardedObject unique keys, the StrictHandling names,
 * chunk names in data files, and a GLU factory's build / merge round trip on a known tensor. */
#include <string.h>
#include "check.h"
#include "core/ckpt/internal.h"

int main(void) {
  rs_replica_id r = {0, 1, {0}};
  CHECK(rs_replica_is_main(&r));
  r.v[0] = 1;
  CHECK(!rs_replica_is_main(&r));
  rs_replica_id t = {1, 3, {0, 0, 0}};
  CHECK(rs_replica_is_main(&t));
  t.v[2] = 2;
  CHECK(!rs_replica_is_main(&t));

  rs_sh_object o;
  memset(&o, 0, sizeof o);
  o.key = "optimizer.rng";
  o.ndim = 2;
  o.global_shape[0] = 2;
  o.global_shape[1] = 4;
  o.global_offset[0] = 1;
  o.global_offset[1] = 3;
  char uk[128];
  rs_sh_object_unique_key(&o, uk, sizeof uk);
  CHECK(strcmp(uk, "optimizer.rng/shard_1.3_2.4") == 0); /* Megatron's key/shard_<offs>_<shape> */

  static const char *names[RS_STRICT_COUNT] = {"assume_ok_unexpected", "log_unexpected",    "log_all",
                                               "raise_unexpected",     "raise_all",         "return_unexpected",
                                               "return_all",           "ignore_all"};
  for (int i = 0; i < RS_STRICT_COUNT; ++i) {
    rs_strict s;
    CHECK(strcmp(rs_strict_name((rs_strict)i), names[i]) == 0);
    CHECK(rs_strict_parse(names[i], &s) == RS_OK && s == (rs_strict)i);
  }
  rs_strict s;
  CHECK(rs_strict_parse("sometimes", &s) != RS_OK);

  char cn[128];
  int64_t off[2] = {8, 0};
  rs__chunk_name("w", 2, off, 0, 0, cn, sizeof cn);
  CHECK(strcmp(cn, "w@8.0") == 0);
  rs__chunk_name("w", 2, off, 1, 320, cn, sizeof cn);
  CHECK(strcmp(cn, "w@8.0#320") == 0);

  /* GLU: a local [W_part; V_part] of a [8, 2] fused tensor on rank 1 of 2 (rows 2..3 of W and
   * 2..3 of V) becomes two entries of the key at global rows 2 and 6; the merge writes them back */
  rs_state_dict sd;
  memset(&sd, 0, sizeof sd);
  rs_sh_factory f;
  memset(&f, 0, sizeof f);
  f.kind = RS_FACTORY_GLU;
  f.glu_dim = 0;
  f.src.key = "mlp.fc1";
  f.src.dtype = RS_I32;
  f.src.ndim = 2;
  f.src.global_shape[0] = 8;
  f.src.global_shape[1] = 2;
  f.src.local_shape[0] = 4;
  f.src.local_shape[1] = 2;
  f.src.global_offset[0] = 2;
  int32_t v[8] = {10, 11, 12, 13, 20, 21, 22, 23};
  f.src.data = (uint8_t *)v;
  f.src.nbytes = sizeof v;
  CHECK(rs_sd_add_factory(&sd, &f) == RS_OK);
  CHECK(rs_sd_apply_factories(&sd) == RS_OK);
  CHECK_EQ_I(sd.nt, 2);
  if (sd.nt == 2) {
    CHECK_EQ_I(sd.t[0].global_offset[0], 2);
    CHECK_EQ_I(sd.t[1].global_offset[0], 6);
    CHECK_EQ_I(sd.t[0].local_shape[0], 2);
    CHECK(memcmp(sd.t[1].data, v + 4, 4 * sizeof(int32_t)) == 0);
    int32_t w2[4] = {30, 31, 32, 33}, v2[4] = {40, 41, 42, 43};
    memcpy(sd.t[0].data, w2, sizeof w2);
    memcpy(sd.t[1].data, v2, sizeof v2);
    sd.t[0].loaded = sd.t[1].loaded = 1;
    CHECK(rs_sd_apply_factory_merges(&sd) == RS_OK);
    CHECK_EQ_I(sd.nt, 0);
    const int32_t *m = (const int32_t *)sd.f[0].src.data;
    CHECK(memcmp(m, w2, sizeof w2) == 0 && memcmp(m + 4, v2, sizeof v2) == 0);
  }
  rs_state_dict_free(&sd);
  TEST_DONE();
}
