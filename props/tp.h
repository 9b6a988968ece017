/* tp.h - props for tensor-parallel styles (SPEC 12): a generator of TP cases from the choice stream
 * (random module chains and sizes with uneven splits, styles with random layouts, the transformer
 * block plans, 1-d and 2-d meshes, exact values), the properties a sharded forward must satisfy,
 * and the `reshard tp check` campaign with shrinking and regression fixtures. */
#ifndef RS_PROPS_TP_H
#define RS_PROPS_TP_H

#include "props/props.h"
#include "reshard/tp.h"

/* A TP case from the stream (validated), or RS_ERR_INVALID when the draws describe no valid case
 * (the campaign counts it as skipped). */
rs_status rs_tp_gen_case(rs_choices *ch, int max_ranks, rs_tp_case *out);

/* Implementations to check: bit 1 ref, bit 2 opt. */
enum { RS_TP_REF = 1, RS_TP_OPT = 2 };

/* Every property on one case, for the implementations in `impls`:
 *   oracle:  the sharded forward equals the unsharded forward bit for bit;
 *   layout:  each module's output layout (and local/DTensor) and each parameter's placement are
 *            what the style names, and every rank's local output has its torch.chunk shape;
 *   comm:    the collectives issued per module are PyTorch's for that style and layouts.
 * opt is an rs_opt* (needed for RS_TP_OPT). comm (may be NULL) adds the collectives issued by the
 * first implementation checked. Returns RS_FAIL with a one-line reason in msg. */
rs_outcome rs_tp_prop_run(const rs_tp_case *c, int impls, void *opt, int64_t *comm, char *msg,
                          size_t cap);

typedef struct rs_tp_check_opts {
  uint64_t seed;
  int64_t cases;
  int impls;
  int max_ranks;
  int shrink_runs;
  const char *regress_dir; /* default fixtures/tp/regressions */
  int quiet;
} rs_tp_check_opts;

typedef struct rs_tp_check_result {
  int64_t cases, pass, fail, skip;
  double seconds;
  int64_t comm[RS_COLL_COUNT]; /* collectives issued over the campaign (ref, or opt alone) */
  char message[1024];          /* the first failure, shrunk */
  char fixture[512];
} rs_tp_check_result;

/* Runs the campaign; RS_OK whether or not a case failed (see r->fail). */
rs_status rs_tp_check(const rs_tp_check_opts *o, rs_tp_check_result *r);

#endif
