/* fuzz_expected.c - libFuzzer target: a fixture's "expected" block (core/expected.c). The input is
 * a fixture document: when it holds a valid case, its "expected" member is read against that case;
 * otherwise the whole document is read as an "expected" block of a fixed 2x2 case with world ranks
 * 3,1,2,0 and an (5,3) tensor. Both the strict (fixture) and lenient (PyTorch record) forms run;
 * an accepted block must only index ranks that exist. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "reshard/reshard.h"
#include "core/case_json.h"
#include "core/expected.h"
#include "core/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_block(const cJSON *blk, const rs_case *c) {
  for (int strict = 0; strict < 2; ++strict) {
    rs__expected e;
    if (rs__expected_parse(blk, "expected", strict, c, &e) != RS_OK) {
      if (!rs_last_error()[0]) abort();
      continue;
    }
    for (int i = 0; i < e.nranks; ++i) {
      const rs__exp_rank *r = &e.ranks[i];
      if (r->pos < 0 || r->pos >= c->mesh.nranks || c->mesh.ranks[r->pos] != r->rank) abort();
    }
    for (int k = 0; k < RS_COLL_COUNT; ++k)
      if (e.collectives[k] < 0) abort();
    rs__expected_free(&e);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  cJSON *root = NULL;
  rs_case *c = malloc(sizeof *c);
  if (!c || rs_json_parse(text, &root) != RS_OK) goto out;
  if (rs__case_from_cjson(root, c) == RS_OK) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "expected");
    if (e) read_block(e, c);
  } else {
    static const char *fixed =
        "{\"mesh\":{\"shape\":[2,2],\"ranks\":[3,1,2,0]},\"tensor\":{\"shape\":[5,3],\"dtype\":\"F32\"},"
        "\"src\":{\"placements\":[\"S(0)\",\"R\"]},\"dst\":{\"placements\":[\"R\",\"S(1)\"]}}";
    if (rs_case_from_json(fixed, c) != RS_OK) abort();
    read_block(root, c);
  }
out:
  cJSON_Delete(root);
  free(c);
  free(text);
  return 0;
}
