"""The capture: a dispatch mode that records ops on lazy tensors instead of running them.

While a compiled function runs, a ``Recorder`` sits on the dispatch-mode stack. Each op call
becomes one recorded node; its outputs are ``LazyTensor`` s whose metadata the op's meta
kernel computed. Real tensors an op meets (arguments, parameters, buffers, globals) become
segment inputs, by identity. Python runs normally, so nothing the program reads in Python
needs a guard: it is simply read again on the next call.

The pending segment is flushed (compiled or taken from the cache, then run on the real
inputs, and every live lazy tensor materialized) when Python needs data (the core's sync
hook: ``item``, ``print``, ``bool`` ...), when an op has no meta kernel, and at return.
A flush before the return is a graph break.

The cache key of a segment is what was recorded: the op sequence with its argument structure
and constants, each input's dtype/device/shape/strides/requires_grad, grad-mode transitions,
and which results are still alive (the graph's outputs).
"""

from __future__ import annotations

import sys
import threading
import weakref

from ember import _C
from ember._src import autocast as _autocast
from ember._src import dispatch, grad_mode
from ember._src import dtypes as _dtypes
from ember._src.device import CPU, META, to_device
from ember._src.ops.indexing.subscripts import DataDependentOutputShape
from ember._src.tensor import Tensor, make_tensor

from . import _module_stack, _unbacked_export
from . import config as _config
from ._break_reasons import DYNAMIC_SHAPE_OPERATOR
from ._exc import Unsupported  # noqa: F401 - re-exported (callers import it from here)
from ._lazy import LazyTensor, abandon, make_lazy, materialize, refresh_from_meta
from ._op_facts import META_CACHE, UNCACHEABLE, from_cached, op_info, remember
from ._user_frames import user_frame

_GRAD = grad_mode.STATE
_TLS = threading.local()
_ACTIVE = [0]  # recorders alive over all threads: the sync hook is installed while > 0
_ACTIVE_LOCK = threading.Lock()


class Ref:
    """A recorded value (a segment input or an op result), numbered in order of appearance.
    One object per number, hashed by identity, so keys built from them hash fast and can never
    equal a user constant."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"%{self.index}"


_REFS: list[Ref] = [Ref(i) for i in range(4096)]


def ref(index: int) -> Ref:
    while index >= len(_REFS):
        _REFS.append(Ref(len(_REFS)))
    return _REFS[index]


# Instructions that only push an operand: a run of them right before the running instruction holds the
# values that instruction takes (``x * 2``: LOAD_FAST x, LOAD_CONST 2, BINARY_OP; ``x.sum(2)``: ... CALL).
_OPERAND_LOADS = frozenset({"LOAD_CONST", "LOAD_SMALL_INT", "LOAD_FAST", "LOAD_NAME", "LOAD_GLOBAL", "LOAD_DEREF",
                            "LOAD_ATTR", "LOAD_METHOD", "PRECALL", "KW_NAMES", "PUSH_NULL", "LOAD_FAST_LOAD_FAST",
                            "LOAD_FAST_BORROW", "LOAD_FAST_BORROW_LOAD_FAST_BORROW", "CACHE"})
_CONSTANT_LOADS = ("LOAD_CONST", "LOAD_SMALL_INT")
_USER_CODE: dict = {}  # code object -> whether it is the program's (``is_user_file``)
_SITE_INTS: dict = {}  # (code object, f_lasti) -> the int constants that instruction takes


def _start(instruction):
    """Where an instruction's source starts, (line, column), or None."""
    p = instruction.positions
    return None if p is None or p.lineno is None or p.col_offset is None else (p.lineno, p.col_offset)


def _ints_of(constant) -> set:
    if type(constant) is int:
        return {constant}
    if type(constant) is tuple:  # a folded tuple constant: ``F.pad(x, (2, 2))``
        return {c for c in constant if type(c) is int}
    return set()


def _site_ints(code, lasti: int) -> frozenset:
    """The int constants the instruction running at ``lasti`` takes as operands: those loaded by the run of
    operand loads right before it, and for a binary op the constant where its expression starts (``3 - t``)."""
    import bisect
    import dis

    ins = list(dis.get_instructions(code))
    # f_lasti may point into the instruction's inline caches (CPython 3.11+), past its own offset
    i = bisect.bisect_right([x.offset for x in ins], lasti) - 1
    found: set = set()
    if i < 0:
        return frozenset()
    for k in range(i - 1, max(i - 12, -1), -1):
        if ins[k].opname not in _OPERAND_LOADS:
            break
        if ins[k].opname in _CONSTANT_LOADS:
            found |= _ints_of(ins[k].argval)
    start = _start(ins[i])
    if ins[i].opname in ("BINARY_OP", "COMPARE_OP") and start is not None:
        for k in range(i - 1, -1, -1):
            where = _start(ins[k])
            if where == start and ins[k].opname in _CONSTANT_LOADS:
                found |= _ints_of(ins[k].argval)
                break
            if where is not None and where < start:
                break
    return frozenset(found)


def _literal_of_user_code(value: int) -> bool:
    """Whether the user's instruction running now takes the int ``value`` as a constant of its source
    (``x * 2``, ``x.sum(2)``): with dynamic shapes such an op argument stays a constant even where it
    equals a size, as Dynamo, which knows where each int came from, keeps it (``x * x.shape[0]`` takes a
    computed int: a symbol). Per instruction the answer is computed once."""
    f = sys._getframe(2)
    while f is not None:
        code = f.f_code
        user = _USER_CODE.get(code)
        if user is None:
            from ._user_frames import is_user_file

            user = is_user_file(code.co_filename)
            if len(_USER_CODE) < 100_000:
                _USER_CODE[code] = user
        if user:
            break
        f = f.f_back
    if f is None:
        return False
    site = (f.f_code, f.f_lasti)
    ints = _SITE_INTS.get(site)
    if ints is None:
        ints = _site_ints(*site)
        if len(_SITE_INTS) < 1_000_000:
            _SITE_INTS[site] = ints
    return value in ints


LITERAL_INT = object()  # key marker of an int argument the user's code spells (``_literal_of_user_code``)


def _mark_literal_items(key, at: int, literal: list, values: set, candidates: set):
    """A list/tuple argument's key with the int items the user's code spells marked ``LITERAL_INT``
    (``x.repeat(2, 1)``); each marked item's position ``(at, j)`` is added to ``literal``, its value to ``values``."""
    marker, items = key
    marked = None
    for j, item in enumerate(items):
        if type(item) is tuple and len(item) == 2 and item[0] is int and item[1] >= 2 \
                and item[1] in candidates and _literal_of_user_code(item[1]):
            if marked is None:
                marked = list(items)
            marked[j] = (LITERAL_INT, item[1])
            literal.append((at, j))
            values.add(item[1])
    return key if marked is None else (marker, tuple(marked))
_LIST = object()  # key markers: a list and a tuple of the same items must not share a key
_TUPLE = object()
_GRAD_EVENT = object()

def _memory_range(storage) -> tuple:
    """(first byte, end) of a storage's memory: two storages over one buffer (two from_numpy of
    the same array) overlap here though they are different objects."""
    start = storage.data_ptr()
    return start, start + storage.nbytes()


def overlaps(ranges: list, storage) -> bool:
    start, end = _memory_range(storage)
    for a, b in ranges:
        if a < end and start < b:
            return True
    return False


def current() -> Recorder | None:
    return getattr(_TLS, "rec", None)


class Recorder(dispatch.DispatchMode):
    """Records one compiled call (see the module docstring). ``owner`` compiles and caches."""

    wants_types = False

    def __init__(self, owner):
        self.owner = owner
        self.want_stacks = owner.want_stacks
        self.decompositions = None  # make_fx(decomposition_table=...): {op or op name: fn}
        self.suspended = False
        self.segment_index = 0
        # Symbolic sizes (SymInt) flow through the meta kernels: the meta cache, keyed by
        # values, would hand back another trace's concrete shapes, so it is off.
        self.symbolic = False
        # What the replay fast path (``_replay``) must know about the whole call.
        self.observer = None  # the Observer profiling this call, if any
        self.broke = False  # a flush before the return happened
        self.went_eager = False  # some op ran for real inside the call (suspended capture)
        self.synced = False  # Python asked for tensor data or generator state
        self.last_run = None  # the runner and live lazy tensors of the last flush
        self.last_lazies = ()
        self._reset()

    def _reset(self) -> None:
        # node index -> positions of the int arguments the user's code gave as constants (``x * 2``)
        self.literal_args: dict = {}
        self.literal_values: set = set()  # their values (``_dynamic`` derives ``value * size`` from them)
        # the ints a size symbol could stand for: the inputs' sizes (and the number arguments'), the only
        # values whose origin matters, so the only ones looked up in the user's bytecode
        self.size_values: set = set()
        self.inputs: list = []  # real tensors, in order of first use
        self.input_index: dict = {}  # id(tensor) -> value index
        self.input_metas: dict = {}  # value index -> meta twin
        self.input_storages: dict = {}  # id(storage) -> meta storage
        self.input_ranges: list = []  # address ranges of the inputs' storages
        self.written: list = []  # address ranges of real storages a pending op writes
        self.values: list = []  # per value index: None (input) or a weakref to its lazy tensor
        self.value_meta: list = []  # per value index: (meta tensor, device, requires_grad) or None
        self.nodes: list = []  # (op, arg templates, kwarg templates, first value, outputs or -1)
        self.key: list = []
        self.has_random = False
        self.grad_mode = None  # grad mode of the last recorded op
        self.inference_mode = False
        self.start_grad_mode = None
        self.start_inference_mode = False
        self.stacks: list = []  # user source line per node (for explain / logs), when asked
        self.module_stacks: list = []  # per node, the module calls running (_module_stack), when asked
        self.eager_autograd = False  # the next flush runs op by op (create_graph=True follows)

    # -- entering / leaving ---------------------------------------------------------------
    def __enter__(self):
        self.prev = getattr(_TLS, "rec", None)
        _TLS.rec = self
        _autocast.STATE.capturing += 1
        with _ACTIVE_LOCK:
            _ACTIVE[0] += 1
            dispatch._SYNC_HOOK[0] = _hooks.sync_hook
            dispatch._EAGER_REGION_HOOK[0] = _hooks.eager_region_hook
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            _TLS.rec = self.prev
            _autocast.STATE.capturing -= 1
            with _ACTIVE_LOCK:
                _ACTIVE[0] -= 1
                if _ACTIVE[0] == 0:
                    dispatch._SYNC_HOOK[0] = None
                    dispatch._EAGER_REGION_HOOK[0] = None

    # -- arguments --------------------------------------------------------------------------
    def _lift(self, t: Tensor) -> int:
        v = len(self.values)
        self.values.append(None)
        self.value_meta.append(None)
        self.inputs.append(t)
        self.input_index[id(t)] = v
        storage = t._storage
        sid = id(storage)
        meta_storage = self.input_storages.get(sid)
        if meta_storage is None:
            meta_storage = _C.Storage.meta(storage.nbytes())
            self.input_storages[sid] = meta_storage
            self.input_ranges.append(_memory_range(storage))
        self.input_metas[v] = make_tensor(meta_storage, t._shape, t._stride, t._offset, t.dtype, META)
        self.size_values.update(s for s in t._shape if type(s) is int)  # (hashing a SymInt would guard it)
        self.key.append((t.dtype, t._device, t._shape, t._stride, t._offset, t._requires_grad))
        return v

    def _conv(self, a):
        """(template, key part, meta argument) of one op argument."""
        if isinstance(a, Tensor):
            if type(a) is LazyTensor:
                d = a.__dict__
                r = _REFS[d["_lz_v"]] if d["_lz_v"] < 4096 else ref(d["_lz_v"])
                return r, r, d["_lz_meta"]
            v = self.input_index.get(id(a))
            if v is None:
                v = self._lift(a)
            r = ref(v)
            return r, r, self.input_metas[v]
        t = type(a)
        if t is float:
            return a, (float, a.hex()), a
        if t is int or t is bool:
            return a, (t, a), a
        if t is list or t is tuple or isinstance(a, list):  # fx's immutable_list (an Interpreter's args) too
            temps, keys, metas = [], [], []
            for b in a:
                x, k, m = self._conv(b)
                temps.append(x)
                keys.append(k)
                metas.append(m)
            if t is tuple:
                return tuple(temps), (_TUPLE, tuple(keys)), tuple(metas)
            return temps, (_LIST, tuple(keys)), metas
        if a is None or t is str:
            return a, a, a
        if t is dict or isinstance(a, dict):
            temps, keys, metas = {}, [], {}
            for name, b in a.items():
                x, k, m = self._conv(b)
                temps[name] = x
                keys.append((name, k))
                metas[name] = m
            return temps, (dict, tuple(keys)), metas
        if t is slice:
            return a, (slice, self._conv(a.start)[1], self._conv(a.stop)[1], self._conv(a.step)[1]), a
        try:
            hash(a)
            return a, (t, a), a
        except TypeError:
            return a, (t, id(a)), a  # the object itself stays referenced by the cached graph

    # -- the op hook ----------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.suspended:
            return func(*args, **kwargs)
        if dispatch._SUBCLASS_DISPATCH[0]:
            owner = _dispatching_subclass(args, kwargs)
            if owner is not None and getattr(self.owner, "traces_inputs", False):
                # make_fx / export: the subclass decides what the op means (vmap's batching rule)
                # and its inner ops, on the traced tensors it wraps, come back here and are recorded.
                stack = dispatch._MODES.stack
                stack.append(self)
                try:
                    handled, result = dispatch._try_subclass_dispatch(func, args, kwargs)
                finally:
                    stack.pop()
                if handled:
                    return result
            if owner is not None:
                # A tensor subclass with its own dispatch (vmap's BatchedTensor, DTensor) decides what
                # the op means: it runs eagerly (a break), its inner ops on real tensors.
                return self._eager_op(func, args, kwargs, f"ember.ops.{func.name} on a {owner.__name__}")
        if self.decompositions is not None:
            decomposition = self.decompositions.get(func) or self.decompositions.get(func.name)
            if decomposition is not None:
                dispatch.DispatchMode.__enter__(self)  # the decomposition's own ops are recorded
                try:
                    out = decomposition(*args, **kwargs)
                finally:
                    dispatch.DispatchMode.__exit__(self, None, None, None)
                if out is not NotImplemented:
                    return out
        targs, keys, margs, sig = [], [], [], []
        literal: list = []
        device = None
        rg = False
        refs = _REFS
        cacheable = func not in UNCACHEABLE and not self.symbolic
        for a in args:
            ta = type(a)
            if ta is LazyTensor:  # the common case first, inlined
                d = a.__dict__
                v = d["_lz_v"]
                r = refs[v] if v < len(refs) else ref(v)
                targs.append(r)
                keys.append(r)
                m = d["_lz_meta"]
                margs.append(m)
                sig.append((m.dtype, m._shape, m._stride, m._offset))
                if device is None:
                    device = a._device
                if a._requires_grad:
                    rg = True
            elif ta is float:
                targs.append(a)
                k = (float, a.hex())
                keys.append(k)
                margs.append(a)
                sig.append(k)
            elif ta is int or ta is bool:
                k = (ta, a)
                if ta is int and a >= 2 and a in self.size_values and _literal_of_user_code(a):
                    # keyed apart from a computed int: dynamic shapes keep it a constant (``_dynamic``)
                    literal.append(len(targs))
                    self.literal_values.add(a)
                    keys.append((LITERAL_INT, a))
                else:
                    keys.append(k)
                targs.append(a)
                margs.append(a)
                sig.append(k)
            else:
                x, k, m = self._conv(a)
                keys.append(_mark_literal_items(k, len(targs), literal, self.literal_values, self.size_values)
                            if ta is list or ta is tuple else k)
                targs.append(x)
                margs.append(m)
                if isinstance(a, Tensor):
                    sig.append((m.dtype, m._shape, m._stride, m._offset))
                    if device is None:
                        device = a._device
                    if a._requires_grad:
                        rg = True
                elif ta is list or ta is tuple:
                    sig.append(k)
                    for b in a:
                        if isinstance(b, Tensor):
                            device = device or b._device
                            rg = rg or b._requires_grad
                            cacheable = False  # the key holds Refs, not the tensors' metadata
                else:
                    sig.append(k)
        tkwargs, mkwargs, kwkeys = {}, {}, ()
        if kwargs:
            kk = []
            for name, a in kwargs.items():
                x, k, m = self._conv(a)
                tkwargs[name] = x
                mkwargs[name] = m
                if type(a) is int and a >= 2 and a in self.size_values and _literal_of_user_code(a):  # sum(dim=2)
                    literal.append(("kw", name))
                    self.literal_values.add(a)
                    k = (LITERAL_INT, a)
                kk.append((name, k))
                if isinstance(a, Tensor):
                    device = device or a._device
                    rg = rg or a._requires_grad
                    cacheable = False
            kwkeys = tuple(kk)
            dev = kwargs.get("device")
            if dev is not None:
                device = to_device(dev)
                mkwargs["device"] = META
        if device is None:
            device = CPU
        meta_key = None
        out = None
        if cacheable:
            meta_key = (func, _dtypes._default_dtype, tuple(sig), kwkeys)
            cached = META_CACHE.get(meta_key)
            if cached is not None:
                out = from_cached(cached, margs)
        if out is None:
            try:
                out = func.call_kernel(margs, mkwargs)
            except NotImplementedError as exc:
                out = None
                if isinstance(exc, DataDependentOutputShape) and _unbacked_export.EXPORT_ENV[0] is not None \
                        and getattr(self.owner, "traces_inputs", False):
                    # export: the data-dependent size is an unbacked symbol (``u0``)
                    out = _unbacked_export.unbacked_output(func, margs)
                if out is None:
                    reason = f"ember.ops.{func.name} cannot run on the meta device ({exc})"
                    if isinstance(exc, DataDependentOutputShape):
                        reason = DYNAMIC_SHAPE_OPERATOR + func.name
                        if (self.owner.fullgraph or _config.capture_dynamic_output_shape_ops) \
                                and not getattr(self.owner, "traces_inputs", False):
                            # PyTorch 2.13 keeps nonzero / x[mask] / unique in a fullgraph=True graph
                            # (unbacked sizes); ember computes them, the split before is not a break.
                            reason = None
                    return self._eager_op(func, args, kwargs, reason)
                self.symbolic = True
                meta_key = None
            except Exception as exc:
                # A meta kernel that needs data, or bad input: the real op decides (it raises
                # eager's exception, or computes what the meta kernel could not).
                as_dynamo = type(exc) is RuntimeError and not getattr(self.owner, "traces_inputs", False)
                try:
                    if self.owner.fullgraph:
                        raise
                    return self._eager_op(func, args, kwargs,
                                          f"ember.ops.{func.name}: its meta kernel raised {type(exc).__name__}: {exc}")
                except RuntimeError as real:
                    if not as_dynamo or type(real) is not RuntimeError:
                        raise
                    # a compiled function's bad op (shapes that do not broadcast, mm of mismatched sizes):
                    # PyTorch's Dynamo raises it from its fake-tensor run as a TorchRuntimeError
                    from ._exc import TorchRuntimeError

                    raise TorchRuntimeError(
                        "RuntimeError when making fake tensor call\n  Explanation: Dynamo failed to run FX node with "
                        f"fake tensors: call_function ember.ops.{func.name}: got RuntimeError({str(real)!r})") from real
            if meta_key is not None:
                remember(meta_key, out, margs)
        if type(out) is Tensor and out._device is META:
            for m in margs:
                if m is out:
                    break
            else:  # the common case: one fresh result (inlined; this runs for every op)
                written, random, differentiable = op_info(func)
                grad = _GRAD.grad_enabled
                if grad is not self.grad_mode or _GRAD.inference is not self.inference_mode:
                    self._grad_event(grad)
                if written:
                    self._note_written(written, args)
                if random:
                    self.has_random = True
                first = len(self.values)
                lazy = make_lazy(out, device, rg and grad and differentiable
                                 and (out.dtype.is_floating_point or out.dtype.is_complex), first)
                self.values.append(weakref.ref(lazy))
                self.value_meta.append((out, device, lazy._requires_grad))
                if literal:
                    self.literal_args[len(self.nodes)] = literal
                self.nodes.append((func, targs, tkwargs, first, -1))
                self.key.append((func, tuple(keys), kwkeys))
                if self.want_stacks:
                    self.stacks.append(user_frame())
                    self.module_stacks.append(_module_stack.CURRENT[0])
                return lazy
        if isinstance(out, Tensor):
            outs, multi = (out,), False
        elif isinstance(out, (tuple, list)) and all(isinstance(o, Tensor) or o is None for o in out):
            outs, multi = out, True
        elif out is None and (op_info(func)[0] or "side_effect" in func.tags):
            # an op that only writes its arguments (a custom op "-> ()"), or a marker kept for its
            # place in the graph (tag "side_effect": pipelining's _pipe_split)
            outs, multi = (), True
        else:
            return self._eager_op(func, args, kwargs, f"ember.ops.{func.name} returns a non-tensor value")
        written, random, differentiable = op_info(func)
        # In-place ops hand back an argument: find it; a real tensor whose layout an op
        # changes (t_, unsqueeze_ ...) cannot wait for the flush.
        results = []
        for o in outs:
            orig = None
            if o is not None and o._device is META:
                for i, m in enumerate(margs):
                    if m is o:
                        orig = args[i]
                        break
            results.append(orig)
        for i, orig in enumerate(results):
            if orig is not None and type(orig) is not LazyTensor:
                o = outs[i]
                if o._shape != orig._shape or o._stride != orig._stride or o._offset != orig._offset:
                    return self._eager_op(func, args, kwargs, f"ember.ops.{func.name} changes an input's layout")
        grad = _GRAD.grad_enabled
        if grad is not self.grad_mode or _GRAD.inference is not self.inference_mode:
            self._grad_event(grad)
        if written:
            self._note_written(written, args)
        if random:
            self.has_random = True
        rg = rg and grad and differentiable
        first = len(self.values)
        values = self.values
        for i, o in enumerate(outs):
            orig = results[i]
            if orig is not None:
                if type(orig) is LazyTensor:
                    if orig._shape is not o._shape or orig._stride is not o._stride:
                        refresh_from_meta(orig)
                    if rg and not orig._requires_grad and (o.dtype.is_floating_point or o.dtype.is_complex):
                        orig._requires_grad = True
                continue
            if o is None:
                continue
            if o._device is not META:  # a kernel computed a real value (no tensor told it the device)
                o = make_tensor(_C.Storage.meta(o._storage.nbytes()), o._shape, o._stride, o._offset, o.dtype, META)
            org = rg and (o.dtype.is_floating_point or o.dtype.is_complex)
            results[i] = make_lazy(o, device, org, first + i)
        value_meta = self.value_meta
        for i in range(len(outs)):
            r = results[i]
            if type(r) is LazyTensor and r.__dict__.get("_lz_v") == first + i:
                values.append(weakref.ref(r))
                value_meta.append((r.__dict__["_lz_meta"], device, r._requires_grad))
            else:
                values.append(None)
                value_meta.append(None)
        if literal:
            self.literal_args[len(self.nodes)] = literal
        self.nodes.append((func, targs, tkwargs, first, len(outs) if multi else -1))
        self.key.append((func, tuple(keys), kwkeys))
        if self.want_stacks:
            self.stacks.append(user_frame())
            self.module_stacks.append(_module_stack.CURRENT[0])
        if not multi:
            return results[0]
        if out is None:
            return None
        return tuple(results) if isinstance(out, tuple) else results

    def _grad_event(self, grad: bool) -> None:
        """Grad mode or inference mode differs from the last recorded op's."""
        inference = _GRAD.inference
        if self.grad_mode is None:
            self.start_grad_mode = grad
            self.start_inference_mode = inference
        else:
            self.nodes.append((_GRAD_EVENT, (grad, inference), None, 0, -1))
        self.key.append((_GRAD_EVENT, grad, inference))
        self.grad_mode = grad
        self.inference_mode = inference

    def _note_written(self, written, args) -> None:
        for pos in written:
            if pos < len(args) and isinstance(args[pos], Tensor) and type(args[pos]) is not LazyTensor:
                self.written.append(_memory_range(args[pos]._storage))

    def record_call(self, fn, args, what: str):
        """Records a Python function over tensors (``detach``) as a node of its own."""
        return self.__torch_dispatch__(_hooks._PythonOp(fn, what), (), args, {})

    # -- breaks and flushes ------------------------------------------------------------------
    def _eager_op(self, func, args, kwargs, reason: str | None):
        if not self.nodes and getattr(self.owner, "traces_inputs", False):
            # make_fx: an op that cannot be traced is an error even as the first op (flush has
            # nothing to run, so it would not report the break; the op would run on the example).
            self.owner.note_break(reason, user_frame(), self)
        self.flush(reason)
        self.went_eager = True
        self.suspended = True
        try:
            return func(*args, **kwargs)
        finally:
            self.suspended = False

    def flush(self, reason: str | None = None, final: bool = False) -> None:
        """Runs the pending segment; ``reason`` None is the function's return (not a break).
        ``final``: the recorder is done (no reset needed afterwards)."""
        if not self.nodes:
            if not final:
                self._reset()
            return
        if reason is not None:
            self.broke = True
            self.owner.note_break(reason, user_frame(), self)
        elif not final and getattr(self.owner, "listener", None) is not None:
            # a split PyTorch keeps in one graph (.item() under capture_scalar_outputs ...)
            self.owner.listener.silent_splits += 1
        live = [v for v, r in enumerate(self.values) if r is not None and r() is not None]
        lazies = [self.values[v]() for v in live]
        # Compiling and running happen outside the capture: off the mode stack, and suspended
        # (so a mode below that calls an op does not reach this recorder either).
        stack = dispatch._MODES.stack
        pos = None
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is self:
                pos = i
                del stack[i]
                break
        self.suspended = True
        observer = self.observer
        if observer is not None:
            sys.setprofile(None)  # compiling is not the program's Python
        prev = _GRAD.grad_enabled, _GRAD.inference
        # The recording already holds autocast's casts: the graph runs with autocast off.
        autocast = dispatch._AUTOCAST_STATE if dispatch._AUTOCAST_ON[0] else None
        autocast_prev = autocast.active if autocast is not None else None
        try:
            if autocast is not None:
                autocast.active = False
            run = self.owner.lookup(self, live)
            _GRAD.grad_enabled, _GRAD.inference = self.start_grad_mode, self.start_inference_mode
            outs = run(self.inputs)
            self.last_run, self.last_lazies = run, lazies
        finally:
            if observer is not None:
                sys.setprofile(observer.profile)
            _GRAD.grad_enabled, _GRAD.inference = prev
            if autocast is not None:
                autocast.active = autocast_prev
            self.suspended = False
            if pos is not None:
                stack.insert(pos, self)
        for lazy, real in zip(lazies, outs):
            materialize(lazy, real)
        self.segment_index += 1
        if not final:
            self._reset()

    def discard(self) -> None:
        """Drops the pending segment unrun; its live lazy tensors can never get a value."""
        for r in self.values:
            lazy = r() if r is not None else None
            if lazy is not None and type(lazy) is LazyTensor:
                abandon(lazy)
        self._reset()


def _dispatching_subclass(args, kwargs):
    """The first Tensor subclass among the arguments that defines ``__torch_dispatch__``, or None."""
    for a in (*args, *kwargs.values()):
        for t in (a if type(a) in (list, tuple) else (a,)):
            ta = type(t)
            if ta is not Tensor and ta is not LazyTensor and isinstance(t, Tensor) \
                    and getattr(ta, "__torch_dispatch__", None) is not None:
                return ta
    return None


from . import _hooks  # noqa: E402 - it imports this module (the hooks read the current recorder)
