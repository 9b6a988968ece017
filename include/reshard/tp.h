/* tp.h - tensor-parallel styles (SPEC 12): modules (Linear, Embedding, a norm), the styles of
 * PyTorch's torch.distributed.tensor.parallel (Colwise, Rowwise, Sequence, PrepareModuleInput,
 * PrepareModuleOutput), a plan of styles over a chain of modules on the TP mesh dim of a 1-d or
 * 2-d (TP x DP) mesh, the sharded forward (ref and opt), the unsharded forward (oracle) and a case
 * JSON codec.
 *
 * The forward is a chain: module i's output is module i+1's input (a transformer block without the
 * attention core and the residuals, which do not change where anything is placed). Values are F32;
 * token ids are I64. The norm is the affine part of RMSNorm/LayerNorm: y[..., j] = x[..., j] * w[j]
 * (the normalization itself is left out: it is not exact, and placement does not depend on it). */
#ifndef RESHARD_TP_H
#define RESHARD_TP_H

#include "reshard/case.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rs_tp_style_kind {
  RS_TP_COLWISE = 0,        /* ColwiseParallel */
  RS_TP_ROWWISE = 1,        /* RowwiseParallel */
  RS_TP_SEQUENCE = 2,       /* SequenceParallel: parameters replicated, input S(sequence_dim) */
  RS_TP_REPLICATE = 3,      /* no style: parameters replicated, local compute on local tensors */
  RS_TP_PREPARE_INPUT = 4,  /* PrepareModuleInput (parameters replicated) */
  RS_TP_PREPARE_OUTPUT = 5, /* PrepareModuleOutput (parameters replicated) */
  RS_TP_STYLE_COUNT
} rs_tp_style_kind;

typedef enum rs_tp_module_kind {
  RS_TP_LINEAR = 0,    /* weight [out, in], optional bias [out]; y = x W^T + b */
  RS_TP_EMBEDDING = 1, /* weight [vocab, dim]; y = W[id] */
  RS_TP_NORM = 2,      /* weight [dim]; y = x * w along the last dim */
  RS_TP_LAYERNORM = 3, /* nn.LayerNorm(dim, eps=1e-5): weight [dim], optional bias [dim] */
  RS_TP_RMSNORM = 4,   /* nn.RMSNorm(dim, eps=None: F32 machine epsilon): weight [dim] */
  RS_TP_MODULE_COUNT
} rs_tp_module_kind;

/* The dtype of a case's hidden states, parameters and output (JSON "dtype", default F32). Values
 * are exact integers (SPEC 8), so every sum of the forward is representable in the dtype: the
 * forward runs in F32 and its output is converted (round to nearest even) to the dtype, which is
 * bit for bit what dtype arithmetic in any order gives. rs_tp_case_validate bounds the sums by the
 * dtype's exact integers (2^24, 2^11, 2^8). */
typedef enum rs_tp_dtype { RS_TP_F32 = 0, RS_TP_BF16 = 1, RS_TP_F16 = 2, RS_TP_DTYPE_COUNT } rs_tp_dtype;
rs_dtype rs_tp_dtype_of(rs_tp_dtype d);

typedef enum rs_tp_param_kind { RS_TP_WEIGHT = 0, RS_TP_BIAS = 1 } rs_tp_param_kind;

/* The style arguments a case may omit (rs_tp_style.omitted): an omitted argument takes PyTorch's
 * default. PrepareModuleInput's input_layouts and desired_input_layouts default to None (the style
 * then does nothing); PrepareModuleOutput has no defaults (omitting either is refused, as PyTorch's
 * constructor refuses it). */
enum {
  RS_TP_ARG_INPUT = 1,
  RS_TP_ARG_DESIRED_INPUT = 2,
  RS_TP_ARG_OUTPUT = 4,
  RS_TP_ARG_DESIRED_OUTPUT = 8,
  RS_TP_ARG_USE_LOCAL = 16,
  RS_TP_ARG_SEQUENCE_DIM = 32
};

/* A style and its arguments; layouts are placements on the TP mesh dim. Fields a style does not
 * take are ignored. rs_tp_style_default fills PyTorch's defaults. */
typedef struct rs_tp_style {
  rs_tp_style_kind kind;
  rs_placement input_layout;   /* Colwise (R), Rowwise (S(-1)), PrepareModuleInput */
  rs_placement desired_input;  /* PrepareModuleInput; Colwise: R; Rowwise: S(-1), embedding R */
  rs_placement output_layout;  /* Colwise (S(-1)), Rowwise (R), PrepareModuleOutput (declared) */
  rs_placement desired_output; /* PrepareModuleOutput */
  int use_local_output;        /* Colwise/Rowwise/PrepareModuleOutput: 1; Sequence/Input: 0 */
  int sequence_dim;            /* Sequence: 1 */
  unsigned omitted;            /* RS_TP_ARG_* the case leaves to PyTorch's defaults */
} rs_tp_style;

#define RS_TP_MAX_MODULES 32
#define RS_TP_PATH_LEN 64

typedef struct rs_tp_module {
  char path[RS_TP_PATH_LEN]; /* "mlp.fc1": the plan's key */
  rs_tp_module_kind kind;
  int64_t in, out;           /* Linear: in/out features; Embedding: vocab/dim; norms: dim/dim */
  int bias;                  /* Linear and LayerNorm */
  rs_tp_style style;
} rs_tp_module;

/* A case: a mesh, the TP mesh dim, the activations' batch and sequence sizes, the input (token ids
 * [batch, seq] before an Embedding, else hidden states [batch, seq, in]) as local tensors of
 * `input_layout`, and the chain of modules with their styles. On a 2-d mesh the other mesh dim is
 * data parallel: activations are `dp_layout` there (R or S(0), the batch), parameters R. */
typedef struct rs_tp_case {
  char name[128];
  rs_mesh mesh;
  int tp_dim;
  rs_placement dp_layout;
  int64_t batch, seq;
  rs_placement input_layout;
  int nmod;
  rs_tp_module mod[RS_TP_MAX_MODULES];
  uint64_t seed;
  int64_t vmax; /* values are integers in [-vmax, vmax] (biases: times the TP size); default 2 */
  rs_tp_dtype dtype;
} rs_tp_case;

void rs_tp_style_default(rs_tp_style_kind kind, rs_tp_style *out);
const char *rs_tp_style_name(rs_tp_style_kind style);
const char *rs_tp_module_name(rs_tp_module_kind kind);
/* Placement on the TP mesh dim of a module's parameter under a style (the one definition of
 * column and row parallel, shared with the cross-config resharding templates). */
rs_status rs_tp_param_placement(rs_tp_style_kind style, rs_tp_module_kind module,
                                rs_tp_param_kind param, rs_placement *out);

/* Validate a case (sizes, mesh, layouts, and that every module receives the layout its style
 * declares) and normalize negative shard dims. Errors name the module path and the field. */
rs_status rs_tp_case_validate(rs_tp_case *c);
rs_status rs_tp_case_from_json(const char *text, rs_tp_case *out);
/* Errors name the file first ("PATH: field: ..."). */
rs_status rs_tp_case_from_file(const char *path, rs_tp_case *out);
char *rs_tp_case_to_json(const rs_tp_case *c); /* malloc'd; NULL with rs_last_error */

/* The transformer block plans: "tp" (Megatron-style: vocab-parallel embedding, column-parallel QKV
 * and fc1, row-parallel output projection and fc2, replicated norms, column-parallel output layer
 * with a replicated output) and "sp" (the same with sequence parallelism: norms SequenceParallel,
 * row-parallel outputs S(1), column-parallel inputs S(1)). Modules: tok_embeddings, attention_norm,
 * attention.wqkv (hidden -> 3 hidden), attention.wo (3 hidden -> hidden), ffn_norm, feed_forward.w1,
 * feed_forward.w2, norm, output. Fills c->mod/nmod/input_layout; other fields are the caller's. */
rs_status rs_tp_block_plan(const char *kind, int64_t vocab, int64_t hidden, int64_t ffn, int bias,
                           rs_tp_case *c);

/* Where the forward's collectives are counted: kind of collective per module (steps on mesh dims of
 * size 1, chunks and partitions communicate nothing and are not counted, as in PyTorch). */
typedef struct rs_tp_result {
  rs_tensor out_tensor;      /* the output's global shape and dtype (the case's) */
  rs_sharding out_layout;    /* its layout on the whole mesh */
  int out_is_local;          /* 1: a local tensor (use_local_output), 0: a DTensor */
  rs_locals out;             /* each rank's local output, by mesh position */
  int64_t comm[RS_COLL_COUNT];
  int64_t mod_comm[RS_TP_MAX_MODULES][RS_COLL_COUNT];
  rs_placement param_tp[RS_TP_MAX_MODULES][2]; /* weight, bias placements on the TP dim */
  rs_placement mod_out_tp[RS_TP_MAX_MODULES];  /* each module's output layout on the TP dim */
  int mod_out_local[RS_TP_MAX_MODULES];
  /* Per module, what the transport carried for its redistributions: bytes between distinct ranks
   * and (sender, receiver) pairs, counted by opt's world (rs_world_posted) when the forward ran on
   * a world it was given; -1 where nothing counted them (ref, or opt without a world). */
  int64_t mod_bytes[RS_TP_MAX_MODULES];
  int64_t mod_pairs[RS_TP_MAX_MODULES];
} rs_tp_result;
void rs_tp_result_free(rs_tp_result *r);

/* Sharded forward with ref's redistribute and plain kernels. */
rs_status rs_tp_ref_forward(const rs_tp_case *c, rs_tp_result *out);
/* Sharded forward with opt's redistribute and blocked kernels (CUDA when a device is present).
 * o and w are rs_opt* and rs_world* (opt.h); w NULL is a local world. */
rs_status rs_tp_opt_forward(void *o, void *w, const rs_tp_case *c, rs_tp_result *out);

/* The unsharded forward: the global output (F32, row-major, *out malloc'd). */
rs_status rs_tp_oracle_forward(const rs_tp_case *c, rs_tensor *shape, float **out);
/* Compare a sharded result with the unsharded output: every rank's local tensor is the global
 * output restricted to its box of r->out_layout, bit for bit (a P(sum) output: the TP group's
 * pieces sum to it). 0 when equal, else a count of bad
 * ranks and a report in msg. */
int rs_tp_oracle_compare(const rs_tp_case *c, const float *global, const rs_tp_result *r,
                         char *msg, size_t cap);

/* The test values (SPEC 8 exact): the global input (F32 hidden or I64 ids), and module i's
 * weight/bias, each a pure function of (seed, tensor, index). Buffers are malloc'd. */
rs_status rs_tp_global_input(const rs_tp_case *c, rs_tensor *t, void **data);
rs_status rs_tp_global_param(const rs_tp_case *c, int i, rs_tp_param_kind p, rs_tensor *t,
                             float **data);

#ifdef __cplusplus
}
#endif
#endif
