/* test_props_choices.c - the choice stream: draws stay in range, a recorded stream replays to the
 * same draws and the same generated case, and replay past the end gives 0. */
#include <string.h>
#include "check.h"
#include "props/props.h"

int main(void) {
  rs_choices a, b;
  rs_choices_seed(&a, 42);
  uint64_t first[200];
  for (int i = 0; i < 200; i++) {
    uint64_t n = (uint64_t)(i % 17) + 1;
    first[i] = rs_draw(&a, n);
    CHECK(first[i] < n);
  }
  CHECK_EQ_I(a.n, 200);
  /* Same seed, same draws. */
  rs_choices_seed(&b, 42);
  for (int i = 0; i < 200; i++) CHECK_EQ_I(rs_draw(&b, (uint64_t)(i % 17) + 1), first[i]);
  rs_choices_free(&b);
  /* Replay gives the recorded draws, then zeros. */
  CHECK(rs_choices_replay(&b, a.v, a.n) == RS_OK);
  for (int i = 0; i < 200; i++) CHECK_EQ_I(rs_draw(&b, (uint64_t)(i % 17) + 1), first[i]);
  CHECK_EQ_I(rs_draw(&b, 1000), 0);
  CHECK_EQ_I(b.pos, 201);
  rs_choices_free(&b);
  /* Replay reduces a value modulo the new bound. */
  uint64_t v[2] = {7, 100};
  CHECK(rs_choices_replay(&b, v, 2) == RS_OK);
  CHECK_EQ_I(rs_draw(&b, 5), 2);
  CHECK_EQ_I(rs_draw(&b, 1), 0);
  rs_choices_free(&b);
  rs_choices_free(&a);

  /* A generated case decodes identically from its recorded stream. */
  rs_gen_opts o;
  rs_gen_opts_default(&o);
  for (uint64_t seed = 1; seed <= 200; seed++) {
    static rs_case c1, c2;
    rs_choices_seed(&a, seed);
    CHECK(rs_gen_case(&a, &o, &c1) == RS_OK);
    CHECK(rs_choices_replay(&b, a.v, a.n) == RS_OK);
    CHECK(rs_gen_case(&b, &o, &c2) == RS_OK);
    CHECK_EQ_I(b.pos, a.n);
    char *j1 = rs_case_to_json(&c1), *j2 = rs_case_to_json(&c2);
    CHECK(j1 && j2 && strcmp(j1, j2) == 0);
    free(j1);
    free(j2);
    rs_choices_free(&a);
    rs_choices_free(&b);
  }
  /* The all-zero stream is the simplest case: 1-d mesh of size 1, scalar F32, Replicate. */
  static rs_case z;
  CHECK(rs_choices_replay(&b, NULL, 0) == RS_OK);
  CHECK(rs_gen_case(&b, &o, &z) == RS_OK);
  CHECK_EQ_I(z.mesh.ndim, 1);
  CHECK_EQ_I(z.mesh.nranks, 1);
  CHECK_EQ_I(z.tensor.ndim, 0);
  CHECK_EQ_I(z.tensor.dtype, RS_F32);
  CHECK_EQ_I(z.src.p[0].kind, RS_REPLICATE);
  CHECK_EQ_I(z.dst.p[0].kind, RS_REPLICATE);
  rs_choices_free(&b);
  TEST_DONE();
}
