"""ember.export: whole-graph capture of a module into a serializable program (PyTorch's ``torch.export``).

``export(mod, args, dynamic_shapes=...)`` returns an :class:`ExportedProgram` (a functional
graph of ember ops, its signature, weights and the ranges of its dynamic dims);
``save``/``load`` write and read it as a zip of JSON and safetensors that loads without
executing anything from the file.
"""

from ember._higher_order_ops import cond, while_loop

from . import dynamic_shapes, exported_program, graph_signature  # noqa: F401  (PyTorch's submodules)
from ._aoti import AOTICompileError
from ._aoti import aot_compile_library as aot_compile
from ._aoti_runtime import aot_load
from ._constraints import Constraint
from ._decompose import CustomDecompTable, default_decompositions
from ._dims import Dim, dims
from ._draft import draft_export
from ._dynamic_shapes import AdditionalInputs, ShapesCollection
from ._errors import UserError, UserErrorType
from ._graph_json import register_graph_function
from ._program import ExportedProgram, ModuleCallEntry, ModuleCallSignature
from ._pytree import register_dataclass, register_pytree_node
from ._ranges import ValueRange
from ._serialize import SerializationError, load, save
from ._sym import sym_size
from ._trace import export
from .graph_signature import (
    ConstantArgument,
    ExportBackwardSignature,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymIntArgument,
    TensorArgument,
)
from .unflatten import FlatArgsAdapter, UnflattenedModule, unflatten  # (binds the function, as torch)

__all__ = [
    "AdditionalInputs", "aot_compile", "aot_load", "AOTICompileError", "cond", "ConstantArgument", "Constraint",
    "CustomDecompTable", "default_decompositions", "Dim", "dims", "draft_export", "export", "FlatArgsAdapter",
    "ExportedProgram", "ExportGraphSignature", "InputKind", "InputSpec", "load",
    "ModuleCallEntry", "ModuleCallSignature", "OutputKind", "OutputSpec", "register_dataclass",
    "register_pytree_node", "save", "SerializationError",
    "ShapesCollection", "sym_size", "SymIntArgument", "TensorArgument",
    "unflatten", "UnflattenedModule", "UserError", "UserErrorType", "ValueRange", "while_loop",
]

register_graph_function("ember.export.sym_size", sym_size)


def _register_item() -> None:
    from ember.compiler._unbacked_export import clamp_slice_index, item, sym_max, sym_min

    from ._sym import _assert_scalar

    register_graph_function("ember.compiler.item", item)  # .item() in a graph (unbacked ``u0``)
    register_graph_function("ember.export._assert_scalar", _assert_scalar)
    register_graph_function("ember.compiler.clamp_slice_index", clamp_slice_index)  # x[:k.item()]'s bound
    register_graph_function("ember.compiler.sym_min", sym_min)
    register_graph_function("ember.compiler.sym_max", sym_max)


_register_item()
