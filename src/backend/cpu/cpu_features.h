/* cpu_features.h — which vector instruction sets the CPU kernels may use.
 *
 * Detected once at run time (cpuid, and xgetbv for the OS saving the wide
 * registers), so one binary runs everywhere: kernels compiled with -mavx2
 * -mfma (or -mavx512f) are only called when these say so. Overrides, read
 * once per process, so tests can cover every path on one machine:
 *   RLX_NO_AVX2=1    every vector path off: the portable scalar kernels;
 *   RLX_NO_AVX512=1  AVX-512 off: the AVX2/FMA kernels where the CPU has them;
 *   RLX_NO_VNNI=1    AVX-512 VNNI and AVX-VNNI off: the u8 x s8 sums by
 *                    vpmaddubsw + vpmaddwd, as on CPUs before VNNI.
 */
#ifndef RLX_CPU_FEATURES_H
#define RLX_CPU_FEATURES_H

typedef struct {
  int avx2_fma; /* AVX2 and FMA3, ymm state enabled by the OS */
  int f16c;     /* vcvtph2ps / vcvtps2ph (only reported together with avx2_fma) */
  int avx512;   /* AVX-512 F + BW + VL, zmm and opmask state enabled by the OS */
  int avx512_vnni; /* AVX-512 VNNI (vpdpbusd), only reported together with avx512 */
  int avx_vnni;    /* AVX-VNNI (VEX vpdpbusd on ymm), only reported together with avx2_fma */
  int avx512_bf16; /* AVX-512 BF16 (vdpbf16ps), only reported together with avx512 */
  int amd;         /* an AMD CPU (cpuid's vendor): the packed kernels' prefetch distances (qpack.c) */
} cpu_features;

/* The usable features after the RLX_NO_* overrides (detected on first call;
 * thread-safe). */
const cpu_features *cpu_get_features(void);

/* The same, before the overrides: what the hardware and OS offer. */
const cpu_features *cpu_get_hw_features(void);

/* AMX int8 tiles (cpu_amx.c): 1 only when cpuid reports AMX-TILE and
 * AMX-INT8, the OS enables the tile state in XCR0, the kernel grants this
 * process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM) and one tile
 * product run in a forked child gives the right numbers: cpuid alone is
 * not enough (some virtual machines advertise AMX and fault on its first
 * instruction). Probed on the first call (a fork, about a millisecond),
 * then cached; thread-safe. *why, when not NULL, gets the reason in words.
 * The quantized prefill GEMM uses it (qpack_amx.c). */
int cpu_amx_int8(const char **why);

/* AMX BF16 tiles: the same checks with AMX-BF16 and a tdpbf16ps product
 * (bgemm_amx.c, the prefill GEMM of BF16 weights, uses it). */
int cpu_amx_bf16(const char **why);

/* The probe's tile product (16 x 64 int8 by 64 x 16 int8 with tdpbssd)
 * against its scalar value: 1 when equal. Faults where AMX is not usable:
 * call it only after cpu_amx_int8() said 1 (a test does, in process). */
int cpu_amx_tile_product_ok(void);

/* The same for cpu_amx_bf16's product (16 x 32 BF16 by 32 x 16 with
 * tdpbf16ps). */
int cpu_amx_bf16_tile_product_ok(void);

#endif /* RLX_CPU_FEATURES_H */
