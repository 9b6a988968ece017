/* report.c - `reshard conform`'s reports: JUnit XML through the project's one writer
 * (props/report.h: a testcase per property campaign and per fixture file, classname
 * reshard.conform.<suite>.<property|fixture>; a failure carries its message, the replay command and
 * the shrunk case's contents; a skip says why) and JSON. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "conform/suite.h"
#include "props/report.h"
#include "props/report_html.h"

/* An item is skipped when nothing of it ran and nothing failed (a capability the backend lacks). */
static int item_skipped(const rs_cf_item *it) { return !it->fail && !it->pass && it->skip; }

rs_status rs_cf_write_junit(const char *path, const rs_cf_backend *b, const rs_cf_result *r) {
  int fails = 0, skips = 0;
  double secs = 0;
  for (int i = 0; i < r->n; i++) {
    fails += r->item[i].fail > 0, skips += item_skipped(&r->item[i]);
    secs += r->item[i].seconds;
  }
  char suite[300];
  snprintf(suite, sizeof suite, "reshard.conform %s", rs_cf_backend_name(b));
  FILE *f = rs__junit_open(path, suite, r->n, fails, skips, secs);
  if (!f) return RS_ERR_IO;
  for (int i = 0; i < r->n; i++) {
    const rs_cf_item *it = &r->item[i];
    char cls[64], pass[96];
    snprintf(cls, sizeof cls, "reshard.conform.%s.%s", rs_cf_suite_name(it->suite), it->fixture ? "fixture" : "property");
    snprintf(pass, sizeof pass, "%lld case(s) skipped, none ran", (long long)it->skip);
    /* a failure: "replay: reshard conform --backend B --replay FILE", then the shrunk case's contents */
    rs_junit_case tc = {cls, it->name, it->seconds, it->fail ? it->message : NULL, r->replay,
                        it->saved[0] ? it->saved : NULL,
                        item_skipped(it) ? (it->message[0] ? it->message : pass) : NULL};
    rs__junit_testcase(f, &tc);
  }
  return rs__junit_close(f, path);
}

/* One failing item on the page: a redistribute case drawn (run once more to mark every differing
 * element), a P2P model's named parameter drawn; TP cases and checkpoint specs (and anything that
 * cannot be drawn) as message, replay command and the saved case's text. */
static rs_status html_failure(rs_html *h, rs_cf_backend *b, const rs_cf_item *it, const char *name) {
  char *text = NULL;
  if (it->saved[0]) {
    struct stat sb;
    text = lstat(it->saved, &sb) == 0 && S_ISREG(sb.st_mode) ? rs_read_text(it->saved) : NULL;
    rs_clear_error();
  }
  rs_status st = RS_ERR_INVALID;
  rs_status (*draw)(rs_cf_backend *, rs_html *, const char *, const char *, const char *, const char *) =
      it->suite == RS_CF_SUITE_REDISTRIBUTE ? rs_cf_redistribute_draw
      : it->suite == RS_CF_SUITE_P2P      ? rs_cf_p2p_draw
      : it->suite == RS_CF_SUITE_CKPT     ? rs_cf_ckpt_draw
                                          : NULL;
  if (text && draw) {
    st = draw(b, h, name, text, it->message, it->replay);
    if (st == RS_ERR_NOMEM) {
      free(text);
      return st;
    }
    rs_clear_error();
  }
  if (st != RS_OK) {
    rs_html_failure fl;
    memset(&fl, 0, sizeof fl);
    fl.name = name, fl.message = it->message, fl.replay = it->replay, fl.case_json = text;
    st = rs_html_failure_add(h, &fl);
  }
  free(text);
  return st;
}

rs_status rs_cf_draw_add(rs_html *h, const char *name, const char *message, const char *replay, const char *text,
                         const char *note, rs_cf_drawing *d) {
  char src[600], dst[600], mesh[1100], *msg = malloc(strlen(message) + strlen(note) + 16);
  rs_status st = rs_fail(RS_ERR_NOMEM, "--report: out of memory");
  if (msg) {
    rs_format_sharding(d->sh[0], src, sizeof src);
    rs_format_sharding(d->sh[1], dst, sizeof dst);
    snprintf(mesh, sizeof mesh, "%s, destination mesh %s", d->mesh[0], d->mesh[1]);
    sprintf(msg, "%s\n(drawn: %s)", message, note);
    /* the comparisons of these suites name the first differing element, they do not list them */
    rs_html_failure fl = {name, msg, replay, text, rs_dtype_name(d->dtype), d->ndim, d->shape, mesh,
                          {src, d->box[0], d->n[0]}, {dst, d->box[1], d->n[1]}, NULL};
    st = rs_html_failure_add(h, &fl);
  }
  free(msg);
  free(d->box[0]), free(d->box[1]);
  d->box[0] = d->box[1] = NULL;
  return st;
}

rs_status rs_cf_write_html(const char *dir, const rs_conform_opts *o, rs_cf_backend *b, const rs_cf_result *r) {
  char cmd[4096], suites[64] = "", amount[64];
  for (unsigned s = 1; s <= RS_CF_SUITE_CKPT; s <<= 1)
    if (o->suites & s) snprintf(suites + strlen(suites), sizeof suites - strlen(suites), "%s%s", suites[0] ? "," : "", rs_cf_suite_name(s));
  if (o->cases > 0) snprintf(amount, sizeof amount, "--cases %lld", (long long)o->cases);
  else snprintf(amount, sizeof amount, "--seconds %g", o->seconds);
  /* r->replay is "reshard conform --backend '<spec>' --replay": the same command, campaign options instead */
  static const char SUFFIX[] = " --replay";
  size_t head = strlen(r->replay), k = sizeof SUFFIX - 1;
  if (head >= k && strcmp(r->replay + head - k, SUFFIX) == 0) head -= k;
  snprintf(cmd, sizeof cmd, "%.*s --suite %s --seed %llu %s%s", (int)head, r->replay, suites,
           (unsigned long long)o->seed, amount, o->fixtures ? "" : " --fixtures none");
  rs_html *h;
  rs_status st = rs_html_open(dir, "conform", cmd, &h);
  if (st) return st;
  int64_t t[3] = {0, 0, 0};
  for (int i = 0; i < r->n && !st; i++) {
    const rs_cf_item *it = &r->item[i];
    char name[300];
    snprintf(name, sizeof name, "%s: %s", rs_cf_suite_name(it->suite), it->name);
    st = rs_html_row(h, name, it->pass, it->fail, it->skip);
    if (!st && it->fail) st = html_failure(h, b, it, name);
    t[0] += it->pass, t[1] += it->fail, t[2] += it->skip;
  }
  if (st) {
    rs_html_discard(h);
    return st;
  }
  char sum[512];
  snprintf(sum, sizeof sum, "backend %s: %lld passed, %lld failed, %lld skipped; %d of %d items failed",
           rs_cf_backend_name(b), (long long)t[0], (long long)t[1], (long long)t[2], r->failed, r->n);
  return rs_html_close(h, sum);
}

rs_status rs_cf_write_json(const char *path, const rs_conform_opts *o, const rs_cf_backend *b,
                           const rs_cf_result *r) {
  cJSON *root = cJSON_CreateObject(), *items = cJSON_CreateArray(), *suites = cJSON_CreateObject();
  if (!root || !items || !suites) {
    cJSON_Delete(root), cJSON_Delete(items), cJSON_Delete(suites);
    return rs_fail(RS_ERR_NOMEM, "--json: out of memory");
  }
  cJSON_AddStringToObject(root, "backend", rs_cf_backend_name(b));
  cJSON_AddStringToObject(root, "spec", rs_cf_backend_spec(b));
  cJSON_AddNumberToObject(root, "seed", (double)o->seed);
  cJSON_AddNumberToObject(root, "cases", (double)o->cases);
  int64_t tot[3] = {0, 0, 0};
  for (unsigned s = 1; s <= RS_CF_SUITE_CKPT; s <<= 1) {
    if (!(o->suites & s)) continue;
    int64_t t[3] = {0, 0, 0};
    for (int i = 0; i < r->n; i++)
      if (r->item[i].suite == s) t[0] += r->item[i].pass, t[1] += r->item[i].fail, t[2] += r->item[i].skip;
    cJSON *js = cJSON_CreateObject();
    cJSON_AddNumberToObject(js, "pass", (double)t[0]);
    cJSON_AddNumberToObject(js, "fail", (double)t[1]);
    cJSON_AddNumberToObject(js, "skip", (double)t[2]);
    cJSON_AddStringToObject(js, "status", t[1] ? "failed" : t[0] ? "passed" : "skipped");
    cJSON_AddItemToObject(suites, rs_cf_suite_name(s), js);
    for (int k = 0; k < 3; k++) tot[k] += t[k];
  }
  for (int i = 0; i < r->n; i++) {
    const rs_cf_item *it = &r->item[i];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "suite", rs_cf_suite_name(it->suite));
    cJSON_AddStringToObject(j, "kind", it->fixture ? "fixture" : "property");
    cJSON_AddStringToObject(j, "name", it->name);
    cJSON_AddNumberToObject(j, "pass", (double)it->pass);
    cJSON_AddNumberToObject(j, "fail", (double)it->fail);
    cJSON_AddNumberToObject(j, "skip", (double)it->skip);
    cJSON_AddNumberToObject(j, "seconds", it->seconds);
    if (it->message[0]) cJSON_AddStringToObject(j, "message", it->message);
    if (it->replay[0]) cJSON_AddStringToObject(j, "replay", it->replay);
    cJSON_AddItemToArray(items, j);
  }
  cJSON_AddNumberToObject(root, "pass", (double)tot[0]);
  cJSON_AddNumberToObject(root, "fail", (double)tot[1]);
  cJSON_AddNumberToObject(root, "skip", (double)tot[2]);
  cJSON_AddNumberToObject(root, "failed_items", r->failed);
  cJSON_AddNumberToObject(root, "timeouts", (double)r->timeouts);
  cJSON_AddBoolToObject(root, "stopped_on_timeouts", r->stopped);
  cJSON_AddNumberToObject(root, "max_skip_share", o->max_skip_share);
  cJSON_AddNumberToObject(root, "max_timeouts", (double)o->max_timeouts);
  cJSON_AddItemToObject(root, "suites", suites);
  cJSON_AddItemToObject(root, "items", items);
  /* the runner object of each suite's campaign (props/runner.h), in suite order; "runner" too when
   * one campaign ran, so `reshard report merge` adds up the --shard K/N reports of one suite */
  cJSON *runners = cJSON_AddArrayToObject(root, "runners");
  const cJSON *only = NULL;
  int nrun = 0;
  for (int k = 0; k < 4; k++)
    if (r->runner[k]) {
      cJSON_AddItemToArray(runners, cJSON_Duplicate(r->runner[k], 1));
      only = r->runner[k];
      nrun++;
    }
  if (nrun == 1) cJSON_AddItemToObject(root, "runner", cJSON_Duplicate(only, 1));
  return rs__report_json_write(root, path);
}
