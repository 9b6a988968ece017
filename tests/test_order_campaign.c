/* test_order_campaign.c - a short order-heavy campaign (SPEC 5, 8): 1,500 generated cases whose
 * Partial cases all carry `order` values, every property run - ref's plans against the oracle
 * given each plan's events, opt's own schedule against the oracle's canonical events, opt running
 * ref's plans, the value checks. RS_ORDER_CASES overrides the count. */
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "props/props.h"
#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
#endif

int main(void) {
  rs_campaign_opts o;
  rs_campaign_opts_default(&o);
  const char *n = getenv("RS_ORDER_CASES");
  o.cases = n ? atoll(n) : 1500;
  o.seed = 21;
  o.quiet = 1;
  o.print = 0; /* no fixtures written from a unit test; failures are counted below */
  o.gen.order_share = 100;
#ifdef RS_HAVE_OPT
  rs_opt *opt = NULL;
  CHECK(rs_opt_create(&opt) == RS_OK);
  o.impl = RS_IMPL_OPT;
  o.env.impl = RS_IMPL_OPT;
  o.env.opt = opt;
#endif
  rs_campaign_result *r = calloc(1, sizeof *r);
  CHECK(r && rs_campaign_run(&o, r) == RS_OK);
  if (r) {
    for (int i = 0; i < RS_PROP_COUNT; i++)
      if (r->prop[i].fail)
        fprintf(stderr, "%s: %lld failed: %s\n", rs_prop_name((rs_prop_id)i), (long long)r->prop[i].fail,
                r->prop[i].message);
    printf("%lld cases, %lld with Partial, %lld of them order values, %lld redrawn\n", (long long)r->cases,
           (long long)r->partial_cases, (long long)r->order_cases, (long long)r->redraws);
    CHECK_EQ_I(r->failed, 0);
    CHECK(r->partial_cases * 4 >= r->cases);          /* a quarter of all cases reduce or partition */
    CHECK_EQ_I(r->order_cases, r->partial_cases);     /* and every one of them on order values */
#ifdef RS_HAVE_OPT
    CHECK(r->prop[RS_PROP_OPT_ORACLE].pass >= r->cases * 9 / 10);
#endif
  }
  free(r);
#ifdef RS_HAVE_OPT
  rs_opt_destroy(opt);
#endif
  TEST_DONE();
}
