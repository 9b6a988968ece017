// mxfp8.cu - the MXFP8 transform of SPEC 10 as a CUDA kernel: one thread per block of 32 (the block
// math is opt/p2p/mxfp8_math.h, the same code as the CPU path). rs_cuda_mxfp8_dev works on device
// buffers (the P2P executor's device path); rs_cuda_mxfp8 stages host buffers through pooled
// device buffers. Everything runs on opt's stream; the first block with a NaN/Inf is reported.
#include <cuda_runtime.h>
#include <stdint.h>
#include <mutex>
#include "cuda/runtime.cuh"
#include "p2p/mxfp8_math.h"
#include "reshard/status.h"

namespace {

__global__ void mxfp8_kernel(const uint16_t *x, int64_t nblocks, uint8_t *q, uint8_t *scale, int half_up,
                             unsigned long long *bad) {
  int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= nblocks) return;
  if (rs__mx_block(x + b * 32, q + b * 32, scale + b, half_up)) atomicMin(bad, (unsigned long long)b);
}

std::mutex g_mu;  // the staging pool and the flag word
void *g_buf = nullptr, *g_flag = nullptr, *g_hflag = nullptr;
size_t g_cap = 0, g_fcap = 0, g_hfcap = 0;

// x, q, scale in device memory; the caller holds g_mu (the flag word is shared)
rs_status run(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale, int half_up, int64_t *bad_block,
              cudaStream_t s) {
  int64_t nb = n / 32;
  rs_status st = rs__cuda_reserve(&g_flag, &g_fcap, sizeof(unsigned long long), "mxfp8 flag");
  if (!st) st = rs__cuda_reserve_host(&g_hflag, &g_hfcap, sizeof(unsigned long long), "mxfp8 flag (host)");
  if (st) return st;
  unsigned long long *hbad = (unsigned long long *)g_hflag;
  st = rs__cuda_err(cudaMemsetAsync(g_flag, 0xFF, sizeof *hbad, s), "mxfp8 flag");
  if (!st) {
    unsigned threads = 256, blocks = (unsigned)((nb + threads - 1) / threads);
    mxfp8_kernel<<<blocks, threads, 0, s>>>(x, nb, q, scale, half_up, (unsigned long long *)g_flag);
    st = rs__cuda_err(cudaGetLastError(), "mxfp8 kernel launch");
  }
  if (!st) st = rs__cuda_err(cudaMemcpyAsync(hbad, g_flag, sizeof *hbad, cudaMemcpyDeviceToHost, s), "mxfp8 flag");
  if (!st) st = rs__cuda_err(cudaStreamSynchronize(s), "mxfp8 kernel");
  if (!st && *hbad != ~0ull) *bad_block = (int64_t)*hbad;
  return st;
}

}  // namespace

extern "C" rs_status rs_cuda_mxfp8_dev(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale, int half_up,
                                       int64_t *bad_block) {
  *bad_block = -1;
  if (n / 32 == 0) return RS_OK;
  cudaStream_t s;
  rs_status st = rs__cuda_stream(&s);
  if (st) return st;
  std::lock_guard<std::mutex> lock(g_mu);
  return run(x, n, q, scale, half_up, bad_block, s);
}

extern "C" rs_status rs_cuda_mxfp8(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale, int half_up,
                                   int64_t *bad_block) {
  int64_t nb = n / 32;
  *bad_block = -1;
  if (nb == 0) return RS_OK;
  cudaStream_t s;
  rs_status st = rs__cuda_stream(&s);
  if (st) return st;
  std::lock_guard<std::mutex> lock(g_mu);
  // one pooled buffer: x (2n bytes), q (n bytes), scales (nb bytes)
  st = rs__cuda_reserve(&g_buf, &g_cap, (size_t)n * 3 + (size_t)nb, "mxfp8 staging");
  if (st) return st;
  uint16_t *dx = (uint16_t *)g_buf;
  uint8_t *dq = (uint8_t *)g_buf + n * 2, *ds = dq + n;
  st = rs__cuda_err(cudaMemcpyAsync(dx, x, (size_t)n * 2, cudaMemcpyHostToDevice, s), "mxfp8 upload");
  if (!st) st = run(dx, n, dq, ds, half_up, bad_block, s);
  if (!st) st = rs__cuda_err(cudaMemcpyAsync(q, dq, (size_t)n, cudaMemcpyDeviceToHost, s), "mxfp8 download");
  if (!st) st = rs__cuda_err(cudaMemcpyAsync(scale, ds, (size_t)nb, cudaMemcpyDeviceToHost, s), "mxfp8 download");
  if (!st) st = rs__cuda_err(cudaStreamSynchronize(s), "mxfp8 download");
  return st;
}
