/* reader.h - reading a step directory with every check: metadata.json (its digest, its rules),
 * each data file's size, safetensors header and per-block digests. Load, verify, inspect and
 * export all read through it, so no path reads an unchecked byte. */
#ifndef RS_REF_CKPT_READER_H
#define RS_REF_CKPT_READER_H

#include "core/ckpt/internal.h"

typedef struct rs__reader {
  char *dir;
  rs__metadata md;
  rs__st_header *hdr; /* per file, parsed on first use */
  int *hdr_ok;
  int64_t bytes_read;
} rs__reader;

/* Opens dir (a step directory): reads and checks metadata.json. */
rs_status rs__reader_open(rs__reader *r, const char *stepdir);
void rs__reader_close(rs__reader *r);
/* Bytes [off, off+len) of file `file`, every block they touch checked against its digest; `key`
 * names the entry in errors. */
rs_status rs__reader_read(rs__reader *r, int file, int64_t off, int64_t len, const char *key, uint8_t *out);
/* The file's safetensors header, parsed (digest-checked) on first use. */
rs_status rs__reader_header(rs__reader *r, int file, const rs__st_header **out);
/* A chunk's (or object's, dtype U8) safetensors entry agrees with metadata: name, dtype, shape,
 * byte range. */
rs_status rs__reader_check_entry(rs__reader *r, int file, const char *name, rs_dtype dt, int nd,
                                 const int64_t *shape, int64_t off, int64_t len);
/* Chunk entry check for tensor t, chunk c. */
rs_status rs__reader_check_chunk(rs__reader *r, const rs__md_tensor *t, const rs__chunk *c);

#endif
