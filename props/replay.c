/* replay.c - saved failures: the shrunk case of a failing property written as a regression fixture
 * together with what it failed with (impl, transport, and through the case its planner, cost and
 * values), and read back so `reshard replay FILE` re-runs it the same way. A failure found by opt
 * must replay with opt: replayed with ref, the opt properties skip and the bug looks fixed. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>
#include "props/props.h"
#include "core/last_status.h"
#include "core/case_json.h"
#include "core/json.h"
#include "core/mutant.h"
#include "props/report.h"
#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
#endif

/* mkdir -p (props/report.h) */
rs_status rs__make_dirs(const char *dir) {
  char p[512];
  if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return rs_fail(RS_ERR_IO, "--regress-dir: path too long");
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(p, 0777) != 0 && errno != EEXIST) return rs_fail(RS_ERR_IO, "--regress-dir: mkdir %s: %s", p, strerror(errno));
    *s = '/';
  }
  if (mkdir(p, 0777) != 0 && errno != EEXIST) return rs_fail(RS_ERR_IO, "--regress-dir: mkdir %s: %s", p, strerror(errno));
  return RS_OK;
}

void rs_message_head(char *out, size_t cap, const char *msg) {
  if (!cap) return;
  size_t a = strcspn(msg, "\n");
  const char *second = msg[a] ? msg + a + 1 : NULL;
  while (second && (*second == ' ' || *second == '\t')) second++;
  size_t b = second ? strcspn(second, "\n") : 0;
  if (b) snprintf(out, cap, "%.*s; %.*s", (int)a, msg, (int)b, second);
  else snprintf(out, cap, "%.*s", (int)a, msg);
}

rs_status rs_write_regression(const char *dir, rs_prop_id id, const rs_case *c, const char *msg,
                              const rs_prop_env *env, char *path_out, size_t cap) {
  cJSON *root = rs__case_to_cjson(c);
  if (!root) return rs_fail(RS_ERR_NOMEM, "regression: out of memory");
  char *cj = cJSON_PrintUnformatted(root);
  uint64_t h = (cj ? XXH3_64bits(cj, strlen(cj)) : 0) ^ (uint64_t)id * 0x9E3779B97F4A7C15ull;
  free(cj);
  cJSON_AddStringToObject(root, "property", rs_prop_name(id));
  /* One line: the first line of the message (diff lines follow it). */
  char line[512];
  snprintf(line, sizeof line, "%s", msg);
  line[strcspn(line, "\n")] = 0;
  cJSON_AddStringToObject(root, "message", line);
  rs_impl impl = env ? env->impl : RS_IMPL_REF;
  if (RS_MUTANT(235)) impl = RS_IMPL_REF; /* planted: the saved case forgets it failed under opt */
  int mpi = env && env->distributed;
  if (env && env->backend) {
    /* a backend under test ran, not ref or opt: name it (its replay is reshard conform --replay) */
    cJSON_AddStringToObject(root, "backend", env->backend_spec ? env->backend_spec : "(under test)");
  } else {
    cJSON_AddStringToObject(root, "impl", impl == RS_IMPL_OPT ? "opt" : "ref");
    cJSON_AddStringToObject(root, "transport", mpi ? "mpi" : "local");
  }
#ifdef RS_HAVE_OPT
  if (mpi && env->world) cJSON_AddNumberToObject(root, "world_size", rs_world_size((rs_world *)env->world));
#endif
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) return rs_fail(RS_ERR_NOMEM, "regression: out of memory");
  rs_status st = rs__make_dirs(dir);
  if (st) {
    free(text);
    return st;
  }
  snprintf(path_out, cap, "%s/%s-%012llx.json", dir, rs_prop_name(id),
           (unsigned long long)(h & 0xFFFFFFFFFFFFull));
  FILE *f = fopen(path_out, "w");
  if (!f) {
    free(text);
    return rs_fail(RS_ERR_IO, "regression: cannot write %s: %s", path_out, strerror(errno));
  }
  fputs(text, f);
  fputc('\n', f);
  free(text);
  if (fclose(f) != 0) return rs_fail(RS_ERR_IO, "regression: cannot write %s", path_out);
  return RS_OK;
}

static rs_status read_meta(const cJSON *root, const char *path, rs_saved_failure *out) {
  const cJSON *pj = cJSON_GetObjectItemCaseSensitive(root, "property");
  if (!cJSON_IsString(pj)) return rs_fail(RS_ERR_INVALID, "%s: property: expected a string", path);
  rs_status st = rs_prop_parse(pj->valuestring, &out->id);
  if (st) return st;
  const cJSON *ij = cJSON_GetObjectItemCaseSensitive(root, "impl");
  if (ij && !cJSON_IsNull(ij)) {
    if (cJSON_IsString(ij) && strcmp(ij->valuestring, "ref") == 0) out->impl = RS_IMPL_REF;
    else if (cJSON_IsString(ij) && strcmp(ij->valuestring, "opt") == 0) out->impl = RS_IMPL_OPT;
    else return rs_fail(RS_ERR_INVALID, "%s: impl: expected \"ref\" or \"opt\"", path);
  } else {
    out->impl = rs_prop_needs_opt(out->id) ? RS_IMPL_OPT : RS_IMPL_REF;
  }
  snprintf(out->transport, sizeof out->transport, "local");
  const cJSON *tj = cJSON_GetObjectItemCaseSensitive(root, "transport");
  if (tj && !cJSON_IsNull(tj)) {
    if (!cJSON_IsString(tj) || (strcmp(tj->valuestring, "local") && strcmp(tj->valuestring, "mpi")))
      return rs_fail(RS_ERR_INVALID, "%s: transport: expected \"local\" or \"mpi\"", path);
    snprintf(out->transport, sizeof out->transport, "%s", tj->valuestring);
  }
  const cJSON *wj = cJSON_GetObjectItemCaseSensitive(root, "world_size");
  if (wj && !cJSON_IsNull(wj)) {
    int64_t w;
    if ((st = rs_json_i64(wj, "world_size", 1, RS_MAX_RANKS, &w))) return rs_fail_prefix(st, path);
    out->world_size = (int)w;
  }
  return RS_OK;
}

rs_status rs_saved_failure_read(const char *path, rs_saved_failure *out) {
  memset(out, 0, sizeof *out);
  /* every message names the file once (the reader's, read_meta's and these) */
  char pre[600];
  snprintf(pre, sizeof pre, "%.580s: ", path);
  char *text = rs_read_text(path);
  if (!text) return rs__last_status();
  cJSON *root;
  rs_status st = rs_json_parse(text, &root);
  free(text);
  if (st) return rs_fail_prefix(st, pre);
  if ((st = read_meta(root, path, out))) {
    cJSON_Delete(root);
    return st;
  }
  rs_clear_error();
  st = rs__case_from_cjson(root, &out->c);
  cJSON_Delete(root);
  if (st) {
    /* A bad case the parser refuses is a rejection; the bad-case property passes when it says why. */
    if (!rs_prop_bad_cases(out->id)) return rs_fail_prefix(st, pre);
    snprintf(out->reject, sizeof out->reject, "%s", rs_last_error());
    out->case_ok = 0;
    return RS_OK;
  }
  out->case_ok = 1;
  return RS_OK;
}

rs_status rs_saved_failure_replay(const rs_saved_failure *f, const rs_prop_env *env, int *failed,
                                  char *msg, size_t cap) {
  *failed = 0;
  if (!f->case_ok) {
    *failed = f->reject[0] == 0;
    snprintf(msg, cap, "%s: rejected by the parser: %s", rs_prop_name(f->id), f->reject);
    return RS_OK;
  }
  if (rs_prop_needs_opt(f->id) && env->impl != RS_IMPL_OPT)
    return rs_fail(RS_ERR_INVALID, "replay: property %s needs --impl opt", rs_prop_name(f->id));
  if (f->id == RS_PROP_BACKEND && !env->backend)
    return rs_fail(RS_ERR_INVALID, "replay: property %s is a backend's failure: replay it with reshard conform --backend B --replay FILE",
                   rs_prop_name(f->id));
  char *m = malloc(8192);
  if (!m) return rs_fail(RS_ERR_NOMEM, "replay: out of memory");
  m[0] = 0;
  rs_clear_error();
  rs_outcome o = rs_prop_run(f->id, env, &f->c, m, 8192);
  if (rs_outcome_is_oom(o)) { /* no verdict: exit 3, not "still fails" */
    rs_status st = rs_fail(RS_ERR_NOMEM, "%s: %s", rs_prop_name(f->id), m);
    free(m);
    return st;
  }
  *failed = o == RS_FAIL;
  snprintf(msg, cap, "%s (%s): %s%s%s", rs_prop_name(f->id), env->impl == RS_IMPL_OPT ? "opt" : "ref",
           o == RS_FAIL ? "FAIL" : o == RS_SKIP ? "SKIP" : "PASS", m[0] ? ": " : "", m);
  free(m);
  return RS_OK;
}

rs_status rs_replay_file(const char *path, const rs_prop_env *env, int *failed, char *msg,
                         size_t cap) {
  rs_saved_failure *f = malloc(sizeof *f);
  if (!f) return rs_fail(RS_ERR_NOMEM, "replay: out of memory");
  rs_status st = rs_saved_failure_read(path, f);
  if (!st) st = rs_saved_failure_replay(f, env, failed, msg, cap);
  free(f);
  return st;
}
