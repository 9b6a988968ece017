/* shrink.c - shrink a failing choice stream. Candidates are always smaller in shortlex order
 * (shorter, or as long and lexicographically lower), so shrinking terminates; a candidate is kept
 * when the predicate (the same property) still fails on the case it decodes to. */
#include <stdlib.h>
#include <string.h>
#include "props/props.h"
#include "core/mutant.h"

typedef struct shrinker {
  rs_stream_pred pred;
  void *ctx;
  uint64_t *v; /* current best */
  size_t n;
  uint64_t *cand;
  int runs, max_runs;
} shrinker;

/* Run the predicate on cand[0..cn); on failure adopt it, cut to the draws actually used. */
static int attempt(shrinker *s, size_t cn) {
  if (s->runs >= s->max_runs) return 0;
  s->runs++;
  rs_choices ch;
  if (rs_choices_replay(&ch, s->cand, cn) != RS_OK) return 0;
  int bad = s->pred(s->ctx, &ch);
  size_t used = ch.pos < cn ? ch.pos : cn;
  rs_choices_free(&ch);
  if (!bad) return 0;
  /* Mutant 262: the kept stream is cut one draw short (the failure can be lost). */
  if (RS_MUTANT(262) && used > 8) used--;
  memcpy(s->v, s->cand, used * sizeof *s->v);
  s->n = used;
  return 1;
}

static int delete_spans(shrinker *s) {
  int better = 0;
  for (size_t k = 8; k >= 1; k /= 2) {
    for (size_t i = s->n >= k ? s->n - k + 1 : 0; i-- > 0 && s->runs < s->max_runs;) {
      if (i + k > s->n) continue;
      memcpy(s->cand, s->v, i * sizeof *s->v);
      memcpy(s->cand + i, s->v + i + k, (s->n - i - k) * sizeof *s->v);
      better |= attempt(s, s->n - k);
    }
  }
  return better;
}

static int zero_spans(shrinker *s) {
  int better = 0;
  for (size_t k = 8; k >= 1; k /= 2) {
    for (size_t i = 0; i + k <= s->n && s->runs < s->max_runs; i++) {
      int nz = 0;
      for (size_t j = i; j < i + k; j++) nz |= s->v[j] != 0;
      if (!nz) continue;
      memcpy(s->cand, s->v, s->n * sizeof *s->v);
      memset(s->cand + i, 0, k * sizeof *s->v);
      better |= attempt(s, s->n);
    }
  }
  return better;
}

/* Binary search each value down to the smallest one that still fails. */
static int lower_values(shrinker *s) {
  int better = 0;
  for (size_t i = 0; i < s->n && s->runs < s->max_runs; i++) {
    uint64_t lo = 0, hi = s->v[i]; /* 0 was tried by zero_spans; hi fails */
    while (hi > lo + 1 && i < s->n && s->runs < s->max_runs) {
      uint64_t mid = lo + (hi - lo) / 2;
      memcpy(s->cand, s->v, s->n * sizeof *s->v);
      s->cand[i] = mid;
      if (attempt(s, s->n)) {
        better = 1;
        hi = mid;
      } else {
        lo = mid;
      }
    }
  }
  return better;
}

/* Lower a draw and delete the k draws after it: a smaller count (mesh dims, tensor dims) no
 * longer consumes the draws of the items it dropped, so both must change at once. */
static int lower_and_delete(shrinker *s) {
  int better = 0;
  for (size_t i = 0; i < s->n && s->runs < s->max_runs; i++) {
    if (s->v[i] == 0) continue;
    for (size_t k = 1; k <= 8 && i + 1 + k <= s->n && s->runs < s->max_runs; k++) {
      uint64_t lowered[3] = {0, s->v[i] - 1, s->v[i] >= 2 ? s->v[i] - 2 : 0};
      for (int w = 0; w < 3 && i + 1 + k <= s->n; w++) {
        if (w > 0 && lowered[w] == 0) break;
        memcpy(s->cand, s->v, (i + 1) * sizeof *s->v);
        s->cand[i] = lowered[w];
        memcpy(s->cand + i + 1, s->v + i + 1 + k, (s->n - i - 1 - k) * sizeof *s->v);
        if (attempt(s, s->n - k)) {
          better = 1;
          break;
        }
      }
      if (i >= s->n || s->v[i] == 0) break;
    }
    /* Long runs of draws (a rank permutation) behind a mode draw: drop them with it. */
    static const size_t longk[] = {12, 16, 24, 32, 48, 64};
    for (size_t j = 0; j < sizeof longk / sizeof longk[0] && s->runs < s->max_runs; j++) {
      size_t k = longk[j];
      if (i >= s->n || s->v[i] == 0 || i + 1 + k > s->n) break;
      memcpy(s->cand, s->v, (i + 1) * sizeof *s->v);
      s->cand[i] = 0;
      memcpy(s->cand + i + 1, s->v + i + 1 + k, (s->n - i - 1 - k) * sizeof *s->v);
      if (attempt(s, s->n - k)) better = 1;
    }
  }
  return better;
}

/* Swap out-of-order neighbours (the "sort" pass): lowers the earlier, more significant draw. */
static int sort_pairs(shrinker *s) {
  int better = 0;
  for (size_t i = 0; i + 1 < s->n && s->runs < s->max_runs; i++) {
    if (s->v[i] <= s->v[i + 1]) continue;
    memcpy(s->cand, s->v, s->n * sizeof *s->v);
    s->cand[i] = s->v[i + 1];
    s->cand[i + 1] = s->v[i];
    better |= attempt(s, s->n);
  }
  return better;
}

int rs_shrink_stream(rs_stream_pred pred, void *ctx, uint64_t **v, size_t *n, int max_runs) {
  shrinker s = {pred, ctx, *v, *n, NULL, 0, max_runs};
  s.cand = malloc((*n ? *n : 1) * sizeof *s.cand);
  if (!s.cand) return 0;
  for (int better = 1; better && s.runs < s.max_runs;) {
    better = delete_spans(&s);
    better |= zero_spans(&s);
    better |= lower_values(&s);
    better |= lower_and_delete(&s);
    better |= sort_pairs(&s);
  }
  free(s.cand);
  *n = s.n;
  return s.runs;
}
