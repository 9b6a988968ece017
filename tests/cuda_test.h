/* cuda_test.h - opt's device-memory primitives (opt/cuda/cuda_api.h, or the stub's "no device")
 * for the tests that hand opt device pointers of their own. */
#ifndef RS_TEST_CUDA_TEST_H
#define RS_TEST_CUDA_TEST_H
#include <stdint.h>
#include "reshard/status.h"
struct rs_dvals;
rs_status rs_cuda_malloc(void **p, int64_t bytes);
void rs_cuda_free(void *p);
rs_status rs_cuda_h2d(void *dst, const void *src, int64_t bytes);
rs_status rs_cuda_d2h(void *dst, const void *src, int64_t bytes);
rs_status rs_cuda_fill_values(const struct rs_dvals *p, void *dev, int64_t numel);
#endif
