// runtime.cu - opt's CUDA runtime plumbing: the one stream, checked copies between host and
// device (stream-ordered with the kernels: a cudaMemcpy on the legacy default stream does not wait
// for a cudaStreamNonBlocking stream, so an upload could still be in flight when a kernel read it),
// pinned host buffers, 2-d batched copies, pooled buffers. Every CUDA call is checked and answered
// as an rs_status; nothing aborts.
#include <cuda_runtime.h>
#include <stdint.h>
#include "cuda/cuda_api.h"
#include "cuda/runtime.cuh"

rs_status rs__cuda_err(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return RS_OK;
  cudaGetLastError();  // clear a non-sticky error so the next call does not report it again
  if (e == cudaErrorMemoryAllocation) return rs_fail(RS_ERR_NOMEM, "cuda: %s: %s", what, cudaGetErrorString(e));
  return rs_fail(RS_ERR_TRANSPORT, "cuda: %s: %s", what, cudaGetErrorString(e));
}

rs_status rs__cuda_stream(cudaStream_t *s) {
  static cudaStream_t g = nullptr;
  static cudaError_t made = cudaStreamCreateWithFlags(&g, cudaStreamNonBlocking);  // once, thread-safe
  *s = g;
  return rs__cuda_err(made, "cudaStreamCreateWithFlags");
}

unsigned rs__cuda_grid(long long n) {
  long long g = (n + kRsThreads - 1) / kRsThreads;
  if (g > 65535LL * 16) g = 65535LL * 16;
  return (unsigned)(g > 0 ? g : 1);
}

static rs_status reserve(void **buf, size_t *cap, size_t need, const char *what, bool host) {
  if (*buf && *cap >= need) return RS_OK;
  cudaStream_t s;
  rs_status st = rs__cuda_stream(&s);
  if (st) return st;
  if (*buf) {
    if ((st = rs__cuda_err(cudaStreamSynchronize(s), what))) return st;
    if (host) cudaFreeHost(*buf);
    else cudaFree(*buf);
    *buf = nullptr;
    *cap = 0;
  }
  size_t n = need < 4096 ? 4096 : need + need / 4;
  st = rs__cuda_err(host ? cudaMallocHost(buf, n) : cudaMalloc(buf, n), what);
  if (st) {
    *buf = nullptr;
    return st;
  }
  *cap = n;
  return RS_OK;
}

rs_status rs__cuda_reserve(void **buf, size_t *cap, size_t need, const char *what) {
  return reserve(buf, cap, need, what, false);
}

rs_status rs__cuda_reserve_host(void **buf, size_t *cap, size_t need, const char *what) {
  return reserve(buf, cap, need, what, true);
}

static rs_status copy(void *dst, const void *src, int64_t bytes, cudaMemcpyKind k, const char *what) {
  if (bytes <= 0) return RS_OK;
  cudaStream_t s;
  rs_status st = rs__cuda_stream(&s);
  if (!st) st = rs__cuda_err(cudaMemcpyAsync(dst, src, (size_t)bytes, k, s), what);
  // the host buffer is free to reuse (it may be pageable) and the data is there on return
  if (!st) st = rs__cuda_err(cudaStreamSynchronize(s), what);
  return st;
}

extern "C" {

int rs_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the "no device" error
    return 0;
  }
  return n;
}

rs_status rs_cuda_malloc(void **p, int64_t bytes) {
  *p = nullptr;
  rs_status st = rs__cuda_err(cudaMalloc(p, (size_t)(bytes > 0 ? bytes : 1)), "cudaMalloc");
  if (st) *p = nullptr;
  return st;
}

void rs_cuda_free(void *p) {
  if (p && cudaFree(p) != cudaSuccess) cudaGetLastError();
}

rs_status rs_cuda_host_alloc(void **p, int64_t bytes) {
  *p = nullptr;
  rs_status st = rs__cuda_err(cudaMallocHost(p, (size_t)(bytes > 0 ? bytes : 1)), "cudaMallocHost");
  if (st) *p = nullptr;
  return st;
}

void rs_cuda_host_free(void *p) {
  if (p && cudaFreeHost(p) != cudaSuccess) cudaGetLastError();
}

rs_status rs_cuda_h2d(void *dst, const void *src, int64_t bytes) {
  return copy(dst, src, bytes, cudaMemcpyHostToDevice, "upload");
}

rs_status rs_cuda_d2h(void *dst, const void *src, int64_t bytes) {
  return copy(dst, src, bytes, cudaMemcpyDeviceToHost, "download");
}

rs_status rs_cuda_d2d(void *dst, const void *src, int64_t bytes) {
  if (bytes <= 0) return RS_OK;
  cudaStream_t s;
  rs_status st = rs__cuda_stream(&s);
  return st ? st : rs__cuda_err(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToDevice, s), "d2d copy");
}

rs_status rs_cuda_memset(void *dst, int byte, int64_t bytes) {
  if (bytes <= 0) return RS_OK;
  cudaStream_t s;
  rs_status st = rs__cuda_stream(&s);
  return st ? st : rs__cuda_err(cudaMemsetAsync(dst, byte, (size_t)bytes, s), "cudaMemsetAsync");
}

rs_status rs_cuda_copy_2d(void *dst, int64_t dpitch, const void *src, int64_t spitch, int64_t width,
                          int64_t rows, int to_device) {
  if (width <= 0 || rows <= 0) return RS_OK;
  cudaStream_t s;
  rs_status st = rs__cuda_stream(&s);
  if (!st)
    st = rs__cuda_err(cudaMemcpy2DAsync(dst, (size_t)dpitch, src, (size_t)spitch, (size_t)width, (size_t)rows,
                                        to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s),
                      "cudaMemcpy2DAsync");
  return st;
}

rs_status rs_cuda_host_register(void *p, int64_t bytes) {
  if (bytes <= 0) return RS_OK;
  return rs__cuda_err(cudaHostRegister(p, (size_t)bytes, cudaHostRegisterDefault), "cudaHostRegister");
}

void rs_cuda_host_unregister(void *p) {
  if (p && cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();
}

rs_status rs_cuda_sync(void) {
  cudaStream_t s;
  rs_status st = rs__cuda_stream(&s);
  return st ? st : rs__cuda_err(cudaStreamSynchronize(s), "stream synchronize");
}

void *rs_cuda_stream(void) {
  cudaStream_t s;
  if (rs__cuda_stream(&s)) {
    rs_clear_error();
    return nullptr;
  }
  return (void *)s;
}

}  // extern "C"
