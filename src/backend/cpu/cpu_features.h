/* cpu_features.h — which vector instruction sets the CPU kernels may use.
 *
 * Detected once at run time (cpuid, and xgetbv for the OS saving the wide
 * registers), so one binary runs everywhere: kernels compiled with -mavx2
 * -mfma (or -mavx512f) are only called when these say so. Overrides, read
 * once per process, so tests can cover every path on one machine:
 *   RLX_NO_AVX2=1    every vector path off: the portable scalar kernels;
 *   RLX_NO_AVX512=1  AVX-512 off: the AVX2/FMA kernels where the CPU has them.
 */
#ifndef RLX_CPU_FEATURES_H
#define RLX_CPU_FEATURES_H

typedef struct {
  int avx2_fma; /* AVX2 and FMA3, ymm state enabled by the OS */
  int f16c;     /* vcvtph2ps / vcvtps2ph (only reported together with avx2_fma) */
  int avx512;   /* AVX-512 F + BW + VL, zmm and opmask state enabled by the OS */
  int avx512_vnni; /* AVX-512 VNNI (vpdpbusd), only reported together with avx512 */
} cpu_features;

/* The usable features after the RLX_NO_* overrides (detected on first call;
 * thread-safe). */
const cpu_features *cpu_get_features(void);

/* The same, before the overrides: what the hardware and OS offer. */
const cpu_features *cpu_get_hw_features(void);

#endif /* RLX_CPU_FEATURES_H */
