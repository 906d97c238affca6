// sum, mean, mm, addmm and bmm on the native fast path: the meta work of reduce.py's and
// products.py's kernels (reduced dims, result shape, result dtype) done once in C, then the same
// native kernels (cpu/reduce.cpp's reduction, cpu/blas.cpp's product). Products take float32/float64;
// mean takes those and keeps the dtype; sum also takes integer inputs (an int64 result, accumulated
// in int64 as reduce.py's _acc_dtype does). No dtype argument: everything else returns NOT_HANDLED
// for the Python kernel.
#include <pybind11/pybind11.h>

#include <cstring>

#include "fast_ops.h"

namespace py = pybind11;

namespace ember {

void run_reduce_kernel(int code, py::handle out, py::handle in, int64_t num_reduced);  // cpu/reduce.cpp
void run_matmul_kernel(py::handle out, py::handle a, py::handle b, py::handle alpha, py::handle beta);  // cpu/blas.cpp

namespace {

constexpr int kSumCode = 0;  // reduce.cpp's RedOp::Sum
constexpr int32_t kMaxReduceDims = 64;

PyObject* g_one = nullptr;   // 1.0, mm's alpha
PyObject* g_zero = nullptr;  // 0.0, mm's beta

bool make_constants() {
  if (g_one == nullptr) g_one = PyFloat_FromDouble(1.0);
  if (g_zero == nullptr) g_zero = PyFloat_FromDouble(0.0);
  return g_one != nullptr && g_zero != nullptr;
}

// Runs `fn` (a kernel call that may throw); on a C++ exception `out` is dropped and the Python
// kernel takes over, so errors keep their Python-side types and messages.
template <typename F>
PyObject* run_or_decline(PyObject* out, F&& fn) {
  try {
    fn();
  } catch (py::error_already_set&) {
    PyErr_Clear();
    Py_DECREF(out);
    return NOT_HANDLED;
  } catch (...) {
    Py_DECREF(out);
    return NOT_HANDLED;
  }
  return out;
}

// The reduced dims of `dim` (None, an int, or a sequence of ints; empty means all) as a mask,
// as reduce.py's _dims reads them; false for anything it would reject or treat specially.
bool reduced_mask(PyObject* dim, int32_t ndim, bool* mask) {
  for (int32_t i = 0; i < ndim; ++i) mask[i] = dim == Py_None;
  if (dim == Py_None) return true;
  int64_t dims[kMaxReduceDims];
  int32_t n;
  if (PyLong_CheckExact(dim)) {
    int overflow = 0;
    dims[0] = PyLong_AsLongLongAndOverflow(dim, &overflow);
    if (overflow || (dims[0] == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    n = 1;
  } else if (!read_int_sequence(dim, dims, &n, kMaxReduceDims)) {
    return false;
  }
  if (n == 0) {
    for (int32_t i = 0; i < ndim; ++i) mask[i] = true;
    return true;
  }
  for (int32_t i = 0; i < n; ++i) {
    int32_t d;
    if (!wrap_dim_c(dims[i], ndim, &d) || mask[d]) return false;
    mask[d] = true;
  }
  return true;
}

// mean's division: the sum divided by the count in place, as div_op(total, count) computes it.
template <typename T>
void divide(TensorObject* out, int64_t count) {
  T* p = reinterpret_cast<T*>(out->storage_ptr->data);
  int64_t n = 1;
  for (int32_t i = 0; i < out->ndim; ++i) n *= out->sizes[i];
  const T c = static_cast<T>(count);
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] / c;
}

PyObject* reduce(int kind, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || nargs > 4) return NOT_HANDLED;
  TensorObject* x = plain_tensor(args[0], true);
  if (x == nullptr || x->ndim == 0 || x->ndim > kMaxReduceDims) return NOT_HANDLED;
  // Integer sums give int64 (bool inputs, not direct here, take the Python kernel).
  if (!is_float_code(x->dtype_code) && kind != kSum) return NOT_HANDLED;
  const int out_code = is_float_code(x->dtype_code) ? x->dtype_code : kInt64;
  PyObject* dim = nargs > 1 ? args[1] : Py_None;
  PyObject* keep_obj = nargs > 2 ? args[2] : Py_False;
  if ((nargs > 3 && args[3] != Py_None) || (keep_obj != Py_True && keep_obj != Py_False)) return NOT_HANDLED;
  bool keepdim = keep_obj == Py_True;
  bool mask[kMaxReduceDims];
  if (!reduced_mask(dim, x->ndim, mask)) return NOT_HANDLED;
  // The input viewed with the kept dims first, then the reduced ones (the kernel's layout).
  int64_t out_shape[kMaxReduceDims], kept_shape[kMaxReduceDims], kept_strides[kMaxReduceDims];
  int64_t in_shape[kMaxReduceDims], in_strides[kMaxReduceDims];
  int32_t n_out = 0, n_kept = 0, n_red = 0;
  int64_t count = 1;
  bool trailing = true;  // the reduced dims are already last: the input itself is the layout
  for (int32_t i = 0; i < x->ndim; ++i) {
    if (mask[i]) {
      if (keepdim) out_shape[n_out++] = 1;
      count *= x->sizes[i];
      ++n_red;
    } else {
      if (n_red > 0) trailing = false;
      out_shape[n_out++] = x->sizes[i];
      in_shape[n_kept] = x->sizes[i];
      in_strides[n_kept] = x->strides[i];
      kept_shape[n_kept++] = x->sizes[i];
    }
  }
  for (int32_t i = 0, j = n_kept; i < x->ndim; ++i)
    if (mask[i]) {
      in_shape[j] = x->sizes[i];
      in_strides[j++] = x->strides[i];
    }
  int inference = inference_now();
  if (inference < 0) return nullptr;
  PyObject* out = new_empty_cpu(out_shape, n_out, out_code, inference != 0);
  if (out == nullptr) return nullptr;
  auto* o = reinterpret_cast<TensorObject*>(out);
  PyObject* xv = trailing ? Py_NewRef(args[0])
                          : new_tensor(x->storage, x->storage_ptr, in_shape, in_strides, x->ndim, x->offset_value,
                                       x->dtype_code, x->device);
  PyObject* ov = nullptr;
  if (xv != nullptr) {
    if (!keepdim) {
      ov = Py_NewRef(out);
    } else {
      int64_t acc = 1;
      for (int32_t i = n_kept - 1; i >= 0; --i) {
        kept_strides[i] = acc;
        acc *= kept_shape[i] > 1 ? kept_shape[i] : 1;
      }
      ov = new_tensor(o->storage, o->storage_ptr, kept_shape, kept_strides, n_kept, 0, o->dtype_code, o->device);
    }
  }
  if (xv == nullptr || ov == nullptr) {
    Py_XDECREF(xv);
    Py_DECREF(out);
    return nullptr;
  }
  PyObject* r = run_or_decline(out, [&] {
    run_reduce_kernel(kSumCode, ov, xv, n_red);
    if (kind == kMean) {
      if (o->dtype_code == kFloat32) divide<float>(o, count);
      else divide<double>(o, count);
    }
  });
  Py_DECREF(xv);
  Py_DECREF(ov);
  return r;
}

}  // namespace

PyObject* fast_reduce_kernel(int kind, PyObject* const* args, Py_ssize_t nargs) {
  return reduce(kind, args, nargs);
}

// mm(self, mat2) on two float matrices of one dtype: products.py's _mm_cpu without the Python.
PyObject* fast_mm_kernel(PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) return NOT_HANDLED;
  TensorObject* a = plain_tensor(args[0], true);
  TensorObject* b = plain_tensor(args[1], true);
  if (a == nullptr || b == nullptr || a->ndim != 2 || b->ndim != 2 || !is_float_code(a->dtype_code) ||
      b->dtype_code != a->dtype_code || a->sizes[1] != b->sizes[0])
    return NOT_HANDLED;
  if (!make_constants()) return nullptr;
  int inference = inference_now();
  if (inference < 0) return nullptr;
  int64_t shape[2] = {a->sizes[0], b->sizes[1]};
  PyObject* out = new_empty_cpu(shape, 2, a->dtype_code, inference != 0);
  if (out == nullptr) return nullptr;
  return run_or_decline(out, [&] { run_matmul_kernel(out, args[0], args[1], g_one, g_zero); });
}

namespace {

// out (m, n, contiguous) = bias broadcast to it: _product's copy_ before the product.
template <typename T>
void fill_broadcast(TensorObject* out, const TensorObject* bias) {
  const int64_t m = out->sizes[0], n = out->sizes[1];
  int64_t s0 = 0, s1 = 0;
  if (bias->ndim == 2) {
    s0 = bias->sizes[0] == 1 ? 0 : bias->strides[0];
    s1 = bias->sizes[1] == 1 ? 0 : bias->strides[1];
  } else if (bias->ndim == 1) {
    s1 = bias->sizes[0] == 1 ? 0 : bias->strides[0];
  }
  const T* src = reinterpret_cast<const T*>(bias->storage_ptr->data) + bias->offset_value;
  T* dst = reinterpret_cast<T*>(out->storage_ptr->data);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) dst[i * n + j] = src[i * s0 + j * s1];
}

}  // namespace

namespace {

// alpha/beta as products.py's _scalar makes them for a float dtype: an exact int or float, as a
// Python float (null: not one).
PyObject* float_scalar(PyObject* v) {
  if (PyFloat_CheckExact(v)) return Py_NewRef(v);
  if (!PyLong_CheckExact(v)) return nullptr;
  double d = PyLong_AsDouble(v);
  if (d == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return nullptr;
  }
  return PyFloat_FromDouble(d);
}

PyObject* addmm(PyObject* const* args, PyObject* beta, PyObject* alpha);

}  // namespace

// addmm(self, mat1, mat2) with beta = alpha = 1 (nn.functional.linear's call).
PyObject* fast_addmm_kernel(PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) return NOT_HANDLED;
  if (!make_constants()) return nullptr;
  return addmm(args, g_one, g_one);
}

PyObject* fast_addmm_scaled(PyObject* const* args, PyObject* beta, PyObject* alpha) {
  if (!make_constants()) return nullptr;
  PyObject* b = float_scalar(beta);
  PyObject* a = b == nullptr ? nullptr : float_scalar(alpha);
  PyObject* r = a == nullptr ? NOT_HANDLED : addmm(args, b, a);
  Py_XDECREF(b);
  Py_XDECREF(a);
  if (r == nullptr) PyErr_Clear();
  return r == nullptr ? NOT_HANDLED : r;
}

// bmm(self, mat2) on two float (B, M, K) / (B, K, N) batches of one dtype: products.py's _bmm_cpu.
PyObject* fast_bmm_kernel(PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) return NOT_HANDLED;
  TensorObject* a = plain_tensor(args[0], true);
  TensorObject* b = plain_tensor(args[1], true);
  if (a == nullptr || b == nullptr || a->ndim != 3 || b->ndim != 3 || !is_float_code(a->dtype_code) ||
      b->dtype_code != a->dtype_code || a->sizes[0] != b->sizes[0] || a->sizes[2] != b->sizes[1])
    return NOT_HANDLED;
  if (!make_constants()) return nullptr;
  int inference = inference_now();
  if (inference < 0) return nullptr;
  int64_t shape[3] = {a->sizes[0], a->sizes[1], b->sizes[2]};
  PyObject* out = new_empty_cpu(shape, 3, a->dtype_code, inference != 0);
  if (out == nullptr) return nullptr;
  return run_or_decline(out, [&] { run_matmul_kernel(out, args[0], args[1], g_one, g_zero); });
}

namespace {

// out = beta * self (broadcast) + alpha * mat1 @ mat2 on float matrices of one dtype: self copied
// into the result (not read when beta is 0), then the BLAS call (products.py's _addmm_cpu/_product).
PyObject* addmm(PyObject* const* args, PyObject* beta, PyObject* alpha) {
  TensorObject* bias = plain_tensor(args[0], true);
  if (bias == nullptr || bias->ndim > 2) return NOT_HANDLED;
  TensorObject* a = plain_tensor(args[1], true);
  TensorObject* b = plain_tensor(args[2], true);
  if (a == nullptr || b == nullptr || a->ndim != 2 || b->ndim != 2 || !is_float_code(a->dtype_code) ||
      b->dtype_code != a->dtype_code || bias->dtype_code != a->dtype_code || a->sizes[1] != b->sizes[0])
    return NOT_HANDLED;
  int64_t shape[2] = {a->sizes[0], b->sizes[1]};
  for (int32_t i = 0; i < bias->ndim; ++i) {
    int64_t s = bias->sizes[i], want = shape[2 - bias->ndim + i];
    if (s != want && s != 1) return NOT_HANDLED;
  }
  int inference = inference_now();
  if (inference < 0) return nullptr;
  PyObject* out = new_empty_cpu(shape, 2, a->dtype_code, inference != 0);
  if (out == nullptr) return nullptr;
  auto* o = reinterpret_cast<TensorObject*>(out);
  bool use_input = PyFloat_AS_DOUBLE(beta) != 0.0;
  if (use_input && o->dtype_code == kFloat32) fill_broadcast<float>(o, bias);
  else if (use_input) fill_broadcast<double>(o, bias);
  return run_or_decline(out, [&] { run_matmul_kernel(out, args[1], args[2], alpha, use_input ? beta : g_zero); });
}

}  // namespace

}  // namespace ember
