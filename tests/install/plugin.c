/* plugin.c - a backend plug-in written outside the tree against the installed headers
 * (reshard/backend.h) and library: its redistribute is reshard's opt (its own schedule follows the
 * canonical event order, so Partial destinations hold the contract's pieces), so `reshard conform`
 * must pass it. tests/install.sh builds it from the installed package and runs conform on it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <reshard/backend.h>
#include <reshard/opt.h>
#include <reshard/reshard.h>

typedef struct plugin {
  rs_world *world;
  rs_opt *opt;
} plugin;

static int create(const char *options, void **self, char *msg, size_t cap) {
  (void)options;
  plugin *p = calloc(1, sizeof *p);
  if (!p || rs_world_init("local", NULL, NULL, &p->world) != RS_OK || rs_opt_create(&p->opt) != RS_OK) {
    snprintf(msg, cap, "opt: %s", p ? rs_last_error() : "out of memory");
    if (p && p->world) rs_world_finalize(p->world);
    free(p);
    return RS_BACKEND_ERROR;
  }
  *self = p;
  return RS_BACKEND_OK;
}

static void destroy(void *self) {
  plugin *p = self;
  rs_opt_destroy(p->opt);
  rs_world_finalize(p->world);
  free(p);
}

static int redistribute(void *self, const char *case_json, const rs_backend_bufs *in, rs_backend_bufs *out,
                        char *msg, size_t cap) {
  plugin *p = self;
  rs_case c;
  rs_locals src = {0}, dst = {0};
  int rc = RS_BACKEND_ERROR;
  if (rs_case_from_json(case_json, &c) != RS_OK) {
    snprintf(msg, cap, "case: %s", rs_last_error());
    return RS_BACKEND_ERROR;
  }
  if (in->n != c.mesh.nranks || out->n != c.mesh.nranks) {
    snprintf(msg, cap, "%d inputs, %d outputs for %d ranks", in->n, out->n, c.mesh.nranks);
    return RS_BACKEND_ERROR;
  }
  if (rs_locals_alloc(&src, in->n) != RS_OK) goto done;
  int es = rs_dtype_size(c.tensor.dtype);
  for (int i = 0; i < in->n; i++) {
    if (rs_local_resize(&src.r[i], in->b[i].ndim, in->b[i].shape, es) != RS_OK) goto done;
    if (src.r[i].nbytes != in->b[i].nbytes) {
      snprintf(msg, cap, "rank %d: %lld input bytes for its shape", i, (long long)in->b[i].nbytes);
      goto out;
    }
    if (src.r[i].nbytes) memcpy(src.r[i].data, in->b[i].data, (size_t)src.r[i].nbytes);
  }
  if (rs_opt_redistribute(p->opt, p->world, &c, &src, &dst, NULL) != RS_OK) goto done;
  for (int i = 0; i < out->n; i++) {
    rs_backend_buf *b = &out->b[i];
    if (dst.r[i].nbytes > b->capacity) {
      snprintf(msg, cap, "rank %d: %lld bytes, room for %lld", i, (long long)dst.r[i].nbytes, (long long)b->capacity);
      goto out;
    }
    b->ndim = dst.r[i].ndim;
    memcpy(b->shape, dst.r[i].shape, sizeof(int64_t) * (size_t)dst.r[i].ndim);
    b->nbytes = dst.r[i].nbytes;
    if (b->nbytes) memcpy(b->data, dst.r[i].data, (size_t)b->nbytes);
  }
  rc = RS_BACKEND_OK;
  goto out;
done:
  snprintf(msg, cap, "%s", rs_last_error());
out:
  rs_locals_free(&src);
  rs_locals_free(&dst);
  return rc;
}

static const rs_backend BACKEND = {
    .struct_size = sizeof(rs_backend),
    .abi_version = RS_BACKEND_ABI_VERSION,
    .name = "install-test (reshard opt behind the plug-in ABI)",
    .create = create,
    .destroy = destroy,
    .redistribute = redistribute,
};

const rs_backend *rs_backend_entry(void) { return &BACKEND; }
