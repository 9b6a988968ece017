// runtime.cuh - what opt's CUDA files share (opt/cuda/runtime.cu): error mapping, the one stream
// every copy and kernel of this process runs on, and grow-only pooled buffers.
#ifndef RS_OPT_CUDA_RUNTIME_CUH
#define RS_OPT_CUDA_RUNTIME_CUH
#include <cuda_runtime.h>
#include <stddef.h>
#include "reshard/status.h"

// RS_OK for cudaSuccess, else RS_ERR_TRANSPORT naming what failed (RS_ERR_NOMEM for an
// allocation); the sticky error state is cleared where CUDA allows it.
rs_status rs__cuda_err(cudaError_t e, const char *what);
// opt's stream (cudaStreamNonBlocking, made once, thread-safe): every upload, download, copy and
// kernel goes on it, so nothing runs on the legacy default stream beside it.
rs_status rs__cuda_stream(cudaStream_t *s);
// A grow-only device buffer (*buf, *cap bytes) of at least need bytes. Growing waits for the stream
// first, so a kernel still reading the old buffer finishes before it is freed.
rs_status rs__cuda_reserve(void **buf, size_t *cap, size_t need, const char *what);
// The same for page-locked host memory (cudaMallocHost).
rs_status rs__cuda_reserve_host(void **buf, size_t *cap, size_t need, const char *what);
// Threads per block of opt's kernels and a grid for n elements (grid-stride loops cover the rest).
constexpr int kRsThreads = 256;
unsigned rs__cuda_grid(long long n);
#endif
