// ember._C.OpBase: the C-level base of dispatch.Op, whose call runs the common case of an op
// natively and hands everything else to the Python dispatcher (Op._dispatch, the reference).
//
// The fast path applies only when, checked in C: no dispatch mode was entered, no tensor
// subclass defines __torch_dispatch__, no autocast region is on, no non-strided layout exists
// (dispatch._LAYOUT_DISPATCH), every tensor argument is an ember.Tensor or a plain subclass
// (nn.Parameter: registered by Tensor.__init_subclass__) on the CPU, the dtypes are ones whose
// kernel computes in place (no float16/bfloat16 widening, no complex, no bool), all arguments
// are positional, and the op was marked fast by its declaration (pointwise.py). Inputs that
// require grad: with grad mode off the result has no history; with it on the node is recorded
// natively (autograd_record.h) or the call goes to the Python dispatcher. Then it computes the result's dtype and broadcast shape,
// allocates it (tensor_impl.h) and runs the same kernel as the Python path. Any doubt (a
// dtype promotion, a shape that does not broadcast, a kernel error) falls back to the Python
// path, which produces PyTorch's exception.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>

#include "autograd_record.h"
#include "device_fast_path.h"
#include "tensor_impl.h"

namespace py = pybind11;

namespace ember {

void run_binary_kernel(int code, py::handle out, py::handle a, py::handle b);
void run_binary_scalar_kernel(int code, py::handle out, py::handle a, py::handle scalar, bool reverse);
void run_unary_kernel(int code, py::handle out, py::handle a);

namespace {

enum FastKind : int8_t { kNone = 0, kBinary = 1, kUnary = 2, kBinaryInplace = 3 };
// Binary result kinds (pointwise.py's _SAME_RESULT, _FLOAT_RESULT, _BOOL_RESULT).
enum BinaryResult : int8_t { kSameResult = 0, kFloatResult = 1, kBoolResult = 2 };
// Unary kinds (pointwise.py's _FLOAT_OP, _KEEP_OP, _PREDICATE_OP): floating inputs only, so the
// result keeps the input dtype, or is bool for predicates.
enum UnaryResult : int8_t { kUnaryKeep = 0, kUnaryPredicate = 1 };

struct OpObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  int32_t code;
  int8_t fast;
  int8_t result;
  PyObject* grad_spec;  // autograd's recording spec for this op (autograd_record.h), owned
};

PyObject* g_slow_call = nullptr;  // Op._dispatch(self, *args, **kwargs)
PyObject* NOT_HANDLED = reinterpret_cast<PyObject*>(&NOT_HANDLED);

constexpr int kBool = 0, kFloat32 = 8, kFloat64 = 9;

bool is_float_code(int c) { return c == kFloat32 || c == kFloat64; }
// Integer and float dtypes whose kernels compute in the dtype itself.
bool is_direct_code(int c) { return (c >= 1 && c <= 5) || is_float_code(c); }

PyTypeObject OpBaseType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// Tensor subclasses that behave as ember.Tensor on the fast path (nn.Parameter): registered by
// Tensor.__init_subclass__ when neither the class nor a base below Tensor defines
// __torch_dispatch__, __torch_function__ or _autograd_alias. A short array: the check is a few
// pointer compares; classes beyond its size simply take the Python path.
constexpr int kMaxPlainTypes = 32;
PyObject* g_plain_types[kMaxPlainTypes] = {};
int g_num_plain_types = 0;

inline bool plain_tensor_type(PyObject* tp) {
  if (tp == tensor_class()) return true;
  for (int i = 0; i < g_num_plain_types; ++i)
    if (g_plain_types[i] == tp) return true;
  return false;
}

// A tensor argument the fast path can take, or null. `below_autograd`: called from
// Op.call_kernel, under the autograd layer, where inputs may require grad.
TensorObject* plain_tensor(PyObject* o, bool below_autograd) {
  if (!plain_tensor_type(reinterpret_cast<PyObject*>(Py_TYPE(o)))) return nullptr;
  auto* t = reinterpret_cast<TensorObject*>(o);
  if (t->device_kind != kDeviceCPU || (t->rg && !below_autograd) || t->storage_ptr == nullptr || t->shape == nullptr ||
      t->stride == nullptr || t->ndim < 0 || t->stride_ndim != t->ndim || !t->offset_ok || t->dtype == nullptr ||
      !is_direct_code(t->dtype_code))
    return nullptr;
  return t;
}

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

PyObject* call_slow(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  if (g_slow_call == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "ember._C.OpBase: the dispatcher is not registered");
    return nullptr;
  }
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  Py_ssize_t total = nargs + nkw;
  if (nargsf & PY_VECTORCALL_ARGUMENTS_OFFSET) {
    // The caller left a free slot before args: borrow it for self (the vectorcall protocol).
    PyObject** slot = const_cast<PyObject**>(args) - 1;
    PyObject* saved = *slot;
    *slot = self;
    PyObject* r = PyObject_Vectorcall(g_slow_call, slot, nargs + 1, kwnames);
    *slot = saved;
    return r;
  }
  PyObject* small[8];
  PyObject** buf = total + 1 <= 8 ? small : static_cast<PyObject**>(PyMem_Malloc((total + 1) * sizeof(PyObject*)));
  if (buf == nullptr) return PyErr_NoMemory();
  buf[0] = self;
  if (total) std::memcpy(buf + 1, args, total * sizeof(PyObject*));
  PyObject* r = PyObject_Vectorcall(g_slow_call, buf, nargs + 1, kwnames);
  if (buf != small) PyMem_Free(buf);
  return r;
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

// The op's kernel on plain tensors, or NOT_HANDLED (null with an error set on failure).
PyObject* fast_compute(OpObject* op, PyObject* const* args, Py_ssize_t nargs) {
  if (op->fast == kBinary && nargs == 2) return fast_binary(op, args[0], args[1], true);
  if (op->fast == kUnary && nargs == 1) return fast_unary(op, args[0], true);
  return NOT_HANDLED;
}

// The native call: computes when no dispatch layer applies. Inputs that require grad are
// handled here too: with grad mode off the result simply has no history (no_grad,
// inference_mode); with it on, autograd's node is built natively (autograd_record.h) or, when
// that path declines, the whole call goes to the Python dispatcher before anything ran.
PyObject* op_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  bool on_device;  // CUDA (plugin-device) tensors: device_fast_path.cpp
  PyObject* device_result = device_fast_call(self, args, nargsf, kwnames, &on_device);
  if (on_device) return device_result;
  auto* op = reinterpret_cast<OpObject*>(self);
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (op->fast != kNone && kwnames == nullptr && nargs <= 2 && plain_dispatch()) {
    bool needs_grad = false;
    for (Py_ssize_t i = 0; i < nargs; ++i)
      if (is_tensor_base(args[i]) && reinterpret_cast<TensorObject*>(args[i])->rg) needs_grad = true;
    int plan = kGradNone;
    PyObject* spec = nullptr;
    if (op->fast == kBinaryInplace) {
      // In-place ops record through Python (leaf and view checks, CopySlices); without grad
      // recording they run here: no_grad (optimizer steps), gradient accumulation.
      if (nargs != 2) return call_slow(self, args, nargsf, kwnames);
      if (needs_grad) {
        int on = grad_enabled_now();
        if (on < 0) return nullptr;
        if (on) return call_slow(self, args, nargsf, kwnames);
      }
      PyObject* r = fast_binary_inplace(op, args[0], args[1]);
      if (r != NOT_HANDLED) return r;
      return call_slow(self, args, nargsf, kwnames);
    }
    if (needs_grad) {
      int on = grad_enabled_now();
      if (on < 0) return nullptr;
      if (on) plan = grad_plan(self, &op->grad_spec, &spec);
      if (plan == kGradError) return nullptr;
    }
    if (plan != kGradPython) {
      PyObject* r = fast_compute(op, args, nargs);
      if (r != NOT_HANDLED) {
        if (r != nullptr && plan == kGradRecord && grad_record(spec, r, args, nargs) < 0) Py_CLEAR(r);
        return r;
      }
    }
  }
  return call_slow(self, args, nargsf, kwnames);
}

// _C._native_kernel(op, args): the op's CPU kernel run natively on positional args, below every
// dispatch layer (what Op.call_kernel does after the autograd layer recorded the call); None when
// the call is not one the fast path takes (the caller then runs the Python kernel).
PyObject* py_native_kernel(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyObject_TypeCheck(args[0], &OpBaseType) || !PyTuple_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "_native_kernel(op, args: tuple)");
    return nullptr;
  }
  auto* op = reinterpret_cast<OpObject*>(args[0]);
  PyObject* call_args = args[1];
  Py_ssize_t n = PyTuple_GET_SIZE(call_args);
  PyObject* layout = g_dispatch.layout_dispatch;
  if (op->fast == kNone || op->fast == kBinaryInplace || layout == nullptr || PyList_GET_ITEM(layout, 0) != Py_False)
    Py_RETURN_NONE;
  PyObject* r = NOT_HANDLED;
  if (op->fast == kBinary && n == 2)
    r = fast_binary(op, PyTuple_GET_ITEM(call_args, 0), PyTuple_GET_ITEM(call_args, 1), true);
  else if (op->fast == kUnary && n == 1)
    r = fast_unary(op, PyTuple_GET_ITEM(call_args, 0), true);
  if (r == NOT_HANDLED) Py_RETURN_NONE;
  return r;
}

PyObject* op_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = type->tp_alloc(type, 0);
  if (self != nullptr) reinterpret_cast<OpObject*>(self)->vectorcall = op_vectorcall;
  return self;
}

// Bound as a method: Tensor.__add__ is the op itself (Py_TPFLAGS_METHOD_DESCRIPTOR lets CPython
// call it with the tensor first, without creating a bound method).
void op_dealloc(PyObject* self) {
  Py_CLEAR(reinterpret_cast<OpObject*>(self)->grad_spec);
  Py_TYPE(self)->tp_free(self);
}

// _C._set_plain_subclass(cls): cls (a Tensor subclass with no dispatch hooks of its own) takes
// the fast path as ember.Tensor does; returns whether it was registered.
PyObject* py_set_plain_subclass(PyObject*, PyObject* cls) {
  if (!PyType_Check(cls) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), &TensorBaseType)) {
    PyErr_SetString(PyExc_TypeError, "_set_plain_subclass(cls): a Tensor subclass");
    return nullptr;
  }
  if (plain_tensor_type(cls)) Py_RETURN_TRUE;
  if (g_num_plain_types >= kMaxPlainTypes) Py_RETURN_FALSE;
  g_plain_types[g_num_plain_types++] = Py_NewRef(cls);
  Py_RETURN_TRUE;
}

PyObject* op_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

// op._set_fast(kind, code, result): marks the op for the native fast path (0 turns it off).
PyObject* op_set_fast(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "_set_fast(kind, code, result)");
    return nullptr;
  }
  long kind = PyLong_AsLong(args[0]), code = PyLong_AsLong(args[1]), result = PyLong_AsLong(args[2]);
  if (PyErr_Occurred()) return nullptr;
  if (kind < kNone || kind > kBinaryInplace) {
    PyErr_SetString(PyExc_ValueError, "_set_fast: unknown kind");
    return nullptr;
  }
  auto* op = reinterpret_cast<OpObject*>(self);
  op->fast = static_cast<int8_t>(kind);
  op->code = static_cast<int32_t>(code);
  op->result = static_cast<int8_t>(result);
  Py_RETURN_NONE;
}

PyObject* op_get_fast(PyObject* self, void*) {
  return PyBool_FromLong(reinterpret_cast<OpObject*>(self)->fast != kNone);
}

PyMethodDef op_methods[] = {
    {"_set_fast", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(op_set_fast)), METH_FASTCALL,
     "_set_fast(kind, code, result): 1 binary / 2 unary kernel `code` on the native fast path; 0 off."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef op_getset[] = {
    {"_fast", op_get_fast, nullptr, "Whether calls may take the native fast path.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

// _C._op_setup(Op, Op._dispatch): registers the Python dispatcher and gives the Op class the
// vectorcall and method-descriptor behaviour of this base (heap subclasses do not inherit them).
PyObject* py_op_setup(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyType_Check(args[0]) ||
      !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(args[0]), &OpBaseType)) {
    PyErr_SetString(PyExc_TypeError, "_op_setup(Op class, dispatch function)");
    return nullptr;
  }
  auto* cls = reinterpret_cast<PyTypeObject*>(args[0]);
  if (cls->tp_call == OpBaseType.tp_call && cls->tp_descr_get == OpBaseType.tp_descr_get) {
    cls->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
    PyType_Modified(cls);
  }
  Py_XSETREF(g_slow_call, Py_NewRef(args[1]));
  Py_RETURN_NONE;
}

PyMethodDef module_functions[] = {
    {"_op_setup", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_op_setup)), METH_FASTCALL,
     "Registers dispatch.Op and its Python dispatcher with the native fast path."},
    {"_set_plain_subclass", py_set_plain_subclass, METH_O,
     "_set_plain_subclass(cls): a Tensor subclass without dispatch hooks takes the native fast path."},
    {"_native_kernel", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_native_kernel)), METH_FASTCALL,
     "_native_kernel(op, args): the op's kernel run natively below every dispatch layer, or None."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void bind_fast_dispatch(PyObject* module) {
  OpBaseType.tp_name = "ember._C.OpBase";
  OpBaseType.tp_basicsize = sizeof(OpObject);
  OpBaseType.tp_flags =
      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  OpBaseType.tp_doc = "The C-level base of dispatch.Op: the native fast path of an op call.";
  OpBaseType.tp_vectorcall_offset = offsetof(OpObject, vectorcall);
  OpBaseType.tp_call = PyVectorcall_Call;
  OpBaseType.tp_descr_get = op_descr_get;
  OpBaseType.tp_new = op_new;
  OpBaseType.tp_dealloc = op_dealloc;
  OpBaseType.tp_methods = op_methods;
  OpBaseType.tp_getset = op_getset;
  if (PyType_Ready(&OpBaseType) < 0) throw py::error_already_set();
  Py_INCREF(&OpBaseType);
  if (PyModule_AddObject(module, "OpBase", reinterpret_cast<PyObject*>(&OpBaseType)) < 0)
    throw py::error_already_set();
  if (PyModule_AddFunctions(module, module_functions) < 0) throw py::error_already_set();
  bind_autograd_record(module);
}

}  // namespace ember
