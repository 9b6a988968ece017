/* p2p.c - the cross-config suite of `reshard conform` (SPEC 10): props' P2P campaign (model
 * generator: templates, MoE stacks, explicit layouts, uneven and empty shards, MXFP8, collocated,
 * disjoint and idle rank sets) with the backend hook, then the model files of fixtures/p2p. A
 * backend's plan must pass SPEC 10's checks (every destination element written exactly once, from
 * a rank that holds it, task ids unique per pair) and give the oracle's locals when reshard's ref
 * executes it; its execution must give the oracle's destination locals bit for bit (MXFP8 bytes and
 * scales included), and, when it executes any plan given (RS_BACKEND_P2P_ANY_PLAN), so must its
 * executions of reshard's opt plan and ref's plan. Its traffic against the lower bound is its own
 * business. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "conform/suite.h"
#include "props/p2p.h"

static rs_outcome outcome_of(const rs_cf_call *call, const char *what, char *msg, size_t cap) {
  if (call->result == RS_BACKEND_OK) return RS_PASS;
  snprintf(msg, cap, "%s: %s%s", what, call->result == RS_BACKEND_UNSUPPORTED ? "unsupported: " : "backend failed: ", call->msg);
  return call->result == RS_BACKEND_UNSUPPORTED ? RS_SKIP : RS_FAIL;
}

/* The oracle's destination locals against got. */
static rs_outcome against_oracle(const rs_p2p_model *m, const rs_p2p_locals *got, const char *what, char *msg, size_t cap) {
  rs_p2p_locals want;
  if (rs_p2p_oracle_expected(m, -1, &want)) {
    snprintf(msg, cap, "oracle: %s", rs_last_error());
    return RS_FAIL;
  }
  rs_outcome o = RS_PASS;
  if (rs_p2p_compare(m, &want, got)) {
    snprintf(msg, cap, "%s vs oracle: %s", what, rs_last_error());
    o = RS_FAIL;
  }
  rs_p2p_locals_free(&want);
  return o;
}

static rs_outcome check_plan(rs_cf_backend *b, const rs_p2p_model *m, rs_cf_call *call, char *msg, size_t cap) {
  rs_p2p_plan plan;
  rs_cf_p2p_plan(b, m, &plan, call);
  rs_outcome o = outcome_of(call, "p2p_plan", msg, cap);
  rs_p2p_locals src = {0}, got = {0};
  if (o == RS_PASS && rs_p2p_plan_verify(m, &plan)) {
    snprintf(msg, cap, "p2p_plan breaks SPEC 10: %s", rs_last_error());
    o = RS_FAIL;
  }
  if (o == RS_PASS) {
    if (rs_p2p_source_locals(m, -1, &src) || rs_p2p_ref_execute(m, &plan, &src, &got)) {
      snprintf(msg, cap, "p2p_plan: ref cannot execute it: %s", rs_last_error());
      o = RS_FAIL;
    } else
      o = against_oracle(m, &got, "p2p_plan executed by ref", msg, cap);
  }
  rs_p2p_locals_free(&src);
  rs_p2p_locals_free(&got);
  rs_p2p_plan_free(&plan);
  return o;
}

/* One execution of m by the backend: its own plan (plan NULL) or the plan given; `what` names
 * which in every message ("p2p_execute of reshard's opt plan: ..."). */
static rs_outcome execute_one(rs_cf_backend *b, const rs_p2p_model *m, const rs_p2p_plan *plan, const char *what,
                              rs_cf_call *call, char *msg, size_t cap) {
  rs_p2p_locals src = {0}, got = {0};
  rs_outcome o = RS_PASS;
  if (rs_p2p_source_locals(m, -1, &src) || rs_p2p_locals_alloc(m, RS_P2P_DST, -1, &got)) {
    snprintf(msg, cap, "p2p locals: %s", rs_last_error());
    o = RS_FAIL;
  } else {
    rs_cf_p2p_execute(b, m, plan, &src, &got, call);
    o = outcome_of(call, what, msg, cap);
    if (o == RS_PASS) o = against_oracle(m, &got, what, msg, cap);
  }
  rs_p2p_locals_free(&src);
  rs_p2p_locals_free(&got);
  return o;
}

/* Its own execution; then, for a backend that executes any plan (RS_BACKEND_P2P_ANY_PLAN), reshard's
 * opt plan (minimal traffic, coalesced pairs) and ref's plan, in that order, the first failure
 * ending the check: one outcome per model, like the plan and its execution. A given plan answered
 * `unsupported` after its own plan of the same model ran is a failure: the flag promised any plan. */
static rs_outcome check_execute(rs_cf_backend *b, const rs_p2p_model *m, rs_cf_call *call, char *msg, size_t cap) {
  rs_outcome o = execute_one(b, m, NULL, "p2p_execute", call, msg, cap);
  if (o != RS_PASS || !(rs_cf_backend_caps(b) & RS_CF_P2P_ANY_PLAN)) return o;
  static const char *const WHAT[] = {"p2p_execute of reshard's opt plan", "p2p_execute of ref's plan"};
  for (int k = 0; k < 2 && o == RS_PASS; k++) {
    rs_p2p_plan plan;
    memset(&plan, 0, sizeof plan);
#ifdef RS_HAVE_OPT
    rs_status st = k == 0 ? rs_p2p_opt_plan(m, &plan) : rs_p2p_ref_plan(m, &plan);
#else
    if (k == 0) continue; /* a build without opt/: ref's plan only */
    rs_status st = rs_p2p_ref_plan(m, &plan);
#endif
    if (st) {
      snprintf(msg, cap, "%s: reshard cannot plan the model: %s", WHAT[k], rs_last_error());
      o = RS_FAIL;
    } else {
      o = execute_one(b, m, &plan, WHAT[k], call, msg, cap);
      if (o == RS_SKIP) {
        size_t n = strlen(msg);
        snprintf(msg + n, cap - n, " (the backend declares RS_BACKEND_P2P_ANY_PLAN and executed its own plan)");
        o = RS_FAIL;
      }
    }
    rs_p2p_plan_free(&plan);
  }
  return o;
}

/* The hook: plan, then execute, whichever the backend does; skipped only when it does neither. */
static rs_outcome judge(void *ctx, const rs_p2p_model *m, char *msg, size_t cap) {
  rs_cf_backend *b = ctx;
  rs_cf_call *call = malloc(sizeof *call);
  if (!call) return snprintf(msg, cap, "conform: out of memory"), RS_FAIL;
  unsigned caps = rs_cf_backend_caps(b);
  rs_outcome o = RS_SKIP, r;
  if (caps & RS_CF_P2P_PLAN) o = check_plan(b, m, call, msg, cap);
  if (o != RS_FAIL && (caps & RS_CF_P2P_EXECUTE)) {
    char *m2 = malloc(cap);
    r = m2 ? check_execute(b, m, call, m2, cap) : RS_FAIL;
    if (r == RS_FAIL || o == RS_SKIP) {
      o = r;
      snprintf(msg, cap, "%s", m2 ? m2 : "conform: out of memory");
    } else if (r == RS_SKIP && o == RS_PASS) {
      /* the plan passed: the case passed; the skipped half is still counted in the message */
    }
    free(m2);
  }
  free(call);
  return o;
}

rs_outcome rs_cf_p2p_replay(rs_cf_backend *b, const char *text, char *msg, size_t cap, int *bad) {
  rs_p2p_model m;
  if (rs_p2p_model_parse(text, &m)) {
    *bad = 1;
    snprintf(msg, cap, "%s", rs_last_error());
    return RS_FAIL;
  }
  rs_outcome o = judge(b, &m, msg, cap);
  rs_p2p_model_free(&m);
  return o;
}

static void campaign(rs_cf_run *run) {
  rs_cf_item *it = rs_cf_add_item(run->r, RS_CF_SUITE_P2P, 0, "backend_p2p_oracle");
  if (!it) return;
  rs_p2p_campaign c;
  memset(&c, 0, sizeof c);
  c.seed = run->o->seed;
  c.cases = run->o->cases;
  c.seconds = run->o->seconds;
  rs_p2p_gen_opts_default(&c.gen);
  c.env.backend = judge;
  c.env.backend_ctx = run->b;
  c.regress_dir = run->failures;
  c.quiet = run->o->quiet;
  c.print = 1;
  c.shrink_runs = run->o->shrink_runs;
  c.shrink_seconds = run->o->shrink_seconds;
  c.save_templates = (rs_cf_backend_caps(run->b) & RS_CF_P2P_TEMPLATES) != 0;
  /* the runner: each worker runs its models through a backend of its own; failures shrink here */
  RS_CF_RUNNER_OPTS(c, run);
  rs_p2p_campaign_result *r = calloc(1, sizeof *r);
  if (!r) return;
  cJSON *runner = NULL;
  int64_t judged[2] = {0, 0}; /* skipped, all: the --max-skip-share gate's sums */
  rs_status st = rs_p2p_campaign_run(&c, r);
  if (st != RS_OK) {
    rs_cf_campaign_error(run, it, st);
  } else {
    int p = RS_P2P_PROP_OPT_ORACLE;
    it->pass = r->pass[p], it->fail = r->fail[p], it->skip = r->skip[p], it->seconds = r->seconds;
    judged[0] = r->skip[p], judged[1] = r->pass[p] + r->fail[p] + r->skip[p];
    if (r->fail[p]) {
      RS_CF_PRINT(it->message, "%s", r->message[p]);
      rs_cf_item_saved(run, it, r->fixture[p]);
      printf("FAIL p2p %s (shrunk; found at case %lld)\n  %s\n  replay: %s\n", it->name, (long long)r->caught_at[p],
             it->message, it->replay);
    } else if (r->run.crashed) {
      /* a worker died on a case (a plug-in that crashed): that case is the failure */
      it->fail++;
      RS_CF_PRINT(it->message, "crash: %s", r->run.crash_msg);
      rs_run_print_crash(&r->run, (unsigned long long)run->o->seed);
    }
    runner = rs_p2p_runner_json(&c, r);
    if (!run->o->quiet || r->fail[p])
      printf("p2p: %lld cases: %lld pass, %lld fail, %lld skip (%.2f s)\n", (long long)r->cases, (long long)it->pass,
             (long long)it->fail, (long long)it->skip, r->seconds);
    if (rs_cf_backend_caps(run->b) & RS_CF_P2P_TEMPLATES) {
      int64_t sent = rs_cf_backend_templates_sent(run->b);
      printf("p2p: %lld model(s) sent in template form (the backend declares p2p_templates)\n", (long long)sent);
      /* a declared capability the campaign never exercised is a silent pass: the generator draws
       * templates in about two thirds of its models (194 of 300, seed 1) */
      if (!sent && r->cases >= 100 && !it->fail) {
        it->fail++;
        RS_CF_PRINT(it->message, "the backend declares p2p_templates but none of %lld cases sent a template",
                    (long long)r->cases);
        printf("FAIL p2p %s: %s\n", it->name, it->message);
      }
    }
  }
  fflush(stdout);
  rs_cf_campaign_done(run, RS_CF_SUITE_P2P, runner, judged[0], judged[1]);
  free(r);
}

typedef struct saving {
  rs_cf_run *run;
  const rs_p2p_model *m;
} saving;

static rs_status save(void *vctx, const char *msg, char *path, size_t cap) {
  saving *x = vctx;
  char *t = NULL;
  (void)msg;
  /* in the form the backend was sent it: a template when it declares p2p_templates and the model
   * has one that gives it back exactly (the replay then sends it the same way) */
  rs_status st = (rs_cf_backend_caps(x->run->b) & RS_CF_P2P_TEMPLATES) && x->m->arch_set &&
                         rs_p2p_model_to_template_json(x->m, &t) == RS_OK
                     ? RS_OK
                     : rs_p2p_model_to_json(x->m, NULL, &t);
  if (!st) st = rs_cf_save_failure(x->run, t, "p2p", path, cap);
  free(t);
  return st;
}

static void one_fixture(void *vctx, rs_cf_item *it, const char *text, const char *where) {
  rs_cf_run *run = vctx;
  rs_p2p_model m;
  char msg[2048];
  if (rs_p2p_model_parse(text, &m)) {
    /* fixtures/p2p/bad holds models the parser must refuse: not a backend's business */
    it->skip++;
    RS_CF_PRINT(it->message, "%s: not a model: %s", where, rs_last_error());
    return;
  }
  saving sv = {run, &m};
  rs_cf_tally(run, it, judge(run->b, &m, msg, sizeof msg), where, msg, save, &sv);
  rs_p2p_model_free(&m);
}

void rs_cf_suite_p2p(rs_cf_run *run) {
  if (!rs_cf_require(run, RS_CF_SUITE_P2P, RS_CF_P2P_PLAN | RS_CF_P2P_EXECUTE, "backend_p2p_oracle")) return;
  campaign(run);
  if (!run->fixtures) return;
  static const char *const CORPORA[] = {"p2p", "p2p/regressions"};
  for (size_t i = 0; i < sizeof CORPORA / sizeof CORPORA[0]; i++) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", run->fixtures, CORPORA[i]);
    rs_cf_walk_corpus(run, RS_CF_SUITE_P2P, dir, one_fixture, run);
  }
}

/* ---- the --report page ---- */

static const char *param_name(const void *m, int64_t p) { return ((const rs_p2p_model *)m)->param[p].name; }

/* Every rank's box of parameter p in config `which`; its mesh as "2x2 (ranks 0,1,2,3)" into text. */
static rs_status p2p_boxes(const rs_p2p_model *m, int which, int64_t p, rs_html_box **out, int *n, char *text,
                           size_t cap) {
  const rs_p2p_mesh *mesh = &m->cfg[which].mesh[m->cfg[which].place[p].mesh];
  *n = 0;
  *out = calloc((size_t)(mesh->nranks ? mesh->nranks : 1), sizeof **out);
  if (!*out) return rs_fail(RS_ERR_NOMEM, "--report: out of memory");
  rs_cf_mesh_text(mesh->ndim, mesh->size, mesh->ranks, mesh->nranks, text, cap);
  for (int64_t pos = 0; pos < mesh->nranks; pos++) {
    (*out)[pos].rank = mesh->ranks[pos];
    rs_p2p_box(m, which, p, pos, (*out)[pos].start, (*out)[pos].size);
  }
  *n = (int)mesh->nranks;
  return RS_OK;
}

rs_status rs_cf_p2p_draw(rs_cf_backend *b, struct rs_html *h, const char *name, const char *text,
                         const char *message, const char *replay) {
  (void)b;
  rs_p2p_model m;
  rs_status st = rs_p2p_model_parse(text, &m);
  if (st) return st;
  int64_t p = rs_cf_named(message, param_name, &m, m.nparams);
  rs_cf_drawing d = {m.param[p].t.dtype, m.param[p].t.ndim, m.param[p].t.shape,
                     {&m.cfg[RS_P2P_SRC].place[p].s, &m.cfg[RS_P2P_DST].place[p].s}, {NULL, NULL}, {0, 0}, {"", ""}};
  for (int w = 0; w < 2 && !st; w++) st = p2p_boxes(&m, w, p, &d.box[w], &d.n[w], d.mesh[w], sizeof d.mesh[w]);
  char note[600];
  snprintf(note, sizeof note, "parameter '%.400s', %lld of %lld in the model", m.param[p].name, (long long)p + 1,
           (long long)m.nparams);
  if (!st) st = rs_cf_draw_add(h, name, message, replay, text, note, &d);
  free(d.box[0]), free(d.box[1]);
  rs_p2p_model_free(&m);
  return st;
}
