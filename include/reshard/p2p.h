/* p2p.h - cross-config resharding (SPEC 10): a model (parameters), two parallel configurations of it
 * (explicit per-parameter layouts or Megatron-style templates) over any rank sets, P2P plans that
 * move the model from the source to the destination configuration, and their execution.
 *
 * Rank counts are not capped: a configuration holds allocated rank lists (tens of thousands of ranks
 * are normal), so it does not use rs_mesh (whose rank list is fixed-size); boxes come from the mesh
 * sizes and coordinates alone (rs_box_of_coord). */
#ifndef RESHARD_P2P_H
#define RESHARD_P2P_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "reshard/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rs_p2p_transform { RS_XFORM_NONE = 0, RS_XFORM_MXFP8 = 1 } rs_p2p_transform;

#define RS_MXFP8_BLOCK 32

typedef struct rs_p2p_param {
  char *name;
  rs_tensor t;
  int transform; /* rs_p2p_transform: applied when the parameter lands in the destination config */
  uint64_t key;  /* hash of the name (set by rs_p2p_model_finish): the values' stream */
} rs_p2p_param;

/* A mesh of a configuration: sizes and an allocated row-major rank list. */
typedef struct rs_p2p_mesh {
  int ndim;
  int64_t size[RS_MAX_MESH_DIMS];
  int64_t nranks;
  int32_t *ranks;
  int32_t *pos_of; /* world rank -> position, -1 outside; length = model's world */
} rs_p2p_mesh;

/* Where one parameter lives in one configuration: a mesh (index) and its sharding on it. */
typedef struct rs_p2p_place {
  int32_t mesh;
  rs_sharding s;
} rs_p2p_place;

typedef struct rs_p2p_template {
  int64_t tp, pp, dp, ep;
} rs_p2p_template;

typedef struct rs_p2p_config {
  int32_t nmesh;
  rs_p2p_mesh *mesh;
  rs_p2p_place *place; /* one per parameter */
  int is_template;
  rs_p2p_template tmpl; /* when is_template */
} rs_p2p_config;

enum { RS_P2P_SRC = 0, RS_P2P_DST = 1 };

/* Transformer shape of a Megatron-style model template (SPEC 10). */
typedef struct rs_p2p_arch {
  int64_t layers, hidden, ffn, vocab, experts;
  rs_dtype dtype;
  int bias;              /* 1: qkv/proj/fc1/fc2 biases */
  char mxfp8[8][64];     /* parameter-name suffixes that get the MXFP8 transform */
  int nmxfp8;
} rs_p2p_arch;

typedef struct rs_p2p_model {
  uint64_t seed;
  int64_t nparams;
  rs_p2p_param *param;
  rs_p2p_config cfg[2]; /* RS_P2P_SRC, RS_P2P_DST */
  int32_t world;        /* 1 + the largest rank of either config */
  int arch_set;         /* the parameters came from a template (rs_p2p_arch_params): errors name its fields */
  rs_p2p_arch arch;
} rs_p2p_model;

/* Parse a model file (see docs/p2p.md). On error *out is untouched and rs_last_error() names the
 * field (e.g. "dst.params.layers.0.qkv.weight.placements"). */
rs_status rs_p2p_model_parse(const char *json_text, rs_p2p_model *out);
/* The same from a file; errors name the file first ("PATH: field: ..."). */
rs_status rs_p2p_model_load(const char *path, rs_p2p_model *out);
void rs_p2p_model_free(rs_p2p_model *m);
/* Explicit-layout JSON of the model (templates expanded); malloc'd string. `extra` (may be NULL) is
 * a JSON object text whose members are appended (e.g. the property and message of a regression). */
rs_status rs_p2p_model_to_json(const rs_p2p_model *m, const char *extra, char **out);
/* The same model in template form (model.template and each templated config's template with its
 * explicit "ranks" list; a config given explicitly stays explicit), only when that form parses back
 * to this very model (same explicit JSON); else RS_ERR_INVALID (not made from a template, or changed
 * since, e.g. a shrunk model that lost parameters). malloc'd string. */
rs_status rs_p2p_model_to_template_json(const rs_p2p_model *m, char **out);

/* Builders (used by the parser, props and benches). */
rs_status rs_p2p_arch_params(const rs_p2p_arch *a, rs_p2p_model *m);
/* Config `which` from a template; ranks == NULL means first_rank .. first_rank + tp*pp*dp - 1. */
rs_status rs_p2p_config_template(rs_p2p_model *m, int which, const rs_p2p_arch *a,
                                 const rs_p2p_template *t, const int32_t *ranks, int32_t first_rank);
/* Finish a model whose params and configs are filled: validates, computes world and pos_of. */
rs_status rs_p2p_model_finish(rs_p2p_model *m);

/* Box of parameter p on config `which` at mesh position pos (start, size per tensor dim). */
void rs_p2p_box(const rs_p2p_model *m, int which, int64_t p, int64_t pos, int64_t *start,
                int64_t *size);
/* What `p2p layout` reports for that rank: local shape and global offset as SPEC 4 (and `reshard
 * layout`) report them, from the same core function (an empty sharded dim's offset is its extent). */
void rs_p2p_shape_offset(const rs_p2p_model *m, int which, int64_t p, int64_t pos, int64_t *shape,
                         int64_t *offset);
/* Mesh position of world rank r for parameter p in config which, -1 when r holds nothing of it. */
int64_t rs_p2p_pos(const rs_p2p_model *m, int which, int64_t p, int32_t r);

/* MXFP8 destinations need a local last dim that is a multiple of 32 on every destination rank:
 * RS_ERR_INVALID naming the user's field (template suffix or parameter entry) and the rank otherwise.
 * Part of rs_p2p_model_finish, so every verb refuses the same models. */
rs_status rs_p2p_check_transforms(const rs_p2p_model *m);

/* ---- plans ---- */
typedef struct rs_p2p_xfer {
  int64_t task;
  int32_t param, src, dst; /* world ranks */
  int64_t box;             /* index into plan->coords: start[ndim] then size[ndim] (transfers may share one) */
} rs_p2p_xfer;

typedef struct rs_p2p_plan {
  int64_t n, cap;
  rs_p2p_xfer *x;
  int64_t ncoords, capcoords;
  int64_t *coords;
  int64_t bytes_sent, bytes_local;
  int64_t max_sender_bytes; /* the most bytes one rank sends */
  int64_t senders;          /* ranks that send at least one byte */
} rs_p2p_plan;

void rs_p2p_plan_free(rs_p2p_plan *p);
/* Append a transfer; the box is copied. */
rs_status rs_p2p_plan_add(rs_p2p_plan *p, int64_t task, int32_t param, int32_t src, int32_t dst,
                          int ndim, const int64_t *start, const int64_t *size);
/* Fill bytes_sent, bytes_local, max_sender_bytes and senders from the transfers. */
rs_status rs_p2p_plan_stats(const rs_p2p_model *m, rs_p2p_plan *p);
/* SPEC 10's traffic lower bound: SPEC 7's LB summed over parameters (bytes). */
rs_status rs_p2p_lower_bound(const rs_p2p_model *m, int64_t *lb);
/* The plan as JSON (docs/p2p.md): transfers in plan order, then bytes_sent, bytes_local, lb,
 * max_sender_bytes and senders. */
rs_status rs_p2p_plan_json(const rs_p2p_model *m, const rs_p2p_plan *p, int64_t lb, FILE *f);

/* Check a plan against SPEC 10: every destination element written exactly once, from a rank that
 * holds it in the source config, task ids unique per (src, dst) pair. */
rs_status rs_p2p_plan_verify(const rs_p2p_model *m, const rs_p2p_plan *p);

/* ---- data held by ranks ---- */
/* One rank's local tensor of one parameter: the bytes of its box (row-major) or, for an MXFP8
 * destination, F8_E4M3 bytes plus one E8M0 scale per block of 32 along the last dim. */
typedef struct rs_p2p_local {
  int64_t numel;
  char *data;
  uint8_t *scale; /* MXFP8 only: numel / 32 bytes */
} rs_p2p_local;

/* Locals of every (parameter, position) of a config that this process plays (all ranks when
 * `rank` < 0, else only world rank `rank`). loc[p][pos]; entries not played have data == NULL. */
typedef struct rs_p2p_locals {
  int which;
  int64_t nparams;
  int64_t *npos;
  rs_p2p_local **loc;
  int borrowed; /* 1: data and scale are the caller's (rs_p2p_locals_layout): never freed here */
} rs_p2p_locals;

rs_status rs_p2p_locals_alloc(const rs_p2p_model *m, int which, int32_t rank, rs_p2p_locals *out);
/* The same structure with no buffers: every entry this process plays has its numel set (an MXFP8
 * destination: numel E4M3 bytes and numel / 32 scale bytes) and data == NULL; every other entry
 * has numel 0. The caller points each played entry's data (and scale) at memory of its own, of
 * numel * dtype size bytes (any non-NULL pointer for numel 0), in the local's row-major layout;
 * rs_p2p_opt_execute then writes every element of it and allocates no destination. borrowed is
 * set: rs_p2p_locals_free releases the structure, never the caller's buffers. */
rs_status rs_p2p_locals_layout(const rs_p2p_model *m, int which, int32_t rank, rs_p2p_locals *out);
/* Releases what rs_p2p_locals_alloc/_layout allocated (a borrowed local's buffers stay the caller's). */
void rs_p2p_locals_free(rs_p2p_locals *l);
/* The source config's locals filled with SPEC 8 bits values (plays `rank`, all when < 0). */
rs_status rs_p2p_source_locals(const rs_p2p_model *m, int32_t rank, rs_p2p_locals *out);
/* Element `idx` (row-major global index) of parameter p: a pure function of (seed, name, idx).
 * Parameters with a transform get finite BF16 values (Inf/NaN patterns have their top exponent
 * bit cleared), every other parameter raw bits. */
void rs_p2p_value(const rs_p2p_model *m, int64_t p, int64_t idx, void *out);

/* ---- MXFP8 (SPEC 10) ---- */
/* Quantize n BF16 values (n a multiple of 32) into F8_E4M3 bytes and one E8M0 scale per block.
 * A NaN/Inf fails with RS_ERR_INVALID naming `what` and the block. The plain reference version. */
rs_status rs_mxfp8_quantize_ref(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale,
                                const char *what);

/* ---- reference (ref/p2p): plainest planner and one-process executor ---- */
rs_status rs_p2p_ref_plan(const rs_p2p_model *m, rs_p2p_plan *out);
/* Executes plan over every rank in this process: src (all played) -> out (allocated here). */
rs_status rs_p2p_ref_execute(const rs_p2p_model *m, const rs_p2p_plan *plan,
                             const rs_p2p_locals *src, rs_p2p_locals *out);

/* ---- oracle: expected destination locals from the global tensor, no planner ---- */
rs_status rs_p2p_oracle_expected(const rs_p2p_model *m, int32_t rank, rs_p2p_locals *out);
/* The oracle's own MXFP8 quantizer (nearest entry of the E4M3 code table). */
rs_status rs_p2p_oracle_mxfp8(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale, const char *what);
/* Compare the played locals of `got` with `want`; on a difference RS_ERR_MISMATCH with a message
 * naming rank, parameter, local index and both bit patterns. */
rs_status rs_p2p_compare(const rs_p2p_model *m, const rs_p2p_locals *want,
                         const rs_p2p_locals *got);

/* ---- optimized (opt/p2p; built with opt/) ---- */
struct rs_copy_service;

/* Minimal-traffic, balanced, deterministic plan (the same on every process). */
rs_status rs_p2p_opt_plan(const rs_p2p_model *m, rs_p2p_plan *out);
/* The same plan restricted to the transfers world rank `rank` sends or receives (same task ids and
 * order; bytes_sent, bytes_local, max_sender_bytes and senders are the whole plan's). What one
 * process of a distributed run needs: memory O(its own transfers), not O(the whole plan). */
rs_status rs_p2p_opt_plan_rank(const rs_p2p_model *m, int32_t rank, rs_p2p_plan *out);

typedef struct rs_p2p_exec_stats {
  int64_t local, direct, copy, transform; /* transfers by writeback (local = src == dst) */
  int64_t bytes_sent, bytes_local;        /* by the ranks this process plays */
  int mxfp8_device;                       /* 1 when the MXFP8 quantization ran on a GPU */
  int64_t messages;                       /* posted sends: one per peer pair when coalesced */
  int reused;                             /* out's buffers came from an earlier call */
  /* where the time went, seconds: allocating destinations and accumulators, local copies, packing
   * and posting, waiting for the messages (the copy service's run), unpacking and quantizing */
  double sec_alloc, sec_local, sec_pack, sec_wait, sec_unpack;
  int64_t strided; /* receives the transport wrote straight into a strided box (no staging) */
} rs_p2p_exec_stats;

/* Execute `plan` over copy service cs for the ranks this process plays (`rank` < 0: every rank;
 * src must hold their source locals). out receives their destination locals: it is either zeroed
 * ({0}) and allocated here, or the output of an earlier call for the same model and rank, whose
 * buffers are reused (nothing allocated, every element overwritten), or caller-owned destinations
 * (rs_p2p_locals_layout with every played entry's data set: written in place; a played entry
 * without a buffer is RS_ERR_INVALID naming the parameter and rank, before anything moves). On
 * failure out is released, except caller-owned destinations, which stay as the caller set them up
 * (their bytes unspecified). Staging buffers are pooled in
 * cs across calls. With one played rank (rank >= 0) every peer pair's transfers travel as one
 * message (packed in plan order, tagged with the pair's first task id). */
rs_status rs_p2p_opt_execute(const rs_p2p_model *m, const rs_p2p_plan *plan, struct rs_copy_service *cs,
                             int32_t rank, const rs_p2p_locals *src, rs_p2p_locals *out,
                             rs_p2p_exec_stats *stats);
/* opt's MXFP8 quantizer (CPU; the CUDA kernel matches it bit for bit). */
rs_status rs_mxfp8_quantize_opt(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale, const char *what);

#ifdef __cplusplus
}
#endif
#endif
