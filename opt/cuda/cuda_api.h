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

/* Every call runs on opt's one stream (cudaStreamNonBlocking, made once per process; the nccl and
 * local-device worlds each use one device per process, so it is the world's stream): nothing is
 * ever issued on the legacy default stream beside it. Every CUDA error comes back as an rs_status.
 * Number of usable CUDA devices (0 without CUDA, without a driver or without a GPU). */
int rs_cuda_device_count(void);
rs_status rs_cuda_malloc(void **p, int64_t bytes);
void rs_cuda_free(void *p);
/* page-locked host memory (cudaMallocHost / cudaFreeHost) */
rs_status rs_cuda_host_alloc(void **p, int64_t bytes);
void rs_cuda_host_free(void *p);
/* host <-> device, stream-ordered; complete on return (the host buffer may be reused) */
rs_status rs_cuda_h2d(void *dst, const void *src, int64_t bytes);
rs_status rs_cuda_d2h(void *dst, const void *src, int64_t bytes);
/* device -> device, asynchronous on the stream */
rs_status rs_cuda_d2d(void *dst, const void *src, int64_t bytes);
/* dst[0, bytes) <- byte, asynchronous on the stream */
rs_status rs_cuda_memset(void *dst, int byte, int64_t bytes);
/* rows rows of width bytes, dst/src rows pitch bytes apart (cudaMemcpy2DAsync), host -> device
 * (to_device) or back; asynchronous: rs_cuda_sync before the host reads or reuses its side. */
rs_status rs_cuda_copy_2d(void *dst, int64_t dpitch, const void *src, int64_t spitch, int64_t width,
                          int64_t rows, int to_device);
rs_status rs_cuda_sync(void);
/* page-locks / releases an existing host buffer (cudaHostRegister) */
rs_status rs_cuda_host_register(void *p, int64_t bytes);
void rs_cuda_host_unregister(void *p);
/* dst[i] <- src[i] for n pairs of same-shape device views, in one kernel launch. */
rs_status rs_cuda_copy_views(const rs_view *dst, const rs_view *src, int64_t n);
/* Copies and kernels below are asynchronous on the stream (rs_cuda_sync waits for them).
 * The descriptors of a launch live in pooled buffers: no allocation or synchronization per call. */
/* Pack n device views into one contiguous device buffer (or unpack it), one launch. */
rs_status rs_cuda_pack(char *out, const rs_view *v, int64_t n);
rs_status rs_cuda_unpack(const rs_view *v, int64_t n, const char *in);
/* Ordered fold of a job's contribution slots into slot 0 (SPEC 5 nested levels, SPEC 1 math). */
rs_status rs_cuda_fold(rs_dtype t, int nlevel, const int64_t *level_n, const int8_t *level_op,
                       char *slot0, int64_t numel);
/* x = x / d elementwise (SPEC 1 math). */
rs_status rs_cuda_div(rs_dtype t, void *x, int64_t d, int64_t n);
/* The CUDA stream opt's kernels run on (a cudaStream_t), for NCCL; NULL when it could not be made
 * (the error was reported by the first call that needed it). */
void *rs_cuda_stream(void);
/* TP Linear on host buffers (staged through the device): y[r, o] = sum over k ascending of
 * x[r, k] * w[o, k] in F32 (no FMA), then + b[o] (b may be NULL). opt/cuda/tp_linear.cu. */
rs_status rs_cuda_tp_linear(const float *x, int64_t rows, int64_t k, const float *w, int64_t n,
                            const float *b, float *y);

/* SPEC 8 test values of one box (values_math.h's rs_dvals) into numel elements of device memory
 * at dev, generated on the device (opt/cuda/values.cu); asynchronous. */
struct rs_dvals;
rs_status rs_cuda_fill_values(const struct rs_dvals *p, void *dev, int64_t numel);
/* The elements of dev (numel, device memory) that differ from the values of box p, counted on
 * the device into *ndiff. Complete on return. */
rs_status rs_cuda_check_values(const struct rs_dvals *p, const void *dev, int64_t numel, int64_t *ndiff);
/* MXFP8 (SPEC 10) of n BF16 values in device memory into q (n bytes) and scale (n/32), device memory;
 * *bad_block: the first block with a NaN/Inf, or -1. Complete on return. */
rs_status rs_cuda_mxfp8_dev(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale, int half_up,
                            int64_t *bad_block);

#ifdef __cplusplus
}
#endif
#endif
