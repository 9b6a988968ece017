/* ckpt_report.c - JUnit XML and JSON reports of `reshard ckpt check`, for CI pipelines that gate
 * on it (the same shapes as the redistribute campaign's reports, through props/report.c's JUnit
 * writer). */
#include <stdio.h>
#include "core/json.h"
#include "props/ckpt.h"
#include "props/report.h"

rs_status rs_ckpt_report_junit(const char *path, const rs_ckpt_campaign *o, const rs_ckpt_campaign_result *r) {
  int skipped = 0;
  for (int p = 0; p < RS_CKPT_PROP_COUNT; ++p) skipped += r->pass[p] == 0 && r->fail[p] == 0;
  FILE *f = rs__junit_open(path, "reshard.ckpt", RS_CKPT_PROP_COUNT, r->failed, skipped, r->seconds);
  if (!f) return RS_ERR_IO;
  fprintf(f, "  <properties><property name=\"seed\" value=\"%llu\"/>"
             "<property name=\"cases\" value=\"%lld\"/></properties>\n",
          (unsigned long long)o->seed, (long long)r->cases);
  for (int p = 0; p < RS_CKPT_PROP_COUNT; ++p)
    rs__junit_property(f, "reshard.ckpt", rs_ckpt_prop_name((rs_ckpt_prop)p), r->fail[p] ? r->message[p] : NULL,
                       "reshard ckpt replay", r->fixture[p], r->pass[p] == 0);
  return rs__junit_close(f, path);
}

rs_status rs_ckpt_report_json(const char *path, const rs_ckpt_campaign *o, const rs_ckpt_campaign_result *r) {
  cJSON *root = cJSON_CreateObject(), *props = cJSON_CreateObject(), *fails = cJSON_CreateArray();
  char b[32];
  snprintf(b, sizeof b, "%llu", (unsigned long long)o->seed);
  cJSON_AddRawToObject(root, "seed", b);
  snprintf(b, sizeof b, "%lld", (long long)r->cases);
  cJSON_AddRawToObject(root, "cases", b);
  cJSON_AddNumberToObject(root, "seconds", r->seconds);
  cJSON_AddNumberToObject(root, "failed", r->failed);
  for (int p = 0; p < RS_CKPT_PROP_COUNT; ++p) {
    cJSON *s = cJSON_CreateObject();
    snprintf(b, sizeof b, "%lld", (long long)r->pass[p]);
    cJSON_AddRawToObject(s, "pass", b);
    snprintf(b, sizeof b, "%lld", (long long)r->skip[p]);
    cJSON_AddRawToObject(s, "skip", b);
    snprintf(b, sizeof b, "%lld", (long long)r->fail[p]);
    cJSON_AddRawToObject(s, "fail", b);
    cJSON_AddItemToObject(props, rs_ckpt_prop_name((rs_ckpt_prop)p), s);
    if (r->fail[p]) {
      cJSON *x = cJSON_CreateObject();
      cJSON_AddStringToObject(x, "property", rs_ckpt_prop_name((rs_ckpt_prop)p));
      cJSON_AddStringToObject(x, "message", r->message[p]);
      cJSON_AddStringToObject(x, "fixture", r->fixture[p]);
      cJSON_AddItemToArray(fails, x);
    }
  }
  cJSON_AddItemToObject(root, "properties", props);
  cJSON_AddItemToObject(root, "failures", fails);
  return rs__report_json_write(root, path);
}
