/* conform_opt_plugin.c - reshard's own opt/ wrapped as a backend plug-in (include/reshard/backend.h):
 * the example every backend author can read, and the one `reshard conform` must pass on every suite
 * it drives. Options (--backend LIB.so?bug=NAME) plant one realistic bug, to show the suites catch
 * it with a shrunk case:
 *   bug=dst_order  redistribute lays the destination out in the default shard order, ignoring the
 *                  order the case names (what a planner that predates shard orders does);
 *   bug=tp_ranks   the TP output lists a 2-d mesh's locals column-major (mesh dims swapped);
 *   bug=last_rank  an off-by-one in the rank loop: the last rank's output is never written.
 * The same file built into a program (conform_serve_child.c) serves it over the process protocol. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "reshard/backend.h"
#include "reshard/opt.h"
#include "reshard/tp.h"

typedef struct plugin {
  rs_opt *opt;
  int dst_order, tp_ranks, last_rank;
} plugin;

static int create(const char *options, void **self, char *msg, size_t cap) {
  plugin *p = calloc(1, sizeof *p);
  if (!p) return snprintf(msg, cap, "out of memory"), RS_BACKEND_ERROR;
  p->dst_order = strstr(options, "bug=dst_order") != NULL;
  p->tp_ranks = strstr(options, "bug=tp_ranks") != NULL;
  p->last_rank = strstr(options, "bug=last_rank") != NULL;
  if (rs_opt_create(&p->opt)) {
    snprintf(msg, cap, "rs_opt_create: %s", rs_last_error());
    free(p);
    return RS_BACKEND_ERROR;
  }
  *self = p;
  return RS_BACKEND_OK;
}

static void destroy(void *self) {
  plugin *p = self;
  rs_opt_destroy(p->opt);
  free(p);
}

/* The harness's buffers seen as reshard locals (no copy). */
static int view(const rs_backend_bufs *b, rs_locals *l) {
  if (rs_locals_alloc(l, b->n)) return 0;
  for (int i = 0; i < b->n; i++) {
    l->r[i].ndim = b->b[i].ndim;
    memcpy(l->r[i].shape, b->b[i].shape, sizeof(int64_t) * (size_t)b->b[i].ndim);
    l->r[i].nbytes = b->b[i].nbytes;
    l->r[i].data = b->b[i].data;
  }
  return 1;
}

static void unview(rs_locals *l) {
  for (int i = 0; i < l->n; i++) l->r[i].data = NULL; /* the harness owns them */
  rs_locals_free(l);
}

/* opt's locals into the harness's buffers; rank i of `from` goes to out[map[i]]. */
static int give(const plugin *p, const rs_locals *from, const int *map, rs_backend_bufs *out, char *msg, size_t cap) {
  if (from->n != out->n) return snprintf(msg, cap, "%d locals for %d ranks", from->n, out->n), RS_BACKEND_ERROR;
  int n = p->last_rank ? out->n - 1 : out->n; /* planted: off by one */
  for (int i = 0; i < n; i++) {
    rs_backend_buf *b = &out->b[map ? map[i] : i];
    const rs_local *l = &from->r[i];
    if (l->nbytes > b->capacity)
      return snprintf(msg, cap, "rank %d: %lld bytes, room for %lld", b->rank, (long long)l->nbytes,
                      (long long)b->capacity), RS_BACKEND_ERROR;
    b->ndim = l->ndim;
    memcpy(b->shape, l->shape, sizeof(int64_t) * (size_t)l->ndim);
    b->nbytes = l->nbytes;
    if (l->nbytes) memcpy(b->data, l->data, (size_t)l->nbytes);
  }
  return RS_BACKEND_OK;
}

static int redistribute(void *self, const char *case_json, const rs_backend_bufs *in, rs_backend_bufs *out,
                        char *msg, size_t cap) {
  plugin *p = self;
  rs_case c;
  if (rs_case_from_json(case_json, &c)) return snprintf(msg, cap, "case: %s", rs_last_error()), RS_BACKEND_ERROR;
  if (p->dst_order) { /* planted: the destination's shard order is dropped */
    memset(c.dst.order_len, 0, sizeof c.dst.order_len);
    rs_sharding_set_default_order(&c.dst, c.tensor.ndim);
  }
  rs_locals src = {0, NULL}, dst = {0, NULL};
  int r = RS_BACKEND_OK;
  if (!view(in, &src)) r = RS_BACKEND_ERROR, snprintf(msg, cap, "out of memory");
  else if (rs_opt_redistribute(p->opt, NULL, &c, &src, &dst, NULL))
    r = RS_BACKEND_ERROR, snprintf(msg, cap, "rs_opt_redistribute: %s", rs_last_error());
  else r = give(p, &dst, NULL, out, msg, cap);
  unview(&src);
  rs_locals_free(&dst);
  return r;
}

static int tp_forward(void *self, const char *case_json, const rs_backend_bufs *inputs, rs_backend_bufs *out,
                      char *msg, size_t cap) {
  plugin *p = self;
  (void)inputs; /* opt makes the same test values from the case's seed (SPEC 8) */
  rs_tp_case c;
  if (rs_tp_case_from_json(case_json, &c)) return snprintf(msg, cap, "case: %s", rs_last_error()), RS_BACKEND_ERROR;
  rs_tp_result res;
  if (rs_tp_opt_forward(p->opt, NULL, &c, &res))
    return snprintf(msg, cap, "rs_tp_opt_forward: %s", rs_last_error()), RS_BACKEND_ERROR;
  int *map = NULL;
  if (p->tp_ranks && c.mesh.ndim == 2 && (map = malloc(sizeof *map * (size_t)c.mesh.nranks))) {
    /* planted: position (i, j) written where (j, i) of the transposed mesh would be */
    int64_t a = c.mesh.size[0], b = c.mesh.size[1];
    for (int64_t i = 0; i < a; i++)
      for (int64_t j = 0; j < b; j++) map[i * b + j] = (int)(j * a + i);
  }
  int r = give(p, &res.out, map, out, msg, cap);
  free(map);
  rs_tp_result_free(&res);
  return r;
}

static const rs_backend BACKEND = {
    .struct_size = sizeof(rs_backend),
    .abi_version = RS_BACKEND_ABI_VERSION,
    .name = "reshard-opt",
    .ckpt_format = RS_BACKEND_CKPT_RESHARD,
    .create = create,
    .destroy = destroy,
    .redistribute = redistribute,
    .tp_forward = tp_forward,
};

const rs_backend *rs_backend_entry(void) { return &BACKEND; }
