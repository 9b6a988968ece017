/* fuzz_ckpt_state_spec.c - libFuzzer target: the state-spec parser (core/ckpt/spec.c). Any input
 * must be refused with a message, or give a spec that survives a print / parse round trip and,
 * when small, builds every rank's state dict, whose factories apply and whose metadata passes
 * validation (a spec that parses always describes a valid sharded state dict). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/checked.h"
#include "reshard/ckpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  rs_state_spec s, back;
  if (rs_state_spec_from_json(text, &s) != RS_OK) {
    if (!rs_last_error()[0]) abort();
    free(text);
    return 0;
  }
  char *j = rs_state_spec_to_json(&s);
  if (!j) abort();
  if (rs_state_spec_from_json(j, &back) != RS_OK) abort();
  char *j2 = rs_state_spec_to_json(&back);
  if (!j2 || strcmp(j, j2) != 0) abort();
  free(j2);
  free(j);
  rs_state_spec_free(&back);
  int64_t total = 0;
  int small = 1;
  for (int i = 0; i < s.nt && small; ++i) {
    int64_t nb;
    small = rs_tensor_nbytes(&s.t[i].t, &nb) == RS_OK && nb <= (1 << 14);
    total += nb;
  }
  if (small && total * s.world <= (1 << 18)) {
    rs_ckpt_world w;
    if (rs_state_spec_build(&s, RS_FILL_VALUES, &w) == RS_OK) {
      for (int r = 0; r < w.n; ++r)
        if (rs_sd_apply_factories(&w.sd[r]) != RS_OK) abort();
      if (rs_ckpt_validate(&w) != RS_OK) abort();
      rs_ckpt_world_free(&w);
    }
  }
  rs_state_spec_free(&s);
  free(text);
  return 0;
}
