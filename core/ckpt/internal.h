/* internal.h - what the checkpoint files of core/, ref/, oracle/ and props/ share but the public
 * API does not expose: box arithmetic, region text for error messages, the metadata.json model
 * and the safetensors header codec. */
#ifndef RS_CORE_CKPT_INTERNAL_H
#define RS_CORE_CKPT_INTERNAL_H

#include <stdint.h>
#include "reshard/ckpt.h"

/* ---- boxes ---- */
/* Intersection of [ao, ao+as) and [bo, bo+bs) per dim; 0 when empty in some dim. */
int rs__box_intersect(int nd, const int64_t *ao, const int64_t *as, const int64_t *bo,
                      const int64_t *bs, int64_t *io, int64_t *is);
/* "[0:4, 2:3]" */
void rs__region_text(int nd, const int64_t *off, const int64_t *sz, char *buf, size_t cap);
/* Row-major flat index of a multi-index in a shape. */
int64_t rs__flat_index(int nd, const int64_t *shape, const int64_t *idx);
/* Next multi-index inside the box (odometer); 0 when done. */
int rs__box_next(int nd, const int64_t *off, const int64_t *sz, int64_t *idx);
/* Multi-index of flat index f in shape. */
void rs__unflatten(int nd, const int64_t *shape, int64_t f, int64_t *idx);

uint64_t rs__str_hash(const char *s);
char *rs__strdup(const char *s);
/* Grow *arr (elements of size es) to hold n+1. */
int rs__grow(void **arr, int n, int *cap, size_t es);
/* Key names in files: printable ASCII, no control bytes. */
int rs__key_ok(const char *k);
/* Data file names: [A-Za-z0-9._-]+, not starting with '.', so never a path. */
int rs__file_name_ok(const char *n);

/* ---- metadata.json ---- */
typedef struct rs__chunk {
  int64_t off[RS_MAX_DIMS], size[RS_MAX_DIMS];
  int has_flat;
  int64_t flat_start, flat_stop;
  int file;            /* index into files */
  int64_t byte_off, length; /* absolute offset in the file, byte count */
} rs__chunk;

typedef struct rs__md_tensor {
  char *key;
  rs_dtype dtype;
  int ndim;
  int64_t shape[RS_MAX_DIMS];
  rs__chunk *c;
  int nc, capc;
} rs__md_tensor;

typedef struct rs__md_object {
  char *ukey; /* unique key */
  int file;
  int64_t byte_off, length;
} rs__md_object;

typedef struct rs__md_file {
  char *name;
  int64_t size;
  int64_t block;       /* digest block size (a power of two) */
  int nblocks;
  uint64_t *digest;
} rs__md_file;

typedef struct rs__metadata {
  int64_t step;
  rs__md_tensor *t;
  int nt, capt;
  rs__md_object *o;
  int no, capo;
  rs__md_file *f;
  int nf, capf;
  rs_kv *common;
  int ncommon, capc;
} rs__metadata;

void rs__md_free(rs__metadata *m);
/* JSON text with no NUL: neither a raw NUL byte nor a \u0000 escape in a string (cJSON would cut
 * the string there). RS_ERR_INVALID naming `what` and the byte. */
rs_status rs__json_no_nul(const char *text, size_t len, const char *what);
/* Parses the bytes of metadata.json: checks its own digest line, the format and version, every
 * field (names, dtypes, sizes with overflow checks, chunks inside the shape and inside their
 * file) and that the chunks of every tensor tile it exactly. */
rs_status rs__md_parse(const char *bytes, size_t len, rs__metadata *out);
/* Serializes (digest line first). Returns malloc'd bytes and their length. */
rs_status rs__md_write(const rs__metadata *m, char **bytes, size_t *len);
int rs__md_find_tensor(const rs__metadata *m, const char *key);
/* the metadata tensor of t's key, added (key, dtype, global shape; no chunks) if absent; NULL:
 * out of memory */
rs__md_tensor *rs__md_tensor_for(rs__metadata *m, const rs_sh_tensor *t);
/* tensors and objects in key order, as metadata.json lists them */
void rs__md_sort(rs__metadata *m);
int rs__md_find_object(const rs__metadata *m, const char *ukey);
/* The chunks of one tensor tile its global shape (boxes disjoint and covering; flat fragments of
 * one box tile its flattening). Errors name the key and the region. */
rs_status rs__md_check_tiling(const rs__md_tensor *t);

/* ---- safetensors ---- */
typedef struct rs__st_entry {
  char *name;
  rs_dtype dtype;
  int ndim;
  int64_t shape[RS_MAX_DIMS];
  int64_t begin, end; /* data_offsets, relative to the data section */
} rs__st_entry;

typedef struct rs__st_header {
  int64_t header_len; /* the JSON's byte count (the 8-byte prefix's value) */
  rs__st_entry *e;
  int n, cap;
  rs__st_entry **byname; /* parsed headers: the entries sorted by name (rs__st_find) */
  rs_kv *meta;        /* __metadata__ */
  int nmeta, capm;
} rs__st_header;

void rs__st_free(rs__st_header *h);
/* Parses a header (the JSON after the 8-byte length) given the file size: dtypes, shapes, byte
 * counts (overflow-checked) equal to the offsets, offsets contiguous from 0 to the data end,
 * distinct names. */
rs_status rs__st_parse(const char *json, size_t len, int64_t file_size, rs__st_header *out);
/* Header bytes for entries in order (offsets given), padded with spaces to a multiple of 8:
 * the 8-byte length prefix included. */
rs_status rs__st_header_bytes(const rs__st_entry *e, int n, const rs_kv *meta, int nmeta,
                              char **bytes, size_t *len);
int rs__st_find(const rs__st_header *h, const char *name);

/* Tensor name of a chunk inside a data file: "<key>@<offsets joined by .>" plus "#<flat start>"
 * for a flattened fragment. */
void rs__chunk_name(const char *key, int nd, const int64_t *off, int has_flat, int64_t flat_start,
                    char *buf, size_t cap);

/* xxh3-64 as 16 lowercase hex digits. */
void rs__hex64(uint64_t v, char out[17]);
int rs__parse_hex64(const char *s, uint64_t *out);

#endif
