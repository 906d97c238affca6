// The native extension ember._C: storage, threads, and the CPU kernel families.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "common/parallel.h"
#include "common/tensor_impl.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "ember's native CPU kernels.";
  m.def("get_num_threads", &ember::get_num_threads, "Threads used by intra-op parallel kernels.");
  m.def(
      "set_num_threads",
      [](int n) {
        if (n < 1) throw py::value_error("set_num_threads expects a positive integer");
        ember::set_num_threads(n);
      },
      py::arg("n"), "Sets the intra-op thread count (OpenMP and BLAS).");
  m.def("set_flush_denormal", &ember::set_flush_denormal, py::arg("mode"),
        "Flushes denormal floats to zero (x86 FTZ/DAZ); returns whether the CPU supports it.");
  ember::bind_storage(m);
  ember::bind_tensor_impl(m.ptr());
  ember::bind_fast_dispatch(m.ptr());
  ember::bind_copy(m);
  ember::bind_unary(m);
  ember::bind_binary(m);
  ember::bind_ternary(m);
  ember::bind_fill(m);
  ember::bind_reorder(m);
  ember::bind_dlpack(m);
  ember::bind_random(m);
  ember::bind_index(m);
  ember::bind_blas(m);
  ember::bind_reduce(m);
  ember::bind_conv(m);
  ember::bind_pool(m);
  ember::bind_resample(m);
  ember::bind_lapack(m);
  ember::bind_lapack_extra(m);
  ember::bind_norm(m);
  ember::bind_optim(m);
  ember::bind_loss(m);
  ember::bind_attention(m);
  ember::bind_scatter(m);
  ember::bind_sort(m);
  ember::bind_complex(m);
  ember::bind_fft(m);
  ember::bind_rnn(m);
  ember::bind_fused_pointwise(m);
  ember::bind_mathfns(m);
  ember::bind_specfns(m);
  ember::bind_sparse(m);
  ember::bind_activation_backward(m);
  ember::bind_softmax_backward(m);
  ember::bind_device_launch(m.ptr());
  ember::bind_device_call(m.ptr());
  ember::bind_device_storage(m.ptr());
}
