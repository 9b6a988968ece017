/* backend_internal.h - the backend under test's insides, shared by the files that make its calls
 * (conform/backend.c: redistribute and TP; conform/backend_p2p.c: cross-config). */
#ifndef RS_CONFORM_BACKEND_INTERNAL_H
#define RS_CONFORM_BACKEND_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include "conform/conform.h"
#include "conform/proto.h"
#include "props/runner.h"

/* What conform and its forked --jobs workers share (a MAP_SHARED page made at open, before any
 * fork): the counts every worker adds to, and each worker's child, so conform can kill what a
 * worker that died left behind. */
typedef struct rs_cf_shared {
  _Atomic int64_t timeouts;       /* requests that timed out (rs__cf_request), over every process */
  _Atomic int64_t templates_sent; /* P2P models sent in template form (RS_CF_P2P_TEMPLATES) */
  _Atomic int32_t child[RS_RUN_MAX_JOBS]; /* worker w's child (pid = its process group), 0: none */
} rs_cf_shared;

struct rs_cf_backend {
  char *spec;
  rs_proto *proto;   /* exec: */
  void *dl;          /* plug-in */
  rs_backend abi;    /* the plug-in's struct, zero past its struct_size */
  void *self;
  char name[128];
  unsigned caps;
  int ckpt_reshard;
  int64_t max_timeouts; /* > 0: after this many, requests are no longer sent (--max-timeouts) */
  rs_cf_shared *sh;     /* the shared counts (timeouts, templates sent) */
  char *options;        /* a plug-in's text after '?' (each worker's create gets it) */
  int64_t max_instances; /* 0: any number at once; k: at most k (hello / ABI max_instances) */
  int worker;           /* -1: conform itself; w: forked --jobs worker w, with its own child/instance */
};

/* An output buffer handed to a plug-in is filled with RS_CF_POISON bytes first: what the plug-in
 * leaves unwritten reads the same in every run (a failure's message, its shrunk case and the reports
 * do not depend on what malloc returned, or on --jobs). */
#define RS_CF_POISON 0xA5
void rs__cf_poison(void *data, int64_t nbytes);
/* Set a call's outcome with a message (fmt takes one string). */
void rs__cf_call_set(rs_cf_call *call, int result, rs_exec_fault fault, const char *fmt, const char *arg);
/* An answer that lacks what it must have: a failure, and garbage from a process (it restarts). */
void rs__cf_bad_answer(rs_cf_backend *b, rs_cf_call *call, const char *why);
/* Send a request to a process backend and classify the answer; the answer on RS_BACKEND_OK. */
cJSON *rs__cf_request(rs_cf_backend *b, cJSON *req, rs_cf_call *call);

/* Every (parameter, position) local of config `which` as plug-in buffers pointing into l (name: the
 * parameter), each MXFP8 destination's scales as the next buffer ("<param>.scale", names holds
 * those strings: free with rs__cf_free_names(names, *n)). NULL on out of memory. */
struct rs_p2p_model;
struct rs_p2p_locals;
rs_backend_buf *rs__cf_p2p_bufs(const struct rs_p2p_model *m, int which, const struct rs_p2p_locals *l, int *n,
                                char ***names);
void rs__cf_free_names(char **names, int n);

#endif
