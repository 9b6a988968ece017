/* b64.h - standard base64 (RFC 4648, '=' padding, no line breaks): how the process protocol
 * carries tensor bytes. */
#ifndef RS_CONFORM_B64_H
#define RS_CONFORM_B64_H

#include <stddef.h>
#include <stdint.h>

/* Characters rs_b64_encode writes for n bytes (without the NUL). */
size_t rs_b64_len(size_t n);
/* Writes rs_b64_len(n) characters and a NUL into out. */
void rs_b64_encode(const void *in, size_t n, char *out);
/* Decodes text (length len) into out (at most cap bytes); returns the byte count or -1 when text
 * is not canonical base64 (bad character, bad padding, wrong length) or does not fit. */
int64_t rs_b64_decode(const char *text, size_t len, void *out, size_t cap);

#endif
