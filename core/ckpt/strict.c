/* strict.c - strict handling of missing and unexpected keys, what ref's and opt's loads share: the
 * names of the modes (Megatron-Core's StrictHandling values, spelled as its enum's values are), their
 * parser, and freeing the report a load fills. test_ckpt_model pins every name. */
#include <stdlib.h>
#include <string.h>
#include "core/ckpt/internal.h"

static const char *STRICT_NAMES[RS_STRICT_COUNT] = {
    "assume_ok_unexpected", "log_unexpected", "log_all",    "raise_unexpected",
    "raise_all",            "return_unexpected", "return_all", "ignore_all"};

const char *rs_strict_name(rs_strict s) {
  return (unsigned)s < RS_STRICT_COUNT ? STRICT_NAMES[s] : "?";
}

rs_status rs_strict_parse(const char *name, rs_strict *out) {
  for (int i = 0; i < RS_STRICT_COUNT; ++i)
    if (strcmp(name, STRICT_NAMES[i]) == 0) {
      *out = (rs_strict)i;
      return RS_OK;
    }
  return rs_fail(RS_ERR_INVALID, "strict: '%s' (assume_ok_unexpected, log_unexpected, log_all, raise_unexpected, "
                                 "raise_all, return_unexpected, return_all, ignore_all)", name);
}

void rs_ckpt_report_free(rs_ckpt_report *r) {
  for (int i = 0; i < r->nmissing; ++i) free(r->missing[i]);
  for (int i = 0; i < r->nunexpected; ++i) free(r->unexpected[i]);
  free(r->missing);
  free(r->unexpected);
  memset(r, 0, sizeof *r);
}
