"""Ahead-of-time compilation of an exported program (PyTorch's AOTInductor, on ember's C++ backend).

``aoti_compile_and_package(ep)`` lowers the program's graph with compile's Inductor (the same
lowering, fusion and C++ kernels ``ember.compile`` uses) keeping the exported dynamic dims
symbolic (``_aoti_lower``), and builds a library with a C interface (``ember_aoti.h``,
``_aoti_c``): the generated kernels, the extern ops in C, and ``ember_aoti_run`` calling them
in order with the sizes read from the inputs; the weights go to ``weights.bin`` beside it. The
``.pt2`` package is a zip of the library, its header, its weights, its C source and a metadata
JSON (``_aoti_runtime.py`` writes and loads it; ``_aoti_cmodel.py`` runs it through ctypes).

Graphs the C path cannot generate (an extern op with no C version, say an LSTM layer or a
``cond``; the metadata's ``fallback_reason`` names it) are built as before: ONE shared library
holding the kernels, ``ember_aoti_plan`` (the call plan as JSON: buffers, kernels, ember ops
by name for what is not lowered) and ``ember_aoti_weights`` (safetensors), embedded with the
assembler's ``.incbin``, run by a fixed Python interpreter and specialized to the example
shapes. Loading either evaluates nothing from the file. ``-march=native`` ties the library to
the CPU family that built it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

import sympy

import ember
from ember._src import dispatch
from ember._src.dispatch import Op
from ember._src.tensor import Tensor

from . import _pytree as pytree
from ._graph_json import SerializationError, graph_to_json, target_name
from ._signature import InputKind, OutputKind

PLAN_VERSION = 1


class AOTICompileError(RuntimeError):
    """The program cannot be compiled ahead of time (the message says which part)."""


def _encode(obj, gm_counter: list):
    from ember.compiler.inductor._graph import StridedView
    from ember.compiler.inductor._ir import Buffer, TensorValue

    if isinstance(obj, Buffer):
        return {"buf": obj.name}
    if isinstance(obj, TensorValue):
        if obj.buffer is None:
            raise AOTICompileError("an extern argument was never stored in a buffer")
        return {"buf": obj.buffer.name}
    if isinstance(obj, StridedView):
        return {"view": obj.buffer.name, "shape": [_int(s) for s in obj.shape],
                "strides": [_int(s) for s in obj.strides], "offset": _int(obj.offset)}
    if isinstance(obj, sympy.Basic):
        return _int(obj)
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if obj == obj and abs(obj) != float("inf") else {"float": repr(obj)}
    if isinstance(obj, list):
        return [_encode(o, gm_counter) for o in obj]
    if isinstance(obj, tuple):
        return {"tuple": [_encode(o, gm_counter) for o in obj]}
    if isinstance(obj, ember.dtype):
        return {"dtype": str(obj).split(".")[-1]}
    if isinstance(obj, ember.device):
        return {"device": str(obj)}
    if hasattr(obj, "graph") and hasattr(obj.graph, "nodes"):  # a cond / while_loop subgraph
        return {"graph": graph_to_json(obj.graph, obj)[0]}
    for name in ("contiguous_format", "channels_last", "preserve_format"):
        if getattr(ember, name, object()) is obj:
            return {"enum": name}
    raise AOTICompileError(f"cannot write the extern argument {obj!r} ({type(obj).__name__}) into the plan")


def _int(expr) -> int:
    expr = sympy.sympify(expr)
    if expr.free_symbols:
        raise AOTICompileError(f"the size {expr} is symbolic; AOT packages are specialized to the example shapes")
    return int(expr)


def _without_constant_inputs(gm):
    """``gm`` less the placeholders of number/None user inputs (constants of the program, read by
    no node): the library takes the tensor inputs only."""
    unused = [n for n in gm.graph.nodes if n.op == "placeholder" and not n.users
              and not isinstance(n.meta.get("val"), Tensor)]
    if not unused:
        return gm
    import copy

    gm = copy.deepcopy(gm)
    for node in [n for n in gm.graph.nodes if n.op == "placeholder" and not n.users
                 and not isinstance(n.meta.get("val"), Tensor)]:
        gm.graph.erase_node(node)
    gm.recompile()
    return gm


def _lower(gm, example_inputs, lowering=None):
    from ember.compiler.inductor._compile_fx import _all_buffers
    from ember.compiler.inductor._graph import GraphLowering
    from ember.compiler.inductor._ir import TensorValue
    from ember.compiler.inductor._scheduler import make_index_vars, schedule

    gm = _without_constant_inputs(gm)
    saved, dispatch._MODES.stack = dispatch._MODES.stack, []
    try:
        graph = (lowering or GraphLowering)(gm, example_inputs)
        graph.run()
        outputs = [v for v in graph.outputs if isinstance(v, TensorValue)]
        graph.output_names = {v.buffer.name for v in outputs}
        ndim = max([len(getattr(i, "full_shape", getattr(i, "shape", ()))) for i in graph.items] + [0])
        plan = schedule(graph.items, graph.output_names, make_index_vars(ndim))
        graph.all_buffers = _all_buffers(graph, plan)
        return graph, plan
    finally:
        dispatch._MODES.stack = saved


def _plan_json(graph, plan, signatures) -> dict:
    from ember.compiler.inductor._graph import ExternCall
    from ember.compiler.inductor._ir import Buffer, TensorValue

    steps = []
    allocated = set()
    for entry in plan:
        if isinstance(entry, ExternCall):
            if isinstance(entry.fn, Op):
                target = f"ember.ops.{entry.fn.name}"
            else:
                try:
                    target = target_name(entry.fn)
                except SerializationError as exc:
                    raise AOTICompileError(f"the graph calls {entry.name}, which is not an ember op: {exc}") from None
            outs = entry.outputs
            if entry.mutates or outs is None:
                out = None
            elif isinstance(outs, tuple):
                out = [b.name if isinstance(b, Buffer) else None for b in outs]
            else:
                out = outs.name
            steps.append({"extern": target, "args": _encode(list(entry.args), []),
                          "kwargs": {k: _encode(v, []) for k, v in entry.kwargs.items()}, "out": out})
            continue
        for node in entry.nodes:
            buf = node.buf
            if buf.name in entry.local or buf.target is not buf or buf.name in allocated:
                continue
            steps.append({"alloc": buf.name, "shape": [_int(s) for s in buf.shape],
                          "dtype": str(buf.dtype).split(".")[-1]})
            allocated.add(buf.name)
        args = []
        for kind, what in signatures[entry.name]:
            if kind == "ptr":
                args.append(["ptr", what])
            elif kind == "size":
                raise AOTICompileError(f"kernel {entry.name} takes the symbolic size {what}")
            else:
                args.append(["int", _int(what)])
        steps.append({"kernel": entry.name, "args": args})
    inputs = []
    for b in graph.inputs:
        if b is None:
            inputs.append(None)
        else:
            inputs.append({"name": b.name, "shape": [_int(s) for s in b.shape],
                           "strides": [_int(s) for s in b.strides], "dtype": str(b.dtype).split(".")[-1]})
    constants = {name: name for name in graph.constants}

    def out_template(obj):
        if isinstance(obj, TensorValue):
            return {"buf": obj.buffer.name}
        if isinstance(obj, (list, tuple)):
            return [out_template(o) for o in obj]
        return _encode(obj, [])

    return {"version": PLAN_VERSION, "inputs": inputs, "constants": constants, "steps": steps,
            "outputs": out_template(graph.output_template)}


def _asm_blob(symbol: str, path: str) -> str:
    quoted = path.replace("\\", "\\\\").replace('"', '\\"')
    return (f'__asm__(".section .rodata\\n.global {symbol}\\n.balign 64\\n{symbol}:\\n.incbin \\"{quoted}\\"\\n'
            f'.global {symbol}_end\\n{symbol}_end:\\n.byte 0\\n.text\\n");\n')


def _compile_c(ep, examples, out_dir: str) -> dict:
    """The C-ABI library (``_aoti_c``): symbolic sizes, C externs, weights in ``weights.bin``.
    Raises ``CUnsupported`` when the graph needs what the C path cannot generate."""
    from ember.compiler.inductor import _codecache
    from ember.compiler.inductor._codecache import vector_math
    from ember.compiler.inductor._cpp import kernel_sources
    from ember.compiler.inductor._graph import GraphFallback
    from ember.compiler.inductor._scheduler import Kernel

    from ._aoti_c import CUnsupported, CWriter, library_source, weights_blob
    from ._aoti_lower import SymbolicLowering
    from ._aoti_runtime_c import HEADER

    n_lifted = sum(1 for s in ep.graph_signature.input_specs if s.kind is not InputKind.USER_INPUT)
    try:
        graph, plan = _lower(ep.graph_module, examples, SymbolicLowering)
    except GraphFallback as exc:
        raise CUnsupported(f"the graph cannot be lowered symbolically: {exc}") from None
    except Exception as exc:  # a lowering that cannot take symbolic sizes
        raise CUnsupported(f"symbolic lowering failed: {type(exc).__name__}: {exc}") from None
    kernels = [e for e in plan if isinstance(e, Kernel)]
    source, signatures = "#include <math.h>\n#include <stdint.h>\n", {}
    user_outputs = [i for i, s in enumerate(ep.graph_signature.output_specs)
                    if s.kind in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT)]
    writer = CWriter(graph, plan, signatures, n_lifted, user_outputs, dict(ep.range_constraints))
    try:
        if kernels:
            parts, signatures = kernel_sources(kernels, graph.all_buffers, vector_math(), 1)
            source = parts[0][0]
            writer.signatures = signatures
        run_source = writer.generate(examples[:n_lifted])
    except NotImplementedError as exc:  # a symbolic size the C printers do not write
        raise CUnsupported(str(exc)) from None
    full = library_source(source, writer, run_source, graph.inputs[n_lifted:])
    paths = {"source": os.path.join(out_dir, "model.c"), "header": os.path.join(out_dir, "ember_aoti.h"),
             "weights": os.path.join(out_dir, "weights.bin"), "library": os.path.join(out_dir, "model.so")}
    with open(paths["source"], "w") as f:
        f.write(full)
    with open(paths["header"], "w") as f:
        f.write(HEADER)
    with open(paths["weights"], "wb") as f:
        f.write(weights_blob(writer))
    cmd = [_codecache.compiler(), *_codecache.flags(), "-I", out_dir, paths["source"], "-o", paths["library"],
           *_codecache.libraries()]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AOTICompileError(f"compiling the AOT library failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}")
    in_spec, out_spec = ep.call_spec
    targets = [s.target for s in ep.graph_signature.input_specs if s.kind is not InputKind.USER_INPUT]
    by_name = {name: (offset, tuple(t.shape), str(t.dtype).split(".")[-1]) for name, t, offset in writer.weights}
    weight_offsets = {}
    for target, buf in zip(targets, graph.inputs[:n_lifted]):
        if buf is not None and buf.name in by_name:
            offset, shape, dtype = by_name[buf.name]
            weight_offsets[target] = {"offset": offset, "shape": list(shape), "dtype": dtype}
    return {"runtime": "c", "paths": paths, "source": full, "weight_offsets": weight_offsets,
            "plan": {"version": PLAN_VERSION, "input_names": [s.arg.name for s in ep.graph_signature.input_specs],
                     "in_spec": pytree.spec_to_json(in_spec) if in_spec is not None else None,
                     "out_spec": pytree.spec_to_json(out_spec) if out_spec is not None else None,
                     "lifted_targets": [s.target for s in ep.graph_signature.input_specs
                                        if s.kind is not InputKind.USER_INPUT]}}


def _build_library(kernel_source: str, plan: bytes, weights: bytes, out_dir: str) -> tuple[str, str]:
    from ember.compiler.inductor import _codecache

    plan_path = os.path.join(out_dir, "plan.json")
    weights_path = os.path.join(out_dir, "weights.safetensors")
    with open(plan_path, "wb") as f:
        f.write(plan)
    with open(weights_path, "wb") as f:
        f.write(weights)
    source = (kernel_source + "\n/* the call plan and the weights, embedded read-only */\n"
              + _asm_blob("ember_aoti_plan", plan_path) + _asm_blob("ember_aoti_weights", weights_path))
    src = os.path.join(out_dir, "model.c")
    lib = os.path.join(out_dir, "model.so")
    with open(src, "w") as f:
        f.write(source)
    cmd = [_codecache.compiler(), *_codecache.flags(), src, "-o", lib, *_codecache.libraries()]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AOTICompileError(f"compiling the AOT library failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}")
    return lib, source


def _graph_inputs(ep) -> tuple[list, list[str]]:
    """The values of the graph's placeholders for the example inputs, and their names."""
    if ep.example_inputs is None:
        raise AOTICompileError("the exported program has no example inputs to specialize to")
    lifted = ep._lifted_values()
    leaves, _ = pytree.tree_flatten(ep.example_inputs)
    user = [x for x in leaves if isinstance(x, Tensor)]
    names = [s.arg.name for s in ep.graph_signature.input_specs]
    return [t.detach() for t in lifted] + [t.detach() for t in user], names


def compile_program(ep, out_dir: str) -> dict:
    """Lowers and builds ``ep`` into ``out_dir``; returns the paths and the metadata."""
    from ember.compiler.inductor._codecache import vector_math
    from ember.compiler.inductor._cpp import kernel_sources
    from ember.compiler.inductor._graph import GraphFallback
    from ember.compiler.inductor._scheduler import Kernel
    from ember.serialization import safetensors

    examples, names = _graph_inputs(ep)
    try:
        graph, plan = _lower(ep.graph_module, examples)
    except GraphFallback as exc:
        raise AOTICompileError(f"the graph cannot be lowered: {exc}") from None
    kernels = [e for e in plan if isinstance(e, Kernel)]
    source, signatures = "", {}
    if kernels:
        parts, signatures = kernel_sources(kernels, graph.all_buffers, vector_math(), 1)
        source = parts[0][0]
    else:
        source = "/* no fused kernels: every op runs through ember */\n"
    plan_obj = _plan_json(graph, plan, signatures)
    n_lifted = sum(1 for s in ep.graph_signature.input_specs if s.kind is not InputKind.USER_INPUT)
    weights, aliases, first_of = {}, {}, {}
    for buf, value in zip(plan_obj["inputs"][:n_lifted], examples[:n_lifted]):
        if buf is None:
            continue
        key = f"input:{buf['name']}"
        same = (id(value._storage), value._offset, tuple(value.shape), tuple(value.stride()), value.dtype)
        if same in first_of:  # a tied weight (GPT's embedding and head): stored once
            aliases[key] = first_of[same]
            continue
        first_of[same] = key
        weights[key] = value.contiguous()
    plan_obj["weight_aliases"] = aliases
    for name in graph.constants:
        weights[f"const:{name}"] = graph.constants[name].detach().contiguous()
    plan_obj["n_lifted"] = n_lifted
    plan_obj["lifted_targets"] = [s.target for s in ep.graph_signature.input_specs
                                  if s.kind is not InputKind.USER_INPUT]
    in_spec, out_spec = ep.call_spec
    plan_obj["in_spec"] = pytree.spec_to_json(in_spec) if in_spec is not None else None
    plan_obj["out_spec"] = pytree.spec_to_json(out_spec) if out_spec is not None else None
    plan_obj["user_outputs"] = [i for i, s in enumerate(ep.graph_signature.output_specs)
                                if s.kind in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT)]
    plan_obj["input_names"] = names
    data = safetensors.save({k: v for k, v in weights.items()})
    plan_bytes = json.dumps(plan_obj, separators=(",", ":")).encode()
    lib, full_source = _build_library(source, plan_bytes, data, out_dir)
    return {"library": lib, "source": full_source, "plan": plan_obj}


def aoti_compile_and_package(exported_program, _deprecated_unused_args=None, _deprecated_unused_kwargs=None, *,
                             package_path=None, inductor_configs: dict | None = None) -> str:
    """Compiles ``exported_program`` into a ``.pt2`` package (PyTorch's ``torch._inductor.aoti_compile_and_package``).

    Args:
        exported_program: an ``ember.export.ExportedProgram`` (with example inputs).
        package_path: where to write the package (a path ending in ``.pt2``, or a binary file
            object); a temporary file when None.
        inductor_configs: accepted for PyTorch programs (``aot_inductor.package`` and friends).

    Returns:
        The package's path (or the file object's name).

    Example::

        >>> import ember
        >>> from ember._inductor import aoti_compile_and_package, aoti_load_package
        >>> ep = ember.export.export(ember.nn.Linear(4, 2), (ember.randn(3, 4),))
        >>> path = aoti_compile_and_package(ep)
        >>> aoti_load_package(path)(ember.randn(3, 4)).shape
        ember.Size([3, 2])
    """
    from ._aoti_runtime import write_package
    from ._program import ExportedProgram

    if not isinstance(exported_program, ExportedProgram):
        raise ValueError(f"Only ExportedProgram is supported, got {type(exported_program).__name__}")
    if isinstance(package_path, (str, os.PathLike)) and not os.fspath(package_path).endswith(".pt2"):
        raise ValueError(f"Expect package path to end with .pt2, got {package_path}")
    from ._aoti_c import CUnsupported
    from ._decompose import without_composites

    exported_program = without_composites(exported_program)
    with tempfile.TemporaryDirectory(prefix="ember-aoti-") as tmp:
        try:
            built = _compile_c(exported_program, _graph_inputs(exported_program)[0], tmp)
        except CUnsupported as exc:
            # Only for graphs with ops the C path does not generate: the Python plan
            # interpreter, specialized to the example shapes.
            built = compile_program(exported_program, tmp)
            built["runtime"] = "python-plan"
            built["fallback_reason"] = str(exc)
        if package_path is None:
            fd, package_path = tempfile.mkstemp(suffix=".pt2", prefix="ember-aoti-")
            os.close(fd)
        write_package(package_path, built)
    return os.fspath(package_path) if isinstance(package_path, (str, os.PathLike)) else getattr(
        package_path, "name", package_path)


def aot_compile_library(exported_program, so_path: str | None = None) -> str:
    """The shared library alone (``torch._export.aot_compile``'s result): plan and weights inside."""
    from ._decompose import without_composites

    exported_program = without_composites(exported_program)
    with tempfile.TemporaryDirectory(prefix="ember-aoti-") as tmp:
        built = compile_program(exported_program, tmp)
        if so_path is None:
            fd, so_path = tempfile.mkstemp(suffix=".so", prefix="ember-aoti-")
            os.close(fd)
        shutil.copyfile(built["library"], so_path)
    return so_path
