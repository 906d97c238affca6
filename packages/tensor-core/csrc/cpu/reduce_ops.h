// Reduction functors: init / step (fold one input) / merge (fold two partial results).
// `Acc` is the accumulator and output type: int64 for integer sums, the float type itself
// for floats (float32 accumulates in float32, as PyTorch does), the input type for max/min.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace ember {

template <typename T>
using sum_acc_t = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;

template <typename T>
inline bool is_nan_v(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}

template <typename T>
inline T abs_v(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::abs(x);
  else return x;
}

template <typename T, typename Acc>
struct SumF {
  Acc init() const { return Acc(0); }
  Acc step(Acc a, T x) const { return wrapping_add(a, static_cast<Acc>(x)); }  // integers wrap
  Acc merge(Acc a, Acc b) const { return wrapping_add(a, b); }
};

template <typename T, typename Acc>
struct NanSumF {
  Acc init() const { return Acc(0); }
  Acc step(Acc a, T x) const { return a + (is_nan_v(x) ? Acc(0) : static_cast<Acc>(x)); }
  Acc merge(Acc a, Acc b) const { return a + b; }
};

template <typename T, typename Acc>
struct ProdF {
  Acc init() const { return Acc(1); }
  Acc step(Acc a, T x) const { return wrapping_mul(a, static_cast<Acc>(x)); }
  Acc merge(Acc a, Acc b) const { return wrapping_mul(a, b); }
};

// max/min propagate NaN, like PyTorch.
template <typename T>
struct MaxF {
  T init() const {
    if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
  }
  // Two selects and no short-circuit, so the lanes loop vectorizes; a NaN accumulator stays.
  T step(T a, T x) const {
    T r = x > a ? x : a;
    return is_nan_v(x) ? x : r;
  }
  T merge(T a, T b) const { return step(a, b); }
};

template <typename T>
struct MinF {
  T init() const {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::max();
  }
  T step(T a, T x) const {
    T r = x < a ? x : a;
    return is_nan_v(x) ? x : r;
  }
  T merge(T a, T b) const { return step(a, b); }
};

template <typename T>
struct AnyF {
  bool init() const { return false; }
  bool step(bool a, T x) const { return a | (x != T(0)); }
  bool merge(bool a, bool b) const { return a | b; }
};

template <typename T>
struct AllF {
  bool init() const { return true; }
  bool step(bool a, T x) const { return a & (x != T(0)); }
  bool merge(bool a, bool b) const { return a & b; }
};

template <typename T>
struct CountNonzeroF {
  int64_t init() const { return 0; }
  int64_t step(int64_t a, T x) const { return a + (x != T(0) ? 1 : 0); }
  int64_t merge(int64_t a, int64_t b) const { return a + b; }
};

// Vector-norm pieces (floating inputs only): sum |x|, sum x^2, sum |x|^p, max |x|, min |x|.
template <typename T>
struct AbsSumF {
  T init() const { return T(0); }
  T step(T a, T x) const { return a + abs_v(x); }
  T merge(T a, T b) const { return a + b; }
};

template <typename T>
struct SumSqF {
  T init() const { return T(0); }
  T step(T a, T x) const { return a + x * x; }
  T merge(T a, T b) const { return a + b; }
};

template <typename T>
struct PowSumF {
  T p;
  T init() const { return T(0); }
  T step(T a, T x) const { return a + std::pow(abs_v(x), p); }
  T merge(T a, T b) const { return a + b; }
};

template <typename T>
struct AbsMaxF {
  MaxF<T> m;
  T init() const { return T(0); }
  T step(T a, T x) const { return m.step(a, abs_v(x)); }
  T merge(T a, T b) const { return m.merge(a, b); }
};

template <typename T>
struct AbsMinF {
  MinF<T> m;
  T init() const { return m.init(); }
  T step(T a, T x) const { return m.step(a, abs_v(x)); }
  T merge(T a, T b) const { return m.merge(a, b); }
};

}  // namespace ember
