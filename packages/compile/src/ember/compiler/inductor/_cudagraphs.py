"""``mode="reduce-overhead"`` on CUDA: a compiled graph replayed as one CUDA graph.

``cudagraphify(fn)`` wraps a compiled graph (forward, backward or inference). Per input
signature (dtypes, shapes, strides, devices, and the identity of parameters) the first call
runs ``fn`` as it is (the warm-up: kernels compile, the caching allocator fills), the second
captures it into an ``ember.cuda.CUDAGraph``, and later calls copy their inputs into the
captured ones and replay the graph: no Python dispatch, no allocator work, one launch.

Inputs: parameters (``nn.Parameter``) are captured by address and never copied, as PyTorch's
cudagraph trees treat them; so is an output of another graph's replay that still reads that
graph's buffers (the activations a forward graph saved, read by its backward graph): a later
call whose tensor is elsewhere runs uncaptured. Every other tensor input gets a graph-owned
copy that each call refreshes (a tensor whose address equals the captured one is not copied
again). Inputs the graph writes in place are copied back to the caller's tensor after each
replay.

Outputs are tensors over the graph's own output buffers (no copy), each storage an alias that
can move (``AliasStorage``): before the next replay overwrites the buffers, the outputs of the
previous replay that are still referenced anywhere (a loss kept in a variable, activations of
a backward not yet run, a view of either) get their data copied out to memory of their own, so
a result held across calls is never overwritten (PyTorch instead raises on a stale access;
docs/deviations.md). In a training loop the saved activations and gradients are released
before the next replay, so nothing is copied but the few results the program holds. Anything a
graph cannot capture (CPU inputs, an input that needs grad outside AOT autograd, a
synchronizing op) runs ``fn`` uncaptured from then on. A 0-dim CPU tensor input is moved to the
device before the call (outside any graph).
"""

from __future__ import annotations

import logging
import weakref

from ember._src.tensor import Tensor, make_tensor

log = logging.getLogger("ember.compiler.inductor")
# Process-wide counts (as torch._dynamo.utils.counters): graphs captured, replays, captures that
# failed (with their reasons), so that tests and benchmarks can see that graphs really replay.
# "evacuated": replay outputs still held at the next replay, copied out of the graph's buffers;
# "uncaptured_calls": calls run uncaptured because an input moved out of another graph's buffer.
COUNTERS = {"captures": 0, "replays": 0, "failures": 0, "reasons": [], "evacuated": 0, "uncaptured_calls": 0}


def _is_parameter(t) -> bool:
    return type(t).__name__ == "Parameter" or getattr(t, "_is_param", False)


def _signature(args) -> tuple:
    sig = []
    for a in args:
        if isinstance(a, Tensor):
            sig.append((a.dtype, tuple(a._shape), tuple(a._stride), a._device, id(a) if _is_parameter(a) else None))
        else:
            sig.append((type(a), a if isinstance(a, (int, float, bool, str)) or a is None else id(a)))
    return tuple(sig)


def _scalars_to_device(args) -> tuple:
    """``args`` with 0-dim CPU tensors (Python numbers made tensors, which eager mixes with CUDA
    ones) moved to the CUDA tensors' device: a graph can capture no host-to-device copy, so the
    copy happens here, outside it, and the graph reads a device scalar."""
    device = next((a._device for a in args if isinstance(a, Tensor) and a._device.type == "cuda"), None)
    if device is None or not any(isinstance(a, Tensor) and a._device.type == "cpu" and not a._shape for a in args):
        return args
    from ._wrapper import _scalar_to

    # cached per value (a copy per call would synchronize the stream): the graph only reads it
    return tuple(_scalar_to(a, device) if isinstance(a, Tensor) and a._device.type == "cpu" and not a._shape else a
                 for a in args)


def _all_cuda(args) -> bool:
    tensors = [a for a in args if isinstance(a, Tensor)]
    return bool(tensors) and all(t._device.type == "cuda" for t in tensors)


def _reads_graph_buffer(t) -> bool:
    """Whether ``t`` is a replay's output still over its graph's buffer (AliasStorage.aliased)."""
    return getattr(t._storage, "aliased", False)


class _Entry:
    __slots__ = ("graph", "inputs", "outputs", "written", "single", "kind", "by_address", "owned",
                 "held")


class CudaGraphed:
    """``fn`` replayed as CUDA graphs, one per input signature."""

    def __init__(self, fn, warmup: int = 1):
        self.fn = fn
        self.warmup = warmup
        self.seen: dict = {}
        self.entries: dict = {}
        self.disabled = False

    def __call__(self, *args):
        if len(args) == 1 and type(args[0]) is list:  # aot_autograd's boxed convention
            args = tuple(args[0])
            boxed = True
        else:
            boxed = False
        args = _scalars_to_device(args)
        if self.disabled or not _all_cuda(args):
            return self._plain(args, boxed)
        sig = _signature(args)
        entry = self.entries.get(sig)
        if entry is None:
            count = self.seen.get(sig, 0)
            self.seen[sig] = count + 1
            if count < self.warmup:
                return self._plain(args, boxed)
            try:
                entry = self._capture(args, boxed)
            except Exception as exc:  # noqa: BLE001 - the graph runs uncaptured instead
                log.warning("cudagraphs: capture failed, the graph runs uncaptured: %s: %s", type(exc).__name__, exc)
                COUNTERS["failures"] += 1
                COUNTERS["reasons"].append(f"{type(exc).__name__}: {exc}"[:300])
                self.disabled = True
                return self._plain(args, boxed)
            COUNTERS["captures"] += 1
            self.entries[sig] = entry
        return self._replay(entry, args, boxed)

    def _plain(self, args, boxed):
        return self.fn(list(args)) if boxed else self.fn(*args)

    def _capture(self, args, boxed):
        import ember

        entry = _Entry()
        # By address: parameters, and outputs of another graph still over its buffer; as graph
        # inputs the latter are fresh tensors over the owner's memory, so that holding them here
        # does not keep that replay's outputs referenced (which would copy them out every call).
        entry.by_address = [i for i, a in enumerate(args) if isinstance(a, Tensor) and _reads_graph_buffer(a)]
        inputs = [a if not isinstance(a, Tensor) or _is_parameter(a) else a.detach().clone() for a in args]
        for i in entry.by_address:
            a = args[i]
            inputs[i] = make_tensor(a._storage._owner, a._shape, a._stride, a._offset, a.dtype, a._device)
        versions = [a._version_value if isinstance(a, Tensor) else None for a in inputs]
        graph = ember.cuda.CUDAGraph()
        with ember.cuda.graph(graph):
            out = self.fn(list(inputs)) if boxed else self.fn(*inputs)
        entry.single = isinstance(out, Tensor)
        entry.kind = type(out) if isinstance(out, (tuple, list)) else list
        entry.outputs = (out,) if entry.single else tuple(out)
        entry.graph, entry.inputs = graph, inputs
        # Inputs the graph writes: their storage version moved during the capture.
        entry.written = [i for i, (t, v) in enumerate(zip(inputs, versions))
                         if isinstance(t, Tensor) and not _is_parameter(t) and t._version_value != v]
        if any(i in entry.by_address for i in entry.written):
            raise RuntimeError("the graph writes into another graph's output buffer")
        # Outputs over memory the capture allocated (not an input's) are handed out as aliases of
        # it; the rest (an input returned, a CPU result) as copies.
        input_storages = {id(t._storage) for t in inputs if isinstance(t, Tensor)}
        entry.owned = [isinstance(o, Tensor) and id(o._storage) not in input_storages
                       and hasattr(o._storage, "graph_alias") for o in entry.outputs]
        entry.held = []
        return entry

    def _replay(self, entry, args, boxed):
        for i in entry.by_address:  # still where the capture read it?
            if args[i].data_ptr() != entry.inputs[i].data_ptr():
                COUNTERS["uncaptured_calls"] += 1
                return self._plain(args, boxed)
        for dst, src in zip(entry.inputs, args):
            if isinstance(dst, Tensor) and dst is not src and dst.data_ptr() != src.data_ptr():
                dst.copy_(src)
        for ref in entry.held:  # the previous replay's outputs someone still holds keep their data
            alias = ref()
            if alias is not None and alias.aliased:
                alias.evacuate()
                COUNTERS["evacuated"] += 1
        entry.graph.replay()
        COUNTERS["replays"] += 1
        for i in entry.written:
            args[i].copy_(entry.inputs[i])
        outs, aliases = [], {}
        for o, owned in zip(entry.outputs, entry.owned):
            if not owned:
                outs.append(o.clone() if isinstance(o, Tensor) else o)
                continue
            alias = aliases.get(id(o._storage))
            if alias is None:
                alias = aliases[id(o._storage)] = o._storage.graph_alias()
            outs.append(make_tensor(alias, o._shape, o._stride, o._offset, o.dtype, o._device))
        entry.held = [weakref.ref(a) for a in aliases.values()]
        return outs[0] if entry.single else entry.kind(outs)


def cudagraphify(fn, example_inputs=None):
    """``fn`` wrapped for CUDA-graph replay (inputs on CUDA), else ``fn`` itself."""
    if example_inputs is not None and not _all_cuda(_scalars_to_device(tuple(example_inputs))):
        return fn
    return CudaGraphed(fn)
