/* cma.c - process_vm_readv/writev over two lists of strided views. Each view is walked as its contiguous
 * runs (the innermost dims that are dense collapse into one run); the local and remote run streams
 * are cut where either run ends, so that local iovec k and remote iovec k have the same length, and
 * are handed to the kernel IOV_MAX pairs at a time. The kernel copies page by page from the other
 * process's address space: one copy per byte, no staging buffer on either side. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/uio.h>
#include "comm/cma.h"
#include "core/mutant.h"

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

/* The contiguous runs of a list of views, one after the other. */
typedef struct runs {
  const rs_view *v;
  int64_t nv, i;          /* view i is being walked */
  int outer;              /* dims [0, outer) are iterated; [outer, ndim) form one run */
  int64_t run;            /* bytes of one run */
  int64_t idx[RS_MAX_DIMS];
  char *at;               /* start of the current run */
  int64_t left;           /* bytes of the current run not yet handed out (0: advance) */
  int done;
} runs;

static void runs_view(runs *r) {
  for (; r->i < r->nv; ++r->i) {
    const rs_view *v = &r->v[r->i];
    int64_t n = v->esize, s = v->esize;
    int d = v->ndim;
    for (int k = 0; k < v->ndim; ++k)
      if (v->size[k] == 0) n = 0;
    if (n == 0) continue;
    /* collapse the dense innermost dims (size-1 dims never break density) */
    while (d > 0 && (v->size[d - 1] == 1 || v->stride[d - 1] == s)) {
      s *= v->size[d - 1];
      --d;
    }
    r->outer = d;
    r->run = s;
    memset(r->idx, 0, sizeof r->idx);
    r->at = v->base;
    r->left = s;
    return;
  }
  r->done = 1;
}

static void runs_init(runs *r, const rs_view *v, int64_t nv) {
  memset(r, 0, sizeof *r);
  r->v = v;
  r->nv = nv;
  runs_view(r);
}

/* Step to the next run of the current view, or the first of the next view. */
static void runs_next(runs *r) {
  const rs_view *v = &r->v[r->i];
  for (int d = r->outer - 1; d >= 0; --d) {
    if (++r->idx[d] < v->size[d]) {
      r->at += v->stride[d];
      r->left = r->run;
      return;
    }
    r->at -= v->stride[d] * (v->size[d] - 1);
    r->idx[d] = 0;
  }
  ++r->i;
  runs_view(r);
}

int64_t rs__cma_runs(const rs_view *v, int64_t nv) {
  runs r;
  int64_t n = 0;
  for (runs_init(&r, v, nv); !r.done; ++r.i, runs_view(&r)) {
    int64_t k = 1;
    for (int d = 0; d < r.outer; ++d) k *= r.v[r.i].size[d];
    n += k;
  }
  return n;
}

int rs__cma_copy(pid_t pid, int write, const rs_view *lv, int64_t nl, const rs_view *rv, int64_t nr) {
  struct iovec li[IOV_MAX], ri[IOV_MAX];
  runs l, r;
  runs_init(&l, lv, nl);
  runs_init(&r, rv, nr);
  int cnt = 0;
  int64_t piece = 0;
  for (;;) {
    /* fill the batch with pairs of equal length */
    while (cnt < IOV_MAX && !l.done && !r.done) {
      int64_t len = l.left < r.left ? l.left : r.left;
      if (len > (int64_t)1 << 30) len = (int64_t)1 << 30;
      char *la = l.at + (l.run - l.left), *ra = r.at + (r.run - r.left);
      /* Mutant 940: the second piece of a read of several pieces is skipped (its bytes stay stale) */
      if (!(RS_MUTANT(940) && piece == 1)) {
        li[cnt].iov_base = la;
        ri[cnt].iov_base = ra;
        li[cnt].iov_len = ri[cnt].iov_len = (size_t)len;
        ++cnt;
      }
      ++piece;
      if ((l.left -= len) == 0) runs_next(&l);
      if ((r.left -= len) == 0) runs_next(&r);
    }
    if (cnt == 0) break;
    ssize_t got = write ? process_vm_writev(pid, li, (unsigned long)cnt, ri, (unsigned long)cnt, 0)
                        : process_vm_readv(pid, li, (unsigned long)cnt, ri, (unsigned long)cnt, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (got == 0) return EFAULT;
    /* drop what was read; resume a partly read pair */
    int k = 0;
    size_t g = (size_t)got;
    while (k < cnt && g >= li[k].iov_len) g -= li[k++].iov_len;
    if (k < cnt && g) {
      li[k].iov_base = (char *)li[k].iov_base + g;
      ri[k].iov_base = (char *)ri[k].iov_base + g;
      li[k].iov_len -= g;
      ri[k].iov_len -= g;
    }
    memmove(li, li + k, sizeof li[0] * (size_t)(cnt - k));
    memmove(ri, ri + k, sizeof ri[0] * (size_t)(cnt - k));
    cnt -= k;
  }
  return l.done == r.done ? 0 : EINVAL; /* both lists end together when the byte counts match */
}

int rs__cma_probe(pid_t pid, void *buf, const void *addr, size_t bytes) {
  struct iovec li = {buf, bytes}, ri = {(void *)addr, bytes};
  ssize_t got = process_vm_readv(pid, &li, 1, &ri, 1, 0);
  if (got < 0) return errno;
  return got == (ssize_t)bytes ? 0 : EFAULT;
}
