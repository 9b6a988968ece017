/* bench_flags.c - the benchmarks' numeric flags through the one checked parser (core/numflag.h):
 * `--cases 4294967297`, `--cases 1e3`, `--bytes nan` or `--ranks -1` are refused naming the flag,
 * never read by atoi/strtod into something else. */
#include <stdlib.h>
#include <string.h>
#include "core/mutant.h"
#include "bench.h"
#include "core/numflag.h"

int rs_bench_int_flag(const char *who, int argc, char **argv, int *i, const char *name, long long lo,
                      long long hi, int *out, rs_status *st) {
  if (strcmp(argv[*i], name) != 0) return 0;
  long long v;
  if (*i + 1 >= argc) *st = rs_fail(RS_ERR_INVALID, "%s: %s: missing value", who, name);
  else if (RS_MUTANT(702) && (v = atoi(argv[++*i])) >= lo && v <= hi) /* planted: read by atoi again */
    *out = (int)v, *st = RS_OK;
  else if (RS_MUTANT(702))
    *st = rs_fail(RS_ERR_INVALID, "%s: %s: out of range", who, name);
  else if (rs__flag_int(argv[++*i], lo, hi, &v))
    *st = rs_fail(RS_ERR_INVALID, "%s: %s: '%s', expected an integer %lld..%lld", who, name, argv[*i], lo, hi);
  else {
    *out = (int)v;
    *st = RS_OK;
  }
  return 1;
}

rs_status rs_bench_int_list(const char *who, const char *name, const char *v, long long lo, long long hi,
                            int *out, int max, int *n) {
  char tok[32];
  *n = 0;
  for (const char *p = v;;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    long long x;
    if (*n == max) return rs_fail(RS_ERR_INVALID, "%s: %s: more than %d values", who, name, max);
    if (len >= sizeof tok) len = sizeof tok - 1; /* still refused below: a cut number is no match */
    memcpy(tok, p, len);
    tok[len] = 0;
    if ((e ? (size_t)(e - p) : strlen(p)) >= sizeof tok || rs__flag_int(tok, lo, hi, &x))
      return rs_fail(RS_ERR_INVALID, "%s: %s: '%s', expected a comma list of integers %lld..%lld", who, name, v, lo, hi);
    out[(*n)++] = (int)x;
    if (!e) return RS_OK;
    p = e + 1;
  }
}
