"""The Python wrapper that runs one compiled graph: guards, buffers, kernel and extern calls.

It is generated as source (shown by ``EMBER_LOGS=output_code``) so that a call does only the
work the graph needs: check the inputs still match what the code was specialized for, bind the
symbolic sizes, allocate (or reuse) buffers, call each kernel through ctypes and each extern op
through ember, and return the outputs in the graph's structure.
"""

from __future__ import annotations

import ctypes

import sympy

from ember._src import dispatch, grad_mode
from ember._src import dtypes as dt
from ember._src.device import CPU, get_backend
from ember._src.shapes import contiguous_strides as _int_strides
from ember._src.tensor import Tensor, make_tensor, make_view, new_empty_tensor

from . import config
from ._cpp import index_text
from ._graph import ExternCall, StridedView
from ._ir import Buffer, InputBuffer, TensorValue, product

_GRAD_STATE = grad_mode.STATE
_INFERENCE_USED = grad_mode.INFERENCE_USED
_SYNC_HOOK = dispatch._SYNC_HOOK


class InputMismatch(Exception):
    """The inputs of this call differ from those the code was specialized for."""


def _empty(shape, dtype, device=CPU):
    return new_empty_tensor(shape, dtype, device)


def _empty_on(device, nbytes: int, shape, strides, dtype):
    """A fresh buffer of a static shape on a plugin device (CUDA): its strides and byte size were
    worked out when the wrapper was written, so a call only allocates."""
    if _INFERENCE_USED[0] and _GRAD_STATE.inference:
        return new_empty_tensor(shape, dtype, device)  # it marks inference tensors
    storage = get_backend(device.type).allocate(nbytes, False, device)
    return make_tensor(storage, shape, strides, 0, dtype, getattr(storage, "device", device))


def _py_tensor_new(cls, alloc, nbytes: int, device, stream, inference, shape, strides, dtype):
    """``_device_tensor_new``'s signature over ``_empty_on`` (a device without a native front)."""
    return _empty_on(device, nbytes, shape, strides, dtype)


def _device_front(device) -> tuple:
    """``(tensor_new, storage class, allocator, device object, begin)`` of a wrapper on a plugin device,
    bound once when the wrapper is linked: ``begin()`` (once a call) gives the stream the call's launches
    and buffers go on, and each buffer is one ``tensor_new(cls, alloc, nbytes, device, stream, inference,
    shape, strides, dtype)``: the plugin's native front (``Backend.wrapper_front``) or ``_empty_on``."""
    backend = get_backend(device.type)
    front = None
    if config.triton.native_launch and backend.wrapper_front is not None:
        front = backend.wrapper_front(device)
    if front is not None:
        return front
    index = device.index or 0
    current = backend.current_stream
    begin = (lambda: current(index)) if current is not None else (lambda: None)
    return _py_tensor_new, None, None, device, begin


def _site(kernel, xnumel: int, rnumel: int = 1):
    """Launch ``kernel`` at these fixed sizes, called ``(stream, *args)``: a native launch site
    (``TritonKernel.site``), or the Python launch (stream unused)."""
    site = kernel.site(xnumel, rnumel) if hasattr(kernel, "site") else None
    if site is not None:
        return site

    def launch(stream, *args):
        kernel(*args, xnumel=xnumel, rnumel=rnumel)

    return launch


def _reuse(old: Tensor, shape, dtype):
    """A buffer of ``shape``/``dtype`` over the storage of a dead buffer of the same byte size."""
    return make_tensor(old._storage, shape, _int_strides(shape), 0, dtype, old._device)


_SCALARS: dict = {}  # (device, dtype, repr(value)) -> a 0-dim device tensor holding the value


def _scalar_to(t: Tensor, device) -> Tensor:
    """A 0-dim CPU tensor's value on ``device``, read-only. A host-to-device copy synchronizes the
    stream (the host then waits for every kernel queued before it, each call), so each value is put
    there once, by a fill kernel on the stream, and kept for later calls."""
    value = t.item()
    key = (device, t.dtype, repr(value))  # repr: -0.0 and NaN are values of their own
    out = _SCALARS.get(key)
    if out is None:
        if len(_SCALARS) >= 256:
            _SCALARS.clear()
        out = _SCALARS[key] = __import__("ember").full((), value, dtype=t.dtype, device=device)
    return out


def _view(base: Tensor, shape, strides, offset):
    return make_view(base, shape, strides, base._offset + offset)


def _alias(base: Tensor, shape, strides, offset):
    """A graph output over ``base``'s memory (a buffer of this call's, returned in another shape)."""
    return make_tensor(base._storage, shape, strides, base._offset + offset, base.dtype, base._device)


def _input_view(base: Tensor, shape, strides, offset):
    """A graph output that views input ``base``: that view of it (``as_strided`` from its offset),
    so the caller gets what eager returns (``_base`` is the input, writes go through)."""
    return base.as_strided(shape, strides, base.storage_offset() + offset)


def _layout(t, strides):
    """An extern result in the layout the kernels read it with: ``strides`` (its meta tensor's, a
    dense permutation) or contiguous (None); a copy only if the op's result came back otherwise.
    A size-1 dim's stride does not matter (nothing steps through it)."""
    if not isinstance(t, Tensor):
        return t
    shape = t._shape
    want = _int_strides(shape) if strides is None else strides
    if t._stride != want and 0 not in shape and \
            any(n != 1 and a != b for n, a, b in zip(shape, t._stride, want)):
        if strides is None:
            return t.contiguous()
        out = __import__("ember").empty_strided(shape, strides, dtype=t.dtype, device=t.device)
        out.copy_(t)
        return out
    return t


def _py(expr) -> str:
    return index_text(expr) if isinstance(expr, sympy.Basic) else repr(expr)


def fixed_globals() -> dict:
    """The names every wrapper's code reads beside its own kernels and constants."""
    return {"_empty": _empty, "_empty_on": _empty_on, "_reuse": _reuse, "_layout": _layout, "_view": _view,
            "_alias": _alias, "_input_view": _input_view, "_dev": CPU,
            "_scalar_to": _scalar_to, "InputMismatch": InputMismatch, "ember": __import__("ember"), "_Tensor": Tensor,
            "_device_front": _device_front, "_site": _site, "_SYNC_HOOK": _SYNC_HOOK,
            "_INFERENCE_USED": _INFERENCE_USED, "_GRAD_STATE": _GRAD_STATE, "_make_tensor": make_tensor}


def kernel_function(lib, name: str, kinds) -> ctypes._CFuncPtr:
    """Kernel ``name`` of ``lib`` as a ctypes function (``kinds``: "ptr" or an int64 per argument)."""
    fn = getattr(lib, name)
    fn.argtypes = [ctypes.c_void_p if kind == "ptr" else ctypes.c_double if kind == "number" else ctypes.c_int64
                   for kind in kinds]
    fn.restype = None
    return fn


class WrapperWriter:
    """``lib``: kernel name -> the ctypes library holding it (C++), or with ``triton`` the
    kernel's launcher object (``_triton_runtime.TritonKernel``), called with tensors."""

    def __init__(self, graph, plan, signatures: dict, lib, triton: bool = False):
        self.g = graph
        self.plan = plan
        self.signatures = signatures
        self.lib = lib
        self.triton = triton
        self.lines: list[str] = []
        self.specs: dict = {}  # kernel name -> its Triton spec (sizes of the launch)
        self.globals: dict = fixed_globals()
        self._consts = 0
        self.globals["_dev"] = graph.device
        self.device_arg = ", _dev" if graph.device.type != "cpu" else ""
        # Triton on a plugin device: launches through sites and buffers through the device's front, both
        # bound when the wrapper is linked (module-level lines run by ``link``, also on a graph-cache hit)
        self.native = triton and graph.device.type != "cpu"
        self.prelude: list[str] = []
        self._sites = 0

    def const(self, obj) -> str:
        name = f"_c{self._consts}"
        self._consts += 1
        self.globals[name] = obj
        return name

    def text(self, obj) -> str:
        """Python source for an extern argument."""
        if isinstance(obj, Buffer):
            return obj.name
        if isinstance(obj, StridedView):
            return (f"_view({obj.buffer.name}, {self.shape_text(obj.shape)}, {self.shape_text(obj.strides)}, "
                    f"{_py(obj.offset)})")
        if isinstance(obj, TensorValue):
            return obj.buffer.name
        if isinstance(obj, sympy.Basic):
            return index_text(obj) if obj.free_symbols else str(int(obj))
        if isinstance(obj, (bool, int, str)) or obj is None:
            return repr(obj)
        if isinstance(obj, float):
            return repr(obj) if obj == obj and obj not in (float("inf"), float("-inf")) else f"float({str(obj)!r})"
        if isinstance(obj, tuple):
            return "(" + "".join(self.text(o) + ", " for o in obj) + ")"
        if isinstance(obj, list):
            return "[" + ", ".join(self.text(o) for o in obj) + "]"
        if isinstance(obj, dt.dtype):
            return f"ember.{obj.name}"
        return self.const(obj)

    def shape_text(self, shape) -> str:
        return "(" + "".join(_py(s) + ", " for s in shape) + ")"

    # -- sections ------------------------------------------------------------------------------

    def generate(self) -> str:
        g = self.g
        names = [b.name if b is not None else f"arg{i}_scalar" for i, b in enumerate(g.inputs)]
        self.names = names
        w = self.lines
        w.append("def call(args):")
        w.append(f"    {', '.join(names) + ',' if names else '_'} = args" if names else "    pass")
        self._guards(names)
        # A list argument is emptied once the inputs passed the guards (the boxed convention: the
        # caller keeps no reference), so that the ``del`` after an input's last read frees it.
        w.append("    if type(args) is list:")
        w.append("        args.clear()")
        if self.native:
            self.prelude.append("_tnew, _tcls, _talloc, _tdev, _begin = _device_front(_dev)")
            w.append("    _s = _begin()  # this call's stream (its launches and buffers)")
            w.append("    _ls = _s if _SYNC_HOOK[0] is None else None  # None: the Python launch path")
            w.append("    _inf = bool(_INFERENCE_USED[0] and _GRAD_STATE.inference)")
        for name, value in g.constants.items():
            self.globals[name] = value
        last_use = self._last_uses()
        self.allocated: set[str] = set()
        self.bound: set[str] = set()  # locals the code below assigns: kernel buffers, extern results
        returned = set(self.output_names) | {b.name for b in _flat_buffers(g.output_template)}
        extern_read = set()
        for entry in self.plan:
            if isinstance(entry, ExternCall):
                extern_read |= _names_used(entry)
        pool: dict[str, list] = {}
        freed_after: dict[int, list] = {}
        for name, pos in last_use.items():
            freed_after.setdefault(pos, []).append(name)
        inputs = {b.name for b in g.inputs if b is not None} - returned
        unread = sorted(inputs - set(last_use))
        if unread:
            w.append(f"    del {', '.join(unread)}")
        for pos, entry in enumerate(self.plan):
            if isinstance(entry, ExternCall):
                self._extern(entry)
            else:
                self._kernel(entry, pool)
            dead = []
            for name in freed_after.get(pos, []):
                buf = self.buffers[name]
                if name in returned:
                    continue
                # a buffer an extern op saw may live on inside its result (a view): never reused
                if name in self.allocated and name not in extern_read:
                    key = _py(product(buf.shape) * buf.dtype.itemsize)
                    pool.setdefault(key, []).append(name)
                elif name in self.bound or name in inputs:
                    dead.append(name)
            if dead:
                # Dropped at its last use, as eager autograd drops a value: its block goes back to
                # the allocator's cache and the next buffer of its size takes it. Held to the end
                # of the call, the mini-GPT backward's ~100 intermediates came to more than the
                # cache keeps, and every call page-faulted fresh memory (~60 ms of a 370 ms
                # backward in the kernel). Inputs too: a backward's saved activations are freed
                # here when the caller passed them in a list (emptied above) and kept no other.
                w.append(f"    del {', '.join(sorted(dead))}")
        w.append(f"    return {self._output_text(g.output_template)}")
        return "".join(line + "\n" for line in self.prelude) + "\n".join(w) + "\n"

    def _guards(self, names):
        g = self.g
        checks, binds, moves = [], [], []
        for sym_, (pos, dim) in sorted(g.symbols.items(), key=lambda kv: kv[0].name):
            binds.append(f"    {sym_.name} = {names[pos]}" + (f"._shape[{dim}]" if dim is not None else ""))
        for pos, value in g.number_inputs.items():
            # a number the lowering specialized to: another value is another variant
            self.globals[f"_number{pos}"] = value
            checks.append(f"type({names[pos]}) is not {type(value).__name__} or {names[pos]} != _number{pos}")
        for i, buf in enumerate(g.inputs):
            if buf is None:
                continue
            n = names[i]
            checks.append(f"not isinstance({n}, _Tensor) or {n}.dtype is not ember.{buf.dtype.name}")
            if getattr(buf, "host_scalar", False) and g.device.type != "cpu":
                checks.append(f"{n}._device.type != 'cpu'")  # a 0-dim CPU tensor, moved below
                shared = buf.name not in self._written_or_returned()
                moves.append(f"    {n} = _scalar_to({n}, _dev)" if shared else f"    {n} = {n}.to(_dev)")
            else:
                checks.append(f"{n}._device != _dev")  # kernels read one device's memory
            checks.append(f"len({n}._shape) != {len(buf.shape)}")
            for d, s in enumerate(buf.shape):
                if not s.free_symbols:
                    checks.append(f"{n}._shape[{d}] != {int(s)}")
            checks.append(f"{n}._stride != {self.shape_text(buf.strides)}")
        first = [c for c in checks if "_stride" not in c]
        strides = [c for c in checks if "_stride" in c]
        if first:
            self.lines.append("    if " + " or ".join(f"({c})" for c in first) + ":")
            self.lines.append("        raise InputMismatch")
        self.lines.extend(binds)
        if strides:
            self.lines.append("    if " + " or ".join(f"({c})" for c in strides) + ":")
            self.lines.append("        raise InputMismatch")
        self.lines.extend(moves)

    def _written_or_returned(self) -> set:
        """Inputs the graph writes or returns (a cached device scalar must be neither)."""
        names = {b.name for b in _flat_buffers(self.g.output_template)}
        for entry in self.plan:
            if isinstance(entry, ExternCall):
                if entry.mutates:
                    names |= _names_used(entry)
            else:
                names |= {n.target for n in entry.nodes}
        return names

    def _last_uses(self) -> dict:
        self.buffers = self.g.all_buffers
        self.output_names = self.g.output_names
        last: dict[str, int] = {}
        for pos, entry in enumerate(self.plan):
            for name in _names_used(entry):
                last[name] = pos
        return last

    def _kernel(self, kernel, pool):
        sig = self.signatures[kernel.name]
        if self.triton:
            self.globals[kernel.name] = self.lib[kernel.name]
        else:
            self.globals[kernel.name] = kernel_function(self.lib[kernel.name], kernel.name, [kind for kind, _ in sig])
        origins = []
        for n in kernel.nodes:
            origins.extend(o for o in n.buf.origins if o not in origins)
        self.lines.append(f"    # {kernel.name}: {', '.join(origins)}")
        for node in kernel.nodes:
            buf = node.buf
            if buf.name in kernel.local or buf.target is not buf:
                continue
            shape = self.shape_text(buf.shape)
            key = _py(product(buf.shape) * buf.dtype.itemsize)
            if pool.get(key) and buf.name not in self.output_names:
                old = pool[key].pop()
                if any(s.free_symbols for s in buf.shape):
                    self.lines.append(f"    {buf.name} = _reuse({old}, {shape}, ember.{buf.dtype.name})"
                                      f"  # reuses {old}")
                else:  # _reuse with the strides worked out here
                    strides = self.shape_text(_int_strides(tuple(int(s) for s in buf.shape)))
                    self.lines.append(f"    {buf.name} = _make_tensor({old}._storage, {shape}, {strides}, 0, "
                                      f"ember.{buf.dtype.name}, {old}._device)  # reuses {old}")
            elif self.device_arg and not any(s.free_symbols for s in buf.shape):
                strides = self.shape_text(_int_strides(tuple(int(s) for s in buf.shape)))
                nbytes = int(product(buf.shape)) * buf.dtype.itemsize
                self.lines.append(self._alloc_line(buf.name, nbytes, shape, strides, buf.dtype))
            else:
                self.lines.append(f"    {buf.name} = _empty({shape}, ember.{buf.dtype.name}{self.device_arg})")
            self.allocated.add(buf.name)
            self.bound.add(buf.name)
        args = []
        if self.triton:
            # this kernel's own sizes: a launcher may be shared with an equal kernel of other sizes
            spec = self.specs.get(kernel.name) or self.lib[kernel.name].spec
            # a number argument is the graph's float input, read every call
            args = [what if kind == "ptr" else self.names[what] if kind == "number" else what.name
                    for kind, what in sig]
            rnumel = spec.rnumel if spec.reduction else 1
            if self.native and not _symbolic(spec.xnumel) and not _symbolic(rnumel):
                site = f"_L{self._sites}"
                self._sites += 1
                self.prelude.append(f"{site} = _site({kernel.name}, {int(spec.xnumel)}, {int(rnumel)})")
                self.lines.append(f"    {site}(_ls, {', '.join(args)})")
                return
            args.append(f"xnumel={_py(spec.xnumel)}")
            if spec.reduction:
                args.append(f"rnumel={_py(spec.rnumel)}")
            self.lines.append(f"    {kernel.name}({', '.join(args)})")
            return
        for kind, what in sig:
            if kind == "ptr":
                args.append(f"{what}.data_ptr()")
            elif kind == "size":
                args.append(what.name)
            elif kind == "number":
                args.append(self.names[what])  # the graph's float input, read every call
            else:
                args.append(str(what))
        self.lines.append(f"    {kernel.name}({', '.join(args)})")

    def _alloc_line(self, name: str, nbytes: int, shape: str, strides: str, dtype) -> str:
        """A fresh buffer of a static layout on a plugin device."""
        if self.native:
            return (f"    {name} = _tnew(_tcls, _talloc, {nbytes}, _tdev, _s, _inf, {shape}, {strides}, "
                    f"ember.{dtype.name})")
        return f"    {name} = _empty_on(_dev, {nbytes}, {shape}, {strides}, ember.{dtype.name})"

    def _gemm(self, call: ExternCall) -> bool:
        """``mm``/``bmm`` of static, non-empty operands on a plugin device with a ``gemm`` hook
        (CUDA: cuBLAS) as that call alone into a fresh buffer: the op's checks, views and
        dispatch held the shapes and dtypes the graph was specialized to (~1/3 of the mini-GPT
        forward's host time)."""
        name = getattr(call.fn, "name", None)
        if self.g.device.type == "cpu" or name not in ("mm", "bmm") or call.kwargs or call.mutates:
            return False
        gemm = getattr(get_backend(self.g.device.type), "gemm", None)
        out = call.outputs
        if gemm is None or not isinstance(out, Buffer) or len(call.args) != 2:
            return False
        a, b = call.args
        shapes = [x.shape for x in (a, b, out)]
        dtypes = {(x.buffer if isinstance(x, StridedView) else x).dtype for x in (a, b, out)}
        rank = 2 if name == "mm" else 3
        if any(len(s) != rank or any(d.free_symbols or int(d) <= 0 for d in s) for s in shapes) \
                or len(dtypes) != 1 or out.dtype not in (dt.float16, dt.bfloat16, dt.float32, dt.float64):
            return False
        if tuple(out.strides) != _int_strides(tuple(int(d) for d in out.shape)):
            return False  # the gemm writes a fresh contiguous buffer
        if "_gemm" not in self.globals:
            self.globals["_gemm"] = gemm
        size = tuple(int(d) for d in out.shape)
        nbytes = int(product(out.shape)) * out.dtype.itemsize
        self.lines.append(self._alloc_line(out.name, nbytes, self.shape_text(size),
                                           self.shape_text(_int_strides(size)), out.dtype))
        self.bound.add(out.name)
        batch = 1 if rank == 2 else size[0]
        self.lines.append(f"    _gemm({self.text(a)}, {self.text(b)}, {out.name}, {batch})  # {name}")
        return True

    def _extern(self, call: ExternCall):
        if self._gemm(call):
            return
        fn_name = self.const(call.fn)
        args = [self.text(a) for a in call.args]
        args += [f"{k}={self.text(v)}" for k, v in call.kwargs.items()]
        invoke = f"{fn_name}({', '.join(args)})  # {call.name}"
        outs = call.outputs
        if call.mutates or outs is None:
            self.lines.append(f"    {invoke}")
        elif isinstance(outs, tuple):
            targets = [b.name if isinstance(b, Buffer) else "_" for b in outs]
            self.bound.update(t for t in targets if t != "_")
            self.lines.append(f"    {', '.join(targets)}, = {invoke}")
            for b in outs:
                if isinstance(b, Buffer):
                    self.lines.append(f"    {b.name} = _layout({b.name}, {self._strides_text(b)})")
        else:
            self.bound.add(outs.name)
            self.lines.append(f"    {outs.name} = _layout({invoke.split('  #')[0]}, {self._strides_text(outs)})"
                              f"  # {call.name}")

    def _strides_text(self, buf) -> str:
        """The strides an extern result must have (None: contiguous, the only layout of symbolic sizes)."""
        if any(_symbolic(s) for s in (*buf.shape, *buf.strides)):
            return "None"
        size = tuple(int(d) for d in buf.shape)
        strides = tuple(int(s) for s in buf.strides)
        return "None" if strides == _int_strides(size) else self.shape_text(strides)

    def _output_text(self, obj) -> str:
        if isinstance(obj, TensorValue):
            alias = getattr(obj, "alias", None)
            if alias is None:
                return obj.buffer.name
            if getattr(alias, "input_view", False):
                return (f"_input_view({alias.buffer.name}, {self.shape_text(alias.shape)}, "
                        f"{self.shape_text(alias.strides)}, {_py(alias.offset)})")
            if (alias.shape, alias.strides, alias.offset) == (alias.buffer.shape, alias.buffer.strides, 0):
                return alias.buffer.name
            # the buffer seen with the output's shape: a tensor of its own (no view of the buffer,
            # which nothing else holds)
            return (f"_alias({alias.buffer.name}, {self.shape_text(alias.shape)}, {self.shape_text(alias.strides)}, "
                    f"{_py(alias.offset)})")
        if isinstance(obj, (list, tuple)):
            inner = "".join(self._output_text(o) + ", " for o in obj)
            return f"[{inner}]" if isinstance(obj, list) else f"({inner})"
        return self.text(obj)


def _symbolic(expr) -> bool:
    return isinstance(expr, sympy.Basic) and bool(expr.free_symbols)


def _flat_buffers(obj) -> list:
    if isinstance(obj, TensorValue):
        alias = getattr(obj, "alias", None)
        if alias is not None:
            return [alias.buffer]
        return [obj.buffer] if obj.buffer is not None else []
    if isinstance(obj, (list, tuple)):
        return [b for o in obj for b in _flat_buffers(o)]
    return []


def _names_used(entry) -> set:
    names = set()
    if isinstance(entry, ExternCall):
        from ._scheduler import _extern_buffers

        return set(_extern_buffers(entry))
    for node in entry.nodes:
        names.add(node.target)
        names.update(ld.buf for ld in node.loads)
    return names


def link(source: str, namespace: dict):
    """The ``call`` function of wrapper ``source`` with its names bound from ``namespace``."""
    namespace = dict(namespace)
    exec(compile(source, "<ember inductor wrapper>", "exec"), namespace)
    return namespace["call"]


def build_callable(graph, plan, signatures, lib, triton: bool = False, specs: dict | None = None):
    """(call, wrapper source, the wrapper's globals) for a scheduled graph."""
    writer = WrapperWriter(graph, plan, signatures, lib, triton)
    writer.specs = specs or {}
    source = writer.generate()
    return link(source, writer.globals), source, writer.globals


__all__ = ["InputBuffer", "InputMismatch", "build_callable", "fixed_globals", "kernel_function", "link"]
