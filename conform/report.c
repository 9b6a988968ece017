/* report.c - `reshard conform`'s reports: JUnit XML (a testsuite per suite, a testcase per property
 * campaign and per fixture file; a failure carries the shrunk case's message and the replay
 * command, a skip is <skipped/>) and JSON. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "conform/suite.h"

static void xml_text(FILE *f, const char *s) {
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '<') fputs("&lt;", f);
    else if (ch == '>') fputs("&gt;", f);
    else if (ch == '&') fputs("&amp;", f);
    else if (ch == '"') fputs("&quot;", f);
    else if (ch < 0x20 && ch != '\n' && ch != '\t') fprintf(f, "?");
    else fputc(ch, f);
  }
}

rs_status rs_cf_write_junit(const char *path, const rs_cf_backend *b, const rs_cf_result *r) {
  FILE *f = fopen(path, "w");
  if (!f) return rs_fail(RS_ERR_IO, "--junit: cannot write %s", path);
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"reshard conform ");
  xml_text(f, rs_cf_backend_name(b));
  fprintf(f, "\">\n");
  for (unsigned s = 1; s <= RS_CF_SUITE_CKPT; s <<= 1) {
    int n = 0, fails = 0, skips = 0;
    double secs = 0;
    for (int i = 0; i < r->n; i++)
      if (r->item[i].suite == s) {
        const rs_cf_item *it = &r->item[i];
        n++, fails += it->fail > 0, secs += it->seconds;
        skips += !it->fail && !it->pass && it->skip;
      }
    if (!n) continue;
    fprintf(f, " <testsuite name=\"%s\" tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"%d\" time=\"%.3f\">\n",
            rs_cf_suite_name(s), n, fails, skips, secs);
    for (int i = 0; i < r->n; i++) {
      const rs_cf_item *it = &r->item[i];
      if (it->suite != s) continue;
      fprintf(f, "  <testcase classname=\"conform.%s.%s\" name=\"", rs_cf_suite_name(s), it->fixture ? "fixture" : "property");
      xml_text(f, it->name);
      fprintf(f, "\" time=\"%.3f\">", it->seconds);
      if (it->fail) {
        fprintf(f, "\n   <failure message=\"");
        xml_text(f, it->message);
        fprintf(f, "\">");
        xml_text(f, it->message);
        if (it->replay[0]) {
          fprintf(f, "\nreplay: ");
          xml_text(f, it->replay);
        }
        fprintf(f, "</failure>\n  ");
      } else if (!it->pass && it->skip) {
        fprintf(f, "\n   <skipped message=\"");
        xml_text(f, it->message);
        fprintf(f, "\"/>\n  ");
      }
      fprintf(f, "<system-out>pass %lld fail %lld skip %lld</system-out></testcase>\n", (long long)it->pass,
              (long long)it->fail, (long long)it->skip);
    }
    fprintf(f, " </testsuite>\n");
  }
  fprintf(f, "</testsuites>\n");
  if (fclose(f)) return rs_fail(RS_ERR_IO, "--junit: cannot write %s", path);
  return RS_OK;
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
  cJSON_AddItemToObject(root, "suites", suites);
  cJSON_AddItemToObject(root, "items", items);
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) return rs_fail(RS_ERR_NOMEM, "--json: out of memory");
  FILE *f = fopen(path, "w");
  rs_status st = RS_OK;
  if (!f || fputs(text, f) < 0 || fputc('\n', f) < 0) st = rs_fail(RS_ERR_IO, "--json: cannot write %s", path);
  if (f && fclose(f) && !st) st = rs_fail(RS_ERR_IO, "--json: cannot write %s", path);
  free(text);
  return st;
}
