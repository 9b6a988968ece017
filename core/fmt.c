/* fmt.c - bounded text building (see fmt.h): the one place where pieces are appended to a fixed
 * buffer, so no caller does the `n += snprintf` arithmetic that overruns once a piece is cut. */
#include "core/fmt.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void rs__sbuf_init(rs__sbuf *b, char *buf, size_t cap) {
  b->p = buf;
  b->cap = cap;
  b->len = 0;
  b->cut = 0;
  if (cap) buf[0] = 0;
}

static void mark_cut(rs__sbuf *b) {
  b->cut = 1;
  if (b->cap < 4) return;
  /* "..." replaces the last bytes that fit */
  size_t at = b->len < b->cap - 4 ? b->len : b->cap - 4;
  memcpy(b->p + at, "...", 4);
  b->len = at + 3;
}

void rs__sbuf_add(rs__sbuf *b, const char *fmt, ...) {
  if (b->cut || b->cap == 0) return;
  size_t room = b->cap - b->len;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(b->p + b->len, room, fmt, ap);
  va_end(ap);
  if (k < 0) {
    b->p[b->len] = 0;
    return;
  }
  if ((size_t)k >= room) {
    b->len = b->cap - 1;
    mark_cut(b);
    return;
  }
  b->len += (size_t)k;
}

void rs__sbuf_ints(rs__sbuf *b, const int64_t *v, int n, const char *open, const char *sep,
                   const char *close) {
  rs__sbuf_add(b, "%s", open);
  for (int i = 0; i < n; ++i) rs__sbuf_add(b, "%s%lld", i ? sep : "", (long long)v[i]);
  rs__sbuf_add(b, "%s", close);
}

const char *rs__fmt_ints(char *buf, size_t cap, const int64_t *v, int n, const char *open,
                         const char *sep, const char *close) {
  rs__sbuf b;
  rs__sbuf_init(&b, buf, cap);
  rs__sbuf_ints(&b, v, n, open, sep, close);
  return buf;
}
