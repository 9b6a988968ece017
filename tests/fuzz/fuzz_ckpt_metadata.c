/* fuzz_ckpt_metadata.c - libFuzzer target: the metadata.json parser of checkpoints
 * (core/ckpt/metadata.c). The file's first line is the xxh3-64 of the rest, which random bytes
 * almost never match, so an input that does not start with '{' is resealed here: its first byte
 * is dropped and a correct digest line put in front of the rest, to reach every rule behind the
 * digest. Any input must be refused with
 * a message, or parse into metadata whose chunks lie inside their files and tile their tensors,
 * and which survives a write / parse round trip unchanged. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "core/ckpt/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const rs__metadata *m) {
  for (int i = 0; i < m->nt; ++i) {
    const rs__md_tensor *t = &m->t[i];
    for (int k = 0; k < t->nc; ++k) {
      const rs__chunk *c = &t->c[k];
      if (c->file < 0 || c->file >= m->nf) abort();
      if (c->byte_off < 0 || c->length < 0 || c->byte_off > m->f[c->file].size - c->length) abort();
    }
    if (rs__md_check_tiling(t) != RS_OK) abort();
  }
  for (int i = 0; i < m->no; ++i) {
    const rs__md_object *o = &m->o[i];
    if (o->file < 0 || o->file >= m->nf || o->byte_off > m->f[o->file].size - o->length) abort();
  }
  for (int i = 0; i < m->nf; ++i)
    if (!rs__file_name_ok(m->f[i].name)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = NULL;
  size_t len = size;
  if (size > 0 && data[0] != '{') {
    char hx[17];
    rs__hex64(XXH3_64bits(data + 1, size - 1), hx);
    char line[64];
    int n = snprintf(line, sizeof line, "{\"digest\":\"xxh3:%s\",\n", hx);
    buf = malloc((size_t)n + size);
    if (!buf) return 0;
    memcpy(buf, line, (size_t)n);
    memcpy(buf + n, data + 1, size - 1);
    len = (size_t)n + size - 1;
  } else {
    buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
  }
  rs__metadata m, back;
  if (rs__md_parse(buf, len, &m) != RS_OK) {
    if (!rs_last_error()[0]) abort(); /* every refusal says why */
    free(buf);
    return 0;
  }
  check(&m);
  char *w;
  size_t wl;
  if (rs__md_write(&m, &w, &wl) != RS_OK) abort();
  if (rs__md_parse(w, wl, &back) != RS_OK) abort(); /* what we write we must read */
  if (back.nt != m.nt || back.no != m.no || back.nf != m.nf || back.ncommon != m.ncommon || back.step != m.step)
    abort();
  char *w2;
  size_t wl2;
  if (rs__md_write(&back, &w2, &wl2) != RS_OK || wl2 != wl || memcmp(w, w2, wl) != 0) abort();
  free(w2);
  free(w);
  rs__md_free(&back);
  rs__md_free(&m);
  free(buf);
  return 0;
}
