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

typedef float VF16 __attribute__((vector_size(64)));
typedef int32_t VI16 __attribute__((vector_size(64)));

// ember::exp_f32 (common/vecmath.h) on 16 lanes: the same reduction, polynomial and scaling.
inline VF16 exp_vf16(VF16 x) {
  const VF16 zero = VF16{};
  VF16 xc = x < -104.0f ? zero - 104.0f : x;
  xc = xc > 89.0f ? zero + 89.0f : xc;
  VF16 n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  VF16 r = xc - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  VF16 p = zero + 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  VI16 ni = __builtin_convertvector(n, VI16);
  VI16 n1 = ni >> 1;
  VI16 b1 = (n1 + 127) << 23, b2 = (ni - n1 + 127) << 23;
  VF16 s1, s2;
  std::memcpy(&s1, &b1, sizeof(VF16));
  std::memcpy(&s2, &b2, sizeof(VF16));
  VF16 result = p * s1 * s2;
  result = x > 88.72283935546875f ? zero + INFINITY : result;
  result = x < -103.972084045410156f ? zero : result;
  return x != x ? x : result;
}

// o[i] = exp(x[i] - m) (skipped when o is null); returns the sum of those values.
inline float exp_shift_sum(float* o, const float* x, int64_t n, float m) {
  VF16 acc0 = VF16{}, acc1 = VF16{};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    VF16 x0, x1;
    std::memcpy(&x0, x + i, sizeof(VF16));
    std::memcpy(&x1, x + i + 16, sizeof(VF16));
    VF16 e0 = exp_vf16(x0 - m), e1 = exp_vf16(x1 - m);
    if (o) {
      std::memcpy(o + i, &e0, sizeof(VF16));
      std::memcpy(o + i + 16, &e1, sizeof(VF16));
    }
    acc0 += e0;
    acc1 += e1;
  }
  acc0 += acc1;
  float s = 0;
  for (int j = 0; j < 16; ++j) s += acc0[j];
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
