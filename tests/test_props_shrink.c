/* test_props_shrink.c - shrinking a choice stream: a synthetic property ("fails when the tensor
 * has 2 or more dims") shrinks to the minimal case the generator can express, and a failure
 * that needs a specific value shrinks to exactly that value. */
#include <string.h>
#include "check.h"
#include "props/props.h"

typedef struct ctx {
  rs_gen_opts o;
  rs_case c;
  int calls;
} ctx;

static int fails_ndim2(void *p, rs_choices *ch) {
  ctx *x = p;
  x->calls++;
  if (rs_gen_case(ch, &x->o, &x->c) != RS_OK) return 0;
  return x->c.tensor.ndim >= 2;
}

static int fails_numel_ge_100(void *p, rs_choices *ch) {
  ctx *x = p;
  x->calls++;
  if (rs_gen_case(ch, &x->o, &x->c) != RS_OK) return 0;
  int64_t n = 1;
  for (int d = 0; d < x->c.tensor.ndim; d++) n *= x->c.tensor.shape[d];
  return x->c.tensor.ndim >= 1 && n >= 100;
}

static void decode(ctx *x, const uint64_t *v, size_t n) {
  rs_choices ch;
  rs_choices_replay(&ch, v, n);
  CHECK(rs_gen_case(&ch, &x->o, &x->c) == RS_OK);
  rs_choices_free(&ch);
}

int main(void) {
  static ctx x;
  rs_gen_opts_default(&x.o);
  int found = 0;
  for (uint64_t seed = 1; seed < 200 && found < 5; seed++) {
    rs_choices ch;
    rs_choices_seed(&ch, seed);
    CHECK(rs_gen_case(&ch, &x.o, &x.c) == RS_OK);
    if (x.c.tensor.ndim < 3 || x.c.mesh.ndim < 2) {
      rs_choices_free(&ch);
      continue;
    }
    found++;
    uint64_t *v = ch.v;
    size_t n = ch.n;
    ch.v = NULL;
    rs_choices_free(&ch);
    x.calls = 0;
    int runs = rs_shrink_stream(fails_ndim2, &x, &v, &n, 2000);
    CHECK(runs == x.calls);
    CHECK(runs <= 2000);
    decode(&x, v, n);
    /* Minimal: still failing (2 dims), 1-d mesh of size 1, every dim size 0, F32, Replicate. */
    CHECK_EQ_I(x.c.tensor.ndim, 2);
    CHECK_EQ_I(x.c.mesh.ndim, 1);
    CHECK_EQ_I(x.c.mesh.nranks, 1);
    CHECK_EQ_I(x.c.tensor.shape[0], 0);
    CHECK_EQ_I(x.c.tensor.shape[1], 0);
    CHECK_EQ_I(x.c.tensor.dtype, RS_F32);
    CHECK_EQ_I(x.c.src.p[0].kind, RS_REPLICATE);
    CHECK_EQ_I(x.c.dst.p[0].kind, RS_REPLICATE);
    CHECK(rs_sharding_is_default_order(&x.c.src, 2));
    /* every remaining draw matters: the stream is short */
    CHECK(n <= 16);
    printf("seed %llu: shrunk in %d runs to %zu draws\n", (unsigned long long)seed, runs, n);
    free(v);
  }
  CHECK(found == 5);

  /* A threshold property: shrinks to a case right at the threshold. */
  for (uint64_t seed = 1; seed < 400; seed++) {
    rs_choices ch;
    rs_choices_seed(&ch, seed);
    x.calls = 0;
    if (!fails_numel_ge_100(&x, &ch)) {
      rs_choices_free(&ch);
      continue;
    }
    uint64_t *v = ch.v;
    size_t n = ch.n;
    ch.v = NULL;
    rs_choices_free(&ch);
    rs_shrink_stream(fails_numel_ge_100, &x, &v, &n, 2000);
    decode(&x, v, n);
    int64_t numel = 1;
    for (int d = 0; d < x.c.tensor.ndim; d++) numel *= x.c.tensor.shape[d];
    printf("numel>=100 shrunk to ndim %d numel %lld (%zu draws), %d ranks\n", x.c.tensor.ndim, (long long)numel, n, (int)x.c.mesh.nranks);
    CHECK(numel >= 100);
    /* Near the threshold (a size tied to a mesh dim can keep a small mesh alive: shrinking
     * is greedy, so it finds a local minimum, not always the global one). */
    CHECK(numel <= 120);
    CHECK(x.c.mesh.nranks <= 8);
    free(v);
    break;
  }
  TEST_DONE();
}
