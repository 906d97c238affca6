// Kernel family "mathfns": number theory (gcd, lcm), float decomposition (frexp), modified Bessel
// functions (i0, i1), the regularized incomplete gamma functions (igamma, igammac) and the
// logcumsumexp scan. Operands arrive promoted to one compute dtype by the Python layer
// (float16/bfloat16 as float32); pointwise kernels broadcast through elementwise.h.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "elementwise.h"

namespace py = pybind11;

namespace ember {

namespace {

// Euclid on magnitudes exactly as PyTorch's calc_gcd: |INT_MIN| wraps to INT_MIN and the loop
// continues in signed arithmetic (so gcd(127, -128) in int8 is -1, as there). A divisor of -1
// short-cuts to remainder 0: INT64_MIN % -1 would trap.
template <typename T>
T wrap_abs(T v) {
  if constexpr (std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return v < 0 ? static_cast<T>(U(0) - static_cast<U>(v)) : v;
  } else {
    return v;
  }
}

template <typename T>
T gcd_of(T a, T b) {
  a = wrap_abs(a);
  b = wrap_abs(b);
  while (a != 0) {
    T c = a;
    if constexpr (std::is_signed_v<T>) {
      a = a == T(-1) ? T(0) : static_cast<T>(b % a);
    } else {
      a = static_cast<T>(b % a);
    }
    b = c;
  }
  return b;
}

// |a / g * b| evaluated as PyTorch's C++ does: narrow types promote to int (no overflow there),
// int32/int64 wrap (in unsigned arithmetic here, to stay defined).
template <typename T>
T lcm_of(T a, T b) {
  T g = gcd_of(a, b);
  if (g == 0) return 0;
  using W = std::conditional_t<(sizeof(T) < sizeof(int)), int, T>;
  using U = std::make_unsigned_t<W>;
  U prod = static_cast<U>(static_cast<U>(static_cast<W>(a / g)) * static_cast<U>(static_cast<W>(b)));
  W v = static_cast<W>(prod);
  return static_cast<T>(v < 0 ? static_cast<W>(U(0) - prod) : v);
}

void check_same(const TensorArg& out, std::initializer_list<const TensorArg*> ins, const char* what) {
  for (const TensorArg* t : ins)
    if (t->dtype != out.dtype) throw std::invalid_argument(std::string(what) + ": operand dtypes differ");
}

void gcd_lcm(py::handle out_obj, py::handle a_obj, py::handle b_obj, bool lcm) {
  TensorArg out = unpack(out_obj), a = unpack(a_obj), b = unpack(b_obj);
  check_same(out, {&a, &b}, lcm ? "lcm" : "gcd");
  py::gil_scoped_release release;
  EMBER_DISPATCH_INTEGRAL(out.dtype, lcm ? "lcm" : "gcd", [&] {
    if (lcm)
      binary_loop<scalar_t, scalar_t, scalar_t>(out, a, b, [](scalar_t x, scalar_t y) { return lcm_of(x, y); });
    else
      binary_loop<scalar_t, scalar_t, scalar_t>(out, a, b, [](scalar_t x, scalar_t y) { return gcd_of(x, y); });
  });
}

// -- frexp: mantissa in (-1, -0.5] U [0.5, 1) and an int32 exponent, x = mantissa * 2^exponent ----

void frexp_impl(py::handle mant_obj, py::handle exp_obj, py::handle x_obj) {
  TensorArg m = unpack(mant_obj), e = unpack(exp_obj), x = unpack(x_obj);
  if (!m.is_contiguous() || !e.is_contiguous() || !x.is_contiguous() || m.shape != x.shape || e.shape != x.shape ||
      e.dtype != DType::Int32 || m.dtype != x.dtype)
    throw std::invalid_argument("frexp: expects contiguous operands of one shape and an int32 exponent");
  int64_t n = x.numel();
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(x.dtype, "frexp", [&] {
    const scalar_t* px = reinterpret_cast<const scalar_t*>(x.data);
    scalar_t* pm = reinterpret_cast<scalar_t*>(m.data);
    int32_t* pe = reinterpret_cast<int32_t*>(e.data);
    parallel_for(n, kGrainSize, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        int ex = 0;
        pm[i] = std::frexp(px[i], &ex);
        pe[i] = std::isfinite(px[i]) ? ex : 0;
      }
    });
  });
}

// -- i0, i1: libstdc++'s cyl_bessel_i on |x| (even / odd functions) ------------------------------

double bessel_i(int order, double x) {
  if (std::isnan(x) || std::isinf(x)) return std::numeric_limits<double>::quiet_NaN();  // as PyTorch's i0/i1
  double ax = std::fabs(x);
  if (ax > 713.0) return order == 1 && x < 0 ? -HUGE_VAL : HUGE_VAL;  // overflows double
  double v = std::cyl_bessel_i(static_cast<double>(order), ax);
  return order == 1 && x < 0 ? -v : v;
}

void bessel_impl(py::handle out_obj, py::handle x_obj, int order) {
  if (order != 0 && order != 1) throw std::invalid_argument("bessel_i_: order must be 0 or 1");
  TensorArg out = unpack(out_obj), x = unpack(x_obj);
  check_same(out, {&x}, "i0");
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(out.dtype, "i0", [&] {
    unary_loop<scalar_t, scalar_t>(out, x, [order](scalar_t v) {
      return static_cast<scalar_t>(bessel_i(order, static_cast<double>(v)));
    });
  });
}

// -- igamma / igammac: regularized P(a, x) and Q(a, x) -----------------------------------------
// Series for x < a + 1, Lentz's continued fraction otherwise (Numerical Recipes 6.2), in double.

double log_prefactor(double a, double x) { return -x + a * std::log(x) - std::lgamma(a); }

double gamma_series(double a, double x) {  // P(a, x)
  double ap = a, del = 1.0 / a, sum = del;
  for (int i = 0; i < 100000; ++i) {
    ap += 1;
    del *= x / ap;
    sum += del;
    if (std::fabs(del) < std::fabs(sum) * 1e-17) break;
  }
  return sum * std::exp(log_prefactor(a, x));
}

double gamma_fraction(double a, double x) {  // Q(a, x)
  constexpr double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-16) break;
  }
  return std::exp(log_prefactor(a, x)) * h;
}

// PyTorch's special values (aten/src/ATen/native/Math.h calc_igamma / calc_igammac).
double igamma_of(double a, double x, bool upper) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // In PyTorch's order: a NaN `a` with x == 0 still gives the x == 0 value.
  if (x < 0 || a < 0) return nan;
  if (a == 0) return x > 0 ? (upper ? 0.0 : 1.0) : nan;
  if (x == 0) return upper ? 1.0 : 0.0;
  if (std::isinf(a)) return std::isinf(x) ? nan : (upper ? 1.0 : 0.0);
  if (std::isinf(x)) return upper ? 0.0 : 1.0;
  if (std::isnan(a) || std::isnan(x)) return nan;
  if (x < a + 1) {
    double p = gamma_series(a, x);
    return upper ? 1 - p : p;
  }
  double q = gamma_fraction(a, x);
  return upper ? q : 1 - q;
}

void igamma_impl(py::handle out_obj, py::handle a_obj, py::handle x_obj, bool upper) {
  TensorArg out = unpack(out_obj), a = unpack(a_obj), x = unpack(x_obj);
  check_same(out, {&a, &x}, "igamma");
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(out.dtype, "igamma", [&] {
    binary_loop<scalar_t, scalar_t, scalar_t>(out, a, x, [upper](scalar_t av, scalar_t xv) {
      return static_cast<scalar_t>(igamma_of(static_cast<double>(av), static_cast<double>(xv), upper));
    });
  });
}

// -- logcumsumexp over the middle dim of a contiguous (outer, n, inner) tensor ---------------------

template <typename T>
T log_add_exp(T acc, T v) {
  if (std::isnan(acc) || std::isnan(v)) return std::numeric_limits<T>::quiet_NaN();
  T hi = acc > v ? acc : v, lo = acc > v ? v : acc;
  if (std::isinf(hi)) return hi;  // +inf absorbs anything; -inf with -inf stays -inf
  return hi + std::log1p(std::exp(lo - hi));
}

void logcumsumexp_impl(py::handle out_obj, py::handle x_obj, int64_t outer, int64_t n, int64_t inner) {
  TensorArg out = unpack(out_obj), x = unpack(x_obj);
  check_same(out, {&x}, "logcumsumexp");
  if (!out.is_contiguous() || !x.is_contiguous() || outer < 0 || n < 0 || inner < 0 ||
      out.numel() != x.numel() || (outer * n * inner != x.numel()))
    throw std::invalid_argument("logcumsumexp: expects contiguous operands of outer * n * inner elements");
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(x.dtype, "logcumsumexp", [&] {
    const scalar_t* px = reinterpret_cast<const scalar_t*>(x.data);
    scalar_t* po = reinterpret_cast<scalar_t*>(out.data);
    parallel_for(outer * inner, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, n)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t r = begin; r < end; ++r) {
                     int64_t base = (r / inner) * n * inner + r % inner;
                     scalar_t acc = -std::numeric_limits<scalar_t>::infinity();
                     for (int64_t j = 0; j < n; ++j) {
                       acc = log_add_exp(acc, px[base + j * inner]);
                       po[base + j * inner] = acc;
                     }
                   }
                 });
  });
}

}  // namespace

void bind_mathfns(py::module_& m) {
  m.def("gcd_", [](py::handle o, py::handle a, py::handle b) { gcd_lcm(o, a, b, false); }, py::arg("out"),
        py::arg("a"), py::arg("b"), "out = gcd(a, b) for integer operands of one dtype (broadcast).");
  m.def("lcm_", [](py::handle o, py::handle a, py::handle b) { gcd_lcm(o, a, b, true); }, py::arg("out"),
        py::arg("a"), py::arg("b"), "out = lcm(a, b) for integer operands of one dtype (broadcast).");
  m.def("frexp_", &frexp_impl, py::arg("mantissa"), py::arg("exponent"), py::arg("x"),
        "mantissa and int32 exponent of a contiguous float32/float64 x.");
  m.def("bessel_i_", &bessel_impl, py::arg("out"), py::arg("x"), py::arg("order"),
        "out = I_order(x), the modified Bessel function of the first kind, order 0 or 1.");
  m.def("igamma_", &igamma_impl, py::arg("out"), py::arg("a"), py::arg("x"), py::arg("upper"),
        "out = P(a, x) (upper: Q(a, x)), the regularized incomplete gamma functions (broadcast).");
  m.def("logcumsumexp_", &logcumsumexp_impl, py::arg("out"), py::arg("x"), py::arg("outer"), py::arg("n"),
        py::arg("inner"), "Running log(sum(exp)) along the middle dim of contiguous (outer, n, inner) tensors.");
}

}  // namespace ember
