// max/min of a contiguous float run with NaN propagation, written with gcc vector
// extensions: the generic lanes loop (reduce.cpp) does not vectorize for max/min because of
// the NaN-keeping selects, and these two are the hot loops of amax and softmax.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

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

}  // namespace ember
