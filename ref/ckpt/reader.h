/* reader.h - reading a step directory with every check: metadata.json (its digest, its rules),
 * each data file's size, safetensors header and per-block digests. Load, verify, inspect and
 * export all read through it, so no path reads an unchecked byte. */
#ifndef RS_REF_CKPT_READER_H
#define RS_REF_CKPT_READER_H

#include "core/ckpt/internal.h"

/* A verified digest block kept for the rest of the load (see rs__reader_read). */
typedef struct rs__rblock {
  int file; /* -1: empty slot */
  int64_t block;
  uint8_t *data;
} rs__rblock;

typedef struct rs__reader {
  char *dir;
  int *fd;            /* per file, opened (and its size checked) on first use; -1 before */
  rs__rblock *cache;  /* open addressing, cap a power of two */
  int64_t ncache, capcache, cache_bytes;
  int **corder;       /* per tensor of md: its chunks by first offset (rs__reader_chunk_window) */
  int64_t *cmax0;     /* per tensor: the largest chunk extent on dim 0 */
  rs__metadata md;
  rs__st_header *hdr; /* per file, parsed on first use */
  int *hdr_ok;
  int64_t bytes_read;
} rs__reader;

#define RS__READER_CACHE ((int64_t)256 << 20)

/* Opens dir (a step directory): reads and checks metadata.json. */
rs_status rs__reader_open(rs__reader *r, const char *stepdir);
void rs__reader_close(rs__reader *r);
/* Bytes [off, off+len) of file `file`, every block they touch checked against its digest; `key`
 * names the entry in errors. A block is read and hashed once per reader: verified blocks are kept
 * (up to RS__READER_CACHE bytes; past it the kept blocks are dropped and read again on use), so a
 * load of many small chunks that share blocks stays linear in the checkpoint. */
rs_status rs__reader_read(rs__reader *r, int file, int64_t off, int64_t len, const char *key, uint8_t *out);
/* The chunks of md tensor ti that can meet a request starting at a on dim 0 and ending before b:
 * (*order ? (*order)[k] : k) for k in [*from, *to). Sorted once per tensor per reader, so a load
 * of n requests over n chunks takes n log n, not n^2. */
rs_status rs__reader_chunk_window(rs__reader *r, int ti, int64_t a, int64_t b, const int **order, int *from, int *to);
/* The file's safetensors header, parsed (digest-checked) on first use. */
rs_status rs__reader_header(rs__reader *r, int file, const rs__st_header **out);
/* A chunk's (or object's, dtype U8) safetensors entry agrees with metadata: name, dtype, shape,
 * byte range. */
rs_status rs__reader_check_entry(rs__reader *r, int file, const char *name, rs_dtype dt, int nd,
                                 const int64_t *shape, int64_t off, int64_t len);
/* Chunk entry check for tensor t, chunk c. */
rs_status rs__reader_check_chunk(rs__reader *r, const rs__md_tensor *t, const rs__chunk *c);

#endif
