// The saved tensors and edges of a natively recorded node, built as autograd's Python
// recording builds them: `SavedTensor(t, False)` with no saved-tensor hooks active, the alias a
// saved non-leaf keeps (with its grad_fn and output number), and a leaf's AccumulateGrad.
#include <cstring>

#include "autograd_internal.h"

namespace ember {

namespace {

PyObject* s_output_nr = nullptr;
PyObject* s_grad_acc = nullptr;
PyObject* s_hooks = nullptr;
PyObject* s_variable = nullptr;
PyObject* s_version = nullptr;
PyObject* g_no_data = nullptr;  // _recording._NO_DATA: the empty meta storage of stand-ins...
Storage* g_no_data_ptr = nullptr;  // ...and its C object

}  // namespace

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
  // The leaf's hooks live on the tensor (meta.hooks): the engine looks them up only once it has had one
  // (register_hook sets _hooked on a live accumulator; AccumulateGrad.__init__ does what this does).
  PyObject* hooks = PyObject_GetAttr(meta, s_hooks);
  if (hooks == nullptr) return nullptr;
  PyObject* hooked = hooks == Py_None ? Py_False : Py_True;
  Py_DECREF(hooks);
  auto* cls = reinterpret_cast<PyTypeObject*>(g_reg.acc_cls);
  PyObject* acc = cls->tp_alloc(cls, 0);
  if (acc == nullptr) return nullptr;
  init_node_fields(acc, Py_NewRef(g_reg.acc_seq));
  Py_SETREF(reinterpret_cast<NodeObject*>(acc)->hooked, Py_NewRef(hooked));
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
  if (t->ndim > kInlineDims) {
    PyObject* o = new_tensor(t->storage, t->storage_ptr, t->sizes, t->strides, t->ndim, t->offset_value,
                             t->dtype_code, t->device);
    if (o != nullptr && t->vc != nullptr) reinterpret_cast<TensorObject*>(o)->vc = version_counter_ref(t->vc);
    return o;
  }
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
  if (t->vc != nullptr) a->vc = version_counter_ref(t->vc);  // else both read the storage's counter
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
  int64_t version = 0;
  so->version = tensor_version(t, &version) ? PyLong_FromLongLong(version) : PyObject_GetAttr(t->storage, s_version);
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

// _recording._stand_in(t): a data-less meta tensor with t's shape, strides, offset and dtype, whose
// _src_device is t's device.
//
// Note [Untracked stand-ins]: a stand-in refers only to objects that cannot lead back to it (the
// shared data-less storage, untracked int tuples, the dtype, the meta and source devices, None),
// and nothing writes its fields after this (formulas only read them), so it is never part of a
// reference cycle: it is untracked by the garbage collector, as CPython untracks tuples of ints.
// A GPT-2 forward keeps ~270 of them alive until backward; tracked, each young collection
// traversed them and every collection of the middle generation promoted them to the old one,
// bringing the next full collection (which traverses every object in the process) closer.
PyObject* stand_in(TensorObject* t) {
  if (g_no_data == nullptr) {
    PyObject* mod = PyImport_ImportModule("ember.autograd._recording");
    PyObject* no_data = mod ? PyObject_GetAttrString(mod, "_NO_DATA") : nullptr;
    Py_XDECREF(mod);
    if (no_data == nullptr) return nullptr;
    try {
      g_no_data_ptr = pybind11::handle(no_data).cast<Storage*>();
    } catch (...) {
      Py_DECREF(no_data);
      PyErr_SetString(PyExc_RuntimeError, "autograd: _NO_DATA is not a _C.Storage");
      return nullptr;
    }
    g_no_data = no_data;
  }
  if (t->ndim < 0 || t->stride_ndim != t->ndim || !t->offset_ok || dtype_object(t->dtype_code) == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "autograd: a stand-in needs plain metadata");
    return nullptr;
  }
  PyObject* s = new_tensor(g_no_data, g_no_data_ptr, t->sizes, t->strides, t->ndim, t->offset_value,
                           t->dtype_code, meta_device());
  if (s == nullptr) return nullptr;
  auto* so = reinterpret_cast<TensorObject*>(s);
  Py_SETREF(so->dtype, Py_NewRef(t->dtype));
  Py_XSETREF(so->src_device, Py_NewRef(t->device));
  if (so->dict == nullptr) PyObject_GC_UnTrack(s);
  return s;
}

// SavedTensor(t, False): leaves that require grad as they are, anything else as an alias keeping
// the grad_fn (and output number) it had when saved.
PyObject* save_input(TensorObject* t) {
  PyObject* fn = current_grad_fn(t);
  if (fn == nullptr) return nullptr;
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

void bind_autograd_saved() {
  s_output_nr = PyUnicode_InternFromString("output_nr");
  s_version = PyUnicode_InternFromString("version");
  s_grad_acc = PyUnicode_InternFromString("grad_acc");
  s_hooks = PyUnicode_InternFromString("hooks");
  s_variable = PyUnicode_InternFromString("variable");
}

}  // namespace ember
