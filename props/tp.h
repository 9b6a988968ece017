/* tp.h - props for tensor-parallel styles (SPEC 12): a generator of TP cases from the choice stream
 * (random module chains and sizes with uneven splits, styles with random layouts, the transformer
 * block plans, 1-d and 2-d meshes, exact values), the properties a sharded forward must satisfy,
 * and the `reshard tp check` campaign with shrinking and regression fixtures. */
#ifndef RS_PROPS_TP_H
#define RS_PROPS_TP_H

#include "props/props.h"
#include "reshard/tp.h"

/* A TP case from the stream, or RS_ERR_INVALID when the draws describe no valid case (the campaign
 * counts it as skipped). Only the static checks apply (sizes, arguments, exactness): the layouts
 * are walked through the rules of props/tp.c, never through the style driver under test, and a case
 * those rules refuse is kept (the driver must refuse it too). */
rs_status rs_tp_gen_case(rs_choices *ch, int max_ranks, rs_tp_case *out);

/* The rules of what PyTorch (and the contract) does with a case, independent of core/tp's driver:
 * 1 when the case is defined, 0 when it is refused, with the reason in why ("PATH: reason"). */
int rs_tp_rules(const rs_tp_case *c, char *why, size_t cap);

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
  int64_t cases;  /* > 0: this many cases; 0: as many as `seconds` allow */
  double seconds; /* with cases 0: stop once this much time has passed (checked before each case) */
  int impls;
  int max_ranks;
  int shrink_runs;
  double shrink_seconds;   /* wall-clock cap per shrunk failure (0: none) */
  const char *regress_dir; /* default fixtures/tp/regressions */
  int quiet;
  /* A backend under test (reshard conform): when set, it alone is checked (impls ignored). It runs
   * the case into out (every rank's local output, mesh order, allocated by the hook) or answers
   * RS_FAIL / RS_SKIP with a message; its output is held to the unsharded forward (rs_tp_prop_backend). */
  rs_outcome (*backend)(void *ctx, const rs_tp_case *c, rs_locals *out, char *msg, size_t cap);
  void *backend_ctx;
  int keep_going;          /* count the failures after the first (shrunk) one instead of stopping */
  /* the runner (props/runner.h), as rs_campaign_opts: --jobs N forked workers (1: this process),
   * --shard K/N, the seconds one case may run in a worker before it is called hung (0: the
   * runner's default) */
  int jobs, shard_k, shard_n;
  double case_timeout;
  /* optional: run in each forked worker before its first case / after its last (a process backend
   * starts its own child there) */
  rs_status (*worker_init)(void *ctx, int worker);
  void (*worker_exit)(void *ctx);
  void *worker_ctx;
  struct rs_run_dist *dist; /* --distribute (NULL: no) */
  int print;               /* 1: the one aggregated progress line on a terminal (unless quiet) */
} rs_tp_check_opts;

/* The backend property on one case: the hook's output against the unsharded forward, every
 * rank's local in its box of the output layout the styles name (ref's), bit for bit. */
rs_outcome rs_tp_prop_backend(const rs_tp_case *c, const rs_tp_check_opts *o, char *msg, size_t cap);

/* What the campaign's cases exercised (counted over valid cases): a campaign of 2,000 cases or
 * more fails when one of these never occurs (a generator that stopped producing something). */
enum {
  RS_TP_F_MESH_2D,       /* a 2-d mesh with both dims > 1 */
  RS_TP_F_UNEVEN,        /* a parameter split unevenly on the TP dim */
  RS_TP_F_PARTIAL_INPUT, /* the input is P(sum) local pieces */
  RS_TP_F_DTENSOR_OUT,   /* a style with use_local_output false */
  RS_TP_F_BLOCK_SP,      /* the sequence-parallel transformer block */
  RS_TP_F_COLWISE,       /* one per style, in rs_tp_style_kind order */
  RS_TP_F_ROWWISE,
  RS_TP_F_SEQUENCE,
  RS_TP_F_NONE,
  RS_TP_F_PREPARE_INPUT,
  RS_TP_F_PREPARE_OUTPUT,
  RS_TP_F_S0_DP,         /* S(0) on the TP dim of a 2-d mesh whose batch DP splits */
  RS_TP_F_PARTIAL_OUT,   /* P(sum) as an output layout of a style */
  RS_TP_F_PLAIN_PARTIAL, /* a plain module computing on Partial pieces */
  RS_TP_F_TP1,           /* TP size 1 */
  RS_TP_F_SHORT_SEQ,     /* a SequenceParallel Linear on a dim shorter than the TP size (gathered) */
  RS_TP_F_OMITTED,       /* a style argument left to PyTorch's default */
  RS_TP_F_PMI_NOOP,      /* PrepareModuleInput() with no layouts */
  RS_TP_F_LAYERNORM,     /* nn.LayerNorm */
  RS_TP_F_RMSNORM,       /* nn.RMSNorm */
  RS_TP_F_REFUSED,       /* a case the rules refuse (the driver must refuse it too) */
  RS_TP_F_BF16,          /* dtype BF16 */
  RS_TP_F_F16,           /* dtype F16 */
  RS_TP_F_COUNT
};
const char *rs_tp_feature_name(int f);
/* The coverage gate's rate of feature f (props/coverage.c): its designed rate at the default
 * --max-ranks (0 or 18), -1 (required from 2,000 cases, no designed rate) at another. */
double rs_tp_feature_rate(int f, int max_ranks);

typedef struct rs_tp_check_result {
  int64_t feat[RS_TP_F_COUNT];
  int64_t cases, pass, fail, skip;
  double seconds;
  int64_t comm[RS_COLL_COUNT]; /* collectives issued over the campaign (ref, or opt alone) */
  char message[1024];          /* the first failure, shrunk */
  char fixture[512];
  /* the runner's sums: the first failing index; run.crashed: a worker crashed on case
   * run.crash_index (run.crash_msg; not in pass/fail/skip: the caller reports it as a failure);
   * run.follower: a --distribute rank other than 0, which reports nothing */
  rs_run_result run;
} rs_tp_check_result;

/* Runs the campaign on the runner (props/runner.h): case i is drawn from the seed and i alone, the
 * lowest failing index is shrunk here, in the calling process. RS_OK whether or not a case failed
 * (see r->fail). */
rs_status rs_tp_check(const rs_tp_check_opts *o, rs_tp_check_result *r);

/* The "runner" object of the --json report (props/runner_json.c; `reshard report merge` adds the
 * objects of a campaign's shards up). replay: the command that replays the fixture (NULL: none). */
struct cJSON *rs_tp_runner_json(const rs_tp_check_opts *o, const rs_tp_check_result *r, const char *replay);

#endif
