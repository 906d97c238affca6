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
  // Round to nearest with the 1.5 * 2^23 trick: gcc 12 does not vectorize std::floor unless
  // -fno-trapping-math is given, and one libm-style call here blocks the whole loop.
  float n = (xc * log2e + 12582912.0f) - 12582912.0f;
  float r = xc - n * ln2_hi;
  r = r - n * ln2_lo;
  // exp(r) on |r| <= ln2/2: degree-7 Taylor polynomial (relative error < 2e-9).
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // Scale by 2^n in two normal steps so results near overflow and in the subnormal range are exact.
  int32_t ni = static_cast<int32_t>(n);
  int32_t n1 = ni / 2;
  int32_t n2 = ni - n1;
  float result = p * bits_to_float((n1 + 127) << 23) * bits_to_float((n2 + 127) << 23);
  result = x > 88.72283935546875f ? INFINITY : result;
  result = x < -103.972084045410156f ? 0.0f : result;
  return x != x ? x : result;
}

inline float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

}  // namespace ember
