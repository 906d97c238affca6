// The device fast path: an op called on a plain ember.Tensor of a plugin device (CUDA) goes
// straight to the device's kernel, skipping the Python dispatcher (Op._dispatch), when that
// dispatcher would do nothing else: no dispatch mode, no __torch_dispatch__ subclass, no autocast
// region, no sparse layout routing (plain_dispatch()), and no autograd recording (no tensor
// argument, top-level, in a list/tuple or a keyword value, requires grad while grad mode is on).
// Op._dispatch's inline case does exactly this lookup (`op.kernels[args[0]._device.type]`), so the
// results, errors included, are the kernel's own either way. Any doubt returns "not handled" and
// the call continues on the ordinary path; CPU calls pay two pointer compares.
#include "device_fast_path.h"

#include "autograd_record.h"
#include "tensor_impl.h"

namespace ember {

namespace {

PyObject* s_kernels = nullptr;      // "kernels"
PyObject* s_type = nullptr;         // "type"
PyObject* g_last_device = nullptr;  // the device object last seen (owned)...
PyObject* g_last_type = nullptr;    // ...and its `type` string (owned)

bool requires_grad(PyObject* o) {
  if (is_tensor_base(o)) return reinterpret_cast<TensorObject*>(o)->rg != 0;
  if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    PyObject** items = PySequence_Fast_ITEMS(o);
    for (Py_ssize_t i = 0; i < n; ++i)
      if (is_tensor_base(items[i]) && reinterpret_cast<TensorObject*>(items[i])->rg) return true;
  }
  return false;
}

// The device's type string (borrowed), cached for the last device object seen; null on failure.
PyObject* device_type(PyObject* device) {
  if (device == g_last_device) return g_last_type;
  if (s_type == nullptr) {
    s_type = PyUnicode_InternFromString("type");
    s_kernels = PyUnicode_InternFromString("kernels");
    if (s_type == nullptr || s_kernels == nullptr) return nullptr;
  }
  PyObject* type = PyObject_GetAttr(device, s_type);
  if (type == nullptr) return nullptr;
  if (!PyUnicode_CheckExact(type)) {
    Py_DECREF(type);
    return nullptr;
  }
  Py_INCREF(device);
  Py_XSETREF(g_last_device, device);
  Py_XSETREF(g_last_type, type);
  return type;
}

}  // namespace

PyObject* device_fast_call(PyObject* op, PyObject* const* args, size_t nargsf, PyObject* kwnames, bool* handled) {
  *handled = false;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs == 0 || reinterpret_cast<PyObject*>(Py_TYPE(args[0])) != tensor_class()) return nullptr;
  auto* first = reinterpret_cast<TensorObject*>(args[0]);
  if (first->device_kind != kDeviceOther || first->device == nullptr || !plain_dispatch()) return nullptr;
  bool grad = false;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nargs + nkw && !grad; ++i) grad = requires_grad(args[i]);
  if (grad) {
    int on = grad_enabled_now();
    if (on != 0) {
      if (on < 0) PyErr_Clear();
      return nullptr;
    }
  }
  PyObject* type = device_type(first->device);
  if (type == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* kernels = PyObject_GetAttr(op, s_kernels);
  if (kernels == nullptr || !PyDict_CheckExact(kernels)) {
    Py_XDECREF(kernels);
    PyErr_Clear();
    return nullptr;
  }
  PyObject* kernel = PyDict_GetItemWithError(kernels, type);  // borrowed
  Py_XINCREF(kernel);
  Py_DECREF(kernels);
  if (kernel == nullptr) {
    PyErr_Clear();
    return nullptr;  // no kernel: the Python dispatcher raises PyTorch's error
  }
  *handled = true;
  PyObject* result = PyObject_Vectorcall(kernel, args, nargsf, kwnames);
  Py_DECREF(kernel);
  return result;
}

}  // namespace ember
