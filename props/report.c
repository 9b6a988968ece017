/* report.c - what a campaign tells people and machines: a live progress line on a terminal, the
 * end summary (with the rate), JUnit XML for CI, a JSON summary, and regression fixtures with the
 * command that replays them. */
#define _POSIX_C_SOURCE 200809L
#include "report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

double rs_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void rs_progress_init(rs_progress *p, int enabled) {
  p->on = enabled && isatty(2);
  p->last = 0;
}

void rs_progress_update(rs_progress *p, int64_t cases, double elapsed, int failures, int force) {
  if (!p->on) return;
  if (!force && elapsed - p->last < 0.5) return;
  p->last = elapsed;
  fprintf(stderr, "\r  %lld cases  %.0f cases/s  %d failing propert%s   ", (long long)cases,
          elapsed > 0 ? (double)cases / elapsed : 0.0, failures, failures == 1 ? "y" : "ies");
  fflush(stderr);
}

void rs_progress_end(rs_progress *p) {
  if (p->on && p->last > 0) fprintf(stderr, "\n");
}

/* Feature coverage: cases per feature, a "!" on a required feature never produced. */
void rs_report_features(FILE *f, const rs_campaign_result *r) {
  fprintf(f, "features (valid cases exercising each; * = required from %d cases):\n", RS_FEATURE_MIN_CASES);
  int col = 0;
  for (int i = 0; i < rs_feature_count(); i++) {
    char cell[64];
    snprintf(cell, sizeof cell, "%s%s %lld", rs_feature_name(i), r->feature_required[i] ? "*" : "",
             (long long)r->feature[i]);
    fprintf(f, "  %-30s", cell);
    if (++col == 3) {
      fputc('\n', f);
      col = 0;
    }
  }
  if (col) fputc('\n', f);
  if (r->features_missing) {
    fprintf(f, "FAIL feature coverage: %d required feature(s) under their minimum count (rs_feature_gate):",
            r->features_missing);
    for (int i = 0; i < rs_feature_count(); i++)
      if (r->feature[i] < r->feature_min[i])
        fprintf(f, " %s %lld < %lld", rs_feature_name(i), (long long)r->feature[i], (long long)r->feature_min[i]);
    fputc('\n', f);
  }
}

void rs_report_summary(FILE *f, const rs_campaign_opts *o, const rs_campaign_result *r,
                       const int *enabled) {
  fprintf(f, "%-20s %10s %8s %10s\n", "property", "pass", "fail", "skip");
  for (int i = 0; i < RS_PROP_COUNT; i++) {
    if (!enabled[i]) continue;
    const rs_prop_stats *s = &r->prop[i];
    fprintf(f, "%-20s %10lld %8lld %10lld%s\n", rs_prop_name((rs_prop_id)i), (long long)s->pass,
            (long long)s->fail, (long long)s->skip, s->fail ? "  FAILED" : "");
  }
  rs_report_features(f, r);
  double rate = r->seconds > 0 ? (double)r->cases / r->seconds : 0;
  double cpu_rate = r->cpu_seconds > 0 ? (double)r->cases / r->cpu_seconds : 0;
  fprintf(f, "seed %llu: %lld cases in %.2f s (%.0f cases/s; %.0f per CPU second), %d failing propert%s\n",
          (unsigned long long)o->seed, (long long)r->cases, r->seconds, rate, cpu_rate, r->failed,
          r->failed == 1 ? "y" : "ies");
  if (r->partial_cases || r->redraws)
    fprintf(f, "values: %lld of %lld Partial cases with order values (%.0f%%); %lld cases redrawn (dtype "
            "could not hold exact values)\n", (long long)r->order_cases, (long long)r->partial_cases,
            r->partial_cases ? 100.0 * (double)r->order_cases / (double)r->partial_cases : 0.0,
            (long long)r->redraws);
  if (r->order_share_low)
    fprintf(f, "FAIL feature coverage: order values on %lld of %lld Partial cases, below 3/5 of the %d%% "
            "asked (--order-share)\n", (long long)r->order_cases, (long long)r->partial_cases, o->gen.order_share);
}

/* XML text or attribute value: markup characters escaped, control characters other than tab and
 * line feed dropped (XML 1.0 cannot hold them), and bytes of invalid UTF-8 replaced by '?' so a
 * parser never rejects the file. */
static void xml_out(FILE *f, const char *s, int attr);
void rs__xml_escape(FILE *f, const char *s) { xml_out(f, s, 1); }
void rs__xml_text(FILE *f, const char *s) { xml_out(f, s, 0); }

static void xml_out(FILE *f, const char *s, int attr) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned char c = *p;
    int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    int ok = len > 0 && !(len == 2 && c < 0xC2);
    for (int k = 1; ok && k < len; k++) ok = (p[k] & 0xC0) == 0x80;
    if (!ok) {
      fputc('?', f);
      p++;
      continue;
    }
    if (len > 1) {
      fwrite(p, 1, (size_t)len, f);
      p += len;
      continue;
    }
    switch (c) {
      case '<': fputs("&lt;", f); break;
      case '>': fputs("&gt;", f); break;
      case '&': fputs("&amp;", f); break;
      case '"': fputs(attr ? "&quot;" : "\"", f); break;
      case '\n': fputs(attr ? "&#10;" : "\n", f); break;
      default:
        if (c >= 0x20 || c == '\t') fputc(c, f);
    }
    p++;
  }
}

FILE *rs__junit_open(const char *path, const char *suite, int tests, int failures, int skipped, double seconds) {
  FILE *f = fopen(path, "w");
  if (!f) {
    rs_fail(RS_ERR_IO, "--junit: cannot write %s: %s", path, strerror(errno));
    return NULL;
  }
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"");
  rs__xml_escape(f, suite);
  fprintf(f, "\" tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"%d\" time=\"%.3f\">\n", tests, failures,
          skipped, seconds);
  return f;
}

void rs__junit_property(FILE *f, const char *suite, const char *name, const char *failure, const char *replay,
                        const char *fixture, int skipped) {
  rs_junit_case tc = {suite, name, -1, failure, replay, fixture, skipped ? "no case applied" : NULL};
  rs__junit_testcase(f, &tc);
}

void rs__junit_testcase(FILE *f, const rs_junit_case *tc) {
  const char *failure = tc->failure, *replay = tc->replay, *fixture = tc->fixture;
  fprintf(f, "  <testcase classname=\"");
  rs__xml_escape(f, tc->classname);
  fprintf(f, "\" name=\"");
  rs__xml_escape(f, tc->name);
  if (tc->seconds >= 0) fprintf(f, "\" time=\"%.3f", tc->seconds);
  fprintf(f, "\">");
  if (failure) {
    fprintf(f, "\n    <failure type=\"property\" message=\"");
    rs__xml_escape(f, failure);
    fprintf(f, "\">");
    if (fixture && fixture[0]) {
      /* the command first (what a person copies), then the shrunk case itself, so the report stands
       * alone when the regression directory is not kept as an artifact */
      fprintf(f, "replay: ");
      rs__xml_text(f, replay);
      fputc(' ', f);
      rs__xml_text(f, fixture);
      struct stat sb;
      char *text = lstat(fixture, &sb) == 0 && S_ISREG(sb.st_mode) ? rs_read_text(fixture) : NULL;
      if (text) {
        fputs("\nshrunk case:\n", f);
        rs__xml_text(f, text);
        free(text);
      }
      rs_clear_error();
    }
    fprintf(f, "</failure>\n  ");
  } else if (tc->skipped) {
    fprintf(f, "<skipped message=\"");
    rs__xml_escape(f, tc->skipped);
    fprintf(f, "\"/>");
  }
  fprintf(f, "</testcase>\n");
}

rs_status rs__junit_close(FILE *f, const char *path) {
  fprintf(f, "</testsuite>\n</testsuites>\n");
  if (fclose(f) != 0) return rs_fail(RS_ERR_IO, "--junit: cannot write %s", path);
  return RS_OK;
}

rs_status rs_report_junit(const char *path, const rs_campaign_result *r, const int *enabled) {
  int n = 0, skipped = 0;
  for (int i = 0; i < RS_PROP_COUNT; i++)
    if (enabled[i]) {
      n++;
      skipped += r->prop[i].pass == 0 && r->prop[i].fail == 0;
    }
  /* one more testcase: the feature coverage, so a CI that reads testcases sees that failure too */
  int cov_skipped = !r->features_missing && r->cases < RS_FEATURE_MIN_CASES;
  FILE *f = rs__junit_open(path, "reshard.props", n + 1, r->failed, skipped + cov_skipped, r->seconds);
  if (!f) return RS_ERR_IO;
  for (int i = 0; i < RS_PROP_COUNT; i++) {
    if (!enabled[i]) continue;
    const rs_prop_stats *s = &r->prop[i];
    rs__junit_property(f, "reshard.props", rs_prop_name((rs_prop_id)i), s->fail ? s->message : NULL,
                       "reshard replay", s->fixture, s->pass == 0);
  }
  fprintf(f, "  <testcase classname=\"reshard.props\" name=\"feature_coverage\">");
  if (r->features_missing) {
    fprintf(f, "\n    <failure type=\"coverage\" message=\"%d required feature(s) under their minimum count:",
            r->features_missing);
    for (int i = 0; i < rs_feature_count(); i++)
      if (r->feature[i] < r->feature_min[i])
        fprintf(f, " %s %lld &lt; %lld", rs_feature_name(i), (long long)r->feature[i], (long long)r->feature_min[i]);
    fprintf(f, "\">the generator stopped producing what its options allow</failure>\n  ");
  } else if (cov_skipped) {
    fprintf(f, "<skipped message=\"judged from %d cases\"/>", RS_FEATURE_MIN_CASES);
  }
  fprintf(f, "</testcase>\n");
  return rs__junit_close(f, path);
}

rs_status rs_report_json(const char *path, const rs_campaign_opts *o, const rs_campaign_result *r,
                         const int *enabled) {
  cJSON *root = cJSON_CreateObject(), *props = cJSON_CreateObject(), *fails = cJSON_CreateArray();
  char buf[64];
  snprintf(buf, sizeof buf, "%llu", (unsigned long long)o->seed);
  cJSON_AddNumberToObject(root, "seed", (double)o->seed);
  cJSON_AddStringToObject(root, "seed_text", buf);
  cJSON_AddNumberToObject(root, "cases", (double)r->cases);
  cJSON_AddNumberToObject(root, "partial_cases", (double)r->partial_cases);
  cJSON_AddNumberToObject(root, "order_cases", (double)r->order_cases);
  cJSON_AddNumberToObject(root, "redrawn_cases", (double)r->redraws);
  cJSON_AddBoolToObject(root, "order_share_low", r->order_share_low);
  cJSON_AddNumberToObject(root, "seconds", r->seconds);
  cJSON_AddNumberToObject(root, "cases_per_second", r->seconds > 0 ? (double)r->cases / r->seconds : 0);
  cJSON_AddNumberToObject(root, "cpu_seconds", r->cpu_seconds);
  cJSON_AddStringToObject(root, "impl", o->impl == RS_IMPL_OPT ? "opt" : "ref");
  cJSON_AddNumberToObject(root, "failed", r->failed);
  cJSON_AddNumberToObject(root, "first_failure_case", (double)r->first_failure_case);
  cJSON *feat = cJSON_AddObjectToObject(root, "features"), *miss = cJSON_AddArrayToObject(root, "features_missing");
  cJSON *req = cJSON_AddArrayToObject(root, "features_required");
  cJSON *fmin = cJSON_AddObjectToObject(root, "features_min");
  for (int i = 0; i < rs_feature_count(); i++) {
    cJSON_AddNumberToObject(feat, rs_feature_name(i), (double)r->feature[i]);
    if (r->feature_required[i]) cJSON_AddItemToArray(req, cJSON_CreateString(rs_feature_name(i)));
    if (r->feature[i] < r->feature_min[i]) cJSON_AddItemToArray(miss, cJSON_CreateString(rs_feature_name(i)));
    if (r->feature_min[i] > 0) cJSON_AddNumberToObject(fmin, rs_feature_name(i), (double)r->feature_min[i]);
  }
  for (int i = 0; i < RS_PROP_COUNT; i++) {
    if (!enabled[i]) continue;
    const rs_prop_stats *s = &r->prop[i];
    cJSON *p = cJSON_CreateObject();
    cJSON_AddNumberToObject(p, "pass", (double)s->pass);
    cJSON_AddNumberToObject(p, "fail", (double)s->fail);
    cJSON_AddNumberToObject(p, "skip", (double)s->skip);
    cJSON_AddItemToObject(props, rs_prop_name((rs_prop_id)i), p);
    if (s->fail) {
      cJSON *x = cJSON_CreateObject();
      char cmd[600];
      snprintf(cmd, sizeof cmd, "%s %s", o->replay ? o->replay : "reshard replay", s->fixture);
      cJSON_AddStringToObject(x, "property", rs_prop_name((rs_prop_id)i));
      cJSON_AddStringToObject(x, "message", s->message);
      cJSON_AddStringToObject(x, "fixture", s->fixture);
      cJSON_AddStringToObject(x, "replay", cmd);
      cJSON_AddItemToArray(fails, x);
    }
  }
  cJSON_AddItemToObject(root, "properties", props);
  cJSON_AddItemToObject(root, "failures", fails);
  cJSON_AddItemToObject(root, "runner", rs__campaign_runner_json(o, r, enabled));
  return rs__report_json_write(root, path);
}

rs_status rs__report_json_write(cJSON *root, const char *path) {
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) return rs_fail(RS_ERR_NOMEM, "--json: out of memory");
  FILE *f = fopen(path, "w");
  if (!f) {
    cJSON_free(text);
    return rs_fail(RS_ERR_IO, "--json: cannot write %s: %s", path, strerror(errno));
  }
  int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
  cJSON_free(text);
  if (fclose(f) != 0 || !ok) return rs_fail(RS_ERR_IO, "--json: cannot write %s", path);
  return RS_OK;
}
