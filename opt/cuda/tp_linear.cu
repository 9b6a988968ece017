// tp_linear.cu - the TP Linear kernel of opt/tp: one thread per output element, summing its
// products over the reduction index in ascending order with explicit round-to-nearest multiply
// and add (__fmul_rn/__fadd_rn: nvcc may not contract them into an FMA), then the bias: the bits
// of ref's loop. Host buffers are staged through the device (the TP driver keeps locals on the host).
#include <cuda_runtime.h>
#include <stdint.h>
#include "cuda/cuda_api.h"

namespace {

__global__ void linear_kernel(const float *x, int64_t rows, int64_t k, const float *w, int64_t n,
                              const float *b, float *y) {
  int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= rows * n) return;
  int64_t r = t / n, o = t % n;
  float acc = 0.0f;
  for (int64_t i = 0; i < k; i++) acc = __fadd_rn(acc, __fmul_rn(x[r * k + i], w[o * k + i]));
  y[t] = b ? __fadd_rn(acc, b[o]) : acc;
}

rs_status err(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return RS_OK;
  return rs_fail(RS_ERR_TRANSPORT, "cuda: tp linear: %s: %s", what, cudaGetErrorString(e));
}

}  // namespace

extern "C" rs_status rs_cuda_tp_linear(const float *x, int64_t rows, int64_t k, const float *w,
                                       int64_t n, const float *b, float *y) {
  float *dx = nullptr, *dw = nullptr, *db = nullptr, *dy = nullptr;
  size_t sx = (size_t)(rows * k) * 4, sw = (size_t)(n * k) * 4, sy = (size_t)(rows * n) * 4;
  rs_status st = err(cudaMalloc(&dx, sx ? sx : 4), "malloc");
  if (st == RS_OK) st = err(cudaMalloc(&dw, sw ? sw : 4), "malloc");
  if (st == RS_OK) st = err(cudaMalloc(&dy, sy ? sy : 4), "malloc");
  if (st == RS_OK && b) st = err(cudaMalloc(&db, (size_t)n * 4), "malloc");
  if (st == RS_OK && sx) st = err(cudaMemcpy(dx, x, sx, cudaMemcpyHostToDevice), "h2d");
  if (st == RS_OK && sw) st = err(cudaMemcpy(dw, w, sw, cudaMemcpyHostToDevice), "h2d");
  if (st == RS_OK && b) st = err(cudaMemcpy(db, b, (size_t)n * 4, cudaMemcpyHostToDevice), "h2d");
  if (st == RS_OK && rows * n > 0) {
    int64_t threads = 256, blocks = (rows * n + threads - 1) / threads;
    linear_kernel<<<(unsigned)blocks, (unsigned)threads>>>(dx, rows, k, dw, n, db, dy);
    st = err(cudaGetLastError(), "launch");
    if (st == RS_OK) st = err(cudaMemcpy(y, dy, sy, cudaMemcpyDeviceToHost), "d2h");
  }
  cudaFree(dx);
  cudaFree(dw);
  cudaFree(db);
  cudaFree(dy);
  return st;
}
