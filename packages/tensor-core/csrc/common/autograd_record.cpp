// Native grad recording (see autograd_record.h): the registry ember-autograd fills, the plan for
// a call whose inputs require grad, and the one function that gives a fast-path result its
// backward node (its saved tensors and edges come from autograd_saved.cpp).
//
// The node built here is an instance of the op's Python node class (`MulBackward0`, a heap
// subclass of autograd's OpNode, whose slots all live in _C.AutogradNode), filled exactly as
// `OpNode.__init__` and `_record_out_of_place` would fill it, so the Python engine runs it and
// user code inspects it as any other node. Saved inputs are `SavedTensor` instances built as
// `SavedTensor(t, False)` builds them when no saved-tensor hooks are active.
#include <cstddef>
#include <stdexcept>

#include "autograd_internal.h"
#include "dtype.h"

namespace ember {

Registry g_reg;

namespace {

PyObject* s_grad_enabled = nullptr;
PyObject* s_enabled = nullptr;

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

// _autograd_stand_in(t): the native recorder's stand-in for t (Note [Untracked stand-ins]), for the
// Python recorder's; None where t's metadata is not plain (symbolic sizes: the Python recorder makes it).
PyObject* py_autograd_stand_in(PyObject*, PyObject* arg) {
  if (!is_tensor_base(arg)) {
    PyErr_SetString(PyExc_TypeError, "_autograd_stand_in(t) takes a tensor");
    return nullptr;
  }
  auto* t = reinterpret_cast<TensorObject*>(arg);
  if (t->ndim < 0 || t->stride_ndim != t->ndim || !t->offset_ok || dtype_object(t->dtype_code) == nullptr)
    Py_RETURN_NONE;
  return stand_in(t);
}

PyMethodDef functions[] = {
    {"_autograd_setup", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_autograd_setup)),
     METH_FASTCALL, "Registers ember-autograd's graph classes with the native recording of the fast path."},
    {"_autograd_stand_in", py_autograd_stand_in, METH_O,
     "A data-less meta tensor standing for t in a backward node, untracked by the garbage collector."},
    {nullptr, nullptr, 0, nullptr}};

// A node's input metadata entry (shape, dtype) for t, shared between nodes: one tuple per distinct
// (shape, dtype) (a dict per dtype, keyed by the shape tuple, cleared past 4096 entries) instead of a new
// one per recorded input. The pair holds a dtype (a GC-tracked object), so every fresh pair stayed
// tracked, was promoted with the step's graph and rescanned by the collections after it.
PyObject* g_meta_pairs[kNumDTypes] = {};

PyObject* meta_pair(TensorObject* t, bool* shared) {
  *shared = false;
  int code = t->dtype_code;
  // (t->ndim >= 0: the shape holds plain ints, so it hashes)
  if (code < 0 || code >= kNumDTypes || t->ndim < 0 || t->shape == nullptr || !PyTuple_CheckExact(t->shape) ||
      t->dtype != dtype_object(code))
    return PyTuple_Pack(2, t->shape, t->dtype);
  PyObject*& cache = g_meta_pairs[code];
  if (cache == nullptr && (cache = PyDict_New()) == nullptr) return nullptr;
  PyObject* hit = PyDict_GetItemWithError(cache, t->shape);  // borrowed
  *shared = true;
  if (hit != nullptr) return Py_NewRef(hit);
  if (PyErr_Occurred()) return nullptr;
  PyObject* pair = PyTuple_Pack(2, t->shape, t->dtype);
  if (pair == nullptr) return nullptr;
  if (PyDict_GET_SIZE(cache) >= 4096) PyDict_Clear(cache);
  if (PyDict_SetItem(cache, t->shape, pair) < 0) {
    Py_DECREF(pair);
    return nullptr;
  }
  return pair;
}

// The input_meta of a one-input node whose entry is a shared pair: one shared 1-tuple per pair (the pairs
// are few; cleared with them past 4096 entries).
PyObject* g_meta_singles = nullptr;

PyObject* single_meta(PyObject* pair) {
  if (g_meta_singles == nullptr && (g_meta_singles = PyDict_New()) == nullptr) return nullptr;
  PyObject* hit = PyDict_GetItemWithError(g_meta_singles, pair);  // borrowed
  if (hit != nullptr) return Py_NewRef(hit);
  if (PyErr_Occurred()) return nullptr;
  PyObject* single = PyTuple_Pack(1, pair);
  if (single == nullptr) return nullptr;
  if (PyDict_GET_SIZE(g_meta_singles) >= 4096) PyDict_Clear(g_meta_singles);
  if (PyDict_SetItem(g_meta_singles, pair, single) < 0) {
    Py_DECREF(single);
    return nullptr;
  }
  return single;
}

// A node's layout (per argument: its edge index or None) shared between nodes: one tuple per distinct
// layout (a handful: (0, None) for view, (0, None, None) for t, ...) instead of a new GC-allocated tuple per
// recorded node, which counted towards the next young collection and stayed tracked until one untracked it.
// Cleared past 1024 entries. Returns a new reference (layout's, or the shared one's).
PyObject* g_layouts = nullptr;

// _SavedArgs of 0-8 Nones (record_node's nodes whose formula reads no argument), shared.
PyObject* g_none_saved[9] = {};

// Whether `o` holds nothing the collector tracks: an untracked object (an int, None, a stand-in: Note
// [Untracked stand-ins]) or an exact tuple of such (a view's shape argument, which CPython would untrack
// only at its first collection).
bool untracked_content(PyObject* o) {
  if (!PyObject_GC_IsTracked(o)) return true;
  if (!PyTuple_CheckExact(o)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i)
    if (PyObject_GC_IsTracked(PyTuple_GET_ITEM(o, i))) return false;
  return true;
}

PyObject* shared_layout(PyObject* layout) {
  if (g_layouts == nullptr && (g_layouts = PyDict_New()) == nullptr) return nullptr;
  PyObject* hit = PyDict_GetItemWithError(g_layouts, layout);  // borrowed
  if (hit != nullptr) return Py_NewRef(hit);
  if (PyErr_Occurred()) return nullptr;
  if (PyDict_GET_SIZE(g_layouts) >= 1024) PyDict_Clear(g_layouts);
  if (PyDict_SetItem(g_layouts, layout, layout) < 0) return nullptr;
  PyObject_GC_UnTrack(layout);  // ints and None only
  return Py_NewRef(layout);
}

}  // namespace

int grad_enabled_now() {
  if (g_dispatch.grad_state == nullptr) return 0;
  PyObject* v = PyObject_GetAttr(g_dispatch.grad_state, s_grad_enabled);
  if (v == nullptr) return -1;
  int truth = v == Py_True ? 1 : v == Py_False ? 0 : PyObject_IsTrue(v);
  Py_DECREF(v);
  return truth;
}

namespace {

// A spec's overloads (Note [Overload node names] in autograd's _recording.py): None, or
// (positions: tuple of ints, classes: a 4-tuple of node classes by argument kind).
bool valid_overloads(PyObject* o) {
  if (o == Py_None) return true;
  if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 2) return false;
  PyObject* positions = PyTuple_GET_ITEM(o, 0);
  PyObject* classes = PyTuple_GET_ITEM(o, 1);
  if (!PyTuple_Check(positions) || !PyTuple_Check(classes) || PyTuple_GET_SIZE(classes) != 4) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(positions); ++i)
    if (!PyLong_Check(PyTuple_GET_ITEM(positions, i))) return false;
  for (Py_ssize_t i = 0; i < 4; ++i)
    if (!PyType_Check(PyTuple_GET_ITEM(classes, i))) return false;
  return true;
}

// The kind of an argument that picks an overload's node class: 0 none, 1 number, 2 sequence, 3 tensor.
int overload_arg_kind(PyObject* a) {
  if (a == Py_None) return 0;
  if (is_tensor_base(a)) return 3;
  if (PyTuple_Check(a) || PyList_Check(a)) return 2;
  return PyLong_Check(a) || PyFloat_Check(a) ? 1 : 0;
}

// The node class for this call: the spec's, or the one its overload rule picks.
PyTypeObject* node_class_for(PyObject* spec, PyObject* const* args, Py_ssize_t nargs) {
  PyObject* overloads = PyTuple_GET_ITEM(spec, 6);
  if (overloads == Py_None) return reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(spec, 2));
  PyObject* positions = PyTuple_GET_ITEM(overloads, 0);
  int kind = 0;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(positions) && kind == 0; ++i) {
    Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, i));
    if (at >= 0 && at < nargs) kind = overload_arg_kind(args[at]);
  }
  return reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(PyTuple_GET_ITEM(overloads, 1), kind));
}

// Whether `positions` (a tuple of ints) holds `i`.
bool position_in(PyObject* positions, Py_ssize_t i) {
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(positions); ++k)
    if (PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, k)) == i) return true;
  return false;
}

}  // namespace

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
    const bool python_until_formula = PyTuple_Check(s) && PyTuple_GET_SIZE(s) == 2 && PyTuple_GET_ITEM(s, 1) == Py_None;
    if (s != Py_None && !python_until_formula &&
        (!PyTuple_Check(s) || PyTuple_GET_SIZE(s) != 9 || !valid_overloads(PyTuple_GET_ITEM(s, 6)) ||
         (PyTuple_GET_ITEM(s, 8) != Py_None && !PyTuple_Check(PyTuple_GET_ITEM(s, 8))))) {
      Py_DECREF(s);
      PyErr_SetString(PyExc_TypeError, "autograd's native_spec must return a 9-tuple, a (name, None) pair or None");
      return kGradError;
    }
    Py_XSETREF(*cache, s);
  }
  // None: always the Python recording; (name, None): the Python recording while FORMULAS has no
  // formula for name (the check above asks again once one is registered, e.g. a test's
  // monkeypatch.delitem undone).
  if (s == Py_None || PyTuple_GET_SIZE(s) == 2) return kGradPython;
  *spec = s;
  return PyTuple_GET_ITEM(s, 2) == Py_None ? kGradNone : kGradRecord;
}

namespace {

PyObject* s_save_output = nullptr;     // "save_output"
PyObject* s_nondiff_outputs = nullptr; // "nondiff_outputs"

// _recording._saves_output(formula, i): whether the formula keeps output i (save_output: a bool or a
// container of output positions); -1 on error.
int saves_output_at(PyObject* keep, Py_ssize_t i) {
  if (PyBool_Check(keep)) return keep == Py_True;
  PyObject* index = PyLong_FromSsize_t(i);
  if (index == nullptr) return -1;
  const int in = PySequence_Contains(keep, index);
  Py_DECREF(index);
  return in;
}

// make_node's saved outputs and set_history for a call with several fresh tensor outputs (the node
// is already built for output 0's recording): every output the formula keeps saved as
// SavedTensor(o, True, i), the node's _num_outputs, and each floating output not in the formula's
// nondiff_outputs given (node, i) as its history.
int finish_outputs(PyObject* node, PyObject* outs) {
  auto* n = reinterpret_cast<NodeObject*>(node);
  const Py_ssize_t count = PyTuple_GET_SIZE(outs);
  if (s_save_output == nullptr) {
    s_save_output = PyUnicode_InternFromString("save_output");
    s_nondiff_outputs = PyUnicode_InternFromString("nondiff_outputs");
  }
  PyObject* keep = PyObject_GetAttr(n->formula, s_save_output);
  if (keep == nullptr) return -1;
  PyObject* skip = PyObject_GetAttr(n->formula, s_nondiff_outputs);
  if (skip == nullptr) {
    Py_DECREF(keep);
    return -1;
  }
  PyObject* saved = nullptr;
  int rc = -1;
  if (PyObject_IsTrue(keep) == 1) {
    saved = PyTuple_New(count);
    if (saved == nullptr) goto done;
    for (Py_ssize_t i = 0; i < count; ++i) {
      auto* o = reinterpret_cast<TensorObject*>(PyTuple_GET_ITEM(outs, i));
      const int want = saves_output_at(keep, i);
      if (want < 0) goto done;
      PyObject* item = Py_NewRef(Py_None);
      if (want) {
        Py_DECREF(item);
        PyObject* data = alias_of(o);
        item = data == nullptr ? nullptr
                               : new_saved(data, o, true, is_inexact_code(o->dtype_code) ? Py_True : Py_False);
        if (item == nullptr) goto done;
        Py_SETREF(reinterpret_cast<SavedObject*>(item)->nr, PyLong_FromSsize_t(i));
        if (reinterpret_cast<SavedObject*>(item)->nr == nullptr) {
          Py_DECREF(item);
          goto done;
        }
      }
      PyTuple_SET_ITEM(saved, i, item);
    }
    Py_SETREF(n->saved_outputs, saved);
    saved = nullptr;
  }
  Py_XSETREF(n->num_outputs, PyLong_FromSsize_t(count));
  if (n->num_outputs == nullptr) goto done;
  for (Py_ssize_t i = 0; i < count; ++i) {
    PyObject* item = PyTuple_GET_ITEM(outs, i);
    auto* o = reinterpret_cast<TensorObject*>(item);
    if (!is_real_floating_code(o->dtype_code)) continue;
    PyObject* index = PyLong_FromSsize_t(i);
    if (index == nullptr) goto done;
    const int skipped = PySequence_Contains(skip, index);
    if (skipped != 0) {
      Py_DECREF(index);
      if (skipped < 0) goto done;
      continue;
    }
    if (i > 0) {
      PyObject* meta = PyObject_CallOneArg(g_reg.meta_cls, index);
      if (meta == nullptr) {
        Py_DECREF(index);
        goto done;
      }
      Py_XSETREF(o->autograd_meta, meta);
    }
    Py_DECREF(index);
    Py_XSETREF(o->grad_fn, Py_NewRef(node));
    Py_XSETREF(o->requires_grad, Py_NewRef(Py_True));
    o->rg = 1;
  }
  rc = 0;
done:
  Py_XDECREF(saved);
  Py_DECREF(keep);
  Py_DECREF(skip);
  return rc;
}

}  // namespace

int grad_record(PyObject* spec, PyObject* out_obj, PyObject* const* args, Py_ssize_t nargs, PyObject** node_out) {
  // Several outputs (layer_norm's, SDPA's, native_dropout's): the node as make_node builds it (every
  // tensor argument saved, whatever the formula reads), recorded on output 0 and then finished.
  PyObject* outs = PyTuple_CheckExact(out_obj) ? out_obj : nullptr;
  if (outs != nullptr) out_obj = PyTuple_GET_ITEM(outs, 0);
  auto* out = reinterpret_cast<TensorObject*>(out_obj);
  if (outs == nullptr && !is_real_floating_code(out->dtype_code)) return 0;
  PyObject* formula = PyTuple_GET_ITEM(spec, 1);
  PyTypeObject* cls = node_class_for(spec, args, nargs);
  bool reads = outs != nullptr || PyTuple_GET_ITEM(spec, 3) == Py_True;
  bool saves_output = outs == nullptr && PyTuple_GET_ITEM(spec, 4) == Py_True;
  bool meta_only = PyTuple_GET_ITEM(spec, 5) == Py_True;  // the formula reads metadata only: stand-ins
  // A number operand gets an edge (None, 0) too (Note [Number operands' edges], autograd's _recording.py).
  bool number_edges = PyTuple_GET_ITEM(spec, 7) == Py_True;
  // Positions of args with no edge at all (Note [Non-differentiable inputs' edges]): None or a tuple.
  PyObject* nondiff = PyTuple_GET_ITEM(spec, 8);
  // layout and input_meta are tuples: once the GC finds them holding only untracked items (ints, None,
  // (shape, dtype) pairs: the dtypes are untracked singletons) it stops tracking them, so the graph of a
  // step adds fewer containers to every collection and fewer survivors to promote (and later scan).
  PyObject* layout = PyTuple_New(nargs);
  PyObject* meta = nullptr;
  Py_ssize_t n_meta = 0;
  PyObject* meta_items[16];
  bool meta_shared = false;  // (one-input nodes) the entry is a shared pair of meta_pair's cache
  PyObject* edges = PyTuple_New(0);
  PyObject* saved = PyTuple_New(nargs);
  PyObject* node = nullptr;
  Py_ssize_t n_edges = 0;
  Py_ssize_t numbers = 0;
  PyObject* edge_items[8];
  if (layout == nullptr || edges == nullptr || saved == nullptr || nargs > 8) goto fail;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    PyObject* a = args[i];
    if (!is_tensor_base(a)) {
      PyTuple_SET_ITEM(layout, i, Py_NewRef(Py_None));
      PyTuple_SET_ITEM(saved, i, Py_NewRef(a));
      if (PyFloat_Check(a) || PyLong_Check(a) || PyComplex_Check(a)) ++numbers;
      continue;
    }
    auto* t = reinterpret_cast<TensorObject*>(a);
    PyObject* edge;
    PyObject* m;
    if (!t->rg && nondiff != Py_None && position_in(nondiff, i)) {
      PyTuple_SET_ITEM(layout, i, Py_NewRef(Py_None));
      PyObject* s = !reads ? Py_NewRef(Py_None) : meta_only ? stand_in(t) : save_input(t);
      if (s == nullptr) goto fail_edges;
      PyTuple_SET_ITEM(saved, i, s);
      continue;
    }
    if (t->rg) {
      PyObject* fn = current_grad_fn(t);
      if (fn == nullptr) goto fail_edges;
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
      m = meta_pair(t, &meta_shared);
      PyObject* index = PyLong_FromSsize_t(n_edges);
      if (edge == nullptr || m == nullptr || index == nullptr) {
        Py_XDECREF(edge);
        Py_XDECREF(m);
        Py_XDECREF(index);
        goto fail_edges;
      }
      PyTuple_SET_ITEM(layout, i, index);
    } else {
      edge = Py_NewRef(g_reg.no_edge);
      m = Py_NewRef(Py_None);
      PyTuple_SET_ITEM(layout, i, Py_NewRef(Py_None));
    }
    edge_items[n_edges++] = edge;
    meta_items[n_meta++] = m;
    PyObject* s = !reads ? Py_NewRef(Py_None) : meta_only ? stand_in(t) : save_input(t);
    if (s == nullptr) goto fail_edges;
    PyTuple_SET_ITEM(saved, i, s);
  }
  for (; number_edges && numbers > 0; --numbers) {  // after the tensors' edges
    meta_items[n_meta++] = Py_NewRef(Py_None);
    edge_items[n_edges++] = Py_NewRef(g_reg.no_edge);
  }
  {
    PyObject* layout_shared = shared_layout(layout);
    if (layout_shared == nullptr) goto fail_edges;
    Py_SETREF(layout, layout_shared);
    Py_SETREF(edges, PyTuple_New(n_edges));
    if (edges == nullptr) goto fail_edges;
    if (n_meta == 1 && meta_items[0] != Py_None && meta_shared) {
      meta = single_meta(meta_items[0]);
      if (meta == nullptr) goto fail_edges;
      Py_DECREF(meta_items[0]);
    } else {
      meta = PyTuple_New(n_meta);
      if (meta == nullptr) goto fail_edges;
      // (shape, dtype) pairs and Nones lead nowhere: untracked (addmm's, layer_norm's: ~230 per GPT-2 forward)
      PyObject* dtype0 = dtype_object(0);
      PyTypeObject* dtype_type = dtype0 == nullptr ? nullptr : Py_TYPE(dtype0);
      bool untracked = true;
      for (Py_ssize_t i = 0; i < n_meta; ++i) {
        PyObject* m = meta_items[i];
        PyTuple_SET_ITEM(meta, i, m);
        untracked = untracked && (m == Py_None || (PyTuple_CheckExact(m) && PyTuple_GET_SIZE(m) == 2 &&
                                                   untracked_content(PyTuple_GET_ITEM(m, 0)) &&
                                                   Py_TYPE(PyTuple_GET_ITEM(m, 1)) == dtype_type));
      }
      if (untracked) PyObject_GC_UnTrack(meta);
    }
    n_meta = 0;
    for (Py_ssize_t i = 0; i < n_edges; ++i) PyTuple_SET_ITEM(edges, i, edge_items[i]);
    n_edges = 0;
    // The saved args as the formula reads them: a _SavedArgs (tuple subclass) with the same items; one
    // shared per length when they are all None (a formula that reads no argument: add, sub, ...).
    auto* sa_cls = reinterpret_cast<PyTypeObject*>(g_reg.saved_args_cls);
    bool nothing = true;
    for (Py_ssize_t i = 0; i < nargs && nothing; ++i) nothing = PyTuple_GET_ITEM(saved, i) == Py_None;
    PyObject* saved_args = nothing ? g_none_saved[nargs] : nullptr;
    if (saved_args != nullptr && Py_TYPE(saved_args) == sa_cls) {
      Py_SETREF(saved, Py_NewRef(saved_args));
    } else {
      saved_args = sa_cls->tp_alloc(sa_cls, nargs);
      if (saved_args == nullptr) goto fail;
      bool untracked = true;
      for (Py_ssize_t i = 0; i < nargs; ++i) {
        PyObject* item = PyTuple_GET_ITEM(saved, i);
        PyTuple_SET_ITEM(saved_args, i, Py_NewRef(item));
        untracked = untracked && untracked_content(item);
      }
      // A view's or a cast's args (a stand-in, ints, a tuple of ints): an immutable tuple (_SavedArgs has
      // no __dict__) of things that lead nowhere cannot be in a cycle, so the collector need not see it
      // (~270 per GPT-2 forward, alive until backward)
      if (untracked) PyObject_GC_UnTrack(saved_args);
      Py_SETREF(saved, saved_args);
      if (nothing) Py_XSETREF(g_none_saved[nargs], Py_NewRef(saved_args));
    }
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
    if (outs != nullptr) {
      const int rc = finish_outputs(node, outs);
      if (rc == 0 && node_out != nullptr) {
        *node_out = node;  // the caller's reference
      } else {
        Py_DECREF(node);
      }
      return rc;
    }
    Py_SETREF(out->grad_fn, node);
    Py_SETREF(out->requires_grad, Py_NewRef(Py_True));
    out->rg = 1;
    return 0;
  }
fail_edges:
  for (Py_ssize_t i = 0; i < n_edges; ++i) Py_DECREF(edge_items[i]);
  for (Py_ssize_t i = 0; i < n_meta; ++i) Py_DECREF(meta_items[i]);
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
  bind_autograd_types(module);
  if (PyModule_AddFunctions(module, functions) < 0) throw std::runtime_error("module init");
  bind_autograd_engine(module);
  bind_autograd_saved();
  s_grad_enabled = PyUnicode_InternFromString("grad_enabled");
  s_enabled = PyUnicode_InternFromString("enabled");
  g_reg.acc_seq = PyLong_FromLongLong(1LL << 62);
  g_reg.empty_tuple = PyTuple_New(0);
  g_reg.no_edge = PyTuple_Pack(2, Py_None, g_dispatch.zero ? g_dispatch.zero : PyLong_FromLong(0));
}

}  // namespace ember
