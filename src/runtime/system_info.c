/* system_info.c — rlx_system_info(): the build (version, commit, options;
 * cmake/build_info.cmake passes them) and the machine as the kernels see it,
 * what `rlx --version` prints, like llama.cpp's system info. */
#include "../backend/backend.h"
#include "../backend/cpu/cpu_features.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef RLX_GIT_COMMIT
#define RLX_GIT_COMMIT "unknown"
#endif
#ifndef RLX_BUILD_TYPE
#define RLX_BUILD_TYPE "unknown"
#endif
#ifndef RLX_BUILD_SANITIZE
#define RLX_BUILD_SANITIZE 0
#endif
#if defined(__clang__)
#define RLX_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define RLX_COMPILER "gcc " __VERSION__
#else
#define RLX_COMPILER "unknown compiler"
#endif

static char info[1024];
static pthread_once_t info_once = PTHREAD_ONCE_INIT;

/* Appends the names of f's features to buf. */
static void feature_names(char *buf, size_t cap, const cpu_features *f) {
  static const struct { size_t off; const char *name; } names[] = {
      {offsetof(cpu_features, avx2_fma), "AVX2 FMA"},
      {offsetof(cpu_features, f16c), "F16C"},
      {offsetof(cpu_features, avx512), "AVX-512 (F BW VL)"},
      {offsetof(cpu_features, avx512_vnni), "AVX-512 VNNI"},
      {offsetof(cpu_features, avx512_bf16), "AVX-512 BF16"},
  };
  size_t n = strlen(buf);
  int any = 0;
  for (size_t i = 0; i < sizeof names / sizeof *names && n < cap; i++)
    if (*(const int *)((const char *)f + names[i].off)) {
      n += (size_t)snprintf(buf + n, cap - n, "%s%s", any ? ", " : "", names[i].name);
      any = 1;
    }
  if (!any && n < cap) snprintf(buf + n, cap - n, "none (portable C kernels)");
}

static void fill(void) {
  char kernels[160] = "", hw[160] = "";
  feature_names(kernels, sizeof kernels, cpu_get_features());
  feature_names(hw, sizeof hw, cpu_get_hw_features());
  const char *cuda = "off (built without the CUDA backend)";
#ifdef RLX_HAVE_CUDA
  char cuda_buf[128];
  snprintf(cuda_buf, sizeof cuda_buf, "on (architectures %s), %s", RLX_CUDA_ARCHS,
           rlx_cuda_available() ? "a device is present" : "no device present");
  cuda = cuda_buf;
#endif
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  snprintf(info, sizeof info,
           "rlx %s (commit %s)\n"
           "build: %s, %s, sanitizers %s\n"
           "cuda: %s\n"
           "cpu: kernels use %s%s%s\n"
           "threads: %d by default (%ld online cores; RLX_THREADS sets it)\n",
           rlx_version(), RLX_GIT_COMMIT, RLX_BUILD_TYPE, RLX_COMPILER, RLX_BUILD_SANITIZE ? "ASan + UBSan" : "off",
           cuda, kernels, strcmp(kernels, hw) ? "; the hardware has " : "", strcmp(kernels, hw) ? hw : "",
           rlx_cpu_threads(0), cores);
}

const char *rlx_system_info(void) {
  pthread_once(&info_once, fill);
  return info;
}
