/* test_ckpt_dcp.c - PyTorch DCP interop held without torch: fixtures/ckpt-dcp/reader.json records
 * what torch.distributed.checkpoint.load put into DTensors on 3 gloo ranks when it read a reshard
 * checkpoint (of saved_spec) through tools/pytorch/dcp_reshard.py's ReshardStorageReader: per rank
 * and key the local shape and the xxh3-64 of its bytes. Here the oracle computes every rank's
 * bytes for load_spec (the same layout as a reshard state spec) and the digests must be equal. A
 * second check flips one digest and requires the comparison to notice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "check.h"
#include "core/json.h"
#include "core/values.h"
#include "reshard/ckpt.h"

static const rs_sh_tensor *find(const rs_state_dict *sd, const char *key) {
  for (int i = 0; i < sd->nt; ++i)
    if (!strcmp(sd->t[i].key, key)) return &sd->t[i];
  return NULL;
}

/* number of (rank, key) records whose digest and shape equal the oracle's */
static int matches(const cJSON *ranks, const rs_ckpt_world *exp, int flip, int *total) {
  int ok = 0;
  *total = 0;
  const cJSON *r;
  cJSON_ArrayForEach(r, ranks) {
    int64_t rank = -1;
    rs_json_i64(cJSON_GetObjectItemCaseSensitive(r, "rank"), "rank", 0, exp->n - 1, &rank);
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(r, "tensors"), *t;
    cJSON_ArrayForEach(t, ts) {
      (*total)++;
      if (rank < 0) continue;
      const rs_sh_tensor *e = find(&exp->sd[rank], t->string);
      const cJSON *hx = cJSON_GetObjectItemCaseSensitive(t, "xxh3"), *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
      int64_t shape[RS_MAX_DIMS];
      int nd = 0;
      if (!e || !cJSON_IsString(hx) || rs_json_i64_array(sh, "shape", RS_MAX_DIMS, 0, INT64_MAX, shape, &nd)) continue;
      int same = nd == e->ndim;
      for (int d = 0; same && d < nd; ++d) same = shape[d] == e->local_shape[d];
      char want[17];
      snprintf(want, sizeof want, "%016llx", (unsigned long long)(XXH3_64bits(e->data, (size_t)e->nbytes) ^ (uint64_t)flip));
      if (same && !strcmp(want, hx->valuestring)) ok++;
      else if (!flip) fprintf(stderr, "rank %lld key %s: DCP loaded %s, the oracle says %s\n", (long long)rank, t->string, hx->valuestring, want);
    }
  }
  return ok;
}

int main(int argc, char **argv) {
  char path[4096];
  snprintf(path, sizeof path, "%s/fixtures/ckpt-dcp/reader.json", argc > 1 ? argv[1] : ".");
  char *text = rs_read_text(path);
  CHECK(text != NULL);
  if (!text) TEST_DONE();
  cJSON *root = NULL;
  CHECK(rs_json_parse(text, &root) == RS_OK);
  free(text);
  if (!root) TEST_DONE();
  char *saved_j = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(root, "saved_spec"));
  char *load_j = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(root, "load_spec"));
  rs_state_spec saved, load;
  CHECK(saved_j && rs_state_spec_from_json(saved_j, &saved) == RS_OK);
  CHECK(load_j && rs_state_spec_from_json(load_j, &load) == RS_OK);
  rs_ckpt_world exp = {0, NULL};
  CHECK(rs_oracle_ckpt_expected(&saved, &load, &exp) == RS_OK);
  int total = 0;
  const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(root, "ranks");
  int ok = matches(ranks, &exp, 0, &total);
  printf("DCP through ReshardStorageReader: %d of %d (rank, key) local tensors equal the oracle\n", ok, total);
  CHECK(total >= 12);
  CHECK_EQ_I(ok, total);
  CHECK_EQ_I(matches(ranks, &exp, 1, &total), 0);
  rs_ckpt_world_free(&exp);
  rs_state_spec_free(&saved);
  rs_state_spec_free(&load);
  free(saved_j);
  free(load_j);
  cJSON_Delete(root);
  TEST_DONE();
}
