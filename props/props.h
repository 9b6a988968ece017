/* props.h - property-based testing: a recorded stream of random choices, case generators driven by
 * it, the properties reshard must satisfy, stream shrinking, and the campaign runner with its
 * reports. A failing case is shrunk by shrinking its choice stream, so every shrunk case is still a
 * case the generator can produce (Hypothesis / theft style). */
#ifndef RESHARD_PROPS_H
#define RESHARD_PROPS_H

#include <stddef.h>
#include <stdint.h>
#include "reshard/case.h"
#include "props/runner.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the choice stream ---- */
/* A structural item the generator drew (a mesh dim, a tensor dim, a P2P parameter): the draws of
 * its span(s) and the count draw that, set to `less`, makes one item fewer. The shrinker tries
 * dropping each item (count lowered, spans deleted) before it lowers values. */
#define RS_CHOICE_ITEMS 48
#define RS_CHOICE_SPANS 3
typedef struct rs_choice_item {
  uint32_t count_at;
  uint64_t less;
  int nspan;
  uint32_t start[RS_CHOICE_SPANS], end[RS_CHOICE_SPANS];
} rs_choice_item;

typedef struct rs_choices {
  uint64_t *v;      /* recorded draws (generate mode) or the draws to replay */
  size_t n, cap;
  size_t pos;       /* draws taken so far */
  int replay;       /* 1: read v (value % n), 0 past the end; 0: draw from the PRNG and record */
  uint64_t s[4];    /* xoshiro256** state */
  int nitems;       /* structural items marked by the generator (rs_choices_item) */
  rs_choice_item item[RS_CHOICE_ITEMS];
} rs_choices;

/* Marks a structural item: draws [start, end) (one span; rs_choices_item_span adds later spans to
 * item `idx`) and the count draw at count_at whose value `less` drops it. Returns the item's index,
 * -1 when not marked (the table is full: only the shrinker reads marks). */
int rs_choices_item(rs_choices *ch, size_t count_at, uint64_t less, size_t start, size_t end);
void rs_choices_item_span(rs_choices *ch, int idx, size_t start, size_t end);

/* Generate mode: draws come from a PRNG seeded by `seed` and are recorded. */
void rs_choices_seed(rs_choices *ch, uint64_t seed);
/* Replay mode over a copy of v[0..n). */
rs_status rs_choices_replay(rs_choices *ch, const uint64_t *v, size_t n);
void rs_choices_free(rs_choices *ch);
/* A value in [0, n) (0 when n <= 1). Generators map 0 to the simplest choice. */
uint64_t rs_draw(rs_choices *ch, uint64_t n);

/* ---- generators ---- */
/* The one case generator every test and campaign draws from; options narrow or widen what it
 * produces. Defaults reach every mesh rank of SPEC 2 (6-d meshes, 8-d tensors), keep a case small
 * (elements x ranks bounded, high-rank tensors get small dims) and produce every feature the
 * campaign's coverage report counts. */
enum {
  RS_GEN_PARTIAL_SOME = 0,  /* Partial on some mesh dims of some cases (default) */
  RS_GEN_PARTIAL_NONE = 1,  /* copy-only cases */
  RS_GEN_PARTIAL_OFTEN = 2  /* reducible dtypes only, Partial on about half of the mesh dims */
};
enum { RS_GEN_RANKS_PERMUTED = 1, RS_GEN_RANKS_SPARSE = 2 };

typedef struct rs_gen_opts {
  int max_ranks;       /* ranks in the mesh, at most (default 64) */
  int max_mesh_dims;   /* 1..6 (default 6) */
  int max_tensor_dims; /* 0..8 (default 8) */
  int world_size;      /* > 0: mesh ranks are drawn from 0..world_size-1 (MPI campaigns) */
  int64_t max_numel;   /* elements of the global tensor, at most (default 16384) */
  int64_t max_work;    /* elements x ranks, at most (default 65536): big meshes get small tensors */
  int64_t max_dim;     /* size of one tensor dim, at most (default 64) */
  uint32_t dtypes;     /* bit 1 << rs_dtype per allowed dtype; 0: all */
  uint32_t ops;        /* bit 1 << rs_redop per allowed Partial op; 0: all */
  int partial;         /* RS_GEN_PARTIAL_* */
  int rank_lists;      /* RS_GEN_RANKS_* bits: permuted and/or sparse (world subset) rank lists */
  int orders;          /* 0: default shard orders only; 1: any (default) */
  /* Cases whose graph-planner state space ((tensor dims + 2) ^ mesh dims) exceeds this keep
   * default shard orders (so AUTO plans them greedily) and the graph properties skip them
   * (counted as "graph_bounded"). Default 729: 4-d meshes up to 3-d
   * tensors, 5-6-d meshes up to 1-d tensors. */
  int64_t graph_states;
  int order_share;     /* percent of Partial cases drawn with `order` values, the rest `exact` (default 50) */
  int64_t *redraws;    /* optional: +1 per case drawn again because its dtype cannot hold its values */
  /* RS_GEN_ENUM_SEED (rs_gen_opts_default: what direct executor tests assume; fuzz-planner
   * --enumeration seed), RS_GEN_ENUM_BOTH (campaigns and `reshard gen`: 1 case in 4 on the pytorch
   * enumeration, zero-fill included) or RS_GEN_ENUM_PYTORCH (fuzz-planner --enumeration pytorch,
   * `reshard gen --enumeration pytorch`: every case on the pytorch enumeration). The three draw the
   * same stream: case i differs only by the enumeration its draws were given. */
  int enumerations;
} rs_gen_opts;

enum { RS_GEN_ENUM_SEED = 0, RS_GEN_ENUM_BOTH = 1, RS_GEN_ENUM_PYTORCH = 2 };

void rs_gen_opts_default(rs_gen_opts *o);
/* A valid redistribute case (validated; S->P and P(x)->P(y) on one mesh dim never appear). */
rs_status rs_gen_case(rs_choices *ch, const rs_gen_opts *o, rs_case *out);
/* A case with a planted contract violation (S->P or P(x)->P(y) on one mesh dim, mixed Partial
 * ops, Partial on a copy-only dtype, shard dim out of range). Not validated. */
rs_status rs_gen_bad_case(rs_choices *ch, const rs_gen_opts *o, rs_case *out);

/* 1 when the graph planner's state space of c is beyond o's bound (see graph_states). */
int rs_gen_graph_bounded(const rs_gen_opts *o, const rs_case *c);

/* ---- properties ---- */
typedef enum rs_prop_id {
  RS_PROP_BOXES = 0,      /* boxes tile the tensor with the right multiplicity */
  RS_PROP_GREEDY_ORACLE,  /* ref greedy plan + ref execute == oracle */
  RS_PROP_GRAPH_ORACLE,   /* ref graph plan + ref execute == oracle */
  RS_PROP_ROUNDTRIP_GREEDY, /* src -> dst -> src restores the source (no Partial in src) */
  RS_PROP_ROUNDTRIP_GRAPH,
  RS_PROP_PLAN_LEGAL_GREEDY, /* every step legal, plan ends at dst */
  RS_PROP_PLAN_LEGAL_GRAPH,
  RS_PROP_REJECT_BAD,     /* contract violations are rejected with a message, never a crash */
  RS_PROP_COMPARE_SEES,   /* the comparator reports one planted bit flip: its rank and index */
  RS_PROP_OPT_ORACLE,     /* opt's own schedule == oracle (and == ref) */
  RS_PROP_OPT_PLAN,       /* opt executing ref's plan == ref == oracle */
  RS_PROP_VALUES,         /* sources of a non-empty tensor are not all zero; exact pieces reduce to G */
  RS_PROP_BACKEND,        /* a backend under test (env.backend, reshard conform) == oracle */
  RS_PROP_COUNT
} rs_prop_id;

const char *rs_prop_name(rs_prop_id id);
rs_status rs_prop_parse(const char *name, rs_prop_id *out);
/* The planner a property is about (RS_PLANNER_AUTO when none). */
rs_planner_kind rs_prop_planner(rs_prop_id id);
/* 1 when the property draws its cases from rs_gen_bad_case. */
int rs_prop_bad_cases(rs_prop_id id);
/* 1 when the property needs opt/ (only compiled with RS_HAVE_OPT). */
int rs_prop_needs_opt(rs_prop_id id);

typedef enum rs_impl { RS_IMPL_REF = 0, RS_IMPL_OPT = 1 } rs_impl;

/* Results shared by the properties run on one case (source locals, oracle, plans), so a
 * campaign computes each once per case. Optional: properties work without one. */
typedef struct rs_prop_memo rs_prop_memo;
rs_status rs_prop_memo_create(rs_prop_memo **out);
void rs_prop_memo_free(rs_prop_memo *m);

typedef enum rs_outcome { RS_PASS = 0, RS_FAIL = 1, RS_SKIP = 2 } rs_outcome;

/* What the properties run against. opt/world are rs_opt* / rs_world* when built with opt. */
typedef struct rs_prop_env {
  rs_impl impl;
  void *opt;
  void *world;
  int distributed; /* 1: world is MPI - each process checks only the mesh position it plays */
  rs_prop_memo *memo;
  /* optional (props/report_html.h): a failing comparison adds the global indices of every
   * differing element, for a report that draws the case */
  struct rs_html_diff *diff;
  /* A backend under test (reshard conform; RS_PROP_BACKEND runs only when set): given the case,
   * its source locals and the oracle's expected dst locals (canonical events), run the backend and
   * judge its answer. RS_SKIP when the backend does not do the case. */
  rs_outcome (*backend)(void *ctx, const rs_case *c, const rs_locals *in, const rs_locals *expected,
                        char *msg, size_t cap);
  void *backend_ctx;
  const char *backend_spec; /* what a saved failure names as the backend that ran (conform's --backend) */
} rs_prop_env;

/* 1 when RS_FAIL came from running out of memory (the last rs_fail on this thread, cleared with
 * rs_clear_error() before the run, was RS_ERR_NOMEM): no verdict on the code under test. Every
 * campaign stops on it with RS_ERR_NOMEM (exit 3) and never shrinks it or saves it as a
 * regression; every single-case runner (run, replay) exits 3. */
int rs_outcome_is_oom(rs_outcome out);
/* A property's own allocation failed: sets RS_ERR_NOMEM ("<what>: out of memory"), copies that
 * message into msg and returns RS_FAIL, which rs_outcome_is_oom then recognises. */
rs_outcome rs_prop_oom(char *msg, size_t cap, const char *what);
/* Under MPI (world: an rs_world* of opt, NULL or a local world: nothing to agree) every process
 * calls this after a property run: when any process ran out of memory, every process's outcome
 * becomes out of memory (RS_FAIL with RS_ERR_NOMEM as the last status, msg saying whose), so that
 * all stop with exit 3 together instead of the others shrinking against a peer that left. */
rs_outcome rs_prop_agree_oom(void *world, rs_outcome out, char *msg, size_t cap);
/* What a campaign returns when property `prop` ran out of memory on case number case_no (1-based):
 * RS_ERR_NOMEM with one message saying so. */
rs_status rs_campaign_oom(const char *prop, long long case_no, const char *msg);

/* Run one property on one case. On RS_FAIL msg holds a one-line reason (plus diff lines); on
 * RS_SKIP a reason why the property does not apply. */
rs_outcome rs_prop_run(rs_prop_id id, const rs_prop_env *env, const rs_case *c, char *msg,
                       size_t cap);
/* Generate a case from the stream (with the property's generator) and run the property. */
rs_outcome rs_prop_run_stream(rs_prop_id id, const rs_prop_env *env, const rs_gen_opts *o,
                              rs_choices *ch, rs_case *c, char *msg, size_t cap);

/* Checks of a given plan, shared by the properties above and by `reshard fuzz-planner` (plans of
 * plug-in planners). Legality (SPEC 6): every step a supported transition on a mesh dim of the
 * mesh, the shard-order bookkeeping followed, the plan ending at c->dst. *bad_step (may be NULL)
 * gets the index of the first illegal step, p->nsteps when every step is legal but the plan ends
 * elsewhere, -1 on RS_PASS. */
rs_outcome rs_prop_plan_legal(const rs_case *c, const rs_plan *p, int *bad_step, char *msg, size_t cap);
/* The plan executed by ref, compared bit for bit with the oracle given the plan's events (env's
 * memo, if any, shares the source and expected locals; env may be NULL). */
rs_outcome rs_prop_plan_oracle(const rs_prop_env *env, const rs_case *c, const rs_plan *p, char *msg,
                               size_t cap);

/* ---- shrinking ---- */
/* 1 when the stream (replay mode) still gives an interesting (failing) case. */
typedef int (*rs_stream_pred)(void *ctx, rs_choices *ch);
/* Shrink *v (malloc'd, length *n) in place while pred keeps failing; at most max_runs calls.
 * Returns the number of predicate calls made. */
int rs_shrink_stream(rs_stream_pred pred, void *ctx, uint64_t **v, size_t *n, int max_runs);
/* The same, also bounded by max_seconds of wall clock (0: no bound; the call in progress when it
 * passes finishes). *out (may be NULL) gets RS_SHRINK_RUNS_OUT or RS_SHRINK_TIME_OUT when a budget
 * stopped the shrinker before it reached a stream no pass could make smaller, else 0. Structure
 * first: every item the generator marked (rs_choices_item) is dropped where the failure stays,
 * then draws are deleted, zeroed and lowered. */
enum { RS_SHRINK_RUNS_OUT = 1, RS_SHRINK_TIME_OUT = 2 };
int rs_shrink_stream_budget(rs_stream_pred pred, void *ctx, uint64_t **v, size_t *n, int max_runs,
                            double max_seconds, int *out);
/* "shrink budget of N runs used up" / "shrink time cap of T s reached" (empty when out is 0). */
void rs_shrink_budget_note(int out, int max_runs, double max_seconds, char *buf, size_t cap);

/* ---- campaign ---- */
typedef struct rs_campaign_opts {
  uint64_t seed;
  int64_t cases;        /* 0: use seconds */
  double seconds;
  int planners;         /* bit 1: greedy, bit 2: graph */
  uint32_t props;       /* bit 1 << rs_prop_id per property to run; 0: every property */
  rs_impl impl;
  rs_gen_opts gen;
  const char *junit, *json, *regress_dir;
  const char *report_dir; /* --report: DIR/check.html (check-opt.html for opt), failing cases drawn */
  int quiet;
  int shrink_runs;      /* default 2000 */
  double shrink_seconds; /* wall-clock cap per shrunk failure (0: none, the default of check) */
  /* optional: checked before each case; a message stops the campaign (RS_ERR_TIMEOUT, like a peer
   * that stalled): conform's --max-timeouts */
  const char *(*stop)(void *ctx);
  void *stop_ctx;
  int max_failures;     /* stop after this many distinct failing properties (default: all) */
  rs_prop_env env;
  int print;            /* 0: this process prints nothing (MPI ranks other than 0) */
  const char *replay;   /* the command that replays a saved failure, before its path (default
                           "reshard replay") */
  /* the runner (props/runner.h): --jobs N forked workers (1: this process; MPI campaigns keep 1),
   * --shard K/N, and the seconds one case may run in a worker before it is called hung */
  int jobs, shard_k, shard_n;
  double case_timeout;
  /* optional: run in each forked worker before its first case / after its last (a process backend
   * starts its own child there) */
  rs_status (*worker_init)(void *ctx, int worker);
  void (*worker_exit)(void *ctx);
  void *worker_ctx;
  struct rs_run_dist *dist; /* --distribute (NULL: no) */
} rs_campaign_opts;

typedef struct rs_prop_stats {
  int64_t pass, fail, skip;
  char message[512];    /* first failure (shrunk) */
  char fixture[512];    /* the regression file written for it */
  int shrink_runs;      /* predicate runs its shrinking took */
  int shrink_out;       /* RS_SHRINK_RUNS_OUT / RS_SHRINK_TIME_OUT: the shrink budget ran out */
} rs_prop_stats;

/* ---- feature coverage ---- */
/* A campaign counts, per feature of the generated space (uneven / empty shards, non-default shard
 * orders, each Partial op, dtype and value mode, 5-d / 6-d meshes, 0-d and 8-d tensors, permuted /
 * sparse rank lists, ...), how many of its valid cases exercised it. A campaign of at least
 * RS_FEATURE_MIN_CASES cases fails when a feature its generator options allow was never produced:
 * a generator that silently stops producing something is a bug of the test, not a pass. */
#define RS_FEATURES_MAX 48
#define RS_FEATURE_MIN_CASES 2000
int rs_feature_count(void);
const char *rs_feature_name(int f);

/* The coverage gate (props/coverage.c), one for every campaign with a feature table. Feature f
 * drew count[f] of `cases`; rate[f] > 0 is its designed rate (measured at the campaign's default
 * options), < 0 required without a designed rate (narrowed options), 0 a figure only. min[f] gets
 * the least count that passes: rs_feature_min_count for a designed rate, and at least 1 for every
 * required feature of a campaign of RS_FEATURE_MIN_CASES cases or more; nothing is judged below
 * judge_from cases. Returns how many features fell below their minimum. */
int rs_feature_gate(int64_t cases, int64_t judge_from, int n, const int64_t *count, const double *rate,
                    int64_t *min);
/* The largest k with P(X < k) <= RS_FEATURE_FLAKE_P for X ~ Binomial(n, RS_FEATURE_RATE_MARGIN *
 * rate): a campaign drawing at 3/4 of the designed rate or more fails with probability 1e-9 or less. */
int64_t rs_feature_min_count(int64_t n, double rate);
#define RS_FEATURE_RATE_MARGIN 0.75
#define RS_FEATURE_FLAKE_P 1e-9
/* 1 when part > max_share * total (max_share >= 1: never): the decline and skip share gates. */
int rs_share_over(int64_t part, int64_t total, double max_share);

typedef struct rs_campaign_result {
  int64_t cases;
  int64_t partial_cases, order_cases; /* valid cases with a Partial in src or dst; of them `order` */
  int64_t redraws;      /* cases drawn again because the dtype could not hold exact values */
  /* set when the campaign made RS_ORDER_MIN_PARTIAL+ Partial cases and fewer than 3/5 of the asked
   * order share (default 50%: a floor of 30%) carried order values; counted in `failed` */
  int order_share_low;
  double seconds;       /* wall clock */
  double cpu_seconds;   /* this process's CPU time (the rate on a shared machine) */
  int failed;           /* properties that failed, plus 1 when feature coverage failed */
  int64_t first_failure_case; /* 1-based index of the first case a property failed on; 0: none */
  rs_prop_stats prop[RS_PROP_COUNT];
  int64_t feature[RS_FEATURES_MAX]; /* valid cases that exercised each feature */
  int feature_required[RS_FEATURES_MAX];
  int64_t feature_min[RS_FEATURES_MAX]; /* the least count that passes (rs_feature_gate) */
  int features_missing; /* required features below their minimum count (rs_feature_gate) */
  rs_run_result run;    /* the runner's sums: first failing indices, a crashed worker */
} rs_campaign_result;

#define RS_ORDER_MIN_PARTIAL 200
void rs_campaign_opts_default(rs_campaign_opts *o);
/* Runs the campaign; returns RS_OK whether or not properties failed (see r->failed). */
rs_status rs_campaign_run(const rs_campaign_opts *o, rs_campaign_result *r);

/* ---- saved failures (props/replay.c) ---- */
/* A failure message as one line: its first line, then "; " and its second (a comparison's first
 * differing element), cut to cap. */
void rs_message_head(char *out, size_t cap, const char *msg);
/* Write the shrunk failing case as JSON (case + "property" + "message" + what it failed with:
 * "impl" ref|opt, "transport" local|mpi and, for mpi, "world_size"; for a backend under test
 * (env->backend set) "backend": env->backend_spec instead of impl and transport, since neither ran)
 * to dir; path_out gets the file name (<property>-<hash>.json). The case itself carries its
 * planner, cost and values. */
rs_status rs_write_regression(const char *dir, rs_prop_id id, const rs_case *c, const char *msg,
                              const rs_prop_env *env, char *path_out, size_t cap);

/* A saved failure as read back: the property, the case (or the parser's refusal of it, for the
 * bad-case property) and what it failed with. Files written before "impl" existed replay with opt
 * when their property needs opt, else with ref. */
typedef struct rs_saved_failure {
  rs_prop_id id;
  int case_ok;            /* 0: the case parser refused the case; reject holds why */
  char reject[512];
  rs_case c;
  rs_impl impl;
  char transport[8];      /* "local" or "mpi" */
  int world_size;         /* mpi: processes it ran on (0: not recorded) */
} rs_saved_failure;

rs_status rs_saved_failure_read(const char *path, rs_saved_failure *out);
/* Run the saved property against env. *failed = 1 if it still fails. An env whose impl cannot run
 * the property (an opt property under ref) is RS_ERR_INVALID, not a silent skip. */
rs_status rs_saved_failure_replay(const rs_saved_failure *f, const rs_prop_env *env, int *failed,
                                  char *msg, size_t cap);
/* Both, with env as given (kept for callers that choose the impl themselves). */
rs_status rs_replay_file(const char *path, const rs_prop_env *env, int *failed, char *msg,
                         size_t cap);

#ifdef __cplusplus
}
#endif
#endif
