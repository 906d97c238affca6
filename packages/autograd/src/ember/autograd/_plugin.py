"""The object the core loads through the ``ember.plugins`` entry point ``autograd``.

``install()`` puts the recording hook into the dispatcher and gives ``Tensor`` the methods
that only make sense with autograd present (``retain_grad``, ``retains_grad``,
``register_post_accumulate_grad_hook``): ``Tensor`` lives in the core, which has no engine.
"""

from __future__ import annotations

import weakref

from ember import _C
from ember._src import dispatch
from ember._src.tensor import Tensor

from . import _engine
from .graph import _HookDict, add_hook, get_meta, output_nr


def _recording_label(tensor, op_name: str, inputs=None) -> None:
    """_recording.label_grad_fn, imported on first use (install imports _recording lazily too);
    the import then replaces this function."""
    global _recording_label
    from ._recording import label_grad_fn

    _recording_label = label_grad_fn
    label_grad_fn(tensor, op_name, inputs)


def register_hook(t: Tensor, hook):
    """``Tensor.register_hook``: ``hook(grad)`` runs when the tensor's gradient is computed and
    may return a replacement gradient."""
    if not t._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if t.grad_fn is not None:
        return t.grad_fn._register_tensor_hook(output_nr(t), hook)
    meta = get_meta(t)
    if meta.hooks is None:
        meta.hooks = _HookDict()
        acc = meta.grad_acc() if meta.grad_acc is not None else None
        if acc is not None:
            acc._hooked = True  # the engine now looks the leaf's hooks up (AccumulateGrad.__init__)
    return add_hook(meta.hooks, hook)


def retain_grad(self: Tensor) -> None:
    """Makes a non-leaf tensor keep its ``.grad`` after backward (a no-op on leaves)."""
    if not self._requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    fn = self.grad_fn
    if fn is None:
        return
    meta = get_meta(self)
    if fn._retained is None:
        fn._retained = {}
    fn._retained[meta.output_nr] = weakref.ref(self)
    fn._hooked = True
    meta.retains_grad = True


def _retains_grad(self: Tensor) -> bool:
    meta = self._autograd_meta
    return self.grad_fn is not None and meta is not None and meta.retains_grad


def register_post_accumulate_grad_hook(self: Tensor, hook):
    """``hook(tensor)`` runs after the gradient was accumulated into this leaf's ``.grad``."""
    if not self._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    meta = get_meta(self)
    if meta.post_acc_hooks is None:
        meta.post_acc_hooks = _HookDict()
    return add_hook(meta.post_acc_hooks, hook)


class AutogradPlugin:
    installed = False

    def install(self) -> None:
        if self.installed:
            return
        from ember._src.ops.shape import views

        from . import anomaly_mode, forward_ad, graph
        from ._recording import OpNode, _SavedArgs, native_spec, record
        from ._views import record_pieces, refresh_view_history
        from .formulas import FORMULAS, Inputs

        dispatch.set_autograd_hook(record)
        views.MULTI_VIEW_HOOK[0] = record_pieces  # split/chunk/unbind: one node for all the pieces
        _C._set_view_refresh(refresh_view_history)  # Note [Stale view histories]
        # The native fast path records nodes itself (csrc/common/autograd_record.cpp): it gets
        # the classes it instantiates and the switches under which it must leave it to `record`.
        _C._autograd_setup(native_spec, FORMULAS, graph.SavedTensor, _SavedArgs, graph.AccumulateGrad,
                           graph.AutogradMeta, graph.grad_accumulator, graph._SEQ, anomaly_mode._STATE,
                           graph._SAVED_HOOKS_ENTERED, forward_ad._LEVEL)
        # The native engine loop runs OpNode.apply/_release (and Node._release) itself for nodes that do not
        # override them, and AccumulateGrad's common case (a first gradient kept without a copy).
        _C._engine_setup(OpNode.apply, OpNode._release, Inputs, _engine.fix_grad, graph.SavedTensor,
                         graph.Node._release)
        if hasattr(_C, "_engine_native_formulas"):  # views' reshape, transpose and _to_copy: no formula frame
            from .formulas import views as _views

            _C._engine_native_formulas(_views._reshape_back, _views._transpose, _views._to_copy)
        Tensor.retain_grad = retain_grad
        Tensor.retains_grad = property(_retains_grad)
        Tensor.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook
        self.installed = True

    def label_grad_fn(self, tensor, op_name: str, inputs=None) -> None:
        """Gives a composite's result the node name of PyTorch's op (see _recording.label_grad_fn)."""
        _recording_label(tensor, op_name, inputs)

    def backward(self, tensor, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        _engine.backward((tensor,), None if gradient is None else (gradient,), retain_graph, create_graph,
                         inputs=inputs)

    def register_hook(self, tensor, hook):
        return register_hook(tensor, hook)

    @property
    def anomaly_mode(self):
        """The anomaly-mode module, for the core's ``ember.is_anomaly_enabled`` and friends."""
        from . import anomaly_mode

        return anomaly_mode


plugin = AutogradPlugin()
