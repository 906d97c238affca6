// The native form of OpNode's own `apply` and `_release` (autograd_apply.cpp), which the engine
// loop (autograd_engine.cpp) runs in place of the Python methods for nodes whose class keeps them.
#pragma once

#include <Python.h>

namespace ember {

// A list of n Nones (new reference).
PyObject* none_list(Py_ssize_t n);

// Whether `node`'s class uses OpNode's own apply / _release (so the native forms below apply).
bool native_apply_applies(PyObject* node);
bool native_release_applies(PyObject* node);

// What opnode_apply returns when the node needs the Python method.
extern PyObject* const NOT_NATIVE;

// OpNode.apply for the common node: the list of gradients, one per edge (new reference), null
// with an error set, or NOT_NATIVE.
PyObject* opnode_apply(PyObject* fn, PyObject* grads);
// OpNode._release: drops the saved tensors' data (the node may not run again).
void opnode_release(PyObject* fn);
// Whether a node's `_release` is Node's own (registered, optional: AccumulateGrad's), and it run natively
// (it only marks the node released).
bool node_release_applies(PyObject* node);
void node_release(PyObject* fn);

// _C._engine_setup (autograd_apply.cpp).
void bind_autograd_apply(PyObject* module);

}  // namespace ember
