/* cmd_tp.c - `reshard tp`: run one tensor-parallel case (a module chain with its styles on a 1-d or
 * 2-d mesh) and check it against the unsharded forward and PyTorch's layouts and collectives, or
 * run the random campaign of TP cases with shrinking. */
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "cli.h"
#include "core/tp/tp_internal.h"
#include "core/values.h"
#include "props/report.h"
#include "props/tp.h"
#include "reshard/tp.h"
#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
#endif

static const char *HELP =
    "usage: reshard tp run CASE.json [--impl ref|opt|both] [--json]\n"
    "       reshard tp check [--seed S] [--cases N | --seconds T] [--impl ref|opt|both] [--max-ranks N]\n"
    "                        [--regress-dir D] [--junit F] [--json F] [--quiet]\n"
    "                        [--keep-going] [--jobs N|auto] [--shard K/N] [--case-timeout SEC]\n"
    "       reshard tp run CASE.json --transport mpi [--quiet]        (under mpirun -np <mesh ranks>)\n"
    "       reshard tp check --transport mpi [--seed S] [--cases N] [--quiet]\n"
    "       reshard tp gen [--seed S] [--cases N] [--max-ranks N] [--one-d] [--min-tp N] [--even]\n"
    "run: executes the case's sharded forward (default --impl both) and checks it bit for bit against\n"
    "     the unsharded forward, the layouts and parameter placements the styles name, and the\n"
    "     collectives PyTorch issues for them; prints layouts, local shapes, collectives, digests.\n"
    "     --json: one object with every rank's output and sharded-parameter shapes and xxh3, each\n"
    "     module's collectives (ref's executed plan) and opt's bytes counted at its transport.\n"
    "--transport mpi: one process per mesh rank (opt); every rank's output over MPI must be the\n"
    "     in-process forward's bit for bit (check: the cases whose mesh has that many ranks).\n"
    "check: random TP cases (default 2000, seed 1): module chains and transformer blocks, random\n"
    "     styles and layouts, uneven splits, 1-d and 2-d meshes. A failure is shrunk, saved to the\n"
    "     regression dir (default fixtures/tp/regressions) and printed with its replay command.\n"
    "     --junit/--json write reports (properties tp_forward, tp_oracle, tp_layout, tp_comm,\n"
    "     tp_refusal: a case the independent rules refuse must be refused, and only those).\n"
    "     2,000 cases or more fail when a generator feature never occurred (feature coverage).\n"
    "     Case i is drawn from the seed and i alone and the campaign stops at its lowest failing\n"
    "     case, shrunk in the main process: --jobs does not change the report. --keep-going runs\n"
    "     every case (failures after the first are counted): then the --shard K/N reports merge\n"
    "     to the unsharded one's (stopping at the first failure stops each shard at its own).\n"
    "gen: prints the campaign's cases as JSON lines (--one-d: 1-d meshes only, as PyTorch's\n"
    "     parallelize_module takes the TP sub-mesh; the recorder in tools/pytorch reads them;\n"
    "     --min-tp N: only cases whose TP size is at least N; --even: every size times the TP size\n"
    "     and the batch times the DP size, so PyTorch's from_local runs the case).\n"
    "Case format: docs/tp.md. Exit 0 pass, 1 a check failed, 2 bad usage or input.\n"
    "check: " CLI_RUNNER_HELP;

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

/* Every rank's box of parameter pk of module i under the placement the forward gave it (R on the
 * DP dim), in the case's dtype: its local shape and xxh3, as JSON. */
static rs_status param_json(const rs_tp_case *c, const rs_tp_result *r, int i, rs_tp_param_kind pk) {
  rs_tensor t;
  float *g = NULL;
  rs_sharding s;
  rs_status st = rs_tp_global_param(c, i, pk, &t, &g);
  if (st == RS_OK) st = rs__tp_sharding(c, r->param_tp[i][pk], rs_pl_replicate(), &t, &s);
  rs_dtype dt = rs_tp_dtype_of(c->dtype);
  int es = rs_dtype_size(dt);
  printf(",\"%s\":{\"placement\":", pk == RS_TP_BIAS ? "bias" : "weight");
  print_pl(stdout, r->param_tp[i][pk]);
  printf(",\"local_shapes\":[");
  char *digests = st == RS_OK ? malloc((size_t)c->mesh.nranks * 20 + 1) : NULL;
  size_t len = 0;
  if (st == RS_OK && !digests) st = rs_fail(RS_ERR_NOMEM, "out of memory");
  for (int pos = 0; st == RS_OK && pos < c->mesh.nranks; pos++) {
    int64_t coord[RS_MAX_MESH_DIMS], start[RS_MAX_DIMS], size[RS_MAX_DIMS], n = 1;
    rs_mesh_coord(&c->mesh, pos, coord);
    rs_local_box(&c->mesh, &s, &t, coord, start, size);
    for (int d = 0; d < t.ndim; d++) n *= size[d];
    float *box = malloc((size_t)(n ? n : 1) * 4);
    if (!box) {
      st = rs_fail(RS_ERR_NOMEM, "out of memory");
      break;
    }
    rs__tp_box_copy(g, t.ndim, t.shape, start, size, 4, box);
    uint16_t *h = (uint16_t *)box; /* narrowed in place: element j (2 bytes) from element j (4) */
    for (int64_t j = 0; dt != RS_F32 && j < n; j++) h[j] = dt == RS_BF16 ? rs_f32_to_bf16(box[j]) : rs_f32_to_f16(box[j]);
    rs_local l;
    memset(&l, 0, sizeof l);
    l.ndim = t.ndim;
    memcpy(l.shape, size, sizeof l.shape);
    l.nbytes = n * es;
    l.data = box;
    printf(pos ? "," : "");
    cli_json_ints(stdout, size, t.ndim);
    len += (size_t)snprintf(digests + len, 21, "%s\"%016llx\"", pos ? "," : "", (unsigned long long)rs_local_digest(&l));
    free(box);
  }
  printf("],\"digests\":[%s]}", digests ? digests : "");
  free(digests);
  free(g);
  return st;
}

static void print_result(const rs_tp_case *c, const rs_tp_result *r, const rs_tp_result *ro, int json) {
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
  printf("{\"dtype\":\"%s\",\"output\":{\"shape\":", rs_dtype_name(rs_tp_dtype_of(c->dtype)));
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
    param_json(c, r, i, RS_TP_WEIGHT);
    if (c->mod[i].bias) param_json(c, r, i, RS_TP_BIAS);
    printf(",\"output\":");
    print_pl(stdout, r->mod_out_tp[i]);
    printf(",\"output_local\":%s", r->mod_out_local[i] ? "true" : "false");
    /* opt's point-to-point traffic for this module, counted by its world's transport */
    if (ro && ro->mod_bytes[i] >= 0) printf(",\"transport\":{\"bytes\":%lld,\"pairs\":%lld}", (long long)ro->mod_bytes[i], (long long)ro->mod_pairs[i]);
    else if (ro) printf(",\"transport\":{\"bytes\":0,\"pairs\":0}");
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
  if (!c) return cli_nomem(C, "case");
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
    rc = st == RS_ERR_NOMEM ? CLI_NOMEM : CLI_FAIL;
  } else {
    rs_tp_result ro, *rop = NULL;
#ifdef RS_HAVE_OPT
    /* --json: opt's forward again on a local world of its own, whose transport counts the bytes */
    rs_world *world = NULL;
    if (json && (impls & RS_TP_OPT) && rs_world_init("local", NULL, NULL, &world) == RS_OK &&
        rs_tp_opt_forward(opt, world, c, &ro) == RS_OK)
      rop = &ro;
#endif
    print_result(c, &res, rop, json);
    rs_tp_result_free(&res);
    if (rop) rs_tp_result_free(rop);
#ifdef RS_HAVE_OPT
    if (world) rs_world_finalize(world);
#endif
    char msg[4096];
    rs_clear_error();
    rs_outcome o = rs_tp_prop_run(c, impls, opt, NULL, msg, sizeof msg);
    if (rs_outcome_is_oom(o)) { /* no verdict: exit 3; the message says what ran out */
      fprintf(stderr, "reshard %s: %s\n", C, msg);
      rc = CLI_NOMEM;
    } else if (o != RS_PASS) {
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

static const char *PROPS[] = {"tp_forward", "tp_oracle", "tp_layout", "tp_comm", "tp_refusal"};
enum { NPROPS = 5 };

/* the property a failure message names ("tp_layout (ref): ..."); the oracle's own failure counts
 * as tp_oracle */
static int failed_prop(const char *msg) {
  for (int i = 0; i < NPROPS; i++)
    if (strncmp(msg, PROPS[i], strlen(PROPS[i])) == 0) return i;
  return 1;
}

static int write_junit(const char *path, const rs_tp_check_result *r) {
  int bad = r->fail ? failed_prop(r->message) : -1, crashed = r->run.crashed;
  FILE *f = rs__junit_open(path, "reshard.tp", NPROPS + crashed, (r->fail ? 1 : 0) + crashed,
                           r->pass == 0 ? NPROPS - (bad >= 0) : 0, r->seconds);
  if (!f) return -1;
  for (int i = 0; i < NPROPS; i++)
    rs__junit_property(f, "reshard.tp", PROPS[i], i == bad ? r->message : NULL, "reshard tp run", r->fixture,
                       r->pass == 0);
  if (crashed) { /* a worker that crashed on a case: that case's outcome, no property's */
    char msg[sizeof r->run.crash_msg + 96];
    snprintf(msg, sizeof msg, "%s (replay case %lld alone with --jobs 1)", r->run.crash_msg,
             (long long)r->run.crash_index + 1);
    rs__junit_property(f, "reshard.tp", "crash", msg, "", NULL, 0);
  }
  return rs__junit_close(f, path) == RS_OK ? 0 : -1;
}

static const char *impl_name(int impls) { return impls == 3 ? "both" : impls == 1 ? "ref" : "opt"; }

/* the runner's object of the --json report, on one line */
static void write_runner(FILE *f, const rs_tp_check_opts *o, const rs_tp_check_result *r) {
  char replay[700];
  snprintf(replay, sizeof replay, "reshard tp run %s --impl %s", r->fixture, impl_name(o->impls));
  cJSON *x = rs_tp_runner_json(o, r, r->fixture[0] ? replay : NULL);
  char *text = x ? cJSON_PrintUnformatted(x) : NULL;
  fprintf(f, ",\"runner\":%s", text ? text : "null");
  cJSON_free(text);
  cJSON_Delete(x);
}

static int write_json(const char *path, const rs_tp_check_opts *o, const rs_tp_check_result *r) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "{\"seed\":%llu,\"cases\":%lld,\"pass\":%lld,\"fail\":%lld,\"skip\":%lld,\"seconds\":%.3f,",
          (unsigned long long)o->seed, (long long)r->cases, (long long)r->pass, (long long)r->fail,
          (long long)r->skip, r->seconds);
  fprintf(f, "\"impl\":\"%s\",\"collectives\":{", impl_name(o->impls));
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
  fprintf(f, "]");
  if (r->run.crashed) {
    fprintf(f, ",\"crash\":");
    cli_json_str(f, r->run.crash_msg);
    fprintf(f, ",\"crash_case\":%lld", (long long)r->run.crash_index + 1);
  }
  write_runner(f, o, r);
  fprintf(f, "}\n");
  return fclose(f) ? -1 : 0;
}

/* The reports and the console summary of a finished campaign; its exit status. */
static int report_check(const char *C, const rs_tp_check_opts *o, const rs_tp_check_result *res, const char *junit,
                        const char *json) {
  if (res->run.follower) return CLI_OK; /* --distribute: rank 0 reports the campaign */
  if (junit && write_junit(junit, res)) return cli_usage_error(C, "--junit: cannot write %s", junit);
  if (json && write_json(json, o, res)) return cli_usage_error(C, "--json: cannot write %s", json);
  double rate = res->seconds > 0 ? (double)res->cases / res->seconds : 0;
  printf("tp check: seed %llu, %lld cases (%s): %lld pass, %lld fail, %lld skipped (invalid draws) in %.2f s (%.0f cases/s)\n",
         (unsigned long long)o->seed, (long long)res->cases,
         o->impls == 3 ? "ref and opt" : o->impls == 1 ? "ref" : "opt", (long long)res->pass, (long long)res->fail,
         (long long)res->skip, res->seconds, rate);
  if (!o->quiet) {
    printf("collectives issued:");
    for (int k = 0; k < RS_COLL_COUNT; k++)
      if (res->comm[k]) printf(" %s %lld", rs_collective_name((rs_collective)k), (long long)res->comm[k]);
    printf("\n");
  }
  if (res->run.crashed) {
    rs_run_print_crash(&res->run, (unsigned long long)o->seed);
    if (!res->fail) return CLI_FAIL;
  }
  /* props' one coverage gate (docs/harness.md, "Minimum rates"), judged only when no property
   * failed; the designed rates are rs_tp_feature_rate's */
  double tp_rate[RS_TP_F_COUNT];
  int64_t tp_min[RS_TP_F_COUNT];
  for (int f = 0; f < RS_TP_F_COUNT; f++) tp_rate[f] = rs_tp_feature_rate(f, o->max_ranks);
  int missing = rs_feature_gate(res->cases, RS_FEATURE_MIN_CASES, RS_TP_F_COUNT, res->feat, tp_rate, tp_min);
  int judged = missing && res->cases >= 2000 && !res->fail && !res->run.crashed;
  if (!o->quiet || judged) {
    printf("features (cases):");
    for (int f = 0; f < RS_TP_F_COUNT; f++) printf("%s %s %lld", f ? "," : "", rs_tp_feature_name(f), (long long)res->feat[f]);
    printf("\n");
  }
  if (judged) {
    for (int f = 0; f < RS_TP_F_COUNT; f++)
      if (res->feat[f] < tp_min[f])
        printf("FAIL feature coverage: %s in %lld of %lld cases, under its minimum %lld\n", rs_tp_feature_name(f),
               (long long)res->feat[f], (long long)res->cases, (long long)tp_min[f]);
    return CLI_FAIL;
  }
  if (res->fail) {
    printf("FAIL (shrunk): %s\n", res->message);
    printf("saved: %s\nreplay: reshard tp run %s --impl %s\n", res->fixture, res->fixture, impl_name(o->impls));
    return CLI_FAIL;
  }
  return res->run.crashed ? CLI_FAIL : CLI_OK;
}

static int tp_check(int argc, char **argv) {
  const char *C = "tp check", *v;
  rs_tp_check_opts o;
  memset(&o, 0, sizeof o);
  o.seed = 1;
  o.cases = 2000;
  o.impls = RS_TP_REF | RS_TP_OPT;
  int r;
  cli_campaign_args ca = {.seed = o.seed};
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
    if (cli_flag(argv, i, "--keep-going")) { o.keep_going = 1; continue; }
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
  if (ca.cases && ca.seconds > 0) return cli_usage_error(C, "--cases and --seconds: give one");
  if (ca.cases) o.cases = ca.cases;
  if (ca.seconds > 0) {
    o.cases = 0;
    o.seconds = ca.seconds;
  }
  if (ca.regress_dir) o.regress_dir = ca.regress_dir;
  o.jobs = ca.run.jobs;
  o.shard_k = ca.run.shard_k;
  o.shard_n = ca.run.shard_n;
  o.case_timeout = ca.run.case_timeout;
  o.print = 1;
  if ((r = cli_runner_start(C, &ca.run)) != CLI_OK) return r;
  o.dist = ca.run.dist;
  rs_tp_check_result *res = calloc(1, sizeof *res);
  if (!res) r = cli_nomem(C, "campaign results");
  else if (rs_tp_check(&o, res) != RS_OK) r = cli_status_error(C, NULL);
  else r = report_check(C, &o, res, ca.junit, ca.json);
  free(res);
  cli_runner_stop(&ca.run);
  return r;
}

/* --even: every size times the TP size (the batch also times the DP size), so every split is
 * even: PyTorch's from_local (which assumes even shards) then runs the case. */
static rs_status scale_even(rs_tp_case *c) {
  int64_t n = c->mesh.size[c->tp_dim], dp = c->mesh.ndim == 2 ? c->mesh.size[1 - c->tp_dim] : 1;
  c->batch *= n * dp;
  c->seq *= n;
  for (int i = 0; i < c->nmod; i++) {
    c->mod[i].in *= n;
    c->mod[i].out *= n;
  }
  return rs__tp_case_check_static(c); /* a case the rules refuse stays: it is recorded too */
}

static int tp_gen(int argc, char **argv) {
  const char *C = "tp gen", *v;
  unsigned long long seed = 1;
  long long cases = 10, max_ranks = 18;
  long long min_tp = 1;
  int one_d = 0, even = 0, r;
  for (int i = 1; i < argc; i++) {
    if (cli_flag(argv, i, "--one-d")) { one_d = 1; continue; }
    if (cli_flag(argv, i, "--even")) { even = 1; continue; }
    if ((r = cli_opt(argc, argv, &i, "--min-tp", &v)) != 0) {
      if (r < 0 || cli_int(v, 1, RS_MAX_RANKS, &min_tp)) return cli_usage_error(C, "--min-tp: expected 1..%d", RS_MAX_RANKS);
      continue;
    }
    if ((r = cli_opt(argc, argv, &i, "--seed", &v)) != 0) {
      if (r < 0 || cli_u64(v, &seed)) return cli_usage_error(C, "--seed: expected decimal digits (0 .. 18446744073709551615)");
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
    if (even && scale_even(c) != RS_OK) continue;
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

/* ---- one process per rank: `tp run CASE --transport mpi`, `tp check --transport mpi` ---- */

#ifdef RS_HAVE_OPT
/* The case's forward with opt over the MPI world (this process computes its own mesh position,
 * every redistribution goes through the transport) against opt's forward in this process (held
 * to the oracle and the rules by rs_tp_prop_run): the same refusal, or this position's output
 * local bit for bit, with the same layout. 1 when this process saw a difference. */
static int mpi_case(const rs_tp_case *c, rs_opt *o, rs_world *w, char *msg, size_t cap) {
  rs_tp_result loc, dis;
  int me = rs_world_rank(w), bad = 0;
  rs_status sl = rs_tp_opt_forward(o, NULL, c, &loc);
  rs_status sd = rs_tp_opt_forward(o, w, c, &dis);
  if (!!sl != !!sd) {
    snprintf(msg, cap, "rank %d: %s in one process, %s over MPI", me, sl ? "refused" : "ran", sd ? rs_last_error() : "ran");
    bad = 1;
  } else if (sl == RS_OK) {
    const rs_local *a = &loc.out.r[me], *b = &dis.out.r[me];
    char x[64], y[64];
    rs_format_sharding(&loc.out_layout, x, sizeof x);
    rs_format_sharding(&dis.out_layout, y, sizeof y);
    if (a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof a->shape) || a->nbytes != b->nbytes ||
        (a->nbytes && memcmp(a->data, b->data, (size_t)a->nbytes)) || strcmp(x, y) || loc.out_is_local != dis.out_is_local) {
      snprintf(msg, cap, "rank %d: the output over MPI (%s, xxh3 %016llx) differs from one process's (%s, xxh3 %016llx)",
               me, y, (unsigned long long)rs_local_digest(b), x, (unsigned long long)rs_local_digest(a));
      bad = 1;
    }
    for (int i = 0; !bad && i < c->nmod; i++)
      if (!rs_pl_equal(loc.mod_out_tp[i], dis.mod_out_tp[i]) || memcmp(loc.mod_comm[i], dis.mod_comm[i], sizeof loc.mod_comm[i])) {
        snprintf(msg, cap, "rank %d: %s: layout or collectives over MPI differ from one process's", me, c->mod[i].path);
        bad = 1;
      }
  }
  if (sl == RS_OK) rs_tp_result_free(&loc);
  if (sd == RS_OK) rs_tp_result_free(&dis);
  return bad;
}
#endif

static int tp_mpi(const char *sub, int argc, char **argv) {
  const char *C = strcmp(sub, "run") == 0 ? "tp run" : "tp check", *file = NULL, *v;
  unsigned long long seed = 1;
  long long cases = 200;
  int quiet = 0, r;
  for (int i = 1; i < argc; i++) {
    if (cli_flag(argv, i, "--quiet")) { quiet = 1; continue; }
    if ((r = cli_opt(argc, argv, &i, "--transport", &v)) != 0) continue; /* mpi: how we got here */
    if ((r = cli_opt(argc, argv, &i, "--impl", &v)) != 0) {
      if (r < 0 || strcmp(v, "opt") != 0) return cli_usage_error(C, "--impl: --transport mpi runs opt only");
    } else if ((r = cli_opt(argc, argv, &i, "--seed", &v)) != 0) {
      if (r < 0 || cli_u64(v, &seed)) return cli_usage_error(C, "--seed: expected decimal digits (0 .. 18446744073709551615)");
    } else if ((r = cli_opt(argc, argv, &i, "--cases", &v)) != 0) {
      if (r < 0 || cli_int(v, 1, (long long)1 << 30, &cases)) return cli_usage_error(C, "--cases: expected a positive integer");
    } else if (argv[i][0] != '-' && !file && strcmp(sub, "run") == 0) {
      file = argv[i];
    } else {
      return cli_usage_error(C, "unknown argument '%s' (with --transport mpi: %s)", argv[i],
                             strcmp(sub, "run") == 0 ? "CASE.json [--quiet]" : "--seed, --cases, --quiet");
    }
  }
  if (strcmp(sub, "run") == 0 && !file) return cli_usage_error(C, "CASE.json: required");
#ifdef RS_HAVE_OPT
  rs_world *w = NULL;
  rs_opt *o = NULL;
  if (rs_world_init("mpi", &argc, &argv, &w) != RS_OK) return cli_status_error(C, "--transport");
  if (rs_opt_create(&o) != RS_OK) {
    rs_world_finalize(w);
    return cli_status_error(C, "--impl opt");
  }
  rs_tp_case *c = malloc(sizeof *c);
  char msg[1024] = "";
  int rc = CLI_OK, print = rs_world_rank(w) == 0, np = rs_world_size(w);
  long long pass = 0, skip = 0, fail = 0;
  if (!c) rc = cli_usage_error(C, "out of memory");
  if (c && file) {
    if (rs_tp_case_from_file(file, c) != RS_OK) rc = cli_status_error(C, NULL);
    else if (c->mesh.nranks != np)
      rc = cli_usage_error(C, "%s: a mesh of %d ranks needs -np %d (got %d processes)", file, (int)c->mesh.nranks,
                           (int)c->mesh.nranks, np);
    else {
      int bad = mpi_case(c, o, w, msg, sizeof msg);
      if (bad) fprintf(stderr, "FAIL %s: %s\n", file, msg);
      rs_world_agree(w, &bad);
      if (bad) rc = CLI_FAIL;
      else if (print && !quiet) printf("PASS %s (opt, %d processes): every rank's output over MPI is one process's, bit for bit\n", file, np);
    }
  }
  double t0 = rs_now();
  for (long long i = 0; c && !file && rc == CLI_OK && i < cases; i++) {
    rs_choices ch;
    rs_choices_seed(&ch, rs_hash3(seed, (uint64_t)i, 0x7470));
    rs_status st = rs_tp_gen_case(&ch, np, c);
    rs_choices_free(&ch);
    if (st || c->mesh.nranks != np) { /* the same on every process: the draws are the seed's */
      skip++;
      continue;
    }
    char pmsg[1024];
    int bad = mpi_case(c, o, w, msg, sizeof msg);
    if (!bad && rs_tp_prop_run(c, RS_TP_OPT, o, NULL, pmsg, sizeof pmsg) != RS_PASS) {
      snprintf(msg, sizeof msg, "%s", pmsg);
      bad = 1;
    }
    rs_world_agree(w, &bad);
    if (!bad) {
      pass++;
      continue;
    }
    fail++;
    char *text = rs_tp_case_to_json(c);
    fprintf(stderr, "FAIL (rank %d) case %lld: %s\n  case: %s\n", rs_world_rank(w), i, msg[0] ? msg : "another rank failed",
            text ? text : "?");
    free(text);
    rc = CLI_FAIL;
  }
  if (!file && print)
    printf("tp check --transport mpi: seed %llu, %lld cases on %d processes: %lld pass, %lld fail, %lld skipped "
           "(another mesh size) in %.2f s\n",
           seed, cases, np, pass, fail, skip, rs_now() - t0);
  free(c);
  rs_opt_destroy(o);
  rs_world_finalize(w);
  return rc;
#else
  (void)quiet;
  (void)seed;
  (void)cases;
  return cli_usage_error(C, "--transport mpi: this build has no opt/ library");
#endif
}

static int wants_mpi(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--transport") == 0) return strcmp(argv[i + 1], "mpi") == 0;
  return 0;
}

int cmd_tp(int argc, char **argv) {
  if (argc < 2 || cli_is_help(argv[1])) {
    fputs(HELP, argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_USAGE : CLI_OK;
  }
  if ((strcmp(argv[1], "run") == 0 || strcmp(argv[1], "check") == 0) && wants_mpi(argc - 1, argv + 1))
    return tp_mpi(argv[1], argc - 1, argv + 1);
  if (strcmp(argv[1], "run") == 0) return tp_run(argc - 1, argv + 1);
  if (strcmp(argv[1], "check") == 0) return tp_check(argc - 1, argv + 1);
  if (strcmp(argv[1], "gen") == 0) return tp_gen(argc - 1, argv + 1);
  return cli_usage_error("tp", "unknown subcommand '%s' (run, check or gen)", argv[1]);
}
