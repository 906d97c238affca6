// where(condition, self, other) on the native fast path: a bool condition and float values of one
// dtype (two tensors, or a tensor and a Python number, which then becomes a 0-d tensor of that
// dtype as scalar_tensor makes it), broadcast together; the same kernel as elementwise.py's
// _where_cpu (cpu/ternary.cpp). Other dtypes, promotions and shape errors take the Python kernel.
#include <pybind11/pybind11.h>

#include <algorithm>

#include "fast_ops.h"

namespace py = pybind11;

namespace ember {

void run_where_kernel(py::handle out, py::handle cond, py::handle a, py::handle b);  // cpu/ternary.cpp

namespace {

constexpr int32_t kMaxWhereDims = 64;

// Broadcasts `shape` (ndim dims) into out/out_ndim (right-aligned); false when they do not fit.
bool broadcast_into(const int64_t* shape, int32_t ndim, int64_t* out, int32_t* out_ndim) {
  if (ndim > kMaxWhereDims) return false;
  int32_t n = std::max(ndim, *out_ndim);
  int64_t merged[kMaxWhereDims];
  for (int32_t i = 0; i < n; ++i) {
    int32_t ia = *out_ndim - n + i, ib = ndim - n + i;
    int64_t sa = ia >= 0 ? out[ia] : 1, sb = ib >= 0 ? shape[ib] : 1;
    if (sa == sb || sb == 1) merged[i] = sa;
    else if (sa == 1) merged[i] = sb;
    else return false;
  }
  std::copy(merged, merged + n, out);
  *out_ndim = n;
  return true;
}

// A 0-d tensor of dtype `code` holding the number `v` (an exact int or float), or NOT_HANDLED.
PyObject* number_tensor(PyObject* v, int code, bool inference) {
  if (!PyFloat_CheckExact(v) && !PyLong_CheckExact(v)) return NOT_HANDLED;
  double d = PyFloat_AsDouble(v);
  if (d == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return NOT_HANDLED;
  }
  int64_t no_dims[1] = {1};
  PyObject* t = new_empty_cpu(no_dims, 0, code, inference);
  if (t == nullptr) return nullptr;
  char* p = reinterpret_cast<TensorObject*>(t)->storage_ptr->data;
  if (code == kFloat32) *reinterpret_cast<float*>(p) = static_cast<float>(d);
  else *reinterpret_cast<double*>(p) = d;
  return t;
}

}  // namespace

PyObject* fast_where_kernel(PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) return NOT_HANDLED;
  TensorObject* cond = plain_view_source(args[0]);
  if (cond == nullptr || cond->dtype_code != kBool || cond->ndim > kMaxWhereDims) return NOT_HANDLED;
  TensorObject* a = is_tensor_base(args[1]) ? plain_tensor(args[1], true) : nullptr;
  TensorObject* b = is_tensor_base(args[2]) ? plain_tensor(args[2], true) : nullptr;
  if ((a == nullptr && is_tensor_base(args[1])) || (b == nullptr && is_tensor_base(args[2])) ||
      (a == nullptr && b == nullptr))
    return NOT_HANDLED;
  int code = a != nullptr ? a->dtype_code : b->dtype_code;
  if (!is_float_code(code) || (a != nullptr && b != nullptr && a->dtype_code != b->dtype_code)) return NOT_HANDLED;
  int64_t shape[kMaxWhereDims];
  int32_t ndim = cond->ndim;
  std::copy(cond->sizes, cond->sizes + ndim, shape);
  for (TensorObject* t : {a, b})
    if (t != nullptr && !broadcast_into(t->sizes, t->ndim, shape, &ndim)) return NOT_HANDLED;
  int inference = inference_now();
  if (inference < 0) return nullptr;
  PyObject* a_t = a != nullptr ? Py_NewRef(args[1]) : number_tensor(args[1], code, inference != 0);
  if (a_t == nullptr || a_t == NOT_HANDLED) return a_t;
  PyObject* b_t = b != nullptr ? Py_NewRef(args[2]) : number_tensor(args[2], code, inference != 0);
  if (b_t == nullptr || b_t == NOT_HANDLED) {
    Py_DECREF(a_t);
    return b_t;
  }
  const TensorObject* ops[3] = {cond, a, b};
  int n_ops = 1;
  for (int k = 1; k < 3; ++k)
    if (ops[k] != nullptr) ops[n_ops++] = ops[k];
  PyObject* out = new_pointwise_out(shape, ndim, code, inference != 0, ops, n_ops);
  PyObject* r = out;
  if (out != nullptr) {
    try {
      run_where_kernel(out, args[0], a_t, b_t);
    } catch (py::error_already_set&) {
      PyErr_Clear();
      Py_DECREF(out);
      r = NOT_HANDLED;
    } catch (...) {
      Py_DECREF(out);
      r = NOT_HANDLED;
    }
  }
  Py_DECREF(a_t);
  Py_DECREF(b_t);
  return r;
}

}  // namespace ember
