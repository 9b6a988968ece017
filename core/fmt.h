/* fmt.h - bounded text building for messages and tables. `n += snprintf(buf + n, cap - n, ...)`
 * walks past the end once a piece is cut (n > cap makes cap - n wrap), so every list of integers
 * and every message built in pieces goes through these instead: they never write past cap, always
 * NUL-terminate, and end a cut text with "...". */
#ifndef RS_CORE_FMT_H
#define RS_CORE_FMT_H

#include <stddef.h>
#include <stdint.h>

typedef struct rs__sbuf {
  char *p;
  size_t cap, len; /* len <= cap - 1 always */
  int cut;         /* 1 once something did not fit */
} rs__sbuf;

/* Start writing into buf[0..cap) (cap >= 1). */
void rs__sbuf_init(rs__sbuf *b, char *buf, size_t cap);
/* Append printf-style; once the text does not fit, it is cut with "..." and later appends are dropped. */
void rs__sbuf_add(rs__sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Append open, v[0] sep v[1] ... , close. */
void rs__sbuf_ints(rs__sbuf *b, const int64_t *v, int n, const char *open, const char *sep,
                   const char *close);

/* The one int-list formatter: "[4,2]" style (open/sep/close chosen by the caller) into buf, cut
 * with "..." when it does not fit. Returns buf, so it can be an argument of printf. */
const char *rs__fmt_ints(char *buf, size_t cap, const int64_t *v, int n, const char *open,
                         const char *sep, const char *close);

#endif
