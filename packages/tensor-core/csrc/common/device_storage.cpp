// The per-op allocation path of plugin devices (ember-cuda) in C++: `_C.DeviceStorage`, the base of
// ember-cuda's `CudaStorage` (a block of the caching allocator that tensors view), and
// `_C.DeviceAllocatorBase`, the base of its `DeviceAllocator` (the pools and statistics of one device).
//
// The allocator stays ember-cuda's Python class: its pools are the same dict of lists of `Block`s
// keyed `(stream, size)`, its counters are this base's fields (Python reads and writes them as
// before), and every uncommon case is its Python `malloc`/`release`. What runs here is the common
// case of each, with the Python code's exact effect:
//   - `_device_storage_new(cls, alloc, nbytes, device, stream, inference)`: a storage of `cls` holding
//     a block taken from the pool list (stream, rounded size), or from `alloc._new_block` (the driver)
//     when that list is empty; `alloc.malloc` whenever a CUDA-graph capture is on or blocks wait for
//     other streams (`pending`);
//   - a storage's deallocation: its block back to its list, counters updated; `alloc.release` for a
//     graph pool's block, a block used on other streams (`record_stream`), or caching turned off.
// Sizes round as `_allocator.round_size` does (512-byte multiples up to 1 MiB, then `divisions`
// steps between powers of two). Nothing here knows CUDA: a block's address is a number.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <cstdint>
#include <stdexcept>

#include "dtype.h"
#include "tensor_impl.h"

namespace ember {

namespace {

struct AllocObject {
  PyObject_HEAD
  long long allocated, allocated_peak, requested, requested_peak, active_blocks, allocations, frees;
  long long divisions;  // roundup_power2_divisions
  char caching;         // the config's caching flag
  PyObject* free;       // dict (stream, size) -> [Block]
  PyObject* pending;    // list of (Block, events)
  PyObject* capturing;  // dict stream -> graph pool
  PyObject* dict;
  PyObject* weakreflist;
};

struct StorageObject {
  PyObject_HEAD
  unsigned long long ptr;
  Py_ssize_t nbytes;
  PyObject* block;   // the allocator's Block, or None / null
  PyObject* device;
  PyObject* alloc;   // the DeviceAllocator the block goes back to
  long long version;
  char inference;
  PyObject* weakreflist;
};

PyTypeObject AllocType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject StorageType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject *s_size, *s_stream, *s_pool, *s_streams, *s_ptr, *s_malloc, *s_release, *s_new_block;

bool init_names() {
  if (s_size != nullptr) return true;
  s_size = PyUnicode_InternFromString("size");
  s_stream = PyUnicode_InternFromString("stream");
  s_pool = PyUnicode_InternFromString("pool");
  s_streams = PyUnicode_InternFromString("streams");
  s_ptr = PyUnicode_InternFromString("ptr");
  s_malloc = PyUnicode_InternFromString("malloc");
  s_release = PyUnicode_InternFromString("release");
  s_new_block = PyUnicode_InternFromString("_new_block");
  return s_size && s_stream && s_pool && s_streams && s_ptr && s_malloc && s_release && s_new_block;
}

constexpr long long kSmall = 1 << 20;

long long round_size(long long nbytes, long long divisions) {
  if (nbytes <= kSmall) return nbytes < 512 ? 512 : (nbytes + 511) & ~511LL;
  int bits = 64 - __builtin_clzll(static_cast<unsigned long long>(nbytes - 1));
  long long top = 1LL << bits;
  long long step = (top >> 1) / (divisions > 0 ? divisions : 1);
  if (step < 512) step = 512;
  return (nbytes + step - 1) / step * step;
}

bool nonempty(PyObject* o) {
  if (o == nullptr || o == Py_None) return false;
  if (PyDict_CheckExact(o)) return PyDict_GET_SIZE(o) != 0;
  if (PyList_CheckExact(o)) return PyList_GET_SIZE(o) != 0;
  int t = PyObject_IsTrue(o);
  if (t < 0) {
    PyErr_Clear();
    return true;  // unknown: the Python path decides
  }
  return t != 0;
}

void count_malloc(AllocObject* a, long long size, long long nbytes) {
  a->allocated += size;
  a->requested += nbytes;
  a->active_blocks += 1;
  a->allocations += 1;
  if (a->allocated > a->allocated_peak) a->allocated_peak = a->allocated;
  if (a->requested > a->requested_peak) a->requested_peak = a->requested;
}

// A new reference to a Block for `nbytes` on `stream`, as DeviceAllocator.malloc.
PyObject* alloc_malloc(PyObject* alloc_obj, Py_ssize_t nbytes, PyObject* stream) {
  if (!PyObject_TypeCheck(alloc_obj, &AllocType)) {
    PyObject* n = PyLong_FromSsize_t(nbytes);
    if (n == nullptr) return nullptr;
    PyObject* res = PyObject_CallMethodObjArgs(alloc_obj, s_malloc, n, stream, nullptr);
    Py_DECREF(n);
    return res;
  }
  auto* a = reinterpret_cast<AllocObject*>(alloc_obj);
  if (nonempty(a->capturing) || nonempty(a->pending) || a->free == nullptr || !PyDict_CheckExact(a->free)) {
    PyObject* n = PyLong_FromSsize_t(nbytes);
    if (n == nullptr) return nullptr;
    PyObject* res = PyObject_CallMethodObjArgs(alloc_obj, s_malloc, n, stream, nullptr);
    Py_DECREF(n);
    return res;
  }
  long long size = round_size(nbytes, a->divisions);
  PyObject* size_o = PyLong_FromLongLong(size);
  if (size_o == nullptr) return nullptr;
  PyObject* key = PyTuple_Pack(2, stream, size_o);
  if (key == nullptr) {
    Py_DECREF(size_o);
    return nullptr;
  }
  PyObject* blocks = PyDict_GetItemWithError(a->free, key);  // borrowed
  Py_DECREF(key);
  PyObject* block = nullptr;
  if (blocks != nullptr && PyList_CheckExact(blocks) && PyList_GET_SIZE(blocks) > 0) {
    Py_ssize_t last = PyList_GET_SIZE(blocks) - 1;
    block = PyList_GET_ITEM(blocks, last);
    Py_INCREF(block);
    if (PyList_SetSlice(blocks, last, last + 1, nullptr) < 0) {
      Py_DECREF(block);
      Py_DECREF(size_o);
      return nullptr;
    }
  } else if (PyErr_Occurred()) {
    Py_DECREF(size_o);
    return nullptr;
  } else {
    PyObject* n = PyLong_FromSsize_t(nbytes);
    if (n == nullptr) {
      Py_DECREF(size_o);
      return nullptr;
    }
    block = PyObject_CallMethodObjArgs(alloc_obj, s_new_block, size_o, n, stream, nullptr);
    Py_DECREF(n);
    if (block == nullptr) {
      Py_DECREF(size_o);
      return nullptr;
    }
  }
  Py_DECREF(size_o);
  count_malloc(a, size, nbytes);
  return block;
}

// Gives `block` back as DeviceAllocator.release; 0 on success, -1 with an exception set.
int alloc_release(PyObject* alloc_obj, PyObject* block, Py_ssize_t nbytes) {
  bool fast = PyObject_TypeCheck(alloc_obj, &AllocType);
  auto* a = reinterpret_cast<AllocObject*>(alloc_obj);
  PyObject *pool = nullptr, *streams = nullptr, *size_o = nullptr, *stream = nullptr;
  long long size = 0;
  if (fast) {
    fast = a->caching && a->free != nullptr && PyDict_CheckExact(a->free);
  }
  if (fast) {
    pool = PyObject_GetAttr(block, s_pool);
    streams = pool ? PyObject_GetAttr(block, s_streams) : nullptr;
    size_o = streams ? PyObject_GetAttr(block, s_size) : nullptr;
    stream = size_o ? PyObject_GetAttr(block, s_stream) : nullptr;
    if (stream == nullptr) {
      PyErr_Clear();
      fast = false;
    } else {
      size = PyLong_AsLongLong(size_o);
      if (size == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        fast = false;
      }
      fast = fast && pool == Py_None && !nonempty(streams);
    }
  }
  int rc = 0;
  if (fast) {
    PyObject* key = PyTuple_Pack(2, stream, size_o);
    PyObject* blocks = key ? PyDict_GetItemWithError(a->free, key) : nullptr;  // borrowed
    if (key == nullptr || (blocks == nullptr && PyErr_Occurred())) {
      rc = -1;
    } else if (blocks != nullptr && PyList_CheckExact(blocks)) {
      rc = PyList_Append(blocks, block);
    } else if (blocks != nullptr) {
      PyObject* r = PyObject_CallMethod(blocks, "append", "O", block);
      rc = r ? 0 : -1;
      Py_XDECREF(r);
    } else {
      PyObject* fresh = PyList_New(1);
      if (fresh == nullptr) {
        rc = -1;
      } else {
        Py_INCREF(block);
        PyList_SET_ITEM(fresh, 0, block);
        rc = PyDict_SetItem(a->free, key, fresh);
        Py_DECREF(fresh);
      }
    }
    Py_XDECREF(key);
    if (rc == 0) {
      a->allocated -= size;
      a->requested -= nbytes;
      a->active_blocks -= 1;
      a->frees += 1;
    }
  } else {
    PyObject* n = PyLong_FromSsize_t(nbytes);
    PyObject* r = n ? PyObject_CallMethodObjArgs(alloc_obj, s_release, block, n, nullptr) : nullptr;
    Py_XDECREF(n);
    rc = r ? 0 : -1;
    Py_XDECREF(r);
  }
  Py_XDECREF(pool);
  Py_XDECREF(streams);
  Py_XDECREF(size_o);
  Py_XDECREF(stream);
  return rc;
}

// -- DeviceAllocatorBase ------------------------------------------------------------------------

int alloc_traverse(PyObject* o, visitproc visit, void* arg) {
  auto* a = reinterpret_cast<AllocObject*>(o);
  Py_VISIT(a->free);
  Py_VISIT(a->pending);
  Py_VISIT(a->capturing);
  Py_VISIT(a->dict);
  return 0;
}

int alloc_clear(PyObject* o) {
  auto* a = reinterpret_cast<AllocObject*>(o);
  Py_CLEAR(a->free);
  Py_CLEAR(a->pending);
  Py_CLEAR(a->capturing);
  Py_CLEAR(a->dict);
  return 0;
}

void alloc_dealloc(PyObject* o) {
  PyObject_GC_UnTrack(o);
  auto* a = reinterpret_cast<AllocObject*>(o);
  if (a->weakreflist != nullptr) PyObject_ClearWeakRefs(o);
  alloc_clear(o);
  Py_TYPE(o)->tp_free(o);
}

PyObject* alloc_new(PyTypeObject* type, PyObject*, PyObject*) {
  auto* a = reinterpret_cast<AllocObject*>(type->tp_alloc(type, 0));
  if (a == nullptr) return nullptr;
  a->divisions = 4;
  a->caching = 1;
  return reinterpret_cast<PyObject*>(a);
}

PyMemberDef alloc_members[] = {
    {"allocated", T_LONGLONG, offsetof(AllocObject, allocated), 0, nullptr},
    {"allocated_peak", T_LONGLONG, offsetof(AllocObject, allocated_peak), 0, nullptr},
    {"requested", T_LONGLONG, offsetof(AllocObject, requested), 0, nullptr},
    {"requested_peak", T_LONGLONG, offsetof(AllocObject, requested_peak), 0, nullptr},
    {"active_blocks", T_LONGLONG, offsetof(AllocObject, active_blocks), 0, nullptr},
    {"allocations", T_LONGLONG, offsetof(AllocObject, allocations), 0, nullptr},
    {"frees", T_LONGLONG, offsetof(AllocObject, frees), 0, nullptr},
    {"divisions", T_LONGLONG, offsetof(AllocObject, divisions), 0, "size rounding steps between powers of two"},
    {"caching", T_BOOL, offsetof(AllocObject, caching), 0, "whether freed blocks are kept for reuse"},
    {"free", T_OBJECT, offsetof(AllocObject, free), 0, "(stream, size) -> [Block]"},
    {"pending", T_OBJECT, offsetof(AllocObject, pending), 0, "(Block, events) waiting for other streams"},
    {"capturing", T_OBJECT, offsetof(AllocObject, capturing), 0, "capturing stream -> graph pool"},
    {nullptr, 0, 0, 0, nullptr}};

// -- DeviceStorage ------------------------------------------------------------------------------

void storage_dealloc(PyObject* o) {
  auto* s = reinterpret_cast<StorageObject*>(o);
  if (s->weakreflist != nullptr) PyObject_ClearWeakRefs(o);
  PyObject* block = s->block;
  s->block = nullptr;
  if (block != nullptr && block != Py_None && s->alloc != nullptr && s->alloc != Py_None) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (alloc_release(s->alloc, block, s->nbytes) < 0) PyErr_Clear();  // interpreter shutdown: the driver is gone
    PyErr_Restore(et, ev, tb);
  }
  Py_XDECREF(block);
  Py_CLEAR(s->alloc);
  Py_CLEAR(s->device);
  Py_TYPE(o)->tp_free(o);
}

PyMemberDef storage_members[] = {
    {"_ptr", T_ULONGLONG, offsetof(StorageObject, ptr), 0, "the data's device address"},
    {"_nbytes", T_PYSSIZET, offsetof(StorageObject, nbytes), 0, nullptr},
    {"_block", T_OBJECT, offsetof(StorageObject, block), 0, "the allocator's block (None: not owned)"},
    {"_alloc", T_OBJECT, offsetof(StorageObject, alloc), 0, "the allocator the block goes back to"},
    {"device", T_OBJECT, offsetof(StorageObject, device), 0, nullptr},
    {"version", T_LONGLONG, offsetof(StorageObject, version), 0, nullptr},
    {"inference", T_BOOL, offsetof(StorageObject, inference), 0, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

// _device_storage_new(cls, alloc, nbytes, device, stream, inference)
PyObject* py_storage_new(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 6) {
    PyErr_SetString(PyExc_TypeError, "_device_storage_new(cls, alloc, nbytes, device, stream, inference)");
    return nullptr;
  }
  if (!init_names()) return nullptr;
  PyObject* cls = args[0];
  if (!PyType_Check(cls) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), &StorageType)) {
    PyErr_SetString(PyExc_TypeError, "_device_storage_new: cls must be a DeviceStorage class");
    return nullptr;
  }
  Py_ssize_t nbytes = PyLong_AsSsize_t(args[2]);
  if (nbytes == -1 && PyErr_Occurred()) return nullptr;
  if (nbytes < 0) {
    PyErr_SetString(PyExc_ValueError, "negative storage size");
    return nullptr;
  }
  auto* tp = reinterpret_cast<PyTypeObject*>(cls);
  auto* s = reinterpret_cast<StorageObject*>(tp->tp_alloc(tp, 0));
  if (s == nullptr) return nullptr;
  Py_INCREF(args[3]);
  s->device = args[3];
  Py_INCREF(args[1]);
  s->alloc = args[1];
  s->nbytes = nbytes;
  s->inference = PyObject_IsTrue(args[5]) == 1;
  if (nbytes == 0) {
    Py_INCREF(Py_None);
    s->block = Py_None;
    return reinterpret_cast<PyObject*>(s);
  }
  PyObject* block = alloc_malloc(args[1], nbytes, args[4]);
  if (block == nullptr) {
    Py_DECREF(s);
    return nullptr;
  }
  PyObject* ptr = PyObject_GetAttr(block, s_ptr);
  unsigned long long p = ptr ? PyLong_AsUnsignedLongLong(ptr) : 0;
  Py_XDECREF(ptr);
  s->block = block;  // owned from here: an error below gives it back through the deallocation
  if (ptr == nullptr || (p == static_cast<unsigned long long>(-1) && PyErr_Occurred())) {
    Py_DECREF(s);
    return nullptr;
  }
  s->ptr = p;
  return reinterpret_cast<PyObject*>(s);
}

// _device_tensor_new(cls, alloc, nbytes, device, stream, inference, shape, strides, dtype): a fresh tensor of
// a known layout over a new storage (`_device_storage_new`'s), in one call (the compiled wrappers' buffers:
// their shapes, strides and byte sizes were worked out when the wrapper was written).
PyObject* py_tensor_new(PyObject* mod, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 9) {
    PyErr_SetString(PyExc_TypeError,
                    "_device_tensor_new(cls, alloc, nbytes, device, stream, inference, shape, strides, dtype)");
    return nullptr;
  }
  PyObject* shape = args[6];
  PyObject* strides = args[7];
  if (!PyTuple_CheckExact(shape) || !PyTuple_CheckExact(strides) || PyTuple_GET_SIZE(shape) != PyTuple_GET_SIZE(strides)) {
    PyErr_SetString(PyExc_TypeError, "_device_tensor_new: shape and strides must be tuples of one length");
    return nullptr;
  }
  int code = -1;
  for (int i = 0; i < kNumDTypes && code < 0; ++i)
    if (dtype_object(i) == args[8]) code = i;
  if (code < 0 || tensor_class() == nullptr) {
    PyErr_SetString(PyExc_TypeError, "_device_tensor_new: unknown dtype");
    return nullptr;
  }
  Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
  if (ndim > 64) {
    PyErr_SetString(PyExc_ValueError, "_device_tensor_new: too many dimensions");
    return nullptr;
  }
  int64_t sizes[64], steps[64];
  for (Py_ssize_t i = 0; i < ndim; ++i) {
    sizes[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
    steps[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i));
    if ((sizes[i] == -1 || steps[i] == -1) && PyErr_Occurred()) return nullptr;
  }
  PyObject* storage = py_storage_new(mod, args, 6);
  if (storage == nullptr) return nullptr;
  PyObject* t = new_tensor(storage, nullptr, sizes, steps, static_cast<int32_t>(ndim), 0, code, args[3]);
  Py_DECREF(storage);
  return t;
}

// _device_empty_front(config): ember-cuda's `_storage.new_empty(shape, dtype, dev, zero=False)` as one C call, for
// the common case that function makes `_device_tensor_new`'s call in (~850 results a GPT-2 step, where its Python
// frame cost about as much as the allocation). `config` is a tuple of the objects that Python function reads:
//   (fallback, shapes, last_empty, empty, max_nbytes, driver_tls, devices, allocators, streams_tls,
//    inference_used, grad_state, storage_cls)
// (the Python `new_empty` itself, `_elementwise._SHAPES` (shape -> (strides, numel)), `device.LAST_EMPTY`,
// `_storage.empty`, `tensor._MAX_NBYTES`, `_driver._TLS`, `_storage._DEVICES`, `_storage._ALLOCATORS`,
// `_streams._TLS`, `grad_mode.INFERENCE_USED`, `grad_mode.STATE`, `CudaStorage`). Every other case (keywords, a
// true `zero`, a shape not seen, another device than the last `new_empty_tensor` one, a context to make current,
// a device not yet known, an unknown dtype, a size over the limit) calls the fallback with the same arguments, so
// the results and errors are the Python function's.
enum EmptyConfig {
  kFallback, kShapes, kLastEmpty, kEmptyFn, kMaxNbytes, kDriverTls, kDevices, kAllocators, kStreamsTls,
  kInferenceUsed, kGradState, kStorageCls, kEmptyConfigSize
};

PyObject *s_index, *s_cuda_stream, *s_inference;

// An owned reference released at scope exit (the many exits below).
struct Owned {
  PyObject* o;
  explicit Owned(PyObject* p) : o(p) {}
  ~Owned() { Py_XDECREF(o); }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
};

PyObject* empty_front_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* const* cfg = &PyTuple_GET_ITEM(self, 0);
  auto fallback = [&]() { return PyObject_Vectorcall(cfg[kFallback], args, static_cast<size_t>(nargs), kwnames); };
  if ((kwnames != nullptr && PyTuple_GET_SIZE(kwnames)) || nargs < 3 || nargs > 4 ||
      (nargs == 4 && args[3] != Py_False) || !PyTuple_CheckExact(args[0]))
    return fallback();
  PyObject *shape = args[0], *dtype = args[1], *dev = args[2];
  PyObject* last = cfg[kLastEmpty];
  if (!PyList_CheckExact(last) || PyList_GET_SIZE(last) < 2 || PyList_GET_ITEM(last, 0) != dev ||
      PyList_GET_ITEM(last, 1) != cfg[kEmptyFn])
    return fallback();
  PyObject* found = PyDict_GetItemWithError(cfg[kShapes], shape);
  if (found == nullptr) {
    if (PyErr_Occurred()) return nullptr;  // an unhashable shape: the Python function's TypeError
    return fallback();
  }
  Py_INCREF(found);
  Owned info(found);  // (held: the getters below run Python code)
  int code = -1;
  for (int i = 0; i < kNumDTypes && code < 0; ++i)
    if (dtype_object(i) == dtype) code = i;
  if (code < 0 || !PyTuple_CheckExact(found) || PyTuple_GET_SIZE(found) < 2) return fallback();
  long long numel = PyLong_AsLongLong(PyTuple_GET_ITEM(found, 1));
  long long limit = PyLong_AsLongLong(cfg[kMaxNbytes]);
  if (numel == -1 || limit == -1) {
    if (PyErr_Occurred()) PyErr_Clear();
    return fallback();
  }
  long long size = itemsize(static_cast<DType>(code));
  if (numel < 0 || numel > limit / size) return fallback();
  Owned index(PyObject_GetAttr(dev, s_index));
  if (index.o == nullptr) return nullptr;
  Owned current(PyObject_GetAttr(cfg[kDriverTls], s_index));  // the device whose context is current here
  int same = current.o == nullptr ? -1 : PyObject_RichCompareBool(current.o, index.o, Py_EQ);
  if (same < 0) return nullptr;
  PyObject* device = same ? PyDict_GetItemWithError(cfg[kDevices], index.o) : nullptr;      // borrowed
  PyObject* alloc = device ? PyDict_GetItemWithError(cfg[kAllocators], index.o) : nullptr;  // borrowed
  if (alloc == nullptr) {
    if (PyErr_Occurred()) return nullptr;
    return fallback();  // a context to make current, or a device not known yet
  }
  // the current stream's handle (_streams.current_handle): 0 unless a stream was made current for this device
  Owned streams(PyObject_GetAttr(cfg[kStreamsTls], s_streams));
  if (streams.o == nullptr) return nullptr;
  Owned stream(nullptr);
  if (streams.o != Py_None) {
    if (!PyDict_Check(streams.o)) return fallback();
    PyObject* s = PyDict_GET_SIZE(streams.o) ? PyDict_GetItemWithError(streams.o, index.o) : nullptr;  // borrowed
    if (s == nullptr && PyErr_Occurred()) return nullptr;
    if (s != nullptr && s != Py_None) {
      stream.o = PyObject_GetAttr(s, s_cuda_stream);
      if (stream.o == nullptr) return nullptr;
    }
  }
  if (stream.o == nullptr && (stream.o = PyLong_FromLong(0)) == nullptr) return nullptr;
  // the inference flag, read (as the Python function does) only once inference mode was ever on
  PyObject* inference = Py_False;
  PyObject* used = cfg[kInferenceUsed];
  if (PyList_CheckExact(used) && PyList_GET_SIZE(used)) {
    int ever = PyObject_IsTrue(PyList_GET_ITEM(used, 0));
    if (ever < 0) return nullptr;
    if (ever) {
      Owned flag(PyObject_GetAttr(cfg[kGradState], s_inference));
      int on = flag.o == nullptr ? -1 : PyObject_IsTrue(flag.o);
      if (on < 0) return nullptr;
      inference = on ? Py_True : Py_False;
    }
  }
  Owned nbytes(PyLong_FromLongLong(numel * size));
  if (nbytes.o == nullptr) return nullptr;
  PyObject* call[9] = {cfg[kStorageCls], alloc, nbytes.o, device, stream.o, inference, shape,
                       PyTuple_GET_ITEM(found, 0), dtype};
  return py_tensor_new(nullptr, call, 9);
}

PyMethodDef empty_front_def = {
    "new_empty", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(empty_front_call)),
    METH_FASTCALL | METH_KEYWORDS,
    "new_empty(shape, dtype, dev, zero=False): a fresh contiguous CUDA tensor (ember-cuda's _storage.new_empty, "
    "its common case in C)."};

PyObject* py_empty_front(PyObject*, PyObject* config) {
  if (!PyTuple_CheckExact(config) || PyTuple_GET_SIZE(config) != kEmptyConfigSize) {
    PyErr_SetString(PyExc_TypeError, "_device_empty_front(config): a tuple of 12 objects");
    return nullptr;
  }
  PyObject* cls = PyTuple_GET_ITEM(config, kStorageCls);
  if (!PyType_Check(cls) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), &StorageType) ||
      !PyCallable_Check(PyTuple_GET_ITEM(config, kFallback)) || !PyDict_Check(PyTuple_GET_ITEM(config, kShapes)) ||
      !PyDict_Check(PyTuple_GET_ITEM(config, kDevices)) || !PyDict_Check(PyTuple_GET_ITEM(config, kAllocators))) {
    PyErr_SetString(PyExc_TypeError, "_device_empty_front: a callable fallback, dicts of shapes, devices and "
                                     "allocators, and a DeviceStorage class expected");
    return nullptr;
  }
  if (s_index == nullptr) {
    s_index = PyUnicode_InternFromString("index");
    s_cuda_stream = PyUnicode_InternFromString("cuda_stream");
    s_inference = PyUnicode_InternFromString("inference");
    if (!s_index || !s_cuda_stream || !s_inference || !init_names()) return nullptr;
  }
  return PyCFunction_New(&empty_front_def, config);
}

PyObject* py_round_size(PyObject*, PyObject* args) {
  long long nbytes, divisions = 4;
  if (!PyArg_ParseTuple(args, "L|L", &nbytes, &divisions)) return nullptr;
  if (nbytes < 0 || divisions < 1) {
    PyErr_SetString(PyExc_ValueError, "expected nbytes >= 0 and divisions >= 1");
    return nullptr;
  }
  return PyLong_FromLongLong(round_size(nbytes, divisions));
}

PyMethodDef storage_methods[] = {
    {"_device_storage_new", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(py_storage_new)), METH_FASTCALL,
     "_device_storage_new(cls, alloc, nbytes, device, stream, inference): a new storage of class cls (a "
     "DeviceStorage subclass) holding nbytes from the caching allocator alloc on stream."},
    {"_device_tensor_new", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(py_tensor_new)), METH_FASTCALL,
     "_device_tensor_new(cls, alloc, nbytes, device, stream, inference, shape, strides, dtype): a tensor of that "
     "layout over a new storage of class cls (as _device_storage_new) on device."},
    {"_device_empty_front", py_empty_front, METH_O,
     "_device_empty_front(config): ember-cuda's new_empty(shape, dtype, dev, zero=False) in C for its common case, "
     "the rest through config[0] (the Python function); see device_storage.cpp for the config tuple."},
    {"_device_round_size", py_round_size, METH_VARARGS,
     "_device_round_size(nbytes, divisions=4): the size class the native allocation path uses."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

bool device_storage_ptr(PyObject* storage, unsigned long long* ptr) {
  if (storage == nullptr || !PyObject_TypeCheck(storage, &StorageType)) return false;
  *ptr = reinterpret_cast<StorageObject*>(storage)->ptr;
  return true;
}

void bind_device_storage(PyObject* module) {
  if (!init_names()) throw std::runtime_error("names");
  AllocType.tp_name = "ember._C.DeviceAllocatorBase";
  AllocType.tp_basicsize = sizeof(AllocObject);
  AllocType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  AllocType.tp_doc = "The counters and pools of a device's caching allocator that the native allocation path uses.";
  AllocType.tp_new = alloc_new;
  AllocType.tp_dealloc = alloc_dealloc;
  AllocType.tp_traverse = alloc_traverse;
  AllocType.tp_clear = alloc_clear;
  AllocType.tp_members = alloc_members;
  AllocType.tp_dictoffset = offsetof(AllocObject, dict);
  AllocType.tp_weaklistoffset = offsetof(AllocObject, weakreflist);
  StorageType.tp_name = "ember._C.DeviceStorage";
  StorageType.tp_basicsize = sizeof(StorageObject);
  StorageType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  StorageType.tp_doc = "A device storage whose block goes back to its caching allocator when it is collected.";
  StorageType.tp_new = PyType_GenericNew;
  StorageType.tp_dealloc = storage_dealloc;
  StorageType.tp_members = storage_members;
  StorageType.tp_weaklistoffset = offsetof(StorageObject, weakreflist);
  if (PyType_Ready(&AllocType) < 0 || PyType_Ready(&StorageType) < 0) throw std::runtime_error("type init");
  Py_INCREF(&AllocType);
  Py_INCREF(&StorageType);
  if (PyModule_AddObject(module, "DeviceAllocatorBase", reinterpret_cast<PyObject*>(&AllocType)) < 0 ||
      PyModule_AddObject(module, "DeviceStorage", reinterpret_cast<PyObject*>(&StorageType)) < 0 ||
      PyModule_AddFunctions(module, storage_methods) < 0)
    throw std::runtime_error("module init");
}

}  // namespace ember
