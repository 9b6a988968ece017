/* check.h - the tiny assertion macros the unit tests share. */
#ifndef RS_TEST_CHECK_H
#define RS_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>
static int rs_test_failures = 0;
#define CHECK(cond)                                                                    \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);       \
      rs_test_failures++;                                                              \
    }                                                                                  \
  } while (0)
#define CHECK_EQ_I(a, b)                                                               \
  do {                                                                                 \
    long long _a = (long long)(a), _b = (long long)(b);                                \
    if (_a != _b) {                                                                    \
      fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #a,   \
              _a, _b);                                                                 \
      rs_test_failures++;                                                              \
    }                                                                                  \
  } while (0)
#define TEST_DONE()                                                                    \
  do {                                                                                 \
    if (rs_test_failures) {                                                            \
      fprintf(stderr, "%d check(s) failed\n", rs_test_failures);                      \
      return 1;                                                                        \
    }                                                                                  \
    printf("ok\n");                                                                    \
    return 0;                                                                          \
  } while (0)
#endif
