"""Triton kernels from scheduled groups: the same loop IR the C++ backend reads, as ``@triton.jit``.

A pointwise kernel flattens its iteration space into one index ``xindex`` handled ``XBLOCK``
elements per program; each original loop variable is recovered by ``//`` and ``%`` (after
the adjacent dims every index walks contiguously are merged, as in ``_cpp.collapse``). A
reduction kernel puts its rows on ``xindex`` (``[XBLOCK, 1]``) and the reduced elements on
``rindex`` (``[1, RBLOCK]``):

- *persistent* (the row fits one block, ``RBLOCK >= rnumel``): every member (the pointwise
  prologue, each reduction, the per-row epilogue, the pointwise work after) shares one body,
  so what a row loads it loads once (softmax reads ``x`` once, layer_norm too: the variance
  is a second pass over registers, not memory);
- *looped*: members share ``for roffset in range(0, rnumel, RBLOCK)`` loops (passes) with
  ``[XBLOCK, RBLOCK]`` accumulators, reduced across the block after the loop; a pass ends where
  a member needs a finished row, except for online softmax and Welford (``_triton_looped``).

Static sizes are literals (Triton sees the contiguity it needs to vectorize); symbolic sizes
are ``int64`` kernel arguments, so a new batch size reuses the compiled kernel, and float inputs
of the graph (a learning rate, a scale) are ``float64`` arguments, so a new value does too. A value one
member stores and a later member of the same kernel reads is not re-read from memory (the
threads that wrote it need not be those that read it): the reader recomputes it from the
expression, which common-subexpression reuse turns into a register in one body.
"""

from __future__ import annotations

import sympy

from ember._src import dtypes as dt

from . import _triton_ops as T
from ._cpp import collapse
from ._ir import Call, Cast, Const, IndexValue, Load, index_source, product
from ._scheduler import Kernel
from ._triton_looped import LoopedEmitter
from ._triton_reduce import ReductionEmitter, Unsupported

INT32_LIMIT = 2 ** 31
# Rows of at most this many elements are reduced by persistent kernels (one block a row).
PERSISTENT_MAX = 8192
# An outer reduction (rows contiguous, the reduced elements strided) stays persistent only this long:
# its blocks must span many rows for contiguous loads, and many rows of a long column do not fit.
OUTER_PERSISTENT_MAX = 256

def index_text(expr) -> str:
    """Python/Triton text of a (non-negative, integer) sympy index expression."""
    return index_source(expr, "//", Unsupported)


def param_name(kind: str, what) -> str:
    """The kernel argument's name of a ``params`` entry."""
    if kind == "ptr":
        return what
    if kind == "number":
        return f"number{what}"
    return what.name


class TritonKernelSpec:
    """One generated kernel: its source and what the runtime needs to launch it.

    ``params``: ``[("ptr", buffer name) | ("size", symbol) | ("number", graph input position)]``
    in argument order (block sizes follow as constexprs; a number is a float64 argument, so a
    new learning rate or scale reuses the compiled kernel); ``xnumel``/``rnumel``: sympy sizes of
    the launch; ``persistent``: whether ``RBLOCK`` must cover ``rnumel``.
    """

    def __init__(self, name, source, params, dtypes, xnumel, rnumel, reduction, persistent, inplace, origins):
        self.name = name
        self.source = source
        self.params = params
        self.dtypes = dtypes  # buffer name -> ember dtype (pointer element types)
        self.xnumel = xnumel
        self.rnumel = rnumel
        self.reduction = reduction
        self.persistent = persistent
        self.inplace = inplace  # a buffer it both reads and writes (no timing runs: they would repeat it)
        self.origins = origins


class _Body:
    """Statements of one block body, with common subexpressions computed once."""

    def __init__(self, w, indent: str, mask: str, shared: dict | None = None):
        self.w = w
        self.indent = indent
        self.mask = mask
        self.lines: list[str] = []
        self.cache: dict = dict(shared or {})
        self.literal: set[str] = set()

    def emit(self, text: str, dtype) -> str:
        name = self.w.tmp()
        self.lines.append(f"{self.indent}{name} = {text}")
        return name

    def as_tensor(self, text: str, dtype) -> str:
        """A literal as a one-element tensor (math functions take tensors only)."""
        if text in self.literal:
            return f"tl.full([1], {text}, {T.TL_TYPES[dtype]})"
        return text

    def value(self, e) -> str:
        if e in self.cache:
            return self.cache[e]
        w = self.w
        if isinstance(e, Const):
            if e.number is None:
                text = T.literal(e.value, e.dtype)
                self.literal.add(text)
                return text
            # a float input of the graph: a (float64) kernel argument, cast to the compute dtype
            arg = w.number_arg(e.number)
            text = arg if e.dtype is dt.float64 else f"{arg}.to({T.TL_TYPES[e.dtype]})"
            name = self.emit(text, e.dtype)
            self.cache[e] = name
            return name
        if isinstance(e, Load):
            local = w.local_value(e, self)
            if local is not None:
                return local
            text = w.load_text(e, self.mask)
        elif isinstance(e, IndexValue):
            index = e.index.xreplace(w.subs)
            if not index.free_symbols:
                text = T.literal(int(index), e.dtype)
                self.literal.add(text)
                return text
            text = f"({index_text(index)}).to({T.TL_TYPES[e.dtype]})"
        elif isinstance(e, Cast):
            arg = self.value(e.arg)
            if e.dtype is dt.bool:
                text = f"({arg} != 0)"
            elif e.arg.dtype.is_floating_point and e.dtype in (dt.uint8, dt.int8, dt.int16, dt.int32):
                # through int64, then wrapping, as eager's cast (-3.7 -> uint8 is 253)
                text = f"{self.as_tensor(arg, e.arg.dtype)}.to(tl.int64).to({T.TL_TYPES[e.dtype]})"
            else:
                text = f"{self.as_tensor(arg, e.arg.dtype)}.to({T.TL_TYPES[e.dtype]})"
        elif isinstance(e, Call):
            args = [self.value(a) for a in e.args]
            if e.op not in T.WEAKLY_TYPED:
                # a function (libdevice, a helper) takes its arguments' types as they are: a
                # literal would be float32 beside a float64 tensor
                args = [self.as_tensor(a, x.dtype) for a, x in zip(args, e.args)]
            elif args and all(a in self.literal for a in args):
                args[0] = self.as_tensor(args[0], e.args[0].dtype)
            try:
                text = T.op_text(e.op, args, e.dtype, [a.dtype for a in e.args], w.helpers.add)
            except KeyError as exc:
                raise Unsupported(f"op {e.op} has no Triton spelling") from exc
        else:
            raise Unsupported(type(e).__name__)
        name = self.emit(text, e.dtype)
        self.cache[e] = name
        return name


class TritonKernelWriter(ReductionEmitter, LoopedEmitter):
    def __init__(self, kernel: Kernel, buffers: dict):
        self.k = kernel
        self.buffers = buffers
        self._tmp = 0
        self.reads: dict[str, object] = {}
        self.writes: dict[str, object] = {}
        self.row_values: dict[str, str] = {}  # per-row results (reductions, epilogues) -> name
        self.produced: dict[str, object] = {}  # buffer -> the member that computed it (so far)
        self.subs: dict = {}
        self.helpers: set[str] = set()
        self.zero = "0"  # a block of zeros shaped like the stores' index (a scalar index needs one)
        self.shared_mask = "rmask"  # the mask of a load every row of a reduction block shares
        self.inner_vars = self.outer_vars = frozenset()
        self.number_args: dict[int, str] = {}  # graph input position -> its float's argument name

    def number_arg(self, position: int) -> str:
        """The kernel argument holding the float input at ``position``."""
        name = self.number_args.get(position)
        if name is None:
            name = self.number_args[position] = f"number{position}"
        return name

    def body(self, indent: str, mask: str) -> _Body:
        return _Body(self, indent, mask)

    def tmp(self) -> str:
        self._tmp += 1
        return f"tmp{self._tmp - 1}"

    def param(self, name: str) -> str:
        self.reads.setdefault(name, self.buffers[name])
        return name

    def local_value(self, load: Load, body: _Body):
        if load.buf in self.row_values:
            return self.row_values[load.buf]
        producer = self.produced.get(load.buf)
        if producer is not None:
            return body.value(producer.expr)
        return None

    def index(self, expr, block: str, store: bool = False) -> str:
        """Text of an index, broadcast to ``block``'s shape where it lacks a dimension of it.

        A load's pointer only needs to be a block (a scalar index gets one); a store's pointer
        must have the stored value's shape: a full-space store in a reduction kernel whose index
        misses the row or the reduced variables (a dim of size 1 was dropped) is broadcast.
        """
        expr = expr.xreplace(self.subs)
        text = index_text(expr)
        free = expr.free_symbols
        if not store:
            complete = bool(free & self.loop_vars)
        elif block == self.zero_full and self.k.reduced and block != self.zero:
            complete = bool(free & self.outer_vars) and bool(free & self.inner_vars)
        else:
            complete = bool(free & self.outer_vars)
        if not complete:
            text = f"{text} + {block}"
        return text

    def load_text(self, load: Load, mask: str) -> str:
        ptr = self.param(load.buf)
        block = self.zero if mask == "xmask" else self.zero_full  # a per-row load, or a full one
        if mask == "xrmask":
            free = load.index.xreplace(self.subs).free_symbols
            if free & self.outer_vars and not free & self.inner_vars:
                # one element a row (cross-entropy's target): an [XBLOCK, 1] load, not a
                # broadcast of it over the row's block
                mask = "xmask"
            elif free & self.inner_vars and not free & self.outer_vars:
                # the same elements for every row (layer_norm's weight): a [1, RBLOCK] load that
                # the rows of the block share, masked by the row length alone
                mask = self.shared_mask
                if mask is None:
                    text = f"tl.load({ptr} + ({self.index(load.index, block)}))"
                    return text + (".to(tl.float32)" if load.storage_dtype in (dt.float16, dt.bfloat16) else "")
        text = f"tl.load({ptr} + ({self.index(load.index, block)}), {mask}, other=0)"
        if load.storage_dtype in (dt.float16, dt.bfloat16):
            text += ".to(tl.float32)"  # Note [Compute dtype] in _ir
        return text

    def store(self, node, value: str, body: _Body, block: str, mask: str) -> None:
        if node.buf.name in self.k.local:
            return
        self.writes[node.target] = self.buffers[node.target]
        idx = self.index(node.store_index, block, store=True)
        body.lines.append(f"{body.indent}tl.store({node.target} + ({idx}), {value}, {mask})")

    # -- the kernel ----------------------------------------------------------------------------

    def emit(self) -> TritonKernelSpec:
        k = self.k
        vars_ = list(k.vars)
        sizes = dict(zip(vars_, k.space))
        unit = {v: sympy.Integer(0) for v, s in sizes.items() if s == 1}
        exprs = []
        for n in k.nodes:
            exprs.append(n.store_index)
            exprs.extend(ld.index for ld in n.loads)
            exprs.extend(n.positions)  # iota values: a merged loop must not change what they read
        exprs = [e.xreplace(unit) for e in exprs]
        inner_dims = [vars_[d] for d in k.reduced if vars_[d] not in unit]
        outer_dims = [v for d, v in enumerate(vars_) if d not in k.reduced and v not in unit]
        outer, subs_o = collapse(outer_dims, sizes, exprs)
        exprs = [e.xreplace(subs_o) for e in exprs]
        inner, subs_i = collapse(inner_dims, sizes, exprs)
        self.subs = {**unit, **subs_o}
        self.subs = {v: e.xreplace(subs_i) for v, e in self.subs.items()}
        self.subs.update(subs_i)
        exprs = [e.xreplace(subs_i) for e in exprs]
        self.outer_vars = {v for v, _ in outer}
        self.inner_vars = {v for v, _ in inner}
        self.loop_vars = self.outer_vars | self.inner_vars
        xnumel = product([n for _, n in outer])
        rnumel = product([n for _, n in inner])
        reduction = bool(k.reduced)
        outer_reduction = reduction and self._outer_reduction(outer, inner)
        persistent = reduction and not rnumel.free_symbols and int(rnumel) <= PERSISTENT_MAX
        if outer_reduction and persistent and int(rnumel) > OUTER_PERSISTENT_MAX:
            # a whole column in one block would leave one row a block (strided loads): loop instead
            persistent = False
        symbols = set(xnumel.free_symbols | rnumel.free_symbols)
        for e in exprs:
            symbols |= e.free_symbols
        symbols -= set(vars_)
        wide = bool(symbols) or self._span() >= INT32_LIMIT or \
            (not symbols and int(xnumel * rnumel) >= INT32_LIMIT)
        if reduction:
            lines = self._reduction_body(outer, inner, xnumel, rnumel, persistent, wide)
        else:
            lines = self._pointwise_body(outer, xnumel, wide)
        origins = []
        for n in k.nodes:
            origins.extend(o for o in n.buf.origins if o not in origins)
        params, args = [], []
        for name in self.reads:
            if name not in self.writes:
                params.append(("ptr", name))
        params.extend(("ptr", name) for name in self.writes)
        for s in sorted(symbols, key=lambda s: s.name):
            params.append(("size", s))
        params.extend(("number", position) for position in sorted(self.number_args))
        for kind, what in params:
            args.append(param_name(kind, what))
        # the number of rows (elements) is an argument even when static: a new batch size then
        # reuses the compiled kernel however the graph was specialized
        args.append("xnumel")
        args.append("XBLOCK: tl.constexpr")
        if reduction:
            args.append("RBLOCK: tl.constexpr")
        kind = "persistent reduction" if persistent else "reduction" if reduction else "pointwise"
        head = [f"# {k.name} ({kind}): {', '.join(origins)}", "@triton.jit",
                f"def {k.name}({', '.join(args)}):"]
        source = "\n".join(head + lines) + "\n"
        if self.helpers:
            source = T.helper_source(self.helpers) + "\n\n" + source
        source = _HEADER + source
        dtypes = {name: buf.dtype for name, buf in {**self.reads, **self.writes}.items()}
        inplace = any(name in self.writes for name in self.reads)
        spec = TritonKernelSpec(k.name, source, params, dtypes, xnumel, rnumel, reduction, persistent, inplace,
                                origins)
        spec.index_type = "i64" if wide else "i32"
        spec.outer = outer_reduction
        return spec

    def _outer_reduction(self, outer, inner) -> bool:
        """Whether the loads run along the rows, not along the reduced elements: a reduction over a
        leading dim (a bias gradient, (8192, 768) summed over dim 0), where a block must span many
        rows for its loads to be contiguous, unlike the usual one-row-a-block reduction. A load
        that does not move with the kept index (LayerNorm's per-row mean and rstd in its weight
        gradient) is one small vector every column shares: it does not decide the layout."""
        if not outer or not inner:
            return False
        x, r = outer[-1][0], inner[-1][0]
        along_rows = False
        for n in self.k.nodes:
            for ld in n.loads:
                e = ld.index.xreplace(self.subs)
                if r not in e.free_symbols or x not in e.free_symbols:
                    continue
                if sympy.diff(e, r) == 1:
                    return False  # some input is read along the reduced elements
                along_rows = along_rows or (x in e.free_symbols and sympy.diff(e, x) == 1)
        return along_rows

    def _span(self) -> int:
        """The largest element offset any buffer of the kernel reaches (static sizes only)."""
        top = 0
        for n in self.k.nodes:
            for name in {n.target, *(ld.buf for ld in n.loads)}:
                buf = self.buffers[name]
                span = buf.offset + sum((s - 1) * abs(st) for s, st in zip(buf.shape, buf.strides)) + 1
                if span.free_symbols:
                    return INT32_LIMIT
                top = max(top, int(span))
        return top

    def _decompose(self, loops, flat: str, indent: str) -> list[str]:
        """Lines recovering each loop variable from the flat index ``flat`` (outermost first)."""
        lines, divisor = [], sympy.Integer(1)
        for i in range(len(loops) - 1, -1, -1):
            v, n = loops[i]
            if len(loops) == 1:
                text = flat
            elif i == 0:
                text = f"{flat} // {index_text(divisor)}"
            elif divisor == 1:
                text = f"{flat} % {index_text(n)}"
            else:
                text = f"({flat} // {index_text(divisor)}) % {index_text(n)}"
            lines.append(f"{indent}{v.name} = {text}")
            divisor = divisor * n
        return list(reversed(lines))

    def _pointwise_body(self, outer, xnumel, wide) -> list[str]:
        i = "    "
        pid = "tl.program_id(0).to(tl.int64)" if wide else "tl.program_id(0)"
        lines = [f"{i}xoffset = {pid} * XBLOCK",
                 f"{i}xindex = xoffset + tl.arange(0, XBLOCK)", f"{i}xmask = xindex < xnumel"]
        lines += self._decompose(outer, "xindex", i)
        self.zero = self.zero_full = "0 * xindex"
        body = _Body(self, i, "xmask")
        for node in self.k.nodes:
            body.lines.append(f"{i}# {node.buf.name}: {', '.join(node.buf.origins)}")
            v = body.value(node.expr)
            self.store(node, v, body, self.zero, "xmask")
            self.produced[node.target] = node
        return lines + body.lines

    def _reduction_body(self, outer, inner, xnumel, rnumel, persistent, wide) -> list[str]:
        i = "    "
        pid = "tl.program_id(0).to(tl.int64)" if wide else "tl.program_id(0)"
        self._rnumel = rnumel
        lines = [f"{i}rnumel = {index_text(rnumel)}",
                 f"{i}xoffset = {pid} * XBLOCK", f"{i}xindex = xoffset + tl.arange(0, XBLOCK)[:, None]",
                 f"{i}xmask = xindex < xnumel", f"{i}rbase = tl.arange(0, RBLOCK)[None, :]"]
        lines += self._decompose(outer, "xindex", i)
        self.zero = "0 * xindex"
        if persistent:
            lines.append(f"{i}rindex = rbase")
            n = int(rnumel)
            if n >= 2 and n & (n - 1) == 0:
                # RBLOCK is rnumel itself (``configs``): no element of the block lies past the row,
                # and the loads and reductions need only the row mask (no per-element selects)
                lines.append(f"{i}xrmask = xmask")
                self.shared_mask = None
            else:
                lines += [f"{i}rmask = rindex < rnumel", f"{i}xrmask = xmask & rmask"]
            lines += self._decompose(inner, "rindex", i)
            self.zero_full = "0 * (xindex + rindex)"
            body = _Body(self, i, "xrmask")
            # per-row members: their own loads (shaped [XBLOCK, 1]), the same statement list
            row_body = _Body(self, i, "xmask")
            row_body.lines = body.lines
            for node in self.k.nodes:
                self._member(node, row_body if node.epilogue else body, None)
            return lines + body.lines
        self.zero_full = "0 * (xindex + rindex)"
        return lines + self._looped_passes(inner)

    # -- members -------------------------------------------------------------------------------

    def _member(self, node, body: _Body, outer_indent, comment=True):
        """One member's statements; ``outer_indent`` is set for a looped reduction's loop body."""
        if comment:
            body.lines.append(f"{body.indent}# {node.buf.name}: {', '.join(node.buf.origins)}")
        v = body.value(node.expr)
        if node.epilogue:
            self.store(node, v, body, self.zero, "xmask")
            self.row_values[node.buf.name] = v
            return
        if not node.is_reduction:
            self.store(node, v, body, self.zero_full, "xrmask")
            self.produced[node.target] = node
            return
        buf = node.buf
        acc_t = T.TL_TYPES[buf.acc_dtype]
        if node.expr.dtype is not buf.acc_dtype:
            v = body.emit(f"{body.as_tensor(v, node.expr.dtype)}.to({acc_t})", buf.acc_dtype)
        if outer_indent is None:  # persistent: reduce the block at once
            row = self._reduce_block(body, buf.reduce_type, buf, v, "xrmask")
            self._finish_row(node, row, body)
            return
        self._accumulate(body, buf, v)

    def _finish_row(self, node, row: str, body: _Body) -> None:
        self.row_values[node.buf.name] = row
        self.store(node, row, body, self.zero, "xmask")


_HEADER = '''"""Generated by ember's inductor (Triton backend)."""
import triton
import triton.language as tl
from triton.language.extra import libdevice


'''


def kernel_specs(kernels: list, buffers: dict) -> list:
    return [TritonKernelWriter(k, buffers).emit() for k in kernels]


__all__ = ["TritonKernelSpec", "TritonKernelWriter", "Unsupported", "index_text", "kernel_specs"]
