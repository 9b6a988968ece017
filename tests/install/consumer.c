/* consumer.c - a program outside the tree, built against the installed reshard (tests/install.sh
 * builds it with find_package(reshard) and with pkg-config): one uneven redistribute case through
 * ref and through opt, both held to the oracle bit for bit. Prints "consumer: ok" and exits 0. */
#include <stdio.h>
#include <reshard/reshard.h>
#include <reshard/opt.h>

static int fail(const char *what) {
  fprintf(stderr, "consumer: %s: %s\n", what, rs_last_error());
  return 1;
}

int main(void) {
  const char *json = "{\"mesh\":{\"shape\":[2,3]},\"tensor\":{\"shape\":[7,5],\"dtype\":\"F32\"},"
                     "\"src\":{\"placements\":[\"S(0)\",\"S(1)\"]},\"dst\":{\"placements\":[\"R\",\"S(0)\"]},"
                     "\"seed\":11}";
  rs_case c;
  rs_locals in = {0}, ref = {0}, opt = {0}, exp = {0};
  if (rs_case_from_json(json, &c) != RS_OK) return fail("case");
  if (rs_make_source(&c, &in) != RS_OK) return fail("source");
  if (rs_ref_redistribute(&c, &in, &ref, NULL) != RS_OK) return fail("ref");
  if (rs_oracle_expected(&c, &c.dst, &exp) != RS_OK) return fail("oracle");
  rs_diff d;
  if (rs_oracle_compare(&c, &c.dst, &exp, &ref, &d) != 0) return fail("ref differs from the oracle");
  rs_world *w = NULL;
  rs_opt *o = NULL;
  if (rs_world_init("local", NULL, NULL, &w) != RS_OK || rs_opt_create(&o) != RS_OK) return fail("opt");
  if (rs_opt_redistribute(o, w, &c, &in, &opt, NULL) != RS_OK) return fail("opt redistribute");
  if (rs_oracle_compare(&c, &c.dst, &exp, &opt, &d) != 0) return fail("opt differs from the oracle");
  rs_opt_destroy(o);
  rs_world_finalize(w);
  rs_locals_free(&in);
  rs_locals_free(&ref);
  rs_locals_free(&opt);
  rs_locals_free(&exp);
  printf("consumer: ok (ref and opt == oracle on a 2x3 mesh)\n");
  return 0;
}
