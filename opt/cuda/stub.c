/* cuda_stub.c - stand-ins for the opt/cuda kernels in builds without nvcc: no device is ever usable, so
 * callers take their CPU paths; anything that needs a device fails with a clear message. */
#include "cuda/cuda_api.h"

static rs_status none(void) {
  return rs_fail(RS_ERR_UNSUPPORTED, "cuda: built without CUDA");
}

int rs_cuda_device_count(void) { return 0; }
rs_status rs_cuda_malloc(void **p, int64_t bytes) { (void)bytes; *p = 0; return none(); }
void rs_cuda_free(void *p) { (void)p; }
rs_status rs_cuda_host_alloc(void **p, int64_t n) { (void)n; *p = 0; return none(); }
void rs_cuda_host_free(void *p) { (void)p; }
rs_status rs_cuda_d2d(void *d, const void *s, int64_t n) { (void)d; (void)s; (void)n; return none(); }
rs_status rs_cuda_memset(void *d, int b, int64_t n) { (void)d; (void)b; (void)n; return none(); }
rs_status rs_cuda_copy_2d(void *d, int64_t dp, const void *s, int64_t sp, int64_t w, int64_t r, int td) {
  (void)d; (void)dp; (void)s; (void)sp; (void)w; (void)r; (void)td; return none();
}
rs_status rs_cuda_fill_values(const struct rs_dvals *p, void *d, int64_t n) { (void)p; (void)d; (void)n; return none(); }
rs_status rs_cuda_check_values(const struct rs_dvals *p, const void *d, int64_t n, int64_t *nd) {
  (void)p; (void)d; (void)n; *nd = 0; return none();
}
rs_status rs_cuda_mxfp8_dev(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *s, int h, int64_t *b) {
  (void)x; (void)n; (void)q; (void)s; (void)h; *b = -1; return none();
}
rs_status rs_cuda_h2d(void *d, const void *s, int64_t n) { (void)d; (void)s; (void)n; return none(); }
rs_status rs_cuda_d2h(void *d, const void *s, int64_t n) { (void)d; (void)s; (void)n; return none(); }
rs_status rs_cuda_sync(void) { return none(); }
rs_status rs_cuda_host_register(void *p, int64_t n) { (void)p; (void)n; return none(); }
void rs_cuda_host_unregister(void *p) { (void)p; }
rs_status rs_cuda_copy_views(const rs_view *d, const rs_view *s, int64_t n) {
  (void)d; (void)s; (void)n; return none();
}
rs_status rs_cuda_pack(char *o, const rs_view *v, int64_t n) { (void)o; (void)v; (void)n; return none(); }
rs_status rs_cuda_unpack(const rs_view *v, int64_t n, const char *i) { (void)v; (void)n; (void)i; return none(); }
rs_status rs_cuda_fold(rs_dtype t, int nl, const int64_t *ln, const int8_t *lo, char *s, int64_t n) {
  (void)t; (void)nl; (void)ln; (void)lo; (void)s; (void)n; return none();
}
rs_status rs_cuda_div(rs_dtype t, void *x, int64_t d, int64_t n) { (void)t; (void)x; (void)d; (void)n; return none(); }
void *rs_cuda_stream(void) { return 0; }
rs_status rs_cuda_tp_linear(const float *x, int64_t r, int64_t k, const float *w, int64_t n,
                            const float *b, float *y) {
  (void)x; (void)r; (void)k; (void)w; (void)n; (void)b; (void)y; return none();
}
