/* suite.h - what the suite drivers of `reshard conform` share (internal to conform/): the run
 * (options, backend, result, the replay command), report items, fixture corpora, saved failures. */
#ifndef RS_CONFORM_SUITE_H
#define RS_CONFORM_SUITE_H

#include "conform/conform.h"
#include "props/props.h"

/* snprintf into a fixed report field: a long message is cut, on purpose. */
void rs_cf_print(char *buf, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
#define RS_CF_PRINT(buf, ...) rs_cf_print(buf, sizeof buf, __VA_ARGS__)

typedef struct rs_cf_run {
  const rs_conform_opts *o;
  rs_cf_backend *b;
  rs_cf_result *r;
  const char *fixtures; /* the fixtures/ folder, NULL when there is none */
  const char *failures; /* where failures are saved */
  char replay[2048];    /* "reshard conform --backend '<spec>' --replay" */
} rs_cf_run;

/* A new item of the report (zeroed, named); NULL on out of memory. */
rs_cf_item *rs_cf_add_item(rs_cf_result *r, unsigned suite, int fixture, const char *name);
/* Record a failure of `it`: counted; the first one's message and replay command are kept and printed. */
void rs_cf_item_failed(const rs_cf_run *run, rs_cf_item *it, const char *where, const char *msg,
                       const char *saved_path);

/* Calls fn for every case of a corpus folder: each NAME.json file whole, each line of each
 * NAME.jsonl.gz; where is "PATH" or "PATH:LINE". Files in name order; symbolic links and
 * non-regular files are refused (counted as a failure of the item). Returns the file count. */
typedef void (*rs_cf_case_fn)(void *ctx, rs_cf_item *it, const char *text, const char *where);
int rs_cf_walk_corpus(rs_cf_run *run, unsigned suite, const char *dir, rs_cf_case_fn fn, void *ctx);

/* Write text (a JSON object) as DIR/<stem>-<hash>.json under run->failures; path gets the name. */
rs_status rs_cf_save_failure(const rs_cf_run *run, const char *text, const char *stem, char *path,
                             size_t cap);

void rs_cf_suite_redistribute(rs_cf_run *run);
void rs_cf_suite_tp(rs_cf_run *run);
void rs_cf_suite_p2p(rs_cf_run *run);
void rs_cf_suite_ckpt(rs_cf_run *run);
/* A saved ckpt failure (its text) replayed against b. */
rs_outcome rs_cf_ckpt_replay(rs_cf_backend *b, const char *text, char *msg, size_t cap);
/* Replay helpers: run one saved case of a suite against the backend. */
rs_outcome rs_cf_redistribute_one(rs_cf_backend *b, const rs_case *c, char *msg, size_t cap);
rs_outcome rs_cf_tp_one(rs_cf_backend *b, const rs_tp_case *c, char *msg, size_t cap);
struct rs_p2p_model;
rs_outcome rs_cf_p2p_one(rs_cf_backend *b, const struct rs_p2p_model *m, char *msg, size_t cap);

#endif
