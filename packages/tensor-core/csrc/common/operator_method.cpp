// _C.OperatorMethod(fn): Tensor's binary operators (`__add__`, `__radd__`, `__iadd__`, ...).
//
// Python's operator protocol needs `NotImplemented`, not an exception, from an operand that
// does not know the other one: `tensor + w` must reach `type(w).__radd__`, and `tensor + "a"`
// must raise Python's own "unsupported operand type(s)". The op a method stands for raises
// TypeError for an argument it cannot take (as `ember.add(t, w)` must); this wrapper turns that
// TypeError into NotImplemented, as PyTorch's Tensor operators do. It costs one vectorcall:
// with Py_TPFLAGS_METHOD_DESCRIPTOR, `a + b` calls it as fn(a, b) without a bound method.
#include <stdexcept>

#include "fast_ops.h"

namespace ember {

namespace {

struct OperatorObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* fn;  // the op or Python function the operator calls, owned
};

PyTypeObject OperatorType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject* operator_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  PyObject* r = PyObject_Vectorcall(reinterpret_cast<OperatorObject*>(self)->fn, args, nargsf, kwnames);
  if (r == nullptr && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();
    return Py_NewRef(Py_NotImplemented);
  }
  return r;
}

PyObject* operator_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* fn;
  if (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "OperatorMethod() takes no keyword arguments");
    return nullptr;
  }
  if (!PyArg_ParseTuple(args, "O:OperatorMethod", &fn)) return nullptr;
  if (!PyCallable_Check(fn)) {
    PyErr_SetString(PyExc_TypeError, "OperatorMethod(fn): fn must be callable");
    return nullptr;
  }
  auto* self = reinterpret_cast<OperatorObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->vectorcall = operator_call;
  self->fn = Py_NewRef(fn);
  return reinterpret_cast<PyObject*>(self);
}

void operator_dealloc(PyObject* self) {
  Py_CLEAR(reinterpret_cast<OperatorObject*>(self)->fn);
  Py_TYPE(self)->tp_free(self);
}

PyObject* operator_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

// The wrapped function's attributes (__name__, __doc__, ...): the operator presents itself as it.
PyObject* operator_getattro(PyObject* self, PyObject* name) {
  PyObject* fn = reinterpret_cast<OperatorObject*>(self)->fn;
  if (PyUnicode_Check(name) && (PyUnicode_CompareWithASCIIString(name, "__doc__") == 0 ||
                                PyUnicode_CompareWithASCIIString(name, "__module__") == 0))
    return PyObject_GetAttr(fn, name);
  PyObject* r = PyObject_GenericGetAttr(self, name);
  if (r != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) return r;
  PyErr_Clear();
  return PyObject_GetAttr(fn, name);
}

PyObject* operator_repr(PyObject* self) {
  return PyUnicode_FromFormat("<operator %R>", reinterpret_cast<OperatorObject*>(self)->fn);
}

PyObject* operator_wrapped(PyObject* self, void*) {
  return Py_NewRef(reinterpret_cast<OperatorObject*>(self)->fn);
}

PyGetSetDef operator_getset[] = {
    {"__wrapped__", operator_wrapped, nullptr, "The function the operator calls.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

}  // namespace

void bind_operator_method(PyObject* module) {
  OperatorType.tp_name = "ember._C.OperatorMethod";
  OperatorType.tp_basicsize = sizeof(OperatorObject);
  OperatorType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  OperatorType.tp_doc = "A Tensor operator: calls fn, and answers NotImplemented where fn raises TypeError.";
  OperatorType.tp_vectorcall_offset = offsetof(OperatorObject, vectorcall);
  OperatorType.tp_call = PyVectorcall_Call;
  OperatorType.tp_descr_get = operator_descr_get;
  OperatorType.tp_new = operator_new;
  OperatorType.tp_dealloc = operator_dealloc;
  OperatorType.tp_getattro = operator_getattro;
  OperatorType.tp_repr = operator_repr;
  OperatorType.tp_getset = operator_getset;
  if (PyType_Ready(&OperatorType) < 0) throw std::runtime_error("type init");
  Py_INCREF(&OperatorType);
  if (PyModule_AddObject(module, "OperatorMethod", reinterpret_cast<PyObject*>(&OperatorType)) < 0)
    throw std::runtime_error("module init");
}

}  // namespace ember
