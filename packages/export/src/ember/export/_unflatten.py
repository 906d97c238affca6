"""``unflatten(ep)``: the exported program as a module tree shaped like the original.

Weights go back under their original dotted names (``encoder.layers.0.linear1.weight``)
in submodules of those names, so ``state_dict()`` keys match the eager module's; calling
the root runs the exported graph (ember's graph is not split per submodule).
"""

from __future__ import annotations

import abc

from ._program import _ProgramModule


class FlatArgsAdapter(abc.ABC):
    """Adapts a call's flat inputs to the exported program's input structure (``unflatten``'s
    ``flat_args_adapter``): a subclass defines ``adapt``."""

    @abc.abstractmethod
    def adapt(self, target_spec, input_spec, input_args: list, metadata: dict | None = None,
              obj=None) -> list:
        """The flat inputs for ``target_spec``, from ``input_args`` laid out by ``input_spec``."""


class UnflattenedModule(_ProgramModule):
    """The program's root: submodules as in the exported module, forward = the whole graph (not a
    GraphModule, as PyTorch's is not)."""

    _unflattened = True


def unflatten(module, flat_args_adapter=None) -> UnflattenedModule:
    from ._program import ExportedProgram

    if not isinstance(module, ExportedProgram):
        raise TypeError(f"unflatten expects an ExportedProgram, got {type(module).__name__}")
    return UnflattenedModule(module)
