/* test_opt_gpu.c - opt's device paths against the CPU: random cases on the "local-device" world
 * (CUDA pack/copy/fold/div kernels, every rank in this process) compared bit for bit with opt's host
 * path and with the oracle; or, with argv[3] = "nccl", the NCCL transport (one process per rank,
 * launched by mpirun or alone as a one-rank world), each rank checking its own local. On every
 * world the bytes the transport layer counted must equal the schedule's, pair by pair (posted.h).
 * Usage: test_opt_gpu SRCDIR [cases] [local-device|nccl]. Without a GPU it says so and runs the
 * same cases on the host paths only (ci/gpu.sh runs it both ways). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "cuda_test.h"
#include "reshard/reshard.h"
#include "reshard/opt.h"

#include "props/props.h"
#include "posted.h"

/* Every process draws the same case (props' generator, same stream). max_ranks bounds the mesh;
 * on a distributed world mesh ranks are drawn from the world's. */
static int gen_case(rs_case *c, int max_ranks, int world, int it) {
  rs_gen_opts o;
  rs_gen_opts_default(&o);
  o.max_ranks = max_ranks;
  o.world_size = world;
  o.max_mesh_dims = 3;
  o.max_tensor_dims = 4;
  rs_choices ch;
  rs_choices_seed(&ch, 0xC0FFEE123456789ull + (uint64_t)it);
  rs_status st = rs_gen_case(&ch, &o, c);
  rs_choices_free(&ch);
  return st == RS_OK;
}

/* The device-memory API end to end: sources generated on the device (rs_opt_device_source), the
 * redistribution on device pointers (rs_opt_redistribute_device), then each played output brought
 * back once and compared with the oracle's, each source with rs_make_source's bytes. */
static int device_api_bad(rs_opt *o, rs_world *w, const rs_case *c, const rs_locals *in, const rs_locals *exp,
                          int me, int *checked) {
  int n = c->mesh.nranks, bad = 0;
  void **din = calloc((size_t)n, sizeof *din), **dout = calloc((size_t)n, sizeof *dout);
  bad = !din || !dout;
  for (int pos = 0; pos < n && !bad; ++pos) {
    if (me >= 0 && c->mesh.ranks[pos] != me) continue;
    bad = rs_cuda_malloc(&din[pos], rs_opt_box_bytes(c, 0, pos)) || rs_cuda_malloc(&dout[pos], rs_opt_box_bytes(c, 1, pos));
  }
  if (!bad) bad = rs_opt_device_source(w, c, din) || rs_opt_redistribute_device(o, w, c, din, dout, NULL);
  /* copy-only: the outputs checked in place on the device as well (only a count comes back) */
  if (!bad && !rs_sharding_has_partial(&c->src) && !rs_sharding_has_partial(&c->dst)) {
    int64_t nd = -1;
    bad = rs_opt_device_check(w, c, dout, &nd) || nd != 0;
    ++*checked;
  }
  if (bad) fprintf(stderr, "device API: %s\n", rs_last_error());
  for (int pos = 0; pos < n && !bad; ++pos) {
    if (me >= 0 && c->mesh.ranks[pos] != me) continue;
    int64_t ib = in->r[pos].nbytes, ob = exp->r[pos].nbytes;
    char *h = malloc((size_t)(ib > ob ? ib : ob) + 1);
    bad = !h || rs_cuda_d2h(h, din[pos], ib) || (ib && memcmp(h, in->r[pos].data, (size_t)ib)) ||
          rs_cuda_d2h(h, dout[pos], ob) || (ob && memcmp(h, exp->r[pos].data, (size_t)ob));
    free(h);
  }
  for (int pos = 0; din && dout && pos < n; ++pos) {
    rs_cuda_free(din[pos]);
    rs_cuda_free(dout[pos]);
  }
  free(din);
  free(dout);
  return bad;
}

static int same_local(const rs_local *a, const rs_local *b) {
  return a->nbytes == b->nbytes && a->ndim == b->ndim && (!a->nbytes || !memcmp(a->data, b->data, (size_t)a->nbytes));
}

int main(int argc, char **argv) {
  int cases = argc > 2 ? atoi(argv[2]) : 300;
  const char *transport = argc > 3 ? argv[3] : "local-device";
  rs_world *w = NULL, *host = NULL;
  rs_status st = rs_world_init(transport, &argc, &argv, &w);
  if (st == RS_ERR_UNSUPPORTED) {
    printf("no GPU path (%s): running the CPU paths only\n", rs_last_error());
    if (!strcmp(transport, "nccl")) {
      printf("skipped: nccl\n");
      return 0;
    }
    w = NULL;
  } else {
    CHECK(st == RS_OK);
    if (st) TEST_DONE();
  }
  CHECK(rs_world_init("local", NULL, NULL, &host) == RS_OK);
  int dist = w && !rs_world_is_local(w);
  int me = dist ? rs_world_rank(w) : 0;
  int max_ranks = dist ? rs_world_size(w) : 16;
  if (max_ranks > 64) max_ranks = 64;
  if (me == 0)
    printf("transport %s (device memory: %s), %d cases\n", w ? rs_world_transport(w) : "local",
           rs_world_uses_device(w) ? "yes" : "no", cases);
  rs_opt *od, *oh;
  CHECK(rs_opt_create(&od) == RS_OK && rs_opt_create(&oh) == RS_OK);
  int ran = 0, bad_total = 0, checked = 0;
  for (int it = 0; ran < cases && it < cases * 4; ++it) {
    rs_case c;
    if (!gen_case(&c, max_ranks, dist ? max_ranks : 0, it)) continue;
    rs_locals in = {0, NULL}, exp = {0, NULL}, got = {0, NULL}, cpu = {0, NULL};
    int bad = rs_make_source(&c, &in) != RS_OK || rs_oracle_expected(&c, &c.dst, &exp) != RS_OK;
    rs_world_posted_reset(host);
    rs_status sh = bad ? RS_OK : rs_opt_redistribute(oh, host, &c, &in, &cpu, NULL);
    if (sh == RS_ERR_UNSUPPORTED) { /* P(x) -> P(y) */
      rs_locals_free(&in);
      rs_locals_free(&exp);
      continue;
    }
    if (w) rs_world_posted_reset(w);
    rs_status sd = bad || !w ? RS_OK : rs_opt_redistribute(od, w, &c, &in, &got, NULL);
    if (sh || sd) {
      fprintf(stderr, "rank %d: %s\n", me, rs_last_error());
      bad = 1;
    }
    /* the byte-counting layer around the device transports too (local-device, NCCL) */
    if (!bad) bad = posted_bad(oh, host, &c, -1);
    if (!bad && w) bad = posted_bad(od, w, &c, dist ? me : -1);
    if (!bad && w && rs_world_uses_device(w)) bad = device_api_bad(od, w, &c, &in, &exp, dist ? me : -1, &checked);
    for (int pos = 0; !bad && pos < c.mesh.nranks; ++pos) {
      int mine = dist ? c.mesh.ranks[pos] == me : 1;
      if (!mine) continue;
      bad |= !same_local(&cpu.r[pos], &exp.r[pos]);
      if (w) bad |= !same_local(&got.r[pos], &exp.r[pos]);
    }
    if (bad) {
      char *j = rs_case_to_json(&c);
      if (bad_total < 5) fprintf(stderr, "rank %d differs: %s\n", me, j ? j : "?");
      free(j);
    }
    if (dist) CHECK(rs_world_agree(w, &bad) == RS_OK);
    bad_total += bad;
    ran++;
    rs_locals_free(&in);
    rs_locals_free(&exp);
    rs_locals_free(&got);
    rs_locals_free(&cpu);
  }
  CHECK_EQ_I(bad_total, 0);
  if (me == 0) printf("%d cases, %d differ (%d copy-only outputs also checked on the device)\n", ran, bad_total, checked);
  rs_opt_destroy(od);
  rs_opt_destroy(oh);
  rs_world_finalize(host);
  rs_world_finalize(w);
  TEST_DONE();
}
