// ember._C.OpBase: the C-level base of dispatch.Op, whose call runs the common case of an op
// natively and hands everything else to the Python dispatcher (Op._dispatch, the reference).
//
// The fast path applies only when, checked in C: no dispatch mode was entered, no argument is an
// instance of a tensor subclass that may define __torch_dispatch__, no autocast region is on, no non-strided layout exists
// (dispatch._LAYOUT_DISPATCH), every tensor argument is an ember.Tensor or a plain subclass
// (nn.Parameter: registered by Tensor.__init_subclass__) on the CPU, the dtypes are ones whose
// kernel computes in place (no float16/bfloat16 widening, no complex, no bool), all arguments
// are positional, and the op was marked fast by its declaration (`op._set_fast`: the kinds of
// fast_ops.h, each family in its own file). Inputs that
// require grad: with grad mode off the result has no history; with it on the node is recorded
// natively (autograd_record.h) or the call goes to the Python dispatcher. Then it computes the
// result's dtype and shape, allocates it (tensor_impl.h) and runs the same kernel as the Python
// path. Any doubt (a dtype promotion, a shape that does not broadcast, a kernel error) falls back
// to the Python path, which produces PyTorch's exception.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>

#include "autograd_record.h"
#include "dtype.h"
#include "device_fast_path.h"
#include "fast_ops.h"
#include "tensor_impl.h"

namespace py = pybind11;

namespace ember {

namespace {

PyObject* g_slow_call = nullptr;  // Op._dispatch(self, *args, **kwargs)
int not_handled_marker;

// Integer and float dtypes whose kernels compute in the dtype itself.
bool is_direct_code(int c) { return (c >= 1 && c <= 5) || is_float_code(c); }

// Tensor subclasses that behave as ember.Tensor on the fast path (nn.Parameter): registered by
// Tensor.__init_subclass__ when neither the class nor a base below Tensor defines
// __torch_dispatch__, __torch_function__ or _autograd_alias. A short array: the check is a few
// pointer compares; classes beyond its size simply take the Python path.
constexpr int kMaxPlainTypes = 32;
PyObject* g_plain_types[kMaxPlainTypes] = {};
int g_num_plain_types = 0;

}  // namespace

bool plain_tensor_type(PyObject* tp) {
  if (tp == tensor_class()) return true;
  for (int i = 0; i < g_num_plain_types; ++i)
    if (g_plain_types[i] == tp) return true;
  return false;
}

bool has_dispatch_subclass(PyObject* const* args, Py_ssize_t n) {
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* a = args[i];
    if (PyList_CheckExact(a) || PyTuple_CheckExact(a)) {
      const Py_ssize_t m = PySequence_Fast_GET_SIZE(a);
      PyObject** items = PySequence_Fast_ITEMS(a);
      for (Py_ssize_t j = 0; j < m; ++j)
        if (is_tensor_base(items[j]) && !plain_tensor_type(reinterpret_cast<PyObject*>(Py_TYPE(items[j]))))
          return true;
    } else if (is_tensor_base(a) && !plain_tensor_type(reinterpret_cast<PyObject*>(Py_TYPE(a)))) {
      return true;
    }
  }
  return false;
}

PyTypeObject OpBaseType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyObject* const NOT_HANDLED = reinterpret_cast<PyObject*>(&not_handled_marker);

TensorObject* plain_tensor(PyObject* o, bool below_autograd) {
  if (!plain_tensor_type(reinterpret_cast<PyObject*>(Py_TYPE(o)))) return nullptr;
  auto* t = reinterpret_cast<TensorObject*>(o);
  // A storage resize_ shrank once may be smaller than the tensor: the general path checks bounds.
  if (t->device_kind != kDeviceCPU || (t->rg && !below_autograd) || t->storage_ptr == nullptr || t->storage_ptr->shrunk ||
      t->shape == nullptr ||
      t->stride == nullptr || t->ndim < 0 || t->stride_ndim != t->ndim || !t->offset_ok || t->dtype == nullptr ||
      !is_direct_code(t->dtype_code))
    return nullptr;
  return t;
}

TensorObject* plain_view_source(PyObject* o) {
  if (!plain_tensor_type(reinterpret_cast<PyObject*>(Py_TYPE(o)))) return nullptr;
  auto* t = reinterpret_cast<TensorObject*>(o);
  if (t->device_kind != kDeviceCPU || t->storage_ptr == nullptr || t->shape == nullptr || t->stride == nullptr ||
      t->ndim < 0 || t->stride_ndim != t->ndim || !t->offset_ok || t->dtype == nullptr || t->dtype_code < 0)
    return nullptr;
  return t;
}

namespace {

// NumPy scalars (np.float32(2.5), np.int64(3), np.bool_) are numbers to PyTorch's argument
// parser. Ops take Python numbers, so a call that failed with TypeError while passing one is
// retried once with each converted by .item(): nothing is paid unless such a call fails.
PyObject* g_numpy_number_types = nullptr;  // (numpy.number, numpy.bool_), looked up when first needed

bool is_numpy_scalar(PyObject* o) {
  if (g_numpy_number_types == nullptr) {
    PyObject* numpy = PyImport_ImportModule("numpy");
    if (numpy == nullptr) {
      PyErr_Clear();
      return false;
    }
    PyObject* number = PyObject_GetAttrString(numpy, "number");
    PyObject* bool_ = number ? PyObject_GetAttrString(numpy, "bool_") : nullptr;
    Py_DECREF(numpy);
    if (bool_ == nullptr) {
      Py_XDECREF(number);
      PyErr_Clear();
      return false;
    }
    g_numpy_number_types = PyTuple_Pack(2, number, bool_);
    Py_DECREF(number);
    Py_DECREF(bool_);
    if (g_numpy_number_types == nullptr) {
      PyErr_Clear();
      return false;
    }
  }
  int r = PyObject_IsInstance(o, g_numpy_number_types);
  if (r < 0) PyErr_Clear();
  return r > 0;
}

// The retry described above: `r` is the failed call's result; returns it, or the retried call's.
PyObject* retry_with_numpy_scalars(PyObject* r, PyObject* const* call_args, Py_ssize_t ncall, PyObject* kwnames) {
  if (r != nullptr || !PyErr_ExceptionMatches(PyExc_TypeError)) return r;
  Py_ssize_t total = ncall + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  bool any = false;
  for (Py_ssize_t i = 1; i < total && !any; ++i) any = is_numpy_scalar(call_args[i]);
  if (!any) {
    PyErr_Restore(type, value, tb);
    return nullptr;
  }
  PyObject** converted = static_cast<PyObject**>(PyMem_Malloc(total * sizeof(PyObject*)));
  if (converted == nullptr) {
    PyErr_Restore(type, value, tb);
    return nullptr;
  }
  Py_ssize_t done = 0;
  for (; done < total; ++done) {
    PyObject* a = call_args[done];
    if (done > 0 && is_numpy_scalar(a))  // a NumPy bool reads as a float, as in PyTorch
      converted[done] = PyObject_IsInstance(a, PyTuple_GET_ITEM(g_numpy_number_types, 1)) > 0
                            ? PyNumber_Float(a)
                            : PyObject_CallMethod(a, "item", nullptr);
    else
      converted[done] = Py_NewRef(a);
    if (converted[done] == nullptr) break;
  }
  PyObject* out = nullptr;
  if (done == total) {
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    out = PyObject_Vectorcall(g_slow_call, converted, ncall, kwnames);
  } else {
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
  }
  for (Py_ssize_t i = 0; i < done; ++i) Py_DECREF(converted[i]);
  PyMem_Free(converted);
  return out;
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
    r = retry_with_numpy_scalars(r, slot, nargs + 1, kwnames);
    *slot = saved;
    return r;
  }
  PyObject* small[8];
  PyObject** buf = total + 1 <= 8 ? small : static_cast<PyObject**>(PyMem_Malloc((total + 1) * sizeof(PyObject*)));
  if (buf == nullptr) return PyErr_NoMemory();
  buf[0] = self;
  if (total) std::memcpy(buf + 1, args, total * sizeof(PyObject*));
  PyObject* r = PyObject_Vectorcall(g_slow_call, buf, nargs + 1, kwnames);
  r = retry_with_numpy_scalars(r, buf, nargs + 1, kwnames);
  if (buf != small) PyMem_Free(buf);
  return r;
}

}  // namespace

PyObject* fast_compute(OpObject* op, PyObject* const* args, Py_ssize_t nargs) {
  switch (op->fast) {
    case kBinary: return nargs == 2 ? fast_binary(op, args[0], args[1], true) : NOT_HANDLED;
    case kUnary: return nargs == 1 ? fast_unary(op, args[0], true) : NOT_HANDLED;
    case kView: case kTranspose: case kPermute: case kUnsqueeze: case kExpand:
      return fast_view_kernel(op->fast, args, nargs);
    case kSum: case kMean: return fast_reduce_kernel(op->fast, args, nargs);
    case kMm: return fast_mm_kernel(args, nargs);
    case kWhere: return fast_where_kernel(args, nargs);
    case kAddmm: return fast_addmm_kernel(args, nargs);
    case kSelect: case kSlice: case kSqueeze: case kAlias: return fast_index_view_kernel(op->fast, args, nargs);
    case kBmm: return fast_bmm_kernel(args, nargs);
    default: return NOT_HANDLED;
  }
}

// Inputs that require grad are handled here too: with grad mode off the result simply has no
// history (no_grad, inference_mode); with it on, autograd's node is built natively
// (autograd_record.h) or, when that path declines, the call is left to the Python dispatcher
// before anything ran.
PyObject* fast_call(OpObject* op, PyObject* const* args, Py_ssize_t nargs) {
  bool needs_grad = false;
  bool native_grad_dtypes = true;  // grad_record builds nodes for real floating results only
  bool inference_arg = false;      // an inference tensor: Python's recording rejects saving it
  bool unrecorded_view = false;    // a view made without recording of a tensor requiring grad
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    if (!is_tensor_base(args[i])) continue;
    auto* t = reinterpret_cast<TensorObject*>(args[i]);
    if (t->rg) {
      needs_grad = true;
      if (!is_real_floating_code(t->dtype_code)) native_grad_dtypes = false;
    } else if (t->base != nullptr && is_tensor_base(t->base) && reinterpret_cast<TensorObject*>(t->base)->rg) {
      unrecorded_view = true;
    }
    if (t->storage_ptr != nullptr && t->storage_ptr->inference) inference_arg = true;
  }
  if (unrecorded_view && !needs_grad) {
    // It requires grad through its base (Note [Views made without recording]): with grad mode on
    // the Python dispatcher records the op, the view's edge carrying nothing, as PyTorch's.
    int on = grad_enabled_now();
    if (on < 0) return nullptr;
    if (on) return NOT_HANDLED;
  }
  int plan = kGradNone;
  PyObject* spec = nullptr;
  if (needs_grad) {
    int on = grad_enabled_now();
    if (on < 0) return nullptr;
    if (on && inference_arg) return NOT_HANDLED;
    // Complex tensors that need grad record through Python (the view kernels take any dtype, and
    // their results would otherwise get no history).
    if (on && !native_grad_dtypes) return NOT_HANDLED;
    if (on) plan = grad_plan(reinterpret_cast<PyObject*>(op), &op->grad_spec, &spec);
    if (plan == kGradError) return nullptr;
  }
  if (plan == kGradPython) return NOT_HANDLED;
  PyObject* r = fast_compute(op, args, nargs);
  if (r != NOT_HANDLED && r != nullptr && plan == kGradRecord && grad_record(spec, r, args, nargs) < 0) Py_CLEAR(r);
  return r;
}

namespace {

// The native call: computes when no dispatch layer applies, else the Python dispatcher.
PyObject* op_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  bool on_device;  // CUDA (plugin-device) tensors: device_fast_path.cpp
  PyObject* device_result = device_fast_call(self, args, nargsf, kwnames, &on_device);
  if (on_device) return device_result;
  auto* op = reinterpret_cast<OpObject*>(self);
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (op->fast != kNone && kwnames == nullptr && nargs <= 5 && plain_dispatch_for(self, args, nargs, nullptr)) {
    if (op->fast == kBinaryInplace) {
      // In-place ops record through Python (leaf and view checks, CopySlices); without grad
      // recording they run here: no_grad (optimizer steps), gradient accumulation.
      if (nargs != 2) return call_slow(self, args, nargsf, kwnames);
      // A write to an inference tensor: the Python dispatcher raises outside inference mode.
      if (is_tensor_base(args[0])) {
        Storage* st = reinterpret_cast<TensorObject*>(args[0])->storage_ptr;
        if (st != nullptr && st->inference) return call_slow(self, args, nargsf, kwnames);
      }
      bool needs_grad = false;
      for (Py_ssize_t i = 0; i < 2; ++i)
        if (is_tensor_base(args[i]) && reinterpret_cast<TensorObject*>(args[i])->rg) needs_grad = true;
      // A write into a view of a tensor that requires grad, made without recording (no_grad):
      // autograd's in-place check refuses it in grad mode (Note [Views made without recording]).
      if (!needs_grad && is_tensor_base(args[0])) {
        PyObject* base = reinterpret_cast<TensorObject*>(args[0])->base;
        if (base != nullptr && is_tensor_base(base) && reinterpret_cast<TensorObject*>(base)->rg) needs_grad = true;
      }
      if (needs_grad) {
        int on = grad_enabled_now();
        if (on < 0) return nullptr;
        if (on) return call_slow(self, args, nargsf, kwnames);
      }
      PyObject* r = fast_binary_inplace(op, args[0], args[1]);
      if (r != NOT_HANDLED) return r;
      return call_slow(self, args, nargsf, kwnames);
    }
    PyObject* r = fast_call(op, args, nargs);
    if (r != NOT_HANDLED) return r;
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
  PyObject* r = fast_compute(op, &PyTuple_GET_ITEM(call_args, 0), n);
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
  if (kind < kNone || kind > kLastKind) {
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
  bind_fast_front(module);
  bind_operator_method(module);
  bind_fast_index(module);
}

}  // namespace ember
