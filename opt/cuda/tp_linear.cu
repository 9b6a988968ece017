// tp_linear.cu - the TP Linear kernel of opt/tp: one thread per output element, summing its
// products over the reduction index in ascending order with explicit round-to-nearest multiply
// and add (__fmul_rn/__fadd_rn: nvcc may not contract them into an FMA), then the bias: the bits
// of ref's loop. Host buffers are staged through one pooled device buffer on opt's stream (the TP
// driver keeps locals on the host).
#include <cuda_runtime.h>
#include <stdint.h>
#include <mutex>
#include "cuda/cuda_api.h"
#include "cuda/runtime.cuh"

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

std::mutex g_mu;  // the staging pool
void *g_buf = nullptr;
size_t g_cap = 0;

size_t up256(size_t n) { return (n + 255) & ~(size_t)255; }

}  // namespace

// Staged through one pooled device buffer (x | w | b | y, each 256-byte aligned), on opt's stream.
extern "C" rs_status rs_cuda_tp_linear(const float *x, int64_t rows, int64_t k, const float *w,
                                       int64_t n, const float *b, float *y) {
  if (rows * n <= 0) return RS_OK;
  size_t sx = (size_t)(rows * k) * 4, sw = (size_t)(n * k) * 4, sb = b ? (size_t)n * 4 : 0, sy = (size_t)(rows * n) * 4;
  cudaStream_t s;
  rs_status st = rs__cuda_stream(&s);
  if (st) return st;
  std::lock_guard<std::mutex> lock(g_mu);
  st = rs__cuda_reserve(&g_buf, &g_cap, up256(sx) + up256(sw) + up256(sb) + up256(sy), "tp linear staging");
  if (st) return st;
  char *base = (char *)g_buf;
  float *dx = (float *)base, *dw = (float *)(base + up256(sx)), *db = (float *)(base + up256(sx) + up256(sw));
  float *dy = (float *)(base + up256(sx) + up256(sw) + up256(sb));
  if (sx) st = rs__cuda_err(cudaMemcpyAsync(dx, x, sx, cudaMemcpyHostToDevice, s), "tp linear upload");
  if (!st && sw) st = rs__cuda_err(cudaMemcpyAsync(dw, w, sw, cudaMemcpyHostToDevice, s), "tp linear upload");
  if (!st && sb) st = rs__cuda_err(cudaMemcpyAsync(db, b, sb, cudaMemcpyHostToDevice, s), "tp linear upload");
  if (!st) {
    int64_t threads = 256, blocks = (rows * n + threads - 1) / threads;
    linear_kernel<<<(unsigned)blocks, (unsigned)threads, 0, s>>>(dx, rows, k, dw, n, b ? db : nullptr, dy);
    st = rs__cuda_err(cudaGetLastError(), "tp linear launch");
  }
  if (!st) st = rs__cuda_err(cudaMemcpyAsync(y, dy, sy, cudaMemcpyDeviceToHost, s), "tp linear download");
  if (!st) st = rs__cuda_err(cudaStreamSynchronize(s), "tp linear");
  return st;
}
