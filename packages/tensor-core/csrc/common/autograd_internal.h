// What the native autograd files share (autograd_types.cpp, autograd_saved.cpp,
// autograd_record.cpp): the SavedTensor layout, what ember-autograd registered, and the helpers
// that build saved tensors and edges. Not part of the core's interface (autograd_record.h is).
#pragma once

#include "autograd_record.h"
#include "tensor_impl.h"

namespace ember {

// The C layout of autograd's SavedTensor: every slot a PyObject* (null: unset).
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

extern PyTypeObject SavedBaseType;

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
extern Registry g_reg;

// Every field of a fresh node set as Node.__init__ sets it (the OpNode ones to None); `seq` is stolen.
void init_node_fields(PyObject* node, PyObject* seq);
// The output number of a non-leaf (its AutogradMeta's output_nr; 0 without one). New reference.
PyObject* output_nr_of(TensorObject* t);
// graph.grad_accumulator(t) for a leaf: the live AccumulateGrad its meta refers to, or a new one.
PyObject* leaf_accumulator(TensorObject* t);
// graph._alias(t) for a plain strided tensor: a new tensor over the same storage, no history.
PyObject* alias_of(TensorObject* t);
// A SavedTensor holding `data` (stolen) for t, as SavedTensor.__init__ fills it without hooks.
PyObject* new_saved(PyObject* data, TensorObject* t, bool is_output, PyObject* requires_grad);
// SavedTensor(t, False) for an input.
PyObject* save_input(TensorObject* t);
// _recording._stand_in(t): what a meta-only formula gets for a tensor argument.
PyObject* stand_in(TensorObject* t);

// The interned names and constants the saved-tensor helpers use (set by bind_autograd_saved).
void bind_autograd_saved();
// _C.AutogradNode and _C.SavedTensorBase (autograd_types.cpp).
void bind_autograd_types(PyObject* module);

}  // namespace ember
