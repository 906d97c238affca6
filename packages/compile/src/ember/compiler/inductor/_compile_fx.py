"""compile_fx: an fx GraphModule and example inputs -> a callable running fused native code.

The stages, in the order data flows: GraphLowering (ops -> loop-level IR, decompositions,
extern calls) -> schedule (fusion into kernels) -> C++ source -> the kernel cache (g++,
ctypes) -> the Python wrapper. A compiled graph is specialized to its inputs' dtypes, ranks,
static sizes and strides; a call that differs lowers the graph again for those inputs (the
kernels' source, and so the cache entry, stays the same when only symbolic sizes changed).
"""

from __future__ import annotations

import logging
import os
import time
import warnings

from ember._src import dispatch, grad_mode
from ember._src.tensor import Tensor

from ..._logging import _log
from . import _graphcache, config
from ._codecache import load_all, vector_math
from ._cpp import kernel_sources
from ._graph import ExternCall, GraphFallback, GraphLowering
from ._ir import Buffer, TensorValue
from ._scheduler import Kernel, make_index_vars, schedule
from ._triton import Unsupported as TritonUnsupported
from ._triton import kernel_specs
from ._triton_runtime import TritonKernel, backend_for, interpreter_ready
from ._wrapper import InputMismatch, build_callable, fixed_globals, kernel_function, link

log = logging.getLogger("ember.compiler.inductor")


class CompiledArtifact:
    """What one specialization produced: the wrapper, its sources, and compile statistics."""

    def __init__(self, call, wrapper_source: str, cpp_source: str, kernels: int, externs: int, seconds: float):
        self.call = call
        self.wrapper_source = wrapper_source
        self.cpp_source = cpp_source
        self.kernel_count = kernels
        self.extern_count = externs
        self.compile_seconds = seconds


def lower_and_build(gm, example_inputs) -> CompiledArtifact:
    """Lowers, schedules, generates and compiles ``gm`` for ``example_inputs``."""
    # Dispatch modes active around the compile (a capture in progress) must not see the meta
    # ops the lowering runs: they are this compiler's work, not the user's.
    saved, dispatch._MODES.stack = dispatch._MODES.stack, []
    try:
        return _lower_and_build(gm, example_inputs)
    finally:
        dispatch._MODES.stack = saved


def _uses_triton(example_inputs) -> bool:
    tensors = [t for t in example_inputs if isinstance(t, Tensor)]
    if any(t._device.type != "cpu" for t in tensors):
        return True
    return config.cpu_backend == "triton" and interpreter_ready()


def _lower_and_build(gm, example_inputs) -> CompiledArtifact:
    start = time.perf_counter()
    if _uses_triton(example_inputs):
        return _build_triton(gm, example_inputs, start)
    try:
        key = _graphcache.graph_key(gm, example_inputs) if config.graph_cache else None
        if key is not None and _INPUT_VIEWS[0]:
            key += "-views"  # its outputs that view inputs are returned as views (not copies)
    except _graphcache.Uncacheable as exc:
        log.debug("graph not cached: %s", exc)
        key = None
    if key is not None:
        entry = _graphcache.load_entry(key)
        if entry is not None:
            try:
                return _from_entry(gm, entry, start)
            except Exception as exc:  # a stale or damaged entry: lower again (and overwrite it)
                log.debug("graph cache entry %s unusable: %s", key, exc)
    graph, plan, kernels = _lower_and_schedule(gm, example_inputs, column_fusion=config.cpp.fuse_column_sums)
    source, signatures, libs = "", {}, {}
    if kernels:
        # big graphs: one source per core, compiled side by side (most of a cold compile)
        chunks = (os.cpu_count() or 1) if len(kernels) >= 8 else 1
        parts, signatures = kernel_sources(kernels, graph.all_buffers, vector_math(), chunks)
        for (_, names), lib in zip(parts, load_all([text for text, _ in parts])):
            libs.update(dict.fromkeys(names, lib))
        source = "\n".join(text for text, _ in parts)
    call, wrapper, names = build_callable(graph, plan, signatures, libs)
    seconds = time.perf_counter() - start
    externs = sum(isinstance(e, ExternCall) for e in plan)
    _log("output_code", lambda: f"ember inductor: {len(kernels)} kernels, {externs} extern calls, compiled in "
         f"{seconds:.3f} s\n# ---- wrapper (Python) ----\n{wrapper}# ---- kernels (C++) ----\n{source}")
    if key is not None:
        _store(key, gm, graph, wrapper, names, parts if kernels else [], signatures, len(kernels), externs)
    return CompiledArtifact(call, wrapper, source, len(kernels), externs, seconds)


def _lower_and_schedule(gm, example_inputs, column_fusion: bool = False) -> tuple:
    """(graph, plan, kernels): ``gm`` lowered to buffers and scheduled into fused kernels
    (``column_fusion``: column sums inside the kernels producing their input, C++ only)."""
    graph = GraphLowering(gm, example_inputs)
    graph.alias_outputs = True
    graph.input_views = _INPUT_VIEWS[0]
    graph.run()
    outputs = [v for v in graph.outputs if isinstance(v, TensorValue)]
    graph.output_names = {_output_buffer(v).name for v in outputs}
    ndim = max([len(getattr(item, "full_shape", getattr(item, "shape", ()))) for item in graph.items] + [0])
    plan = schedule(graph.items, graph.output_names, make_index_vars(ndim), column_fusion)
    graph.all_buffers = _all_buffers(graph, plan)
    kernels = [e for e in plan if isinstance(e, Kernel)]
    return graph, plan, kernels


def triton_kernels(gm, example_inputs) -> tuple:
    """(graph, plan, kernel specs) of ``gm``: its Triton kernels, generated but not compiled
    (the tests compile them for sm_90 without a GPU)."""
    graph, plan, kernels = _lower_and_schedule(gm, example_inputs)
    try:
        specs = kernel_specs(kernels, graph.all_buffers)
    except TritonUnsupported as exc:
        raise GraphFallback(f"Triton backend: {exc}") from exc
    return graph, plan, specs


def _triton_device(example_inputs):
    tensors = [t for t in example_inputs if isinstance(t, Tensor)]
    devices = {t._device for t in tensors if t._device.type != "cpu"}
    return next(iter(devices)) if len(devices) == 1 else tensors[0]._device if tensors else None


def _build_triton(gm, example_inputs, start) -> CompiledArtifact:
    """The Triton backend: the same lowering and schedule, kernels written as ``@triton.jit``;
    kept in the graph cache with its kernel specs (``_triton_cache``)."""
    from . import _triton_cache

    device = _triton_device(example_inputs)
    key = None
    if config.graph_cache and device is not None:
        try:
            key = _triton_cache.graph_key(gm, example_inputs, device)
        except Exception as exc:  # noqa: BLE001 - Uncacheable, or a key input unreadable here: no cache
            log.debug("graph not cached: %s", exc)
        if key is not None:
            try:
                hit = _triton_cache.load_graph(key, gm)
                if hit is not None:
                    return _triton_from_entry(hit, start)
            except Exception as exc:  # a stale or damaged entry: lower again (and overwrite it)
                log.debug("graph cache entry %s unusable: %s", key, exc)
    graph, plan, specs = triton_kernels(gm, example_inputs)
    kernels = [e for e in plan if isinstance(e, Kernel)]
    backend = backend_for(graph.device)
    if backend is None:
        raise GraphFallback(f"no Triton backend for {graph.device}")
    runners = _runners(specs, graph.device, backend)
    signatures = {s.name: s.params for s in specs}
    call, wrapper, names = build_callable(graph, plan, signatures, runners, triton=True,
                                          specs={s.name: s for s in specs})
    source = "\n".join(s.source for s in specs)
    seconds = time.perf_counter() - start
    externs = sum(isinstance(e, ExternCall) for e in plan)
    _log("output_code", lambda: f"ember inductor (Triton, {graph.device}): {len(kernels)} kernels, {externs} extern "
         f"calls, generated in {seconds:.3f} s\n# ---- wrapper (Python) ----\n{wrapper}# ---- kernels (Triton) ----\n"
         f"{source}")
    if key is not None:
        _triton_cache.store_graph(key, gm, graph, wrapper, names, specs, externs)
    artifact = CompiledArtifact(call, wrapper, source, len(kernels), externs, seconds)
    artifact.triton_kernels = runners
    return artifact


def _runners(specs, device, backend) -> dict:
    """A launcher per kernel name, one shared by kernels equal up to names (each layer of a model
    repeats the same kernels: compiled and tuned once, not once a layer)."""
    from ._kernel_alias import canonical

    runners, first = {}, {}
    for spec in specs:
        text = "\n".join(line for line in spec.source.splitlines() if not line.lstrip().startswith("#"))
        names = {what: None for kind, what in spec.params if kind == "ptr"}
        key = (canonical(text, spec.name, names), tuple(spec.dtypes[w] for w in names), spec.index_type)
        runner = first.get(key)
        if runner is None:
            runner = first[key] = TritonKernel(spec, device, backend)
        runners[spec.name] = runner
    return runners


def _triton_from_entry(hit, start) -> CompiledArtifact:
    """A cached Triton graph: its wrapper linked to fresh launchers of its kernel specs."""
    wrapper, namespace, specs, device, externs = hit
    backend = backend_for(device)
    if backend is None:
        raise GraphFallback(f"no Triton backend for {device}")
    runners = _runners(specs, device, backend)
    namespace.update(runners)
    call = link(wrapper, namespace)
    seconds = time.perf_counter() - start
    source = "\n".join(s.source for s in specs)
    _log("output_code", lambda: f"ember inductor (Triton, {device}): graph cache hit, {len(specs)} kernels, {externs} "
         f"extern calls, linked in {seconds:.3f} s\n# ---- wrapper (Python) ----\n{wrapper}")
    artifact = CompiledArtifact(call, wrapper, source, len(specs), externs, seconds)
    artifact.triton_kernels = runners
    artifact.cache_hit = True
    return artifact


def _store(key, gm, graph, wrapper, names, parts, signatures, kernels, externs) -> None:
    """Writes the lowering's product to the graph cache, if every object it uses can be described."""
    try:
        objects, constants = _graphcache.describe_names(names, {**fixed_globals(), **signatures}, gm, graph.constants)
    except _graphcache.Uncacheable as exc:
        log.debug("graph not cached: %s", exc)
        return
    _graphcache.store_entry(key, {
        "wrapper": wrapper, "parts": [[text, list(kernel_names)] for text, kernel_names in parts],
        "signatures": {name: [kind for kind, _ in sig] for name, sig in signatures.items()},
        "constants": constants, "objects": objects, "kernels": kernels, "externs": externs})


def _from_entry(gm, entry: dict, start: float) -> CompiledArtifact:
    """A graph cache entry linked against this process's ops, constants and kernel libraries."""
    namespace = fixed_globals()
    parts = entry["parts"]
    for (_, kernel_names), lib in zip(parts, load_all([text for text, _ in parts])):
        for name in kernel_names:
            namespace[name] = kernel_function(lib, name, entry["signatures"][name])
    for name, path in entry["constants"].items():
        namespace[name] = _graphcache.attribute(gm, path)
    for name, desc in entry["objects"].items():
        namespace[name] = _graphcache.resolve(desc)
    call = link(entry["wrapper"], namespace)
    seconds = time.perf_counter() - start
    source = "\n".join(text for text, _ in parts)
    _log("output_code", lambda: f"ember inductor: graph cache hit, {entry['kernels']} kernels, {entry['externs']} "
         f"extern calls, linked in {seconds:.3f} s\n# ---- wrapper (Python) ----\n{entry['wrapper']}")
    return CompiledArtifact(call, entry["wrapper"], source, entry["kernels"], entry["externs"], seconds)


def _output_buffer(value: TensorValue):
    """The buffer holding graph output ``value``: its own, or the one it is returned a view of."""
    alias = getattr(value, "alias", None)
    return value.buffer if alias is None else alias.buffer


def _all_buffers(graph, plan) -> dict:
    buffers: dict[str, Buffer] = {}
    for b in graph.inputs:
        if b is not None:
            buffers[b.name] = b
    for value in graph.outputs:
        if isinstance(value, TensorValue) and _output_buffer(value) is not None:
            buffers[_output_buffer(value).name] = _output_buffer(value)
    for name in graph.constants:
        buffers[name] = graph.constant_buffers[name]
    for item in graph.items:
        if isinstance(item, ExternCall):
            outs = item.outputs if isinstance(item.outputs, tuple) else (item.outputs,)
            for b in outs:
                if isinstance(b, Buffer):
                    buffers[b.name] = b
        else:
            buffers[item.name] = item
    return buffers


def _signature(args) -> tuple:
    sig = []
    for a in args:
        if isinstance(a, Tensor):
            sig.append((a.dtype, a._shape, a._stride, a._device))
        else:
            sig.append((type(a), a if isinstance(a, (int, float, bool)) else id(a)))
    return tuple(sig)


class CompiledGraph:
    """The callable compile_fx returns: the specialized wrapper, re-specialized on new inputs."""

    def __init__(self, gm, example_inputs, input_views: bool = False):
        self.gm = gm
        self.input_views = input_views
        self.variants: dict = {}
        self.written_inputs = _written_placeholders(gm)
        self.artifact = self._build(list(example_inputs))
        self._fast = self.artifact.call if self.artifact is not None else None

    def _build(self, inputs):
        saved, _INPUT_VIEWS[0] = _INPUT_VIEWS[0], self.input_views
        try:
            artifact = lower_and_build(self.gm, inputs)
        except GraphFallback as exc:
            log.debug("graph runs eagerly: %s", exc)
            return None
        except Exception as exc:
            if not config.fallback_on_error:
                raise
            warnings.warn(f"ember inductor: compiling the graph failed, it runs eagerly ({type(exc).__name__}: "
                          f"{exc})", RuntimeWarning, stacklevel=3)
            return None
        finally:
            _INPUT_VIEWS[0] = saved
        self.variants[_signature(inputs)] = artifact
        return artifact

    def _eager(self, args):
        return self.gm(*args)

    def boxed_call(self, args: list):
        """The graph run on ``args``, a list the call empties once the inputs are checked: the
        generated wrapper then holds each input only until its last read (a backward's saved
        activations). An input mismatch is found before the list is emptied."""
        if grad_mode.STATE.grad_enabled and any(isinstance(a, Tensor) and a._requires_grad for a in args):
            return self._eager_emptying(args)  # kernels record no autograd history
        if self.written_inputs and _shares_storage(args, self.written_inputs):
            # An input written in place shares memory with another input (overlapping views of
            # one tensor): the kernels would read the other input's old values; eager's order holds.
            return self._eager_emptying(args)
        if self._fast is not None:
            try:
                return self._fast(args)
            except InputMismatch:
                pass
        artifact = self.variants.get(_signature(args))
        if artifact is None:
            artifact = self._build(list(args))
        if artifact is None:
            return self._eager_emptying(args)
        return artifact.call(args)

    def _eager_emptying(self, args: list):
        inputs = tuple(args)
        args.clear()
        return self._eager(inputs)

    def __call__(self, *args):
        # a list of our own: a caller's boxed list (``_unbox``) keeps its inputs
        return self.boxed_call(list(self._unbox(args)))

    def _unbox(self, args):
        """Accepts aot_autograd's boxed convention too: one list holding every input."""
        if len(args) == 1 and type(args[0]) is list:
            placeholders = sum(n.op == "placeholder" for n in self.gm.graph.nodes)
            if placeholders != 1 or (len(args[0]) == 1 and isinstance(args[0][0], Tensor)):
                return tuple(args[0])
        return args


def _written_placeholders(gm) -> tuple:
    """Positions of the inputs that the graph writes in place (directly or through a view)."""
    from ember._src.dispatch import Op

    from .._op_facts import op_info

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    position = {n: i for i, n in enumerate(placeholders)}
    written = set()
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, Op):
            continue
        for pos in op_info(node.target)[0]:
            arg = node.args[pos] if pos < len(node.args) else None
            while getattr(arg, "op", None) == "call_function" and isinstance(arg.target, Op) \
                    and "view" in arg.target.tags and arg.args:
                arg = arg.args[0]
            if arg in position:
                written.add(position[arg])
    return tuple(sorted(written))


def _shares_storage(args, written) -> bool:
    storages = {}
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            storages.setdefault(id(a._storage), []).append(i)
    return any(len(storages.get(id(args[i]._storage), ())) > 1 for i in written if isinstance(args[i], Tensor))


# Whether the graph being lowered returns its outputs that view an input as views of it (set while
# a CompiledGraph built with ``input_views`` lowers; part of the graph cache key).
_INPUT_VIEWS = [False]


def compile_fx_inner(gm, example_inputs, input_views: bool = False, **kwargs):
    """Compiles one forward, backward or inference graph (no autograd of its own); with
    ``config.triton.cudagraphs`` (mode="reduce-overhead") CUDA inputs replay it as a CUDA graph.
    ``input_views``: an output that is a view of an input is returned as that view (a graph not
    run inside AOT's autograd Function: inference graphs), as eager returns it."""
    if config.triton.cudagraphs:
        from ._cudagraphs import _scalars_to_device, cudagraphify

        # specialized to the inputs the graph will replay with (0-dim CPU tensors moved over)
        example_inputs = list(_scalars_to_device(tuple(example_inputs)))
        return cudagraphify(CompiledGraph(gm, example_inputs), example_inputs)
    return CompiledGraph(gm, example_inputs, input_views=input_views)


def _inference_inner(gm, example_inputs, **kwargs):
    return compile_fx_inner(gm, example_inputs, input_views=True, **kwargs)


def _lazy(compiler):
    """A compiler deferred to the first call (aot_autograd's inference graph is often never run)."""

    def compile_later(gm, example_inputs):
        box: list = []
        settings = config.snapshot()  # the mode's settings, in force now, for the later compile

        def run(*args):
            if not box:
                with config.patch(settings):
                    box.append(compiler(gm, example_inputs))
            return box[0](*args)

        return run

    return compile_later


def _at_first_call(compiler):
    """A compiler deferred to the first call and specialized to that call's inputs: a backward
    graph's example inputs are meta values whose strides need not be those the forward's
    compiled outputs have (a saved ``w.t()`` comes back contiguous), which would compile it
    twice."""

    def compile_later(gm, example_inputs):
        box: list = []
        settings = config.snapshot()  # mode="reduce-overhead" and the like hold for the later compile

        def run(args: list):  # boxed: the list is emptied (see CompiledGraph.boxed_call)
            if not box:
                with config.patch(settings):
                    box.append(compiler(gm, list(args)))
            boxed = getattr(box[0], "boxed_call", None)
            if boxed is not None:
                return boxed(args)
            inputs = tuple(args)
            args.clear()
            return box[0](*inputs)

        run.boxed_call = run
        return run

    return compile_later


def compile_fx(gm, example_inputs, **kwargs):
    """Compiles ``gm`` for inputs like ``example_inputs`` (the "inductor" backend of ember.compile).

    When an input requires grad, the graph goes through AOT autograd first: a forward and a
    backward graph, each compiled here, inside one autograd Function.

    Args:
        gm: an ``ember.fx.GraphModule`` whose call_function targets are ember ops (or Python
            functions over them: those are traced op by op, or run as they are).
        example_inputs: tensors (and ints) like those the result will be called with.

    Returns:
        A callable taking the graph's inputs and returning its outputs.

    Example::

        >>> import ember
        >>> from ember.compiler import make_fx
        >>> from ember.compiler.inductor import compile_fx
        >>> x = ember.randn(8, 16)
        >>> gm = make_fx(lambda x: (x.sin() * 2).relu())(x)
        >>> fn = compile_fx(gm, [x])
        >>> bool((fn(x) == (x.sin() * 2).relu()).all())
        True
    """
    example_inputs = list(example_inputs)
    needs_grad = grad_mode.STATE.grad_enabled and any(
        isinstance(t, Tensor) and t.requires_grad for t in example_inputs)
    if not needs_grad:
        return _inference_inner(gm, example_inputs)
    from ..aot_autograd import aot_module_simplified

    return aot_module_simplified(gm, example_inputs, fw_compiler=compile_fx_inner,
                                 bw_compiler=_at_first_call(compile_fx_inner),
                                 inference_compiler=_lazy(_inference_inner))
