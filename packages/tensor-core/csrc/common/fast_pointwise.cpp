// The pointwise ops on the native fast path: binary (tensor-tensor with broadcasting, or tensor
// and a Python number that does not promote), unary (float inputs), and the in-place binary ops
// without grad recording. Each computes the result's dtype and shape once, allocates it and runs
// the same kernel as the Python path (cpu/binary.cpp, cpu/unary.cpp); any doubt returns
// NOT_HANDLED (fast_ops.h) and the Python kernel produces PyTorch's result or exception.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>

#include "fast_ops.h"

namespace py = pybind11;

namespace ember {

void run_binary_kernel(int code, py::handle out, py::handle a, py::handle b);
void run_binary_scalar_kernel(int code, py::handle out, py::handle a, py::handle scalar, bool reverse);
void run_unary_kernel(int code, py::handle out, py::handle a);

namespace {

// Binary result kinds (pointwise.py's _SAME_RESULT, _FLOAT_RESULT, _BOOL_RESULT).
enum BinaryResult : int8_t { kSameResult = 0, kFloatResult = 1, kBoolResult = 2 };
// Unary kinds (pointwise.py's _FLOAT_OP, _KEEP_OP, _PREDICATE_OP): floating inputs only, so the
// result keeps the input dtype, or is bool for predicates.
enum UnaryResult : int8_t { kUnaryKeep = 0, kUnaryPredicate = 1 };

// Right-aligned broadcast of two shapes into out (at most 64 dims); false if they do not broadcast.
bool broadcast(const TensorObject* a, const TensorObject* b, int64_t* out, int32_t* ndim) {
  int32_t n = a->ndim > b->ndim ? a->ndim : b->ndim;
  if (n > 64) return false;
  for (int32_t i = 0; i < n; ++i) {
    int32_t ia = a->ndim - n + i, ib = b->ndim - n + i;
    int64_t sa = ia >= 0 ? a->sizes[ia] : 1, sb = ib >= 0 ? b->sizes[ib] : 1;
    if (sa == sb || sb == 1) out[i] = sa;
    else if (sa == 1) out[i] = sb;
    else return false;
  }
  *ndim = n;
  return true;
}

// Runs `fn` (which may throw); on a C++ exception the result is dropped and the Python path
// takes over, so errors keep their Python-side types and messages.
template <typename F>
PyObject* run_or_fallback(PyObject* out, F&& fn) {
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

}  // namespace

PyObject* fast_binary(OpObject* op, PyObject* x, PyObject* y, bool below_autograd) {
  TensorObject* a = plain_tensor(x, below_autograd);
  TensorObject* b = plain_tensor(y, below_autograd);
  TensorObject* t;
  PyObject* scalar = nullptr;
  bool reverse = false;
  int code;
  if (a != nullptr && b != nullptr) {
    if (a->dtype_code != b->dtype_code) return NOT_HANDLED;
    code = a->dtype_code;
    t = a;
  } else {
    t = a != nullptr ? a : b;
    scalar = a != nullptr ? y : x;
    reverse = a == nullptr;
    if (t == nullptr) return NOT_HANDLED;
    code = t->dtype_code;
    if (PyFloat_CheckExact(scalar)) {
      if (!is_float_code(code)) return NOT_HANDLED;  // int tensor with a float: promotes
    } else if (PyLong_CheckExact(scalar)) {
      int overflow = 0;
      PyLong_AsLongLongAndOverflow(scalar, &overflow);
      if (overflow) return NOT_HANDLED;
    } else {
      return NOT_HANDLED;
    }
  }
  if (op->result == kFloatResult && !is_float_code(code)) return NOT_HANDLED;
  int out_code = op->result == kBoolResult ? kBool : code;
  int64_t shape[64];
  int32_t ndim;
  if (scalar != nullptr) {
    ndim = t->ndim;
    if (ndim > 64) return NOT_HANDLED;
    std::memcpy(shape, t->sizes, sizeof(int64_t) * ndim);
  } else if (!broadcast(a, b, shape, &ndim)) {
    return NOT_HANDLED;
  }
  int inference = inference_now();
  if (inference < 0) return nullptr;
  PyObject* out = new_empty_cpu(shape, ndim, out_code, inference != 0);
  if (out == nullptr) return nullptr;
  int opcode = op->code;
  if (scalar == nullptr)
    return run_or_fallback(out, [&] { run_binary_kernel(opcode, out, x, y); });
  return run_or_fallback(out, [&] { run_binary_scalar_kernel(opcode, out, reinterpret_cast<PyObject*>(t), scalar, reverse); });
}

PyObject* fast_unary(OpObject* op, PyObject* x, bool below_autograd) {
  TensorObject* a = plain_tensor(x, below_autograd);
  if (a == nullptr || !is_float_code(a->dtype_code)) return NOT_HANDLED;
  int inference = inference_now();
  if (inference < 0) return nullptr;
  int out_code = op->result == kUnaryPredicate ? kBool : a->dtype_code;
  PyObject* out = new_empty_cpu(a->sizes, a->ndim, out_code, inference != 0);
  if (out == nullptr) return nullptr;
  int opcode = op->code;
  return run_or_fallback(out, [&] { run_unary_kernel(opcode, out, x); });
}


// `self.op_(other)` (add_, mul_, ...): the binary kernel writing into self, when self is a plain
// tensor with no zero strides, `other` a plain tensor of self's dtype on another storage (or a
// number that does not promote) broadcasting to self's shape exactly. The version counter goes
// up as the Python kernel's does. Anything else (overlap, promotion, a shape error) is left to
// the Python kernel, which raises PyTorch's errors.
PyObject* fast_binary_inplace(OpObject* op, PyObject* x, PyObject* y) {
  TensorObject* a = plain_tensor(x, true);
  if (a == nullptr) return NOT_HANDLED;
  for (int32_t i = 0; i < a->ndim; ++i)
    if (a->strides[i] == 0) return NOT_HANDLED;
  int code = a->dtype_code;
  if (op->result == kBoolResult || (op->result == kFloatResult && !is_float_code(code))) return NOT_HANDLED;
  TensorObject* b = nullptr;
  if (is_tensor_base(y)) {
    b = plain_tensor(y, true);
    if (b == nullptr || b->dtype_code != code || b->storage_ptr == a->storage_ptr) return NOT_HANDLED;
    int64_t shape[64];
    int32_t ndim;
    if (!broadcast(a, b, shape, &ndim) || ndim != a->ndim) return NOT_HANDLED;
    for (int32_t i = 0; i < ndim; ++i)
      if (shape[i] != a->sizes[i]) return NOT_HANDLED;
  } else if (PyFloat_CheckExact(y)) {
    if (!is_float_code(code)) return NOT_HANDLED;
  } else if (PyLong_CheckExact(y)) {
    int overflow = 0;
    PyLong_AsLongLongAndOverflow(y, &overflow);
    if (overflow) return NOT_HANDLED;
  } else {
    return NOT_HANDLED;
  }
  int opcode = op->code;
  try {
    if (b != nullptr) run_binary_kernel(opcode, x, x, y);
    else run_binary_scalar_kernel(opcode, x, x, y, false);
  } catch (py::error_already_set&) {
    PyErr_Clear();
    return NOT_HANDLED;
  } catch (...) {
    return NOT_HANDLED;
  }
  a->storage_ptr->version += 1;
  return Py_NewRef(x);
}


}  // namespace ember
