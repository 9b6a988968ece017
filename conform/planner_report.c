/* planner_report.c - what fuzz-planner tells people: the score table (wins/ties/losses per objective
 * against each of reshard's planners and their best), traffic against the lower bound, the worst
 * cases, and the same as a JSON summary and JUnit XML. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include "conform/planner_fuzz.h"
#include "props/report.h"
#include "props/props.h"

static double mean(double sum, int64_t n) { return n ? sum / (double)n : 0.0; }

void rs_pf_print(FILE *f, rs_planner_host *h, const rs_pf_opts *o, const rs_pf_result *r) {
  int nb = rs_pf_nbase(o->kind), nobj = rs_pf_nobj(o->kind);
  fprintf(f, "fuzz-planner: %s (%s), %s%s, seed %llu: %lld cases in %.1f s\n", rs_planner_host_name(h), o->planner,
          o->kind == RS_PF_P2P ? "p2p" : "redistribute",
          o->kind == RS_PF_P2P ? "" : (o->enumeration == RS_ENUM_PYTORCH ? " (enumeration pytorch)" : " (enumeration seed)"),
          (unsigned long long)o->seed, (long long)r->cases, r->seconds);
  fprintf(f, "  passed %lld, declined %lld, failed %lld", (long long)r->passed, (long long)r->declined,
          (long long)r->failed_cases);
  if (r->skipped) fprintf(f, ", not generated %lld", (long long)r->skipped);
  for (int k = 0; k < RS_PF_NFAIL; k++)
    if (r->fail[k]) fprintf(f, " (%s: %lld)", rs_pf_fail_name((rs_pf_fail)k), (long long)r->fail[k]);
  fprintf(f, "\n");
  fprintf(f, "score of %s: wins/ties/losses against each planner (lower is better)\n", rs_planner_host_name(h));
  fprintf(f, "  %-13s", "objective");
  for (int b = 0; b <= nb; b++) fprintf(f, " %-18s", rs_pf_base_name(o->kind, b));
  fprintf(f, " %s\n", "mean mine / mean best");
  for (int obj = 0; obj < nobj; obj++) {
    fprintf(f, "  %-13s", rs_pf_objective_name(o->kind, obj));
    for (int b = 0; b <= nb; b++) {
      char cell[64];
      snprintf(cell, sizeof cell, "%lld/%lld/%lld", (long long)r->win[obj][b], (long long)r->tie[obj][b],
               (long long)r->loss[obj][b]);
      fprintf(f, " %-18s", cell);
    }
    fprintf(f, " %.4g / %.4g\n", mean(r->sum_mine[obj], r->scored[obj]), mean(r->sum_best[obj], r->scored[obj]));
  }
  if (r->lb_cases) {
    fprintf(f, "traffic vs the lower bound (%s, %lld cases): at the bound %lld, mean ratio %.3f, max %.3f",
            o->kind == RS_PF_P2P ? "SPEC 10" : "SPEC 7, copy-only", (long long)r->lb_cases, (long long)r->at_lb,
            mean(r->lb_ratio_sum, r->lb_cases - r->lb_inf), r->lb_ratio_max);
    if (r->lb_inf) fprintf(f, "; %lld case(s) send bytes where the bound is 0", (long long)r->lb_inf);
    fprintf(f, "\n");
  }
  int obj = o->objective;
  if (obj >= 0 && obj < nobj && r->nworst[obj]) {
    fprintf(f, "worst cases by %s (the planner's value against the best of reshard's):\n",
            rs_pf_objective_name(o->kind, obj));
    for (int i = 0; i < r->nworst[obj]; i++) {
      const rs_pf_worst *w = &r->worst[obj][i];
      fprintf(f, "  case %lld: %.6g vs %.6g: %s\n", (long long)w->case_no, w->mine, w->best, w->layout);
      if (w->mine_trace[0]) fprintf(f, "    planner: %s\n    best:    %s\n", w->mine_trace, w->best_trace);
    }
  }
  for (int k = 0; k < RS_PF_NFAIL; k++) {
    if (!r->fail[k]) continue;
    char args[1024], note[96];
    rs__pf_replay_args(o, r->fixture[k], args, sizeof args);
    rs_shrink_budget_note(r->shrink_out[k], o->shrink_runs, o->shrink_seconds, note, sizeof note);
    fprintf(f, "FAIL %s plan (%lld cases, first shrunk in %d runs%s%s): %s\n  replay: reshard fuzz-planner %s\n",
            rs_pf_fail_name((rs_pf_fail)k), (long long)r->fail[k], r->shrink_runs[k], note[0] ? "; " : "", note,
            r->message[k], args);
  }
  if (o->kind == RS_PF_REDISTRIBUTE && r->features_missing) {
    fprintf(f, "FAIL feature coverage: %d required feature(s) under their minimum count (rs_feature_gate):",
            r->features_missing);
    for (int i = 0; i < rs_feature_count(); i++)
      if (r->feature[i] < r->feature_min[i])
        fprintf(f, " %s %lld < %lld", rs_feature_name(i), (long long)r->feature[i], (long long)r->feature_min[i]);
    fprintf(f, "\n");
  }
  if (r->nothing_checked)
    fprintf(f, "FAIL nothing checked: the planner planned none of %lld cases (declined %lld)\n", (long long)r->cases,
            (long long)r->declined);
  else if (r->decline_over)
    fprintf(f, "FAIL declined %lld of %lld cases (%.1f%%), over --max-decline-share %g\n", (long long)r->declined,
            (long long)r->cases, r->cases ? 100.0 * (double)r->declined / (double)r->cases : 0.0,
            o->max_decline_share);
}

static cJSON *wtl(const rs_pf_result *r, int obj, int b) {
  cJSON *x = cJSON_CreateObject();
  cJSON_AddNumberToObject(x, "win", (double)r->win[obj][b]);
  cJSON_AddNumberToObject(x, "tie", (double)r->tie[obj][b]);
  cJSON_AddNumberToObject(x, "loss", (double)r->loss[obj][b]);
  return x;
}

rs_status rs_pf_json(const char *path, rs_planner_host *h, const rs_pf_opts *o, const rs_pf_result *r) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return rs_fail(RS_ERR_NOMEM, "--json: out of memory");
  int nb = rs_pf_nbase(o->kind), nobj = rs_pf_nobj(o->kind);
  cJSON_AddStringToObject(root, "planner", rs_planner_host_name(h));
  cJSON_AddStringToObject(root, "spec", o->planner);
  cJSON_AddStringToObject(root, "kind", o->kind == RS_PF_P2P ? "p2p" : "redistribute");
  cJSON_AddStringToObject(root, "enumeration", rs_enumeration_name(o->enumeration));
  cJSON_AddNumberToObject(root, "seed", (double)o->seed);
  cJSON_AddNumberToObject(root, "cases", (double)r->cases);
  cJSON_AddNumberToObject(root, "passed", (double)r->passed);
  cJSON_AddNumberToObject(root, "declined", (double)r->declined);
  cJSON_AddNumberToObject(root, "not_generated", (double)r->skipped);
  cJSON_AddNumberToObject(root, "failed_cases", (double)r->failed_cases);
  cJSON_AddNumberToObject(root, "first_failure_case", (double)r->first_failure_case);
  cJSON_AddNumberToObject(root, "seconds", r->seconds);
  cJSON_AddBoolToObject(root, "nothing_checked", r->nothing_checked);
  cJSON_AddNumberToObject(root, "max_decline_share", o->max_decline_share);
  cJSON_AddBoolToObject(root, "decline_over", r->decline_over);
  if (o->kind == RS_PF_REDISTRIBUTE) {
    cJSON *feat = cJSON_AddObjectToObject(root, "features"), *fmin = cJSON_AddObjectToObject(root, "features_min");
    cJSON *miss = cJSON_AddArrayToObject(root, "features_missing");
    for (int i = 0; i < rs_feature_count(); i++) {
      cJSON_AddNumberToObject(feat, rs_feature_name(i), (double)r->feature[i]);
      if (r->feature_min[i] > 0) cJSON_AddNumberToObject(fmin, rs_feature_name(i), (double)r->feature_min[i]);
      if (r->feature[i] < r->feature_min[i]) cJSON_AddItemToArray(miss, cJSON_CreateString(rs_feature_name(i)));
    }
  }
  cJSON *fails = cJSON_AddArrayToObject(root, "failures");
  for (int k = 0; k < RS_PF_NFAIL; k++) {
    if (!r->fail[k]) continue;
    cJSON *x = cJSON_CreateObject();
    char args[1024], cmd[1100];
    rs__pf_replay_args(o, r->fixture[k], args, sizeof args);
    snprintf(cmd, sizeof cmd, "reshard fuzz-planner %s", args);
    cJSON_AddStringToObject(x, "kind", rs_pf_fail_name((rs_pf_fail)k));
    cJSON_AddNumberToObject(x, "count", (double)r->fail[k]);
    cJSON_AddStringToObject(x, "message", r->message[k]);
    cJSON_AddStringToObject(x, "fixture", r->fixture[k]);
    cJSON_AddStringToObject(x, "replay", cmd);
    cJSON_AddBoolToObject(x, "shrink_lost", r->shrink_lost[k]);
    cJSON_AddNumberToObject(x, "shrink_runs", r->shrink_runs[k]);
    cJSON_AddBoolToObject(x, "shrink_budget_out", r->shrink_out[k] != 0);
    char note[96];
    rs_shrink_budget_note(r->shrink_out[k], o->shrink_runs, o->shrink_seconds, note, sizeof note);
    if (note[0]) cJSON_AddStringToObject(x, "shrink_note", note);
    cJSON_AddItemToArray(fails, x);
  }
  cJSON *score = cJSON_AddObjectToObject(root, "score");
  for (int obj = 0; obj < nobj; obj++) {
    cJSON *x = cJSON_AddObjectToObject(score, rs_pf_objective_name(o->kind, obj));
    for (int b = 0; b <= nb; b++) cJSON_AddItemToObject(x, rs_pf_base_name(o->kind, b), wtl(r, obj, b));
    cJSON_AddNumberToObject(x, "scored", (double)r->scored[obj]);
    cJSON_AddNumberToObject(x, "mean_mine", mean(r->sum_mine[obj], r->scored[obj]));
    cJSON_AddNumberToObject(x, "mean_best", mean(r->sum_best[obj], r->scored[obj]));
    cJSON *w = cJSON_AddArrayToObject(x, "worst");
    for (int i = 0; i < r->nworst[obj]; i++) {
      const rs_pf_worst *ws = &r->worst[obj][i];
      cJSON *y = cJSON_CreateObject();
      cJSON_AddNumberToObject(y, "case", (double)ws->case_no);
      cJSON_AddNumberToObject(y, "mine", ws->mine);
      cJSON_AddNumberToObject(y, "best", ws->best);
      cJSON_AddStringToObject(y, "layout", ws->layout);
      cJSON_AddStringToObject(y, "mine_trace", ws->mine_trace);
      cJSON_AddStringToObject(y, "best_trace", ws->best_trace);
      cJSON_AddItemToArray(w, y);
    }
  }
  cJSON *lb = cJSON_AddObjectToObject(root, "lower_bound");
  cJSON_AddNumberToObject(lb, "cases", (double)r->lb_cases);
  cJSON_AddNumberToObject(lb, "at_bound", (double)r->at_lb);
  cJSON_AddNumberToObject(lb, "mean_ratio", mean(r->lb_ratio_sum, r->lb_cases - r->lb_inf));
  cJSON_AddNumberToObject(lb, "max_ratio", r->lb_ratio_max);
  cJSON_AddNumberToObject(lb, "traffic_where_bound_is_zero", (double)r->lb_inf);
  if (r->run.crashed) {
    cJSON_AddNumberToObject(root, "crash_case", (double)r->run.crash_index + 1);
    cJSON_AddStringToObject(root, "crash", r->run.crash_msg);
  }
  cJSON_AddNumberToObject(root, "jobs", r->jobs);
  /* the runner's part (props/runner.h): what `reshard report merge` adds up over --shard K/N runs */
  cJSON *run = rs__pf_runner_json(o, r);
  if (!run) {
    cJSON_Delete(root);
    return rs_fail(RS_ERR_NOMEM, "--json: out of memory");
  }
  cJSON_AddItemToObject(root, "runner", run);
  return rs__report_json_write(root, path);
}

/* One testcase per check (the planner answers, its plans are legal, its plans are right), so a CI
 * that reads testcases sees each kind of failure with its shrunk case and replay command. */
rs_status rs_pf_junit(const char *path, const rs_pf_opts *o, const rs_pf_result *r) {
  static const char *const NAMES[RS_PF_NFAIL] = {"planner_answers", "plans_legal", "plans_match_oracle"};
  const char *suite = o->kind == RS_PF_P2P ? "reshard.fuzz_planner.p2p" : "reshard.fuzz_planner";
  int skipped = 0, kinds = 0;
  for (int k = 0; k < RS_PF_NFAIL; k++) {
    skipped += r->passed == 0 && !r->fail[k];
    kinds += r->fail[k] != 0;
  }
  int policy = r->features_missing || r->nothing_checked || r->decline_over || r->run.crashed;
  FILE *f = rs__junit_open(path, suite, RS_PF_NFAIL + 1, kinds + policy, skipped, r->seconds);
  if (!f) return RS_ERR_IO;
  for (int k = 0; k < RS_PF_NFAIL; k++) {
    /* "replay: reshard fuzz-planner --planner .. --case FILE", then the shrunk case's contents */
    char args[1024];
    rs__pf_replay_args(o, "", args, sizeof args);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "reshard fuzz-planner %s", args);
    cmd[strlen(cmd) - (cmd[strlen(cmd) - 1] == ' ')] = 0;
    rs__junit_property(f, suite, NAMES[k], r->fail[k] ? r->message[k] : NULL, cmd, r->fixture[k],
                       r->passed == 0 && !r->fail[k]);
  }
  /* the run's own verdicts: feature coverage, nothing checked, the decline share */
  char why[512] = "";
  if (r->run.crashed)
    snprintf(why, sizeof why, "crash: %s", r->run.crash_msg);
  else if (r->nothing_checked)
    snprintf(why, sizeof why, "nothing checked: the planner planned none of %lld cases", (long long)r->cases);
  else if (r->decline_over)
    snprintf(why, sizeof why, "declined %lld of %lld cases, over --max-decline-share %g", (long long)r->declined,
             (long long)r->cases, o->max_decline_share);
  else if (r->features_missing)
    snprintf(why, sizeof why, "feature coverage: %d required feature(s) under their minimum count",
             r->features_missing);
  fprintf(f, "  <testcase classname=\"%s\" name=\"run_checks\">", suite);
  if (why[0]) fprintf(f, "<failure type=\"policy\" message=\"%s\"/>", why);
  fprintf(f, "</testcase>\n");
  return rs__junit_close(f, path);
}
