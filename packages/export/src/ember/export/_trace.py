"""``export()``: capture a module's forward as one functional graph of ember ops.

Steps:

1. flatten ``(args, kwargs)`` and read ``dynamic_shapes`` against them;
2. trace with compile's ``make_fx`` a flat function of ``[parameters, buffers, tensor
   inputs]`` that runs the module through ``functional_call`` (one whole graph: a data read
   such as ``if x.sum() > 0`` is an error naming the line);
   with the dynamic dims' sizes symbolic (``_symbolic``: SymInts whose comparisons become
   guards, read as range constraints or reported as constraint violations); sizes computed
   from them become ``sym_size`` arithmetic in the graph;
4. lift tensor constants to inputs, clone written inputs and return their final values
   (``_functionalize``), name placeholders as PyTorch does (``p_fc_weight``,
   ``b_bn_running_mean``, ``x``), and build the signature.
"""

from __future__ import annotations

import builtins
import functools
import keyword
import operator
import threading
import time

import ember
from ember import nn

from . import _pytree as pytree
from ._dims import Dim
from ._dynamic_shapes import input_names, normalize
from ._errors import GuardOnDataDependentSymNode, UserError, UserErrorType
from ._functionalize import lift_input_mutations
from ._program import ExportedProgram, ModuleCallEntry, ModuleCallSignature
from ._signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)

LAST_EXPORT_SECONDS = [0.0]


def _is_tensor(x) -> bool:
    return isinstance(x, ember.Tensor)


def _alias(t):
    """Another tensor object over ``t``'s data that requires grad as ``t`` does (the tracer tells
    inputs apart by identity; the graph's values keep their requires_grad)."""
    return t.detach().requires_grad_(t.requires_grad)


def _tensor_attribute_paths(mod, state_names: set) -> dict:
    """id(tensor) -> the dotted path of a plain tensor attribute of ``mod`` or its submodules (not a
    parameter or buffer), the first path for a tensor held twice."""
    paths: dict = {}
    for prefix, module in mod.named_modules(remove_duplicate=False):
        for name, value in vars(module).items():
            path = f"{prefix}.{name}" if prefix else name
            if _is_tensor(value) and path not in state_names:
                paths.setdefault(id(value), path)
    return paths


def _state(mod: nn.Module):
    """(parameter names, buffer names, persistent flags) with tied tensors listed once."""
    params = [name for name, _ in mod.named_parameters(remove_duplicate=False)]
    buffers, persistent = [], {}
    for name, _ in mod.named_buffers(remove_duplicate=False):
        owner_name, _, leaf = name.rpartition(".")
        owner = mod.get_submodule(owner_name) if owner_name else mod
        buffers.append(name)
        persistent[name] = leaf not in getattr(owner, "_non_persistent_buffers_set", set())
    return params, buffers, persistent


class _Capture:
    """The flat function make_fx traces, and what the trace learned about outputs."""

    def __init__(self, mod, state_names, in_spec, leaves):
        self.mod = mod
        self.state_names = state_names
        self.in_spec = in_spec
        self.leaves = leaves
        self.tensor_positions = [i for i, x in enumerate(leaves) if _is_tensor(x)]
        self.out_spec = None
        self.decompositions = None
        self.keep_composites = False  # a user's run_decompositions table: composites it lacks stay whole
        self.preserve: tuple = ()  # preserve_module_call_signature's fqns
        self.calls: dict = {}  # fqn -> (flat inputs, in_spec, flat outputs, out_spec) of its first call
        self.extra_outputs = 0  # the calls' tensors, returned after the program's own outputs
        self.calls_fn = None  # or gives ``calls`` after the forward (run_decompositions' re-export)

    def __call__(self, *flat):
        from ember.func import functional_call

        n = len(self.state_names)
        state = dict(zip(self.state_names, flat[:n]))
        leaves = list(self.leaves)
        for pos, t in zip(self.tensor_positions, flat[n:]):
            leaves[pos] = t
        args, kwargs = pytree.tree_unflatten(leaves, self.in_spec)
        self.calls = {}
        handles = [self._note_calls(fqn) for fqn in self.preserve] if self.calls_fn is None else []
        try:
            out = functional_call(self.mod, state, tuple(args), kwargs, tie_weights=False)
        finally:
            for handle in handles:
                handle.remove()
        if self.calls_fn is not None:  # run_decompositions: the calls the old program recorded
            self.calls = self.calls_fn()
            self.preserve = tuple(self.calls)
        out_flat, self.out_spec = pytree.tree_flatten(out)
        # The preserved calls' tensors leave the trace as extra outputs, so the graph names the
        # value each one is (export takes them off the output again).
        extra = [x for fqn in self.preserve if fqn in self.calls
                 for x in (*self.calls[fqn][0], *self.calls[fqn][2]) if _is_tensor(x)]
        self.extra_outputs = len(extra)
        return (*out_flat, *extra)

    def _note_calls(self, fqn: str):
        """A hook noting the first call of the submodule ``fqn``: its flat arguments and results and
        their structures (``ModuleCallSignature``)."""
        try:
            sub = self.mod.get_submodule(fqn)
        except AttributeError:
            raise AttributeError(f"{type(self.mod).__name__!r} object has no attribute {fqn!r}") from None

        def hook(module, args, kwargs, output):
            if fqn not in self.calls:
                in_flat, in_spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
                out_flat, out_spec = pytree.tree_flatten(output)
                self.calls[fqn] = (in_flat, in_spec, out_flat, out_spec)

        return sub.register_forward_hook(hook, with_kwargs=True)


def trace_flat(capture: _Capture, state_values: list, leaves: list):
    from ember.compiler import make_fx

    tensors = [leaves[i] for i in capture.tensor_positions]
    # Without a decomposition table the trace keeps PyTorch's composite ops whole (pre-dispatch,
    # as torch.export's graph); run_decompositions() traces again with a table, which decomposes them.
    from ember.compiler._module_stack import track_module_calls

    with track_module_calls(capture.mod):  # each node's meta["nn_module_stack"]
        gm = make_fx(capture, decomposition_table=capture.decompositions, tracing_mode="fake",
                     pre_dispatch=capture.decompositions is None or capture.keep_composites)(*state_values, *tensors)
    if capture.decompositions:
        from ember._higher_order_ops._subgraph import retrace

        from ._subgraphs import subgraph_nodes

        for node, sub in subgraph_nodes(gm):  # cond / while_loop subgraphs are decomposed too
            setattr(gm, node.target, retrace(sub, capture.decompositions))
    return gm


def _export(mod, args, kwargs=None, *, dynamic_shapes=None, strict: bool = False,
           preserve_module_call_signature: tuple = (), _decomposition_table: dict | None = None,
           _keep_composites: bool = False, _preserved_calls=None) -> ExportedProgram:
    """Traces ``mod(*args, **kwargs)`` into an :class:`ExportedProgram` (PyTorch's ``torch.export.export``).

    Args:
        mod: an ``ember.nn.Module``.
        args: a tuple of example positional inputs.
        kwargs: example keyword inputs.
        dynamic_shapes: per input, which dims may vary (``Dim``s); a dict keyed by argument
            name or a tuple in argument order.
        strict: accepted for compatibility; capture is always whole-graph.

    Example:
        >>> import ember
        >>> from ember.export import export, Dim
        >>> ep = export(ember.nn.Linear(4, 2), (ember.randn(3, 4),),
        ...             dynamic_shapes={"input": {0: Dim("batch")}})
        >>> ep.module()(ember.randn(5, 4)).shape
        ember.Size([5, 2])
    """
    start = time.perf_counter()
    if not isinstance(mod, nn.Module):
        raise ValueError(f"Expected `mod` to be an instance of `torch.nn.Module`, got {type(mod)}.")
    if not isinstance(args, tuple):
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"Expecting `args` to be a tuple of example positional inputs, got {type(args)}")
    kwargs = dict(kwargs or {})
    leaves, in_spec = pytree.tree_flatten((args, kwargs))
    _check_input_types(leaves, strict)
    seen = set()
    for i, x in enumerate(leaves):
        if _is_tensor(x):
            if id(x) in seen:
                # One tensor passed as two inputs (``(x, x)``, q = k = v): two inputs, as in PyTorch;
                # the tracer tells inputs apart by identity, so the second gets an alias of the data.
                leaves[i] = x = _alias(x)
            seen.add(id(x))
    dim_specs = normalize(mod, args, kwargs, dynamic_shapes)
    params, buffers, persistent = _state(mod)
    state_names = params + buffers
    named = dict(mod.named_parameters(remove_duplicate=False))
    named.update(dict(mod.named_buffers(remove_duplicate=False)))
    # A tied tensor (GPT's embedding and head) is one input per name, as in PyTorch; the tracer
    # tells inputs apart by identity, so later names get an alias of the same data.
    state_values, seen_ids = [], set()
    for n in state_names:
        value = named[n]
        if id(value) in seen_ids:
            value = _alias(value)
        seen_ids.add(id(value))
        state_values.append(value)
    capture = _Capture(mod, state_names, in_spec, leaves)
    capture.preserve = tuple(preserve_module_call_signature or ())
    capture.calls_fn = _preserved_calls
    capture.decompositions = _decomposition_table  # {} too: run_decompositions({}) decomposes composites
    capture.keep_composites = _keep_composites  # ...unless the table is the user's (PyTorch's semantics)
    arg_names = _user_input_names(mod, args, kwargs, leaves)
    gm, roots, narrowed = _trace_symbolic(capture, state_values, leaves, dim_specs, arg_names)
    out_spec = capture.out_spec

    from ._subgraphs import name_subgraphs
    from ._symbolic import apply_symbols, assert_unbacked_ranges, ranges_of, unbacked_ranges

    name_subgraphs(gm)  # private copies first: sizes inside them are rewritten
    tensor_leaves = [i for i, x in enumerate(leaves) if _is_tensor(x)]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    user_ph = placeholders[len(placeholders) - len(tensor_leaves):]
    env = getattr(capture, "shape_env", None)
    builder = apply_symbols(gm, roots, user_ph, dict(zip(tensor_leaves, user_ph)), env)
    ranges, dim_names = ranges_of(roots, narrowed)
    unbacked = unbacked_ranges(gm, env)
    if unbacked:
        assert_unbacked_ranges(gm, builder, unbacked)
        ranges.update(unbacked)

    graph = gm.graph
    # Constants the trace met (tensor attributes, tensors built from Python data) become inputs.
    # A tensor attribute of the module keeps its path as its name (``c``, ``sub.scale``), as in
    # PyTorch; a tensor the program built is ``lifted_tensor_<k>``.
    attribute_paths = _tensor_attribute_paths(mod, set(state_names))
    constants = {}
    const_names = []
    anonymous = 0
    for node in list(graph.find_nodes(op="get_attr")):
        value = getattr(gm, node.target)
        if not _is_tensor(value):
            continue
        target = attribute_paths.get(id(value))
        if target is None or target in constants:
            target = f"lifted_tensor_{anonymous}"
            anonymous += 1
        first_placeholder = next(iter(graph.find_nodes(op="placeholder")), None)
        with graph.inserting_before(first_placeholder or node):
            ph = graph.placeholder(f"c_{target.replace('.', '_').lower()}")
            ph.target = ph.name
        ph.meta.update(node.meta)
        node.replace_all_uses_with(ph)
        graph.erase_node(node)
        constants[target] = value
        const_names.append((ph, target))

    placeholders = [n for n in graph.nodes if n.op == "placeholder" and n not in {p for p, _ in const_names}]
    state_nodes, user_nodes = placeholders[:len(state_names)], placeholders[len(state_names):]
    for node, name in zip(state_nodes, state_names):
        prefix = "p_" if name in params else "b_"
        _rename(node, prefix + name.replace(".", "_").lower())
    tensor_arg_names = [arg_names[i] for i in capture.tensor_positions]
    for node, name in zip(user_nodes, tensor_arg_names):
        _rename(node, name)
    # Placeholders in PyTorch's order: parameters, buffers, constants, then user inputs.
    first_user = user_nodes[0] if user_nodes else None
    for ph, _ in const_names:
        if first_user is not None:
            first_user.prepend(ph)

    kinds = {}
    mutations = lift_input_mutations(graph, kinds)
    out_node = next(n for n in graph.nodes if n.op == "output")
    user_outputs = list(out_node.args[0]) if isinstance(out_node.args[0], (tuple, list)) else [out_node.args[0]]
    if capture.extra_outputs:
        call_values = user_outputs[len(user_outputs) - capture.extra_outputs:]
        user_outputs = user_outputs[:len(user_outputs) - capture.extra_outputs]
    else:
        call_values = []
    input_specs = []
    for node, name in zip(state_nodes, state_names):
        if name in params:
            input_specs.append(InputSpec(InputKind.PARAMETER, TensorArgument(node.name), name))
        else:
            input_specs.append(InputSpec(InputKind.BUFFER, TensorArgument(node.name), name, persistent[name]))
    for ph, target in const_names:
        input_specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(ph.name), target))
    tensor_iter = iter(user_nodes)
    # A number/None/str user input is a placeholder nothing reads, among the user inputs in call
    # order, as in PyTorch's graph (its value is a constant of the program).
    previous = ([p for p, _ in const_names] or state_nodes or [None])[-1]
    for i, leaf in enumerate(leaves):
        if _is_tensor(leaf):
            previous = next(tensor_iter)
            input_specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(previous.name), None))
        else:
            first = next(iter(graph.nodes))
            with (graph.inserting_after(previous) if previous is not None else graph.inserting_before(first)):
                ph = graph.placeholder(arg_names[i])
            _rename(ph, arg_names[i])
            ph.meta["val"] = leaf
            previous = ph
            input_specs.append(InputSpec(InputKind.USER_INPUT, ConstantArgument(ph.name, leaf), None))
    by_name = {s.arg.name: s for s in input_specs if isinstance(s.arg, TensorArgument)}
    output_specs = []
    new_outputs = []
    for ph_name, final in mutations:
        spec = by_name[ph_name]
        if spec.kind is InputKind.BUFFER:
            output_specs.append(OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument(final.name), spec.target))
        elif spec.kind is InputKind.PARAMETER:
            output_specs.append(OutputSpec(OutputKind.PARAMETER_MUTATION, TensorArgument(final.name), spec.target))
        elif spec.kind is InputKind.USER_INPUT:
            output_specs.append(OutputSpec(OutputKind.USER_INPUT_MUTATION, TensorArgument(final.name), ph_name))
        else:
            raise UserError(UserErrorType.INVALID_INPUT, f"the program writes the constant {spec.target} in place")
        new_outputs.append(final)
    for out in user_outputs:
        if hasattr(out, "op"):
            output_specs.append(OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(out.name), None))
        else:
            output_specs.append(OutputSpec(OutputKind.USER_OUTPUT, ConstantArgument("", out), None))
        new_outputs.append(out)
    out_node.args = (tuple(new_outputs),)
    _drop_unread_results(graph)
    _add_tensor_meta(graph)
    graph.lint()
    gm.recompile()

    # Drop the constants make_fx attached to the root; the program holds them.
    for name in list(gm._buffers):
        if name.startswith("_tensor_constant") or name.startswith("_const"):
            del gm._buffers[name]
    state_dict = {}
    for name in params:
        state_dict[name] = named[name]
    for name in buffers:
        if persistent[name]:
            state_dict[name] = named[name]
    for name in buffers:
        if not persistent[name]:
            constants[name] = named[name]
    fqns = [ModuleCallEntry("", ModuleCallSignature([], [], in_spec, out_spec, input_names(mod, args, kwargs)))]
    preserved = _preserved_signatures(capture, call_values)
    fqns += [ModuleCallEntry(name, preserved.get(name)) for name, _ in mod.named_modules(remove_duplicate=False)
             if name]
    sig = ExportGraphSignature(input_specs, output_specs)
    ep = ExportedProgram(gm, gm, sig, state_dict, ranges, fqns, example_inputs=(args, kwargs),
                         constants=constants)
    ep._dim_names = dim_names
    ep._runtime_guards = tuple(getattr(env, "runtime_guards", ()))
    LAST_EXPORT_SECONDS[0] = time.perf_counter() - start
    return ep


_STRICT_METADATA_TYPES = (ember.dtype, ember.device, complex, type(Ellipsis), bytes, ember.layout, ember.memory_format)


def _check_input_types(leaves, strict: bool) -> None:
    """PyTorch's export takes tensors, numbers, strings, None, enums and modules as inputs (pytree leaves);
    any other object is refused before tracing, where ember would otherwise keep it as a constant guarded by
    identity (so the program refused every other instance)."""
    import enum

    for leaf in leaves:
        if _is_tensor(leaf) or leaf is None or isinstance(leaf, (int, float, bool, str, enum.Enum)):
            continue
        if isinstance(leaf, nn.Module) and not strict:
            continue
        if not strict:
            raise ValueError(
                f"Unsupported input type {type(leaf)}. "
                "Export only supports pytree containers of basic types (Tensor, int, float, ...) as input. "
                "To register a custom dataclass, use torch.export.register_dataclass. "
                "To register a custom container type, use torch.utils._pytree.register_pytree_node. "
                "To register a constant input, use torch.utils._pytree.register_constant")
        if isinstance(leaf, _STRICT_METADATA_TYPES):  # PyTorch's strict mode traces them, then fails here
            raise AssertionError(f"Encountered an unsupported object of type {type(leaf)} while writing the "
                                 "metadata for exported program")
        raise UserError(UserErrorType.INVALID_INPUT,
                        f"It looks like one of the inputs with type `{type(leaf)}` is not supported or "
                        "pytree-flattenable. \nExported graphs inputs can only contain tensors, numbers, strings, "
                        "None and enums. \nIf you are using a custom class object, please register a "
                        "pytree_flatten/unflatten function using `torch.utils._pytree.register_pytree_node` or "
                        "`torch.export.register_dataclass`.")


@functools.wraps(_export)
def export(*args, **kwargs) -> ExportedProgram:
    from ember import compiler

    compiler._EXPORTING[0] += 1  # torch.compiler.is_exporting() inside the model's forward
    try:
        ep = _export(*args, **kwargs)
    finally:
        compiler._EXPORTING[0] -= 1
    from ._dynamic_shapes import AdditionalInputs

    dynamic_shapes = kwargs.get("dynamic_shapes")
    if isinstance(dynamic_shapes, AdditionalInputs):
        dynamic_shapes.verify(ep)  # the program takes every example it was inferred from
    return ep

def _preserved_signatures(capture, call_values: list) -> dict:
    """fqn -> ``ModuleCallSignature`` of each preserved submodule's first call: its flat arguments
    and results as the graph values they are (``TensorArgument(name)``; a number or None is a
    ``ConstantArgument``), with the call's pytree specs (PyTorch's ``preserve_module_call_signature``)."""
    values = iter(call_values)
    out = {}
    for fqn in capture.preserve:
        if fqn not in capture.calls:
            continue  # never called: PyTorch records no signature either
        in_flat, in_spec, out_flat, out_spec = capture.calls[fqn]

        def arg(x):
            if _is_tensor(x):
                node = next(values)
                return TensorArgument(node.name) if hasattr(node, "op") else ConstantArgument("", node)
            return ConstantArgument("", x)

        inputs = [arg(x) for x in in_flat]
        outputs = [arg(x) for x in out_flat]
        out[fqn] = ModuleCallSignature(inputs, outputs, in_spec, out_spec)
    return out


def _trace_symbolic(capture, state_values, leaves, dim_specs, arg_names):
    """One symbolic trace (``_symbolic``); again only when an AUTO dim turned out static or
    tied to another dim. Returns (graph module, the dynamic roots, their narrowed ranges)."""
    from ember.compiler.symbolic_shapes import ShapeEnv

    from ._dynamic_shapes import constraint_violation
    from ._roots import dynamic_roots
    from ._symbolic import classify_guards, symbolic_leaves

    roots = []
    for root in dynamic_roots(leaves, dim_specs, arg_names):
        if max(root.lo, 2) >= root.hi:  # a range of one size (or only 0/1): static
            if root.kind == "dynamic" or root.kind == "dim" and root.lo < root.hi:
                raise constraint_violation([root.name], [f"The range of {root.name} allows only one size"],
                                           [f"{root.name} = {root.base}"])
            continue
        roots.append(root)
    for _ in range(len(roots) + 1):
        env = ShapeEnv()
        env.record_guards = True
        _note_direct_guards(env)
        sym_leaves, _symbols = symbolic_leaves(leaves, roots, env)
        from ember.compiler import _unbacked_export

        previous_env = _unbacked_export.EXPORT_ENV[0]
        _unbacked_export.EXPORT_ENV[0] = env  # .item() / nonzero give unbacked symbols
        try:
            from ember.compiler.symbolic_shapes import reading_sizes_guards

            with _math_logs_guard(capture.mod), reading_sizes_guards():
                gm = trace_flat(capture, state_values, sym_leaves)
            _specialize_float_arguments(gm, env)
        except Exception as exc:
            if type(exc).__name__ != "Unsupported":
                raise
            raise GuardOnDataDependentSymNode(
                UserErrorType.DYNAMIC_CONTROL_FLOW,
                f"{exc}\nexport captures one whole graph, so Python may not read tensor data (an `if` or `while` on "
                "a tensor, .item(), .tolist(), print). Write the branch with ember.export.cond(pred, true_fn, "
                "false_fn, operands), or move the decision to a Python value known before the call.",
                case_name="cond_predicate") from None
        finally:
            env.record_guards = False
            _unbacked_export.EXPORT_ENV[0] = previous_env
        capture.shape_env = env
        retrace, narrowed = classify_guards(env, roots)
        if not retrace:
            return gm, roots, narrowed
        kept = []
        for root in roots:
            change = retrace.get(root.key)
            if change is None:
                kept.append(root)
            elif change[0] == "derived":  # an AUTO dim equal to another dim plus an offset
                other, offset = change[1], change[2]
                other.uses += [(i, d, coeff, coeff * offset + off) for i, d, coeff, off in root.uses]
        roots = kept
    raise AssertionError("export: the symbolic trace did not settle")  # pragma: no cover


def _drop_unread_results(graph) -> None:
    """Erases the ``getitem`` of every result of a multi-output op that nothing reads (the graph
    builder takes one of each): cross_entropy's saved log-sum-exp, an unread smoothing term,
    layer_norm's statistics. torch.export's graphs hold no getitem of an unread result either."""
    for node in list(graph.nodes):
        if (node.op == "call_function" and node.target is operator.getitem and not node.users
                and getattr(node.args[0], "op", None) == "call_function"):
            graph.erase_node(node)


_MATH_LOGS = ("log", "log2", "log10", "log1p")
_LOGS_LOCK = threading.Lock()
_LOGS_TRACING = threading.local()  # .depth: this thread's nesting of symbolic traces
def _note_direct_guards(env) -> None:
    """Marks in ``env.direct_guards`` each guard that the user's own code decided (``if
    x.shape[0] != 5``), as against one an ember kernel decided (a broadcast's ``b != 3``), which
    PyTorch's size-oblivious kernels do not record."""
    import sys

    from ember.compiler import symbolic_shapes
    from ember.compiler._user_frames import is_user_file

    add = env.add_guard
    sym_file = symbolic_shapes.__file__
    env.direct_guards = set()

    def add_guard(expr) -> None:
        count = len(env.guards)
        add(expr)
        if len(env.guards) > count:
            f = sys._getframe(1)
            while f is not None and f.f_code.co_filename == sym_file:
                f = f.f_back
            if f is not None and is_user_file(f.f_code.co_filename):
                env.direct_guards.add(env.guards[-1])

    env.add_guard = add_guard


_LOGS_INSTALLED: dict = {}  # {"count": active guards, "wrappers": {original: wrapper}, "patched": [...]}


def _logs_wrapper(fn):
    """``fn`` (math.log & co.) that, on a thread inside a symbolic trace, specializes a symbolic size
    it is given (as ``math.sqrt(n)`` does through ``__float__``: PyTorch's guard_float); on any other
    thread it is ``fn`` plus one call."""

    @functools.wraps(fn)
    def read_size(x, *rest):
        if getattr(_LOGS_TRACING, "depth", 0):
            from ember.compiler.symbolic_shapes import SymInt, _specialize

            for v in (x, *rest):  # (int.__int__: the value, no second guard)
                if isinstance(v, SymInt) and v.shape_env is not None and v.shape_env.record_guards:
                    _specialize(v.node, v.shape_env)
            return fn(int.__int__(x) if isinstance(x, SymInt) else x,
                      *(int.__int__(r) if isinstance(r, SymInt) else r for r in rest))
        return fn(x, *rest)

    read_size._ember_math_log = fn
    return read_size


class _math_logs_guard:
    """``math.log``/``log2``/``log10``/``log1p`` read an int's value without ``__float__`` (CPython's
    own int path), so while a symbolic trace runs they are replaced by wrappers that specialize a
    symbolic size first, in ``math`` and in the globals of the traced modules' source files (a
    ``from math import log2`` taken before the export). The wrappers act only on the tracing thread
    (``_LOGS_TRACING``): another thread calling them meanwhile gets the plain function; they are
    installed by the first active guard and removed by the last one (under ``_LOGS_LOCK``)."""

    def __init__(self, mod=None):
        self.namespaces = []
        if isinstance(mod, nn.Module):
            import sys

            seen = set()
            for sub in mod.modules():
                name = type(sub).__module__
                module = sys.modules.get(name)
                if module is not None and name not in seen and not name.startswith("ember."):
                    seen.add(name)
                    self.namespaces.append(module.__dict__)
            forward = getattr(type(mod), "forward", None)
            if getattr(forward, "__globals__", None) is not None and all(
                    forward.__globals__ is not ns for ns in self.namespaces):
                self.namespaces.append(forward.__globals__)

    def __enter__(self):
        import math

        with _LOGS_LOCK:
            if not _LOGS_INSTALLED.get("count"):
                originals = {n: getattr(math, n) for n in _MATH_LOGS}
                _LOGS_INSTALLED.update(count=0, originals=originals,
                                       wrappers={fn: _logs_wrapper(fn) for fn in originals.values()}, patched=[])
                for n, fn in originals.items():
                    setattr(math, n, _LOGS_INSTALLED["wrappers"][fn])
            _LOGS_INSTALLED["count"] += 1
            wrappers = _LOGS_INSTALLED["wrappers"]
            for ns in self.namespaces:  # this export's modules: bound names of the original functions
                for key, value in list(ns.items()):
                    wrapper = wrappers.get(value) if callable(value) and type(value).__name__ == \
                        "builtin_function_or_method" else None
                    if wrapper is not None:
                        ns[key] = wrapper
                        _LOGS_INSTALLED["patched"].append((ns, key, value, wrapper))
        _LOGS_TRACING.depth = getattr(_LOGS_TRACING, "depth", 0) + 1
        return self

    def __exit__(self, *exc):
        import math

        _LOGS_TRACING.depth -= 1
        with _LOGS_LOCK:
            _LOGS_INSTALLED["count"] -= 1
            if _LOGS_INSTALLED["count"]:
                return
            for n, fn in _LOGS_INSTALLED["originals"].items():
                setattr(math, n, fn)
            for ns, key, value, wrapper in reversed(_LOGS_INSTALLED["patched"]):
                if ns.get(key) is wrapper:  # (unless the program rebound the name meanwhile)
                    ns[key] = value
            _LOGS_INSTALLED.clear()


def _specialize_float_arguments(gm, env) -> None:
    """A symbolic float that reached an op as an argument: a ratio of sizes (``n / 2``) stays
    symbolic (the graph computes it, ``_symbolic.apply_symbols``), and so do powers, sums and
    products of sizes and numbers (``n ** 0.5``, as PyTorch's graph computes them); another one is
    read as its number there, and the sizes it came from specialize."""
    from ember.compiler.symbolic_shapes import SymFloat, _specialize

    from ._sym import float_expressible

    def visit(v):
        if isinstance(v, SymFloat) and v.node is not None and not float_expressible(v.node):
            _specialize(v.node, env)
        elif isinstance(v, (list, tuple)):
            for x in v:
                visit(x)
        elif isinstance(v, dict):
            for x in v.values():
                visit(x)

    for node in gm.graph.nodes:
        visit(node.args)
        visit(node.kwargs)


def _add_tensor_meta(graph) -> None:
    """``meta["tensor_meta"]`` (torch.fx's TensorMetadata) beside ``meta["val"]`` on every tensor
    node, as PyTorch's exported graphs carry it for passes that read it."""
    from ember.fx.passes.shape_prop import _extract_tensor_metadata

    for node in graph.nodes:
        val = node.meta.get("val")
        if _is_tensor(val):
            node.meta["tensor_meta"] = _extract_tensor_metadata(val)


def _rename(node, name: str) -> None:
    """Renames a placeholder; its target (the generated forward's parameter) follows. A
    parameter may take a builtin's name (``input``), as in PyTorch's exported graphs: inside
    the generated forward it only shadows the builtin."""
    namespace = node.graph._graph_namespace
    if name in builtins.__dict__ and name not in namespace._used_names and not keyword.iskeyword(name):
        node.name = name
        namespace._rename_object(node, name)
    else:
        node._rename(name)
    node.target = node.name


def _user_input_names(mod, args, kwargs, leaves) -> list[str]:
    """A placeholder name per flattened input leaf: the argument name, with an index when nested."""
    import re

    names = input_names(mod, args, kwargs)
    out = []
    for name, value in zip(names, list(args) + list(kwargs.values())):
        sub, _ = pytree.tree_flatten(value)
        if len(sub) == 1 and sub[0] is value:
            out.append(name)
            continue
        # PyTorch names a nested leaf by its path: inputs["pair"][1] -> inputs_pair_1
        for path in pytree.leaf_key_paths(value):
            parts = [str(_key_text(key)) for key in path]
            out.append("_".join([name, *(re.sub(r"\W", "_", p) for p in parts)]))
    return out


def _key_text(key):
    """A key path entry as a name part: the index, dict key or attribute name."""
    for field in ("idx", "key", "name"):
        if hasattr(key, field):
            return getattr(key, field)
    return key


__all__ = ["Dim", "export"]
