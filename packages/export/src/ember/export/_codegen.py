"""The code of an exported module's graph (``ep.module()``): it takes the program's structured
inputs and returns its structured outputs, as PyTorch's pytree codegen writes it::

    def forward(self, x, d):
        x, d_k, = fx_pytree.tree_flatten_spec(([x, d], {}), self._in_spec)
        ...
        return pytree.tree_unflatten((linear, relu), self._out_spec)

``fx.Interpreter(ep.module()).run(x, d)`` flattens and rebuilds the same way (``process_inputs``,
``process_outputs``).
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

from ember.fx import CodeGen

from . import _pytree as pytree

# The names the generated code calls, as PyTorch's spells them.
_FX_PYTREE = SimpleNamespace(tree_flatten_spec=pytree.tree_flatten_spec)
_PYTREE = SimpleNamespace(tree_unflatten=pytree.tree_unflatten, tree_flatten=pytree.tree_flatten)


@dataclasses.dataclass
class PyTreeInfo:
    """The forward's parameter names and the input and output specs."""

    orig_args: list[str]
    in_spec: pytree.TreeSpec | None
    out_spec: pytree.TreeSpec | None


class PyTreeCodeGen(CodeGen):
    def __init__(self, pytree_info: PyTreeInfo) -> None:
        self.pytree_info = pytree_info

    def module_attributes(self) -> dict[str, Any]:
        return {"_in_spec": self.pytree_info.in_spec, "_out_spec": self.pytree_info.out_spec}

    def process_inputs(self, *args: Any) -> Any:
        return pytree.tree_flatten(list(args))[0]

    def process_outputs(self, outputs: Any) -> Any:
        out_spec = self.pytree_info.out_spec
        if out_spec is None:
            return outputs
        if not isinstance(outputs, (list, tuple)):
            outputs = [outputs]
        return pytree.tree_unflatten(list(outputs), out_spec)

    def _gen_python_code(self, nodes, root_module, namespace, **kwargs):
        code = super()._gen_python_code(nodes, root_module, namespace, **kwargs)
        code.globals["fx_pytree"] = _FX_PYTREE
        code.globals["pytree"] = _PYTREE
        return code

    def gen_fn_def(self, free_vars: list[str], maybe_return_annotation: str) -> str:
        info = self.pytree_info
        in_spec = info.in_spec
        if in_spec is None:
            return super().gen_fn_def(free_vars, maybe_return_annotation)
        fn_def = super().gen_fn_def(list(info.orig_args), maybe_return_annotation)
        # ([positional], {'key': key}): the call's (args, kwargs), whose flattening is the placeholders.
        n_positional = in_spec.child(0).num_children
        positional = info.orig_args[:n_positional]
        keywords = info.orig_args[n_positional:]
        kwargs = ", ".join(f"{key!r}:{name}" for key, name in zip(in_spec.child(1).context or [],
                                                                   keywords))
        names = [v.split(":", 1)[0].split("=", 1)[0].strip() for v in free_vars if v != "self"]
        targets = f"{', '.join(names)}," if names else "_"
        return (f"{fn_def}\n    {targets} = fx_pytree.tree_flatten_spec(([{', '.join(positional)}], "
                f"{{{kwargs}}}), self._in_spec)")

    def generate_output(self, output_repr: str) -> str:
        if self.pytree_info.out_spec is None:
            return super().generate_output(output_repr)
        return f"return pytree.tree_unflatten({output_repr}, self._out_spec)"


def pytree_codegen(program) -> PyTreeCodeGen:
    """The codegen of ``program``'s unlifted graph."""
    in_spec, out_spec = program.call_spec
    names = program.module_call_graph[0].signature.forward_arg_names
    if in_spec is not None and in_spec.type is tuple and in_spec.num_children == 2:
        n_args = in_spec.child(0).num_children
        keys = list(in_spec.child(1).context or [])
        if names is None or len(names) != n_args + len(keys):
            names = [f"args_{i}" for i in range(n_args)] + keys
    else:
        in_spec, names = None, list(names or [])
    return PyTreeCodeGen(PyTreeInfo(list(names), in_spec, out_spec))
