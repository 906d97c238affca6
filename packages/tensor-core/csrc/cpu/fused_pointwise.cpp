// Fused pointwise updates the optimizers are built from: addcmul, addcdiv, lerp (scalar and
// tensor weight) and add with alpha, each one pass over memory with no temporaries.
//
// Every operand has out's dtype (the Python side converts the rare mixed-dtype case); out may be
// one of the inputs (the in-place forms). float16/bfloat16 are loaded as float32, computed there
// and rounded once on store, as PyTorch's opmath does.
//
// Rounding follows ATen's vector kernels, so that results agree to the bit: the multiply-adds of
// addcmul, lerp and add-with-alpha are fused (vec::fmadd) while addcdiv rounds every step; no
// other contraction happens (this file is compiled with fp-contract off).
#pragma GCC optimize("fp-contract=off")

#include <pybind11/pybind11.h>

#include <cmath>
#include <initializer_list>
#include <string>

#include "../common/dtype.h"
#include "elementwise.h"

namespace py = pybind11;

namespace ember {

namespace {

void check_operands(const TensorArg& out, std::initializer_list<const TensorArg*> args, const char* what) {
  for (const TensorArg* a : args) check_same_dtype(out, *a, what);
}

// The scalar parameter in the compute type: integers take the (already truncated) integer value
// so that it wraps like PyTorch's Scalar::to<T>(); floating types take the double.
template <typename C>
C scalar_as(double fvalue, int64_t ivalue) {
  if constexpr (std::is_floating_point_v<C>) {
    return static_cast<C>(fvalue);
  } else {
    return static_cast<C>(ivalue);
  }
}

// out = f(a, b) in the compute type of S.
template <typename S, typename F>
void fused2(const TensorArg& out, const TensorArg& a, const TensorArg& b, const F& f) {
  using L = Compute<S>;
  binary_loop<S, S, S>(out, a, b, [&f](S x, S y) { return L::store(f(L::load(x), L::load(y))); });
}

// out = f(a, b, c) in the compute type of S.
template <typename S, typename F>
void fused3(const TensorArg& out, const TensorArg& a, const TensorArg& b, const TensorArg& c, const F& f) {
  using L = Compute<S>;
  ternary_loop<S, S, S, S>(out, a, b, c,
                           [&f](S x, S y, S z) { return L::store(f(L::load(x), L::load(y), L::load(z))); });
}

// a * b + c with one rounding where the CPU has FMA (ATen's vec::fmadd), else two.
template <typename C>
inline C fmadd(C a, C b, C c) {
#ifdef __FMA__
  if constexpr (std::is_floating_point_v<C>) return std::fma(a, b, c);
#endif
  return static_cast<C>(a * b + c);
}

// PyTorch's lerp in the form its vector kernel uses: base + coeff * (end - start), where
// |weight| < 0.5 takes (start, weight) and otherwise (end, weight - 1), exact at both ends.
template <typename C>
inline C lerp_value(C start, C end, C weight) {
  const bool small = std::abs(weight) < C(0.5);
  const C coeff = small ? weight : weight - C(1);
  const C base = small ? start : end;
  return fmadd<C>(coeff, end - start, base);
}

void addcmul_impl(py::handle out_obj, py::handle self_obj, py::handle t1_obj, py::handle t2_obj, double fvalue,
                  int64_t ivalue) {
  TensorArg out = unpack(out_obj), self = unpack(self_obj), t1 = unpack(t1_obj), t2 = unpack(t2_obj);
  check_operands(out, {&self, &t1, &t2}, "addcmul");
  if (out.numel() == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_NUMERIC(out.dtype, "addcmul", [&] {
    using C = typename Compute<scalar_t>::type;
    const C v = scalar_as<C>(fvalue, ivalue);
    // PyTorch's operand order and rounding: fma(value * t1, t2, self).
    fused3<scalar_t>(out, self, t1, t2, [v](C x, C y, C z) { return fmadd<C>(static_cast<C>(v * y), z, x); });
  });
}

void addcdiv_impl(py::handle out_obj, py::handle self_obj, py::handle t1_obj, py::handle t2_obj, double value) {
  TensorArg out = unpack(out_obj), self = unpack(self_obj), t1 = unpack(t1_obj), t2 = unpack(t2_obj);
  check_operands(out, {&self, &t1, &t2}, "addcdiv");
  if (out.numel() == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING_ALL(out.dtype, "addcdiv", [&] {
    using C = typename Compute<scalar_t>::type;
    const C v = static_cast<C>(value);
    // PyTorch's operand order: self + (value * t1) / t2.
    fused3<scalar_t>(out, self, t1, t2, [v](C x, C y, C z) { return x + v * y / z; });
  });
}

void lerp_scalar_impl(py::handle out_obj, py::handle start_obj, py::handle end_obj, double weight) {
  TensorArg out = unpack(out_obj), start = unpack(start_obj), end = unpack(end_obj);
  check_operands(out, {&start, &end}, "lerp");
  if (out.numel() == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING_ALL(out.dtype, "lerp", [&] {
    using C = typename Compute<scalar_t>::type;
    const C w = static_cast<C>(weight);
    // The branch is decided once: the loop body is a single multiply-add.
    const bool small = std::abs(w) < C(0.5);
    const C coeff = small ? w : w - C(1);
    if (small) {
      fused2<scalar_t>(out, start, end, [coeff](C x, C y) { return fmadd<C>(coeff, y - x, x); });
    } else {
      fused2<scalar_t>(out, start, end, [coeff](C x, C y) { return fmadd<C>(coeff, y - x, y); });
    }
  });
}

void lerp_tensor_impl(py::handle out_obj, py::handle start_obj, py::handle end_obj, py::handle weight_obj) {
  TensorArg out = unpack(out_obj), start = unpack(start_obj), end = unpack(end_obj), weight = unpack(weight_obj);
  check_operands(out, {&start, &end, &weight}, "lerp");
  if (out.numel() == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING_ALL(out.dtype, "lerp", [&] {
    using C = typename Compute<scalar_t>::type;
    fused3<scalar_t>(out, start, end, weight, [](C x, C y, C w) { return lerp_value<C>(x, y, w); });
  });
}

void add_scaled_impl(py::handle out_obj, py::handle self_obj, py::handle other_obj, double falpha, int64_t ialpha) {
  TensorArg out = unpack(out_obj), self = unpack(self_obj), other = unpack(other_obj);
  check_operands(out, {&self, &other}, "add");
  if (out.numel() == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_NUMERIC(out.dtype, "add", [&] {
    using C = typename Compute<scalar_t>::type;
    // alpha is first rounded to the tensor's own type (ATen's Scalar::to<scalar_t>), then widened.
    const C a = Compute<scalar_t>::load(Compute<scalar_t>::store(scalar_as<C>(falpha, ialpha)));
    fused2<scalar_t>(out, self, other, [a](C x, C y) { return fmadd<C>(y, a, x); });
  });
}

#undef EMBER_DISPATCH_NUMERIC
#undef EMBER_DISPATCH_FLOATING_ALL

}  // namespace

void bind_fused_pointwise(py::module_& m) {
  m.def("addcmul", &addcmul_impl, py::arg("out"), py::arg("self"), py::arg("tensor1"), py::arg("tensor2"),
        py::arg("fvalue"), py::arg("ivalue"), "out = self + value * tensor1 * tensor2 (one dtype, broadcast to out).");
  m.def("addcdiv", &addcdiv_impl, py::arg("out"), py::arg("self"), py::arg("tensor1"), py::arg("tensor2"),
        py::arg("value"), "out = self + value * tensor1 / tensor2 (floating dtypes).");
  m.def("lerp_scalar", &lerp_scalar_impl, py::arg("out"), py::arg("start"), py::arg("end"), py::arg("weight"),
        "out = start + weight * (end - start) for a number weight.");
  m.def("lerp", &lerp_tensor_impl, py::arg("out"), py::arg("start"), py::arg("end"), py::arg("weight"),
        "out = start + weight * (end - start), weight a tensor broadcast to out.");
  m.def("add_scaled", &add_scaled_impl, py::arg("out"), py::arg("self"), py::arg("other"), py::arg("falpha"),
        py::arg("ialpha"), "out = self + alpha * other in one pass (not bool).");
}

}  // namespace ember
