/* shrink.c - shrink a failing choice stream. Candidates are always smaller in shortlex order
 * (shorter, or as long and lexicographically lower), so shrinking terminates; a candidate is kept
 * when the predicate (the same property) still fails on the case it decodes to. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "props/props.h"
#include "core/mutant.h"
#include "props/report.h"

typedef struct shrinker {
  rs_stream_pred pred;
  void *ctx;
  uint64_t *v; /* current best */
  size_t n;
  uint64_t *cand;
  int runs, max_runs;
  double t0, max_seconds;
  int out;       /* RS_SHRINK_RUNS_OUT / RS_SHRINK_TIME_OUT: a candidate was left untried */
  int have_items; /* items[] describe v (from the last decode of v that failed) */
  int nitems;
  rs_choice_item items[RS_CHOICE_ITEMS];
} shrinker;

/* 0 when a budget is spent (and says which). */
static int budget_left(shrinker *s) {
  if (s->runs >= s->max_runs) {
    s->out |= RS_SHRINK_RUNS_OUT;
    return 0;
  }
  if (s->max_seconds > 0 && rs_now() - s->t0 >= s->max_seconds) {
    s->out |= RS_SHRINK_TIME_OUT;
    return 0;
  }
  return 1;
}

/* Run the predicate on cand[0..cn); on failure adopt it, cut to the draws actually used. */
static int attempt(shrinker *s, size_t cn) {
  if (!budget_left(s)) return 0;
  s->runs++;
  rs_choices *ch = malloc(sizeof *ch);
  if (!ch) return 0;
  if (rs_choices_replay(ch, s->cand, cn) != RS_OK) {
    free(ch);
    return 0;
  }
  int bad = s->pred(s->ctx, ch);
  size_t used = ch->pos < cn ? ch->pos : cn;
  if (bad) { /* the structure of the stream now kept */
    s->have_items = 1;
    s->nitems = ch->nitems;
    memcpy(s->items, ch->item, (size_t)ch->nitems * sizeof *ch->item);
  }
  rs_choices_free(ch);
  free(ch);
  if (!bad) return 0;
  /* Mutant 262: the kept stream is cut one draw short (the failure can be lost). */
  if (RS_MUTANT(262) && used > 8) used--;
  memcpy(s->v, s->cand, used * sizeof *s->v);
  s->n = used;
  return 1;
}

/* Structure first: drop each item the generator marked (a mesh dim, a tensor dim, a P2P parameter)
 * by lowering its count draw and deleting its spans, last item first, again from the last after
 * every success; size-1 mesh dims go here, which lowering values one draw at a time cannot do. */
static int drop_items(shrinker *s) {
  int better = 0;
  if (!s->have_items) { /* learn the structure of the starting stream (one run) */
    memcpy(s->cand, s->v, s->n * sizeof *s->v);
    if (!attempt(s, s->n)) return 0;
  }
  for (int b = s->nitems - 1; b >= 0 && budget_left(s); b--) {
    if (b >= s->nitems) continue;
    const rs_choice_item it = s->items[b];
    if (it.count_at >= s->n || it.nspan < 1 || it.end[it.nspan - 1] > s->n) continue;
    size_t cn = 0, from = 0;
    for (int k = 0; k < it.nspan; k++) {
      memcpy(s->cand + cn, s->v + from, (it.start[k] - from) * sizeof *s->v);
      cn += it.start[k] - from;
      from = it.end[k];
    }
    memcpy(s->cand + cn, s->v + from, (s->n - from) * sizeof *s->v);
    cn += s->n - from;
    s->cand[it.count_at] = it.less; /* before the first span: same index in cand */
    if (attempt(s, cn)) {
      better = 1;
      b = s->nitems; /* the items moved: again from the last */
    }
  }
  return better;
}

static int delete_spans(shrinker *s) {
  int better = 0;
  for (size_t k = 8; k >= 1; k /= 2) {
    for (size_t i = s->n >= k ? s->n - k + 1 : 0; i-- > 0 && budget_left(s);) {
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
    for (size_t i = 0; i + k <= s->n && budget_left(s); i++) {
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
  for (size_t i = 0; i < s->n && budget_left(s); i++) {
    uint64_t lo = 0, hi = s->v[i]; /* 0 was tried by zero_spans; hi fails */
    while (hi > lo + 1 && i < s->n && budget_left(s)) {
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
  for (size_t i = 0; i < s->n && budget_left(s); i++) {
    if (s->v[i] == 0) continue;
    for (size_t k = 1; k <= 8 && i + 1 + k <= s->n && budget_left(s); k++) {
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
    for (size_t j = 0; j < sizeof longk / sizeof longk[0] && budget_left(s); j++) {
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
  for (size_t i = 0; i + 1 < s->n && budget_left(s); i++) {
    if (s->v[i] <= s->v[i + 1]) continue;
    memcpy(s->cand, s->v, s->n * sizeof *s->v);
    s->cand[i] = s->v[i + 1];
    s->cand[i + 1] = s->v[i];
    better |= attempt(s, s->n);
  }
  return better;
}

static int shrink_rounds(shrinker *sp);

int rs_shrink_stream(rs_stream_pred pred, void *ctx, uint64_t **v, size_t *n, int max_runs) {
  return rs_shrink_stream_budget(pred, ctx, v, n, max_runs, 0, NULL);
}

void rs_shrink_budget_note(int out, int max_runs, double max_seconds, char *buf, size_t cap) {
  if (out & RS_SHRINK_TIME_OUT) snprintf(buf, cap, "shrink time cap of %g s reached", max_seconds);
  else if (out & RS_SHRINK_RUNS_OUT) snprintf(buf, cap, "shrink budget of %d runs used up", max_runs);
  else if (cap) buf[0] = 0;
}

int rs_shrink_stream_budget(rs_stream_pred pred, void *ctx, uint64_t **v, size_t *n, int max_runs,
                            double max_seconds, int *out) {
  shrinker *sp = calloc(1, sizeof *sp);
  if (out) *out = 0;
  if (!sp) return 0;
  shrinker s0 = {pred, ctx, *v, *n, NULL, 0, max_runs, rs_now(), max_seconds, 0, 0, 0, {{0}}};
  *sp = s0;
  int runs = 0;
  sp->cand = malloc((*n ? *n : 1) * sizeof *sp->cand);
  if (sp->cand) {
    runs = shrink_rounds(sp);
    *n = sp->n;
    if (out) *out = sp->out;
  }
  free(sp->cand);
  free(sp);
  return runs;
}

static int shrink_rounds(shrinker *sp) {
  shrinker s = *sp;
  for (int better = 1; better && budget_left(&s);) {
    better = drop_items(&s);
    better |= delete_spans(&s);
    better |= zero_spans(&s);
    better |= lower_values(&s);
    better |= lower_and_delete(&s);
    better |= sort_pairs(&s);
  }
  *sp = s;
  return s.runs;
}
