/* planner_fuzz.c - the fuzz-planner campaign: draw a case, ask the planner under test, check the plan
 * (legality with props' check, bytes with ref's executor against the oracle), score it against
 * reshard's own planners, shrink the first failure of each kind. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include "conform/planner_fuzz.h"
#include "core/case_json.h"
#include "core/mutant.h"
#include "core/values.h"
#include "props/features.h"
#include "props/report.h"
#include "reshard/ref.h"

#define MSG_CAP 8192

static const char *const FAIL_NAMES[RS_PF_NFAIL] = {"error", "illegal", "wrong"};
static const char *const OBJ_NAMES[2][RS_PF_NOBJ] = {{"steps", "seed-cost", "pytorch-cost", "traffic"},
                                                     {"traffic", "max-sender"}};
static const char *const BASE_NAMES[2][RS_PF_MAX_BASE] = {{"greedy", "graph/seed", "graph/pytorch", "best"},
                                                          {"ref", "opt", "best", ""}};

const char *rs_pf_fail_name(rs_pf_fail f) { return (unsigned)f < RS_PF_NFAIL ? FAIL_NAMES[f] : "?"; }
int rs_pf_nobj(rs_pf_kind k) { return k == RS_PF_P2P ? RS_PF_P2P_NOBJ : RS_PF_NOBJ; }
int rs_pf_nbase(rs_pf_kind k) { return k == RS_PF_P2P ? 2 : 3; }
const char *rs_pf_objective_name(rs_pf_kind k, int obj) {
  return obj >= 0 && obj < rs_pf_nobj(k) ? OBJ_NAMES[k == RS_PF_P2P][obj] : "?";
}
const char *rs_pf_base_name(rs_pf_kind k, int b) {
  return b >= 0 && b <= rs_pf_nbase(k) ? BASE_NAMES[k == RS_PF_P2P][b] : "?";
}
int rs_pf_objective_parse(rs_pf_kind k, const char *name) {
  for (int i = 0; name && i < rs_pf_nobj(k); i++)
    if (strcmp(name, OBJ_NAMES[k == RS_PF_P2P][i]) == 0) return i;
  return -1;
}

void rs_pf_opts_default(rs_pf_opts *o) {
  memset(o, 0, sizeof *o);
  o->timeout = 10;
  o->seed = 1;
  o->cases = 1000;
  o->objective = RS_PF_SEED_COST;
  rs_gen_opts_default(&o->gen);
  rs_p2p_gen_opts_default(&o->p2p);
  o->regress_dir = "fuzz-planner-failures";
  o->shrink_runs = 500;
  o->shrink_seconds = RS_PF_SHRINK_SECONDS;
  o->max_decline_share = RS_PF_MAX_DECLINE_SHARE;
  o->worst = 3;
}

/* The generator options of the run: `reshard check`'s generator (one stream per case), on the
 * enumeration the planner is held to: --enumeration pytorch draws every case on the pytorch
 * enumeration (zero-fill S -> P(sum) included, as `reshard gen --enumeration pytorch` prints them);
 * seed draws no pytorch case. */
static rs_gen_opts run_gen(const rs_pf_opts *o) {
  rs_gen_opts g = o->gen;
  g.redraws = NULL;
  g.enumerations = o->enumeration == RS_ENUM_PYTORCH ? RS_GEN_ENUM_PYTORCH : RS_GEN_ENUM_SEED;
  return g;
}

/* ---- one case: what the planner's plan is worth ---- */

typedef struct pf_eval {
  int have;                          /* the planner under test gave a passing plan */
  double mine[RS_PF_NOBJ];
  int bhave[RS_PF_MAX_BASE];         /* baseline b: 1 has a plan, -1 found no path, 0 did not run */
  double base[RS_PF_MAX_BASE][RS_PF_NOBJ];
  int lb_ok;                         /* the lower bound applies (copy-only) */
  double lb, traffic;
  char mine_trace[320], base_trace[RS_PF_MAX_BASE][320];
} pf_eval;

/* RS_FAIL or RS_SKIP with "what: <the last error>" in msg. */
static rs_outcome with_error(rs_outcome o, char *msg, size_t cap, const char *what) {
  snprintf(msg, cap, "%s: %s", what, rs_last_error());
  return o;
}

/* Redistribute: the planner's plan for c, checked. RS_SKIP: it declined. */
static rs_outcome check_plan(rs_planner_host *h, const rs_case *c, rs_plan *p, rs_pf_fail *why, char *msg,
                             size_t cap) {
  rs_status st = rs_planner_host_plan(h, c, p, msg, cap);
  if (st == RS_ERR_UNSUPPORTED || st == RS_ERR_NOPATH) return RS_SKIP;
  if (st != RS_OK) {
    *why = st == RS_ERR_ILLEGAL ? RS_PF_ILLEGAL : RS_PF_ERROR;
    return RS_FAIL;
  }
  int bad = -1;
  rs_outcome o = rs_prop_plan_legal(c, p, &bad, msg, cap);
  /* Mutant 801: the verdict on the plan's last step is dropped. */
  if (RS_MUTANT(801) && o == RS_FAIL && bad == p->nsteps - 1) o = RS_PASS;
  if (o == RS_FAIL) {
    /* every step legal but the plan ends elsewhere: a wrong plan, not an illegal one */
    *why = bad >= 0 && bad < p->nsteps ? RS_PF_ILLEGAL : RS_PF_WRONG;
    return RS_FAIL;
  }
  o = rs_prop_plan_oracle(NULL, c, p, msg, cap);
  if (o == RS_FAIL) *why = RS_PF_WRONG;
  return o;
}

static void plan_trace(const rs_case *c, const rs_plan *p, char *buf, size_t cap) {
  if (rs_plan_trace(&c->mesh, &c->src, c->tensor.ndim, p, buf, cap) != RS_OK) snprintf(buf, cap, "(no trace)");
}

/* The objectives of a legal plan; non-zero when one cannot be measured. */
static int measure(const rs_case *c, const rs_plan *p, double *v) {
  int64_t bytes = 0;
  v[RS_PF_STEPS] = p->nsteps;
  if (rs_ref_plan_cost(&c->mesh, &c->tensor, &c->src, p, RS_COST_SEED, &v[RS_PF_SEED_COST]) != RS_OK) return 1;
  if (rs_ref_plan_cost(&c->mesh, &c->tensor, &c->src, p, RS_COST_PYTORCH, &v[RS_PF_PYTORCH_COST]) != RS_OK)
    return 1;
  if (rs_ref_plan_traffic(c, p, &bytes) != RS_OK) return 1;
  v[RS_PF_TRAFFIC] = (double)bytes;
  return 0;
}

/* reshard's own planners on c: greedy (default shard orders only: PyTorch's greedy planner ignores
 * shard order) and graph under both cost models (within the generator's state-space bound). */
static void redistribute_baselines(const rs_case *c, pf_eval *e) {
  int defaults = rs_sharding_is_default_order(&c->src, c->tensor.ndim) &&
                 rs_sharding_is_default_order(&c->dst, c->tensor.ndim);
  int bounded = rs_gen_graph_bounded(NULL, c);
  for (int b = 0; b < 3; b++) {
    rs_plan p;
    rs_status st;
    if (b == 0 && !defaults) continue;
    if (b > 0 && bounded) continue;
    if (b == 0) st = rs_ref_plan_greedy_enum(&c->mesh, &c->tensor, &c->src, &c->dst, c->enumeration, &p);
    else
      st = rs_ref_plan_graph_enum(&c->mesh, &c->tensor, &c->src, &c->dst, b == 1 ? RS_COST_SEED : RS_COST_PYTORCH,
                                  c->enumeration, &p);
    if (st == RS_ERR_NOPATH) e->bhave[b] = -1;
    if (st != RS_OK || rs_plan_check(&c->mesh, &c->src, &c->dst, c->tensor.ndim, &p) != RS_OK) continue;
    if (measure(c, &p, e->base[b])) continue;
    e->bhave[b] = 1;
    plan_trace(c, &p, e->base_trace[b], sizeof e->base_trace[b]);
  }
  rs_clear_error();
}

/* ---- P2P ---- */

static void p2p_values(const rs_p2p_plan *p, double *v) {
  v[RS_PF_P2P_TRAFFIC] = (double)p->bytes_sent;
  v[RS_PF_P2P_MAX_SENDER] = (double)p->max_sender_bytes;
}

static rs_outcome check_p2p(rs_planner_host *h, const rs_p2p_model *m, rs_p2p_plan *p, rs_pf_fail *why, char *msg,
                            size_t cap) {
  memset(p, 0, sizeof *p);
  rs_status st = rs_planner_host_plan_p2p(h, m, p, msg, cap);
  if (st == RS_ERR_UNSUPPORTED || st == RS_ERR_NOPATH) return RS_SKIP;
  if (st != RS_OK) {
    *why = st == RS_ERR_ILLEGAL ? RS_PF_ILLEGAL : RS_PF_ERROR;
    return RS_FAIL;
  }
  /* Mutant 802: exact cover, legal senders and task ids go unchecked. */
  if (!RS_MUTANT(802) && rs_p2p_plan_verify(m, p) != RS_OK) {
    *why = RS_PF_ILLEGAL;
    return with_error(RS_FAIL, msg, cap, "SPEC 10");
  }
  if (rs_p2p_plan_stats(m, p) != RS_OK) {
    *why = RS_PF_ILLEGAL;
    return with_error(RS_FAIL, msg, cap, "plan stats");
  }
  rs_p2p_locals src = {0}, got = {0}, want = {0};
  rs_outcome o = RS_PASS;
  if ((st = rs_p2p_source_locals(m, -1, &src)) || (st = rs_p2p_oracle_expected(m, -1, &want))) {
    *why = RS_PF_ERROR;
    o = with_error(RS_FAIL, msg, cap, "harness");
  } else if ((st = rs_p2p_ref_execute(m, p, &src, &got))) {
    *why = RS_PF_WRONG;
    o = with_error(RS_FAIL, msg, cap, "ref executing the plan");
  } else if ((st = rs_p2p_compare(m, &want, &got))) {
    *why = RS_PF_WRONG;
    o = with_error(RS_FAIL, msg, cap, "ref vs oracle");
  }
  rs_p2p_locals_free(&src);
  rs_p2p_locals_free(&got);
  rs_p2p_locals_free(&want);
  return o;
}

static void p2p_baselines(const rs_p2p_model *m, pf_eval *e) {
  for (int b = 0; b < 2; b++) {
    rs_p2p_plan p;
    memset(&p, 0, sizeof p);
    rs_status st = RS_ERR_UNSUPPORTED;
    if (b == 0) st = rs_p2p_ref_plan(m, &p);
#ifdef RS_HAVE_OPT
    else st = rs_p2p_opt_plan(m, &p);
#endif
    if (st == RS_ERR_NOPATH) e->bhave[b] = -1;
    if (st == RS_OK && rs_p2p_plan_stats(m, &p) == RS_OK) {
      p2p_values(&p, e->base[b]);
      e->bhave[b] = 1;
    }
    rs_p2p_plan_free(&p);
  }
  rs_clear_error();
}

/* ---- scoring ---- */

/* -1 mine is better, 0 a tie, 1 mine is worse; no plan is +infinity (a plan beats it, a decline
 * loses to a plan). */
static int cmp_values(double mine, double base) {
  int c;
  if (isinf(mine) || isinf(base)) {
    c = mine < base ? -1 : mine > base ? 1 : 0;
  } else {
    double eps = 1e-9 * fmax(fabs(mine), fabs(base)) + 1e-12;
    c = mine < base - eps ? -1 : mine > base + eps ? 1 : 0;
  }
  /* Mutant 800: a loss is counted as a tie. */
  if (RS_MUTANT(800) && c > 0) c = 0;
  return c;
}

static void tally(rs_pf_result *r, int obj, int col, int c) {
  if (c < 0) r->win[obj][col]++;
  else if (c > 0) r->loss[obj][col]++;
  else r->tie[obj][col]++;
}

static void keep_worst(const rs_pf_opts *o, rs_pf_result *r, int obj, int64_t case_no, double mine, double best,
                       const char *layout, const char *mt, const char *bt) {
  double excess = mine - best;
  if (!(excess > 1e-9 * fmax(fabs(mine), fabs(best)))) return;
  int k = o->worst < RS_PF_WORST ? o->worst : RS_PF_WORST, n = r->nworst[obj];
  rs_pf_worst *w = r->worst[obj];
  int at = n;
  while (at > 0 && w[at - 1].excess < excess) at--;
  if (at >= k) return;
  if (n < k) n++;
  for (int i = n - 1; i > at; i--) w[i] = w[i - 1];
  rs_pf_worst x = {case_no, mine, best, excess, "", "", ""};
  snprintf(x.layout, sizeof x.layout, "%s", layout);
  snprintf(x.mine_trace, sizeof x.mine_trace, "%s", mt ? mt : "");
  snprintf(x.best_trace, sizeof x.best_trace, "%s", bt ? bt : "");
  w[at] = x;
  r->nworst[obj] = n;
}

/* The best of the baselines that planned the case on obj (-1: none); *counted: whether the "best"
 * column counts the case (a baseline planned it, or one found no path where the planner did). */
static int best_base(const rs_pf_opts *o, const pf_eval *e, int obj, int *counted) {
  int nb = rs_pf_nbase(o->kind), any_nopath = 0, best = -1;
  for (int b = 0; b < nb; b++) {
    any_nopath |= e->bhave[b] < 0;
    if (e->bhave[b] > 0 && (best < 0 || e->base[b][obj] < e->base[best][obj])) best = b;
  }
  *counted = best >= 0 || (e->have && any_nopath);
  return best;
}

/* The planner against the best baseline on obj: -1 better, 0 a tie, 1 worse, 2 not counted. */
static int vs_best(const rs_pf_opts *o, const pf_eval *e, int obj) {
  int counted, best = best_base(o, e, obj, &counted);
  if (!counted) return 2;
  return cmp_values(e->have ? e->mine[obj] : INFINITY, best < 0 ? INFINITY : e->base[best][obj]);
}

/* a scored case's traffic against the lower bound: 0 not measured, 1 above it, 2 at it, 3 bytes
 * where the bound is 0 */
static int lb_cell(const pf_eval *e) {
  if (!e->have || !e->lb_ok) return 0;
  if (e->lb == 0 && e->traffic > 0) return 3;
  double ratio = e->lb == 0 ? 1.0 : e->traffic / e->lb;
  return ratio <= 1.0 + 1e-12 ? 2 : 1;
}

/* One scored case: the planner's plan (or its decline) against every baseline and their best. A
 * plan beats a baseline that found no path; a decline loses to a baseline's plan; a baseline that
 * did not run (greedy on non-default shard orders, graph beyond the state-space bound) is not
 * counted. */
static void score(const rs_pf_opts *o, rs_pf_result *r, const pf_eval *e, int64_t case_no, const char *layout) {
  int nb = rs_pf_nbase(o->kind);
  for (int obj = 0; obj < rs_pf_nobj(o->kind); obj++) {
    double mine = e->have ? e->mine[obj] : INFINITY;
    for (int b = 0; b < nb; b++) {
      if (e->bhave[b] == 0 || (e->bhave[b] < 0 && !e->have)) continue;
      tally(r, obj, b, cmp_values(mine, e->bhave[b] > 0 ? e->base[b][obj] : INFINITY));
    }
    int counted, best = best_base(o, e, obj, &counted);
    if (!counted) continue;
    tally(r, obj, nb, vs_best(o, e, obj));
    if (e->have && best >= 0) {
      r->scored[obj]++;
      r->sum_mine[obj] += e->mine[obj];
      r->sum_best[obj] += e->base[best][obj];
      keep_worst(o, r, obj, case_no, e->mine[obj], e->base[best][obj], layout, e->mine_trace,
                 o->kind == RS_PF_P2P ? rs_pf_base_name(o->kind, best) : e->base_trace[best]);
    }
  }
  int lb = lb_cell(e);
  if (lb) {
    r->lb_cases++;
    if (lb == 3) {
      r->lb_inf++;
    } else {
      double ratio = e->lb == 0 ? 1.0 : e->traffic / e->lb;
      r->lb_ratio_sum += ratio;
      if (ratio > r->lb_ratio_max) r->lb_ratio_max = ratio;
      r->at_lb += lb == 2;
    }
  }
}

static void describe_case(const rs_case *c, char *buf, size_t cap) {
  char a[160], b[160];
  rs_format_sharding(&c->src, a, sizeof a);
  rs_format_sharding(&c->dst, b, sizeof b);
  size_t n = (size_t)snprintf(buf, cap, "mesh ");
  for (int i = 0; i < c->mesh.ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? "x" : "", (long long)c->mesh.size[i]);
  if (n < cap) n += (size_t)snprintf(buf + n, cap - n, "%s %s [", c->mesh.ndim ? "" : "()", rs_dtype_name(c->tensor.dtype));
  for (int d = 0; d < c->tensor.ndim && n < cap; d++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? "," : "", (long long)c->tensor.shape[d]);
  if (n < cap && snprintf(buf + n, cap - n, "] %s -> %s", a, b) < 0) buf[n] = 0;
}

static void describe_model(const rs_p2p_model *m, char *buf, size_t cap) {
  snprintf(buf, cap, "%lld params, world %d, seed %llu", (long long)m->nparams, (int)m->world,
           (unsigned long long)m->seed);
}

/* ---- one case of the campaign ---- */

/* Generate case i from the stream, check the planner on it and score it. RS_FAIL fills *why. */
static rs_outcome redistribute_case(rs_planner_host *h, const rs_pf_opts *o, rs_choices *ch, rs_case *c,
                                    pf_eval *e, rs_pf_fail *why, char *msg) {
  rs_gen_opts gen = run_gen(o);
  memset(e, 0, sizeof *e);
  if (rs_gen_case(ch, &gen, c) != RS_OK) return with_error(RS_SKIP, msg, MSG_CAP, "generator");
  c->enumeration = o->enumeration;
  rs_plan p;
  rs_outcome out = check_plan(h, c, &p, why, msg, MSG_CAP);
  if (out == RS_FAIL) return out;
  if (out == RS_PASS && !measure(c, &p, e->mine)) {
    e->have = 1;
    plan_trace(c, &p, e->mine_trace, sizeof e->mine_trace);
  }
  redistribute_baselines(c, e);
  if (e->have && !rs_sharding_has_partial(&c->src) && !rs_sharding_has_partial(&c->dst)) {
    int64_t lb;
    if (rs_traffic_lower_bound(&c->mesh, &c->tensor, &c->src, &c->dst, &lb) == RS_OK) {
      e->lb_ok = 1;
      e->lb = (double)lb;
      e->traffic = e->mine[RS_PF_TRAFFIC];
    }
  }
  return out;
}

static rs_outcome p2p_case(rs_planner_host *h, const rs_pf_opts *o, rs_choices *ch, rs_p2p_model *m, pf_eval *e,
                           rs_pf_fail *why, char *msg) {
  memset(e, 0, sizeof *e);
  if (rs_p2p_gen(ch, &o->p2p, m) != RS_OK) return with_error(RS_SKIP, msg, MSG_CAP, "generator");
  rs_p2p_plan p;
  rs_outcome out = check_p2p(h, m, &p, why, msg, MSG_CAP);
  if (out == RS_PASS) {
    e->have = 1;
    p2p_values(&p, e->mine);
    int64_t lb;
    if (rs_p2p_lower_bound(m, &lb) == RS_OK) {
      e->lb_ok = 1;
      e->lb = (double)lb;
      e->traffic = (double)p.bytes_sent;
    }
  }
  rs_p2p_plan_free(&p);
  if (out != RS_FAIL) p2p_baselines(m, e);
  return out;
}

/* ---- shrinking and saving ---- */

typedef struct pf_pred {
  rs_planner_host *h;
  const rs_pf_opts *o;
  rs_pf_fail want;
  rs_case *c;
  rs_p2p_model *m;
  pf_eval *e;
  char *msg;
} pf_pred;

static int still_fails(void *vctx, rs_choices *ch) {
  pf_pred *x = vctx;
  rs_pf_fail why = RS_PF_NFAIL;
  rs_outcome out;
  if (x->o->kind == RS_PF_P2P) {
    rs_p2p_model_free(x->m);
    memset(x->m, 0, sizeof *x->m);
    out = p2p_case(x->h, x->o, ch, x->m, x->e, &why, x->msg);
  } else {
    out = redistribute_case(x->h, x->o, ch, x->c, x->e, &why, x->msg);
  }
  return out == RS_FAIL && why == x->want;
}

static void one_line(char *s) { s[strcspn(s, "\n")] = 0; }

/* Write the shrunk case (with what failed and how) to the regress dir; path into r->fixture[f]. */
static void save_failure(const rs_pf_opts *o, rs_pf_result *r, rs_pf_fail f, const rs_case *c, const rs_p2p_model *m,
                         const char *msg) {
  char line[1024];
  snprintf(line, sizeof line, "%s", msg);
  one_line(line);
  char *text = NULL;
  if (o->kind == RS_PF_P2P) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "property", "fuzz_planner");
    cJSON_AddStringToObject(x, "failure", rs_pf_fail_name(f));
    cJSON_AddStringToObject(x, "message", line);
    char *extra = x ? cJSON_PrintUnformatted(x) : NULL;
    cJSON_Delete(x);
    if (extra && rs_p2p_model_to_json(m, extra, &text) != RS_OK) text = NULL;
    free(extra);
  } else {
    cJSON *root = rs__case_to_cjson(c);
    if (root) {
      cJSON_AddStringToObject(root, "property", "fuzz_planner");
      cJSON_AddStringToObject(root, "failure", rs_pf_fail_name(f));
      cJSON_AddStringToObject(root, "message", line);
      text = cJSON_Print(root);
      cJSON_Delete(root);
    }
  }
  if (!text) {
    snprintf(r->fixture[f], sizeof r->fixture[f], "(not written: out of memory)");
    return;
  }
  uint64_t hash = XXH3_64bits(text, strlen(text));
  snprintf(r->fixture[f], sizeof r->fixture[f], "%s/planner-%s-%s-%012llx.json", o->regress_dir,
           o->kind == RS_PF_P2P ? "p2p" : "redistribute", rs_pf_fail_name(f),
           (unsigned long long)(hash & 0xFFFFFFFFFFFFull));
  FILE *fp = NULL;
  if (rs__make_dirs(o->regress_dir) != RS_OK || !(fp = fopen(r->fixture[f], "w"))) {
    snprintf(r->fixture[f], sizeof r->fixture[f], "(not written: %s)", rs_last_error()[0] ? rs_last_error() : strerror(errno));
  } else {
    fputs(text, fp);
    fputc('\n', fp);
    if (fclose(fp) != 0) snprintf(r->fixture[f], sizeof r->fixture[f], "(not written: %s)", strerror(errno));
  }
  free(text);
}

void rs__pf_replay_args(const rs_pf_opts *o, const char *fixture, char *buf, size_t cap) {
  snprintf(buf, cap, "--planner '%s'%s%s --case %s", o->planner, o->kind == RS_PF_P2P ? " --kind p2p" : "",
           o->enumeration == RS_ENUM_PYTORCH ? " --enumeration pytorch" : "", fixture);
}

static void record_failure(rs_planner_host *h, const rs_pf_opts *o, rs_pf_result *r, rs_pf_fail f,
                           const rs_choices *ch, const char *first_msg) {
  rs_case *c = calloc(1, sizeof *c);
  rs_p2p_model m;
  memset(&m, 0, sizeof m);
  pf_eval *e = malloc(sizeof *e);
  char *msg = malloc(MSG_CAP);
  size_t n = ch->pos;
  uint64_t *v = malloc((n ? n : 1) * sizeof *v);
  if (!c || !e || !msg || !v) {
    snprintf(r->message[f], sizeof r->message[f], "%s", first_msg);
    one_line(r->message[f]);
    snprintf(r->fixture[f], sizeof r->fixture[f], "(not shrunk: out of memory)");
  } else {
  memcpy(v, ch->v, n * sizeof *v);
  pf_pred x = {h, o, f, c, &m, e, msg};
  int out = 0;
  int runs = rs_shrink_stream_budget(still_fails, &x, &v, &n, o->shrink_runs, o->shrink_seconds, &out);
  r->shrink_runs[f] = runs;
  r->shrink_out[f] = out;
  rs_choices rc;
  int ok = rs_choices_replay(&rc, v, n) == RS_OK;
  if (ok) {
    ok = still_fails(&x, &rc);
    rs_choices_free(&rc);
  }
  if (!ok) {
    r->shrink_lost[f] = 1;
    snprintf(msg, MSG_CAP, "%s (shrinking lost the failure: the saved case may pass)", first_msg);
  }
  snprintf(r->message[f], sizeof r->message[f], "%s", msg);
  one_line(r->message[f]);
  save_failure(o, r, f, c, &m, msg);
  {
    char layout[320];
    if (o->kind == RS_PF_P2P) describe_model(&m, layout, sizeof layout);
    else describe_case(c, layout, sizeof layout);
    char note[96];
    rs_shrink_budget_note(out, o->shrink_runs, o->shrink_seconds, note, sizeof note);
    printf("FAIL %s plan (shrunk in %d runs to %zu draws%s%s): %s\n  %s\n", rs_pf_fail_name(f), runs, n,
           note[0] ? "; " : "", note, layout, msg);
    char args[1024];
    rs__pf_replay_args(o, r->fixture[f], args, sizeof args);
    printf("  replay: reshard fuzz-planner %s\n", args);
    fflush(stdout);
  }
  }
  rs_p2p_model_free(&m);
  free(c);
  free(e);
  free(msg);
  free(v);
}

/* ---- the campaign on the runner (props/runner.h) ---- */

/* The runner's counters: per case 1 or 0 each, then per objective the planner against the best
 * baseline (win, tie, loss), the same cells as the score table's "best" column. */
enum { CNT_CASES = 0, CNT_PASSED, CNT_DECLINED, CNT_NOT_GENERATED, CNT_FAILED, CNT_CHECKED, CNT_LB_CASES, CNT_AT_LB,
       CNT_SCORE };
static const char *const CNT_NAMES[CNT_SCORE] = {"cases", "passed", "declined", "not_generated", "failed_cases",
                                                 "checked", "lower_bound_cases", "at_lower_bound"};
static const char *const SCORE_NAMES[2][RS_PF_NOBJ * 3] = {
    {"vs_best_steps_win", "vs_best_steps_tie", "vs_best_steps_loss", "vs_best_seed-cost_win", "vs_best_seed-cost_tie",
     "vs_best_seed-cost_loss", "vs_best_pytorch-cost_win", "vs_best_pytorch-cost_tie", "vs_best_pytorch-cost_loss",
     "vs_best_traffic_win", "vs_best_traffic_tie", "vs_best_traffic_loss"},
    {"vs_best_traffic_win", "vs_best_traffic_tie", "vs_best_traffic_loss", "vs_best_max-sender_win",
     "vs_best_max-sender_tie", "vs_best_max-sender_loss"}};
/* the runner's properties: the failure kinds, named as the JUnit testcases */
static const char *const PROP_NAMES[RS_PF_NFAIL] = {"planner_answers", "plans_legal", "plans_match_oracle"};
enum { GATE_DECLINES = 0, GATE_CHECKED = 1 };
/* "checked something" as a share gate: checked / cases >= this, i.e. at least one plan checked */
#define CHECKED_MIN_SHARE 1e-300

/* What the parent needs of one case beyond the runner's sums (rs_run_case.extra): its score. */
typedef struct pf_rec {
  int32_t out, why;
  pf_eval e;
  char layout[320];
} pf_rec;
_Static_assert(sizeof(pf_rec) <= RS_RUN_EXTRA, "fuzz-planner's per-case record must fit rs_run_case.extra");

typedef struct pf_ctx {
  rs_planner_host *h;
  const rs_pf_opts *o;
  rs_pf_result *r; /* the parent's: the score table, added in index order */
  rs_case *c;
  pf_eval *e;
  char *msg;
  pf_rec *rec;
} pf_ctx;

/* Case `index`: drawn from rs_hash3(seed, index, 0) (the same case for every worker count, and gen's
 * case `index`), planned by this process's planner, checked, measured. */
static rs_status pf_eval_case(void *vx, int64_t index, rs_run_case *rc) {
  pf_ctx *x = vx;
  const rs_pf_opts *o = x->o;
  pf_rec *rec = x->rec;
  /* test hooks of tests/jobs_fuzz_planner.sh (mutation builds only, props/MUTANTS.md): case 38
   * crashes, hangs or runs out of memory, so the runner's reports of each are seen */
  if (index == 37 && RS_MUTANT(993)) raise(SIGSEGV);
  if (index == 37 && RS_MUTANT(994))
    for (;;) pause();
  if (index == 37 && RS_MUTANT(995)) {
    rc->oom = 1;
    snprintf(rc->msg[0], RS_RUN_MSG, "planner_answers: out of memory (planted)");
    return RS_OK;
  }
  memset(rec, 0, sizeof *rec);
  x->msg[0] = 0;
  rs_choices ch;
  rs_choices_seed(&ch, rs_hash3(o->seed, (uint64_t)index, 0));
  rs_p2p_model m;
  memset(&m, 0, sizeof m);
  rs_pf_fail why = RS_PF_NFAIL;
  rs_outcome out;
  if (o->kind == RS_PF_P2P) {
    out = p2p_case(x->h, o, &ch, &m, x->e, &why, x->msg);
    describe_model(&m, rec->layout, sizeof rec->layout);
  } else {
    out = redistribute_case(x->h, o, &ch, x->c, x->e, &why, x->msg);
    describe_case(x->c, rec->layout, sizeof rec->layout);
  }
  int generated = !(out == RS_SKIP && strncmp(x->msg, "generator:", 10) == 0);
  if (o->kind == RS_PF_REDISTRIBUTE && generated) {
    int hit[RS_FEATURES_MAX];
    rs__features_of_case(x->c, hit);
    for (int f = 0; f < rs_feature_count(); f++) rc->feature[f] = (uint16_t)hit[f];
  }
  rc->counter[CNT_CASES] = 1;
  if (out == RS_FAIL && why < RS_PF_NFAIL) {
    /* the checks before the failing one passed (an illegal plan was an answer), later ones not run */
    for (int k = 0; k < (int)why; k++) rc->out[k] = RS_RUN_PASS;
    rc->out[why] = RS_RUN_FAIL;
    snprintf(rc->msg[why], RS_RUN_MSG, "%s", x->msg);
    rc->counter[CNT_FAILED] = rc->counter[CNT_CHECKED] = 1;
  } else {
    if (out == RS_PASS) {
      for (int k = 0; k < RS_PF_NFAIL; k++) rc->out[k] = RS_RUN_PASS;
      rc->counter[CNT_PASSED] = rc->counter[CNT_CHECKED] = 1;
    } else if (x->e->have == 0 && !generated) {
      rc->counter[CNT_NOT_GENERATED] = 1;
    } else {
      for (int k = 0; k < RS_PF_NFAIL; k++) rc->out[k] = RS_RUN_SKIP;
      rc->counter[CNT_DECLINED] = 1;
    }
    for (int obj = 0; obj < rs_pf_nobj(o->kind); obj++) {
      int v = vs_best(o, x->e, obj);
      if (v != 2) rc->counter[CNT_SCORE + 3 * obj + v + 1]++;
    }
    int lb = lb_cell(x->e);
    rc->counter[CNT_LB_CASES] = lb != 0;
    rc->counter[CNT_AT_LB] = lb == 2;
  }
  rec->out = out;
  rec->why = why;
  rec->e = *x->e;
  memcpy(rc->extra, rec, sizeof *rec);
  rc->extra_len = sizeof *rec;
  rs_p2p_model_free(&m);
  rs_choices_free(&ch);
  return RS_OK;
}

/* In the parent, in index order: the case's score into the table (wins/ties/losses, sums, worst). */
static void pf_add(void *vx, int64_t index, const rs_run_case *rc) {
  pf_ctx *x = vx;
  if (rc->extra_len != sizeof *x->rec) return;
  memcpy(x->rec, rc->extra, sizeof *x->rec);
  if (x->rec->out == RS_FAIL && x->rec->why < RS_PF_NFAIL) return;
  score(x->o, x->r, &x->rec->e, index + 1, x->rec->layout);
}

/* A forked worker: its own planner (an exec planner's own child), then the caller's hook. */
static rs_status pf_worker_init(void *vx, int w) {
  pf_ctx *x = vx;
  rs_status st = rs_planner_host_worker_start(x->h);
  if (st == RS_OK && x->o->worker_init) st = x->o->worker_init(x->o->worker_ctx, w);
  return st;
}

static void pf_worker_exit(void *vx) {
  pf_ctx *x = vx;
  if (x->o->worker_exit) x->o->worker_exit(x->o->worker_ctx);
  rs_planner_host_worker_stop(x->h);
}

static void pf_ops(const rs_pf_opts *o, pf_ctx *x, rs_run_ops *ops) {
  memset(ops, 0, sizeof *ops);
  ops->ctx = x;
  ops->eval = pf_eval_case;
  ops->add = pf_add;
  ops->worker_init = pf_worker_init;
  ops->worker_exit = pf_worker_exit;
  ops->nprops = RS_PF_NFAIL;
  ops->nfeatures = o->kind == RS_PF_REDISTRIBUTE ? rs_feature_count() : 0;
  ops->ncounters = CNT_SCORE + 3 * rs_pf_nobj(o->kind);
}

static void pf_run_opts(const rs_pf_opts *o, int jobs, rs_run_opts *ro) {
  memset(ro, 0, sizeof *ro);
  ro->verb = o->kind == RS_PF_P2P                  ? "fuzz-planner --kind p2p"
             : o->enumeration == RS_ENUM_PYTORCH ? "fuzz-planner --enumeration pytorch"
                                                 : "fuzz-planner";
  ro->seed = o->seed;
  ro->cases = o->cases;
  ro->seconds = o->seconds;
  ro->jobs = jobs;
  ro->shard_k = o->shard_k;
  ro->shard_n = o->shard_n;
  ro->case_timeout = o->case_timeout;
  ro->progress = !o->quiet;
  ro->dist = o->dist;
}

/* The names of what fuzz-planner counts, and its gates: the decline share (--max-decline-share)
 * and "checked something", judged on the sums (again by report merge). */
static void pf_names(const rs_pf_opts *o, rs_run_names *nm) {
  memset(nm, 0, sizeof *nm);
  for (int k = 0; k < RS_PF_NFAIL; k++) {
    nm->prop[k] = PROP_NAMES[k];
    nm->prop_on[k] = 1;
  }
  if (o->kind == RS_PF_REDISTRIBUTE) {
    rs_gen_opts g = run_gen(o);
    for (int f = 0; f < rs_feature_count(); f++) {
      nm->feature[f] = rs_feature_name(f);
      nm->rate[f] = rs__feature_rate(&g, f);
    }
  }
  nm->judge_from = RS_PF_FEATURE_MIN_CASES;
  /* Mutant 803: fuzz-planner's coverage gate is never judged. */
  if (RS_MUTANT(803)) nm->judge_from = (int64_t)1 << 50;
  for (int c = 0; c < CNT_SCORE; c++) nm->counter[c] = CNT_NAMES[c];
  for (int c = 0; c < 3 * rs_pf_nobj(o->kind); c++) nm->counter[CNT_SCORE + c] = SCORE_NAMES[o->kind == RS_PF_P2P][c];
  nm->gate[GATE_DECLINES] = (rs_run_gate){"decline_share", CNT_DECLINED, CNT_CASES, o->max_decline_share, 0, 1};
  nm->gate[GATE_CHECKED] = (rs_run_gate){"checked_some", CNT_CHECKED, CNT_CASES, CHECKED_MIN_SHARE, 1, 1};
  nm->ngates = 2;
}

cJSON *rs__pf_runner_json(const rs_pf_opts *o, const rs_pf_result *r) {
  pf_ctx x = {.o = o};
  rs_run_opts ro;
  rs_run_ops ops;
  rs_run_names nm;
  pf_run_opts(o, r->jobs, &ro);
  pf_ops(o, &x, &ops);
  pf_names(o, &nm);
  rs_run_failure_note notes[RS_RUN_PROPS] = {{0}};
  char replay[RS_PF_NFAIL][1100];
  for (int k = 0; k < RS_PF_NFAIL; k++) {
    if (!r->run.fail[k]) continue;
    char args[1024];
    rs__pf_replay_args(o, r->fixture[k], args, sizeof args);
    snprintf(replay[k], sizeof replay[k], "reshard fuzz-planner %s", args);
    notes[k] = (rs_run_failure_note){r->message[k], r->fixture[k], replay[k]};
  }
  return rs_run_json(&ro, &ops, &nm, &r->run, notes);
}

/* The run's own verdicts on the runner's sums: feature coverage (redistribute: props' table and
 * gate, judged from RS_PF_FEATURE_MIN_CASES cases), nothing checked (every case declined or not
 * generated) and declines over --max-decline-share (the two share gates). Each counts as one
 * failure. */
static void pf_verdicts(const rs_pf_opts *o, const rs_run_ops *ops, const rs_run_names *nm, rs_pf_result *r) {
  int64_t min[RS_RUN_FEATURES] = {0};
  int ngf = 0;
  const char *gname[RS_RUN_GATES];
  r->features_missing = rs_run_judge(nm, ops, &r->run, min, &ngf, gname);
  rs_gen_opts g = run_gen(o);
  for (int f = 0; f < ops->nfeatures && f < RS_FEATURES_MAX; f++) {
    r->feature_required[f] = rs__feature_required(&g, f);
    r->feature_min[f] = min[f];
  }
  for (int i = 0; i < ngf; i++) {
    r->nothing_checked |= strcmp(gname[i], nm->gate[GATE_CHECKED].name) == 0;
    r->decline_over |= strcmp(gname[i], nm->gate[GATE_DECLINES].name) == 0;
  }
  r->failed += (r->features_missing != 0) + r->nothing_checked + r->decline_over;
  if ((r->features_missing || r->nothing_checked || r->decline_over) && !r->first_failure_case)
    r->first_failure_case = r->cases;
}

/* Shrinks, saves and prints the first failure of each kind, here in the parent: the case is drawn
 * again from its index, so the shrunk case does not depend on --jobs. */
static void shrink_failures(rs_planner_host *h, const rs_pf_opts *o, rs_pf_result *r, rs_case *c) {
  const rs_run_result *rr = &r->run;
  int done[RS_PF_NFAIL] = {0};
  for (int k; (k = rs_run_next_failure(rr, RS_PF_NFAIL, done)) >= 0;) {
    done[k] = 1;
    rs_choices ch;
    rs_choices_seed(&ch, rs_hash3(o->seed, (uint64_t)rr->first_fail[k], 0));
    if (o->kind == RS_PF_P2P) {
      rs_p2p_model m;
      memset(&m, 0, sizeof m);
      if (rs_p2p_gen(&ch, &o->p2p, &m) != RS_OK) rs_clear_error();
      rs_p2p_model_free(&m);
    } else {
      rs_gen_opts g = run_gen(o);
      if (rs_gen_case(&ch, &g, c) != RS_OK) rs_clear_error();
    }
    char first[RS_RUN_MSG]; /* a copy: the result it came from is written while shrinking */
    snprintf(first, sizeof first, "%s", rr->first_msg[k]);
    record_failure(h, o, r, (rs_pf_fail)k, &ch, first);
    rs_choices_free(&ch);
  }
}

/* Workers: --jobs, at most as many as the planner may run at once (its max_instances). */
static int pf_jobs(rs_planner_host *h, const rs_pf_opts *o) {
  int jobs = o->jobs > 1 ? o->jobs : 1;
  int64_t most = rs_planner_host_max_instances(h);
  if (jobs > 1 && most > 0 && jobs > most) {
    printf("note: planner %s runs at most %lld instance(s) at once (max_instances): --jobs %d runs %lld worker(s)\n",
           rs_planner_host_name(h), (long long)most, jobs, (long long)most);
    fflush(stdout);
    jobs = (int)most;
  }
  return jobs;
}

/* The campaign with its buffers (rs_pf_run): the runner, then shrinking and the verdicts. */
static rs_status pf_campaign(pf_ctx *x, rs_pf_result *r) {
  rs_planner_host *h = x->h;
  const rs_pf_opts *o = x->o;
  rs_run_opts ro;
  rs_run_ops ops;
  rs_run_names nm;
  pf_run_opts(o, pf_jobs(h, o), &ro);
  pf_ops(o, x, &ops);
  pf_names(o, &nm);
  rs_run_result *rr = &r->run;
  rs_status st = rs_run(&ro, &ops, rr);
  r->jobs = rr->jobs;
  r->cases = rr->cases;
  r->passed = rr->counter[CNT_PASSED];
  r->declined = rr->counter[CNT_DECLINED];
  r->skipped = rr->counter[CNT_NOT_GENERATED];
  r->failed_cases = rr->counter[CNT_FAILED];
  for (int k = 0; k < RS_PF_NFAIL; k++) r->fail[k] = rr->fail[k];
  for (int f = 0; f < ops.nfeatures && f < RS_FEATURES_MAX; f++) r->feature[f] = rr->feature[f];
  r->failed = rr->failed_props;
  r->first_failure_case = rr->first_failure >= 0 ? rr->first_failure + 1 : 0;
  r->seconds = rr->seconds;
  if (st != RS_OK || rr->follower) return st; /* a follower rank reports nothing (runner.h) */
  shrink_failures(h, o, r, x->c);
  if (rr->crashed) {
    r->failed++;
    if (!r->first_failure_case || rr->crash_index + 1 < r->first_failure_case) r->first_failure_case = rr->crash_index + 1;
    rs_run_print_crash(rr, (unsigned long long)o->seed);
  }
  pf_verdicts(o, &ops, &nm, r);
  return RS_OK;
}

rs_status rs_pf_run(rs_planner_host *h, const rs_pf_opts *o, rs_pf_result *r) {
  memset(r, 0, sizeof *r);
  int need = o->kind == RS_PF_P2P ? RS_PLANNER_CAP_P2P : RS_PLANNER_CAP_PLAN;
  if (!(rs_planner_host_caps(h) & need))
    return rs_fail(RS_ERR_INVALID, "--planner %s: no %s capability (--kind %s)", o->planner,
                   o->kind == RS_PF_P2P ? "p2p_plan" : "plan", o->kind == RS_PF_P2P ? "p2p" : "redistribute");
  pf_ctx x = {.h = h, .o = o, .r = r};
  x.c = malloc(sizeof *x.c);
  x.e = malloc(sizeof *x.e);
  x.msg = malloc(MSG_CAP);
  x.rec = malloc(sizeof *x.rec);
  rs_status st = x.c && x.e && x.msg && x.rec ? pf_campaign(&x, r) : rs_fail(RS_ERR_NOMEM, "fuzz-planner: out of memory");
  free(x.c);
  free(x.e);
  free(x.msg);
  free(x.rec);
  return st;
}

rs_status rs_pf_replay(rs_planner_host *h, const rs_pf_opts *o, const char *path, int *failed, char *msg,
                       size_t cap) {
  *failed = 0;
  rs_pf_fail why = RS_PF_NFAIL;
  rs_outcome out;
  if (o->kind == RS_PF_P2P) {
    rs_p2p_model m;
    rs_status st = rs_p2p_model_load(path, &m);
    if (st) return st;
    rs_p2p_plan p;
    out = check_p2p(h, &m, &p, &why, msg, cap);
    rs_p2p_plan_free(&p);
    rs_p2p_model_free(&m);
  } else {
    rs_case c;
    rs_status st = rs_case_from_file(path, &c);
    if (st) return st;
    if (o->enumeration == RS_ENUM_PYTORCH) c.enumeration = RS_ENUM_PYTORCH;
    rs_plan p;
    out = check_plan(h, &c, &p, &why, msg, cap);
    if (out == RS_PASS) {
      char tr[1024];
      plan_trace(&c, &p, tr, sizeof tr);
      snprintf(msg, cap, "plan %s", tr);
    }
  }
  if (out == RS_SKIP) *failed = 2;
  if (out == RS_FAIL) {
    *failed = 1;
    size_t n = strlen(msg);
    char tmp[64];
    snprintf(tmp, sizeof tmp, " [%s plan]", rs_pf_fail_name(why));
    if (n + strlen(tmp) < cap) memcpy(msg + n, tmp, strlen(tmp) + 1);
  }
  return RS_OK;
}
