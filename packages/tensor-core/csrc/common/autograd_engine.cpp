// The backward engine's loop in C: autograd/_engine.py's `execute` hands runs with no captures
// (backward() without `inputs`) and anomaly mode off to these two functions. Nodes stay Python
// objects (their apply, _release and hooks run as before); what moves to C is the bookkeeping
// between them: counting dependencies, input buffers, the ready queue.
//
// _C._graph_dependencies(root) -> {node: number of edges leading into it}
// _C._run_graph(root, deps, keep_graph, pre, post): runs every node under root in the engine's
//   order (ready nodes highest sequence number first; a node that makes exactly one other ready,
//   with nothing else waiting, hands over directly). `pre(fn, grads) -> grads` runs a node's
//   tensor hooks, retain_grad and pre-hooks (called only for nodes that have any);
//   `post(fn, outputs, grads) -> outputs` its post-hooks.
#include <algorithm>
#include <climits>
#include <stdexcept>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "autograd_record.h"
#include "tensor_impl.h"

namespace ember {

namespace {

PyObject* s_next = nullptr;
PyObject* s_num_outputs = nullptr;
PyObject* s_hooked = nullptr;
PyObject* s_pre_hooks = nullptr;
PyObject* s_post_hooks = nullptr;
PyObject* s_seq = nullptr;
PyObject* s_apply = nullptr;
PyObject* s_release = nullptr;
PyObject* s_backward = nullptr;
PyObject* s_unpack = nullptr;

// A list of n Nones (new reference).
PyObject* none_list(Py_ssize_t n) {
  PyObject* l = PyList_New(n);
  if (l == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) PyList_SET_ITEM(l, i, Py_NewRef(Py_None));
  return l;
}

// Registered by autograd (_C._engine_setup): OpNode's own apply and _release (a node whose class
// has these runs them natively here), Inputs, fix_grad and the SavedTensor class.
struct EngineRegistry {
  PyObject* opnode_apply = nullptr;
  PyObject* opnode_release = nullptr;
  PyObject* inputs_cls = nullptr;
  PyObject* fix_grad = nullptr;
  PyObject* saved_cls = nullptr;
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

// OpNode._release: drops the saved tensors' data (the node may not run again).
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

PyObject* NOT_NATIVE = reinterpret_cast<PyObject*>(&NOT_NATIVE);

// OpNode.apply for the common node (no saved kwargs, no args needing the node): the formula's
// gradients, one per edge, checked against each input's shape and dtype (fix_grad otherwise).
// NOT_NATIVE when the Python method must run.
PyObject* opnode_apply(PyObject* fn, PyObject* grads) {
  auto* n = reinterpret_cast<NodeObject*>(fn);
  if (n->args_need_node != Py_False || n->kwargs == nullptr || !PyDict_Check(n->kwargs) ||
      PyDict_GET_SIZE(n->kwargs) != 0 || n->saved_args == nullptr || n->formula == nullptr ||
      n->layout == nullptr || !PyList_CheckExact(n->layout) || n->input_meta == nullptr ||
      !PyList_CheckExact(n->input_meta) || n->saved_outputs == nullptr || !PyTuple_Check(n->saved_outputs) ||
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
  PyObject* call_args[3] = {n->saved_args, n->kwargs, nullptr};
  PyObject* inputs = PyObject_Vectorcall(g_eng.inputs_cls, call_args, 2, nullptr);
  PyObject* backward = inputs == nullptr ? nullptr : PyObject_GetAttr(n->formula, s_backward);
  PyObject* res = nullptr;
  if (backward != nullptr) {
    PyObject* bargs[3] = {grads, inputs, outputs};
    res = PyObject_Vectorcall(backward, bargs, 3, nullptr);
  }
  Py_XDECREF(backward);
  Py_XDECREF(inputs);
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
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(layout) && i < n_res; ++i) {
    PyObject* spec = PyList_GET_ITEM(layout, i);
    PyObject* g = PySequence_Fast_GET_ITEM(seq, i);
    if (spec == Py_None || g == Py_None) continue;
    if (PyLong_CheckExact(spec)) {
      Py_ssize_t e = PyLong_AsSsize_t(spec);
      if (e < 0 || e >= n_next || e >= PyList_GET_SIZE(meta)) {
        PyErr_SetString(PyExc_RuntimeError, "autograd: a node's layout does not match its edges");
        goto fail;
      }
      PyObject* m = PyList_GET_ITEM(meta, e);
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
        if (e < 0 || e >= n_next || e >= PyList_GET_SIZE(meta)) {
          if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "autograd: a node's layout does not match its edges");
          Py_DECREF(gs);
          Py_DECREF(specs);
          goto fail;
        }
        PyObject* fargs[4] = {gj, PyList_GET_ITEM(meta, e), fn, ej};
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

PyObject* py_engine_setup(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5) {
    PyErr_SetString(PyExc_TypeError, "_engine_setup(OpNode.apply, OpNode._release, Inputs, fix_grad, SavedTensor)");
    return nullptr;
  }
  PyObject** slots[] = {&g_eng.opnode_apply, &g_eng.opnode_release, &g_eng.inputs_cls, &g_eng.fix_grad,
                        &g_eng.saved_cls};
  for (int i = 0; i < 5; ++i) Py_XSETREF(*slots[i], Py_NewRef(args[i]));
  Py_RETURN_NONE;
}

// A node's slot (new reference): read from the C struct for autograd's nodes, else by name.
PyObject* slot(PyObject* node, PyObject* NodeObject::*member, PyObject* name) {
  if (is_node(node)) {
    PyObject* v = reinterpret_cast<NodeObject*>(node)->*member;
    if (v != nullptr) return Py_NewRef(v);
  }
  return PyObject_GetAttr(node, name);
}

// Truth of a slot that holds None, a bool or a hook dict; -1 on error.
int slot_truth(PyObject* node, PyObject* NodeObject::*member, PyObject* name) {
  PyObject* v = slot(node, member, name);
  if (v == nullptr) return -1;
  int t = v == Py_None || v == Py_False ? 0 : v == Py_True ? 1 : PyObject_IsTrue(v);
  Py_DECREF(v);
  return t;
}

// The (node, output_nr) pairs of `_next` as a tuple (new reference).
PyObject* next_edges(PyObject* node) {
  PyObject* v = slot(node, &NodeObject::next, s_next);
  if (v == nullptr || PyTuple_Check(v)) return v;
  PyObject* t = PySequence_Tuple(v);
  Py_DECREF(v);
  return t;
}

// Item i of an edge (borrowed when the edge is a tuple; else a new reference stored in *hold).
PyObject* edge_item(PyObject* edge, Py_ssize_t i, PyObject** hold) {
  if (PyTuple_Check(edge) && PyTuple_GET_SIZE(edge) == 2) return PyTuple_GET_ITEM(edge, i);
  *hold = PySequence_GetItem(edge, i);
  return *hold;
}

PyObject* py_graph_dependencies(PyObject*, PyObject* root) {
  PyObject* deps = PyDict_New();
  if (deps == nullptr) return nullptr;
  std::vector<PyObject*> stack{root};  // borrowed: deps (or the caller, for root) holds each
  while (!stack.empty()) {
    PyObject* fn = stack.back();
    stack.pop_back();
    PyObject* edges = next_edges(fn);
    if (edges == nullptr) goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(edges); ++i) {
      PyObject* hold = nullptr;
      PyObject* nxt = edge_item(PyTuple_GET_ITEM(edges, i), 0, &hold);
      if (nxt == nullptr) {
        Py_DECREF(edges);
        goto fail;
      }
      if (nxt != Py_None) {
        PyObject* count = PyDict_GetItemWithError(deps, nxt);
        PyObject* now = count == nullptr ? PyLong_FromLong(1) : PyLong_FromSsize_t(PyLong_AsSsize_t(count) + 1);
        bool fresh = count == nullptr;
        if (PyErr_Occurred() || now == nullptr || PyDict_SetItem(deps, nxt, now) < 0) {
          Py_XDECREF(now);
          Py_XDECREF(hold);
          Py_DECREF(edges);
          goto fail;
        }
        Py_DECREF(now);
        if (fresh) stack.push_back(nxt);
      }
      Py_XDECREF(hold);
    }
    Py_DECREF(edges);
  }
  return deps;
fail:
  Py_DECREF(deps);
  return nullptr;
}

struct Ready {
  long long seq;
  uint64_t tie;
  PyObject* node;  // borrowed (deps holds it)
};

// Heap order: the highest sequence number first; among equals, the earliest pushed.
bool lower_priority(const Ready& a, const Ready& b) { return a.seq < b.seq || (a.seq == b.seq && a.tie > b.tie); }

long long seq_of(PyObject* node, bool* ok) {
  PyObject* v = slot(node, &NodeObject::seq, s_seq);
  if (v == nullptr) {
    *ok = false;
    return 0;
  }
  int overflow = 0;
  long long s = PyLong_AsLongLongAndOverflow(v, &overflow);
  Py_DECREF(v);
  if (s == -1 && PyErr_Occurred()) *ok = false;
  return overflow > 0 ? LLONG_MAX : overflow < 0 ? LLONG_MIN : s;
}

Py_ssize_t num_outputs(PyObject* node) {
  PyObject* v = slot(node, &NodeObject::num_outputs, s_num_outputs);
  if (v == nullptr) return -1;
  Py_ssize_t n = PyLong_AsSsize_t(v);
  Py_DECREF(v);
  return n;
}

struct Run {
  std::unordered_map<PyObject*, PyObject*> buffers;  // node -> list of gradients (owned)
  std::unordered_map<PyObject*, Py_ssize_t> deps;
  std::vector<Ready> heap;
  uint64_t tie = 0;
  ~Run() {
    for (auto& kv : buffers) Py_DECREF(kv.second);
  }
  bool push(PyObject* node) {
    bool ok = true;
    long long s = seq_of(node, &ok);
    if (!ok) return false;
    heap.push_back({s, tie++, node});
    std::push_heap(heap.begin(), heap.end(), lower_priority);
    return true;
  }
};

// Adds gradient g (borrowed) for output nr of nxt into its input buffer.
int deliver(Run& run, PyObject* nxt, Py_ssize_t nr, PyObject* g) {
  auto it = run.buffers.find(nxt);
  PyObject* buf;
  if (it == run.buffers.end()) {
    Py_ssize_t n = num_outputs(nxt);
    if (n < 0) return -1;
    buf = none_list(n);
    if (buf == nullptr) return -1;
    run.buffers.emplace(nxt, buf);
  } else {
    buf = it->second;
  }
  if (nr < 0 || nr >= PyList_GET_SIZE(buf)) {
    PyErr_Format(PyExc_IndexError, "autograd engine: output number %zd out of range for %R", nr, nxt);
    return -1;
  }
  PyObject* old = PyList_GET_ITEM(buf, nr);
  PyObject* sum = old == Py_None ? Py_NewRef(g) : PyNumber_Add(old, g);
  if (sum == nullptr) return -1;
  PyList_SET_ITEM(buf, nr, sum);
  Py_DECREF(old);
  return 0;
}

PyObject* py_run_graph(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5 || !PyDict_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "_run_graph(root, deps: dict, keep_graph, pre, post)");
    return nullptr;
  }
  PyObject* fn = args[0];
  PyObject* deps_dict = args[1];
  int keep_graph = PyObject_IsTrue(args[2]);
  if (keep_graph < 0) return nullptr;
  PyObject* pre = args[3];
  PyObject* post = args[4];
  Run run;
  run.deps.reserve(PyDict_GET_SIZE(deps_dict));
  {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(deps_dict, &pos, &k, &v)) {
      Py_ssize_t c = PyLong_AsSsize_t(v);
      if (c == -1 && PyErr_Occurred()) return nullptr;
      run.deps[k] = c;
    }
  }
  while (true) {
    PyObject* grads;
    auto it = run.buffers.find(fn);
    if (it != run.buffers.end()) {
      grads = it->second;  // ownership moves here
      run.buffers.erase(it);
    } else {
      Py_ssize_t n = num_outputs(fn);
      grads = n < 0 ? nullptr : none_list(n);
      if (grads == nullptr) return nullptr;
    }
    int hooked = slot_truth(fn, &NodeObject::hooked, s_hooked);
    int pre_hooks = hooked < 0 ? -1 : slot_truth(fn, &NodeObject::pre_hooks, s_pre_hooks);
    if (pre_hooks < 0) {
      Py_DECREF(grads);
      return nullptr;
    }
    if (hooked || pre_hooks) {
      Py_SETREF(grads, PyObject_CallFunctionObjArgs(pre, fn, grads, nullptr));
      if (grads == nullptr) return nullptr;
    }
    PyObject* outputs = has_own(fn, s_apply, g_eng.opnode_apply) ? opnode_apply(fn, grads) : NOT_NATIVE;
    if (outputs == NOT_NATIVE) outputs = PyObject_CallMethodOneArg(fn, s_apply, grads);
    if (outputs == nullptr) {
      Py_DECREF(grads);
      return nullptr;
    }
    int post_hooks = slot_truth(fn, &NodeObject::post_hooks, s_post_hooks);
    if (post_hooks > 0) Py_SETREF(outputs, PyObject_CallFunctionObjArgs(post, fn, outputs, grads, nullptr));
    Py_DECREF(grads);
    if (post_hooks < 0 || outputs == nullptr) {
      Py_XDECREF(outputs);
      return nullptr;
    }
    if (!keep_graph && has_own(fn, s_release, g_eng.opnode_release)) {
      opnode_release(fn);
    } else if (!keep_graph) {
      PyObject* r = PyObject_CallMethodNoArgs(fn, s_release);
      if (r == nullptr) {
        Py_DECREF(outputs);
        return nullptr;
      }
      Py_DECREF(r);
    }
    PyObject* out_seq = PySequence_Fast(outputs, "a node's apply must return a sequence of gradients");
    Py_DECREF(outputs);
    if (out_seq == nullptr) return nullptr;
    PyObject* edges = next_edges(fn);
    if (edges == nullptr) {
      Py_DECREF(out_seq);
      return nullptr;
    }
    Py_ssize_t n = std::min(PyTuple_GET_SIZE(edges), PySequence_Fast_GET_SIZE(out_seq));
    PyObject* ready = nullptr;
    int err = 0;
    for (Py_ssize_t i = 0; i < n && !err; ++i) {
      PyObject* h0 = nullptr;
      PyObject* h1 = nullptr;
      PyObject* edge = PyTuple_GET_ITEM(edges, i);
      PyObject* nxt = edge_item(edge, 0, &h0);
      PyObject* nr_obj = nxt == nullptr ? nullptr : edge_item(edge, 1, &h1);
      if (nr_obj == nullptr) {
        err = 1;
      } else if (nxt != Py_None) {
        PyObject* g = PySequence_Fast_GET_ITEM(out_seq, i);
        if (g != Py_None) {
          Py_ssize_t nr = PyLong_AsSsize_t(nr_obj);
          if ((nr == -1 && PyErr_Occurred()) || deliver(run, nxt, nr, g) < 0) err = 1;
        }
        if (!err) {
          auto d = run.deps.find(nxt);
          if (d == run.deps.end()) {
            PyErr_Format(PyExc_RuntimeError, "autograd engine: %R is not in the graph's dependencies", nxt);
            err = 1;
          } else if (--d->second == 0) {
            if (ready == nullptr) ready = nxt;
            else if (!run.push(nxt)) err = 1;
          }
        }
      }
      Py_XDECREF(h0);
      Py_XDECREF(h1);
    }
    // This node's references go before the next one runs (AccumulateGrad may then take over a
    // gradient that only its input buffer holds, without a copy: _engine._stealable).
    Py_DECREF(edges);
    Py_DECREF(out_seq);
    if (err) return nullptr;
    if (ready != nullptr) {
      if (run.heap.empty()) {
        fn = ready;
        continue;
      }
      if (!run.push(ready)) return nullptr;
    }
    if (run.heap.empty()) break;
    std::pop_heap(run.heap.begin(), run.heap.end(), lower_priority);
    fn = run.heap.back().node;
    run.heap.pop_back();
  }
  Py_RETURN_NONE;
}

PyMethodDef functions[] = {
    {"_graph_dependencies", py_graph_dependencies, METH_O,
     "_graph_dependencies(root): {node: number of edges into it} over the graph under root."},
    {"_run_graph", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_run_graph)), METH_FASTCALL,
     "_run_graph(root, deps, keep_graph, pre, post): the backward engine's loop (autograd/_engine.py)."},
    {"_engine_setup", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_engine_setup)), METH_FASTCALL,
     "Registers OpNode's apply/_release, Inputs, fix_grad and SavedTensor with the native engine loop."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void bind_autograd_engine(PyObject* module) {
  s_next = PyUnicode_InternFromString("_next");
  s_num_outputs = PyUnicode_InternFromString("_num_outputs");
  s_hooked = PyUnicode_InternFromString("_hooked");
  s_pre_hooks = PyUnicode_InternFromString("_pre_hooks");
  s_post_hooks = PyUnicode_InternFromString("_post_hooks");
  s_seq = PyUnicode_InternFromString("_seq");
  s_apply = PyUnicode_InternFromString("apply");
  s_release = PyUnicode_InternFromString("_release");
  s_backward = PyUnicode_InternFromString("backward");
  s_unpack = PyUnicode_InternFromString("unpack");
  if (PyModule_AddFunctions(module, functions) < 0) throw std::runtime_error("module init");
}

}  // namespace ember
