// One bind_* function per kernel family; module.cpp calls each once.
#pragma once

#include <pybind11/pybind11.h>

namespace ember {
void bind_storage(pybind11::module_& m);
void bind_copy(pybind11::module_& m);
void bind_unary(pybind11::module_& m);
void bind_binary(pybind11::module_& m);
void bind_ternary(pybind11::module_& m);
void bind_fill(pybind11::module_& m);
void bind_reorder(pybind11::module_& m);
void bind_dlpack(pybind11::module_& m);
void bind_random(pybind11::module_& m);
void bind_index(pybind11::module_& m);
void bind_blas(pybind11::module_& m);
void bind_reduce(pybind11::module_& m);
void bind_conv(pybind11::module_& m);
void bind_pool(pybind11::module_& m);
void bind_resample(pybind11::module_& m);
void bind_lapack(pybind11::module_& m);
void bind_lapack_extra(pybind11::module_& m);
void bind_norm(pybind11::module_& m);
void bind_optim(pybind11::module_& m);
void bind_loss(pybind11::module_& m);
void bind_attention(pybind11::module_& m);
void bind_scatter(pybind11::module_& m);
void bind_sort(pybind11::module_& m);
void bind_complex(pybind11::module_& m);
void bind_fft(pybind11::module_& m);
void bind_rnn(pybind11::module_& m);
void bind_fused_pointwise(pybind11::module_& m);
void bind_mathfns(pybind11::module_& m);
void bind_specfns(pybind11::module_& m);
void bind_sparse(pybind11::module_& m);
void bind_activation_backward(pybind11::module_& m);
void bind_softmax_backward(pybind11::module_& m);
void bind_device_launch(PyObject* module);  // device_launch.cpp: _C.DeviceLauncher
void bind_device_call(PyObject* module);    // device_call.cpp: _C._device_call
void bind_device_storage(PyObject* module);  // device_storage.cpp: _C.DeviceStorage, _C.DeviceAllocatorBase
// The device address of a _C.DeviceStorage (false: `storage` is none).
bool device_storage_ptr(PyObject* storage, unsigned long long* ptr);
}  // namespace ember
