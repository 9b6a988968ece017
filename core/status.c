/* status.c - the thread-local last-error message behind rs_fail / rs_last_error. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "reshard/status.h"
#include "core/last_status.h"

static _Thread_local char rs_err_buf[512];
static _Thread_local rs_status rs_err_code;

rs_status rs__last_status(void) { return rs_err_code; }

const char *rs_last_error(void) { return rs_err_buf; }

void rs_clear_error(void) {
  rs_err_buf[0] = '\0';
  rs_err_code = RS_OK;
}

rs_status rs_fail(rs_status code, const char *fmt, ...) {
  va_list ap;
  char tmp[sizeof rs_err_buf];
  rs_err_code = code;
  /* formatted apart, then copied: an argument may be rs_last_error() itself (re-coding or
   * prefixing the current message), and vsnprintf into its own source is undefined behaviour */
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  memcpy(rs_err_buf, tmp, sizeof tmp);
  /* one line: control characters (a hostile key name may hold a newline) become '?', so the
   * message never ends early and never spans lines */
  for (char *p = rs_err_buf; *p; ++p)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
  return code;
}

const char *rs_status_name(rs_status s) {
  switch (s) {
    case RS_OK: return "ok";
    case RS_ERR_INVALID: return "invalid";
    case RS_ERR_UNSUPPORTED: return "unsupported";
    case RS_ERR_ILLEGAL: return "illegal";
    case RS_ERR_OVERFLOW: return "overflow";
    case RS_ERR_NOMEM: return "nomem";
    case RS_ERR_IO: return "io";
    case RS_ERR_NOPATH: return "nopath";
    case RS_ERR_TRANSPORT: return "transport";
    case RS_ERR_MISMATCH: return "mismatch";
  }
  return "unknown";
}

rs_status rs_fail_prefix(rs_status code, const char *prefix) {
  return rs_fail(code, "%s%s", prefix, rs_err_buf);
}
