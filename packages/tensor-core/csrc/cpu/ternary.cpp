// Three-operand elementwise ops: where(cond, a, b) and lerp(start, end, weight).
#include <pybind11/pybind11.h>

#include "../common/dtype.h"
#include "elementwise.h"

namespace py = pybind11;

namespace ember {

namespace {

void where_impl(py::handle out_obj, py::handle cond_obj, py::handle a_obj, py::handle b_obj) {
  TensorArg out = unpack(out_obj), cond = unpack(cond_obj), a = unpack(a_obj), b = unpack(b_obj);
  if (cond.dtype != DType::Bool) throw std::invalid_argument("where expected condition to be a boolean tensor");
  check_same_dtype(a, b, "where");
  check_same_dtype(out, a, "where");
  if (out.numel() == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_ALL_AND_COMPLEX(out.dtype, "where", [&] {
    ternary_loop<scalar_t, bool, scalar_t, scalar_t>(out, cond, a, b,
                                                   [](bool c, scalar_t x, scalar_t y) { return c ? x : y; });
  });
}

void lerp_impl(py::handle out_obj, py::handle start_obj, py::handle end_obj, py::handle weight_obj) {
  TensorArg out = unpack(out_obj), s = unpack(start_obj), e = unpack(end_obj), w = unpack(weight_obj);
  check_same_dtype(s, e, "lerp");
  check_same_dtype(s, w, "lerp");
  check_same_dtype(out, s, "lerp");
  if (out.numel() == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(out.dtype, "lerp", [&] {
    using T = scalar_t;
    ternary_loop<T, T, T, T>(out, s, e, w, [](T x, T y, T wt) {
      // PyTorch's form: accurate at both ends of the weight range.
      return std::abs(wt) < T(0.5) ? x + wt * (y - x) : y - (y - x) * (T(1) - wt);
    });
  });
}

}  // namespace

void bind_ternary(py::module_& m) {
  m.def("where", &where_impl, py::arg("out"), py::arg("cond"), py::arg("a"), py::arg("b"),
        "out = cond ? a : b, all broadcast to out.");
  m.def("lerp", &lerp_impl, py::arg("out"), py::arg("start"), py::arg("end"), py::arg("weight"),
        "out = start + weight * (end - start).");
}

}  // namespace ember
