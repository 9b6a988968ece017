/* numflag.c - exact parsing of numeric flag values (numflag.h). */
#include "core/numflag.h"
#include <ctype.h>
#include <string.h>

int rs__flag_int(const char *s, long long lo, long long hi, long long *out) {
  if (!s) return -1;
  int neg = *s == '-' && lo < 0;
  if (neg) ++s;
  if (!isdigit((unsigned char)*s)) return -1;
  long long v = 0;
  for (; *s; ++s) {
    if (!isdigit((unsigned char)*s)) return -1;
    int d = *s - '0';
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, neg ? -d : d, &v)) return -1;
  }
  if (v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int rs__flag_u64(const char *s, unsigned long long *out) {
  /* decimal digits only, like every other integer flag: a seed is printed, saved and named in
   * decimal (case gen-16-0, "seed": 16), so `0x10` would be a second spelling of one value */
  if (!s || !*s) return -1;
  unsigned long long v = 0;
  for (; *s; ++s) {
    if (!isdigit((unsigned char)*s)) return -1;
    if (__builtin_mul_overflow(v, 10ull, &v) || __builtin_add_overflow(v, (unsigned long long)(*s - '0'), &v))
      return -1;
  }
  *out = v;
  return 0;
}

int rs__flag_bytes(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  if (!s || !isdigit((unsigned char)*s)) return -1;
  int64_t v = 0;
  for (; isdigit((unsigned char)*s); ++s)
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *s - '0', &v)) return -1;
  int shift = 0;
  switch (toupper((unsigned char)*s)) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: break;
  }
  if (shift) {
    ++s;
    if (*s == 'i' || *s == 'I') {
      ++s;
      if (*s != 'B' && *s != 'b') return -1;
    }
  }
  if (*s == 'B' || *s == 'b') ++s;
  if (*s) return -1;
  if (__builtin_mul_overflow(v, (int64_t)1 << shift, &v)) return -1;
  if (v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int rs__seconds_ok(double t) { return t > 0 && t <= RS_MAX_SECONDS; }

int rs__flag_seconds(const char *s, double *out) {
  if (!s) return -1;
  double v = 0, scale = 1;
  int digits = 0;
  for (; isdigit((unsigned char)*s); ++s, ++digits) {
    v = v * 10 + (*s - '0');
    if (v > RS_MAX_SECONDS) return -1; /* also keeps a long digit string from reaching inf */
  }
  if (*s == '.') {
    for (++s; isdigit((unsigned char)*s); ++s, ++digits) {
      scale /= 10;
      v += (*s - '0') * scale;
    }
  }
  if (*s || !digits || !rs__seconds_ok(v)) return -1;
  *out = v;
  return 0;
}

int rs__flag_share(const char *s, double *out) {
  if (!s) return -1;
  double v = 0, scale = 1;
  int digits = 0;
  for (; isdigit((unsigned char)*s); ++s, ++digits) {
    v = v * 10 + (*s - '0');
    if (v > 1) return -1;
  }
  if (*s == '.') {
    for (++s; isdigit((unsigned char)*s); ++s, ++digits) {
      scale /= 10;
      v += (*s - '0') * scale;
    }
  }
  if (*s || !digits || !(v >= 0 && v <= 1)) return -1;
  *out = v;
  return 0;
}
