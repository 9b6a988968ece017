/* suite.h - what the suite drivers of `reshard conform` share (internal to conform/): the run
 * (options, backend, result, the replay command), report items, fixture corpora, saved failures. */
#ifndef RS_CONFORM_SUITE_H
#define RS_CONFORM_SUITE_H

#include "conform/conform.h"
#include "props/props.h"
#include "props/report_html.h"

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
  const char *fixtures; /* the fixtures/ folder, NULL when there is none (or --shard K/N, K > 1) */
  const char *failures; /* where failures are saved */
  char replay[2048];    /* "reshard conform --backend '<spec>' --replay" */
  int jobs;             /* workers of each campaign: --jobs, at most the backend's max_instances */
} rs_cf_run;

/* The runner's worker hooks of every suite campaign (ctx: the rs_cf_run): each forked worker runs
 * its own backend (rs_cf_backend_worker_start / _stop). */
rs_status rs_cf_worker_init(void *run, int worker);
void rs_cf_worker_exit(void *run);
/* The runner's fields of a suite campaign's options (rs_campaign_opts, rs_tp_check_opts and
 * rs_p2p_campaign name them alike): the run's worker count, --shard K/N and --case-timeout, and the
 * worker hooks above on the run. A macro: the three option structs are different types. */
#define RS_CF_RUNNER_OPTS(opts, run)               \
  do {                                             \
    (opts).jobs = (run)->jobs;                     \
    (opts).shard_k = (run)->o->shard_k;            \
    (opts).shard_n = (run)->o->shard_n;            \
    (opts).case_timeout = (run)->o->case_timeout;  \
    (opts).worker_init = rs_cf_worker_init;        \
    (opts).worker_exit = rs_cf_worker_exit;        \
    (opts).worker_ctx = (run);                     \
  } while (0)
/* After a suite's campaign: what a dead worker left running is killed (no backend outlives
 * conform), and the campaign's runner object (may be NULL) is kept for the --json report with the
 * --max-skip-share gate added on its sums (skip of total cases), so `reshard report merge` judges
 * the gate too. */
void rs_cf_campaign_done(rs_cf_run *run, unsigned suite, struct cJSON *runner, int64_t skip, int64_t total);
/* A suite's campaign stopped with an error (st): the item fails with its message; a worker that hung
 * past --case-timeout (not a --max-timeouts stop) or a case out of memory is kept for the exit
 * status. */
void rs_cf_campaign_error(rs_cf_run *run, rs_cf_item *it, rs_status st);
/* --max-timeouts, as the runner's stop hook (ctx: the backend): a message once the backend stopped
 * being asked, NULL before. */
const char *rs_cf_gave_up(void *backend);

/* A new item of the report (zeroed, named); NULL on out of memory. */
rs_cf_item *rs_cf_add_item(rs_cf_result *r, unsigned suite, int fixture, const char *name);
/* The first failure of `it` was saved as `path`: kept with the command that replays it. */
void rs_cf_item_saved(const rs_cf_run *run, rs_cf_item *it, const char *path);
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

/* "2x2 (ranks 0,1,2,3)": a mesh as the --report page names it. */
void rs_cf_mesh_text(int ndim, const int64_t *size, const int32_t *ranks, int64_t nranks, char *text, size_t cap);
/* Of n named things (name(set, i)), the one whose name msg holds (the longest such), else 0. */
int64_t rs_cf_named(const char *msg, const char *(*name)(const void *, int64_t), const void *set, int64_t n);
/* One tensor of a failing case drawn on the --report page, nothing marked: [0] source, [1]
 * destination; boxes malloc'd (freed by rs_cf_draw_add), mesh as rs_cf_mesh_text names it. */
typedef struct rs_cf_drawing {
  rs_dtype dtype;
  int ndim;
  const int64_t *shape;
  const rs_sharding *sh[2];
  rs_html_box *box[2];
  int n[2];
  char mesh[2][512];
} rs_cf_drawing;
/* Add the failure (message, then "(drawn: NOTE)", replay, the saved text) with d drawn; frees d's
 * boxes. */
rs_status rs_cf_draw_add(struct rs_html *h, const char *name, const char *message, const char *replay,
                         const char *text, const char *note, rs_cf_drawing *d);
/* The same for a checkpoint case: the tensor the message names (else the first), its boxes as
 * saved and as loaded, nothing marked. */
rs_status rs_cf_ckpt_draw(rs_cf_backend *b, struct rs_html *h, const char *name, const char *text,
                          const char *message, const char *replay);

/* "the capability 'tp'" and the like, for messages. */
const char *rs_cf_caps_text(unsigned caps);
/* 1 when the backend has one of caps; else a skipped item (named `name`) saying what it lacks. */
int rs_cf_require(rs_cf_run *run, unsigned suite, unsigned caps, const char *name);
/* Count one fixture case's outcome in it. The item's first failure is saved with save(ctx, msg,
 * path, cap) (NULL: not saved), printed with its replay command. */
typedef rs_status (*rs_cf_save_fn)(void *ctx, const char *msg, char *path, size_t cap);
void rs_cf_tally(const rs_cf_run *run, rs_cf_item *it, rs_outcome o, const char *where, const char *msg,
                 rs_cf_save_fn save, void *ctx);

/* Replay one saved failure (the file's text) of a suite against b; *bad = 1 (msg says why) when
 * the text is not such a file. */
typedef rs_outcome (*rs_cf_replay_fn)(rs_cf_backend *b, const char *text, char *msg, size_t cap, int *bad);
rs_outcome rs_cf_redistribute_replay(rs_cf_backend *b, const char *text, char *msg, size_t cap, int *bad);
rs_outcome rs_cf_tp_replay(rs_cf_backend *b, const char *text, char *msg, size_t cap, int *bad);
rs_outcome rs_cf_p2p_replay(rs_cf_backend *b, const char *text, char *msg, size_t cap, int *bad);
/* The --report page's drawing of a failing redistribute case (text: the saved case): run against b
 * once more, both layouts drawn with every element that differs from the oracle marked. An error
 * (the text is not a case) leaves the page to say less. */
rs_status rs_cf_redistribute_draw(rs_cf_backend *b, struct rs_html *h, const char *name, const char *text,
                                  const char *message, const char *replay);
/* The same for a P2P model: the parameter the message names (else the first) drawn, its source
 * and destination boxes over its global tensor, nothing marked (b is not run). */
rs_status rs_cf_p2p_draw(rs_cf_backend *b, struct rs_html *h, const char *name, const char *text,
                         const char *message, const char *replay);
rs_outcome rs_cf_ckpt_replay(rs_cf_backend *b, const char *text, char *msg, size_t cap, int *bad);

#endif
