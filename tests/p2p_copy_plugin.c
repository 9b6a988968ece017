/* p2p_copy_plugin.c - an example copy-service plug-in (the C ABI of reshard/copy_service.h): an
 * in-process matcher written against nothing but that header. Build it as a shared library and run
 * `reshard p2p run MODEL.json --copy-service ./libp2p_copy_plugin.so`. It serves one process that
 * plays every rank (world_rank == -1); a send and a receive match on (sender, receiver, task_id). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "reshard/copy_service.h"

typedef struct post {
  int32_t from, to;
  int64_t task, bytes;
  char *buf;
} post;

typedef struct svc {
  post *send, *recv;
  int64_t ns, nr, cs, cr;
  char err[200];
} svc;

static int push(post **a, int64_t *n, int64_t *cap, post p) {
  if (*n == *cap) {
    int64_t nc = *cap ? 2 * *cap : 64;
    post *x = realloc(*a, (size_t)nc * sizeof *x);
    if (!x) return 1;
    *a = x;
    *cap = nc;
  }
  (*a)[(*n)++] = p;
  return 0;
}

static int send_(void *self, int32_t me, const void *buf, int64_t bytes, int32_t peer, int64_t task) {
  svc *s = self;
  post p = {me, peer, task, bytes, (char *)buf};
  return push(&s->send, &s->ns, &s->cs, p);
}

static int recv_(void *self, int32_t me, void *buf, int64_t bytes, int32_t peer, int64_t task) {
  svc *s = self;
  post p = {peer, me, task, bytes, buf};
  return push(&s->recv, &s->nr, &s->cr, p);
}

static int cmp(const void *a, const void *b) {
  const post *x = a, *y = b;
  if (x->from != y->from) return x->from < y->from ? -1 : 1;
  if (x->to != y->to) return x->to < y->to ? -1 : 1;
  return (x->task > y->task) - (x->task < y->task);
}

static int run_(void *self) {
  svc *s = self;
  int rc = 0;
  qsort(s->send, (size_t)s->ns, sizeof(post), cmp);
  qsort(s->recv, (size_t)s->nr, sizeof(post), cmp);
  if (s->ns != s->nr) {
    snprintf(s->err, sizeof s->err, "%lld sends but %lld receives", (long long)s->ns, (long long)s->nr);
    rc = 1;
  }
  for (int64_t i = 0; i < s->ns && !rc; ++i) {
    const post *a = &s->send[i], *b = &s->recv[i];
    if (cmp(a, b) || a->bytes != b->bytes) {
      snprintf(s->err, sizeof s->err, "send %d->%d task %lld has no matching receive", a->from, a->to,
               (long long)a->task);
      rc = 1;
    } else {
      memcpy(b->buf, a->buf, (size_t)a->bytes);
    }
  }
  s->ns = s->nr = 0;
  return rc;
}

static const char *err_(void *self) { return ((svc *)self)->err; }

static void destroy_(void *self) {
  svc *s = self;
  free(s->send);
  free(s->recv);
  free(s);
}

static const rs_copy_service_vtable VT = {RS_COPY_SERVICE_ABI_VERSION, "example-plugin", send_, recv_, run_, err_, destroy_};

int rs_copy_service_abi_version(void) { return RS_COPY_SERVICE_ABI_VERSION; }

int rs_copy_service_create(int32_t world_rank, int32_t world_size, const rs_copy_service_vtable **vt, void **self) {
  (void)world_size;
  if (world_rank != -1) return 1; /* in-process only */
  svc *s = calloc(1, sizeof *s);
  if (!s) return 1;
  *vt = &VT;
  *self = s;
  return 0;
}
