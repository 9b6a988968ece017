/* ckpt_fixture.c - what the checkpoint campaigns (ref's properties, props/ckpt_campaign.c, and
 * opt's cross property, props/ckpt_opt.c) do with a failing case: shrink its choice stream and
 * write the regression fixture (property, message, shrunk stream, and the specs it decodes to)
 * that `reshard ckpt replay` runs again. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>
#include "core/json.h"
#include "props/ckpt.h"

uint64_t *rs__ckpt_shrink(rs_stream_pred still_fails, void *ctx, const rs_choices *ch, char *msg, size_t cap,
                          int max_runs, size_t *n, int *runs) {
  *n = ch->n;
  *runs = 0;
  uint64_t *v = malloc((*n ? *n : 1) * sizeof *v);
  if (!v) return NULL;
  memcpy(v, ch->v, *n * sizeof *v);
  char *first = malloc(cap);
  if (first) snprintf(first, cap, "%s", msg);
  *runs = rs_shrink_stream(still_fails, ctx, &v, n, max_runs);
  /* the predicate leaves the message of its last run: run the shrunk stream once more, and keep
   * the first message should it (flakily) pass */
  rs_choices rc;
  if (rs_choices_replay(&rc, v, *n) == RS_OK) {
    if (!still_fails(ctx, &rc) && first) snprintf(msg, cap, "%s", first);
    rs_choices_free(&rc);
  }
  free(first);
  return v;
}

rs_status rs__ckpt_write_fixture(const char *dir, const char *prop, const uint64_t *v, size_t n, const char *msg,
                                 char *path, size_t cap) {
  mkdir(dir, 0777);
  uint64_t h = XXH3_64bits(v, n * sizeof *v);
  snprintf(path, cap, "%s/%s-%016llx.json", dir, prop, (unsigned long long)h);
  FILE *f = fopen(path, "w");
  if (!f) {
    rs_status st = rs_fail(RS_ERR_IO, "%s: cannot create", path);
    path[0] = 0;
    return st;
  }
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "property", prop);
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
