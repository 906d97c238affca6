"""Turning a recorded segment into an ``ember.fx.GraphModule`` (only on a cache miss).

Tensor arguments become placeholders (segment inputs) or earlier nodes; multi-output ops
are followed by ``operator.getitem`` nodes, as in torch.fx; grad-mode transitions are
``_set_grad_enabled`` calls (PyTorch's Dynamo graphs carry the same); constants that Python
source cannot spell (a Generator, a tensor kept as a constant) are attributes of the root
module, read with ``get_attr``. ``node.meta["val"]`` holds the fake value of every tensor node.
"""

from __future__ import annotations

import operator

from ember._src import grad_mode
from ember._src.device import device as Device
from ember._src.dtypes import dtype as DType
from ember.fx.node import has_side_effect

from ._dynamic import is_slice_op
from ._fake import fake_of
from ._hooks import _PythonOp
from ._op_facts import op_info
from ._recorder import _GRAD_EVENT, Ref


def _set_grad_enabled(mode: bool) -> None:
    """Switches grad mode inside a captured graph (Dynamo's ``torch._C._set_grad_enabled``)."""
    grad_mode.STATE.grad_enabled = mode


def _set_inference_mode(grad: bool, inference: bool) -> None:
    """Switches grad and inference mode together inside a captured graph."""
    grad_mode.STATE.grad_enabled = grad
    grad_mode.STATE.inference = inference


_set_grad_enabled.__module__ = _set_inference_mode.__module__ = "ember.compiler"
# Their results are unused, so without this a pass's eliminate_dead_code would drop the mode switches.
has_side_effect(_set_grad_enabled)
has_side_effect(_set_inference_mode)
_LITERALS = (int, float, bool, str, type(None), complex, DType, Device, type(Ellipsis))


def _keep_literals(a, i: int, literal, sub):
    """Argument ``i`` of a node for the graph: itself where the user's code spelled it (``x * 2``), its list
    items spelled so (``x.repeat(2, 1)``) kept, every other int substituted by ``sub`` (a size symbol)."""
    if i in literal:
        return a
    if (type(a) is list or type(a) is tuple) and any((i, j) in literal for j in range(len(a))):
        return type(a)(b if (i, j) in literal else sub(b, True) for j, b in enumerate(a))
    return sub(a)


def build_graph_module(rec, live: list, fx, *, constants: frozenset = frozenset(), output=None,
                       placeholder_name: str = "arg{}", forward_count: int | None = None, symbols=None):
    """The GraphModule of ``rec``'s pending segment, returning the values numbered ``live``.

    make_fx's variant: inputs whose value index is in ``constants`` become ``get_attr``
    constants (``_tensor_constant<k>``) instead of placeholders, and ``output`` (a structure of
    Refs and constants) replaces the flat tuple of ``live`` values.
    """
    import ember

    graph = fx.Graph()
    root = ember.nn.Module()
    env: dict = {}
    consts: dict = {}
    metas = rec.input_metas
    k = 0
    for t in rec.inputs:
        v = rec.input_index[id(t)]
        if v in constants:
            name = f"_tensor_constant{len(consts)}"
            consts[id(t)] = name
            root.register_buffer(name, t)
            node = graph.get_attr(name)
        else:
            node = graph.placeholder(placeholder_name.format(k))
            k += 1
        node.meta["val"] = fake_of(metas[v], t._device, t._requires_grad)
        node.meta["example_value"] = node.meta["val"]
        env[v] = node

    sym_nodes: dict = {}
    by_value: dict = {}
    derived: dict = {}
    derived_nodes: dict = {}
    float_syms: dict = {}
    scalar_ints: frozenset = frozenset()
    anywhere: dict = {}
    if symbols is not None:
        from ._dynamic import ScalarSource
        from .symbolic_shapes import ShapeEnv

        sources, by_value, derived, float_syms, scalar_ints, anywhere, numbers = symbols
        shape_env = ShapeEnv()
        for i, source in enumerate(sources):
            node = graph.placeholder(f"s{i}")
            if type(source) is ScalarSource:
                value = numbers[source.slot]
                node.meta["val"] = value if source.kind is float else shape_env.create_symint(value)
            else:
                node.meta["val"] = shape_env.create_symint(rec.inputs[source[0]]._shape[source[1]])
            sym_nodes[i] = node
        root.shape_env = shape_env

    def expression(value, expr):
        """The node computing a derived symbol expression (``_dynamic``), made once per value."""
        node = derived_nodes.get(value)
        if node is None:
            kind, i, j = expr
            if kind == "mul":
                node = graph.call_function(operator.mul, (sym_nodes[i], sym_nodes[j]))
            elif kind == "mulc":
                node = graph.call_function(operator.mul, (sym_nodes[i], j))
            elif kind == "add":
                node = graph.call_function(operator.add, (sym_nodes[i], j))
            elif kind == "neg":
                node = graph.call_function(operator.neg, (sym_nodes[i],))
            else:
                node = graph.call_function(operator.floordiv, (sym_nodes[i], j))
            derived_nodes[value] = node
        return node

    literal_args = getattr(rec, "literal_args", {})

    def sub(a, in_seq=False):
        if type(a) is Ref:
            return env[a.index]
        t = type(a)
        if t is int and a in by_value:
            return sym_nodes[by_value[a]]
        if t is float and float_syms:
            i = float_syms.get(a.hex())
            return a if i is None else sym_nodes[i] if type(i) is int else expression(("f", a.hex()), i)
        if in_seq and t is int and a in derived:
            return expression(a, derived[a])
        if t is list:
            return [sub(b, True) for b in a]
        if t is tuple:
            return tuple(sub(b, True) for b in a)
        if t is dict:
            return {key: sub(b) for key, b in a.items()}
        if t is slice and scalar_ints:
            # bounds that are a number argument's value are symbols (as ``symbolize`` keyed them)
            return slice(*[sym_nodes[by_value[b]] if type(b) is int and b in scalar_ints
                           else expression(b, anywhere[b]) if type(b) is int and b in anywhere else b
                           for b in (a.start, a.stop, a.step)])
        if isinstance(a, _LITERALS) or t is slice:
            return a
        name = consts.get(id(a))
        if name is None:
            name = f"_const{len(consts)}"
            consts[id(a)] = name
            if isinstance(a, ember.Tensor):
                root.register_buffer(name, a)
            else:
                setattr(root, name, a)
        return graph.get_attr(name)

    values = rec.value_meta
    rec_inference = [rec.start_inference_mode]
    stacks = rec.stacks
    module_stacks = rec.module_stacks
    op_index = 0
    grad_now = rec.start_grad_mode
    for index, (func, targs, tkwargs, first, nout) in enumerate(rec.nodes):
        if func is _GRAD_EVENT:
            grad, inference = targs
            if inference == rec_inference[0]:
                graph.call_function(_set_grad_enabled, (grad,))
            else:
                graph.call_function(_set_inference_mode, (grad, inference))
                rec_inference[0] = inference
            grad_now = grad
            continue
        target = func.fn if type(func) is _PythonOp else func
        literal = literal_args.get(index, ())  # ints the user's code spells stay constants (``symbolize`` too)
        if literal:
            node = graph.call_function(target, tuple(_keep_literals(a, i, literal, sub) for i, a in enumerate(targs)),
                                       {k: a if ("kw", k) in literal else sub(a) for k, a in tkwargs.items()})
        elif anywhere and is_slice_op(target):
            # the op's bounds (args 2, 3) are slice bounds: ``n + 1`` as ``symbolize`` keyed it
            node = graph.call_function(target, tuple(
                expression(a, anywhere[a]) if 2 <= i <= 3 and type(a) is int and a not in by_value and a in anywhere
                else sub(a) for i, a in enumerate(targs)), {k: sub(a) for k, a in tkwargs.items()})
        else:
            node = graph.call_function(target, tuple(sub(a) for a in targs), {k: sub(a) for k, a in tkwargs.items()})
        if op_index < len(stacks) and stacks[op_index] is not None:
            node.meta["stack_trace"] = str(stacks[op_index])
        if op_index < len(module_stacks) and module_stacks[op_index]:
            node.meta["nn_module_stack"] = dict(module_stacks[op_index])
        if forward_count is not None:
            node.meta["partitioner_tag"] = "is_forward" if op_index < forward_count else "is_backward"
        op_index += 1
        if nout < 0:
            env[first] = node
            _set_val(node, values[first])
            if values[first] is None:
                _rebind_inplace_result(env, func, targs, node)
        else:
            vals = []
            for i in range(nout):
                item = graph.call_function(operator.getitem, (node, i))
                if forward_count is not None:
                    item.meta["partitioner_tag"] = node.meta["partitioner_tag"]
                env[first + i] = item
                _set_val(item, values[first + i])
                vals.append(item.meta.get("val"))
            node.meta["val"] = tuple(vals)
    # A mode switched inside (a ``no_grad`` block whose last op ends the recording) is switched
    # back, so running the graph on its own leaves the caller's mode as it found it.
    if rec_inference[0] != rec.start_inference_mode:
        graph.call_function(_set_inference_mode, (rec.start_grad_mode, rec.start_inference_mode))
    elif grad_now is not None and grad_now != rec.start_grad_mode:
        graph.call_function(_set_grad_enabled, (rec.start_grad_mode,))
    graph.output(tuple(env[v] for v in live) if output is None else sub(output))
    from ember.fx import graph_module

    graph_module._LAZY[0] = True  # its code is generated on first use (see graph_module)
    try:
        return fx.GraphModule(root, graph)
    finally:
        graph_module._LAZY[0] = False


def _rebind_inplace_result(env: dict, func, targs, node) -> None:
    """An in-place op on an intermediate (``relu_(linear)``) handed back its argument: later uses
    read the in-place node, as in PyTorch's graphs (the returned value is ``relu_``, not
    ``linear``). Graph inputs keep their placeholder (export lifts their mutations)."""
    if type(func) is _PythonOp:
        return
    for pos in op_info(func)[0]:
        if pos < len(targs) and type(targs[pos]) is Ref:
            written = env.get(targs[pos].index)
            if written is not None and written.op == "call_function":
                env[targs[pos].index] = node
                if "val" in written.meta:
                    node.meta["val"] = written.meta["val"]
                    node.meta["example_value"] = written.meta["val"]
            return


def _set_val(node, value_meta) -> None:
    if type(value_meta) is not tuple:  # a number a node computes (export's ``item``): its SymInt
        if value_meta is not None:
            node.meta["val"] = value_meta
        return
    if value_meta is not None:
        node.meta["val"] = fake_of(*value_meta)
        node.meta["example_value"] = node.meta["val"]
