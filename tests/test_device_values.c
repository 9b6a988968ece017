/* test_device_values.c - the device value generator's math (opt/cuda/values_math.h, the code the
 * CUDA kernel runs) against core/values.c, bit for bit, on the CPU: random cases from props'
 * generator, each in every value mode (bits, exact, order) its dtype and mesh can hold, every rank's
 * src box (so every Partial coordinate path), plus boxes cut at random inside the tensor. With a
 * GPU (argv[3] = "gpu", ci/gpu.sh) the kernel itself fills the same boxes in device memory and is
 * compared too. Usage: test_device_values SRCDIR [cases] [gpu]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "cuda_test.h"
#include "core/values.h"
#include "opt/cuda/values_math.h"
#include "props/props.h"
#include "reshard/opt.h"
#include "reshard/reshard.h"


static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static int64_t draw(int64_t n) {
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return n > 0 ? (int64_t)((g_rng >> 33) % (uint64_t)n) : 0;
}

static int g_gpu = 0;
static int64_t g_boxes = 0, g_elems = 0, g_modes[3] = {0, 0, 0}, g_partial = 0;

/* one box: core's rs_value_pieces vs the shared math (and the kernel) */
static int check_box(const rs_case *c, const int64_t *coord, const int64_t *start, const int64_t *size) {
  rs_dvals p;
  if (rs_dvals_make(c, coord, start, size, &p) != RS_OK) {
    fprintf(stderr, "rs_dvals_make: %s\n", rs_last_error());
    return 1;
  }
  int64_t n = rs_dvals_numel(&p), bytes = n * p.esize;
  char *want = malloc((size_t)(bytes ? bytes : 1)), *got = malloc((size_t)(bytes ? bytes : 1));
  if (!want || !got) {
    free(want);
    free(got);
    return 1;
  }
  rs_value_pieces(c, coord, start, size, want);
  rs_dvals_fill_host(&p, got);
  int bad = bytes && memcmp(want, got, (size_t)bytes) != 0;
  if (!bad && g_gpu && bytes) {
    void *dev = NULL;
    memset(got, 0xA5, (size_t)bytes);
    bad = rs_cuda_malloc(&dev, bytes) || rs_cuda_fill_values(&p, dev, n) || rs_cuda_d2h(got, dev, bytes) ||
          memcmp(want, got, (size_t)bytes) != 0;
    if (bad) fprintf(stderr, "kernel: %s\n", rs_last_error());
    rs_cuda_free(dev);
  }
  g_boxes++;
  g_elems += n;
  g_modes[p.mode]++;
  g_partial += p.partial;
  free(want);
  free(got);
  return bad;
}

/* the device API's host half: box sizes as rs_locals_for_layout makes them, both layouts */
static int check_box_bytes(const rs_case *c) {
  int bad = 0;
  for (int k = 0; k < 2; ++k) {
    rs_locals l = {0, NULL};
    if (rs_locals_for_layout(&l, c, k ? &c->dst : &c->src)) return 1;
    for (int pos = 0; pos < c->mesh.nranks; ++pos) bad |= rs_opt_box_bytes(c, k, pos) != l.r[pos].nbytes;
    rs_locals_free(&l);
  }
  return bad;
}

static int check_case(const rs_case *c) {
  int bad = check_box_bytes(c);
  for (int pos = 0; pos < c->mesh.nranks && !bad; ++pos) {
    int64_t coord[RS_MAX_MESH_DIMS], start[RS_MAX_DIMS], size[RS_MAX_DIMS];
    rs_mesh_coord(&c->mesh, pos, coord);
    rs_local_box(&c->mesh, &c->src, &c->tensor, coord, start, size);
    bad |= check_box(c, coord, start, size);
    /* a random sub-box of the whole tensor at the same coordinates */
    for (int d = 0; d < c->tensor.ndim; ++d) {
      start[d] = draw(c->tensor.shape[d] + 1);
      size[d] = draw(c->tensor.shape[d] - start[d] + 1);
    }
    bad |= check_box(c, coord, start, size);
  }
  return bad;
}

int main(int argc, char **argv) {
  int cases = argc > 2 ? atoi(argv[2]) : 1500;
  if (argc > 3 && !strcmp(argv[3], "gpu")) {
    g_gpu = rs_opt_cuda_devices() > 0;
    printf(g_gpu ? "comparing the CUDA kernel too\n" : "skipped: the kernel half (no CUDA device); CPU math only\n");
  }
  int ran = 0, bad_total = 0, first_bad = -1;
  for (int it = 0; ran < cases && it < cases * 4; ++it) {
    rs_gen_opts o;
    rs_gen_opts_default(&o);
    o.max_ranks = 16;
    o.max_mesh_dims = 3;
    o.max_tensor_dims = 4;
    rs_choices ch;
    rs_choices_seed(&ch, 0xD0E5A1u + (uint64_t)it * 0x9E3779B97F4A7C15ull);
    rs_case c;
    rs_status st = rs_gen_case(&ch, &o, &c);
    rs_choices_free(&ch);
    if (st) continue;
    ran++;
    /* every value mode the case can hold, the drawn one first */
    rs_value_mode modes[4] = {c.values, RS_VALUES_BITS, RS_VALUES_EXACT, RS_VALUES_ORDER};
    for (int k = 0; k < 4; ++k) {
      if (k && modes[k] == modes[0]) continue;
      c.values = modes[k];
      if (rs_case_check_values(&c) != RS_OK) {
        rs_clear_error();
        continue;
      }
      if (check_case(&c)) {
        char *j = rs_case_to_json(&c);
        if (bad_total < 5) fprintf(stderr, "device value math differs from core/values.c: %s\n", j ? j : "?");
        free(j);
        if (first_bad < 0) first_bad = ran - 1;
        bad_total++;
      }
    }
  }
  /* device pointers on a host world are refused, not dereferenced */
  rs_world *host = NULL;
  CHECK(rs_world_init("local", NULL, NULL, &host) == RS_OK);
  rs_opt *o = NULL;
  CHECK(rs_opt_create(&o) == RS_OK);
  rs_case c0;
  rs_gen_opts go;
  rs_gen_opts_default(&go);
  rs_choices ch0;
  rs_choices_seed(&ch0, 1);
  if (rs_gen_case(&ch0, &go, &c0) == RS_OK) {
    void *p[RS_MAX_RANKS] = {0};
    CHECK(rs_opt_redistribute_device(o, host, &c0, p, p, NULL) == RS_ERR_INVALID);
    CHECK(rs_opt_device_source(host, &c0, p) == RS_ERR_INVALID);
    int64_t nd = -1;
    CHECK(rs_opt_device_check(host, &c0, p, &nd) != RS_OK && nd == 0);
    CHECK(rs_opt_box_bytes(&c0, 0, -1) == -1 && rs_opt_box_bytes(&c0, 1, c0.mesh.nranks) == -1);
    rs_clear_error();
  }
  rs_choices_free(&ch0);
  rs_opt_destroy(o);
  rs_world_finalize(host);
  printf("%d cases, %lld boxes (%lld bits, %lld exact, %lld order; %lld with a Partial src), %lld elements, %d differ\n",
         ran, (long long)g_boxes, (long long)g_modes[0], (long long)g_modes[1], (long long)g_modes[2],
         (long long)g_partial, (long long)g_elems, bad_total);
  if (first_bad >= 0) printf("first failure: case %d\n", first_bad);
  CHECK_EQ_I(bad_total, 0);
  /* the generator must reach what the math claims to cover */
  CHECK(g_modes[0] > 0 && g_modes[1] > 0 && g_modes[2] > 0 && g_partial > 0);
  TEST_DONE();
}
