// pack.cu - opt's device kernels: batched strided box copies (pack, unpack and view-to-view copies
// all go through one launch per exchange), the ordered reduction of a job's contribution slots and
// the partition division. Arithmetic mirrors SPEC 1 bit for bit: F32/F64 in IEEE round-to-nearest
// (explicit _rn intrinsics so nothing is contracted or flushed), F16/BF16 through F32 with the same
// rounding (and NaN encodings) as spec/dtype.c after every op, integers wrapping. Everything is
// asynchronous on opt's stream (runtime.cu); a launch's descriptors go through pooled buffers.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <mutex>
#include "cuda/cuda_api.h"
#include "cuda/runtime.cuh"

namespace {

// ---------------------------------------------------------------- runtime plumbing

rs_status cuda_err(cudaError_t e, const char *what) { return rs__cuda_err(e, what); }

// ---------------------------------------------------------------- batched box copies

struct CopyDesc {
  char *dst;
  const char *src;
  int n;                     // outer dims (the innermost run is counted in units)
  int w;                     // unit width in bytes: 1, 2, 4, 8 or 16
  int64_t units;             // units per run
  int64_t size[RS_MAX_DIMS]; // outer sizes
  int64_t ds[RS_MAX_DIMS], ss[RS_MAX_DIMS];
  int64_t total;             // units in all
  int64_t block0;            // first block of this descriptor
};

constexpr int kThreads = kRsThreads;
constexpr int kPerThread = 8;
constexpr int64_t kUnitsPerBlock = (int64_t)kThreads * kPerThread;

template <typename U>
__device__ void copy_units(const CopyDesc &d, int64_t lo, int64_t hi) {
  for (int64_t u = lo + threadIdx.x; u < hi; u += blockDim.x) {
    int64_t r = u / d.units, k = u - r * d.units;
    const char *s = d.src;
    char *o = d.dst;
    for (int j = d.n - 1; j >= 0; --j) {
      int64_t q = r / d.size[j], i = r - q * d.size[j];
      s += i * d.ss[j];
      o += i * d.ds[j];
      r = q;
    }
    reinterpret_cast<U *>(o)[k] = reinterpret_cast<const U *>(s)[k];
  }
}

__global__ void copy_kernel(const CopyDesc *desc, int ndesc) {
  int lo = 0, hi = ndesc - 1;
  int64_t b = blockIdx.x;
  while (lo < hi) {  // last descriptor whose first block <= b
    int mid = (lo + hi + 1) / 2;
    if (desc[mid].block0 <= b) lo = mid;
    else hi = mid - 1;
  }
  const CopyDesc &d = desc[lo];
  int64_t first = (b - d.block0) * kUnitsPerBlock;
  int64_t last = first + kUnitsPerBlock < d.total ? first + kUnitsPerBlock : d.total;
  switch (d.w) {
    case 16: copy_units<uint4>(d, first, last); break;
    case 8: copy_units<uint2>(d, first, last); break;
    case 4: copy_units<uint32_t>(d, first, last); break;
    case 2: copy_units<uint16_t>(d, first, last); break;
    default: copy_units<uint8_t>(d, first, last); break;
  }
}

// Merge dims of a same-shape pair as view.c does; returns false for an empty copy.
bool make_desc(const rs_view &a, const rs_view &b, CopyDesc *o) {
  int64_t size[RS_MAX_DIMS], sa[RS_MAX_DIMS], sb[RS_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < a.ndim; ++d) {
    if (a.size[d] == 0) return false;
    if (a.size[d] == 1) continue;
    size[n] = a.size[d];
    sa[n] = a.stride[d];
    sb[n] = b.stride[d];
    n++;
  }
  int64_t run = a.esize;
  while (n > 0 && sa[n - 1] == run && sb[n - 1] == run) {
    run *= size[n - 1];
    n--;
  }
  int m = 0;
  for (int d = 0; d < n; ++d) {
    if (m > 0 && o->ds[m - 1] == size[d] * sa[d] && o->ss[m - 1] == size[d] * sb[d]) {
      o->size[m - 1] *= size[d];
      o->ds[m - 1] = sa[d];
      o->ss[m - 1] = sb[d];
    } else {
      o->size[m] = size[d];
      o->ds[m] = sa[d];
      o->ss[m] = sb[d];
      m++;
    }
  }
  o->n = m;
  o->dst = a.base;
  o->src = b.base;
  uint64_t align = (uint64_t)run | (uint64_t)(uintptr_t)a.base | (uint64_t)(uintptr_t)b.base;
  for (int d = 0; d < m; ++d) align |= (uint64_t)o->ds[d] | (uint64_t)o->ss[d];
  int w = 16;
  while (w > 1 && (align & (uint64_t)(w - 1))) w /= 2;
  o->w = w;
  o->units = run / w;
  int64_t outer = 1;
  for (int d = 0; d < m; ++d) outer *= o->size[d];
  o->total = outer * o->units;
  return true;
}

// The descriptors of one launch live in two pooled buffers, pinned host and device, reused across
// calls: no allocation and no synchronization per launch. The upload is stream-ordered before the
// kernel, and the next launch's host writes wait (desc_done) until the previous upload has read
// them; the mutex keeps two threads from sharing the pool.
std::mutex g_desc_mu;
CopyDesc *g_hdesc = nullptr, *g_ddesc = nullptr;
size_t g_hcap = 0, g_dcap = 0;
cudaEvent_t g_desc_done = nullptr;

rs_status launch_copies(const rs_view *dst, const rs_view *src, int64_t n) {
  if (n <= 0) return RS_OK;
  std::lock_guard<std::mutex> lock(g_desc_mu);
  cudaStream_t s;
  rs_status st = rs__cuda_stream(&s);
  if (!st && !g_desc_done) {
    st = cuda_err(cudaEventCreateWithFlags(&g_desc_done, cudaEventDisableTiming), "descriptor event");
    if (st) g_desc_done = nullptr;
  }
  if (!st) st = cuda_err(cudaEventSynchronize(g_desc_done), "descriptor reuse");
  size_t need = sizeof(CopyDesc) * (size_t)n;
  if (!st) st = rs__cuda_reserve_host((void **)&g_hdesc, &g_hcap, need, "descriptor buffer (host)");
  if (!st) st = rs__cuda_reserve((void **)&g_ddesc, &g_dcap, need, "descriptor buffer");
  if (st) return st;
  int64_t nd = 0, blocks = 0;
  for (int64_t i = 0; i < n; ++i) {
    CopyDesc d;
    memset(&d, 0, sizeof d);
    if (!make_desc(dst[i], src[i], &d)) continue;
    d.block0 = blocks;
    blocks += (d.total + kUnitsPerBlock - 1) / kUnitsPerBlock;
    g_hdesc[nd++] = d;
  }
  if (nd == 0) return RS_OK;
  if (blocks > 0x7FFFFFFFLL) return rs_fail(RS_ERR_UNSUPPORTED, "cuda: %lld blocks in one copy launch", (long long)blocks);
  st = cuda_err(cudaMemcpyAsync(g_ddesc, g_hdesc, sizeof(CopyDesc) * (size_t)nd, cudaMemcpyHostToDevice, s),
                "descriptor upload");
  if (!st) st = cuda_err(cudaEventRecord(g_desc_done, s), "descriptor event");
  if (!st) {
    copy_kernel<<<(unsigned)blocks, kThreads, 0, s>>>(g_ddesc, (int)nd);
    st = cuda_err(cudaGetLastError(), "copy kernel launch");
  }
  return st;
}

// ---------------------------------------------------------------- SPEC 1 arithmetic

__device__ inline float u2f(uint32_t u) { return __uint_as_float(u); }
__device__ inline uint32_t f2u(float f) { return __float_as_uint(f); }

__device__ inline float h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return u2f(sign | 0x7F800000u | (m << 13));
  if (e == 0) {
    float v = __fmul_rn((float)m, 5.9604644775390625e-08f);  // m * 2^-24, exact
    return sign ? -v : v;
  }
  return u2f(sign | ((e + 112u) << 23) | (m << 13));
}

__device__ inline uint16_t f2h(float f) {
  uint32_t u = f2u(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((u >> 13) & 0x1FFu));
  if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  // >= 65520 rounds to Inf
  if (a >= 0x38800000u) {                                   // normal in F16
    a += 0xFFFu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((a - 0x38000000u) >> 13));
  }
  // subnormal (or zero): count quanta of 2^-24, ties to even
  float x = __fmul_rn(u2f(a), 16777216.0f);
  return (uint16_t)(sign | (uint16_t)__float2uint_rn(x));
}

__device__ inline float b2f(uint16_t b) { return u2f((uint32_t)b << 16); }
__device__ inline uint16_t f2b(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

__device__ inline float fop(float a, float v, int op) {
  switch (op) {
    case RS_MIN: return v < a ? v : a;
    case RS_MAX: return v > a ? v : a;
    default: return __fadd_rn(a, v);
  }
}
__device__ inline double dop(double a, double v, int op) {
  switch (op) {
    case RS_MIN: return v < a ? v : a;
    case RS_MAX: return v > a ? v : a;
    default: return __dadd_rn(a, v);
  }
}
template <typename T, typename UT>
__device__ inline T iop(T a, T v, int op) {
  switch (op) {
    case RS_MIN: return v < a ? v : a;
    case RS_MAX: return v > a ? v : a;
    default: return (T)(UT)((UT)a + (UT)v);
  }
}

// Element traits: load to a working value, combine, divide, store.
struct F64 {
  typedef double V;
  typedef double S;
  __device__ static V ld(const S *p) { return *p; }
  __device__ static void st(S *p, V v) { *p = v; }
  __device__ static V op(V a, V b, int o) { return dop(a, b, o); }
  __device__ static V div(V a, int64_t d) { return __ddiv_rn(a, (double)d); }
};
struct F32 {
  typedef float V;
  typedef float S;
  __device__ static V ld(const S *p) { return *p; }
  __device__ static void st(S *p, V v) { *p = v; }
  __device__ static V op(V a, V b, int o) { return fop(a, b, o); }
  __device__ static V div(V a, int64_t d) { return __fdiv_rn(a, (float)d); }
};
struct F16 {  // the working value is the stored bits, so every op rounds
  typedef uint16_t V;
  typedef uint16_t S;
  __device__ static V ld(const S *p) { return *p; }
  __device__ static void st(S *p, V v) { *p = v; }
  __device__ static V op(V a, V b, int o) { return f2h(fop(h2f(a), h2f(b), o)); }
  __device__ static V div(V a, int64_t d) { return f2h(__fdiv_rn(h2f(a), (float)d)); }
};
struct BF16 {
  typedef uint16_t V;
  typedef uint16_t S;
  __device__ static V ld(const S *p) { return *p; }
  __device__ static void st(S *p, V v) { *p = v; }
  __device__ static V op(V a, V b, int o) { return f2b(fop(b2f(a), b2f(b), o)); }
  __device__ static V div(V a, int64_t d) { return f2b(__fdiv_rn(b2f(a), (float)d)); }
};
template <typename T, typename UT>
struct Int {
  typedef T V;
  typedef T S;
  __device__ static V ld(const S *p) { return *p; }
  __device__ static void st(S *p, V v) { *p = v; }
  __device__ static V op(V a, V b, int o) { return iop<T, UT>(a, b, o); }
  __device__ static V div(V a, int64_t d) { return (T)((int64_t)a / d); }
};
struct Levels {
  int n;
  int64_t size[RS_MAX_MESH_DIMS];
  int op[RS_MAX_MESH_DIMS];
  int64_t ncontrib;
};

// Each thread folds one element across every slot, level by level, exactly as fold.c does.
template <typename E>
__global__ void fold_kernel(typename E::S *slot0, int64_t numel, Levels lv) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < numel;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t stride = 1;
    for (int l = 0; l < lv.n; ++l) {
      int64_t n = lv.size[l];
      int op = lv.op[l], fo = op == RS_AVG ? RS_SUM : op;
      int64_t groups = lv.ncontrib / (stride * n);
      for (int64_t g = 0; g < groups; ++g) {
        typename E::S *acc = slot0 + g * stride * n * numel + i;
        typename E::V a = E::ld(acc);
        for (int64_t j = 1; j < n; ++j) a = E::op(a, E::ld(acc + j * stride * numel), fo);
        if (op == RS_AVG) a = E::div(a, n);
        E::st(acc, a);
      }
      stride *= n;
    }
  }
}

template <typename E>
__global__ void div_kernel(typename E::S *x, int64_t n, int64_t d) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    E::st(x + i, E::div(E::ld(x + i), d));
}

unsigned grid_for(int64_t n) { return rs__cuda_grid((long long)n); }

template <typename E>
rs_status fold_as(char *slot0, int64_t numel, const Levels &lv) {
  if (numel == 0) return RS_OK;
  cudaStream_t s;
  rs_status st = rs__cuda_stream(&s);
  if (st) return st;
  fold_kernel<E><<<grid_for(numel), kThreads, 0, s>>>((typename E::S *)slot0, numel, lv);
  return cuda_err(cudaGetLastError(), "fold kernel");
}

template <typename E>
rs_status div_as(void *x, int64_t d, int64_t n) {
  if (n == 0) return RS_OK;
  cudaStream_t s;
  rs_status st = rs__cuda_stream(&s);
  if (st) return st;
  div_kernel<E><<<grid_for(n), kThreads, 0, s>>>((typename E::S *)x, n, d);
  return cuda_err(cudaGetLastError(), "div kernel");
}

}  // namespace

extern "C" {

rs_status rs_cuda_copy_views(const rs_view *dst, const rs_view *src, int64_t n) {
  return launch_copies(dst, src, n);
}

rs_status rs_cuda_pack(char *out, const rs_view *v, int64_t n) {
  rs_view *p = (rs_view *)malloc(sizeof(rs_view) * (size_t)(n > 0 ? n : 1));
  if (!p) return rs_fail(RS_ERR_NOMEM, "cuda: out of memory");
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    rs_view_packed(&p[i], out + off, v[i].esize, v[i].ndim, v[i].size);
    off += rs_view_bytes(&v[i]);
  }
  rs_status st = launch_copies(p, v, n);
  free(p);
  return st;
}

rs_status rs_cuda_unpack(const rs_view *v, int64_t n, const char *in) {
  rs_view *p = (rs_view *)malloc(sizeof(rs_view) * (size_t)(n > 0 ? n : 1));
  if (!p) return rs_fail(RS_ERR_NOMEM, "cuda: out of memory");
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    rs_view_packed(&p[i], (char *)in + off, v[i].esize, v[i].ndim, v[i].size);
    off += rs_view_bytes(&v[i]);
  }
  rs_status st = launch_copies(v, p, n);
  free(p);
  return st;
}

rs_status rs_cuda_fold(rs_dtype t, int nlevel, const int64_t *level_n, const int8_t *level_op,
                       char *slot0, int64_t numel) {
  Levels lv;
  memset(&lv, 0, sizeof lv);
  lv.n = nlevel;
  lv.ncontrib = 1;
  for (int i = 0; i < nlevel; ++i) {
    lv.size[i] = level_n[i];
    lv.op[i] = level_op[i];
    lv.ncontrib *= level_n[i];
  }
  switch (t) {
    case RS_F64: return fold_as<F64>(slot0, numel, lv);
    case RS_F32: return fold_as<F32>(slot0, numel, lv);
    case RS_F16: return fold_as<F16>(slot0, numel, lv);
    case RS_BF16: return fold_as<BF16>(slot0, numel, lv);
    case RS_I64: return fold_as<Int<int64_t, uint64_t>>(slot0, numel, lv);
    case RS_I32: return fold_as<Int<int32_t, uint32_t>>(slot0, numel, lv);
    case RS_I16: return fold_as<Int<int16_t, uint16_t>>(slot0, numel, lv);
    case RS_I8: return fold_as<Int<int8_t, uint8_t>>(slot0, numel, lv);
    case RS_U8: return fold_as<Int<uint8_t, uint8_t>>(slot0, numel, lv);
    default: return rs_fail(RS_ERR_UNSUPPORTED, "cuda fold: dtype %s is copy-only", rs_dtype_name(t));
  }
}

rs_status rs_cuda_div(rs_dtype t, void *x, int64_t d, int64_t n) {
  switch (t) {
    case RS_F64: return div_as<F64>(x, d, n);
    case RS_F32: return div_as<F32>(x, d, n);
    case RS_F16: return div_as<F16>(x, d, n);
    case RS_BF16: return div_as<BF16>(x, d, n);
    case RS_I64: return div_as<Int<int64_t, uint64_t>>(x, d, n);
    case RS_I32: return div_as<Int<int32_t, uint32_t>>(x, d, n);
    case RS_I16: return div_as<Int<int16_t, uint16_t>>(x, d, n);
    case RS_I8: return div_as<Int<int8_t, uint8_t>>(x, d, n);
    case RS_U8: return div_as<Int<uint8_t, uint8_t>>(x, d, n);
    default: return rs_fail(RS_ERR_UNSUPPORTED, "cuda div: dtype %s is copy-only", rs_dtype_name(t));
  }
}

}  // extern "C"
