/* p2p_props.c - the properties of cross-config resharding and their campaign: plans checked against
 * SPEC 10 (each destination element once, from a holder, task ids), ref and opt results against the
 * oracle bit for bit (MXFP8 included), opt's traffic against the lower bound. A failure is shrunk
 * through the choice stream and saved as a model file that `reshard p2p run` replays. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

rs_status rs_p2p_campaign_run(const rs_p2p_campaign *o, rs_p2p_campaign_result *r) {
  memset(r, 0, sizeof *r);
  if (o->cases <= 0 && !rs__seconds_ok(o->seconds)) /* NaN or inf would never end */
    return rs_fail(RS_ERR_INVALID, "seconds: %g, expected 0 < T <= %.0f (or a case count)", o->seconds, RS_MAX_SECONDS);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int done[RS_P2P_PROP_COUNT] = {0};
  for (int64_t i = 0;; ++i) {
    if (o->cases > 0 && i >= o->cases) break;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double el = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    int stop = o->cases <= 0 && el >= o->seconds;
#ifdef RS_HAVE_OPT
    /* under mpirun every process must run the same cases: stop when any process's clock says so */
    if (o->cases <= 0 && o->env.distributed) rs_world_agree(o->env.world, &stop);
#endif
    if (stop) break;
    rs_choices ch;
    rs_choices_seed(&ch, o->seed * 0x9E3779B97F4A7C15ull + (uint64_t)i);
    rs_p2p_model m;
    rs_status st = rs_p2p_gen(&ch, &o->gen, &m);
    if (st) {
      rs_choices_free(&ch);
      return rs_fail_prefix(st, "generator: ");
    }
    r->cases++;
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
        rs_choices_free(&ch);
        return rs_fail(RS_ERR_TIMEOUT, "%s", rs_opt_transport_failure());
      }
      if (o->env.distributed) out = rs_prop_agree_oom(o->env.world, out, msg, sizeof msg);
#endif
      if (rs_outcome_is_oom(out)) {
        rs_p2p_model_free(&m);
        rs_choices_free(&ch);
        return rs_campaign_oom(rs_p2p_prop_name((rs_p2p_prop)p), (long long)i + 1, msg);
      }
      if (out == RS_PASS) r->pass[p]++;
      else if (out == RS_SKIP) r->skip[p]++;
      else if (done[p])
        r->fail[p]++;
      else {
        r->fail[p]++;
        r->failed++;
        r->caught_at[p] = i + 1;
        done[p] = 1;
        /* shrink the stream, then report and save the smallest failing model */
        uint64_t *v = malloc((ch.pos ? ch.pos : 1) * sizeof *v);
        size_t n = ch.pos;
        if (v) {
          memcpy(v, ch.v, n * sizeof *v);
          pred_ctx pc = {o, (rs_p2p_prop)p};
          int max = o->shrink_runs > 0 ? o->shrink_runs : 2000, shrink_out = 0;
          char note[96];
          rs_shrink_stream_budget(still_fails, &pc, &v, &n, max, o->shrink_seconds, &shrink_out);
          rs_shrink_budget_note(shrink_out, max, o->shrink_seconds, note, sizeof note);
          rs_choices rc;
          rs_p2p_model sm;
          if (!rs_choices_replay(&rc, v, n) && !rs_p2p_gen(&rc, &o->gen, &sm)) {
            if (rs_p2p_prop_run((rs_p2p_prop)p, &o->env, &sm, msg, sizeof msg) != RS_FAIL)
              snprintf(msg, sizeof msg, "(flaky after shrinking)");
            snprintf(r->message[p], sizeof r->message[p], "%s", msg);
            if (note[0] && strlen(r->message[p]) + strlen(note) + 4 < sizeof r->message[p])
              strcat(strcat(strcat(r->message[p], " ("), note), ")");
            if (o->print) save(o, (rs_p2p_prop)p, &sm, msg, r);
            rs_p2p_model_free(&sm);
          }
          rs_choices_free(&rc);
          free(v);
        }
      }
    }
    rs_p2p_model_free(&m);
    rs_choices_free(&ch);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  r->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return RS_OK;
}
