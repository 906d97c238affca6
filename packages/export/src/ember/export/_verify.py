"""``ExportedProgram.validate()``: the invariants every exported program keeps."""

from __future__ import annotations

from ember._src.dispatch import Op

from ._graph_json import _EXTRA_TARGETS, ALLOWED_FUNCTIONS
from ._signature import TensorArgument


class SpecViolationError(RuntimeError):
    """An exported program whose graph and signature disagree (PyTorch's name)."""


def verify_program(ep) -> None:
    graph = ep.graph
    graph.lint()
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    sig = ep.graph_signature
    expected = [s.arg.name for s in sig.input_specs]
    if [n.name for n in placeholders] != expected:
        raise SpecViolationError("the graph's placeholders and the signature's inputs differ: "
                                 f"{[n.name for n in placeholders]} vs {expected}")
    out = next(n for n in graph.nodes if n.op == "output")
    values = out.args[0] if isinstance(out.args[0], (tuple, list)) else (out.args[0],)
    if len(values) != len(sig.output_specs):
        raise SpecViolationError(f"the graph returns {len(values)} values, the signature names "
                                 f"{len(sig.output_specs)}")
    for value, spec in zip(values, sig.output_specs):
        if isinstance(spec.arg, TensorArgument) and getattr(value, "name", None) != spec.arg.name:
            raise SpecViolationError(f"output {spec.arg.name} of the signature is {value} in the graph")
    allowed = set(map(id, ALLOWED_FUNCTIONS.values())) | set(map(id, _EXTRA_TARGETS.values()))
    for node in graph.nodes:
        if node.op == "call_function" and not isinstance(node.target, Op) and id(node.target) not in allowed:
            if getattr(node.target, "__name__", "") != "_set_grad_enabled":
                raise SpecViolationError(f"node {node.name} calls {node.target}, which is neither an ember op nor "
                                         "an allowed function")
        if node.op in ("call_module", "call_method"):
            raise SpecViolationError(f"node {node.name} is a {node.op} node; exported graphs call functions only")
    for spec in sig.input_specs:
        if spec.target is not None and spec.target not in ep.state_dict and spec.target not in ep.constants:
            raise SpecViolationError(f"input {spec.arg.name} names {spec.target}, which the program does not hold")
