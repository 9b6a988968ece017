/* fuzz_case_json.c - libFuzzer target: the case JSON codec (core/case_json.c over core/json.h).
 * Any input must either be refused with a message or give a valid case that survives a round
 * trip through rs_case_to_json, whose layouts and greedy plan compute without undefined behaviour,
 * and (when small) whose source values can be made. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "reshard/reshard.h"
#include "core/values.h"
#include "core/checked.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether a JSON string of `s` holds the escape \u0000 (cJSON would cut the string there): an
 * accepted input never does, every reader refuses it (core/json.c). */
static int holds_nul_escape(const char *s) {
  for (size_t i = 0; s[i]; ++i) {
    if (s[i] != '"') continue;
    for (++i; s[i] && s[i] != '"'; ++i)
      if (s[i] == '\\' && s[i + 1]) {
        if (s[i + 1] == 'u' && strncmp(s + i + 2, "0000", 4) == 0) return 1;
        ++i;
      }
    if (!s[i]) break;
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  rs_case *c = malloc(sizeof *c), *back = malloc(sizeof *back);
  char *j;
  if (!c || !back) goto out;
  if (rs_case_from_json(text, c) != RS_OK) {
    if (!rs_last_error()[0]) abort(); /* every refusal says why */
    goto out;
  }
  if (holds_nul_escape(text)) abort(); /* a string cut at a NUL was accepted */
  j = rs_case_to_json(c);
  if (!j) abort();
  if (rs_case_from_json(j, back) != RS_OK) abort(); /* what we write we must read */
  if (back->seed != c->seed || back->tensor.ndim != c->tensor.ndim || back->mesh.nranks != c->mesh.nranks ||
      memcmp(back->tensor.shape, c->tensor.shape, sizeof c->tensor.shape) != 0 ||
      !rs_sharding_equal(&back->src, &c->src, c->tensor.ndim) || !rs_sharding_equal(&back->dst, &c->dst, c->tensor.ndim))
    abort();
  free(j);
  for (int pos = 0; pos < c->mesh.nranks; ++pos) {
    int64_t coord[RS_MAX_MESH_DIMS] = {0}, shp[RS_MAX_DIMS], off[RS_MAX_DIMS];
    rs_mesh_coord(&c->mesh, pos, coord);
    rs_local_shape_offset(&c->mesh, &c->src, &c->tensor, coord, shp, off);
    rs_local_shape_offset(&c->mesh, &c->dst, &c->tensor, coord, shp, off);
  }
  rs_plan p;
  if (rs_ref_plan_greedy(&c->mesh, &c->tensor, &c->src, &c->dst, &p) == RS_OK) {
    char trace[4096];
    (void)rs_plan_trace(&c->mesh, &c->src, c->tensor.ndim, &p, trace, sizeof trace);
  }
  int64_t nbytes;
  int64_t all_bytes; /* the source pieces of every rank: small cases only, checked before the multiply */
  if (rs_tensor_nbytes(&c->tensor, &nbytes) == RS_OK && rs__mul_ok(nbytes, c->mesh.nranks, &all_bytes) &&
      all_bytes <= (1 << 18)) {
    rs_locals in = {0};
    (void)rs_make_source(c, &in);
    rs_locals_free(&in);
  }
out:
  free(c);
  free(back);
  free(text);
  return 0;
}
