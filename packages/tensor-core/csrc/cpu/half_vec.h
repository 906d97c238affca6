// 16 lanes of a 16-bit float type (bfloat16, float16) as one __m512 of float32 and back, for
// kernels that read and write the half type directly and compute in float32 registers (no
// widened copy in memory). Conversions match dtype.h's scalar ones: float16 -> float32 and
// bfloat16 -> float32 exactly; float32 -> half type rounded to nearest even, denormals kept
// (bfloat16 by integer rounding, not vcvtneps2bf16, which flushes denormals to zero), NaN stays
// a quiet NaN.
#pragma once

#include <cstdint>

#include "../common/dtype.h"

// EMBER_HALF_VEC: whether HalfVec exists (the masked 16-bit loads and stores need AVX512BW/VL).
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define EMBER_HALF_VEC 1
#else
#define EMBER_HALF_VEC 0
#endif

#if EMBER_HALF_VEC
#include <immintrin.h>

namespace ember {

template <typename S>
struct HalfVec;

constexpr __mmask16 kHalfLanes = 0xFFFF;

template <>
struct HalfVec<BFloat16> {
  // (The zero-masked forms with a full mask throughout: gcc 12 warns on the plain intrinsics'
  // undefined pass-through operands, as in exp_vec.)
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kHalfLanes, _mm512_maskz_cvtepu16_epi32(kHalfLanes, h), 16));
  }
  static __m512 load(const BFloat16* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  // Lanes of k from p, the others `fill` (a float32 whose low 16 bits are zero: -inf, 0).
  static __m512 load_masked(const BFloat16* p, __mmask16 k, float fill) {
    const __m256i f = _mm256_set1_epi16(static_cast<short>(float_to_bf16(fill)));
    return widen(_mm256_mask_loadu_epi16(f, k, p));
  }
  static __m256i narrow(__m512 v) {
    const __m512i b = _mm512_castps_si512(v);
    const __m512i hi = _mm512_maskz_srli_epi32(kHalfLanes, b, 16);
    const __m512i lsb = _mm512_maskz_and_epi32(kHalfLanes, hi, _mm512_set1_epi32(1));
    const __m512i bias = _mm512_maskz_add_epi32(kHalfLanes, lsb, _mm512_set1_epi32(0x7fff));
    __m512i r = _mm512_maskz_srli_epi32(kHalfLanes, _mm512_maskz_add_epi32(kHalfLanes, b, bias), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
    return _mm512_maskz_cvtepi32_epi16(kHalfLanes, r);
  }
  static void store(BFloat16* p, __m512 v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow(v)); }
  static void store_masked(BFloat16* p, __mmask16 k, __m512 v) { _mm256_mask_storeu_epi16(p, k, narrow(v)); }
};

template <>
struct HalfVec<Half> {
  static __m512 load(const Half* p) {
    return _mm512_maskz_cvtph_ps(kHalfLanes, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 load_masked(const Half* p, __mmask16 k, float fill) {
    const __m256i f = _mm256_set1_epi16(static_cast<short>(float_to_half(fill)));
    return _mm512_maskz_cvtph_ps(kHalfLanes, _mm256_mask_loadu_epi16(f, k, p));
  }
  static __m256i narrow(__m512 v) {
    return _mm512_maskz_cvtps_ph(kHalfLanes, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static void store(Half* p, __m512 v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow(v)); }
  static void store_masked(Half* p, __mmask16 k, __m512 v) { _mm256_mask_storeu_epi16(p, k, narrow(v)); }
};

}  // namespace ember
#endif
