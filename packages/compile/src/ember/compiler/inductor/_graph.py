"""GraphLowering: walks an fx graph and turns it into buffers, kernels-to-be and extern calls.

Every call_function node is lowered by its row in ``LOWERINGS``; an op without one runs its
decomposition (a Python function over ember ops) with meta stand-ins under a dispatch mode that
lowers each inner op call; a Python callable target (an ember function, a method) runs the
same way. Whatever still cannot be lowered becomes an *extern call*: ember's eager op on
realized buffers, in graph order (matmul and conv always take this path: ember's kernels).
"""

from __future__ import annotations

import operator

import sympy

from ember._src import dtypes as dt
from ember._src.device import CPU, META, to_device
from ember._src.dispatch import DispatchMode, Op
from ember._src.shapes import contiguous_strides as _int_strides
from ember._src.tensor import Tensor, new_empty_tensor

from ..decompositions import DECOMPOSITIONS
from . import (
    _lowering_reduce,  # noqa: F401 - registers the reduction rows
    _lowering_views,  # noqa: F401 - registers the view rows
    config,
)
from ._ir import (
    Buffer,
    ComputedBuffer,
    Const,
    ExternBuffer,
    InputBuffer,
    Load,
    ReductionBuffer,
    TensorValue,
    number_input,
    product,
    strided_index,
    sym,
    walk,
)
from ._ir import (
    compute_dtype as compute_of,
)
from ._lowering import LOWERINGS, Unsupported, _loader_for, broadcast_shape
from ._lowering_views import derive_layout

MAX_EXPR = 400  # an expression past this size is stored (keeps kernels compilable)
# A graph output a reduction also reads is stored before the reduction past this expression size
# (it is stored anyway; a few ops are cheaper to recompute in the reduction's loop, and then stay
# bit for bit the values their other consumers compute beside them)
SHARED_OUTPUT_EXPR = 8


class GraphFallback(Exception):
    """The whole graph runs eagerly (a case whose aliasing the lowering cannot keep)."""


class StridedView:
    """An extern argument: ``buffer`` seen with another shape, strides and offset (no copy)."""

    def __init__(self, buffer, shape, strides, offset):
        self.buffer, self.shape, self.strides, self.offset = buffer, shape, strides, offset


class ExternCall:
    """``fn(*args, **kwargs)`` run by ember at its place in the graph; buffers stand for tensors."""

    def __init__(self, name: str, fn, args, kwargs, outputs, mutates: bool):
        self.name, self.fn, self.args, self.kwargs = name, fn, args, kwargs
        self.outputs = outputs  # a Buffer, a tuple of Buffer/None, or None
        self.mutates = mutates


def _is_mutating(op) -> bool:
    return isinstance(op, Op) and ("inplace" in op.tags or "(a!)" in op.schema)


class GraphLowering:
    def __init__(self, gm, example_inputs):
        self.gm = gm
        self.example_inputs = list(example_inputs)
        self.items: list = []  # ComputedBuffer / ReductionBuffer / ExternCall, in run order
        self.inputs: list[InputBuffer | None] = []
        self.input_scalars: dict[int, sympy.Symbol] = {}
        self.symbols: dict[sympy.Symbol, tuple] = {}  # symbol -> (input position, dim) binding it
        self.hints: dict[sympy.Symbol, int] = {}
        # position -> value of each number input: the lowering reads it (an output shape such as
        # ``x[:n]``'s, a float baked into a kernel), so the wrapper checks it every call
        self.number_inputs: dict[int, object] = {}
        self.constants: dict[str, Tensor] = {}
        self.constant_buffers: dict[str, InputBuffer] = {}
        self.output_template = None
        self.outputs: list = []
        # outputs may be returned over a buffer they view (compile's wrapper knows how; export's
        # AOTI writers take every output from a buffer of its own)
        self.alias_outputs = False
        # outputs that view an input return that view (not a copy): graphs not run inside an
        # autograd Function (AOT's forward keeps copies; its outputs are the Function's own)
        self.input_views = False
        self.current = ""
        self._count = 0
        self._live: list = []  # lazy values a later mutation must not overtake
        # where the graph's tensors live (its kernels run there); set by the first tensor input
        self.device = CPU
        self._device_seen = False

    # -- names and hints ---------------------------------------------------------------------

    def _check_device(self, t) -> None:
        """Every tensor input on one device, a CPU one or one whose kernels Triton can write."""
        device = t._device
        if not self._device_seen:
            if device.type == "meta":
                raise GraphFallback("meta input")
            self.device, self._device_seen = device, True
        elif device != self.device:
            raise GraphFallback(f"inputs on {self.device} and {device}")

    def _check_extern_device(self, args, kwargs) -> None:
        """An extern op's result must live where the kernels that read it run: a copy to
        another device, or a factory on another (the default) device, runs the graph eagerly."""
        device = kwargs.get("device") if isinstance(kwargs, dict) else None
        if device is None:
            if any(isinstance(a, TensorValue) for a in _flatten([args, kwargs])):
                return  # computed from the graph's tensors: on their device
            if any(isinstance(a, Tensor) for a in _flatten([args, kwargs])):
                return
        if to_device(device) != self.device:
            raise GraphFallback(f"an extern op makes a tensor on {to_device(device)}, the graph runs on {self.device}")

    def new_name(self, prefix="buf") -> str:
        self._count += 1
        return f"{prefix}{self._count - 1}"

    def hint(self, expr) -> int:
        return int(sympy.sympify(expr).subs(self.hints))

    def hint_shape(self, shape) -> tuple:
        return tuple(self.hint(s) for s in shape)

    # -- the walk ----------------------------------------------------------------------------

    def run(self):
        env: dict = {}
        placeholders = 0
        for node in self.gm.graph.nodes:
            self.current = node.name
            if node.op == "placeholder":
                env[node] = self._placeholder(node, placeholders)
                placeholders += 1
            elif node.op == "get_attr":
                env[node] = self._constant(node)
            elif node.op in ("call_function", "call_method"):
                args = _map(node.args, env)
                kwargs = _map(node.kwargs, env)
                if node.op == "call_method":
                    fn = _MethodCall(node.target)
                else:
                    fn = node.target
                inherited = set()
                for a in _flatten([args, kwargs]):
                    if isinstance(a, TensorValue) and a.buffer is None:
                        inherited |= getattr(a, "origins", set())
                value = self.call(fn, args, kwargs)
                _tag_origins(value, node.name, inherited)
                for v in _flatten([value]):
                    if isinstance(v, TensorValue):  # its consumers in the graph (see store_shared)
                        v.graph_users = len(node.users)
                        v.graph_output = any(u.op == "output" for u in node.users)
                env[node] = value
                self._live.append((node, value))
            elif node.op == "output":
                self.output_template = _map(node.args[0], env)
                self.outputs = _flatten(self.output_template)
            else:
                raise GraphFallback(f"node kind {node.op}")
        if self.alias_outputs:
            self._alias_outputs()
        for out in self.outputs:
            if isinstance(out, TensorValue) and getattr(out, "alias", None) is None:
                self.realize(out)

    def _alias_outputs(self) -> None:
        """Marks the graph outputs returned as a tensor over a stored buffer instead of a copy.

        An output that is a view of a buffer this graph computes (a kernel's or a GEMM's result)
        and that lays its elements out as a contiguous tensor of its shape, over all of that
        buffer, is that buffer seen with the output's shape: a weight gradient
        ``transpose(transpose(mm))`` (AOT backward), the logits' ``view`` of the head's ``addmm``.
        Storing it again cost a copy per output (the mini-GPT step: ~3.5 ms of its backward).
        Only when no other output is, or views, the same buffer (two outputs never share memory,
        as with the copies), and never over an input or a view op's result (that would alias
        memory the caller owns)."""
        values = [out for out in self.outputs if isinstance(out, TensorValue)]
        claims: dict = {}
        for out in values:
            if out.buffer is not None:
                claims.setdefault(out.buffer.name, []).append(None)
                continue
            layout = self._stored_layout(out)
            if layout is None:
                continue
            buf, shape, strides, offset = layout
            if isinstance(buf, InputBuffer) and self.input_views and not getattr(buf, "host_scalar", False):
                # a view of an input comes back as that view of the caller's tensor (its ``_base``
                # the input, writes through it seen by the input), as eager and PyTorch's
                # compiled graphs return it: not a copy
                out.alias = StridedView(buf, shape, strides, offset)
                out.alias.input_view = True
                continue
            if not _fresh_memory(buf, self.items):
                continue
            try:
                size = tuple(int(s) for s in shape)
                want = tuple(int(s) for s in strides)
                whole = int(product(buf.shape))
            except TypeError:
                continue  # symbolic: the copy keeps its layout question out of the wrapper
            if want != _int_strides(size) or int(product(size)) != whole or whole == 0:
                continue
            claims.setdefault(buf.name, []).append((out, StridedView(buf, shape, strides, offset)))
        for entries in claims.values():
            if len(entries) == 1 and entries[0] is not None:
                out, view = entries[0]
                out.alias = view

    def _placeholder(self, node, position):
        example = self.example_inputs[position] if position < len(self.example_inputs) else None
        val = node.meta.get("val", example)
        if isinstance(example, Tensor):
            if example.dtype.is_complex:
                raise GraphFallback("complex input")
            # a 0-dim CPU tensor beside device tensors (a Python number made a tensor, as eager
            # allows it): the wrapper moves it to the graph's device before the kernels run
            host_scalar = example.dim() == 0 and example._device.type == "cpu"
            if not host_scalar:
                self._check_device(example)
            shape = tuple(sym(s) for s in (val.shape if val is not None else example.shape))
            strides = tuple(sym(s) for s in (val.stride() if hasattr(val, "stride") else example.stride()))
            if not any(s.free_symbols for s in shape + strides):
                # static: specialize to this very input (a re-specialization brings new shapes)
                shape = tuple(sym(s) for s in example.shape)
                strides = tuple(sym(s) for s in example.stride())
            for d, (s, actual) in enumerate(zip(shape, example.shape)):
                if isinstance(s, sympy.Symbol) and s not in self.symbols:
                    self.symbols[s] = (position, d)
                    self.hints[s] = int(actual)
            buf = InputBuffer(f"arg{position}_{node.name}", shape, example.dtype, strides=strides)
            buf.position = position
            buf.host_scalar = host_scalar
            self.inputs.append(buf)
            return buf.as_value(node.name)
        self.inputs.append(None)
        if isinstance(example, (int, float)):
            self.number_inputs[position] = example
            if type(example) is float:
                return number_input(example, position)
        expr = None
        if val is not None and not isinstance(val, (float, bool)) and hasattr(val, "node"):
            # compile's SymInt holds its sympy expression as ``node`` itself
            expr = val.node if isinstance(val.node, sympy.Basic) else sym(val)
        if isinstance(expr, sympy.Symbol):
            self.symbols.setdefault(expr, (position, None))
            self.hints[expr] = int(example)
            return expr
        return example

    def _constant(self, node):
        value = self.gm
        for part in node.target.split("."):
            value = getattr(value, part)
        if not isinstance(value, Tensor):
            return value
        if value.dtype.is_complex:
            raise GraphFallback("complex constant")
        if value.dim() == 0 and value._device.type == "cpu" and self._device_seen and self.device.type != "cpu":
            # a Python number make_fx kept as a 0-dim CPU constant (masked_fill's value) in a device
            # graph: its value is a literal of the kernels
            const = Const(value.item(), compute_of(value.dtype))
            return TensorValue((), value.dtype, lambda idx: const, origin=node.name)
        self._check_device(value)
        buf = InputBuffer(f"const_{node.name}", value.shape, value.dtype, strides=value.stride())
        buf.position = None
        self.constants[buf.name] = value
        self.constant_buffers[buf.name] = buf
        return buf.as_value(node.name)

    # -- one call ----------------------------------------------------------------------------

    def call(self, fn, args, kwargs):
        if fn is operator.getitem and isinstance(args[0], (tuple, list)):
            return args[0][args[1]]
        if isinstance(fn, Op):
            return self.call_op(fn, args, kwargs)
        return self._run_traced(fn, args, kwargs)

    def call_op(self, op: Op, args, kwargs):
        if "view" in op.tags:
            for a in _flatten([args]):
                if isinstance(a, TensorValue):
                    a.viewed = True  # an in-place op on it later must reach the view too
        if _is_mutating(op) and args and isinstance(args[0], TensorValue):
            done = self._lower_inplace(op, args, kwargs)
            if done is not None:
                return done
        lowering = LOWERINGS.get(op.name)
        if lowering is not None:
            # The op's meta kernel validates the call (eager's errors stay eager's) and gives
            # the shapes the lowering must agree with.
            try:
                expected = op(*self._meta(args), **self._meta(kwargs))
            except Exception:
                return self.extern(op, args, kwargs)
            try:
                value = lowering(self, *args, **kwargs)
                if self._agrees(value, expected):
                    return value
            except (Unsupported, TypeError, ValueError):
                pass
        decomposition = DECOMPOSITIONS.get(op.name)
        if decomposition is not None:
            try:
                return self._run_traced(decomposition, args, kwargs, fallback=False)
            except Unsupported:
                pass
        return self.extern(op, args, kwargs)

    def _lower_inplace(self, op, args, kwargs):
        """``x.op_(...)`` as the functional op, when ``x`` is a value only this graph sees.

        A graph-local value nobody took a view of is rebound to the result (consumers so far
        keep the value they loaded); an input is updated by a kernel storing into it. Anything
        else (a view of an input, a value with views) is left to the extern path.
        """
        functional = LOWERINGS.get(op.name[:-1]) if op.name.endswith("_") else None
        dst = args[0]
        # A view (``x[1:].mul_(2)``) must write through to its source: rebinding the view's value
        # would drop the write, so views take the extern path (which falls back to eager for them).
        if functional is None or getattr(dst, "viewed", False) or getattr(dst, "view_source", None) is not None:
            return None
        try:
            expected = op(*self._meta(args), **self._meta(kwargs))
            value = functional(self, *args, **kwargs)
        except Exception:
            return None
        if not isinstance(value, TensorValue) or not self._agrees(value, expected.to(value.dtype)) \
                or self.hint_shape(value.shape) != self.hint_shape(dst.shape):
            return None
        if dst.buffer is not None and isinstance(dst.buffer, (InputBuffer, ExternBuffer)):
            if not _is_plain(dst):
                return None
            return self.mutate(dst, value)
        if dst.buffer is None or isinstance(dst.buffer, ComputedBuffer):
            compute = dst.dtype
            result = TensorValue(dst.shape, dst.dtype, _loader_for(self, value, dst.shape, compute_of(compute)))
            dst.loader, dst.buffer, dst.layout = result.loader, None, None
            dst._size = None
            dst._full_reads = None
            dst.reads = 0
            return dst
        return None

    def _meta(self, obj):
        """``obj`` with meta stand-ins for values (and factory devices moved to meta)."""
        meta = _map_values(obj, self._meta_value)
        if isinstance(meta, dict) and meta.get("device") is not None:
            meta = {**meta, "device": META}
        return _subs_symbols(meta, self.hints)

    def _meta_value(self, v: TensorValue):
        """A meta stand-in of ``v``: laid out as its buffer holds it when it has a static strided
        layout (an extern op's meta then gives the result's layout as the device kernel makes it:
        attention's output in the order of its query's dims), else contiguous."""
        shape = self.hint_shape(v.shape)
        layout = v.layout
        if layout is not None and len(layout[2]) == len(shape):
            try:
                strides = tuple(int(st) for st in layout[2])
            except TypeError:
                strides = None
            if strides is not None and _non_overlapping(shape, strides):
                from ember._src.ops.creation.buffers import empty_strided

                return empty_strided(shape, strides, dtype=v.dtype, device=META)
        return new_empty_tensor(shape, v.dtype, META)

    def _agrees(self, value, expected) -> bool:
        for v, e in zip(_flatten([value]), _flatten([expected])):
            if isinstance(e, Tensor):
                if not isinstance(v, TensorValue) or v.dtype is not e.dtype:
                    return False
                if self.hint_shape(v.shape) != tuple(e.shape):
                    return False
        return True

    def _run_traced(self, fn, args, kwargs, fallback=True):
        mode = _LoweringMode(self)
        done = len(self.items)
        try:
            meta_args = mode.to_meta(args)
            meta_kwargs = mode.to_meta(kwargs)
            with mode:
                result = fn(*meta_args, **meta_kwargs)
            return mode.to_values(result)
        except GraphFallback:
            raise
        except Exception as exc:  # data-dependent Python, an op the meta kernel rejects, ...
            # what the attempt lowered so far feeds nothing now: drop it (no dead kernels)
            if not any(isinstance(item, ExternCall) and item.mutates for item in self.items[done:]):
                del self.items[done:]
            if not fallback:
                raise Unsupported(str(exc)) from exc
            return self.extern(fn, args, kwargs)

    # -- buffers -----------------------------------------------------------------------------

    def use(self, value: TensorValue) -> TensorValue:
        """Notes one more consumer of ``value``; stores it when recomputing would cost too much.

        Returns a snapshot: the consumer keeps loading ``value`` as it is now, even if ``value``
        gets a buffer later (that buffer is written after this consumer may already run).
        """
        value.reads += 1
        if value.buffer is None:
            self._rebase_on_stored_source(value)
        if value.buffer is None and not getattr(value, "rebased", False):
            size = value.expr_size()
            # a value read by several consumers is stored once when recomputing it would cost
            # more compute, or more memory traffic: a residual stream (x + a + b ...) re-read from
            # every partial sum by each later layer's kernels is the case (mini-GPT: 8 buffers
            # read by its last layer_norm)
            if size > MAX_EXPR or (value.reads > 1 and (size > config.inline_limit or value.full_reads() > 2)):
                self.realize(value)
        snap = TensorValue(value.shape, value.dtype, value.loader, buffer=value.buffer, origin=value.origin)
        snap.origins = getattr(value, "origins", set())
        snap.layout = value.layout
        snap.view_source = getattr(value, "view_source", None)
        snap.original = value
        return snap

    def _stored_layout(self, value: TensorValue):
        """The strided layout of ``value`` in a buffer that holds it already (its own, or one derived
        from a view source stored since the view was taken), or None. Stores nothing."""
        for v in (value, getattr(value, "original", value)):
            if v.layout is not None:
                return v.layout
        view = getattr(value, "view_source", None)
        if view is None:
            return None
        base = self._stored_layout(view[0])
        return None if base is None else derive_layout(value, base, view[1])

    def _rebase_on_stored_source(self, value: TensorValue) -> None:
        """A view taken before its source was stored loads the stored source from now on: it was
        recomputed per consumer (or stored a second time: GPT-2's GELU gradient, stored for its
        matmuls, was stored again by the bias-gradient sum of another view of it). Every consumer
        lowered from now on runs after the kernel that stores the source."""
        if getattr(value, "view_source", None) is None or getattr(value, "rebased", False):
            return
        layout = self._stored_layout(value)
        if layout is None or not isinstance(layout[0], ComputedBuffer):
            return  # not stored, or a view of an input or extern result: it loads that already
        buf, _, strides, offset = layout

        def loader(idx):
            return Load(buf.name, strided_index(idx, strides, offset), buf.dtype)

        value.loader, value.layout, value.rebased = loader, layout, True
        value._size = None  # its expression is one load now

    def store_shared(self, value: TensorValue) -> None:
        """Stores ``value`` (or the value it is a view of) before a reduction reads it when another
        node of the graph reads it too and it is stored anyway (a graph output) or costs to
        recompute: the reduction's kernel then reads the stored value (or is fused with the kernel
        that stores it). Lowered first, the reduction would inline the whole expression and the
        other consumer (the output, an extern) store it later: computed twice (the mini-GPT's
        position embedding gradient, a batch sum, recomputed the last layer_norm backward)."""
        v, depth = value, 0
        while v is not None and depth < 16:
            v = getattr(v, "original", v)
            if v.buffer is not None or getattr(v, "rebased", False):
                return
            size = v.expr_size()
            if getattr(v, "graph_users", 1) >= 2 and ((getattr(v, "graph_output", False) and size > SHARED_OUTPUT_EXPR)
                                                       or size > config.inline_limit
                                                       or self._reads_row_result(v)):
                self.realize(v)
                return
            source = getattr(v, "view_source", None)
            v, depth = (source[0] if source else None), depth + 1

    def _reads_row_result(self, value: TensorValue) -> bool:
        """Whether ``value`` reads a reduction's result (a row statistic: what a normalization's
        backward reads, the costly part of recomputing it)."""
        reduced = {item.name for item in self.items if isinstance(item, ReductionBuffer)}
        index = [sympy.Symbol(f"q{i}", integer=True, nonnegative=True) for i in range(value.ndim)]
        return any(isinstance(e, Load) and e.buf in reduced for e in walk(value.load(index)))

    def realize(self, value: TensorValue) -> Buffer:
        if value.buffer is not None:
            return value.buffer
        buf = ComputedBuffer(self.new_name(), value.shape, value.dtype, value.loader)
        buf.origins = sorted(getattr(value, "origins", ()) or [value.origin])
        self.items.append(buf)
        value.buffer = buf
        stored = buf.as_value()
        value.loader, value.layout = stored.loader, stored.layout
        return buf

    def reduction(self, full_shape, dims, keepdim, dtype, reduce_type, body, acc_dtype, origin):
        buf = ReductionBuffer(self.new_name(), full_shape, dims, keepdim, dtype, reduce_type, body, acc_dtype)
        buf.origins = [self.current or origin]
        self.items.append(buf)
        return buf.as_value(origin)

    def mutate(self, dst: TensorValue, src):
        """``dst.copy_(src)``: a kernel storing into ``dst``'s buffer (an input the graph updates)."""
        if not isinstance(dst, TensorValue) or dst.buffer is None or dst.loader is None:
            raise GraphFallback("mutation of a computed view")
        if not isinstance(dst.buffer, (InputBuffer, ExternBuffer)) or not _is_plain(dst) \
                or getattr(dst.buffer, "is_view", False):
            raise GraphFallback("mutation of a view")
        self.realize_live()
        compute = dst.buffer.dtype if dst.dtype not in (dt.float16, dt.bfloat16) else dt.float32
        broadcast_shape(dst.shape, src.shape if isinstance(src, TensorValue) else ())
        load = _loader_for(self, src, dst.shape, compute)
        buf = ComputedBuffer(self.new_name(), dst.shape, dst.dtype, load, target=dst.buffer)
        buf.origins = [self.current]
        self.items.append(buf)
        return dst.buffer.as_value(self.current)

    def _layout_of(self, value: TensorValue):
        """A strided layout for ``value``: its own, or a view's of its stored source."""
        if value.layout is None and value.buffer is None and getattr(value, "view_source", None) is not None:
            source, derive = value.view_source
            base = self._layout_of(source)
            if base is not None:
                value.layout = derive_layout(value, base, derive)
        if value.layout is None and value.buffer is None and getattr(value, "view_source", None) is not None:
            source, _ = value.view_source
            if source.buffer is None and source.layout is None and getattr(source, "view_source", None) is None:
                # store the source (the graph's value itself, so its other consumers read it too)
                original = getattr(source, "original", source)
                self.realize(original)
                source.buffer, source.layout = original.buffer, original.layout
                return self._layout_of(value)
        return value.layout

    def _extern_arg(self, value: TensorValue):
        """What an extern op gets for ``value``: a strided view of a buffer, or a buffer."""
        self._layout_of(value)
        if value.layout is not None:
            buf, shape, strides, offset = value.layout
            if (shape, strides, offset) == (buf.shape, buf.strides, 0):
                return buf
            return StridedView(buf, shape, strides, offset)
        return self.realize(value)

    def realize_live(self):
        for _, value in self._live:
            for v in _flatten([value]):
                if isinstance(v, TensorValue) and v.buffer is None:
                    self.realize(v)

    def _extern_shape(self, t) -> tuple:
        """The shape of an extern op's (meta) result as buffers hold it (export's symbolic
        lowering keeps its SymInt sizes as sympy expressions)."""
        return t.shape

    def extern(self, fn, args, kwargs):
        mutates = _is_mutating(fn)
        if mutates:
            for a in _flatten([args, kwargs]):
                if isinstance(a, TensorValue) and not _is_plain(a):
                    raise GraphFallback("in-place op on a view")
            self.realize_live()
        self._check_extern_device(args, kwargs)
        as_arg = self.realize if mutates else self._extern_arg
        real_args = _map_values(args, as_arg)
        real_kwargs = _map_values(kwargs, as_arg)
        try:
            result = fn(*self._meta(args), **self._meta(kwargs))
        except Exception as exc:
            raise GraphFallback(f"no meta result for {fn}: {exc}") from exc
        name = getattr(fn, "name", None) or getattr(fn, "__name__", "extern")

        def out_buffer(t):
            if not isinstance(t, Tensor):
                return t
            if t.dtype.is_complex:
                raise GraphFallback("complex extern result")
            shape = self._extern_shape(t)
            buf = ExternBuffer(self.new_name(), shape, t.dtype, strides=_dense_strides(shape, t))
            buf.origins = [self.current]
            # A view op's result shares its input's memory: writing into it is a write into the
            # input, which this graph does not order with its other readers (mutate() refuses it).
            buf.is_view = isinstance(fn, Op) and "view" in fn.tags
            return buf

        if mutates and isinstance(args[0], TensorValue) and isinstance(result, Tensor):
            outputs = args[0].buffer
        elif isinstance(result, (tuple, list)):
            outputs = tuple(out_buffer(t) for t in result)
        else:
            outputs = out_buffer(result)
        self.items.append(ExternCall(name, fn, real_args, real_kwargs, outputs, mutates))
        if isinstance(outputs, tuple):
            return tuple(b.as_value(self.current) if isinstance(b, Buffer) else b for b in outputs)
        return outputs.as_value(self.current) if isinstance(outputs, Buffer) else outputs


_FRESH_EXTERNS = frozenset({"mm", "addmm", "bmm", "baddbmm"})


def _fresh_memory(buf, items) -> bool:
    """Whether ``buf`` is memory this graph allocates and no other tensor sees: a kernel's own
    output, or a GEMM's result."""
    if isinstance(buf, ComputedBuffer):
        return buf.target is buf
    if isinstance(buf, ReductionBuffer):
        return True
    if not isinstance(buf, ExternBuffer) or getattr(buf, "is_view", False):
        return False
    for item in items:
        if isinstance(item, ExternCall) and item.outputs is buf:
            return not item.mutates and item.name in _FRESH_EXTERNS
    return False


def _non_overlapping(shape, strides) -> bool:
    """No two elements of the (static) layout share memory (an expanded dim does): the meta
    stand-ins of extern arguments stay layouts every op accepts (an in-place op refuses overlap)."""
    try:
        dims = sorted((int(st), int(n)) for n, st in zip(shape, strides) if int(n) > 1)
    except TypeError:
        return False
    reach = 0
    for st, n in dims:
        if st <= reach:
            return False
        reach += (n - 1) * st
    return True


def _dense_strides(shape, t):
    """The strides of the extern result ``t`` (its device-aware meta tensor) when they are a dense,
    non-overlapping permutation of static sizes (a flash attention output laid out (B, T, H, D)
    for the transpose that follows): the kernels then read the result as the op made it, and the
    wrapper copies only a result that comes back otherwise. None (contiguous) in any other case."""
    try:
        sizes = [int(s) for s in shape]
        strides = [int(s) for s in t.stride()]
    except (TypeError, ValueError):
        return None
    if len(strides) != len(sizes) or 0 in sizes:
        return None
    expect = 1
    for d in sorted((d for d in range(len(sizes)) if sizes[d] > 1), key=lambda d: (strides[d], -d)):
        if strides[d] != expect:
            return None
        expect *= sizes[d]
    contiguous = [1] * len(sizes)
    for d in range(len(sizes) - 2, -1, -1):
        contiguous[d] = contiguous[d + 1] * sizes[d + 1]
    # a size-1 dim takes the contiguous stride: nothing steps through it
    out = [strides[d] if sizes[d] > 1 else contiguous[d] for d in range(len(sizes))]
    return None if out == contiguous else out


def _is_plain(value: TensorValue) -> bool:
    """``value`` loads its buffer directly (no view in between)."""
    if value.buffer is None:
        return False
    idx = [sympy.Symbol(f"p{i}", integer=True) for i in range(value.ndim)]
    return value.shape == value.buffer.shape and value.load(idx) == value.buffer.as_value().load(idx)


class _MethodCall:
    """A call_method node's target as a callable: ``self.<name>(*args)``."""

    def __init__(self, name):
        self.name = self.__name__ = name

    def __call__(self, obj, *args, **kwargs):
        return getattr(obj, self.name)(*args, **kwargs)


class _LoweringMode(DispatchMode):
    """Lowers each op a Python function calls on meta stand-ins of lazy values."""

    def __init__(self, graph: GraphLowering):
        self.graph = graph
        self.by_id: dict[int, TensorValue] = {}
        self.keep: list = []  # stand-ins stay alive so that their ids stay unique

    def standin(self, value: TensorValue) -> Tensor:
        t = new_empty_tensor(self.graph.hint_shape(value.shape), value.dtype, META)
        self.by_id[id(t)] = value
        self.keep.append(t)
        return t

    def to_meta(self, obj):
        return _subs_symbols(_map_values(obj, self.standin), self.graph.hints)

    def to_values(self, obj):
        if isinstance(obj, Tensor):
            value = self.by_id.get(id(obj))
            if value is None:
                raise Unsupported("a tensor made outside the lowered ops")
            return value
        if isinstance(obj, (tuple, list)):
            return type(obj)(self.to_values(o) for o in obj) if type(obj) in (tuple, list) else \
                type(obj)(*[self.to_values(o) for o in obj])
        return obj

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)  # the meta kernel: shapes and dtypes for the Python code
        value = self.graph.call_op(func, self.to_values(args), self.to_values(kwargs))
        for meta, v in zip(_flatten([result]), _flatten([value])):
            if isinstance(meta, Tensor) and isinstance(v, TensorValue):
                self.by_id[id(meta)] = v
                self.keep.append(meta)
        return result


def _map(obj, env):
    if isinstance(obj, (tuple, list)):
        return type(obj)(_map(o, env) for o in obj)
    if isinstance(obj, dict):
        return {k: _map(v, env) for k, v in obj.items()}
    if hasattr(obj, "op") and hasattr(obj, "users") and obj in env:
        return env[obj]
    return obj


def _map_values(obj, fn):
    if isinstance(obj, TensorValue):
        return fn(obj)
    if isinstance(obj, (tuple, list)):
        return type(obj)(_map_values(o, fn) for o in obj)
    if isinstance(obj, dict):
        return {k: _map_values(v, fn) for k, v in obj.items()}
    return obj


def _subs_symbols(obj, hints):
    if isinstance(obj, sympy.Basic):
        return int(obj.subs(hints))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_subs_symbols(o, hints) for o in obj)
    if isinstance(obj, dict):
        return {k: _subs_symbols(v, hints) for k, v in obj.items()}
    return obj


def _flatten(obj) -> list:
    if isinstance(obj, (tuple, list)):
        return [x for o in obj for x in _flatten(o)]
    if isinstance(obj, dict):
        return [x for o in obj.values() for x in _flatten(o)]
    return [obj]


def _tag_origins(value, name, inherited):
    for v in _flatten([value]):
        if isinstance(v, TensorValue) and v.buffer is None:
            v.origins = set(getattr(v, "origins", ())) | inherited | {name}
