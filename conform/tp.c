/* tp.c - the tensor-parallel suite of `reshard conform`: props' TP campaign (rs_tp_check) with the
 * backend hook, then the TP corpora of fixtures/tp (curated, regressions, recorded PyTorch). A
 * backend's forward is held to the unsharded forward bit for bit, each rank's local output in its
 * box of the output layout the styles name. The collectives it issues are its own business. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "conform/suite.h"
#include "props/tp.h"

static rs_outcome forward(void *ctx, const rs_tp_case *c, rs_locals *out, char *msg, size_t cap) {
  rs_cf_call *call = malloc(sizeof *call);
  if (!call) {
    snprintf(msg, cap, "conform: out of memory");
    return RS_FAIL;
  }
  rs_cf_tp_forward(ctx, c, out, call);
  rs_outcome o = RS_PASS;
  if (call->result == RS_BACKEND_UNSUPPORTED) {
    snprintf(msg, cap, "unsupported: %s", call->msg);
    o = RS_SKIP;
  } else if (call->result != RS_BACKEND_OK) {
    snprintf(msg, cap, "backend failed: %s", call->msg);
    o = RS_FAIL;
  }
  free(call);
  return o;
}

static void hook(rs_tp_check_opts *t, rs_cf_backend *b) {
  memset(t, 0, sizeof *t);
  t->backend = forward;
  t->backend_ctx = b;
}

static rs_outcome run_one(rs_cf_backend *b, const rs_tp_case *c, char *msg, size_t cap) {
  rs_tp_check_opts t;
  hook(&t, b);
  return rs_tp_prop_backend(c, &t, msg, cap);
}

rs_outcome rs_cf_tp_replay(rs_cf_backend *b, const char *text, char *msg, size_t cap, int *bad) {
  rs_tp_case *c = malloc(sizeof *c);
  rs_outcome o = RS_FAIL;
  if (!c || rs_tp_case_from_json(text, c)) *bad = 1, snprintf(msg, cap, "%s", c ? rs_last_error() : "out of memory");
  else o = run_one(b, c, msg, cap);
  free(c);
  return o;
}

static void campaign(rs_cf_run *run) {
  rs_cf_item *it = rs_cf_add_item(run->r, RS_CF_SUITE_TP, 0, "backend_tp_oracle");
  if (!it) return;
  rs_tp_check_opts t;
  hook(&t, run->b);
  t.seed = run->o->seed;
  t.cases = run->o->cases > 0 ? run->o->cases : 0;
  t.seconds = run->o->seconds; /* with --seconds: the same case stream as `reshard tp check --seconds` */
  t.shrink_runs = run->o->shrink_runs;
  t.shrink_seconds = run->o->shrink_seconds;
  t.regress_dir = run->failures;
  t.quiet = run->o->quiet;
  t.keep_going = 1;
  /* the runner: each worker runs its cases through a backend of its own; a failure shrinks here */
  RS_CF_RUNNER_OPTS(t, run);
  rs_tp_check_result *res = calloc(1, sizeof *res);
  if (!res) return;
  cJSON *runner = NULL;
  rs_status st = rs_tp_check(&t, res);
  if (st != RS_OK) rs_cf_campaign_error(run, it, st);
  it->pass += res->pass, it->fail += res->fail, it->skip += res->skip;
  it->seconds = res->seconds;
  if (res->fail) {
    RS_CF_PRINT(it->message, "%s", res->message);
    rs_cf_item_saved(run, it, res->fixture);
    printf("FAIL tp %s (shrunk)\n  %s\n  replay: %s\n", it->name, it->message, it->replay);
  } else if (st == RS_OK && res->run.crashed) {
    /* a worker died on a case (a plug-in that crashed): that case is the failure */
    it->fail++;
    RS_CF_PRINT(it->message, "crash: %s", res->run.crash_msg);
    rs_run_print_crash(&res->run, (unsigned long long)run->o->seed);
  }
  if (st == RS_OK) runner = rs_tp_runner_json(&t, res, it->replay[0] ? it->replay : NULL);
  if (!run->o->quiet || res->fail)
    printf("tp: %lld cases: %lld pass, %lld fail, %lld skip (%.2f s)\n", (long long)res->cases, (long long)res->pass,
           (long long)res->fail, (long long)res->skip, res->seconds);
  fflush(stdout);
  rs_cf_campaign_done(run, RS_CF_SUITE_TP, runner, res->skip, res->pass + res->fail + res->skip);
  free(res);
}

typedef struct corpus_ctx {
  rs_cf_run *run;
  rs_tp_case c;
  char msg[8192];
} corpus_ctx;

static rs_status save(void *vctx, const char *msg, char *path, size_t cap) {
  corpus_ctx *x = vctx;
  (void)msg;
  char *cj = rs_tp_case_to_json(&x->c);
  rs_status st = cj ? rs_cf_save_failure(x->run, cj, "tp", path, cap) : RS_ERR_NOMEM;
  free(cj);
  return st;
}

static void one_fixture(void *vctx, rs_cf_item *it, const char *text, const char *where) {
  corpus_ctx *x = vctx;
  if (rs_tp_case_from_json(text, &x->c) != RS_OK) {
    it->skip++;
    RS_CF_PRINT(it->message, "%s: not a TP case: %s", where, rs_last_error());
    return;
  }
  rs_cf_tally(x->run, it, run_one(x->run->b, &x->c, x->msg, sizeof x->msg), where, x->msg, save, x);
}

static const char *const CORPORA[] = {"tp/curated", "tp/regressions", "tp"};

void rs_cf_suite_tp(rs_cf_run *run) {
  if (!rs_cf_require(run, RS_CF_SUITE_TP, RS_CF_TP, "backend_tp_oracle")) return;
  campaign(run);
  if (!run->fixtures) return;
  corpus_ctx *x = calloc(1, sizeof *x);
  if (!x) return;
  x->run = run;
  for (size_t i = 0; i < sizeof CORPORA / sizeof CORPORA[0]; i++) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", run->fixtures, CORPORA[i]);
    rs_cf_walk_corpus(run, RS_CF_SUITE_TP, dir, one_fixture, x);
  }
  free(x);
}
