/* suites.c - `reshard conform`'s run: the chosen suites in order of value (redistribute, tp, p2p,
 * ckpt), a capability the backend lacks reported as skipped (never as passed); the fixture corpora
 * walk, saved failures and their replay. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>
#include <zlib.h>
#include "conform/suite.h"
#include "conform/exec.h"
#include "props/runner.h"
#include "core/json.h"
#include "core/mutant.h"

static const struct {
  const char *name;
  unsigned bit;
} SUITES[] = {{"redistribute", RS_CF_SUITE_REDISTRIBUTE}, {"tp", RS_CF_SUITE_TP}, {"p2p", RS_CF_SUITE_P2P},
              {"ckpt", RS_CF_SUITE_CKPT}};
#define NSUITES (sizeof SUITES / sizeof SUITES[0])

const char *rs_cf_suite_name(unsigned suite) {
  for (size_t i = 0; i < NSUITES; i++)
    if (SUITES[i].bit == suite) return SUITES[i].name;
  return "?";
}

rs_status rs_cf_parse_suites(const char *text, unsigned *out) {
  *out = 0;
  const char *p = text;
  if (!p || !*p) return rs_fail(RS_ERR_INVALID, "--suite: empty (redistribute, tp, p2p, ckpt, all or a comma list)");
  while (*p) {
    size_t n = strcspn(p, ",");
    unsigned bit = 0;
    if (n == 3 && strncmp(p, "all", 3) == 0) bit = RS_CF_SUITE_REDISTRIBUTE | RS_CF_SUITE_TP | RS_CF_SUITE_P2P | RS_CF_SUITE_CKPT;
    for (size_t i = 0; i < NSUITES && !bit; i++)
      if (strlen(SUITES[i].name) == n && strncmp(p, SUITES[i].name, n) == 0) bit = SUITES[i].bit;
    if (!bit) return rs_fail(RS_ERR_INVALID, "--suite: unknown suite '%.*s' (redistribute, tp, p2p, ckpt, all)", (int)n, p);
    *out |= bit;
    p += n;
    if (*p == ',') p++;
  }
  return RS_OK;
}

void rs_cf_print(char *buf, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
}

rs_cf_item *rs_cf_add_item(rs_cf_result *r, unsigned suite, int fixture, const char *name) {
  if (r->n == r->cap) {
    int nc = r->cap ? r->cap * 2 : 32;
    rs_cf_item *ni = realloc(r->item, sizeof *ni * (size_t)nc);
    if (!ni) return NULL;
    r->item = ni, r->cap = nc;
  }
  rs_cf_item *it = &r->item[r->n++];
  memset(it, 0, sizeof *it);
  it->suite = suite;
  it->fixture = fixture;
  RS_CF_PRINT(it->name, "%s", name);
  return it;
}

void rs_cf_item_failed(const rs_cf_run *run, rs_cf_item *it, const char *where, const char *msg,
                       const char *saved_path) {
  if (it->fail++) return;
  char head[1024];
  rs_message_head(head, sizeof head, msg); /* with the first differing element, as the console shows */
  RS_CF_PRINT(it->message, "%s: %s", where, head);
  if (saved_path) rs_cf_item_saved(run, it, saved_path);
  printf("FAIL %s fixture %s\n  %s\n", rs_cf_suite_name(it->suite), where, msg);
  if (saved_path) printf("  replay: %s\n", it->replay);
  fflush(stdout);
}

void rs_cf_item_saved(const rs_cf_run *run, rs_cf_item *it, const char *path) {
  RS_CF_PRINT(it->saved, "%s", path);
  RS_CF_PRINT(it->replay, "%s %s", run->replay, path);
}

void rs_cf_mesh_text(int ndim, const int64_t *size, const int32_t *ranks, int64_t nranks, char *text, size_t cap) {
  size_t k = 0;
  text[0] = 0;
  for (int d = 0; d < ndim && k + 24 < cap; d++)
    k += (size_t)snprintf(text + k, cap - k, "%s%lld", d ? "x" : "", (long long)size[d]);
  for (int64_t pos = 0; pos < nranks && k + 24 < cap; pos++)
    k += (size_t)snprintf(text + k, cap - k, "%s%d", pos ? "," : " (ranks ", (int)ranks[pos]);
  if (nranks && k + 2 < cap) snprintf(text + k, cap - k, ")");
}

int64_t rs_cf_named(const char *msg, const char *(*name)(const void *, int64_t), const void *set, int64_t n) {
  int64_t best = 0;
  size_t len = 0;
  for (int64_t i = 0; i < n; i++) {
    size_t k = strlen(name(set, i));
    if (k > len && strstr(msg, name(set, i))) best = i, len = k;
  }
  return best;
}

const char *rs_cf_caps_text(unsigned caps) {
  if (caps & RS_CF_P2P_PLAN) return "the capabilities 'p2p_plan' and 'p2p_execute'";
  return caps & RS_CF_CKPT ? "the capability 'ckpt'" : caps & RS_CF_TP ? "the capability 'tp'" : "the capability 'redistribute'";
}

int rs_cf_require(rs_cf_run *run, unsigned suite, unsigned caps, const char *name) {
  if (rs_cf_backend_caps(run->b) & caps) return 1;
  rs_cf_item *it = rs_cf_add_item(run->r, suite, 0, name);
  if (it) {
    it->skip = 1;
    it->capability_skip = 1;
    RS_CF_PRINT(it->message, "the backend lacks %s", rs_cf_caps_text(caps));
  }
  return 0;
}

void rs_cf_tally(const rs_cf_run *run, rs_cf_item *it, rs_outcome o, const char *where, const char *msg,
                 rs_cf_save_fn save, void *ctx) {
  if (o == RS_PASS) it->pass++;
  else if (o == RS_SKIP) {
    if (!it->skip++ && !it->fail) RS_CF_PRINT(it->message, "%s: %s", where, msg);
  } else {
    char path[1024] = "";
    if (it->fail || !save || save(ctx, msg, path, sizeof path) != RS_OK) path[0] = 0;
    rs_cf_item_failed(run, it, where, msg, path[0] ? path : NULL);
  }
}

void rs_cf_result_free(rs_cf_result *r) {
  for (int k = 0; k < 4; k++) cJSON_Delete(r->runner[k]);
  free(r->item);
  memset(r, 0, sizeof *r);
}

/* ---- corpora ---- */

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int ends_with(const char *s, const char *suf) {
  size_t n = strlen(s), m = strlen(suf);
  return n >= m && strcmp(s + n - m, suf) == 0;
}

/* Lines of a gzip'd JSON-lines file, however long. */
static void walk_gz(const char *path, const char *name, rs_cf_item *it, rs_cf_case_fn fn, void *ctx) {
  gzFile g = gzopen(path, "rb");
  if (!g) {
    it->fail++;
    RS_CF_PRINT(it->message, "%s: cannot open", name);
    return;
  }
  size_t cap = 1 << 16, len = 0;
  char *line = malloc(cap);
  long lineno = 0;
  while (line) {
    if (!gzgets(g, line + len, (int)(cap - len))) {
      if (len) {
        lineno++;
        char where[600];
        rs_cf_print(where, sizeof where, "%s:%ld", name, lineno);
        fn(ctx, it, line, where);
      }
      break;
    }
    len += strlen(line + len);
    if (len && line[len - 1] != '\n' && len + 1 == cap) {
      char *nl = realloc(line, cap * 2);
      if (!nl) break;
      line = nl, cap *= 2;
      continue;
    }
    lineno++;
    if (len > 1) {
      char where[600];
      rs_cf_print(where, sizeof where, "%s:%ld", name, lineno);
      fn(ctx, it, line, where);
    }
    len = 0;
  }
  free(line);
  gzclose(g);
}

int rs_cf_walk_corpus(rs_cf_run *run, unsigned suite, const char *dir, rs_cf_case_fn fn, void *ctx) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!ends_with(e->d_name, ".json") && !ends_with(e->d_name, ".jsonl.gz")) continue;
    if (n == cap) {
      char **nn = realloc(names, sizeof *nn * (cap = cap ? cap * 2 : 64));
      if (!nn) break;
      names = nn;
    }
    if (!(names[n] = strdup(e->d_name))) break;
    n++;
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, by_name);
  size_t top = run->fixtures ? strlen(run->fixtures) : 0;
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    const char *shown = top && strncmp(path, run->fixtures, top) == 0 && path[top] == '/' ? path + top + 1 : path;
    rs_cf_item *it = rs_cf_add_item(run->r, suite, 1, shown);
    if (!it) break;
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
      it->fail++;
      RS_CF_PRINT(it->message, "%s: not a regular file (symbolic links are refused)", shown);
      continue;
    }
    if (ends_with(names[i], ".jsonl.gz")) walk_gz(path, shown, it, fn, ctx);
    else {
      char *text = rs_read_text(path);
      if (!text) {
        it->fail++;
        RS_CF_PRINT(it->message, "%s", rs_last_error());
        continue;
      }
      fn(ctx, it, text, shown);
      free(text);
    }
  }
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  return (int)n;
}

rs_status rs_cf_save_failure(const rs_cf_run *run, const char *text, const char *stem, char *path,
                             size_t cap) {
  if (mkdir(run->failures, 0777) != 0 && errno != EEXIST)
    return rs_fail(RS_ERR_IO, "--failures: mkdir %s: %s", run->failures, strerror(errno));
  snprintf(path, cap, "%s/%s-%016llx.json", run->failures, stem,
           (unsigned long long)XXH3_64bits(text, strlen(text)));
  FILE *f = fopen(path, "w");
  if (!f) return rs_fail(RS_ERR_IO, "--failures: cannot write %s: %s", path, strerror(errno));
  int bad = fputs(text, f) < 0 || fputc('\n', f) < 0;
  if (fclose(f) || bad) return rs_fail(RS_ERR_IO, "--failures: cannot write %s", path);
  return RS_OK;
}

/* ---- the runner's side ---- */

rs_status rs_cf_worker_init(void *vrun, int worker) {
  rs_cf_run *run = vrun;
  /* this worker's children share the cores with the other workers' (a framework starts a thread
   * per core in each): max(1, cores / N) threads each, unless the user set the variables.
   * conform's own child (shrinking, corpora: it runs alone) keeps the environment as it is. */
  if (run->jobs > 1) {
    int t = rs_run_cores() / run->jobs;
    rs_exec_set_child_threads(t < 1 ? 1 : t);
  }
  return rs_cf_backend_worker_start(run->b, worker);
}

void rs_cf_worker_exit(void *vrun) {
  rs_cf_run *run = vrun;
  rs_cf_backend_worker_stop(run->b);
}

const char *rs_cf_gave_up(void *ctx) {
  static char why[160];
  rs_cf_backend *b = ctx;
  if (!rs_cf_backend_gave_up(b)) return NULL;
  snprintf(why, sizeof why, "stopped: the backend timed out %lld times (--max-timeouts)",
           (long long)rs_cf_backend_timeouts(b));
  return why;
}

void rs_cf_campaign_error(rs_cf_run *run, rs_cf_item *it, rs_status st) {
  it->fail++;
  RS_CF_PRINT(it->message, "campaign: %s", rs_last_error());
  if (st == RS_ERR_NOMEM) run->r->oom = 1;
  else if (st == RS_ERR_TIMEOUT && !rs_cf_backend_gave_up(run->b)) run->r->hung = 1;
}

static int suite_slot(unsigned suite) {
  for (size_t i = 0; i < NSUITES; i++)
    if (SUITES[i].bit == suite) return (int)i;
  return -1;
}

/* The --max-skip-share gate in the runner object's terms: part (skipped) over total (cases) must
 * stay <= the share; report merge adds part and total over the shards and judges it again. */
static void skip_gate(cJSON *runner, double share, int64_t skip, int64_t total) {
  cJSON *gates = cJSON_GetObjectItemCaseSensitive(runner, "gates");
  cJSON *failed = cJSON_GetObjectItemCaseSensitive(runner, "gates_failed");
  cJSON *g = cJSON_CreateObject();
  if (!cJSON_IsArray(gates) || !cJSON_IsArray(failed) || !g) {
    cJSON_Delete(g);
    return;
  }
  if (share > 1) share = 1;
  cJSON_AddStringToObject(g, "name", "max_skip_share");
  cJSON_AddNumberToObject(g, "part", (double)skip);
  cJSON_AddNumberToObject(g, "total", (double)total);
  cJSON_AddNumberToObject(g, "share", share);
  cJSON_AddBoolToObject(g, "is_min", 0);
  cJSON_AddNumberToObject(g, "judge_from", 1);
  cJSON_AddItemToArray(gates, g);
  /* as the runner judges a gate: part / total > share fails */
  if (total > 0 && (double)skip / (double)total > share) {
    cJSON_AddItemToArray(failed, cJSON_CreateString("max_skip_share"));
    cJSON_DeleteItemFromObjectCaseSensitive(runner, "failed");
    cJSON_AddBoolToObject(runner, "failed", 1);
  }
}

void rs_cf_campaign_done(rs_cf_run *run, unsigned suite, cJSON *runner, int64_t skip, int64_t total) {
  int left = rs_cf_backend_workers_reap(run->b);
  if (left) {
    printf("conform: killed the backend children of %d worker(s) that ended without stopping them\n", left);
    fflush(stdout);
  }
  int k = suite_slot(suite);
  if (!runner) return;
  if (k < 0 || run->r->runner[k]) {
    cJSON_Delete(runner);
    return;
  }
  skip_gate(runner, run->o->max_skip_share, skip, total);
  run->r->runner[k] = runner;
}

/* ---- the run ---- */

/* The run's policy gates after the suites: an item whose backend declined more than
 * --max-skip-share of its cases fails (props' one share gate; capability skips are not judged),
 * and the timeouts counted, with a run stopped by --max-timeouts. */
static void rs_cf_policy(const rs_conform_opts *o, rs_cf_backend *b, rs_cf_result *r) {
  r->timeouts = rs_cf_backend_timeouts(b);
  r->stopped = rs_cf_backend_gave_up(b);
  r->failed = 0;
  for (int i = 0; i < r->n; i++) {
    rs_cf_item *it = &r->item[i];
    int64_t n = it->pass + it->fail + it->skip;
    /* Mutant 761: the skip share is never judged (a backend declining every Partial case passes). */
    if (!it->capability_skip && !RS_MUTANT(761) && rs_share_over(it->skip, n, o->max_skip_share)) {
      char why[1024];
      snprintf(why, sizeof why, "declined %lld of %lld cases (%.1f%%), over --max-skip-share %g%s%.600s",
               (long long)it->skip, (long long)n, 100.0 * (double)it->skip / (double)n, o->max_skip_share,
               it->message[0] ? "; first: " : "", it->message);
      if (!it->fail) RS_CF_PRINT(it->message, "%s", why);
      it->fail += it->fail == 0;
    }
    r->failed += it->fail > 0;
  }
}

/* Workers per campaign: --jobs, at most as many instances as the backend allows at once. */
static int workers(const rs_conform_opts *o, rs_cf_backend *b) {
  int jobs = o->jobs > 1 ? o->jobs : 1;
  int64_t most = rs_cf_backend_max_instances(b);
  if (most > 0 && jobs > most) {
    printf("note: backend %s runs at most %lld instance(s) at once (max_instances): --jobs %d runs %lld worker(s)\n",
           rs_cf_backend_name(b), (long long)most, jobs, (long long)most);
    fflush(stdout);
    jobs = (int)most;
  }
  return jobs;
}

rs_status rs_conform_run(const rs_conform_opts *o, rs_cf_backend *b, rs_cf_result *r) {
  memset(r, 0, sizeof *r);
  rs_cf_run run = {o, b, r, o->fixtures, o->failures ? o->failures : "conform-failures", "", 1};
  run.jobs = r->jobs = workers(o, b);
  if (o->shard_n > 1 && o->shard_k != 1 && run.fixtures) {
    /* the corpora are no indexed cases: one shard runs them, so the shards add up to one run */
    if (!o->quiet) printf("--shard %d/%d: the fixture corpora run in shard 1/%d only\n", o->shard_k, o->shard_n, o->shard_n);
    run.fixtures = NULL;
  }
  char q[1800];
  rs_exec_quote(rs_cf_backend_spec(b), q, sizeof q);
  snprintf(run.replay, sizeof run.replay, "reshard conform --backend %s --replay", q);
  memcpy(r->replay, run.replay, sizeof r->replay);
  rs_cf_backend_set_max_timeouts(b, o->max_timeouts);
  for (size_t i = 0; i < NSUITES; i++) {
    unsigned s = SUITES[i].bit;
    if (!(o->suites & s)) continue;
    if (rs_cf_backend_gave_up(b)) { /* --max-timeouts: the suites left are not run, and say so */
      rs_cf_item *it = rs_cf_add_item(r, s, 0, "not_run");
      if (it) {
        it->fail = 1;
        RS_CF_PRINT(it->message, "not run: the backend timed out %lld times (--max-timeouts %lld)",
                    (long long)rs_cf_backend_timeouts(b), (long long)o->max_timeouts);
      }
      continue;
    }
    if (!o->quiet) printf("== suite %s (backend %s)\n", SUITES[i].name, rs_cf_backend_name(b));
    fflush(stdout);
    if (s == RS_CF_SUITE_REDISTRIBUTE) rs_cf_suite_redistribute(&run);
    else if (s == RS_CF_SUITE_TP) rs_cf_suite_tp(&run);
    else if (s == RS_CF_SUITE_P2P) rs_cf_suite_p2p(&run);
    else rs_cf_suite_ckpt(&run);
  }
  rs_cf_policy(o, b, r);
  return RS_OK;
}

/* ---- replay ---- */

/* What a saved failure is, from its top-level keys; the suite's capabilities and its replay. */
static const struct {
  const char *key; /* a key only this kind of file has (NULL: the rest, redistribute cases) */
  unsigned suite, caps;
  rs_cf_replay_fn fn;
} KINDS[] = {{"save", RS_CF_SUITE_CKPT, RS_CF_CKPT, rs_cf_ckpt_replay},
             {"model", RS_CF_SUITE_P2P, RS_CF_P2P_PLAN | RS_CF_P2P_EXECUTE, rs_cf_p2p_replay},
             {"tp_dim", RS_CF_SUITE_TP, RS_CF_TP, rs_cf_tp_replay},
             {NULL, RS_CF_SUITE_REDISTRIBUTE, RS_CF_REDISTRIBUTE, rs_cf_redistribute_replay}};

rs_status rs_conform_replay(rs_cf_backend *b, const char *path, int *failed, char *msg, size_t cap,
                            rs_cf_result *r, unsigned *suite) {
  *failed = 0;
  if (r) memset(r, 0, sizeof *r);
  char *text = rs_read_text(path);
  if (!text) return rs_fail(RS_ERR_INVALID, "--replay: %s", rs_last_error());
  cJSON *root = NULL;
  if (rs_json_parse(text, &root)) {
    free(text);
    return rs_fail(RS_ERR_INVALID, "--replay: %s: %s", path, rs_last_error());
  }
  size_t k = 0;
  while (KINDS[k].key && !cJSON_GetObjectItemCaseSensitive(root, KINDS[k].key)) k++;
  cJSON_Delete(root);
  char *m = calloc(1, 8192);
  if (!m) {
    free(text);
    return rs_fail(RS_ERR_NOMEM, "--replay: out of memory");
  }
  int bad = 0;
  rs_outcome o = RS_SKIP;
  if (!(rs_cf_backend_caps(b) & KINDS[k].caps)) snprintf(m, 8192, "the backend lacks %s", rs_cf_caps_text(KINDS[k].caps));
  else o = KINDS[k].fn(b, text, m, 8192, &bad);
  free(text);
  if (bad) {
    rs_status st = rs_fail(RS_ERR_INVALID, "--replay: %s: %s", path, m);
    free(m);
    return st;
  }
  *failed = o == RS_FAIL;
  snprintf(msg, cap, "%s: %s%s%s", rs_cf_suite_name(KINDS[k].suite), o == RS_FAIL ? "FAIL" : o == RS_SKIP ? "SKIP" : "PASS",
           m[0] ? ": " : "", m);
  if (suite) *suite = KINDS[k].suite;
  if (r) {
    /* the reports of a replay: one item, the file, as a campaign's fixture item would read */
    char q[1800];
    rs_exec_quote(rs_cf_backend_spec(b), q, sizeof q);
    snprintf(r->replay, sizeof r->replay, "reshard conform --backend %s --replay", q);
    rs_cf_item *it = rs_cf_add_item(r, KINDS[k].suite, 1, path);
    if (!it) {
      free(m);
      return rs_fail(RS_ERR_NOMEM, "--replay: out of memory");
    }
    it->pass = o == RS_PASS, it->fail = o == RS_FAIL, it->skip = o == RS_SKIP;
    rs_message_head(it->message, sizeof it->message, m);
    if (o == RS_FAIL) {
      RS_CF_PRINT(it->saved, "%s", path);
      RS_CF_PRINT(it->replay, "%s %s", r->replay, path);
    }
    r->failed = o == RS_FAIL;
  }
  free(m);
  return RS_OK;
}
