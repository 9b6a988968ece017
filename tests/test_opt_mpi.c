/* test_opt_mpi.c - opt on the MPI transport: every process plays the mesh position of its world
 * rank, runs random cases (meshes over any subset of the world's ranks, in any order, Partial
 * included, drawn by props' generator) and compares its own local with the oracle's, bit for bit,
 * and the bytes it posted with the schedule's; the processes agree on the verdict. Run alone it is a one-rank world; opt/tests.cmake also runs it under mpirun -np 4. */
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "reshard/reshard.h"
#include "reshard/opt.h"

#include "props/props.h"

/* A case every process draws identically (props' generator, same stream everywhere): mesh ranks
 * are any subset of the world, in any order. */
static int draw(rs_case *c, int world, int it) {
  rs_gen_opts o;
  rs_gen_opts_default(&o);
  o.world_size = world;
  o.max_ranks = world;
  rs_choices ch;
  rs_choices_seed(&ch, 0x9E3779B97F4A7C15ull + (uint64_t)it);
  rs_status st = rs_gen_case(&ch, &o, c);
  rs_choices_free(&ch);
  return st == RS_OK;
}

/* This process's posted sends and receives equal its rows of the schedule's pair counts. */
static int posted_bad(rs_opt *o, rs_world *w, const rs_case *c, int me) {
  rs_posted *got = NULL, *want = NULL;
  int64_t ng = 0, nw = 0;
  int bad = rs_world_posted(w, &got, &ng) != RS_OK || rs_opt_sched_pairs(o, c, &want, &nw) != RS_OK;
  for (int64_t i = 0; !bad && i < nw; ++i) {
    int64_t s = 0, r = 0;
    for (int64_t j = 0; j < ng; ++j)
      if (got[j].from == want[i].from && got[j].to == want[i].to) s = got[j].sent, r = got[j].recvd;
    if (want[i].from == me && s != want[i].sent) bad = 1;
    if (want[i].to == me && r != want[i].recvd) bad = 1;
  }
  for (int64_t j = 0; !bad && j < ng; ++j) {
    int64_t i = 0;
    while (i < nw && !(want[i].from == got[j].from && want[i].to == got[j].to)) ++i;
    if (i == nw && (got[j].sent || got[j].recvd)) bad = 1;
  }
  if (bad) fprintf(stderr, "rank %d: posted bytes differ from the schedule\n", me);
  free(got);
  free(want);
  return bad;
}

int main(int argc, char **argv) {
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
    if (!draw(&c, size, it)) continue;
    rs_locals in = {0, NULL}, exp = {0, NULL}, out = {0, NULL};
    int bad = rs_make_source(&c, &in) != RS_OK || rs_oracle_expected(&c, &c.dst, &exp) != RS_OK;
    rs_world_posted_reset(w);
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
    if (!bad) bad = posted_bad(o, w, &c, me);
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
