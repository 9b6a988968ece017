/* conform.h - `reshard conform`: a backend under test (a plug-in of reshard/backend.h or a process
 * speaking the protocol of docs/conformance.md) run through the property campaigns and fixture
 * corpora of each suite, compared bit for bit with the oracle, failures shrunk and saved with the
 * command that replays them against the same backend. */
#ifndef RS_CONFORM_H
#define RS_CONFORM_H

#include <stddef.h>
#include <stdint.h>
#include "conform/exec.h"
#include "reshard/backend.h"
#include "reshard/case.h"
#include "reshard/tp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the backend under test (conform/backend.c) ---- */
enum {
  RS_CF_REDISTRIBUTE = 1,
  RS_CF_P2P_PLAN = 2,
  RS_CF_P2P_EXECUTE = 4,
  RS_CF_CKPT = 8,
  RS_CF_TP = 16,
  RS_CF_P2P_ANY_PLAN = 32, /* p2p_execute executes a plan it is given (RS_BACKEND_P2P_ANY_PLAN) */
  RS_CF_P2P_TEMPLATES = 64 /* it expands Megatron-style templates itself (RS_BACKEND_P2P_TEMPLATES) */
};

typedef struct rs_cf_backend rs_cf_backend;

/* spec: "exec:CMD" (a process, sh -c CMD) or the path of a plug-in library, optionally followed by
 * "?OPTIONS" (handed to its create). A missing or invalid library, a plug-in of another ABI
 * version, or a process whose hello is not version 1 is RS_ERR_INVALID (bad input). timeout:
 * seconds a process gets per exchange. */
rs_status rs_cf_backend_open(const char *spec, double timeout, rs_cf_backend **out);
void rs_cf_backend_close(rs_cf_backend *b);
/* How many P2P models went to the backend in template form (RS_CF_P2P_TEMPLATES). */
int64_t rs_cf_backend_templates_sent(const rs_cf_backend *b);
unsigned rs_cf_backend_caps(const rs_cf_backend *b);
const char *rs_cf_backend_name(const rs_cf_backend *b);
const char *rs_cf_backend_spec(const rs_cf_backend *b);
/* 1 when checkpoints it saves are in reshard's format (then held to `reshard ckpt verify`). */
int rs_cf_backend_ckpt_reshard(const rs_cf_backend *b);
/* --max-timeouts: after k requests timed out (k > 0; 0: never), the backend is asked nothing more
 * (each later call fails at once, "not sent"); the run stops its campaigns and suites. */
void rs_cf_backend_set_max_timeouts(rs_cf_backend *b, int64_t k);
int64_t rs_cf_backend_timeouts(const rs_cf_backend *b);
int rs_cf_backend_gave_up(const rs_cf_backend *b);
/* --jobs N (each forked worker its own backend): how many instances of the backend may run at once
 * (hello "max_instances" / rs_backend.max_instances; 0: any number). */
int64_t rs_cf_backend_max_instances(const rs_cf_backend *b);
/* In forked worker `worker` (the runner's worker_init): a process backend forgets the child it
 * inherited (its pipes closed, nothing said, not killed: it is conform's) and starts its own with
 * the same command and hello; a plug-in makes a fresh instance (create). Errors name the worker. */
rs_status rs_cf_backend_worker_start(rs_cf_backend *b, int worker);
/* The worker's end (worker_exit): its child gets bye, then its process group is killed and reaped;
 * a plug-in instance is destroyed. */
void rs_cf_backend_worker_stop(rs_cf_backend *b);
/* In conform after a campaign: kills the process group of every worker's child still registered
 * (a worker that died or was killed without stopping it); returns how many. */
int rs_cf_backend_workers_reap(rs_cf_backend *b);

/* How one call ended: RS_BACKEND_OK, _ERROR (msg says why; fault says whether a process
 * crashed, hung or wrote garbage) or _UNSUPPORTED (a skip). */
typedef struct rs_cf_call {
  int result;
  rs_exec_fault fault;
  char msg[4096];
} rs_cf_call;

/* Redistribute c from `in` (every mesh rank's src local); out receives every rank's answer as the
 * backend gave it (allocated here; shapes as answered, to be compared). */
void rs_cf_redistribute(rs_cf_backend *b, const rs_case *c, const rs_locals *in, rs_locals *out,
                        rs_cf_call *call);
/* The TP forward of c; out receives every rank's local output (F32) as answered. */
void rs_cf_tp_forward(rs_cf_backend *b, const rs_tp_case *c, rs_locals *out, rs_cf_call *call);

/* Cross-config (conform/backend_p2p.c): the backend's plan of model m, and its execution of m
 * (src: every source local; got: the destination locals, allocated by the caller, filled here)
 * with `plan` handed to it in the `reshard p2p plan --json` form, or its own plan (plan NULL; the
 * only form a backend without RS_CF_P2P_ANY_PLAN is called with). */
struct rs_p2p_model;
struct rs_p2p_plan;
struct rs_p2p_locals;
void rs_cf_p2p_plan(rs_cf_backend *b, const struct rs_p2p_model *m, struct rs_p2p_plan *plan, rs_cf_call *call);
void rs_cf_p2p_execute(rs_cf_backend *b, const struct rs_p2p_model *m, const struct rs_p2p_plan *plan,
                       const struct rs_p2p_locals *src, struct rs_p2p_locals *got, rs_cf_call *call);
/* Checkpoints (conform/backend_ckpt.c): save every tensor shard of w (the world of state spec
 * `spec`, JSON) into dir; load the checkpoint in dir into w's shards (the world of `spec`). */
struct rs_ckpt_world;
void rs_cf_ckpt_save(rs_cf_backend *b, const char *spec, const struct rs_ckpt_world *w, const char *dir,
                     rs_cf_call *call);
void rs_cf_ckpt_load(rs_cf_backend *b, const char *spec, const char *dir, struct rs_ckpt_world *w, rs_cf_call *call);

/* ---- the campaign (conform/suites.c) ---- */
enum { RS_CF_SUITE_REDISTRIBUTE = 1, RS_CF_SUITE_TP = 2, RS_CF_SUITE_P2P = 4, RS_CF_SUITE_CKPT = 8 };
/* "redistribute", "tp", "p2p", "ckpt", "all" or a comma list of them. */
rs_status rs_cf_parse_suites(const char *text, unsigned *out);
const char *rs_cf_suite_name(unsigned suite);

typedef struct rs_conform_opts {
  unsigned suites;
  uint64_t seed;
  int64_t cases;            /* per suite's campaign; 0: seconds */
  double seconds;
  int shrink_runs;          /* per failure (default 2000; a process backend 300) */
  const char *fixtures;     /* the fixtures/ folder (NULL: the source tree's, when present) */
  const char *failures;     /* where shrunk failures are saved (default conform-failures) */
  const char *junit, *json;
  const char *report;       /* --report DIR (rs_cf_write_html) */
  int quiet;
  /* --max-skip-share P: an item (a property campaign, a corpus file) whose backend declined more
   * than this share of its cases fails (>= 1: never); suites skipped for a missing capability
   * are not judged */
  double max_skip_share;
  double shrink_seconds;    /* --shrink-seconds: wall-clock cap per shrunk failure (0: none) */
  int64_t max_timeouts;     /* --max-timeouts (rs_cf_backend_set_max_timeouts) */
  /* the runner (props/runner.h) for every suite's campaign: --jobs N forked workers, each with its
   * own backend (a process backend's own child; at most the backend's max_instances), --shard K/N
   * (the fixture corpora run in shard 1 only), --case-timeout SEC */
  int jobs, shard_k, shard_n;
  double case_timeout;
} rs_conform_opts;

#define RS_CF_MAX_SKIP_SHARE 1.0
#define RS_CF_MAX_TIMEOUTS 25
#define RS_CF_SHRINK_SECONDS 120.0

/* One line of the report: a property campaign or a fixture file of one suite. */
typedef struct rs_cf_item {
  unsigned suite;
  int fixture;              /* 0: a property campaign, 1: a fixture file */
  char name[256];           /* property name or fixture path */
  int64_t pass, fail, skip;
  double seconds;
  char message[1024];       /* first failure (shrunk) or why skipped */
  char replay[1536];        /* the command that replays the first failure */
  char saved[1024];         /* the saved (shrunk) failure it replays ("" when none was saved) */
  int capability_skip;      /* skipped as a whole: the backend lacks the capability */
} rs_cf_item;

typedef struct rs_cf_result {
  rs_cf_item *item;
  int n, cap;
  int failed;               /* items with a failure */
  int64_t timeouts;         /* requests that timed out */
  int stopped;              /* the run stopped: the backend timed out --max-timeouts times */
  char replay[2048];        /* "reshard conform --backend '<spec>' --replay", before a saved file */
  /* each suite campaign's "runner" object (props/runner.h), in suite order, for the --json report
   * and `reshard report merge`; NULL where the campaign did not run */
  struct cJSON *runner[4];
  int jobs;                 /* workers each campaign ran with (after the backend's max_instances) */
  int hung;                 /* a campaign stopped: a worker hung on one case past --case-timeout (exit 4) */
  int oom;                  /* a campaign stopped: a case ran out of memory (exit 3) */
} rs_cf_result;

/* Run the chosen suites against b; RS_OK whether or not something failed (r->failed). */
rs_status rs_conform_run(const rs_conform_opts *o, rs_cf_backend *b, rs_cf_result *r);
void rs_cf_result_free(rs_cf_result *r);
/* Replay one saved failure (a file written by rs_conform_run) against b: *failed = 1 when it
 * still fails; msg gets the outcome. r (when set) gets a result of one item (the file, of its
 * suite, with its message and replay command) for the reports (--junit, --json, --report);
 * *suite (when set) the suite's bit. */
rs_status rs_conform_replay(rs_cf_backend *b, const char *path, int *failed, char *msg, size_t cap,
                            rs_cf_result *r, unsigned *suite);

/* Reports: JUnit XML (one testsuite per suite, one testcase per property and fixture file) and
 * JSON. */
rs_status rs_cf_write_junit(const char *path, const rs_cf_backend *b, const rs_cf_result *r);
rs_status rs_cf_write_json(const char *path, const rs_conform_opts *o, const rs_cf_backend *b,
                           const rs_cf_result *r);
/* --report DIR: DIR/conform.html, the result table of every suite and each failure: a redistribute
 * case drawn (both layouts as per-rank boxes, run against b once more to mark every element that
 * differs from the oracle), the other suites' as message, replay command and shrunk case. */
rs_status rs_cf_write_html(const char *dir, const rs_conform_opts *o, rs_cf_backend *b, const rs_cf_result *r);

/* ---- a plug-in served over the protocol (conform/serve.c) ---- */
/* Answer the protocol on in/out with plug-in b (what a C backend needs to run as an exec child).
 * Returns 0 after bye or end of input. */
int rs_conform_serve(const rs_backend *b, const char *options, void *in_file, void *out_file);

#ifdef __cplusplus
}
#endif
#endif
