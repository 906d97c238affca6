// ember._C.TensorBase (see tensor_impl.h): the struct, its attribute descriptors, GC support,
// and the C constructors of op results.
#include "tensor_impl.h"

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstring>

#include "../bindings.h"
#include "dtype.h"

namespace py = pybind11;

namespace ember {

DispatchState g_dispatch;

namespace {

PyObject* g_tensor_class = nullptr;
PyObject* g_dtypes[kNumDTypes] = {};
PyObject* g_cpu = nullptr;
PyObject* g_meta = nullptr;
PyTypeObject* g_storage_type = nullptr;
PyObject* s_code = nullptr;       // "_code"
PyObject* s_inference = nullptr;  // "inference"

Storage* storage_ptr_of(PyObject* v) {
  if (v == nullptr || g_storage_type == nullptr || !PyObject_TypeCheck(v, g_storage_type)) return nullptr;
  try {
    return py::handle(v).cast<Storage*>();
  } catch (...) {
    PyErr_Clear();
    return nullptr;
  }
}

int8_t dtype_code_of(PyObject* v) {
  if (v == nullptr) return -1;
  for (int i = 0; i < kNumDTypes; ++i)
    if (g_dtypes[i] == v) return static_cast<int8_t>(i);
  return -1;  // an object other than ember's dtypes: C++ callers take the general path
}

int8_t device_kind_of(PyObject* v) {
  if (v != nullptr && v == g_cpu) return kDeviceCPU;
  if (v != nullptr && v == g_meta) return kDeviceMeta;
  return kDeviceOther;
}

// The buffer for sizes (or strides) of n dims: inline up to kInlineDims, else on the heap.
int64_t* dims_buffer(TensorObject* self, bool for_stride, Py_ssize_t n) {
  int64_t** slot = for_stride ? &self->strides : &self->sizes;
  int64_t* inline_buf = self->inline_dims + (for_stride ? kInlineDims : 0);
  if (*slot != nullptr && *slot != inline_buf) PyMem_Free(*slot);
  *slot = nullptr;
  if (n <= kInlineDims) return *slot = inline_buf;
  *slot = static_cast<int64_t*>(PyMem_Malloc(static_cast<size_t>(n) * sizeof(int64_t)));
  if (*slot == nullptr) PyErr_NoMemory();
  return *slot;
}

// Parses a tuple of ints into the sizes/strides mirror; -1 in *ndim when an item is no exact int
// that fits int64 (symbolic sizes of a tracer): the mirror is then invalid, not an error.
int parse_dims(TensorObject* self, PyObject* tup, bool for_stride, int32_t* ndim) {
  Py_ssize_t n = PyTuple_GET_SIZE(tup);
  int64_t* buf = dims_buffer(self, for_stride, n);
  if (buf == nullptr) return -1;
  *ndim = static_cast<int32_t>(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(tup, i);
    int overflow = 0;
    long long v = PyLong_CheckExact(item) ? PyLong_AsLongLongAndOverflow(item, &overflow) : 0;
    if (!PyLong_CheckExact(item) || overflow) {
      *ndim = -1;
      return 0;
    }
    buf[i] = v;
  }
  return 0;
}

PyObject* missing(PyObject* self, const char* name) {
  PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute '%s'", Py_TYPE(self)->tp_name, name);
  return nullptr;
}

#define FIELD(name) reinterpret_cast<TensorObject*>(self)->name

// -- plain object fields --------------------------------------------------------------------------

struct PlainField {
  const char* name;
  size_t offset;
};

PyObject* get_plain(PyObject* self, void* closure) {
  auto* f = static_cast<PlainField*>(closure);
  PyObject* v = *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(self) + f->offset);
  if (v == nullptr) return missing(self, f->name);
  return Py_NewRef(v);
}

int set_plain(PyObject* self, PyObject* value, void* closure) {
  auto* f = static_cast<PlainField*>(closure);
  PyObject** slot = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(self) + f->offset);
  if (value == nullptr && *slot == nullptr) {
    missing(self, f->name);
    return -1;
  }
  Py_XSETREF(*slot, Py_XNewRef(value));
  return 0;
}

// Note [Stale view histories]: an in-place write into a base (or into another view of it) rebases
// the base's history but leaves the other views' grad_fn pointing at the old one (their
// gradients would miss the write). Each view keeps its storage's version from when its grad_fn
// was set; a read of grad_fn that finds the version moved calls autograd's hook (registered with
// _C._set_view_refresh), which gives the view a node reading its elements out of the base's
// current history, as PyTorch regenerates it. Plain tensors pay one pointer compare.
PyObject* g_view_refresh = nullptr;
PyObject* s_version_attr = nullptr;  // "version"

}  // namespace

// A device storage's (CUDA's, a Python object) default counter: its `version` attribute; false
// when there is none to read.
bool device_storage_version(PyObject* storage, int64_t* version) {
  if (storage == nullptr || storage == Py_None) return false;
  PyObject* v = PyObject_GetAttr(storage, s_version_attr);
  if (v == nullptr) {
    PyErr_Clear();
    return false;
  }
  bool is_int = PyLong_Check(v);
  long long value = is_int ? PyLong_AsLongLong(v) : -1;
  Py_DECREF(v);
  if (value == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  *version = value;
  return is_int;
}

bool tensor_version(TensorObject* t, int64_t* version) {
  if (t->vc != nullptr) {
    *version = t->vc->value;
    return true;
  }
  if (t->storage_ptr != nullptr) {
    *version = t->storage_ptr->version();
    return true;
  }
  return device_storage_version(t->storage, version);
}

int bump_version(TensorObject* t) {
  if (t->vc != nullptr || t->storage_ptr != nullptr) return bump_version_fast(t);
  int64_t version;
  if (device_storage_version(t->storage, &version)) {
    PyObject* v = PyLong_FromLongLong(version + 1);
    if (v == nullptr) return -1;
    int rc = PyObject_SetAttr(t->storage, s_version_attr, v);
    Py_DECREF(v);
    return rc;
  }
  t->vc = version_counter_new(1);  // a storage without a counter (a tracer's): the tensor keeps one
  return 0;
}

// The counter `t` reads, made into an object of its own where it is a device storage's attribute
// (t keeps it from now on), so another tensor can share it. Borrowed; null with an error set.
VersionCounter* materialize_counter(TensorObject* t) {
  if (t->vc != nullptr) return t->vc;
  if (t->storage_ptr != nullptr) return t->storage_ptr->counter();
  int64_t version = 0;
  if (!device_storage_version(t->storage, &version)) version = 0;
  t->vc = version_counter_new(version);
  return t->vc;
}

int share_version_counter(TensorObject* dst, TensorObject* src) {
  if (dst == src) return 0;
  VersionCounter* c;
  if (src->vc != nullptr) {
    c = version_counter_ref(src->vc);
  } else if (dst->storage == src->storage) {
    c = nullptr;  // both read the storage's default counter
  } else {
    c = materialize_counter(src);
    if (c == nullptr) return -1;
    version_counter_ref(c);
  }
  version_counter_unref(dst->vc);
  dst->vc = c;
  return 0;
}

void stamp_view_version(TensorObject* t) {
  int64_t version;
  if (t->base != nullptr && t->base != Py_None && tensor_version(t, &version)) t->view_version = version;
}

PyObject* current_grad_fn(TensorObject* t) {
  int64_t version;
  if (t->base != nullptr && t->base != Py_None && g_view_refresh != nullptr && tensor_version(t, &version) &&
      version != t->view_version) {
    int64_t seen = t->view_version;
    t->view_version = version;  // first: the hook reads grad_fn itself
    PyObject* r = PyObject_CallOneArg(g_view_refresh, reinterpret_cast<PyObject*>(t));
    if (r == nullptr) {
      t->view_version = seen;  // still stale: the next read raises again
      return nullptr;
    }
    Py_DECREF(r);
  }
  return t->grad_fn;
}

namespace {

PyObject* get_grad_fn(PyObject* self, void*) {
  auto* t = reinterpret_cast<TensorObject*>(self);
  if (t->grad_fn == nullptr) return missing(self, "grad_fn");
  PyObject* fn = current_grad_fn(t);
  return fn == nullptr ? nullptr : Py_NewRef(fn);
}

// grad_fn and _base: stored as given; a view records its version (its history is current).
int set_history_field(PyObject* self, PyObject* value, void* closure) {
  if (set_plain(self, value, closure) < 0) return -1;
  stamp_view_version(reinterpret_cast<TensorObject*>(self));
  return 0;
}

// _base: a view shares its base's version counter (set before the history field: its stamp reads it).
int set_base(PyObject* self, PyObject* value, void* closure) {
  if (value != nullptr && is_tensor_base(value) &&
      share_version_counter(reinterpret_cast<TensorObject*>(self), reinterpret_cast<TensorObject*>(value)) < 0)
    return -1;
  if (set_history_field(self, value, closure) < 0) return -1;
  reinterpret_cast<TensorObject*>(self)->view_of_grad =
      value != nullptr && is_tensor_base(value) && reinterpret_cast<TensorObject*>(value)->rg;
  return 0;
}

PyObject* get_view_of_grad(PyObject* self, void*) {
  return PyBool_FromLong(reinterpret_cast<TensorObject*>(self)->view_of_grad);
}

// view_of_grad 2: a view recorded from a view made without recording (or from such a view's view):
// PyTorch refuses writing it in place as "a view of a view which was created in no_grad mode".
PyObject* get_unrecorded_chain(PyObject* self, void*) {
  return PyBool_FromLong(reinterpret_cast<TensorObject*>(self)->view_of_grad == 2);
}

int set_unrecorded_chain(PyObject* self, PyObject* value, void*) {
  int truth = value == nullptr ? 0 : PyObject_IsTrue(value);
  if (truth < 0) return -1;
  auto* t = reinterpret_cast<TensorObject*>(self);
  if (truth) {
    t->view_of_grad = 2;
  } else if (t->view_of_grad == 2) {
    t->view_of_grad = 1;
  }
  return 0;
}

PyObject* py_set_view_refresh(PyObject*, PyObject* fn) {
  Py_XSETREF(g_view_refresh, fn == Py_None ? nullptr : Py_NewRef(fn));
  Py_RETURN_NONE;
}

// Tensor.grad's setter: a gradient of the tensor's dtype, device kind and shape is stored at once;
// anything else goes to the Python check (ember._src.tensor.check_grad_assignment, registered by
// _C._set_grad_check), which raises PyTorch's error or accepts it (a sparse gradient, a subclass).
PyObject* g_grad_check = nullptr;

bool grad_fits(TensorObject* t, PyObject* value) {
  if (!PyObject_TypeCheck(value, &TensorBaseType)) return false;
  auto* g = reinterpret_cast<TensorObject*>(value);
  if (g->dtype != t->dtype || g->device_kind != t->device_kind || g->ndim < 0 || g->ndim != t->ndim) return false;
  return t->ndim == 0 || std::memcmp(g->sizes, t->sizes, sizeof(int64_t) * t->ndim) == 0;
}

int set_grad(PyObject* self, PyObject* value, void* closure) {
  if (value != nullptr && value != Py_None && g_grad_check != nullptr &&
      !grad_fits(reinterpret_cast<TensorObject*>(self), value)) {
    PyObject* r = PyObject_CallFunctionObjArgs(g_grad_check, self, value, nullptr);
    if (r == nullptr) return -1;
    Py_DECREF(r);
  }
  return set_plain(self, value, closure);
}

// Tensor.grad's getter: reading the empty .grad of a non-leaf that does not retain its gradient
// warns, as PyTorch does (backward never fills it: the program most likely meant the leaf).
PyObject* get_grad(PyObject* self, void* closure) {
  auto* t = reinterpret_cast<TensorObject*>(self);
  if ((t->grad == nullptr || t->grad == Py_None) && t->grad_fn != nullptr && t->grad_fn != Py_None) {
    int retains = 0;
    if (t->autograd_meta != nullptr && t->autograd_meta != Py_None) {
      PyObject* r = PyObject_GetAttrString(t->autograd_meta, "retains_grad");
      if (r == nullptr) {
        PyErr_Clear();
      } else {
        retains = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (retains < 0) return nullptr;
      }
    }
    if (!retains &&
        PyErr_WarnEx(PyExc_UserWarning,
                     "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. backward() "
                     "does not populate the .grad of a non-leaf Tensor: call .retain_grad() on it first if you "
                     "want its gradient, or access the leaf Tensor instead.",
                     1) < 0)
      return nullptr;
  }
  return get_plain(self, closure);
}

PyObject* py_set_grad_check(PyObject*, PyObject* fn) {
  Py_XSETREF(g_grad_check, fn == Py_None ? nullptr : Py_NewRef(fn));
  Py_RETURN_NONE;
}

PlainField f_grad{"grad", offsetof(TensorObject, grad)};
PlainField f_grad_fn{"grad_fn", offsetof(TensorObject, grad_fn)};
PlainField f_base{"_base", offsetof(TensorObject, base)};
PlainField f_autograd_meta{"_autograd_meta", offsetof(TensorObject, autograd_meta)};
PlainField f_src_device{"_src_device", offsetof(TensorObject, src_device)};

// -- fields with C mirrors ------------------------------------------------------------------------

#define GETTER(fn, field, label)                        \
  PyObject* fn(PyObject* self, void*) {                 \
    PyObject* v = FIELD(field);                         \
    return v ? Py_NewRef(v) : missing(self, label);     \
  }

GETTER(get_storage, storage, "_storage")
GETTER(get_shape, shape, "_shape")
GETTER(get_stride, stride, "_stride")
GETTER(get_offset, offset, "_offset")
GETTER(get_dtype, dtype, "dtype")
GETTER(get_device, device, "_device")
GETTER(get_requires_grad, requires_grad, "_requires_grad")

int deleting(PyObject* self, PyObject** slot, const char* label) {
  if (*slot == nullptr) {
    missing(self, label);
    return -1;
  }
  Py_CLEAR(*slot);
  return 0;
}

int set_storage(PyObject* self, PyObject* value, void*) {
  if (value == nullptr) {
    FIELD(storage_ptr) = nullptr;
    return deleting(self, &FIELD(storage), "_storage");
  }
  FIELD(storage_ptr) = storage_ptr_of(value);
  Py_XSETREF(FIELD(storage), Py_NewRef(value));
  return 0;
}

int set_dims(PyObject* self, PyObject* value, bool for_stride) {
  const char* label = for_stride ? "_stride" : "_shape";
  PyObject** slot = for_stride ? &FIELD(stride) : &FIELD(shape);
  int32_t* nd = for_stride ? &FIELD(stride_ndim) : &FIELD(ndim);
  if (value == nullptr) {
    *nd = -1;
    return deleting(self, slot, label);
  }
  if (!PyTuple_Check(value)) {
    PyErr_Format(PyExc_TypeError, "Tensor.%s must be a tuple, not %.100s", label, Py_TYPE(value)->tp_name);
    return -1;
  }
  if (parse_dims(reinterpret_cast<TensorObject*>(self), value, for_stride, nd) < 0) {
    *nd = -1;
    return -1;
  }
  // Every item an exact int: the tuple can never hold a reference to a container, so the collector has
  // nothing to find in it (it untracks such tuples itself, at the first collection that sees them). Untracked
  // now, the shapes and strides of a step's tensors neither count towards the next young collection nor
  // get traversed by it.
  if (*nd >= 0 && PyTuple_CheckExact(value)) PyObject_GC_UnTrack(value);
  Py_XSETREF(*slot, Py_NewRef(value));
  return 0;
}

int set_shape(PyObject* self, PyObject* value, void*) { return set_dims(self, value, false); }
int set_stride(PyObject* self, PyObject* value, void*) { return set_dims(self, value, true); }

int set_offset(PyObject* self, PyObject* value, void*) {
  if (value == nullptr) {
    FIELD(offset_ok) = 0;
    return deleting(self, &FIELD(offset), "_offset");
  }
  if (!PyIndex_Check(value) && !PyLong_Check(value)) {
    PyErr_Format(PyExc_TypeError, "Tensor._offset must be an int, not %.100s", Py_TYPE(value)->tp_name);
    return -1;
  }
  int overflow = 0;
  long long v = PyLong_CheckExact(value) ? PyLong_AsLongLongAndOverflow(value, &overflow) : 0;
  FIELD(offset_ok) = PyLong_CheckExact(value) && !overflow;
  FIELD(offset_value) = v;
  Py_XSETREF(FIELD(offset), Py_NewRef(value));
  return 0;
}

int set_dtype(PyObject* self, PyObject* value, void*) {
  if (value == nullptr) {
    FIELD(dtype_code) = -1;
    return deleting(self, &FIELD(dtype), "dtype");
  }
  FIELD(dtype_code) = dtype_code_of(value);
  Py_XSETREF(FIELD(dtype), Py_NewRef(value));
  return 0;
}

int set_device(PyObject* self, PyObject* value, void*) {
  if (value == nullptr) {
    FIELD(device_kind) = kDeviceOther;
    return deleting(self, &FIELD(device), "_device");
  }
  FIELD(device_kind) = device_kind_of(value);
  Py_XSETREF(FIELD(device), Py_NewRef(value));
  return 0;
}

int set_requires_grad(PyObject* self, PyObject* value, void*) {
  if (value == nullptr) {
    FIELD(rg) = 0;
    return deleting(self, &FIELD(requires_grad), "_requires_grad");
  }
  int truth = PyObject_IsTrue(value);
  if (truth < 0) return -1;
  FIELD(rg) = static_cast<int8_t>(truth);
  Py_XSETREF(FIELD(requires_grad), Py_NewRef(value));
  return 0;
}

// -- Tensor.shape, Tensor.ndim and Tensor.data_ptr() without a Python frame -------------------------
// (a GPT-2 step on CUDA reads them ~4000 times). Registered by tensor.py: _C._tensor_public_setup.

PyObject* g_size_class = nullptr;  // ember.Size
PyObject* g_sync_hook = nullptr;   // dispatch._SYNC_HOOK: a one-item list, None unless a hook is set
PyObject* g_strided = nullptr;     // ember.strided
PyObject* s_layout = nullptr;      // "_layout"
PyObject* s_data_ptr_slow = nullptr;  // "_data_ptr": the Python method, for every other case

// Whether `self` is strided (its `_layout` is ember.strided: sparse tensors set their own); -1 on error.
int is_strided(PyObject* self) {
  PyObject* layout = PyObject_GetAttr(self, s_layout);
  if (layout == nullptr) return -1;
  const int strided = layout == g_strided;
  Py_DECREF(layout);
  return strided;
}

// Tensor.shape: the sizes as an ember.Size (the stored Size itself when _shape is one: it is immutable).
PyObject* get_public_shape(PyObject* self, void*) {
  PyObject* shape = FIELD(shape);
  if (shape == nullptr) return missing(self, "_shape");
  if (g_size_class == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "Tensor.shape read before ember.Size was registered");
    return nullptr;
  }
  auto* size_type = reinterpret_cast<PyTypeObject*>(g_size_class);
  if (Py_TYPE(shape) == size_type) return Py_NewRef(shape);
  if (!PyTuple_Check(shape)) return PyObject_CallOneArg(g_size_class, shape);
  // Size(shape) as tuple's subtype constructor builds it (Size has no __new__ and no slots), without the call.
  const Py_ssize_t n = PyTuple_GET_SIZE(shape);
  PyObject* out = size_type->tp_alloc(size_type, n);
  if (out == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) PyTuple_SET_ITEM(out, i, Py_NewRef(PyTuple_GET_ITEM(shape, i)));
  return out;
}

PyObject* get_ndim(PyObject* self, void*) {
  PyObject* shape = FIELD(shape);
  if (shape == nullptr) return missing(self, "_shape");
  Py_ssize_t n = PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : PyObject_Size(shape);
  return n < 0 ? nullptr : PyLong_FromSsize_t(n);
}

// Tensor.data_ptr(): a strided tensor over a _C.Storage (CPU; 0 on meta) or a _C.DeviceStorage (whose
// `_ptr` is what CudaStorage.data_ptr() returns), with no sync hook set: the storage's address plus the
// offset in bytes. Anything else calls the Python method (Tensor._data_ptr: errors, hooks, other storages).
PyObject* tensor_data_ptr(PyObject* self, PyObject*) {
  auto* t = reinterpret_cast<TensorObject*>(self);
  if (g_sync_hook != nullptr && PyList_GET_ITEM(g_sync_hook, 0) == Py_None && t->offset_ok && t->dtype_code >= 0 &&
      t->dtype_code < kNumDTypes) {
    const int strided = is_strided(self);
    if (strided < 0) return nullptr;
    if (strided) {
      const long long off = t->offset_value * itemsize(static_cast<DType>(t->dtype_code));
      unsigned long long ptr = 0;
      if (t->storage_ptr != nullptr) {
        if (t->storage_ptr->device == "meta") return PyLong_FromLong(0);
        return PyLong_FromLongLong(static_cast<long long>(t->storage_ptr->data_ptr()) + off);
      }
      if (device_storage_ptr(t->storage, &ptr)) return PyLong_FromLongLong(static_cast<long long>(ptr) + off);
    }
  }
  return PyObject_CallMethodNoArgs(self, s_data_ptr_slow);
}

PyObject* s_is_contiguous_slow = nullptr;  // "_is_contiguous"
PyObject* s_numel_slow = nullptr;          // "_numel"

// Tensor.is_contiguous(memory_format=None): a strided tensor with valid mirrors and no memory format
// (or None) answers from the mirrors; anything else calls the Python method (Tensor._is_contiguous).
PyObject* tensor_is_contiguous(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  auto* t = reinterpret_cast<TensorObject*>(self);
  if (kwnames == nullptr && (nargs == 0 || (nargs == 1 && args[0] == Py_None)) && t->ndim >= 0 &&
      t->stride_ndim == t->ndim && g_strided != nullptr) {
    const int strided = is_strided(self);
    if (strided < 0) return nullptr;
    if (strided) return PyBool_FromLong(contiguous_strides(t));
  }
  PyObject* slow = PyObject_GetAttr(self, s_is_contiguous_slow);
  if (slow == nullptr) return nullptr;
  PyObject* r = PyObject_Vectorcall(slow, args, nargsf, kwnames);
  Py_DECREF(slow);
  return r;
}

// Tensor.numel(): the product of the sizes from the mirrors; symbolic sizes call Tensor._numel.
PyObject* tensor_numel(PyObject* self, PyObject*) {
  auto* t = reinterpret_cast<TensorObject*>(self);
  if (t->ndim < 0) return PyObject_CallMethodNoArgs(self, s_numel_slow);
  long long n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= t->sizes[i];
  return PyLong_FromLongLong(n);
}

PyObject* py_public_setup(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyList_Check(args[1]) || PyList_GET_SIZE(args[1]) != 1) {
    PyErr_SetString(PyExc_TypeError, "_tensor_public_setup(Size, sync_hook_list, strided)");
    return nullptr;
  }
  Py_XSETREF(g_size_class, Py_NewRef(args[0]));
  Py_XSETREF(g_sync_hook, Py_NewRef(args[1]));
  Py_XSETREF(g_strided, Py_NewRef(args[2]));
  if (s_layout == nullptr) s_layout = PyUnicode_InternFromString("_layout");
  if (s_data_ptr_slow == nullptr) s_data_ptr_slow = PyUnicode_InternFromString("_data_ptr");
  if (s_is_contiguous_slow == nullptr) s_is_contiguous_slow = PyUnicode_InternFromString("_is_contiguous");
  if (s_numel_slow == nullptr) s_numel_slow = PyUnicode_InternFromString("_numel");
  Py_RETURN_NONE;
}

// -- the version counter (storage.h) -------------------------------------------------------------

// Whether t is an inference tensor (its storage was allocated under inference_mode); -1 on error.
int is_inference_tensor(TensorObject* t) {
  if (t->storage_ptr != nullptr) return t->storage_ptr->inference;
  if (t->storage == nullptr || t->storage == Py_None) return 0;
  PyObject* v = PyObject_GetAttr(t->storage, s_inference);
  if (v == nullptr) {
    PyErr_Clear();
    return 0;
  }
  int truth = PyObject_IsTrue(v);
  Py_DECREF(v);
  return truth;
}

PyObject* version_value(TensorObject* t) {
  int64_t version = 0;
  if (!tensor_version(t, &version)) version = 0;
  return PyLong_FromLongLong(version);
}

// Tensor._version: PyTorch's (an inference tensor has no counter to read).
PyObject* get_version(PyObject* self, void*) {
  auto* t = reinterpret_cast<TensorObject*>(self);
  if (g_dispatch.inference_used != nullptr && PyList_GET_ITEM(g_dispatch.inference_used, 0) != Py_False) {
    int inf = is_inference_tensor(t);
    if (inf < 0) return nullptr;
    if (inf) {
      PyErr_SetString(PyExc_RuntimeError, "Inference tensors do not track version counter.");
      return nullptr;
    }
  }
  return version_value(t);
}

// Tensor._version_value: the counter's value without the inference check (autograd, compile).
PyObject* get_version_value(PyObject* self, void*) { return version_value(reinterpret_cast<TensorObject*>(self)); }

PyObject* tensor_bump_version(PyObject* self, PyObject*) {
  if (bump_version_fast(reinterpret_cast<TensorObject*>(self)) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyMethodDef tensor_methods[] = {
    {"_bump_version", tensor_bump_version, METH_NOARGS,
     "Bumps the version counter by one (what every in-place write does)."},
    {"data_ptr", tensor_data_ptr, METH_NOARGS, "The address of the tensor's first element."},
    {"is_contiguous", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(tensor_is_contiguous)),
     METH_FASTCALL | METH_KEYWORDS, "Whether the tensor is contiguous in memory in the given memory format."},
    {"numel", tensor_numel, METH_NOARGS, "The number of elements."},
    {"nelement", tensor_numel, METH_NOARGS, "The number of elements (numel)."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef tensor_getset[] = {
    {"_storage", get_storage, set_storage, "The storage this tensor views.", nullptr},
    {"_shape", get_shape, set_shape, "Sizes (a tuple of ints).", nullptr},
    {"_stride", get_stride, set_stride, "Strides in elements (a tuple of ints).", nullptr},
    {"_offset", get_offset, set_offset, "Storage offset in elements.", nullptr},
    {"dtype", get_dtype, set_dtype, "The element type.", nullptr},
    {"_device", get_device, set_device, "The device.", nullptr},
    {"_requires_grad", get_requires_grad, set_requires_grad, "Whether autograd records ops on it.", nullptr},
    {"grad", get_grad, set_grad, "The accumulated gradient.", &f_grad},
    {"_grad", get_plain, set_grad, "The accumulated gradient, read without the non-leaf warning.", &f_grad},
    {"grad_fn", get_grad_fn, set_history_field, "The node that produced this tensor.", &f_grad_fn},
    {"_base", get_plain, set_base, "The tensor this one is a view of.", &f_base},
    {"_view_of_grad", get_view_of_grad, nullptr, "Whether _base required grad when this view was made.", nullptr},
    {"_unrecorded_chain", get_unrecorded_chain, set_unrecorded_chain,
     "Whether this view was recorded from a view made without recording.", nullptr},
    {"_autograd_meta", get_plain, set_plain, "Autograd's per-tensor record.", &f_autograd_meta},
    {"_src_device", get_plain, set_plain, "The device the tensor an autograd stand-in stands for lives on.",
     &f_src_device},
    {"shape", get_public_shape, nullptr, "The tensor's sizes (an ember.Size).", nullptr},
    {"_version", get_version, nullptr, "The version counter's value (bumped by every in-place write).", nullptr},
    {"_version_value", get_version_value, nullptr, "The version counter's value, inference tensors included.",
     nullptr},
    {"ndim", get_ndim, nullptr, "The number of dimensions.", nullptr},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

#undef FIELD

int tensor_traverse(PyObject* o, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<TensorObject*>(o);
  Py_VISIT(self->storage);
  Py_VISIT(self->shape);
  Py_VISIT(self->stride);
  Py_VISIT(self->offset);
  Py_VISIT(self->dtype);
  Py_VISIT(self->device);
  Py_VISIT(self->requires_grad);
  Py_VISIT(self->grad);
  Py_VISIT(self->grad_fn);
  Py_VISIT(self->base);
  Py_VISIT(self->autograd_meta);
  Py_VISIT(self->dict);
  Py_VISIT(self->src_device);
  return 0;
}

int tensor_clear(PyObject* o) {
  auto* self = reinterpret_cast<TensorObject*>(o);
  self->storage_ptr = nullptr;
  self->ndim = self->stride_ndim = -1;
  self->offset_ok = 0;
  self->dtype_code = -1;
  self->device_kind = kDeviceOther;
  Py_CLEAR(self->storage);
  Py_CLEAR(self->shape);
  Py_CLEAR(self->stride);
  Py_CLEAR(self->offset);
  Py_CLEAR(self->dtype);
  Py_CLEAR(self->device);
  Py_CLEAR(self->requires_grad);
  Py_CLEAR(self->grad);
  Py_CLEAR(self->grad_fn);
  Py_CLEAR(self->base);
  Py_CLEAR(self->autograd_meta);
  Py_CLEAR(self->dict);
  Py_CLEAR(self->src_device);
  return 0;
}

void tensor_dealloc(PyObject* o) {
  auto* self = reinterpret_cast<TensorObject*>(o);
  PyObject_GC_UnTrack(o);
  if (self->weakreflist != nullptr) PyObject_ClearWeakRefs(o);
  tensor_clear(o);
  if (self->sizes != nullptr && self->sizes != self->inline_dims) PyMem_Free(self->sizes);
  if (self->strides != nullptr && self->strides != self->inline_dims + kInlineDims) PyMem_Free(self->strides);
  version_counter_unref(self->vc);
  self->vc = nullptr;
  Py_TYPE(o)->tp_free(o);
}

PyObject* dims_tuple(const int64_t* v, int32_t n) {
  PyObject* t = PyTuple_New(n);
  if (t == nullptr) return nullptr;
  for (int32_t i = 0; i < n; ++i) {
    PyObject* item = PyLong_FromLongLong(v[i]);
    if (item == nullptr) {
      Py_DECREF(t);
      return nullptr;
    }
    PyTuple_SET_ITEM(t, i, item);
  }
  PyObject_GC_UnTrack(t);  // ints only (set_dims)
  return t;
}

// _C.make_tensor(storage, shape, stride, offset, dtype, device): an ember.Tensor viewing storage.
PyObject* py_make_tensor(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 6) {
    PyErr_SetString(PyExc_TypeError, "make_tensor(storage, shape, stride, offset, dtype, device)");
    return nullptr;
  }
  if (g_tensor_class == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "ember._C: the Tensor class is not registered");
    return nullptr;
  }
  auto* tp = reinterpret_cast<PyTypeObject*>(g_tensor_class);
  PyObject* t = tp->tp_alloc(tp, 0);
  if (t == nullptr) return nullptr;
  auto* self = reinterpret_cast<TensorObject*>(t);
  self->ndim = self->stride_ndim = -1;
  if (set_storage(t, args[0], nullptr) < 0 || set_shape(t, args[1], nullptr) < 0 ||
      set_stride(t, args[2], nullptr) < 0 || set_offset(t, args[3], nullptr) < 0 ||
      set_dtype(t, args[4], nullptr) < 0 || set_device(t, args[5], nullptr) < 0) {
    Py_DECREF(t);
    return nullptr;
  }
  self->requires_grad = Py_NewRef(Py_False);
  self->grad = Py_NewRef(Py_None);
  self->grad_fn = Py_NewRef(Py_None);
  self->base = Py_NewRef(Py_None);
  self->autograd_meta = Py_NewRef(Py_None);
  return t;
}

// _C.new_empty(shape, dtype, zero, inference): a fresh contiguous CPU tensor; None when the
// byte size overflows or the shape is unusual (the Python caller then raises PyTorch's error).
PyObject* py_new_empty(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !PyTuple_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "new_empty(shape: tuple, dtype, zero, inference)");
    return nullptr;
  }
  int code = dtype_code_of(args[1]);
  Py_ssize_t n = PyTuple_GET_SIZE(args[0]);
  if (code < 0 || n > 64) Py_RETURN_NONE;
  int64_t sizes[64];
  int64_t numel = 1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(args[0], i);
    int overflow = 0;
    long long v = PyLong_CheckExact(item) ? PyLong_AsLongLongAndOverflow(item, &overflow) : -1;
    if (v < 0 || overflow) Py_RETURN_NONE;
    sizes[i] = v;
    if (v != 0 && numel > INT64_MAX / v) Py_RETURN_NONE;
    numel *= v;
  }
  if (numel > INT64_MAX / itemsize(static_cast<DType>(code))) Py_RETURN_NONE;
  int zero = PyObject_IsTrue(args[2]);
  int inference = PyObject_IsTrue(args[3]);
  if (zero < 0 || inference < 0) return nullptr;
  StoragePtr sp;
  try {
    sp = Storage::allocate(numel * itemsize(static_cast<DType>(code)), zero != 0);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  sp->inference = inference != 0;
  Storage* raw = sp.get();
  PyObject* so;
  try {
    so = py::cast(std::move(sp)).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  }
  int64_t strides[64];
  int64_t acc = 1;
  for (Py_ssize_t i = n - 1; i >= 0; --i) {
    strides[i] = acc;
    acc *= sizes[i] > 1 ? sizes[i] : 1;
  }
  PyObject* t = new_tensor(so, raw, sizes, strides, static_cast<int32_t>(n), 0, code, g_cpu);
  Py_DECREF(so);
  return t;
}

PyObject* py_setup(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  // (Tensor class, dtypes by code, cpu, meta, _MODES_ENTERED, _SUBCLASS_DISPATCH, _AUTOCAST_ON,
  //  _LAYOUT_DISPATCH, grad_mode.INFERENCE_USED, grad_mode.STATE)
  if (nargs != 10 || !PyType_Check(args[0]) || !PyList_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "_tensor_setup: bad arguments");
    return nullptr;
  }
  for (int i = 4; i < 9; ++i)
    if (!PyList_Check(args[i]) || PyList_GET_SIZE(args[i]) < 1) {
      PyErr_SetString(PyExc_TypeError, "_tensor_setup: dispatch switches must be one-item lists");
      return nullptr;
    }
  Py_XSETREF(g_tensor_class, Py_NewRef(args[0]));
  for (int i = 0; i < kNumDTypes && i < PyList_GET_SIZE(args[1]); ++i)
    Py_XSETREF(g_dtypes[i], Py_NewRef(PyList_GET_ITEM(args[1], i)));
  Py_XSETREF(g_cpu, Py_NewRef(args[2]));
  Py_XSETREF(g_meta, Py_NewRef(args[3]));
  Py_XSETREF(g_dispatch.modes_entered, Py_NewRef(args[4]));
  Py_XSETREF(g_dispatch.subclass_dispatch, Py_NewRef(args[5]));
  Py_XSETREF(g_dispatch.autocast_on, Py_NewRef(args[6]));
  Py_XSETREF(g_dispatch.layout_dispatch, Py_NewRef(args[7]));
  Py_XSETREF(g_dispatch.inference_used, Py_NewRef(args[8]));
  Py_XSETREF(g_dispatch.grad_state, Py_NewRef(args[9]));
  Py_RETURN_NONE;
}

// _contiguous(t): whether a strided tensor's sizes and strides are C-contiguous, from the C
// mirrors (Tensor.is_contiguous()'s common case without a Python loop); None when t is not a
// TensorBase or its mirrors are invalid (symbolic sizes), for the caller's Python check.
PyObject* py_contiguous(PyObject*, PyObject* arg) {
  if (!is_tensor_base(arg)) Py_RETURN_NONE;
  const auto* t = reinterpret_cast<const TensorObject*>(arg);
  if (t->ndim < 0 || t->stride_ndim != t->ndim) Py_RETURN_NONE;
  return PyBool_FromLong(contiguous_strides(t));
}

// _cpu_item(t): Tensor.item() of a one-element real (not complex) CPU tensor read straight from its storage,
// as NumPy's item() gives it (bool, int, or float; float16/bfloat16 widened exactly); None for anything else
// (the caller takes the general path).
PyObject* py_cpu_item(PyObject*, PyObject* o) {
  if (!is_tensor_base(o)) Py_RETURN_NONE;
  auto* t = reinterpret_cast<TensorObject*>(o);
  if (t->device_kind != kDeviceCPU || t->storage_ptr == nullptr || t->ndim < 0 || !t->offset_ok ||
      t->dtype_code < 0 || t->dtype_code > 9 || t->storage_ptr->data == nullptr || t->storage_ptr->device != "cpu")
    Py_RETURN_NONE;
  for (int32_t i = 0; i < t->ndim; ++i)
    if (t->sizes[i] != 1) Py_RETURN_NONE;
  auto code = static_cast<DType>(t->dtype_code);
  int64_t size = itemsize(code);
  if (t->offset_value < 0 || (t->offset_value + 1) * size > t->storage_ptr->nbytes) Py_RETURN_NONE;
  const char* p = t->storage_ptr->data + t->offset_value * size;
  switch (code) {
    case DType::Bool: return PyBool_FromLong(*reinterpret_cast<const uint8_t*>(p) != 0);
    case DType::UInt8: return PyLong_FromLong(*reinterpret_cast<const uint8_t*>(p));
    case DType::Int8: return PyLong_FromLong(*reinterpret_cast<const int8_t*>(p));
    case DType::Int16: { int16_t v; std::memcpy(&v, p, 2); return PyLong_FromLong(v); }
    case DType::Int32: { int32_t v; std::memcpy(&v, p, 4); return PyLong_FromLong(v); }
    case DType::Int64: { long long v; std::memcpy(&v, p, 8); return PyLong_FromLongLong(v); }
    case DType::Float16: { uint16_t v; std::memcpy(&v, p, 2); return PyFloat_FromDouble(half_to_float(v)); }
    case DType::BFloat16: { uint16_t v; std::memcpy(&v, p, 2); return PyFloat_FromDouble(bf16_to_float(v)); }
    case DType::Float32: { float v; std::memcpy(&v, p, 4); return PyFloat_FromDouble(v); }
    case DType::Float64: { double v; std::memcpy(&v, p, 8); return PyFloat_FromDouble(v); }
    default: Py_RETURN_NONE;
  }
}

bool two_tensors(PyObject* const* args, Py_ssize_t nargs, const char* name) {
  if (nargs != 2 || !is_tensor_base(args[0]) || !is_tensor_base(args[1])) {
    PyErr_Format(PyExc_TypeError, "%s(dst, src) takes two tensors", name);
    return false;
  }
  return true;
}

// _share_version_counter(dst, src): dst shares src's counter (an alias, a detached tensor).
PyObject* py_share_version_counter(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!two_tensors(args, nargs, "_share_version_counter")) return nullptr;
  if (share_version_counter(reinterpret_cast<TensorObject*>(args[0]), reinterpret_cast<TensorObject*>(args[1])) < 0)
    return nullptr;
  Py_RETURN_NONE;
}

// _swap_tensor_impl(a, b): a and b exchange everything they are (storage, sizes, strides, dtype,
// device, autograd fields, version counter, __dict__) but their identity, type and weak references
// (torch.utils.swap_tensors swaps the classes and checks the rest in Python first).
PyObject* py_swap_tensor_impl(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!two_tensors(args, nargs, "_swap_tensor_impl")) return nullptr;
  auto* a = reinterpret_cast<TensorObject*>(args[0]);
  auto* b = reinterpret_cast<TensorObject*>(args[1]);
  if (a == b) Py_RETURN_NONE;
  const bool a_sizes_inline = a->sizes == a->inline_dims, b_sizes_inline = b->sizes == b->inline_dims;
  const bool a_strides_inline = a->strides == a->inline_dims + kInlineDims;
  const bool b_strides_inline = b->strides == b->inline_dims + kInlineDims;
  PyObject* a_weak = a->weakreflist;
  PyObject* b_weak = b->weakreflist;
  constexpr size_t start = offsetof(TensorObject, storage);
  constexpr size_t size = sizeof(TensorObject) - start;
  unsigned char tmp[size];
  std::memcpy(tmp, reinterpret_cast<unsigned char*>(a) + start, size);
  std::memcpy(reinterpret_cast<unsigned char*>(a) + start, reinterpret_cast<unsigned char*>(b) + start, size);
  std::memcpy(reinterpret_cast<unsigned char*>(b) + start, tmp, size);
  a->weakreflist = a_weak;
  b->weakreflist = b_weak;
  // sizes/strides kept inline point into their own object's buffer, which moved with them
  if (b_sizes_inline) a->sizes = a->inline_dims;
  if (a_sizes_inline) b->sizes = b->inline_dims;
  if (b_strides_inline) a->strides = a->inline_dims + kInlineDims;
  if (a_strides_inline) b->strides = b->inline_dims + kInlineDims;
  Py_RETURN_NONE;
}

// _new_version_counter(t): t gets a fresh counter at 0 (Tensor.data: same memory, a counter of its own).
PyObject* py_new_version_counter(PyObject*, PyObject* arg) {
  if (!is_tensor_base(arg)) {
    PyErr_SetString(PyExc_TypeError, "_new_version_counter(t) takes a tensor");
    return nullptr;
  }
  auto* t = reinterpret_cast<TensorObject*>(arg);
  version_counter_unref(t->vc);
  t->vc = version_counter_new(0);
  Py_RETURN_NONE;
}

// _keep_version_counter(t): before t is moved to another storage (set_, `.data =`): t keeps the counter
// it reads now (the one its views and detached copies share) instead of reading the new storage's.
PyObject* py_keep_version_counter(PyObject*, PyObject* arg) {
  if (!is_tensor_base(arg)) {
    PyErr_SetString(PyExc_TypeError, "_keep_version_counter(t) takes a tensor");
    return nullptr;
  }
  auto* t = reinterpret_cast<TensorObject*>(arg);
  if (t->vc == nullptr) {
    VersionCounter* c = materialize_counter(t);
    if (c == nullptr) return nullptr;
    if (t->vc == nullptr) t->vc = version_counter_ref(c);
  }
  Py_RETURN_NONE;
}

// _same_version_counter(a, b): whether a and b share one counter (tests, debugging).
PyObject* py_same_version_counter(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!two_tensors(args, nargs, "_same_version_counter")) return nullptr;
  auto* a = reinterpret_cast<TensorObject*>(args[0]);
  auto* b = reinterpret_cast<TensorObject*>(args[1]);
  if (a->vc != nullptr || b->vc != nullptr) {
    VersionCounter* ca = a->vc != nullptr ? a->vc : a->storage_ptr != nullptr ? a->storage_ptr->counter() : nullptr;
    VersionCounter* cb = b->vc != nullptr ? b->vc : b->storage_ptr != nullptr ? b->storage_ptr->counter() : nullptr;
    return PyBool_FromLong(ca != nullptr && ca == cb);
  }
  return PyBool_FromLong(a->storage == b->storage);
}

// -- the optimizers' per-step bookkeeping over a parameter list in one call ---------------------------
// (ember.optim's Adam/AdamW step over GPT-2's 148 parameters: four address lists, 148 step counters and
// 444 version bumps a step, each a Python frame or a dispatched op when done per tensor).

// _dense_ptrs(tensors, dtype, device, shapes): the addresses of a list/tuple of strided, C-contiguous
// tensors whose `dtype` and `_device` are the given objects (and whose `_shape` equals shapes[i] unless
// shapes is None), as a tuple of ints; None when any tensor is not such a one (or a sync hook is set), for
// the caller's general path. Nothing is written.
PyObject* py_dense_ptrs(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !(PyList_Check(args[0]) || PyTuple_Check(args[0])) ||
      !(args[3] == Py_None || PyTuple_Check(args[3]))) {
    PyErr_SetString(PyExc_TypeError, "_dense_ptrs(tensors: list | tuple, dtype, device, shapes: tuple | None)");
    return nullptr;
  }
  if (g_sync_hook == nullptr || PyList_GET_ITEM(g_sync_hook, 0) != Py_None) Py_RETURN_NONE;
  PyObject* seq = PySequence_Fast(args[0], "_dense_ptrs: tensors");
  if (seq == nullptr) return nullptr;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject* shapes = args[3];
  if (shapes != Py_None && PyTuple_GET_SIZE(shapes) != n) {
    Py_DECREF(seq);
    Py_RETURN_NONE;
  }
  PyObject* out = PyTuple_New(n);
  if (out == nullptr) {
    Py_DECREF(seq);
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* o = PySequence_Fast_GET_ITEM(seq, i);
    if (!is_tensor_base(o)) goto general;
    {
      auto* t = reinterpret_cast<TensorObject*>(o);
      if (t->dtype != args[1] || t->device != args[2] || !t->offset_ok || t->dtype_code < 0 ||
          t->dtype_code >= kNumDTypes || t->ndim < 0 || t->stride_ndim != t->ndim || !contiguous_strides(t))
        goto general;
      if (shapes != Py_None) {
        PyObject* want = PyTuple_GET_ITEM(shapes, i);
        if (t->shape != want) {
          const int eq = t->shape == nullptr ? 0 : PyObject_RichCompareBool(t->shape, want, Py_EQ);
          if (eq < 0) goto error;
          if (!eq) goto general;
        }
      }
      const int strided = is_strided(o);
      if (strided < 0) goto error;
      if (!strided) goto general;
      const long long off = t->offset_value * itemsize(static_cast<DType>(t->dtype_code));
      unsigned long long ptr = 0;
      long long address;
      if (t->storage_ptr != nullptr) {
        if (t->storage_ptr->device == "meta") goto general;
        address = static_cast<long long>(t->storage_ptr->data_ptr()) + off;
      } else if (device_storage_ptr(t->storage, &ptr)) {
        address = static_cast<long long>(ptr) + off;
      } else {
        goto general;
      }
      PyObject* value = PyLong_FromLongLong(address);
      if (value == nullptr) goto error;
      PyTuple_SET_ITEM(out, i, value);
    }
  }
  Py_DECREF(seq);
  return out;
general:
  Py_DECREF(seq);
  Py_DECREF(out);
  Py_RETURN_NONE;
error:
  Py_DECREF(seq);
  Py_DECREF(out);
  return nullptr;
}

// _cpu_scalars(tensors, increment): the values of a list/tuple of one-element float32/float64 CPU tensors
// (each a base, not a view, over a _C.Storage, not an inference tensor) as a list of floats; with
// increment true, each is first increased by one in its own dtype's arithmetic and its version counter
// bumped (what `t.add_(1)` does to an optimizer's step counter). None, with nothing written, when any
// tensor is not such a one, for the caller's per-tensor path.
PyObject* py_cpu_scalars(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !(PyList_Check(args[0]) || PyTuple_Check(args[0]))) {
    PyErr_SetString(PyExc_TypeError, "_cpu_scalars(tensors: list | tuple, increment: bool)");
    return nullptr;
  }
  const int increment = PyObject_IsTrue(args[1]);
  if (increment < 0) return nullptr;
  PyObject* seq = args[0];
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  for (Py_ssize_t i = 0; i < n; ++i) {  // every tensor checked before any is written
    PyObject* o = items[i];
    if (!is_tensor_base(o)) Py_RETURN_NONE;
    auto* t = reinterpret_cast<TensorObject*>(o);
    Storage* s = t->storage_ptr;
    if (t->device_kind != kDeviceCPU || s == nullptr || s->data == nullptr || s->device != "cpu" || s->inference ||
        t->ndim < 0 || !t->offset_ok || t->offset_value < 0 ||
        (t->dtype_code != static_cast<int>(DType::Float32) && t->dtype_code != static_cast<int>(DType::Float64)) ||
        (t->base != nullptr && t->base != Py_None))
      Py_RETURN_NONE;
    for (int32_t d = 0; d < t->ndim; ++d)
      if (t->sizes[d] != 1) Py_RETURN_NONE;
    if ((t->offset_value + 1) * itemsize(static_cast<DType>(t->dtype_code)) > s->nbytes) Py_RETURN_NONE;
  }
  PyObject* out = PyList_New(n);
  if (out == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    auto* t = reinterpret_cast<TensorObject*>(items[i]);
    Storage* s = t->storage_ptr;
    double value;
    if (t->dtype_code == static_cast<int>(DType::Float32)) {
      char* p = s->data + t->offset_value * 4;
      float v;
      std::memcpy(&v, p, 4);
      if (increment) {
        v = v + 1.0f;
        std::memcpy(p, &v, 4);
      }
      value = v;
    } else {
      char* p = s->data + t->offset_value * 8;
      double v;
      std::memcpy(&v, p, 8);
      if (increment) {
        v = v + 1.0;
        std::memcpy(p, &v, 8);
      }
      value = v;
    }
    if (increment && bump_version_fast(t) < 0) {
      Py_DECREF(out);
      return nullptr;
    }
    PyObject* f = PyFloat_FromDouble(value);
    if (f == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, i, f);
  }
  return out;
}

// _bump_versions(*lists): bumps the version counter of every tensor of every list/tuple (t._bump_version()),
// as in-place ops do.
PyObject* py_bump_versions(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  for (Py_ssize_t a = 0; a < nargs; ++a) {
    PyObject* seq = PySequence_Fast(args[a], "_bump_versions: expected lists of tensors");
    if (seq == nullptr) return nullptr;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* o = PySequence_Fast_GET_ITEM(seq, i);
      if (is_tensor_base(o)) {  // its own counter, else its storage's default one (a device storage's attribute)
        if (bump_version(reinterpret_cast<TensorObject*>(o)) < 0) {
          Py_DECREF(seq);
          return nullptr;
        }
        continue;
      }
      PyObject* bumped = PyObject_CallMethod(o, "_bump_version", nullptr);
      if (bumped == nullptr) {
        Py_DECREF(seq);
        return nullptr;
      }
      Py_DECREF(bumped);
    }
    Py_DECREF(seq);
  }
  Py_RETURN_NONE;
}

PyMethodDef tensor_functions[] = {
    {"_dense_ptrs", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_dense_ptrs)), METH_FASTCALL,
     "_dense_ptrs(tensors, dtype, device, shapes): addresses of contiguous strided tensors of that dtype and "
     "device (and shapes), or None."},
    {"_cpu_scalars", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_cpu_scalars)), METH_FASTCALL,
     "_cpu_scalars(tensors, increment): values of one-element float CPU tensors (each first += 1 when "
     "increment), or None."},
    {"_bump_versions", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_bump_versions)), METH_FASTCALL,
     "_bump_versions(*lists): bumps the version counter of every tensor of every list."},
    {"_share_version_counter",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_share_version_counter)), METH_FASTCALL,
     "_share_version_counter(dst, src): dst shares src's version counter."},
    {"_swap_tensor_impl",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_swap_tensor_impl)), METH_FASTCALL,
     "_swap_tensor_impl(a, b): a and b exchange their contents (torch.utils.swap_tensors)."},
    {"_new_version_counter", py_new_version_counter, METH_O,
     "_new_version_counter(t): t gets a version counter of its own, at 0."},
    {"_keep_version_counter", py_keep_version_counter, METH_O,
     "_keep_version_counter(t): t keeps the version counter it reads now when it moves to another storage."},
    {"_same_version_counter",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_same_version_counter)), METH_FASTCALL,
     "_same_version_counter(a, b): whether a and b share one version counter."},
    {"_contiguous", py_contiguous, METH_O,
     "_contiguous(t): whether t's sizes and strides are C-contiguous; None where the C mirrors cannot tell."},
    {"make_tensor", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_make_tensor)), METH_FASTCALL,
     "make_tensor(storage, shape, stride, offset, dtype, device): an ember.Tensor over storage (no checks)."},
    {"new_empty", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_new_empty)), METH_FASTCALL,
     "new_empty(shape, dtype, zero, inference): a fresh contiguous CPU tensor, or None for the caller to handle."},
    {"_cpu_item", py_cpu_item, METH_O,
     "_cpu_item(t): item() of a one-element real CPU tensor read from its storage, or None (general path)."},
    {"_tensor_setup", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_setup)), METH_FASTCALL,
     "Registers ember.Tensor, the dtypes, devices and dispatcher switches with the native code."},
    {"_tensor_public_setup", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_public_setup)),
     METH_FASTCALL, "Registers ember.Size, dispatch._SYNC_HOOK and ember.strided (Tensor.shape/data_ptr in C)."},
    {"_set_view_refresh", py_set_view_refresh, METH_O,
     "_set_view_refresh(fn): fn(view) rebuilds a view's history after a write to its storage (None: off)."},
    {"_set_grad_check", py_set_grad_check, METH_O,
     "_set_grad_check(fn): fn(tensor, grad) checks a .grad assignment that does not match at once (None: off)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyTypeObject TensorBaseType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject* tensor_class() { return g_tensor_class; }
PyObject* dtype_object(int code) { return code >= 0 && code < kNumDTypes ? g_dtypes[code] : nullptr; }
PyObject* cpu_device() { return g_cpu; }
PyObject* meta_device() { return g_meta; }

PyObject* new_tensor(PyObject* storage_obj, Storage* storage, const int64_t* sizes, const int64_t* strides,
                     int32_t ndim, int64_t offset, int dtype_code, PyObject* device) {
  auto* tp = reinterpret_cast<PyTypeObject*>(g_tensor_class);
  PyObject* t = tp->tp_alloc(tp, 0);
  if (t == nullptr) return nullptr;
  auto* self = reinterpret_cast<TensorObject*>(t);
  self->ndim = self->stride_ndim = -1;
  self->shape = dims_tuple(sizes, ndim);
  self->stride = dims_tuple(strides, ndim);
  self->offset = PyLong_FromLongLong(offset);
  int64_t* sb = self->shape ? dims_buffer(self, false, ndim) : nullptr;
  int64_t* tb = sb ? dims_buffer(self, true, ndim) : nullptr;
  if (self->stride == nullptr || self->offset == nullptr || tb == nullptr) {
    Py_DECREF(t);
    return nullptr;
  }
  std::memcpy(sb, sizes, sizeof(int64_t) * ndim);
  std::memcpy(tb, strides, sizeof(int64_t) * ndim);
  self->ndim = self->stride_ndim = ndim;
  self->offset_value = offset;
  self->offset_ok = 1;
  self->storage = Py_NewRef(storage_obj);
  self->storage_ptr = storage;
  self->dtype = Py_NewRef(g_dtypes[dtype_code]);
  self->dtype_code = static_cast<int8_t>(dtype_code);
  self->device = Py_NewRef(device);
  self->device_kind = device_kind_of(device);
  self->requires_grad = Py_NewRef(Py_False);
  self->grad = Py_NewRef(Py_None);
  self->grad_fn = Py_NewRef(Py_None);
  self->base = Py_NewRef(Py_None);
  self->autograd_meta = Py_NewRef(Py_None);
  return t;
}

PyObject* new_empty_cpu(const int64_t* sizes, int32_t ndim, int dtype_code, bool inference) {
  int64_t numel = 1;
  for (int32_t i = 0; i < ndim; ++i) numel *= sizes[i];  // callers pass checked shapes
  StoragePtr sp;
  try {
    sp = Storage::allocate(numel * itemsize(static_cast<DType>(dtype_code)), false);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  sp->inference = inference;
  Storage* raw = sp.get();
  PyObject* so;
  try {
    so = py::cast(std::move(sp)).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  }
  int64_t strides_small[kInlineDims];
  int64_t* strides = ndim <= kInlineDims ? strides_small : new int64_t[ndim];
  int64_t acc = 1;
  for (int32_t i = ndim - 1; i >= 0; --i) {
    strides[i] = acc;
    acc *= sizes[i] > 1 ? sizes[i] : 1;
  }
  PyObject* t = new_tensor(so, raw, sizes, strides, ndim, 0, dtype_code, g_cpu);
  if (strides != strides_small) delete[] strides;
  Py_DECREF(so);
  return t;
}

int inference_now() {
  if (g_dispatch.inference_used == nullptr) return 0;
  if (PyList_GET_ITEM(g_dispatch.inference_used, 0) == Py_False) return 0;
  PyObject* v = PyObject_GetAttr(g_dispatch.grad_state, s_inference);
  if (v == nullptr) return -1;
  int truth = PyObject_IsTrue(v);
  Py_DECREF(v);
  return truth;
}

// hash(tensor) == id(tensor), as PyTorch's Tensor.__hash__, without a Python frame (an optimizer's
// `self.state[p]` hashes every parameter each step). An address is never -1 (CPython's error value).
Py_hash_t tensor_hash(PyObject* self) { return static_cast<Py_hash_t>(reinterpret_cast<uintptr_t>(self)); }

void bind_tensor_impl(PyObject* module) {
  TensorBaseType.tp_name = "ember._C.TensorBase";
  TensorBaseType.tp_basicsize = sizeof(TensorObject);
  TensorBaseType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  TensorBaseType.tp_doc = "The C-level base of ember.Tensor: a tensor's metadata in a C struct.";
  TensorBaseType.tp_traverse = tensor_traverse;
  TensorBaseType.tp_clear = tensor_clear;
  TensorBaseType.tp_dealloc = tensor_dealloc;
  TensorBaseType.tp_hash = tensor_hash;
  TensorBaseType.tp_getset = tensor_getset;
  TensorBaseType.tp_methods = tensor_methods;
  TensorBaseType.tp_dictoffset = offsetof(TensorObject, dict);
  TensorBaseType.tp_weaklistoffset = offsetof(TensorObject, weakreflist);
  // object's own tp_new: `object.__new__(Tensor)` (tensor shells built by tracers) stays legal.
  TensorBaseType.tp_new = PyBaseObject_Type.tp_new;
  if (PyType_Ready(&TensorBaseType) < 0) throw py::error_already_set();
  Py_INCREF(&TensorBaseType);
  if (PyModule_AddObject(module, "TensorBase", reinterpret_cast<PyObject*>(&TensorBaseType)) < 0)
    throw py::error_already_set();
  if (PyModule_AddFunctions(module, tensor_functions) < 0) throw py::error_already_set();
  s_code = PyUnicode_InternFromString("_code");
  s_inference = PyUnicode_InternFromString("inference");
  s_version_attr = PyUnicode_InternFromString("version");
  g_dispatch.zero = PyLong_FromLong(0);
  g_storage_type = reinterpret_cast<PyTypeObject*>(py::type::of<Storage>().ptr());
}

}  // namespace ember
