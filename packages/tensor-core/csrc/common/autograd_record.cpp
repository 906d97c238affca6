// Native grad recording (see autograd_record.h): the C bases of autograd's Node and SavedTensor,
// and the one function that gives a fast-path result its backward node.
//
// The node built here is an instance of the op's Python node class (`MulBackward0`, a heap
// subclass of autograd's OpNode, whose slots all live in _C.AutogradNode), filled exactly as
// `OpNode.__init__` and `_record_out_of_place` would fill it, so the Python engine runs it and
// user code inspects it as any other node. Saved inputs are `SavedTensor` instances built as
// `SavedTensor(t, False)` builds them when no saved-tensor hooks are active.
#include "autograd_record.h"

#include <structmember.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>

#include "tensor_impl.h"

namespace ember {

namespace {

constexpr int kNodeFields = 18;  // the PyObject* fields before weakreflist

struct SavedObject {
  PyObject_HEAD
  PyObject* data;
  PyObject* version;
  PyObject* is_output;
  PyObject* nr;
  PyObject* requires_grad;
  PyObject* unpack_hook;
  PyObject* origin;
};

constexpr int kSavedFields = 7;

PyObject** node_fields(PyObject* o) { return &reinterpret_cast<NodeObject*>(o)->next; }
PyObject** saved_fields(PyObject* o) { return &reinterpret_cast<SavedObject*>(o)->data; }

#define NODE_MEMBER(name, field) {name, T_OBJECT_EX, offsetof(NodeObject, field), 0, nullptr}
PyMemberDef node_members[] = {
    NODE_MEMBER("_next", next),
    NODE_MEMBER("_num_outputs", num_outputs),
    NODE_MEMBER("_pre_hooks", pre_hooks),
    NODE_MEMBER("_post_hooks", post_hooks),
    NODE_MEMBER("_tensor_hooks", tensor_hooks),
    NODE_MEMBER("_retained", retained),
    NODE_MEMBER("_metadata", metadata),
    NODE_MEMBER("_released", released),
    NODE_MEMBER("_hooked", hooked),
    NODE_MEMBER("_seq", seq),
    NODE_MEMBER("_formula", formula),
    NODE_MEMBER("_layout", layout),
    NODE_MEMBER("_input_meta", input_meta),
    NODE_MEMBER("_saved_args", saved_args),
    NODE_MEMBER("_kwargs", kwargs),
    NODE_MEMBER("_saved_outputs", saved_outputs),
    NODE_MEMBER("_args_need_node", args_need_node),
    NODE_MEMBER("_history_node", history_node),
    {nullptr, 0, 0, 0, nullptr}};
#undef NODE_MEMBER

#define SAVED_MEMBER(name, field) {name, T_OBJECT_EX, offsetof(SavedObject, field), 0, nullptr}
PyMemberDef saved_members[] = {
    SAVED_MEMBER("data", data),
    SAVED_MEMBER("version", version),
    SAVED_MEMBER("is_output", is_output),
    SAVED_MEMBER("nr", nr),
    SAVED_MEMBER("requires_grad", requires_grad),
    SAVED_MEMBER("unpack_hook", unpack_hook),
    SAVED_MEMBER("origin", origin),
    {nullptr, 0, 0, 0, nullptr}};
#undef SAVED_MEMBER

int fields_traverse(PyObject** f, int n, visitproc visit, void* arg) {
  for (int i = 0; i < n; ++i) Py_VISIT(f[i]);
  return 0;
}

void fields_clear(PyObject** f, int n) {
  for (int i = 0; i < n; ++i) Py_CLEAR(f[i]);
}

int node_traverse(PyObject* o, visitproc visit, void* arg) {
  // (A heap subclass's own traverse/dealloc visit and release the type: not done here.)
  return fields_traverse(node_fields(o), kNodeFields, visit, arg);
}
int node_clear(PyObject* o) {
  fields_clear(node_fields(o), kNodeFields);
  return 0;
}
void node_dealloc(PyObject* o) {
  PyTypeObject* tp = Py_TYPE(o);
  PyObject_GC_UnTrack(o);
  if (reinterpret_cast<NodeObject*>(o)->weakreflist != nullptr) PyObject_ClearWeakRefs(o);
  node_clear(o);
  tp->tp_free(o);
}

int saved_traverse(PyObject* o, visitproc visit, void* arg) {
  return fields_traverse(saved_fields(o), kSavedFields, visit, arg);
}
int saved_clear(PyObject* o) {
  fields_clear(saved_fields(o), kSavedFields);
  return 0;
}
void saved_dealloc(PyObject* o) {
  PyTypeObject* tp = Py_TYPE(o);
  PyObject_GC_UnTrack(o);
  saved_clear(o);
  tp->tp_free(o);
}

PyTypeObject SavedBaseType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// What autograd registered (_C._autograd_setup).
struct Registry {
  PyObject* spec_fn = nullptr;          // _recording.native_spec(op) -> spec tuple, False or None
  PyObject* formulas = nullptr;         // formulas.FORMULAS
  PyObject* saved_cls = nullptr;        // graph.SavedTensor
  PyObject* saved_args_cls = nullptr;   // _recording._SavedArgs (a tuple subclass)
  PyObject* acc_cls = nullptr;          // graph.AccumulateGrad
  PyObject* meta_cls = nullptr;         // graph.AutogradMeta
  PyObject* grad_accumulator = nullptr; // graph.grad_accumulator (leaves without an AutogradMeta)
  PyObject* seq = nullptr;              // graph._SEQ (itertools.count)
  PyObject* anomaly_state = nullptr;    // anomaly_mode._STATE (.enabled)
  PyObject* saved_hooks_entered = nullptr;  // graph._SAVED_HOOKS_ENTERED ([count])
  PyObject* forward_level = nullptr;    // forward_ad._LEVEL ([level or None])
  PyObject* acc_seq = nullptr;          // 1 << 62, AccumulateGrad's sequence number
  PyObject* no_edge = nullptr;          // (None, 0)
  PyObject* empty_tuple = nullptr;
};
Registry g_reg;

PyObject* s_grad_enabled = nullptr;
PyObject* s_enabled = nullptr;
PyObject* s_output_nr = nullptr;
PyObject* s_grad_acc = nullptr;
PyObject* s_variable = nullptr;

// Every field of a fresh node set as Node.__init__ sets it (the OpNode ones to None).
void init_node_fields(PyObject* node, PyObject* seq) {
  auto* n = reinterpret_cast<NodeObject*>(node);
  n->next = Py_NewRef(g_reg.empty_tuple);
  n->num_outputs = PyLong_FromLong(1);  // a cached small int: cannot fail
  n->pre_hooks = Py_NewRef(Py_None);
  n->post_hooks = Py_NewRef(Py_None);
  n->tensor_hooks = Py_NewRef(Py_None);
  n->retained = Py_NewRef(Py_None);
  n->metadata = Py_NewRef(Py_None);
  n->released = Py_NewRef(Py_False);
  n->hooked = Py_NewRef(Py_False);
  n->seq = seq;  // stolen
}

// The output number of a non-leaf (its AutogradMeta's output_nr; 0 without one). New reference.
PyObject* output_nr_of(TensorObject* t) {
  if (t->autograd_meta == nullptr || t->autograd_meta == Py_None) return PyLong_FromLong(0);
  return PyObject_GetAttr(t->autograd_meta, s_output_nr);
}

// graph.grad_accumulator(t) for a leaf: the live AccumulateGrad its meta refers to, or a new one.
PyObject* leaf_accumulator(TensorObject* t) {
  PyObject* meta = t->autograd_meta;
  if (meta == nullptr || meta == Py_None)
    return PyObject_CallOneArg(g_reg.grad_accumulator, reinterpret_cast<PyObject*>(t));
  PyObject* ref = PyObject_GetAttr(meta, s_grad_acc);
  if (ref == nullptr) return nullptr;
  if (ref != Py_None) {
    if (!PyWeakref_CheckRef(ref)) {
      Py_DECREF(ref);
      return PyObject_CallOneArg(g_reg.grad_accumulator, reinterpret_cast<PyObject*>(t));
    }
    PyObject* acc = PyWeakref_GetObject(ref);  // borrowed
    if (acc != Py_None) {
      Py_INCREF(acc);
      Py_DECREF(ref);
      return acc;
    }
  }
  Py_DECREF(ref);
  auto* cls = reinterpret_cast<PyTypeObject*>(g_reg.acc_cls);
  PyObject* acc = cls->tp_alloc(cls, 0);
  if (acc == nullptr) return nullptr;
  init_node_fields(acc, Py_NewRef(g_reg.acc_seq));
  Py_SETREF(reinterpret_cast<NodeObject*>(acc)->hooked, Py_NewRef(Py_True));  // the leaf's hooks: look each time
  PyObject* weak = nullptr;
  if (PyObject_SetAttr(acc, s_variable, reinterpret_cast<PyObject*>(t)) < 0 ||
      (weak = PyWeakref_NewRef(acc, nullptr)) == nullptr || PyObject_SetAttr(meta, s_grad_acc, weak) < 0) {
    Py_XDECREF(weak);
    Py_DECREF(acc);
    return nullptr;
  }
  Py_DECREF(weak);
  return acc;
}

// graph._alias(t) for a plain strided tensor: a new tensor over the same storage, no history.
// The shape/stride/offset objects are shared with t (immutable), so no tuple is rebuilt.
PyObject* alias_of(TensorObject* t) {
  if (t->ndim > kInlineDims)
    return new_tensor(t->storage, t->storage_ptr, t->sizes, t->strides, t->ndim, t->offset_value, t->dtype_code,
                      t->device);
  auto* tp = reinterpret_cast<PyTypeObject*>(tensor_class());
  PyObject* o = tp->tp_alloc(tp, 0);
  if (o == nullptr) return nullptr;
  auto* a = reinterpret_cast<TensorObject*>(o);
  a->storage = Py_NewRef(t->storage);
  a->shape = Py_NewRef(t->shape);
  a->stride = Py_NewRef(t->stride);
  a->offset = Py_NewRef(t->offset);
  a->dtype = Py_NewRef(t->dtype);
  a->device = Py_NewRef(t->device);
  a->requires_grad = Py_NewRef(Py_False);
  a->grad = Py_NewRef(Py_None);
  a->grad_fn = Py_NewRef(Py_None);
  a->base = Py_NewRef(Py_None);
  a->autograd_meta = Py_NewRef(Py_None);
  a->storage_ptr = t->storage_ptr;
  a->sizes = a->inline_dims;
  a->strides = a->inline_dims + kInlineDims;
  std::memcpy(a->sizes, t->sizes, sizeof(int64_t) * t->ndim);
  std::memcpy(a->strides, t->strides, sizeof(int64_t) * t->ndim);
  a->ndim = a->stride_ndim = t->ndim;
  a->offset_value = t->offset_value;
  a->offset_ok = 1;
  a->dtype_code = t->dtype_code;
  a->device_kind = t->device_kind;
  a->rg = 0;
  return o;
}

PyObject* new_saved(PyObject* data, TensorObject* t, bool is_output, PyObject* requires_grad) {
  auto* cls = reinterpret_cast<PyTypeObject*>(g_reg.saved_cls);
  PyObject* s = cls->tp_alloc(cls, 0);
  if (s == nullptr) {
    Py_DECREF(data);
    return nullptr;
  }
  auto* so = reinterpret_cast<SavedObject*>(s);
  so->data = data;  // stolen
  so->version = PyLong_FromLongLong(t->storage_ptr->version);
  so->is_output = Py_NewRef(is_output ? Py_True : Py_False);
  so->nr = PyLong_FromLong(0);
  so->requires_grad = Py_NewRef(requires_grad);
  so->unpack_hook = Py_NewRef(Py_None);
  if (so->version == nullptr) {
    Py_DECREF(s);
    return nullptr;
  }
  return s;
}

// SavedTensor(t, False): leaves that require grad as they are, anything else as an alias keeping
// the grad_fn (and output number) it had when saved.
PyObject* save_input(TensorObject* t) {
  PyObject* fn = t->grad_fn;
  bool has_fn = fn != nullptr && fn != Py_None;
  PyObject* data;
  if (!has_fn && t->rg) {
    data = Py_NewRef(reinterpret_cast<PyObject*>(t));
  } else {
    data = alias_of(t);
    if (data == nullptr) return nullptr;
    if (has_fn) {
      auto* d = reinterpret_cast<TensorObject*>(data);
      Py_SETREF(d->grad_fn, Py_NewRef(fn));
      Py_SETREF(d->requires_grad, Py_NewRef(Py_True));
      d->rg = 1;
      PyObject* nr = output_nr_of(t);
      if (nr == nullptr) {
        Py_DECREF(data);
        return nullptr;
      }
      int nonzero = PyObject_IsTrue(nr);
      if (nonzero > 0) {
        PyObject* meta = PyObject_CallOneArg(g_reg.meta_cls, nr);
        if (meta == nullptr) nonzero = -1;
        else Py_SETREF(d->autograd_meta, meta);
      }
      Py_DECREF(nr);
      if (nonzero < 0) {
        Py_DECREF(data);
        return nullptr;
      }
    }
  }
  return new_saved(data, t, false, t->requires_grad ? t->requires_grad : Py_False);
}

bool list_item_on(PyObject* lst) {
  if (lst == nullptr) return false;
  PyObject* v = PyList_GET_ITEM(lst, 0);
  return v != Py_False && v != Py_None && v != g_dispatch.zero;
}

PyObject* py_autograd_setup(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 11) {
    PyErr_SetString(PyExc_TypeError,
                    "_autograd_setup(spec_fn, FORMULAS, SavedTensor, _SavedArgs, AccumulateGrad, AutogradMeta, "
                    "grad_accumulator, _SEQ, anomaly_state, _SAVED_HOOKS_ENTERED, forward_ad._LEVEL)");
    return nullptr;
  }
  for (int i : {2, 4})
    if (!PyType_Check(args[i]) ||
        !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(args[i]), i == 2 ? &SavedBaseType : &NodeBaseType)) {
      PyErr_SetString(PyExc_TypeError, "_autograd_setup: SavedTensor / AccumulateGrad must derive from the C bases");
      return nullptr;
    }
  if (!PyDict_Check(args[1]) || !PyType_Check(args[3]) ||
      !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(args[3]), &PyTuple_Type) || !PyList_Check(args[9]) ||
      !PyList_Check(args[10]) || PyList_GET_SIZE(args[9]) < 1 || PyList_GET_SIZE(args[10]) < 1) {
    PyErr_SetString(PyExc_TypeError, "_autograd_setup: bad arguments");
    return nullptr;
  }
  PyObject** slots[] = {&g_reg.spec_fn, &g_reg.formulas, &g_reg.saved_cls, &g_reg.saved_args_cls,
                        &g_reg.acc_cls, &g_reg.meta_cls, &g_reg.grad_accumulator, &g_reg.seq,
                        &g_reg.anomaly_state, &g_reg.saved_hooks_entered, &g_reg.forward_level};
  for (int i = 0; i < 11; ++i) Py_XSETREF(*slots[i], Py_NewRef(args[i]));
  Py_RETURN_NONE;
}

PyMethodDef functions[] = {
    {"_autograd_setup", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_autograd_setup)),
     METH_FASTCALL, "Registers ember-autograd's graph classes with the native recording of the fast path."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyTypeObject NodeBaseType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject** saved_data_slot(PyObject* saved) { return &reinterpret_cast<SavedObject*>(saved)->data; }

int grad_enabled_now() {
  if (g_dispatch.grad_state == nullptr) return 0;
  PyObject* v = PyObject_GetAttr(g_dispatch.grad_state, s_grad_enabled);
  if (v == nullptr) return -1;
  int truth = v == Py_True ? 1 : v == Py_False ? 0 : PyObject_IsTrue(v);
  Py_DECREF(v);
  return truth;
}

int grad_plan(PyObject* op, PyObject** cache, PyObject** spec) {
  if (g_reg.spec_fn == nullptr) return kGradPython;
  // Saved-tensor hooks, forward-mode levels and anomaly mode need the Python recording.
  if (list_item_on(g_reg.saved_hooks_entered) || PyList_GET_ITEM(g_reg.forward_level, 0) != Py_None)
    return kGradPython;
  PyObject* anomaly = PyObject_GetAttr(g_reg.anomaly_state, s_enabled);
  if (anomaly == nullptr) return kGradError;
  int on = anomaly == Py_False ? 0 : PyObject_IsTrue(anomaly);
  Py_DECREF(anomaly);
  if (on != 0) return on < 0 ? kGradError : kGradPython;
  // The cached spec holds while FORMULAS still maps the op's name to the same formula.
  PyObject* s = *cache;
  if (s != nullptr && PyTuple_Check(s)) {
    PyObject* now = PyDict_GetItemWithError(g_reg.formulas, PyTuple_GET_ITEM(s, 0));
    if (now == nullptr && PyErr_Occurred()) return kGradError;
    PyObject* formula = PyTuple_GET_ITEM(s, 1);
    if ((now == nullptr ? Py_None : now) != formula) s = nullptr;
  }
  if (s == nullptr) {
    s = PyObject_CallOneArg(g_reg.spec_fn, op);
    if (s == nullptr) return kGradError;
    if (s != Py_None && (!PyTuple_Check(s) || PyTuple_GET_SIZE(s) != 5)) {
      Py_DECREF(s);
      PyErr_SetString(PyExc_TypeError, "autograd's native_spec must return a 5-tuple or None");
      return kGradError;
    }
    Py_XSETREF(*cache, s);
  }
  if (s == Py_None) return kGradPython;
  *spec = s;
  return PyTuple_GET_ITEM(s, 2) == Py_None ? kGradNone : kGradRecord;
}

int grad_record(PyObject* spec, PyObject* out_obj, PyObject* const* args, Py_ssize_t nargs) {
  auto* out = reinterpret_cast<TensorObject*>(out_obj);
  if (!(out->dtype_code == 8 || out->dtype_code == 9)) return 0;  // not floating: nothing to record
  PyObject* formula = PyTuple_GET_ITEM(spec, 1);
  auto* cls = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(spec, 2));
  bool reads = PyTuple_GET_ITEM(spec, 3) == Py_True;
  bool saves_output = PyTuple_GET_ITEM(spec, 4) == Py_True;
  PyObject* layout = PyList_New(nargs);
  PyObject* meta = PyList_New(0);
  PyObject* edges = PyTuple_New(0);
  PyObject* saved = PyTuple_New(nargs);
  PyObject* node = nullptr;
  Py_ssize_t n_edges = 0;
  PyObject* edge_items[8];
  if (layout == nullptr || meta == nullptr || edges == nullptr || saved == nullptr || nargs > 8) goto fail;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    PyObject* a = args[i];
    if (!is_tensor_base(a)) {
      PyList_SET_ITEM(layout, i, Py_NewRef(Py_None));
      PyTuple_SET_ITEM(saved, i, Py_NewRef(a));
      continue;
    }
    auto* t = reinterpret_cast<TensorObject*>(a);
    PyObject* edge;
    PyObject* m;
    if (t->rg) {
      PyObject* fn = t->grad_fn;
      PyObject* target;
      PyObject* nr;
      if (fn != nullptr && fn != Py_None) {
        target = Py_NewRef(fn);
        nr = output_nr_of(t);
      } else {
        target = leaf_accumulator(t);
        nr = PyLong_FromLong(0);
      }
      if (target == nullptr || nr == nullptr) {
        Py_XDECREF(target);
        Py_XDECREF(nr);
        goto fail_edges;
      }
      edge = PyTuple_Pack(2, target, nr);
      Py_DECREF(target);
      Py_DECREF(nr);
      m = PyTuple_Pack(2, t->shape, t->dtype);
      PyObject* index = PyLong_FromSsize_t(n_edges);
      if (edge == nullptr || m == nullptr || index == nullptr) {
        Py_XDECREF(edge);
        Py_XDECREF(m);
        Py_XDECREF(index);
        goto fail_edges;
      }
      PyList_SET_ITEM(layout, i, index);
    } else {
      edge = Py_NewRef(g_reg.no_edge);
      m = Py_NewRef(Py_None);
      PyList_SET_ITEM(layout, i, Py_NewRef(Py_None));
    }
    edge_items[n_edges++] = edge;
    int rc = PyList_Append(meta, m);
    Py_DECREF(m);
    if (rc < 0) goto fail_edges;
    PyObject* s = reads ? save_input(t) : Py_NewRef(Py_None);
    if (s == nullptr) goto fail_edges;
    PyTuple_SET_ITEM(saved, i, s);
  }
  {
    Py_SETREF(edges, PyTuple_New(n_edges));
    if (edges == nullptr) goto fail_edges;
    for (Py_ssize_t i = 0; i < n_edges; ++i) PyTuple_SET_ITEM(edges, i, edge_items[i]);
    n_edges = 0;
    // The saved args as the formula reads them: a _SavedArgs (tuple subclass) with the same items.
    auto* sa_cls = reinterpret_cast<PyTypeObject*>(g_reg.saved_args_cls);
    PyObject* saved_args = sa_cls->tp_alloc(sa_cls, nargs);
    if (saved_args == nullptr) goto fail;
    for (Py_ssize_t i = 0; i < nargs; ++i) PyTuple_SET_ITEM(saved_args, i, Py_NewRef(PyTuple_GET_ITEM(saved, i)));
    Py_SETREF(saved, saved_args);
    PyObject* saved_outputs;
    if (saves_output) {
      PyObject* data = alias_of(out);
      PyObject* s = data == nullptr ? nullptr : new_saved(data, out, true, Py_True);
      saved_outputs = s == nullptr ? nullptr : PyTuple_Pack(1, s);
      Py_XDECREF(s);
    } else {
      saved_outputs = Py_NewRef(g_reg.empty_tuple);
    }
    PyObject* kwargs = PyDict_New();
    PyObject* seq = PyIter_Next(g_reg.seq);
    node = cls->tp_alloc(cls, 0);
    if (saved_outputs == nullptr || kwargs == nullptr || seq == nullptr || node == nullptr) {
      Py_XDECREF(saved_outputs);
      Py_XDECREF(kwargs);
      Py_XDECREF(seq);
      if (seq == nullptr && !PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "autograd: sequence exhausted");
      goto fail;
    }
    init_node_fields(node, seq);
    auto* n = reinterpret_cast<NodeObject*>(node);
    Py_SETREF(n->next, edges);
    edges = nullptr;
    n->formula = Py_NewRef(formula);
    n->layout = layout;
    layout = nullptr;
    n->input_meta = meta;
    meta = nullptr;
    n->saved_args = saved;
    saved = nullptr;
    n->kwargs = kwargs;
    n->saved_outputs = saved_outputs;
    n->args_need_node = Py_NewRef(Py_False);
    n->history_node = Py_NewRef(Py_None);
    Py_SETREF(out->grad_fn, node);
    Py_SETREF(out->requires_grad, Py_NewRef(Py_True));
    out->rg = 1;
    return 0;
  }
fail_edges:
  for (Py_ssize_t i = 0; i < n_edges; ++i) Py_DECREF(edge_items[i]);
fail:
  Py_XDECREF(layout);
  Py_XDECREF(meta);
  Py_XDECREF(edges);
  Py_XDECREF(saved);
  Py_XDECREF(node);
  if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "autograd: native recording failed");
  return -1;
}

void bind_autograd_record(PyObject* module) {
  NodeBaseType.tp_name = "ember._C.AutogradNode";
  NodeBaseType.tp_basicsize = sizeof(NodeObject);
  NodeBaseType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  NodeBaseType.tp_doc = "The C-level slots of autograd's Node (and OpNode), so nodes can be built natively.";
  NodeBaseType.tp_traverse = node_traverse;
  NodeBaseType.tp_clear = node_clear;
  NodeBaseType.tp_dealloc = node_dealloc;
  NodeBaseType.tp_members = node_members;
  NodeBaseType.tp_weaklistoffset = offsetof(NodeObject, weakreflist);
  NodeBaseType.tp_new = PyType_GenericNew;
  SavedBaseType.tp_name = "ember._C.SavedTensorBase";
  SavedBaseType.tp_basicsize = sizeof(SavedObject);
  SavedBaseType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  SavedBaseType.tp_doc = "The C-level slots of autograd's SavedTensor.";
  SavedBaseType.tp_traverse = saved_traverse;
  SavedBaseType.tp_clear = saved_clear;
  SavedBaseType.tp_dealloc = saved_dealloc;
  SavedBaseType.tp_members = saved_members;
  SavedBaseType.tp_new = PyType_GenericNew;
  if (PyType_Ready(&NodeBaseType) < 0 || PyType_Ready(&SavedBaseType) < 0) throw std::runtime_error("type init");
  Py_INCREF(&NodeBaseType);
  Py_INCREF(&SavedBaseType);
  if (PyModule_AddObject(module, "AutogradNode", reinterpret_cast<PyObject*>(&NodeBaseType)) < 0 ||
      PyModule_AddObject(module, "SavedTensorBase", reinterpret_cast<PyObject*>(&SavedBaseType)) < 0 ||
      PyModule_AddFunctions(module, functions) < 0)
    throw std::runtime_error("module init");
  bind_autograd_engine(module);
  s_grad_enabled = PyUnicode_InternFromString("grad_enabled");
  s_enabled = PyUnicode_InternFromString("enabled");
  s_output_nr = PyUnicode_InternFromString("output_nr");
  s_grad_acc = PyUnicode_InternFromString("grad_acc");
  s_variable = PyUnicode_InternFromString("variable");
  g_reg.acc_seq = PyLong_FromLongLong(1LL << 62);
  g_reg.empty_tuple = PyTuple_New(0);
  g_reg.no_edge = PyTuple_Pack(2, Py_None, g_dispatch.zero ? g_dispatch.zero : PyLong_FromLong(0));
}

}  // namespace ember
