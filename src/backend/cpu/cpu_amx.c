/* cpu_amx.c — whether AMX tiles really run here (cpu_features.h). */
#define _DEFAULT_SOURCE /* syscall() for arch_prctl, which glibc does not wrap */
#include "cpu_features.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#if defined(__linux__) && defined(__x86_64__)
#include <cpuid.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* ldtilecfg's 64-byte operand, palette 1. */
typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tile_config;

static void load_config(void) {
  _Alignas(64) tile_config cfg = {0};
  cfg.palette = 1;
  for (int t = 0; t < 3; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

/* c = a times b by the tile dot-product instruction insn (tdpbssd,
 * tdpbf16ps): a, b and c 16 rows of 64 bytes each, b in the VNNI layout. */
#define TILE_PRODUCT(insn, a, b, c)                                    \
  do {                                                                 \
    const long stride_ = 64;                                           \
    load_config();                                                     \
    __asm__ volatile("tilezero %%tmm0\n\t"                             \
                     "tileloadd (%0,%2,1), %%tmm1\n\t"                 \
                     "tileloadd (%1,%2,1), %%tmm2\n\t"                 \
                     insn " %%tmm2, %%tmm1, %%tmm0\n\t"                \
                     "tilestored %%tmm0, (%3,%2,1)\n\t"                \
                     "tilerelease"                                     \
                     :                                                 \
                     : "r"(a), "r"(b), "r"(stride_), "r"(c)            \
                     : "memory");                                      \
  } while (0)

int cpu_amx_tile_product_ok(void) {
  /* A: 16 rows x 64 int8; B: 16 rows of 16 columns x 4 int8 (the VNNI
   * layout: B[k][4n + i] is element (4k + i, n)); C: 16 x 16 int32. */
  static _Alignas(64) int8_t a[16][64], b[16][64];
  static _Alignas(64) int32_t c[16][16];
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 64; j++) a[i][j] = (int8_t)(i * 7 - j), b[i][j] = (int8_t)(j * 3 - i * 5);
  TILE_PRODUCT("tdpbssd", a, b, c);
  for (int m = 0; m < 16; m++)
    for (int n = 0; n < 16; n++) {
      int32_t want = 0;
      for (int k = 0; k < 16; k++)
        for (int i = 0; i < 4; i++) want += a[m][4 * k + i] * b[k][4 * n + i];
      if (c[m][n] != want) return 0;
    }
  return 1;
}

/* BF16 of a small integer (exact: |v| < 256) */
static uint16_t bf16_of(int v) {
  const float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (uint16_t)(u >> 16);
}

int cpu_amx_bf16_tile_product_ok(void) {
  /* A: 16 rows x 32 BF16; B: 16 rows of 16 columns x 2 BF16 (B[k][2n + i]
   * is element (2k + i, n)); C: 16 x 16 F32. Small integers: every sum is
   * exact. */
  static _Alignas(64) uint16_t a[16][32], b[16][32];
  static _Alignas(64) float c[16][16];
  int av[16][32], bv[16][32];
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 32; j++) {
      av[i][j] = (i * 7 - j) % 13, bv[i][j] = (j * 3 - i * 5) % 11;
      a[i][j] = bf16_of(av[i][j]), b[i][j] = bf16_of(bv[i][j]);
    }
  TILE_PRODUCT("tdpbf16ps", a, b, c);
  for (int m = 0; m < 16; m++)
    for (int n = 0; n < 16; n++) {
      int want = 0;
      for (int k = 0; k < 16; k++)
        for (int i = 0; i < 2; i++) want += av[m][2 * k + i] * bv[k][2 * n + i];
      if (c[m][n] != (float)want) return 0;
    }
  return 1;
}

static uint64_t read_xcr0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

/* bf16: AMX-BF16 and its product, else AMX-INT8 and its product */
static int probe(int bf16, const char **why) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return *why = "cpuid: no OSXSAVE", 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((d >> 24) & 1) || !((d >> (bf16 ? 22 : 25)) & 1))
    return *why = bf16 ? "cpuid: no AMX-TILE and AMX-BF16" : "cpuid: no AMX-TILE and AMX-INT8", 0;
  if ((read_xcr0() & (3u << 17)) != (3u << 17)) return *why = "XCR0: the OS does not enable the tile state", 0;
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
    return *why = "arch_prctl(ARCH_REQ_XCOMP_PERM) refused the tile data", 0;
  /* The child inherits the permission; a fault kills only it (no core
   * file: RLIMIT_CORE 0), and it does nothing but the product and _exit. */
  const pid_t pid = fork();
  if (pid < 0) return *why = "fork failed: AMX not probed", 0;
  if (pid == 0) {
    const struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    _exit((bf16 ? cpu_amx_bf16_tile_product_ok() : cpu_amx_tile_product_ok()) ? 0 : 1);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return *why = "waitpid failed: AMX not probed", 0;
  if (WIFSIGNALED(status)) return *why = "the probe's tile product faulted (AMX advertised, not usable)", 0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return *why = "the probe's tile product gave wrong numbers", 0;
  return *why = "usable (granted and probed)", 1;
}
#else
int cpu_amx_tile_product_ok(void) { return 0; }
int cpu_amx_bf16_tile_product_ok(void) { return 0; }

static int probe(int bf16, const char **why) { return (void)bf16, *why = "not x86-64 Linux", 0; }
#endif

/* A probe's cached answer. */
typedef struct {
  pthread_once_t once;
  int usable;
  const char *why;
} amx_answer;

static amx_answer int8_answer = {PTHREAD_ONCE_INIT, 0, NULL}, bf16_answer = {PTHREAD_ONCE_INIT, 0, NULL};

static void init_int8(void) { int8_answer.usable = probe(0, &int8_answer.why); }
static void init_bf16(void) { bf16_answer.usable = probe(1, &bf16_answer.why); }

static int answer(amx_answer *a, void (*init)(void), const char **why) {
  pthread_once(&a->once, init);
  if (why) *why = a->why;
  return a->usable;
}

int cpu_amx_int8(const char **why) { return answer(&int8_answer, init_int8, why); }
int cpu_amx_bf16(const char **why) { return answer(&bf16_answer, init_bf16, why); }
