/* backend_ckpt.c - the backend under test's checkpoint calls (SPEC 11): save a state dict's local
 * shards into a directory, load a checkpoint into another layout's shards, over the plug-in ABI or
 * the process protocol. Shards are listed per (key, rank) of the state spec's world. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "conform/backend_internal.h"
#include "core/json.h"
#include "reshard/ckpt.h"

/* Every tensor entry of every rank as plug-in buffers pointing into w (name: the key). */
static rs_backend_buf *world_bufs(const rs_ckpt_world *w, int *n) {
  int k = 0;
  for (int r = 0; r < w->n; r++) k += w->sd[r].nt;
  rs_backend_buf *b = calloc((size_t)(k ? k : 1), sizeof *b);
  if (!b) return NULL;
  k = 0;
  for (int r = 0; r < w->n; r++)
    for (int i = 0; i < w->sd[r].nt; i++) {
      const rs_sh_tensor *t = &w->sd[r].t[i];
      rs_backend_buf *x = &b[k++];
      x->rank = r;
      x->ndim = t->ndim;
      memcpy(x->shape, t->local_shape, sizeof(int64_t) * (size_t)t->ndim);
      x->nbytes = x->capacity = t->nbytes;
      x->data = t->data;
      x->name = t->key;
    }
  *n = k;
  return b;
}

static cJSON *spec_json(const char *text) {
  cJSON *j = NULL;
  rs_json_parse(text, &j);
  return j;
}

static void finish(rs_cf_call *call) {
  if (call->result != RS_BACKEND_OK && call->result != RS_BACKEND_UNSUPPORTED) call->result = RS_BACKEND_ERROR;
}

void rs_cf_ckpt_save(rs_cf_backend *b, const char *spec, const rs_ckpt_world *w, const char *dir, rs_cf_call *call) {
  memset(call, 0, sizeof *call);
  int n = 0;
  rs_backend_buf *bb = world_bufs(w, &n);
  if (!bb) return rs__cf_call_set(call, RS_BACKEND_ERROR, RS_EXEC_FINE, "%s", "out of memory");
  if (b->proto) {
    cJSON *req = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    cJSON_AddStringToObject(req, "op", "ckpt_save");
    cJSON_AddItemToObject(req, "state", spec_json(spec));
    cJSON_AddStringToObject(req, "dir", dir);
    for (int i = 0; i < n; i++)
      cJSON_AddItemToArray(arr, rs_proto_tensor(bb[i].rank, bb[i].ndim, bb[i].shape, bb[i].data, bb[i].nbytes, "key", bb[i].name));
    cJSON_AddItemToObject(req, "tensors", arr);
    cJSON_Delete(rs__cf_request(b, req, call));
    cJSON_Delete(req);
  } else {
    rs_backend_bufs v = {n, bb};
    call->result = b->abi.ckpt_save(b->self, spec, &v, dir, call->msg, sizeof call->msg);
    finish(call);
  }
  free(bb);
}

void rs_cf_ckpt_load(rs_cf_backend *b, const char *spec, const char *dir, rs_ckpt_world *w, rs_cf_call *call) {
  memset(call, 0, sizeof *call);
  int n = 0;
  rs_backend_buf *bb = world_bufs(w, &n);
  if (!bb) return rs__cf_call_set(call, RS_BACKEND_ERROR, RS_EXEC_FINE, "%s", "out of memory");
  if (!b->proto) {
    rs_backend_bufs v = {n, bb};
    call->result = b->abi.ckpt_load(b->self, dir, spec, &v, call->msg, sizeof call->msg);
    finish(call);
    for (int i = 0; i < n && call->result == RS_BACKEND_OK; i++)
      if (bb[i].nbytes != bb[i].capacity) {
        char why[256];
        snprintf(why, sizeof why, "%s on rank %d: %lld bytes loaded, the shard holds %lld", bb[i].name, bb[i].rank,
                 (long long)bb[i].nbytes, (long long)bb[i].capacity);
        rs__cf_bad_answer(b, call, why);
      }
    free(bb);
    return;
  }
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "op", "ckpt_load");
  cJSON_AddItemToObject(req, "state", spec_json(spec));
  cJSON_AddStringToObject(req, "dir", dir);
  cJSON *ans = rs__cf_request(b, req, call);
  cJSON_Delete(req);
  const cJSON *arr = ans ? cJSON_GetObjectItemCaseSensitive(ans, "tensors") : NULL, *t;
  if (ans && !cJSON_IsArray(arr)) rs__cf_bad_answer(b, call, "'tensors' must be a list");
  int i = 0;
  cJSON_ArrayForEach(t, arr) {
    if (call->result != RS_BACKEND_OK) break;
    char what[48];
    snprintf(what, sizeof what, "tensors[%d]", i++);
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(t, "key"), *rk = cJSON_GetObjectItemCaseSensitive(t, "rank");
    int64_t rank = -1;
    const rs_backend_buf *x = NULL;
    if (cJSON_IsString(key) && rk && rs_json_i64(rk, what, 0, INT32_MAX, &rank) == RS_OK)
      for (int k = 0; k < n && !x; k++)
        if (bb[k].rank == rank && strcmp(bb[k].name, key->valuestring) == 0) x = &bb[k];
    if (!x) {
      char why[256];
      snprintf(why, sizeof why, "%s: no shard of the load spec has that key and rank", what);
      rs__cf_bad_answer(b, call, why);
      break;
    }
    int nd;
    int64_t shape[RS_MAX_DIMS], nbytes;
    void *data;
    int64_t numel = 1;
    for (int d = 0; d < x->ndim; d++) numel *= x->shape[d];
    int elem = numel ? (int)(x->capacity / numel) : 1;
    if (rs_proto_tensor_read(t, what, elem, RS_MAX_DIMS, NULL, &nd, shape, &data, &nbytes)) {
      rs__cf_bad_answer(b, call, rs_last_error());
      break;
    }
    if (nd != x->ndim || memcmp(shape, x->shape, sizeof(int64_t) * (size_t)nd) != 0) {
      snprintf(call->msg, sizeof call->msg, "%s: %s on rank %lld: loaded shape differs from the shard's", what,
               x->name, (long long)rank);
      call->result = RS_BACKEND_ERROR;
    } else
      memcpy(x->data, data, (size_t)nbytes);
    free(data);
  }
  cJSON_Delete(ans);
  free(bb);
}
