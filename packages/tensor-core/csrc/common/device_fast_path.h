// The device fast path of an op call (device_fast_path.cpp), called first by op_vectorcall, and
// the dispatch checks the fast paths share with it.
#pragma once

#include <Python.h>

#include "tensor_impl.h"

namespace ember {

// Runs `op.kernels[device type]` directly when the call needs no dispatch layer above autograd
// and its first argument is a plain ember.Tensor on a device other than the CPU/meta; records
// the backward node natively when an input requires grad (as autograd's `record` would). Sets
// *handled and returns the kernel's result (null with its error) when it ran; leaves *handled
// false otherwise (nothing ran).
PyObject* device_fast_call(PyObject* op, PyObject* const* args, size_t nargsf, PyObject* kwnames, bool* handled);

// Whether autocast casts `op`'s inputs in this thread now (Op.amp set, autocast active), given
// that some thread has autocast enabled.
bool autocast_casts(PyObject* op);

// Whether the n arguments (positional, then keyword values) hold an instance of a Tensor subclass that is not
// plain (not registered by _C._set_plain_subclass: it or a base may define __torch_dispatch__), looked for
// where the Python dispatcher's _try_subclass_dispatch looks: each argument and the items of a list or tuple.
bool has_dispatch_subclass(PyObject* const* args, Py_ssize_t n);

// plain_dispatch() for a call of `op` with these arguments: an enabled autocast region matters only to an op
// with a cast policy (Op.amp) while autocast is active in this thread, as in Op._dispatch, and a subclass that
// defines __torch_dispatch__ only to the calls that involve one of its instances (once any such class
// exists, every call looks at its arguments' types: a few pointer compares each).
inline bool plain_dispatch_for(PyObject* op, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  auto on = [](PyObject* lst) {
    PyObject* v = PyList_GET_ITEM(lst, 0);
    return v != Py_False && v != Py_None && v != g_dispatch.zero;
  };
  if (g_dispatch.layout_dispatch == nullptr || on(g_dispatch.modes_entered) || on(g_dispatch.layout_dispatch))
    return false;
  if (on(g_dispatch.subclass_dispatch) &&
      has_dispatch_subclass(args, nargs + (kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames))))
    return false;
  return !on(g_dispatch.autocast_on) || !autocast_casts(op);
}

// A CUDA tensor (plain ember.Tensor fields valid) whose views the native view kernels may
// compute: on CUDA a view kernel is the CPU one (metadata only). Null otherwise.
TensorObject* cuda_view_source(PyObject* o);

}  // namespace ember
