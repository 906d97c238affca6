// Three-operand elementwise ops: where(cond, a, b) (lerp lives with the fused updates in fused_pointwise.cpp).
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
  EMBER_DISPATCH_ALL(out.dtype, "where", [&] {
    ternary_loop<scalar_t, bool, scalar_t, scalar_t>(out, cond, a, b,
                                                   [](bool c, scalar_t x, scalar_t y) { return c ? x : y; });
  });
}

}  // namespace

void bind_ternary(py::module_& m) {
  m.def("where", &where_impl, py::arg("out"), py::arg("cond"), py::arg("a"), py::arg("b"),
        "out = cond ? a : b, all broadcast to out.");
}

}  // namespace ember
