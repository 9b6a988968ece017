/* backend.h - the backend plug-in ABI of `reshard conform`: another implementation of the contract
 * (a DTensor port, a JAX/XLA or MPI resharder, a checkpoint library) loaded with dlopen and held
 * to the same properties and fixtures as reshard's own opt/, bit for bit against the oracle.
 *
 * A plug-in is a shared library exporting one symbol:
 *
 *   const rs_backend *rs_backend_entry(void);
 *
 * It returns a struct of function pointers that stays valid until the library is unloaded. The
 * struct only grows at its end: `struct_size` says how much of it the plug-in knows, and the
 * harness reads no field past it (a plug-in built against an older header has the newer
 * capabilities NULL). `abi_version` is RS_BACKEND_ABI_VERSION of the header the plug-in was built
 * with; a version the harness does not speak is refused (exit 2) before any case.
 *
 * Every capability is optional: a NULL pointer is a capability the backend lacks, and its suite
 * is reported as skipped, never as passed. A capability may also answer RS_BACKEND_UNSUPPORTED for
 * one case (skipped, with its message). Requests are JSON text in the same forms as the process
 * protocol (docs/conformance.md names every field): a plug-in and a process backend see the same
 * thing. Tensor bytes are plain little-endian bytes in buffers owned by the harness.
 *
 * The ABI is plain C with no reshard symbol called back: a plug-in needs no reshard library (one
 * that links it may use rs_case_from_json and friends to read the requests). Calls come from one
 * thread, one at a time. */
#ifndef RESHARD_BACKEND_H
#define RESHARD_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "reshard/copy_service.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_BACKEND_ABI_VERSION 1
#define RS_BACKEND_MAX_DIMS 8

/* What every call returns; on anything but RS_BACKEND_OK the call writes a one-line reason into
 * msg (cap bytes, NUL-terminated). */
enum {
  RS_BACKEND_OK = 0,
  RS_BACKEND_ERROR = 1,      /* the backend failed this case (a failure of the case) */
  RS_BACKEND_UNSUPPORTED = 2 /* the backend does not do this case (reported as skipped) */
};

/* Which checkpoint format ckpt_save writes. RESHARD: reshard's own (docs/ckpt.md), so every
 * checkpoint it writes is also held to `reshard ckpt verify` and loaded by reshard's reader.
 * OWN: a format of its own, held only to its own load. */
enum { RS_BACKEND_CKPT_OWN = 0, RS_BACKEND_CKPT_RESHARD = 1 };

/* One tensor's bytes (row-major, little-endian). The harness allocates `data` and owns it.
 * Inputs: every field set. Outputs: the harness sets rank, name, capacity, data and the shape the
 * contract expects; the backend writes ndim, shape and nbytes of what it produced (nbytes <=
 * capacity) and the bytes. A shape that differs from the contract's is a failure, never resized. */
typedef struct rs_backend_buf {
  int32_t rank;       /* world rank that holds it; -1 for a global (unsharded) tensor */
  int32_t ndim;
  int64_t shape[RS_BACKEND_MAX_DIMS];
  int64_t nbytes;
  int64_t capacity;
  void *data;
  const char *name;   /* what it is: "input", "<module path>.weight", a state-dict key; or NULL */
} rs_backend_buf;

/* A list of buffers; for redistribute and TP outputs, in mesh position order (row-major over the
 * mesh, the order of the case's rank list). */
typedef struct rs_backend_bufs {
  int32_t n;
  rs_backend_buf *b;
} rs_backend_bufs;

/* Where p2p_plan puts its transfers, one call per transfer (the fields of a `reshard p2p plan
 * --json` transfer): the box is start[ndim] then size[ndim] in the parameter's global index space. */
typedef struct rs_backend_p2p_sink {
  void *ctx;
  int (*add)(void *ctx, int64_t task, int32_t param, int32_t src, int32_t dst, int32_t ndim,
             const int64_t *start, const int64_t *size);
} rs_backend_p2p_sink;

typedef struct rs_backend {
  uint32_t struct_size;  /* sizeof(rs_backend) of the header the plug-in was built with */
  uint32_t abi_version;  /* RS_BACKEND_ABI_VERSION */
  const char *name;      /* shown in reports */
  uint32_t ckpt_format;  /* RS_BACKEND_CKPT_* (only read when ckpt_save is set) */

  /* Optional. options: the text after '?' in --backend LIB.so?OPTIONS, or "". *self is handed to
   * every call and to destroy. */
  int (*create)(const char *options, void **self, char *msg, size_t cap);
  void (*destroy)(void *self);

  /* Same-mesh redistribute: case_json is a case file (fixtures/curated form: mesh, ranks, shape,
   * dtype, src, dst, orders, seed, values). in holds every mesh rank's source local (src layout),
   * out receives every rank's local of the dst layout. */
  int (*redistribute)(void *self, const char *case_json, const rs_backend_bufs *in,
                      rs_backend_bufs *out, char *msg, size_t cap);

  /* Cross-config P2P. model_json is a P2P model (docs/p2p.md). p2p_plan emits a plan through
   * sink. p2p_execute moves the source config's locals (src: per (parameter, world rank) of the
   * source config, name = parameter) into the destination config's (dst, likewise; an MXFP8
   * destination's scales follow it as a buffer named "<parameter>.scale"). plan_json is a plan
   * to execute (`reshard p2p plan --json` form) or NULL: its own plan; cs/cs_self a copy service
   * to move bytes over (copy_service.h's vtable, every rank in this process) or NULL: its own
   * transport. The harness passes a plan only to a backend whose p2p_flags has
   * RS_BACKEND_P2P_ANY_PLAN (below), and always NULL for the copy service. */
  int (*p2p_plan)(void *self, const char *model_json, const rs_backend_p2p_sink *sink, char *msg,
                  size_t cap);
  int (*p2p_execute)(void *self, const char *model_json, const char *plan_json,
                     const rs_copy_service_vtable *cs, void *cs_self, const rs_backend_bufs *src,
                     rs_backend_bufs *dst, char *msg, size_t cap);

  /* Checkpoints. state_json is a state spec (docs/ckpt.md; tensors only). ckpt_save writes the
   * tensors (per key and rank, name = key, rank = the spec's world rank) of the spec's layout into
   * the empty directory dir; ckpt_load reads a checkpoint it saved (with another spec: other
   * ranks, another layout) into the load spec's buffers. */
  int (*ckpt_save)(void *self, const char *state_json, const rs_backend_bufs *tensors,
                   const char *dir, char *msg, size_t cap);
  int (*ckpt_load)(void *self, const char *dir, const char *state_json, rs_backend_bufs *tensors,
                   char *msg, size_t cap);

  /* Tensor-parallel styles: case_json is a TP case (fixtures/tp form). inputs holds the global
   * (unsharded) input and every module's weight and bias (rank -1, named "input",
   * "<path>.weight", "<path>.bias"); out receives every rank's local output (F32), mesh order:
   * each output buffer comes shaped as the global output with room for all of it, and the
   * backend writes its local shape (the harness holds it to the box of the styles' layout). */
  int (*tp_forward)(void *self, const char *case_json, const rs_backend_bufs *inputs,
                    rs_backend_bufs *out, char *msg, size_t cap);

  /* ---- grown at the end, still ABI version 1: read only when struct_size covers the field (a
   * plug-in built against an older header has it 0) ---- */

  /* RS_BACKEND_P2P_* bits. RS_BACKEND_P2P_ANY_PLAN: p2p_execute executes any valid plan given as
   * plan_json (the `reshard p2p plan --json` object; a plan that passes SPEC 10's checks, not only
   * the backend's own): the p2p suite then also hands it reshard's opt plan and ref's plan of each
   * model, each execution held to the oracle bit for bit. Without it plan_json is always NULL. */
  uint32_t p2p_flags;

  /* How many instances of this backend may run at once (`reshard conform --jobs N` runs each of its
   * N forked workers with an instance of its own, made by create in that worker): 0 (the default,
   * and what a plug-in built before this field reads as) any number; k at most k, e.g. 1 for a
   * backend bound to a fixed port, file or device. Instances never share a process: no plug-in
   * call is ever made from two threads. */
  uint32_t max_instances;
} rs_backend;

/* RS_BACKEND_P2P_TEMPLATES: the backend expands Megatron-style templates itself (docs/p2p.md, "The
 * model file"): a P2P model made from a template is then handed over in template form
 * (model.template, and src/dst as {"template": {tp, pp, dp, ep}, "ranks": [...]}) wherever that
 * form gives the model back exactly, and the backend is held bit for bit to reshard's expansion of
 * it; without the flag every model arrives explicit (templates expanded by reshard). */
enum { RS_BACKEND_P2P_ANY_PLAN = 1u, RS_BACKEND_P2P_TEMPLATES = 2u };

/* What a plug-in exports (declared here so its definition is checked against this header). */
const rs_backend *rs_backend_entry(void);
typedef const rs_backend *(*rs_backend_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
