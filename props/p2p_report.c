/* p2p_report.c - the reports of a `reshard p2p check` campaign for CI: a JSON summary (per property
 * pass/fail/skip, the case of the first failure, the message and the saved model, and the runner's
 * object) and a JUnit XML file (one test case per property that ran, and one for a crashed worker). */
#include <stdio.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "props/p2p.h"
#include "props/report.h"

rs_status rs_p2p_report_json(const char *path, const rs_p2p_campaign *o, const rs_p2p_campaign_result *r,
                             const char *impl, const char *transport) {
  cJSON *x = cJSON_CreateObject(), *props = cJSON_CreateArray();
  if (!x || !props) {
    cJSON_Delete(x);
    cJSON_Delete(props);
    return rs_fail(RS_ERR_NOMEM, "report: out of memory");
  }
  char seed[32];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
  cJSON_AddItemToObject(x, "seed", cJSON_CreateRaw(seed));
  cJSON_AddStringToObject(x, "impl", impl);
  cJSON_AddStringToObject(x, "transport", transport);
  cJSON_AddNumberToObject(x, "cases", (double)r->cases);
  cJSON_AddNumberToObject(x, "seconds", r->seconds);
  cJSON_AddNumberToObject(x, "failed", r->failed);
  int64_t first = 0;
  for (int p = 0; p < RS_P2P_PROP_COUNT; ++p) {
    if (!r->pass[p] && !r->fail[p] && !r->skip[p]) continue;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", rs_p2p_prop_name((rs_p2p_prop)p));
    cJSON_AddNumberToObject(e, "pass", (double)r->pass[p]);
    cJSON_AddNumberToObject(e, "fail", (double)r->fail[p]);
    cJSON_AddNumberToObject(e, "skip", (double)r->skip[p]);
    if (r->fail[p]) {
      cJSON_AddNumberToObject(e, "first_failure_case", (double)r->caught_at[p]);
      cJSON_AddStringToObject(e, "message", r->message[p]);
      if (r->fixture[p][0]) cJSON_AddStringToObject(e, "fixture", r->fixture[p]);
      if (!first || r->caught_at[p] < first) first = r->caught_at[p];
    }
    cJSON_AddItemToArray(props, e);
  }
  cJSON_AddItemToObject(x, "properties", props);
  if (r->run.crashed) {
    cJSON_AddStringToObject(x, "crash", r->run.crash_msg);
    if (!first || r->run.crash_index + 1 < first) first = r->run.crash_index + 1;
  }
  if (first) cJSON_AddNumberToObject(x, "first_failure_case", (double)first);
  /* the runner's part (the same in every report; `reshard report merge` adds shards up) */
  cJSON_AddItemToObject(x, "runner", rs_p2p_runner_json(o, r));
  char *text = cJSON_Print(x);
  cJSON_Delete(x);
  if (!text) return rs_fail(RS_ERR_NOMEM, "report: out of memory");
  FILE *f = fopen(path, "w");
  rs_status st = f ? RS_OK : rs_fail(RS_ERR_IO, "--json: cannot write '%s'", path);
  if (f) {
    fputs(text, f);
    fputc('\n', f);
    if (fclose(f)) st = rs_fail(RS_ERR_IO, "--json: cannot write '%s'", path);
  }
  cJSON_free(text);
  return st;
}

rs_status rs_p2p_report_junit(const char *path, const rs_p2p_campaign_result *r) {
  int n = r->run.crashed, skipped = 0;
  for (int p = 0; p < RS_P2P_PROP_COUNT; ++p) {
    n += r->pass[p] || r->fail[p] || r->skip[p];
    skipped += !r->pass[p] && !r->fail[p] && r->skip[p];
  }
  FILE *f = rs__junit_open(path, "reshard.p2p", n, r->failed, skipped, r->seconds);
  if (!f) return RS_ERR_IO;
  for (int p = 0; p < RS_P2P_PROP_COUNT; ++p) {
    if (!r->pass[p] && !r->fail[p] && !r->skip[p]) continue;
    char msg[sizeof r->message[p] + 64];
    snprintf(msg, sizeof msg, "case %lld of the campaign: %s", (long long)r->caught_at[p], r->message[p]);
    rs__junit_property(f, "reshard.p2p", rs_p2p_prop_name((rs_p2p_prop)p), r->fail[p] ? msg : NULL,
                       "reshard p2p run", r->fixture[p], !r->pass[p]);
  }
  if (r->run.crashed) { /* a worker that crashed on a case: that case's outcome, no property's */
    char msg[sizeof r->run.crash_msg + 96];
    snprintf(msg, sizeof msg, "%s (replay case %lld alone with --jobs 1)", r->run.crash_msg,
             (long long)r->run.crash_index + 1);
    rs__junit_property(f, "reshard.p2p", "crash", msg, "", NULL, 0);
  }
  return rs__junit_close(f, path);
}
