/* runner_json.c - the runner's part of every campaign report (the "runner" JSON object: counts,
 * first failing indices, features, counters, share gates, the verdict) and `reshard report merge`,
 * which adds up the objects of the shards of one campaign and judges the sums again, so the merged
 * verdict is the one an unsharded run would give. */
#define _GNU_SOURCE
#include "runner.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/json.h"
#include "core/last_status.h"
#include "props/props.h"
#include "report.h"
#include "report_html.h"

int rs_run_judge(const rs_run_names *nm, const rs_run_ops *ops, const rs_run_result *r, int64_t *min,
                 int *gates_failed, const char **failed_gate) {
  int missing = rs_feature_gate(r->cases, nm->judge_from, ops->nfeatures, r->feature, nm->rate, min);
  int g = 0;
  for (int i = 0; i < nm->ngates; i++) {
    const rs_run_gate *gt = &nm->gate[i];
    int64_t part = r->counter[gt->part], total = r->counter[gt->total];
    if (total < gt->judge_from || total <= 0) continue;
    double share = (double)part / (double)total;
    int bad = gt->is_min ? share < gt->share : share > gt->share;
    if (bad && failed_gate) failed_gate[g] = gt->name;
    g += bad;
  }
  if (gates_failed) *gates_failed = g;
  return missing;
}

/* one gate as JSON (merge reads it back) */
static void gate_json(cJSON *arr, const rs_run_gate *g, const rs_run_result *r) {
  cJSON *x = cJSON_CreateObject();
  int64_t part = r->counter[g->part], total = r->counter[g->total];
  cJSON_AddStringToObject(x, "name", g->name);
  cJSON_AddNumberToObject(x, "part", (double)part);
  cJSON_AddNumberToObject(x, "total", (double)total);
  cJSON_AddNumberToObject(x, "share", g->share);
  cJSON_AddBoolToObject(x, "is_min", g->is_min);
  cJSON_AddNumberToObject(x, "judge_from", (double)g->judge_from);
  cJSON_AddItemToArray(arr, x);
}

static cJSON *json_of(const char *verb, uint64_t seed, int64_t cases_asked, double seconds_asked, int k, int n,
                      const rs_run_ops *ops, const rs_run_names *nm, const rs_run_result *r,
                      const rs_run_failure_note *notes) {
  cJSON *o = cJSON_CreateObject();
  char buf[64];
  cJSON_AddStringToObject(o, "verb", verb);
  snprintf(buf, sizeof buf, "%llu", (unsigned long long)seed);
  cJSON_AddStringToObject(o, "seed", buf);
  cJSON_AddNumberToObject(o, "cases_asked", (double)cases_asked);
  cJSON_AddNumberToObject(o, "seconds_asked", seconds_asked);
  snprintf(buf, sizeof buf, "%d/%d", k, n);
  cJSON_AddStringToObject(o, "shard", buf);
  cJSON_AddNumberToObject(o, "cases", (double)r->cases);
  cJSON_AddNumberToObject(o, "end_index", (double)r->end_index);
  cJSON *props = cJSON_AddObjectToObject(o, "properties");
  for (int p = 0; p < ops->nprops; p++) {
    if (!nm->prop[p] || !nm->prop_on[p]) continue;
    cJSON *x = cJSON_AddObjectToObject(props, nm->prop[p]);
    cJSON_AddNumberToObject(x, "pass", (double)r->pass[p]);
    cJSON_AddNumberToObject(x, "fail", (double)r->fail[p]);
    cJSON_AddNumberToObject(x, "skip", (double)r->skip[p]);
    if (r->fail[p]) {
      cJSON_AddNumberToObject(x, "first_fail_index", (double)r->first_fail[p]);
      const rs_run_failure_note *nt = notes ? &notes[p] : NULL;
      cJSON_AddStringToObject(x, "message", nt && nt->message ? nt->message : r->first_msg[p]);
      if (nt && nt->fixture) cJSON_AddStringToObject(x, "fixture", nt->fixture);
      if (nt && nt->replay) cJSON_AddStringToObject(x, "replay", nt->replay);
    }
  }
  int64_t min[RS_RUN_FEATURES];
  int gfail = 0;
  const char *gname[RS_RUN_GATES];
  int missing = rs_run_judge(nm, ops, r, min, &gfail, gname);
  cJSON *fe = cJSON_AddObjectToObject(o, "features");
  cJSON *miss = cJSON_AddArrayToObject(o, "features_missing");
  for (int f = 0; f < ops->nfeatures; f++) {
    cJSON *x = cJSON_AddObjectToObject(fe, nm->feature[f]);
    cJSON_AddNumberToObject(x, "count", (double)r->feature[f]);
    cJSON_AddNumberToObject(x, "rate", nm->rate[f]);
    cJSON_AddNumberToObject(x, "min", (double)min[f]);
    if (r->feature[f] < min[f]) cJSON_AddItemToArray(miss, cJSON_CreateString(nm->feature[f]));
  }
  cJSON_AddNumberToObject(o, "judge_from", (double)nm->judge_from);
  cJSON *co = cJSON_AddObjectToObject(o, "counters");
  for (int c = 0; c < ops->ncounters; c++) cJSON_AddNumberToObject(co, nm->counter[c], (double)r->counter[c]);
  cJSON *ga = cJSON_AddArrayToObject(o, "gates");
  for (int g = 0; g < nm->ngates; g++) gate_json(ga, &nm->gate[g], r);
  cJSON *gf = cJSON_AddArrayToObject(o, "gates_failed");
  for (int g = 0; g < gfail; g++) cJSON_AddItemToArray(gf, cJSON_CreateString(gname[g]));
  if (r->crashed) {
    cJSON_AddNumberToObject(o, "crash_index", (double)r->crash_index);
    cJSON_AddStringToObject(o, "crash", r->crash_msg);
  }
  cJSON_AddBoolToObject(o, "failed", r->failed_props || missing || gfail || r->crashed);
  return o;
}

cJSON *rs_run_json(const rs_run_opts *o, const rs_run_ops *ops, const rs_run_names *nm, const rs_run_result *r,
                   const rs_run_failure_note *notes) {
  return json_of(o->verb, o->seed, o->cases, o->cases > 0 ? 0 : o->seconds, o->shard_n > 1 ? o->shard_k : 1,
                 o->shard_n > 1 ? o->shard_n : 1, ops, nm, r, notes);
}

/* ---- report merge ---- */

typedef struct merged {
  char verb[64], seed[32];
  int64_t cases_asked;
  double seconds_asked;
  int shard_n;
  unsigned char *seen; /* shard K seen */
  rs_run_ops ops;
  rs_run_names nm;
  rs_run_result r;
  char *prop_name[RS_RUN_PROPS], *feature_name[RS_RUN_FEATURES], *counter_name[RS_RUN_COUNTERS];
  char *gate_name[RS_RUN_GATES];
  char *note_msg[RS_RUN_PROPS], *note_fix[RS_RUN_PROPS], *note_replay[RS_RUN_PROPS];
  char *crash;
  const char *crash_file;
} merged;

static void merged_free(merged *m) {
  for (int i = 0; i < RS_RUN_PROPS; i++) free(m->prop_name[i]), free(m->note_msg[i]), free(m->note_fix[i]), free(m->note_replay[i]);
  for (int i = 0; i < RS_RUN_FEATURES; i++) free(m->feature_name[i]);
  for (int i = 0; i < RS_RUN_COUNTERS; i++) free(m->counter_name[i]);
  for (int i = 0; i < RS_RUN_GATES; i++) free(m->gate_name[i]);
  free(m->crash);
  free(m->seen);
}

static rs_status field_err(const char *path, const char *field, const char *what) {
  return rs_fail(RS_ERR_INVALID, "%s: runner.%s: %s", path, field, what);
}

static int64_t num(const cJSON *obj, const char *key, int *bad) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble != floor(x->valuedouble) || x->valuedouble > 9e15) {
    *bad = 1;
    return 0;
  }
  return (int64_t)x->valuedouble;
}

static const char *str(const cJSON *obj, const char *key) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsString(x) ? x->valuestring : NULL;
}

static char *dup(const char *s) { return s ? strdup(s) : NULL; }

/* the names of obj's members, in order, into names[0..max): the first file sets them, the others
 * must have the same */
static rs_status same_names(const char *path, const char *field, const cJSON *obj, char **names, int *n, int max,
                            int first) {
  int i = 0;
  if (!cJSON_IsObject(obj)) return field_err(path, field, "missing or not an object");
  for (const cJSON *x = obj->child; x; x = x->next, i++) {
    if (i >= max) return field_err(path, field, "too many entries");
    if (first) {
      names[i] = dup(x->string);
      if (!names[i]) return rs_fail(RS_ERR_NOMEM, "report merge: out of memory");
    } else if (i >= *n || strcmp(names[i], x->string) != 0) {
      return field_err(path, field, "names differ from the first report's (not the same campaign)");
    }
  }
  if (first) *n = i;
  else if (i != *n) return field_err(path, field, "a different number of entries than the first report's");
  return RS_OK;
}

static rs_status merge_one(merged *m, const char *path, const cJSON *run, int first) {
  int bad = 0;
  const char *verb = str(run, "verb"), *seed = str(run, "seed"), *shard = str(run, "shard");
  if (!verb) return field_err(path, "verb", "missing");
  if (!seed) return field_err(path, "seed", "missing");
  if (!shard) return field_err(path, "shard", "missing");
  int64_t cases_asked = num(run, "cases_asked", &bad);
  const cJSON *sa = cJSON_GetObjectItemCaseSensitive(run, "seconds_asked");
  if (bad) return field_err(path, "cases_asked", "missing or not a count");
  int k, n;
  if (rs_run_parse_shard(shard, &k, &n) != RS_OK) return field_err(path, "shard", "not K/N");
  if (first) {
    snprintf(m->verb, sizeof m->verb, "%s", verb);
    snprintf(m->seed, sizeof m->seed, "%s", seed);
    m->cases_asked = cases_asked;
    m->seconds_asked = cJSON_IsNumber(sa) ? sa->valuedouble : 0;
    m->shard_n = n;
    m->seen = calloc((size_t)n + 1, 1);
    if (!m->seen) return rs_fail(RS_ERR_NOMEM, "report merge: out of memory");
  } else {
    if (strcmp(verb, m->verb)) return rs_fail(RS_ERR_INVALID, "%s: runner.verb: '%s', the first report's is '%s'", path, verb, m->verb);
    if (strcmp(seed, m->seed)) return rs_fail(RS_ERR_INVALID, "%s: runner.seed: %s, the first report's is %s", path, seed, m->seed);
    if (cases_asked != m->cases_asked)
      return rs_fail(RS_ERR_INVALID, "%s: runner.cases_asked: %lld, the first report's is %lld", path, (long long)cases_asked,
                     (long long)m->cases_asked);
    if (n != m->shard_n) return rs_fail(RS_ERR_INVALID, "%s: runner.shard: %s, the first report's shards are of %d", path, shard, m->shard_n);
  }
  if (m->seen[k]) return rs_fail(RS_ERR_INVALID, "%s: runner.shard: %s given twice", path, shard);
  m->seen[k] = 1;
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(run, "properties");
  const cJSON *fe = cJSON_GetObjectItemCaseSensitive(run, "features");
  const cJSON *co = cJSON_GetObjectItemCaseSensitive(run, "counters");
  const cJSON *ga = cJSON_GetObjectItemCaseSensitive(run, "gates");
  rs_status st;
  if ((st = same_names(path, "properties", props, m->prop_name, &m->ops.nprops, RS_RUN_PROPS, first))) return st;
  if ((st = same_names(path, "features", fe, m->feature_name, &m->ops.nfeatures, RS_RUN_FEATURES, first))) return st;
  if ((st = same_names(path, "counters", co, m->counter_name, &m->ops.ncounters, RS_RUN_COUNTERS, first))) return st;
  if (!cJSON_IsArray(ga) || cJSON_GetArraySize(ga) > RS_RUN_GATES) return field_err(path, "gates", "missing or too long");
  int64_t jf = num(run, "judge_from", &bad);
  if (bad) return field_err(path, "judge_from", "missing or not a count");
  if (first) m->nm.judge_from = jf;
  else if (jf != m->nm.judge_from) return field_err(path, "judge_from", "differs from the first report's");
  rs_run_result *r = &m->r;
  int64_t cases = num(run, "cases", &bad), end = num(run, "end_index", &bad);
  if (bad) return field_err(path, "cases", "missing or not a count");
  r->cases += cases;
  if (end > r->end_index) r->end_index = end;
  int p = 0;
  for (const cJSON *x = props->child; x; x = x->next, p++) {
    int64_t pass = num(x, "pass", &bad), fail = num(x, "fail", &bad), skip = num(x, "skip", &bad);
    if (bad) return rs_fail(RS_ERR_INVALID, "%s: runner.properties.%s: pass, fail and skip must be counts", path, x->string);
    r->pass[p] += pass, r->skip[p] += skip;
    m->nm.prop_on[p] = 1;
    if (fail) {
      int64_t fi = num(x, "first_fail_index", &bad);
      if (bad) return rs_fail(RS_ERR_INVALID, "%s: runner.properties.%s.first_fail_index: missing", path, x->string);
      if (!r->fail[p] || fi < r->first_fail[p]) {
        r->first_fail[p] = fi;
        free(m->note_msg[p]), free(m->note_fix[p]), free(m->note_replay[p]);
        m->note_msg[p] = dup(str(x, "message"));
        m->note_fix[p] = dup(str(x, "fixture"));
        m->note_replay[p] = dup(str(x, "replay"));
      }
      r->fail[p] += fail;
    }
  }
  int f = 0;
  for (const cJSON *x = fe->child; x; x = x->next, f++) {
    int64_t c = num(x, "count", &bad);
    const cJSON *rate = cJSON_GetObjectItemCaseSensitive(x, "rate");
    if (bad || !cJSON_IsNumber(rate)) return rs_fail(RS_ERR_INVALID, "%s: runner.features.%s: count and rate required", path, x->string);
    if (first) m->nm.rate[f] = rate->valuedouble;
    else if (rate->valuedouble != m->nm.rate[f])
      return rs_fail(RS_ERR_INVALID, "%s: runner.features.%s.rate: differs from the first report's", path, x->string);
    r->feature[f] += c;
  }
  int c = 0;
  for (const cJSON *x = co->child; x; x = x->next, c++) {
    if (!cJSON_IsNumber(x)) return rs_fail(RS_ERR_INVALID, "%s: runner.counters.%s: not a number", path, x->string);
    r->counter[c] += (int64_t)x->valuedouble;
  }
  int g = 0;
  for (const cJSON *x = ga->child; x; x = x->next, g++) {
    const char *name = str(x, "name");
    const cJSON *share = cJSON_GetObjectItemCaseSensitive(x, "share"), *ismin = cJSON_GetObjectItemCaseSensitive(x, "is_min");
    int64_t gj = num(x, "judge_from", &bad);
    if (!name || !cJSON_IsNumber(share) || !cJSON_IsBool(ismin) || bad)
      return field_err(path, "gates", "each gate needs name, share, is_min and judge_from");
    /* the gate's part and total are counters: find them by value is not possible, so gates carry
     * their own sums and merge adds them (below) */
    if (first) {
      m->gate_name[g] = dup(name);
      m->nm.gate[g] = (rs_run_gate){m->gate_name[g], 0, 0, share->valuedouble, cJSON_IsTrue(ismin), gj};
      m->nm.ngates = g + 1;
    } else if (g >= m->nm.ngates || strcmp(m->gate_name[g], name)) {
      return field_err(path, "gates", "differ from the first report's");
    }
  }
  const char *crash = str(run, "crash");
  if (crash) {
    int64_t ci = num(run, "crash_index", &bad);
    if (bad) return field_err(path, "crash_index", "missing");
    if (!r->crashed || ci < r->crash_index) {
      r->crashed = 1;
      r->crash_index = ci;
      free(m->crash);
      m->crash = dup(crash);
      m->crash_file = path;
    }
  }
  return RS_OK;
}

/* gate sums: part and total of each gate, added over the files */
static rs_status gate_sums(const char *path, const cJSON *run, int64_t (*sum)[2], int ngates) {
  const cJSON *ga = cJSON_GetObjectItemCaseSensitive(run, "gates");
  int g = 0, bad = 0;
  for (const cJSON *x = ga ? ga->child : NULL; x && g < ngates; x = x->next, g++) {
    sum[g][0] += num(x, "part", &bad);
    sum[g][1] += num(x, "total", &bad);
  }
  if (bad) return field_err(path, "gates", "part and total must be counts");
  return RS_OK;
}

/* One campaign of the merge: the runner objects of one verb (conform's --suite a,b writes one per
 * suite in "runners"), added up over the files. */
#define MERGE_GROUPS 16
typedef struct group {
  merged m;
  int64_t gsum[RS_RUN_GATES][2];
  int started;
  rs_run_failure_note notes[RS_RUN_PROPS];
  int64_t min[RS_RUN_FEATURES];
  int missing, gfail, failed;
  const char *gname[RS_RUN_GATES];
} group;

/* After every file: every shard seen once, the gates and the verdict on the sums. */
static rs_status group_finish(group *g) {
  merged *m = &g->m;
  for (int k = 1; k <= m->shard_n; k++)
    if (!m->seen[k])
      return rs_fail(RS_ERR_INVALID, "%s: shard %d/%d: no report given (merge needs every shard of the campaign once)", m->verb, k,
                     m->shard_n);
  rs_run_ops *ops = &m->ops;
  rs_run_result *r = &m->r;
  rs_run_names *nm = &m->nm;
  /* gates judged on the summed parts and totals: counters past the files' own stand in for them */
  int base = ops->ncounters;
  for (int i = 0; i < nm->ngates && base + 2 * i + 1 < RS_RUN_COUNTERS; i++) {
    r->counter[base + 2 * i] = g->gsum[i][0];
    r->counter[base + 2 * i + 1] = g->gsum[i][1];
    nm->gate[i].part = base + 2 * i;
    nm->gate[i].total = base + 2 * i + 1;
  }
  for (int p = 0; p < ops->nprops; p++) {
    nm->prop[p] = m->prop_name[p];
    if (r->fail[p]) {
      r->failed_props++;
      if (r->first_failure < 0 || r->first_fail[p] < r->first_failure) r->first_failure = r->first_fail[p];
    }
    g->notes[p] = (rs_run_failure_note){m->note_msg[p], m->note_fix[p], m->note_replay[p]};
  }
  for (int f = 0; f < ops->nfeatures; f++) nm->feature[f] = m->feature_name[f];
  for (int c = 0; c < ops->ncounters; c++) nm->counter[c] = m->counter_name[c];
  if (m->crash) snprintf(r->crash_msg, sizeof r->crash_msg, "%s (%s)", m->crash, m->crash_file);
  g->missing = rs_run_judge(nm, ops, r, g->min, &g->gfail, g->gname);
  g->failed = r->failed_props || g->missing || g->gfail || r->crashed;
  return RS_OK;
}

static void group_summary(FILE *out, const group *g) {
  const merged *m = &g->m;
  const rs_run_result *r = &m->r;
  const rs_run_names *nm = &m->nm;
  fprintf(out, "%s, seed %s: %d shard%s merged, %lld cases\n", m->verb, m->seed, m->shard_n, m->shard_n == 1 ? "" : "s",
          (long long)r->cases);
  for (int p = 0; p < m->ops.nprops; p++)
    fprintf(out, "  %-28s pass %lld  fail %lld  skip %lld%s\n", nm->prop[p], (long long)r->pass[p], (long long)r->fail[p],
            (long long)r->skip[p], r->fail[p] ? "  FAIL" : "");
  for (int p = 0; p < m->ops.nprops; p++)
    if (r->fail[p])
      fprintf(out, "FAIL %s (first at case %lld)\n  %s\n%s%s%s", nm->prop[p], (long long)r->first_fail[p] + 1,
              g->notes[p].message ? g->notes[p].message : "", g->notes[p].replay ? "  replay: " : "",
              g->notes[p].replay ? g->notes[p].replay : "", g->notes[p].replay ? "\n" : "");
  for (int f = 0; f < m->ops.nfeatures; f++)
    if (r->feature[f] < g->min[f])
      fprintf(out, "FAIL feature coverage: %s %lld < %lld\n", nm->feature[f], (long long)r->feature[f], (long long)g->min[f]);
  for (int i = 0; i < g->gfail; i++) fprintf(out, "FAIL gate %s\n", g->gname[i]);
  if (r->crashed) fprintf(out, "FAIL crash: %s\n", r->crash_msg);
}

static cJSON *group_json(const group *g) {
  const merged *m = &g->m;
  rs_run_ops jops = m->ops;
  return json_of(m->verb, strtoull(m->seed, NULL, 10), m->cases_asked, m->seconds_asked, 1, 1, &jops, &m->nm, &m->r,
                 g->notes);
}

static void group_junit(FILE *f, const group *g) {
  const merged *m = &g->m;
  const rs_run_result *r = &m->r;
  for (int p = 0; p < m->ops.nprops; p++)
    rs__junit_property(f, m->verb, m->nm.prop[p], r->fail[p] ? (g->notes[p].message ? g->notes[p].message : "failed") : NULL,
                       g->notes[p].replay ? g->notes[p].replay : "", r->fail[p] ? g->notes[p].fixture : NULL, 0);
  rs__junit_property(f, m->verb, "feature_coverage", g->missing ? "required features under their minimum count" : NULL, "",
                     NULL, 0);
  for (int i = 0; i < m->nm.ngates; i++) {
    int bad = 0;
    for (int x = 0; x < g->gfail; x++) bad |= strcmp(g->gname[x], m->nm.gate[i].name) == 0;
    rs__junit_property(f, m->verb, m->nm.gate[i].name, bad ? "share gate failed" : NULL, "", NULL, 0);
  }
  if (r->crashed) rs__junit_property(f, m->verb, "crash", r->crash_msg, "", NULL, 0);
}

/* the runner objects of one report: "runner", or each of "runners" (conform, one per suite) */
static rs_status add_file(group *gs, int *ng, const char *path, const cJSON *root) {
  const cJSON *one = cJSON_GetObjectItemCaseSensitive(root, "runner");
  const cJSON *many = cJSON_GetObjectItemCaseSensitive(root, "runners");
  const cJSON *list[MERGE_GROUPS];
  int nl = 0;
  if (cJSON_IsArray(many)) {
    for (const cJSON *x = many->child; x; x = x->next) {
      if (nl == MERGE_GROUPS) return rs_fail(RS_ERR_INVALID, "%s: runners: more than %d campaigns", path, MERGE_GROUPS);
      list[nl++] = x;
    }
  } else if (cJSON_IsObject(one)) {
    list[nl++] = one;
  }
  if (!nl)
    return rs_fail(RS_ERR_INVALID, "%s: no \"runner\" object (not a campaign's --json report, or one written before report merge)",
                   path);
  for (int i = 0; i < nl; i++) {
    if (!cJSON_IsObject(list[i])) return rs_fail(RS_ERR_INVALID, "%s: runners[%d]: not an object", path, i);
    const char *verb = str(list[i], "verb");
    if (!verb) return rs_fail(RS_ERR_INVALID, "%s: runner.verb: missing", path);
    int g = 0;
    while (g < *ng && strcmp(gs[g].m.verb, verb)) g++;
    if (g == *ng) {
      if (*ng == MERGE_GROUPS) return rs_fail(RS_ERR_INVALID, "%s: more than %d campaigns to merge", path, MERGE_GROUPS);
      group *ngp = &gs[(*ng)++];
      for (int p = 0; p < RS_RUN_PROPS; p++) ngp->m.r.first_fail[p] = -1;
      ngp->m.r.crash_index = -1;
      ngp->m.r.first_failure = -1;
    }
    rs_status st = merge_one(&gs[g].m, path, list[i], !gs[g].started);
    if (st == RS_OK) st = gate_sums(path, list[i], gs[g].gsum, gs[g].m.nm.ngates);
    if (st) return st;
    gs[g].started = 1;
  }
  return RS_OK;
}

rs_status rs_run_merge(const char *const *paths, int n, const char *json_out, const char *junit_out,
                       const char *report_dir, FILE *summary, int *failed) {
  group *gs = calloc(MERGE_GROUPS, sizeof *gs);
  if (!gs) return rs_fail(RS_ERR_NOMEM, "report merge: out of memory");
  int ng = 0;
  rs_status st = RS_OK;
  for (int i = 0; i < n && st == RS_OK; i++) {
    char *text = rs_read_text(paths[i]);
    cJSON *root = NULL;
    if (!text) {
      st = rs__last_status() ? rs__last_status() : RS_ERR_IO;
      break;
    }
    st = rs_json_parse(text, &root);
    free(text);
    if (st) {
      st = rs_fail(st, "%s: %s", paths[i], rs_last_error());
      break;
    }
    st = add_file(gs, &ng, paths[i], root);
    cJSON_Delete(root);
  }
  for (int g = 0; g < ng && st == RS_OK; g++) st = group_finish(&gs[g]);
  *failed = 0;
  for (int g = 0; g < ng && st == RS_OK; g++) {
    *failed |= gs[g].failed;
    if (summary) group_summary(summary, &gs[g]);
  }
  if (st == RS_OK && summary) fprintf(summary, "%s\n", *failed ? "FAILED" : "passed");
  if (st == RS_OK && json_out) {
    cJSON *root = cJSON_CreateObject();
    cJSON *from = cJSON_AddArrayToObject(root, "merged_from");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(from, cJSON_CreateString(paths[i]));
    if (ng == 1) {
      cJSON_AddItemToObject(root, "runner", group_json(&gs[0]));
    } else {
      cJSON *arr = cJSON_AddArrayToObject(root, "runners");
      for (int g = 0; g < ng; g++) cJSON_AddItemToArray(arr, group_json(&gs[g]));
    }
    st = rs__report_json_write(root, json_out);
  }
  if (st == RS_OK && junit_out) {
    int tests = 0, fails = 0;
    for (int g = 0; g < ng; g++) {
      const merged *m = &gs[g].m;
      for (int p = 0; p < m->ops.nprops; p++) tests++, fails += m->r.fail[p] > 0;
      tests += 1 + m->nm.ngates + (m->r.crashed != 0);
      fails += (gs[g].missing > 0) + gs[g].gfail + (m->r.crashed != 0);
    }
    FILE *f = rs__junit_open(junit_out, ng == 1 ? gs[0].m.verb : "report merge", tests, fails, 0, 0);
    if (!f) st = RS_ERR_IO;
    else {
      for (int g = 0; g < ng; g++) group_junit(f, &gs[g]);
      st = rs__junit_close(f, junit_out);
    }
  }
  if (st == RS_OK && report_dir) {
    rs_html *h;
    char cmd[256], sum[256], row[192];
    snprintf(cmd, sizeof cmd, "reshard report merge (%s, seed %s, %d shards)", gs[0].m.verb, gs[0].m.seed, gs[0].m.shard_n);
    if ((st = rs_html_open(report_dir, "merged", cmd, &h)) == RS_OK) {
      int64_t cases = 0;
      for (int g = 0; g < ng; g++) {
        const merged *m = &gs[g].m;
        const rs_run_result *r = &m->r;
        cases += r->cases;
        for (int p = 0; p < m->ops.nprops; p++) {
          snprintf(row, sizeof row, "%s%s%s", ng > 1 ? m->verb : "", ng > 1 ? ": " : "", m->nm.prop[p]);
          rs_html_row(h, row, r->pass[p], r->fail[p], r->skip[p]);
        }
        snprintf(row, sizeof row, "%s%sfeature_coverage", ng > 1 ? m->verb : "", ng > 1 ? ": " : "");
        rs_html_row(h, row, !gs[g].missing, gs[g].missing > 0, 0);
        for (int p = 0; p < m->ops.nprops; p++)
          if (r->fail[p] && rs_html_failure_add(h, &(rs_html_failure){.name = m->nm.prop[p], .message = gs[g].notes[p].message,
                                                                      .replay = gs[g].notes[p].replay}) != RS_OK)
            rs_clear_error();
      }
      snprintf(sum, sizeof sum, "%s, seed %s: %lld cases over %d shards, %s", gs[0].m.verb, gs[0].m.seed, (long long)cases,
               gs[0].m.shard_n, *failed ? "FAILED" : "passed");
      st = rs_html_close(h, sum);
    }
  }
  for (int g = 0; g < MERGE_GROUPS; g++) merged_free(&gs[g].m);
  free(gs);
  return st;
}
