/* device.c — which device: the device backend this build has and its
 * devices, device names ("auto", "cpu", "cuda", "cuda:N") and the
 * RLX_DEVICE switch that overrides what a program asks for.
 */
#include "runtime.h"

#include <stdlib.h>
#include <string.h>

const rlx_backend *rlx_device_backend(void) {
#ifdef RLX_HAVE_CUDA
  return &rlx_cuda_backend;
#else
  return NULL;
#endif
}

int rlx_device_available(void) { return rlx_device_count() > 0; }

int rlx_device_count(void) {
#ifdef RLX_HAVE_CUDA
  return rlx_cuda_device_count();
#else
  return 0;
#endif
}

/* "auto", "cpu", "cuda" or "cuda:N" (N: 1 to 4 digits): 1, else 0. */
static int parse_device(const char *text, rlx_device *device, int *index) {
  *device = RLX_DEVICE_AUTO, *index = 0;
  if (!strcmp(text, "auto")) return 1;
  if (!strcmp(text, "cpu")) return *device = RLX_DEVICE_CPU, 1;
  if (!strcmp(text, "cuda")) return *device = RLX_DEVICE_CUDA, 1;
  if (strncmp(text, "cuda:", 5) || !text[5] || strlen(text + 5) > 4) return 0;
  int n = 0;
  for (const char *p = text + 5; *p; p++) {
    if (*p < '0' || *p > '9') return 0;
    n = n * 10 + (*p - '0');
  }
  return *device = RLX_DEVICE_CUDA, *index = n, 1;
}

rlx_status rlx_device_parse(const char *text, rlx_device *device, int *device_index) {
  if (!text || !device || !device_index) return rlx_set_error(RLX_ERR_INVALID, "rlx_device_parse: NULL argument");
  if (parse_device(text, device, device_index)) return RLX_OK;
  return rlx_set_error(RLX_ERR_INVALID, "device \"%.40s\" is not auto, cpu, cuda or cuda:N (N a device index)", text);
}

int rt_env_device(rlx_device *device, int *index) {
  const char *env = getenv("RLX_DEVICE");
  rlx_device d;
  int i;
  if (!env || !parse_device(env, &d, &i) || d == RLX_DEVICE_AUTO) return 0;
  return *device = d, *index = i, 1;
}

rlx_device rlx_compile_device(rlx_device requested) {
  rlx_device d;
  int index;
  return rt_env_device(&d, &index) ? d : requested;
}
