// Binary elementwise ops. Operands arrive already promoted to one compute dtype (the
// Python op layer applies PyTorch's type promotion and converts float16/bfloat16 to
// float32); comparison and logical ops write bool.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cmath>
#include <map>
#include <string>
#include <type_traits>

#include "../common/dtype.h"
#include "elementwise.h"

namespace py = pybind11;

namespace ember {

namespace {

#define EMBER_BINARY_OPS(X)                                                                        \
  X(add) X(sub) X(mul) X(div) X(floor_divide) X(remainder) X(fmod) X(pow) X(maximum) X(minimum)    \
  X(fmax) X(fmin) X(atan2) X(hypot) X(copysign) X(logaddexp) X(logaddexp2) X(bitwise_and)          \
  X(bitwise_or) X(bitwise_xor) X(bitwise_left_shift) X(bitwise_right_shift) X(logical_and)         \
  X(logical_or) X(logical_xor) X(eq) X(ne) X(lt) X(le) X(gt) X(ge) X(xlogy) X(nextafter)

enum class BinaryOp : int {
#define X(name) name,
  EMBER_BINARY_OPS(X)
#undef X
};

bool writes_bool(BinaryOp op) { return op >= BinaryOp::logical_and && op <= BinaryOp::ge; }

template <typename T>
constexpr bool is_float_v = std::is_floating_point_v<T>;

struct ZeroDivision {
  std::atomic<bool> hit{false};
};

template <typename T>
T int_floor_div(T a, T b, ZeroDivision& z) {
  if (b == 0) {
    z.hit.store(true, std::memory_order_relaxed);
    return 0;
  }
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return static_cast<T>(-static_cast<std::make_unsigned_t<T>>(a));  // no INT_MIN/-1 trap
    T q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
  } else {
    return a / b;
  }
}

template <typename T>
T int_mod(T a, T b, bool python_sign, ZeroDivision& z) {
  if (b == 0) {
    z.hit.store(true, std::memory_order_relaxed);
    return 0;
  }
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return 0;
    T r = a % b;
    if (python_sign && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else {
    return a % b;
  }
}

template <typename T>
T float_floor_div(T a, T b) {
  if (b == 0) return a / b;
  T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
  T floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > T(0.5)) floordiv += T(1);
  } else {
    floordiv = std::copysign(T(0), a / b);
  }
  return floordiv;
}

template <typename T>
T int_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp % 2 == 0) ? 1 : -1;
      return 0;
    }
  }
  using U = std::make_unsigned_t<T>;
  U result = 1, b = static_cast<U>(base);
  auto e = static_cast<std::make_unsigned_t<T>>(exp);
  while (e) {
    if (e & 1) result = wrapping_mul(result, b);
    b = wrapping_mul(b, b);
    e >>= 1;
  }
  return static_cast<T>(result);
}

template <typename T>
T shift_left(T a, T b) {
  constexpr int bits = sizeof(T) * 8;
  using U = std::make_unsigned_t<T>;
  if (b < 0 || b >= static_cast<T>(bits)) return 0;
  return static_cast<T>(static_cast<U>(a) << b);
}

template <typename T>
T shift_right(T a, T b) {
  constexpr int bits = sizeof(T) * 8;
  if (b < 0 || b >= static_cast<T>(bits)) return (std::is_signed_v<T> && a < 0) ? T(-1) : T(0);
  return static_cast<T>(a >> b);
}

template <typename T>
void run_typed(BinaryOp op, const TensorArg& out, const TensorArg& a, const TensorArg& b) {
  ZeroDivision zero;
  auto arith = [&](auto f) { binary_loop<T, T, T>(out, a, b, f); };
  auto boolean = [&](auto f) { binary_loop<bool, T, T>(out, a, b, f); };
  auto unsupported = [&]() {
    throw std::invalid_argument("binary op not supported for this dtype");
  };
  using W = std::conditional_t<is_float_v<T>, T, double>;  // math on integers goes through double
  switch (op) {
    case BinaryOp::add:
      if constexpr (std::is_same_v<T, bool>) arith([](T x, T y) -> T { return x || y; });
      else arith([](T x, T y) -> T { return wrapping_add(x, y); });
      break;
    case BinaryOp::sub:
      if constexpr (std::is_same_v<T, bool>) unsupported();
      else arith([](T x, T y) -> T { return wrapping_sub(x, y); });
      break;
    case BinaryOp::mul:
      if constexpr (std::is_same_v<T, bool>) arith([](T x, T y) -> T { return x && y; });
      else arith([](T x, T y) -> T { return wrapping_mul(x, y); });
      break;
    case BinaryOp::div:
      if constexpr (is_float_v<T>) arith([](T x, T y) -> T { return x / y; });
      else unsupported();
      break;
    case BinaryOp::floor_divide:
      if constexpr (is_float_v<T>) arith([](T x, T y) -> T { return float_floor_div(x, y); });
      else if constexpr (std::is_same_v<T, bool>) unsupported();
      else arith([&zero](T x, T y) -> T { return int_floor_div(x, y, zero); });
      break;
    case BinaryOp::remainder:
      if constexpr (is_float_v<T>)
        arith([](T x, T y) -> T {
          T r = std::fmod(x, y);
          if (r != 0 && ((r < 0) != (y < 0))) r += y;
          return r;
        });
      else if constexpr (std::is_same_v<T, bool>) unsupported();
      else arith([&zero](T x, T y) -> T { return int_mod(x, y, true, zero); });
      break;
    case BinaryOp::fmod:
      if constexpr (is_float_v<T>) arith([](T x, T y) -> T { return std::fmod(x, y); });
      else if constexpr (std::is_same_v<T, bool>) unsupported();
      else arith([&zero](T x, T y) -> T { return int_mod(x, y, false, zero); });
      break;
    case BinaryOp::pow:
      if constexpr (is_float_v<T>) arith([](T x, T y) -> T { return std::pow(x, y); });
      else if constexpr (std::is_same_v<T, bool>) arith([](T x, T y) -> T { return x || !y; });
      else arith([](T x, T y) -> T { return int_pow(x, y); });
      break;
    // On a tie (0.0 and -0.0) maximum and minimum return x, so clamp(x, min=0.) keeps x = -0.0 as PyTorch does.
    case BinaryOp::maximum:
      if constexpr (is_float_v<T>) arith([](T x, T y) -> T { return (x != x || y != y) ? x + y : (x < y ? y : x); });
      else arith([](T x, T y) -> T { return x < y ? y : x; });
      break;
    case BinaryOp::minimum:
      if constexpr (is_float_v<T>) arith([](T x, T y) -> T { return (x != x || y != y) ? x + y : (y < x ? y : x); });
      else arith([](T x, T y) -> T { return y < x ? y : x; });
      break;
    case BinaryOp::fmax:
      if constexpr (is_float_v<T>) arith([](T x, T y) -> T { return std::fmax(x, y); });
      else arith([](T x, T y) -> T { return x > y ? x : y; });
      break;
    case BinaryOp::fmin:
      if constexpr (is_float_v<T>) arith([](T x, T y) -> T { return std::fmin(x, y); });
      else arith([](T x, T y) -> T { return x < y ? x : y; });
      break;
    case BinaryOp::atan2:
      if constexpr (is_float_v<T>) arith([](T x, T y) -> T { return std::atan2(x, y); });
      else unsupported();
      break;
    case BinaryOp::hypot:
      if constexpr (is_float_v<T>) arith([](T x, T y) -> T { return std::hypot(x, y); });
      else unsupported();
      break;
    case BinaryOp::copysign:
      if constexpr (is_float_v<T>) arith([](T x, T y) -> T { return std::copysign(x, y); });
      else unsupported();
      break;
    case BinaryOp::logaddexp:
      if constexpr (is_float_v<T>)
        arith([](T x, T y) -> T {
          if (std::isinf(x) && x == y) return x;
          T m = x > y ? x : y;
          return m + std::log1p(std::exp(-std::fabs(x - y)));
        });
      else unsupported();
      break;
    case BinaryOp::logaddexp2:
      if constexpr (is_float_v<T>)
        arith([](T x, T y) -> T {
          if (std::isinf(x) && x == y) return x;
          T m = x > y ? x : y;
          return m + std::log1p(std::exp2(-std::fabs(x - y))) / std::log(T(2));
        });
      else unsupported();
      break;
    case BinaryOp::xlogy:
      if constexpr (is_float_v<T>)
        arith([](T x, T y) -> T {
          if (y != y) return y;
          if (x == 0) return 0;
          return x * std::log(y);
        });
      else unsupported();
      break;
    case BinaryOp::nextafter:
      if constexpr (is_float_v<T>) arith([](T x, T y) -> T { return std::nextafter(x, y); });
      else unsupported();
      break;
    case BinaryOp::bitwise_and:
      if constexpr (is_float_v<T>) unsupported();
      else arith([](T x, T y) -> T { return static_cast<T>(x & y); });
      break;
    case BinaryOp::bitwise_or:
      if constexpr (is_float_v<T>) unsupported();
      else arith([](T x, T y) -> T { return static_cast<T>(x | y); });
      break;
    case BinaryOp::bitwise_xor:
      if constexpr (is_float_v<T>) unsupported();
      else arith([](T x, T y) -> T { return static_cast<T>(x ^ y); });
      break;
    case BinaryOp::bitwise_left_shift:
      if constexpr (is_float_v<T> || std::is_same_v<T, bool>) unsupported();
      else arith([](T x, T y) -> T { return shift_left(x, y); });
      break;
    case BinaryOp::bitwise_right_shift:
      if constexpr (is_float_v<T> || std::is_same_v<T, bool>) unsupported();
      else arith([](T x, T y) -> T { return shift_right(x, y); });
      break;
    case BinaryOp::logical_and: boolean([](T x, T y) { return x != T(0) && y != T(0); }); break;
    case BinaryOp::logical_or: boolean([](T x, T y) { return x != T(0) || y != T(0); }); break;
    case BinaryOp::logical_xor: boolean([](T x, T y) { return (x != T(0)) != (y != T(0)); }); break;
    case BinaryOp::eq: boolean([](T x, T y) { return x == y; }); break;
    case BinaryOp::ne: boolean([](T x, T y) { return x != y; }); break;
    case BinaryOp::lt: boolean([](T x, T y) { return x < y; }); break;
    case BinaryOp::le: boolean([](T x, T y) { return x <= y; }); break;
    case BinaryOp::gt: boolean([](T x, T y) { return x > y; }); break;
    case BinaryOp::ge: boolean([](T x, T y) { return x >= y; }); break;
  }
  (void)sizeof(W);
  if (zero.hit.load()) throw std::runtime_error("ZeroDivisionError");
}

BinaryOp op_from_code(int code) {
  if (code < 0 || code > static_cast<int>(BinaryOp::nextafter)) throw std::invalid_argument("bad binary op code");
  return static_cast<BinaryOp>(code);
}

void check_out(BinaryOp op, const TensorArg& out, DType compute) {
  DType expected = writes_bool(op) ? DType::Bool : compute;
  if (out.dtype != expected) throw std::invalid_argument("binary op: output has the wrong dtype");
}

void binary_impl(int code, py::handle out_obj, py::handle a_obj, py::handle b_obj) {
  BinaryOp op = op_from_code(code);
  TensorArg out = unpack(out_obj), a = unpack(a_obj), b = unpack(b_obj);
  check_same_dtype(a, b, "binary op");
  check_out(op, out, a.dtype);
  if (out.numel() == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_COMPUTE(a.dtype, "binary op", [&] { run_typed<scalar_t>(op, out, a, b); });
}

// b is a Python scalar, converted to a's dtype; `reverse` computes f(b, a).
void binary_scalar_impl(int code, py::handle out_obj, py::handle a_obj, py::handle scalar, bool reverse) {
  BinaryOp op = op_from_code(code);
  TensorArg out = unpack(out_obj), a = unpack(a_obj);
  check_out(op, out, a.dtype);
  if (out.numel() == 0) return;
  EMBER_DISPATCH_COMPUTE(a.dtype, "binary op", [&] {
    scalar_t value;
    if (PyBool_Check(scalar.ptr())) value = convert<scalar_t, bool>(scalar.cast<bool>());
    else if (PyLong_Check(scalar.ptr())) value = convert<scalar_t, int64_t>(scalar.cast<int64_t>());
    else if (PyFloat_Check(scalar.ptr())) value = convert<scalar_t, double>(scalar.cast<double>());
    else throw py::type_error("scalar operand must be a bool, int or float");
    TensorArg s;
    s.data = reinterpret_cast<char*>(&value);
    s.dtype = a.dtype;
    py::gil_scoped_release release;
    if (reverse) run_typed<scalar_t>(op, out, s, a);
    else run_typed<scalar_t>(op, out, a, s);
  });
}

}  // namespace

// Entry points for the dispatcher's native fast path (common/fast_dispatch.cpp).
void run_binary_kernel(int code, py::handle out, py::handle a, py::handle b) { binary_impl(code, out, a, b); }
void run_binary_scalar_kernel(int code, py::handle out, py::handle a, py::handle scalar, bool reverse) {
  binary_scalar_impl(code, out, a, scalar, reverse);
}

void bind_binary(py::module_& m) {
  std::map<std::string, int> codes;
#define X(name) codes[#name] = static_cast<int>(BinaryOp::name);
  EMBER_BINARY_OPS(X)
#undef X
  m.attr("binary_ops") = codes;
  m.def("binary", &binary_impl, py::arg("op"), py::arg("out"), py::arg("a"), py::arg("b"),
        "out = op(a, b) with broadcasting; a and b share a dtype.");
  m.def("binary_scalar", &binary_scalar_impl, py::arg("op"), py::arg("out"), py::arg("a"), py::arg("scalar"),
        py::arg("reverse") = false, "out = op(a, scalar), or op(scalar, a) when reverse.");
}

}  // namespace ember
