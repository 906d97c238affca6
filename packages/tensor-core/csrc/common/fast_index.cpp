// Basic indexing on the native fast path: the select, slice, squeeze and alias view kernels
// (views.py's, computed here), and `x[...]` with int, slice, None and Ellipsis items read as
// subscripts.py's _apply reads them: the same view ops, left to right, each through fast_call (so
// each records its own node natively, as the Python path records them). Anything else (tensor or
// list items, a bool, a step <= 0, an index out of range, too many indices) returns NOT_HANDLED
// before any op ran, and the Python function produces PyTorch's result or exception.
#include <cstring>
#include <stdexcept>

#include "fast_ops.h"

namespace ember {

namespace {

constexpr int32_t kMaxDims = 64;

PyObject* g_slice_op = nullptr;      // views.slice_op
PyObject* g_unsqueeze_op = nullptr;  // views.unsqueeze_op
PyObject* g_alias_op = nullptr;      // views.alias_op

// The dims of `t` without dim d (select), or with dim d resized and restrided (slice).
PyObject* view_without(TensorObject* t, int32_t d, int64_t offset) {
  int64_t shape[kMaxDims], strides[kMaxDims];
  for (int32_t i = 0, j = 0; i < t->ndim; ++i) {
    if (i == d) continue;
    shape[j] = t->sizes[i];
    strides[j++] = t->strides[i];
  }
  return make_view_at(t, shape, strides, t->ndim - 1, offset);
}

// select(self, dim, index)
PyObject* select_view(TensorObject* t, PyObject* dim_obj, PyObject* index_obj) {
  int64_t dim, index;
  int32_t d;
  if (t->ndim == 0 || !read_int(dim_obj, &dim) || !read_int(index_obj, &index) || !wrap_dim_c(dim, t->ndim, &d))
    return NOT_HANDLED;
  int64_t size = t->sizes[d];
  if (index < -size || index >= size) return NOT_HANDLED;
  if (index < 0) index += size;
  return view_without(t, d, t->offset_value + index * t->strides[d]);
}

// slice(self, dim, start, end, step): start/end already clamped by the caller (as views.py's
// kernel assumes); anything outside [0, size] is left to it.
PyObject* slice_view(TensorObject* t, PyObject* const* args) {
  int64_t dim, start, end, step;
  int32_t d;
  if (t->ndim == 0 || !read_int(args[0], &dim) || !read_int(args[1], &start) || !read_int(args[2], &end) ||
      !read_int(args[3], &step) || !wrap_dim_c(dim, t->ndim, &d) || step <= 0)
    return NOT_HANDLED;
  int64_t size = t->sizes[d];
  if (start < 0 || end > size) return NOT_HANDLED;
  int64_t span = end - start + step - 1;
  int64_t length = span <= 0 ? 0 : span / step;
  int64_t shape[kMaxDims], strides[kMaxDims];
  std::memcpy(shape, t->sizes, sizeof(int64_t) * t->ndim);
  std::memcpy(strides, t->strides, sizeof(int64_t) * t->ndim);
  shape[d] = length;
  strides[d] = t->strides[d] * step;
  int64_t offset = length ? t->offset_value + start * t->strides[d] : t->offset_value;
  return make_view_at(t, shape, strides, t->ndim, offset);
}

// squeeze(self, dims=None): None drops every size-1 dim, an int or a sequence of ints the size-1
// dims among them (a repeated dim is left to the Python kernel).
PyObject* squeeze_view(TensorObject* t, PyObject* dims) {
  bool drop[kMaxDims] = {};
  if (dims == Py_None) {
    for (int32_t i = 0; i < t->ndim; ++i) drop[i] = t->sizes[i] == 1;
  } else {
    int64_t listed[kMaxDims];
    int32_t n = 1;
    bool read = PyLong_CheckExact(dims) ? read_int(dims, &listed[0]) : read_int_sequence(dims, listed, &n, kMaxDims);
    if (t->ndim == 0 || !read) return NOT_HANDLED;
    bool seen[kMaxDims] = {};
    for (int32_t i = 0; i < n; ++i) {
      int32_t d;
      if (!wrap_dim_c(listed[i], t->ndim, &d) || seen[d]) return NOT_HANDLED;
      seen[d] = true;
      drop[d] = t->sizes[d] == 1;
    }
  }
  int64_t shape[kMaxDims], strides[kMaxDims];
  int32_t n = 0;
  for (int32_t i = 0; i < t->ndim; ++i) {
    if (drop[i]) continue;
    shape[n] = t->sizes[i];
    strides[n++] = t->strides[i];
  }
  return make_view_at(t, shape, strides, n, t->offset_value);
}

// The op called through the fast path on (result, more...) (a new reference the call consumes in
// `result`); NOT_HANDLED or null pass through.
PyObject* chain(PyObject* op, PyObject* result, PyObject* const* more, Py_ssize_t n_more) {
  if (result == nullptr || result == NOT_HANDLED) return result;
  PyObject* call[5] = {result};
  for (Py_ssize_t i = 0; i < n_more; ++i) call[i + 1] = more[i];
  PyObject* r = fast_call(reinterpret_cast<OpObject*>(op), call, n_more + 1);
  Py_DECREF(result);
  return r;
}

PyObject* chain_ints(PyObject* op, PyObject* result, const int64_t* values, Py_ssize_t n) {
  PyObject* objs[4] = {};
  for (Py_ssize_t i = 0; i < n; ++i) {
    objs[i] = PyLong_FromLongLong(values[i]);
    if (objs[i] == nullptr) {
      for (Py_ssize_t j = 0; j < i; ++j) Py_DECREF(objs[j]);
      Py_XDECREF(result == NOT_HANDLED ? nullptr : result);
      return nullptr;
    }
  }
  PyObject* r = chain(op, result, objs, n);
  for (Py_ssize_t i = 0; i < n; ++i) Py_DECREF(objs[i]);
  return r;
}

// A slice item's (start, stop, step) for a dim of `size` as slice.indices() gives them, for None
// or exact int fields and a positive step; false otherwise.
bool slice_bounds(PyObject* item, int64_t size, int64_t* start, int64_t* stop, int64_t* step) {
  auto* s = reinterpret_cast<PySliceObject*>(item);
  PyObject* fields[3] = {s->start, s->stop, s->step};
  int64_t values[3] = {0, size, 1};
  for (int i = 0; i < 3; ++i)
    if (fields[i] != Py_None && !read_int(fields[i], &values[i])) return false;
  if (values[2] <= 0) return false;
  for (int i = 0; i < 2; ++i) {
    if (fields[i] == Py_None) continue;
    int64_t v = values[i];
    if (v < 0) v = v + size < 0 ? 0 : v + size;
    values[i] = v > size ? size : v;
  }
  *start = values[0];
  *stop = values[1];
  *step = values[2];
  return true;
}

}  // namespace

PyObject* fast_index_view_kernel(int kind, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1) return NOT_HANDLED;
  TensorObject* t = plain_view_source(args[0]);
  if (t == nullptr || t->ndim > kMaxDims) return NOT_HANDLED;
  switch (kind) {
    case kSelect: return nargs == 3 ? select_view(t, args[1], args[2]) : NOT_HANDLED;
    case kSlice: return nargs == 5 ? slice_view(t, args + 1) : NOT_HANDLED;
    case kSqueeze: return nargs == 2 ? squeeze_view(t, args[1]) : NOT_HANDLED;
    case kAlias: return nargs == 1 ? make_view_at(t, t->sizes, t->strides, t->ndim, t->offset_value) : NOT_HANDLED;
    default: return NOT_HANDLED;
  }
}

PyObject* fast_getitem(PyObject* select_op, PyObject* self, PyObject* index) {
  if (g_slice_op == nullptr) return NOT_HANDLED;
  TensorObject* t = plain_view_source(self);
  if (t == nullptr || t->ndim > kMaxDims) return NOT_HANDLED;
  PyObject* const* items = &index;
  Py_ssize_t n_items = 1;
  if (PyTuple_CheckExact(index)) {
    items = &PyTuple_GET_ITEM(index, 0);
    n_items = PyTuple_GET_SIZE(index);
  }
  // _apply's first pass: only basic items, and no more int/slice items than dims.
  int32_t specified = 0;
  for (Py_ssize_t i = 0; i < n_items; ++i) {
    PyObject* item = items[i];
    if (PyLong_CheckExact(item) || PySlice_Check(item)) ++specified;
    else if (item != Py_None && item != Py_Ellipsis) return NOT_HANDLED;
  }
  if (specified > t->ndim) return NOT_HANDLED;
  // Checked before any op runs: every int in range and every slice readable, dim by dim.
  int64_t sizes[kMaxDims];
  int32_t ndim = t->ndim;
  std::memcpy(sizes, t->sizes, sizeof(int64_t) * ndim);
  {
    int32_t dim = 0;
    for (Py_ssize_t i = 0; i < n_items; ++i) {
      PyObject* item = items[i];
      int64_t v, start, stop, step;
      if ((PyLong_CheckExact(item) || PySlice_Check(item)) && dim >= ndim) return NOT_HANDLED;
      if (PyLong_CheckExact(item)) {
        if (!read_int(item, &v) || v < -sizes[dim] || v >= sizes[dim]) return NOT_HANDLED;
        std::memmove(sizes + dim, sizes + dim + 1, sizeof(int64_t) * (ndim - dim - 1));
        --ndim;
      } else if (PySlice_Check(item)) {
        if (!slice_bounds(item, sizes[dim], &start, &stop, &step)) return NOT_HANDLED;
        int64_t span = stop - start + step - 1;
        sizes[dim++] = span <= 0 ? 0 : span / step;
      } else if (item == Py_None) {
        if (ndim + 1 > kMaxDims) return NOT_HANDLED;
        std::memmove(sizes + dim + 1, sizes + dim, sizeof(int64_t) * (ndim - dim));
        sizes[dim++] = 1;
        ++ndim;
      } else {
        dim += t->ndim - specified;
      }
    }
  }
  // x[a:b] (one slice, no step) is always a slice op in the Python shortcut, even when it is whole.
  bool bare_stepless_slice = !PyTuple_CheckExact(index) && PySlice_Check(index) &&
                             reinterpret_cast<PySliceObject*>(index)->step == Py_None;
  PyObject* result = Py_NewRef(self);
  int32_t dim = 0;
  for (Py_ssize_t i = 0; i < n_items && result != nullptr && result != NOT_HANDLED; ++i) {
    PyObject* item = items[i];
    TensorObject* r = reinterpret_cast<TensorObject*>(result);
    if (PyLong_CheckExact(item)) {
      int64_t values[2] = {dim, 0};
      read_int(item, &values[1]);
      result = chain_ints(select_op, result, values, 2);
    } else if (PySlice_Check(item)) {
      int64_t values[4] = {dim, 0, 0, 0};
      slice_bounds(item, r->sizes[dim], &values[1], &values[2], &values[3]);
      if (values[1] != 0 || values[2] != r->sizes[dim] || values[3] != 1 || bare_stepless_slice)
        result = chain_ints(g_slice_op, result, values, 4);
      ++dim;
    } else if (item == Py_None) {
      int64_t value = dim;
      result = chain_ints(g_unsqueeze_op, result, &value, 1);
      ++dim;
    } else {
      dim += t->ndim - specified;
    }
  }
  if (result == self) result = chain(g_alias_op, result, nullptr, 0);
  return result;
}

namespace {

// _C._set_getitem_ops(slice_op, unsqueeze_op, alias_op): the view ops `x[...]` chains besides
// select (the front's own op).
PyObject* py_set_getitem_ops(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "_set_getitem_ops(slice_op, unsqueeze_op, alias_op)");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < 3; ++i)
    if (!PyObject_TypeCheck(args[i], &OpBaseType)) {
      PyErr_SetString(PyExc_TypeError, "_set_getitem_ops: ops must be dispatcher ops");
      return nullptr;
    }
  Py_XSETREF(g_slice_op, Py_NewRef(args[0]));
  Py_XSETREF(g_unsqueeze_op, Py_NewRef(args[1]));
  Py_XSETREF(g_alias_op, Py_NewRef(args[2]));
  Py_RETURN_NONE;
}

PyMethodDef functions[] = {
    {"_set_getitem_ops", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_set_getitem_ops)),
     METH_FASTCALL, "Registers the view ops the native `x[...]` chains (slice, unsqueeze, alias)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void bind_fast_index(PyObject* module) {
  if (PyModule_AddFunctions(module, functions) < 0) throw std::runtime_error("module init");
}

}  // namespace ember
