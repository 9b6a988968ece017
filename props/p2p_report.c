/* p2p_report.c - the reports of a `reshard p2p check` campaign for CI: a JSON summary (per property
 * pass/fail/skip, the case of the first failure, the message and the saved model) and a JUnit XML
 * file (one test case per property that ran). */
#include <stdio.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "props/p2p.h"

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
  if (first) cJSON_AddNumberToObject(x, "first_failure_case", (double)first);
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

static void xml_text(FILE *f, const char *s) {
  for (; *s; ++s) {
    switch (*s) {
      case '&': fputs("&amp;", f); break;
      case '<': fputs("&lt;", f); break;
      case '>': fputs("&gt;", f); break;
      case '"': fputs("&quot;", f); break;
      default:
        if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t') fputc(*s, f);
    }
  }
}

rs_status rs_p2p_report_junit(const char *path, const rs_p2p_campaign_result *r) {
  FILE *f = fopen(path, "w");
  if (!f) return rs_fail(RS_ERR_IO, "--junit: cannot write '%s'", path);
  int n = 0;
  for (int p = 0; p < RS_P2P_PROP_COUNT; ++p) n += r->pass[p] || r->fail[p] || r->skip[p];
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  fprintf(f, "<testsuite name=\"reshard p2p check\" tests=\"%d\" failures=\"%d\" time=\"%.3f\">\n", n, r->failed,
          r->seconds);
  for (int p = 0; p < RS_P2P_PROP_COUNT; ++p) {
    if (!r->pass[p] && !r->fail[p] && !r->skip[p]) continue;
    fprintf(f, "  <testcase classname=\"p2p\" name=\"%s\">", rs_p2p_prop_name((rs_p2p_prop)p));
    if (r->fail[p]) {
      fprintf(f, "\n    <failure message=\"");
      xml_text(f, r->message[p]);
      fprintf(f, "\">case %lld of the campaign", (long long)r->caught_at[p]);
      if (r->fixture[p][0]) {
        fprintf(f, "; replay: reshard p2p run ");
        xml_text(f, r->fixture[p]);
      }
      fprintf(f, "</failure>\n  ");
    } else if (!r->pass[p]) {
      fprintf(f, "<skipped/>");
    }
    fprintf(f, "</testcase>\n");
  }
  fprintf(f, "</testsuite>\n");
  return fclose(f) ? rs_fail(RS_ERR_IO, "--junit: cannot write '%s'", path) : RS_OK;
}
