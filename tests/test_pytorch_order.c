/* test_pytorch_order.c - SPEC 5's reduction order against real PyTorch: every line of
 * fixtures/pytorch_order/ (*.jsonl.gz, (tools/pytorch/record_order.py): `order` values, reductions and
 * partitions on mesh dims of size 3..8, recorded with DTensor's redistribute under LocalTensorMode,
 * which folds left in rank order) must give PyTorch's digest on every rank from
 *  - ref executing its plan (whose trace must be PyTorch's),
 *  - the oracle given that plan's events,
 *  - opt executing the same plan, and opt's own schedule when its canonical events are the plan's
 *    (else opt's own schedule is held to the oracle with the canonical events). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "jsonl.h"
#include "reshard/events.h"
#include "reshard/oracle.h"
#include "reshard/ref.h"
#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
#endif

static int reports;

static void say(const char *name, const char *what, int pos, uint64_t got, const char *want) {
  rs_test_failures++;
  if (reports++ < 30) fprintf(stderr, "  [%s] %s: rank pos %d digest %016llx, PyTorch %s\n", name, what, pos,
                              (unsigned long long)got, want);
}

/* Digests of `l` against PyTorch's ranks; returns the number that differ. */
static int check_digests(const char *name, const char *what, const cJSON *ranks, const rs_locals *l) {
  int bad = 0, pos = 0;
  const cJSON *r;
  cJSON_ArrayForEach(r, ranks) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(r, "xxh3");
    if (pos >= l->n || !cJSON_IsString(x)) {
      say(name, what, pos, 0, "(missing)");
      return bad + 1;
    }
    char buf[24];
    uint64_t got = rs_local_digest(&l->r[pos]);
    snprintf(buf, sizeof buf, "%016llx", (unsigned long long)got);
    if (strcmp(buf, x->valuestring) != 0) {
      say(name, what, pos, got, x->valuestring);
      bad++;
    }
    pos++;
  }
  if (pos != l->n) {
    say(name, what, pos, 0, "(rank count differs)");
    bad++;
  }
  return bad;
}

typedef struct counts {
  int lines, skipped, compared, multi_event, own_canonical, own_other, trace_differs;
} counts;

static void run_line(const char *line, counts *k, void *opt) {
  cJSON *root = cJSON_Parse(line);
  if (!root) {
    CHECK(!"fixture line parses");
    return;
  }
  k->lines++;
  const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pytorch");
  const cJSON *ranks = pt ? cJSON_GetObjectItemCaseSensitive(pt, "ranks") : NULL;
  if (!ranks || cJSON_GetObjectItemCaseSensitive(pt, "error") ||
      cJSON_GetObjectItemCaseSensitive(root, "pytorch_deviates") || cJSON_GetObjectItemCaseSensitive(root, "known_bug")) {
    k->skipped++;
    cJSON_Delete(root);
    return;
  }
  rs_case c;
  if (rs_case_from_json(line, &c) != RS_OK) {
    fprintf(stderr, "  case does not load: %s\n", rs_last_error());
    rs_test_failures++;
    cJSON_Delete(root);
    return;
  }
  CHECK(c.values == RS_VALUES_ORDER);
  rs_locals in = {0, NULL}, out = {0, NULL}, exp = {0, NULL};
  rs_plan p;
  rs_events ev, canon;
  CHECK(rs_make_source(&c, &in) == RS_OK);
  CHECK(rs_ref_plan(&c, &p) == RS_OK);
  char tr[1024];
  const cJSON *ptr = cJSON_GetObjectItemCaseSensitive(pt, "trace");
  if (rs_plan_trace(&c.mesh, &c.src, c.tensor.ndim, &p, tr, sizeof tr) == RS_OK && cJSON_IsString(ptr) &&
      strcmp(tr, ptr->valuestring) != 0) {
    k->trace_differs++;
    fprintf(stderr, "  [%s] ref's plan %s, PyTorch's %s\n", c.name, tr, ptr->valuestring);
    rs_test_failures++;
  }
  CHECK(rs_events_from_plan(&c.mesh, &p, &ev) == RS_OK);
  CHECK(rs_events_canonical(&c.mesh, &c.src, &c.dst, &canon) == RS_OK);
  k->multi_event += ev.n > 1;
  k->compared++;
  if (rs_ref_execute(&c, &p, &in, &out) == RS_OK) check_digests(c.name, "ref", ranks, &out);
  else say(c.name, rs_last_error(), -1, 0, "(ref failed)");
  rs_locals_free(&out);
  if (rs_oracle_expected_events(&c, &c.dst, &ev, &exp) == RS_OK) check_digests(c.name, "oracle", ranks, &exp);
  else say(c.name, rs_last_error(), -1, 0, "(oracle failed)");
  rs_locals_free(&exp);
#ifdef RS_HAVE_OPT
  if (opt) {
    if (rs_opt_execute_plan(opt, NULL, &c, &p, &in, &out, NULL) == RS_OK) check_digests(c.name, "opt(ref plan)", ranks, &out);
    else say(c.name, rs_last_error(), -1, 0, "(opt plan failed)");
    rs_locals_free(&out);
    if (rs_opt_redistribute(opt, NULL, &c, &in, &out, NULL) != RS_OK) {
      say(c.name, rs_last_error(), -1, 0, "(opt failed)");
    } else if (rs_events_equal(&ev, &canon)) {
      k->own_canonical++;
      check_digests(c.name, "opt", ranks, &out);
    } else {
      /* PyTorch ran another event order than the canonical one: opt is held to the oracle */
      k->own_other++;
      rs_diff *d = calloc(1, sizeof *d);
      CHECK(rs_oracle_expected(&c, &c.dst, &exp) == RS_OK);
      if (d && rs_oracle_compare(&c, &c.dst, &exp, &out, d)) {
        fprintf(stderr, "  [%s] opt's own schedule vs oracle (canonical events):\n%s", c.name, d->text);
        rs_test_failures++;
      }
      free(d);
      rs_locals_free(&exp);
    }
    rs_locals_free(&out);
  }
#else
  (void)opt;
#endif
  rs_locals_free(&in);
  cJSON_Delete(root);
}

typedef struct walk {
  counts *k;
  void *opt;
} walk;

static void order_line(void *ctx, char *text, const char *where) {
  (void)where;
  walk *w = ctx;
  if (text[0] == '{') run_line(text, w->k, w->opt);
}

int main(int argc, char **argv) {
  const char *top = argc > 1 ? argv[1] : ".";
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/fixtures/pytorch_order", top);
  char **names;
  int nfiles = rs_test_list_dir(dir, ".jsonl.gz", &names);
  CHECK(nfiles > 0);
  if (!nfiles) TEST_DONE();
  void *opt = NULL;
#ifdef RS_HAVE_OPT
  rs_opt *o = NULL;
  CHECK(rs_opt_create(&o) == RS_OK);
  opt = o;
#endif
  counts k = {0};
  walk w = {&k, opt};
  for (int i = 0; i < nfiles; i++) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    CHECK(rs_test_jsonl_gz(path, names[i], order_line, &w) == 0);
    free(names[i]);
  }
  free(names);
#ifdef RS_HAVE_OPT
  rs_opt_destroy(o);
#endif
  printf("pytorch_order: %d lines, %d compared (%d with two or more events), %d skipped; opt's own "
         "schedule: %d on PyTorch's event order, %d on another (held to the oracle)\n",
         k.lines, k.compared, k.multi_event, k.skipped, k.own_canonical, k.own_other);
  CHECK(k.compared >= 200);
  CHECK(k.multi_event >= 10);
  TEST_DONE();
}
