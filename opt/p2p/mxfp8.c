/* mxfp8.c - opt's MXFP8 transform on the CPU (the block math is shared with the CUDA kernel), and
 * the device dispatch: a GPU quantizes when one is usable, the CPU otherwise. */
#include <stdlib.h>
#include "core/mutant.h"
#include "cuda/cuda_api.h"
#include "p2p/mxfp8_math.h"
#include "p2p/opt_p2p.h"

/* Defined in opt/cuda/mxfp8.cu when CUDA is built. */
rs_status rs_cuda_mxfp8(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale, int half_up,
                        int64_t *bad_block);
#ifndef RS_OPT_HAVE_CUDA
rs_status rs_cuda_mxfp8(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale, int half_up,
                        int64_t *bad_block) {
  (void)x; (void)n; (void)q; (void)scale; (void)half_up; (void)bad_block;
  return rs_fail(RS_ERR_UNSUPPORTED, "cuda: built without CUDA");
}
#endif

rs_status rs_mxfp8_quantize_opt(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale, const char *what) {
  if (n % 32) return rs_fail(RS_ERR_INVALID, "%s: MXFP8 needs a multiple of 32 elements along the last dim", what);
  int half_up = (RS_MUTANT(403) ? 1 : RS_MUTANT(408) ? 2 : RS_MUTANT(409) ? 3 : RS_MUTANT(653) ? 4 : 0);
  for (int64_t b = 0; b < n / 32; ++b)
    if (rs__mx_block(x + b * 32, q + b * 32, scale + b, half_up))
      return rs_fail(RS_ERR_INVALID, "%s: block %lld holds a NaN or Inf", what, (long long)b);
  return RS_OK;
}

rs_status rs__mxfp8_quantize_any(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale, const char *what,
                                 int *on_device) {
  *on_device = 0;
  if (n >= 32 * 1024 && rs_cuda_device_count() > 0 && !getenv("RS_P2P_NO_GPU")) {
    int64_t bad = -1;
    rs_status st = rs_cuda_mxfp8(x, n, q, scale, (RS_MUTANT(403) ? 1 : RS_MUTANT(408) ? 2 : RS_MUTANT(409) ? 3 : RS_MUTANT(653) ? 4 : 0), &bad);
    if (!st && bad >= 0) return rs_fail(RS_ERR_INVALID, "%s: block %lld holds a NaN or Inf", what, (long long)bad);
    if (!st) {
      *on_device = 1;
      return RS_OK;
    }
  }
  return rs_mxfp8_quantize_opt(x, n, q, scale, what);
}
