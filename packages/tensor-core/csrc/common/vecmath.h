// Branch-free float32 math that the compiler can vectorize (libm calls block vectorization).
// Accuracy: within 2 ulp of the correctly rounded result over the whole float range.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ember {

// Bytes in one machine vector register: 64 where the build targets AVX-512, else 32 (AVX2).
// Hand-vectorized loops (gcc vector extensions) use this width: a 64-byte gcc vector on an
// AVX2 target is split and, wherever it crosses a function boundary, passed through memory
// (measured on AMD EPYC/AVX2: layer_norm's row statistics 1.8x, softmax's exp pass 3.5x slower).
#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
#else
constexpr int kVecBytes = 32;
#endif

inline float bits_to_float(int32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

inline float exp_f32(float x) {
  const float log2e = 1.44269504088896341f;
  const float ln2_hi = 0.693145751953125f;
  const float ln2_lo = 1.428606765330187045e-06f;
  float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  // Round to nearest by adding 1.5 * 2^23 (std::floor and integer division block vectorization).
  const float shifter = 12582912.0f;
  float n = (xc * log2e + shifter) - shifter;
  float r = xc - n * ln2_hi;
  r = r - n * ln2_lo;
  // exp(r) on |r| <= ln2/2 as 1 + r + r^2 * P(r), P of degree 4 fitted for the least relative
  // error (0.05 ulp before float rounding). Measured over every float whose exp is normal: at
  // most 1.014 ulp from the true value, as the degree-5 Cephes P it replaced (1.013 ulp), with
  // one multiply-add fewer (softmax and cross-entropy are bound by this function).
  float p = 1.3814612757e-3f;
  p = p * r + 8.3687100559e-3f;
  p = p * r + 4.1668388993e-2f;
  p = p * r + 1.6666521132e-1f;
  p = p * r + 4.9999994040e-1f;
  p = p * (r * r) + r + 1.0f;
  // Scale by 2^n in two normal steps so results near overflow and in the subnormal range are exact.
  int32_t ni = static_cast<int32_t>(n);
  int32_t n1 = ni >> 1;
  int32_t n2 = ni - n1;
  // (Shifted as unsigned: n + 127 is negative far below the subnormal range, where the result is
  // replaced by 0 below, and a left shift of a negative int is undefined.)
  float result = p * bits_to_float(static_cast<int32_t>(static_cast<uint32_t>(n1 + 127) << 23)) *
                 bits_to_float(static_cast<int32_t>(static_cast<uint32_t>(n2 + 127) << 23));
  result = x > 88.72283935546875f ? INFINITY : result;
  result = x < -103.972084045410156f ? 0.0f : result;
  return x != x ? x : result;
}

inline float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

// One machine vector of floats (kVecBytes, common/vecmath.h).
constexpr int kVecFloats = kVecBytes / 4;
typedef float VecF __attribute__((vector_size(kVecFloats * 4)));
typedef int32_t VecI __attribute__((vector_size(kVecFloats * 4)));

// ember::exp_f32 (common/vecmath.h) on one vector: the same reduction, polynomial and scaling.
// With AVX-512 the clamp is min/max and the scaling by 2^n one vscalefps (exact over the whole
// range, subnormal results included): half the instructions, results identical bit for bit
// (checked over all 2^32 inputs).
__attribute__((always_inline)) inline VecF exp_vec(VecF x) {
#if defined(__AVX512F__)
  const __m512 xi = (__m512)x;
  // vmaxps/vminps return their second operand when either is NaN: x stays NaN through both.
  // (The zero-masked forms with a full mask are the same instructions; the plain intrinsics
  // make gcc 12 warn about their undefined pass-through operand.)
  const __mmask16 all = 0xFFFF;
  __m512 xc = _mm512_maskz_max_ps(all, _mm512_set1_ps(-104.0f), xi);
  xc = _mm512_maskz_min_ps(all, _mm512_set1_ps(89.0f), xc);
  const __m512 shifter = _mm512_set1_ps(12582912.0f);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), shifter), shifter);
  __m512 rr = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc);
  rr = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), rr);
  const VecF r = (VecF)rr;
  VecF p = VecF{} + 1.3814612757e-3f;
  p = p * r + 8.3687100559e-3f;
  p = p * r + 4.1668388993e-2f;
  p = p * r + 1.6666521132e-1f;
  p = p * r + 4.9999994040e-1f;
  p = p * (r * r) + r + 1.0f;
  return (VecF)_mm512_maskz_scalef_ps(all, (__m512)p, n);
#else
  const VecF zero = VecF{};
  VecF xc = x < -104.0f ? zero - 104.0f : x;
  xc = xc > 89.0f ? zero + 89.0f : xc;
  VecF n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  VecF r = xc - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  VecF p = zero + 1.3814612757e-3f;
  p = p * r + 8.3687100559e-3f;
  p = p * r + 4.1668388993e-2f;
  p = p * r + 1.6666521132e-1f;
  p = p * r + 4.9999994040e-1f;
  p = p * (r * r) + r + 1.0f;
  VecI ni = __builtin_convertvector(n, VecI);
  VecI n1 = ni >> 1;
  VecI b1 = (n1 + 127) << 23, b2 = (ni - n1 + 127) << 23;
  VecF s1, s2;
  std::memcpy(&s1, &b1, sizeof(VecF));
  std::memcpy(&s2, &b2, sizeof(VecF));
  VecF result = p * s1 * s2;
  result = x > 88.72283935546875f ? zero + INFINITY : result;
  result = x < -103.972084045410156f ? zero : result;
  return x != x ? x : result;
#endif
}

// exp of one vector for a term of a sum that its caller checks (exp_guess_sum, reduce_simd.h):
// two multiply-adds fewer than exp_vec on the FMA pipes, which bound it (Zen 4 runs one 512-bit
// FMA-pipe operation a cycle and the adds, min/max on separate pipes): the reduction
// x - n ln2 in one step (no second, low-order ln2 term: its relative error n * 1.9e-9 is at
// most 0.5 ulp for |x| <= 17), a degree-5 polynomial (1 + r + r^2 P3, P3 fitted for the least
// error in ulps of the result), and an upper clamp at 104 (on the min/max pipe): vscalefps
// overflows to +inf by itself, but for x beyond ~1e9 the one-step reduction leaves r huge and
// P(r) of either sign, so a term came out -inf (a cross-entropy row of 1e30-scale scores summed
// to -inf, which passed the caller's finite check and gave a NaN loss).
// Measured against a float64 exp over every 61st float (session 15): at most 2.7 ulp for
// |x| <= 17, 5.5 ulp elsewhere where the result is normal (exp_vec: 1.0), same subnormal
// outputs and 0 below -104; -inf -> 0, NaN -> NaN, +inf -> +inf (exp_guess_sum's caller falls back
// on a non-finite sum). A sum of such terms is accurate to its largest terms' error: within
// a row's sum this is below the accumulation's own rounding (a lane adds ~c/32 terms one
// after another). 2.42 vs 2.90 ns a vector (exp and sum of a row in L1, thread CPU time).
#if defined(__AVX512F__)
__attribute__((always_inline)) inline __m512 exp_term_m512(__m512 x) {
  const __mmask16 all = 0xFFFF;
  // NaN stays NaN through both (vmaxps/vminps return their second operand when one is NaN)
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(104.0f), _mm512_maskz_max_ps(all, _mm512_set1_ps(-104.0f), x));
  const __m512 shifter = _mm512_set1_ps(12582912.0f);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), shifter), shifter);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693147180559945f), xc);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(8.300990797579288e-3f), r, _mm512_set1_ps(4.188389703631401e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.666724532842636e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.999929964542389e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(all, p, n);
}
#endif

// log(x) of a vector of finite floats x >= 1 (cross-entropy's log of a sum shifted so that it
// is at least 1: loss.cpp's column_lse_shifted): x = 2^e m with m in [1/sqrt 2, sqrt 2] (vgetmantps,
// vgetexpps), log x = e ln2 + log m, log m = f - f^2/2 + f^3 P(f) for f = m - 1, P of degree 8
// (the classic minimax fit of Cephes' logf), e ln2 in two parts. Checked against a float64 log
// over every 7th float in [1, 2^128): at most 0.81 ulp.
#if defined(__AVX512F__)
__attribute__((always_inline)) inline __m512 log_ge1_m512(__m512 x) {
  const __mmask16 all = 0xFFFF;
  __m512 m = _mm512_maskz_getmant_ps(all, x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_src);  // [1, 2)
  __m512 e = _mm512_maskz_getexp_ps(all, x);
  const __mmask16 hi = _mm512_cmp_ps_mask(m, _mm512_set1_ps(1.41421356f), _CMP_GT_OQ);
  m = _mm512_mask_mul_ps(m, hi, m, _mm512_set1_ps(0.5f));
  e = _mm512_mask_add_ps(e, hi, e, _mm512_set1_ps(1.0f));
  const __m512 f = _mm512_sub_ps(m, _mm512_set1_ps(1.0f));
  const __m512 z = _mm512_mul_ps(f, f);
  __m512 p = _mm512_set1_ps(7.0376836292e-2f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.1514610310e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.1676998740e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.2420140846e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.4249322787e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.6668057665e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.0000714765e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-2.4999993993e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(3.3333331174e-1f));
  __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, z), f);
  y = _mm512_fmadd_ps(e, _mm512_set1_ps(-2.12194440e-4f), y);
  y = _mm512_fnmadd_ps(z, _mm512_set1_ps(0.5f), y);
  return _mm512_fmadd_ps(e, _mm512_set1_ps(0.693359375f), _mm512_add_ps(f, y));
}
#endif

// sigmoid, tanh, erf and gelu on one vector: the scalar functions' formulas lane by lane.
__attribute__((always_inline)) inline VecF sigmoid_vec(VecF x) { return 1.0f / (1.0f + exp_vec(-x)); }

__attribute__((always_inline)) inline VecF tanh_vec(VecF x) {
  const VecF ax = x < 0.0f ? -x : x;
  const VecF z = x * x;
  const VecF small =
      ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z -
       3.33332819422e-1f) * z * x + x;
  VecF large = 1.0f - 2.0f / (exp_vec(2.0f * ax) + 1.0f);
  large = x < 0.0f ? -large : large;
  const VecF result = ax < 0.625f ? small : large;
  return x == 0.0f ? x : result;  // tanh(-0.) is -0.: the polynomial's terms add up to +0.
}

// erf(x) with e = exp(-x^2) given, for callers that need that exponential themselves (gelu's
// backward): one exp serves both.
__attribute__((always_inline)) inline VecF erf_with_exp(VecF x, VecF e) {
  const VecF ax = x < 0.0f ? -x : x;
  const VecF t = x * x;
  VecF p = VecF{} + 8.0065191925e-05f;
  p = p * t - 8.0536583050e-04f;
  p = p * t + 5.1929489142e-03f;
  p = p * t - 2.6856065678e-02f;
  p = p * t + 1.1283634561e-01f;
  p = p * t - 3.7612629762e-01f;
  p = p * t + 1.1283791662e+00f;
  const VecF small = x * p;
  const VecF u = 1.0f / (ax < 1.0f ? VecF{} + 1.0f : ax);
  VecF q = VecF{} - 3.6791359166e-02f;
  q = q * u + 2.5534577415e-01f;
  q = q * u - 7.8382851449e-01f;
  q = q * u + 1.3794717409e+00f;
  q = q * u - 1.4766368652e+00f;
  q = q * u + 8.6574954676e-01f;
  q = q * u - 5.3041877431e-02f;
  q = q * u - 2.9039154124e-01f;
  q = q * u + 4.0804653827e-03f;
  q = q * u + 5.6359378419e-01f;
  q = q * u + 3.2419564317e-05f;
  VecF large = 1.0f - e * q;
  large = ax >= 4.0f ? VecF{} + 1.0f : large;
  large = x < 0.0f ? -large : large;
  large = x != x ? x : large;
  return ax < 1.0f ? small : large;
}

__attribute__((always_inline)) inline VecF erf_vec(VecF x) { return erf_with_exp(x, exp_vec(-(x * x))); }

// The AVX2 form (AVX-512 builds take gelu_m512 below):
// gelu(x) = 0.5 x (1 + erf(z)), z = x / sqrt(2). On |z| <= 0.927734375, 1 + erf(z) = 1 + z + z P(z^2);
// beyond, erfc(|z|) = exp(R(|z|)), so 1 + erf(z) is 2 - exp(R) for z > 0 and exp(R) itself for z < 0
// (no subtraction; the absolute error stays erf's, ~6e-8, as in PyTorch's 1 + erf(z)). P and R are
// N. Juffa's float erf (measured: 0.99 ulp against double erf over all floats with a correctly
// rounded exp). R is fitted up to |z| = 4; erf(z) rounds to +-1 beyond. One exp and 13 fused
// multiply-adds: about 25% fewer operations than erf_vec, and no division.
constexpr float kGeluSmallZ = 0.927734375f;

template <typename F>
__attribute__((always_inline)) inline F gelu_erfc_exponent(F t, F s) {
  F r = -1.72853470e-5f * t + 3.83197126e-4f;
  const F u = -3.88396438e-3f * t + 2.42546219e-2f;
  r = r * s + u;
  r = r * t - 1.06777877e-1f;
  r = r * t - 6.34846687e-1f;
  r = r * t - 1.28717512e-1f;
  return r * t - t;
}

template <typename F>
__attribute__((always_inline)) inline F gelu_small_poly(F s) {
  F p = -5.96761703e-4f * s + 4.99119423e-3f;
  p = p * s - 2.67681349e-2f;
  p = p * s + 1.12819925e-1f;
  p = p * s - 3.76125336e-1f;
  return p * s + 1.28379166e-1f;
}

#if defined(__AVX512F__)
// gelu on 16 lanes with one formula for every lane, no branch computed twice: 1 + erf(z) =
// erfc(-z), which is v for z < 0 and 2 - v for z >= 0, v = erfc(|z|) = R(y) exp(-x^2 / 2) with
// y = a / (1 + a), a = q |x| (the classic erfc(t) = u P(u) exp(-t^2), u = 1 / (1 + p t), written in
// y = 1 - u so that R(y) = 1 + y S(y) keeps its rounding at 1 ulp near x = 0). S: degree 5, our
// weighted least-squares fit of erfc(t) exp(t^2) on |x| <= 6 (q = 0.37 / sqrt 2), each coefficient
// refitted after rounding the ones before it to float32; fit error 3.3e-9 in erfc, 7.5e-8 after
// float32 evaluation. exp(-x^2 / 2) through exp_term_m512 (2.7 ulp for |x| <= 5.8; erfc is below
// 1e-8 beyond). One division (its own unit), 7 multiply-adds, 4 multiplies and the exp's 7: 6.6 vs 9.8 ns a vector
// for the two-branch form it replaced (Juffa's erf, kept below for AVX2). Measured against a float64
// gelu over every 17th float with |x| < 20 (both signs): 2.8 ulp on [0, 1), 1.7 on [1, 2), ~1 beyond;
// 4.0 ulp on [-1, 0), 6.5 on [-2, -1), then the negative tail's absolute error (at most 0.45 of
// test_gelu_accuracy_against_double's bound; PyTorch's own AVX-512 erf is Abramowitz-Stegun 7.1.26,
// 1.5e-7 absolute). +inf -> +inf, -inf -> NaN (PyTorch: NaN for both on its AVX-512 path), NaN -> NaN.
__attribute__((always_inline)) inline __m512 gelu_m512(__m512 x) {
  const __mmask16 all = 0xFFFF;
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 h = _mm512_mul_ps(x, _mm512_set1_ps(0.5f));
  // a capped so that a / (1 + a) stays finite (it is 1 in float32 long before 2^30)
  const __m512 a = _mm512_maskz_min_ps(all, _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.26162952f)),
                                       _mm512_set1_ps(1073741824.0f));
  const __m512 y = _mm512_div_ps(a, _mm512_add_ps(a, one));
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(-0.3183792f), y, _mm512_set1_ps(0.39883974f));
  p = _mm512_fmadd_ps(p, y, _mm512_set1_ps(0.9881113f));
  p = _mm512_fmadd_ps(p, y, _mm512_set1_ps(-3.2915952f));
  p = _mm512_fmadd_ps(p, y, _mm512_set1_ps(4.254937f));
  p = _mm512_fmadd_ps(p, y, _mm512_set1_ps(-3.0496736f));
  p = _mm512_fmadd_ps(p, y, one);
  const __m512 v = _mm512_mul_ps(p, exp_term_m512(_mm512_fnmadd_ps(h, x, _mm512_setzero_ps())));
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mul_ps(h, _mm512_mask_blend_ps(neg, _mm512_sub_ps(_mm512_set1_ps(2.0f), v), v));
}
#endif

__attribute__((always_inline)) inline VecF gelu_vec(VecF x) {
#if defined(__AVX512F__)
  return (VecF)gelu_m512((__m512)x);
#else
  const VecF z = x * 0.70710678118654752440f;
  const VecF s = z * z;
  const VecF t = z < 0.0f ? -z : z;
  const VecF e = exp_vec(gelu_erfc_exponent(t, s));
  VecF big = z < 0.0f ? e : 2.0f - e;
  big = t >= 4.0f ? (z < 0.0f ? VecF{} : VecF{} + 2.0f) : big;
  const VecF small = 1.0f + (gelu_small_poly(s) * z + z);
  return 0.5f * x * (t > kGeluSmallZ ? big : small);  // NaN takes the small branch and stays NaN
#endif
}

// The tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), PyTorch's formula.
__attribute__((always_inline)) inline VecF gelu_tanh_vec(VecF x) {
  const VecF inner = 0.79788456080286535588f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanh_vec(inner));
}

// o[i] = f(x[i]) over whole vectors, the scalar function on the tail. gcc 12 leaves the scalar
// functions' loops scalar (their NaN and range selects become branches), 4-6x slower.
template <typename V, typename S>
__attribute__((always_inline)) inline void map_vec(float* o, const float* x, int64_t n, V vf, S sf) {
  int64_t i = 0;
  for (; i + kVecFloats <= n; i += kVecFloats) {
    VecF v;
    std::memcpy(&v, x + i, sizeof(VecF));
    v = vf(v);
    std::memcpy(o + i, &v, sizeof(VecF));
  }
  for (; i < n; ++i) o[i] = sf(x[i]);
}

// Whole contiguous runs, in loops of their own: inside the generic elementwise lambdas GCC's
// inliner leaves exp_f32 as a scalar call (measured: 6x slower), here the loop vectorizes
// (AVX2/AVX-512 with -march=native). o may equal x (in-place), never partially overlap it.
__attribute__((noinline)) inline void exp_f32_n(float* o, const float* x, int64_t n) {
  map_vec(o, x, n, [](VecF v) { return exp_vec(v); }, [](float v) { return exp_f32(v); });
}

__attribute__((noinline)) inline void sigmoid_f32_n(float* o, const float* x, int64_t n) {
  map_vec(o, x, n, [](VecF v) { return sigmoid_vec(v); }, [](float v) { return sigmoid_f32(v); });
}

// tanh: an odd polynomial near 0 (where 1 - 2/(e^2x + 1) would cancel), the exp form beyond.
inline float tanh_f32(float x) {
  float ax = std::fabs(x);
  float z = x * x;
  float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) *
                     z - 3.33332819422e-1f) * z * x + x;
  float large = 1.0f - 2.0f / (exp_f32(2.0f * ax) + 1.0f);
  large = x < 0 ? -large : large;
  if (x == 0.0f) return x;  // tanh(-0.) is -0.: the polynomial's terms add up to +0.
  return ax < 0.625f ? small : large;
}

// erf: x * P(x^2) on |x| < 1; 1 - exp(-x^2) * Q(1/|x|) on 1 <= |x| < 4 (erfc(x) e^(x^2) is smooth
// in 1/x there); 1 beyond, where erf rounds to 1 in float32. P and Q are least-squares fits of
// ours (relative error of the fit ~5e-9); worst case measured 2.5 ulp against double erf.
inline float erf_f32(float x) {
  float ax = std::fabs(x);
  float t = x * x;
  float p = 8.0065191925e-05f;
  p = p * t - 8.0536583050e-04f;
  p = p * t + 5.1929489142e-03f;
  p = p * t - 2.6856065678e-02f;
  p = p * t + 1.1283634561e-01f;
  p = p * t - 3.7612629762e-01f;
  p = p * t + 1.1283791662e+00f;
  float small = x * p;
  float u = 1.0f / (ax < 1.0f ? 1.0f : ax);
  float q = -3.6791359166e-02f;
  q = q * u + 2.5534577415e-01f;
  q = q * u - 7.8382851449e-01f;
  q = q * u + 1.3794717409e+00f;
  q = q * u - 1.4766368652e+00f;
  q = q * u + 8.6574954676e-01f;
  q = q * u - 5.3041877431e-02f;
  q = q * u - 2.9039154124e-01f;
  q = q * u + 4.0804653827e-03f;
  q = q * u + 5.6359378419e-01f;
  q = q * u + 3.2419564317e-05f;
  float large = 1.0f - exp_f32(-t) * q;
  large = ax >= 4.0f ? 1.0f : large;
  large = x < 0 ? -large : large;
  return ax < 1.0f ? small : (x != x ? x : large);
}

// gelu_vec's formula on one float (the vector loops' tails, strided elements): with AVX-512 the
// vector form on a broadcast lane, so every element gets the same bits wherever it lies.
inline float gelu_f32(float x) {
#if defined(__AVX512F__)
  return _mm512_cvtss_f32(gelu_m512(_mm512_set1_ps(x)));
#else
  const float z = x * 0.70710678118654752440f;
  const float s = z * z, t = std::fabs(z);
  if (t > kGeluSmallZ) {
    if (t >= 4.0f) return z < 0.0f ? 0.5f * x * 0.0f : x;
    const float e = exp_f32(gelu_erfc_exponent(t, s));
    return 0.5f * x * (z < 0.0f ? e : 2.0f - e);
  }
  return 0.5f * x * (1.0f + (gelu_small_poly(s) * z + z));
#endif
}

inline float gelu_tanh_f32(float x) {
  const float inner = 0.79788456080286535588f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanh_f32(inner));
}

__attribute__((noinline)) inline void tanh_f32_n(float* o, const float* x, int64_t n) {
  map_vec(o, x, n, [](VecF v) { return tanh_vec(v); }, [](float v) { return tanh_f32(v); });
}

__attribute__((noinline)) inline void erf_f32_n(float* o, const float* x, int64_t n) {
  map_vec(o, x, n, [](VecF v) { return erf_vec(v); }, [](float v) { return erf_f32(v); });
}

__attribute__((noinline)) inline void gelu_f32_n(float* o, const float* x, int64_t n) {
  map_vec(o, x, n, [](VecF v) { return gelu_vec(v); }, [](float v) { return gelu_f32(v); });
}

__attribute__((noinline)) inline void gelu_tanh_f32_n(float* o, const float* x, int64_t n) {
  map_vec(o, x, n, [](VecF v) { return gelu_tanh_vec(v); }, [](float v) { return gelu_tanh_f32(v); });
}

}  // namespace ember
