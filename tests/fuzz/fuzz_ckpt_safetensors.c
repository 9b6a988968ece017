/* fuzz_ckpt_safetensors.c - libFuzzer target: the safetensors header parser of checkpoints
 * (core/ckpt/safetensors.c). The first 4 input bytes give the size of the data section, the rest
 * is the header JSON. Any input must be refused with a message, or give entries whose byte ranges
 * are contiguous from 0 to the end of the data, distinct names, byte counts equal to their shapes,
 * and a header that the writer reproduces and the parser reads back the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/checked.h"
#include "core/ckpt/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp_range(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
  return x[1] < y[1] ? -1 : x[1] > y[1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  int64_t data_len = (int64_t)(((uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                                (uint32_t)(data[3] & 0x7f) << 24));
  const char *json = (const char *)data + 4;
  size_t len = size - 4;
  int64_t file_size = 8 + (int64_t)len + data_len;
  rs__st_header h, back;
  if (rs__st_parse(json, len, file_size, &h) != RS_OK) {
    if (!rs_last_error()[0]) abort();
    return 0;
  }
  /* entries in offset order tile [0, end): sort a copy of the ranges */
  int64_t (*rg)[2] = malloc(sizeof *rg * (size_t)(h.n + 1));
  if (!rg) abort();
  for (int i = 0; i < h.n; ++i) {
    rg[i][0] = h.e[i].begin;
    rg[i][1] = h.e[i].end;
  }
  qsort(rg, (size_t)h.n, sizeof *rg, cmp_range);
  for (int i = 0; i < h.n; ++i)
    if (rg[i][0] != (i ? rg[i - 1][1] : 0)) abort();
  free(rg);
  for (int i = 0; i < h.n; ++i) {
    int64_t numel, bytes;
    if (!rs__numel_ok(h.e[i].shape, h.e[i].ndim, &numel) || !rs__mul_ok(numel, rs_dtype_size(h.e[i].dtype), &bytes) ||
        h.e[i].end - h.e[i].begin != bytes || h.e[i].begin < 0 || h.e[i].end > file_size - 8 - (int64_t)len)
      abort();
    for (int j = 0; j < i; ++j)
      if (strcmp(h.e[i].name, h.e[j].name) == 0) abort();
  }
  char *hb;
  size_t hl;
  if (rs__st_header_bytes(h.e, h.n, h.meta, h.nmeta, &hb, &hl) == RS_OK) {
    int64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= (int64_t)(uint8_t)hb[i] << (8 * i);
    if (n < 0 || (size_t)n + 8 != hl) abort();
    int64_t maxend = 0;
    for (int i = 0; i < h.n; ++i) maxend = h.e[i].end > maxend ? h.e[i].end : maxend;
    if (rs__st_parse(hb + 8, (size_t)n, (int64_t)hl + maxend, &back) != RS_OK) abort();
    if (back.n != h.n || back.nmeta != h.nmeta) abort();
    for (int i = 0; i < h.n; ++i) {
      int j = rs__st_find(&back, h.e[i].name);
      if (j < 0 || back.e[j].begin != h.e[i].begin || back.e[j].end != h.e[i].end || back.e[j].dtype != h.e[i].dtype)
        abort();
    }
    rs__st_free(&back);
    free(hb);
  }
  rs__st_free(&h);
  return 0;
}
