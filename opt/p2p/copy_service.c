/* copy_service.c - the copy service of SPEC 10 over opt's transports (opt/comm: local matcher, MPI,
 * NCCL) and as plug-ins loaded with dlopen. Built-ins are the same vtable a plug-in exports, so the
 * executor has one code path. A plug-in's run() is code we cannot make poll a deadline, so it runs
 * on a thread of its own while the caller waits for it under the progress timeout (timeout.c): a
 * run that does not return in time fails with RS_ERR_TIMEOUT naming the peer a receive waits on,
 * and the service is left alone (neither destroyed nor unloaded) since its thread may still be in it. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm/world.h"
#include "core/elf_check.h"
#include "core/mutant.h"
#include "cuda/cuda_api.h"
#include "p2p/opt_p2p.h"

typedef struct dev_post {
  void *host; /* the caller's buffer */
  int64_t bytes, off;
  int32_t me, peer;
  int64_t task;
  int is_send;
} dev_post;

typedef struct builtin {
  rs_comm *comm;
  int owned;
  int device; /* nccl: stage bytes through device memory */
  dev_post *dp;
  int64_t ndp, capdp;
  char *pool; /* device staging, grow-only across runs: one allocation for a whole campaign */
  int64_t pool_cap;
  char err[256];
} builtin;

static int keep_err(builtin *b, rs_status st) {
  if (st) snprintf(b->err, sizeof b->err, "%s", rs_last_error());
  return st ? (int)st : 0;
}

/* Device worlds: a post is only recorded here; run() lays every post out in the pooled device
 * buffer, uploads the sends, submits all, runs, and brings the receives back. */
static int record(builtin *b, int32_t me, const void *host, int64_t bytes, int32_t peer, int64_t task, int is_send) {
  if (b->ndp == b->capdp) {
    int64_t nc = b->capdp ? 2 * b->capdp : 64;
    dev_post *p = realloc(b->dp, (size_t)nc * sizeof *p);
    if (!p) return keep_err(b, rs_fail(RS_ERR_NOMEM, "copy service: out of memory"));
    b->dp = p;
    b->capdp = nc;
  }
  dev_post *p = &b->dp[b->ndp++];
  p->host = (void *)host;
  p->bytes = bytes;
  p->me = me;
  p->peer = peer;
  p->task = task;
  p->is_send = is_send;
  return 0;
}

static rs_status run_device(builtin *b) {
  int64_t total = 0;
  rs_status st = RS_OK;
  for (int64_t i = 0; i < b->ndp; ++i) {
    b->dp[i].off = total;
    total += (b->dp[i].bytes + 255) & ~(int64_t)255;
  }
  if (total > b->pool_cap || !b->pool) {
    rs_cuda_free(b->pool); /* nothing in flight: every run ends synchronized */
    b->pool = NULL;
    b->pool_cap = 0;
    if ((st = rs_cuda_malloc((void **)&b->pool, total + total / 4))) return st;
    b->pool_cap = total + total / 4;
  }
  for (int64_t i = 0; i < b->ndp && !st; ++i) {
    dev_post *p = &b->dp[i];
    rs_view v;
    rs_view_packed(&v, b->pool + p->off, 1, 1, &p->bytes);
    if (p->is_send) {
      if (p->bytes) st = rs_cuda_h2d(b->pool + p->off, p->host, p->bytes);
      if (!st) st = b->comm->ops->submit_send(b->comm, p->me, p->peer, p->task, &v, 1);
    } else {
      st = b->comm->ops->submit_recv(b->comm, p->me, p->peer, p->task, &v, 1);
    }
  }
  if (!st) st = b->comm->ops->run(b->comm);
  if (!st) st = rs_cuda_sync();
  for (int64_t i = 0; i < b->ndp && !st; ++i)
    if (!b->dp[i].is_send && b->dp[i].bytes) st = rs_cuda_d2h(b->dp[i].host, b->pool + b->dp[i].off, b->dp[i].bytes);
  b->ndp = 0;
  return st;
}

static int b_send(void *self, int32_t me, const void *buf, int64_t bytes, int32_t peer, int64_t task) {
  builtin *b = self;
  if (b->device) return record(b, me, buf, bytes, peer, task, 1);
  rs_view v;
  rs_view_packed(&v, (void *)buf, 1, 1, &bytes);
  return keep_err(b, b->comm->ops->submit_send(b->comm, me, peer, task, &v, 1));
}

static int b_recv(void *self, int32_t me, void *buf, int64_t bytes, int32_t peer, int64_t task) {
  builtin *b = self;
  if (b->device) return record(b, me, buf, bytes, peer, task, 0);
  rs_view v;
  rs_view_packed(&v, buf, 1, 1, &bytes);
  return keep_err(b, b->comm->ops->submit_recv(b->comm, me, peer, task, &v, 1));
}

static int b_run(void *self) {
  builtin *b = self;
  return keep_err(b, b->device ? run_device(b) : b->comm->ops->run(b->comm));
}

static const char *b_err(void *self) { return ((builtin *)self)->err; }

static void b_destroy(void *self) {
  builtin *b = self;
  if (!b) return;
  if (b->owned && b->comm) b->comm->ops->destroy(b->comm);
  rs_cuda_free(b->pool);
  free(b->dp);
  free(b);
}

static const rs_copy_service_vtable local_vt = {RS_COPY_SERVICE_ABI_VERSION, "local", b_send, b_recv, b_run, b_err, b_destroy};
static const rs_copy_service_vtable mpi_vt = {RS_COPY_SERVICE_ABI_VERSION, "mpi", b_send, b_recv, b_run, b_err, b_destroy};
static const rs_copy_service_vtable nccl_vt = {RS_COPY_SERVICE_ABI_VERSION, "nccl", b_send, b_recv, b_run, b_err, b_destroy};

rs_status rs__cs_builtin(const char *name, struct rs_world *w, const rs_copy_service_vtable **vt, void **self) {
  builtin *b = calloc(1, sizeof *b);
  if (!b) return rs_fail(RS_ERR_NOMEM, "copy service: out of memory");
  rs_status st = RS_OK;
  int wk = w ? w->kind : RS_WORLD_LOCAL;
  if (!strcmp(name, "local")) {
    *vt = &local_vt;
    b->owned = 1;
    st = rs_comm_local_create(0, &b->comm);
  } else if (!strcmp(name, "mpi")) {
    *vt = &mpi_vt;
    if (wk != RS_WORLD_MPI) st = rs_fail(RS_ERR_INVALID, "copy service: mpi needs an MPI world (--transport mpi)");
    else b->comm = w->comm;
  } else if (!strcmp(name, "nccl")) {
    *vt = &nccl_vt;
    if (wk != RS_WORLD_NCCL) {
      st = rs_fail(RS_ERR_UNSUPPORTED, "copy service: nccl needs an NCCL world (--transport nccl)");
    } else {
      /* one communicator over every process, any number of them */
      st = rs_comm_nccl_all(w->nccl, &b->comm);
      b->device = 1;
    }
  } else {
    st = rs_fail(RS_ERR_INVALID, "copy service: unknown '%s' (local, mpi, nccl or a plug-in path)", name);
  }
  if (st) {
    b_destroy(b);
    return st;
  }
  *self = b;
  return RS_OK;
}

rs_comm *rs__cs_comm(rs_copy_service *cs) {
  if (!cs || cs->dl || cs->stuck || !cs->self || (cs->vt != &local_vt && cs->vt != &mpi_vt)) return NULL;
  const builtin *b = cs->self;
  return b->device ? NULL : b->comm;
}

rs_status rs__cs_post_view(rs_copy_service *cs, int is_recv, int32_t me, const rs_view *v, int32_t peer,
                           int64_t task_id) {
  rs_comm *c = rs__cs_comm(cs);
  if (!c) return rs_fail(RS_ERR_TRANSPORT, "copy service %s: takes no views", rs_copy_service_name(cs));
  if (!is_recv) return c->ops->submit_send(c, me, peer, task_id, v, 1);
  if (!cs->nrecv++) cs->recv_peer = peer;
  return c->ops->submit_recv(c, me, peer, task_id, v, 1);
}

static int is_plugin_path(const char *s) {
  size_t n = strlen(s);
  return strchr(s, '/') || (n > 3 && !strcmp(s + n - 3, ".so"));
}

/* A plug-in is a file: a name without '/' is taken in the current directory, never looked up on
 * the loader's search path, so the file checked below is the file loaded. The check comes first
 * (core/elf_check.h): a truncated library would crash dlopen with SIGBUS. Every message names the
 * library once ('PATH': reason); the CLI puts its flag in front. */
static rs_status open_plugin(rs_copy_service *cs, const char *name, struct rs_world *w) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s%s", strchr(name, '/') ? "" : "./", name) >= (int)sizeof path)
    return rs_fail(RS_ERR_INVALID, "'%.64s...': path longer than %zu bytes", name, sizeof path - 1);
  rs_status st = rs_elf_dlopen(NULL, path, RTLD_NOW | RTLD_LOCAL, &cs->dl);
  if (st) return st;
  rs_copy_service_abi_version_fn ver = (rs_copy_service_abi_version_fn)dlsym(cs->dl, "rs_copy_service_abi_version");
  rs_copy_service_create_fn mk = (rs_copy_service_create_fn)dlsym(cs->dl, "rs_copy_service_create");
  int local = !w || w->kind == RS_WORLD_LOCAL;
  if (!ver || !mk)
    return rs_fail(RS_ERR_INVALID, "'%s': does not export rs_copy_service_abi_version and rs_copy_service_create", path);
  int abi = ver();
  if (abi != RS_COPY_SERVICE_ABI_VERSION)
    return rs_fail(RS_ERR_INVALID, "'%s': speaks copy-service ABI %d, reshard speaks %d", path, abi,
                   RS_COPY_SERVICE_ABI_VERSION);
  if (mk(local ? -1 : w->rank, local ? 1 : w->size, &cs->vt, &cs->self) || !cs->vt)
    return rs_fail(RS_ERR_TRANSPORT, "'%s': failed to create a service", path);
  if (cs->vt->abi_version != RS_COPY_SERVICE_ABI_VERSION || !cs->vt->submit_send || !cs->vt->submit_recv ||
      !cs->vt->run || !cs->vt->destroy)
    return rs_fail(RS_ERR_INVALID, "'%s': returned an incomplete vtable", path);
  return RS_OK;
}

rs_status rs_copy_service_open(const char *name, struct rs_world *w, rs_copy_service **out) {
  *out = NULL;
  rs_copy_service *cs = calloc(1, sizeof *cs);
  if (!cs) return rs_fail(RS_ERR_NOMEM, "copy service: out of memory");
  snprintf(cs->name, sizeof cs->name, "%s", name);
  cs->w = w;
  cs->rank = !w || w->kind == RS_WORLD_LOCAL ? -1 : w->rank;
  cs->recv_peer = -1;
  rs_status st = RS_OK;
  if (!is_plugin_path(name)) {
    st = rs__cs_builtin(name, w, &cs->vt, &cs->self);
  } else {
    st = open_plugin(cs, name, w);
  }
  if (st) {
    rs_copy_service_close(cs);
    return st;
  }
  *out = cs;
  return RS_OK;
}

void rs_copy_service_close(rs_copy_service *cs) {
  if (!cs || cs->stuck) return; /* its thread may still run inside it */
  free(cs->count);
  if (cs->vt && cs->self) cs->vt->destroy(cs->self);
  if (cs->dl) dlclose(cs->dl);
  free(cs->stage);
  free(cs);
}

char *rs__cs_stage(rs_copy_service *cs, int64_t bytes) {
  if (bytes > cs->stage_cap || !cs->stage) {
    free(cs->stage);
    cs->stage = malloc((size_t)bytes + 1);
    cs->stage_cap = cs->stage ? bytes : 0;
  }
  return cs->stage;
}

const char *rs_copy_service_name(const rs_copy_service *cs) { return cs->vt && cs->vt->name ? cs->vt->name : cs->name; }

static rs_status cs_status(rs_copy_service *cs, int rc, const char *what) {
  if (!rc) return RS_OK;
  const char *e = cs->vt->last_error ? cs->vt->last_error(cs->self) : NULL;
  return rs_fail(RS_ERR_TRANSPORT, "copy service %s: %s: %s", rs_copy_service_name(cs), what, e && *e ? e : "failed");
}

void rs_copy_service_count(rs_copy_service *cs, int on) { cs->counting = on; }


static rs_cs_count *count_slot(rs_copy_service *cs, int32_t rank, int64_t tag, int add) {
  uint64_t key = ((uint64_t)(uint32_t)rank << 32 | (uint32_t)tag) + 1;
  if (add && (cs->nused + 1) * 2 > cs->ncount) { /* grow: keep the table at most half full */
    int64_t n = cs->ncount ? cs->ncount * 2 : 256;
    rs_cs_count *t = calloc((size_t)n, sizeof *t), *old = cs->count;
    if (!t) return NULL;
    for (int64_t i = 0; i < cs->ncount; ++i) {
      if (!old[i].key) continue;
      uint64_t h = old[i].key * 0x9E3779B97F4A7C15ull;
      for (int64_t j = (int64_t)(h >> 20) & (n - 1);; j = (j + 1) & (n - 1))
        if (!t[j].key) {
          t[j] = old[i];
          break;
        }
    }
    free(old);
    cs->count = t;
    cs->ncount = n;
  }
  if (!cs->ncount) return NULL;
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  for (int64_t j = (int64_t)(h >> 20) & (cs->ncount - 1);; j = (j + 1) & (cs->ncount - 1)) {
    if (cs->count[j].key == key) return &cs->count[j];
    if (!cs->count[j].key) {
      if (!add) return NULL;
      cs->count[j].key = key;
      cs->nused++;
      return &cs->count[j];
    }
  }
}

void rs_copy_service_counted(const rs_copy_service *cs, int32_t rank, int64_t tag, int64_t *sent, int64_t *recv) {
  rs_cs_count *c = count_slot((rs_copy_service *)cs, rank, tag, 0);
  *sent = c ? c->sent : 0;
  *recv = c ? c->recv : 0;
}

/* A submission the transport accepted, tallied under (me, the current tag). */
rs_status rs_copy_service_tally(rs_copy_service *cs, int32_t me, int64_t tag, int64_t bytes, int is_recv) {
  if (!cs->counting) return RS_OK;
  rs_cs_count *c = count_slot(cs, me, tag, 1);
  if (!c) return rs_fail(RS_ERR_NOMEM, "copy service: out of memory (byte counts)");
  if (is_recv) c->recv += bytes;
  else c->sent += bytes;
  return RS_OK;
}

rs_status rs_copy_service_send(rs_copy_service *cs, int32_t me, const void *buf, int64_t bytes, int32_t peer,
                               int64_t task_id) {
  rs_status st = cs_status(cs, cs->vt->submit_send(cs->self, me, buf, bytes, peer, task_id), "submit_send");
  return st;
}

rs_status rs_copy_service_recv(rs_copy_service *cs, int32_t me, void *buf, int64_t bytes, int32_t peer,
                               int64_t task_id) {
  if (!cs->nrecv++) cs->recv_peer = peer;
  rs_status st = cs_status(cs, cs->vt->submit_recv(cs->self, me, buf, bytes, peer, task_id), "submit_recv");
  return st;
}

/* One plug-in run() on its own thread; the job outlives a caller that gave up on it. */
typedef struct run_job {
  rs_copy_service *cs;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, rc, abandoned;
} run_job;

static void *run_thread(void *arg) {
  run_job *j = arg;
  int rc = j->cs->vt->run(j->cs->self);
  pthread_mutex_lock(&j->mu);
  j->rc = rc;
  j->done = 1;
  int abandoned = j->abandoned;
  pthread_cond_signal(&j->cv);
  pthread_mutex_unlock(&j->mu);
  if (abandoned) free(j);
  return NULL;
}

static rs_status run_plugin(rs_copy_service *cs) {
  run_job *j = calloc(1, sizeof *j);
  if (!j) return rs_fail(RS_ERR_NOMEM, "copy service: out of memory");
  j->cs = cs;
  pthread_mutex_init(&j->mu, NULL);
  pthread_cond_init(&j->cv, NULL);
  pthread_t t;
  if (pthread_create(&t, NULL, run_thread, j)) {
    free(j);
    return cs_status(cs, cs->vt->run(cs->self), "run"); /* no thread to spare: run it here */
  }
  double limit = rs__comm_timeout();
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += (time_t)limit;
  dl.tv_nsec += (long)((limit - (double)(time_t)limit) * 1e9);
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&j->mu);
  int w = 0;
  while (!j->done && w != ETIMEDOUT) /* 903: the plug-in's run is waited for without a deadline */
    w = RS_MUTANT(903) ? pthread_cond_wait(&j->cv, &j->mu) : pthread_cond_timedwait(&j->cv, &j->mu, &dl);
  int done = j->done, rc = j->rc;
  if (!done) j->abandoned = 1;
  pthread_mutex_unlock(&j->mu);
  if (!done) {
    pthread_detach(t);
    cs->stuck = 1;
    char who[32];
    if (cs->rank >= 0) snprintf(who, sizeof who, "rank %d", cs->rank);
    else snprintf(who, sizeof who, "this process");
    if (cs->recv_peer >= 0)
      return rs__comm_fail("copy service %s: %s waited %g s for rank %d (run() did not return; %lld "
                           "receives open): the peer is stalled or dead (--timeout)", rs_copy_service_name(cs),
                           who, limit, cs->recv_peer, (long long)cs->nrecv);
    return rs__comm_fail("copy service %s: %s: run() did not return in %g s (--timeout)",
                         rs_copy_service_name(cs), who, limit);
  }
  pthread_join(t, NULL);
  pthread_mutex_destroy(&j->mu);
  pthread_cond_destroy(&j->cv);
  free(j);
  return cs_status(cs, rc, "run");
}

rs_status rs_copy_service_run(rs_copy_service *cs) {
  rs_status st = rs__comm_check();
  if (st) return st;
  /* built-ins poll their own waits under the timeout */
  st = cs->dl ? run_plugin(cs) : cs_status(cs, cs->vt->run(cs->self), "run");
  cs->nrecv = 0;
  cs->recv_peer = -1;
  return st;
}
