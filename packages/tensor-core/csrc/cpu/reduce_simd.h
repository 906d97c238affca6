// Hand-vectorized hot loops of amax/amin and softmax, written with gcc vector extensions
// (gcc 12 leaves the generic forms scalar or slow): max/min of a contiguous run with NaN
// propagation, and a float32 exp-and-sum pass.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "../common/vecmath.h"

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace ember {

#if defined(__AVX512F__)
// The float32 max/min of minmax_contig in 512-bit vectors: NaN lanes are recorded in mask
// registers (one compare a vector) instead of the generic form's vector compare and OR, and the
// vectors are twice as wide: half the time a row (0.27 -> 0.16 ms for 4096 rows of 1000 floats
// in L1), which is a fifth of a cross-entropy or softmax row. vmaxps(x, a) returns a where
// either is NaN, so a never becomes NaN and the mask alone says whether one was seen.
template <bool kMax>
float minmax_contig_f32(const float* p, int64_t n) {
  const __m512 init = _mm512_set1_ps(kMax ? -INFINITY : INFINITY);
  const __mmask16 all = 0xFFFF;  // the zero-masked forms: gcc 12 warns on the plain ones (exp_vec)
  __m512 a0 = init, a1 = init;
  __mmask16 nan0 = 0, nan1 = 0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 x0 = _mm512_loadu_ps(p + i), x1 = _mm512_loadu_ps(p + i + 16);
    a0 = kMax ? _mm512_maskz_max_ps(all, x0, a0) : _mm512_maskz_min_ps(all, x0, a0);
    a1 = kMax ? _mm512_maskz_max_ps(all, x1, a1) : _mm512_maskz_min_ps(all, x1, a1);
    nan0 |= _mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q);
    nan1 |= _mm512_cmp_ps_mask(x1, x1, _CMP_UNORD_Q);
  }
  alignas(64) float l0[16], l1[16];
  _mm512_store_ps(l0, a0);
  _mm512_store_ps(l1, a1);
  float r = kMax ? -INFINITY : INFINITY;
  bool nan = (nan0 | nan1) != 0;
  for (int j = 0; j < 16; ++j) {
    const float v = kMax ? (l0[j] > l1[j] ? l0[j] : l1[j]) : (l0[j] < l1[j] ? l0[j] : l1[j]);
    r = kMax ? (v > r ? v : r) : (v < r ? v : r);
  }
  for (; i < n; ++i) {
    const float x = p[i];
    nan |= x != x;
    r = kMax ? (x > r ? x : r) : (x < r ? x : r);
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : r;
}
#endif

template <typename T, bool kMax>
T minmax_contig(const T* p, int64_t n) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) return minmax_contig_f32<kMax>(p, n);
#endif
  typedef T V __attribute__((vector_size(32)));
  constexpr int W = 32 / sizeof(T);
  const T init = kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  V a0, a1;
  for (int j = 0; j < W; ++j) a0[j] = a1[j] = init;
  auto nan0 = a0 != a0;  // all false; its type is the matching integer mask vector
  auto nan1 = nan0;
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    V x0, x1;
    std::memcpy(&x0, p + i, sizeof(V));
    std::memcpy(&x1, p + i + W, sizeof(V));
    if constexpr (kMax) {
      a0 = x0 > a0 ? x0 : a0;
      a1 = x1 > a1 ? x1 : a1;
    } else {
      a0 = x0 < a0 ? x0 : a0;
      a1 = x1 < a1 ? x1 : a1;
    }
    nan0 |= x0 != x0;
    nan1 |= x1 != x1;
  }
  T r = init;
  bool nan = false;
  for (int j = 0; j < W; ++j) {
    T v = kMax ? (a0[j] > a1[j] ? a0[j] : a1[j]) : (a0[j] < a1[j] ? a0[j] : a1[j]);
    r = kMax ? (v > r ? v : r) : (v < r ? v : r);
    nan |= (nan0[j] | nan1[j]) != 0;
  }
  for (; i < n; ++i) {
    const T x = p[i];
    nan |= x != x;
    r = kMax ? (x > r ? x : r) : (x < r ? x : r);
  }
  return nan ? std::numeric_limits<T>::quiet_NaN() : r;
}

// Whether any lane of a comparison mask is set: one movemask where the ISA has it (the
// generic lane loop costs 8-16 extracts).
inline bool any_lane(VecI mask) {
#if defined(__AVX512F__)
  __m512i v;
  std::memcpy(&v, &mask, sizeof(v));
  return _mm512_test_epi32_mask(v, v) != 0;
#elif defined(__AVX__)
  __m256 v;
  std::memcpy(&v, &mask, sizeof(v));
  return _mm256_movemask_ps(v) != 0;
#else
  bool any = false;
  for (int l = 0; l < kVecFloats; ++l) any |= mask[l] != 0;
  return any;
#endif
}

// o[i] = exp(x[i] - m) (skipped when o is null); returns the sum of those values.
// `next` (may be null): a run of n floats that the caller reads next from memory (the next
// row), prefetched a line for every line of x consumed here, so its read overlaps this
// compute-bound pass instead of following it (a row-wise softmax or cross-entropy alternates a
// memory-bound max pass with this one; prefetching the whole row up front measured slower).
inline float exp_shift_sum(float* o, const float* x, int64_t n, float m, const float* next = nullptr) {
  VecF acc0 = VecF{}, acc1 = VecF{};
  int64_t i = 0;
  constexpr int W = kVecFloats;
  for (; i + 2 * W <= n; i += 2 * W) {
    VecF x0, x1;
    std::memcpy(&x0, x + i, sizeof(VecF));
    std::memcpy(&x1, x + i + W, sizeof(VecF));
    if (next) {
      __builtin_prefetch(next + i, 0, 3);
      if constexpr (W * 4 >= 64) __builtin_prefetch(next + i + W, 0, 3);
    }
    VecF e0 = exp_vec(x0 - m), e1 = exp_vec(x1 - m);
    if (o) {
      std::memcpy(o + i, &e0, sizeof(VecF));
      std::memcpy(o + i + W, &e1, sizeof(VecF));
    }
    acc0 += e0;
    acc1 += e1;
  }
  acc0 += acc1;
  float s = 0;
  for (int j = 0; j < W; ++j) s += acc0[j];
  for (; i < n; ++i) {
    float e = exp_f32(x[i] - m);
    if (o) o[i] = e;
    s += e;
  }
  return s;
}

#if defined(__AVX512F__)
// sum(exp(x[i] - c)) for a guessed shift c in one pass over x, no max pass before it: the
// terms through exp_term_m512 (common/vecmath.h), the tail through a masked load (-inf lanes
// add 0). A term above ~88 makes the sum +inf, a NaN or +inf score NaN: the caller
// (row_lse_shifted, cpu/loss.cpp) takes the result only when it is finite and falls back to
// max + exp_shift_sum otherwise. `next`: prefetched
// a line per line consumed, as in exp_shift_sum.
inline float exp_guess_sum(const float* x, int64_t n, float c, const float* next = nullptr) {
  const __m512 cv = _mm512_set1_ps(c);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if (next) {
      __builtin_prefetch(next + i, 0, 3);
      __builtin_prefetch(next + i + 16, 0, 3);
    }
    a0 = _mm512_add_ps(a0, exp_term_m512(_mm512_sub_ps(_mm512_loadu_ps(x + i), cv)));
    a1 = _mm512_add_ps(a1, exp_term_m512(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), cv)));
  }
  for (; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, x + i);
    a0 = _mm512_add_ps(a0, exp_term_m512(_mm512_sub_ps(v, cv)));
  }
  // (Through memory: gcc 12 warns on _mm512_reduce_add_ps's undefined pass-through operands.)
  alignas(64) float l[16];
  _mm512_store_ps(l, _mm512_add_ps(a0, a1));
  float s = 0;
  for (int j = 0; j < 16; ++j) s += l[j];
  return s;
}
#endif

// o[i] = exp(x[i] - m) (o may be null); the sum. float32 uses exp_shift_sum above (with
// its prefetch of `next`).
template <typename T>
T exp_sum(T* o, const T* x, int64_t n, T m, const T* next = nullptr) {
  if constexpr (std::is_same_v<T, float>) {
    return exp_shift_sum(o, x, n, m, next);
  } else {
    T s = 0;
    for (int64_t i = 0; i < n; ++i) {
      T e = std::exp(x[i] - m);
      if (o) o[i] = e;
      s += e;
    }
    return s;
  }
}

// exp of one element: the vectorized kernel's scalar form for float32, std::exp otherwise.
template <typename T>
inline T exp_scalar(T v) {
  if constexpr (std::is_same_v<T, float>) return exp_f32(v);
  else return std::exp(v);
}

// One chunk [k0, k1) of an online log-sum-exp over rows x + k * stride, per column j < bl
// (softmax over a non-last dim, cross-entropy with classes on dim 1): `mc` holds the running
// max m raised by the chunk's own max; the sum s taken against the old max is rescaled where
// it grew, m takes mc, and s += exp(x - shift) over the chunk (read again from L2), shift being
// m or 0 for an all -inf column so far (exp(-inf - 0), not exp(-inf + inf)).
// While it computes, the same columns of row k + ahead (rows below `kend` only) are prefetched
// into L2, a line per line consumed: the next chunk's max pass then reads from L2 instead of
// waiting on memory after this compute-bound pass (pass ahead = 0 for none).
// `next` (may be null): the block read after this one (its rows `stride` apart, as x's): the
// prefetch continues into its rows past kend, so the next block's first max pass does not wait
// on memory either (cross-entropy over (N, C, d) scores: the next sample's classes).
template <typename T>
void add_exp_chunk(const T* x, int64_t stride, int64_t k0, int64_t k1, int64_t bl, T* m, const T* mc, T* s,
                   T* shift, int64_t ahead = 0, int64_t kend = 0, const T* next = nullptr) {
  for (int64_t j = 0; j < bl; ++j) {
    if (mc[j] > m[j]) s[j] = m[j] == -INFINITY ? T(0) : s[j] * exp_scalar(m[j] - mc[j]);
    m[j] = mc[j];
    shift[j] = m[j] == -INFINITY ? T(0) : m[j];
  }
  int64_t jv = 0;  // columns [0, jv) go through whole vectors (float32 only)
  if constexpr (std::is_same_v<T, float>) jv = bl / kVecFloats * kVecFloats;
  for (int64_t k = k0; k < k1; ++k) {
    const T* p = x + k * stride;
    const T* pf = nullptr;
    if (ahead > 0 && k + ahead < kend) pf = p + ahead * stride;
    else if (ahead > 0 && next && k + ahead - kend < kend) pf = next + (k + ahead - kend) * stride;
    if constexpr (std::is_same_v<T, float>) {
      for (int64_t j = 0; j < jv; j += kVecFloats) {
        if (pf) __builtin_prefetch(pf + j, 0, 2);
        VecF xv, mv, sv;
        std::memcpy(&xv, p + j, sizeof(VecF));
        std::memcpy(&mv, shift + j, sizeof(VecF));
        std::memcpy(&sv, s + j, sizeof(VecF));
        sv += exp_vec(xv - mv);
        std::memcpy(s + j, &sv, sizeof(VecF));
      }
    }
    for (int64_t j = jv; j < bl; ++j) s[j] += exp_scalar(p[j] - shift[j]);
  }
}

}  // namespace ember
