/* cmd_ckpt.c - `reshard ckpt ...`: save and load a state spec (load checks every rank against the
 * oracle), verify / inspect / export a checkpoint, the property campaign and its replay, and the
 * kill -9 torture test. Exit: 0 pass, 1 a difference or an integrity failure, 2 bad input. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "cli.h"
#include "core/mutant.h"
#include "core/ckpt/internal.h"
#include "cmd_ckpt_opt.h"
#include "cmd_ckpt_reshard.h"
#include "core/values.h"
#include "props/ckpt.h"
#include "reshard/ckpt.h"
#include "reshard/ckpt_opt.h"

static const char *HELP =
    "usage: reshard ckpt <command> ...\n"
    "  save STATE.json --root DIR --step N [--impl ref|opt] [--transport local|local-device|mpi] [--timeout SEC] [--block B]\n"
    "        [--threads T] [--segment S] [--direct]   (opt: balanced writers, T I/O threads)\n"
    "        build every rank's state dict from the state spec and save it (commit: data, fsync,\n"
    "        metadata.json by rename, directory fsync, then latest)\n"
    "  load STATE.json --root DIR [--step N] [--impl ref|opt] [--transport ..] [--strict MODE] [--json F]\n"
    "        [--read-once] [--threads T] [--segment S] [--direct]   (opt)\n"
    "        load into the spec's layout on its ranks and check every rank against the oracle\n"
    "        (MODE: assume_ok_unexpected (default), log_unexpected, log_all, raise_unexpected,\n"
    "        raise_all, return_unexpected, return_all, ignore_all); --json F: per rank and entry the\n"
    "        xxh3-64 of what the load left in memory (under MPI each process writes F.<rank>)\n"
    "  verify DIR              every digest, safetensors headers, chunks tile every tensor\n"
    "  inspect DIR [--json]    keys, dtypes, shapes, chunks, files\n"
    "  export DIR OUT.safetensors   whole tensors in one safetensors file\n"
    "  import DIR --root OUT --step N [--shapes SHAPES.json | --hull] [--ignore-unindexed]\n"
    "        a PyTorch DCP checkpoint in safetensors (HuggingFaceStorageWriter) as a reshard\n"
    "        checkpoint; its index names the files, shard files need --shapes (or --hull)\n"
    "  reshard SRC --layout LAYOUT.json --root DST --step N [--impl ref|opt] [--transport local|mpi]\n"
    "        SRC read into another layout and world size, written as a new checkpoint (see ckpt reshard --help)\n"
    "  reshard-check [--seed S] [--cases N] [--impl ref|opt|both]   ckpt reshard's property campaign\n"
    "  check [--seed S] [--cases N | --seconds T] [--impl ref|opt|both] [--transport ..]\n"
    "        [--regress-dir D] [--shrink-runs N] [--junit F] [--json F] [--quiet] [--scratch DIR]\n"
    "        [--jobs N|auto] [--shard K/N] [--case-timeout SEC] [--distribute]\n"
    "        the property campaign (shrinks each property's first failure in at most N runs, default\n"
    "        1000; fixtures go to D, default fixtures/ckpt/regressions). --jobs N runs the cases in N\n"
    "        worker processes (auto: the cores this process may use), each in a scratch directory of\n"
    "        its own; the result does not depend on N. --shard K/N runs only cases i with\n"
    "        i % N == K-1 (merge the --json reports with `reshard report merge`). --case-timeout SEC\n"
    "        (default 600): a worker on one case longer is reported hung and the campaign stops\n"
    "        (exit 4). --distribute: the ranks of an mpirun share the case range (not with\n"
    "        --transport mpi, where the ranks play each case together and --jobs stays 1)\n"
    "  replay FILE             re-run a saved failing case (exit 1 if it still fails)\n"
    "  torture [--kills N] [--seed S] [--root DIR] [--spec STATE.json] [--impl ref|opt|both]\n"
    "        SIGKILL a saving process (ref's, opt's or each in turn) at random moments; latest must\n"
    "        always load correctly\n"
    "DIR is a checkpoint root (latest is used) or a step directory.\n"
    "Exit: 0 pass, 1 a difference or an integrity failure (damaged or hostile checkpoint), 2 bad\n"
    "input (flags, STATE.json, a directory that holds no checkpoint), 3 out of memory (under\n"
    "--transport mpi: on every process when one ran out), 4 a peer stalled or died (--timeout).\n";

int ckpt_exit_code(rs_status st) {
  /* RS_ERR_TIMEOUT: a transport wait saw no progress for --timeout, or a peer died (exit 4) */
  return st == RS_ERR_NOMEM ? CLI_NOMEM : st == RS_ERR_UNSUPPORTED ? CLI_USAGE : st == RS_ERR_TIMEOUT ? CLI_PEER
       : st ? CLI_FAIL : CLI_OK;
}

/* A failure of an operation on a checkpoint: out of memory exits 3; a file of the checkpoint that
 * is a symbolic link or not a regular file (the shared read rule, core/ckpt/io.h) is refused as
 * bad input, 2; anything else 1 (the checkpoint is damaged, hostile, or differs; the message
 * names file and key). */
static int ckpt_fail(const char *C, rs_status st) {
  fprintf(stderr, "reshard %s: %s\n", C, rs_last_error());
  return ckpt_exit_code(st);
}

int ckpt_load_json(const char *C, const char *path, const char *impl, const char *status, const rs_ckpt_world *w,
                   int rank) {
  FILE *f = fopen(path, "w");
  if (!f) return cli_usage_error(C, "--json: cannot create %s", path);
  /* keys are printable ASCII without '"' or '\\' (the key rule), so they need no escaping */
  fprintf(f, "{\"format\": \"reshard-ckpt-load\", \"version\": 1, \"impl\": \"%s\", \"status\": \"%s\", \"ranks\": [",
          impl, status);
  int first_rank = 1;
  for (int r = 0; r < w->n; ++r) {
    if (rank >= 0 && r != rank) continue;
    const rs_state_dict *sd = &w->sd[r];
    fprintf(f, "%s\n {\"rank\": %d, \"tensors\": [", first_rank ? "" : ",", r);
    first_rank = 0;
    for (int i = 0; i < sd->nt; ++i) {
      const rs_sh_tensor *t = &sd->t[i];
      char hx[17];
      rs__hex64(XXH3_64bits(t->data, (size_t)t->nbytes), hx);
      fprintf(f, "%s\n  {\"key\": \"%s\", \"dtype\": \"%s\", \"offsets\": [", i ? "," : "", t->key,
              rs_dtype_name(t->dtype));
      for (int d = 0; d < t->ndim; ++d) fprintf(f, "%s%lld", d ? ", " : "", (long long)t->global_offset[d]);
      fprintf(f, "], \"shape\": [");
      for (int d = 0; d < t->ndim; ++d) fprintf(f, "%s%lld", d ? ", " : "", (long long)t->local_shape[d]);
      fprintf(f, "]");
      if (t->has_flat) fprintf(f, ", \"flat\": [%lld, %lld]", (long long)t->flat_start, (long long)t->flat_stop);
      fprintf(f, ", \"bytes\": %lld, \"loaded\": %s, \"xxh3\": \"%s\"}", (long long)t->nbytes,
              t->loaded ? "true" : "false", hx);
    }
    fprintf(f, "], \"objects\": [");
    for (int i = 0; i < sd->no; ++i) {
      const rs_sh_object *o = &sd->o[i];
      char uk[2048], hx[17];
      rs_sh_object_unique_key(o, uk, sizeof uk);
      rs__hex64(XXH3_64bits(o->data, (size_t)o->len), hx);
      fprintf(f, "%s\n  {\"key\": \"%s\", \"bytes\": %lld, \"loaded\": %s, \"xxh3\": \"%s\"}", i ? "," : "", uk,
              (long long)o->len, o->loaded ? "true" : "false", hx);
    }
    fprintf(f, "]}");
  }
  fprintf(f, "\n]}\n");
  if (fclose(f) != 0) return cli_usage_error(C, "--json: cannot write %s", path);
  return 0;
}

/* Bad input (STATE.json, flags, a directory that holds no checkpoint) exits 2, out of memory 3. */
static int input_fail(const char *C, rs_status st) {
  int rc = cli_status_error(C, "");
  return st == RS_ERR_NOMEM ? CLI_NOMEM : rc;
}

int ckpt_load_target(const char *C, const char *root, long long step) {
  rs_status st;
  if (step < 0) {
    int64_t l;
    if ((st = rs_ckpt_latest(root, &l))) return input_fail(C, st);
    return -1;
  }
  char d[4200];
  struct stat sb;
  snprintf(d, sizeof d, "%s/step_%lld", root, step);
  if (stat(d, &sb) != 0) /* no such step: bad input; an incomplete one is a failure */
    return cli_usage_error(C, "--step %lld: %s does not exist", step, d);
  return -1;
}

int ckpt_wants_opt(const char *impl, const char *tr) { return strcmp(impl, "ref") || strcmp(tr, "local"); }

/* load's --root may be a step directory, as verify, inspect and export take one: ROOT/step_<N> with
 * its metadata.json means --root ROOT --step N (a --step that names another step is refused, and
 * so is a step directory not named step_<N>, whose step the load could not name). -1 when a->root
 * is left as given or rewritten, else the exit code. */
static int ckpt_step_dir_root(const char *C, ckpt_io_args *a) {
  static char parent[4200];
  char md[4300], canon[64];
  struct stat sb;
  snprintf(md, sizeof md, "%s/metadata.json", a->root);
  if (lstat(md, &sb) != 0) return -1; /* no metadata.json: a checkpoint root */
  size_t l = strlen(a->root);
  while (l > 1 && a->root[l - 1] == '/') l--;
  if (l >= sizeof parent) return cli_usage_error(C, "--root: path too long");
  memcpy(parent, a->root, l);
  parent[l] = 0;
  char *slash = strrchr(parent, '/');
  const char *base = slash ? slash + 1 : parent;
  long long n = -1;
  if (!strncmp(base, "step_", 5) && !cli_int(base + 5, 0, INT64_MAX, &n)) snprintf(canon, sizeof canon, "step_%lld", n);
  if (n < 0 || strcmp(canon, base))
    return cli_usage_error(C, "--root: '%s' is a step directory not named step_<N>: give the checkpoint root that holds it", a->root);
  if (a->step >= 0 && a->step != n)
    return cli_usage_error(C, "--root: '%s' is step %lld, --step says %lld", a->root, n, a->step);
  a->step = n;
  if (slash == parent) parent[1] = 0;
  else if (slash) *slash = 0;
  else snprintf(parent, sizeof parent, ".");
  a->root = parent;
  return -1;
}

int ckpt_io_args_parse(const char *C, int argc, char **argv, int load, ckpt_io_args *a) {
  const char *stepv = NULL, *blk = NULL, *thr = NULL, *seg = NULL, *v;
  int r;
  memset(a, 0, sizeof *a);
  a->impl = "ref";
  a->tr = "local";
  a->step = -1;
  for (int i = 1; i < argc; ++i) {
    if (cli_flag(argv, i, "--direct")) {
      a->direct = 1;
      continue;
    }
    if (load && cli_flag(argv, i, "--read-once")) {
      a->read_once = 1;
      continue;
    }
    CLI_OPT(C, "--root", a->root);
    CLI_OPT(C, "--step", stepv);
    CLI_OPT(C, "--impl", a->impl);
    CLI_OPT(C, "--transport", a->tr);
    CLI_TIMEOUT_OPT(C)
    CLI_OPT(C, "--threads", thr);
    CLI_OPT(C, "--segment", seg);
    if (!load) CLI_OPT(C, "--block", blk);
    if (load) CLI_OPT(C, "--strict", a->strict);
    if (load) CLI_OPT(C, "--json", a->json);
    if (argv[i][0] == '-') return cli_usage_error(C, "unknown option '%s'", argv[i]);
    if (a->spec) return cli_usage_error(C, "one STATE.json only");
    a->spec = argv[i];
  }
  if (!a->spec || !a->root || (!load && !stepv))
    return cli_usage_error(C, load ? "needs STATE.json --root DIR" : "needs STATE.json --root DIR --step N");
  if (stepv && cli_int(stepv, 0, INT64_MAX, &a->step)) return cli_usage_error(C, "--step: expected an integer >= 0");
  if (load && (r = ckpt_step_dir_root(C, a)) >= 0) return r;
  if (blk && cli_int(blk, 64, 1 << 30, &a->block)) return cli_usage_error(C, "--block: expected 64..2^30");
  if (thr && cli_int(thr, 1, 64, &a->threads)) return cli_usage_error(C, "--threads: expected 1..64");
  if (seg && (cli_int(seg, 4096, 1 << 30, &a->segment) || (a->segment & (a->segment - 1))))
    return cli_usage_error(C, "--segment: a power of two in [4096, 2^30]");
  if (!ckpt_wants_opt(a->impl, a->tr) && (thr || seg || a->direct || a->read_once))
    return cli_usage_error(C, "--threads, --segment, --direct and --read-once are opt's (add --impl opt)");
  return -1;
}

static int cmd_save(int argc, char **argv) {
  const char *C = "ckpt save";
  ckpt_io_args a;
  int r = ckpt_io_args_parse(C, argc, argv, 0, &a);
  if (r >= 0) return r;
  if (ckpt_wants_opt(a.impl, a.tr)) return cmd_ckpt_opt_save(&a);
  const char *spec = a.spec, *root = a.root;
  long long step = a.step;
  rs_state_spec s;
  rs_status st;
  if ((st = rs_state_spec_from_file(spec, &s))) return input_fail(C, st);
  rs_ckpt_world w;
  if ((st = rs_state_spec_build(&s, RS_FILL_VALUES, &w))) {
    rs_state_spec_free(&s);
    return input_fail(C, st);
  }
  rs_ckpt_io_opts io = {0, 0, NULL, a.block};
  int64_t ops = 0;
  st = rs_ref_ckpt_save(&w, root, step, &io, &ops);
  rs_ckpt_world_free(&w);
  rs_state_spec_free(&s);
  if (st) {
    /* a state dict that fails validation is bad input; a failed write is a failure */
    if (st == RS_ERR_IO) return ckpt_fail(C, st);
    return input_fail(C, st);
  }
  printf("saved %s/step_%lld (%lld I/O operations); latest = %lld\n", root, step, (long long)ops, step);
  return CLI_OK;
}

static void print_list(const char *what, char **v, int n) {
  printf("%s (%d):", what, n);
  for (int i = 0; i < n; ++i) printf(" %s", v[i]);
  printf("\n");
}

static int cmd_load(int argc, char **argv) {
  const char *C = "ckpt load";
  ckpt_io_args a;
  int r = ckpt_io_args_parse(C, argc, argv, 1, &a);
  if (r >= 0) return r;
  if (ckpt_wants_opt(a.impl, a.tr)) return cmd_ckpt_opt_load(&a);
  const char *spec = a.spec, *root = a.root;
  long long step = a.step;
  rs_strict mode = RS_STRICT_ASSUME_OK_UNEXPECTED;
  if (a.strict && rs_strict_parse(a.strict, &mode)) return cli_flag_error(C, "--strict", "strict");
  rs_state_spec s, saved;
  rs_status st;
  if ((st = rs_state_spec_from_file(spec, &s))) return input_fail(C, st);
  if ((r = ckpt_load_target(C, root, step)) >= 0) {
    rs_state_spec_free(&s);
    return r;
  }
  if ((st = rs_ref_ckpt_catalog(root, step, &s, &saved))) {
    rs_state_spec_free(&s);
    return ckpt_fail(C, st);
  }
  rs_ckpt_world got, exp = {0, NULL};
  rs_ckpt_report rep;
  int rc = CLI_OK;
  if ((st = rs_state_spec_build(&s, RS_FILL_INITIAL, &got))) {
    rs_state_spec_free(&s);
    rs_state_spec_free(&saved);
    return input_fail(C, st);
  }
  rs_ckpt_io_opts io = {0, 0, stderr, 0};
  st = rs_ref_ckpt_load(&got, root, step, mode, &io, &rep);
  if (rep.nunexpected || mode == RS_STRICT_RETURN_UNEXPECTED || mode == RS_STRICT_RETURN_ALL)
    print_list("unexpected keys", rep.unexpected, rep.nunexpected);
  if (rep.nmissing || mode == RS_STRICT_RETURN_ALL) print_list("missing keys", rep.missing, rep.nmissing);
  char msg[1024];
  if (st) {
    rc = ckpt_fail(C, st);
  } else if ((st = rs_oracle_ckpt_expected(&saved, &s, &exp))) {
    rc = ckpt_fail(C, st);
  } else if (rs_oracle_ckpt_compare(&exp, &got, msg, sizeof msg)) {
    fprintf(stderr, "reshard %s: differs from the oracle: %s\n", C, msg);
    rc = CLI_FAIL;
  } else {
    printf("ok: %d ranks, %lld tensor entries and %lld objects loaded (%lld bytes read), every rank equals the oracle\n",
           s.world, (long long)rep.tensors_loaded, (long long)rep.objects_loaded, (long long)rep.bytes_read);
  }
  if (a.json && (r = ckpt_load_json(C, a.json, "ref", st ? "failed" : "ok", &got, -1))) rc = r;
  rs_ckpt_report_free(&rep);
  rs_ckpt_world_free(&got);
  rs_ckpt_world_free(&exp);
  rs_state_spec_free(&s);
  rs_state_spec_free(&saved);
  return rc;
}

static int dir_cmd(int argc, char **argv, const char *C, int which) {
  const char *dir = NULL, *out = NULL;
  int json = 0;
  for (int i = 1; i < argc; ++i) {
    if (which == 1 && cli_flag(argv, i, "--json")) {
      json = 1;
      continue;
    }
    if (argv[i][0] == '-') return cli_usage_error(C, "unknown option '%s'", argv[i]);
    if (!dir) dir = argv[i];
    else if (which == 2 && !out) out = argv[i];
    else return cli_usage_error(C, "unexpected argument '%s'", argv[i]);
  }
  if (!dir || (which == 2 && !out)) return cli_usage_error(C, which == 2 ? "needs DIR OUT.safetensors" : "needs DIR");
  char *sd;
  rs_status st;
  /* a directory that holds no checkpoint (no latest, no step_N/metadata.json) is bad input */
  if ((st = rs_ckpt_resolve_dir(dir, &sd))) return input_fail(C, st);
  free(sd);
  st = which == 0 ? rs_ckpt_verify(dir, stdout) : which == 1 ? rs_ckpt_inspect(dir, json, stdout) : rs_ckpt_export(dir, out);
  if (st) return ckpt_fail(C, st);
  if (which == 2) printf("exported %s to %s\n", dir, out);
  return CLI_OK;
}

/* `ckpt check`'s flags (shared with cmd_ckpt_opt.c): o, impl, transport and report paths are
 * filled; returns -1 when every flag parses, else the exit code (a usage error was printed). */
int ckpt_check_args(int argc, char **argv, rs_ckpt_campaign *o, const char **impl, const char **tr,
                    const char **junit, const char **jsonp, cli_runner_args *run) {
  const char *C = "ckpt check", *seedv = NULL, *casesv = NULL, *secv = NULL, *shrv = NULL, *v;
  memset(o, 0, sizeof *o);
  memset(run, 0, sizeof *run);
  o->seed = 1;
  int r;
  for (int i = 1; i < argc; ++i) {
    if (cli_flag(argv, i, "--quiet")) {
      o->quiet = 1;
      continue;
    }
    if ((r = cli_runner_opt(C, argc, argv, &i, run)) != 0) {
      if (r < 0) return CLI_USAGE;
      continue;
    }
    CLI_OPT(C, "--seed", seedv);
    CLI_OPT(C, "--cases", casesv);
    CLI_OPT(C, "--seconds", secv);
    CLI_OPT(C, "--impl", *impl);
    CLI_OPT(C, "--transport", *tr);
    CLI_TIMEOUT_OPT(C)
    CLI_OPT(C, "--regress-dir", o->regress_dir);
    CLI_OPT(C, "--scratch", o->scratch);
    CLI_OPT(C, "--shrink-runs", shrv);
    CLI_OPT(C, "--junit", *junit);
    CLI_OPT(C, "--json", *jsonp);
    return cli_usage_error(C, "unknown argument '%s'", argv[i]);
  }
  unsigned long long u;
  long long n;
  if (seedv) {
    if (cli_u64(seedv, &u)) return cli_usage_error(C, "--seed: expected decimal digits (0 .. 18446744073709551615)");
    o->seed = u;
  }
  if (shrv) {
    if (cli_int(shrv, 1, 1000000, &n)) return cli_usage_error(C, "--shrink-runs: expected a positive integer");
    o->shrink_runs = (int)n;
  }
  if (casesv && secv) return cli_usage_error(C, "--cases and --seconds exclude each other");
  o->cases = 2000;
  if (casesv) {
    if (cli_int(casesv, 1, INT64_MAX, &n)) return cli_usage_error(C, "--cases: expected a positive integer");
    o->cases = n;
  }
  if (secv) {
    if (cli_seconds(secv, &o->seconds)) return cli_usage_error(C, "--seconds: %s", CLI_SECONDS_EXPECTED);
    o->cases = 0;
  }
  if (o->scratch && cli_dir_arg(C, "--scratch", o->scratch)) return CLI_USAGE;
  o->jobs = run->jobs > 1 ? run->jobs : 1;
  o->shard_k = run->shard_k;
  o->shard_n = run->shard_n;
  o->case_timeout = run->case_timeout;
  if (o->jobs > 1 && !strcmp(*tr, "mpi"))
    return cli_usage_error(C, "--jobs: one process per rank under --transport mpi (use mpirun's -np, or --jobs 1)");
  if (run->distribute && !strcmp(*tr, "mpi"))
    return cli_usage_error(C, "--distribute: the ranks of --transport mpi play one case together; give one of the two");
  if (o->jobs > 1 && !strcmp(*tr, "local-device") && !rs_opt_ckpt_sim_device())
    return cli_usage_error(C, "--jobs: --transport local-device keeps the GPU in one process (use --jobs 1)");
  return -1;
}

void ckpt_ref_summary(const rs_ckpt_campaign *o, const rs_ckpt_campaign_result *res, const char *impl) {
  int64_t pass = 0, skip = 0;
  for (int p = 0; p < RS_CKPT_PROP_COUNT; ++p) {
    pass += res->pass[p];
    skip += res->skip[p];
    if (!o->quiet || res->fail[p])
      printf("  %-14s pass %lld  skip %lld  fail %lld\n", rs_ckpt_prop_name((rs_ckpt_prop)p), (long long)res->pass[p],
             (long long)res->skip[p], (long long)res->fail[p]);
  }
  char jobs[32] = "";
  if (res->run.jobs > 1) snprintf(jobs, sizeof jobs, ", %d jobs", res->run.jobs);
  printf("ckpt check: %lld cases (seed %llu, impl %s%s) in %.1fs (%.0f cases/s): %lld property runs passed, "
         "%lld skipped, %d properties failed%s\n",
         (long long)res->cases, (unsigned long long)o->seed, impl, jobs,
         res->seconds, res->seconds > 0 ? res->cases / res->seconds : 0.0, (long long)pass, (long long)skip,
         res->failed - (res->run.crashed && res->failed), res->run.crashed ? ", a worker crashed" : "");
}

int ckpt_campaign_exit(rs_status st, const char *err, int failed) {
  if (st != RS_OK) {
    fprintf(stderr, "reshard ckpt check: %s\n", err);
    return ckpt_exit_code(st);
  }
  return failed ? CLI_FAIL : CLI_OK;
}

/* ref's campaign, its summary and reports: the exit code (a follower rank of --distribute prints
 * and writes nothing) */
static int ckpt_ref_check(const rs_ckpt_campaign *o, rs_ckpt_campaign_result *res, const char *junit,
                          const char *jsonp) {
  rs_status st = rs_ckpt_campaign_run(o, res);
  char err[1100];
  snprintf(err, sizeof err, "%s", st ? rs_last_error() : "");
  if (res->run.follower) return ckpt_campaign_exit(st, err, 0);
  ckpt_ref_summary(o, res, "ref");
  int wr = ckpt_check_reports(o, res, NULL, junit, jsonp);
  int rc = ckpt_campaign_exit(st, err, res->failed);
  return st == RS_OK && wr != CLI_OK ? wr : rc;
}

int ckpt_check_reports(const rs_ckpt_campaign *o, const rs_ckpt_campaign_result *ref,
                       const struct rs_ckpt_opt_campaign_result *opt, const char *junit, const char *jsonp) {
  const char *C = "ckpt check";
  if (junit && rs_ckpt_report_junit(junit, o, ref, opt)) return cli_status_error(C, "");
  if (jsonp && rs_ckpt_report_json(jsonp, o, ref, opt)) return cli_status_error(C, "");
  return CLI_OK;
}

static int cmd_check_ckpt(int argc, char **argv) {
  const char *impl = "ref", *tr = "local", *junit = NULL, *jsonp = NULL;
  rs_ckpt_campaign o;
  cli_runner_args run;
  int r = ckpt_check_args(argc, argv, &o, &impl, &tr, &junit, &jsonp, &run);
  if (r >= 0) return r;
  if ((r = cli_runner_start("ckpt check", &run)) != CLI_OK) return r;
  o.dist = run.dist;
  /* --impl opt|both or another transport: the ckpt_opt cross property (cmd_ckpt_opt.c) */
  if (ckpt_wants_opt(impl, tr)) {
    r = cmd_ckpt_opt_check(&o, impl, tr, junit, jsonp);
  } else {
    rs_ckpt_campaign_result *res = malloc(sizeof *res);
    r = res ? ckpt_ref_check(&o, res, junit, jsonp) : cli_nomem("ckpt check", "campaign result");
    free(res);
  }
  cli_runner_stop(&run);
  return r;
}

static int cmd_replay_ckpt(int argc, char **argv) {
  const char *C = "ckpt replay";
  if (argc != 2) return cli_usage_error(C, "needs FILE");
  char scratch[256], msg[1024];
  snprintf(scratch, sizeof scratch, "%s/reshard-ckpt-replay-%d", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
           (int)getpid());
  int failed = 0;
  rs_status st = rs_ckpt_replay(argv[1], scratch, &failed, msg, sizeof msg);
  rs_ckpt_rmtree(scratch);
  if (st) return cli_status_error(C, "");
  if (failed) {
    printf("FAIL %s: %s\n", argv[1], msg);
    return CLI_FAIL;
  }
  printf("pass %s\n", argv[1]);
  return CLI_OK;
}

/* ---- torture: SIGKILL a saving child, then latest must load and equal the oracle ---- */
static const char *TORTURE_SPEC =
    "{\"world\":4,\"tensors\":["
    "{\"key\":\"embedding.word_embeddings.weight\",\"dtype\":\"BF16\",\"shape\":[64,48],\"seed\":1,\"mesh\":[2,2],\"placements\":\"S0,R\"},"
    "{\"key\":\"decoder.layers.mlp.linear_fc1.weight\",\"dtype\":\"F32\",\"shape\":[4,32,24],\"seed\":2,\"mesh\":[4],\"placements\":\"S0\",\"prepend\":1},"
    "{\"key\":\"optimizer.exp_avg\",\"dtype\":\"F32\",\"shape\":[40,33],\"seed\":3,\"mesh\":[2,2],\"placements\":\"S1,R\",\"flatten\":1},"
    "{\"key\":\"decoder.layers.0.mlp.fc1_glu\",\"dtype\":\"F16\",\"shape\":[16,8],\"seed\":4,\"mesh\":[4],\"placements\":\"S0\",\"factory\":\"glu\",\"glu_dim\":0}],"
    "\"objects\":[{\"key\":\"rng_state\",\"seed\":5,\"mesh\":[4],\"dims\":[0]}],"
    "\"common\":{\"iteration\":\"100\"}}";

static void shift_seeds(rs_state_spec *s, int64_t step) {
  for (int i = 0; i < s->nt; ++i) s->t[i].seed = s->t[i].seed * 1000003 + (uint64_t)step;
  for (int i = 0; i < s->no; ++i) s->o[i].seed = s->o[i].seed * 1000003 + (uint64_t)step;
}

static int torture_check(const char *root, const rs_state_spec *base, int64_t *latest, char *msg, size_t cap) {
  if (rs_ckpt_latest(root, latest)) {
    snprintf(msg, cap, "no latest: %s", rs_last_error());
    return 0;
  }
  rs_state_spec s;
  if (rs_state_spec_copy(base, &s)) return 0;
  shift_seeds(&s, *latest);
  rs_ckpt_world got, exp = {0, NULL};
  int ok = rs_state_spec_build(&s, RS_FILL_INITIAL, &got) == RS_OK;
  if (ok && rs_ref_ckpt_load(&got, root, -1, RS_STRICT_RAISE_ALL, NULL, NULL)) {
    snprintf(msg, cap, "latest = step %lld does not load: %s", (long long)*latest, rs_last_error());
    ok = 0;
  }
  if (ok && (rs_oracle_ckpt_expected(&s, &s, &exp) || rs_oracle_ckpt_compare(&exp, &got, msg, cap))) ok = 0;
  if (ok && rs_ckpt_verify(root, NULL)) {
    snprintf(msg, cap, "latest = step %lld fails verify: %s", (long long)*latest, rs_last_error());
    ok = 0;
  }
  rs_ckpt_world_free(&got);
  rs_ckpt_world_free(&exp);
  rs_state_spec_free(&s);
  return ok;
}

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* one save of step (seeds moved by step) by ref (opt = 0) or opt (2 I/O threads, 4 KiB segments
 * and blocks, so a kill can land between the pieces of a file) */
static rs_status save_step(const rs_state_spec *base, const char *root, int64_t step, int opt, int64_t kill_at,
                           int64_t *ops) {
  rs_state_spec s;
  rs_status st = rs_state_spec_copy(base, &s);
  if (st) return st;
  shift_seeds(&s, step);
  rs_ckpt_world w;
  if (!(st = rs_state_spec_build(&s, RS_FILL_VALUES, &w))) {
    if (opt) {
      rs_ckpt_opt_opts o;
      memset(&o, 0, sizeof o);
      o.io_threads = 2;
      o.segment = 4096;
      o.block = 4096;
      o.kill_at = kill_at;
      rs_ckpt_opt_stats stats;
      st = rs_opt_ckpt_save(NULL, &w, root, step, &o, &stats);
      if (ops) *ops = stats.io_ops;
    } else {
      rs_ckpt_io_opts io = {0, kill_at, NULL, 4096};
      st = rs_ref_ckpt_save(&w, root, step, &io, ops);
    }
    rs_ckpt_world_free(&w);
  }
  rs_state_spec_free(&s);
  return st;
}

/* 0 when root may be cleared: missing (its parent a writable directory) or an empty directory, and
 * ROOT.measure missing; else exit 2 naming --root. */
static int torture_root_ok(const char *C, const char *root) {
  int r = cli_dir_arg(C, "--root", root);
  if (r) return r;
  DIR *d = opendir(root);
  if (d) {
    struct dirent *e;
    int entries = 0;
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) entries++;
    closedir(d);
    /* RS_MUTANT 959: torture clears a --root that holds files */
    if (entries && !RS_MUTANT(959))
      return cli_usage_error(C, "--root: '%s' is not empty (torture clears its root: give a new or empty directory)",
                             root);
  }
  char m[4200];
  struct stat sb;
  snprintf(m, sizeof m, "%s.measure", root);
  if (lstat(m, &sb) == 0 && !RS_MUTANT(959))
    return cli_usage_error(C, "--root: '%s' exists (torture measures a save there and clears it)", m);
  return CLI_OK;
}

static int cmd_torture(int argc, char **argv) {
  const char *C = "ckpt torture", *killsv = NULL, *seedv = NULL, *root = NULL, *specf = NULL, *impl = "ref", *v;
  int r;
  for (int i = 1; i < argc; ++i) {
    CLI_OPT(C, "--impl", impl);
    CLI_OPT(C, "--kills", killsv);
    CLI_OPT(C, "--seed", seedv);
    CLI_OPT(C, "--root", root);
    CLI_OPT(C, "--spec", specf);
    return cli_usage_error(C, "unknown argument '%s'", argv[i]);
  }
  long long kills = 100;
  unsigned long long seed = 1;
  if (killsv && cli_int(killsv, 1, 1000000, &kills)) return cli_usage_error(C, "--kills: expected a positive integer");
  if (seedv && cli_u64(seedv, &seed)) return cli_usage_error(C, "--seed: expected decimal digits (0 .. 18446744073709551615)");
  /* both: every other save is opt's */
  int use_opt = !strcmp(impl, "opt") ? 1 : !strcmp(impl, "both") ? 2 : 0;
  if (!use_opt && strcmp(impl, "ref")) return cli_usage_error(C, "--impl: '%s', expected ref, opt or both", impl);
  rs_state_spec base;
  if ((specf ? rs_state_spec_from_file(specf, &base) : rs_state_spec_from_json(TORTURE_SPEC, &base)))
    return cli_status_error(C, "");
  /* torture clears its root (and writes ROOT.measure beside it): a root of the user's must be new or
   * empty, never a directory that holds checkpoints or anything else */
  if (root && (r = torture_root_ok(C, root))) {
    rs_state_spec_free(&base);
    return r;
  }
  char rootbuf[256];
  int own_root = !root;
  if (!root) {
    snprintf(rootbuf, sizeof rootbuf, "%s/reshard-torture-%d", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
             (int)getpid());
    root = rootbuf;
  }
  rs_ckpt_rmtree(root);
  /* step 0 is complete before the first kill; measure a save (ops and time) */
  /* step 0 is complete before the first kill; the I/O operations and time of one save of each
   * implementation that runs (the second one measured under a root of its own) */
  int64_t ops_of[2] = {0, 0};
  double tsave_of[2] = {0, 0};
  char mroot[300];
  snprintf(mroot, sizeof mroot, "%s.measure", root);
  for (int im = use_opt == 1; im <= (use_opt != 0); ++im) {
    int first = im == (use_opt == 1);
    double t0 = mono();
    rs_status fs = save_step(&base, first ? root : mroot, 0, im, 0, &ops_of[im]);
    tsave_of[im] = mono() - t0;
    if (!first) rs_ckpt_rmtree(mroot);
    if (fs) {
      rs_state_spec_free(&base);
      return cli_status_error(C, "first save: ");
    }
  }
  int64_t kills_by[2] = {0, 0};
  int64_t step = 0, torn = 0, old = 0, fresh = 0, at_op = 0, timed = 0, done_before = 0;
  char msg[1024];
  /* --kills counts saves that really died by SIGKILL; a timed kill that comes after the save
   * finished is checked the same way but not counted (at most 4x attempts) */
  long long k = 0;
  for (; at_op + timed < kills && k < 4 * kills; ++k) {
    uint64_t h = rs_hash3(seed, 0x746f7274, (uint64_t)k);
    int by_op = (h & 1) == 0;
    int im = use_opt == 2 ? (int)(k & 1) : use_opt;
    int64_t ops = ops_of[im];
    double tsave = tsave_of[im];
    int64_t kill_at = by_op ? 1 + (int64_t)((h >> 8) % (uint64_t)ops) : 0;
    int64_t next = step + 1;
    /* a killed save may have left step_<next> complete but uncommitted (latest not yet
     * replaced): clear it, as a job restarting from latest would, since save refuses to
     * write over a step that holds a checkpoint */
    char nd[4400];
    snprintf(nd, sizeof nd, "%s/step_%lld", root, (long long)next);
    rs_ckpt_rmtree(nd);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
      rs_state_spec_free(&base);
      return cli_usage_error(C, "fork failed");
    }
    if (pid == 0) _exit(save_step(&base, root, next, im, kill_at, NULL) ? 3 : 0);
    if (!by_op) {
      /* a timed kill anywhere in the save window (the save takes tsave seconds) */
      struct timespec d;
      double delay = tsave * (double)((h >> 8) % 1000) / 1000.0;
      d.tv_sec = (time_t)delay;
      d.tv_nsec = (long)((delay - (double)d.tv_sec) * 1e9);
      nanosleep(&d, NULL);
      kill(pid, SIGKILL);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    int killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    if (killed) {
      kills_by[im]++;
      if (by_op) at_op++;
      else timed++;
    } else {
      done_before++;
    }
    int64_t latest;
    if (!torture_check(root, &base, &latest, msg, sizeof msg) || (latest != step && latest != next)) {
      torn++;
      fprintf(stderr, "TORN after kill %lld (%s save, %s): %s\n", k, im ? "opt" : "ref", by_op ? "at an I/O op" : "timed", msg);
      continue;
    }
    if (latest == next) fresh++;
    else old++;
    /* old step directories are not needed any more */
    char d[4400];
    snprintf(d, sizeof d, "%s/step_%lld", root, (long long)(latest - 1));
    if (latest > 0) rs_ckpt_rmtree(d);
    step = latest;
  }
  printf("ckpt torture: %lld saves SIGKILLed (ref %lld, opt %lld; %lld at a chosen I/O operation of a save's %lld (ref) / %lld (opt), "
         "%lld at a random time in a %.1f ms (ref) / %.1f ms (opt) save; %lld more finished before their timed kill): "
         "latest loaded the previous checkpoint %lld times, the new one %lld times; torn = %lld\n",
         (long long)(at_op + timed), (long long)kills_by[0], (long long)kills_by[1], (long long)at_op, (long long)ops_of[0],
         (long long)ops_of[1], (long long)timed, tsave_of[0] * 1e3, tsave_of[1] * 1e3, (long long)done_before, (long long)old,
         (long long)fresh, (long long)torn);
  if (own_root) rs_ckpt_rmtree(root);
  rs_state_spec_free(&base);
  if (!torn && at_op + timed < kills) {
    fprintf(stderr, "reshard %s: only %lld of %lld saves were killed before they finished\n", C, (long long)(at_op + timed), kills);
    return CLI_FAIL;
  }
  return torn ? CLI_FAIL : CLI_OK;
}

int cmd_ckpt(int argc, char **argv) {
  if (argc < 2 || cli_is_help(argv[1])) {
    fputs(HELP, argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_USAGE : CLI_OK;
  }
  const char *sub = argv[1];
  for (int i = 2; i < argc; ++i)
    if (cli_is_help(argv[i])) {
      fputs(HELP, stdout);
      return CLI_OK;
    }
  /* save, load and check route --impl opt|both and other transports to cmd_ckpt_opt.c */
  int opt;
  if (strcmp(sub, "save") == 0) return cmd_save(argc - 1, argv + 1);
  if (strcmp(sub, "load") == 0) return cmd_load(argc - 1, argv + 1);
  if (strcmp(sub, "import") == 0) return cmd_ckpt_import(argc - 1, argv + 1);
  if (strcmp(sub, "reshard") == 0) return cmd_ckpt_reshard(argc - 1, argv + 1);
  if (strcmp(sub, "reshard-check") == 0) return cmd_ckpt_reshard_check(argc - 1, argv + 1);
  if (strcmp(sub, "replay") == 0 && argc == 3 && (opt = ckpt_opt_replay_file(argv[2])) >= 0) return opt;
  if (strcmp(sub, "verify") == 0) return dir_cmd(argc - 1, argv + 1, "ckpt verify", 0);
  if (strcmp(sub, "inspect") == 0) return dir_cmd(argc - 1, argv + 1, "ckpt inspect", 1);
  if (strcmp(sub, "export") == 0) return dir_cmd(argc - 1, argv + 1, "ckpt export", 2);
  if (strcmp(sub, "check") == 0) return cmd_check_ckpt(argc - 1, argv + 1);
  if (strcmp(sub, "replay") == 0) return cmd_replay_ckpt(argc - 1, argv + 1);
  if (strcmp(sub, "torture") == 0) return cmd_torture(argc - 1, argv + 1);
  fprintf(stderr, "reshard ckpt: unknown command '%s' (see reshard ckpt --help)\n", sub);
  return CLI_USAGE;
}
