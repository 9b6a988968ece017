/* p2p_props.c - the properties of cross-config resharding and their campaign: plans checked against
 * SPEC 10 (each destination element once, from a holder, task ids), ref and opt results against the
 * oracle bit for bit (MXFP8 included), opt's traffic against the lower bound. A failure is shrunk
 * through the choice stream and saved as a model file that `reshard p2p run` replays. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "core/numflag.h"
#include "props/p2p.h"
#include "props/report.h"
#include "core/mutant.h"
#ifdef RS_HAVE_OPT
#include "reshard/copy_service.h"
#include "reshard/opt.h"
#endif

static const char *NAMES[RS_P2P_PROP_COUNT] = {"p2p_ref_plan", "p2p_ref_oracle", "p2p_opt_plan", "p2p_opt_lb",
                                               "p2p_opt_oracle"};

const char *rs_p2p_prop_name(rs_p2p_prop p) { return p < RS_P2P_PROP_COUNT ? NAMES[p] : "?"; }

static rs_outcome fail(char *msg, size_t cap, const char *what) {
  snprintf(msg, cap, "%s: %s", what, rs_last_error());
  return RS_FAIL;
}

static int same_plan(const rs_p2p_model *m, const rs_p2p_plan *a, const rs_p2p_plan *b) {
  if (a->n != b->n || a->ncoords != b->ncoords) return 0;
  for (int64_t i = 0; i < a->n; ++i)
    if (a->x[i].task != b->x[i].task || a->x[i].param != b->x[i].param || a->x[i].src != b->x[i].src ||
        a->x[i].dst != b->x[i].dst)
      return 0;
  (void)m;
  return !a->ncoords || !memcmp(a->coords, b->coords, (size_t)a->ncoords * sizeof(int64_t));
}

static rs_outcome ref_oracle(const rs_p2p_model *m, char *msg, size_t cap) {
  rs_p2p_plan plan;
  rs_p2p_locals src, got, want;
  rs_outcome o = RS_PASS;
  if (rs_p2p_ref_plan(m, &plan)) return fail(msg, cap, "ref plan");
  if (rs_p2p_source_locals(m, -1, &src)) {
    rs_p2p_plan_free(&plan);
    return fail(msg, cap, "source");
  }
  if (rs_p2p_ref_execute(m, &plan, &src, &got)) o = fail(msg, cap, "ref execute");
  else {
    if (rs_p2p_oracle_expected(m, -1, &want)) o = fail(msg, cap, "oracle");
    else {
      if (rs_p2p_compare(m, &want, &got)) o = fail(msg, cap, "ref != oracle");
      rs_p2p_locals_free(&want);
    }
    rs_p2p_locals_free(&got);
  }
  rs_p2p_locals_free(&src);
  rs_p2p_plan_free(&plan);
  return o;
}

#ifdef RS_HAVE_OPT
/* Under mpirun a process holds only its own rank's parameters (SPEC 10): no local tensor of another
 * rank may be allocated in `l`. */
static int only_own(const rs_p2p_model *m, const rs_p2p_locals *l, int32_t me, char *msg, size_t cap) {
  const rs_p2p_config *c = &m->cfg[l->which];
  for (int64_t p = 0; p < l->nparams; ++p)
    for (int64_t q = 0; q < l->npos[p]; ++q)
      if (l->loc[p][q].data && c->mesh[c->place[p].mesh].ranks[q] != me) {
        snprintf(msg, cap, "process of rank %d holds %s's %s tensor of rank %d", me, m->param[p].name,
                 l->which == RS_P2P_SRC ? "source" : "destination", c->mesh[c->place[p].mesh].ranks[q]);
        return 0;
      }
  return 1;
}

/* One rank's plan costs as much as the whole plan (the load balance is replayed to keep the whole
 * plan's senders and task ids), so checking every rank of a large world is quadratic: a 65,536-rank
 * source mesh with one 4-element parameter took minutes. A world of at most RANK_CHECK_ALL ranks
 * (every generated case) has every rank checked; a larger one a fixed sample of RANK_CHECK_ALL:
 * the ends of the plan's transfers (first and last senders and receivers) and ranks spread evenly
 * over the world (idle ones included), so the property stays linear in the whole. */
#define RANK_CHECK_ALL 64
static int32_t ranks_to_check(const rs_p2p_model *m, const rs_p2p_plan *all, int32_t *out) {
  if (m->world <= RANK_CHECK_ALL) {
    for (int32_t r = 0; r < m->world; ++r) out[r] = r;
    return m->world;
  }
  int32_t n = 0;
  for (int64_t i = 0; i < all->n && i < RANK_CHECK_ALL / 8; ++i) {
    out[n++] = all->x[i].src;
    out[n++] = all->x[all->n - 1 - i].dst;
  }
  for (int32_t k = 0; n < RANK_CHECK_ALL; ++k)
    out[n++] = (int32_t)((int64_t)k * m->world / (RANK_CHECK_ALL - RANK_CHECK_ALL / 4) % m->world);
  return n;
}

/* rs_p2p_opt_plan_rank(r) is the whole plan's transfers that r sends or receives, in order, with
 * the whole plan's figures. */
static int rank_plans_agree(const rs_p2p_model *m, const rs_p2p_plan *all, char *msg, size_t cap) {
  int32_t pick[RANK_CHECK_ALL];
  int32_t npick = ranks_to_check(m, all, pick);
  if (RS_MUTANT(704)) npick = m->world; /* planted: every rank re-planned again (quadratic) */
  for (int32_t i = 0; i < npick; ++i) {
    int32_t r = RS_MUTANT(704) ? i : pick[i];
    rs_p2p_plan pr;
    if (rs_p2p_opt_plan_rank(m, r, &pr)) {
      snprintf(msg, cap, "opt plan for rank %d: %s", r, rs_last_error());
      return 0;
    }
    int64_t k = 0;
    int ok = pr.bytes_sent == all->bytes_sent && pr.bytes_local == all->bytes_local &&
             pr.max_sender_bytes == all->max_sender_bytes && pr.senders == all->senders;
    for (int64_t i = 0; i < all->n && ok; ++i) {
      const rs_p2p_xfer *a = &all->x[i];
      if (a->src != r && a->dst != r) continue;
      int nd = m->param[a->param].t.ndim;
      const rs_p2p_xfer *b = k < pr.n ? &pr.x[k] : NULL;
      ok = b && a->task == b->task && a->param == b->param && a->src == b->src && a->dst == b->dst &&
           (!nd || !memcmp(all->coords + a->box, pr.coords + b->box, (size_t)(2 * nd) * sizeof(int64_t)));
      k++;
    }
    ok = ok && k == pr.n;
    rs_p2p_plan_free(&pr);
    if (!ok) {
      snprintf(msg, cap, "opt plan for rank %d is not the whole plan's transfers of rank %d", r, r);
      return 0;
    }
  }
  return 1;
}

/* Scribble over every played destination byte, so that a second execute into the same buffers
 * must write all of them again (opt reuses an earlier output's buffers). */
static void scribble(const rs_p2p_model *m, rs_p2p_locals *l) {
  for (int64_t p = 0; p < l->nparams; ++p)
    for (int64_t q = 0; q < l->npos[p]; ++q) {
      rs_p2p_local *x = &l->loc[p][q];
      if (!x->data) continue;
      int es = m->param[p].transform == RS_XFORM_MXFP8 ? 1 : rs_dtype_size(m->param[p].t.dtype);
      memset(x->data, 0xA5, (size_t)(x->numel * es));
      if (x->scale) memset(x->scale, 0x5A, (size_t)(x->numel / 32));
    }
}

/* opt's execute into destinations the caller owns: the buffers are those of `mine` (allocated and
 * poisoned here), handed over through a borrowed layout; after the call they must equal the
 * oracle's and the layout must still point at them. */
static rs_outcome opt_into_owned(const rs_p2p_model *m, const rs_p2p_plan *plan, rs_copy_service *cs, int32_t me,
                                 const rs_p2p_locals *src, const rs_p2p_locals *want, char *msg, size_t cap) {
  rs_p2p_locals mine, own;
  rs_outcome o = RS_PASS;
  memset(&own, 0, sizeof own);
  if (rs_p2p_locals_alloc(m, RS_P2P_DST, me, &mine)) return fail(msg, cap, "caller-owned destinations");
  if (rs_p2p_locals_layout(m, RS_P2P_DST, me, &own)) o = fail(msg, cap, "rs_p2p_locals_layout");
  for (int64_t p = 0; o == RS_PASS && p < m->nparams; ++p)
    for (int64_t q = 0; q < mine.npos[p]; ++q) {
      if (own.loc[p][q].numel != mine.loc[p][q].numel)
        o = (snprintf(msg, cap, "rs_p2p_locals_layout: %s position %lld has numel %lld, the destination %lld",
                      m->param[p].name, (long long)q, (long long)own.loc[p][q].numel,
                      (long long)mine.loc[p][q].numel), RS_FAIL);
      own.loc[p][q].data = mine.loc[p][q].data;
      own.loc[p][q].scale = mine.loc[p][q].scale;
    }
  rs_p2p_exec_stats xs;
  if (o == RS_PASS && rs_p2p_opt_execute(m, plan, cs, me, src, &own, &xs))
    o = fail(msg, cap, "opt execute (into caller-owned destinations)");
  for (int64_t p = 0; o == RS_PASS && p < m->nparams; ++p)
    for (int64_t q = 0; q < mine.npos[p] && o == RS_PASS; ++q)
      if (own.loc[p][q].data != mine.loc[p][q].data)
        o = (snprintf(msg, cap, "opt execute replaced the caller's destination of %s position %lld",
                      m->param[p].name, (long long)q), RS_FAIL);
  if (o == RS_PASS && rs_p2p_compare(m, want, &mine)) o = fail(msg, cap, "opt != oracle (into caller-owned destinations)");
  rs_p2p_locals_free(&own); /* the structure only (borrowed); the buffers are mine's */
  rs_p2p_locals_free(&mine);
  return o;
}

static rs_outcome opt_oracle(const rs_p2p_env *env, const rs_p2p_model *m, char *msg, size_t cap) {
  rs_world *w = env->world;
  int32_t me = env->distributed ? rs_world_rank(w) : -1;
  rs_p2p_plan plan;
  rs_p2p_locals src, got, want;
  rs_copy_service *cs = NULL;
  rs_outcome o = RS_PASS;
  rs_p2p_exec_stats xs;
  memset(&xs, 0, sizeof xs);
  memset(&src, 0, sizeof src);
  memset(&got, 0, sizeof got);
  memset(&want, 0, sizeof want);
  const char *svc = env->copy_service ? env->copy_service : rs_world_transport(w);
  memset(&plan, 0, sizeof plan);
  /* one process of a distributed run plans only its own transfers; every failure below still
   * reaches rs_world_agree, which every process must call */
  if (me >= 0 ? rs_p2p_opt_plan_rank(m, me, &plan) : rs_p2p_opt_plan(m, &plan)) o = fail(msg, cap, "opt plan");
  else if (rs_copy_service_open(svc, w, &cs)) o = fail(msg, cap, "copy service");
  else if (rs_p2p_source_locals(m, me, &src)) o = fail(msg, cap, "source");
  else if (rs_p2p_opt_execute(m, &plan, cs, me, &src, &got, NULL)) o = fail(msg, cap, "opt execute");
  else if (rs_p2p_oracle_expected(m, me, &want)) o = fail(msg, cap, "oracle");
  else if (rs_p2p_compare(m, &want, &got)) o = fail(msg, cap, "opt != oracle");
  /* every process runs the second execute or none does: one that skipped it after a failure of its
   * own would leave its peers' messages unreceived, and they would match the next case's receives */
  int first_bad = o == RS_FAIL;
  if (env->distributed) rs_world_agree(w, &first_bad);
  if (first_bad && o != RS_FAIL) o = (snprintf(msg, cap, "opt != oracle on another process"), RS_FAIL);
  if (o == RS_PASS) {
    if (scribble(m, &got), rs_p2p_opt_execute(m, &plan, cs, me, &src, &got, &xs))
      o = fail(msg, cap, "opt execute (again, into the first call's buffers)");
    else if (!xs.reused) o = (snprintf(msg, cap, "opt execute did not reuse the first call's buffers"), RS_FAIL);
    else if (rs_p2p_compare(m, &want, &got)) o = fail(msg, cap, "opt != oracle (again, into the first call's buffers)");
    else if (me >= 0 && (!only_own(m, &src, me, msg, cap) || !only_own(m, &got, me, msg, cap))) o = RS_FAIL;
  }
  if (env->distributed) {
    int bad = o == RS_FAIL;
    rs_world_agree(w, &bad);
    if (bad && o != RS_FAIL) {
      snprintf(msg, cap, "opt != oracle on another process");
      o = RS_FAIL;
    }
  }
  /* a third execute into caller-owned destinations (rs_p2p_locals_layout, buffers of this
   * property's own, poisoned): written in place, every element, nothing allocated */
  if (o == RS_PASS) o = opt_into_owned(m, &plan, cs, me, &src, &want, msg, cap);
  if (env->distributed) {
    int bad = o == RS_FAIL;
    rs_world_agree(w, &bad);
    if (bad && o != RS_FAIL) {
      snprintf(msg, cap, "opt != oracle on another process (caller-owned destinations)");
      o = RS_FAIL;
    }
  }
  rs_copy_service_close(cs);
  rs_p2p_locals_free(&src);
  rs_p2p_locals_free(&got);
  rs_p2p_locals_free(&want);
  rs_p2p_plan_free(&plan);
  return o;
}
#endif

rs_outcome rs_p2p_prop_run(rs_p2p_prop p, const rs_p2p_env *env, const rs_p2p_model *m, char *msg, size_t cap) {
  msg[0] = 0;
  if (env->backend) return env->backend(env->backend_ctx, m, msg, cap);
  switch (p) {
    case RS_P2P_PROP_REF_PLAN: {
      rs_p2p_plan plan;
      if (rs_p2p_ref_plan(m, &plan)) return fail(msg, cap, "ref plan");
      rs_outcome o = rs_p2p_plan_verify(m, &plan) ? fail(msg, cap, "ref plan") : RS_PASS;
      rs_p2p_plan_free(&plan);
      return o;
    }
    case RS_P2P_PROP_REF_ORACLE:
      return ref_oracle(m, msg, cap);
#ifdef RS_HAVE_OPT
    case RS_P2P_PROP_OPT_PLAN: {
      rs_p2p_plan a, b;
      if (rs_p2p_opt_plan(m, &a)) return fail(msg, cap, "opt plan");
      rs_outcome o = rs_p2p_plan_verify(m, &a) ? fail(msg, cap, "opt plan") : RS_PASS;
      if (o == RS_PASS) {
        if (rs_p2p_opt_plan(m, &b)) o = fail(msg, cap, "opt plan");
        else {
          if (!same_plan(m, &a, &b)) o = (snprintf(msg, cap, "opt plan: two runs differ"), RS_FAIL);
          else if (!rank_plans_agree(m, &a, msg, cap)) o = RS_FAIL;
          rs_p2p_plan_free(&b);
        }
      }
      rs_p2p_plan_free(&a);
      return o;
    }
    case RS_P2P_PROP_OPT_LB: {
      rs_p2p_plan a;
      int64_t lb;
      if (rs_p2p_opt_plan(m, &a)) return fail(msg, cap, "opt plan");
      rs_outcome o = RS_PASS;
      if (rs_p2p_lower_bound(m, &lb)) o = fail(msg, cap, "lower bound");
      else if (a.bytes_sent != lb) {
        snprintf(msg, cap, "opt traffic %lld bytes != lower bound %lld", (long long)a.bytes_sent, (long long)lb);
        o = RS_FAIL;
      }
      rs_p2p_plan_free(&a);
      return o;
    }
    case RS_P2P_PROP_OPT_ORACLE:
      return opt_oracle(env, m, msg, cap);
#endif
    default:
      snprintf(msg, cap, "needs opt/");
      return RS_SKIP;
  }
}

/* ---- campaign ---- */

typedef struct pred_ctx {
  const rs_p2p_campaign *o;
  rs_p2p_prop prop;
} pred_ctx;

static int still_fails(void *ctx, rs_choices *ch) {
  pred_ctx *c = ctx;
  rs_p2p_model m;
  char msg[512];
  if (rs_p2p_gen(ch, &c->o->gen, &m)) return 0;
  int bad = rs_p2p_prop_run(c->prop, &c->o->env, &m, msg, sizeof msg) == RS_FAIL;
  rs_p2p_model_free(&m);
  return bad;
}

static int applies(const rs_p2p_campaign *o, rs_p2p_prop p) {
  if (o->env.distributed || o->env.backend) return p == RS_P2P_PROP_OPT_ORACLE;
  if (o->env.impl == RS_IMPL_REF) return p <= RS_P2P_PROP_REF_ORACLE;
  return 1;
}

/* The name a saved failure carries: what ran. A backend under test (reshard conform) runs the
 * oracle property against itself, which conform calls backend_p2p_oracle, not opt's p2p_opt_oracle. */
static const char *saved_name(const rs_p2p_campaign *o, rs_p2p_prop p) {
  return o->env.backend && p == RS_P2P_PROP_OPT_ORACLE ? "backend_p2p_oracle" : rs_p2p_prop_name(p);
}

static void save(const rs_p2p_campaign *o, rs_p2p_prop p, const rs_p2p_model *m, const char *msg,
                 rs_p2p_campaign_result *r) {
  if (!o->regress_dir) return;
  cJSON *x = cJSON_CreateObject();
  cJSON_AddStringToObject(x, "property", saved_name(o, p));
  cJSON_AddStringToObject(x, "message", msg);
  char *extra = cJSON_PrintUnformatted(x), *text = NULL;
  cJSON *tj = NULL;
  if (extra && o->save_templates && m->arch_set && rs_p2p_model_to_template_json(m, &text) == RS_OK &&
      (tj = cJSON_Parse(text))) {
    free(text);
    cJSON_AddStringToObject(tj, "property", saved_name(o, p));
    cJSON_AddStringToObject(tj, "message", msg);
    text = cJSON_Print(tj);
    cJSON_Delete(tj);
  }
  cJSON_Delete(x);
  if (extra && (text || !rs_p2p_model_to_json(m, extra, &text))) {
    uint64_t h = 1469598103934665603ull;
    for (const char *s = text; *s; ++s) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    snprintf(r->fixture[p], sizeof r->fixture[p], "%s/%s-%016llx.json", o->regress_dir, saved_name(o, p),
             (unsigned long long)h);
    /* no shell: a directory name with a quote in it is a name, never a command */
    if (rs__make_dirs(o->regress_dir) == RS_OK) {
      FILE *f = fopen(r->fixture[p], "w");
      if (f) {
        fputs(text, f);
        fputc('\n', f);
        fclose(f);
      }
    }
  }
  free(extra);
  free(text);
}

/* ---- the runner's side of the campaign (props/runner.h) ---- */

typedef struct p2p_ctx {
  const rs_p2p_campaign *o;
} p2p_ctx;

/* What the campaign's models held, summed over its cases (figures of the report, no gate): a
 * generator that drifts shows here, and a draw that depends on anything but the seed and the
 * index changes them between worker counts. */
enum { CNT_TEMPLATE = 0, CNT_PARAMS, CNT_MXFP8, CNT_EMPTY, CNT_RANKS, CNT_COUNT };
static const char *const CNT_NAMES[CNT_COUNT] = {"template_models", "parameters", "mxfp8_parameters",
                                                 "empty_parameters", "world_ranks"};

static void count_model(const rs_p2p_model *m, int64_t *cnt) {
  cnt[CNT_TEMPLATE] += m->arch_set != 0;
  cnt[CNT_PARAMS] += m->nparams;
  cnt[CNT_RANKS] += m->world;
  for (int64_t p = 0; p < m->nparams; ++p) {
    int64_t numel = 1;
    for (int d = 0; d < m->param[p].t.ndim; ++d) numel *= m->param[p].t.shape[d];
    cnt[CNT_MXFP8] += m->param[p].transform == RS_XFORM_MXFP8;
    cnt[CNT_EMPTY] += numel == 0;
  }
}

/* Case i's choice stream: the seed and the index only (the draw fixtures were saved with). */
static void seed_case(rs_choices *ch, uint64_t seed, int64_t index) {
  rs_choices_seed(ch, seed * 0x9E3779B97F4A7C15ull + (uint64_t)index);
}

/* Case `index`: every property that applies, on the model the index draws. */
static rs_status p2p_eval(void *vx, int64_t index, rs_run_case *rc) {
  const rs_p2p_campaign *o = ((p2p_ctx *)vx)->o;
  /* test hooks of tests/jobs_p2p.sh (mutation builds only, as check's in props/campaign.c): case 38
   * crashes, hangs or runs out of memory, so the runner's reports of each are seen */
  if (index == 37 && RS_MUTANT(993)) raise(SIGSEGV);
  if (index == 37 && RS_MUTANT(994))
    for (;;) pause();
  if (index == 37 && RS_MUTANT(995)) {
    int p = RS_P2P_PROP_COUNT - 1; /* p2p_opt_oracle applies to every campaign but --impl ref's */
    if (!applies(o, (rs_p2p_prop)p)) p = RS_P2P_PROP_REF_PLAN;
    rc->oom = p + 1;
    snprintf(rc->msg[p], RS_RUN_MSG, "%s: out of memory (planted)", rs_p2p_prop_name((rs_p2p_prop)p));
    return RS_OK;
  }
  rs_choices ch;
  seed_case(&ch, o->seed, index);
  rs_p2p_model m;
  rs_status st = rs_p2p_gen(&ch, &o->gen, &m);
  rs_choices_free(&ch);
  if (st) return rs_fail_prefix(st, "generator: ");
  count_model(&m, rc->counter);
  for (int p = 0; p < RS_P2P_PROP_COUNT; ++p) {
    /* a property that failed keeps running on every case (its counts cover the whole campaign, as
     * the redistribute campaign's do); only its first failure is shrunk and saved */
    if (!applies(o, (rs_p2p_prop)p)) continue;
    char msg[512];
    rs_clear_error();
    rs_outcome out = rs_p2p_prop_run((rs_p2p_prop)p, &o->env, &m, msg, sizeof msg);
#ifdef RS_HAVE_OPT
    /* a stalled or dead peer (opt's --timeout) is no case's failure: stop, shrink nothing */
    if (rs_opt_transport_failure()) {
      rs_p2p_model_free(&m);
      return rs_fail(RS_ERR_TIMEOUT, "%s", rs_opt_transport_failure());
    }
    if (o->env.distributed) out = rs_prop_agree_oom(o->env.world, out, msg, sizeof msg);
#endif
    if (rs_outcome_is_oom(out)) { /* no verdict: the runner stops here, nothing is shrunk */
      rc->oom = p + 1;
      snprintf(rc->msg[p], RS_RUN_MSG, "%s", msg);
      break;
    }
    rc->out[p] = out == RS_PASS ? RS_RUN_PASS : out == RS_SKIP ? RS_RUN_SKIP : RS_RUN_FAIL;
    if (out == RS_FAIL) snprintf(rc->msg[p], RS_RUN_MSG, "%s", msg);
  }
  rs_p2p_model_free(&m);
  return RS_OK;
}

/* under mpirun every process must run the same cases: stop when any process's clock says so */
static int p2p_agree_stop(void *vx, int stop) {
#ifdef RS_HAVE_OPT
  const rs_p2p_campaign *o = ((p2p_ctx *)vx)->o;
  if (o->env.distributed) rs_world_agree(o->env.world, &stop);
#else
  (void)vx;
#endif
  return stop;
}

static rs_status p2p_worker_init(void *vx, int w) {
  const rs_p2p_campaign *o = ((p2p_ctx *)vx)->o;
  return o->worker_init ? o->worker_init(o->worker_ctx, w) : RS_OK;
}

static void p2p_worker_exit(void *vx) {
  const rs_p2p_campaign *o = ((p2p_ctx *)vx)->o;
  if (o->worker_exit) o->worker_exit(o->worker_ctx);
}

static void p2p_ops(p2p_ctx *x, rs_run_ops *ops) {
  memset(ops, 0, sizeof *ops);
  ops->ctx = x;
  ops->eval = p2p_eval;
  ops->worker_init = p2p_worker_init;
  ops->worker_exit = p2p_worker_exit;
  ops->nprops = RS_P2P_PROP_COUNT;
  ops->ncounters = CNT_COUNT;
}

static const char *p2p_verb(const rs_p2p_campaign *o) {
  if (o->env.backend) return "conform p2p";
  if (o->env.distributed) return "p2p check --transport mpi";
  return o->env.impl == RS_IMPL_REF ? "p2p check --impl ref" : "p2p check";
}

static void p2p_run_opts(const rs_p2p_campaign *o, p2p_ctx *x, rs_run_opts *ro) {
  memset(ro, 0, sizeof *ro);
  ro->verb = p2p_verb(o);
  ro->seed = o->seed;
  ro->cases = o->cases;
  ro->seconds = o->seconds;
  ro->jobs = o->jobs > 1 && !o->env.distributed ? o->jobs : 1; /* MPI: one process per rank */
  ro->shard_k = o->shard_k;
  ro->shard_n = o->shard_n;
  ro->case_timeout = o->case_timeout;
  ro->progress = o->print && !o->quiet;
  ro->dist = o->dist;
  if (o->env.distributed) {
    ro->agree_stop = p2p_agree_stop;
    ro->stop_ctx = x;
  }
}

static void p2p_names(const rs_p2p_campaign *o, rs_run_names *nm) {
  memset(nm, 0, sizeof *nm);
  for (int p = 0; p < RS_P2P_PROP_COUNT; p++) {
    nm->prop[p] = saved_name(o, (rs_p2p_prop)p);
    nm->prop_on[p] = applies(o, (rs_p2p_prop)p);
  }
  nm->judge_from = RS_FEATURE_MIN_CASES;
  for (int c = 0; c < CNT_COUNT; c++) nm->counter[c] = CNT_NAMES[c];
}

cJSON *rs_p2p_runner_json(const rs_p2p_campaign *o, const rs_p2p_campaign_result *r) {
  p2p_ctx x = {o};
  rs_run_opts ro;
  rs_run_ops ops;
  rs_run_names nm;
  p2p_run_opts(o, &x, &ro);
  p2p_ops(&x, &ops);
  p2p_names(o, &nm);
  rs_run_failure_note notes[RS_RUN_PROPS] = {{0}};
  char replay[RS_P2P_PROP_COUNT][600];
  for (int p = 0; p < RS_P2P_PROP_COUNT; p++) {
    if (!r->fail[p]) continue;
    int saved = r->fixture[p][0] != 0;
    snprintf(replay[p], sizeof replay[p], "reshard p2p run %s --impl %s", r->fixture[p],
             p <= RS_P2P_PROP_REF_ORACLE ? "ref" : "opt");
    notes[p] = (rs_run_failure_note){r->message[p], saved ? r->fixture[p] : NULL,
                                     saved && !o->env.backend ? replay[p] : NULL};
  }
  return rs_run_json(&ro, &ops, &nm, &r->run, notes);
}

/* the runner's message of a failure, as the report's until a shrunk one replaces it */
static void copy_msg(char *dst, size_t cap, const char *src) {
  size_t l = strnlen(src, cap - 1);
  memmove(dst, src, l);
  dst[l] = 0;
}

/* Shrinks property p's failure at case `index` (drawn again here, in the calling process, so the
 * shrunk model does not depend on --jobs), then reports and saves the smallest failing model. */
static void shrink_failure(const rs_p2p_campaign *o, rs_p2p_prop p, int64_t index, rs_p2p_campaign_result *r) {
  rs_choices ch;
  rs_p2p_model m;
  char msg[512];
  seed_case(&ch, o->seed, index);
  if (rs_p2p_gen(&ch, &o->gen, &m)) { /* drew a model in the worker: cannot fail here but for memory */
    copy_msg(r->message[p], sizeof r->message[p], r->run.first_msg[p]);
    rs_choices_free(&ch);
    return;
  }
  rs_p2p_model_free(&m);
  uint64_t *v = malloc((ch.pos ? ch.pos : 1) * sizeof *v);
  size_t n = ch.pos;
  copy_msg(r->message[p], sizeof r->message[p], r->run.first_msg[p]);
  if (v) {
    memcpy(v, ch.v, n * sizeof *v);
    pred_ctx pc = {o, p};
    int max = o->shrink_runs > 0 ? o->shrink_runs : 2000, shrink_out = 0;
    char note[96];
    rs_shrink_stream_budget(still_fails, &pc, &v, &n, max, o->shrink_seconds, &shrink_out);
    rs_shrink_budget_note(shrink_out, max, o->shrink_seconds, note, sizeof note);
    rs_choices rc;
    rs_p2p_model sm;
    if (!rs_choices_replay(&rc, v, n) && !rs_p2p_gen(&rc, &o->gen, &sm)) {
      if (rs_p2p_prop_run(p, &o->env, &sm, msg, sizeof msg) != RS_FAIL) snprintf(msg, sizeof msg, "(flaky after shrinking)");
      snprintf(r->message[p], sizeof r->message[p], "%s", msg);
      if (note[0] && strlen(r->message[p]) + strlen(note) + 4 < sizeof r->message[p])
        strcat(strcat(strcat(r->message[p], " ("), note), ")");
      if (o->print) save(o, p, &sm, msg, r);
      rs_p2p_model_free(&sm);
    }
    rs_choices_free(&rc);
    free(v);
  }
  rs_choices_free(&ch);
}

rs_status rs_p2p_campaign_run(const rs_p2p_campaign *o, rs_p2p_campaign_result *r) {
  memset(r, 0, sizeof *r);
  if (o->cases <= 0 && !rs__seconds_ok(o->seconds)) /* NaN or inf would never end */
    return rs_fail(RS_ERR_INVALID, "seconds: %g, expected 0 < T <= %.0f (or a case count)", o->seconds, RS_MAX_SECONDS);
  p2p_ctx x = {o};
  rs_run_opts ro;
  rs_run_ops ops;
  p2p_run_opts(o, &x, &ro);
  p2p_ops(&x, &ops);
  rs_run_result *rr = &r->run;
  rs_status st = rs_run(&ro, &ops, rr);
#ifdef RS_HAVE_OPT
  /* a peer that died while the ranks agreed on a timed stop ended the loop: its failure stopped it */
  if (st == RS_OK && rs_opt_transport_failure()) st = rs_fail(RS_ERR_TIMEOUT, "%s", rs_opt_transport_failure());
#endif
  r->cases = rr->cases;
  r->seconds = rr->seconds;
  for (int p = 0; p < RS_P2P_PROP_COUNT; p++) {
    r->pass[p] = rr->pass[p];
    r->fail[p] = rr->fail[p];
    r->skip[p] = rr->skip[p];
    if (rr->fail[p]) r->caught_at[p] = rr->first_fail[p] + 1;
  }
  r->failed = rr->failed_props;
  if (st == RS_ERR_NOMEM && rr->oom_prop >= 0)
    return rs_campaign_oom(rs_p2p_prop_name((rs_p2p_prop)rr->oom_prop), (long long)rr->oom_index + 1, rr->oom_msg);
  if (st != RS_OK || rr->follower) return st; /* a follower rank reports nothing (runner.h) */
  int done[RS_P2P_PROP_COUNT] = {0};
  for (int p; (p = rs_run_next_failure(rr, RS_P2P_PROP_COUNT, done)) >= 0;) {
    done[p] = 1;
    shrink_failure(o, (rs_p2p_prop)p, rr->first_fail[p], r);
#ifdef RS_HAVE_OPT
    if (rs_opt_transport_failure()) return rs_fail(RS_ERR_TIMEOUT, "%s", rs_opt_transport_failure());
#endif
  }
  if (rr->crashed) r->failed++;
  return RS_OK;
}
