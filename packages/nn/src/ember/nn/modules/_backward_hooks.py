"""Module full backward hooks: identity autograd nodes around a module's inputs and outputs.

The node on the outputs sees ``grad_output`` (and runs the backward pre-hooks); the node on
the inputs sees ``grad_input`` once everything inside the module has been differentiated,
and runs ``hook(module, grad_input, grad_output)``, which may replace ``grad_input``.
"""

from __future__ import annotations

import warnings

from ember import Tensor
from ember.autograd import Function


class BackwardHookFunction(Function):
    """The identity node; named as PyTorch's, so the outputs' grad_fn reads
    ``BackwardHookFunctionBackward``."""

    @staticmethod
    def forward(ctx, *tensors):
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        return tuple(t.view_as(t) for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        return grads


def _wrap(values: tuple, on_node) -> tuple:
    """Passes the tensors of ``values`` that require grad through one identity node."""
    positions = [i for i, v in enumerate(values) if isinstance(v, Tensor) and v.requires_grad]
    if not positions:
        return values
    outs = BackwardHookFunction.apply(*[values[i] for i in positions])
    if not isinstance(outs, tuple):
        outs = (outs,)
    on_node(outs[0].grad_fn, positions, len(values))
    new = list(values)
    for i, out in zip(positions, outs):
        new[i] = out
    return tuple(new)


_FIRING_ON_OUTPUTS = (
    "Full backward hook is firing when gradients are computed with respect to module outputs since no inputs "
    "require gradients. See https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
    "#torch.nn.Module.register_full_backward_hook for more details."
)


class BackwardHook:
    def __init__(self, module, hooks: list, pre_hooks: list) -> None:
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.grad_outputs = None
        self.n_inputs = 0
        self.input_positions: list[int] | None = None

    def _full_grads(self, grads, positions, n) -> tuple:
        full = [None] * n
        for i, g in zip(positions, grads):
            full[i] = g
        return tuple(full)

    def _run_hooks(self, grad_input: tuple) -> tuple | None:
        replaced = None
        for hook in self.hooks:
            result = hook(self.module, grad_input if replaced is None else replaced, self.grad_outputs)
            if result is not None:
                result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
                if len(result) != len(grad_input):
                    raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got "
                                       f"{len(result)}, but expected {len(grad_input)}")
                replaced = result
        return replaced

    def setup_input_hook(self, args: tuple) -> tuple:
        self.n_inputs = len(args)

        def on_node(node, positions, n):
            self.input_positions = positions

            def hook(grad_inputs, grad_outputs):
                if not self.hooks:
                    return None
                full = self._full_grads(grad_outputs, positions, n)
                replaced = self._run_hooks(full)
                if replaced is None:
                    return None
                return tuple(replaced[i] for i in positions)

            node.register_hook(hook)

        return _wrap(tuple(args), on_node)

    def setup_output_hook(self, result):
        single = not isinstance(result, tuple)
        values = (result,) if single else result

        def on_node(node, positions, n):
            def prehook(grad_outputs):
                full = self._full_grads(grad_outputs, positions, n)
                changed = None
                for hook in self.pre_hooks:
                    out = hook(self.module, full if changed is None else changed)
                    if out is not None:
                        changed = tuple(out) if isinstance(out, (tuple, list)) else (out,)
                self.grad_outputs = full if changed is None else changed
                if self.input_positions is None and self.hooks:
                    # No input requires grad: the hooks run now, with grad_input all None (PyTorch
                    # warns that they fire on the outputs' gradients).
                    warnings.warn(_FIRING_ON_OUTPUTS, stacklevel=1)
                    self._run_hooks((None,) * self.n_inputs)
                if changed is None:
                    return None
                return tuple(changed[i] for i in positions)

            node.register_prehook(prehook)

        wrapped = _wrap(values, on_node)
        return wrapped[0] if single else wrapped
