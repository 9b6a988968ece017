/* b64.c - base64 for the process protocol's tensor bytes (see b64.h). Strict: a backend that
 * writes anything but canonical base64 gets told so instead of having its bytes guessed. */
#include "conform/b64.h"

static const char ALPHA[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t rs_b64_len(size_t n) { return (n + 2) / 3 * 4; }

void rs_b64_encode(const void *in, size_t n, char *out) {
  const unsigned char *p = in;
  size_t o = 0, i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
    out[o++] = ALPHA[v >> 18], out[o++] = ALPHA[(v >> 12) & 63];
    out[o++] = ALPHA[(v >> 6) & 63], out[o++] = ALPHA[v & 63];
  }
  if (n - i == 1) {
    uint32_t v = (uint32_t)p[i] << 16;
    out[o++] = ALPHA[v >> 18], out[o++] = ALPHA[(v >> 12) & 63], out[o++] = '=', out[o++] = '=';
  } else if (n - i == 2) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
    out[o++] = ALPHA[v >> 18], out[o++] = ALPHA[(v >> 12) & 63], out[o++] = ALPHA[(v >> 6) & 63];
    out[o++] = '=';
  }
  out[o] = 0;
}

static int val(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

int64_t rs_b64_decode(const char *text, size_t len, void *out, size_t cap) {
  unsigned char *q = out;
  if (len % 4) return -1;
  size_t pad = 0;
  if (len && text[len - 1] == '=') pad++;
  if (len > 1 && text[len - 2] == '=') pad++;
  size_t n = len / 4 * 3 - pad;
  if (n > cap) return -1;
  size_t o = 0;
  for (size_t i = 0; i < len; i += 4) {
    int v[4];
    for (int k = 0; k < 4; k++) {
      v[k] = (i + (size_t)k >= len - pad) ? 0 : val(text[i + (size_t)k]);
      if (v[k] < 0) return -1;
    }
    uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    unsigned char b[3] = {(unsigned char)(w >> 16), (unsigned char)(w >> 8), (unsigned char)w};
    for (int k = 0; k < 3 && o < n; k++) q[o++] = b[k];
    /* canonical: the bits the padding drops must be zero */
    if (i + 4 == len && ((pad == 1 && (v[2] & 3)) || (pad == 2 && (v[1] & 15)))) return -1;
  }
  return (int64_t)n;
}
