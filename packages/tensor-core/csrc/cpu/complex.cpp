// Elementwise kernels on complex64/complex128 (std::complex arithmetic), the complex
// product reduction, and angle() of real inputs. The Python layer promotes operands to one
// complex dtype first; real-valued results (abs, angle) are written in the parts' dtype.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <complex>
#include <map>
#include <string>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "elementwise.h"

namespace py = pybind11;

namespace ember {

namespace {

#define EMBER_COMPLEX_UNARY_OPS(X)                                                                   \
  X(neg) X(conj) X(exp) X(log) X(log2) X(log10) X(sqrt) X(rsqrt) X(sin) X(cos) X(tan) X(sinh) X(cosh) \
  X(tanh) X(asin) X(acos) X(atan) X(asinh) X(acosh) X(atanh) X(reciprocal) X(square) X(sigmoid)       \
  X(sgn) X(expm1) X(log1p) X(exp2) X(abs) X(angle) X(isnan) X(isinf) X(isfinite)

enum class CUnary : int {
#define X(name) name,
  EMBER_COMPLEX_UNARY_OPS(X)
#undef X
};

#define EMBER_COMPLEX_BINARY_OPS(X) X(add) X(sub) X(mul) X(div) X(pow) X(eq) X(ne)

enum class CBinary : int {
#define X(name) name,
  EMBER_COMPLEX_BINARY_OPS(X)
#undef X
};

// PyTorch's complex reciprocal and division follow the textbook formula through
// std::complex, which handles inf/nan operands per C99 Annex G.
template <typename C>
void run_same(CUnary op, const TensorArg& out, const TensorArg& a) {
  using R = typename C::value_type;
  auto go = [&](auto f) { unary_loop<C, C>(out, a, f); };
  const R ln2 = R(0.69314718055994530942), ln10 = R(2.30258509299404568402);
  switch (op) {
    case CUnary::neg: go([](C z) { return -z; }); break;
    case CUnary::conj: go([](C z) { return std::conj(z); }); break;
    case CUnary::exp: go([](C z) { return std::exp(z); }); break;
    case CUnary::exp2: go([ln2](C z) { return std::exp(z * ln2); }); break;
    case CUnary::expm1: go([](C z) { return std::exp(z) - R(1); }); break;
    case CUnary::log: go([](C z) { return std::log(z); }); break;
    case CUnary::log2: go([ln2](C z) { return std::log(z) / ln2; }); break;
    case CUnary::log10: go([ln10](C z) { return std::log(z) / ln10; }); break;
    case CUnary::log1p: go([](C z) { return std::log(z + R(1)); }); break;
    case CUnary::sqrt: go([](C z) { return std::sqrt(z); }); break;
    case CUnary::rsqrt: go([](C z) { return C(1) / std::sqrt(z); }); break;
    case CUnary::sin: go([](C z) { return std::sin(z); }); break;
    case CUnary::cos: go([](C z) { return std::cos(z); }); break;
    case CUnary::tan: go([](C z) { return std::tan(z); }); break;
    case CUnary::sinh: go([](C z) { return std::sinh(z); }); break;
    case CUnary::cosh: go([](C z) { return std::cosh(z); }); break;
    case CUnary::tanh: go([](C z) { return std::tanh(z); }); break;
    case CUnary::asin: go([](C z) { return std::asin(z); }); break;
    case CUnary::acos: go([](C z) { return std::acos(z); }); break;
    case CUnary::atan: go([](C z) { return std::atan(z); }); break;
    case CUnary::asinh: go([](C z) { return std::asinh(z); }); break;
    case CUnary::acosh: go([](C z) { return std::acosh(z); }); break;
    case CUnary::atanh: go([](C z) { return std::atanh(z); }); break;
    case CUnary::reciprocal: go([](C z) { return C(1) / z; }); break;
    case CUnary::square: go([](C z) { return z * z; }); break;
    case CUnary::sigmoid: go([](C z) { return C(1) / (C(1) + std::exp(-z)); }); break;
    case CUnary::sgn:  // z / |z|, 0 at 0
      go([](C z) {
        R m = std::abs(z);
        return m == R(0) ? C(0) : z / m;
      });
      break;
    default:
      throw std::invalid_argument("complex unary op does not keep the dtype");
  }
}

template <typename C>
void run_real(CUnary op, const TensorArg& out, const TensorArg& a) {
  using R = typename C::value_type;
  if (op == CUnary::abs) unary_loop<R, C>(out, a, [](C z) { return std::abs(z); });
  else if (op == CUnary::angle) unary_loop<R, C>(out, a, [](C z) { return std::arg(z); });
  else throw std::invalid_argument("complex unary op has no real result");
}

template <typename C>
void run_predicate(CUnary op, const TensorArg& out, const TensorArg& a) {
  if (op == CUnary::isnan) unary_loop<bool, C>(out, a, [](C z) { return z.real() != z.real() || z.imag() != z.imag(); });
  else if (op == CUnary::isinf) unary_loop<bool, C>(out, a, [](C z) { return std::isinf(z.real()) || std::isinf(z.imag()); });
  else if (op == CUnary::isfinite)
    unary_loop<bool, C>(out, a, [](C z) { return std::isfinite(z.real()) && std::isfinite(z.imag()); });
  else throw std::invalid_argument("complex unary op is not a predicate");
}

void complex_unary_impl(int code, py::handle out_obj, py::handle a_obj) {
  if (code < 0 || code > static_cast<int>(CUnary::isfinite)) throw std::invalid_argument("bad complex unary op code");
  CUnary op = static_cast<CUnary>(code);
  TensorArg out = unpack(out_obj), a = unpack(a_obj);
  if (a.dtype != DType::Complex64 && a.dtype != DType::Complex128)
    throw std::invalid_argument("complex unary op: input must be complex64 or complex128");
  const bool predicate = op == CUnary::isnan || op == CUnary::isinf || op == CUnary::isfinite;
  const bool real = op == CUnary::abs || op == CUnary::angle;
  DType want = predicate ? DType::Bool
               : real    ? (a.dtype == DType::Complex64 ? DType::Float32 : DType::Float64)
                         : a.dtype;
  if (out.dtype != want) throw std::invalid_argument("complex unary op: output has the wrong dtype");
  if (out.numel() == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_COMPLEX(a.dtype, "complex unary op", [&] {
    if (predicate) run_predicate<scalar_t>(op, out, a);
    else if (real) run_real<scalar_t>(op, out, a);
    else run_same<scalar_t>(op, out, a);
  });
}

// PyTorch's complex pow: exp(b * log(a)), with 0 ** b = 0 for Re(b) > 0 and x ** 0 = 1.
template <typename C>
C cpow(C a, C b) {
  using R = typename C::value_type;
  if (b == C(0)) return C(1);
  if (a == C(0) && b.real() > R(0)) return C(0);
  return std::pow(a, b);
}

void complex_binary_impl(int code, py::handle out_obj, py::handle a_obj, py::handle b_obj) {
  if (code < 0 || code > static_cast<int>(CBinary::ne)) throw std::invalid_argument("bad complex binary op code");
  CBinary op = static_cast<CBinary>(code);
  TensorArg out = unpack(out_obj), a = unpack(a_obj), b = unpack(b_obj);
  check_same_dtype(a, b, "complex binary op");
  if (a.dtype != DType::Complex64 && a.dtype != DType::Complex128)
    throw std::invalid_argument("complex binary op: operands must be complex64 or complex128");
  const bool compare = op == CBinary::eq || op == CBinary::ne;
  if (out.dtype != (compare ? DType::Bool : a.dtype))
    throw std::invalid_argument("complex binary op: output has the wrong dtype");
  if (out.numel() == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_COMPLEX(a.dtype, "complex binary op", [&] {
    using C = scalar_t;
    switch (op) {
      case CBinary::add: binary_loop<C, C, C>(out, a, b, [](C x, C y) { return x + y; }); break;
      case CBinary::sub: binary_loop<C, C, C>(out, a, b, [](C x, C y) { return x - y; }); break;
      case CBinary::mul: binary_loop<C, C, C>(out, a, b, [](C x, C y) { return x * y; }); break;
      case CBinary::div: binary_loop<C, C, C>(out, a, b, [](C x, C y) { return x / y; }); break;
      case CBinary::pow: binary_loop<C, C, C>(out, a, b, [](C x, C y) { return cpow(x, y); }); break;
      case CBinary::eq: binary_loop<bool, C, C>(out, a, b, [](C x, C y) { return x == y; }); break;
      case CBinary::ne: binary_loop<bool, C, C>(out, a, b, [](C x, C y) { return x != y; }); break;
    }
  });
}

// out[r] = prod(in[r, :]) for a contiguous (rows, n) input: the product reduction, which the
// real reduction kernels cannot do on (re, im) pairs.
void complex_prod_rows_impl(py::handle out_obj, py::handle in_obj) {
  TensorArg out = unpack(out_obj), in = unpack(in_obj);
  if (in.ndim() != 2 || !in.is_contiguous() || out.ndim() != 1 || !out.is_contiguous())
    throw std::invalid_argument("complex_prod_rows: expects a contiguous 2-d input and 1-d output");
  if (in.dtype != out.dtype || out.shape[0] != in.shape[0])
    throw std::invalid_argument("complex_prod_rows: output must match the input's rows and dtype");
  const int64_t rows = in.shape[0], n = in.shape[1];
  py::gil_scoped_release release;
  EMBER_DISPATCH_COMPLEX(in.dtype, "complex_prod_rows", [&] {
    using C = scalar_t;
    const C* x = reinterpret_cast<const C*>(in.data);
    C* o = reinterpret_cast<C*>(out.data);
    parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        C acc(1);
        for (int64_t i = 0; i < n; ++i) acc *= x[r * n + i];
        o[r] = acc;
      }
    });
  });
}

// angle() of real inputs: pi for negative values, 0 otherwise, nan kept.
void real_angle_impl(py::handle out_obj, py::handle a_obj) {
  TensorArg out = unpack(out_obj), a = unpack(a_obj);
  check_same_dtype(out, a, "angle");
  if (out.numel() == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(a.dtype, "angle", [&] {
    using T = scalar_t;
    const T pi = T(3.14159265358979323846);
    unary_loop<T, T>(out, a, [pi](T x) { return x != x ? x : (x < T(0) ? pi : T(0)); });
  });
}

}  // namespace

void bind_complex(py::module_& m) {
  std::map<std::string, int> unary_codes, binary_codes;
#define X(name) unary_codes[#name] = static_cast<int>(CUnary::name);
  EMBER_COMPLEX_UNARY_OPS(X)
#undef X
#define X(name) binary_codes[#name] = static_cast<int>(CBinary::name);
  EMBER_COMPLEX_BINARY_OPS(X)
#undef X
  m.attr("complex_unary_ops") = unary_codes;
  m.attr("complex_binary_ops") = binary_codes;
  m.def("complex_unary", &complex_unary_impl, py::arg("op"), py::arg("out"), py::arg("a"),
        "out = op(a) on a complex a; abs/angle write the parts' dtype, predicates bool.");
  m.def("complex_binary", &complex_binary_impl, py::arg("op"), py::arg("out"), py::arg("a"), py::arg("b"),
        "out = op(a, b) on complex operands of one dtype, broadcast to out.");
  m.def("complex_prod_rows", &complex_prod_rows_impl, py::arg("out"), py::arg("input"));
  m.def("real_angle", &real_angle_impl, py::arg("out"), py::arg("a"));
}

}  // namespace ember
