/* test_tp_gpu.c - opt/tp's CUDA Linear kernel (opt/cuda/tp_linear.cu) and TP cases large enough to
 * reach it (at least 4,096 outputs per local product), bit for bit:
 *   1. rs_cuda_tp_linear against a plain F32 loop (ascending index, then the bias) on products of
 *      several shapes with exact and with arbitrary values (the kernel promises the loop's bits,
 *      not just exact results: no FMA, same order);
 *   2. a column- then row-parallel MLP on TP 2 and 4, ref and opt, with every TP property.
 * Without a GPU part 1 is skipped (it says so) and part 2 runs opt's CPU kernel on the same cases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "props/tp.h"
#include "reshard/tp.h"
#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
/* opt's internal kernel entry (opt/cuda/cuda_api.h, which needs opt's private include path) */
rs_status rs_cuda_tp_linear(const float *x, int64_t rows, int64_t k, const float *w, int64_t n,
                            const float *b, float *y);
#endif

static uint64_t rng = 0x7470C0DEull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

#ifdef RS_HAVE_OPT
static void kernel_vs_loop(int64_t rows, int64_t k, int64_t n, int exact, int bias) {
  float *x = malloc((size_t)(rows * k) * 4), *w = malloc((size_t)(n * k) * 4), *b = malloc((size_t)n * 4);
  float *y = malloc((size_t)(rows * n) * 4), *z = malloc((size_t)(rows * n) * 4);
  for (int64_t i = 0; i < rows * k; i++)
    x[i] = exact ? (float)((int)(next() % 5) - 2) : (float)((double)(next() % 2000001) / 1e6 - 1.0);
  for (int64_t i = 0; i < n * k; i++)
    w[i] = exact ? (float)((int)(next() % 5) - 2) : (float)((double)(next() % 2000001) / 1e6 - 1.0);
  for (int64_t i = 0; i < n; i++) b[i] = (float)((int)(next() % 7) - 3);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t o = 0; o < n; o++) {
      volatile float acc = 0.0f; /* one rounding per product and per add, as the kernel */
      for (int64_t i = 0; i < k; i++) {
        volatile float p = x[r * k + i] * w[o * k + i];
        acc = acc + p;
      }
      z[r * n + o] = bias ? acc + b[o] : acc;
    }
  CHECK(rs_cuda_tp_linear(x, rows, k, w, n, bias ? b : NULL, y) == RS_OK);
  int64_t bad = 0;
  for (int64_t i = 0; i < rows * n; i++) bad += memcmp(&y[i], &z[i], 4) != 0;
  if (bad) fprintf(stderr, "kernel [%lld x %lld] x [%lld]^T (%s): %lld elements differ\n", (long long)rows,
                   (long long)k, (long long)n, exact ? "exact" : "arbitrary", (long long)bad);
  CHECK(bad == 0);
  free(x);
  free(w);
  free(b);
  free(y);
  free(z);
}
#endif

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
#ifndef RS_HAVE_OPT
  printf("this build has no opt/: skipped\n");
  TEST_DONE();
#else
  int gpus = rs_opt_cuda_devices();
  if (gpus > 0) {
    static const int64_t shapes[][3] = {{64, 64, 64}, {128, 3, 96}, {1, 4096, 4096}, {4096, 1, 1}, {257, 129, 33}};
    for (int s = 0; s < 5; s++)
      for (int exact = 0; exact < 2; exact++) kernel_vs_loop(shapes[s][0], shapes[s][1], shapes[s][2], exact, s & 1);
    printf("CUDA kernel: %d device(s), 10 products bit for bit with the loop\n", gpus);
  } else {
    printf("no GPU: the kernel comparison is skipped; the TP cases below run opt's CPU kernel\n");
  }
  rs_opt *o = NULL;
  CHECK(rs_opt_create(&o) == RS_OK);
  const char *text[] = {
      "{\"name\":\"mlp_tp2_big\",\"mesh\":{\"shape\":[2]},\"batch\":4,\"seq\":32,\"seed\":3,\"vmax\":1,"
      "\"plan\":[{\"path\":\"fc1\",\"module\":\"linear\",\"in\":64,\"out\":256,\"bias\":true,\"style\":\"colwise\"},"
      "{\"path\":\"fc2\",\"module\":\"linear\",\"in\":256,\"out\":64,\"bias\":true,\"style\":\"rowwise\"}]}",
      "{\"name\":\"mlp_sp_tp4_big\",\"mesh\":{\"shape\":[4]},\"batch\":2,\"seq\":64,\"seed\":4,\"vmax\":1,"
      "\"input_layout\":\"S(1)\",\"plan\":[{\"path\":\"fc1\",\"module\":\"linear\",\"in\":48,\"out\":200,\"bias\":true,"
      "\"style\":\"colwise\",\"input_layouts\":\"S(1)\"},{\"path\":\"fc2\",\"module\":\"linear\",\"in\":200,\"out\":130,"
      "\"style\":\"rowwise\",\"output_layouts\":\"S(1)\"}]}",
  };
  for (int i = 0; i < 2 && o; i++) {
    rs_tp_case c;
    char msg[1024];
    CHECK(rs_tp_case_from_json(text[i], &c) == RS_OK);
    rs_outcome out = rs_tp_prop_run(&c, RS_TP_REF | RS_TP_OPT, o, NULL, msg, sizeof msg);
    if (out != RS_PASS) fprintf(stderr, "%s: %s\n", c.name, msg);
    CHECK(out == RS_PASS);
  }
  if (o) rs_opt_destroy(o);
  TEST_DONE();
#endif
}
