/* reshard.h - umbrella header of the public API. */
#ifndef RESHARD_H
#define RESHARD_H
#include "reshard/status.h"
#include "reshard/dtype.h"
#include "reshard/layout.h"
#include "reshard/plan.h"
#include "reshard/events.h"
#include "reshard/case.h"
#include "reshard/ref.h"
#include "reshard/oracle.h"
#include "reshard/ckpt.h"
#endif
