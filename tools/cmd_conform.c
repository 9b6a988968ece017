/* cmd_conform.c - `reshard conform`: hold another backend (a plug-in library or a process speaking
 * the JSON-lines protocol) to the contract: the property campaigns and fixture corpora of each
 * suite, bit for bit against the oracle, failures shrunk with the command that replays them
 * (docs/conformance.md). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "conform/conform.h"

/* The corpora `conform` runs: a fixtures folder holds at least one of these. */
static const char *const CORPUS_DIRS[] = {"curated", "regressions", "pytorch", "tp", "p2p", "ckpt"};
#define CORPUS_DIRS_TEXT "curated, regressions, pytorch, tp, p2p, ckpt"

static int has_corpora(const char *dir) {
  for (size_t i = 0; i < sizeof CORPUS_DIRS / sizeof *CORPUS_DIRS; ++i) {
    char p[4096];
    struct stat sb;
    int n = snprintf(p, sizeof p, "%s/%s", dir, CORPUS_DIRS[i]);
    if (n < 0 || (size_t)n >= sizeof p) return 0; /* a path longer than PATH_MAX holds nothing */
    if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) return 1;
  }
  return 0;
}

/* The default fixtures folder, found from this executable's own place (relocatable): the installed
 * corpora (RS_REL_FIXTURES from the bin dir: ../share/reshard/fixtures), else, for the reshard of a
 * build tree only (its directory is RS_BUILD_DIR), the source tree's. An installed reshard never
 * reads the source tree, so it runs the same corpora after the tree is gone. NULL when none holds
 * corpora; `looked` lists where it looked. */
static const char *default_fixtures(char *buf, size_t cap, char *looked, size_t lcap) {
  char exe[4096], bindir[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  looked[0] = 0;
  if (n <= 0) {
    snprintf(looked, lcap, "nothing: /proc/self/exe unreadable");
    return NULL;
  }
  exe[n] = 0;
  snprintf(bindir, sizeof bindir, "%s", exe);
  char *slash = strrchr(bindir, '/');
  if (slash) *slash = 0;
#ifdef RS_REL_FIXTURES
  int len = snprintf(buf, cap, "%s/%s", bindir, RS_REL_FIXTURES);
  if (len < 0 || (size_t)len >= cap) return NULL; /* a path longer than PATH_MAX: not there */
  snprintf(looked, lcap, "%s", buf);
  if (has_corpora(buf)) return buf;
#endif
#if defined(RS_SOURCE_FIXTURES) && defined(RS_BUILD_DIR)
  char a[4096], b[4096];
  if (realpath(bindir, a) && realpath(RS_BUILD_DIR, b) && strcmp(a, b) == 0) {
    size_t l = strlen(looked);
    snprintf(looked + l, lcap - l, "%s%s", l ? ", " : "", RS_SOURCE_FIXTURES);
    if (has_corpora(RS_SOURCE_FIXTURES)) {
      snprintf(buf, cap, "%s", RS_SOURCE_FIXTURES);
      return buf;
    }
  }
#endif
  (void)cap;
  return NULL;
}

static const char *C = "conform";

static const char *HELP =
    "usage: reshard conform --backend LIB.so[?OPTIONS]|exec:'CMD ARGS' [options]\n"
    "Runs the property campaigns and the fixture corpora of the chosen suites against another\n"
    "backend, compares every result bit for bit with the oracle, shrinks each failure and prints\n"
    "the command that replays it against the same backend (docs/conformance.md).\n"
    "  --backend B        a plug-in (include/reshard/backend.h) or exec:CMD (the process protocol)\n"
    "  --suite LIST       redistribute, tp, p2p, ckpt, all, or a comma list (default all)\n"
    "  --seed S           campaign seed (default 1)\n"
    "  --cases N          cases per suite's campaign (default 1000), or\n"
    "  --seconds T        run each suite's campaign for T seconds\n"
    "  --timeout SEC      a process backend's time per exchange (default 30)\n"
    "  --shrink-runs N    attempts per shrunk failure (default 2000; a process backend 300)\n"
    "  --shrink-seconds T wall-clock cap per shrunk failure (default 120; a step that hangs still\n"
    "                     takes its --timeout); a budget that ran out is said with the failure\n"
    "  --max-skip-share P an item (campaign or corpus file) whose backend declined more than the\n"
    "                     share P (0..1) of its cases fails (default 1: never)\n"
    "  --max-timeouts K   after K timed-out requests the backend is asked nothing more: the run\n"
    "                     stops, the suites left fail as not run (default 25; 0: never stop)\n"
    "  --fixtures DIR|none  the fixtures folder whose corpora run too (default: the installed\n"
    "                     share/reshard/fixtures beside this reshard, or the source tree's for a\n"
    "                     reshard in its build tree; none found is an error: --fixtures none runs\n"
    "                     the campaigns only)\n"
    "  --failures DIR     where shrunk failures are saved (default conform-failures)\n"
    "  --junit F, --json F  reports (JUnit: a testcase per property and fixture file, each failure\n"
    "                     with its replay command and shrunk case); --quiet: only failures and the summary\n"
    "  --report DIR       DIR/conform.html: the result table of every suite and each failure, a\n"
    "                     redistribute case drawn as per-rank boxes with the differing elements red\n"
    "                     (P2P, ckpt: the failing parameter's or tensor's boxes; tp: message, case)\n"
    "  --replay FILE      re-run one saved failure against the backend (exit 1 if it still fails)\n"
    "  --jobs N|auto      each suite's campaign in N forked workers, each with a backend of its own\n"
    "                     (a process backend: N children of the command, each said hello to; a\n"
    "                     plug-in: an instance per worker, made by its create); a backend whose hello\n"
    "                     or ABI says max_instances K runs min(N, K) (a note says so). The reports,\n"
    "                     failures and shrunk cases do not depend on N; failures shrink in conform\n"
    "                     with its own backend, and the corpora run there too\n"
    "  --shard K/N        each campaign runs only its cases i with i % N == K-1, the corpora run in\n"
    "                     shard 1 only; `reshard report merge` adds the --json reports of one suite up\n"
    "  --case-timeout SEC a worker on one case longer is reported hung (default 600; a process\n"
    "                     backend's own --timeout per exchange still applies first)\n"
    "Exit: 0 all passed (at least one case), 1 a failure or nothing checked, 2 bad usage or input (a\n"
    "missing or invalid backend, another protocol version), 3 out of memory, 4 a --jobs worker hung\n"
    "on one case past --case-timeout (the reports are still written).\n"
    "Capabilities the backend lacks are reported as skipped, never as passed.\n";

static int parse_seconds(const char *flag, const char *v, double *out) {
  if (!v || cli_seconds_value(v, 86400, out)) return cli_usage_error(C, "%s: expected seconds in (0, 86400]", flag);
  return CLI_OK;
}

/* Returns the number of cases that passed. */
static int64_t summary(const rs_conform_opts *o, const rs_cf_backend *b, const rs_cf_result *r) {
  printf("%-14s %-44s %8s %6s %6s\n", "suite", "property / fixture", "pass", "fail", "skip");
  int64_t p = 0, f = 0, s = 0;
  for (int i = 0; i < r->n; i++) {
    const rs_cf_item *it = &r->item[i];
    p += it->pass, f += it->fail, s += it->skip;
    if (o->quiet && !it->fail) continue;
    const char *nm = it->name;
    size_t len = strlen(nm);
    printf("%-14s %-44s %8lld %6lld %6lld%s\n", rs_cf_suite_name(it->suite), len > 44 ? nm + len - 44 : nm,
           (long long)it->pass, (long long)it->fail, (long long)it->skip,
           it->fail ? "  FAILED" : (!it->pass && it->skip) ? "  SKIPPED" : "");
    if ((it->fail || (!it->pass && it->skip)) && it->message[0]) printf("    %s\n", it->message);
    if (it->replay[0]) printf("    replay: %s\n", it->replay);
  }
  printf("backend %s: %lld passed, %lld failed, %lld skipped; %d of %d items failed\n", rs_cf_backend_name(b),
         (long long)p, (long long)f, (long long)s, r->failed, r->n);
  if (!p && !f) printf("nothing passed: every chosen suite was skipped (exit 1, not a pass)\n");
  if (r->timeouts || r->stopped)
    printf("backend timeouts: %lld%s\n", (long long)r->timeouts,
           r->stopped ? " (--max-timeouts reached: the run stopped asking the backend)" : "");
  return p;
}

int cmd_conform(int argc, char **argv) {
  rs_conform_opts o;
  memset(&o, 0, sizeof o);
  o.seed = 1;
  const char *backend = NULL, *suite = "all", *replay = NULL, *fixtures = NULL, *v;
  double timeout = 30;
  long long cases = 0, shrink = 0, max_timeouts = RS_CF_MAX_TIMEOUTS;
  o.max_skip_share = RS_CF_MAX_SKIP_SHARE;
  o.shrink_seconds = RS_CF_SHRINK_SECONDS;
  int r;
  int seconds_given = 0;
  cli_runner_args run;
  memset(&run, 0, sizeof run);
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      fputs(HELP, stdout);
      return CLI_OK;
    }
    if (cli_flag(argv, i, "--quiet")) {
      o.quiet = 1;
      continue;
    }
    if ((r = cli_runner_opt(C, argc, argv, &i, &run)) != 0) {
      if (r < 0) return CLI_USAGE;
      continue;
    }
    CLI_OPT(C, "--backend", backend);
    CLI_OPT(C, "--suite", suite);
    CLI_OPT(C, "--replay", replay);
    CLI_OPT(C, "--fixtures", fixtures);
    CLI_OPT(C, "--failures", o.failures);
    CLI_OPT(C, "--junit", o.junit);
    CLI_OPT(C, "--json", o.json);
    CLI_OPT(C, "--report", o.report);
    if ((r = cli_opt(argc, argv, &i, "--seed", &v)) != 0) {
      unsigned long long s;
      if (r < 0 || cli_u64(v, &s)) return cli_usage_error(C, "--seed: expected decimal digits (0 .. 18446744073709551615)");
      o.seed = s;
      continue;
    }
    if ((r = cli_opt(argc, argv, &i, "--cases", &v)) != 0) {
      if (r < 0 || cli_int(v, 1, (long long)1 << 40, &cases)) return cli_usage_error(C, "--cases: expected a positive integer");
      continue;
    }
    if ((r = cli_opt(argc, argv, &i, "--shrink-runs", &v)) != 0) {
      if (r < 0 || cli_int(v, 0, 1000000, &shrink)) return cli_usage_error(C, "--shrink-runs: expected 0..1000000");
      continue;
    }
    if ((r = cli_opt(argc, argv, &i, "--shrink-seconds", &v)) != 0) {
      if (r < 0 || cli_seconds(v, &o.shrink_seconds)) return cli_usage_error(C, "--shrink-seconds: %s", CLI_SECONDS_EXPECTED);
      continue;
    }
    if ((r = cli_opt(argc, argv, &i, "--max-skip-share", &v)) != 0) {
      if (r < 0 || cli_share(v, &o.max_skip_share))
        return cli_usage_error(C, "--max-skip-share: expected a share 0..1 (e.g. 0.25)");
      continue;
    }
    if ((r = cli_opt(argc, argv, &i, "--max-timeouts", &v)) != 0) {
      if (r < 0 || cli_int(v, 0, 1000000, &max_timeouts)) return cli_usage_error(C, "--max-timeouts: expected 0..1000000");
      continue;
    }
    if ((r = cli_opt(argc, argv, &i, "--seconds", &v)) != 0) {
      if (parse_seconds("--seconds", r < 0 ? NULL : v, &o.seconds)) return CLI_USAGE;
      seconds_given = 1;
      continue;
    }
    if ((r = cli_opt(argc, argv, &i, "--timeout", &v)) != 0) {
      if (parse_seconds("--timeout", r < 0 ? NULL : v, &timeout)) return CLI_USAGE;
      continue;
    }
    return cli_usage_error(C, "unknown argument '%s' (see reshard conform --help)", argv[i]);
  }
  if (!backend) return cli_usage_error(C, "--backend: required (a plug-in .so or exec:CMD)");
  if (run.distribute)
    return cli_usage_error(C, "--distribute: not supported by conform (each rank would need its own backend): use --jobs N, or --shard K/N per machine and `reshard report merge`");
  o.jobs = run.jobs > 1 ? run.jobs : 1;
  o.shard_k = run.shard_k;
  o.shard_n = run.shard_n;
  o.case_timeout = run.case_timeout;
  if (cases && seconds_given) return cli_usage_error(C, "--cases and --seconds: give one of them");
  o.cases = seconds_given ? 0 : cases ? cases : 1000;
  if (rs_cf_parse_suites(suite, &o.suites)) return cli_status_error(C, NULL);
  int is_exec = strncmp(backend, "exec:", 5) == 0;
  o.shrink_runs = shrink ? (int)shrink : is_exec ? 300 : 2000;
  o.max_timeouts = max_timeouts;
  char fixbuf[4096], looked[8192];
  if (fixtures && strcmp(fixtures, "none") == 0) o.fixtures = NULL;
  else if (fixtures) {
    if (access(fixtures, R_OK) != 0) return cli_usage_error(C, "--fixtures: '%s': no such folder", fixtures);
    if (!has_corpora(fixtures))
      return cli_usage_error(C, "--fixtures: '%s' holds none of the corpus folders (%s)", fixtures, CORPUS_DIRS_TEXT);
    o.fixtures = fixtures;
  } else if (!(o.fixtures = default_fixtures(fixbuf, sizeof fixbuf, looked, sizeof looked)) && !replay) {
    /* a replay runs one saved case: it needs no corpora */
    return cli_usage_error(C, "--fixtures: no fixtures folder found (looked at %s); give --fixtures DIR, or "
                              "--fixtures none to run the campaigns only", looked);
  }
  struct stat sb;
  /* refused before the campaign, not after it */
  if (o.report && lstat(o.report, &sb) == 0 && !S_ISDIR(sb.st_mode))
    return cli_usage_error(C, "--report: '%s' is not a directory", o.report);
  rs_cf_backend *b;
  rs_status st = rs_cf_backend_open(backend, timeout, &b);
  if (st) return cli_status_error(C, NULL);
  int rc = CLI_OK;
  if (replay) {
    int failed = 0;
    char msg[8192];
    rs_cf_result res;
    unsigned suite = 0;
    st = rs_conform_replay(b, replay, &failed, msg, sizeof msg, &res, &suite);
    if (st) rc = cli_status_error(C, NULL);
    else {
      printf("%s\n", msg);
      rc = failed ? CLI_FAIL : CLI_OK;
      /* the reports a campaign writes, of this one file (--cases 1: one case ran) */
      o.suites = suite, o.cases = 1;
      if (o.junit && rs_cf_write_junit(o.junit, b, &res)) rc = cli_status_error(C, NULL);
      else if (o.json && rs_cf_write_json(o.json, &o, b, &res)) rc = cli_status_error(C, NULL);
      else if (o.report && rs_cf_write_html(o.report, &o, b, &res)) rc = cli_status_error(C, NULL);
    }
    rs_cf_result_free(&res);
    rs_cf_backend_close(b);
    return rc;
  }
  if (!o.quiet) printf("backend %s (%s)\n", rs_cf_backend_name(b), backend);
  rs_cf_result res;
  st = rs_conform_run(&o, b, &res);
  if (st) rc = cli_status_error(C, NULL);
  else {
    int64_t passed = summary(&o, b, &res);
    if (o.junit && rs_cf_write_junit(o.junit, b, &res)) rc = cli_status_error(C, NULL);
    else if (o.json && rs_cf_write_json(o.json, &o, b, &res)) rc = cli_status_error(C, NULL);
    else if (o.report && rs_cf_write_html(o.report, &o, b, &res)) rc = cli_status_error(C, NULL);
    else rc = res.oom ? CLI_NOMEM : res.hung ? CLI_PEER : res.failed || !passed ? CLI_FAIL : CLI_OK;
  }
  rs_cf_result_free(&res);
  rs_cf_backend_close(b);
  return rc;
}
