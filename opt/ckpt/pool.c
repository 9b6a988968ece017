/* pool.c - the I/O thread pool of opt's checkpoints: tasks are taken from one atomic counter, so
 * big and small segments mix without a static partition; the first failure stops the others and
 * its message (thread-local in rs_fail) travels back to the caller. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "opt/ckpt/internal.h"

typedef struct pool {
  rs__pool_fn fn;
  void *ctx;
  int64_t ntasks;
  int64_t next;
  int failed;
  rs_status st;
  char msg[512];
  pthread_mutex_t mu;
} pool;

typedef struct worker {
  pool *p;
  int tid;
} worker;

static void *work(void *arg) {
  worker *wk = arg;
  pool *p = wk->p;
  for (;;) {
    if (__atomic_load_n(&p->failed, __ATOMIC_ACQUIRE)) break;
    int64_t t = __atomic_fetch_add(&p->next, 1, __ATOMIC_ACQ_REL);
    if (t >= p->ntasks) break;
    rs_status st = p->fn(p->ctx, t, wk->tid);
    if (st) {
      pthread_mutex_lock(&p->mu);
      if (!p->failed) {
        p->st = st;
        snprintf(p->msg, sizeof p->msg, "%s", rs_last_error());
        __atomic_store_n(&p->failed, 1, __ATOMIC_RELEASE);
      }
      pthread_mutex_unlock(&p->mu);
      break;
    }
  }
  return NULL;
}

rs_status rs__pool_run(int nthreads, int64_t ntasks, rs__pool_fn fn, void *ctx) {
  if (ntasks <= 0) return RS_OK;
  pool p;
  memset(&p, 0, sizeof p);
  p.fn = fn;
  p.ctx = ctx;
  p.ntasks = ntasks;
  pthread_mutex_init(&p.mu, NULL);
  if (nthreads < 1) nthreads = 1;
  if (nthreads > 64) nthreads = 64;
  if (nthreads > ntasks) nthreads = (int)ntasks;
  pthread_t th[64];
  worker wk[64];
  int started = 0;
  for (int i = 1; i < nthreads; ++i) {
    wk[i].p = &p;
    wk[i].tid = i;
    if (pthread_create(&th[i], NULL, work, &wk[i]) != 0) break;
    started = i;
  }
  wk[0].p = &p;
  wk[0].tid = 0;
  work(&wk[0]);
  for (int i = 1; i <= started; ++i) pthread_join(th[i], NULL);
  pthread_mutex_destroy(&p.mu);
  if (p.failed) return rs_fail(p.st, "%s", p.msg);
  return RS_OK;
}
