// The backward engine's loop in C: autograd/_engine.py's `execute` hands runs with no captures
// (backward() without `inputs`) and anomaly mode off to these two functions. Nodes stay Python
// objects (their apply, _release and hooks run as before); what moves to C is the bookkeeping
// between them: counting dependencies, input buffers, the ready queue.
//
// _C._graph_dependencies(root) -> {node: number of edges leading into it}
// _C._run_graph(root, deps, keep_graph, pre, post): runs every node under root in the engine's
//   order (ready nodes highest sequence number first; a node that makes exactly one other ready,
//   with nothing else waiting, hands over directly). The queue is PyTorch's: a std binary heap
//   ordered by sequence number alone, nodes pushed in the order of the edges that made them
//   ready, so that equal numbers (every AccumulateGrad) come out in PyTorch's order. `pre(fn, grads) -> grads` runs a node's
//   tensor hooks, retain_grad and pre-hooks (called only for nodes that have any);
//   `post(fn, outputs, grads) -> outputs` its post-hooks.
#include <algorithm>
#include <climits>
#include <stdexcept>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "autograd_apply.h"
#include "autograd_internal.h"
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
PyObject* s_variable = nullptr;
PyObject* s_grad = nullptr;
PyObject* s_layout = nullptr;
PyObject* s_post_acc_hooks = nullptr;

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

// Whether a tensor's `_layout` is the class's strided one: no instance `_layout` (sparse tensors set
// their own) and the class attribute Tensor defines.
bool strided_layout(PyObject* t) {
  PyObject* dict = reinterpret_cast<TensorObject*>(t)->dict;
  if (dict != nullptr && PyDict_Check(dict) && PyDict_GetItemWithError(dict, s_layout) != nullptr) return false;
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  PyObject* own = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(tensor_class()), s_layout);
  return own != nullptr && _PyType_Lookup(Py_TYPE(t), s_layout) == own;
}

// AccumulateGrad.apply's common case (graph.py, _engine.accumulate_grad and _stealable restated): a
// leaf with no gradient yet gets the incoming one itself (no copy) when grad mode is off, the gradient
// is a plain dense Tensor with no history, no base and offset 0, that only the engine's input buffer
// holds (its storage only the gradient), laid out as the contiguous leaf is (the layout contract, which
// then holds whatever enforce_grad_layout_policy says), and the leaf has no post-accumulate hooks.
// Returns the node's outputs (an empty tuple), NOT_NATIVE for every other case (AccumulateGrad.apply
// runs: a copy, a sum into .grad, sparse or subclass gradients), or null with an error set.
PyObject* accumulate_native(PyObject* fn, PyObject* grads) {
  if (g_reg.acc_cls == nullptr || Py_TYPE(fn) != reinterpret_cast<PyTypeObject*>(g_reg.acc_cls) ||
      !PyList_CheckExact(grads) || PyList_GET_SIZE(grads) < 1)
    return NOT_NATIVE;
  PyObject* g = PyList_GET_ITEM(grads, 0);
  if (g == Py_None) return PyTuple_New(0);
  // Only the buffer holds the gradient (_stealable's refcount rule without its Python frames' references).
  if (Py_TYPE(g) != reinterpret_cast<PyTypeObject*>(tensor_class()) || Py_REFCNT(g) != 1) return NOT_NATIVE;
  auto* gt = reinterpret_cast<TensorObject*>(g);
  if ((gt->grad_fn != nullptr && gt->grad_fn != Py_None) || (gt->base != nullptr && gt->base != Py_None) ||
      gt->storage == nullptr || Py_REFCNT(gt->storage) != 1 || !gt->offset_ok || gt->offset_value != 0 ||
      gt->ndim < 0 || gt->stride_ndim != gt->ndim || !strided_layout(g))
    return NOT_NATIVE;
  PyObject* var = PyObject_GetAttr(fn, s_variable);
  if (var == nullptr) return nullptr;
  PyObject* result = NOT_NATIVE;
  auto* vt = reinterpret_cast<TensorObject*>(var);
  if (is_tensor_base(var) && (vt->grad == nullptr || vt->grad == Py_None) && vt->ndim == gt->ndim &&
      vt->stride_ndim == vt->ndim && contiguous_strides(vt) && strided_layout(var)) {
    bool fits = true;
    int64_t numel = 1;
    for (int32_t i = 0; i < vt->ndim && fits; ++i) {
      const int64_t size = vt->sizes[i];
      numel *= size;
      fits = gt->sizes[i] == size && !(size != 1 && gt->strides[i] != vt->strides[i]) && !(size == 1 && gt->strides[i] == 0);
    }
    int hooks = 0;
    if (fits && numel > 0 && vt->autograd_meta != nullptr && vt->autograd_meta != Py_None) {
      PyObject* h = PyObject_GetAttr(vt->autograd_meta, s_post_acc_hooks);
      hooks = h == nullptr ? -1 : h == Py_None ? 0 : PyObject_IsTrue(h);
      Py_XDECREF(h);
    }
    int on = hooks < 0 || !fits || numel == 0 ? 0 : grad_enabled_now();
    if (hooks < 0 || on < 0) {
      result = nullptr;
    } else if (fits && numel > 0 && hooks == 0 && on == 0) {
      result = PyObject_SetAttr(var, s_grad, g) < 0 ? nullptr : PyTuple_New(0);
    }
  }
  Py_DECREF(var);
  return result;
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
  PyObject* node;  // borrowed (deps holds it)
};

// Heap order: the highest sequence number first. Equal numbers are left to the heap's own
// algorithm, as in PyTorch's ReadyQueue (std::priority_queue over the sequence number): that
// fixes, e.g., which of two leaves' AccumulateGrad runs first, which hooks can observe.
bool lower_priority(const Ready& a, const Ready& b) { return a.seq < b.seq; }

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
  ~Run() {
    for (auto& kv : buffers) Py_DECREF(kv.second);
  }
  bool push(PyObject* node) {
    bool ok = true;
    long long s = seq_of(node, &ok);
    if (!ok) return false;
    heap.push_back({s, node});
    std::push_heap(heap.begin(), heap.end(), lower_priority);
    return true;
  }
};

// Whether the buffered gradient `old` can take `g` in place, as PyTorch's InputBuffer adds into
// a gradient nobody else holds (no new tensor, no extra pass over memory): a plain dense CPU
// float tensor that only the buffer references, with a storage of its own and no history, of
// g's shape and dtype, while no graph of the backward is being built.
bool adds_in_place(PyObject* old, PyObject* g) {
  if (reinterpret_cast<PyObject*>(Py_TYPE(old)) != tensor_class() || !is_tensor_base(g) || Py_REFCNT(old) != 1)
    return false;
  auto* o = reinterpret_cast<TensorObject*>(old);
  auto* t = reinterpret_cast<TensorObject*>(g);
  if (o->rg || t->rg || (o->grad_fn != nullptr && o->grad_fn != Py_None) || (o->base != nullptr && o->base != Py_None) ||
      o->storage == nullptr || Py_REFCNT(o->storage) != 1 || t->storage == o->storage || o->device_kind != kDeviceCPU ||
      t->device_kind != kDeviceCPU || (o->dtype_code != 8 && o->dtype_code != 9) || t->dtype_code != o->dtype_code ||
      o->ndim < 0 || o->ndim != t->ndim || o->stride_ndim != o->ndim)
    return false;
  int64_t expected = 1;
  for (int32_t i = o->ndim - 1; i >= 0; --i) {
    if (o->sizes[i] != t->sizes[i]) return false;
    if (o->sizes[i] != 1 && o->strides[i] != expected) return false;
    expected *= o->sizes[i];
  }
  int on = grad_enabled_now();
  if (on < 0) PyErr_Clear();  // (unknown: take the out-of-place sum)
  return on == 0;
}

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
  if (old != Py_None && adds_in_place(old, g)) {
    PyObject* r = PyNumber_InPlaceAdd(old, g);
    if (r == nullptr) return -1;
    Py_DECREF(r);
    return 0;
  }
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
    PyObject* outputs = native_apply_applies(fn) ? opnode_apply(fn, grads) : accumulate_native(fn, grads);
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
    if (!keep_graph && native_release_applies(fn)) {
      opnode_release(fn);
    } else if (!keep_graph && node_release_applies(fn)) {
      node_release(fn);
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
    PyObject* ready = nullptr;  // the first node this one made ready
    int nready = 0;
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
            // pushed in edge order (the first waits in case it is the only one)
            if (nready == 0) ready = nxt;
            else if ((nready == 1 && !run.push(ready)) || !run.push(nxt)) err = 1;
            ++nready;
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
    if (nready == 1) {
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
  s_variable = PyUnicode_InternFromString("variable");
  s_grad = PyUnicode_InternFromString("grad");
  s_layout = PyUnicode_InternFromString("_layout");
  s_post_acc_hooks = PyUnicode_InternFromString("post_acc_hooks");
  if (PyModule_AddFunctions(module, functions) < 0) throw std::runtime_error("module init");
  bind_autograd_apply(module);
}

}  // namespace ember
