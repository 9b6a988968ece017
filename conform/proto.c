/* proto.c - the process protocol's envelope (see proto.h and docs/conformance.md). */
#include "conform/proto.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "conform/b64.h"
#include "core/json.h"
#include "core/mutant.h"

struct rs_proto {
  rs_exec *x;
  char *role;
  double timeout;
  int64_t next_id;
  int broken;      /* the last request faulted: restart before the next */
  cJSON *hello;    /* the hello answer */
  char name[128];
};

const char *rs_proto_name(const rs_proto *p) { return p->name; }

int rs_proto_has(const rs_proto *p, const char *cap) {
  const cJSON *caps = cJSON_GetObjectItemCaseSensitive(p->hello, "capabilities"), *c;
  cJSON_ArrayForEach(c, caps) if (cJSON_IsString(c) && strcmp(c->valuestring, cap) == 0) return 1;
  return 0;
}

const char *rs_proto_hello_str(const rs_proto *p, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(p->hello, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

int rs_proto_hello_int(const rs_proto *p, const char *key, int64_t lo, int64_t hi, int64_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(p->hello, key);
  if (!v) return 0;
  char what[96];
  snprintf(what, sizeof what, "hello.%s", key);
  return rs_json_i64(v, what, lo, hi, out) == RS_OK ? 1 : -1;
}

int rs_proto_pid(const rs_proto *p) { return p && p->x ? rs_exec_pid(p->x) : -1; }

/* Send one object, read one line and parse it as an object. */
static rs_status exchange(rs_proto *p, const cJSON *req, double timeout, cJSON **ans) {
  *ans = NULL;
  char *line = cJSON_PrintUnformatted(req);
  if (!line) return rs_fail(RS_ERR_NOMEM, "protocol: out of memory printing a request");
  rs_status st = rs_exec_send(p->x, line, timeout);
  free(line);
  const char *got = NULL;
  if (!st) st = rs_exec_recv(p->x, timeout, &got);
  if (st) return st;
  cJSON *a = NULL;
  if (rs_json_parse(got, &a) || !cJSON_IsObject(a)) {
    char head[81];
    snprintf(head, sizeof head, "%s", got);
    cJSON_Delete(a);
    rs_exec_set_garbage(p->x);
    return rs_fail(RS_ERR_TRANSPORT, "backend process answered a line that is not a JSON object: '%s%s'",
                   head, strlen(got) > 80 ? "..." : "");
  }
  *ans = a;
  return RS_OK;
}

static rs_status hello(rs_proto *p) {
  cJSON *req = cJSON_CreateObject(), *ans = NULL;
  cJSON_AddStringToObject(req, "op", "hello");
  cJSON_AddStringToObject(req, "protocol", "reshard-conform");
  cJSON_AddNumberToObject(req, "version", RS_PROTO_VERSION);
  cJSON_AddStringToObject(req, "role", p->role);
  /* starting an interpreter (and importing a framework) takes longer than a case */
  rs_status st = exchange(p, req, p->timeout > RS_PROTO_HELLO_TIMEOUT ? p->timeout : RS_PROTO_HELLO_TIMEOUT, &ans);
  cJSON_Delete(req);
  if (st) {
    if (rs_exec_last_fault(p->x) == RS_EXEC_GARBAGE) return rs_fail(RS_ERR_INVALID, "hello: %s", rs_last_error());
    return st;
  }
  const cJSON *ok = cJSON_GetObjectItemCaseSensitive(ans, "ok"),
              *ver = cJSON_GetObjectItemCaseSensitive(ans, "version"),
              *caps = cJSON_GetObjectItemCaseSensitive(ans, "capabilities"),
              *name = cJSON_GetObjectItemCaseSensitive(ans, "name"), *c;
  int64_t v = 0;
  if (!cJSON_IsTrue(ok)) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(ans, "message");
    st = rs_fail(RS_ERR_INVALID, "hello: the backend refused: %s", cJSON_IsString(m) ? m->valuestring : "(no message)");
  } else if (!ver || rs_json_i64(ver, "hello.version", 0, INT32_MAX, &v))
    st = rs_fail(RS_ERR_INVALID, "hello: answer has no integer 'version'");
  else if (v != RS_PROTO_VERSION)
    st = rs_fail(RS_ERR_INVALID, "hello: the backend speaks protocol version %lld, this harness speaks %d",
                 (long long)v, RS_PROTO_VERSION);
  else if (!cJSON_IsArray(caps))
    st = rs_fail(RS_ERR_INVALID, "hello: answer has no 'capabilities' list");
  else {
    cJSON_ArrayForEach(c, caps) if (!cJSON_IsString(c)) st = rs_fail(RS_ERR_INVALID, "hello: a capability is not a string");
  }
  if (st) {
    cJSON_Delete(ans);
    return st;
  }
  snprintf(p->name, sizeof p->name, "%s", cJSON_IsString(name) ? name->valuestring : "(unnamed)");
  cJSON_Delete(p->hello);
  p->hello = ans;
  return RS_OK;
}

rs_status rs_proto_open(const char *cmd, const char *role, double timeout, rs_proto **out) {
  *out = NULL;
  rs_proto *p = calloc(1, sizeof *p);
  if (!p || !(p->role = strdup(role))) {
    free(p);
    return rs_fail(RS_ERR_NOMEM, "protocol: out of memory");
  }
  p->timeout = timeout > 0 ? timeout : 30;
  rs_status st = rs_exec_start(cmd, 0, &p->x);
  if (!st) st = hello(p);
  if (st) {
    /* keep what the child said on stderr: it is usually why */
    if (p->x) {
      const char *tail = rs_exec_stderr_tail(p->x);
      if (tail[0]) {
        char m[1536];
        snprintf(m, sizeof m, "%s", rs_last_error());
        const char *nl = strrchr(tail, '\n');
        rs_fail(st, "%s (stderr: %s)", m, nl ? nl + 1 : tail);
      }
    }
    rs_proto_close(p);
    return st;
  }
  *out = p;
  return RS_OK;
}

rs_status rs_proto_reopen(rs_proto **pp) {
  rs_proto *old = *pp;
  char *cmd = strdup(rs_exec_cmd(old->x)), *role = strdup(old->role);
  double timeout = old->timeout;
  if (!cmd || !role) {
    free(cmd), free(role);
    return rs_fail(RS_ERR_NOMEM, "protocol: out of memory");
  }
  /* the inherited child is forgotten first: nothing of it (not even a pipe end) reaches the new one */
  rs_proto_forget(old);
  *pp = NULL;
  rs_status st = rs_proto_open(cmd, role, timeout, pp);
  free(cmd), free(role);
  return st;
}

void rs_proto_forget(rs_proto *p) {
  if (!p) return;
  rs_exec_forget(p->x);
  cJSON_Delete(p->hello);
  free(p->role);
  free(p);
}

static void fault_msg(rs_proto *p, char *msg, size_t cap, rs_exec_fault *fault) {
  *fault = rs_exec_last_fault(p->x);
  if (*fault == RS_EXEC_FINE) *fault = RS_EXEC_GARBAGE;
  const char *tail = rs_exec_stderr_tail(p->x);
  snprintf(msg, cap, "%s: %s%s%s", rs_exec_fault_name(*fault), rs_last_error(),
           tail[0] ? "\n  stderr: " : "", tail);
  /* indent the tail's lines under the message */
  p->broken = 1;
}

rs_proto_result rs_proto_call(rs_proto *p, cJSON *req, cJSON **answer, char *msg, size_t cap,
                              rs_exec_fault *fault) {
  *answer = NULL;
  *fault = RS_EXEC_FINE;
  msg[0] = 0;
  if (p->broken) {
    rs_status st = rs_exec_restart(p->x);
    if (!st) st = hello(p);
    if (st) {
      fault_msg(p, msg, cap, fault);
      return RS_PROTO_FAULT;
    }
    p->broken = 0;
  }
  /* Bytes the child wrote after its last answer, found before this request is sent: they came
   * too late for the settle check below, and belong to the previous request, not to this one. */
  char stray[RS_PROTO_QUOTE];
  if (p->next_id > 0 && rs_exec_pending(p->x, 0, stray, sizeof stray)) {
    rs_exec_set_garbage(p->x);
    rs_fail(RS_ERR_TRANSPORT,
            "backend process wrote more after its answer to the previous request (id %lld), later than "
            "%g s after that answer: %s (one request, one answer line); this request was not sent",
            (long long)(p->next_id - 1), RS_PROTO_SETTLE, stray);
    fault_msg(p, msg, cap, fault);
    return RS_PROTO_FAULT;
  }
  int64_t id = p->next_id++;
  cJSON_DeleteItemFromObjectCaseSensitive(req, "id");
  cJSON_AddNumberToObject(req, "id", (double)id);
  cJSON *a = NULL;
  if (exchange(p, req, p->timeout, &a)) {
    fault_msg(p, msg, cap, fault);
    return RS_PROTO_FAULT;
  }
  const cJSON *aid = cJSON_GetObjectItemCaseSensitive(a, "id"), *ok = cJSON_GetObjectItemCaseSensitive(a, "ok");
  int64_t got = -1;
  const char *bad = NULL;
  char arrived[RS_PROTO_QUOTE] = "";
  if (!aid || rs_json_i64(aid, "id", INT64_MIN, INT64_MAX, &got)) bad = "has no integer 'id'";
  else if (got != id && !RS_MUTANT(752)) bad = "has the id of another request";
  else if (!cJSON_IsBool(ok)) bad = "has no boolean 'ok'";
  if (bad) {
    rs_exec_set_garbage(p->x);
    /* say what arrived: the id (when there is one) and the line's start */
    char *line = cJSON_PrintUnformatted(a);
    if (line) rs_exec_quote_prefix(line, strlen(line), arrived, sizeof arrived);
    free(line);
    if (aid && got != id && !rs_json_i64(aid, "id", INT64_MIN, INT64_MAX, &got))
      rs_fail(RS_ERR_TRANSPORT, "backend process answer %s: request id %lld, answer id %lld%s (answer: %s)", bad,
              (long long)id, (long long)got, got == id - 1 ? ", the previous request's" : "", arrived);
    else
      rs_fail(RS_ERR_TRANSPORT, "backend process answer %s (request id %lld; answer: %s)", bad, (long long)id,
              arrived);
    cJSON_Delete(a);
    fault_msg(p, msg, cap, fault);
    return RS_PROTO_FAULT;
  }
  /* One request, one answer line: anything after the answer (arriving within the settle time) is
   * this request's fault, not the next one's. */
  if (rs_exec_pending(p->x, RS_PROTO_SETTLE, arrived, sizeof arrived)) {
    rs_exec_set_garbage(p->x);
    rs_fail(RS_ERR_TRANSPORT, "backend process wrote more after its answer to request id %lld: %s "
            "(one request, one answer line)", (long long)id, arrived);
    cJSON_Delete(a);
    fault_msg(p, msg, cap, fault);
    return RS_PROTO_FAULT;
  }
  if (cJSON_IsTrue(ok)) {
    *answer = a;
    return RS_PROTO_OK;
  }
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(a, "message"),
              *un = cJSON_GetObjectItemCaseSensitive(a, "unsupported");
  snprintf(msg, cap, "%s", cJSON_IsString(m) ? m->valuestring : "(no message)");
  /* one line: the backend's message is shown as a single line */
  for (char *c = msg; *c; c++)
    if (*c == '\n' || *c == '\r') *c = ' ';
  rs_proto_result r = cJSON_IsTrue(un) ? RS_PROTO_UNSUPPORTED : RS_PROTO_FAILED;
  cJSON_Delete(a);
  return r;
}

void rs_proto_reject_answer(rs_proto *p) { p->broken = 1; }

void rs_proto_close(rs_proto *p) {
  if (!p) return;
  if (p->x && !p->broken && p->hello) {
    cJSON *bye = cJSON_CreateObject();
    cJSON_AddStringToObject(bye, "op", "bye");
    char *line = cJSON_PrintUnformatted(bye);
    if (line) rs_exec_send(p->x, line, 1.0);
    free(line);
    cJSON_Delete(bye);
  }
  rs_exec_free(p->x, 2.0);
  cJSON_Delete(p->hello);
  free(p->role);
  free(p);
}

/* ---- tensors ---- */

cJSON *rs_proto_tensor(int32_t rank, int ndim, const int64_t *shape, const void *data, int64_t nbytes,
                       const char *name_key, const char *name) {
  cJSON *t = cJSON_CreateObject(), *sh = cJSON_CreateArray();
  if (!t || !sh) {
    cJSON_Delete(t), cJSON_Delete(sh);
    return NULL;
  }
  if (name_key && name) cJSON_AddStringToObject(t, name_key, name);
  cJSON_AddNumberToObject(t, "rank", rank);
  for (int d = 0; d < ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)shape[d]));
  cJSON_AddItemToObject(t, "shape", sh);
  char *b = malloc(rs_b64_len((size_t)nbytes) + 1);
  if (!b) {
    cJSON_Delete(t);
    return NULL;
  }
  rs_b64_encode(data, (size_t)nbytes, b);
  cJSON_AddStringToObject(t, "data", b);
  free(b);
  return t;
}

rs_status rs_proto_tensor_read(const cJSON *t, const char *what, int elem_size, int max_dims,
                               int32_t *rank, int *ndim, int64_t *shape, void **data, int64_t *nbytes) {
  *data = NULL;
  if (!cJSON_IsObject(t)) return rs_fail(RS_ERR_INVALID, "%s: not an object", what);
  char f[160];
  if (rank) {
    int64_t r = 0;
    snprintf(f, sizeof f, "%s.rank", what);
    if (rs_json_i64_member(t, what, "rank", -1, INT32_MAX, 1, &r)) return RS_ERR_INVALID;
    *rank = (int32_t)r;
  }
  snprintf(f, sizeof f, "%s.shape", what);
  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape"), *dt = cJSON_GetObjectItemCaseSensitive(t, "data");
  if (!cJSON_IsArray(sh)) return rs_fail(RS_ERR_INVALID, "%s: missing or not a list", f);
  if (rs_json_i64_array(sh, f, max_dims, 0, INT64_MAX, shape, ndim)) return RS_ERR_INVALID;
  int64_t numel = 1;
  for (int d = 0; d < *ndim; d++) {
    if (shape[d] && numel > INT64_MAX / shape[d]) return rs_fail(RS_ERR_INVALID, "%s: too many elements", f);
    numel *= shape[d];
  }
  if (elem_size && numel > INT64_MAX / elem_size) return rs_fail(RS_ERR_INVALID, "%s: too many elements", f);
  int64_t want = numel * elem_size;
  if (!cJSON_IsString(dt)) return rs_fail(RS_ERR_INVALID, "%s.data: missing or not a string", what);
  size_t len = strlen(dt->valuestring);
  if (rs_b64_len((size_t)want) != len)
    return rs_fail(RS_ERR_INVALID, "%s.data: %zu base64 characters, shape %s needs %zu (%lld bytes)", what, len, f,
                   rs_b64_len((size_t)want), (long long)want);
  void *buf = malloc(want ? (size_t)want : 1);
  if (!buf) return rs_fail(RS_ERR_NOMEM, "%s: out of memory (%lld bytes)", what, (long long)want);
  if (rs_b64_decode(dt->valuestring, len, buf, (size_t)want) != want) {
    free(buf);
    return rs_fail(RS_ERR_INVALID, "%s.data: not canonical base64", what);
  }
  *data = buf;
  *nbytes = want;
  return RS_OK;
}
