"""``ExportedProgram.run_decompositions``: re-export through a decomposition table.

The program's own module (``ep.module()``) is exported again with compile's ``make_fx``
applying the table (compile's ``core_decompositions()`` when none is given), with the same
dynamic dims rebuilt from the program's symbolic input shapes and range constraints. The
result has the same signature targets; only the ops change.
"""

from __future__ import annotations

import importlib.util

import sympy

from ember._src.dispatch import OPS

from ._dims import Dim
from ._program import ExportedProgram


def default_table() -> dict:
    if importlib.util.find_spec("ember.compiler.decompositions") is None:
        return {}
    from ember.compiler import decompositions

    return dict(decompositions.core_decompositions())


def _dynamic_shapes(ep: ExportedProgram) -> tuple:
    dims: dict = {}
    names = getattr(ep, "_dim_names", {})
    out = []
    for check in ep.user_input_checks():
        if check is None:
            out.append(None)
            continue
        _, shape, _ = check
        spec = {}
        for d, size in enumerate(shape):
            if isinstance(size, int):
                continue
            (sym,) = size.free_symbols
            if sym not in dims:
                vr = ep.range_constraints.get(sym)
                lo, hi = (vr.lower, vr.upper) if vr is not None else (None, None)
                dims[sym] = Dim(names.get(sym, str(sym)), min=lo, max=hi)
            poly = sympy.Poly(size, sym)
            coeff, offset = (int(c) for c in (poly.coeff_monomial(sym), poly.coeff_monomial(1)))
            spec[d] = dims[sym] if (coeff, offset) == (1, 0) else coeff * dims[sym] + offset
        out.append(spec or None)
    return tuple(out)


class CustomDecompTable(dict):
    """``torch.export.default_decompositions()``: {op name: decomposition}, which also takes ember
    ops and ``torch.ops.aten`` overloads as keys (``del table[torch.ops.aten.linear.default]``
    keeps ``linear`` whole in ``run_decompositions(table)``)."""

    def __getitem__(self, key):
        return super().__getitem__(op_name(key))

    def __setitem__(self, key, value):
        super().__setitem__(op_name(key), value)

    def __delitem__(self, key):
        super().__delitem__(op_name(key))

    def __contains__(self, key):
        return super().__contains__(op_name(key))

    def get(self, key, default=None):
        return super().get(op_name(key), default)

    def pop(self, key, *default):
        return super().pop(op_name(key), *default)

    def copy(self):
        return CustomDecompTable(self)


def op_name(key):
    """The op name a decomposition-table key stands for (a name, an ember op, an aten overload)."""
    if isinstance(key, str):
        return key
    op = getattr(key, "op", key)  # torch.ops.aten.<name>.<overload>
    name = getattr(op, "name", None)
    return name if isinstance(name, str) else key


def default_decompositions() -> CustomDecompTable:
    """The table ``run_decompositions()`` applies by default, as a mutable copy: compile's core
    decompositions plus one row per composite op kept whole by export (``linear``, ``layer_norm``
    ...). Deleting a row keeps that op in the decomposed program."""
    from ember._src.composite import CompositeOp

    table = CustomDecompTable(default_table())
    for name, op in OPS.items():
        if isinstance(op, CompositeOp) and name not in table and name != "max_pool2d":
            table[name] = _composite_row(op)
    return table


def _composite_row(op):
    """A composite's decomposition run with the tracer's pre-dispatch off: the public function it
    calls (``F.layer_norm``) would otherwise hand the tracer the composite again."""
    from ember._src import dispatch

    def decompose(*args, **kwargs):
        stack = dispatch._MODES.stack
        mode = stack[-1] if stack else None
        before = getattr(mode, "pre_dispatch", False)
        if mode is not None:
            mode.pre_dispatch = False
        try:
            return op.decomposition(*args, **kwargs)
        finally:
            if mode is not None:
                mode.pre_dispatch = before

    decompose.__name__ = f"decompose_{op.name}"
    return decompose


def run_decompositions(ep: ExportedProgram, table: dict | None = None,
                       keep_composites: bool = False) -> ExportedProgram:
    """``keep_composites``: the table is the user's (``ep.run_decompositions(table)``): composite ops
    without a row stay whole, as in PyTorch (``{}`` only re-traces)."""
    from ._trace import export

    table = default_table() if table is None else {op_name(k): v for k, v in table.items()}
    args, kwargs = ep.example_inputs
    module = ep.module()
    # Preserved call signatures (preserve_module_call_signature) name values of the old graph: the
    # re-export names the values those nodes computed (its own nodes, after decomposition).
    signatures = {e.fqn: e.signature for e in ep.module_call_graph
                  if e.fqn and e.signature is not None and (e.signature.inputs or e.signature.outputs)}
    values: dict = {}

    def graph_fn(module, *args):
        return _run_keeping_module_stacks(module, *args, keep=values if signatures else None)

    def preserved_calls() -> dict:
        from ._signature import TensorArgument

        by_name = {node.name: value for node, value in values.items()}

        def value_of(arg):
            return by_name.get(arg.name) if isinstance(arg, TensorArgument) else arg.value

        return {fqn: ([value_of(a) for a in sig.inputs], sig.in_spec, [value_of(a) for a in sig.outputs],
                      sig.out_spec) for fqn, sig in signatures.items()}

    object.__setattr__(module, "_graph_fn", graph_fn)
    flat_inputs = list(args) + list(kwargs.values())
    shapes = _dynamic_shapes(ep)
    dynamic = shapes if any(s is not None for s in shapes) and len(shapes) == len(flat_inputs) else None
    new = export(module, tuple(args), kwargs, dynamic_shapes=dynamic, _decomposition_table=table,
                 _keep_composites=keep_composites, _preserved_calls=preserved_calls if signatures else None)
    _keep_user_input_names(new, ep)
    from ._verifier import Verifier

    new._verifiers = [Verifier]  # the ATen dialect, as PyTorch's decomposed program
    # The old program's module call graph (modules without weights are not in ep.module()), with
    # the re-export's signatures for the preserved calls.
    renewed = {e.fqn: e.signature for e in new.module_call_graph if e.fqn in signatures}
    new._module_call_graph = new.module_call_graph[:1] + [
        type(e)(e.fqn, renewed.get(e.fqn, e.signature)) for e in ep.module_call_graph[1:]]
    return new


def _run_keeping_module_stacks(module, *args, keep: dict | None = None):
    """Runs ``ep.module()``'s graph node by node, each node's ops recorded under the module stack
    the node was exported under: the re-exported nodes keep ``meta["nn_module_stack"]``, as
    PyTorch's run_decompositions keeps it."""
    from ember.compiler import _module_stack
    from ember.fx import Interpreter

    class KeepStacks(Interpreter):
        def run_node(self, node):
            stack = node.meta.get("nn_module_stack")
            if not stack:
                return super().run_node(node)
            saved = _module_stack.CURRENT[0]
            _module_stack.CURRENT[0] = tuple((key, tuple(value)) for key, value in stack.items())
            try:
                return super().run_node(node)
            finally:
                _module_stack.CURRENT[0] = saved

    interpreter = KeepStacks(module, garbage_collect_values=keep is None)
    out = interpreter.run(*args)
    if keep is not None:  # every node's value (the caller names some of them)
        keep.clear()
        keep.update(interpreter.env)
    return out


def _keep_user_input_names(new: ExportedProgram, old: ExportedProgram) -> None:
    """The re-export traced ``ep.module()``, whose forward takes ``*args``: its user inputs get
    the original program's names back (``x``, not ``args_0``), as PyTorch's keep them."""
    from ._signature import InputKind
    from ._trace import _rename

    def user_args(program):
        return [s.arg for s in program.graph_signature.input_specs if s.kind is InputKind.USER_INPUT]

    renames = {a.name: b.name for a, b in zip(user_args(new), user_args(old)) if a.name != b.name}
    if not renames:
        return
    for node in new.graph.nodes:
        if node.op == "placeholder" and node.name in renames:
            _rename(node, renames[node.name])
    for arg in user_args(new):
        arg.name = renames.get(arg.name, arg.name)
    for entry in new.module_call_graph:  # preserved call signatures name inputs too
        if entry.signature is not None:
            for arg in (*entry.signature.inputs, *entry.signature.outputs):
                if isinstance(getattr(arg, "name", None), str):
                    arg.name = renames.get(arg.name, arg.name)
    for spec in new.graph_signature.output_specs:
        if spec.target in renames:
            spec.target = renames[spec.target]
    new.graph_module.recompile()


_MAX_POOL2D = OPS["max_pool2d"]


def without_composites(ep: ExportedProgram) -> ExportedProgram:
    """``ep`` with PyTorch's composite ops (``linear``, ``conv2d``, ``batch_norm`` ... kept whole by
    export, ``ember._src.composite``) decomposed into the ops they are written with: what the
    consumers that translate ember's ops one by one (ONNX, AOTInductor) read. ``ep`` itself when it
    has none."""
    from ember._src.composite import CompositeOp

    from ._subgraphs import subgraph_nodes

    modules = [ep.graph_module] + [sub for _, sub in subgraph_nodes(ep.graph_module)]
    if not any(isinstance(n.target, CompositeOp) or n.target is _MAX_POOL2D for gm in modules
               for n in gm.graph.nodes):
        return ep
    return run_decompositions(ep, {"max_pool2d": _max_pool2d_with_indices})


def _max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode):
    """max_pool2d as the op the consumers translate (it computes the indices too, as before)."""
    return OPS["max_pool2d_with_indices"](input, kernel_size, stride, padding, dilation, ceil_mode)[0]
