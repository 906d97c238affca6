// Branch-free float32 math that the compiler can vectorize (libm calls block vectorization).
// Accuracy: within 2 ulp of the correctly rounded result over the whole float range.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ember {

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
  // exp(r) on |r| <= ln2/2 as 1 + r + r^2 * P(r), P of degree 5 (Cephes expf coefficients, ~1 ulp).
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // Scale by 2^n in two normal steps so results near overflow and in the subnormal range are exact.
  int32_t ni = static_cast<int32_t>(n);
  int32_t n1 = ni >> 1;
  int32_t n2 = ni - n1;
  float result = p * bits_to_float((n1 + 127) << 23) * bits_to_float((n2 + 127) << 23);
  result = x > 88.72283935546875f ? INFINITY : result;
  result = x < -103.972084045410156f ? 0.0f : result;
  return x != x ? x : result;
}

inline float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

// Whole contiguous runs, in loops of their own: inside the generic elementwise lambdas GCC's
// inliner leaves exp_f32 as a scalar call (measured: 6x slower), here the loop vectorizes
// (AVX2/AVX-512 with -march=native). o may equal x (in-place), never partially overlap it.
__attribute__((noinline, target("prefer-vector-width=512"))) inline void exp_f32_n(float* o, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = exp_f32(x[i]);
}

__attribute__((noinline, target("prefer-vector-width=512"))) inline void sigmoid_f32_n(float* o, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = sigmoid_f32(x[i]);
}

}  // namespace ember
