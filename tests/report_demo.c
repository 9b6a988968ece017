/* report_demo.c - writes the reports of a campaign that failed, in any build (tests/reports.sh reads
 * them with a JUnit parser and a browser). A backend that returns wrong bytes is played by
 * hand: a generated 2-d case, the oracle's expected locals, two elements of one rank flipped and
 * one rank's piece swapped with its neighbour's - what an all-gather in the wrong order does. The
 * diff, the regression fixture, the JUnit file and the HTML page all go through the writers the
 * campaigns use.
 * Usage: report_demo OUTDIR   (writes OUTDIR/demo.junit.xml, OUTDIR/html/demo.html, OUTDIR/reg/) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "props/props.h"
#include "props/report.h"
#include "props/report_html.h"
#include "reshard/oracle.h"

static int die(const char *what) {
  fprintf(stderr, "report_demo: %s: %s\n", what, rs_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: report_demo OUTDIR\n");
    return 2;
  }
  char path[4096], reg[4096], html_dir[4096];
  snprintf(reg, sizeof reg, "%s/reg", argv[1]);
  snprintf(html_dir, sizeof html_dir, "%s/html", argv[1]);
  mkdir(reg, 0777);
  /* a 2x2 mesh, a 2-d tensor, S(0),S(1) -> S(1),R: uneven boxes on both sides */
  rs_case *c = calloc(1, sizeof *c);
  const char *json = "{\"mesh\":{\"shape\":[2,2],\"ranks\":[0,1,2,3]},\"tensor\":{\"shape\":[7,10],"
                     "\"dtype\":\"F32\"},\"src\":{\"placements\":[\"S(0)\",\"S(1)\"]},"
                     "\"dst\":{\"placements\":[\"S(1)\",\"R\"]},\"seed\":5}";
  if (!c || rs_case_from_json(json, c) != RS_OK) return die("case");
  rs_locals exp = {0}, act = {0};
  if (rs_oracle_expected(c, &c->dst, &exp) != RS_OK || rs_oracle_expected(c, &c->dst, &act) != RS_OK)
    return die("oracle");
  /* rank 0: two elements flipped; ranks 2 and 3 hold the same box (R on mesh dim 1): rank 3's
   * copy is replaced by rank 0's piece reversed (a mis-ordered gather) */
  ((unsigned char *)act.r[0].data)[4 * 3] ^= 0x40;
  ((unsigned char *)act.r[0].data)[4 * 11] ^= 0x01;
  rs_local *a3 = &act.r[3];
  for (int64_t i = 0; i < a3->nbytes / 4 / 2; i++) {
    char t[4], *p = (char *)a3->data;
    memcpy(t, p + 4 * i, 4);
    memcpy(p + 4 * i, p + a3->nbytes - 4 * (i + 1), 4);
    memcpy(p + a3->nbytes - 4 * (i + 1), t, 4);
  }
  rs_diff *d = calloc(1, sizeof *d);
  rs_html_diff hd = {0};
  if (!d || rs_oracle_compare(c, &c->dst, &exp, &act, d) == 0) return die("the planted difference was not seen");
  if (rs_html_diff_collect(c, &c->dst, &exp, &act, &hd) != RS_OK) return die("diff");
  char msg[4096];
  snprintf(msg, sizeof msg, "demo backend vs oracle: %d rank(s), %lld element(s) differ\n%s", 2,
           (long long)d->nbad_elems, d->text);
  /* the fixture and the reports, as a campaign writes them */
  rs_campaign_result *r = calloc(1, sizeof *r);
  int en[RS_PROP_COUNT] = {0};
  en[RS_PROP_BOXES] = en[RS_PROP_GREEDY_ORACLE] = 1;
  rs_prop_env env = {0};
  if (!r || rs_write_regression(reg, RS_PROP_GREEDY_ORACLE, c, msg, &env, r->prop[RS_PROP_GREEDY_ORACLE].fixture,
                                sizeof r->prop[0].fixture) != RS_OK)
    return die("fixture");
  r->cases = 1;
  r->failed = 1;
  r->seconds = 0.01;
  r->prop[RS_PROP_BOXES].pass = 1;
  r->prop[RS_PROP_GREEDY_ORACLE].fail = 1;
  snprintf(r->prop[RS_PROP_GREEDY_ORACLE].message, sizeof r->prop[0].message, "%.*s", (int)strcspn(msg, "\n"), msg);
  snprintf(path, sizeof path, "%s/demo.junit.xml", argv[1]);
  if (rs_report_junit(path, r, en) != RS_OK) return die("junit");
  rs_html *h;
  char replay[4200];
  snprintf(replay, sizeof replay, "reshard replay %s", r->prop[RS_PROP_GREEDY_ORACLE].fixture);
  if (rs_html_open(html_dir, "demo", "report_demo (a backend with a planted mis-ordered gather)", &h) != RS_OK)
    return die("html open");
  rs_html_row(h, "boxes", 1, 0, 0);
  rs_html_row(h, "greedy_oracle", 0, 1, 0);
  if (rs_html_case_failure(h, "greedy_oracle", c, msg, replay, &hd) != RS_OK) return die("html case");
  if (rs_html_close(h, "1 case, 1 failing property") != RS_OK) return die("html close");
  printf("report_demo: %lld differing element(s) drawn; fixture %s\n", (long long)hd.n,
         r->prop[RS_PROP_GREEDY_ORACLE].fixture);
  rs_html_diff_free(&hd);
  rs_locals_free(&exp);
  rs_locals_free(&act);
  free(d);
  free(r);
  free(c);
  return 0;
}
