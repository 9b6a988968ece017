/* last_status.h - the code of the last rs_fail on this thread, so a front end that only sees the
 * message (the CLI) can still tell resource exhaustion (RS_ERR_NOMEM, exit 3) from bad input. */
#ifndef RS_CORE_LAST_STATUS_H
#define RS_CORE_LAST_STATUS_H

#include "reshard/status.h"

rs_status rs__last_status(void);

#endif
