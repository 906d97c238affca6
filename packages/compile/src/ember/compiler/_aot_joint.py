"""Tracing the joint forward+backward graph of a captured graph with ember's own formulas.

The forward graph is replayed under a strict ``Recorder`` on its example inputs (which are
lifted as the primal inputs); then, walking its nodes in reverse, each op's backward formula
from ``ember.autograd.formulas`` (the table the eager engine uses) is called on the lazy
values, with the output gradients as fresh graph inputs (the tangents). Gradients are summed
down to each input's shape and cast to its dtype exactly as the engine does (``sum_to``).
What the recorder saw is the joint graph: recorded forward nodes first, then backward ones.

An in-place op on a tensor the graph itself made (``masked_fill`` is ``clone`` then
``masked_fill_``; ``y = x.clone(); y.mul_(2)``) is replayed on a fresh copy of its operand:
nodes after it read the copy, nodes before it the operand, and its formula's gradient goes to
the operand (the copy's gradient is the identity). Anything else outside this scheme (an
in-place op on an input or a view, a grad-mode switch inside the graph, an op with no formula,
a formula that reads data) makes ``trace_joint`` return None, and the caller runs the graph
under eager autograd instead (correct, just not compiled as one backward).
"""

from __future__ import annotations

import logging
import math
import operator

import ember
from ember._src.dispatch import Op
from ember._src.tensor import Tensor

from ._graph_build import _set_grad_enabled, _set_inference_mode, build_graph_module
from ._lazy import _detach
from ._recorder import Recorder

_log = logging.getLogger("ember.compiler.aot_autograd")


class _StrictOwner:
    want_stacks = False
    fullgraph = True

    def note_break(self, reason, frame, rec):
        raise _Unsupported(reason)

    def lookup(self, rec, live):  # pragma: no cover
        raise _Unsupported("partial graph")


class _Unsupported(Exception):
    pass


def _supported(gm) -> bool:
    from ember.autograd.formulas import FORMULAS, NON_DIFFERENTIABLE

    for node in gm.graph.nodes:
        if node.op == "call_function":
            t = node.target
            if t is operator.getitem or t is _detach:
                continue
            if t is _set_grad_enabled or t is _set_inference_mode or not isinstance(t, Op):
                return False
            if "inplace" in t.tags:
                if not any(getattr(a.meta.get("val"), "requires_grad", True) for a in node.all_input_nodes):
                    continue  # a buffer update (BatchNorm's num_batches_tracked): forward-only
                if not _fresh_operand(node) or t.name not in FORMULAS:
                    return False  # in-place on something autograd tracks: leave it to eager autograd
                continue
            if t.name not in FORMULAS and t.name not in NON_DIFFERENTIABLE:
                return False
        elif node.op not in ("placeholder", "output", "get_attr"):
            return False
    return True


def _fresh_operand(node) -> bool:
    """Whether an in-place node mutates a tensor the graph computed (not an input or constant)."""
    first = node.args[0] if node.args else None
    return getattr(first, "op", None) == "call_function" and first.target is not operator.getitem


def _map(a, fn):
    if isinstance(a, tuple):
        return tuple(_map(b, fn) for b in a)
    if isinstance(a, list):
        return [_map(b, fn) for b in a]
    if isinstance(a, dict):
        return {k: _map(v, fn) for k, v in a.items()}
    return fn(a)


def trace_joint(gm, example_inputs: list):
    """(joint GraphModule, number of forward outputs, number of recorded forward nodes,
    indices of primals requiring grad, which forward outputs are differentiable) or None."""
    if not _supported(gm):
        return None
    from ember import fx
    from ember.autograd._engine import sum_to
    from ember.autograd.formulas import FORMULAS, Inputs

    class_nll = _ClassNllGrad()
    functional = {"narrow": _NarrowGrad(False, FORMULAS.get("narrow")),
                  "slice": _NarrowGrad(True, FORMULAS.get("slice")),
                  "_class_nll": class_nll,
                  "scaled_dot_product_attention": _AttentionGrad(FORMULAS.get("scaled_dot_product_attention"))}

    rec = Recorder(_StrictOwner())
    try:
        with rec, ember.enable_grad():
            primals = []
            for t in example_inputs:
                if id(t) not in rec.input_index:
                    rec._lift(t)
                primals.append(t)
            env: dict = {}
            # a node mutated in place -> the node whose value later readers see (module docstring)
            current: dict = {}
            used: dict = {}  # node -> (args, kwargs) as the forward called it
            mutated: dict = {}  # in-place node -> the operand's value before the mutation
            placeholders = iter(primals)
            out_node = None

            def look(a):
                return env[current.get(a, a)] if isinstance(a, fx.Node) else a

            for node in gm.graph.nodes:
                if node.op == "placeholder":
                    env[node] = next(placeholders)
                elif node.op == "get_attr":
                    env[node] = getattr(gm, node.target)
                elif node.op == "call_function":
                    args, kwargs = _map(node.args, look), _map(node.kwargs, look)
                    t = node.target
                    if isinstance(t, Op) and "inplace" in t.tags and isinstance(args[0], Tensor) \
                            and args[0].requires_grad:
                        if args[0]._base is not None:
                            raise _Unsupported(f"{t.name} on a view")  # its base would see it too
                        mutated[node] = args[0]
                        args = (ember.ops.clone(args[0]), *args[1:])
                        current[node.args[0]] = node
                    used[node] = (args, kwargs)
                    if isinstance(t, Op) and t.name == "_class_nll" and class_nll.splits(args, kwargs):
                        env[node] = class_nll.forward(args)
                    else:
                        env[node] = t(*args, **kwargs)
                elif node.op == "output":
                    out_node = node
            result = out_node.args[0]
            result = result if type(result) in (list, tuple) else (result,)
            outs = list(_map(result, look))
            n_forward = len(rec.nodes)
            diff_outputs = [isinstance(o, Tensor) and o.requires_grad for o in outs]
            # Tangents: one real zero tensor per differentiable output, lifted as a graph input.
            rec.suspended = True
            tangents = [ember.zeros(o.shape, dtype=o.dtype, device=o.device) for o, d in zip(outs, diff_outputs) if d]
            rec.suspended = False
            grads: dict = {}
            it = iter(tangents)
            tangent_values = set()
            for o, d in zip(outs, diff_outputs):
                if d:
                    g = next(it)
                    tangent_values.add(rec._lift(g))
                    grads[id(o)] = _add(grads.get(id(o)), g)
            nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
            # narrow/slice gradients of one tensor, gathered until that tensor's gradient is read:
            # split's pieces then become one cat instead of a zero-padded cat each, summed
            pending: dict = {}

            def flush(key):
                entry = pending.pop(key, None)
                if entry is not None:
                    a, pieces = entry
                    grads[key] = _add(grads.get(key), _fit(_assemble(a, pieces), a, sum_to))

            for node in reversed(nodes):
                value = env[node]
                t = node.target
                if t is operator.getitem:
                    flush(id(value))
                    g = grads.get(id(value))
                    if g is not None:
                        parent = env[node.args[0]]
                        slot = grads.setdefault(("multi", id(parent)), {})
                        slot[node.args[1]] = _add(slot.get(node.args[1]), g)
                    continue
                if t is _detach:
                    continue
                formula = functional.get(t.name) or FORMULAS.get(t.name)
                if formula is None:
                    continue
                if isinstance(value, (tuple, list)):
                    slot = grads.get(("multi", id(value)), {})
                    out_grads = tuple(slot.get(i) for i in range(len(value)))
                    outputs = tuple(value)
                else:
                    flush(id(value))
                    out_grads = (grads.get(id(value)),)
                    outputs = (value,)
                if all(g is None for g in out_grads):
                    continue
                args, kwargs = used[node]
                args, kwargs = tuple(args), dict(kwargs)
                res = formula.backward(out_grads, Inputs(args, kwargs), outputs if formula.save_output else ())
                if isinstance(res, Tensor) or res is None:
                    res = (res,)
                if node in mutated:  # the copy's gradient goes on to the operand it copied
                    args = (mutated[node], *args[1:])
                for i, g in enumerate(res):
                    if i >= len(args) or g is None:
                        continue
                    a = args[i]
                    if isinstance(g, _Piece):
                        if a.requires_grad:
                            pending.setdefault(id(a), (a, []))[1].append(g)
                        continue
                    if isinstance(a, Tensor):
                        if a.requires_grad:
                            grads[id(a)] = _add(grads.get(id(a)), _fit(g, a, sum_to))
                    elif type(a) in (list, tuple):
                        for b, gb in zip(a, g):
                            if isinstance(b, Tensor) and b.requires_grad and gb is not None:
                                grads[id(b)] = _add(grads.get(id(b)), _fit(gb, b, sum_to))
            needs = [i for i, t in enumerate(primals) if isinstance(t, Tensor) and t.requires_grad]
            for i in needs:
                flush(id(primals[i]))
            input_grads = [grads.get(id(primals[i])) for i in needs]
            # An input that got no gradient: its gradient is None (the engine skips it too).
            rec.suspended = True
            output = (tuple(outs), tuple(input_grads))
            rec.suspended = False
            output_template, _, _ = rec._conv(output)
            # Real tensors a formula made from Python data are constants of the joint graph.
            primal_values = {rec.input_index[id(t)] for t in primals}
            constants = frozenset(v for v in rec.input_index.values()
                                  if v not in primal_values and v not in tangent_values)
            joint = build_graph_module(rec, [], fx, output=output_template, placeholder_name="input{}",
                                       forward_count=n_forward, constants=constants)
    except Exception:  # noqa: BLE001 - any failure means: run this graph under eager autograd
        _log.debug("AOT autograd falls back to eager autograd", exc_info=True)
        return None
    finally:
        rec.discard()
    joint.ember_output_views = _output_views(gm, outs, primals)
    return joint, len(outs), n_forward, needs, diff_outputs, len(tangents)


# View ops whose result always shares its operand's memory (``flatten``, also tagged a view, copies a
# non-contiguous operand; the dtype views are excluded by the dtype check).
_PURE_VIEWS = frozenset({"alias", "as_strided", "diagonal", "expand", "narrow", "permute", "select", "slice",
                         "squeeze", "transpose", "unfold", "unsqueeze", "view"})


def _output_views(gm, outs, primals) -> dict:
    """{output index: (input index, shape, stride, storage offset, the input's stride, the input's
    storage offset)} for each output that is a chain of view ops of one input in ``gm`` (the
    capture's graph): the runtime returns it as that view of the input (PyTorch's AOT regenerates
    such outputs from the input outside its autograd.Function, so they alias it and their
    gradient flows through the view to the input). The forward's computed copy is still returned
    where the input's layout differs from the traced one."""
    from ember import fx

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    result = out_node.args[0]
    result = result if type(result) in (list, tuple) else (result,)
    views = {}
    for i, (node, value) in enumerate(zip(result, outs)):
        if not isinstance(node, fx.Node) or not isinstance(value, Tensor):
            continue
        n, steps = node, 0
        while n.op == "call_function":
            if not (isinstance(n.target, Op) and n.target.name in _PURE_VIEWS and n.args
                    and isinstance(n.args[0], fx.Node)):
                break
            n, steps = n.args[0], steps + 1
        if steps == 0 or n.op != "placeholder" or n not in placeholders:
            continue
        k = placeholders.index(n)
        p = primals[k] if k < len(primals) else None
        if not isinstance(p, Tensor) or p.dtype is not value.dtype or p.device != value.device:
            continue
        views[i] = (k, tuple(value.shape), tuple(value.stride()), value.storage_offset(), tuple(p.stride()),
                    p.storage_offset())
    return views


def as_input_views(outs: tuple, inputs, views: dict) -> tuple:
    """``outs`` with the outputs of ``views`` (``_output_views``) made views of their inputs."""
    outs = list(outs)
    for i, (k, shape, stride, offset, in_stride, in_offset) in views.items():
        t = inputs[k]
        if i < len(outs) and isinstance(t, Tensor) and tuple(t.stride()) == in_stride \
                and t.storage_offset() == in_offset and tuple(outs[i].shape) == shape:
            outs[i] = t.as_strided(shape, stride, offset)
    return tuple(outs)


class _ClassNllGrad:
    """cross-entropy's backward as its one op, ``_class_nll_backward``, which the code generator
    decomposes into one row kernel (the engine's formula traces the composite it keeps for
    double backward: a softmax, an extern gather and several full-size passes). It reads the
    forward's saved log-sum-exp (``_class_nll``'s fourth output), so the partitioned backward
    gets it as a saved activation and its kernel computes exp(x - lse) with no row max or sum."""

    save_output = True

    def __init__(self):
        self.lo: dict = {}  # id(a split forward's lse) -> its lo

    @staticmethod
    def splits(args, kwargs) -> bool:
        """Whether the forward is recorded as ``_class_nll_split`` (``_class_nll_split.py``): scores
        whose gradient is wanted, a log-sum-exp (not log_probs), a device with its kernel."""
        from ._class_nll_split import CLASS_NLL_SPLIT

        return (not kwargs and len(args) == 6 and isinstance(args[0], Tensor) and args[0].requires_grad
                and not args[4] and args[0].device.type in CLASS_NLL_SPLIT.kernels)

    def forward(self, args):
        """``_class_nll``'s four outputs, recorded as ``_class_nll_split``'s; its fifth kept for the backward."""
        from ._class_nll_split import CLASS_NLL_SPLIT

        *outs, lo = CLASS_NLL_SPLIT(*args)
        self.lo[id(outs[3])] = lo
        return tuple(outs)

    def backward(self, grads, inputs, outputs):
        x, target, weight, ignore_index, log_probs, smooth = inputs.args[:6]
        g_smooth = grads[1] if smooth and len(grads) > 1 else None
        g_nll = grads[0]
        if g_nll is None and g_smooth is None:
            return (None,)
        lse = None if log_probs else outputs[3]
        lo = None if lse is None else self.lo.get(id(lse))
        if lo is not None:
            # exp((x - lse) - lo): the rounding of a huge lse undone (_class_nll_split.py)
            from ._class_nll_split import CLASS_NLL_SPLIT_BACKWARD

            return (CLASS_NLL_SPLIT_BACKWARD(g_nll, g_smooth, x, target, weight, ignore_index, log_probs, lse, lo),)
        return (ember.ops._class_nll_backward(g_nll, g_smooth, x, target, weight, ignore_index, log_probs, lse),)


class _AttentionGrad:
    """``scaled_dot_product_attention``'s backward as its one native op,
    ``_scaled_dot_product_attention_math_backward`` (an extern of the compiled backward), where that op
    applies (the conditions of the engine's ``_native_attention_backward`` but the grad mode, which is
    on while the joint is traced). The engine's composite, which the joint would trace otherwise,
    differs from eager where a row of the mask hides every key: its softmax of -inf scores is NaN and
    so were the gradients of the whole batch (eager's and PyTorch's are 0 there)."""

    save_output = False

    def __init__(self, formula):
        self.formula = formula

    def backward(self, grads, inputs, outputs):
        from ember._src.dispatch import OPS

        g = grads[0]
        q, k, v = inputs.args[:3]

        def get(i, name, default):
            return inputs.args[i] if i < len(inputs.args) else inputs.kwargs.get(name, default)

        mask, dropout_p, is_causal = get(3, "attn_mask", None), get(4, "dropout_p", 0.0), get(5, "is_causal", False)
        scale, gqa = inputs.kwargs.get("scale"), inputs.kwargs.get("enable_gqa", False)
        native = OPS.get("_scaled_dot_product_attention_math_backward")
        tensors = (g, q, k, v) if mask is None else (g, q, k, v, mask)
        if (g is None or dropout_p or native is None or not all(isinstance(t, Tensor) for t in tensors)
                or q.device.type not in native.kernels or not (q.ndim == k.ndim == v.ndim == g.ndim >= 3)
                or not q.is_floating_point()
                or not tuple(q.shape[:-3]) == tuple(k.shape[:-3]) == tuple(v.shape[:-3])
                or k.shape[-3] != v.shape[-3] or not (k.shape[-3] == q.shape[-3] or gqa)):
            return self.formula.backward(grads, inputs, outputs)
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
        return native(g, q, k, v, mask, bool(is_causal), scale)


class _NarrowGrad:
    """``narrow``/``slice`` (step 1) backward as a ``_Piece`` that ``_assemble`` turns into
    ``cat([zeros, g, zeros])`` — with the other pieces of the same tensor, one cat: the engine's
    formula writes ``g`` into a view of fresh zeros (``copy_``), a mutation the code generator
    cannot fuse; ``split``'s pieces are narrows, so every fused QKV projection's backward has it."""

    save_output = False

    def __init__(self, slice_: bool, formula):
        self.slice_ = slice_
        self.formula = formula  # the engine's, for a strided slice

    def backward(self, grads, inputs, outputs):
        g, x = grads[0], inputs.args[0]
        args = list(inputs.args) + [None] * 4
        dim = args[1] if args[1] is not None else inputs.kwargs.get("dim", 0)
        dim = dim % x.dim()
        size = x.shape[dim]
        if self.slice_:
            start = args[2] if args[2] is not None else inputs.kwargs.get("start")
            step = args[4] if args[4] is not None else inputs.kwargs.get("step", 1)
            if step != 1:
                return self.formula.backward(grads, inputs, outputs)
            start = 0 if start is None else start
            start = min(max(start + size if start < 0 else start, 0), size)
        else:
            start = args[2] if args[2] is not None else inputs.kwargs.get("start", 0)
            start = start + size if start < 0 else start
        return (_Piece(dim, start, g),)


class _Piece:
    """The gradient ``g`` of a narrow of its input, at ``start`` along ``dim`` (zeros elsewhere)."""

    __slots__ = ("dim", "start", "g")

    def __init__(self, dim, start, g):
        self.dim, self.start, self.g = dim, start, g


def _assemble(x, pieces):
    """The gradient of ``x`` from the narrow pieces: one cat where they tile without overlap along
    one dim (gaps zero-filled), else one zero-padded cat a piece, summed."""
    dims = {p.dim for p in pieces}
    ordered = sorted(pieces, key=lambda p: p.start)
    if len(dims) == 1 and all(a.start + a.g.shape[a.dim] <= b.start for a, b in zip(ordered, ordered[1:])) \
            and len({(p.g.dtype, p.g.device) for p in pieces}) == 1:
        return _padded_cat(x, ordered)
    total = None
    for p in pieces:
        total = _add(total, _padded_cat(x, [p]))
    return total


def _padded_cat(x, ordered):
    dim = ordered[0].dim
    size = x.shape[dim]
    g0 = ordered[0].g
    parts, at = [], 0
    for p in ordered:
        if p.start > at:
            parts.append(_zeros_like_along(g0, dim, p.start - at))
        parts.append(p.g)
        at = p.start + p.g.shape[dim]
    if size > at:
        parts.append(_zeros_like_along(g0, dim, size - at))
    return parts[0] if len(parts) == 1 else ember.cat(parts, dim)


def _zeros_like_along(g, dim, n):
    shape = list(g.shape)
    shape[dim] = n
    return ember.zeros(shape, dtype=g.dtype, device=g.device)


def _add(a, b):
    return b if a is None else a + b


def _fit(g, a, sum_to):
    if g._shape != a._shape:
        g = sum_to(g, a._shape)
    if g.dtype is not a.dtype:
        g = g.to(a.dtype)
    return g
