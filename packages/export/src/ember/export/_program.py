"""``ExportedProgram``: a functional graph, its signature, its weights and its input contract.

The graph takes ``[parameters, buffers, constants, user inputs]`` (signature order) and
returns ``[mutated buffers / inputs, user outputs]``. ``module()`` wraps it back into a
module that holds the weights as attributes, checks a call's inputs against the exported
shapes and ranges, writes buffer mutations back and rebuilds the output structure.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, NamedTuple

import ember
from ember import nn
from ember.fx import GraphModule

from . import _pytree as pytree
from ._codegen import PyTreeCodeGen, pytree_codegen
from ._ranges import ValueRange, as_expr, check_inputs
from ._signature import ConstantArgument, ExportGraphSignature, InputKind, OutputKind, TensorArgument

_TENSOR = object()


@dataclasses.dataclass
class ModuleCallSignature:
    inputs: list
    outputs: list
    in_spec: pytree.TreeSpec | None
    out_spec: pytree.TreeSpec | None
    forward_arg_names: list[str] | None = None


@dataclasses.dataclass
class ModuleCallEntry:
    fqn: str
    signature: ModuleCallSignature | None = None


class CallSpec(NamedTuple):
    """``ep.call_spec``: how the program's inputs and outputs flatten (PyTorch's CallSpec)."""

    in_spec: Any
    out_spec: Any


class ExportedProgram:
    """The result of :func:`ember.export.export` (PyTorch's ``torch.export.ExportedProgram``)."""

    _runtime_guards: tuple = ()  # relations of the dims' symbols each call of module() checks

    def __init__(self, root, graph, graph_signature: ExportGraphSignature, state_dict: dict,
                 range_constraints: dict, module_call_graph: list[ModuleCallEntry],
                 example_inputs: tuple | None = None, constants: dict | None = None, verifiers=None):
        from ember.fx import GraphModule

        root = root if root is not None else nn.Module()
        self._graph_module = graph if isinstance(graph, GraphModule) else GraphModule(root, graph)
        self._graph_signature = graph_signature
        self._state_dict = dict(state_dict)
        self._range_constraints = dict(range_constraints)
        self._module_call_graph = list(module_call_graph)
        self._example_inputs = example_inputs
        self._constants = dict(constants or {})
        if verifiers is None:
            from ._verifier import TrainingIRVerifier

            verifiers = [TrainingIRVerifier]
        self._verifiers = list(verifiers)

    # ------------------------------------------------------------------ accessors
    @property
    def graph_module(self):
        return self._graph_module

    @property
    def graph(self):
        return self._graph_module.graph

    @property
    def graph_signature(self) -> ExportGraphSignature:
        return self._graph_signature

    @property
    def state_dict(self) -> dict:
        return self._state_dict

    @property
    def constants(self) -> dict:
        return self._constants

    @property
    def tensor_constants(self) -> dict:
        """The tensor constants lifted into the graph's inputs (PyTorch's older name)."""
        from ember import Tensor

        return {k: v for k, v in self._constants.items() if isinstance(v, Tensor)}

    @property
    def range_constraints(self) -> dict:
        return self._range_constraints

    @property
    def module_call_graph(self) -> list[ModuleCallEntry]:
        return self._module_call_graph

    @property
    def example_inputs(self):
        return self._example_inputs

    @property
    def call_spec(self):
        """``CallSpec(in_spec, out_spec)``: the pytree specs of the inputs and outputs."""
        sig = self._module_call_graph[0].signature
        return CallSpec(sig.in_spec, sig.out_spec)

    @property
    def verifiers(self) -> list:
        """The verifier classes of the program's dialect (``TrainingIRVerifier`` for ``export``,
        ``Verifier`` after ``run_decompositions()``), as PyTorch's."""
        return self._verifiers

    @property
    def verifier(self):
        return self._verifiers[0]

    @property
    def dialect(self) -> str:
        return self._verifiers[0].dialect

    def parameters(self):
        for _, p in self.named_parameters():
            yield p

    def named_parameters(self):
        for name in self._graph_signature.parameters:
            yield name, self._state_dict[name]

    def buffers(self):
        for _, b in self.named_buffers():
            yield b

    def named_buffers(self):
        non_persistent = set(self._graph_signature.non_persistent_buffers)
        for name in self._graph_signature.buffers:
            yield name, (self._constants[name] if name in non_persistent else self._state_dict[name])

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Unable to call ExportedProgram directly. You should use `exported_program.module()` "
                           "instead.")

    def __str__(self) -> str:
        # PyTorch's layout: the graph module as a class with annotated shapes, then the signature.
        code = self._graph_module.print_readable(print_output=False).replace("\n", "\n    ")
        signature = str(self._graph_signature).replace("\n", "\n    ")
        ranges = {k: v for k, v in self._range_constraints.items()}
        return (f"ExportedProgram:\n    {code}\nGraph signature: {signature}\n"
                f"Range constraints: {ranges}\n")

    __repr__ = __str__

    # ------------------------------------------------------------------ running
    def _lifted_values(self) -> list:
        """The values of the graph's non-user inputs, in signature order."""
        out = []
        for spec in self._graph_signature.input_specs:
            if spec.kind is InputKind.PARAMETER:
                out.append(self._state_dict[spec.target])
            elif spec.kind is InputKind.BUFFER:
                src = self._state_dict if spec.persistent else self._constants
                out.append(src[spec.target])
            elif spec.kind in (InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
                out.append(self._constants[spec.target])
        return out

    def user_input_checks(self) -> list:
        """(name, shape, dtype) per user input placeholder (None for a non-tensor input)."""
        placeholders = {n.name: n for n in self.graph.nodes if n.op == "placeholder"}
        specs = []
        for spec in self._graph_signature.input_specs:
            if spec.kind is not InputKind.USER_INPUT:
                continue
            if not isinstance(spec.arg, TensorArgument):
                specs.append(None)
                continue
            shape, dtype = node_shape_dtype(placeholders[spec.arg.name])
            specs.append((spec.arg.name, shape, dtype) if shape is not None else None)
        return specs

    def user_constant_inputs(self) -> list:
        """Per user input, the exported value of a non-tensor input (a constant), else a marker."""
        out = []
        for spec in self._graph_signature.input_specs:
            if spec.kind is InputKind.USER_INPUT:
                out.append((spec.arg.name, spec.arg.value) if isinstance(spec.arg, ConstantArgument) else _TENSOR)
        return out

    def module(self) -> nn.Module:
        """A module computing this program: weights as attributes, inputs checked per call."""
        return UnliftedModule(self)

    def run_decompositions(self, decomp_table: dict | None = None, decompose_custom_triton_ops: bool = False):
        """A copy lowered to the core op set with compile's decomposition table, or with
        ``decomp_table`` (``default_decompositions()`` less the rows of ops to keep; ``{}`` keeps
        every op, as in PyTorch)."""
        from ._decompose import run_decompositions

        if decomp_table is None:
            return run_decompositions(self, None)
        if not hasattr(decomp_table, "items"):
            decomp_table = dict(decomp_table)  # PyTorch's TypeError for a table that is no mapping
        return run_decompositions(self, decomp_table, keep_composites=True)

    def validate(self) -> None:
        from ._verify import verify_program

        verify_program(self)


def node_shape_dtype(node) -> tuple[tuple | None, Any]:
    """Shape (ints / sympy exprs) and dtype of a tensor node, from meta["val"] or saved metadata."""
    val = node.meta.get("val")
    if val is not None and hasattr(val, "shape") and hasattr(val, "dtype"):
        shape = node.meta.get("sym_shape", val.shape)
        return tuple(as_expr(s) for s in shape), val.dtype
    tm = node.meta.get("tensor_meta")
    if tm is not None:
        return tuple(as_expr(s) for s in tm.shape), tm.dtype
    return None, None


def _set_nested(module: nn.Module, target: str, value, kind: str, persistent: bool = True) -> None:
    """Registers ``value`` under a dotted name, creating empty submodules on the way."""
    *path, leaf = target.split(".")
    owner = module
    for part in path:
        child = owner._modules.get(part) if hasattr(owner, "_modules") else None
        if child is None:
            child = nn.Module()
            owner.add_module(part, child)
        owner = child
    if kind == "parameter":
        param = value if isinstance(value, nn.Parameter) else nn.Parameter(value, requires_grad=value.requires_grad)
        owner.register_parameter(leaf, param)
    elif kind == "buffer":
        owner.register_buffer(leaf, value, persistent=persistent)
    else:
        setattr(owner, leaf, value)


def _get_nested(module: nn.Module, target: str):
    obj = module
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _input_path(key) -> str:
    """A flat input's place in ``(args, kwargs)`` as PyTorch's ``get_keystr`` writes it:
    ``*args[0][1]``, or ``'x'`` for a keyword argument."""
    from ember.utils._pytree import keystr

    if key[0].idx == 0:
        return f"*args{keystr(key[1:])}"
    return f"{str(key[1])[1:-1]}{keystr(key[2:])}"


class _ProgramModule(nn.Module):
    """A module running an exported program's graph with its state held as module attributes: the
    behaviour ``ep.module()`` and ``unflatten(ep)`` share."""

    def __init__(self, program: ExportedProgram):
        nn.Module.__init__(self)  # (not GraphModule's, which UnliftedModule also derives from)
        object.__setattr__(self, "_program", program)
        sig = program.graph_signature
        for spec in sig.input_specs:
            if spec.kind is InputKind.PARAMETER:
                _set_nested(self, spec.target, program.state_dict[spec.target], "parameter")
            elif spec.kind is InputKind.BUFFER:
                src = program.state_dict if spec.persistent else program.constants
                _set_nested(self, spec.target, src[spec.target], "buffer", spec.persistent)
            elif spec.kind in (InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
                _set_nested(self, spec.target, program.constants[spec.target], "constant")
        # A plain attribute, not a submodule: named_children()/modules() list only the exported
        # module's own tree, as PyTorch's ep.module() and unflatten() do.
        object.__setattr__(self, "graph_module", program.graph_module)
        self._checks = program.user_input_checks()
        self._in_spec, self._out_spec = program.call_spec
        # The graph this module runs: the program's, unlifted (parameters and buffers are get_attr
        # nodes, buffer updates copy_ calls, the user inputs its only placeholders), as PyTorch's
        # ep.module() has it: an Interpreter or ShapeProp runs it on the user's inputs, and a pass
        # that edits it takes effect at recompile().
        for node in program.graph.nodes:
            if node.op == "get_attr" and not _has_nested(self, node.target):
                object.__setattr__(self, node.target, _get_nested(program.graph_module, node.target))
        graph = _unlifted_graph(program)
        graph.set_codegen(pytree_codegen(program))
        object.__setattr__(self, "_graph", graph)
        self.recompile()

    @property
    def graph(self):
        return self._graph

    @graph.setter
    def graph(self, graph) -> None:
        object.__setattr__(self, "_graph", graph)
        self.recompile()

    # Copies keep the program and the class (GraphModule's would rebuild a plain GraphModule).
    def __deepcopy__(self, memo: dict):
        result = object.__new__(type(self))
        memo[id(self)] = result
        for key, value in self.__dict__.items():
            object.__setattr__(result, key, copy.deepcopy(value, memo))
        return result

    def __copy__(self):
        result = object.__new__(type(self))
        result.__dict__.update(self.__dict__)
        return result

    def __reduce__(self):
        return _rebuild_program_module, (self._program, self._unflattened)

    _unflattened = False

    # PyTorch's ep.module() refuses mode switches: the graph was traced in one mode (dropout and
    # batch norm are baked in); ``torch.ao.quantization.move_exported_model_to_eval`` rewrites it.
    def train(self, mode: bool = True):
        raise NotImplementedError("Calling train() is not supported yet.")

    def eval(self):
        raise NotImplementedError("Calling eval() is not supported yet.")

    @property
    def code(self) -> str:
        return self._code

    def recompile(self):
        """Regenerates ``code`` and the function ``forward`` runs after a pass edited ``self.graph``
        (GraphModule's method)."""
        from ember.fx.graph_module import _forward_from_src

        python_code = self._graph.python_code(root_module="self")
        for name, value in self._graph._codegen.module_attributes().items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_code", python_code.src)
        object.__setattr__(self, "_graph_fn", _forward_from_src(python_code.src, python_code.globals))
        return python_code

    def print_readable(self, print_output: bool = True, **kwargs) -> str:
        from ember import fx

        return fx.GraphModule(self, self._graph, "GraphModule").print_readable(print_output, **kwargs)

    def forward(self, *args, **kwargs):
        program = self._program
        flat, spec = pytree.tree_flatten((args, kwargs))
        if self._in_spec is not None and spec != self._in_spec:
            flat = _reorder_kwargs(args, kwargs, self._in_spec, spec)
        constants = program.user_constant_inputs()
        tensor_values = []
        for marker, value in zip(constants, flat):
            if marker is _TENSOR:
                tensor_values.append(value)
            elif value != marker[1]:
                raise AssertionError(f"Guard failed: {marker[0]} == {marker[1]!r} (the program was exported with "
                                     f"this value; got {value!r})")
        checks = [c for c, marker in zip(self._checks, constants) if marker is _TENSOR]
        paths = None
        if getattr(self, "_unflattened", False):  # PyTorch's unflatten checks its inputs with its own texts
            from ember.utils._pytree import tree_flatten_with_path

            leaves = tree_flatten_with_path((args, kwargs))[0]
            paths = [_input_path(key) for (key, _), marker in zip(leaves, constants) if marker is _TENSOR]
        check_inputs(checks, tensor_values, program.range_constraints, program._runtime_guards, paths)
        # The graph's code takes the call's structure, in the exported order (the code flattens it).
        codegen = self._graph._codegen
        if isinstance(codegen, PyTreeCodeGen) and codegen.pytree_info.in_spec is not None:
            call_args, call_kwargs = pytree.tree_unflatten(flat, codegen.pytree_info.in_spec)
            return self._graph_fn(self, *call_args, *call_kwargs.values())
        outputs = self._graph_fn(self, *flat)
        return self._graph.process_outputs(outputs)


class UnliftedModule(_ProgramModule, GraphModule):
    """``ExportedProgram.module()``: a GraphModule, as PyTorch's (passes and ``isinstance`` checks
    take it as one), whose graph is the program's, unlifted."""

    def __init__(self, program: ExportedProgram):
        super().__init__(program)
        self.__class__.__name__ = "GraphModule"  # its own class (GraphModule.__new__), named as PyTorch's
        self.meta = {}


def _rebuild_program_module(program: ExportedProgram, unflattened: bool):
    if unflattened:
        from ._unflatten import unflatten

        return unflatten(program)
    return program.module()


def assign_state(target, value) -> None:
    """A buffer (or input) update of an unlifted graph: ``target.copy_(value)`` outside autograd."""
    with ember.no_grad():
        target.copy_(value)


assign_state.__module__ = "ember.export"


def _mark_side_effect() -> None:
    from ember.fx.node import has_side_effect

    has_side_effect(assign_state)  # eliminate_dead_code() keeps the buffer updates


_mark_side_effect()


def _unlifted_graph(program: ExportedProgram):
    """``program``'s graph with its lifted state as ``get_attr`` nodes (see ``UnliftedModule``)."""
    from ember import fx

    old = program.graph
    sig = program.graph_signature
    graph = fx.Graph()
    env: dict = {}
    user_inputs: dict = {}
    placeholders = iter([n for n in old.nodes if n.op == "placeholder"])
    for spec in sig.input_specs:
        node = next(placeholders)
        if spec.kind is InputKind.USER_INPUT:
            new = graph.placeholder(node.name)
            if isinstance(spec.arg, TensorArgument):
                user_inputs[spec.arg.name] = new
        else:
            new = graph.get_attr(spec.target)
        new.meta = dict(node.meta)
        env[node] = new
    output = None
    for node in old.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            output = node
            break
        env[node] = graph.node_copy(node, lambda n: env[n])
    results = output.args[0] if output is not None else ()
    results = list(results) if isinstance(results, (tuple, list)) else [results]
    user = []
    for spec, value in zip(sig.output_specs, results):
        value = env.get(value, value) if isinstance(value, fx.Node) else value
        if spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION):
            graph.call_function(assign_state, (graph.get_attr(spec.target), value))
        elif spec.kind is OutputKind.USER_INPUT_MUTATION:
            graph.call_function(assign_state, (user_inputs[spec.target], value))
        elif spec.kind in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT):
            user.append(value)
    graph.output(tuple(user))
    return graph


def _has_nested(module, target: str) -> bool:
    try:
        _get_nested(module, target)
        return True
    except AttributeError:
        return False


def _reorder_kwargs(args, kwargs, want: pytree.TreeSpec, got: pytree.TreeSpec) -> list:
    """Accepts kwargs given in another order (or positionally) when the leaves still line up."""
    if want.type is tuple and want.num_children == 2:
        want_kw = want.child(1)
        if isinstance(kwargs, dict) and set(kwargs) == set(want_kw.context or []):
            ordered = {k: kwargs[k] for k in want_kw.context}
            flat, spec = pytree.tree_flatten((args, ordered))
            if spec == want:
                return flat
        if isinstance(kwargs, dict) and set(kwargs) != set(want_kw.context or []):
            raise ValueError(f"Ran into a kwarg keyword mismatch: Got the following keywords {list(kwargs)} but "
                             f"expected {list(want_kw.context or [])}")
    raise ValueError(f"Trying to flatten user inputs with exported input tree spec: \n{want}\nbut actually got "
                     f"inputs with tree spec of: \n{got}.\nPlease check that the inputs have the same number and "
                     "type of args and kwargs as the ones you used when tracing.")


def range_constraints_text(ranges: dict) -> dict:
    return {str(k): ValueRange(v.lower, v.upper) for k, v in ranges.items()}
