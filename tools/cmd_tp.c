/* cmd_tp.c - `reshard tp`: run one tensor-parallel case (a module chain with its styles on a 1-d or
 * 2-d mesh) and check it against the unsharded forward and PyTorch's layouts and collectives, or
 * run the random campaign of TP cases with shrinking. */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "core/values.h"
#include "props/report.h"
#include "props/tp.h"
#include "reshard/tp.h"
#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
#endif

static const char *HELP =
    "usage: reshard tp run CASE.json [--impl ref|opt|both] [--json]\n"
    "       reshard tp check [--seed S] [--cases N] [--impl ref|opt|both] [--max-ranks N]\n"
    "                        [--regress-dir D] [--junit F] [--json F] [--quiet]\n"
    "       reshard tp gen [--seed S] [--cases N] [--max-ranks N] [--one-d] [--min-tp N]\n"
    "run: executes the case's sharded forward (default --impl both) and checks it bit for bit against\n"
    "     the unsharded forward, the layouts and parameter placements the styles name, and the\n"
    "     collectives PyTorch issues for them; prints layouts, local shapes, collectives, digests.\n"
    "check: random TP cases (default 2000, seed 1): module chains and transformer blocks, random\n"
    "     styles and layouts, uneven splits, 1-d and 2-d meshes. A failure is shrunk, saved to the\n"
    "     regression dir (default fixtures/tp/regressions) and printed with its replay command.\n"
    "     --junit/--json write reports (properties tp_forward, tp_oracle, tp_layout, tp_comm).\n"
    "     2,000 cases or more fail when a generator feature never occurred (feature coverage).\n"
    "gen: prints the campaign's cases as JSON lines (--one-d: 1-d meshes only, as PyTorch's\n"
    "     parallelize_module takes the TP sub-mesh; the recorder in tools/pytorch reads them;\n"
    "     --min-tp N: only cases whose TP size is at least N).\n"
    "Case format: docs/tp.md. Exit 0 pass, 1 a check failed, 2 bad usage or input.\n";

static int parse_impl(const char *C, const char *v, int *impls) {
  if (strcmp(v, "ref") == 0) *impls = RS_TP_REF;
  else if (strcmp(v, "opt") == 0) *impls = RS_TP_OPT;
  else if (strcmp(v, "both") == 0) *impls = RS_TP_REF | RS_TP_OPT;
  else return cli_usage_error(C, "--impl: '%s', expected ref, opt or both", v);
#ifndef RS_HAVE_OPT
  if (*impls & RS_TP_OPT) {
    if (*impls == RS_TP_OPT) return cli_usage_error(C, "--impl opt: this build has no opt/ library");
    *impls = RS_TP_REF;
  }
#endif
  return CLI_OK;
}

static void print_pl(FILE *f, rs_placement p) {
  char b[32];
  rs_format_placement(p, b, sizeof b);
  cli_json_str(f, b);
}

static void print_result(const rs_tp_case *c, const rs_tp_result *r, int json) {
  char b[32];
  if (!json) {
    rs_format_sharding(&r->out_layout, b, sizeof b);
    printf("output [%lld,%lld,%lld] %s (%s)\n", (long long)r->out_tensor.shape[0],
           (long long)r->out_tensor.shape[1], (long long)r->out_tensor.shape[2], b,
           r->out_is_local ? "local tensor" : "DTensor");
    for (int i = 0; i < c->nmod; i++) {
      const rs_tp_module *m = &c->mod[i];
      char w[32], bb[32], o[32];
      rs_format_placement(r->param_tp[i][0], w, sizeof w);
      rs_format_placement(r->param_tp[i][1], bb, sizeof bb);
      rs_format_placement(r->mod_out_tp[i], o, sizeof o);
      printf("  %-18s %-9s %-19s weight %-4s%s%s -> %s", m->path, rs_tp_module_name(m->kind),
             rs_tp_style_name(m->style.kind), w, m->bias ? " bias " : "", m->bias ? bb : "", o);
      for (int k = 0; k < RS_COLL_COUNT; k++)
        if (r->mod_comm[i][k]) printf("  %s x%lld", rs_collective_name((rs_collective)k), (long long)r->mod_comm[i][k]);
      printf("\n");
    }
    for (int pos = 0; pos < r->out.n; pos++)
      printf("  rank %d local [%lld,%lld,%lld] xxh3 %016llx\n", c->mesh.ranks[pos], (long long)r->out.r[pos].shape[0],
             (long long)r->out.r[pos].shape[1], (long long)r->out.r[pos].shape[2],
             (unsigned long long)rs_local_digest(&r->out.r[pos]));
    return;
  }
  printf("{\"output\":{\"shape\":");
  cli_json_ints(stdout, r->out_tensor.shape, 3);
  printf(",\"placement\":");
  print_pl(stdout, r->out_layout.p[c->tp_dim]);
  printf(",\"local\":%s,\"local_shapes\":[", r->out_is_local ? "true" : "false");
  for (int pos = 0; pos < r->out.n; pos++) {
    printf(pos ? "," : "");
    cli_json_ints(stdout, r->out.r[pos].shape, 3);
  }
  printf("],\"digests\":[");
  for (int pos = 0; pos < r->out.n; pos++)
    printf("%s\"%016llx\"", pos ? "," : "", (unsigned long long)rs_local_digest(&r->out.r[pos]));
  printf("]},\"modules\":[");
  for (int i = 0; i < c->nmod; i++) {
    printf("%s{\"path\":", i ? "," : "");
    cli_json_str(stdout, c->mod[i].path);
    printf(",\"weight\":");
    print_pl(stdout, r->param_tp[i][0]);
    if (c->mod[i].bias) {
      printf(",\"bias\":");
      print_pl(stdout, r->param_tp[i][1]);
    }
    printf(",\"output\":");
    print_pl(stdout, r->mod_out_tp[i]);
    printf(",\"comm\":{");
    int first = 1;
    for (int k = 0; k < RS_COLL_COUNT; k++)
      if (r->mod_comm[i][k]) {
        printf("%s\"%s\":%lld", first ? "" : ",", rs_collective_name((rs_collective)k), (long long)r->mod_comm[i][k]);
        first = 0;
      }
    printf("}}");
  }
  printf("]}\n");
}

static int tp_run(int argc, char **argv) {
  const char *C = "tp run", *file = NULL, *v;
  int impls = RS_TP_REF | RS_TP_OPT, json = 0, r;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      fputs(HELP, stdout);
      return CLI_OK;
    }
    if (cli_flag(argv, i, "--json")) { json = 1; continue; }
    if ((r = cli_opt(argc, argv, &i, "--impl", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--impl: missing value");
      if ((r = parse_impl(C, v, &impls)) != CLI_OK) return r;
      continue;
    }
    if (argv[i][0] == '-' || file) return cli_usage_error(C, "unknown argument '%s'", argv[i]);
    file = argv[i];
  }
  if (!file) return cli_usage_error(C, "CASE.json: required");
  rs_tp_case *c = malloc(sizeof *c);
  if (!c) return cli_usage_error(C, "out of memory");
  if (rs_tp_case_from_file(file, c) != RS_OK) { /* the message names the file */
    free(c);
    return cli_status_error(C, NULL);
  }
  void *opt = NULL;
#ifdef RS_HAVE_OPT
  if ((impls & RS_TP_OPT) && rs_opt_create((rs_opt **)&opt) != RS_OK) {
    free(c);
    return cli_status_error(C, "--impl opt");
  }
#endif
  rs_tp_result res;
  rs_status st = (impls & RS_TP_REF) ? rs_tp_ref_forward(c, &res) : rs_tp_opt_forward(opt, NULL, c, &res);
  int rc = CLI_OK;
  if (st) {
    fprintf(stderr, "reshard tp run: %s: %s: %s\n", file, rs_status_name(st), rs_last_error());
    rc = CLI_FAIL;
  } else {
    print_result(c, &res, json);
    rs_tp_result_free(&res);
    char msg[4096];
    if (rs_tp_prop_run(c, impls, opt, NULL, msg, sizeof msg) != RS_PASS) {
      fprintf(stderr, "FAIL %s: %s\n", file, msg);
      rc = CLI_FAIL;
    } else if (!json) {
      printf("PASS %s (%s): sharded == unsharded bit for bit; layouts, placements and collectives as the styles name\n",
             file, impls == 3 ? "ref, opt" : impls == 1 ? "ref" : "opt");
    }
  }
#ifdef RS_HAVE_OPT
  if (opt) rs_opt_destroy((rs_opt *)opt);
#endif
  free(c);
  return rc;
}

/* ---- reports of `tp check` (the same shape as `reshard check`'s) ---- */

static const char *PROPS[] = {"tp_forward", "tp_oracle", "tp_layout", "tp_comm"};
enum { NPROPS = 4 };

/* the property a failure message names ("tp_layout (ref): ..."); the oracle's own failure counts
 * as tp_oracle */
static int failed_prop(const char *msg) {
  for (int i = 0; i < NPROPS; i++)
    if (strncmp(msg, PROPS[i], strlen(PROPS[i])) == 0) return i;
  return 1;
}

static int write_junit(const char *path, const rs_tp_check_result *r) {
  int bad = r->fail ? failed_prop(r->message) : -1;
  FILE *f = rs__junit_open(path, "reshard.tp", NPROPS, r->fail ? 1 : 0, r->pass == 0 ? NPROPS - (bad >= 0) : 0,
                           r->seconds);
  if (!f) return -1;
  for (int i = 0; i < NPROPS; i++)
    rs__junit_property(f, "reshard.tp", PROPS[i], i == bad ? r->message : NULL, "reshard tp run", r->fixture,
                       r->pass == 0);
  return rs__junit_close(f, path) == RS_OK ? 0 : -1;
}

static int write_json(const char *path, const rs_tp_check_opts *o, const rs_tp_check_result *r) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "{\"seed\":%llu,\"cases\":%lld,\"pass\":%lld,\"fail\":%lld,\"skip\":%lld,\"seconds\":%.3f,",
          (unsigned long long)o->seed, (long long)r->cases, (long long)r->pass, (long long)r->fail,
          (long long)r->skip, r->seconds);
  fprintf(f, "\"impl\":\"%s\",\"collectives\":{", o->impls == 3 ? "both" : o->impls == 1 ? "ref" : "opt");
  for (int k = 0, first = 1; k < RS_COLL_COUNT; k++)
    if (r->comm[k]) {
      fprintf(f, "%s\"%s\":%lld", first ? "" : ",", rs_collective_name((rs_collective)k), (long long)r->comm[k]);
      first = 0;
    }
  fprintf(f, "},\"features\":{");
  for (int k = 0; k < RS_TP_F_COUNT; k++) {
    fprintf(f, "%s", k ? "," : "");
    cli_json_str(f, rs_tp_feature_name(k));
    fprintf(f, ":%lld", (long long)r->feat[k]);
  }
  fprintf(f, "},\"failures\":[");
  if (r->fail) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "reshard tp run %s", r->fixture);
    fprintf(f, "{\"property\":\"%s\",\"message\":", PROPS[failed_prop(r->message)]);
    cli_json_str(f, r->message);
    fprintf(f, ",\"fixture\":");
    cli_json_str(f, r->fixture);
    fprintf(f, ",\"replay\":");
    cli_json_str(f, cmd);
    fprintf(f, "}");
  }
  fprintf(f, "]}\n");
  return fclose(f) ? -1 : 0;
}

static int tp_check(int argc, char **argv) {
  const char *C = "tp check", *v;
  rs_tp_check_opts o;
  memset(&o, 0, sizeof o);
  o.seed = 1;
  o.cases = 2000;
  o.impls = RS_TP_REF | RS_TP_OPT;
  int r;
  cli_campaign_args ca = {.seed = o.seed, .no_seconds = 1};
#ifndef RS_HAVE_OPT
  o.impls = RS_TP_REF;
#endif
  for (int i = 1; i < argc; i++) {
    long long n;
    if (cli_is_help(argv[i])) {
      fputs(HELP, stdout);
      return CLI_OK;
    }
    if (cli_flag(argv, i, "--quiet")) { o.quiet = 1; continue; }
    const char *name = argv[i];
    if ((r = cli_campaign_opt(C, argc, argv, &i, &ca)) != 0) {
      if (r < 0) return CLI_USAGE;
    } else if ((r = cli_opt(argc, argv, &i, "--impl", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--impl: missing value");
      if ((r = parse_impl(C, v, &o.impls)) != CLI_OK) return r;
    } else if ((r = cli_opt(argc, argv, &i, "--max-ranks", &v)) != 0) {
      if (r < 0 || cli_int(v, 1, RS_MAX_RANKS, &n)) return cli_usage_error(C, "--max-ranks: expected 1..%d", RS_MAX_RANKS);
      o.max_ranks = (int)n;
    } else {
      return cli_usage_error(C, "unknown argument '%s'", name);
    }
  }
  o.seed = ca.seed;
  if (ca.cases) o.cases = ca.cases;
  if (ca.regress_dir) o.regress_dir = ca.regress_dir;
  const char *junit = ca.junit, *json = ca.json;
  rs_tp_check_result res;
  if (rs_tp_check(&o, &res) != RS_OK) return cli_status_error(C, NULL);
  if (junit && write_junit(junit, &res)) return cli_usage_error(C, "--junit: cannot write %s", junit);
  if (json && write_json(json, &o, &res)) return cli_usage_error(C, "--json: cannot write %s", json);
  double rate = res.seconds > 0 ? (double)res.cases / res.seconds : 0;
  printf("tp check: seed %llu, %lld cases (%s): %lld pass, %lld fail, %lld skipped (invalid draws) in %.2f s (%.0f cases/s)\n",
         (unsigned long long)o.seed, (long long)res.cases,
         o.impls == 3 ? "ref and opt" : o.impls == 1 ? "ref" : "opt", (long long)res.pass, (long long)res.fail,
         (long long)res.skip, res.seconds, rate);
  if (!o.quiet) {
    printf("collectives issued:");
    for (int k = 0; k < RS_COLL_COUNT; k++)
      if (res.comm[k]) printf(" %s %lld", rs_collective_name((rs_collective)k), (long long)res.comm[k]);
    printf("\n");
  }
  int missing = 0;
  for (int f = 0; f < RS_TP_F_COUNT; f++) missing += res.feat[f] == 0;
  if (!o.quiet || (missing && res.cases >= 2000 && !res.fail)) {
    printf("features (cases):");
    for (int f = 0; f < RS_TP_F_COUNT; f++) printf("%s %s %lld", f ? "," : "", rs_tp_feature_name(f), (long long)res.feat[f]);
    printf("\n");
  }
  if (missing && res.cases >= 2000 && !res.fail) {
    for (int f = 0; f < RS_TP_F_COUNT; f++)
      if (!res.feat[f]) printf("FAIL feature coverage: no case with %s in %lld cases\n", rs_tp_feature_name(f), (long long)res.cases);
    return CLI_FAIL;
  }
  if (res.fail) {
    printf("FAIL (shrunk): %s\n", res.message);
    printf("saved: %s\nreplay: reshard tp run %s --impl %s\n", res.fixture, res.fixture,
           o.impls == 3 ? "both" : o.impls == 1 ? "ref" : "opt");
    return CLI_FAIL;
  }
  return CLI_OK;
}

static int tp_gen(int argc, char **argv) {
  const char *C = "tp gen", *v;
  unsigned long long seed = 1;
  long long cases = 10, max_ranks = 18;
  long long min_tp = 1;
  int one_d = 0, r;
  for (int i = 1; i < argc; i++) {
    if (cli_flag(argv, i, "--one-d")) { one_d = 1; continue; }
    if ((r = cli_opt(argc, argv, &i, "--min-tp", &v)) != 0) {
      if (r < 0 || cli_int(v, 1, RS_MAX_RANKS, &min_tp)) return cli_usage_error(C, "--min-tp: expected 1..%d", RS_MAX_RANKS);
      continue;
    }
    if ((r = cli_opt(argc, argv, &i, "--seed", &v)) != 0) {
      if (r < 0 || cli_u64(v, &seed)) return cli_usage_error(C, "--seed: expected an unsigned integer");
    } else if ((r = cli_opt(argc, argv, &i, "--cases", &v)) != 0) {
      if (r < 0 || cli_int(v, 1, (long long)1 << 30, &cases)) return cli_usage_error(C, "--cases: expected a positive integer");
    } else if ((r = cli_opt(argc, argv, &i, "--max-ranks", &v)) != 0) {
      if (r < 0 || cli_int(v, 1, RS_MAX_RANKS, &max_ranks)) return cli_usage_error(C, "--max-ranks: expected 1..%d", RS_MAX_RANKS);
    } else {
      return cli_usage_error(C, "unknown argument '%s'", argv[i]);
    }
  }
  rs_tp_case *c = malloc(sizeof *c);
  if (!c) return cli_usage_error(C, "out of memory");
  for (long long i = 0, made = 0; made < cases && i < cases * 100; i++) {
    rs_choices ch;
    rs_choices_seed(&ch, rs_hash3(seed, (uint64_t)i, 0x7470));
    rs_status st = rs_tp_gen_case(&ch, (int)max_ranks, c);
    rs_choices_free(&ch);
    if (st || (one_d && c->mesh.ndim != 1) || c->mesh.size[c->tp_dim] < min_tp) continue;
    snprintf(c->name, sizeof c->name, "tp-seed%llu-%lld", seed, i);
    char *text = rs_tp_case_to_json(c);
    if (!text) continue;
    printf("%s\n", text);
    free(text);
    made++;
  }
  free(c);
  return CLI_OK;
}

int cmd_tp(int argc, char **argv) {
  if (argc < 2 || cli_is_help(argv[1])) {
    fputs(HELP, argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_USAGE : CLI_OK;
  }
  if (strcmp(argv[1], "run") == 0) return tp_run(argc - 1, argv + 1);
  if (strcmp(argv[1], "check") == 0) return tp_check(argc - 1, argv + 1);
  if (strcmp(argv[1], "gen") == 0) return tp_gen(argc - 1, argv + 1);
  return cli_usage_error("tp", "unknown subcommand '%s' (run, check or gen)", argv[1]);
}
