// The native kernel launcher of plugin devices (ember-cuda): `_C.DeviceLauncher` packs a call's
// kernel arguments into 8-byte slots and calls the driver's launch entry point through a function
// pointer the plugin hands over at run time (the address of `cuLaunchKernelEx` / `cuLaunchKernel`
// in libcuda, found by ctypes). The core neither links nor includes CUDA: the two signatures and the
// `CUlaunchConfig` layout are declared here as the driver API fixes them (cuda.h, CUDA >= 11.8).
//
// It replaces ember-cuda's Python `Launcher.__call__` (a `struct.pack_into` and a ctypes call,
// ~1.5-2 us a launch; ~0.25 us here) with the same bytes: a launch configuration and one 8-byte slot per
// argument, on the calling thread's stack (so concurrent launches share nothing; the GIL is released
// while the driver runs, as ctypes does) (pointers and u64 as unsigned 64-bit, i64 signed, i32 and fp32 in the low 4 bytes with
// zeros above, fp64), then Triton's two null scratch pointers; `kernelParams` points at the slots.
// `cuLaunchKernelEx` is tried first; a driver that refuses it on the first launch of the process
// switches every launcher to `cuLaunchKernel` (as the Python launcher does), and an error calls the
// plugin's `on_error(code, what)`, which raises.
//
// `_device_launch_recorder()` gives the addresses of two C functions with the driver's signatures
// that record what they were passed (tests: the packing is compared with the Python one's).
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#include "../bindings.h"
#include "dtype.h"
#include "tensor_impl.h"

namespace ember {

namespace {

// CUlaunchConfig (cuda.h): 7 x uint32, the stream, the attribute array and its count.
struct LaunchConfig {
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared;
  void* stream;
  void* attrs;
  uint32_t num_attrs;
};
static_assert(sizeof(LaunchConfig) == 56, "CUlaunchConfig layout");

using LaunchExFn = int (*)(const LaunchConfig*, void*, void**, void**);
using LaunchFn = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                         void**, void**);

// Whether cuLaunchKernelEx works in this process: -1 until the first launch tells, 1 yes, 0 no (every
// launcher then uses cuLaunchKernel).
int g_ex_state = -1;

enum Kind : char { kU64 = 'p', kI32 = 'i', kI64 = 'l', kF32 = 'f', kF64 = 'd' };

struct LauncherObject {
  PyObject_HEAD
  LaunchExFn launch_ex;
  LaunchFn launch;
  void* function;
  unsigned block;
  unsigned shared;
  PyObject* name;      // str
  PyObject* on_error;  // callable(code, what)
  Py_ssize_t nargs;    // arguments a call passes (the scratch pointers excluded)
  std::vector<char>* kinds;
  LaunchConfig config;  // block and shared memory set; each call fills in its grid and stream
  PyObject* weakreflist;
  vectorcallfunc vectorcall;
};

PyObject* raise_launch_error(LauncherObject* self, int rc, bool ex) {
  PyObject* what = PyUnicode_FromFormat(ex ? "cuLaunchKernelEx(%U)" : "cuLaunchKernel(%U)", self->name);
  if (what == nullptr) return nullptr;
  PyObject* res = PyObject_CallFunction(self->on_error, "iO", rc, what);
  Py_DECREF(what);
  if (res == nullptr) return nullptr;
  Py_DECREF(res);
  Py_RETURN_NONE;
}

bool read_u32(PyObject* o, uint32_t* out) {
  unsigned long long v = PyLong_AsUnsignedLongLong(o);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    if (!PyLong_Check(o) && PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyObject* i = PyNumber_Index(o);
      if (i == nullptr) return false;
      v = PyLong_AsUnsignedLongLong(i);
      Py_DECREF(i);
      if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return false;
    } else {
      return false;
    }
  }
  if (v > 0xFFFFFFFFull) {
    PyErr_SetString(PyExc_OverflowError, "launch dimension out of range");
    return false;
  }
  *out = static_cast<uint32_t>(v);
  return true;
}

// One argument into its slot, as struct.pack_into's codes Q / i4x / q / f4x / d would write it.
bool pack(char kind, PyObject* o, uint64_t* slot) {
  switch (kind) {
    case kU64: {
      unsigned long long v;
      if (PyLong_CheckExact(o)) {
        v = PyLong_AsUnsignedLongLong(o);
      } else {
        PyObject* i = PyNumber_Index(o);
        if (i == nullptr) return false;
        v = PyLong_AsUnsignedLongLong(i);
        Py_DECREF(i);
      }
      if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return false;
      *slot = v;
      return true;
    }
    case kI32:
    case kI64: {
      long long v;
      if (PyLong_Check(o)) {
        v = PyLong_AsLongLong(o);
      } else {
        PyObject* i = PyNumber_Index(o);
        if (i == nullptr) return false;
        v = PyLong_AsLongLong(i);
        Py_DECREF(i);
      }
      if (v == -1 && PyErr_Occurred()) return false;
      if (kind == kI32) {
        if (v < INT32_MIN || v > INT32_MAX) {
          PyErr_SetString(PyExc_OverflowError, "kernel argument out of range for i32");
          return false;
        }
        int32_t w = static_cast<int32_t>(v);
        *slot = 0;
        std::memcpy(slot, &w, 4);
      } else {
        std::memcpy(slot, &v, 8);
      }
      return true;
    }
    case kF32:
    case kF64: {
      double d = PyFloat_CheckExact(o) ? PyFloat_AS_DOUBLE(o) : PyFloat_AsDouble(o);
      if (d == -1.0 && PyErr_Occurred()) return false;
      if (kind == kF32) {
        float f = static_cast<float>(d);
        if (std::isinf(f) && std::isfinite(d)) {
          PyErr_SetString(PyExc_OverflowError, "float too large to pack with f format");
          return false;
        }
        *slot = 0;
        std::memcpy(slot, &f, 4);
      } else {
        std::memcpy(slot, &d, 8);
      }
      return true;
    }
    default:
      PyErr_SetString(PyExc_SystemError, "unknown kernel argument kind");
      return false;
  }
}

// Launches `self` with its first nargs slots filled (room for nargs + 2): Triton's two scratch pointers go
// after them, `kernelParams` points at the slots.
PyObject* launch_slots(LauncherObject* self, const uint32_t g[3], uint64_t stream, uint64_t* slots) {
  constexpr Py_ssize_t kStack = 64;
  void* params_stack[kStack];
  std::unique_ptr<void*[]> params_heap;
  Py_ssize_t total = self->nargs + 2;
  void** params = params_stack;
  if (total > kStack) {
    try {
      params_heap.reset(new void*[total]);
    } catch (const std::bad_alloc&) {
      PyErr_NoMemory();
      return nullptr;
    }
    params = params_heap.get();
  }
  slots[self->nargs] = slots[self->nargs + 1] = 0;  // Triton's global and profile scratch pointers: null
  for (Py_ssize_t i = 0; i < total; ++i) params[i] = &slots[i];
  LaunchConfig cfg = self->config;
  cfg.grid[0] = g[0];
  cfg.grid[1] = g[1];
  cfg.grid[2] = g[2];
  cfg.stream = reinterpret_cast<void*>(stream);
  LaunchExFn ex = g_ex_state != 0 ? self->launch_ex : nullptr;
  LaunchFn classic = self->launch;
  bool probe = g_ex_state == -1;
  if (ex == nullptr && classic == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "no kernel launch entry point");
    return nullptr;
  }
  int rc = 0;
  bool fell_back = false;
  void* fn = self->function;
  unsigned block = self->block, shared = self->shared;
  Py_BEGIN_ALLOW_THREADS
  if (ex != nullptr) {
    rc = ex(&cfg, fn, params, nullptr);
    if (rc != 0 && probe && classic != nullptr &&
        classic(fn, g[0], g[1], g[2], block, 1, 1, shared, cfg.stream, params, nullptr) == 0)
      fell_back = true;
  } else {
    rc = classic(fn, g[0], g[1], g[2], block, 1, 1, shared, cfg.stream, params, nullptr);
  }
  Py_END_ALLOW_THREADS
  if (ex != nullptr) {
    if (rc == 0) {
      g_ex_state = 1;
      Py_RETURN_NONE;
    }
    if (fell_back) {
      g_ex_state = 0;  // the driver refuses the Ex form: every launcher uses cuLaunchKernel from now on
      Py_RETURN_NONE;
    }
    return raise_launch_error(self, rc, true);
  }
  if (rc != 0) return raise_launch_error(self, rc, false);
  Py_RETURN_NONE;
}

// launcher(grid, stream, *args)
PyObject* launcher_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<LauncherObject*>(callable);
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0) {
    PyErr_SetString(PyExc_TypeError, "DeviceLauncher takes no keyword arguments");
    return nullptr;
  }
  if (nargs != self->nargs + 2) {
    PyErr_Format(PyExc_TypeError, "kernel %U expects %zd arguments, got %zd", self->name, self->nargs,
                 nargs < 2 ? 0 : nargs - 2);
    return nullptr;
  }
  PyObject* grid = args[0];
  uint32_t g[3] = {1, 1, 1};
  if (PyTuple_CheckExact(grid) || PyList_CheckExact(grid)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(grid);
    if (n < 1 || n > 3) {
      PyErr_SetString(PyExc_ValueError, "a launch grid has 1 to 3 dimensions");
      return nullptr;
    }
    PyObject** items = PySequence_Fast_ITEMS(grid);
    for (Py_ssize_t i = 0; i < n; ++i)
      if (!read_u32(items[i], &g[i])) return nullptr;
  } else {
    PyObject* seq = PySequence_Tuple(grid);
    if (seq == nullptr) return nullptr;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    bool ok = n >= 1 && n <= 3;
    if (!ok) PyErr_SetString(PyExc_ValueError, "a launch grid has 1 to 3 dimensions");
    for (Py_ssize_t i = 0; ok && i < n; ++i) ok = read_u32(PyTuple_GET_ITEM(seq, i), &g[i]);
    Py_DECREF(seq);
    if (!ok) return nullptr;
  }
  uint64_t stream;
  if (!pack(kU64, args[1], &stream)) return nullptr;
  // The argument slots live on this call's stack (a heap block past 32), so launches from several threads
  // never share a buffer, and the GIL is released while the driver runs (a launch blocks when the
  // device's queue is full).
  constexpr Py_ssize_t kStack = 32;
  uint64_t slots_stack[kStack];
  std::unique_ptr<uint64_t[]> slots_heap;
  Py_ssize_t total = self->nargs + 2;
  uint64_t* slots = slots_stack;
  if (total > kStack) {
    try {
      slots_heap.reset(new uint64_t[total]);
    } catch (const std::bad_alloc&) {
      PyErr_NoMemory();
      return nullptr;
    }
    slots = slots_heap.get();
  }
  const char* kinds = self->kinds->data();
  for (Py_ssize_t i = 0; i < self->nargs; ++i)
    if (!pack(kinds[i], args[2 + i], &slots[i])) return nullptr;
  return launch_slots(self, g, stream, slots);
}

void* as_pointer(PyObject* o, bool* ok) {
  *ok = true;
  if (o == Py_None) return nullptr;
  unsigned long long v = PyLong_AsUnsignedLongLong(o);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    *ok = false;
    return nullptr;
  }
  return reinterpret_cast<void*>(static_cast<uintptr_t>(v));
}

// DeviceLauncher(launch_ex, launch, function, kinds, block, shared, name, on_error)
PyObject* launcher_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"launch_ex", "launch", "function", "kinds", "block", "shared", "name", "on_error",
                                nullptr};
  PyObject *ex_o, *launch_o, *fn_o, *name, *on_error;
  const char* kinds;
  Py_ssize_t nkinds;
  unsigned block, shared;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOs#IIUO", const_cast<char**>(names), &ex_o, &launch_o, &fn_o,
                                   &kinds, &nkinds, &block, &shared, &name, &on_error))
    return nullptr;
  for (Py_ssize_t i = 0; i < nkinds; ++i) {
    char k = kinds[i];
    if (k != kU64 && k != kI32 && k != kI64 && k != kF32 && k != kF64) {
      PyErr_Format(PyExc_ValueError, "unknown kernel argument kind '%c' (expected one of p, i, l, f, d)", k);
      return nullptr;
    }
  }
  if (!PyCallable_Check(on_error)) {
    PyErr_SetString(PyExc_TypeError, "on_error must be callable");
    return nullptr;
  }
  bool ok1, ok2, ok3;
  void* ex = as_pointer(ex_o, &ok1);
  void* launch = ok1 ? as_pointer(launch_o, &ok2) : nullptr;
  void* fn = ok1 && ok2 ? as_pointer(fn_o, &ok3) : nullptr;
  if (!ok1 || !ok2 || !ok3) return nullptr;
  auto* self = reinterpret_cast<LauncherObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->launch_ex = reinterpret_cast<LaunchExFn>(ex);
  self->launch = reinterpret_cast<LaunchFn>(launch);
  self->function = fn;
  self->block = block;
  self->shared = shared;
  Py_INCREF(name);
  self->name = name;
  Py_INCREF(on_error);
  self->on_error = on_error;
  self->nargs = nkinds;
  self->weakreflist = nullptr;
  try {
    self->kinds = new std::vector<char>(kinds, kinds + nkinds);
  } catch (const std::bad_alloc&) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  std::memset(&self->config, 0, sizeof(LaunchConfig));
  self->config.block[0] = block;
  self->config.block[1] = 1;
  self->config.block[2] = 1;
  self->config.shared = shared;
  self->vectorcall = launcher_vectorcall;
  return reinterpret_cast<PyObject*>(self);
}

void launcher_dealloc(PyObject* o) {
  auto* self = reinterpret_cast<LauncherObject*>(o);
  if (self->weakreflist != nullptr) PyObject_ClearWeakRefs(o);
  Py_XDECREF(self->name);
  Py_XDECREF(self->on_error);
  delete self->kinds;
  Py_TYPE(o)->tp_free(o);
}

PyObject* launcher_get_fn(PyObject* o, void*) {
  return PyLong_FromVoidPtr(reinterpret_cast<LauncherObject*>(o)->function);
}

PyObject* launcher_get_kinds(PyObject* o, void*) {
  auto* self = reinterpret_cast<LauncherObject*>(o);
  return PyUnicode_FromStringAndSize(self->kinds->data(), static_cast<Py_ssize_t>(self->kinds->size()));
}

PyMemberDef launcher_members[] = {
    {"name", T_OBJECT_EX, offsetof(LauncherObject, name), READONLY, "the kernel's name"},
    {"block", T_UINT, offsetof(LauncherObject, block), READONLY, "threads per block"},
    {"shared", T_UINT, offsetof(LauncherObject, shared), READONLY, "dynamic shared memory bytes"},
    {nullptr, 0, 0, 0, nullptr}};

PyGetSetDef launcher_getset[] = {
    {"fn", launcher_get_fn, nullptr, "the CUfunction handle", nullptr},
    {"kinds", launcher_get_kinds, nullptr, "the argument kinds (p u64/pointer, i i32, l i64, f fp32, d fp64)",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject LauncherType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// -- launch sites -------------------------------------------------------------------------------
//
// `_C.DeviceLaunchSite(fallback, xnumel, rnumel)`: one kernel launch of a compiled wrapper, called
// `site(stream, *args)` with the kernel's arguments (tensors for pointers, ints for sizes). Until it is
// armed, and whenever the native path cannot take a call, it calls `fallback(site, *args)` (the Python
// launch path, which tunes, compiles and then arms the site). Armed (`arm(launcher, grid_x, aligned)`) a call
// reads each tensor's device address from its storage and offset, checks which values are multiples of 16 (the
// launcher was compiled for one pattern of multiples of 16), appends the fixed `xnumel`, and launches on
// `stream`. It falls back for a stream of None, a pointer argument that is not a tensor over a device
// storage, an argument it cannot pack, or another alignment pattern.

struct SiteObject {
  PyObject_HEAD
  PyObject* fallback;
  PyObject* xnumel;
  PyObject* rnumel;
  LauncherObject* launcher;  // null until armed
  uint32_t grid[3];
  uint64_t aligned;    // bit i: argument slot i (xnumel the last) is a multiple of 16 in the launches it takes
  long long launches;  // native launches made (tests)
  PyObject* weakreflist;
  vectorcallfunc vectorcall;
};

PyTypeObject SiteType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject* site_fallback(SiteObject* self, PyObject* const* args, Py_ssize_t nargs) {
  // fallback(site, *args): args[0] is the stream, replaced by the site
  constexpr Py_ssize_t kStack = 64;
  PyObject* stack[kStack];
  std::unique_ptr<PyObject*[]> heap;
  PyObject** call = stack;
  if (nargs > kStack) {
    try {
      heap.reset(new PyObject*[nargs]);
    } catch (const std::bad_alloc&) {
      return PyErr_NoMemory();
    }
    call = heap.get();
  }
  call[0] = reinterpret_cast<PyObject*>(self);
  for (Py_ssize_t i = 1; i < nargs; ++i) call[i] = args[i];
  return PyObject_Vectorcall(self->fallback, call, static_cast<size_t>(nargs), nullptr);
}

PyObject* site_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<SiteObject*>(callable);
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if ((kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0) || nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "DeviceLaunchSite is called (stream, *args)");
    return nullptr;
  }
  LauncherObject* launcher = self->launcher;
  Py_ssize_t n = nargs - 1;  // the kernel's arguments; xnumel follows them
  // up to 62 arguments (the alignment pattern is a 64-bit mask; a fused optimizer kernel takes ~50)
  constexpr Py_ssize_t kStack = 64;
  if (launcher == nullptr || args[0] == Py_None || n + 1 != launcher->nargs || launcher->nargs + 2 > kStack)
    return site_fallback(self, args, nargs);
  uint64_t slots[kStack];
  uint64_t stream;
  if (!pack(kU64, args[0], &stream)) return nullptr;
  const char* kinds = launcher->kinds->data();
  uint64_t aligned = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* o = args[1 + i];
    if (kinds[i] == kU64) {
      if (!is_tensor_base(o)) return site_fallback(self, args, nargs);
      auto* t = reinterpret_cast<TensorObject*>(o);
      unsigned long long ptr;
      if (!t->offset_ok || t->dtype_code < 0 || t->dtype_code >= kNumDTypes || !device_storage_ptr(t->storage, &ptr))
        return site_fallback(self, args, nargs);
      slots[i] = ptr + static_cast<uint64_t>(t->offset_value * itemsize(static_cast<DType>(t->dtype_code)));
    } else if (!pack(kinds[i], o, &slots[i])) {
      PyErr_Clear();
      return site_fallback(self, args, nargs);
    }
    if ((slots[i] & 15) == 0) aligned |= uint64_t{1} << i;
  }
  if (!pack(kinds[n], self->xnumel, &slots[n])) return nullptr;
  if ((slots[n] & 15) == 0) aligned |= uint64_t{1} << n;
  // the launcher was compiled for one pattern of 16-byte multiples (Triton vectorizes on them): another
  // pattern takes the Python path, which picks (or compiles) the launcher of that pattern
  if (aligned != self->aligned) return site_fallback(self, args, nargs);
  self->launches += 1;
  Py_INCREF(launcher);  // an error handler may disarm the site meanwhile
  PyObject* res = launch_slots(launcher, self->grid, stream, slots);
  Py_DECREF(launcher);
  return res;
}

PyObject* site_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"fallback", "xnumel", "rnumel", nullptr};
  PyObject *fallback, *xnumel, *rnumel = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!|O!", const_cast<char**>(names), &fallback, &PyLong_Type,
                                   &xnumel, &PyLong_Type, &rnumel))
    return nullptr;
  if (!PyCallable_Check(fallback)) {
    PyErr_SetString(PyExc_TypeError, "fallback must be callable");
    return nullptr;
  }
  auto* self = reinterpret_cast<SiteObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->fallback = Py_NewRef(fallback);
  self->xnumel = Py_NewRef(xnumel);
  self->rnumel = rnumel != nullptr ? Py_NewRef(rnumel) : PyLong_FromLong(1);
  self->launcher = nullptr;
  self->grid[0] = self->grid[1] = self->grid[2] = 1;
  self->aligned = 0;
  self->launches = 0;
  self->weakreflist = nullptr;
  self->vectorcall = site_vectorcall;
  if (self->rnumel == nullptr) {
    Py_DECREF(self);
    return nullptr;
  }
  return reinterpret_cast<PyObject*>(self);
}

void site_dealloc(PyObject* o) {
  auto* self = reinterpret_cast<SiteObject*>(o);
  if (self->weakreflist != nullptr) PyObject_ClearWeakRefs(o);
  Py_XDECREF(self->fallback);
  Py_XDECREF(self->xnumel);
  Py_XDECREF(self->rnumel);
  Py_XDECREF(reinterpret_cast<PyObject*>(self->launcher));
  Py_TYPE(o)->tp_free(o);
}

// site.arm(launcher, grid_x, aligned): native launches from now on (launcher None: back to the fallback)
PyObject* site_arm(PyObject* o, PyObject* args) {
  auto* self = reinterpret_cast<SiteObject*>(o);
  PyObject* launcher;
  PyObject* gx_o = nullptr;
  unsigned long long aligned = 0;
  if (!PyArg_ParseTuple(args, "O|OK", &launcher, &gx_o, &aligned)) return nullptr;
  if (launcher == Py_None) {
    Py_CLEAR(self->launcher);
    Py_RETURN_NONE;
  }
  if (!PyObject_TypeCheck(launcher, &LauncherType)) {
    PyErr_SetString(PyExc_TypeError, "arm: launcher must be a DeviceLauncher");
    return nullptr;
  }
  uint32_t gx;
  if (gx_o == nullptr || PyTuple_GET_SIZE(args) != 3) {
    PyErr_SetString(PyExc_TypeError, "arm(launcher, grid_x, aligned)");
    return nullptr;
  }
  if (!read_u32(gx_o, &gx)) return nullptr;
  self->grid[0] = gx;
  self->aligned = aligned;
  Py_INCREF(launcher);
  Py_XSETREF(self->launcher, reinterpret_cast<LauncherObject*>(launcher));
  Py_RETURN_NONE;
}

PyObject* site_get_launcher(PyObject* o, void*) {
  auto* self = reinterpret_cast<SiteObject*>(o);
  return Py_NewRef(self->launcher != nullptr ? reinterpret_cast<PyObject*>(self->launcher) : Py_None);
}

PyObject* site_get_grid(PyObject* o, void*) {
  auto* self = reinterpret_cast<SiteObject*>(o);
  return Py_BuildValue("(III)", self->grid[0], self->grid[1], self->grid[2]);
}

PyMethodDef site_methods[] = {
    {"arm", site_arm, METH_VARARGS,
     "arm(launcher, grid_x, aligned): launch natively with this DeviceLauncher over grid (grid_x, 1, 1) the "
     "calls whose argument slots (xnumel the last) are multiples of 16 exactly where bits of aligned say; "
     "arm(None) sends every call to the fallback again."},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef site_members[] = {
    {"xnumel", T_OBJECT_EX, offsetof(SiteObject, xnumel), READONLY, "the launch's fixed xnumel"},
    {"rnumel", T_OBJECT_EX, offsetof(SiteObject, rnumel), READONLY, "the launch's fixed rnumel"},
    {"fallback", T_OBJECT_EX, offsetof(SiteObject, fallback), READONLY, "called (site, *args) off the native path"},
    {"launches", T_LONGLONG, offsetof(SiteObject, launches), READONLY, "native launches made"},
    {"aligned", T_ULONGLONG, offsetof(SiteObject, aligned), READONLY, "the armed alignment pattern"},
    {nullptr, 0, 0, 0, nullptr}};

PyGetSetDef site_getset[] = {
    {"launcher", site_get_launcher, nullptr, "the armed DeviceLauncher, or None", nullptr},
    {"grid", site_get_grid, nullptr, "the armed grid", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

// -- test recorder ------------------------------------------------------------------------------

struct Recorded {
  int calls = 0;
  int form = 0;  // 1 Ex, 2 classic
  LaunchConfig config{};
  void* function = nullptr;
  int nslots = 0;  // < 0: the function handle's low byte says (test launchers encode it there)
  uint64_t slots[256] = {};  // the parameter values, copied at the call
  int rc_ex = 0, rc_classic = 0;
  bool log = false;
  std::vector<PyObject*>* entries = nullptr;  // with log: one tuple per call
} g_rec;

void record(int form, const LaunchConfig& cfg, void* f, void** params) {
  // The native launcher calls the driver without the GIL: the values are copied first, then the
  // shared record is written under the GIL (launches from several threads arrive whole).
  int n = g_rec.nslots >= 0 ? g_rec.nslots : static_cast<int>(reinterpret_cast<uintptr_t>(f) & 0xFF);
  uint64_t local[256];
  for (int i = 0; i < n; ++i) std::memcpy(&local[i], params[i], 8);
  PyGILState_STATE gil = PyGILState_Ensure();
  ++g_rec.calls;
  g_rec.form = form;
  g_rec.config = cfg;
  g_rec.function = f;
  std::memcpy(g_rec.slots, local, 8 * static_cast<size_t>(n));
  if (g_rec.log) {
    PyObject* entry = Py_BuildValue("(s(III)(III)INNy#)", form == 1 ? "ex" : "classic", cfg.grid[0], cfg.grid[1],
                                    cfg.grid[2], cfg.block[0], cfg.block[1], cfg.block[2], cfg.shared,
                                    PyLong_FromVoidPtr(cfg.stream), PyLong_FromVoidPtr(f),
                                    reinterpret_cast<const char*>(local), static_cast<Py_ssize_t>(8 * n));
    if (entry == nullptr)
      PyErr_Clear();
    else
      g_rec.entries->push_back(entry);
  }
  PyGILState_Release(gil);
}

int record_ex(const LaunchConfig* cfg, void* f, void** params, void** extra) {
  (void)extra;
  record(1, *cfg, f, params);
  return g_rec.rc_ex;
}

int record_classic(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
  (void)extra;
  record(2, LaunchConfig{{gx, gy, gz}, {bx, by, bz}, shared, stream, nullptr, 0}, f, params);
  return g_rec.rc_classic;
}

void clear_log() {
  if (g_rec.entries == nullptr) g_rec.entries = new std::vector<PyObject*>();
  for (PyObject* e : *g_rec.entries) Py_DECREF(e);
  g_rec.entries->clear();
}

PyObject* py_recorder(PyObject*, PyObject* args) {
  int rc_ex = 0, rc_classic = 0, nslots = 0, log = 0;
  if (!PyArg_ParseTuple(args, "|iiip", &rc_ex, &rc_classic, &nslots, &log)) return nullptr;
  if (nslots > 64) {
    PyErr_SetString(PyExc_ValueError, "nslots must be at most 64");
    return nullptr;
  }
  clear_log();
  std::vector<PyObject*>* entries = g_rec.entries;
  g_rec = Recorded{};
  g_rec.entries = entries;
  g_rec.nslots = nslots;
  g_rec.rc_ex = rc_ex;
  g_rec.rc_classic = rc_classic;
  g_rec.log = log != 0;
  return Py_BuildValue("(NN)", PyLong_FromVoidPtr(reinterpret_cast<void*>(&record_ex)),
                       PyLong_FromVoidPtr(reinterpret_cast<void*>(&record_classic)));
}

PyObject* py_recorded(PyObject*, PyObject*) {
  if (g_rec.calls == 0) Py_RETURN_NONE;
  int n = g_rec.nslots >= 0 ? g_rec.nslots : static_cast<int>(reinterpret_cast<uintptr_t>(g_rec.function) & 0xFF);
  PyObject* slots = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(g_rec.slots), 8 * n);
  if (slots == nullptr) return nullptr;
  const LaunchConfig& c = g_rec.config;
  return Py_BuildValue("{s:i,s:s,s:(III),s:(III),s:I,s:N,s:N,s:N}", "calls", g_rec.calls, "form",
                       g_rec.form == 1 ? "ex" : "classic", "grid", c.grid[0], c.grid[1], c.grid[2], "block",
                       c.block[0], c.block[1], c.block[2], "shared", c.shared, "stream", PyLong_FromVoidPtr(c.stream),
                       "function", PyLong_FromVoidPtr(g_rec.function), "slots", slots);
}

PyObject* py_log(PyObject*, PyObject*) {
  if (g_rec.entries == nullptr) return PyList_New(0);
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(g_rec.entries->size()));
  if (out == nullptr) return nullptr;
  for (size_t i = 0; i < g_rec.entries->size(); ++i) PyList_SET_ITEM(out, i, (*g_rec.entries)[i]);
  g_rec.entries->clear();  // the references moved into the list
  return out;
}

PyObject* py_ex_state(PyObject*, PyObject* args) {
  PyObject* value = Py_None;
  if (!PyArg_ParseTuple(args, "|O", &value)) return nullptr;
  int old = g_ex_state;
  if (value != Py_None) {
    long v = PyLong_AsLong(value);
    if (v == -1 && PyErr_Occurred()) return nullptr;
    if (v < -1 || v > 1) {
      PyErr_SetString(PyExc_ValueError, "expected -1 (unknown), 0 (refused) or 1 (works)");
      return nullptr;
    }
    g_ex_state = static_cast<int>(v);
  }
  return PyLong_FromLong(old);
}

PyMethodDef launch_methods[] = {
    {"_device_launch_recorder", py_recorder, METH_VARARGS,
     "_device_launch_recorder(rc_ex=0, rc_classic=0, nslots=0, log=False): (address of a cuLaunchKernelEx "
     "stand-in, address of a cuLaunchKernel stand-in) that record their arguments (the first nslots parameter "
     "values copied; nslots < 0: as many as the function handle's low byte says) and return the given codes; "
     "with log, every call is kept for _device_launch_log (tests only)."},
    {"_device_launch_log", py_log, METH_NOARGS,
     "_device_launch_log(): the calls the recorder kept since the last call, as (form, grid, block, shared, "
     "stream, function, slots) tuples."},
    {"_device_launch_recorded", py_recorded, METH_NOARGS,
     "_device_launch_recorded(): what the recorder last received (its first nslots parameter slots as bytes), "
     "or None."},
    {"_device_launch_ex_state", py_ex_state, METH_VARARGS,
     "_device_launch_ex_state(value=None): whether cuLaunchKernelEx works (-1 unknown, 0 no, 1 yes); sets it "
     "when a value is given and returns the previous one."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void bind_device_launch(PyObject* module) {
  LauncherType.tp_name = "ember._C.DeviceLauncher";
  LauncherType.tp_basicsize = sizeof(LauncherObject);
  LauncherType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  LauncherType.tp_doc =
      "DeviceLauncher(launch_ex, launch, function, kinds, block, shared, name, on_error): a compiled kernel "
      "launched by a call (grid, stream, *args) through the driver entry points at the given addresses.";
  LauncherType.tp_new = launcher_new;
  LauncherType.tp_dealloc = launcher_dealloc;
  LauncherType.tp_call = PyVectorcall_Call;
  LauncherType.tp_vectorcall_offset = offsetof(LauncherObject, vectorcall);
  LauncherType.tp_members = launcher_members;
  LauncherType.tp_getset = launcher_getset;
  LauncherType.tp_weaklistoffset = offsetof(LauncherObject, weakreflist);
  if (PyType_Ready(&LauncherType) < 0) throw std::runtime_error("type init");
  Py_INCREF(&LauncherType);
  if (PyModule_AddObject(module, "DeviceLauncher", reinterpret_cast<PyObject*>(&LauncherType)) < 0)
    throw std::runtime_error("module init");
  SiteType.tp_name = "ember._C.DeviceLaunchSite";
  SiteType.tp_basicsize = sizeof(SiteObject);
  SiteType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  SiteType.tp_doc =
      "DeviceLaunchSite(fallback, xnumel, rnumel=1): one launch of a compiled wrapper, called (stream, *args); "
      "native once armed, else fallback(site, *args).";
  SiteType.tp_new = site_new;
  SiteType.tp_dealloc = site_dealloc;
  SiteType.tp_call = PyVectorcall_Call;
  SiteType.tp_vectorcall_offset = offsetof(SiteObject, vectorcall);
  SiteType.tp_methods = site_methods;
  SiteType.tp_members = site_members;
  SiteType.tp_getset = site_getset;
  SiteType.tp_weaklistoffset = offsetof(SiteObject, weakreflist);
  if (PyType_Ready(&SiteType) < 0) throw std::runtime_error("type init");
  Py_INCREF(&SiteType);
  if (PyModule_AddObject(module, "DeviceLaunchSite", reinterpret_cast<PyObject*>(&SiteType)) < 0)
    throw std::runtime_error("module init");
  if (PyModule_AddFunctions(module, launch_methods) < 0) throw std::runtime_error("module init");
}

}  // namespace ember
