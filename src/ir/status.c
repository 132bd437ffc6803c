/* status.c — status names and the thread-local last-error message. */
#include "ir.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

const char *rlx_status_name(rlx_status s) {
  switch (s) {
  case RLX_OK: return "RLX_OK";
  case RLX_ERR_INVALID: return "RLX_ERR_INVALID";
  case RLX_ERR_SHAPE: return "RLX_ERR_SHAPE";
  case RLX_ERR_DTYPE: return "RLX_ERR_DTYPE";
  case RLX_ERR_UNSUPPORTED: return "RLX_ERR_UNSUPPORTED";
  case RLX_ERR_NOMEM: return "RLX_ERR_NOMEM";
  case RLX_ERR_IO: return "RLX_ERR_IO";
  case RLX_ERR_FORMAT: return "RLX_ERR_FORMAT";
  case RLX_ERR_DEVICE: return "RLX_ERR_DEVICE";
  case RLX_ERR_INTERNAL: return "RLX_ERR_INTERNAL";
  }
  return "RLX_ERR_UNKNOWN";
}

const char *rlx_last_error(void) { return last_error; }

const char *rlx_version(void) { return RLX_VERSION; }

rlx_status rlx_set_errorv(rlx_status st, const char *fmt, va_list ap) {
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  return st;
}

rlx_status rlx_set_error(rlx_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rlx_set_errorv(st, fmt, ap);
  va_end(ap);
  return st;
}
