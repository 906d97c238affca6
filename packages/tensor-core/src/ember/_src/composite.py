"""Composite ops: PyTorch's CompositeImplicitAutograd ops (``linear``, ``conv2d``, ``batch_norm``,
``layer_norm``, ``dropout`` ...), which are written with other ops.

Called normally, a composite runs its decomposition: the ops it is written with dispatch one by
one, so autograd, ``ember.compile``'s recorder and every dispatch mode see those. Only a tracer
that records before decomposing (a dispatch mode on top of the stack with ``pre_dispatch =
True``: ``ember.export``'s, ``make_fx(pre_dispatch=True)``) sees the composite as one op, as
``torch.export``'s graph keeps ``aten.linear``. Running such a node later runs the
decomposition again; ``run_decompositions()`` and the consumers of an exported program (ONNX,
AOTInductor) re-trace without ``pre_dispatch``, which decomposes it.

The public function (``F.linear``) keeps its own argument checks and order; it calls the op
only while such a tracer is on top (``pre_dispatch_tracing``), so eager calls pay one list read.
"""

from __future__ import annotations

from collections.abc import Callable

from .dispatch import _MODES, _MODES_ENTERED, OPS, Op, _call_top_mode
from .tensor import Tensor, make_tensor


def pre_dispatch_tracing() -> bool:
    """Whether the innermost dispatch mode records composites whole."""
    if not _MODES_ENTERED[0]:
        return False
    stack = _MODES.stack
    return bool(stack) and getattr(stack[-1], "pre_dispatch", False)


class CompositeOp(Op):
    """An op whose every call runs ``decomposition`` unless a pre-dispatch tracer records it.
    (Its Python ``__call__`` replaces the native fast path, which a composite never takes.)"""

    def __call__(self, *args, **kwargs):
        if pre_dispatch_tracing():
            return _call_top_mode(self, args, kwargs)
        return self.decomposition(*args, **kwargs)

    def call_kernel(self, args, kwargs):
        # A tracer computing the result's metadata: the decomposition on its (meta) tensors. A
        # result that is an argument itself (dropout in eval mode) comes back as an alias of it,
        # so the node has a result of its own, as in PyTorch's graph.
        out = self.decomposition(*args, **kwargs)
        if isinstance(out, Tensor) and any(out is a for a in args):
            out = make_tensor(out._storage, out._shape, out._stride, out._offset, out.dtype, out._device)
        return out


def define_composite(schema: str, decomposition: Callable, tags: tuple = (), writes: tuple = ()) -> CompositeOp:
    """Declares ``ember.ops.<name>`` from its (ATen) schema and the function computing it, which
    takes the schema's arguments in order."""
    name = schema.split("(", 1)[0].strip()
    if name in OPS:
        raise ValueError(f"op {name} is declared twice")
    op = CompositeOp(name, schema, tuple(tags) + ("composite",), None)
    op.decomposition = decomposition
    op.writes = tuple(dict.fromkeys(op.writes + tuple(writes)))
    OPS[name] = op
    return op
