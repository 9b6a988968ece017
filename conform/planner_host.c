/* planner_host.c - loads a planner (a dlopen'd plug-in of reshard/planner.h, or a child process
 * through the JSON-lines protocol, conform/planner_exec.c) and turns its answers into reshard's own
 * plan types, refusing answers that are not plans at all. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "conform/planner_host.h"
#include "conform/planner_exec.h"
#include "core/elf_check.h"

struct rs_planner_host {
  void *dl; /* dlopen handle of a plug-in; NULL for a child process */
  const rs_planner_vtable *vt;
  void *self;
  int exec;    /* a child process (planner_exec.c) */
  int stopped; /* worker_stop destroyed it */
  char name[128];
};

/* A member the plug-in's vtable covers (it may be older than this header) and filled in. */
#define VT_HAS(vt, member)                                                                  \
  ((vt)->size >= offsetof(rs_planner_vtable, member) + sizeof((vt)->member) && (vt)->member != NULL)

static const char *plug_error(const rs_planner_host *h) {
  const char *e = VT_HAS(h->vt, last_error) ? h->vt->last_error(h->self) : NULL;
  return e && e[0] ? e : "(no message)";
}

static rs_status check_vtable(const char *spec, const rs_planner_vtable *vt) {
  if (!vt) return rs_fail(RS_ERR_INVALID, "--planner %s: rs_planner_create gave no vtable", spec);
  if (vt->size < offsetof(rs_planner_vtable, destroy) + sizeof vt->destroy)
    return rs_fail(RS_ERR_INVALID, "--planner %s: vtable size %u is smaller than ABI version 1's (%zu)", spec,
                   vt->size, offsetof(rs_planner_vtable, destroy) + sizeof vt->destroy);
  if (vt->abi_version != RS_PLANNER_ABI_VERSION)
    return rs_fail(RS_ERR_INVALID, "--planner %s: vtable abi_version %u, this harness speaks %d", spec,
                   vt->abi_version, RS_PLANNER_ABI_VERSION);
  if ((vt->plan && !vt->free_plan) || (vt->plan_p2p && !vt->free_p2p_plan))
    return rs_fail(RS_ERR_INVALID, "--planner %s: a plan function without its free function", spec);
  if (!vt->plan && !vt->plan_p2p)
    return rs_fail(RS_ERR_INVALID, "--planner %s: the vtable has neither plan nor plan_p2p", spec);
  return RS_OK;
}

static rs_status open_library(const char *spec, rs_planner_host *h) {
  /* a bare name is a file here, not a search of the library path; a cut-short file or a link is
   * refused before dlopen maps it (core/elf_check.h) */
  char path[4096];
  if (snprintf(path, sizeof path, "%s%s", strchr(spec, '/') ? "" : "./", spec) >= (int)sizeof path)
    return rs_fail(RS_ERR_INVALID, "--planner: path longer than %zu bytes", sizeof path - 1);
  if (rs_elf_dlopen("--planner", path, RTLD_NOW | RTLD_LOCAL, &h->dl) != RS_OK)
    return rs_fail(RS_ERR_INVALID, "%s", rs_last_error());
  rs_planner_abi_version_fn ver = (rs_planner_abi_version_fn)dlsym(h->dl, "rs_planner_abi_version");
  rs_planner_create_fn mk = (rs_planner_create_fn)dlsym(h->dl, "rs_planner_create");
  if (!ver || !mk)
    return rs_fail(RS_ERR_INVALID, "--planner %s: not a planner plug-in (rs_planner_abi_version and "
                   "rs_planner_create are not both exported)", spec);
  int v = ver();
  if (v != RS_PLANNER_ABI_VERSION)
    return rs_fail(RS_ERR_INVALID, "--planner %s: ABI version %d, this harness speaks %d", spec, v,
                   RS_PLANNER_ABI_VERSION);
  const rs_planner_vtable *vt = NULL;
  if (mk(&vt, &h->self) != 0) return rs_fail(RS_ERR_INVALID, "--planner %s: rs_planner_create failed", spec);
  rs_status st = check_vtable(spec, vt);
  if (st == RS_OK) h->vt = vt;
  else if (vt && vt->size >= offsetof(rs_planner_vtable, destroy) + sizeof vt->destroy && vt->destroy)
    vt->destroy(h->self);
  return st;
}

rs_status rs_planner_host_open(const char *spec, double timeout_s, rs_planner_host **out) {
  *out = NULL;
  if (!spec || !spec[0]) return rs_fail(RS_ERR_INVALID, "--planner: empty");
  rs_planner_host *h = calloc(1, sizeof *h);
  if (!h) return rs_fail(RS_ERR_NOMEM, "--planner: out of memory");
  rs_status st;
  if (strncmp(spec, "exec:", 5) == 0) {
    h->exec = 1;
    st = rs__planner_exec_open(spec + 5, timeout_s, &h->vt, &h->self);
    if (st == RS_OK && (st = check_vtable(spec, h->vt)) != RS_OK) h->vt->destroy(h->self);
  } else {
    st = open_library(spec, h);
  }
  if (st != RS_OK) {
    if (h->dl) dlclose(h->dl);
    free(h);
    return st;
  }
  snprintf(h->name, sizeof h->name, "%s", h->vt->name && h->vt->name[0] ? h->vt->name : spec);
  *out = h;
  return RS_OK;
}

void rs_planner_host_close(rs_planner_host *h) {
  if (!h) return;
  if (h->vt && h->vt->destroy && !h->stopped) h->vt->destroy(h->self);
  if (h->dl) dlclose(h->dl);
  free(h);
}

const char *rs_planner_host_name(const rs_planner_host *h) { return h->name; }

rs_status rs_planner_host_worker_start(rs_planner_host *h) {
  return h->exec ? rs__planner_exec_reopen(h->self) : RS_OK;
}

void rs_planner_host_worker_stop(rs_planner_host *h) {
  if (!h->exec || h->stopped) return;
  h->vt->destroy(h->self);
  h->stopped = 1;
}

int64_t rs_planner_host_max_instances(const rs_planner_host *h) {
  return h->exec ? rs__planner_exec_max_instances(h->self) : 0;
}

int rs_planner_host_caps(const rs_planner_host *h) {
  return (VT_HAS(h->vt, plan) ? RS_PLANNER_CAP_PLAN : 0) | (VT_HAS(h->vt, plan_p2p) ? RS_PLANNER_CAP_P2P : 0);
}

static rs_status say(rs_status st, char *msg, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static rs_status say(rs_status st, char *msg, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, cap, fmt, ap);
  va_end(ap);
  return st;
}

/* What a call that did not succeed means to the harness: declines stay declines, any other code is
 * the planner's failure (a plug-in may return a code outside rs_status); msg says which. */
static rs_status not_planned(const rs_planner_host *h, int code, char *msg, size_t cap) {
  if (code == RS_OK) return say(RS_ERR_TRANSPORT, msg, cap, "%s: answered success without a plan", h->name);
  rs_status st = code == RS_ERR_UNSUPPORTED || code == RS_ERR_NOPATH || code == RS_ERR_NOMEM ? (rs_status)code
                                                                                          : RS_ERR_TRANSPORT;
  return say(st, msg, cap, "%s %s: %s", h->name,
             st == RS_ERR_UNSUPPORTED || st == RS_ERR_NOPATH ? "declined" : "failed", plug_error(h));
}

static int placement_ok(rs_placement p, int tensor_ndim) {
  if (p.kind == RS_REPLICATE) return 1;
  if (p.kind == RS_SHARD) return p.dim >= -tensor_ndim && p.dim < tensor_ndim;
  return p.kind == RS_PARTIAL && p.op >= RS_SUM && p.op <= RS_MAX;
}

rs_status rs_planner_host_plan(rs_planner_host *h, const rs_case *c, rs_plan *out, char *msg, size_t cap) {
  memset(out, 0, sizeof *out);
  out->enumeration = c->enumeration;
  if (!VT_HAS(h->vt, plan)) return say(RS_ERR_UNSUPPORTED, msg, cap, "%s: no same-mesh planner", h->name);
  rs_planner_problem pb = {sizeof pb, &c->mesh, &c->tensor, &c->src, &c->dst, (int32_t)c->enumeration};
  rs_planner_steps *ps = NULL;
  int code = h->vt->plan(h->self, &pb, &ps);
  if (code != RS_OK || !ps) return not_planned(h, code, msg, cap);
  rs_status st = RS_OK;
  if (ps->nsteps < 0 || ps->nsteps > RS_MAX_STEPS || (ps->nsteps > 0 && !ps->step)) {
    st = say(RS_ERR_ILLEGAL, msg, cap, "%s: a plan of %d steps (at most %d)", h->name, (int)ps->nsteps,
             RS_MAX_STEPS);
  } else {
    for (int i = 0; i < ps->nsteps && st == RS_OK; i++) {
      rs_step s = ps->step[i];
      if (!placement_ok(s.from, c->tensor.ndim) || !placement_ok(s.to, c->tensor.ndim))
        st = say(RS_ERR_ILLEGAL, msg, cap, "%s: step %d: a placement that is not R, S(d) of the tensor or P(op)",
                 h->name, i);
      else
        out->step[out->nsteps++] = s;
    }
  }
  h->vt->free_plan(h->self, ps);
  return st;
}

rs_status rs_planner_host_plan_p2p(rs_planner_host *h, const rs_p2p_model *m, rs_p2p_plan *out, char *msg,
                                   size_t cap) {
  if (!VT_HAS(h->vt, plan_p2p)) return say(RS_ERR_UNSUPPORTED, msg, cap, "%s: no P2P planner", h->name);
  rs_p2p_plan *pp = NULL;
  int code = h->vt->plan_p2p(h->self, m, &pp);
  if (code != RS_OK || !pp) return not_planned(h, code, msg, cap);
  rs_status st = RS_OK;
  if (pp->n < 0 || (pp->n > 0 && !pp->x) || pp->ncoords < 0 || (pp->ncoords > 0 && !pp->coords))
    st = say(RS_ERR_ILLEGAL, msg, cap, "%s: a P2P plan with %lld transfers and %lld coordinates", h->name,
             (long long)pp->n, (long long)pp->ncoords);
  for (int64_t i = 0; st == RS_OK && i < pp->n; i++) {
    const rs_p2p_xfer *x = &pp->x[i];
    if (x->param < 0 || x->param >= m->nparams) {
      st = say(RS_ERR_ILLEGAL, msg, cap, "%s: transfer %lld: parameter %d of %lld", h->name, (long long)i,
               (int)x->param, (long long)m->nparams);
      break;
    }
    int nd = m->param[x->param].t.ndim;
    if (x->box < 0 || x->box > pp->ncoords - 2 * (int64_t)nd) {
      st = say(RS_ERR_ILLEGAL, msg, cap, "%s: transfer %lld: box %lld outside the %lld coordinates", h->name,
               (long long)i, (long long)x->box, (long long)pp->ncoords);
      break;
    }
    const int64_t *b = pp->coords + x->box;
    st = rs_p2p_plan_add(out, x->task, x->param, x->src, x->dst, nd, b, b + nd);
    if (st) say(st, msg, cap, "copying the P2P plan: %s", rs_last_error());
  }
  h->vt->free_p2p_plan(h->self, pp);
  return st;
}
