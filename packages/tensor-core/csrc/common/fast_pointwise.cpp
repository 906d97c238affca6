// The pointwise ops on the native fast path: binary (tensor-tensor with broadcasting, or tensor
// and a Python number that does not promote), unary (float inputs), and the in-place binary ops
// without grad recording. Each computes the result's dtype and shape once, allocates it and runs
// the same kernel as the Python path (cpu/binary.cpp, cpu/unary.cpp); any doubt returns
// NOT_HANDLED (fast_ops.h) and the Python kernel produces PyTorch's result or exception.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <utility>

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


bool dense_in_order(const TensorObject* t, const int32_t* order, int32_t ndim) {
  int64_t expected = 1;
  for (int32_t k = 0; k < ndim; ++k) {
    int32_t d = order[k];
    if (t->sizes[d] != 1) {
      if (t->strides[d] != expected) return false;
      expected *= t->sizes[d];
    }
  }
  return true;
}

// Note [Pointwise result layout] (ember/_src/shapes.py, pointwise_strides): the strides PyTorch's
// TensorIterator gives a pointwise result of `shape` from its tensor operands. False: contiguous.
bool pointwise_layout(const int64_t* shape, int32_t ndim, const TensorObject* const* ops, int n_ops,
                      int64_t* strides) {
  if (ndim < 2 || ndim > 64) return false;
  bool all_contiguous = true;
  for (int k = 0; k < n_ops && all_contiguous; ++k) all_contiguous = contiguous_strides(ops[k]);
  if (all_contiguous) return false;
  for (int32_t i = 0; i < ndim; ++i)
    if (shape[i] == 0) return false;
  int32_t perm[64];
  auto dense = [&](const int32_t* order) {
    int64_t acc = 1;
    for (int32_t k = 0; k < ndim; ++k) {
      strides[order[k]] = acc;
      acc *= shape[order[k]];
    }
  };
  bool same_shape = true;
  for (int k = 0; k < n_ops && same_shape; ++k)
    same_shape = ops[k]->ndim == ndim && std::memcmp(ops[k]->sizes, shape, sizeof(int64_t) * ndim) == 0;
  if (same_shape) {
    static const int32_t cl4[4] = {1, 3, 2, 0}, cl5[5] = {1, 4, 3, 2, 0};
    if (ndim == 4 || ndim == 5) {
      const int32_t* order = ndim == 4 ? cl4 : cl5;
      bool all_cl = true;
      for (int k = 0; k < n_ops && all_cl; ++k) all_cl = dense_in_order(ops[k], order, ndim);
      if (all_cl) {
        dense(order);
        return true;
      }
    }
    bool same_strides = true;
    for (int k = 1; k < n_ops && same_strides; ++k)
      same_strides = std::memcmp(ops[k]->strides, ops[0]->strides, sizeof(int64_t) * ndim) == 0;
    if (same_strides) {
      // non-overlapping and dense: the dims of size >= 2 by increasing stride fill one block
      int32_t m = 0;
      for (int32_t i = 0; i < ndim; ++i)
        if (shape[i] >= 2) perm[m++] = i;
      const int64_t* st = ops[0]->strides;
      for (int32_t i = 1; i < m; ++i)
        for (int32_t j = i; j > 0 && st[perm[j - 1]] > st[perm[j]]; --j) std::swap(perm[j - 1], perm[j]);
      int64_t expected = 1;
      bool ok = true;
      for (int32_t i = 0; i < m && ok; ++i) {
        ok = st[perm[i]] == expected;
        expected *= shape[perm[i]];
      }
      if (ok) {
        std::memcpy(strides, st, sizeof(int64_t) * ndim);
        return true;
      }
    }
  }
  // The operand's stride of dim d as broadcast to `shape` (0: broadcast, tells nothing).
  auto stride_of = [&](const TensorObject* t, int32_t d) -> int64_t {
    int32_t i = d - (ndim - t->ndim);
    if (i < 0 || (t->sizes[i] == 1 && shape[d] != 1)) return 0;
    return t->strides[i];
  };
  auto should_swap = [&](int32_t d0, int32_t d1) {
    for (int k = 0; k < n_ops; ++k) {
      int64_t s0 = stride_of(ops[k], d0), s1 = stride_of(ops[k], d1);
      if (s0 == 0 || s1 == 0) continue;
      if (s0 != s1) return s0 < s1 ? -1 : 1;
      if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
  };
  for (int32_t i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;  // innermost first
  for (int32_t i = 1; i < ndim; ++i) {
    int32_t d1 = i;
    for (int32_t d0 = i - 1; d0 >= 0; --d0) {
      int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  bool identity = true;
  for (int32_t i = 0; i < ndim && identity; ++i) identity = perm[i] == ndim - 1 - i;
  if (identity) return false;
  dense(perm);
  return true;
}

}  // namespace

// A fresh CPU result for a pointwise op, laid out after its operands (Note [Pointwise result layout]).
PyObject* new_pointwise_out(const int64_t* shape, int32_t ndim, int code, bool inference,
                            const TensorObject* const* ops, int n_ops) {
  int64_t strides[64];
  PyObject* out = new_empty_cpu(shape, ndim, code, inference);
  if (out == nullptr || !pointwise_layout(shape, ndim, ops, n_ops, strides)) return out;
  PyObject* tuple = PyTuple_New(ndim);
  if (tuple == nullptr) {
    Py_DECREF(out);
    return nullptr;
  }
  for (int32_t i = 0; i < ndim; ++i) {
    PyObject* v = PyLong_FromLongLong(strides[i]);
    if (v == nullptr) {
      Py_DECREF(tuple);
      Py_DECREF(out);
      return nullptr;
    }
    PyTuple_SET_ITEM(tuple, i, v);
  }
  int rc = PyObject_SetAttrString(out, "_stride", tuple);
  Py_DECREF(tuple);
  if (rc < 0) {
    Py_DECREF(out);
    return nullptr;
  }
  return out;
}

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
  const TensorObject* ops[2] = {t, b};
  PyObject* out = new_pointwise_out(shape, ndim, out_code, inference != 0, ops, scalar == nullptr ? 2 : 1);
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
  const TensorObject* ops[1] = {a};
  PyObject* out = new_pointwise_out(a->sizes, a->ndim, out_code, inference != 0, ops, 1);
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
  if (bump_version_fast(a) < 0) return nullptr;
  return Py_NewRef(x);
}


}  // namespace ember
