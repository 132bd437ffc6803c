/* simd_math.h — the f32 vector math of the CPU kernels (exp, log, tanh,
 * sigmoid, erf and the two GELU forms), written once for any lane count.
 * Not a standalone header: simd.h includes it for 8 lanes (AVX2/FMA,
 * functions simd_*) and simd512.h for 16 lanes (AVX-512F, simd16_*). The
 * includer defines
 *   SIMD_FN(name)  the name of a function defined here,
 *   SIMD_OP(name)  its primitive `name` (below), for the vector type V,
 *                  mask type M and 32-bit integer vector type I:
 *     V set1(float) zero() add sub mul div fmadd fnmadd fmsub min max(V, V)
 *       abs copysign(mag, sgn) round (to nearest even) select(M, a, b)
 *     M lt eq nge (unordered or not >=)
 *     I cvt (V to int, nearest) iset1(int) iadd isub iand ior(I, I)
 *       srai srli slli(I, const int) ; V ifloat(I) asf(I) ; I asi(V)
 * and the types SIMD_V, SIMD_I. Every primitive is the same IEEE operation
 * at either width and the operations run in the same order, so both widths
 * give the same result, bit for bit, in every lane.
 *
 * The math follows Cephes' single-precision routines (range reduction plus
 * minimax polynomials); against a double reference the errors are a few
 * f32 ulp (tests/test_vec.c: exp, log <= 2, tanh <= 3, sigmoid, silu, erf
 * <= 4, gelu <= 10), except where the argument's own rounding is amplified:
 * gelu_tanh's negative tail (~x e^{2u}) loses ~|2u| ulp to u. Special
 * values behave as libm: NaN propagates, exp(-inf) = 0, exp(+inf) = inf,
 * log(0) = -inf, log(x < 0) = NaN, tanh(+-inf) = +-1, erf(+-inf) = +-1.
 */
#if !defined(SIMD_FN) || !defined(SIMD_OP) || !defined(SIMD_V) || !defined(SIMD_I)
#error "simd_math.h is included by simd.h / simd512.h only"
#endif

#define V_ SIMD_V
#define I_ SIMD_I
#define C_(f) SIMD_OP(set1)(f)
#define ADD_ SIMD_OP(add)
#define SUB_ SIMD_OP(sub)
#define MUL_ SIMD_OP(mul)
#define FMA_ SIMD_OP(fmadd)

/* ---------------------------------------------------------------- exp, log */

/* e^x for x in [-105, 89] or NaN (callers whose argument is in range
 * skip exp's clamps). x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6
 * polynomial; 2^n is applied as two factors so results down to the
 * subnormals are right. */
static inline V_ SIMD_FN(exp_in_range)(V_ x) {
  V_ n = SIMD_OP(round)(MUL_(x, C_(1.44269504088896341f)));
  V_ r = SIMD_OP(fnmadd)(n, C_(0.693359375f), x);
  r = SIMD_OP(fnmadd)(n, C_(-2.12194440e-4f), r);
  V_ p = C_(1.9875691500e-4f);
  p = FMA_(p, r, C_(1.3981999507e-3f));
  p = FMA_(p, r, C_(8.3334519073e-3f));
  p = FMA_(p, r, C_(4.1665795894e-2f));
  p = FMA_(p, r, C_(1.6666665459e-1f));
  p = FMA_(p, r, C_(5.0000001201e-1f));
  p = FMA_(p, MUL_(r, r), ADD_(r, C_(1.0f)));
  I_ ni = SIMD_OP(cvt)(n);
  I_ n1 = SIMD_OP(srai)(ni, 1), n2 = SIMD_OP(isub)(ni, n1);
  const I_ bias = SIMD_OP(iset1)(127);
  V_ s1 = SIMD_OP(asf)(SIMD_OP(slli)(SIMD_OP(iadd)(n1, bias), 23));
  V_ s2 = SIMD_OP(asf)(SIMD_OP(slli)(SIMD_OP(iadd)(n2, bias), 23));
  return MUL_(MUL_(p, s1), s2);
}

/* e^x. Inputs are clamped to [-105, 89]: beyond them e^x is 0 or inf
 * anyway. */
static inline V_ SIMD_FN(exp)(V_ x) {
  /* max/min return their second operand for a NaN: a NaN x stays NaN */
  return SIMD_FN(exp_in_range)(SIMD_OP(min)(C_(89.0f), SIMD_OP(max)(C_(-105.0f), x)));
}

/* ln x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln(m) by a polynomial in
 * m - 1, plus e ln2 in two parts. Subnormal inputs are scaled up first. */
static inline V_ SIMD_FN(log)(V_ x) {
  const V_ one = C_(1.0f), zero = SIMD_OP(zero)();
  SIMD_M tiny = SIMD_OP(lt)(x, C_(1.17549435e-38f));
  V_ xs = SIMD_OP(select)(tiny, MUL_(x, C_(33554432.0f)), x); /* 2^25 */
  I_ bits = SIMD_OP(asi)(xs);
  V_ e = SIMD_OP(ifloat)(SIMD_OP(isub)(SIMD_OP(srli)(bits, 23), SIMD_OP(iset1)(126)));
  e = SUB_(e, SIMD_OP(select)(tiny, C_(25.0f), zero));
  V_ m = SIMD_OP(asf)(SIMD_OP(ior)(SIMD_OP(iand)(bits, SIMD_OP(iset1)(0x007fffff)),
                                   SIMD_OP(iset1)(0x3f000000))); /* [0.5, 1) */
  SIMD_M lo = SIMD_OP(lt)(m, C_(0.707106781186547524f));
  e = SUB_(e, SIMD_OP(select)(lo, one, zero));
  m = ADD_(SUB_(m, one), SIMD_OP(select)(lo, m, zero)); /* 2m - 1 or m - 1 */
  V_ z = MUL_(m, m);
  V_ y = C_(7.0376836292e-2f);
  y = FMA_(y, m, C_(-1.1514610310e-1f));
  y = FMA_(y, m, C_(1.1676998740e-1f));
  y = FMA_(y, m, C_(-1.2420140846e-1f));
  y = FMA_(y, m, C_(1.4249322787e-1f));
  y = FMA_(y, m, C_(-1.6668057665e-1f));
  y = FMA_(y, m, C_(2.0000714765e-1f));
  y = FMA_(y, m, C_(-2.4999993993e-1f));
  y = FMA_(y, m, C_(3.3333331174e-1f));
  y = MUL_(MUL_(y, m), z);
  y = FMA_(e, C_(-2.12194440e-4f), y);
  y = SIMD_OP(fnmadd)(z, C_(0.5f), y);
  V_ r = ADD_(m, y);
  r = FMA_(e, C_(0.693359375f), r);
  /* specials: log(0) = -inf, log(+inf) = +inf, log(<0) and log(NaN) = NaN */
  r = SIMD_OP(select)(SIMD_OP(eq)(x, zero), C_(-INFINITY), r);
  r = SIMD_OP(select)(SIMD_OP(eq)(x, C_(INFINITY)), x, r);
  r = SIMD_OP(select)(SIMD_OP(nge)(x, zero), C_(NAN), r);
  return r;
}

/* ---------------------------------------------------------------- tanh, sigmoid */

/* |x| < 0.625: x + x^3 P(x^2); else sign(x) (1 - 2 / (e^{2|x|} + 1)). */
static inline V_ SIMD_FN(tanh)(V_ x) {
  V_ a = SIMD_OP(abs)(x);
  V_ z = MUL_(x, x);
  V_ p = C_(-5.70498872745e-3f);
  p = FMA_(p, z, C_(2.06390887954e-2f));
  p = FMA_(p, z, C_(-5.37397155531e-2f));
  p = FMA_(p, z, C_(1.33314422036e-1f));
  p = FMA_(p, z, C_(-3.33332819422e-1f));
  V_ small = FMA_(MUL_(p, z), x, x);
  V_ e = SIMD_FN(exp)(ADD_(a, a));
  V_ big = SUB_(C_(1.0f), SIMD_OP(div)(C_(2.0f), ADD_(e, C_(1.0f))));
  big = SIMD_OP(copysign)(big, x);
  return SIMD_OP(select)(SIMD_OP(lt)(a, C_(0.625f)), small, big);
}

/* 1 / (1 + e^-x) as e / (1 + e) with e = e^{-|x|} <= 1 for x < 0: no
 * overflow, and relative accuracy in the negative tail (into the
 * subnormals). */
static inline V_ SIMD_FN(sigmoid)(V_ x) {
  const V_ one = C_(1.0f), zero = SIMD_OP(zero)();
  V_ e = SIMD_FN(exp)(SUB_(zero, SIMD_OP(abs)(x)));
  V_ num = SIMD_OP(select)(SIMD_OP(lt)(x, zero), e, one);
  return SIMD_OP(div)(num, ADD_(one, e));
}

static inline V_ SIMD_FN(silu)(V_ x) { return MUL_(x, SIMD_FN(sigmoid)(x)); }

/* ---------------------------------------------------------------- erf, erfc, GELU */

/* erf(x) for |x| < 1: x P(x^2). */
static inline V_ SIMD_FN(erf_small)(V_ x) {
  V_ z = MUL_(x, x);
  V_ p = C_(7.853861353153693e-5f);
  p = FMA_(p, z, C_(-8.010193625184903e-4f));
  p = FMA_(p, z, C_(5.188327685732524e-3f));
  p = FMA_(p, z, C_(-2.685381193529856e-2f));
  p = FMA_(p, z, C_(1.128358514861418e-1f));
  p = FMA_(p, z, C_(-3.761262582423300e-1f));
  p = FMA_(p, z, C_(1.128379165726710e0f));
  return MUL_(p, x);
}

/* erfc(a) for a >= 1 (erf's tail, where 1 - erf would cancel): e^{-a^2}
 * (1/a) P(1/a^2), one polynomial on [1, 2) and one on [2, inf) (Cephes).
 * e^{-a^2} takes the rounding error of a*a into account (in the tail erfc
 * is sensitive to a^2: a rounded a*a would cost ~a^2 ulp). Above a = 10.5
 * erfc is 0 in f32 (e^{-a^2} underflows). */
static inline V_ SIMD_FN(erfc_tail)(V_ a) {
  a = SIMD_OP(min)(C_(10.5f), a); /* (a NaN stays NaN) */
  V_ sq = MUL_(a, a);
  V_ sq_err = SIMD_OP(fmsub)(a, a, sq); /* a*a - sq, exactly */
  V_ z = SIMD_FN(exp)(SUB_(SIMD_OP(zero)(), sq));
  z = SIMD_OP(fnmadd)(z, sq_err, z); /* e^{-sq - err} ~ e^{-sq} (1 - err) */
  V_ q = SIMD_OP(div)(C_(1.0f), a);
  V_ y = MUL_(q, q);
  V_ p = C_(2.326819970068386e-2f);
  p = FMA_(p, y, C_(-1.387039388740657e-1f));
  p = FMA_(p, y, C_(3.687424674597105e-1f));
  p = FMA_(p, y, C_(-5.824733027278666e-1f));
  p = FMA_(p, y, C_(6.210004621745983e-1f));
  p = FMA_(p, y, C_(-4.944515323274145e-1f));
  p = FMA_(p, y, C_(3.404879937665872e-1f));
  p = FMA_(p, y, C_(-2.741127028184656e-1f));
  p = FMA_(p, y, C_(5.638259427386472e-1f));
  V_ r = C_(-1.047766399936249e1f);
  r = FMA_(r, y, C_(1.297719955372516e1f));
  r = FMA_(r, y, C_(-7.495518717768503e0f));
  r = FMA_(r, y, C_(2.921019019210786e0f));
  r = FMA_(r, y, C_(-1.015265279202700e0f));
  r = FMA_(r, y, C_(4.218463358204948e-1f));
  r = FMA_(r, y, C_(-2.820767439740514e-1f));
  r = FMA_(r, y, C_(5.641895067754075e-1f));
  V_ poly = SIMD_OP(select)(SIMD_OP(lt)(a, C_(2.0f)), p, r);
  return MUL_(MUL_(z, q), poly);
}

static inline V_ SIMD_FN(erf)(V_ x) {
  V_ a = SIMD_OP(abs)(x);
  V_ big = SUB_(C_(1.0f), SIMD_FN(erfc_tail)(SIMD_OP(max)(C_(1.0f), a)));
  big = SIMD_OP(copysign)(big, x);
  return SIMD_OP(select)(SIMD_OP(lt)(a, C_(1.0f)), SIMD_FN(erf_small)(x), big);
}

/* GELU, erf form: x Phi(x) with Phi(x) = erfc(a)/2 for x < 0 and
 * 1 - erfc(a)/2 for x >= 0, a = |x|/sqrt2, and erfc(a) = e^{-a^2} erfcx(a):
 * erfcx by a rational fit (degrees 4/5, ~7 ulp on [0, 10.5]), e^{-a^2}
 * from x itself (x^2/2 exactly, as sq + sq_err). One exp and one division;
 * relative accuracy also as x -> -inf. */
static inline V_ SIMD_FN(gelu)(V_ x) {
  /* |x| <= 14.49: x^2/2 <= 105, in exp's range; past it erfc(a) is 0 in
   * f32 anyway. p carries the 1/2 of erfc(a)/2 (exactly: a power of 2). */
  V_ ax = SIMD_OP(min)(C_(14.49f), SIMD_OP(abs)(x));
  V_ a = MUL_(ax, C_(0.70710678118654752f));
  V_ p = C_(0.5f * 0.033400606364011765f);
  p = FMA_(p, a, C_(0.5f * 0.2321174293756485f));
  p = FMA_(p, a, C_(0.5f * 0.7376965880393982f));
  p = FMA_(p, a, C_(0.5f * 1.2442325353622437f));
  p = FMA_(p, a, C_(0.5f));
  V_ q = C_(0.05920042470097542f);
  q = FMA_(q, a, C_(0.4114411175251007f));
  q = FMA_(q, a, C_(1.336735725402832f));
  q = FMA_(q, a, C_(2.41489315032959f));
  q = FMA_(q, a, C_(2.372612237930298f));
  q = FMA_(q, a, C_(1.0f));
  V_ xx = MUL_(ax, ax);
  V_ sq_err = MUL_(C_(0.5f), SIMD_OP(fmsub)(ax, ax, xx));
  V_ e = SIMD_FN(exp_in_range)(MUL_(xx, C_(-0.5f))); /* e^{-x^2/2} of the rounded x^2 */
  e = SIMD_OP(fnmadd)(e, sq_err, e);
  V_ ec = MUL_(e, SIMD_OP(div)(p, q)); /* erfc(a) / 2 */
  V_ phi = SIMD_OP(select)(SIMD_OP(lt)(x, SIMD_OP(zero)()), ec, SUB_(C_(1.0f), ec));
  return MUL_(x, phi);
}

/* GELU, tanh form: x (1 + tanh u) / 2 = x sigmoid(2u), u = sqrt(2/pi) (x +
 * 0.044715 x^3): no cancellation in either tail. */
static inline V_ SIMD_FN(gelu_tanh)(V_ x) {
  /* 2u = x (k + k 0.044715 x^2), k = 2 sqrt(2/pi): three roundings */
  V_ u2 = MUL_(x, FMA_(C_(0.071354816f), MUL_(x, x), C_(1.5957691216057308f)));
  return MUL_(x, SIMD_FN(sigmoid)(u2));
}

#undef V_
#undef I_
#undef C_
#undef ADD_
#undef SUB_
#undef MUL_
#undef FMA_
