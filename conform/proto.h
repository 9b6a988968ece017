/* proto.h - the JSON-lines process protocol of docs/conformance.md over conform/exec.c: the hello
 * handshake (role "backend" or "planner"), one request per case with its id and answer checks,
 * restart after a fault, bye. Generic over ops: the suite drivers and the planner fuzzer build
 * the request fields, this file owns the envelope. Tensors travel as {rank, shape, data: base64}. */
#ifndef RS_CONFORM_PROTO_H
#define RS_CONFORM_PROTO_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include "conform/exec.h"
#include "reshard/case.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_PROTO_VERSION 1
/* Seconds a child gets for hello (at start and after each restart) when the per-case timeout is
 * shorter: an interpreter importing its framework needs longer than one case. */
#define RS_PROTO_HELLO_TIMEOUT 60.0

/* Seconds waited after each answer for bytes that should not come: a stray line written right
 * after an answer fails the request it followed (later ones are found before the next request is
 * sent, and named as the previous request's). */
#define RS_PROTO_SETTLE 0.002
/* Bytes of a quoted answer prefix in fault messages (what arrived). */
#define RS_PROTO_QUOTE 112

typedef struct rs_proto rs_proto;

/* How one request ended. */
typedef enum rs_proto_result {
  RS_PROTO_OK = 0,          /* "ok": true: *answer holds the object */
  RS_PROTO_FAILED = 1,      /* "ok": false: the backend's own message */
  RS_PROTO_UNSUPPORTED = 2, /* "ok": false, "unsupported": true: a skip */
  RS_PROTO_FAULT = 3        /* crash, timeout or garbage (fault says which); restarted before the next */
} rs_proto_result;

/* Start `sh -c cmd` and say hello as `role`. A child that starts but answers hello with anything
 * but {"ok":true,"version":1,"capabilities":[...]} is RS_ERR_INVALID (bad input: exit 2); one that
 * crashes or hangs on hello is RS_ERR_TRANSPORT. timeout: seconds per exchange (hello: at least
 * RS_PROTO_HELLO_TIMEOUT). */
rs_status rs_proto_open(const char *cmd, const char *role, double timeout, rs_proto **out);
const char *rs_proto_name(const rs_proto *p);
/* 1 when the hello answer listed capability `cap`. */
int rs_proto_has(const rs_proto *p, const char *cap);
/* A string member of the hello answer (e.g. "ckpt_format"), or NULL. */
const char *rs_proto_hello_str(const rs_proto *p, const char *key);
/* An integer member of the hello answer (e.g. "max_instances"): 0 when absent, 1 with *out set,
 * -1 (the error set, naming hello.KEY) when it is not an integer in [lo, hi]. */
int rs_proto_hello_int(const rs_proto *p, const char *key, int64_t lo, int64_t hi, int64_t *out);
/* The child's pid (its process group), -1 when none. */
int rs_proto_pid(const rs_proto *p);
/* A forked --jobs worker's own child: forgets the child of *p (rs_proto_forget: the inherited
 * child stays its parent's, untouched), then starts the same command again (a fresh child, hello)
 * into *p (NULL on an error). */
rs_status rs_proto_reopen(rs_proto **p);
/* Free p without a word to its child: only our pipe ends are closed (rs_exec_forget). */
void rs_proto_forget(rs_proto *p);
/* One request: req (an object; "id" is set here) is sent, the answer read and checked (object,
 * same id, ok boolean). On RS_PROTO_OK *answer is the parsed answer (caller cJSON_Deletes it). On
 * anything else msg holds one line (FAULT: the fault, the exit status, then the stderr tail on the
 * following lines) and *fault what happened. A faulted child is restarted (with hello) before
 * the next request; a restart that fails faults that request too. */
rs_proto_result rs_proto_call(rs_proto *p, cJSON *req, cJSON **answer, char *msg, size_t cap,
                              rs_exec_fault *fault);
/* Mark the answer of an RS_PROTO_OK call as malformed (a field the caller checks): counts as a
 * garbage fault (the child restarts for the next request). */
void rs_proto_reject_answer(rs_proto *p);
/* bye, close stdin, 2 s grace, kill. NULL is fine. */
void rs_proto_close(rs_proto *p);

/* ---- tensors ---- */
/* {"rank":rank,"shape":[...],"data":"<base64>"} plus name_key: name when name_key is set. NULL on
 * out of memory. */
cJSON *rs_proto_tensor(int32_t rank, int ndim, const int64_t *shape, const void *data, int64_t nbytes,
                       const char *name_key, const char *name);
/* Read a tensor object: rank (when rank != NULL), shape (at most max_dims), data decoded into a
 * malloc'd buffer that must hold exactly numel * elem_size bytes. Errors (RS_ERR_INVALID) name
 * `what` and the field. */
rs_status rs_proto_tensor_read(const cJSON *t, const char *what, int elem_size, int max_dims,
                               int32_t *rank, int *ndim, int64_t *shape, void **data, int64_t *nbytes);

#ifdef __cplusplus
}
#endif
#endif
