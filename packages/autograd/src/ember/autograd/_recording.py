"""The dispatcher hook: runs an op below autograd and records its backward node.

``record(op, args, kwargs)`` is installed with ``dispatch.set_autograd_hook``; the dispatcher
calls it for every op run with grad mode on and a tensor argument that requires grad.
"""

from __future__ import annotations

import re
import weakref

from ember import _C
from ember._src import grad_mode
from ember._src.device import META
from ember._src.ops._common import type_name
from ember._src.tensor import Tensor, make_tensor, make_view

from . import anomaly_mode
from ._complex import complex_formula, involves_complex
from ._engine import fix_grad
from ._views import MULTI_VIEW_LABELS
from .formulas import FORMULAS, NON_DIFFERENTIABLE, Inputs
from .graph import _SEQ, Node, SavedTensor, get_gradient_edge, grad_accumulator, set_history

_NO_EDGE = (None, 0)

_STATE = grad_mode.STATE
_NODE_CLASSES: dict[str, type] = {}

LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."
VIEW_OF_LEAF_INPLACE = "a view of a leaf Variable that requires grad is being used in an in-place operation."


class _SavedArgs(tuple):
    """The op's positional args as the formula sees them: saved tensors are unpacked (and
    version-checked) only when the formula reads them, as PyTorch checks only what it saved."""

    __slots__ = ()
    _node = None  # needed only to unpack a saved output (in-place ops): see _SavedArgsOfNode

    def __getitem__(self, i):
        v = tuple.__getitem__(self, i)
        if type(i) is slice:
            return tuple(_unpack(x, self._node) for x in v)
        if type(v) is SavedTensor:
            return v.unpack(self._node)
        return _unpack(v, self._node) if type(v) is list else v

    def __iter__(self):
        node = self._node
        for v in tuple.__iter__(self):
            yield _unpack(v, node)


class _SavedArgsOfNode(_SavedArgs):
    """Built for one backward call, so it may point at its node without making a cycle."""


def _unpack(v, node):
    if type(v) is SavedTensor:
        return v.unpack(node)
    if type(v) is list and v and any(type(x) is SavedTensor for x in v):
        return [x.unpack(node) if type(x) is SavedTensor else x for x in v]
    return v


def _has_saved(kwargs) -> bool:
    for v in kwargs.values():
        if type(v) is SavedTensor or type(v) is list:
            return True
    return False


class OpNode(Node):
    """Backward of one op call, computed by its formula from ``FORMULAS``."""

    # Its slots (``_formula, _layout, _input_meta, _saved_args, _kwargs, _saved_outputs,
    # _args_need_node, _history_node``) live in the C base of Node, which the native fast path
    # fills directly (csrc/common/autograd_record.cpp builds what __init__ and
    # _record_out_of_place build).
    __slots__ = ()

    def __init__(self, formula, layout, next_edges, input_meta, saved_args, kwargs, saved_outputs):
        self._seq = next(_SEQ)
        self._num_outputs = 1
        self._pre_hooks = self._post_hooks = self._tensor_hooks = self._retained = self._metadata = None
        self._released = self._hooked = self._args_need_node = False
        self._history_node = None  # set by CopySlices around its call: the history of saved outputs
        self._formula = formula
        self._layout = layout
        self._next = next_edges
        self._input_meta = input_meta
        self._saved_args = saved_args
        self._kwargs = kwargs
        self._saved_outputs = saved_outputs

    def __getattr__(self, name):
        # Only for attributes not found otherwise: PyTorch's ``_saved_<argument>`` (_saved_attrs).
        if name.startswith("_saved_") and name not in ("_saved_args", "_saved_outputs"):
            from ._saved_attrs import _MISSING, saved_attribute

            value = saved_attribute(self, name[len("_saved_"):])
            if value is not _MISSING:
                return value
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def apply(self, grads):
        if grads[0] is None:
            for g in grads:
                if g is not None:
                    break
            else:
                return [None] * len(self._next)
        args = self._saved_args
        history = self if self._history_node is None else self._history_node
        if self._args_need_node:
            args = _SavedArgsOfNode(tuple.__iter__(args))  # the raw items: unpacked lazily, as read
            args._node = history
        kwargs = self._kwargs
        if kwargs and _has_saved(kwargs):
            kwargs = {k: _unpack(v, history) for k, v in kwargs.items()}
        saved_outputs = self._saved_outputs
        outputs = tuple([None if s is None else s.unpack(history) for s in saved_outputs]) if saved_outputs else ()
        res = self._formula.backward(grads, Inputs(args, kwargs), outputs)
        if isinstance(res, Tensor) or res is None:
            res = (res,)
        out = [None] * len(self._next)
        meta = self._input_meta
        n = len(res)
        for i, spec in enumerate(self._layout):
            if spec is None or i >= n:
                continue
            g = res[i]
            if g is None:
                continue
            if type(spec) is int:
                m = meta[spec]
                out[spec] = g if g._shape == m[0] and g.dtype is m[1] else fix_grad(g, m, self, spec)
            else:
                for j, e in enumerate(spec):
                    if e is not None and g[j] is not None:
                        out[e] = fix_grad(g[j], meta[e], self, e)
        return out

    def _release(self):
        # SavedTensor.free() inlined (data = None): this runs once per node of every backward.
        self._released = True
        for v in tuple.__iter__(self._saved_args):
            tv = type(v)
            if tv is SavedTensor:
                v.data = None
            elif tv is list:
                for x in v:
                    if type(x) is SavedTensor:
                        x.data = None
        if self._kwargs:
            for v in self._kwargs.values():
                if type(v) is SavedTensor:
                    v.data = None
        for s in self._saved_outputs:
            if s is not None:
                s.data = None


class NotImplementedNode(OpNode):
    __slots__ = ()

    def apply(self, grads):
        raise RuntimeError(f"derivative for {self._op_name} is not implemented")


# Ops that PyTorch records under another name (add with alpha is its own fused op in the core).
_NODE_NAMES = {"add_scaled": "add", "relu6": "hardtanh", "norm": "linalg_vector_norm"}


# Ops whose PyTorch node is not named after the op: in-place ops with a derivatives.yaml entry of
# their own, and overloads (div with a rounding mode is div.Tensor_mode).
_NODE_CLASS_NAMES = {
    # The in-place view ops' overloads (Tensor._become in the core labels their nodes).
    "squeeze_all_": "SqueezeBackward3",
    "squeeze_dim_": "SqueezeBackward4",
    "squeeze_dims_": "SqueezeBackward5",
    "t_": "TBackward1",
    "transpose_": "TransposeBackward1",
    "unsqueeze_": "UnsqueezeBackward1",
    "as_strided_": "AsStridedBackward1",
    "acosh_": "AcoshBackward1",
    "asinh_": "AsinhBackward1",
    "atanh_": "AtanhBackward1",
    "celu_": "CeluBackward1",
    "elu_": "EluBackward1",
    "leaky_relu_": "LeakyReluBackward1",
    "selu_": "EluBackward1",  # selu_ is elu_ with fixed constants
    "threshold_": "ThresholdBackward1",
    "div_rounding": "DivBackward2",
    "rsub_scalar": "RsubBackward1",  # number - tensor (rsub.Scalar)
    "pow_tensor_tensor": "PowBackward1",  # pow.Tensor_Tensor
    "pow_scalar": "PowBackward2",  # number ** tensor (pow.Scalar)
    "max_all": "MaxBackward1",  # max(): the overload after max.dim
    "max_dim": "MaxBackward0",
    "min_all": "MinBackward1",
    "min_dim": "MinBackward0",
}


# Note [Overload node names]: PyTorch names a node after the overload that ran (sum() is
# SumBackward0, sum(dim) SumBackward1); ember has one op for them. The kind of the first argument
# given (not None) among an op's listed positions picks the name: an entry is
# (positions, names for kinds (none, number, sequence, tensor)), a name of None keeping the op's own.
# The native recorder (csrc/common/autograd_record.cpp) reads the same rule from native_spec.
_OVERLOAD_NODE_NAMES = {
    "sum": ((1,), (None, "SumBackward1", "SumBackward1", None)),
    "mean": ((1,), (None, "MeanBackward1", "MeanBackward1", None)),
    "prod": ((1,), (None, "ProdBackward1", None, None)),
    "squeeze": ((1,), (None, "SqueezeBackward1", "SqueezeBackward2", None)),
    "clamp": ((1, 2), (None, "ClampBackward1", None, None)),  # clamp.Tensor is ClampBackward0
    "clamp_": ((1, 2), (None, "ClampBackward1", None, None)),
}


def _arg_kind(value) -> int:
    if value is None:
        return 0
    if isinstance(value, Tensor):
        return 3
    if type(value) in (list, tuple):
        return 2
    return 1 if isinstance(value, (int, float)) else 0


def _overload_classes(op_name: str, base: type):
    """(positions, classes by kind) for an op in _OVERLOAD_NODE_NAMES, else None."""
    rule = _OVERLOAD_NODE_NAMES.get(op_name)
    if rule is None:
        return None
    positions, names = rule
    return positions, tuple(base if n is None else _named_subclass(base, n) for n in names)


def _class_for_call(op_name: str, cls: type, args) -> type:
    """The node class of one call of ``op_name`` (an op in _OVERLOAD_NODE_NAMES): ``cls``, or its
    overload's (Note [Overload node names])."""
    positions, names = _OVERLOAD_NODE_NAMES[op_name]
    kind = 0
    for i in positions:
        kind = _arg_kind(args[i]) if i < len(args) else 0
        if kind:
            break
    return cls if names[kind] is None else _named_subclass(cls, names[kind])


def node_class_name(op_name: str) -> str:
    if op_name in _NODE_CLASS_NAMES:
        return _NODE_CLASS_NAMES[op_name]
    base = op_name.rstrip("_") if op_name.endswith("_") and not op_name.endswith("__") else op_name
    base = _NODE_NAMES.get(base, base)
    # PyTorch title-cases each word, so a letter after a digit is upper case too (Log1PBackward0,
    # MaxPool2DWithIndicesBackward0, FftR2CBackward0).
    return "".join(p.title() for p in base.split("_") if p) + "Backward0"


_LABELED: dict = {}


def label_grad_fn(tensor: Tensor, op_name: str, inputs: tuple | None = None) -> None:
    """Names ``tensor``'s node as PyTorch names the node of its op ``op_name`` (a composite's last
    node: MeanBackward0 of mse_loss prints as MseLossBackward0). The node becomes an instance of a
    subclass of its own class under that name; what it computes is unchanged. Given the op's
    differentiable tensor ``inputs`` (None for an absent optional one), the node's
    ``next_functions`` read as that op's would: an edge per input, towards its ``grad_fn`` (or its
    accumulator), ``(None, 0)`` for one that needs no gradient (the blitz tutorial walks
    ``loss.grad_fn.next_functions[0][0]`` from MseLossBackward0 to the model's last layer). The
    engine still runs the composite's own nodes."""
    node = tensor.grad_fn
    if not isinstance(node, OpNode):
        return
    node.__class__ = _named_subclass(type(node), node_class_name(op_name))
    if inputs is not None:
        edges = []
        for t in inputs:
            if not isinstance(t, Tensor):
                continue
            if not t._requires_grad:
                edges.append(_NO_EDGE)
            elif t.grad_fn is not None:
                m = t._autograd_meta
                edges.append((t.grad_fn, 0 if m is None else m.output_nr))
            else:
                edges.append((grad_accumulator(t), 0))
        _COMPOSITE_EDGES[node] = tuple(edges)


_COMPOSITE_EDGES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _labeled_next_functions(self) -> tuple:
    return _COMPOSITE_EDGES.get(self, self._next)


def _named_subclass(cls: type, name: str) -> type:
    """A subclass of node class ``cls`` that computes the same under the class name ``name``."""
    key = (cls, name)
    labeled = _LABELED.get(key)
    if labeled is None:
        labeled = _LABELED[key] = type(name, (cls,), {"__module__": cls.__module__, "__slots__": (),
                                                      "next_functions": property(_labeled_next_functions)})
    return labeled


def _node_class(op_name: str, missing: bool) -> type:
    key = op_name if not missing else op_name + "!"
    cls = _NODE_CLASSES.get(key)
    if cls is None:
        bases = (NotImplementedNode,) if missing else (OpNode,)
        cls = type(node_class_name(op_name), bases, {"_op_name": op_name, "__module__": __name__, "__slots__": ()})
        _NODE_CLASSES[key] = cls
    return cls


# Note [Number operands' edges]: PyTorch's Python bindings pass a number given to add/sub/mul/div/where as
# a wrapped 0-d tensor (their schema's operand is a Tensor), so their nodes list an edge
# ``(None, 0)`` for it in ``next_functions``; ops with a Scalar overload (pow, remainder, clamp,
# ...) list none. The edge carries no gradient (no layout slot refers to it) and comes after the
# tensors' edges: a reflected ``2 + t`` is ``t.add(2)`` there.
NUMBER_OPERAND_EDGES = frozenset({"add", "sub", "mul", "div", "add_", "sub_", "mul_", "div_",
                                  "true_divide", "multiply", "subtract", "where"})
_NUMBERS = (int, float, complex, bool)

# Note [Non-differentiable inputs' edges]: PyTorch's nodes list no edge at all for an input its
# derivatives mark non-differentiable (a condition, an index, a mask), where other tensors that
# need no gradient get ``(None, 0)``. The positions of such args, by op (they never require grad).
NONDIFF_ARGS = {"where": (0,), "index_select": (2,), "gather": (2,), "index": (1,), "embedding": (1,),
                "masked_fill_": (1,)}


def _edges(args, name: str = ""):
    """Flattened ``next_functions`` over the tensor args of op ``name``, and each positional arg's
    slot(s) (Note [Number operands' edges], Note [Non-differentiable inputs' edges])."""
    layout = []
    edges = []
    meta = []
    numbers = 0
    skip = NONDIFF_ARGS.get(name, ())
    for i, a in enumerate(args):
        if skip and i in skip and not (isinstance(a, Tensor) and a._requires_grad):
            layout.append(None)
            continue
        if isinstance(a, Tensor):
            if a._requires_grad:
                layout.append(len(edges))
                fn = a.grad_fn
                if fn is not None:
                    m = a._autograd_meta
                    edges.append((fn, 0 if m is None else m.output_nr))
                else:
                    edges.append((grad_accumulator(a), 0))
                meta.append((a._shape, a.dtype))
            else:
                layout.append(None)
                edges.append(_NO_EDGE)
                meta.append(None)
        elif type(a) in (list, tuple) and a and any(isinstance(b, Tensor) for b in a):
            spec = []
            for b in a:
                if isinstance(b, Tensor) and b._requires_grad:
                    spec.append(len(edges))
                    edges.append(get_gradient_edge(b))
                    meta.append((b._shape, b.dtype))
                else:
                    spec.append(None)
                    if isinstance(b, Tensor):
                        edges.append(_NO_EDGE)
                        meta.append(None)
            layout.append(spec)
        else:
            layout.append(None)
            numbers += type(a) in _NUMBERS
    if numbers and name in NUMBER_OPERAND_EDGES:
        edges.extend([_NO_EDGE] * numbers)
        meta.extend([None] * numbers)
    return layout, tuple(edges), meta


_NO_DATA = _C.Storage.meta(0)


_C_STAND_IN = getattr(_C, "_autograd_stand_in", None)  # (a core built without it: made here)


def _stand_in(a):
    """What a ``meta_only`` formula gets for a tensor (or tensor list) argument: a data-less meta
    tensor with its shape, strides, offset and dtype, which no later in-place write invalidates."""
    if isinstance(a, Tensor):
        if _C_STAND_IN is not None:  # the native recorder's, untracked by the collector
            t = _C_STAND_IN(a)
            if t is not None:
                return t
        t = make_tensor(_NO_DATA, a._shape, a._stride, a._offset, a.dtype, META)
        t._src_device = a._device  # the device the real argument lives on (_to_copy's backward)
        return t
    if type(a) in (list, tuple) and a and any(isinstance(b, Tensor) for b in a):
        return [_stand_in(b) if isinstance(b, Tensor) else b for b in a]
    return a


def _save(a, outs):
    if isinstance(a, Tensor):
        for i, o in enumerate(outs):
            if a is o:
                saved = SavedTensor(a, True, i)
                saved.requires_grad = a.dtype.is_floating_point or a.dtype.is_complex  # gets its history after saving
                return saved
        return SavedTensor(a, False)
    if type(a) in (list, tuple) and a and any(isinstance(b, Tensor) for b in a):
        return [_save(b, outs) for b in a]
    return a



# Note [Views made without recording]: a view of a tensor that requires grad made under no_grad
# (or inference_mode) has no history; written in place with grad mode on, the write would reach
# the base's graph (or not) ambiguously, so PyTorch refuses it, and so does ember. Such a view is
# one with no grad_fn made of a tensor that required grad then (Tensor._view_of_grad; one made
# while recording has a grad_fn). The dispatcher sends every in-place op on a view of a tensor that
# requires grad here, even when no argument requires grad (dispatch._writes_grad_view, and the
# native in-place path's own check). A view made before its base required grad is refused too,
# with PyTorch's leaf errors (there it requires grad through its base and has no grad_fn).
_NO_GRAD_VIEW_INPLACE = (
    "A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that this "
    "use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both the view "
    "and the inplace either both inside the no_grad block (if you don't want the inplace to be tracked) or both "
    "outside (if you want the inplace to be tracked).")
_INFERENCE_VIEW_INPLACE = (
    "A view was created in inference mode and is being modified inplace in normal mode. Given that this use "
    "case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both the view and "
    "the inplace either both inside the inference_mode block (if you don't want the inplace to be tracked) or "
    "both outside (if you want the inplace to be tracked).")

# ... and read back (its grad_fn, or used by an op) after its base was written in place.
STALE_NO_GRAD_VIEW = (
    "A view was created in no_grad mode and its base or another view of its base has been modified inplace with "
    "grad mode enabled. Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your "
    "code by moving both the view and the inplace either both inside the no_grad block (if you don't want the "
    "inplace to be tracked) or both outside (if you want the inplace to be tracked).")
STALE_INFERENCE_VIEW = (
    "A view was created in inference mode and its base or another view of its base has been modified inplace in "
    "normal mode. Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code "
    "by moving both the view and the inplace either both inside the inference_mode block (if you don't want the "
    "inplace to be tracked) or both outside (if you want the inplace to be tracked).")


def _after_first_sentence(message: str) -> str:
    return message[message.index(" Given"):]


def check_inplace(t: Tensor) -> None:
    fn = t.grad_fn
    base = t._base
    if fn is not None and t._unrecorded_chain:
        label = re.sub(r"Backward\d*$", "", type(fn).__name__)
        if getattr(t, "_inference_view", False):
            raise RuntimeError(f"Output {t.output_nr} of {label} is a view of a view which was created in inference "
                               "mode and is being modified inplace in normal mode."
                               + _after_first_sentence(_INFERENCE_VIEW_INPLACE))
        raise RuntimeError(f"Output {t.output_nr} of {label} is a view of a view which was created in no_grad mode "
                           "and is being modified inplace with grad mode enabled."
                           + _after_first_sentence(_NO_GRAD_VIEW_INPLACE))
    if fn is None:
        if base is not None and base._requires_grad:
            if t._view_of_grad:
                raise RuntimeError(_INFERENCE_VIEW_INPLACE if getattr(t, "_inference_view", False)
                                   else _NO_GRAD_VIEW_INPLACE)
            # Made before its base required grad: PyTorch sees a leaf that requires grad (through its base).
            raise RuntimeError(VIEW_OF_LEAF_INPLACE if base.grad_fn is None else LEAF_INPLACE)
        if t._requires_grad:
            raise RuntimeError(LEAF_INPLACE)
    if base is not None and fn is not None:
        if getattr(fn, "_custom_function", False):
            # CopySlices would route the base's gradient around the Function's own backward.
            name = type(fn).__name__
            raise RuntimeError(
                f"Output {t.output_nr} of {name[:-8] if name.endswith('Backward') else name} is a view and is being "
                "modified inplace. This view was created inside a custom Function (or because an input was returned "
                "as-is) and the autograd logic to handle view+inplace would override the custom backward associated "
                "with the custom Function, leading to incorrect gradients. This behavior is forbidden. You can fix "
                "this by cloning the output of the custom Function.")
        label = MULTI_VIEW_LABELS.get(type(fn).__name__)
        if label is not None:
            # One node stands for all the views: rewriting its history for one of them would be
            # wrong for the others (PyTorch forbids it the same way).
            raise RuntimeError(
                f"Output {t.output_nr} of {label} is a view and is being modified inplace. This view is the output "
                "of a function that returns multiple views. Such functions do not allow the output views to be "
                "modified inplace. You should replace the inplace operation by an out-of-place one.")
    if base is not None and base.grad_fn is None and base._requires_grad:
        raise RuntimeError(VIEW_OF_LEAF_INPLACE)


def stamp_aliases_of_self(node, self: Tensor, version: int) -> None:
    """An in-place op's node saved its other inputs after the write; those that share ``self``'s
    memory (``x.mul_(x)``, ``x[:2].mul_(x[2:])``) get the version they had before it, as PyTorch
    saves them, so that a backward reading their overwritten values raises the version error
    instead of computing with them."""
    same = _C._same_version_counter
    saved_args = tuple(tuple.__iter__(node._saved_args))
    if len(saved_args) < 2 and not node._kwargs:
        return
    for v in saved_args[1:]:
        for saved in (v if type(v) is list else (v,)):
            if type(saved) is SavedTensor and isinstance(saved.data, Tensor) and same(saved.data, self):
                saved.version = version
    if node._kwargs:
        for saved in node._kwargs.values():
            if type(saved) is SavedTensor and isinstance(saved.data, Tensor) and same(saved.data, self):
                saved.version = version


def record(op, args, kwargs):
    name = op.name
    formula = FORMULAS.get(name)
    if formula is None and (name in NON_DIFFERENTIABLE or not op.differentiable):
        return op.call_kernel(args, kwargs)
    inplace = "inplace" in op.tags
    saved_in = args
    if inplace:
        self = args[0]
        check_inplace(self)
        if formula is None and name.endswith("_") and name[:-1] in FORMULAS:
            # The out-of-place formula needs self as it was before the op overwrote it (unless it
            # never reads its inputs, as add's).
            formula = FORMULAS[name[:-1]]
            if _reads_inputs(formula.backward):
                saved_in = (self.clone(),) + tuple(args[1:])
        elif formula is not None and formula.clone_self is not None and formula.clone_self(args, kwargs):
            saved_in = (self.clone(),) + tuple(args[1:])
        cplx = involves_complex(args, ())
        if cplx:
            formula = complex_formula(name, formula)
            if _reads_inputs(formula.backward) and saved_in is args:
                saved_in = (self.clone(),) + tuple(args[1:])
        if self._base is not None:
            from ._views import record_inplace_on_view

            return record_inplace_on_view(op, formula, args, kwargs, saved_in, make_node)
    else:
        fast = _record_out_of_place(op, name, formula, args, kwargs)
        if fast is not None:
            if "view" in op.tags:
                _mark_unrecorded_chain(args, fast)
            return fast
        cplx = involves_complex(args, ())
        if cplx:
            formula = complex_formula(name, formula)
    layout, edges, meta = _edges(args, name)
    if inplace:
        version = self._version_value
    _STATE.grad_enabled = False
    try:
        out = op.call_kernel(args, kwargs)
    finally:
        _STATE.grad_enabled = True
    if isinstance(out, Tensor):
        if not inplace and out._base is not None:
            out = _own_result(out, args)
        if not inplace and _is_arg(out, args):
            # A kernel that hands back an input must not take over that input's history.
            out = make_view(out, out._shape, out._stride, out._offset)
        outs = (out,)
    else:
        outs = tuple(out)
    _check_result_dtype(name, out)
    if not cplx and involves_complex((), outs):
        formula = complex_formula(name, formula)
    node = make_node(name, formula, layout, edges, meta, saved_in, kwargs, outs)
    if inplace:
        stamp_aliases_of_self(node, self, version)
    if outs[0] is out and out.dtype.is_floating_point and out._autograd_meta is None:
        out.grad_fn = node  # the common case of set_history, inlined
        out._requires_grad = True
        return out
    skip = formula.nondiff_outputs if formula is not None else ()
    for i, o in enumerate(outs):
        if isinstance(o, Tensor) and (o.dtype.is_floating_point or o.dtype.is_complex) and i not in skip:
            set_history(o, node, i)
    if not inplace and "view" in op.tags:
        _mark_unrecorded_chain(args, out)
    return out


def _own_result(out: Tensor, args) -> Tensor:
    """``out`` itself, or, when a kernel made it as a view of scratch of its own (addmm views its
    (1, m, n) product as (m, n)), the same memory as a tensor with no base. Such a result shares no
    storage with any input, so it is no view for autograd (PyTorch's kernels return fresh tensors);
    left as a view, an in-place op on it (Linear then ReLU(inplace=True)) was rebased onto that
    historyless scratch and the gradient was lost (this recording runs under anomaly mode,
    saved-tensor hooks and forward AD)."""
    storage = out._storage
    for a in args:
        if isinstance(a, Tensor) and (getattr(a, "_storage", None) is storage
                                      or (a._base is not None and getattr(a._base, "_storage", None) is storage)):
            return out
    return make_tensor(storage, out._shape, out._stride, out._offset, out.dtype, out._device)


def _mark_unrecorded_chain(args, out) -> None:
    """A view op recorded on a view made without recording (or on such a view's view) makes a view
    whose in-place writes PyTorch refuses as "a view of a view which was created in no_grad mode"
    (Note [Views made without recording]); native view kernels carry the flag on to views of it."""
    source = args[0] if args else None
    if not isinstance(source, Tensor) or not isinstance(out, Tensor):
        return
    base = source._base
    unrecorded = (base is not None and base._requires_grad and not source._requires_grad
                  and source._view_of_grad)
    if unrecorded or source._unrecorded_chain:
        out._unrecorded_chain = True
        if getattr(source, "_inference_view", False):
            out._inference_view = True


def _record_out_of_place(op, name, formula, args, kwargs):
    """``record`` for the common case (no in-place, no tensor lists) in one pass over the args;
    None when the general path is needed."""
    layout = []
    edges = []
    meta = []
    saved = []
    reads = True
    meta_only = False
    meta_args = ()
    numbers = 0
    if formula is not None:
        reads = formula.reads_inputs
        if reads is None:
            reads = formula.reads_inputs = _reads_inputs(formula.backward)
        meta_only = formula.meta_only
        meta_args = formula.meta_args
    skip = NONDIFF_ARGS.get(name, ())
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            if a._requires_grad:
                layout.append(len(edges))
                fn = a.grad_fn
                if fn is not None:
                    m = a._autograd_meta
                    edges.append((fn, 0 if m is None else m.output_nr))
                else:
                    edges.append((grad_accumulator(a), 0))
                meta.append((a._shape, a.dtype))
            else:
                layout.append(None)
                if not (skip and i in skip):  # Note [Non-differentiable inputs' edges]
                    edges.append(_NO_EDGE)
                    meta.append(None)
            if a.dtype.is_complex:
                return None  # the general path picks the complex formula
            saved.append(None if not reads else _stand_in(a) if meta_only or i in meta_args else SavedTensor(a, False))
        elif type(a) in (list, tuple) and a:
            return None
        else:
            layout.append(None)
            saved.append(a)
            numbers += type(a) in _NUMBERS
    if numbers and name in NUMBER_OPERAND_EDGES:
        edges.extend([_NO_EDGE] * numbers)
        meta.extend([None] * numbers)
    _STATE.grad_enabled = False
    try:
        out = op.call_kernel(args, kwargs)
    finally:
        _STATE.grad_enabled = True
    if type(out) is Tensor and out._base is not None:
        out = _own_result(out, args)
    if type(out) is not Tensor or _is_arg(out, args) or not out.dtype.is_floating_point:
        # Rare shapes of result (several outputs, an input handed back, integer dtype).
        return _record_result(name, formula, args, kwargs, out, layout, tuple(edges), meta)
    cls = _NODE_CLASSES.get(name) if formula is not None else None
    if cls is None:
        cls = _node_class(name, formula is None)
    if name in _OVERLOAD_NODE_NAMES:
        cls = _class_for_call(name, cls, args)
    if kwargs:
        kwargs = {k: SavedTensor(v, False) if isinstance(v, Tensor) else v for k, v in kwargs.items()}
    saved_outputs = (SavedTensor(out, True, 0),) if formula is not None and _saves_output(formula, 0) else ()
    node = cls(formula, layout, tuple(edges), meta, _SavedArgs(saved), kwargs, saved_outputs)
    if saved_outputs:
        saved_outputs[0].requires_grad = True
    if anomaly_mode._STATE.enabled:
        anomaly_mode.store_forward_trace(node)
    out.grad_fn = node
    out._requires_grad = True
    return out


def _record_result(name, formula, args, kwargs, out, layout, edges, meta):
    """Records an out-of-place call whose result ``out`` is already computed."""
    _check_result_dtype(name, out)
    if isinstance(out, Tensor) and _is_arg(out, args):
        out = make_view(out, out._shape, out._stride, out._offset)
    outs = (out,) if isinstance(out, Tensor) else tuple(out)
    if involves_complex((), outs):
        formula = complex_formula(name, formula)
    node = make_node(name, formula, layout, edges, meta, args, kwargs, outs)
    skip = formula.nondiff_outputs if formula is not None else ()
    for i, o in enumerate(outs):
        if isinstance(o, Tensor) and (o.dtype.is_floating_point or o.dtype.is_complex) and i not in skip:
            set_history(o, node, i)
    return out


def record_computed(op, args: tuple, kwargs: dict, out):
    """What ``record`` does after its kernel call, for a result the native device fast path
    computed (csrc/common/device_fast_path.cpp) and did not record itself: several outputs, an
    input handed back, an integer or complex result. ``args`` hold no tensor list, no complex
    tensor; ``kwargs`` no tensor."""
    layout, edges, meta = _edges(args, op.name)
    return _record_result(op.name, FORMULAS.get(op.name), args, kwargs, out, layout, edges, meta)


def native_spec(op):
    """What the native fast path needs to record ``op`` itself (csrc/common/autograd_record.cpp):
    ``(name, formula, node class, reads_inputs, saves_output, meta_only, overloads, number_edges,
    nondiff_args)`` (overloads: None or (positions, classes by argument kind), Note [Overload node
    names]; number_edges: Note [Number operands' edges]; nondiff_args: None or the positions of Note
    [Non-differentiable inputs' edges]); a node class of None for
    an op that is never recorded; None when only ``record`` can do it (in-place ops); ``(name, None)``
    when only ``record`` can do it until a formula for ``name`` is registered. The C side keeps the
    answer while ``FORMULAS[name]`` stays the same object (or stays absent)."""
    name = op.name
    formula = FORMULAS.get(name)
    if formula is None:
        if name in NON_DIFFERENTIABLE or not op.differentiable:
            return (name, None, None, False, False, False, None, False, None)
        return (name, None)
    if "inplace" in op.tags or formula.meta_args:  # (the native recording saves all or none as stand-ins)
        return None
    reads = formula.reads_inputs
    if reads is None:
        reads = formula.reads_inputs = _reads_inputs(formula.backward)
    cls = _NODE_CLASSES.get(name) or _node_class(name, False)
    return (name, formula, cls, bool(reads), _saves_output(formula, 0), bool(formula.meta_only),
            _overload_classes(name, cls), name in NUMBER_OPERAND_EDGES, NONDIFF_ARGS.get(name))


# Differentiable ops with a dtype argument: asked for an integer result from an input that requires
# grad they raise, as PyTorch does, instead of silently returning a result without history.
_INTEGER_RESULT_RAISES = frozenset({"sum", "nansum", "prod", "cumsum", "cumprod"})


def _check_result_dtype(name, out) -> None:
    if name in _INTEGER_RESULT_RAISES and isinstance(out, Tensor) and not (
            out.dtype.is_floating_point or out.dtype.is_complex):
        raise RuntimeError(f"Autograd not support dtype: {type_name(out.dtype)}")


def _saves_output(formula, index: int) -> bool:
    keep = formula.save_output
    return bool(keep) if type(keep) is bool else index in keep


_READS_INPUTS: dict = {}


def _reads_inputs(fn) -> bool:
    """Whether a backward formula ever loads its ``inputs`` parameter (checked once, on its bytecode)."""
    known = _READS_INPUTS.get(fn)
    if known is None:
        code = getattr(fn, "__code__", None)
        if code is None or code.co_argcount < 2:
            known = True
        else:
            import dis

            param = code.co_varnames[1]
            known = any(ins.opname.startswith("LOAD_") and ins.argval == param for ins in dis.get_instructions(code))
        _READS_INPUTS[fn] = known
    return known


def _is_arg(t, args) -> bool:
    for a in args:
        if a is t:
            return True
    return False


def make_node(name, formula, layout, edges, meta, saved_in, kwargs, outs):
    cls = _node_class(name, formula is None)
    if name in _OVERLOAD_NODE_NAMES:
        cls = _class_for_call(name, cls, saved_in)
    saved_args = []
    need_node = False
    meta_only = formula is not None and formula.meta_only
    meta_args = formula.meta_args if formula is not None else ()
    for i, a in enumerate(saved_in):
        if meta_only or i in meta_args:
            a = _stand_in(a)
        elif isinstance(a, Tensor) or (type(a) in (list, tuple) and a):
            a = _save(a, outs)
            need_node = need_node or (type(a) is SavedTensor and a.is_output) or type(a) is list
        saved_args.append(a)
    saved_args = _SavedArgs(saved_args)
    if kwargs:
        kwargs = {k: _save(v, outs) for k, v in kwargs.items()}
    saved_outputs = ()
    if formula is not None and formula.save_output:
        # Outputs a formula does not read are not saved (None in its ``outputs``): an in-place op on
        # them afterwards (ReLU(inplace=True) after BatchNorm) must not invalidate this backward.
        saved_outputs = tuple(_save(o, outs) if _saves_output(formula, i) else None
                              for i, o in enumerate(outs) if isinstance(o, Tensor))
    node = cls(formula, layout, edges, meta, saved_args, kwargs, saved_outputs)
    if need_node:
        node._args_need_node = True
    if len(outs) != 1:
        node._num_outputs = len(outs)
    if anomaly_mode._STATE.enabled:
        anomaly_mode.store_forward_trace(node)
    return node
