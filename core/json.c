/* json.c - exact integers over cJSON. cJSON keeps numbers as doubles; before parsing we note where
 * every number token starts, then walk the tree in document order (cJSON keeps order) and give each
 * number node a copy of its token in valuestring, which cJSON_Delete frees. */
#include "core/json.h"
#include "core/mutant.h"
#include "reshard/case.h"
#include <ctype.h>
#include <stdio.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct toks {
  const char *text;
  size_t *at, *len;
  size_t n, next;
} toks;

static rs_status scan_numbers(const char *s, toks *t) {
  size_t cap = 0;
  for (size_t i = 0; s[i];) {
    char ch = s[i];
    if (ch == '"') { /* skip a string, honouring escapes */
      for (++i; s[i] && s[i] != '"'; ++i)
        if (s[i] == '\\' && s[i + 1]) ++i;
      if (s[i]) ++i;
      continue;
    }
    if (ch == '-' || isdigit((unsigned char)ch)) {
      size_t b = i;
      while (s[i] && (isdigit((unsigned char)s[i]) || strchr("+-.eE", s[i]))) ++i;
      if (t->n == cap) {
        cap = cap ? cap * 2 : 64;
        size_t *a = realloc(t->at, cap * sizeof *a), *l = a ? realloc(t->len, cap * sizeof *l) : NULL;
        if (a) t->at = a;
        if (!a || !l) return rs_fail(RS_ERR_NOMEM, "json: out of memory");
        t->len = l;
      }
      t->at[t->n] = b;
      t->len[t->n++] = i - b;
      continue;
    }
    ++i;
  }
  return RS_OK;
}

static rs_status attach(cJSON *node, toks *t) {
  for (; node; node = node->next) {
    if (cJSON_IsNumber(node)) {
      if (t->next >= t->n) return rs_fail(RS_ERR_INVALID, "json: number tokens out of step");
      size_t len = t->len[t->next];
      char *c = malloc(len + 1);
      if (!c) return rs_fail(RS_ERR_NOMEM, "json: out of memory");
      memcpy(c, t->text + t->at[t->next], len);
      c[len] = 0;
      node->valuestring = c;
      t->next++;
    }
    if (node->child) {
      rs_status st = attach(node->child, t);
      if (st) return st;
    }
  }
  return RS_OK;
}

/* cJSON decodes \u0000 and then keeps the string as a C string, silently cut at the NUL: a name
 * "w\u0000x" would read as "w". No string of any reshard format may hold a NUL, so the parser
 * refuses the escape and names the field. The text is scanned for string tokens (keys and values
 * alike, in document order, escapes honoured); the first that holds \u0000 is found again in the
 * tree, walked in the same order, to name its path ("params[2].name"). */
static size_t first_nul_string(const char *s, size_t *byte) {
  size_t ord = 0;
  for (size_t i = 0; s[i];) {
    if (s[i] != '"') {
      ++i;
      continue;
    }
    for (++i; s[i] && s[i] != '"'; ++i)
      if (s[i] == '\\' && s[i + 1]) {
        if (s[i + 1] == 'u' && !strncmp(s + i + 2, "0000", 4)) {
          *byte = i;
          return ord;
        }
        ++i;
      }
    if (s[i]) ++i;
    ++ord;
  }
  return (size_t)-1;
}

typedef struct nulwalk {
  size_t ord, want, byte;
  char path[256];
} nulwalk;

static rs_status nul_found(nulwalk *w, const char *path, const char *key) {
  if (key)
    return rs_fail(RS_ERR_INVALID, "%s%skey \"%.60s\": holds \\u0000 (a NUL) at byte %zu: JSON strings never hold NUL",
                   path, *path ? ": a " : "a ", key, w->byte);
  return rs_fail(RS_ERR_INVALID, "%s: a string holds \\u0000 (a NUL) at byte %zu: JSON strings never hold NUL",
                 *path ? path : "(top level)", w->byte);
}

static rs_status nul_walk(const cJSON *node, nulwalk *w, const char *path) {
  int i = 0;
  for (const cJSON *c = node->child; c; c = c->next, ++i) {
    char sub[256];
    if (cJSON_IsObject(node)) {
      if (w->ord++ == w->want) return nul_found(w, path, c->string ? c->string : "");
      snprintf(sub, sizeof sub, "%s%s%.60s", path, *path ? "." : "", c->string ? c->string : "");
    } else {
      snprintf(sub, sizeof sub, "%.200s[%d]", path, i);
    }
    if (cJSON_IsString(c) && w->ord++ == w->want) return nul_found(w, sub, NULL);
    if (c->child) {
      rs_status st = nul_walk(c, w, sub);
      if (st) return st;
    }
  }
  return RS_OK;
}

static rs_status refuse_nul(const char *text, const cJSON *root) {
  /* RS_MUTANT 606 (with the checkpoint readers' own raw check, core/ckpt/metadata.c): let it through */
  if (RS_MUTANT(606) || !strstr(text, "\\u0000")) return RS_OK;
  nulwalk w = {0};
  w.want = first_nul_string(text, &w.byte);
  if (w.want == (size_t)-1) return RS_OK;
  if (cJSON_IsString(root)) return nul_found(&w, "", NULL);
  rs_status st = nul_walk(root, &w, "");
  /* the tree holds fewer strings than the text: cannot be, but never let the NUL through */
  return st ? st : rs_fail(RS_ERR_INVALID, "json: a string holds \\u0000 (a NUL) at byte %zu", w.byte);
}

rs_status rs_json_parse(const char *text, cJSON **out) {
  *out = NULL;
  if (!text) return rs_fail(RS_ERR_INVALID, "json: no text");
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
  if (!root) {
    size_t off = end ? (size_t)(end - text) : 0;
    return rs_fail(RS_ERR_INVALID, "json: syntax error at byte %zu", off);
  }
  rs_status st = refuse_nul(text, root);
  if (st) {
    cJSON_Delete(root);
    return st;
  }
  toks t = {text, NULL, NULL, 0, 0};
  st = scan_numbers(text, &t);
  if (!st) st = attach(root, &t);
  free(t.at);
  free(t.len);
  if (st) {
    cJSON_Delete(root);
    return st;
  }
  *out = root;
  return RS_OK;
}

/* The token must be -?digits; anything else (fraction, exponent) is not an integer. */
static int plain_integer(const char *s) {
  if (*s == '-') ++s;
  if (!isdigit((unsigned char)*s)) return 0;
  while (isdigit((unsigned char)*s)) ++s;
  return *s == 0;
}

rs_status rs_json_i64(const cJSON *item, const char *field, int64_t lo, int64_t hi, int64_t *out) {
  if (RS_MUTANT(231) && cJSON_IsNumber(item)) { /* planted: the integer read through its double */
    *out = (int64_t)item->valuedouble;
    return RS_OK;
  }
  if (!cJSON_IsNumber(item) || !item->valuestring || !plain_integer(item->valuestring))
    return rs_fail(RS_ERR_INVALID, "%s: expected an integer", field);
  errno = 0;
  char *e = NULL;
  long long v = strtoll(item->valuestring, &e, 10);
  if (errno == ERANGE || *e)
    return rs_fail(RS_ERR_INVALID, "%s: %s is beyond the 64-bit integer range", field, item->valuestring);
  if (v < lo || v > hi)
    return rs_fail(RS_ERR_INVALID, "%s: %lld out of range [%lld, %lld]", field, v, (long long)lo,
                   (long long)hi);
  *out = (int64_t)v;
  return RS_OK;
}

rs_status rs_json_u64(const cJSON *item, const char *field, uint64_t *out) {
  if (!cJSON_IsNumber(item) || !item->valuestring || !plain_integer(item->valuestring) ||
      item->valuestring[0] == '-')
    return rs_fail(RS_ERR_INVALID, "%s: expected a non-negative integer", field);
  errno = 0;
  char *e = NULL;
  unsigned long long v = strtoull(item->valuestring, &e, 10);
  if (errno == ERANGE || *e)
    return rs_fail(RS_ERR_INVALID, "%s: %s is beyond the 64-bit integer range", field, item->valuestring);
  *out = (uint64_t)v;
  return RS_OK;
}

rs_status rs_json_i64_array(const cJSON *arr, const char *field, int max, int64_t lo, int64_t hi,
                            int64_t *out, int *n) {
  if (!cJSON_IsArray(arr)) return rs_fail(RS_ERR_INVALID, "%s: expected an array of integers", field);
  int k = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    if (k >= max) return rs_fail(RS_ERR_INVALID, "%s: more than %d entries", field, max);
    char f[160];
    snprintf(f, sizeof f, "%s[%d]", field, k);
    rs_status st = rs_json_i64(it, f, lo, hi, &out[k]);
    if (st) return st;
    k++;
  }
  *n = k;
  return RS_OK;
}

rs_status rs_json_member(const cJSON *obj, const char *parent, const char *key, int type_mask,
                         const cJSON **out) {
  *out = NULL;
  if (!cJSON_IsObject(obj)) return rs_fail(RS_ERR_INVALID, "%s: expected an object", parent);
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!m) return RS_OK;
  if (!(m->type & 0xFF & type_mask))
    return rs_fail(RS_ERR_INVALID, "%s%s%s: wrong type", parent, *parent ? "." : "", key);
  *out = m;
  return RS_OK;
}

rs_status rs_json_i64_member(const cJSON *obj, const char *parent, const char *key, int64_t lo, int64_t hi,
                             int required, int64_t *out) {
  const cJSON *it;
  rs_status st = rs_json_member(obj, parent, key, cJSON_Number, &it);
  if (st) return st;
  if (!it) return required ? rs_fail(RS_ERR_INVALID, "%s.%s: required", parent, key) : RS_OK;
  char f[256];
  snprintf(f, sizeof f, "%.180s.%.60s", parent, key);
  return rs_json_i64(it, f, lo, hi, out);
}

rs_status rs__json_from_text(const char *text, rs__json_reader read, void *out) {
  cJSON *root;
  rs_status st = rs_json_parse(text, &root);
  if (st) return st;
  st = read(root, out);
  cJSON_Delete(root);
  return st;
}

rs_status rs__json_from_file(const char *path, rs__json_reader read, void *out) {
  char *text = rs_read_text(path);
  if (!text) return RS_ERR_IO; /* rs_read_text named the file */
  rs_status st = rs__json_from_text(text, read, out);
  free(text);
  if (st) {
    char pre[512];
    snprintf(pre, sizeof pre, "%s: ", path);
    return rs_fail_prefix(st, pre);
  }
  return RS_OK;
}
