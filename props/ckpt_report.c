/* ckpt_report.c - JUnit XML and JSON reports of `reshard ckpt check`, for CI pipelines that gate
 * on it (the same shapes as the redistribute campaign's reports, through props/report.c's JUnit
 * writer). --impl ref reports the reference's properties, --impl opt the ckpt_opt cross property,
 * --impl both all of them in one file. */
#include <stdio.h>
#include "core/json.h"
#include "props/ckpt.h"
#include "props/ckpt_opt.h"
#include "props/report.h"

/* the shrunk failure of ckpt_opt (a crash of a worker has none: what the console said) */
static const char *opt_failure(const rs_ckpt_opt_campaign_result *opt, char *buf, size_t cap) {
  if (opt->message[0]) return opt->message;
  snprintf(buf, cap, "ckpt_opt failed %lld of %lld cases (the shrunk case and its fixture are on the console)",
           (long long)opt->fail, (long long)opt->cases);
  return buf;
}

/* failures of the campaign: failed properties, a worker's crash */
static int opt_failed(const rs_ckpt_campaign_result *r, const rs_ckpt_opt_campaign_result *opt) {
  return opt && (opt->fail != 0 || (!r && opt->crashed));
}

rs_status rs_ckpt_report_junit(const char *path, const rs_ckpt_campaign *o, const rs_ckpt_campaign_result *r,
                               const rs_ckpt_opt_campaign_result *opt) {
  int tests = 0, failed = 0, skipped = 0;
  double seconds = 0;
  if (r) {
    tests += RS_CKPT_PROP_COUNT;
    failed += r->failed;
    seconds += r->seconds;
    for (int p = 0; p < RS_CKPT_PROP_COUNT; ++p) skipped += r->pass[p] == 0 && r->fail[p] == 0;
  }
  if (opt) {
    tests++;
    failed += opt_failed(r, opt);
    skipped += opt->pass == 0 && opt->fail == 0;
    seconds += opt->seconds;
  }
  FILE *f = rs__junit_open(path, "reshard.ckpt", tests, failed, skipped, seconds);
  if (!f) return RS_ERR_IO;
  fprintf(f, "  <properties><property name=\"seed\" value=\"%llu\"/>"
             "<property name=\"cases\" value=\"%lld\"/></properties>\n",
          (unsigned long long)o->seed, (long long)(r ? r->cases : opt->cases));
  if (r)
    for (int p = 0; p < RS_CKPT_PROP_COUNT; ++p)
      rs__junit_property(f, "reshard.ckpt", rs_ckpt_prop_name((rs_ckpt_prop)p), r->fail[p] ? r->message[p] : NULL,
                         "reshard ckpt replay", r->fixture[p], r->pass[p] == 0);
  if (opt) {
    char m[160];
    rs__junit_property(f, "reshard.ckpt", "ckpt_opt", opt->fail ? opt_failure(opt, m, sizeof m) : NULL,
                       "reshard ckpt replay", opt->fixture, opt->pass == 0);
  }
  return rs__junit_close(f, path);
}

static cJSON *counts(int64_t pass, int64_t skip, int64_t fail) {
  cJSON *s = cJSON_CreateObject();
  char b[32];
  snprintf(b, sizeof b, "%lld", (long long)pass);
  cJSON_AddRawToObject(s, "pass", b);
  snprintf(b, sizeof b, "%lld", (long long)skip);
  cJSON_AddRawToObject(s, "skip", b);
  snprintf(b, sizeof b, "%lld", (long long)fail);
  cJSON_AddRawToObject(s, "fail", b);
  return s;
}

rs_status rs_ckpt_report_json(const char *path, const rs_ckpt_campaign *o, const rs_ckpt_campaign_result *r,
                              const rs_ckpt_opt_campaign_result *opt) {
  cJSON *root = cJSON_CreateObject(), *props = cJSON_CreateObject(), *fails = cJSON_CreateArray();
  char b[32];
  snprintf(b, sizeof b, "%llu", (unsigned long long)o->seed);
  cJSON_AddRawToObject(root, "seed", b);
  cJSON_AddStringToObject(root, "impl", r && opt ? "both" : r ? "ref" : "opt");
  snprintf(b, sizeof b, "%lld", (long long)(r ? r->cases : opt->cases));
  cJSON_AddRawToObject(root, "cases", b);
  cJSON_AddNumberToObject(root, "seconds", (r ? r->seconds : 0) + (opt ? opt->seconds : 0));
  cJSON_AddNumberToObject(root, "failed", (r ? r->failed : 0) + opt_failed(r, opt));
  if (r)
    for (int p = 0; p < RS_CKPT_PROP_COUNT; ++p) {
      cJSON_AddItemToObject(props, rs_ckpt_prop_name((rs_ckpt_prop)p), counts(r->pass[p], r->skip[p], r->fail[p]));
      if (r->fail[p]) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "property", rs_ckpt_prop_name((rs_ckpt_prop)p));
        cJSON_AddStringToObject(x, "message", r->message[p]);
        cJSON_AddStringToObject(x, "fixture", r->fixture[p]);
        cJSON_AddItemToArray(fails, x);
      }
    }
  if (opt) {
    cJSON *s = counts(opt->pass, opt->skip, opt->fail);
    snprintf(b, sizeof b, "%lld", (long long)opt->cases);
    cJSON_AddRawToObject(s, "cases", b);
    cJSON_AddItemToObject(props, "ckpt_opt", s);
    if (opt->fail) {
      char m[160];
      cJSON *x = cJSON_CreateObject();
      cJSON_AddStringToObject(x, "property", "ckpt_opt");
      cJSON_AddStringToObject(x, "message", opt_failure(opt, m, sizeof m));
      cJSON_AddStringToObject(x, "fixture", opt->fixture);
      cJSON_AddItemToArray(fails, x);
    }
  }
  cJSON_AddItemToObject(root, "properties", props);
  cJSON_AddItemToObject(root, "failures", fails);
  /* the runner's object: what `reshard report merge` adds up over the shards of one campaign */
  cJSON_AddItemToObject(root, "runner", rs__ckpt_runner_json(o, r, opt));
  return rs__report_json_write(root, path);
}
