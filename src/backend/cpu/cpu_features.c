/* cpu_features.c — run-time detection behind cpu_features.h. */
#include "cpu_features.h"

#include "../../ir/ir.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* XCR0: which register states the OS saves on a context switch. Executed
 * only when cpuid reports OSXSAVE, so xgetbv exists. */
static uint64_t read_xcr0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

static void detect(cpu_features *f) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return;
  f->amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u; /* "AuthenticAMD" */
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
  if (!osxsave || !avx) return;
  uint64_t xcr0 = read_xcr0();
  if ((xcr0 & 0x6) != 0x6) return; /* xmm + ymm state */
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
  int avx2 = (b >> 5) & 1, avx512f = (b >> 16) & 1, avx512bw = (b >> 30) & 1;
  int avx512vl = (b >> 31) & 1, avx512vnni = (c >> 11) & 1;
  f->avx2_fma = avx2 && fma;
  f->f16c = f->avx2_fma && f16c;
  /* opmask, upper halves of zmm0-15, zmm16-31 */
  f->avx512 = f->f16c && avx512f && avx512bw && avx512vl && (xcr0 & 0xe0) == 0xe0;
  f->avx512_vnni = f->avx512 && avx512vnni;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f->avx_vnni = f->avx2_fma && ((a >> 4) & 1);
    f->avx512_bf16 = f->avx512 && ((a >> 5) & 1);
  }
}
#else
static void detect(cpu_features *f) { (void)f; }
#endif

static cpu_features hw, usable;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void) {
  detect(&hw);
  usable = hw;
  if (ir_env_flag("RLX_NO_AVX512", 0)) usable.avx512 = usable.avx512_vnni = usable.avx512_bf16 = 0;
  if (ir_env_flag("RLX_NO_VNNI", 0)) usable.avx512_vnni = usable.avx_vnni = 0;
  if (ir_env_flag("RLX_NO_AVX2", 0)) usable = (cpu_features){0};
}

const cpu_features *cpu_get_features(void) {
  pthread_once(&once, init);
  return &usable;
}

const cpu_features *cpu_get_hw_features(void) {
  pthread_once(&once, init);
  return &hw;
}
