/* test_opt_mpi.c - opt on the MPI transport: every process plays the mesh position of its world
 * rank, runs random cases (meshes over any subset of the world's ranks, in any order, Partial
 * included) and compares its own local with the oracle's, bit for bit; the processes agree on the
 * verdict. Run alone it is a one-rank world; opt/tests.cmake also runs it under mpirun -np 4. */
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "reshard/reshard.h"
#include "reshard/opt.h"

#include "rand_case.h"

/* A case every process draws identically (same generator state everywhere). */
static int draw(rs_case *c, int world) {
  memset(c, 0, sizeof *c);
  int64_t sizes[2];
  int nm = 1 + rint_(2);
  int64_t n = 1;
  for (int m = 0; m < nm; ++m) {
    sizes[m] = 1 + rint_(world);
    if (n * sizes[m] > world) sizes[m] = 1;
    n *= sizes[m];
  }
  int32_t pool[64];
  random_rank_pool(pool, world);
  if (rs_mesh_init(&c->mesh, nm, sizes, pool) != RS_OK) return 0;
  int partial = rint_(2);
  static const rs_dtype red[] = {RS_F64, RS_F32, RS_F16, RS_BF16, RS_I32, RS_I8, RS_U8};
  c->tensor.dtype = partial ? red[rint_(7)] : (rs_dtype)rint_(RS_DTYPE_COUNT);
  c->tensor.ndim = rint_(4);
  for (int d = 0; d < c->tensor.ndim; ++d) c->tensor.shape[d] = rint_(9);
  rs_redop op = (rs_redop)rint_(4);
  random_sharding(&c->src, nm, c->tensor.ndim, partial, op);
  random_sharding(&c->dst, nm, c->tensor.ndim, partial, op);
  c->seed = rnd();
  c->values = rs_case_default_values(c);
  return rs_case_validate(c) == RS_OK;
}

int main(int argc, char **argv) {
  rng_state = 0x9E3779B97F4A7C15ull;
  rs_world *w;
  rs_status st = rs_world_init("mpi", &argc, &argv, &w);
  if (st == RS_ERR_UNSUPPORTED) {
    printf("skipped: %s\n", rs_last_error());
    return 0;
  }
  CHECK(st == RS_OK);
  if (st) TEST_DONE();
  int me = rs_world_rank(w), size = rs_world_size(w);
  if (size > 64) size = 64;
  rs_opt *o;
  CHECK(rs_opt_create(&o) == RS_OK);
  int ran = 0, bad_total = 0;
  for (int it = 0; it < 400; ++it) {
    rs_case c;
    if (!draw(&c, size)) continue;
    rs_locals in = {0, NULL}, exp = {0, NULL}, out = {0, NULL};
    int bad = rs_make_source(&c, &in) != RS_OK || rs_oracle_expected(&c, &c.dst, &exp) != RS_OK;
    rs_status rs = bad ? RS_OK : rs_opt_redistribute(o, w, &c, &in, &out, NULL);
    if (rs == RS_ERR_UNSUPPORTED) { /* P(x) -> P(y): refused on every rank alike */
      rs_locals_free(&in);
      rs_locals_free(&exp);
      continue;
    }
    if (rs != RS_OK) {
      fprintf(stderr, "rank %d: %s\n", me, rs_last_error());
      bad = 1;
    }
    int pos = rs_mesh_pos_of_rank(&c.mesh, me);
    if (!bad && pos >= 0) {
      const rs_local *e = &exp.r[pos], *a = &out.r[pos];
      bad = a->nbytes != e->nbytes || a->ndim != e->ndim ||
            (e->nbytes && memcmp(a->data, e->data, (size_t)e->nbytes) != 0);
      if (bad) {
        char *j = rs_case_to_json(&c);
        fprintf(stderr, "rank %d (pos %d) differs: %s\n", me, pos, j ? j : "?");
        free(j);
      }
    }
    CHECK(rs_world_agree(w, &bad) == RS_OK);
    bad_total += bad;
    ran++;
    rs_locals_free(&in);
    rs_locals_free(&exp);
    rs_locals_free(&out);
  }
  CHECK_EQ_I(bad_total, 0);
  if (me == 0) printf("mpi world of %d: %d cases\n", size, ran);
  rs_opt_destroy(o);
  rs_world_finalize(w);
  TEST_DONE();
}
