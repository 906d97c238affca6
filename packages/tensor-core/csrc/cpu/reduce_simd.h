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

template <typename T, bool kMax>
T minmax_contig(const T* p, int64_t n) {
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

// One machine vector of floats (kVecBytes, common/vecmath.h).
constexpr int kVecFloats = kVecBytes / 4;
typedef float VecF __attribute__((vector_size(kVecFloats * 4)));
typedef int32_t VecI __attribute__((vector_size(kVecFloats * 4)));

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

// ember::exp_f32 (common/vecmath.h) on one vector: the same reduction, polynomial and scaling.
__attribute__((always_inline)) inline VecF exp_vec(VecF x) {
  const VecF zero = VecF{};
  VecF xc = x < -104.0f ? zero - 104.0f : x;
  xc = xc > 89.0f ? zero + 89.0f : xc;
  VecF n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  VecF r = xc - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  VecF p = zero + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
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
}

// o[i] = exp(x[i] - m) (skipped when o is null); returns the sum of those values.
inline float exp_shift_sum(float* o, const float* x, int64_t n, float m) {
  VecF acc0 = VecF{}, acc1 = VecF{};
  int64_t i = 0;
  constexpr int W = kVecFloats;
  for (; i + 2 * W <= n; i += 2 * W) {
    VecF x0, x1;
    std::memcpy(&x0, x + i, sizeof(VecF));
    std::memcpy(&x1, x + i + W, sizeof(VecF));
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

// o[i] = exp(x[i] - m) (o may be null); the sum. float32 uses exp_shift_sum above.
template <typename T>
T exp_sum(T* o, const T* x, int64_t n, T m) {
  if constexpr (std::is_same_v<T, float>) {
    return exp_shift_sum(o, x, n, m);
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

}  // namespace ember
