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
#include "core/ckpt/internal.h"
#include "core/json.h"
#include "core/values.h"
#include "props/ckpt.h"

#define MSG_CAP 1024

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct pred_ctx {
  rs_ckpt_prop p;
  const char *dir;
  char *msg;
} pred_ctx;

static int still_fails(void *vx, rs_choices *ch) {
  pred_ctx *x = vx;
  return rs_ckpt_prop_run(x->p, ch, x->dir, x->msg, MSG_CAP) == RS_FAIL;
}

static rs_status write_fixture(const char *dir, rs_ckpt_prop p, const uint64_t *v, size_t n, const char *msg,
                               char *path, size_t cap) {
  mkdir(dir, 0777);
  uint64_t h = XXH3_64bits(v, n * sizeof *v);
  snprintf(path, cap, "%s/%s-%016llx.json", dir, rs_ckpt_prop_name(p), (unsigned long long)h);
  FILE *f = fopen(path, "w");
  if (!f) return rs_fail(RS_ERR_IO, "%s: cannot create", path);
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "property", rs_ckpt_prop_name(p));
  cJSON_AddStringToObject(root, "message", msg);
  cJSON *a = cJSON_AddArrayToObject(root, "choices");
  for (size_t i = 0; i < n; ++i) {
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v[i]);
    cJSON_AddItemToArray(a, cJSON_CreateRaw(b));
  }
  /* the decoded case, for people reading the fixture (replay uses the choices) */
  rs_choices ch;
  rs_ckpt_case c;
  if (rs_choices_replay(&ch, v, n) == RS_OK) {
    if (rs_gen_ckpt_case(&ch, &c) == RS_OK) {
      const rs_state_spec *s[3] = {&c.a, &c.a2, &c.b};
      const char *nm[3] = {"save_spec", "save_spec_2", "load_spec"};
      for (int i = 0; i < 3; ++i) {
        char *j = rs_state_spec_to_json(s[i]);
        if (j) cJSON_AddRawToObject(root, nm[i], j);
        free(j);
      }
      cJSON_AddStringToObject(root, "strict", rs_strict_name(c.strict));
      rs_ckpt_case_free(&c);
    }
    rs_choices_free(&ch);
  }
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (text) fprintf(f, "%s\n", text);
  free(text);
  fclose(f);
  return RS_OK;
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
  char scratch[4200];
  if (o->scratch) snprintf(scratch, sizeof scratch, "%s", o->scratch);
  else {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(scratch, sizeof scratch, "%s/reshard-ckpt-%d", base, (int)getpid());
  }
  mkdir(scratch, 0777);
  char msg[MSG_CAP];
  int failed_prop[RS_CKPT_PROP_COUNT] = {0};
  double t0 = now();
  for (int64_t i = 0;; ++i) {
    if (o->cases > 0 ? i >= o->cases : now() - t0 >= o->seconds) break;
    uint64_t seed = rs_hash3(o->seed, 0x636b7074, (uint64_t)i);
    for (int p = 0; p < RS_CKPT_PROP_COUNT; ++p) {
      if (failed_prop[p]) continue;
      rs_choices ch;
      rs_choices_seed(&ch, seed);
      rs_outcome out = rs_ckpt_prop_run((rs_ckpt_prop)p, &ch, scratch, msg, sizeof msg);
      if (out == RS_PASS) r->pass[p]++;
      else if (out == RS_SKIP) r->skip[p]++;
      else {
        r->fail[p]++;
        failed_prop[p] = 1;
        r->failed++;
        size_t n = ch.n;
        uint64_t *v = malloc((n ? n : 1) * sizeof *v);
        int runs = 0;
        char first[MSG_CAP];
        snprintf(first, sizeof first, "%s", msg);
        pred_ctx x = {(rs_ckpt_prop)p, scratch, msg};
        if (v) {
          memcpy(v, ch.v, n * sizeof *v);
          runs = rs_shrink_stream(still_fails, &x, &v, &n, o->shrink_runs > 0 ? o->shrink_runs : 1000);
          rs_choices rc;
          if (rs_choices_replay(&rc, v, n) == RS_OK) {
            if (!still_fails(&x, &rc)) snprintf(msg, sizeof msg, "%s", first);
            rs_choices_free(&rc);
          }
        }
        char path[4400] = "";
        rs_status st = v ? write_fixture(o->regress_dir ? o->regress_dir : "fixtures/ckpt/regressions",
                                         (rs_ckpt_prop)p, v, n, msg, path, sizeof path)
                         : RS_ERR_NOMEM;
        printf("FAIL %s (case %lld, seed %llu; shrunk in %d runs to %zu draws)\n  %s\n", rs_ckpt_prop_name((rs_ckpt_prop)p),
               (long long)i, (unsigned long long)o->seed, runs, n, msg);
        if (!st) printf("  replay: reshard ckpt replay %s\n", path);
        else printf("  (fixture not written: %s)\n", rs_last_error());
        fflush(stdout);
        free(v);
      }
      rs_choices_free(&ch);
    }
    r->cases = i + 1;
  }
  r->seconds = now() - t0;
  if (!o->scratch) rs_ckpt_rmtree(scratch);
  return RS_OK;
}
