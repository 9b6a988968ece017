// values.cu - SPEC 8 test values generated on the device: one thread per element of a rank's box
// runs the math of values_math.h (the same code tests/test_device_values.c checks against
// core/values.c on the CPU), so a device campaign fills its sources in GPU memory and only the
// box descriptor (a kernel argument) crosses PCIe. The same math checks a copy-only case's outputs
// in place (rs_cuda_check_values): only a count of differing elements comes back.
#include <cuda_runtime.h>
#include <stdint.h>
#include <mutex>
#include "cuda/cuda_api.h"
#include "cuda/runtime.cuh"
#include "cuda/values_math.h"

namespace {

template <typename T>
__global__ void values_kernel(rs_dvals p, T *out, int64_t numel) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < numel; k += (int64_t)gridDim.x * blockDim.x)
    out[k] = (T)rs_dv_value(&p, rs_dv_flat(&p, k));
}

}  // namespace

extern "C" rs_status rs_cuda_fill_values(const rs_dvals *p, void *dev, int64_t numel) {
  if (numel <= 0) return RS_OK;
  cudaStream_t s;
  rs_status st = rs__cuda_stream(&s);
  if (st) return st;
  unsigned g = rs__cuda_grid(numel);
  switch (p->esize) {
    case 8: values_kernel<uint64_t><<<g, kRsThreads, 0, s>>>(*p, (uint64_t *)dev, numel); break;
    case 4: values_kernel<uint32_t><<<g, kRsThreads, 0, s>>>(*p, (uint32_t *)dev, numel); break;
    case 2: values_kernel<uint16_t><<<g, kRsThreads, 0, s>>>(*p, (uint16_t *)dev, numel); break;
    case 1: values_kernel<uint8_t><<<g, kRsThreads, 0, s>>>(*p, (uint8_t *)dev, numel); break;
    default: return rs_fail(RS_ERR_UNSUPPORTED, "cuda values: element size %d", (int)p->esize);
  }
  return rs__cuda_err(cudaGetLastError(), "values kernel launch");
}

namespace {

// Element k of the box differs from its generated value: counted (the check of a copy-only
// campaign's outputs on the device, so only a count comes back).
template <typename T>
__global__ void check_kernel(rs_dvals p, const T *got, int64_t numel, unsigned long long *ndiff) {
  unsigned long long mine = 0;
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < numel; k += (int64_t)gridDim.x * blockDim.x)
    mine += got[k] != (T)rs_dv_value(&p, rs_dv_flat(&p, k));
  if (mine) atomicAdd(ndiff, mine);
}

std::mutex g_check_mu;  // the pooled counter words
void *g_count = nullptr, *g_hcount = nullptr;
size_t g_ccap = 0, g_hccap = 0;

}  // namespace

extern "C" rs_status rs_cuda_check_values(const rs_dvals *p, const void *dev, int64_t numel, int64_t *ndiff) {
  *ndiff = 0;
  if (numel <= 0) return RS_OK;
  cudaStream_t s;
  rs_status st = rs__cuda_stream(&s);
  if (st) return st;
  std::lock_guard<std::mutex> lock(g_check_mu);
  st = rs__cuda_reserve(&g_count, &g_ccap, sizeof(unsigned long long), "value check counter");
  if (!st) st = rs__cuda_reserve_host(&g_hcount, &g_hccap, sizeof(unsigned long long), "value check counter (host)");
  if (!st) st = rs__cuda_err(cudaMemsetAsync(g_count, 0, sizeof(unsigned long long), s), "value check counter");
  if (st) return st;
  unsigned g = rs__cuda_grid(numel);
  unsigned long long *c = (unsigned long long *)g_count;
  switch (p->esize) {
    case 8: check_kernel<uint64_t><<<g, kRsThreads, 0, s>>>(*p, (const uint64_t *)dev, numel, c); break;
    case 4: check_kernel<uint32_t><<<g, kRsThreads, 0, s>>>(*p, (const uint32_t *)dev, numel, c); break;
    case 2: check_kernel<uint16_t><<<g, kRsThreads, 0, s>>>(*p, (const uint16_t *)dev, numel, c); break;
    case 1: check_kernel<uint8_t><<<g, kRsThreads, 0, s>>>(*p, (const uint8_t *)dev, numel, c); break;
    default: return rs_fail(RS_ERR_UNSUPPORTED, "cuda values: element size %d", (int)p->esize);
  }
  st = rs__cuda_err(cudaGetLastError(), "value check launch");
  if (!st) st = rs__cuda_err(cudaMemcpyAsync(g_hcount, g_count, sizeof(unsigned long long), cudaMemcpyDeviceToHost, s),
                             "value check count");
  if (!st) st = rs__cuda_err(cudaStreamSynchronize(s), "value check");
  if (!st) *ndiff = (int64_t)*(unsigned long long *)g_hcount;
  return st;
}
