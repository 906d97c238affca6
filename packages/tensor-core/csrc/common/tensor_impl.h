// ember._C.TensorBase: the C-level base of ember.Tensor. It holds a tensor's metadata in a C
// struct, so kernels and the dispatcher's fast path read sizes, strides, dtype and storage
// without Python attribute lookups, and op results are created without running Python.
//
// Python sees the same attribute names as before (`_storage, _shape, _stride, _offset, dtype,
// _device, _requires_grad, grad, grad_fn, _base, _autograd_meta`), readable and writable
// through getset descriptors; the Python objects are kept as given (a Size stays a Size), and
// C-side mirrors (int64 sizes/strides, the dtype code, the device kind, the raw Storage
// pointer) are refreshed on every write. A mirror that cannot be computed (a shape holding
// symbolic sizes, a storage that is not a _C.Storage) is marked invalid and C++ callers take
// the general path instead. See packages/tensor-core/README.md, "Tensor metadata in C++".
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>

#include "storage.h"

namespace ember {

constexpr int kInlineDims = 6;

enum DeviceKind : int8_t { kDeviceOther = 0, kDeviceCPU = 1, kDeviceMeta = 2 };

struct TensorObject {
  PyObject_HEAD
  PyObject* storage;        // _storage
  PyObject* shape;          // _shape (a tuple)
  PyObject* stride;         // _stride (a tuple)
  PyObject* offset;         // _offset (an int)
  PyObject* dtype;          // dtype
  PyObject* device;         // _device
  PyObject* requires_grad;  // _requires_grad
  PyObject* grad;
  PyObject* grad_fn;
  PyObject* base;           // _base
  PyObject* autograd_meta;  // _autograd_meta
  PyObject* dict;
  PyObject* weakreflist;
  // _src_device: the device of the tensor an autograd stand-in (a data-less meta tensor a node keeps
  // for a formula that reads only metadata) stands for; null (AttributeError) on every other tensor.
  // A field rather than a __dict__ entry: ~270 stand-ins per GPT-2 forward, each a dict the
  // collector would traverse (Note [Untracked stand-ins], autograd_saved.cpp).
  PyObject* src_device;
  // C mirrors of the fields above.
  Storage* storage_ptr;     // null unless `storage` is a _C.Storage
  int64_t* sizes;           // inline_dims or a heap block; valid when ndim >= 0
  int64_t* strides;         // valid when stride_ndim >= 0
  int32_t ndim;             // -1: shape unset or not all int64
  int32_t stride_ndim;      // -1: stride unset or not all int64
  int64_t offset_value;
  int8_t offset_ok;
  int8_t dtype_code;        // -1: unknown dtype object
  int8_t device_kind;       // DeviceKind
  int8_t rg;                // truth of requires_grad
  // A view's storage version when its grad_fn was last set (or the view made): a view whose
  // storage was written since gets its history rebuilt from its base's on the next read of
  // grad_fn (Note [Stale view histories], autograd's _views.py).
  int64_t view_version;
  // Whether the tensor a view was made of required grad then (Tensor._view_of_grad): a view of
  // one without a grad_fn was made without recording (Note [Views made without recording]).
  int8_t view_of_grad;
  // The tensor's version counter when it has one of its own (`.data`, a tensor moved by set_ or
  // `.data =`, and the views, detach() results and saved aliases of such tensors); null: the
  // storage's default counter (a device storage's `version` attribute). See storage.h.
  VersionCounter* vc;
  int64_t inline_dims[2 * kInlineDims];
};

extern PyTypeObject TensorBaseType;

inline bool is_tensor_base(PyObject* o) { return PyObject_TypeCheck(o, &TensorBaseType); }

// Whether the C mirrors' sizes and strides are C-contiguous (size-1 dims may have any stride; an
// empty tensor is contiguous), as Tensor.is_contiguous(). The caller checks the mirrors are valid.
inline bool contiguous_strides(const TensorObject* t) {
  int64_t expected = 1;
  for (int32_t i = t->ndim - 1; i >= 0; --i) {
    const int64_t n = t->sizes[i];
    if (n == 0) return true;
    if (n != 1) {
      if (t->strides[i] != expected) return false;
      expected *= n;
    }
  }
  return true;
}

// The tensor's grad_fn (borrowed), a view's first rebuilt when its storage was written since its
// history was set (Note [Stale view histories]). Null with an error set on failure.
PyObject* current_grad_fn(TensorObject* t);
// Records a view's current version as the one its history is from.
void stamp_view_version(TensorObject* t);

// The tensor's version: its own counter's, else its storage's default one (a device storage's
// `version` attribute). False (no error set) where there is none to read.
bool tensor_version(TensorObject* t, int64_t* version);
// Bumps the tensor's version counter by one (every in-place write). -1 with an error set on failure.
int bump_version(TensorObject* t);
inline int bump_version_fast(TensorObject* t) {
  if (t->vc != nullptr) {
    ++t->vc->value;
    return 0;
  }
  if (t->storage_ptr != nullptr) {
    ++t->storage_ptr->counter()->value;
    return 0;
  }
  return bump_version(t);
}
// Makes `dst` share `src`'s version counter (a view, a detached tensor or a saved alias of src).
int share_version_counter(TensorObject* dst, TensorObject* src);

// The registered Python classes and objects (set once by tensor.py through _C._tensor_setup).
PyObject* tensor_class();              // ember.Tensor
PyObject* dtype_object(int code);      // ember.float32, ... by code (borrowed), null if unknown
PyObject* cpu_device();
PyObject* meta_device();

// A new ember.Tensor (exact class) viewing `storage` (a _C.Storage object, borrowed).
// Takes ownership of nothing; returns a new reference or null with a Python error set.
PyObject* new_tensor(PyObject* storage_obj, Storage* storage, const int64_t* sizes, const int64_t* strides,
                     int32_t ndim, int64_t offset, int dtype_code, PyObject* device);

// A new contiguous CPU tensor (uninitialised). Null with an error set on failure.
PyObject* new_empty_cpu(const int64_t* sizes, int32_t ndim, int dtype_code, bool inference);

// The dispatcher's global switches (lists shared with dispatch.py: C reads item 0).
struct DispatchState {
  PyObject* modes_entered = nullptr;     // dispatch._MODES_ENTERED
  PyObject* subclass_dispatch = nullptr; // dispatch._SUBCLASS_DISPATCH
  PyObject* autocast_on = nullptr;       // dispatch._AUTOCAST_ON
  PyObject* layout_dispatch = nullptr;   // dispatch._LAYOUT_DISPATCH
  PyObject* inference_used = nullptr;    // grad_mode.INFERENCE_USED
  PyObject* grad_state = nullptr;        // grad_mode.STATE
  PyObject* zero = nullptr;              // the int 0
};
extern DispatchState g_dispatch;

// True when no dispatch mode, subclass dispatch, autocast or sparse layout routing is active.
inline bool plain_dispatch() {
  // Off means False, None or the int 0 (a cached singleton): anything else counts as on.
  auto on = [](PyObject* lst) {
    PyObject* v = PyList_GET_ITEM(lst, 0);
    return v != Py_False && v != Py_None && v != g_dispatch.zero;
  };
  return g_dispatch.layout_dispatch && !on(g_dispatch.modes_entered) && !on(g_dispatch.subclass_dispatch) &&
         !on(g_dispatch.autocast_on) && !on(g_dispatch.layout_dispatch);
}

// Whether tensors created now are inference tensors (inference_mode in this thread). -1 on error.
int inference_now();

void bind_tensor_impl(PyObject* module);
void bind_fast_dispatch(PyObject* module);  // fast_dispatch.cpp: _C.OpBase

}  // namespace ember
