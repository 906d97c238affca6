// What the native fast path's files share: the C layout of an op (_C.OpBase, fast_dispatch.cpp),
// the kinds of op it computes natively, and the kernels of each family (fast_pointwise.cpp,
// fast_views.cpp, fast_reduce.cpp: sum/mean and mm, fast_where.cpp). fast_front.cpp builds the
// public functions and methods (`x.sum(dim=1)`, `x.view(2, 3)`) on top of `fast_call`.
//
// Every kernel here returns NOT_HANDLED for anything it does not compute exactly as the Python
// kernel would (an unusual dtype, a bad argument, a shape error): the caller then runs the Python
// dispatcher, which produces PyTorch's result or exception. Null means a Python error is set.
#pragma once

#include <Python.h>

#include <cstdint>

#include "tensor_impl.h"

namespace ember {

// op._set_fast(kind, code, result): which native kernel computes an op's plain calls.
enum FastKind : int8_t {
  kNone = 0,
  kBinary = 1,          // (a, b): tensor-tensor or tensor-number pointwise
  kUnary = 2,           // (a)
  kBinaryInplace = 3,   // (self, other), no grad recording
  kView = 4,            // view(self, size)
  kTranspose = 5,       // transpose(self, dim0, dim1)
  kPermute = 6,         // permute(self, dims)
  kUnsqueeze = 7,       // unsqueeze(self, dim)
  kExpand = 8,          // expand(self, size)
  kSum = 9,             // sum(self, dim, keepdim, dtype)
  kMean = 10,           // mean(self, dim, keepdim, dtype)
  kMm = 11,             // mm(self, mat2)
  kWhere = 12,          // where(condition, self, other)
  kAddmm = 13,          // addmm(self, mat1, mat2) (beta and alpha 1)
  kSelect = 14,         // select(self, dim, index)
  kSlice = 15,          // slice(self, dim, start, end, step)
  kSqueeze = 16,        // squeeze(self, dims)
  kAlias = 17,          // alias(self)
  kBmm = 18,            // bmm(self, mat2)
  kLastKind = kBmm,
};

struct OpObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  int32_t code;
  int8_t fast;
  int8_t result;
  PyObject* grad_spec;  // autograd's recording spec for this op (autograd_record.h), owned
};

extern PyTypeObject OpBaseType;
extern PyObject* const NOT_HANDLED;

constexpr int kBool = 0, kInt64 = 5, kFloat32 = 8, kFloat64 = 9;
inline bool is_float_code(int c) { return c == kFloat32 || c == kFloat64; }

// ember.Tensor or a subclass registered as behaving like it (nn.Parameter).
bool plain_tensor_type(PyObject* tp);
// A tensor argument the pointwise kernels can take (a plain CPU tensor of a dtype computed as
// itself), or null. `below_autograd`: inputs may require grad.
TensorObject* plain_tensor(PyObject* o, bool below_autograd);
// A plain CPU tensor of any known dtype (what a view needs), or null.
TensorObject* plain_view_source(PyObject* o);

// The op's native kernel on positional args (no grad recording), NOT_HANDLED or null.
PyObject* fast_compute(OpObject* op, PyObject* const* args, Py_ssize_t nargs);
// The op called with positional args through the fast path, grad recording included (nodes
// built natively); NOT_HANDLED when the Python dispatcher must take the call (checked before
// anything ran). The caller has checked plain_dispatch().
PyObject* fast_call(OpObject* op, PyObject* const* args, Py_ssize_t nargs);

// fast_pointwise.cpp (the op's `code` and `result` from _set_fast)
// A fresh CPU result of `shape` for a pointwise op, laid out after its tensor operands as PyTorch's
// TensorIterator lays it out (Note [Pointwise result layout], ember/_src/shapes.py).
PyObject* new_pointwise_out(const int64_t* shape, int32_t ndim, int code, bool inference,
                            const TensorObject* const* ops, int n_ops);
PyObject* fast_binary(OpObject* op, PyObject* x, PyObject* y, bool below_autograd);
PyObject* fast_unary(OpObject* op, PyObject* x, bool below_autograd);
// self.op_(other) without grad recording: writes into self, bumps its version counter.
PyObject* fast_binary_inplace(OpObject* op, PyObject* x, PyObject* y);

// fast_views.cpp
PyObject* fast_view_kernel(int kind, PyObject* const* args, Py_ssize_t nargs);
// A view of `src` with these sizes/strides (its _base set as make_view sets it). New reference.
PyObject* make_view_of(TensorObject* src, const int64_t* sizes, const int64_t* strides, int32_t ndim);
// The same at another storage offset (select, slice).
PyObject* make_view_at(TensorObject* src, const int64_t* sizes, const int64_t* strides, int32_t ndim,
                       int64_t offset);
// A Python int sequence (list or tuple of exact ints) read into out; false if it is anything else.
// An exact Python int (not a bool, not a subclass such as compile's symbolic sizes), or false.
bool read_int(PyObject* o, int64_t* out);
bool read_int_sequence(PyObject* seq, int64_t* out, int32_t* n, int32_t max);
// PyTorch's wrap of a possibly negative dim for a rank-`ndim` tensor; false when out of range.
bool wrap_dim_c(int64_t dim, int32_t ndim, int32_t* out);
// view_strides (shapes.py): strides to view (sizes, strides) as new_sizes, false if impossible.
bool view_strides_c(const TensorObject* t, const int64_t* new_sizes, int32_t new_ndim, int64_t* new_strides);

// fast_reduce.cpp
PyObject* fast_reduce_kernel(int kind, PyObject* const* args, Py_ssize_t nargs);
PyObject* fast_mm_kernel(PyObject* const* args, Py_ssize_t nargs);
PyObject* fast_addmm_kernel(PyObject* const* args, Py_ssize_t nargs);
// addmm(self, mat1, mat2, beta=beta, alpha=alpha) computed without grad recording (the front's
// call when no input needs grad).
PyObject* fast_addmm_scaled(PyObject* const* args, PyObject* beta, PyObject* alpha);
PyObject* fast_bmm_kernel(PyObject* const* args, Py_ssize_t nargs);

// fast_index.cpp: select/slice/squeeze/alias, and `self[index]` for int/slice/None/Ellipsis items
// chained through fast_call (select_op: the front's op).
PyObject* fast_index_view_kernel(int kind, PyObject* const* args, Py_ssize_t nargs);
PyObject* fast_getitem(PyObject* select_op, PyObject* self, PyObject* index);
void bind_fast_index(PyObject* module);

// fast_where.cpp
PyObject* fast_where_kernel(PyObject* const* args, Py_ssize_t nargs);

// fast_front.cpp
void bind_fast_front(PyObject* module);

// operator_method.cpp
void bind_operator_method(PyObject* module);

}  // namespace ember
