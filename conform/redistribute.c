/* redistribute.c - the redistribute suite of `reshard conform`: props' campaign with the backend
 * property (RS_PROP_BACKEND: same generator, same shrinking, same feature coverage as `reshard
 * check`), then every redistribute corpus of fixtures/ (curated, regressions, recorded PyTorch,
 * PyTorch order cases), each case held to the oracle's canonical result bit for bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "conform/suite.h"
#include "props/report.h"
#include "props/report_html.h"
#include "core/mutant.h"
#include "reshard/oracle.h"

/* Run the backend, judge its answer; diff (may be NULL) gets every differing element, for the
 * --report page. */
static rs_outcome judge_into(rs_cf_backend *b, rs_html_diff *diff, const rs_case *c, const rs_locals *in,
                             const rs_locals *exp, char *msg, size_t cap) {
  rs_locals got = {0};
  rs_cf_call *call = malloc(sizeof *call);
  rs_diff *d = malloc(sizeof *d);
  rs_outcome o = RS_PASS;
  if (!call || !d) {
    snprintf(msg, cap, "conform: out of memory");
    o = RS_FAIL;
    goto out;
  }
  rs_cf_redistribute(b, c, in, &got, call);
  if (call->result == RS_BACKEND_UNSUPPORTED) {
    snprintf(msg, cap, "unsupported: %s", call->msg);
    o = RS_MUTANT(751) ? RS_PASS : RS_SKIP; /* planted: a skip counted as a pass */
  } else if (call->result != RS_BACKEND_OK) {
    snprintf(msg, cap, "backend failed: %s", call->msg);
    o = RS_FAIL;
  } else {
    rs_locals view = got;
    rs_local last;
    int n = c->mesh.nranks;
    if (RS_MUTANT(750) && n > 0) { /* planted: the comparison never looks at the last rank */
      last = exp->r[n - 1];
      view.r = malloc(sizeof(rs_local) * (size_t)n);
      if (view.r) {
        memcpy(view.r, got.r, sizeof(rs_local) * (size_t)n);
        view.r[n - 1] = last;
      } else
        view = got;
    }
    int bad = rs_oracle_compare(c, &c->dst, exp, &view, d);
    if (bad && diff && rs_html_diff_collect(c, &c->dst, exp, &view, diff) != RS_OK) rs_clear_error();
    if (view.r != got.r) free(view.r);
    if (bad) {
      snprintf(msg, cap, "backend vs oracle: %d rank(s)%s, %lld element(s) differ\n%s", bad,
               d->shape_mismatch ? " (local shapes differ)" : "", (long long)d->nbad_elems, d->text);
      o = RS_FAIL;
    }
  }
out:
  rs_locals_free(&got);
  free(call);
  free(d);
  return o;
}

/* The hook props calls for every case (ctx: the backend). */
static rs_outcome judge(void *ctx, const rs_case *c, const rs_locals *in, const rs_locals *exp,
                        char *msg, size_t cap) {
  return judge_into(ctx, NULL, c, in, exp, msg, cap);
}

typedef struct drawing {
  rs_cf_backend *b;
  rs_html_diff *diff;
} drawing;

static rs_outcome judge_drawn(void *ctx, const rs_case *c, const rs_locals *in, const rs_locals *exp,
                              char *msg, size_t cap) {
  drawing *x = ctx;
  return judge_into(x->b, x->diff, c, in, exp, msg, cap);
}

rs_status rs_cf_redistribute_draw(rs_cf_backend *b, rs_html *h, const char *name, const char *text,
                                  const char *message, const char *replay) {
  rs_case *c = malloc(sizeof *c);
  char *msg = malloc(8192);
  rs_html_diff diff = {0};
  drawing x = {b, &diff};
  rs_prop_env env = {0};
  env.backend = judge_drawn;
  env.backend_ctx = &x;
  rs_status st = RS_OK;
  if (!c || !msg) st = rs_fail(RS_ERR_NOMEM, "--report: out of memory");
  else if ((st = rs_case_from_json(text, c)) == RS_OK) {
    /* run once more: the page shows the whole message and marks every differing element */
    if (rs_prop_run(RS_PROP_BACKEND, &env, c, msg, 8192) != RS_FAIL)
      snprintf(msg, 8192, "%s\n(the saved case did not fail again when the page was drawn)", message);
    st = rs_html_case_failure(h, name, c, msg, replay, &diff);
  }
  rs_html_diff_free(&diff);
  free(c);
  free(msg);
  return st;
}

rs_outcome rs_cf_redistribute_replay(rs_cf_backend *b, const char *text, char *msg, size_t cap, int *bad) {
  rs_case *c = malloc(sizeof *c);
  rs_prop_env env = {0};
  env.backend = judge;
  env.backend_ctx = b;
  rs_outcome o = RS_FAIL;
  if (!c || rs_case_from_json(text, c)) *bad = 1, snprintf(msg, cap, "%s", c ? rs_last_error() : "out of memory");
  else o = rs_prop_run(RS_PROP_BACKEND, &env, c, msg, cap);
  free(c);
  return o;
}

/* ---- the property campaign ---- */

static void campaign(rs_cf_run *run) {
  const rs_conform_opts *o = run->o;
  rs_cf_item *it = rs_cf_add_item(run->r, RS_CF_SUITE_REDISTRIBUTE, 0, rs_prop_name(RS_PROP_BACKEND));
  if (!it) return;
  rs_campaign_opts co;
  rs_campaign_opts_default(&co);
  co.seed = o->seed;
  co.cases = o->cases;
  co.seconds = o->seconds;
  co.props = 1u << RS_PROP_BACKEND;
  co.env.backend = judge;
  co.env.backend_ctx = run->b;
  co.env.backend_spec = rs_cf_backend_spec(run->b);
  co.regress_dir = run->failures;
  co.replay = run->replay;
  co.quiet = o->quiet;
  co.shrink_runs = o->shrink_runs;
  co.shrink_seconds = o->shrink_seconds;
  co.stop = rs_cf_gave_up;
  co.stop_ctx = run->b;
  /* the runner: each worker judges its cases with a backend of its own; failures shrink here */
  RS_CF_RUNNER_OPTS(co, run);
  rs_campaign_result *cr = calloc(1, sizeof *cr);
  if (!cr) return;
  cJSON *runner = NULL;
  int64_t judged[2] = {0, 0}; /* skipped, all: the --max-skip-share gate's sums */
  rs_status st = rs_campaign_run(&co, cr);
  if (st != RS_OK) {
    rs_cf_campaign_error(run, it, st);
  } else {
    const rs_prop_stats *s = &cr->prop[RS_PROP_BACKEND];
    it->pass = s->pass, it->fail = s->fail, it->skip = s->skip;
    judged[0] = s->skip, judged[1] = s->pass + s->fail + s->skip;
    if (s->fail) {
      RS_CF_PRINT(it->message, "%s", s->message);
      rs_cf_item_saved(run, it, s->fixture);
    } else if (cr->run.crashed) {
      /* a worker died on a case (a plug-in that crashed): that case is the failure */
      it->fail++;
      RS_CF_PRINT(it->message, "crash: %s", cr->run.crash_msg);
    } else if (cr->failed) {
      /* the campaign's own checks: feature coverage, the share of order values */
      it->fail++;
      RS_CF_PRINT(it->message, "%s", cr->features_missing ? "feature coverage: a required feature under its minimum count"
                                                                          : "too few Partial cases carried order values");
    }
    it->seconds = cr->seconds;
    int en[RS_PROP_COUNT] = {0};
    en[RS_PROP_BACKEND] = 1;
    runner = rs__campaign_runner_json(&co, cr, en);
  }
  rs_cf_campaign_done(run, RS_CF_SUITE_REDISTRIBUTE, runner, judged[0], judged[1]);
  free(cr);
}

/* ---- the fixture corpora ---- */

typedef struct corpus_ctx {
  rs_cf_run *run;
  rs_prop_env env;
  rs_case c;
  char msg[8192];
} corpus_ctx;

static rs_status save(void *vctx, const char *msg, char *path, size_t cap) {
  corpus_ctx *x = vctx;
  return rs_write_regression(x->run->failures, RS_PROP_BACKEND, &x->c, msg, &x->env, path, cap);
}

static void one_fixture(void *vctx, rs_cf_item *it, const char *text, const char *where) {
  corpus_ctx *x = vctx;
  if (rs_case_from_json(text, &x->c) != RS_OK) {
    /* the bad-case property's saved rejections are cases for the parser, not for a backend */
    if (strstr(text, "\"reject_bad\"")) return;
    it->skip++;
    RS_CF_PRINT(it->message, "%s: not a case: %s", where, rs_last_error());
    return;
  }
  rs_outcome out = rs_prop_run(RS_PROP_BACKEND, &x->env, &x->c, x->msg, sizeof x->msg);
  rs_cf_tally(x->run, it, out, where, x->msg, save, x);
}

/* Recorded and hand-made redistribute cases, in the order a reader meets them. */
static const char *const CORPORA[] = {"curated", "regressions", "pytorch", "pytorch_order"};

void rs_cf_suite_redistribute(rs_cf_run *run) {
  if (!rs_cf_require(run, RS_CF_SUITE_REDISTRIBUTE, RS_CF_REDISTRIBUTE, rs_prop_name(RS_PROP_BACKEND))) return;
  campaign(run);
  if (!run->fixtures) return;
  corpus_ctx *x = calloc(1, sizeof *x);
  if (!x) return;
  x->run = run;
  x->env.backend = judge;
  x->env.backend_ctx = run->b;
  x->env.backend_spec = rs_cf_backend_spec(run->b);
  for (size_t i = 0; i < sizeof CORPORA / sizeof CORPORA[0]; i++) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", run->fixtures, CORPORA[i]);
    rs_cf_walk_corpus(run, RS_CF_SUITE_REDISTRIBUTE, dir, one_fixture, x);
  }
  free(x);
}
