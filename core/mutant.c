/* mutant.c - reads RS_MUTANT once; only the mutation-test build consults it (RS_MUTANT macro). */
#include <stdlib.h>
#include "core/mutant.h"

int rs_mutant_id(void) {
  static int cached = -1;
  if (cached < 0) {
    const char *e = getenv("RS_MUTANT");
    cached = e ? atoi(e) : 0;
    if (cached < 0) cached = 0;
  }
  return cached;
}
