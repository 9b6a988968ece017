/* numflag.h - the one checked parser of numeric flag values (every verb of the CLI and the
 * benchmarks). A value is read exactly or refused: no atoi/strtod, so `4294967297` never wraps to 1,
 * `1e3` is no count, and `nan`, `inf` or a negative number never become a size or a time limit.
 * Each returns 0 and sets *out on success, -1 on refusal (the caller names its flag). */
#ifndef RS_CORE_NUMFLAG_H
#define RS_CORE_NUMFLAG_H

#include <stdint.h>

/* The longest time limit a campaign takes (--seconds): one week. */
#define RS_MAX_SECONDS 604800.0

/* Decimal digits with a leading '-' only when lo < 0; the value must lie in [lo, hi]. No spaces,
 * '+', hex, fraction or exponent; overflow is refused. */
int rs__flag_int(const char *s, long long lo, long long hi, long long *out);
/* Decimal digits only (no sign, space, '+' or hex): any unsigned 64-bit value (seeds). */
int rs__flag_u64(const char *s, unsigned long long *out);
/* A byte count: decimal digits with an optional binary suffix K, M, G or T (KiB .. TiB, either case,
 * an optional trailing B or iB: 2G, 512MiB, 4096), in [lo, hi]; overflow is refused. */
int rs__flag_bytes(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* A time in seconds: digits with an optional fraction (10, 0.5, .25), 0 < t <= RS_MAX_SECONDS.
 * No sign, exponent, nan or inf. */
int rs__flag_seconds(const char *s, double *out);
/* A share of cases: digits with an optional fraction (0, 0.25, 1, .5), 0 <= v <= 1. No sign,
 * percent sign, exponent, nan or inf. */
int rs__flag_share(const char *s, double *out);
/* 1 when t is a time limit a campaign can keep: finite, > 0 and <= RS_MAX_SECONDS (NaN fails
 * every comparison, so `t <= 0` alone lets it through). */
int rs__seconds_ok(double t);

#endif
