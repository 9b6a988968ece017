/* redistribute.c - the redistribute suite of `reshard conform`: props' campaign with the backend
 * property (RS_PROP_BACKEND: same generator, same shrinking, same feature coverage as `reshard
 * check`), then every redistribute corpus of fixtures/ (curated, regressions, recorded PyTorch,
 * PyTorch order cases), each case held to the oracle's canonical result bit for bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "conform/suite.h"
#include "core/mutant.h"
#include "reshard/oracle.h"

/* The hook props calls for every case: run the backend, judge its answer. */
static rs_outcome judge(void *ctx, const rs_case *c, const rs_locals *in, const rs_locals *exp,
                        char *msg, size_t cap) {
  rs_cf_backend *b = ctx;
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

rs_outcome rs_cf_redistribute_one(rs_cf_backend *b, const rs_case *c, char *msg, size_t cap) {
  rs_prop_env env = {0};
  env.backend = judge;
  env.backend_ctx = b;
  return rs_prop_run(RS_PROP_BACKEND, &env, c, msg, cap);
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
  co.regress_dir = run->failures;
  co.replay = run->replay;
  co.quiet = o->quiet;
  co.shrink_runs = o->shrink_runs;
  rs_campaign_result *cr = calloc(1, sizeof *cr);
  if (!cr) return;
  if (rs_campaign_run(&co, cr) != RS_OK) {
    it->fail++;
    RS_CF_PRINT(it->message, "campaign: %s", rs_last_error());
  } else {
    const rs_prop_stats *s = &cr->prop[RS_PROP_BACKEND];
    it->pass = s->pass, it->fail = s->fail, it->skip = s->skip;
    if (s->fail) {
      RS_CF_PRINT(it->message, "%s", s->message);
      RS_CF_PRINT(it->replay, "%s %s", run->replay, s->fixture);
    } else if (cr->failed) {
      /* the campaign's own checks: feature coverage, the share of order values */
      it->fail++;
      RS_CF_PRINT(it->message, "%s", cr->features_missing ? "feature coverage: a required feature was never generated"
                                                                          : "too few Partial cases carried order values");
    }
    it->seconds = cr->seconds;
  }
  free(cr);
}

/* ---- the fixture corpora ---- */

typedef struct corpus_ctx {
  rs_cf_run *run;
  rs_prop_env env;
  rs_case c;
  char msg[8192];
} corpus_ctx;

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
  if (out == RS_PASS) it->pass++;
  else if (out == RS_SKIP) {
    if (!it->skip++ && !it->fail) RS_CF_PRINT(it->message, "%s: %s", where, x->msg);
  } else {
    char path[1024] = "";
    if (!it->fail && rs_write_regression(x->run->failures, RS_PROP_BACKEND, &x->c, x->msg, &x->env, path, sizeof path))
      path[0] = 0;
    rs_cf_item_failed(x->run, it, where, x->msg, path[0] ? path : NULL);
  }
}

/* Recorded and hand-made redistribute cases, in the order a reader meets them. */
static const char *const CORPORA[] = {"curated", "regressions", "pytorch", "pytorch_order"};

void rs_cf_suite_redistribute(rs_cf_run *run) {
  if (!(rs_cf_backend_caps(run->b) & RS_CF_REDISTRIBUTE)) {
    rs_cf_item *it = rs_cf_add_item(run->r, RS_CF_SUITE_REDISTRIBUTE, 0, rs_prop_name(RS_PROP_BACKEND));
    if (it) {
      it->skip = 1;
      RS_CF_PRINT(it->message, "the backend lacks the capability 'redistribute'");
    }
    return;
  }
  campaign(run);
  if (!run->fixtures) return;
  corpus_ctx *x = calloc(1, sizeof *x);
  if (!x) return;
  x->run = run;
  x->env.backend = judge;
  x->env.backend_ctx = run->b;
  for (size_t i = 0; i < sizeof CORPORA / sizeof CORPORA[0]; i++) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", run->fixtures, CORPORA[i]);
    rs_cf_walk_corpus(run, RS_CF_SUITE_REDISTRIBUTE, dir, one_fixture, x);
  }
  free(x);
}
