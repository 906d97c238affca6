// Unary elementwise ops. Floating ops run on float32/float64 (the Python layer converts
// integer and float16/bfloat16 inputs to float32 first); sign-like ops run on every compute
// dtype; predicates write bool. Up to three scalar parameters (alpha, beta, bounds) ride along.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <map>
#include <string>
#include <type_traits>

#include "../common/dtype.h"
#include "../common/vecmath.h"
#include "elementwise.h"

namespace py = pybind11;

namespace ember {

namespace {

#define EMBER_UNARY_OPS(X)                                                                          \
  X(abs) X(neg) X(sign) X(sqrt) X(rsqrt) X(exp) X(exp2) X(expm1) X(log) X(log2) X(log10) X(log1p)  \
  X(sin) X(cos) X(tan) X(asin) X(acos) X(atan) X(sinh) X(cosh) X(tanh) X(asinh) X(acosh) X(atanh)  \
  X(sigmoid) X(erf) X(erfc) X(erfinv) X(floor) X(ceil) X(round) X(trunc) X(frac) X(reciprocal)     \
  X(relu) X(gelu) X(gelu_tanh) X(silu) X(mish) X(hardsigmoid) X(hardswish) X(softplus) X(elu)      \
  X(leaky_relu) X(hardtanh) X(nan_to_num) X(bitwise_not) X(logical_not) X(isnan) X(isinf)          \
  X(isfinite) X(isposinf) X(isneginf) X(signbit) X(square) X(round_decimals) X(lgamma) X(digamma)   \
  X(polygamma) X(selu) X(celu) X(logit) X(relu6) X(softsign) X(tanhshrink) X(threshold)

enum class UnaryOp : int {
#define X(name) name,
  EMBER_UNARY_OPS(X)
#undef X
};

template <typename T>
T erfinv_impl(T y) {
  // Giles' single-precision approximation as the start, then two Newton steps on erf.
  if (y <= T(-1)) return y == T(-1) ? -INFINITY : NAN;
  if (y >= T(1)) return y == T(1) ? INFINITY : NAN;
  double w = -std::log((1.0 - y) * (1.0 + y));
  double x;
  if (w < 5.0) {
    w -= 2.5;
    double p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
    x = p * y;
  } else {
    w = std::sqrt(w) - 3.0;
    double p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
    x = p * y;
  }
  const double two_over_sqrt_pi = 1.1283791670955126;
  for (int i = 0; i < 2; ++i) {
    double err = std::erf(x) - static_cast<double>(y);
    x -= err / (two_over_sqrt_pi * std::exp(-x * x));
  }
  return static_cast<T>(x);
}

template <typename T>
T digamma_impl(T xin) {
  double x = xin;
  if (x == 0) return std::signbit(x) ? INFINITY : -INFINITY;
  if (x < 0) {
    if (x == std::floor(x)) return NAN;
    // Reflection: psi(1 - x) - psi(x) = pi / tan(pi x)
    const double pi = 3.14159265358979323846;
    return static_cast<T>(digamma_impl<double>(1 - x) - pi / std::tan(pi * x));
  }
  double result = 0;
  while (x < 6) {
    result -= 1 / x;
    x += 1;
  }
  double f = 1 / (x * x);
  double series = f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132)))));
  return static_cast<T>(result + std::log(x) - 0.5 / x - series);
}

// psi'(x) by recurrence up to x >= 6 then the asymptotic series; reflection below 0.5. Computed in
// T, as PyTorch does (so float32 gives its finite values near the poles).
template <typename T>
T trigamma_impl(T x) {
  const T pi = T(3.14159265358979323846);
  T sign = T(1), result = T(0);
  if (x < T(0.5)) {
    sign = T(-1);
    const T s = std::sin(pi * x);
    result -= (pi * pi) / (s * s);
    x = T(1) - x;
  }
  for (int i = 0; i < 6; ++i) {
    result += T(1) / (x * x);
    x += T(1);
  }
  const T ixx = T(1) / (x * x);
  result += (T(1) + T(1) / (T(2) * x) + ixx * (T(1) / T(6) - ixx * (T(1) / T(30) - ixx * (T(1) / T(42))))) / x;
  return sign * result;
}

// Hurwitz zeta(s, q) = sum_k (k + q)^-s by Euler-Maclaurin summation (Cephes' scheme).
inline double hurwitz_zeta(double s, double q) {
  static const double A[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                             7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
                             -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18};
  const double eps = 1.11022302462515654042e-16;
  if (s == 1) return INFINITY;
  if (s < 1) return NAN;
  if (q <= 0) {
    if (q == std::floor(q)) return INFINITY;
    if (s != std::floor(s)) return NAN;
  }
  double sum = std::pow(q, -s), a = q, b = 0;
  int i = 0;
  while (i < 9 || a <= 9) {
    ++i;
    a += 1;
    b = std::pow(a, -s);
    sum += b;
    if (std::fabs(b / sum) < eps) return sum;
  }
  const double w = a;
  sum += b * w / (s - 1) - 0.5 * b;
  double fac = 1, k = 0;
  for (int j = 0; j < 12; ++j) {
    fac *= s + k;
    b /= w;
    const double t = fac * b / A[j];
    sum += t;
    if (std::fabs(t / sum) < eps) return sum;
    k += 1;
    fac *= s + k;
    b /= w;
    k += 1;
  }
  return sum;
}

// polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 2; digamma and trigamma below that.
template <typename T>
T polygamma_impl(int n, T x) {
  if (n == 0) return digamma_impl(x);
  if (n == 1) return trigamma_impl(x);
  const double sign = (n % 2) ? 1.0 : -1.0;
  return static_cast<T>(sign * std::exp(std::lgamma(n + 1.0)) * hurwitz_zeta(n + 1.0, static_cast<double>(x)));
}

template <typename T>
T exp_t(T x) {
  if constexpr (std::is_same_v<T, float>) return exp_f32(x);
  else return std::exp(x);
}

template <typename T>
T round_half_even(T x) { return std::nearbyint(x); }

struct Params {
  double p0 = 0, p1 = 0, p2 = 0;
};

template <typename T>
void run_float(UnaryOp op, const TensorArg& out, const TensorArg& a, const Params& prm) {
  auto go = [&](auto f) { unary_loop<T, T>(out, a, f); };
  const T p0 = static_cast<T>(prm.p0), p1 = static_cast<T>(prm.p1), p2 = static_cast<T>(prm.p2);
  switch (op) {
    case UnaryOp::sqrt: go([](T x) { return std::sqrt(x); }); break;
    case UnaryOp::rsqrt: go([](T x) { return T(1) / std::sqrt(x); }); break;
    case UnaryOp::exp:
      if constexpr (std::is_same_v<T, float>) unary_loop_runs<T, T>(out, a, [](T x) { return exp_t(x); }, exp_f32_n);
      else go([](T x) { return exp_t(x); });
      break;
    case UnaryOp::exp2: go([](T x) { return std::exp2(x); }); break;
    case UnaryOp::expm1: go([](T x) { return std::expm1(x); }); break;
    case UnaryOp::log: go([](T x) { return std::log(x); }); break;
    case UnaryOp::log2: go([](T x) { return std::log2(x); }); break;
    case UnaryOp::log10: go([](T x) { return std::log10(x); }); break;
    case UnaryOp::log1p: go([](T x) { return std::log1p(x); }); break;
    case UnaryOp::sin: go([](T x) { return std::sin(x); }); break;
    case UnaryOp::cos: go([](T x) { return std::cos(x); }); break;
    case UnaryOp::tan: go([](T x) { return std::tan(x); }); break;
    case UnaryOp::asin: go([](T x) { return std::asin(x); }); break;
    case UnaryOp::acos: go([](T x) { return std::acos(x); }); break;
    case UnaryOp::atan: go([](T x) { return std::atan(x); }); break;
    case UnaryOp::sinh: go([](T x) { return std::sinh(x); }); break;
    case UnaryOp::cosh: go([](T x) { return std::cosh(x); }); break;
    case UnaryOp::tanh:
      if constexpr (std::is_same_v<T, float>) unary_loop_runs<T, T>(out, a, tanh_f32, tanh_f32_n);
      else go([](T x) { return std::tanh(x); });
      break;
    case UnaryOp::asinh: go([](T x) { return std::asinh(x); }); break;
    case UnaryOp::acosh: go([](T x) { return std::acosh(x); }); break;
    case UnaryOp::atanh: go([](T x) { return std::atanh(x); }); break;
    case UnaryOp::sigmoid:
      if constexpr (std::is_same_v<T, float>) unary_loop_runs<T, T>(out, a, sigmoid_f32, sigmoid_f32_n);
      else go([](T x) { return T(1) / (T(1) + exp_t(-x)); });
      break;
    case UnaryOp::erf:
      if constexpr (std::is_same_v<T, float>) unary_loop_runs<T, T>(out, a, erf_f32, erf_f32_n);
      else go([](T x) { return std::erf(x); });
      break;
    case UnaryOp::erfc: go([](T x) { return std::erfc(x); }); break;
    case UnaryOp::erfinv: go([](T x) { return erfinv_impl(x); }); break;
    case UnaryOp::lgamma: go([](T x) { return std::lgamma(x); }); break;
    case UnaryOp::digamma: go([](T x) { return digamma_impl(x); }); break;
    case UnaryOp::polygamma: {  // p0 = n
      const int n = static_cast<int>(prm.p0);
      go([n](T x) { return polygamma_impl(n, x); });
      break;
    }
    case UnaryOp::frac: go([](T x) { return x - std::trunc(x); }); break;
    case UnaryOp::reciprocal: go([](T x) { return T(1) / x; }); break;
    case UnaryOp::gelu:
      if constexpr (std::is_same_v<T, float>) unary_loop_runs<T, T>(out, a, gelu_f32, gelu_f32_n);
      else go([](T x) { return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440))); });
      break;
    case UnaryOp::gelu_tanh:
      if constexpr (std::is_same_v<T, float>) unary_loop_runs<T, T>(out, a, gelu_tanh_f32, gelu_tanh_f32_n);
      else go([](T x) {
        const T k = T(0.79788456080286535588);  // sqrt(2/pi)
        return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
      });
      break;
    case UnaryOp::silu: go([](T x) { return x / (T(1) + exp_t(-x)); }); break;
    case UnaryOp::mish: go([](T x) { return x * std::tanh(x > T(20) ? x : std::log1p(std::exp(x))); }); break;
    case UnaryOp::hardsigmoid: go([](T x) { return x <= T(-3) ? T(0) : (x >= T(3) ? T(1) : x / T(6) + T(0.5)); }); break;
    case UnaryOp::hardswish:  // x * clamp(x + 3, 0, 6) / 6, which keeps nan and gives nan at -inf like PyTorch
      go([](T x) {
        T y = x + T(3);
        y = y < T(0) ? T(0) : y;
        y = y > T(6) ? T(6) : y;
        return x * y / T(6);
      });
      break;
    case UnaryOp::softplus:  // p0 = beta, p1 = threshold
      go([p0, p1](T x) { return x * p0 > p1 ? x : std::log1p(std::exp(x * p0)) / p0; });
      break;
    case UnaryOp::elu:  // p0 = alpha, p1 = scale, p2 = input_scale
      go([p0, p1, p2](T x) { return x > T(0) ? p1 * x : p1 * p0 * std::expm1(x * p2); });
      break;
    case UnaryOp::selu:
      go([](T x) {
        const T alpha = T(1.6732632423543772848170429916717), scale = T(1.0507009873554804934193349852946);
        return x > T(0) ? scale * x : scale * alpha * std::expm1(x);
      });
      break;
    case UnaryOp::celu: go([p0](T x) { return x > T(0) ? x : p0 * std::expm1(x / p0); }); break;
    case UnaryOp::logit:  // p0 = eps (negative: none)
      go([p0](T x) {
        if (p0 >= T(0)) x = x < p0 ? p0 : (x > T(1) - p0 ? T(1) - p0 : x);
        return std::log(x / (T(1) - x));
      });
      break;
    case UnaryOp::softsign: go([](T x) { return x / (T(1) + std::fabs(x)); }); break;
    case UnaryOp::tanhshrink: go([](T x) { return x - std::tanh(x); }); break;
    case UnaryOp::nan_to_num:  // p0 = nan, p1 = posinf, p2 = neginf
      go([p0, p1, p2](T x) { return x != x ? p0 : (x == INFINITY ? p1 : (x == -INFINITY ? p2 : x)); });
      break;
    case UnaryOp::round_decimals:  // p0 = 10^decimals
      go([p0](T x) {
        if (p0 == T(1)) return round_half_even(x);
        return p0 > T(1) ? round_half_even(x * p0) / p0 : round_half_even(x / (T(1) / p0)) * (T(1) / p0);
      });
      break;
    default:
      throw std::invalid_argument("unary op is not a floating op");
  }
}

// Ops defined on every compute dtype, keeping it.
template <typename T>
void run_any(UnaryOp op, const TensorArg& out, const TensorArg& a, const Params& prm) {
  auto go = [&](auto f) { unary_loop<T, T>(out, a, f); };
  constexpr bool is_float = std::is_floating_point_v<T>;
  constexpr bool is_bool = std::is_same_v<T, bool>;
  switch (op) {
    case UnaryOp::abs:
      if constexpr (is_float) go([](T x) { return std::fabs(x); });
      else if constexpr (std::is_signed_v<T>) go([](T x) { return x < 0 ? wrapping_neg(x) : x; });
      else go([](T x) { return x; });
      break;
    case UnaryOp::neg:
      if constexpr (is_bool) throw std::invalid_argument("neg is not supported for bool");
      else if constexpr (is_float) go([](T x) { return -x; });
      else go([](T x) { return static_cast<T>(-static_cast<std::make_unsigned_t<T>>(x)); });
      break;
    case UnaryOp::sign:
      if constexpr (is_bool) go([](T x) { return x; });
      else if constexpr (is_float) go([](T x) { return static_cast<T>((T(0) < x) - (x < T(0))); });  // nan -> 0
      else go([](T x) { return static_cast<T>((T(0) < x) - (x < T(0))); });
      break;
    case UnaryOp::square:
      if constexpr (is_bool) go([](T x) { return x; });
      else go([](T x) { return wrapping_mul(x, x); });
      break;
    case UnaryOp::relu:
      if constexpr (is_bool) throw std::invalid_argument("relu is not supported for bool");
      // x < 0 keeps nan and -0.0 as they are (PyTorch's relu(-0.) is -0.)
      else go([](T x) { return x < T(0) ? T(0) : x; });
      break;
    case UnaryOp::relu6:
      go([](T x) { return x != x ? x : (x < T(0) ? T(0) : (x > T(6) ? T(6) : x)); });
      break;
    case UnaryOp::floor:
    case UnaryOp::ceil:
    case UnaryOp::round:
    case UnaryOp::trunc:
      if constexpr (is_float) {
        if (op == UnaryOp::floor) go([](T x) { return std::floor(x); });
        else if (op == UnaryOp::ceil) go([](T x) { return std::ceil(x); });
        else if (op == UnaryOp::round) go([](T x) { return round_half_even(x); });
        else go([](T x) { return std::trunc(x); });
      } else {
        go([](T x) { return x; });
      }
      break;
    case UnaryOp::bitwise_not:
      if constexpr (is_float) throw std::invalid_argument("bitwise_not is only defined for integer and bool");
      else if constexpr (is_bool) go([](T x) { return !x; });
      else go([](T x) { return static_cast<T>(~x); });
      break;
    case UnaryOp::leaky_relu: {
      T slope = static_cast<T>(prm.p0);
      go([slope](T x) { return x > T(0) ? x : static_cast<T>(x * slope); });
      break;
    }
    case UnaryOp::hardtanh:
    case UnaryOp::threshold: {
      if constexpr (is_bool) throw std::invalid_argument("not supported for bool");
      else {
        T lo = static_cast<T>(prm.p0), hi = static_cast<T>(prm.p1);
        if (op == UnaryOp::hardtanh) go([lo, hi](T x) { return x != x ? x : (x < lo ? lo : (x > hi ? hi : x)); });
        else go([lo, hi](T x) { return x <= lo ? hi : x; });  // threshold: p0 = threshold, p1 = value; nan stays
      }
      break;
    }
    default:
      if constexpr (is_float) run_float<T>(op, out, a, prm);
      else throw std::invalid_argument("unary op needs a floating-point input");
  }
}

template <typename T>
void run_predicate(UnaryOp op, const TensorArg& out, const TensorArg& a) {
  auto go = [&](auto f) { unary_loop<bool, T>(out, a, f); };
  constexpr bool is_float = std::is_floating_point_v<T>;
  switch (op) {
    case UnaryOp::logical_not: go([](T x) { return x == T(0); }); break;
    case UnaryOp::isnan: go([](T x) { return x != x; }); break;
    case UnaryOp::isinf:
      if constexpr (is_float) go([](T x) { return std::isinf(x); });
      else go([](T) { return false; });
      break;
    case UnaryOp::isfinite:
      if constexpr (is_float) go([](T x) { return std::isfinite(x); });
      else go([](T) { return true; });
      break;
    case UnaryOp::isposinf:
      if constexpr (is_float) go([](T x) { return x == INFINITY; });
      else go([](T) { return false; });
      break;
    case UnaryOp::isneginf:
      if constexpr (is_float) go([](T x) { return x == -INFINITY; });
      else go([](T) { return false; });
      break;
    case UnaryOp::signbit:
      if constexpr (is_float) go([](T x) { return std::signbit(x); });
      else if constexpr (std::is_signed_v<T>) go([](T x) { return x < 0; });
      else go([](T) { return false; });
      break;
    default:
      throw std::invalid_argument("unary op is not a predicate");
  }
}

bool is_predicate(UnaryOp op) {
  switch (op) {
    case UnaryOp::logical_not: case UnaryOp::isnan: case UnaryOp::isinf: case UnaryOp::isfinite:
    case UnaryOp::isposinf: case UnaryOp::isneginf: case UnaryOp::signbit:
      return true;
    default:
      return false;
  }
}

void unary_impl(int code, py::handle out_obj, py::handle a_obj, double p0, double p1, double p2) {
  if (code < 0 || code > static_cast<int>(UnaryOp::threshold)) throw std::invalid_argument("bad unary op code");
  UnaryOp op = static_cast<UnaryOp>(code);
  TensorArg out = unpack(out_obj), a = unpack(a_obj);
  bool predicate = is_predicate(op);
  if (predicate ? out.dtype != DType::Bool : out.dtype != a.dtype)
    throw std::invalid_argument("unary op: output has the wrong dtype");
  if (out.numel() == 0) return;
  Params prm{p0, p1, p2};
  py::gil_scoped_release release;
  if (predicate) {
    EMBER_DISPATCH_COMPUTE(a.dtype, "unary op", [&] { run_predicate<scalar_t>(op, out, a); });
  } else {
    EMBER_DISPATCH_COMPUTE(a.dtype, "unary op", [&] { run_any<scalar_t>(op, out, a, prm); });
  }
}

}  // namespace

// Entry point for the dispatcher's native fast path (common/fast_dispatch.cpp).
void run_unary_kernel(int code, py::handle out, py::handle a) { unary_impl(code, out, a, 0.0, 0.0, 0.0); }

void bind_unary(py::module_& m) {
  std::map<std::string, int> codes;
#define X(name) codes[#name] = static_cast<int>(UnaryOp::name);
  EMBER_UNARY_OPS(X)
#undef X
  m.attr("unary_ops") = codes;
  m.def("unary", &unary_impl, py::arg("op"), py::arg("out"), py::arg("a"), py::arg("p0") = 0.0,
        py::arg("p1") = 0.0, py::arg("p2") = 0.0, "out = op(a; p0, p1, p2), a broadcast to out.");
}

}  // namespace ember
