/* status.h - error codes and the one-line last-error message every public function sets. */
#ifndef RESHARD_STATUS_H
#define RESHARD_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rs_status {
  RS_OK = 0,
  RS_ERR_INVALID = 1,     /* bad input: a field is malformed or out of range */
  RS_ERR_UNSUPPORTED = 2, /* a transition or feature the contract rejects */
  RS_ERR_ILLEGAL = 3,     /* an illegal plan step (shard-order bookkeeping broken) */
  RS_ERR_OVERFLOW = 4,    /* a size whose byte count overflows int64 */
  RS_ERR_NOMEM = 5,
  RS_ERR_IO = 6,
  RS_ERR_NOPATH = 7,      /* a planner found no path */
  RS_ERR_TRANSPORT = 8,
  RS_ERR_MISMATCH = 9,    /* results differ from the expectation */
  RS_ERR_TIMEOUT = 10     /* a peer made no progress within the transport timeout (stalled or dead) */
} rs_status;

/* The message of the last error set on this thread ("" if none). One line, names the field. */
const char *rs_last_error(void);
/* Set the message (printf-style) and return code, so callers can `return rs_fail(...)`. */
rs_status rs_fail(rs_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void rs_clear_error(void);
/* Prefix the current message with `prefix` (e.g. "src.") and return code. */
rs_status rs_fail_prefix(rs_status code, const char *prefix);
const char *rs_status_name(rs_status s);

#ifdef __cplusplus
}
#endif
#endif
