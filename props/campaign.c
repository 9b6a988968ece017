/* campaign.c - the property campaign: one choice stream per case, every enabled property run on
 * the case it decodes to, the first failure of each property shrunk, saved as a regression
 * fixture and reported with the command that replays it. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>
#include <string.h>
#include "core/numflag.h"
#include "props/props.h"
#include "core/values.h"
#include "core/last_status.h"
#include "core/mutant.h"
#include "report.h"
#include "report_html.h"
#include "features.h"
#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
#endif

#define MSG_CAP 8192

void rs_campaign_opts_default(rs_campaign_opts *o) {
  memset(o, 0, sizeof *o);
  o->seed = 1;
  o->cases = 20000;
  o->planners = 3;
  o->impl = RS_IMPL_REF;
  rs_gen_opts_default(&o->gen);
  o->gen.enumerations = RS_GEN_ENUM_BOTH;
  o->regress_dir = "fixtures/regressions";
  o->shrink_runs = 2000;
  o->print = 1;
}

int rs_outcome_is_oom(rs_outcome out) {
  if (RS_MUTANT(703)) return 0; /* planted: out of memory counts as a property failure (shrunk, saved) */
  return out == RS_FAIL && rs__last_status() == RS_ERR_NOMEM;
}

rs_outcome rs_prop_oom(char *msg, size_t cap, const char *what) {
  rs_fail(RS_ERR_NOMEM, "%s: out of memory", what);
  snprintf(msg, cap, "%s", rs_last_error());
  return RS_FAIL;
}

rs_outcome rs_prop_agree_oom(void *world, rs_outcome out, char *msg, size_t cap) {
#ifdef RS_HAVE_OPT
  if (!world || rs_world_is_local(world)) return out;
  int flags;
  char own[512];
  snprintf(own, sizeof own, "%s", rs_last_error());
  rs_status a = rs_world_agree_status(world, rs_outcome_is_oom(out) ? RS_ERR_NOMEM : RS_OK, &flags);
  /* a failed agreement is the transport's failure, reported by the caller */
  if (a || !(flags & RS_AGREE_NOMEM)) return out;
  if (rs_outcome_is_oom(out)) { /* this process's own: keep its message and status */
    rs_fail(RS_ERR_NOMEM, "%s", own);
    return RS_FAIL;
  }
  return rs_prop_oom(msg, cap, "another process");
#else
  (void)world, (void)msg, (void)cap;
  return out;
#endif
}

rs_status rs_campaign_oom(const char *prop, long long case_no, const char *msg) {
  return rs_fail(RS_ERR_NOMEM, "out of memory in property %s at case %lld (no verdict: not shrunk, nothing saved): %s",
                 prop, case_no, msg);
}

/* Under MPI every process must see the same outcome, or the campaigns drift apart. */
static int agree(const rs_prop_env *env, int flag) {
#ifdef RS_HAVE_OPT
  if (env->distributed && env->world) {
    if (rs_world_agree((rs_world *)env->world, &flag) != RS_OK) return 1;
  }
#else
  (void)env;
#endif
  return flag;
}

/* A peer that stalled or died broke the transport (opt's --timeout): the campaign stops with that
 * error on every rank; it is no case's failure, so nothing is shrunk or saved as a fixture. */
static const char *peer_failure(void) {
#ifdef RS_HAVE_OPT
  return rs_opt_transport_failure();
#else
  return NULL;
#endif
}

typedef struct pred_ctx {
  rs_prop_id id;
  const rs_prop_env *env;
  const rs_gen_opts *gen;
  rs_case *c;
  char *msg;
} pred_ctx;

static int still_fails(void *vctx, rs_choices *ch) {
  pred_ctx *x = vctx;
  rs_outcome o = rs_prop_run_stream(x->id, x->env, x->gen, ch, x->c, x->msg, MSG_CAP);
  return agree(x->env, o == RS_FAIL);
}

static void enabled_props(const rs_campaign_opts *o, int *en) {
  for (int i = 0; i < RS_PROP_COUNT; i++) {
    rs_prop_id id = (rs_prop_id)i;
    rs_planner_kind k = rs_prop_planner(id);
    en[i] = !o->props || (o->props & (1u << i));
    if (rs_prop_needs_opt(id) && o->impl != RS_IMPL_OPT) en[i] = 0;
    if (k == RS_PLANNER_GREEDY && !(o->planners & 1)) en[i] = 0;
    if (k == RS_PLANNER_GRAPH && !(o->planners & 2)) en[i] = 0;
    if (id == RS_PROP_BACKEND && !o->env.backend) en[i] = 0;
  }
}

/* The shrunk case on the --report page: run the property once more with a diff collector, so the
 * page marks every element that differs (not only the first lines of the message). */
static void draw_failure(rs_html *html, const rs_prop_env *env, rs_prop_id id, const rs_case *c, const char *msg,
                         const char *fixture) {
  rs_html_diff d = {0};
  rs_prop_env e = *env;
  e.diff = &d;
  char *m2 = malloc(MSG_CAP), replay[600] = "";
  if (m2) rs_prop_run(id, &e, c, m2, MSG_CAP);
  if (fixture) snprintf(replay, sizeof replay, "reshard replay %s", fixture);
  if (rs_html_case_failure(html, rs_prop_name(id), c, msg, replay, &d) != RS_OK) rs_clear_error();
  rs_html_diff_free(&d);
  free(m2);
}

/* Shrink a failing stream, write the fixture, print the report of one failure. */
static void record_failure(const rs_campaign_opts *o, const rs_prop_env *env, rs_campaign_result *r,
                           rs_prop_id id, const rs_choices *ch, const char *first_msg, rs_case *c,
                           char *msg, rs_html *html) {
  size_t n = ch->n;
  uint64_t *v = malloc((n ? n : 1) * sizeof *v);
  int runs = 0, shrink_out = 0;
  pred_ctx x = {id, env, &o->gen, c, msg};
  if (v) {
    memcpy(v, ch->v, n * sizeof *v);
    runs = rs_shrink_stream_budget(still_fails, &x, &v, &n, o->shrink_runs, o->shrink_seconds, &shrink_out);
  }
  /* Decode the final stream once more: its case and message are what gets reported. */
  rs_choices rc;
  int ok = v && rs_choices_replay(&rc, v, n) == RS_OK;
  if (ok) {
    ok = still_fails(&x, &rc);
    rs_choices_free(&rc);
  }
  /* A shrunk stream that passes means the shrinker (or a flaky property) lost the failure: say
   * so instead of saving a case that replays as PASS. */
  if (!ok) snprintf(msg, MSG_CAP, "%s (shrinking lost the failure: the saved case may pass)", first_msg);
  rs_prop_stats *s = &r->prop[id];
  /* the summary line and the first differing element (the diff's first line), one line: what a
   * JUnit failure message or a JSON report shows, as the console does */
  rs_message_head(s->message, sizeof s->message, msg);
  s->shrink_runs = runs;
  s->shrink_out = shrink_out;
  int wrote = 0;
  if (o->print) {
    rs_status st = rs_write_regression(o->regress_dir ? o->regress_dir : "fixtures/regressions", id,
                                       c, msg, env, s->fixture, sizeof s->fixture);
    wrote = st == RS_OK;
    if (!wrote) snprintf(s->fixture, sizeof s->fixture, "(not written: %s)", rs_last_error());
    char *cj = rs_case_to_json(c);
    char note[96];
    rs_shrink_budget_note(shrink_out, o->shrink_runs, o->shrink_seconds, note, sizeof note);
    printf("FAIL %s (shrunk in %d runs to %zu draws%s%s)\n  %s\n", rs_prop_name(id), runs, n, note[0] ? "; " : "",
           note, msg);
    if (cj) {
      /* The codec may pretty-print; one line is easier to read in a log. */
      for (char *p = cj; *p; p++)
        if (*p == '\n') *p = ' ';
      printf("  case: %s\n", cj);
      free(cj);
    }
    /* the file records impl and transport, so the plain command replays it as it failed */
    const char *replay = o->replay ? o->replay : "reshard replay";
    if (wrote && env->distributed) printf("  replay: mpirun -np %d %s %s\n", o->gen.world_size, replay, s->fixture);
    else if (wrote) printf("  replay: %s %s\n", replay, s->fixture);
    fflush(stdout);
    if (html) draw_failure(html, env, id, c, msg, wrote ? s->fixture : NULL);
  }
  free(v);
}

/* ---- feature coverage (see props.h) ---- */

/* Campaigns stopped early by a failure are not judged: they may be short for a reason. */
static void check_features(const rs_campaign_opts *o, rs_campaign_result *r) {
  double rate[RS_FEATURES_MAX];
  for (int f = 0; f < rs_feature_count(); f++) {
    r->feature_required[f] = rs__feature_required(&o->gen, f);
    rate[f] = rs__feature_rate(&o->gen, f);
  }
  r->features_missing = rs_feature_gate(r->cases, RS_FEATURE_MIN_CASES, rs_feature_count(), r->feature, rate,
                                        r->feature_min);
  if (r->features_missing) {
    r->failed++;
    if (!r->first_failure_case) r->first_failure_case = r->cases;
  }
}

/* The --report page: one row per property that ran, the feature coverage, the summary line. */
static rs_status report_page(rs_html *html, const rs_campaign_opts *o, const rs_campaign_result *r, const int *en) {
  for (int i = 0; i < RS_PROP_COUNT; i++)
    if (en[i]) rs_html_row(html, rs_prop_name((rs_prop_id)i), r->prop[i].pass, r->prop[i].fail, r->prop[i].skip);
  rs_html_row(html, "feature_coverage", r->features_missing == 0 && r->cases >= RS_FEATURE_MIN_CASES,
              r->features_missing != 0, r->cases < RS_FEATURE_MIN_CASES);
  char sum[256];
  snprintf(sum, sizeof sum, "seed %llu, impl %s: %lld cases in %.2f s, %d failing propert%s",
           (unsigned long long)o->seed, o->impl == RS_IMPL_OPT ? "opt" : "ref", (long long)r->cases, r->seconds,
           r->failed, r->failed == 1 ? "y" : "ies");
  return rs_html_close(html, sum);
}

/* ---- the runner's side of check (props/runner.h) ---- */

enum { CNT_PARTIAL = 0, CNT_ORDER, CNT_REDRAWS, CNT_COUNT };

typedef struct check_ctx {
  const rs_campaign_opts *o;
  rs_prop_env *env;
  rs_gen_opts gen;
  const int *en;
  int want_bad;
  rs_case *c;
  char *msg;
} check_ctx;

/* Case `index`: pass 0 a valid case for every ordinary property, pass 1 a planted-violation case,
 * drawn only when a property wants one (--properties may leave them all out). */
static rs_status check_eval(void *vx, int64_t index, rs_run_case *rc) {
  check_ctx *x = vx;
  /* test hooks of tests/jobs_check.sh (mutation builds only): case 38 crashes, hangs or runs out of
   * memory, so the runner's reports of each are seen */
  if (index == 37 && RS_MUTANT(993)) raise(SIGSEGV);
  if (index == 37 && RS_MUTANT(994))
    for (;;) pause();
  if (index == 37 && RS_MUTANT(995)) {
    rc->oom = 1;
    snprintf(rc->msg[0], RS_RUN_MSG, "boxes: out of memory (planted)");
    return RS_OK;
  }
  for (int pass = 0; pass < 2; pass++) {
    if (pass && !x->want_bad) break;
    rs_choices ch;
    int64_t redraws = 0;
    rs_gen_opts gen = x->gen;
    gen.redraws = &redraws;
    rs_choices_seed(&ch, rs_hash3(x->o->seed, (uint64_t)index, (uint64_t)pass));
    rs_status gst = pass ? rs_gen_bad_case(&ch, &gen, x->c) : rs_gen_case(&ch, &gen, x->c);
    rc->counter[CNT_REDRAWS] += redraws;
    if (!pass && gst == RS_OK) {
      int hit[RS_FEATURES_MAX];
      rs__features_of_case(x->c, hit);
      for (int f = 0; f < rs_feature_count(); f++) rc->feature[f] = (uint16_t)hit[f];
      if (rs_sharding_has_partial(&x->c->src) || rs_sharding_has_partial(&x->c->dst)) {
        rc->counter[CNT_PARTIAL]++;
        rc->counter[CNT_ORDER] += x->c->values == RS_VALUES_ORDER || x->c->values == RS_VALUES_WRAP;
      }
    }
    for (int p = 0; p < RS_PROP_COUNT; p++) {
      rs_prop_id id = (rs_prop_id)p;
      if (!x->en[p] || rs_prop_bad_cases(id) != pass) continue;
      rs_outcome out;
      rs_clear_error();
      if (gst != RS_OK) {
        snprintf(x->msg, MSG_CAP, "generator: %s: %s", rs_status_name(gst), rs_last_error());
        if (gst == RS_ERR_NOMEM) rs_fail(RS_ERR_NOMEM, "%s", x->msg);
        out = RS_FAIL;
      } else {
        out = rs_prop_run(id, x->env, x->c, x->msg, MSG_CAP);
      }
      int oom = rs_outcome_is_oom(out);
      if (agree(x->env, out == RS_FAIL)) out = RS_FAIL;
      if (peer_failure()) { /* no case's failure: the campaign stops with the transport's error */
        rs_choices_free(&ch);
        return rs_fail(RS_ERR_TIMEOUT, "%s", peer_failure());
      }
      /* out of memory is no verdict on the code under test: the runner stops, nothing is shrunk */
      if (out == RS_FAIL && agree(x->env, oom)) {
        rc->oom = p + 1;
        snprintf(rc->msg[p], RS_RUN_MSG, "%s", x->msg);
        rs_choices_free(&ch);
        return RS_OK;
      }
      rc->out[p] = out == RS_PASS ? RS_RUN_PASS : out == RS_SKIP ? RS_RUN_SKIP : RS_RUN_FAIL;
      if (out == RS_FAIL) snprintf(rc->msg[p], RS_RUN_MSG, "%s", x->msg);
    }
    rs_choices_free(&ch);
  }
  return RS_OK;
}

/* MPI campaigns: time is local, so every process stops a timed run at the agreed case */
static int check_agree_stop(void *vx, int stop) {
  check_ctx *x = vx;
  return agree(x->env, stop);
}

/* The names of what check counts, for the runner's report object and report merge. */
static void check_names(const rs_campaign_opts *o, const int *en, rs_run_names *nm) {
  memset(nm, 0, sizeof *nm);
  for (int p = 0; p < RS_PROP_COUNT; p++) {
    nm->prop[p] = rs_prop_name((rs_prop_id)p);
    nm->prop_on[p] = en[p];
  }
  for (int f = 0; f < rs_feature_count(); f++) {
    nm->feature[f] = rs_feature_name(f);
    nm->rate[f] = rs__feature_rate(&o->gen, f);
  }
  nm->judge_from = RS_FEATURE_MIN_CASES;
  nm->counter[CNT_PARTIAL] = "partial_cases";
  nm->counter[CNT_ORDER] = "order_cases";
  nm->counter[CNT_REDRAWS] = "redrawn_cases";
  /* the order-value share: fewer than 3/5 of the asked share fails (see rs_campaign_result) */
  nm->gate[0] = (rs_run_gate){"order_share", CNT_ORDER, CNT_PARTIAL, 0.006 * o->gen.order_share, 1, RS_ORDER_MIN_PARTIAL};
  nm->ngates = 1;
}

static rs_status check_worker_init(void *vx, int w) {
  check_ctx *x = vx;
  return x->o->worker_init ? x->o->worker_init(x->o->worker_ctx, w) : RS_OK;
}

static void check_worker_exit(void *vx) {
  check_ctx *x = vx;
  if (x->o->worker_exit) x->o->worker_exit(x->o->worker_ctx);
}

static void check_ops(check_ctx *x, rs_run_ops *ops) {
  memset(ops, 0, sizeof *ops);
  ops->ctx = x;
  ops->eval = check_eval;
  ops->worker_init = check_worker_init;
  ops->worker_exit = check_worker_exit;
  ops->nprops = RS_PROP_COUNT;
  ops->nfeatures = rs_feature_count();
  ops->ncounters = CNT_COUNT;
}

static void check_run_opts(const rs_campaign_opts *o, check_ctx *x, rs_run_opts *ro) {
  memset(ro, 0, sizeof *ro);
  ro->verb = o->env.backend ? "conform redistribute" : o->impl == RS_IMPL_OPT ? "check --impl opt" : "check";
  ro->seed = o->seed;
  ro->cases = o->cases;
  ro->seconds = o->seconds;
  ro->jobs = o->jobs > 1 && !o->env.distributed ? o->jobs : 1;
  ro->shard_k = o->shard_k;
  ro->shard_n = o->shard_n;
  ro->max_failures = o->max_failures;
  ro->case_timeout = o->case_timeout;
  ro->progress = o->print && !o->quiet;
  ro->stop = o->stop;
  ro->stop_ctx = o->stop_ctx;
  ro->dist = o->dist;
  if (o->env.distributed) {
    ro->agree_stop = check_agree_stop;
    ro->stop_ctx = x;
    ro->stop = NULL; /* conform's stop never runs under MPI */
  }
}

cJSON *rs__campaign_runner_json(const rs_campaign_opts *o, const rs_campaign_result *r, const int *en) {
  check_ctx x = {.o = o};
  rs_run_opts ro;
  rs_run_ops ops;
  rs_run_names nm;
  check_run_opts(o, &x, &ro);
  check_ops(&x, &ops);
  check_names(o, en, &nm);
  rs_run_failure_note notes[RS_RUN_PROPS] = {{0}};
  char replay[RS_PROP_COUNT][600];
  for (int p = 0; p < RS_PROP_COUNT; p++) {
    if (!r->prop[p].fail) continue;
    snprintf(replay[p], sizeof replay[p], "%s %s", o->replay ? o->replay : "reshard replay", r->prop[p].fixture);
    notes[p] = (rs_run_failure_note){r->prop[p].message, r->prop[p].fixture, replay[p]};
  }
  return rs_run_json(&ro, &ops, &nm, &r->run, notes);
}

rs_status rs_campaign_run(const rs_campaign_opts *o, rs_campaign_result *r) {
  memset(r, 0, sizeof *r);
  if (o->cases <= 0 && !rs__seconds_ok(o->seconds)) /* NaN or inf would never end */
    return rs_fail(RS_ERR_INVALID, "seconds: %g, expected 0 < T <= %.0f (or a case count)", o->seconds, RS_MAX_SECONDS);
  int en[RS_PROP_COUNT], want_bad = 0;
  enabled_props(o, en);
  for (int p = 0; p < RS_PROP_COUNT; p++) want_bad |= en[p] && rs_prop_bad_cases((rs_prop_id)p);
  rs_case *c = malloc(sizeof *c);
  char *msg = malloc(MSG_CAP), *msg2 = malloc(MSG_CAP);
  rs_prop_env env = o->env;
  if (!env.memo && rs_prop_memo_create(&env.memo) != RS_OK) env.memo = NULL;
  if (!c || !msg || !msg2) {
    if (env.memo != o->env.memo) rs_prop_memo_free(env.memo);
    free(c);
    free(msg);
    free(msg2);
    return rs_fail(RS_ERR_NOMEM, "check: out of memory");
  }
  rs_html *html = NULL;
  const char *page = o->impl == RS_IMPL_OPT ? "check-opt" : "check";
  char cmd[160];
  snprintf(cmd, sizeof cmd, "reshard check --seed %llu --impl %s", (unsigned long long)o->seed,
           o->impl == RS_IMPL_OPT ? "opt" : "ref");
  if (o->print && o->report_dir && rs_html_open(o->report_dir, page, cmd, &html) != RS_OK) {
    if (env.memo != o->env.memo) rs_prop_memo_free(env.memo);
    free(c);
    free(msg);
    free(msg2);
    return RS_ERR_IO;
  }
  rs_status st = RS_OK;
  int done[RS_PROP_COUNT] = {0};
  clock_t c0 = clock();
  check_ctx x = {.o = o, .env = &env, .gen = o->gen, .en = en, .want_bad = want_bad, .c = c, .msg = msg};
  rs_run_opts ro;
  rs_run_ops ops;
  check_run_opts(o, &x, &ro);
  check_ops(&x, &ops);
  rs_run_result *rr = &r->run;
  st = rs_run(&ro, &ops, rr);
  /* a peer that died while the ranks agreed on a timed stop ended the loop there: its failure, not
   * the clock, stopped the campaign */
  if (st == RS_OK && peer_failure()) st = rs_fail(RS_ERR_TIMEOUT, "%s", peer_failure());
  r->cases = rr->cases;
  r->partial_cases = rr->counter[CNT_PARTIAL];
  r->order_cases = rr->counter[CNT_ORDER];
  r->redraws = rr->counter[CNT_REDRAWS];
  for (int f = 0; f < rs_feature_count(); f++) r->feature[f] = rr->feature[f];
  for (int p = 0; p < RS_PROP_COUNT; p++) {
    r->prop[p].pass = rr->pass[p];
    r->prop[p].fail = rr->fail[p];
    r->prop[p].skip = rr->skip[p];
  }
  r->failed = rr->failed_props;
  r->first_failure_case = rr->first_failure >= 0 ? rr->first_failure + 1 : 0;
  if (st == RS_ERR_NOMEM && rr->oom_prop >= 0) {
    st = rs_campaign_oom(rs_prop_name((rs_prop_id)rr->oom_prop), (long long)rr->oom_index + 1, rr->oom_msg);
    goto out;
  }
  if (st != RS_OK || rr->follower) goto out; /* a follower rank reports nothing (runner.h) */
  /* each property's first failure, lowest index first: shrunk here, in this process, so the shrunk
   * case does not depend on --jobs */
  for (int p; (p = rs_run_next_failure(rr, RS_PROP_COUNT, done)) >= 0;) {
    done[p] = 1;
    rs_prop_id id = (rs_prop_id)p;
    int pass = rs_prop_bad_cases(id);
    rs_choices ch;
    rs_choices_seed(&ch, rs_hash3(o->seed, (uint64_t)rr->first_fail[p], (uint64_t)pass));
    if (pass) rs_gen_bad_case(&ch, &o->gen, c);
    else rs_gen_case(&ch, &o->gen, c);
    snprintf(msg2, MSG_CAP, "%s", rr->first_msg[p]);
    rs_case *sc = malloc(sizeof *sc);
    if (sc) {
      record_failure(o, &env, r, id, &ch, msg2, sc, msg, html);
      free(sc);
    }
    rs_choices_free(&ch);
    if (peer_failure()) {
      st = rs_fail(RS_ERR_TIMEOUT, "%s", peer_failure());
      goto out;
    }
  }
  if (rr->crashed) {
    r->failed++;
    if (!r->first_failure_case || rr->crash_index + 1 < r->first_failure_case) r->first_failure_case = rr->crash_index + 1;
    if (o->print) rs_run_print_crash(rr, (unsigned long long)o->seed);
  }
  /* SPEC 5 is only tested by order values: a generator that stops drawing them must fail the run */
  if (r->partial_cases >= RS_ORDER_MIN_PARTIAL && r->order_cases * 500 < r->partial_cases * 3 * o->gen.order_share) {
    r->order_share_low = 1;
    r->failed++;
    if (!r->first_failure_case) r->first_failure_case = r->cases;
  }
  check_features(o, r);
  r->seconds = rr->seconds;
  r->cpu_seconds = (double)(clock() - c0) / CLOCKS_PER_SEC;
  if (o->print) {
    rs_report_summary(stdout, o, r, en);
    if (o->junit && (st = rs_report_junit(o->junit, r, en)) != RS_OK) goto out;
    if (o->json && (st = rs_report_json(o->json, o, r, en)) != RS_OK) goto out;
    if (html) {
      st = report_page(html, o, r, en);
      html = NULL;
    }
  }
out:
  rs_html_discard(html);
  if (env.memo != o->env.memo) rs_prop_memo_free(env.memo);
  free(c);
  free(msg);
  free(msg2);
  return st;
}
