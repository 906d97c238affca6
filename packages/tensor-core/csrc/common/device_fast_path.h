// The device fast path of an op call (device_fast_path.cpp), called first by op_vectorcall.
#pragma once

#include <Python.h>

namespace ember {

// Runs `op.kernels[device type]` directly when the call needs no dispatch layer and its first
// argument is a plain ember.Tensor on a device other than the CPU/meta. Sets *handled and returns
// the kernel's result (null with its error) when it ran; leaves *handled false otherwise.
PyObject* device_fast_call(PyObject* op, PyObject* const* args, size_t nargsf, PyObject* kwnames, bool* handled);

}  // namespace ember
