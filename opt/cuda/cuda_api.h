/* cuda_api.h - the C entry points of opt's CUDA code (opt/cuda/ (*.cu files)). Built without CUDA, the
 * stubs in opt/cuda_stub.c answer "no device" so the same callers run their CPU paths. */
#ifndef RS_OPT_CUDA_API_H
#define RS_OPT_CUDA_API_H

#include <stdint.h>
#include "reshard/status.h"
#include "reshard/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif
#include "opt_internal.h"

/* Number of usable CUDA devices (0 without CUDA, without a driver or without a GPU). */
int rs_cuda_device_count(void);
rs_status rs_cuda_malloc(void **p, int64_t bytes);
void rs_cuda_free(void *p);
rs_status rs_cuda_h2d(void *dst, const void *src, int64_t bytes);
rs_status rs_cuda_d2h(void *dst, const void *src, int64_t bytes);
rs_status rs_cuda_sync(void);
/* page-locks / releases an existing host buffer (cudaHostRegister) */
rs_status rs_cuda_host_register(void *p, int64_t bytes);
void rs_cuda_host_unregister(void *p);
/* dst[i] <- src[i] for n pairs of same-shape device views, in one kernel launch. */
rs_status rs_cuda_copy_views(const rs_view *dst, const rs_view *src, int64_t n);
/* Pack n device views into one contiguous device buffer (or unpack it), one launch. */
rs_status rs_cuda_pack(char *out, const rs_view *v, int64_t n);
rs_status rs_cuda_unpack(const rs_view *v, int64_t n, const char *in);
/* Ordered fold of a job's contribution slots into slot 0 (SPEC 5 nested levels, SPEC 1 math). */
rs_status rs_cuda_fold(rs_dtype t, int nlevel, const int64_t *level_n, const int8_t *level_op,
                       char *slot0, int64_t numel);
/* x = x / d elementwise (SPEC 1 math). */
rs_status rs_cuda_div(rs_dtype t, void *x, int64_t d, int64_t n);
/* The CUDA stream opt's kernels run on (a cudaStream_t), for NCCL. */
void *rs_cuda_stream(void);
/* TP Linear on host buffers (staged through the device): y[r, o] = sum over k ascending of
 * x[r, k] * w[o, k] in F32 (no FMA), then + b[o] (b may be NULL). opt/cuda/tp_linear.cu. */
rs_status rs_cuda_tp_linear(const float *x, int64_t rows, int64_t k, const float *w, int64_t n,
                            const float *b, float *y);

#ifdef __cplusplus
}
#endif
#endif
