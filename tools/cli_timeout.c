/* cli_timeout.c - `--timeout SEC`, the progress timeout of the transports (every verb that takes
 * --transport): a number of seconds in (0, 1e6], through the one checked parser (core/numflag.h:
 * digits, an optional fraction, nothing after it, no sign, no inf/nan), handed to opt for the whole process. */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "core/numflag.h"
#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
#endif

int cli_seconds_value(const char *s, double max, double *out) {
  double t;
  if (rs__flag_seconds(s, &t) || t > max) return 1;
  *out = t;
  return 0;
}

int cli_timeout_opt(const char *cmd, int argc, char **argv, int *i) {
  const char *v;
  int r = cli_opt(argc, argv, i, "--timeout", &v);
  if (r == 0) return 0;
  double t = 0;
  if (r < 0 || cli_seconds_value(v, 1e6, &t))
    return cli_usage_error(cmd, "--timeout: expected seconds in (0, 1000000], got '%s'", r < 0 ? "" : v), -1;
#ifdef RS_HAVE_OPT
  rs_opt_set_timeout(t);
#endif
  return 1;
}
