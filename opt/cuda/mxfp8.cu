// mxfp8.cu - the MXFP8 transform of SPEC 10 as a CUDA kernel: one thread per block of 32 (the block
// math is opt/p2p/mxfp8_math.h, the same code as the CPU path). Host buffers in and out, staged
// through the device; the first block with a NaN/Inf is reported back.
#include <cuda_runtime.h>
#include <stdint.h>
#include "p2p/mxfp8_math.h"
#include "reshard/status.h"

__global__ void mxfp8_kernel(const uint16_t *x, int64_t nblocks, uint8_t *q, uint8_t *scale, int half_up,
                             unsigned long long *bad) {
  int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= nblocks) return;
  if (rs__mx_block(x + b * 32, q + b * 32, scale + b, half_up)) atomicMin(bad, (unsigned long long)b);
}

extern "C" rs_status rs_cuda_mxfp8(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale, int half_up,
                                   int64_t *bad_block) {
  int64_t nb = n / 32;
  *bad_block = -1;
  if (nb == 0) return RS_OK;
  uint16_t *dx = nullptr;
  uint8_t *dq = nullptr, *ds = nullptr;
  unsigned long long *dbad = nullptr, hbad = ~0ull;
  rs_status st = RS_OK;
  if (cudaMalloc(&dx, (size_t)n * 2) != cudaSuccess || cudaMalloc(&dq, (size_t)n) != cudaSuccess ||
      cudaMalloc(&ds, (size_t)nb) != cudaSuccess || cudaMalloc(&dbad, sizeof hbad) != cudaSuccess) {
    st = rs_fail(RS_ERR_NOMEM, "cuda mxfp8: cudaMalloc failed");
  } else if (cudaMemcpy(dx, x, (size_t)n * 2, cudaMemcpyHostToDevice) != cudaSuccess ||
             cudaMemcpy(dbad, &hbad, sizeof hbad, cudaMemcpyHostToDevice) != cudaSuccess) {
    st = rs_fail(RS_ERR_TRANSPORT, "cuda mxfp8: copy to device failed");
  } else {
    int threads = 256;
    mxfp8_kernel<<<(unsigned)((nb + threads - 1) / threads), threads>>>(dx, nb, dq, ds, half_up, dbad);
    if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpy(q, dq, (size_t)n, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(scale, ds, (size_t)nb, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(&hbad, dbad, sizeof hbad, cudaMemcpyDeviceToHost) != cudaSuccess)
      st = rs_fail(RS_ERR_TRANSPORT, "cuda mxfp8: kernel or copy back failed");
    else if (hbad != ~0ull)
      *bad_block = (int64_t)hbad;
  }
  cudaFree(dx);
  cudaFree(dq);
  cudaFree(ds);
  cudaFree(dbad);
  return st;
}
