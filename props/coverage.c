/* coverage.c - the one gate every campaign with a feature table calls (check and conform's
 * redistribute suite, fuzz-planner, tp check, ckpt check --impl opt), and the one share gate of
 * declined and skipped cases (fuzz-planner --max-decline-share, conform --max-skip-share).
 * docs/harness.md, "Feature coverage", derives the numbers. */
#include <math.h>
#include "props/props.h"
#include "core/mutant.h"

int64_t rs_feature_min_count(int64_t n, double rate) {
  if (!(rate > 0) || n <= 0) return 0;
  double p = RS_FEATURE_RATE_MARGIN * rate;
  if (p >= 1) return n;
  double np = (double)n * p;
  if (np > 1e5) { /* the normal approximation: 6.0 standard deviations is a tail of 1e-9 */
    double k = ceil(np - 6.0 * sqrt(np * (1 - p)));
    return k > 0 ? (int64_t)k : 0;
  }
  /* the largest k with P(X < k) <= RS_FEATURE_FLAKE_P, X ~ Binomial(n, p): pmf by recurrence in logs */
  double lpmf = (double)n * log1p(-p), lr = log(p) - log1p(-p), cdf = 0;
  for (int64_t k = 0; k < n; k++) {
    double next = cdf + exp(lpmf); /* P(X < k + 1) */
    if (next > RS_FEATURE_FLAKE_P) return k;
    cdf = next;
    lpmf += log((double)(n - k) / (double)(k + 1)) + lr;
  }
  return n;
}

int rs_feature_gate(int64_t cases, int64_t judge_from, int n, const int64_t *count, const double *rate,
                    int64_t *min) {
  int below = 0;
  for (int f = 0; f < n; f++) {
    int64_t m = 0;
    if (cases >= judge_from && rate[f] > 0) m = rs_feature_min_count(cases, rate[f]);
    /* "at least once": every required feature of a campaign of RS_FEATURE_MIN_CASES cases */
    if (cases >= judge_from && cases >= RS_FEATURE_MIN_CASES && rate[f] != 0 && m < 1) m = 1;
    min[f] = m;
    below += count[f] < m;
  }
  return below;
}

int rs_share_over(int64_t part, int64_t total, double max_share) {
  if (total <= 0 || !(max_share < 1)) return 0;
  return (double)part > max_share * (double)total;
}
