// values.cu - SPEC 8 test values generated on the device: one thread per element of a rank's box
// runs the math of values_math.h (the same code tests/test_device_values.c checks against
// core/values.c on the CPU), so a device campaign fills its sources in GPU memory and only the
// box descriptor (a kernel argument) crosses PCIe.
#include <cuda_runtime.h>
#include <stdint.h>
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
