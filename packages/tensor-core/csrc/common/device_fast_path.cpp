// The device fast path: an op called on plain ember.Tensors of a plugin device (CUDA) goes
// straight to the device's kernel, skipping the Python dispatcher (Op._dispatch), when that
// dispatcher would do nothing else than run the kernel and, for inputs that require grad, let
// autograd record the call: no dispatch mode, no __torch_dispatch__ subclass among the arguments, no sparse layout
// routing, and no autocast cast for this op (plain_dispatch_for()). Op._dispatch (and call_kernel,
// for a first argument that is a number or an nn.Parameter) does exactly this lookup
// (`op.kernels[first tensor's device type]`), so the results, errors included, are the kernel's
// own either way.
//
// With grad mode on and an input that requires grad, the call is recorded as autograd's
// `_recording.record` records it: the kernel runs with grad mode off, then the node is built
// natively (grad_record, autograd_record.h) for a fresh floating result; any other result (several
// outputs, an input handed back, an integer or complex result) is recorded by autograd's
// `record_computed`. Calls the native recorder cannot take (in-place ops, no formula, tensors in
// lists or keywords, complex inputs, saved-tensor hooks, anomaly mode, forward AD) go to the Python
// dispatcher before anything ran. Views (view, transpose, permute, unsqueeze, expand) of CUDA
// tensors are computed natively (fast_views.cpp): on CUDA their kernel is the CPU one.
//
// Any doubt returns "not handled" and the call continues on the ordinary path; CPU calls pay
// two pointer compares.
#include "device_fast_path.h"

#include "autograd_record.h"
#include "dtype.h"
#include "fast_ops.h"

namespace ember {

namespace {

PyObject* s_kernels = nullptr;      // "kernels"
PyObject* s_type = nullptr;         // "type"
PyObject* s_amp = nullptr;          // "amp"
PyObject* s_active = nullptr;       // "active"
PyObject* s_grad_enabled = nullptr; // "grad_enabled"
PyObject* s_cuda = nullptr;         // "cuda"
PyObject* g_last_device = nullptr;  // the device object last seen (owned)...
PyObject* g_last_type = nullptr;    // ...and its `type` string (owned)
PyObject* g_autocast_state = nullptr;  // autocast.STATE (dispatch._AUTOCAST_STATE), owned
PyObject* g_record_computed = nullptr; // ember.autograd._recording.record_computed, owned

bool init_names() {
  if (s_type != nullptr) return true;
  s_kernels = PyUnicode_InternFromString("kernels");
  s_amp = PyUnicode_InternFromString("amp");
  s_active = PyUnicode_InternFromString("active");
  s_grad_enabled = PyUnicode_InternFromString("grad_enabled");
  s_cuda = PyUnicode_InternFromString("cuda");
  s_type = PyUnicode_InternFromString("type");
  return s_kernels && s_amp && s_active && s_grad_enabled && s_cuda && s_type;
}

// The device's type string (borrowed), cached for the last device object seen; null on failure.
PyObject* device_type(PyObject* device) {
  if (device == g_last_device) return g_last_type;
  if (!init_names()) return nullptr;
  PyObject* type = PyObject_GetAttr(device, s_type);
  if (type == nullptr) return nullptr;
  if (!PyUnicode_CheckExact(type)) {
    Py_DECREF(type);
    return nullptr;
  }
  Py_INCREF(device);
  Py_XSETREF(g_last_device, device);
  Py_XSETREF(g_last_type, type);
  return type;
}

bool is_cuda(TensorObject* t) {
  if (t->device_kind != kDeviceOther || t->device == nullptr) return false;
  PyObject* type = device_type(t->device);
  if (type == nullptr) {
    PyErr_Clear();
    return false;
  }
  return type == s_cuda || PyUnicode_Compare(type, s_cuda) == 0;
}

// Whether autocast casts this op's inputs now (Op._dispatch: `self.amp is not None and
// _AUTOCAST_STATE.active`); -1 when unknown (the caller takes the Python path).
int autocast_applies(PyObject* op) {
  if (!init_names()) return -1;
  PyObject* amp = PyObject_GetAttr(op, s_amp);
  if (amp == nullptr) return -1;
  bool has_policy = amp != Py_None;
  Py_DECREF(amp);
  if (!has_policy) return 0;
  if (g_autocast_state == nullptr) {
    PyObject* mod = PyImport_ImportModule("ember._src.dispatch");
    PyObject* state = mod ? PyObject_GetAttrString(mod, "_AUTOCAST_STATE") : nullptr;
    Py_XDECREF(mod);
    if (state == nullptr || state == Py_None) {
      Py_XDECREF(state);
      return -1;
    }
    g_autocast_state = state;
  }
  PyObject* active = PyObject_GetAttr(g_autocast_state, s_active);
  if (active == nullptr) return -1;
  int on = active == Py_True ? 1 : active == Py_False ? 0 : PyObject_IsTrue(active);
  Py_DECREF(active);
  return on;
}

bool requires_grad(PyObject* o) {
  if (is_tensor_base(o)) return reinterpret_cast<TensorObject*>(o)->rg != 0;
  if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    PyObject** items = PySequence_Fast_ITEMS(o);
    for (Py_ssize_t i = 0; i < n; ++i)
      if (is_tensor_base(items[i]) && reinterpret_cast<TensorObject*>(items[i])->rg) return true;
  }
  return false;
}

// What `_record_out_of_place` takes (else the general `record`): tensors only as positional
// arguments, none complex, and few enough for grad_record.
bool recordable(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (nargs > 8) return false;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nargs + nkw; ++i) {
    PyObject* a = args[i];
    if (is_tensor_base(a)) {
      if (i >= nargs) return false;  // a tensor keyword: saved by the Python recording
      int c = reinterpret_cast<TensorObject*>(a)->dtype_code;
      if (c < 0 || c == 10 || c == 11) return false;  // complex: its own formula
    } else if (PyList_CheckExact(a) || PyTuple_CheckExact(a)) {
      Py_ssize_t n = PySequence_Fast_GET_SIZE(a);
      PyObject** items = PySequence_Fast_ITEMS(a);
      for (Py_ssize_t j = 0; j < n; ++j)
        if (is_tensor_base(items[j])) return false;
    }
  }
  return true;
}

int set_grad_enabled(PyObject* value) {
  return PyObject_SetAttr(g_dispatch.grad_state, s_grad_enabled, value);
}

// The keyword arguments as a dict (a node's `_kwargs`; none of them a tensor here). A dict holding only
// untracked values, dtypes and devices (autocast's casts: {dtype, device}, ~120 per GPT-2 forward, alive
// until backward) cannot be part of a cycle: it is untracked, as CPython untracks a dict of atoms at a
// collection (a dtype or device is tracked, but leads to nothing that could hold the dict). A later
// insertion of a tracked value tracks it again (CPython's own rule for dicts).
PyObject* kwargs_dict(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* d = PyDict_New();
  if (d == nullptr || kwnames == nullptr) return d;
  bool atoms = true;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); ++i) {
    PyObject* v = args[nargs + i];
    if (PyDict_SetItem(d, PyTuple_GET_ITEM(kwnames, i), v) < 0) {
      Py_DECREF(d);
      return nullptr;
    }
    atoms = atoms && (!PyObject_GC_IsTracked(v) || (cpu_device() != nullptr && Py_TYPE(v) == Py_TYPE(cpu_device())) ||
                      (dtype_object(0) != nullptr && Py_TYPE(v) == Py_TYPE(dtype_object(0))));
  }
  if (atoms && PyObject_GC_IsTracked(d)) PyObject_GC_UnTrack(d);
  return d;
}

// Whether `out` is what the native recorder takes for several outputs: a tuple of 2-8 distinct fresh
// ember.Tensors (none an argument or a view, none complex, no autograd state yet), one of them floating.
bool multi_recordable(PyObject* out, PyObject* const* args, Py_ssize_t nargs) {
  if (!PyTuple_CheckExact(out)) return false;
  const Py_ssize_t n = PyTuple_GET_SIZE(out);
  if (n < 2 || n > 8) return false;
  auto* cls = reinterpret_cast<PyTypeObject*>(tensor_class());
  bool floating = false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* o = PyTuple_GET_ITEM(out, i);
    if (Py_TYPE(o) != cls) return false;
    auto* t = reinterpret_cast<TensorObject*>(o);
    if (t->dtype_code < 0 || is_complex_code(t->dtype_code) || t->rg) return false;
    // no autograd state yet, and not a view (split's, unbind's: a view's grad_fn setter stamps its version)
    if ((t->autograd_meta != nullptr && t->autograd_meta != Py_None) ||
        (t->grad_fn != nullptr && t->grad_fn != Py_None) || (t->base != nullptr && t->base != Py_None))
      return false;
    floating = floating || is_real_floating_code(t->dtype_code);
    for (Py_ssize_t j = 0; j < nargs; ++j)
      if (args[j] == o) return false;
    for (Py_ssize_t j = 0; j < i; ++j)
      if (PyTuple_GET_ITEM(out, j) == o) return false;
  }
  return floating;
}

// Gives `out` (the kernel's result, owned) the history autograd's recording gives it.
PyObject* record_result(PyObject* op, PyObject* spec, PyObject* out, PyObject* const* args, Py_ssize_t nargs,
                        PyObject* kwnames) {
  bool is_arg = false;
  for (Py_ssize_t i = 0; i < nargs && !is_arg; ++i) is_arg = args[i] == out;
  int code = Py_TYPE(out) == reinterpret_cast<PyTypeObject*>(tensor_class())
                 ? reinterpret_cast<TensorObject*>(out)->dtype_code : -1;
  if (!is_arg && is_real_floating_code(code)) {  // a fresh float16/bfloat16/float32/float64 tensor
    if (grad_record(spec, out, args, nargs) < 0) {
      Py_DECREF(out);
      return nullptr;
    }
    if (kwnames != nullptr) {
      PyObject* kw = kwargs_dict(args, nargs, kwnames);
      if (kw == nullptr) {
        Py_DECREF(out);
        return nullptr;
      }
      Py_SETREF(reinterpret_cast<NodeObject*>(reinterpret_cast<TensorObject*>(out)->grad_fn)->kwargs, kw);
    }
    return out;
  }
  if (multi_recordable(out, args, nargs)) {  // several fresh tensors: recorded natively too
    PyObject* node = nullptr;
    if (grad_record(spec, out, args, nargs, &node) < 0) {
      Py_DECREF(out);
      return nullptr;
    }
    if (kwnames != nullptr) {
      PyObject* kw = kwargs_dict(args, nargs, kwnames);
      if (kw == nullptr) {
        Py_DECREF(node);
        Py_DECREF(out);
        return nullptr;
      }
      Py_SETREF(reinterpret_cast<NodeObject*>(node)->kwargs, kw);
    }
    Py_DECREF(node);
    return out;
  }
  // Rare results: autograd's own code records them (`_recording.record_computed`).
  if (g_record_computed == nullptr) {
    PyObject* mod = PyImport_ImportModule("ember.autograd._recording");
    g_record_computed = mod ? PyObject_GetAttrString(mod, "record_computed") : nullptr;
    Py_XDECREF(mod);
    if (g_record_computed == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
  }
  PyObject* tuple = PyTuple_New(nargs);
  PyObject* kw = kwargs_dict(args, nargs, kwnames);
  PyObject* r = nullptr;
  if (tuple != nullptr && kw != nullptr) {
    for (Py_ssize_t i = 0; i < nargs; ++i) PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
    PyObject* call[4] = {op, tuple, kw, out};
    r = PyObject_Vectorcall(g_record_computed, call, 4, nullptr);
  }
  Py_XDECREF(tuple);
  Py_XDECREF(kw);
  Py_DECREF(out);
  return r;
}

bool is_view_kind(int fast) { return fast >= kView && fast <= kExpand; }

}  // namespace

TensorObject* cuda_view_source(PyObject* o) {
  if (Py_TYPE(o) != reinterpret_cast<PyTypeObject*>(tensor_class())) return nullptr;
  auto* t = reinterpret_cast<TensorObject*>(o);
  if (t->shape == nullptr || t->stride == nullptr || t->ndim < 0 || t->stride_ndim != t->ndim || !t->offset_ok ||
      t->dtype == nullptr || t->dtype_code < 0 || !is_cuda(t))
    return nullptr;
  return t;
}

bool autocast_casts(PyObject* op) {
  int applies = autocast_applies(op);
  if (applies < 0) PyErr_Clear();  // unknown: the Python dispatcher decides
  return applies != 0;
}

PyObject* device_fast_call(PyObject* op, PyObject* const* args, size_t nargsf, PyObject* kwnames, bool* handled) {
  *handled = false;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs > 0 && is_tensor_base(args[0]) && reinterpret_cast<TensorObject*>(args[0])->device_kind != kDeviceOther)
    return nullptr;  // the CPU (and meta) calls: one check
  // The first tensor argument names the device (dispatch._device_type_of): usually args[0]; a number
  // may come first (`0.5 * x` is mul(0.5, x)).
  Py_ssize_t lead = 0;
  while (lead < nargs && !is_tensor_base(args[lead])) {
    if (lead >= 2 || PyList_Check(args[lead]) || PyTuple_Check(args[lead])) return nullptr;
    ++lead;
  }
  if (lead == nargs || !plain_tensor_type(reinterpret_cast<PyObject*>(Py_TYPE(args[lead])))) return nullptr;
  auto* first = reinterpret_cast<TensorObject*>(args[lead]);
  if (first->device_kind != kDeviceOther || first->device == nullptr || !plain_dispatch_for(op, args, nargs, kwnames)) return nullptr;
  bool grad = false;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nargs + nkw && !grad; ++i) grad = requires_grad(args[i]);
  if (grad) {
    int on = grad_enabled_now();
    if (on < 0) {
      PyErr_Clear();
      return nullptr;
    }
    grad = on != 0;
  }
  PyObject* type = device_type(first->device);
  if (type == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  auto* opo = reinterpret_cast<OpObject*>(op);
  PyObject* spec = nullptr;
  int plan = kGradNone;
  if (grad) {
    if (!recordable(args, nargs, kwnames)) return nullptr;
    plan = grad_plan(op, &opo->grad_spec, &spec);
    if (plan == kGradError) {
      *handled = true;
      return nullptr;
    }
    if (plan == kGradPython) return nullptr;
  }
  // Views: the native kernel (metadata only, no Python call).
  if (kwnames == nullptr && is_view_kind(opo->fast) && (type == s_cuda || PyUnicode_Compare(type, s_cuda) == 0)) {
    PyObject* r = fast_view_kernel(opo->fast, args, nargs);
    if (r != NOT_HANDLED) {
      *handled = true;
      if (r == nullptr || plan != kGradRecord) return r;
      return record_result(op, spec, r, args, nargs, kwnames);
    }
  }
  PyObject* kernels = PyObject_GetAttr(op, s_kernels);
  if (kernels == nullptr || !PyDict_CheckExact(kernels)) {
    Py_XDECREF(kernels);
    PyErr_Clear();
    return nullptr;
  }
  PyObject* kernel = PyDict_GetItemWithError(kernels, type);  // borrowed
  Py_XINCREF(kernel);
  Py_DECREF(kernels);
  if (kernel == nullptr) {
    PyErr_Clear();
    return nullptr;  // no kernel: the Python dispatcher raises PyTorch's error
  }
  *handled = true;
  if (plan != kGradRecord) {
    // No recording (or a non-differentiable op, which `record` runs as it is).
    PyObject* result = PyObject_Vectorcall(kernel, args, nargsf, kwnames);
    Py_DECREF(kernel);
    return result;
  }
  // As `record`: the kernel runs with grad mode off (a composite kernel records nothing).
  if (set_grad_enabled(Py_False) < 0) {
    Py_DECREF(kernel);
    return nullptr;
  }
  PyObject* out = PyObject_Vectorcall(kernel, args, nargsf, kwnames);
  Py_DECREF(kernel);
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  int rc = set_grad_enabled(Py_True);
  PyErr_Restore(et, ev, tb);
  if (out == nullptr) return nullptr;
  if (rc < 0) {
    Py_DECREF(out);
    return nullptr;
  }
  return record_result(op, spec, out, args, nargs, kwnames);
}

}  // namespace ember
