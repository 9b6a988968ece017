/* ckpt_campaign.c - `reshard ckpt check`: every checkpoint property on every generated case (one
 * choice stream per case, replayed from the start for each property so all see the same case),
 * shrinking of a failing stream, and regression fixtures (property + shrunk stream + the specs it
 * decodes to) that `reshard ckpt replay` and ctest run again. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "core/numflag.h"
#include "core/ckpt/internal.h"
#include "core/json.h"
#include "core/values.h"
#include "props/ckpt.h"
#include "props/report.h"

#define MSG_CAP 1024

typedef struct pred_ctx {
  rs_ckpt_prop p;
  const char *dir;
  char *msg;
} pred_ctx;

static int still_fails(void *vx, rs_choices *ch) {
  pred_ctx *x = vx;
  return rs_ckpt_prop_run(x->p, ch, x->dir, x->msg, MSG_CAP) == RS_FAIL;
}

rs_status rs_ckpt_replay(const char *path, const char *scratch, int *failed, char *msg, size_t cap) {
  char *text = rs_read_text(path);
  if (!text) return RS_ERR_IO;
  cJSON *root;
  rs_status st = rs_json_parse(text, &root);
  free(text);
  if (st) return st;
  const cJSON *pn, *cs;
  rs_ckpt_prop p = RS_CKPT_PROP_VALID;
  if (!(st = rs_json_member(root, "", "property", cJSON_String, &pn)) && !pn)
    st = rs_fail(RS_ERR_INVALID, "%s: property: missing", path);
  if (!st) st = rs_ckpt_prop_parse(pn->valuestring, &p);
  if (!st && !(st = rs_json_member(root, "", "choices", cJSON_Array, &cs)) && !cs)
    st = rs_fail(RS_ERR_INVALID, "%s: choices: missing", path);
  uint64_t *v = NULL;
  size_t n = 0;
  if (!st) {
    v = malloc(sizeof *v * (size_t)(cJSON_GetArraySize(cs) + 1));
    if (!v) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    const cJSON *it;
    if (v) cJSON_ArrayForEach(it, cs) {
        if ((st = rs_json_u64(it, "choices[]", &v[n]))) break;
        n++;
      }
  }
  cJSON_Delete(root);
  if (!st) {
    rs_choices ch;
    if (!(st = rs_choices_replay(&ch, v, n))) {
      *failed = rs_ckpt_prop_run(p, &ch, scratch, msg, cap) == RS_FAIL;
      rs_choices_free(&ch);
    }
  }
  free(v);
  return st;
}

rs_status rs_ckpt_campaign_run(const rs_ckpt_campaign *o, rs_ckpt_campaign_result *r) {
  memset(r, 0, sizeof *r);
  if (o->cases <= 0 && !rs__seconds_ok(o->seconds)) /* NaN or inf would never end */
    return rs_fail(RS_ERR_INVALID, "seconds: %g, expected 0 < T <= %.0f (or a case count)", o->seconds, RS_MAX_SECONDS);
  char scratch[4200];
  rs_ckpt_scratch_path(o->scratch, "ckpt", (long)getpid(), scratch, sizeof scratch);
  mkdir(scratch, 0777);
  char msg[MSG_CAP];
  int failed_prop[RS_CKPT_PROP_COUNT] = {0};
  double t0 = rs_now();
  for (int64_t i = 0;; ++i) {
    if (o->cases > 0 ? i >= o->cases : rs_now() - t0 >= o->seconds) break;
    uint64_t seed = rs_hash3(o->seed, 0x636b7074, (uint64_t)i);
    for (int p = 0; p < RS_CKPT_PROP_COUNT; ++p) {
      if (failed_prop[p]) continue;
      rs_choices ch;
      rs_choices_seed(&ch, seed);
      rs_clear_error();
      rs_outcome out = rs_ckpt_prop_run((rs_ckpt_prop)p, &ch, scratch, msg, sizeof msg);
      if (rs_outcome_is_oom(out)) {
        rs_choices_free(&ch);
        rs_ckpt_rmtree(scratch);
        return rs_campaign_oom(rs_ckpt_prop_name((rs_ckpt_prop)p), (long long)i + 1, msg);
      }
      if (out == RS_PASS) r->pass[p]++;
      else if (out == RS_SKIP) r->skip[p]++;
      else {
        r->fail[p]++;
        failed_prop[p] = 1;
        r->failed++;
        size_t n;
        int runs;
        pred_ctx x = {(rs_ckpt_prop)p, scratch, msg};
        uint64_t *v = rs__ckpt_shrink(still_fails, &x, &ch, msg, sizeof msg, o->shrink_runs > 0 ? o->shrink_runs : 1000,
                                      &n, &runs);
        char path[4400] = "";
        rs_status st = v ? rs__ckpt_write_fixture(o->regress_dir ? o->regress_dir : "fixtures/ckpt/regressions",
                                                  rs_ckpt_prop_name((rs_ckpt_prop)p), v, n, msg, path, sizeof path)
                         : rs_fail(RS_ERR_NOMEM, "out of memory");
        printf("FAIL %s (case %lld, seed %llu; shrunk in %d runs to %zu draws)\n  %s\n", rs_ckpt_prop_name((rs_ckpt_prop)p),
               (long long)i, (unsigned long long)o->seed, runs, n, msg);
        snprintf(r->message[p], sizeof r->message[p], "%.1000s", msg);
        if (!st) snprintf(r->fixture[p], sizeof r->fixture[p], "%.1000s", path);
        if (!st) printf("  replay: reshard ckpt replay %s\n", path);
        else printf("  (fixture not written: %s)\n", rs_last_error());
        fflush(stdout);
        free(v);
      }
      rs_choices_free(&ch);
    }
    r->cases = i + 1;
  }
  r->seconds = rs_now() - t0;
  rs_ckpt_rmtree(scratch);
  return RS_OK;
}
