/* backend.c - the backend under test: a plug-in (dlopen of reshard/backend.h's rs_backend_entry,
 * after the ELF check) or a process (conform/proto.c), behind one set of calls, so every suite
 * driver is written once and both kinds of backend see the same requests. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <dlfcn.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include "conform/backend_internal.h"
#include "core/elf_check.h"
#include "core/json.h"
#include "core/mutant.h"



unsigned rs_cf_backend_caps(const rs_cf_backend *b) { return b->caps; }
int64_t rs_cf_backend_templates_sent(const rs_cf_backend *b) { return atomic_load(&b->sh->templates_sent); }
const char *rs_cf_backend_name(const rs_cf_backend *b) { return b->name; }
const char *rs_cf_backend_spec(const rs_cf_backend *b) { return b->spec; }
int rs_cf_backend_ckpt_reshard(const rs_cf_backend *b) { return b->ckpt_reshard; }

static const struct {
  const char *name;
  unsigned cap;
} CAPS[] = {{"redistribute", RS_CF_REDISTRIBUTE}, {"p2p_plan", RS_CF_P2P_PLAN},
            {"p2p_execute", RS_CF_P2P_EXECUTE}, {"ckpt", RS_CF_CKPT}, {"tp", RS_CF_TP},
            {"p2p_any_plan", RS_CF_P2P_ANY_PLAN}, {"p2p_templates", RS_CF_P2P_TEMPLATES}};

static rs_status open_exec(rs_cf_backend *b, const char *cmd, double timeout) {
  rs_status st = rs_proto_open(cmd, "backend", timeout, &b->proto);
  /* a backend that cannot even say hello is the user's input: exit 2, before any case */
  if (st) return rs_fail(RS_ERR_INVALID, "--backend exec:%s: %s", cmd, rs_last_error());
  snprintf(b->name, sizeof b->name, "%s", rs_proto_name(b->proto));
  for (size_t i = 0; i < sizeof CAPS / sizeof CAPS[0]; i++)
    if (rs_proto_has(b->proto, CAPS[i].name)) b->caps |= CAPS[i].cap;
  if (!(b->caps & RS_CF_P2P_EXECUTE)) b->caps &= ~(unsigned)RS_CF_P2P_ANY_PLAN; /* a flag of p2p_execute */
  const char *f = rs_proto_hello_str(b->proto, "ckpt_format");
  b->ckpt_reshard = f && strcmp(f, "reshard") == 0;
  /* "max_instances": k (k >= 1): at most k children of this command may run at once (a fixed
   * port, file or device); absent or 0: any number (--jobs N starts N) */
  if (rs_proto_hello_int(b->proto, "max_instances", 0, INT32_MAX, &b->max_instances) < 0)
    return rs_fail(RS_ERR_INVALID, "--backend exec:%s: %s (max_instances: an integer, 0 or absent for any number)", cmd,
                   rs_last_error());
  return RS_OK;
}

static rs_status open_plugin(rs_cf_backend *b, const char *spec) {
  char *path = strdup(spec);
  if (!path) return rs_fail(RS_ERR_NOMEM, "--backend: out of memory");
  char *q = strchr(path, '?');
  const char *options = "";
  if (q) *q = 0, options = q + 1;
  if (!(b->options = strdup(options))) {
    free(path);
    return rs_fail(RS_ERR_NOMEM, "--backend: out of memory");
  }
  /* a bare name would be searched on the library path: always load the file named; the file
   * checked is the file mapped (core/elf_check.h) */
  char *load = path;
  char dotted[4096];
  if (!strchr(path, '/')) {
    snprintf(dotted, sizeof dotted, "./%s", path);
    load = dotted;
  }
  rs_status st = rs_elf_dlopen("--backend", load, RTLD_NOW | RTLD_LOCAL, &b->dl);
  if (st) {
    free(path);
    return rs_fail(RS_ERR_INVALID, "%s", rs_last_error());
  }
  rs_backend_entry_fn entry;
  *(void **)&entry = dlsym(b->dl, "rs_backend_entry");
  const rs_backend *got = entry ? entry() : NULL;
  size_t least = offsetof(rs_backend, redistribute);
  if (!entry) st = rs_fail(RS_ERR_INVALID, "--backend: '%s': exports no rs_backend_entry (see reshard/backend.h)", path);
  else if (!got) st = rs_fail(RS_ERR_INVALID, "--backend: '%s': rs_backend_entry returned NULL", path);
  else if (got->struct_size < least)
    st = rs_fail(RS_ERR_INVALID, "--backend: '%s': struct_size %u is smaller than the smallest rs_backend (%zu)", path,
                 got->struct_size, least);
  else if (got->abi_version != RS_BACKEND_ABI_VERSION)
    st = rs_fail(RS_ERR_INVALID, "--backend: '%s': abi_version %u, this harness speaks %d", path, got->abi_version,
                 RS_BACKEND_ABI_VERSION);
  if (st) {
    free(path);
    return st;
  }
  memset(&b->abi, 0, sizeof b->abi);
  memcpy(&b->abi, got, got->struct_size < sizeof b->abi ? got->struct_size : sizeof b->abi);
  snprintf(b->name, sizeof b->name, "%s", b->abi.name ? b->abi.name : "(unnamed)");
  if (b->abi.redistribute) b->caps |= RS_CF_REDISTRIBUTE;
  if (b->abi.p2p_plan) b->caps |= RS_CF_P2P_PLAN;
  if (b->abi.p2p_execute) b->caps |= RS_CF_P2P_EXECUTE;
  if (b->abi.ckpt_save && b->abi.ckpt_load) b->caps |= RS_CF_CKPT;
  if (b->abi.tp_forward) b->caps |= RS_CF_TP;
  /* 0 when struct_size stops before it (zeroed above): an older plug-in runs its own plan only */
  if (b->abi.p2p_execute && (b->abi.p2p_flags & RS_BACKEND_P2P_ANY_PLAN)) b->caps |= RS_CF_P2P_ANY_PLAN;
  if ((b->abi.p2p_plan || b->abi.p2p_execute) && (b->abi.p2p_flags & RS_BACKEND_P2P_TEMPLATES))
    b->caps |= RS_CF_P2P_TEMPLATES;
  b->ckpt_reshard = b->abi.ckpt_format == RS_BACKEND_CKPT_RESHARD;
  b->max_instances = b->abi.max_instances; /* 0 when struct_size stops before it: any number */
  if (b->abi.create) {
    char msg[1024] = "";
    if (b->abi.create(options, &b->self, msg, sizeof msg) != RS_BACKEND_OK)
      st = rs_fail(RS_ERR_INVALID, "--backend: '%s': create failed: %s", path, msg[0] ? msg : "(no message)");
  }
  free(path);
  return st;
}

rs_status rs_cf_backend_open(const char *spec, double timeout, rs_cf_backend **out) {
  *out = NULL;
  if (!spec || !spec[0]) return rs_fail(RS_ERR_INVALID, "--backend: empty (a plug-in .so or exec:CMD)");
  rs_cf_backend *b = calloc(1, sizeof *b);
  if (!b || !(b->spec = strdup(spec))) {
    free(b);
    return rs_fail(RS_ERR_NOMEM, "--backend: out of memory");
  }
  b->worker = -1;
  /* shared before any fork: every --jobs worker adds its timeouts and template counts here */
  void *sh = mmap(NULL, sizeof *b->sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) {
    rs_cf_backend_close(b);
    return rs_fail(RS_ERR_NOMEM, "--backend: out of memory (a shared page)");
  }
  b->sh = sh;
  rs_status st = strncmp(spec, "exec:", 5) == 0 ? open_exec(b, spec + 5, timeout) : open_plugin(b, spec);
  if (st) {
    rs_cf_backend_close(b);
    return st;
  }
  *out = b;
  return RS_OK;
}

void rs_cf_backend_close(rs_cf_backend *b) {
  if (!b) return;
  rs_proto_close(b->proto);
  if (b->dl && b->abi.destroy && b->self) b->abi.destroy(b->self);
  if (b->dl) dlclose(b->dl);
  if (b->sh) munmap(b->sh, sizeof *b->sh);
  free(b->options);
  free(b->spec);
  free(b);
}

int64_t rs_cf_backend_max_instances(const rs_cf_backend *b) { return b->max_instances; }

/* worker w's child, as conform sees it (0: none) */
static void note_child(rs_cf_backend *b) {
  if (b->worker >= 0 && b->worker < RS_RUN_MAX_JOBS)
    atomic_store(&b->sh->child[b->worker], b->proto ? (int32_t)rs_proto_pid(b->proto) : 0);
}

rs_status rs_cf_backend_worker_start(rs_cf_backend *b, int worker) {
  if (worker < 0 || worker >= RS_RUN_MAX_JOBS) return rs_fail(RS_ERR_INVALID, "conform: worker %d out of range", worker);
  b->worker = worker;
  if (b->proto) {
    /* the child inherited from conform is conform's: its pipes are closed here, nothing is said to
     * it, and this worker talks to a child of its own */
    rs_status st = rs_proto_reopen(&b->proto);
    if (st) return rs_fail(st, "--backend %s: worker %d: %s", b->spec, worker + 1, rs_last_error());
    note_child(b);
    return RS_OK;
  }
  if (b->dl && b->abi.create) {
    /* a fresh instance of the plug-in: the one inherited from conform is left alone (not destroyed) */
    char msg[1024] = "";
    b->self = NULL;
    if (b->abi.create(b->options ? b->options : "", &b->self, msg, sizeof msg) != RS_BACKEND_OK)
      return rs_fail(RS_ERR_INVALID, "--backend %s: worker %d: create failed: %s", b->spec, worker + 1,
                     msg[0] ? msg : "(no message)");
  }
  return RS_OK;
}

void rs_cf_backend_worker_stop(rs_cf_backend *b) {
  if (b->worker < 0) return;
  if (b->proto) {
    rs_proto_close(b->proto); /* bye, then its process group killed and reaped */
    b->proto = NULL;
  } else if (b->dl && b->abi.destroy && b->self) {
    b->abi.destroy(b->self);
    b->self = NULL;
  }
  note_child(b);
}

int rs_cf_backend_workers_reap(rs_cf_backend *b) {
  int n = 0;
  for (int w = 0; w < RS_RUN_MAX_JOBS; w++) {
    int32_t pid = atomic_exchange(&b->sh->child[w], 0);
    if (pid <= 0) continue;
    /* the worker died without stopping its child: PR_SET_PDEATHSIG killed `sh`, this kills what
     * it started (the child's own process group) */
    kill(-(pid_t)pid, SIGKILL);
    kill((pid_t)pid, SIGKILL);
    n++;
  }
  return n;
}

/* ---- calls ---- */

void rs__cf_poison(void *data, int64_t nbytes) {
  if (data && nbytes > 0) memset(data, RS_CF_POISON, (size_t)nbytes);
}

void rs__cf_call_set(rs_cf_call *call, int result, rs_exec_fault fault, const char *fmt, const char *arg) {
  call->result = result;
  call->fault = fault;
  snprintf(call->msg, sizeof call->msg, fmt, arg);
}

/* An answer that does not have the fields it must: garbage from a process (it restarts). */
void rs__cf_bad_answer(rs_cf_backend *b, rs_cf_call *call, const char *why) {
  if (b->proto) rs_proto_reject_answer(b->proto);
  rs__cf_call_set(call, RS_BACKEND_ERROR, b->proto ? RS_EXEC_GARBAGE : RS_EXEC_FINE, "malformed answer: %s", why);
}

/* Send a request, classify the answer. Returns the answer on RS_BACKEND_OK (caller deletes). */
cJSON *rs__cf_request(rs_cf_backend *b, cJSON *req, rs_cf_call *call) {
  cJSON *ans = NULL;
  rs_exec_fault fault;
  if (rs_cf_backend_gave_up(b)) { /* --max-timeouts: no request waits for a backend that stopped answering */
    char why[96];
    snprintf(why, sizeof why, "%lld", (long long)rs_cf_backend_timeouts(b));
    /* a skip, not a failure: no case is blamed (or shrunk toward) for a request never sent */
    rs__cf_call_set(call, RS_BACKEND_UNSUPPORTED, RS_EXEC_FINE,
                    "not sent: the backend timed out %s times (--max-timeouts), the run stopped asking it", why);
    return NULL;
  }
  rs_proto_result r = rs_proto_call(b->proto, req, &ans, call->msg, sizeof call->msg, &fault);
  /* Mutant 760: timeouts are never counted, so --max-timeouts never stops a hanging backend. */
  if (fault == RS_EXEC_TIMEOUT && !RS_MUTANT(760)) atomic_fetch_add(&b->sh->timeouts, 1);
  note_child(b); /* a restart (after a fault) gave it a new child */
  call->fault = fault;
  call->result = r == RS_PROTO_OK ? RS_BACKEND_OK : r == RS_PROTO_UNSUPPORTED ? RS_BACKEND_UNSUPPORTED : RS_BACKEND_ERROR;
  return ans;
}

static void buf_of(rs_backend_buf *bb, int32_t rank, const rs_local *l, const char *name) {
  memset(bb, 0, sizeof *bb);
  bb->rank = rank;
  bb->ndim = l->ndim;
  memcpy(bb->shape, l->shape, sizeof(int64_t) * (size_t)l->ndim);
  bb->nbytes = bb->capacity = l->nbytes;
  bb->data = l->data;
  bb->name = name;
}

/* A plug-in's output buffer back into the local it was made from; 0 when it does not fit. */
static int take_buf(const rs_backend_buf *bb, rs_local *l, int elem, char *why, size_t cap) {
  int64_t numel = 1;
  if (bb->ndim < 0 || bb->ndim > RS_MAX_DIMS) {
    snprintf(why, cap, "rank %d: ndim %d", bb->rank, bb->ndim);
    return 0;
  }
  for (int d = 0; d < bb->ndim; d++) {
    if (bb->shape[d] < 0 || (bb->shape[d] && numel > INT64_MAX / bb->shape[d] / (elem ? elem : 1))) {
      snprintf(why, cap, "rank %d: shape[%d] = %lld", bb->rank, d, (long long)bb->shape[d]);
      return 0;
    }
    numel *= bb->shape[d];
  }
  if (bb->nbytes != numel * elem || bb->nbytes > bb->capacity) {
    snprintf(why, cap, "rank %d: nbytes %lld for a shape of %lld elements of %d bytes (capacity %lld)", bb->rank,
             (long long)bb->nbytes, (long long)numel, elem, (long long)bb->capacity);
    return 0;
  }
  l->ndim = bb->ndim;
  memcpy(l->shape, bb->shape, sizeof(int64_t) * (size_t)bb->ndim);
  l->nbytes = bb->nbytes;
  return 1;
}

/* The answer's per-rank tensors (mesh order) into out. */
static int read_locals(rs_cf_backend *b, const cJSON *ans, const char *key, const rs_mesh *m, int elem,
                       rs_locals *out, rs_cf_call *call) {
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(ans, key);
  char why[512];
  if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != m->nranks) {
    snprintf(why, sizeof why, "'%s' must list %d tensors, one per mesh rank", key, m->nranks);
    rs__cf_bad_answer(b, call, why);
    return 0;
  }
  if (rs_locals_alloc(out, m->nranks)) {
    rs__cf_call_set(call, RS_BACKEND_ERROR, RS_EXEC_FINE, "%s", rs_last_error());
    return 0;
  }
  int pos = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, arr) {
    char what[64];
    snprintf(what, sizeof what, "%s[%d]", key, pos);
    rs_local *l = &out->r[pos];
    int32_t rank;
    void *data;
    if (rs_proto_tensor_read(t, what, elem, RS_MAX_DIMS, &rank, &l->ndim, l->shape, &data, &l->nbytes)) {
      rs__cf_bad_answer(b, call, rs_last_error());
      return 0;
    }
    l->data = data;
    if (rank != m->ranks[pos]) {
      snprintf(why, sizeof why, "%s.rank is %d, mesh position %d is world rank %d", what, rank, pos, m->ranks[pos]);
      rs__cf_bad_answer(b, call, why);
      return 0;
    }
    pos++;
  }
  return 1;
}

void rs_cf_redistribute(rs_cf_backend *b, const rs_case *c, const rs_locals *in, rs_locals *out,
                        rs_cf_call *call) {
  memset(call, 0, sizeof *call);
  int n = c->mesh.nranks, es = rs_dtype_size(c->tensor.dtype);
  char *cj = rs_case_to_json(c);
  if (!cj) return rs__cf_call_set(call, RS_BACKEND_ERROR, RS_EXEC_FINE, "%s", rs_last_error());
  if (b->proto) {
    cJSON *req = cJSON_CreateObject(), *cs = NULL, *locals = cJSON_CreateArray();
    rs_json_parse(cj, &cs);
    cJSON_AddStringToObject(req, "op", "redistribute");
    cJSON_AddItemToObject(req, "case", cs);
    cJSON_AddItemToObject(req, "locals", locals);
    for (int p = 0; p < n; p++) {
      const rs_local *l = &in->r[p];
      cJSON_AddItemToArray(locals, rs_proto_tensor(c->mesh.ranks[p], l->ndim, l->shape, l->data, l->nbytes, NULL, NULL));
    }
    cJSON *ans = rs__cf_request(b, req, call);
    if (ans) read_locals(b, ans, "locals", &c->mesh, es, out, call);
    cJSON_Delete(ans);
    cJSON_Delete(req);
    free(cj);
    return;
  }
  rs_backend_buf *bi = calloc((size_t)n, sizeof *bi), *bo = calloc((size_t)n, sizeof *bo);
  if (!bi || !bo || rs_locals_for_layout(out, c, &c->dst)) {
    rs__cf_call_set(call, RS_BACKEND_ERROR, RS_EXEC_FINE, "%s", bi && bo ? rs_last_error() : "out of memory");
  } else {
    for (int p = 0; p < n; p++) {
      buf_of(&bi[p], c->mesh.ranks[p], &in->r[p], NULL);
      buf_of(&bo[p], c->mesh.ranks[p], &out->r[p], NULL);
      rs__cf_poison(bo[p].data, bo[p].capacity);
    }
    rs_backend_bufs vi = {n, bi}, vo = {n, bo};
    call->result = b->abi.redistribute(b->self, cj, &vi, &vo, call->msg, sizeof call->msg);
    if (call->result != RS_BACKEND_OK && call->result != RS_BACKEND_UNSUPPORTED) call->result = RS_BACKEND_ERROR;
    char why[512];
    for (int p = 0; p < n && call->result == RS_BACKEND_OK; p++)
      if (!take_buf(&bo[p], &out->r[p], es, why, sizeof why)) rs__cf_bad_answer(b, call, why);
  }
  free(bi);
  free(bo);
  free(cj);
}

/* ---- tp ---- */

typedef struct tp_inputs {
  int n;
  rs_backend_buf b[1 + 2 * RS_TP_MAX_MODULES];
  char names[1 + 2 * RS_TP_MAX_MODULES][RS_TP_PATH_LEN + 8];
} tp_inputs;

static void tp_inputs_free(tp_inputs *t) {
  for (int i = 0; i < t->n; i++) free(t->b[i].data);
}

static rs_status tp_add(tp_inputs *t, const rs_tensor *shape, void *data, const char *name, const char *suffix) {
  rs_backend_buf *bb = &t->b[t->n];
  memset(bb, 0, sizeof *bb);
  bb->rank = -1;
  bb->ndim = shape->ndim;
  memcpy(bb->shape, shape->shape, sizeof(int64_t) * (size_t)shape->ndim);
  rs_status st = rs_tensor_nbytes(shape, &bb->nbytes);
  bb->capacity = bb->nbytes;
  bb->data = data;
  snprintf(t->names[t->n], sizeof t->names[0], "%s%s", name, suffix);
  bb->name = t->names[t->n];
  t->n++;
  return st;
}

/* The global input and every module's parameters: the TP request's inputs. */
static rs_status tp_make_inputs(const rs_tp_case *c, tp_inputs *t) {
  t->n = 0;
  rs_tensor sh;
  void *data = NULL;
  rs_status st = rs_tp_global_input(c, &sh, &data);
  if (!st) st = tp_add(t, &sh, data, "input", "");
  for (int i = 0; i < c->nmod && !st; i++) {
    float *w = NULL;
    if ((st = rs_tp_global_param(c, i, RS_TP_WEIGHT, &sh, &w))) break;
    if ((st = tp_add(t, &sh, w, c->mod[i].path, ".weight"))) break;
    if (c->mod[i].kind == RS_TP_LINEAR && c->mod[i].bias) {
      if ((st = rs_tp_global_param(c, i, RS_TP_BIAS, &sh, &w))) break;
      st = tp_add(t, &sh, w, c->mod[i].path, ".bias");
    }
  }
  return st;
}

void rs_cf_tp_forward(rs_cf_backend *b, const rs_tp_case *c, rs_locals *out, rs_cf_call *call) {
  memset(call, 0, sizeof *call);
  int n = c->mesh.nranks;
  tp_inputs *t = calloc(1, sizeof *t);
  char *cj = rs_tp_case_to_json(c);
  if (!t || !cj || tp_make_inputs(c, t)) {
    rs__cf_call_set(call, RS_BACKEND_ERROR, RS_EXEC_FINE, "tp inputs: %s", t && cj ? rs_last_error() : "out of memory");
    goto out;
  }
  if (b->proto) {
    cJSON *req = cJSON_CreateObject(), *cs = NULL, *inputs = cJSON_CreateArray();
    rs_json_parse(cj, &cs);
    cJSON_AddStringToObject(req, "op", "tp");
    cJSON_AddItemToObject(req, "case", cs);
    cJSON_AddItemToObject(req, "inputs", inputs);
    for (int i = 0; i < t->n; i++) {
      const rs_backend_buf *bb = &t->b[i];
      cJSON_AddItemToArray(inputs, rs_proto_tensor(-1, bb->ndim, bb->shape, bb->data, bb->nbytes, "name", bb->name));
    }
    cJSON *ans = rs__cf_request(b, req, call);
    if (ans) read_locals(b, ans, "locals", &c->mesh, rs_dtype_size(rs_tp_dtype_of(c->dtype)), out, call);
    cJSON_Delete(ans);
    cJSON_Delete(req);
    goto out;
  }
  /* a plug-in gets buffers as big as the global output, shaped like it: it writes its local shape */
  int64_t gshape[3];
  gshape[0] = c->batch, gshape[1] = c->seq, gshape[2] = c->mod[c->nmod - 1].out;
  rs_backend_buf *bo;
  bo = calloc((size_t)n, sizeof *bo);
  if (!bo || rs_locals_alloc(out, n)) {
    free(bo);
    rs__cf_call_set(call, RS_BACKEND_ERROR, RS_EXEC_FINE, "%s", "out of memory");
    goto out;
  }
  for (int p = 0; p < n && call->result == RS_BACKEND_OK; p++) {
    if (rs_local_resize(&out->r[p], 3, gshape, rs_dtype_size(rs_tp_dtype_of(c->dtype)))) rs__cf_call_set(call, RS_BACKEND_ERROR, RS_EXEC_FINE, "%s", rs_last_error());
    else {
      buf_of(&bo[p], c->mesh.ranks[p], &out->r[p], NULL);
      rs__cf_poison(bo[p].data, bo[p].capacity);
    }
  }
  if (call->result == RS_BACKEND_OK) {
    rs_backend_bufs vi = {t->n, t->b}, vo = {n, bo};
    call->result = b->abi.tp_forward(b->self, cj, &vi, &vo, call->msg, sizeof call->msg);
    if (call->result != RS_BACKEND_OK && call->result != RS_BACKEND_UNSUPPORTED) call->result = RS_BACKEND_ERROR;
    char why[512];
    for (int p = 0; p < n && call->result == RS_BACKEND_OK; p++)
      if (!take_buf(&bo[p], &out->r[p], rs_dtype_size(rs_tp_dtype_of(c->dtype)), why, sizeof why)) rs__cf_bad_answer(b, call, why);
  }
  free(bo);
out:
  if (t) tp_inputs_free(t);
  free(t);
  free(cj);
}

void rs_cf_backend_set_max_timeouts(rs_cf_backend *b, int64_t k) { b->max_timeouts = k; }
int64_t rs_cf_backend_timeouts(const rs_cf_backend *b) { return atomic_load(&b->sh->timeouts); }
int rs_cf_backend_gave_up(const rs_cf_backend *b) {
  return b->max_timeouts > 0 && rs_cf_backend_timeouts(b) >= b->max_timeouts;
}
