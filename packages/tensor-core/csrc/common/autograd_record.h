// Native grad recording for the dispatcher's fast path (autograd_record.cpp).
//
// The core holds no autograd logic: the ember-autograd package registers its classes and a spec
// function with _C._autograd_setup, and the C-level bases of its graph objects (_C.AutogradNode,
// the slots of autograd.graph.Node and OpNode; _C.SavedTensorBase, those of SavedTensor) let
// the native code build a node with no Python call. Whatever this path cannot do exactly as
// autograd's Python recording (`_recording._record_out_of_place`) does, it declines, and the
// call takes the Python dispatcher.
#pragma once

#include <Python.h>

namespace ember {

// The C layout of autograd's Node (and OpNode): every slot a PyObject* (null: unset).
struct NodeObject {
  PyObject_HEAD
  // autograd.graph.Node's slots
  PyObject* next;
  PyObject* num_outputs;
  PyObject* pre_hooks;
  PyObject* post_hooks;
  PyObject* tensor_hooks;
  PyObject* retained;
  PyObject* metadata;
  PyObject* released;
  PyObject* hooked;
  PyObject* seq;
  // autograd._recording.OpNode's slots
  PyObject* formula;
  PyObject* layout;
  PyObject* input_meta;
  PyObject* saved_args;
  PyObject* kwargs;
  PyObject* saved_outputs;
  PyObject* args_need_node;
  PyObject* history_node;
  PyObject* weakreflist;
};

extern PyTypeObject NodeBaseType;
// The `data` slot of a SavedTensor (autograd_record.cpp's layout).
PyObject** saved_data_slot(PyObject* saved);
inline bool is_node(PyObject* o) { return PyObject_TypeCheck(o, &NodeBaseType); }

// What the fast path needs to know before it computes a call whose inputs require grad.
enum GradPlan : int { kGradPython = 0, kGradRecord = 1, kGradNone = 2, kGradError = -1 };

// Whether grad mode is on in this thread (-1 with an error set).
int grad_enabled_now();

// The plan for an op whose tensor arguments require grad, grad mode being on: record natively
// (kGradRecord, *spec set, borrowed), compute without recording (kGradNone: a
// non-differentiable op), or let the Python dispatcher do it (kGradPython). `cache` is the op's
// spec slot (owned by the op).
int grad_plan(PyObject* op, PyObject** cache, PyObject** spec);

// Gives `out` (a fresh result of `op`) its backward node; args are the op's positional args.
// 0 on success, -1 with an error set.
// `out` may be a tuple of several fresh tensor outputs (the node then goes to every floating output not
// in the formula's nondiff_outputs, and to *node_out, a new reference, when node_out is given).
int grad_record(PyObject* spec, PyObject* out, PyObject* const* args, Py_ssize_t nargs,
                PyObject** node_out = nullptr);

void bind_autograd_record(PyObject* module);
void bind_autograd_engine(PyObject* module);  // autograd_engine.cpp

}  // namespace ember
