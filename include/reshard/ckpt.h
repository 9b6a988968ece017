/* ckpt.h - distributed checkpoints (SPEC 11): sharded state dicts in Megatron-Core's
 * dist_checkpointing model (ShardedTensor, ShardedObject, factories, LocalNonpersistentObject,
 * common entries), the JSON "state spec" that describes every rank's state dict compactly, the
 * validation of all ranks' metadata, the reference save/load with the commit protocol, and the
 * format tools (verify, inspect, export). The on-disk format is one directory per step holding
 * safetensors data files and metadata.json (a DCP ChunkStorageMetadata list per key). */
#ifndef RESHARD_CKPT_H
#define RESHARD_CKPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "reshard/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_CKPT_FORMAT "reshard-ckpt"
#define RS_CKPT_VERSION 1
#define RS_CKPT_BLOCK (1 << 20)           /* xxh3-64 digest block of data files (default) */
#define RS_CKPT_MAX_HEADER (100 << 20)    /* safetensors header cap (as the Rust reader) */

/* Megatron's ReplicaId: an int or a tuple of ints; main when 0 or all zeros. */
typedef struct rs_replica_id {
  int is_tuple;
  int n; /* entries of v (1 for the int form) */
  int64_t v[RS_MAX_MESH_DIMS + 1];
} rs_replica_id;

/* ShardedTensor: shapes count every axis, prepended ones included (their local size is 1).
 * data holds numel(local_shape) elements row-major, or flat_stop - flat_start elements when
 * has_flat (the slice of the row-major flattening of local_shape). */
typedef struct rs_sh_tensor {
  char *key;
  rs_dtype dtype;
  int ndim;
  int64_t global_shape[RS_MAX_DIMS], global_offset[RS_MAX_DIMS], local_shape[RS_MAX_DIMS];
  int has_axis_frag;
  int64_t axis_frag[RS_MAX_DIMS];
  rs_replica_id replica;
  int prepend_axis_num;
  int allow_shape_mismatch;
  int has_flat;
  int64_t flat_start, flat_stop;
  uint8_t *data;
  int64_t nbytes;
  int loaded;  /* set by load when every requested element arrived */
  int factory; /* index+1 of the factory that built it (0: a plain entry) */
} rs_sh_tensor;

/* ShardedObject: shapes and offsets count shards; the unique key is key/shard_<offs>_<shape>. */
typedef struct rs_sh_object {
  char *key;
  int ndim;
  int64_t global_shape[RS_MAX_DIMS], global_offset[RS_MAX_DIMS];
  rs_replica_id replica;
  uint8_t *data;
  int64_t len;
  int loaded;
} rs_sh_object;

typedef enum rs_factory_kind {
  RS_FACTORY_GLU = 0, /* fused [W; V] split along `dim` into two entries of one key */
  RS_FACTORY_FLAT = 1 /* a distributed optimizer's flat fragment [flat_start, flat_stop) */
} rs_factory_kind;

/* ShardedTensorFactory: `src` is the tensor as the model holds it (never flattened); build turns
 * it into entries of the state dict, merge writes the loaded entries back into src.data. */
typedef struct rs_sh_factory {
  rs_factory_kind kind;
  rs_sh_tensor src;
  int glu_dim;
  int64_t flat_start, flat_stop;
} rs_sh_factory;

/* A key and an opaque byte string (common entries, LocalNonpersistentObject). */
typedef struct rs_kv {
  char *key;
  uint8_t *val;
  int64_t len;
} rs_kv;

/* One rank's sharded state dict. */
typedef struct rs_state_dict {
  int rank;
  rs_sh_tensor *t;
  int nt, capt;
  rs_sh_object *o;
  int no, capo;
  rs_sh_factory *f;
  int nf, capf;
  rs_kv *common;
  int ncommon, capc;
  rs_kv *nonpersistent;
  int nnp, capn;
} rs_state_dict;

/* Every rank's state dict (ranks 0..n-1). */
typedef struct rs_ckpt_world {
  int n;
  rs_state_dict *sd;
} rs_ckpt_world;

int rs_replica_is_main(const rs_replica_id *r);
/* "key/shard_0.1_2.2" into buf; returns the length it needs (snprintf-style). */
int rs_sh_object_unique_key(const rs_sh_object *o, char *buf, size_t cap);

rs_status rs_ckpt_world_init(rs_ckpt_world *w, int nranks);
void rs_ckpt_world_free(rs_ckpt_world *w);
void rs_state_dict_free(rs_state_dict *sd);
/* Append copies (key and data are duplicated). */
rs_status rs_sd_add_tensor(rs_state_dict *sd, const rs_sh_tensor *t);
rs_status rs_sd_add_object(rs_state_dict *sd, const rs_sh_object *o);
rs_status rs_sd_add_factory(rs_state_dict *sd, const rs_sh_factory *f);
rs_status rs_sd_add_kv(rs_kv **arr, int *n, int *cap, const char *key, const void *val, int64_t len);
/* Element count of the data an entry holds and its byte size (overflow-checked). */
rs_status rs_sh_tensor_numel(const rs_sh_tensor *t, int64_t *numel, int64_t *nbytes);

/* Factories (Megatron's apply_factories / apply_factory_merges): build appends the built entries
 * (marked with factory = index+1) to the state dict; merge writes the loaded entries back into the
 * factory's src.data and removes them. A built entry that was not loaded leaves src unchanged. */
rs_status rs_sd_apply_factories(rs_state_dict *sd);
rs_status rs_sd_apply_factory_merges(rs_state_dict *sd);

/* ---- the state spec (JSON) ---- */
typedef struct rs_spec_tensor {
  char *key;
  rs_dtype dtype;
  rs_tensor t;        /* global shape */
  uint64_t seed;
  rs_mesh mesh;
  rs_sharding sh;     /* no Partial */
  int flatten_dim;    /* -1, or a Replicate mesh dim whose coordinates split the flattened box */
  int prepend;        /* leading axes exploded into one entry per index (prepend_axis_num) */
  int allow_shape_mismatch;
  int factory;        /* -1 none, RS_FACTORY_GLU (dim glu_dim), RS_FACTORY_FLAT (needs flatten) */
  int glu_dim;
} rs_spec_tensor;

typedef struct rs_spec_object {
  char *key;
  uint64_t seed;
  rs_mesh mesh;
  int ndims;          /* mesh dims that index shards, in order; the others are replicas */
  int dims[RS_MAX_MESH_DIMS];
} rs_spec_object;

typedef struct rs_state_spec {
  int world;          /* ranks 0..world-1 */
  rs_spec_tensor *t;
  int nt;
  rs_spec_object *o;
  int no;
  rs_kv *common;
  int ncommon;
  rs_kv *nonpersistent;
  int nnp;
} rs_state_spec;

rs_status rs_state_spec_from_json(const char *text, rs_state_spec *out);
/* Errors name the file first ("PATH: field: ..."). */
rs_status rs_state_spec_from_file(const char *path, rs_state_spec *out);
/* malloc'd JSON text (the form the parser reads back). */
char *rs_state_spec_to_json(const rs_state_spec *s);
void rs_state_spec_free(rs_state_spec *s);
rs_status rs_state_spec_copy(const rs_state_spec *s, rs_state_spec *out);

typedef enum rs_fill {
  RS_FILL_VALUES = 0, /* SPEC 8 raw bits of the global tensor (what a trainer saves) */
  RS_FILL_INITIAL = 1, /* the destination's prior content, a pattern the oracle also knows */
  RS_FILL_NONE = 2     /* not filled (a load overwrites every byte: `ckpt reshard`'s target) */
} rs_fill;

/* Every rank's state dict of a spec, with factories not yet applied. */
rs_status rs_state_spec_build(const rs_state_spec *s, rs_fill fill, rs_ckpt_world *w);
/* The same world with only rank `only`'s state dict built (the others empty, their rank set): what
 * one process of an MPI run holds. only < 0 builds every rank, as rs_state_spec_build. */
rs_status rs_state_spec_build_rank(const rs_state_spec *s, rs_fill fill, int only, rs_ckpt_world *w);

/* Values: element `idx` (row-major flat index in the global shape) of tensor `key`. */
void rs_ckpt_value(uint64_t seed, const char *key, rs_dtype dt, int64_t idx, void *out);
/* The prior content of a destination element (local flat index) on `rank`. */
void rs_ckpt_initial(int rank, const char *key, rs_dtype dt, int64_t idx, void *out);
/* Object bytes: a pure function of (seed, unique key); *len set, out needs 64 bytes. */
void rs_ckpt_object_value(uint64_t seed, const char *unique_key, uint8_t *out, int64_t *len);

/* ---- validation (SPEC 11) over all ranks' state dicts (after apply_factories) ---- */
rs_status rs_ckpt_validate(const rs_ckpt_world *w);

/* ---- strict handling of missing / unexpected keys (Megatron's StrictHandling) ---- */
typedef enum rs_strict {
  RS_STRICT_ASSUME_OK_UNEXPECTED = 0,
  RS_STRICT_LOG_UNEXPECTED,
  RS_STRICT_LOG_ALL,
  RS_STRICT_RAISE_UNEXPECTED,
  RS_STRICT_RAISE_ALL,
  RS_STRICT_RETURN_UNEXPECTED,
  RS_STRICT_RETURN_ALL,
  RS_STRICT_IGNORE_ALL,
  RS_STRICT_COUNT
} rs_strict;
const char *rs_strict_name(rs_strict s);
rs_status rs_strict_parse(const char *name, rs_strict *out);

/* Sorted, distinct key lists. A key is a tensor's key or an object's unique key. Unexpected:
 * requested by some rank, absent from the checkpoint. Missing: in the checkpoint, requested by no
 * rank. Each list is filled only when the mode logs, returns or raises that kind. */
typedef struct rs_ckpt_report {
  char **missing;
  int nmissing;
  char **unexpected;
  int nunexpected;
  int64_t tensors_loaded, objects_loaded, bytes_read;
} rs_ckpt_report;
void rs_ckpt_report_free(rs_ckpt_report *r);

/* ---- the reference save and load (ref/ckpt) ---- */
typedef struct rs_ckpt_io_opts {
  int64_t crash_at;   /* > 0: simulate a power loss at the crash_at-th I/O operation (past the
                       * last one: right after the save completed) */
  int64_t kill_at;    /* > 0: SIGKILL this process at the kill_at-th I/O operation */
  FILE *log;          /* where log_* strict modes write (NULL: stderr) */
  int64_t block;      /* digest block size of a save: a power of two in [64, 2^30]; 0: 1 MiB */
} rs_ckpt_io_opts;

/* Saves the world (factories applied, validated) under root/step_<step>/ and commits `latest`.
 * Returns RS_ERR_IO with "simulated crash" when io->crash_at stopped it. *ops (optional) gets the
 * number of I/O operations performed. */
rs_status rs_ref_ckpt_save(rs_ckpt_world *w, const char *root, int64_t step,
                           const rs_ckpt_io_opts *io, int64_t *ops);
/* Loads into the world's buffers (factories applied and merged inside). step < 0: `latest`. */
rs_status rs_ref_ckpt_load(rs_ckpt_world *w, const char *root, int64_t step, rs_strict strict,
                           const rs_ckpt_io_opts *io, rs_ckpt_report *rep);
/* The step `latest` names (RS_ERR_INVALID when there is none). */
rs_status rs_ckpt_latest(const char *root, int64_t *step);
/* A root (uses latest) or a step directory -> the step directory path (malloc'd). */
rs_status rs_ckpt_resolve_dir(const char *dir, char **stepdir);

/* Every digest, the safetensors headers against metadata, chunks tiling every tensor, metadata
 * rules. RS_ERR_IO / RS_ERR_MISMATCH on integrity failures, RS_ERR_INVALID on unreadable input. */
rs_status rs_ckpt_verify(const char *dir, FILE *out);
rs_status rs_ckpt_inspect(const char *dir, int json, FILE *out);
/* Whole tensors (and objects as U8, common entries in __metadata__) into one safetensors file;
 * the bytes depend only on the checkpoint's content, never on the layout that saved it. */
rs_status rs_ckpt_export(const char *dir, const char *out_path);

/* What a checkpoint holds, as a spec the oracle can use: the load spec's tensors and objects that
 * the checkpoint has, with the stored dtype and global shape (seeds are the load spec's claim). */
rs_status rs_ref_ckpt_catalog(const char *root, int64_t step, const rs_state_spec *load, rs_state_spec *saved);

/* ---- the oracle (oracle/ckpt.c) ---- */
/* Fills every rank's expected local bytes (after load and factory merges) into `expect`, built
 * from the load spec with RS_FILL_INITIAL and then overwritten where the checkpoint supplies
 * values. skip_unexpected: keys absent from the checkpoint keep their initial content. */
rs_status rs_oracle_ckpt_expected(const rs_state_spec *saved, const rs_state_spec *load,
                                  rs_ckpt_world *expect);
/* Compares loaded against expected: first difference as "rank r key K local index i: ...". */
rs_status rs_oracle_ckpt_compare(const rs_ckpt_world *expect, const rs_ckpt_world *got, char *msg,
                                 size_t cap);

#ifdef __cplusplus
}
#endif
#endif
