/* ckpt.h - checkpoint properties: generators of state specs drawn from the choice stream (one per
 * kind of thing: a layout, a tensor, an object, a whole save/load pair), the SPEC 11 properties,
 * and the campaign behind `reshard ckpt check` with shrinking and regression fixtures. */
#ifndef RS_PROPS_CKPT_H
#define RS_PROPS_CKPT_H

#include "props/props.h"
#include "reshard/ckpt.h"

/* A generated case: A saved on N ranks, A2 = the same tensors on M ranks in other layouts, B =
 * what is loaded (A2 with keys dropped or added, padded shapes where allow_shape_mismatch). */
typedef struct rs_ckpt_case {
  rs_state_spec a, a2, b;
  rs_strict strict;
} rs_ckpt_case;

rs_status rs_gen_ckpt_case(rs_choices *ch, rs_ckpt_case *out);
/* The aligned variant of a case (the ckpt_opt property draws it under O_DIRECT): adds to A, A2 and
 * B the key "aligned.weight", F64 rows of 4096 bytes (2 to 8 rows), replicated or split on its rows
 * only, so that every chunk of it is a multiple of 4096 bytes; it sorts first among the 8-byte
 * entries, so a rank file's data starts with it on a 4096-byte boundary. */
rs_status rs_gen_ckpt_aligned(rs_choices *ch, rs_ckpt_case *c);
void rs_ckpt_case_free(rs_ckpt_case *c);

typedef enum rs_ckpt_prop {
  RS_CKPT_PROP_VALID = 0,  /* validation accepts every generated state (A, A2, B) */
  RS_CKPT_PROP_REJECT,     /* a planted overlap, gap, dtype or shape disagreement is rejected by name */
  RS_CKPT_PROP_LOAD,       /* save A, load B == oracle; strict mode reports exactly the right keys */
  RS_CKPT_PROP_EXPORT,     /* export of A's and A2's checkpoints byte-identical */
  RS_CKPT_PROP_CRASH,      /* power loss at any I/O op of a save: latest loads, old or new, correct */
  RS_CKPT_PROP_CORRUPT,    /* one flipped byte anywhere: load and verify both refuse */
  RS_CKPT_PROP_COUNT
} rs_ckpt_prop;

const char *rs_ckpt_prop_name(rs_ckpt_prop p);
rs_status rs_ckpt_prop_parse(const char *name, rs_ckpt_prop *out);

/* Runs property p on the case drawn from ch (draws for the property itself come after the case).
 * `dir` is a scratch directory (emptied before use). */
rs_outcome rs_ckpt_prop_run(rs_ckpt_prop p, rs_choices *ch, const char *dir, char *msg, size_t cap);

typedef struct rs_ckpt_campaign {
  uint64_t seed;
  int64_t cases;
  double seconds;
  const char *regress_dir;
  const char *scratch;
  int quiet;
  int shrink_runs;
  /* the runner (props/runner.h), as rs_campaign_opts: --jobs N forked workers (1: this process;
   * an MPI campaign keeps 1), --shard K/N, the seconds one case may run in a worker before it is
   * called hung (0: the runner's default), hooks run in each forked worker before its first and
   * after its last case, and --distribute (NULL: not distributed). Each worker works in a scratch
   * directory of its own under the campaign's. */
  int jobs, shard_k, shard_n;
  double case_timeout;
  rs_status (*worker_init)(void *ctx, int worker);
  void (*worker_exit)(void *ctx);
  void *worker_ctx;
  struct rs_run_dist *dist;
} rs_ckpt_campaign;

typedef struct rs_ckpt_campaign_result {
  int64_t cases;
  double seconds;
  int failed;          /* failed properties, and 1 more when a worker crashed */
  int64_t pass[RS_CKPT_PROP_COUNT], fail[RS_CKPT_PROP_COUNT], skip[RS_CKPT_PROP_COUNT];
  char message[RS_CKPT_PROP_COUNT][1024]; /* the shrunk failure of each failed property */
  char fixture[RS_CKPT_PROP_COUNT][1024]; /* its regression fixture ("" when not written) */
  char verb[64];       /* the runner object's verb: "ckpt check", "ckpt check --impl both" */
  rs_run_result run;   /* what the runner counted (--impl both: ref's properties, then ckpt_opt) */
} rs_ckpt_campaign_result;

/* The reference campaign: case i is drawn from rs_hash3(seed, "ckpt", i) only, and every property
 * runs on every case (each from the start of the case's stream), so --jobs does not change what
 * runs; each property's first failure (lowest case index) is shrunk afterwards in this process,
 * saved as a fixture and printed with its replay command. RS_OK when it ran (failures are in r);
 * RS_ERR_NOMEM when a case ran out of memory, RS_ERR_TIMEOUT when a worker hung (--case-timeout). */
rs_status rs_ckpt_campaign_run(const rs_ckpt_campaign *o, rs_ckpt_campaign_result *r);
/* CI reports of a campaign: JUnit XML (one testcase per property, failures carry the shrunk
 * message and the replay command) and JSON (counts per property, failures, seed, timing). */
/* r: the reference campaign's result, NULL when it did not run (--impl opt); opt: the ckpt_opt
 * cross property's (struct rs_ckpt_opt_campaign_result, props/ckpt_opt.h), NULL when it did not run
 * (--impl ref). --impl both reports both in one file. */
struct rs_ckpt_opt_campaign_result;
rs_status rs_ckpt_report_junit(const char *path, const rs_ckpt_campaign *o, const rs_ckpt_campaign_result *r,
                               const struct rs_ckpt_opt_campaign_result *opt);
rs_status rs_ckpt_report_json(const char *path, const rs_ckpt_campaign *o, const rs_ckpt_campaign_result *r,
                              const struct rs_ckpt_opt_campaign_result *opt);
/* The runner object of that report (props/runner.h: counts, first failing indices, features, the
 * verdict) that `reshard report merge` adds up over shards. */
struct cJSON;
struct cJSON *rs__ckpt_runner_json(const rs_ckpt_campaign *o, const rs_ckpt_campaign_result *r,
                                   const struct rs_ckpt_opt_campaign_result *opt);
/* Replays a regression fixture (property + choice stream); *failed = 1 if it still fails. */
rs_status rs_ckpt_replay(const char *path, const char *scratch, int *failed, char *msg, size_t cap);
/* ---- props-internal (ckpt_fixture.c), shared by the ref and opt checkpoint campaigns ---- */
/* The stream of the failing case ch shrunk by still_fails in at most max_runs runs (malloc'd,
 * *n draws, *runs runs; NULL: out of memory); msg (cap bytes) ends as the shrunk case's message. */
uint64_t *rs__ckpt_shrink(rs_stream_pred still_fails, void *ctx, const rs_choices *ch, char *msg, size_t cap,
                          int max_runs, size_t *n, int *runs);
/* dir/<prop>-<xxh3 of the stream>.json: property, message, choices and the decoded specs; path
 * gets the file's name ("" when it could not be created). */
rs_status rs__ckpt_write_fixture(const char *dir, const char *prop, const uint64_t *v, size_t n, const char *msg,
                                 char *path, size_t cap);
/* A whole file (malloc'd, *n bytes and a NUL after them); 0 when it cannot be read (ckpt_props.c). */
int rs__ckpt_file_bytes(const char *path, uint8_t **b, size_t *n);
/* `latest` of dir names step1 or step2 and loads (ref, raise_all) as the oracle of that step's
 * spec, and verify passes: what every interrupted save must leave (ckpt_props.c). */
rs_outcome rs__ckpt_check_latest(const char *dir, int64_t step1, const rs_state_spec *s1, int64_t step2,
                                 const rs_state_spec *s2, char *msg, size_t cap);
/* A copy of spec s with every tensor and object seed moved by shift (other values, same layout). */
rs_status rs__ckpt_shifted_spec(const rs_state_spec *s, uint64_t shift, rs_state_spec *out);
/* Bytes of the regular *.safetensors files of a step directory. */
int64_t rs__ckpt_dir_bytes(const char *dir);
/* Replaces file by a symbolic link to an identical copy at `outside` (kind 0) or by a FIFO
 * (kind 1); 0 when it could not. */
int rs__ckpt_plant_kind(const char *file, int kind, const char *outside);
/* metadata.json bytes m (n bytes) get a fresh digest line for what follows it (hostile edits). */
void rs__ckpt_reseal(char *m, size_t n);
/* verify, ref load (spec a) and export must each refuse the planted file kind, naming it. */
rs_outcome rs__ckpt_kind_refused(const char *dir, const rs_state_spec *a, const char *path, int kind, char *msg,
                                 size_t cap);
/* Removes a directory tree (scratch directories of the properties and tests). */
void rs_ckpt_rmtree(const char *dir);
/* A campaign's working directory, always one of its own: "<base>/reshard-<what>-<tag>" where base
 * is the user's --scratch (made when missing) or /dev/shm (else /tmp). Every case empties only
 * this directory; nothing else under base is ever touched (a campaign that emptied --scratch itself
 * deleted whatever the user kept there). Writes the path into out. */
void rs_ckpt_scratch_path(const char *base, const char *what, long tag, char *out, size_t cap);

#endif
