// Reordering copies that no strided view can express: flip (negative strides are not
// allowed in tensors, but the loop machinery handles them fine internally).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "../common/dtype.h"
#include "elementwise.h"

namespace py = pybind11;

namespace ember {

namespace {

void flip_impl(py::handle out_obj, py::handle in_obj, const std::vector<int64_t>& dims) {
  TensorArg out = unpack(out_obj), in = unpack(in_obj);
  if (out.dtype != in.dtype || out.shape != in.shape) throw std::invalid_argument("flip: out must match input");
  for (int64_t d : dims) {
    if (d < 0 || d >= in.ndim()) throw std::out_of_range("flip: dim out of range");
    // Start from the last element along d and walk backwards.
    if (in.shape[d] > 0) in.data += (in.shape[d] - 1) * in.strides[d] * in.elem_size();
    in.strides[d] = -in.strides[d];
  }
  if (out.numel() == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_ALL_AND_COMPLEX(out.dtype, "flip", [&] {
    unary_loop<scalar_t, scalar_t>(out, in, [](scalar_t v) { return v; });
  });
}

}  // namespace

void bind_reorder(py::module_& m) {
  m.def("flip", &flip_impl, py::arg("out"), py::arg("input"), py::arg("dims"),
        "out = input reversed along dims (out has input's shape and dtype).");
}

}  // namespace ember
