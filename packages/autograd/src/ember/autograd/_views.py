"""In-place ops on views: the base's history is rebased, as PyTorch's ``CopySlices`` does; and the
one backward node of the pieces of ``split``/``chunk``/``unbind``.

Writing into a view changes its base, so the base gets a ``CopySlices`` node: its gradient
passes through unchanged outside the view's elements, and inside them goes through the
in-place op's own node (whose other inputs get their gradients too). The view itself gets
an ``AsStridedBackward0`` node reading its elements out of the base's new history.
"""

from __future__ import annotations

from ember._src import grad_mode
from ember._src.shapes import is_contiguous
from ember._src.tensor import Tensor

from .graph import Node, get_gradient_edge, set_history

_STATE = grad_mode.STATE


def _geometry(view: Tensor, base: Tensor):
    """The view's (size, stride, storage offset), and the base's layout when it is not a plain
    contiguous tensor (its gradient is then laid out like it so that the view's geometry applies)."""
    plain = base._offset == 0 and is_contiguous(base._shape, base._stride)
    return view._shape, view._stride, view._offset, None if plain else (base._shape, base._stride, base._offset)


def _strided_zeros(layout, dtype, device):
    """Zeros with ``layout`` (shape, stride, storage offset) in a fresh storage of their own."""
    from ember._src.ops.creation.factories import zeros

    shape, stride, offset = layout
    extent = offset + 1 + sum((n - 1) * st for n, st in zip(shape, stride)) if all(shape) else 0
    return zeros((extent,), dtype=dtype, device=device).as_strided(shape, stride, offset)


class CopySlices(Node):
    """Backward of an in-place op applied to a view, seen from the view's base."""

    __slots__ = ("_geometry", "_fn", "_base_meta")

    def __init__(self, base_edge, geometry, fn: Node, base_meta):
        super().__init__((base_edge,) + tuple(fn._next[1:]))
        self._geometry = geometry
        self._fn = fn
        self._base_meta = base_meta

    def apply(self, grads):
        g = grads[0]
        out = [None] * len(self._next)
        if g is None:
            return out
        size, stride, offset, base_layout = self._geometry
        if base_layout is None:
            result = g.contiguous()  # the geometry is that of the (contiguous) base
            if result is g:
                result = g.clone()
        else:
            result = _strided_zeros(base_layout, g.dtype, g.device)
            result.copy_(g)
        grad_slice = result.as_strided(size, stride, offset)
        # The op's saved result is the view as rewritten: unpacked, its history is the view's node
        # (through this one), as PyTorch's, so that a double backward reaches the op only from here.
        fn = self._fn
        fn._history_node = AsStridedBackward0(self._base_meta, self._geometry, self)
        try:
            res = fn.apply([grad_slice.clone()])
        finally:
            fn._history_node = None
        self_slot = self._fn._layout[0]
        if self_slot is not None and res[self_slot] is not None:
            grad_slice.copy_(res[self_slot])
        else:
            grad_slice.fill_(0)
        out[0] = result
        for k in range(1, len(self._next)):
            out[k] = res[k]
        return out

    def name(self) -> str:
        return "torch::autograd::CopySlices"  # PyTorch's C++ name for its native nodes

    def _release(self):
        self._released = True
        self._fn._release()


class AsStridedBackward0(Node):
    """The view's node after an in-place write: its elements of the base's gradient."""

    __slots__ = ("_base_meta", "_geometry")

    def __init__(self, base_meta, geometry, copy_node: Node | None, base_edge=None):
        super().__init__(((copy_node, 0),) if base_edge is None else (base_edge,))
        self._base_meta = base_meta
        self._geometry = geometry

    def apply(self, grads):
        from ember._src.ops.creation.factories import zeros

        g = grads[0]
        if g is None:
            return [None]
        shape, dtype, device = self._base_meta
        size, stride, offset, base_layout = self._geometry
        if base_layout is None:
            result = zeros(shape, dtype=dtype, device=device)
        else:
            result = _strided_zeros(base_layout, dtype, device)
        result.as_strided(size, stride, offset).copy_(g)
        return [result]


# The nodes of view functions that return several views (record_pieces), by PyTorch's name for the
# function in its errors.
MULTI_VIEW_LABELS = {"SplitBackward0": "Split", "SplitWithSizesBackward0": "SplitWithSizes",
                      "UnbindBackward0": "Unbind"}


def refresh_view_history(view: Tensor) -> None:
    """Note [Stale view histories] (csrc/common/tensor_impl.cpp): ``view``'s storage was written
    since its grad_fn was set (an in-place op on its base or on another view of it), so its node
    may miss that write. A view with a history of its own gets a node reading its elements out of
    the base's current history; a piece of split/chunk/unbind raises PyTorch's error (one node
    stands for all the pieces)."""
    fn = view.grad_fn
    base = view._base
    if not base._requires_grad or view._storage is not base._storage:
        return  # no history to rebuild, or no longer its base's memory
    if fn is None:
        if not view._view_of_grad:
            return  # made before its base required grad: in-place checks see a leaf, as PyTorch's
        # Made without recording of a tensor that required grad: its history is ambiguous, so
        # reading it raises, as PyTorch's (Note [Views made without recording], _recording.py).
        from ._recording import STALE_INFERENCE_VIEW, STALE_NO_GRAD_VIEW

        raise RuntimeError(STALE_INFERENCE_VIEW if getattr(view, "_inference_view", False) else STALE_NO_GRAD_VIEW)
    label = MULTI_VIEW_LABELS.get(type(fn).__name__)
    if label is not None:
        raise RuntimeError(
            f"Output {view.output_nr} of {label} is a view and its base or another view of its base has been "
            "modified inplace. This view is the output of a function that returns multiple views. Such functions "
            "do not allow the output views to be modified inplace. You should replace the inplace operation by an "
            "out-of-place one.")
    base_meta = (base._shape, base.dtype, base._device)
    set_history(view, AsStridedBackward0(base_meta, _geometry(view, base), None, get_gradient_edge(base)), 0)


def record_inplace_on_view(op, formula, args, kwargs, saved_in, make_node):
    """Runs ``op`` (in place on the view ``args[0]``) and rebases the histories of view and base."""
    from ._recording import _edges, stamp_aliases_of_self

    view = args[0]
    base = view._base
    geometry = _geometry(view, base)
    layout, edges, meta = _edges(args, op.name)
    base_edge = get_gradient_edge(base)
    version = view._version_value
    _STATE.grad_enabled = False
    try:
        out = op.call_kernel(args, kwargs)
    finally:
        _STATE.grad_enabled = True
    view._base = base  # marks the view's history current (it is replaced below): no rebuild of the old one
    fn = make_node(op.name, formula, layout, edges, meta, saved_in, kwargs, (view,))
    stamp_aliases_of_self(fn, view, version)
    base_meta = (base._shape, base.dtype, base._device)
    copy = CopySlices(base_edge, geometry, fn, base_meta)
    set_history(base, copy, 0)
    set_history(view, AsStridedBackward0(base_meta, geometry, copy), 0)
    return out


class _PiecesBackward(Node):
    """One node for all the pieces of a ``split``/``chunk``/``unbind`` of one tensor: the input's
    gradient is the pieces' gradients concatenated (stacked for ``unbind``), zeros standing in for a
    piece without one. Each piece's own view node would write its gradient into full-size zeros, and
    the engine would sum those at the input: n full-size buffers and n-1 full-size adds."""

    __slots__ = ("_dim", "_shapes")
    _stack = False

    def apply(self, grads):
        ref = None
        for g in grads:
            if g is not None:
                ref = g
                break
        if ref is None:
            return [None]
        parts = [ref.new_zeros(shape) if g is None else g for g, shape in zip(grads, self._shapes)]
        import ember

        return [ember.stack(parts, self._dim) if self._stack else ember.cat(parts, self._dim)]


class SplitBackward0(_PiecesBackward):
    __slots__ = ()


class SplitWithSizesBackward0(_PiecesBackward):
    __slots__ = ()


class UnbindBackward0(_PiecesBackward):
    __slots__ = ()
    _stack = True


_PIECE_NODES = {"split": SplitBackward0, "split_with_sizes": SplitWithSizesBackward0, "unbind": UnbindBackward0}


def record_pieces(self: Tensor, pieces: tuple, dim: int, kind: str) -> None:
    """The core's ``MULTI_VIEW_HOOK``: replaces the per-piece view nodes just recorded (narrow, or
    select for unbind) by one node. Anything else (no recording, another history, a capture's lazy
    pieces, whose history exists only once computed) is left alone."""
    if not _STATE.grad_enabled:
        return
    for p in pieces:
        if type(p) is not Tensor:
            return
    first = pieces[0].grad_fn
    if first is None:
        return
    expected = "SelectBackward0" if kind == "unbind" else "NarrowBackward0"
    edge = first._next[0] if len(first._next) == 1 else None
    if edge is None:
        return
    for p in pieces:
        fn = p.grad_fn
        if fn is None or type(fn).__name__ != expected or len(fn._next) != 1 or fn._next[0] != edge:
            return
    node = _PIECE_NODES[kind]((edge,), len(pieces))
    node._dim = dim
    node._shapes = [p._shape for p in pieces]
    for i, p in enumerate(pieces):
        set_history(p, node, i)
