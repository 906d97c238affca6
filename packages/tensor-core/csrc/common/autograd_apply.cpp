// OpNode's own `apply` and `_release` in C (see autograd_apply.h): the engine loop runs these
// for autograd's ordinary nodes, so a backward step calls into Python only for the formula.
// What ember-autograd registers with _C._engine_setup (OpNode.apply, OpNode._release, Inputs,
// fix_grad, SavedTensor) is how a node's class is recognised and how its inputs are rebuilt.
#include "autograd_apply.h"

#include <stdexcept>

#include "autograd_record.h"
#include "tensor_impl.h"

namespace ember {

namespace {

PyObject* s_apply = nullptr;
PyObject* s_release = nullptr;
PyObject* s_backward = nullptr;
PyObject* s_unpack = nullptr;

// Registered by autograd (_C._engine_setup): OpNode's own apply and _release (a node whose class
// has these runs them natively here), Inputs, fix_grad and the SavedTensor class.
struct EngineRegistry {
  PyObject* opnode_apply = nullptr;
  PyObject* opnode_release = nullptr;
  PyObject* inputs_cls = nullptr;
  PyObject* fix_grad = nullptr;
  PyObject* saved_cls = nullptr;
  PyObject* node_release = nullptr;  // Node._release (what AccumulateGrad inherits): optional
  // Formulas run here without their Python frame (_C._engine_native_formulas): views' _reshape_back,
  // _transpose, _to_copy's.
  PyObject* reshape_back = nullptr;
  PyObject* transpose = nullptr;
  PyObject* to_copy = nullptr;
};
EngineRegistry g_eng;

bool has_own(PyObject* node, PyObject* name, PyObject* expected) {
  return expected != nullptr && is_node(node) && _PyType_Lookup(Py_TYPE(node), name) == expected;
}

void clear_saved(PyObject* v) {
  if (PyObject_TypeCheck(v, reinterpret_cast<PyTypeObject*>(g_eng.saved_cls))) {
    PyObject** data = saved_data_slot(v);
    Py_XSETREF(*data, Py_NewRef(Py_None));
  }
}

}  // namespace

PyObject* none_list(Py_ssize_t n) {
  PyObject* l = PyList_New(n);
  if (l == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) PyList_SET_ITEM(l, i, Py_NewRef(Py_None));
  return l;
}

bool native_apply_applies(PyObject* node) { return has_own(node, s_apply, g_eng.opnode_apply); }
bool native_release_applies(PyObject* node) { return has_own(node, s_release, g_eng.opnode_release); }

bool node_release_applies(PyObject* node) { return has_own(node, s_release, g_eng.node_release); }

void node_release(PyObject* fn) {
  Py_XSETREF(reinterpret_cast<NodeObject*>(fn)->released, Py_NewRef(Py_True));
}

void opnode_release(PyObject* fn) {
  auto* n = reinterpret_cast<NodeObject*>(fn);
  Py_XSETREF(n->released, Py_NewRef(Py_True));
  if (n->saved_args != nullptr && PyTuple_Check(n->saved_args)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(n->saved_args); ++i) {
      PyObject* v = PyTuple_GET_ITEM(n->saved_args, i);
      if (PyList_CheckExact(v)) {
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(v); ++j) clear_saved(PyList_GET_ITEM(v, j));
      } else {
        clear_saved(v);
      }
    }
  }
  if (n->kwargs != nullptr && PyDict_Check(n->kwargs)) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(n->kwargs, &pos, &k, &v)) clear_saved(v);
  }
  if (n->saved_outputs != nullptr && PyTuple_Check(n->saved_outputs))
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(n->saved_outputs); ++i) clear_saved(PyTuple_GET_ITEM(n->saved_outputs, i));
}

namespace {
int not_native_marker;
}  // namespace
PyObject* const NOT_NATIVE = reinterpret_cast<PyObject*>(&not_native_marker);

static PyObject* s_args = nullptr;
static PyObject* s_kwargs = nullptr;
static PyObject* s_shape = nullptr;
static PyObject* s_reshape = nullptr;
static PyObject* s_transpose = nullptr;
static PyObject* s_src_device = nullptr;
static PyObject* s_device = nullptr;
static PyObject* s_to = nullptr;

// The formulas registered with _C._engine_native_formulas, restated for the common node: the result
// (a new reference: a 1-tuple), null with an error set, or NOT_NATIVE when the Python formula must run
// (another formula, an argument the formula would have to unpack). Each makes the calls the Python
// formula makes, on the same objects, in the same order:
//   _reshape_back: grads[0].reshape(inputs.args[0].shape)
//   _transpose:    grads[0].transpose(args[1], args[2]) for args of 3 (tuple.__getitem__, as the formula reads)
//   _to_copy:      grads[0], or grads[0].to(device) when it is not on the device the input came from
//                  (a stand-in's _src_device, else the input's _device)
static PyObject* native_formula(PyObject* backward, PyObject* grads, PyObject* args, PyObject* kwargs) {
  if (backward != g_eng.reshape_back && backward != g_eng.transpose && backward != g_eng.to_copy) return NOT_NATIVE;
  if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) < 1 || PyList_GET_SIZE(grads) < 1) return NOT_NATIVE;
  PyObject* g = PyList_GET_ITEM(grads, 0);
  PyObject* src = PyTuple_GET_ITEM(args, 0);
  if (!is_tensor_base(g)) return NOT_NATIVE;
  // _reshape_back and _to_copy read the input: a stand-in (meta_only formulas); a SavedTensor there would need
  // unpacking (the formula's), transpose reads only its dims
  if (backward != g_eng.transpose && !is_tensor_base(src)) return NOT_NATIVE;
  PyObject* r = nullptr;
  if (backward == g_eng.reshape_back) {
    PyObject* shape = PyObject_GetAttr(src, s_shape);
    if (shape == nullptr) return nullptr;
    r = PyObject_CallMethodOneArg(g, s_reshape, shape);
    Py_DECREF(shape);
  } else if (backward == g_eng.transpose) {
    if (PyTuple_GET_SIZE(args) != 3) return NOT_NATIVE;  // (the formula's own condition: dims as a plain 3-tuple)
    PyObject* margs[3] = {g, PyTuple_GET_ITEM(args, 1), PyTuple_GET_ITEM(args, 2)};
    r = PyObject_VectorcallMethod(s_transpose, margs, 3, nullptr);
  } else {
    PyObject* sd = reinterpret_cast<TensorObject*>(src)->src_device;  // (src is a tensor: checked above)
    PyObject* device = sd != nullptr ? Py_NewRef(sd) : PyObject_GetAttr(src, s_src_device);
    if (device == nullptr) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
      PyErr_Clear();
      device = PyObject_GetAttr(src, s_device);
      if (device == nullptr) return nullptr;
    }
    PyObject* gdev = PyObject_GetAttr(g, s_device);
    int same = gdev == nullptr ? -1 : gdev == device ? 1 : PyObject_RichCompareBool(gdev, device, Py_EQ);
    Py_XDECREF(gdev);
    if (same > 0) r = Py_NewRef(g);
    else if (same == 0) r = PyObject_CallMethodOneArg(g, s_to, device);
    Py_DECREF(device);
  }
  if (r == nullptr) return nullptr;
  PyObject* t = PyTuple_Pack(1, r);
  Py_DECREF(r);
  return t;
}

// Inputs(args, kwargs) (formulas/_registry.py: a slotted class whose __init__ only stores the two) built
// without running its Python __init__: allocated, its two slots set. One is made per backward node.
static PyObject* new_inputs(PyObject* args, PyObject* kwargs) {
  auto* tp = reinterpret_cast<PyTypeObject*>(g_eng.inputs_cls);
  PyObject* inputs = tp->tp_alloc(tp, 0);
  if (inputs == nullptr) return nullptr;
  if (PyObject_SetAttr(inputs, s_args, args) < 0 || PyObject_SetAttr(inputs, s_kwargs, kwargs) < 0) {
    Py_DECREF(inputs);
    return nullptr;
  }
  return inputs;
}

// Whether a node's kwargs hold nothing the formula must see unpacked (OpNode.apply's _has_saved: no
// SavedTensor, no list), so the dict is passed to the formula as it is (addmm's alpha/beta, the
// dtype/device of autocast's casts).
static bool kwargs_plain(PyObject* kwargs) {
  Py_ssize_t pos = 0;
  PyObject *key, *value;
  while (PyDict_Next(kwargs, &pos, &key, &value))
    if (Py_TYPE(value) == reinterpret_cast<PyTypeObject*>(g_eng.saved_cls) || PyList_CheckExact(value)) return false;
  return true;
}

// OpNode.apply for the common node (no saved kwargs, no args needing the node): the formula's
// gradients, one per edge, checked against each input's shape and dtype (fix_grad otherwise).
// NOT_NATIVE when the Python method must run.
PyObject* opnode_apply(PyObject* fn, PyObject* grads) {
  auto* n = reinterpret_cast<NodeObject*>(fn);
  if (n->args_need_node != Py_False || n->kwargs == nullptr || !PyDict_Check(n->kwargs) ||
      (PyDict_GET_SIZE(n->kwargs) != 0 && !kwargs_plain(n->kwargs)) || n->saved_args == nullptr || n->formula == nullptr ||
      n->layout == nullptr || !(PyList_CheckExact(n->layout) || PyTuple_CheckExact(n->layout)) ||
      n->input_meta == nullptr || !(PyList_CheckExact(n->input_meta) || PyTuple_CheckExact(n->input_meta)) ||
      n->saved_outputs == nullptr || !PyTuple_Check(n->saved_outputs) ||
      n->next == nullptr || !PyTuple_Check(n->next) || !PyList_CheckExact(grads) || PyList_GET_SIZE(grads) < 1)
    return NOT_NATIVE;
  Py_ssize_t n_next = PyTuple_GET_SIZE(n->next);
  bool any = false;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(grads); ++i) any = any || PyList_GET_ITEM(grads, i) != Py_None;
  if (!any) return none_list(n_next);
  PyObject* history = n->history_node == nullptr || n->history_node == Py_None ? fn : n->history_node;
  Py_ssize_t n_out = PyTuple_GET_SIZE(n->saved_outputs);
  PyObject* outputs = PyTuple_New(n_out);
  if (outputs == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < n_out; ++i) {
    PyObject* s = PyTuple_GET_ITEM(n->saved_outputs, i);
    PyObject* v = s == Py_None ? Py_NewRef(Py_None) : PyObject_CallMethodOneArg(s, s_unpack, history);
    if (v == nullptr) {
      Py_DECREF(outputs);
      return nullptr;
    }
    PyTuple_SET_ITEM(outputs, i, v);
  }
  PyObject* backward = PyObject_GetAttr(n->formula, s_backward);
  PyObject* res = backward == nullptr ? nullptr : native_formula(backward, grads, n->saved_args, n->kwargs);
  if (res == NOT_NATIVE) {
    PyObject* inputs = new_inputs(n->saved_args, n->kwargs);
    res = nullptr;
    if (inputs != nullptr) {
      PyObject* bargs[3] = {grads, inputs, outputs};
      res = PyObject_Vectorcall(backward, bargs, 3, nullptr);
      Py_DECREF(inputs);
    }
  }
  Py_XDECREF(backward);
  Py_DECREF(outputs);
  if (res == nullptr) return nullptr;
  PyObject* seq;
  if (res == Py_None || is_tensor_base(res)) {
    seq = PyTuple_Pack(1, res);
    Py_DECREF(res);
  } else {
    seq = PySequence_Fast(res, "a backward formula must return a tensor, None or a sequence");
    Py_DECREF(res);
  }
  if (seq == nullptr) return nullptr;
  PyObject* out = none_list(n_next);
  if (out == nullptr) {
    Py_DECREF(seq);
    return nullptr;
  }
  Py_ssize_t n_res = PySequence_Fast_GET_SIZE(seq);
  PyObject* layout = n->layout;
  PyObject* meta = n->input_meta;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(layout) && i < n_res; ++i) {
    PyObject* spec = PySequence_Fast_GET_ITEM(layout, i);
    PyObject* g = PySequence_Fast_GET_ITEM(seq, i);
    if (spec == Py_None || g == Py_None) continue;
    if (PyLong_CheckExact(spec)) {
      Py_ssize_t e = PyLong_AsSsize_t(spec);
      if (e < 0 || e >= n_next || e >= PySequence_Fast_GET_SIZE(meta)) {
        PyErr_SetString(PyExc_RuntimeError, "autograd: a node's layout does not match its edges");
        goto fail;
      }
      PyObject* m = PySequence_Fast_GET_ITEM(meta, e);
      PyObject* fixed = nullptr;
      if (is_tensor_base(g) && PyTuple_Check(m) && PyTuple_GET_SIZE(m) == 2) {
        auto* t = reinterpret_cast<TensorObject*>(g);
        PyObject* shape = PyTuple_GET_ITEM(m, 0);
        int same = t->shape == shape ? 1 : t->shape == nullptr ? 0 : PyObject_RichCompareBool(t->shape, shape, Py_EQ);
        if (same < 0) goto fail;
        if (same && t->dtype == PyTuple_GET_ITEM(m, 1)) fixed = Py_NewRef(g);
      }
      if (fixed == nullptr) {
        PyObject* fargs[4] = {g, m, fn, spec};
        fixed = PyObject_Vectorcall(g_eng.fix_grad, fargs, 4, nullptr);
        if (fixed == nullptr) goto fail;
      }
      Py_SETREF(PyList_GET_ITEM(out, e), fixed);
    } else {
      // A Tensor[] argument: one edge per element (None where the element has none).
      PyObject* gs = PySequence_Fast(g, "a gradient for a tensor list must be a sequence");
      PyObject* specs = gs == nullptr ? nullptr : PySequence_Fast(spec, "layout");
      if (specs == nullptr) {
        Py_XDECREF(gs);
        goto fail;
      }
      for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(specs) && j < PySequence_Fast_GET_SIZE(gs); ++j) {
        PyObject* ej = PySequence_Fast_GET_ITEM(specs, j);
        PyObject* gj = PySequence_Fast_GET_ITEM(gs, j);
        if (ej == Py_None || gj == Py_None) continue;
        Py_ssize_t e = PyLong_AsSsize_t(ej);
        if (e < 0 || e >= n_next || e >= PySequence_Fast_GET_SIZE(meta)) {
          if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "autograd: a node's layout does not match its edges");
          Py_DECREF(gs);
          Py_DECREF(specs);
          goto fail;
        }
        PyObject* fargs[4] = {gj, PySequence_Fast_GET_ITEM(meta, e), fn, ej};
        PyObject* fixed = PyObject_Vectorcall(g_eng.fix_grad, fargs, 4, nullptr);
        if (fixed == nullptr) {
          Py_DECREF(gs);
          Py_DECREF(specs);
          goto fail;
        }
        Py_SETREF(PyList_GET_ITEM(out, e), fixed);
      }
      Py_DECREF(gs);
      Py_DECREF(specs);
    }
  }
  Py_DECREF(seq);
  return out;
fail:
  Py_DECREF(seq);
  Py_DECREF(out);
  return nullptr;
}

namespace {

PyObject* py_engine_setup(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5 && nargs != 6) {
    PyErr_SetString(PyExc_TypeError,
                    "_engine_setup(OpNode.apply, OpNode._release, Inputs, fix_grad, SavedTensor[, Node._release])");
    return nullptr;
  }
  PyObject** slots[] = {&g_eng.opnode_apply, &g_eng.opnode_release, &g_eng.inputs_cls, &g_eng.fix_grad,
                        &g_eng.saved_cls, &g_eng.node_release};
  for (int i = 0; i < 5; ++i) Py_XSETREF(*slots[i], Py_NewRef(args[i]));
  Py_XSETREF(g_eng.node_release, nargs == 6 ? Py_NewRef(args[5]) : nullptr);
  Py_RETURN_NONE;
}

PyObject* py_engine_native_formulas(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "_engine_native_formulas(reshape_back, transpose, to_copy)");
    return nullptr;
  }
  PyObject** slots[] = {&g_eng.reshape_back, &g_eng.transpose, &g_eng.to_copy};
  for (int i = 0; i < 3; ++i) Py_XSETREF(*slots[i], args[i] == Py_None ? nullptr : Py_NewRef(args[i]));
  Py_RETURN_NONE;
}

// Whether the list `buffer` is the only holder of its item `index`: AccumulateGrad's test that nobody else
// holds an incoming gradient, made at the engine's input buffer before any Python frame binds the gradient
// (a count seen from inside Python frames depends on whether calls are inlined, which a PEP 523 frame
// evaluator turns off).
PyObject* py_only_held_by(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyList_Check(args[0]) || !PyLong_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "_only_held_by(buffer: list, index: int)");
    return nullptr;
  }
  const Py_ssize_t i = PyLong_AsSsize_t(args[1]);
  if (i == -1 && PyErr_Occurred()) return nullptr;
  if (i < 0 || i >= PyList_GET_SIZE(args[0])) {
    PyErr_SetString(PyExc_IndexError, "_only_held_by: index out of range");
    return nullptr;
  }
  return PyBool_FromLong(Py_REFCNT(PyList_GET_ITEM(args[0], i)) == 1);
}

PyMethodDef functions[] = {
    {"_only_held_by", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_only_held_by)), METH_FASTCALL,
     "_only_held_by(buffer, index): whether the list buffer holds the only reference to buffer[index]."},
    {"_engine_native_formulas",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_engine_native_formulas)), METH_FASTCALL,
     "_engine_native_formulas(reshape_back, transpose, to_copy): the backward functions of views' reshape, "
     "transpose and _to_copy, which the native engine loop runs as their Python bodies do, without their frame "
     "(None: that one runs in Python)."},
    {"_engine_setup", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_engine_setup)), METH_FASTCALL,
     "Registers OpNode's apply/_release, Inputs, fix_grad, SavedTensor (and Node._release: AccumulateGrad's) with "
     "the native engine loop."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void bind_autograd_apply(PyObject* module) {
  s_apply = PyUnicode_InternFromString("apply");
  s_release = PyUnicode_InternFromString("_release");
  s_backward = PyUnicode_InternFromString("backward");
  s_unpack = PyUnicode_InternFromString("unpack");
  s_args = PyUnicode_InternFromString("args");
  s_kwargs = PyUnicode_InternFromString("kwargs");
  s_shape = PyUnicode_InternFromString("shape");
  s_reshape = PyUnicode_InternFromString("reshape");
  s_transpose = PyUnicode_InternFromString("transpose");
  s_src_device = PyUnicode_InternFromString("_src_device");
  s_device = PyUnicode_InternFromString("_device");
  s_to = PyUnicode_InternFromString("to");
  if (PyModule_AddFunctions(module, functions) < 0) throw std::runtime_error("module init");
}

}  // namespace ember
