// The C bases of autograd's graph objects: _C.AutogradNode (the slots of autograd.graph.Node and
// OpNode) and _C.SavedTensorBase (those of SavedTensor). Keeping the slots in C lets the fast
// path build a node, and the engine loop read one, without Python attribute lookups; the
// Python classes derive from these bases and add only methods.
#include "autograd_internal.h"

#include <structmember.h>

#include <cstddef>
#include <stdexcept>

namespace ember {

namespace {

constexpr int kNodeFields = 18;  // the PyObject* fields before weakreflist
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

}  // namespace

PyTypeObject NodeBaseType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject SavedBaseType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject** saved_data_slot(PyObject* saved) { return &reinterpret_cast<SavedObject*>(saved)->data; }

void bind_autograd_types(PyObject* module) {
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
      PyModule_AddObject(module, "SavedTensorBase", reinterpret_cast<PyObject*>(&SavedBaseType)) < 0)
    throw std::runtime_error("module init");
}

}  // namespace ember
