"""C++ kernels from scheduled groups: OpenMP threads over the outer loops, SIMD inner loops.

One ``extern "C"`` function per kernel, arguments: the buffers it reads (const pointers), the
buffers it writes, then the symbolic sizes it needs (int64), so a new batch size reuses the
compiled code. Adjacent dims that every index walks contiguously collapse into one loop, which
gives the compiler long unit-stride inner loops to vectorize.
"""

from __future__ import annotations

import sympy

from ember._src import dtypes as dt

from . import _cpp_columns as columns
from . import _cpp_ops as C
from . import config
from ._ir import (
    HALF_TYPES,
    Call,
    Cast,
    Const,
    FloorDiv,
    IndexValue,
    Load,
    ModularIndexing,
    index_source,
    linear_coeff,
    loads_of,
    product,
    walk,
)
from ._kernel_alias import alias_name as _alias_name
from ._kernel_alias import canonical as _canonical
from ._scheduler import Kernel

PARALLEL_MIN = 32768  # elements below which a kernel stays on one thread
OUTER_BLOCK = 64  # columns an outer reduction sums side by side (one accumulator each)
TILE = 16  # rows and columns of a transposed copy's tiles
SUPER = 256  # rows and columns of the blocks of tiles a thread takes
STASH_MAX = 8192  # elements of a row softmax stashes in a local array (32 KiB of float32)

_REDUCE_INIT = {"sum": "0", "prod": "1", "any": "false", "all": "true"}
_REDUCE_CLAUSE = {"sum": "+", "prod": "*", "max": "max", "min": "min", "any": "||", "all": "&&"}


def index_text(expr) -> str:
    """C text of a (non-negative, integer) sympy index expression."""
    return index_source(expr, "/")


_linear_coeff = linear_coeff
# The longest row (static, float32 elements: 8 KiB, three passes in L1) _exp_rows takes.
EXP_ROW_MAX = 2048


def collapse(dims: list, sizes: dict, exprs: list):
    """Merges adjacent loop dims that every expression steps through contiguously.

    ``dims`` are index symbols outermost first. Returns (loops [(var, size)], substitution).
    """
    loops = [(v, sizes[v]) for v in dims]
    subs = {}
    i = 0
    while i + 1 < len(loops):
        (va, na), (vb, nb) = loops[i], loops[i + 1]
        ok = True
        for e in exprs:
            e = e.xreplace(subs) if subs else e
            ca, cb = _linear_coeff(e, va), _linear_coeff(e, vb)
            if ca is None or cb is None or sympy.expand(ca - cb * nb) != 0:
                ok = False
                break
        if not ok:
            i += 1
            continue
        # va * nb + vb == the merged index: substitute va -> 0, vb -> merged
        subs = {k: v.xreplace({va: sympy.Integer(0)}) for k, v in subs.items()}
        subs[va] = sympy.Integer(0)
        loops[i] = (vb, na * nb)
        del loops[i + 1]
    return loops, subs


def split_dims(dims: list, sizes: dict, exprs: list) -> tuple:
    """Splits loop dims that indices take apart with ``/`` and ``%`` into one loop per digit.

    A reshape that merges dims of a permuted tensor reads ``x / 64`` and ``x % 64`` of one loop
    variable (the heads of an attention gradient concatenated back into ``(B, T, C)``): a
    division per element, which also keeps the loop from vectorizing. Where every divisor of
    ``x`` (static, dividing its static size and one another) is known, ``x`` becomes digits
    ``x = x_1 * b_1 + x_0`` walked by nested loops, and each quotient or remainder is a sum of
    digits. Returns (substitution for the expressions, {dim: {digit: size}} outermost first).
    """
    split: dict = {}
    digits: dict = {}
    parts = [a for e in exprs for a in e.atoms(FloorDiv, ModularIndexing)]
    for v in dims:
        n = sizes[v]
        if not isinstance(n, sympy.Integer) or n <= 1:
            continue
        bounds: set[int] = set()
        ok = True
        for a in parts:
            if v not in a.free_symbols:
                continue
            if a.args[0] != v or not all(isinstance(x, sympy.Integer) for x in a.args[1:]):
                ok = False  # a quotient of a sum (or of a symbolic divisor): leave it to C
                break
            if isinstance(a, FloorDiv):
                bounds.add(int(a.args[1]))
            else:
                bounds.update((int(a.args[1]), int(a.args[1]) * int(a.args[2])))
        if not ok:
            continue
        chain = sorted(b for b in bounds if 1 < b < int(n))
        if not chain or any(hi % lo for lo, hi in zip([1] + chain, chain + [int(n)])):
            continue
        edges = [1] + chain + [int(n)]
        names = [sympy.Symbol(f"{v.name}_{i}", integer=True, nonnegative=True) for i in range(len(edges) - 1)]

        def part(lo: int, hi: int, _edges=edges, _names=names):
            # the digits between place values lo and hi, as a number counted in units of lo
            return sympy.Add(*[_names[i] * (_edges[i] // lo) for i in range(len(_names))
                               if lo <= _edges[i] < hi])

        for a in parts:
            if a.args[0] != v:
                continue
            if isinstance(a, FloorDiv):
                split[a] = part(int(a.args[1]), int(n))
            else:
                d, m = int(a.args[1]), int(a.args[2])
                split[a] = part(d, min(d * m, int(n)))
        split[v] = part(1, int(n))
        digits[v] = {names[i]: sympy.Integer(edges[i + 1] // edges[i]) for i in reversed(range(len(names)))}
    return split, digits


class _Body:
    """Statements of one loop body, with common subexpressions computed once."""

    def __init__(self, writer, indent, local_values):
        self.w = writer
        self.indent = indent
        self.lines: list[str] = []
        self.cache: dict = {**writer.hoisted, **local_values}

    def forget(self, buf: str) -> None:
        """Drops the cached values that loaded ``buf`` (it was just overwritten)."""
        stale = [e for e in self.cache if any(isinstance(n, Load) and n.buf == buf for n in walk(e))]
        for e in stale:
            del self.cache[e]

    def value(self, e) -> str:
        if e in self.cache:
            return self.cache[e]
        if isinstance(e, Const):
            if e.number is not None:  # a float input of the graph: a kernel argument
                return C.cast_text(self.w.number_arg(e.number), e.dtype)
            return C.const_text(e.value, e.dtype)
        if isinstance(e, Load):
            local = self.w.local_value(e)
            if local is not None:
                return local
            text = C.load_text(self.w.param(e.buf), self.w.itext(e.index.xreplace(self.w.subs)), e.storage_dtype)
        elif isinstance(e, IndexValue):
            text = C.cast_text(self.w.itext(e.index.xreplace(self.w.subs)), e.dtype)
        elif isinstance(e, Cast):
            text = C.cast_text(self.value(e.arg), e.dtype, e.arg.dtype)
            if e.dtype is dt.bool and e.arg.dtype.is_floating_point:
                text = f"({self.value(e.arg)} != 0)"
        elif isinstance(e, Call):
            args = [self.value(a) for a in e.args]
            text = C.op_text(e.op, args, e.dtype, [a.dtype for a in e.args])
        else:
            raise NotImplementedError(type(e).__name__)
        name = self.w.tmp()
        self.lines.append(f"{self.indent}{C.C_TYPES[e.dtype]} {name} = {text};")
        self.cache[e] = name
        return name


class CppKernelWriter:
    def __init__(self, kernel: Kernel, buffers: dict):
        self.k = kernel
        self.buffers = buffers
        self._tmp = 0
        self.reads: dict[str, object] = {}
        self.writes: dict[str, object] = {}
        self.row_values: dict[str, str] = {}  # reduction buffer -> scalar of this row
        self.subs: dict = {}
        self.size_args: dict[int, sympy.Symbol] = {}  # integer value -> kernel argument
        self.number_args: dict[int, str] = {}  # graph input position -> its float's argument name
        self.post: dict = {}  # loop variable -> expression, applied last (a streaming loop's lanes)
        self.hoisted: dict = {}  # expression -> the row-level variable computed before a row's loops
        self.pipe = None  # (first, second, ...) of a row kernel whose first reduction runs a row ahead
        self.scratch: dict = {}  # id(sum node) -> its row-sized stash (softmax's exp terms, streamed out)
        self.prefetch = None  # (row variable text, rows text, row symbol): helpers prefetch the next row
        self.fence_outside = False  # streamed rows leave their sfence to the end of each thread's rows
        self.streamed = False  # whether some row is written with streaming stores
        self.max_exp_sums: dict = {}  # id(sum node) -> its row value, computed with the row's max
        self.tiled = False  # a transposed copy's tiles: target column sums are added in them

    def itext(self, expr) -> str:
        """C text of an index expression whose size-derived integers are kernel arguments.

        Every integer past 1 (a size, stride, offset) becomes an argument ``k<n>``, so the
        source depends only on the loop structure: a new batch size re-lowers the graph in
        Python but finds this code already compiled.
        """
        expr = sympy.sympify(expr)
        if self.post:
            expr = expr.xreplace(self.post)
        mapping = {}
        for atom in expr.atoms(sympy.Integer):
            v = abs(int(atom))
            if v > 1:
                if v not in self.size_args:
                    self.size_args[v] = sympy.Symbol(f"k{len(self.size_args)}", integer=True, positive=True)
                mapping[atom] = self.size_args[v] if atom > 0 else -self.size_args[v]
        return index_text(expr.xreplace(mapping) if mapping else expr)

    def number_arg(self, position: int) -> str:
        """The kernel argument holding the float input at ``position`` (a double)."""
        name = self.number_args.get(position)
        if name is None:
            name = self.number_args[position] = f"number{position}"
        return name

    def tmp(self) -> str:
        self._tmp += 1
        return f"tmp{self._tmp - 1}"

    def param(self, name: str) -> str:
        if name not in self.writes:
            self.reads.setdefault(name, self.buffers[name])
        return name

    def local_value(self, load: Load):
        return self.row_values.get(load.buf)

    def emit(self) -> tuple[str, list]:
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
        split, digits = ({}, {}) if k.reduced else split_dims(vars_, sizes, exprs)
        if split:
            exprs = [e.xreplace(split) for e in exprs]
            vars_ = [d for v in vars_ for d in digits.get(v, [v])]
            for v in digits:
                sizes.update(digits[v])
        inner_dims = [vars_[d] for d in k.reduced if vars_[d] not in unit]
        outer_dims = [v for d, v in enumerate(vars_) if d not in k.reduced and v not in unit]
        outer, subs_o = collapse(outer_dims, sizes, exprs)
        exprs = [e.xreplace(subs_o) for e in exprs]
        inner, subs_i = collapse(inner_dims, sizes, exprs)
        self.subs = {**unit, **subs_o}
        self.subs = {v: e.xreplace(subs_i) for v, e in self.subs.items()}
        self.subs.update(subs_i)
        if split:
            # the original indices: the digits first, then the collapsed loops
            self.subs = {**{key: e.xreplace(self.subs) for key, e in split.items()}, **self.subs}
        for n in k.nodes:
            if n.buf.name not in k.local:
                self.writes[n.target] = self.buffers[n.target]
        body = self._loops(outer, inner)
        origins = []
        for n in k.nodes:
            origins.extend(o for o in n.buf.origins if o not in origins)
        params, signature = [], []
        for name, buf in self.reads.items():
            if name in self.writes:
                continue
            params.append(f"const {C.C_TYPES[buf.dtype]}* __restrict__ {name}")
            signature.append(("ptr", name))
        for name, buf in self.writes.items():
            params.append(f"{C.C_TYPES[buf.dtype]}* __restrict__ {name}")
            signature.append(("ptr", name))
        symbols = set()
        for _, n in outer + inner:
            symbols |= n.free_symbols
        for e in exprs:
            symbols |= e.free_symbols
        symbols -= set(vars_)
        for s in sorted(symbols, key=lambda s: s.name):
            params.append(f"int64_t {s.name}")
            signature.append(("size", s))
        for value, s in self.size_args.items():
            params.append(f"int64_t {s.name}")
            signature.append(("const", value))
        for position, name in self.number_args.items():
            params.append(f"double {name}")
            signature.append(("number", position))
        header = f"// {k.name}: {', '.join(origins)}\n"
        header += f'EMBER_KERNEL void {k.name}({", ".join(params)}) {{\n'
        return header + "\n".join(body) + "\n}\n", signature

    # -- loops ---------------------------------------------------------------------------------

    def _loops(self, outer, inner) -> list[str]:
        lines: list[str] = []
        total = product([n for _, n in outer + inner])
        parallel_outer = bool(outer)
        indent = "    "
        if self._is_outer_reduction(outer, inner):
            return self._outer_reduction(outer[0], inner[0], total)
        tile = None if self.k.reduced else self._transpose_tile(outer)
        if tile is not None:
            return self._tiled_pointwise(outer, tile, total)
        if not self.k.reduced and not columns.column_nodes(self.k):
            rows = self._exp_rows(outer, total)
            if rows is not None:
                return rows
        if self.k.reduced:
            self._find_stashes()
            self.pipe = self._pipeline(outer, inner)
            if self.pipe is not None and any(self._pick_parts(n, inner) for n in self.pipe[:2]):
                # a pick is one load, nothing to overlap; the max then takes its helper
                self.prefetch, self.pipe = self._prefetch_after_pick(self.pipe), None
            if self.pipe is not None and self._helpers_take(self.pipe[0], self.pipe[1], inner):
                # eager's structure instead: the exp pass prefetches the next row, whose max pass
                # then reads it from cache
                self.prefetch, self.pipe = self.pipe[2:], None
        first = None
        cols = [c for c in columns.column_nodes(self.k) if not getattr(c, "target_columns", None)]
        targets = [c for c in self.k.nodes if getattr(c, "target_columns", None)]
        if cols:
            self._plan_riders()
            lines.extend(columns.before(self, cols, indent))
        if outer:
            opened = self._open(outer, indent, self._parallel_clause(total), simd=not self.k.reduced)
            self.fence_outside = self.k.reduced
            if self.pipe is not None:
                first = self.pipe[0]
                acc_t = C.C_TYPES[first.buf.acc_dtype]
                lines += [f"{indent}int64_t pipe_row = -1;", f"{indent}{acc_t} pipe_acc = 0;",
                          f"{indent}int pipe_nan = 0;"]
                opened[0] += " firstprivate(pipe_row, pipe_acc, pipe_nan)"
            first = len(lines)
            lines.extend(opened)
            indent += "    " * len(outer)
        lines.extend(columns.row_start(cols, indent))
        if not self.k.reduced:
            lines.extend(self._pointwise_members(indent, simd_loop=None))
        else:
            for node in self.k.nodes:
                lines.extend(self._row_member(node, inner, indent, parallel=not parallel_outer, total=total))
        if outer:
            for d in range(len(outer)):
                lines.append("    " * (len(outer) - d) + "}")
            if self.streamed and self.fence_outside:
                lines = self._fence_per_thread(lines, first, "    ")
        lines.extend(columns.after(cols, "    "))
        for c in targets:
            lines.extend(self._target_column_pass(c))
        return lines

    def _target_column_pass(self, node) -> list[str]:
        """A column sum over the buffer the kernel's members wrote (the scheduler's target column)
        where the members' loops are not tiled: one walk over the stored rows after them."""
        name, cols, rows = node.buf.name, self.itext(node.sum_cols), self.itext(node.sum_rows)
        src = node.source  # written by this kernel: a parameter already
        return [f"    for (int64_t c_{name} = 0; c_{name} < {cols}; ++c_{name}) {node.target}[c_{name}] = 0.0f;",
                f"    for (int64_t r_{name} = 0; r_{name} < {rows}; ++r_{name}) {{",
                "        #pragma omp simd",
                f"        for (int64_t c_{name} = 0; c_{name} < {cols}; ++c_{name})",
                f"            {node.target}[c_{name}] += {src}[r_{name} * {cols} + c_{name}];",
                "    }"]

    def _prefetch_after_pick(self, pipe):
        """``self.prefetch`` of a row kernel that picks an element of its row (cross-entropy's
        forward): the helpers walking the row prefetch the next one, as eager's loss kernel."""
        return pipe[2:]

    def _exp_rows(self, outer, total):
        """A pointwise kernel of rows (two loops or more) storing one float32 value with an exp in
        it (cross-entropy's backward ``exp(x - lse) * g - onehot * g``, an exp of a fused
        producer), row by row: a generated loop stores the exp's argument in the output row,
        ``ember_exp_row_f32`` takes its exp in place (AVX-512's exp, ~half the instructions gcc
        makes of the inline scalar one, the same values), and the row's loop reads it back for the
        rest. None where that does not apply: rows of a symbolic length or past ``EXP_ROW_MAX``, and
        one-loop kernels. Where the kernel waits on memory more than on the exp the extra passes
        cost more than the exp saves: cross-entropy's backward over 2048 x 8192 (a fresh 64 MiB
        output) measured 21.9 ms against 21.1, ``exp(x * 2 + 1) * 3`` over 4M floats cut into
        L1-sized blocks 2.5 ms against 1.6; 2048 x 512 (the mini-GPT's) 0.89 against 1.07."""
        k = self.k
        if len(outer) < 2 or len(k.nodes) != 1:
            return None
        node = k.nodes[0]
        v, size = outer[-1]
        if node.buf.name in k.local or self.buffers[node.target].dtype is not dt.float32 \
                or sympy.sympify(size).free_symbols or not 16 <= int(size) <= EXP_ROW_MAX:
            return None
        exps = {e for e in walk(node.expr) if isinstance(e, Call) and e.op == "exp" and e.dtype is dt.float32}
        if len(exps) != 1 or any(ld.buf == node.target for ld in loads_of(node.expr)):
            return None
        (exp,) = exps
        index = node.store_index.xreplace(self.subs)
        if _linear_coeff(index, v) != 1:
            return None
        indent = "    "
        lines = self._open(outer[:-1], indent, self._parallel_clause(total), simd=False)
        ind = indent + "    " * (len(outer) - 1)
        row = f"&{node.target}[{self.itext(index.xreplace({v: 0}))}]"
        pre = _Body(self, ind + "    ", {})
        arg = pre.value(exp.args[0])
        lines += self._open([outer[-1]], ind, None, simd=True)
        lines += pre.lines + [f"{ind}    ({row})[{v.name}] = {arg};", f"{ind}}}"]
        lines.append(f"{ind}ember_exp_row_f32({row}, {self.itext(size)});")
        body = _Body(self, ind + "    ", {})
        term = self.tmp()
        body.lines.append(f"{ind}    float {term} = {node.target}[{self.itext(index)}];")
        body.cache[exp] = term
        self._store(node, body.value(node.expr), body)
        lines += self._open([outer[-1]], ind, None, simd=True) + body.lines + [f"{ind}}}"]
        lines.extend(indent + "    " * (len(outer) - 2 - d) + "}" for d in range(len(outer) - 1))
        return lines

    def _plan_riders(self):
        """Column nodes ride in the loop of the member just before them: a pointwise member's (the
        gradient it stores is at hand there), or a row reduction's whose result they do not read
        (layer_norm's weight gradient shares its terms with the backward's second row sum). One
        after a row epilogue, or after a row reduction it reads, walks the row in a loop of its own."""
        self.riders, self.riding, last = {}, set(), None
        for n in self.k.nodes:
            if getattr(n, "column", False):
                if last is not None and not (last.is_reduction and any(ld.buf == last.buf.name for ld in n.loads)):
                    self.riders.setdefault(id(last), []).append(n)
                    self.riding.add(id(n))
                continue
            first = self.pipe is not None and n is self.pipe[0]  # its loop runs for a thread's first row only
            rescaled = id(n) in getattr(self, "rescale", {})  # softmax's normalization: a loop of its own making
            last = None if n.epilogue or first or rescaled else n

    def _ride(self, node, value: str, body) -> None:
        """The column sums riding on ``node``'s loop, with ``node``'s element ``value`` at hand."""
        riders = getattr(self, "riders", {}).get(id(node), ())
        if not riders:
            return
        if node.is_reduction:  # its terms (and the loads beside them) are what the riders reuse
            for c in riders:
                columns.accumulate(self, c, body.value(c.expr), body)
            return
        body.forget(node.target)  # an input updated in place: its loads now mean the new value
        if node.buf.dtype not in HALF_TYPES:  # a half store rounds: they sum what it holds, as eager does
            self.row_values[node.target] = value
        try:
            for c in riders:
                columns.accumulate(self, c, body.value(c.expr), body)
        finally:
            self.row_values.pop(node.target, None)

    def _column_loop(self, node, inner, indent, par) -> list[str]:
        """A column node's own walk over the row (its term added to the thread's partial sums)."""
        lines = self._open(inner, indent, par, simd=True)
        body = _Body(self, indent + "    " * len(inner), {})
        columns.accumulate(self, node, body.value(node.expr), body)
        lines.extend(body.lines)
        lines.extend(indent + "    " * (len(inner) - 1 - d) + "}" for d in range(len(inner)))
        return lines

    def _transpose_tile(self, outer):
        """The loop a pointwise kernel tiles together with its innermost one: a transposed copy
        (an access walking the innermost loop by a stride and that loop contiguously) read or
        written one element per cache line along a whole row would miss the cache at every
        element of a large one; in ``TILE`` x ``TILE`` blocks both sides stay in L1."""
        if len(outer) < 2:
            return None
        vi = outer[-1][0]
        indices = []
        for n in self.k.nodes:
            indices.extend(ld.index for ld in n.loads)
            if n.buf.name not in self.k.local:
                indices.append(n.store_index)
        for index in indices:
            index = index.xreplace(self.subs)
            c = _linear_coeff(index, vi)
            if c is None or c == 0 or c == 1:
                continue
            for d, (v, _) in enumerate(outer[:-1]):
                if _linear_coeff(index, v) == 1:
                    return d
        return None

    def _tiled_pointwise(self, outer, d, total) -> list[str]:
        """The transposed copy's loops: ``SUPER`` x ``SUPER`` blocks (threads share these out),
        each walked in ``TILE`` x ``TILE`` tiles with the tiles along the transposed source's
        contiguous dim innermost, then the elements (the output's contiguous dim innermost).

        The tile walk keeps the strided side's pages and lines in the TLB and L1/L2 while they
        are reused; tiles across a whole row (the old walk) stepped through a new page of the
        source every few rows, ~6x a copy's time at power-of-two sizes (2048 x 2048: ~2.5x
        faster in the standalone kernel; 2000 x 2000 ~1.5x)."""
        (vt, st), (vi, si) = outer[d], outer[-1]
        rest = [loop for e, loop in enumerate(outer[:-1]) if e != d]
        # a column sum over the copy's output (the scheduler's target column): partial sums per thread
        cols = columns.column_nodes(self.k)
        self.tiled = True
        tb, ib = f"{vt.name}_blk", f"{vi.name}_blk"
        ts, is_ = f"{vt.name}_sup", f"{vi.name}_sup"
        nt, ni = self.itext(st), self.itext(si)
        n = len(rest) + 2
        kind = f"parallel for collapse({n})" if n > 1 else "parallel for"
        lines = columns.before(self, cols, "    ") if cols else []
        lines.append(f"    #pragma omp {kind} {self._parallel_clause(total)}")
        indent = "    "
        for v, size in rest:
            lines.append(f"{indent}for (int64_t {v.name} = 0; {v.name} < {self.itext(size)}; ++{v.name}) {{")
            indent += "    "
        for name, size in ((is_, ni), (ts, nt)):
            lines.append(f"{indent}for (int64_t {name} = 0; {name} < {size}; {name} += {SUPER}) {{")
            indent += "    "
        for name, size in ((is_, ni), (ts, nt)):
            lines.append(f"{indent}const int64_t {name}_end = {name} + {SUPER} < {size} ? {name} + {SUPER} : {size};")
        for name, sup in ((ib, is_), (tb, ts)):
            lines.append(f"{indent}for (int64_t {name} = {sup}; {name} < {sup}_end; {name} += {TILE}) {{")
            indent += "    "
        for name, var, sup in ((tb, vt, ts), (ib, vi, is_)):
            end = f"{var.name}_end"
            lines.append(f"{indent}const int64_t {end} = {name} + {TILE} < {sup}_end ? {name} + {TILE} : {sup}_end;")
        lines.extend(columns.row_start(cols, indent))
        lines.append(f"{indent}for (int64_t {vt.name} = {tb}; {vt.name} < {vt.name}_end; ++{vt.name}) {{")
        lines.append(f"{indent}    #pragma omp simd")
        lines.append(f"{indent}    for (int64_t {vi.name} = {ib}; {vi.name} < {vi.name}_end; ++{vi.name}) {{")
        lines.extend(self._pointwise_members(indent + "        ", simd_loop=None))
        lines.append(f"{indent}    }}")
        lines.append(f"{indent}}}")
        while indent != "    ":
            indent = indent[:-4]
            lines.append(f"{indent}}}")
        return lines + columns.after(cols, "    ")

    def _is_outer_reduction(self, outer, inner) -> bool:
        """Sums over rows of columns that lie side by side in memory (a bias gradient: ``(N, C)
        -> (C,)``), with the pointwise work fused before them. Row by row per column would read
        one element per cache line and could not vectorize; such kernels instead walk the rows
        once per block of columns (``_outer_reduction``). Only for one collapsed loop each way,
        sum reductions whose results only the row epilogues read, and indices linear in both."""
        k = self.k
        if not k.reduced or len(outer) != 1 or len(inner) != 1 or columns.column_nodes(k):
            return False
        element = [n for n in k.nodes if not n.epilogue]
        sums = {n.buf.name for n in element if n.is_reduction}
        if not sums:
            return False
        for n in element:
            if n.target != n.buf.name:  # an input written in place: the row loop handles its stale values
                return False
            if n.is_reduction and n.buf.reduce_type != "sum":
                return False
            if any(isinstance(e, Load) and e.buf in sums for e in walk(n.expr)):
                return False  # reads a row's result inside the row (layer_norm's second pass)
        (vo, _), (vi, _) = outer[0], inner[0]
        column_unit = False
        for n in element:
            indices = [e.index for e in walk(n.expr) if isinstance(e, (Load, IndexValue))]
            if not n.is_reduction and n.buf.name not in k.local:
                indices.append(n.store_index)
            for index in indices:
                index = index.xreplace(self.subs)
                co, ci = _linear_coeff(index, vo), _linear_coeff(index, vi)
                if co is None or ci is None or (ci == 1 and co != 0):
                    return False  # something walks the rows contiguously: keep the row loop
                # (a per-row value, such as layer_norm's mean, is one load per row: fine)
                column_unit = column_unit or co == 1
        return column_unit

    def _outer_reduction(self, outer, inner, total) -> list[str]:
        """Blocks of ``OUTER_BLOCK`` columns (threads share the blocks); each block walks every
        row once: the pointwise members are computed and stored, the sums added to an array of
        accumulators (the loop over a row's columns in a block vectorizes). The row epilogues
        then run per column of the block."""
        (vo, so), (vi, si) = outer, inner
        blk, end = f"{vo.name}_blk", f"{vo.name}_end"
        n_cols = self.itext(so)
        element = [n for n in self.k.nodes if not n.epilogue]
        lines = [f"    #pragma omp parallel for {self._parallel_clause(total)}",
                 f"    for (int64_t {blk} = 0; {blk} < {n_cols}; {blk} += {OUTER_BLOCK}) {{",
                 f"        const int64_t {end} = {blk} + {OUTER_BLOCK} < {n_cols} ? {blk} + {OUTER_BLOCK} : {n_cols};"]
        accs = {}
        for n in element:
            if n.is_reduction:
                acc = accs[id(n)] = f"acc_{n.buf.name}"
                lines.append(f"        {C.C_TYPES[n.buf.acc_dtype]} {acc}[{OUTER_BLOCK}] = {{}};")
        lines += [f"        for (int64_t {vi.name} = 0; {vi.name} < {self.itext(si)}; ++{vi.name}) {{",
                  "            #pragma omp simd",
                  f"            for (int64_t {vo.name} = {blk}; {vo.name} < {end}; ++{vo.name}) {{"]
        body = _Body(self, " " * 16, {})
        for n in element:
            value = body.value(n.expr)
            if n.is_reduction:
                body.lines.append(f"{body.indent}{accs[id(n)]}[{vo.name} - {blk}] += {value};")
                continue
            if n.buf.name not in self.k.local:
                self._store(n, value, body)
            self.row_values[n.buf.name] = value  # later members of this element read the value
        for n in element:
            if not n.is_reduction:
                self.row_values.pop(n.buf.name, None)
        lines += body.lines + ["            }", "        }",
                               f"        for (int64_t {vo.name} = {blk}; {vo.name} < {end}; ++{vo.name}) {{"]
        tail = _Body(self, " " * 12, {})
        for n in self.k.nodes:
            if n.epilogue:
                value = tail.value(n.expr)
            elif n.is_reduction:
                value = f"row_{n.buf.name}"
                acc_t = C.C_TYPES[n.buf.acc_dtype]
                tail.lines.append(f"{tail.indent}{acc_t} {value} = {accs[id(n)]}[{vo.name} - {blk}];")
            else:
                continue
            self.row_values[n.buf.name] = value
            if n.buf.name not in self.k.local:
                self._store(n, value, tail)
        lines += tail.lines + ["        }", "    }"]
        return lines

    def _find_stashes(self):
        """Pairs ``sum(e)`` with a later ``e / sum(e)`` of the same row (softmax's normalization).

        The sum's loop then also stores ``e`` in the quotient's output, and the quotient's loop
        only divides what is there: ``e`` (an exp, say) is computed once instead of twice. Only
        when the output holds the compute dtype, so the values are bit-identical.
        """
        self.stash, self.rescale, self.reread = {}, {}, {}
        nodes = [n for n in self.k.nodes if not getattr(n, "column", False)]
        for i, r in enumerate(nodes):
            if not r.is_reduction or r.buf.reduce_type != "sum":
                continue
            for q in nodes[i + 1:]:
                e = q.expr
                if q.is_reduction or q.epilogue or q.buf.name in self.k.local or id(q) in self.rescale \
                        or id(q) in self.reread:
                    continue
                if q.target != q.buf.name or q.buf.dtype is not r.buf.acc_dtype:
                    continue
                if isinstance(e, Call) and e.op == "div" and len(e.args) == 2 and e.args[0] == r.expr \
                        and isinstance(e.args[1], Load) and e.args[1].buf == r.buf.name:
                    self.stash[id(r)] = q
                    self.rescale[id(q)] = r
                    break
                if isinstance(r.expr, Call) and r.expr in set(walk(e)):
                    # a later output computed from the summed term (cross-entropy's backward reads
                    # exp(x - max) again): the sum's loop stores the term there, the output's loop
                    # reads it back instead of computing it (an exp) a second time
                    self.stash[id(r)] = q
                    self.reread[id(q)] = r
                    break

    def _rescale_member(self, node, r, inner, indent, par):
        """The quotient's loop: the stashed terms times the reciprocal of the row's sum, taken once
        per row, as eager's softmax (and PyTorch's) normalizes (within an ulp of the quotient; a
        divide per element costs several multiplies)."""
        ctype = C.C_TYPES[node.buf.dtype]
        inv = f"inv_{r.buf.name}"
        lines = [f"{indent}const {ctype} {inv} = (({ctype})1) / {self.row_values[r.buf.name]};"]
        scratch = self.scratch.get(id(r))
        if scratch is not None:
            lines += self._rescale_scratch(node, scratch, inv, inner, indent)
        lines += self._open(inner, indent, par, simd=True)
        loop_indent = indent + "    " * len(inner)
        idx = self.itext(node.store_index.xreplace(self.subs))
        stashed = self.tmp()
        lines.append(f"{loop_indent}{ctype} {stashed} = {node.target}[{idx}];")
        lines.append(f"{loop_indent}{node.target}[{idx}] = {stashed} * {inv};")
        lines.extend(indent + "    " * (len(inner) - 1 - d) + "}" for d in range(len(inner)))
        if scratch is not None:
            lines.append(f"{indent}}}")
        return lines

    def _scratch_row(self, r, q, inner, par, total):
        """(row array, whether it is used, row pointer) names when softmax's stash can go to a
        row-sized local array instead of the output: the quotient's loop then streams the output
        (a plain store first reads each output line from memory: a third more traffic than a
        copy's). Decided at run time: an output past the streaming threshold and rows of at most
        ``STASH_MAX`` elements; the names are None-free only where the kernel is written for it."""
        dtype = q.buf.dtype
        if C.STREAM_WIDTH.get(dtype) is None or config.cpp.streaming_min_bytes is None or len(inner) != 1 \
                or par is not None:
            return None
        v, size = inner[0]
        index = q.store_index.xreplace(self.subs)
        if _linear_coeff(index, v) != 1:
            return None
        base = self.itext(index.xreplace({v: 0}))
        n = self.itext(size)
        arr, use, row = (f"{w}_{q.buf.name}" for w in ("scratch", "use_scratch", "stash_row"))
        T = C.C_TYPES[dtype]
        decl = ["#ifdef EMBER_STREAMING",
                f"{T} {arr}[{STASH_MAX}];",
                f"const int {use} = {self.itext(total)} * {dtype.itemsize} >= {int(config.cpp.streaming_min_bytes)} "
                f"&& {n} <= {STASH_MAX};",
                f"{T}* {row} = {use} ? {arr} : &{q.target}[{base}];",
                "#else",
                f"{T}* {row} = &{q.target}[{base}];",
                "#endif"]
        return {"decl": decl, "use": use, "row": row, "var": v, "n": n, "base": base, "T": T, "dtype": dtype}

    def _rescale_scratch(self, node, sc, inv, inner, indent) -> list[str]:
        """The scratch row times the reciprocal, streamed into the output (whole 64-byte lines,
        plain stores for the unaligned head and the tail); the plain in-place loop follows in an
        ``else`` branch."""
        T, dtype, v, n = sc["T"], sc["dtype"], sc["var"].name, sc["n"]
        width = 64 // dtype.itemsize
        src, out = sc["row"], f"out_{node.target}"
        i2, i3 = indent + "    ", indent + "        "
        lines = ["#ifdef EMBER_STREAMING", f"{indent}if ({sc['use']}) {{",
                 f"{i2}{T}* {out} = &{node.target}[{sc['base']}];",
                 f"{i2}int64_t {v}_head = (int64_t)(((64 - ((uintptr_t){out} & 63)) & 63) / {dtype.itemsize});",
                 f"{i2}if ({v}_head > {n}) {v}_head = {n};",
                 f"{i2}for (int64_t {v} = 0; {v} < {v}_head; ++{v}) {out}[{v}] = {src}[{v}] * {inv};",
                 f"{i2}int64_t {v}_blk = {v}_head;",
                 f"{i2}for (; {v}_blk + {width} <= {n}; {v}_blk += {width}) {{",
                 f"{i3}{T} {v}_tile[{width}];", f"{i3}#pragma omp simd",
                 f"{i3}for (int64_t {v}_lane = 0; {v}_lane < {width}; ++{v}_lane) "
                 f"{v}_tile[{v}_lane] = {src}[{v}_blk + {v}_lane] * {inv};",
                 f"{i3}ember_stream_{T}(&{out}[{v}_blk], {v}_tile);",
                 f"{i2}}}",
                 f"{i2}for (int64_t {v} = {v}_blk; {v} < {n}; ++{v}) {out}[{v}] = {src}[{v}] * {inv};",
                 *self._row_fence(i2),
                 f"{indent}}} else", "#endif", f"{indent}{{"]
        return lines

    def _streaming_member(self, node, inner, indent, par, total):
        """A row's last pass (layer_norm's normalize, say) writing a big output with streaming stores.

        The row's unaligned head and its tail keep plain stores; whole 64-byte blocks between are
        computed into a cache-line-sized tile and streamed, so the output's cache lines are never
        read from memory first. Only for float32/float64 outputs written contiguously along the
        row, when the whole output is past ``config.cpp.streaming_min_bytes`` (smaller ones stay
        in cache for the next kernel to read), and where the compiler has AVX (a runtime no-op
        elsewhere: EMBER_STREAMING is undefined).
        """
        dtype = node.buf.dtype
        lanes = C.STREAM_WIDTH.get(dtype)
        # a whole 64-byte cache line per block (one 64-byte streaming store with AVX-512, two
        # 32-byte ones without): a line the write-combining buffer gets in halves, one block's
        # computation apart, is flushed partly filled more often (log_softmax's last pass:
        # 46-68% -> 70-73% of copy bandwidth; one store instead of two: 1.40 -> 1.29 ms alone)
        width = None if lanes is None else 64 // dtype.itemsize
        min_bytes = config.cpp.streaming_min_bytes
        if width is None or min_bytes is None or len(inner) != 1 or par is not None or node.buf.name in self.k.local:
            return None
        v, size = inner[0]
        index = node.store_index.xreplace(self.subs)
        if _linear_coeff(index, v) != 1:
            return None
        T, n = C.C_TYPES[dtype], self.itext(size)
        # names of this member's own (a kernel may stream several outputs of one row)
        # (the buffer name last, so kernels equal up to buffer names are still found equal)
        row, head, start, blk, lane, tile = (f"{w}_{v.name}_{node.buf.name}"
                                             for w in ("row", "head", "start", "blk", "lane", "tile"))
        i2 = indent + "    "
        i3 = i2 + "    "
        lines = [f"{indent}int64_t {start} = 0;", "#ifdef EMBER_STREAMING",
                 f"{indent}if ({self.itext(total)} * {dtype.itemsize} >= {int(min_bytes)}) {{",
                 f"{i2}{T}* {row} = &{node.target}[{self.itext(index.xreplace({v: 0}))}];",
                 f"{i2}int64_t {head} = (int64_t)(((64 - ((uintptr_t){row} & 63)) & 63) / {dtype.itemsize});",
                 f"{i2}if ({head} > {n}) {head} = {n};",
                 f"{i2}for (int64_t {v.name} = 0; {v.name} < {head}; ++{v.name}) {{"]
        lines.extend(self._stored_body(node, i3))
        lines += [f"{i2}}}", f"{i2}for (int64_t {blk} = {head}; {blk} + {width} <= {n}; {blk} += {width}) {{",
                  f"{i3}{T} {tile}[{width}];", f"{i3}#pragma omp simd",
                  f"{i3}for (int64_t {lane} = 0; {lane} < {width}; ++{lane}) {{"]
        self.post = {v: sympy.Symbol(blk, integer=True) + sympy.Symbol(lane, integer=True)}
        try:
            body = _Body(self, i3 + "    ", {})
            value = body.value(node.expr)
        finally:
            self.post = {}
        lines.extend(body.lines)
        lines += [f"{i3}    {tile}[{lane}] = {C.store_value(value, dtype)};", f"{i3}}}",
                  f"{i3}ember_stream_{T}(&{row}[{blk}], {tile});",
                  f"{i2}}}",
                  f"{i2}{start} = {head} + (({n} - {head}) / {width}) * {width};",
                  *self._row_fence(i2),
                  f"{indent}}}", "#endif", f"{indent}#pragma omp simd",
                  f"{indent}for (int64_t {v.name} = {start}; {v.name} < {n}; ++{v.name}) {{"]
        lines.extend(self._stored_body(node, indent + "    "))
        lines.append(f"{indent}}}")
        return lines

    def _row_fence(self, indent) -> list[str]:
        """The ``sfence`` after a row's streamed stores: none inside a row loop (the loop's threads
        each fence once after their rows, ``_fence_per_thread``: a fence per row waited for each
        row's write-combining buffers to drain, ~0.15 us a row, a third of log_softmax's time on
        4096 x 1024), one where the row is the whole kernel."""
        self.streamed = True
        if self.fence_outside:
            return []
        return [f"{indent}_mm_sfence();  /* streamed stores reach memory before anyone reads them */"]

    def _fence_per_thread(self, lines, first, indent) -> list[str]:
        """``lines[first]`` opens the row loop with ``#pragma omp parallel for ... if(...)``: made
        a parallel region whose threads share the rows out (``omp for nowait``) and then each
        fence their streamed stores once, before the region's closing barrier."""
        pragma = lines[first].strip()
        head = "#pragma omp parallel for"
        assert pragma.startswith(head), pragma
        clauses = pragma[len(head):]
        start = clauses.index(" if(")
        depth, end = 0, start + 3
        for end in range(start + 3, len(clauses)):  # the if's own closing paren (sizes may hold parens)
            depth += {"(": 1, ")": -1}.get(clauses[end], 0)
            if depth == 0:
                break
        cond = clauses[start:end + 1]
        rest = clauses.replace(cond, "")
        return (lines[:first] + [f"{indent}#pragma omp parallel{cond}", f"{indent}{{",
                                 f"{indent}#pragma omp for{rest} nowait"] + lines[first + 1:] +
                ["#ifdef EMBER_STREAMING",
                 f"{indent}_mm_sfence();  /* this thread's streamed stores reach memory before the barrier */",
                 "#endif", f"{indent}}}"])

    def _stored_body(self, node, indent) -> list[str]:
        body = _Body(self, indent, {})
        self._store(node, body.value(node.expr), body)
        return body.lines

    def _parallel_clause(self, total):
        return f"if({self.itext(total)} >= {PARALLEL_MIN})"

    def _open(self, loops, indent, parallel, simd, reduction=""):
        """Opens ``loops``: OpenMP threads on the outermost (its siblings collapsed into it but
        the innermost), SIMD on the innermost."""
        lines = []
        n = len(loops)
        for d, (v, size) in enumerate(loops):
            ind = indent + "    " * d
            if d == 0 and parallel is not None:
                if n == 1:
                    kind = "parallel for simd" if simd else "parallel for"
                else:
                    kind = f"parallel for collapse({n - 1})" if n > 2 else "parallel for"
                lines.append(f"{ind}#pragma omp {kind} {reduction}{parallel}")
            elif d == n - 1 and simd:
                lines.append(f"{ind}#pragma omp simd {reduction}".rstrip())
            lines.append(f"{ind}for (int64_t {v.name} = 0; {v.name} < {self.itext(size)}; ++{v.name}) {{")
        return lines

    def _store(self, node, value: str, body: _Body):
        buf = self.buffers[node.target]
        idx = self.itext(node.store_index.xreplace(self.subs))
        body.lines.append(f"{body.indent}{node.target}[{idx}] = {C.store_value(value, buf.dtype)};")

    def _pointwise_members(self, indent, simd_loop):
        body = _Body(self, indent, {})
        riders = [n for n in self.k.nodes if getattr(n, "target_columns", None)] if self.tiled else []
        for node in self.k.nodes:
            if getattr(node, "target_columns", None):
                continue  # summed beside the members' stores (below)
            value = body.value(node.expr)
            for c in riders:  # a column sum over the buffer the members write (the scheduler's target column)
                col = c.target_columns.get(id(node))
                if col is not None:
                    idx = self.itext(col.xreplace(self.subs))
                    body.lines.append(f"{body.indent}col_{c.buf.name}[{idx}] += {value};")
            if node.buf.name in self.k.local:
                # later members read it as this value (same element, same loop)
                self.row_values[node.buf.name] = value
            else:
                self._store(node, value, body)
                self.row_values[node.target] = value
                if node.target != node.buf.name:
                    # an input updated in place: values computed from its old contents are stale
                    body.forget(node.target)
        for node in self.k.nodes:
            self.row_values.pop(node.target, None)
        return body.lines

    def _row_member(self, node, inner, indent, parallel, total):
        if id(node) in getattr(self, "riding", ()):
            return []  # summed in the loop of the member before it
        if node.epilogue:
            return self._row_member_loops(node, inner, indent, parallel, total)
        hoisted = self._hoist(node.expr, {v for v, _ in inner}, indent)
        try:
            return hoisted.lines + self._row_member_loops(node, inner, indent, parallel, total)
        finally:
            self.hoisted = {}

    def _hoist(self, expr, inner_vars: set, indent) -> _Body:
        """Computes the parts of ``expr`` that one row shares (log_softmax's ``log(sum)``, a
        reciprocal of a row's statistic) once before the row's loops, instead of once per element
        (where a libm call, or its vector form, would run per vector). The loop bodies find them in
        ``self.hoisted``."""
        body = _Body(self, indent, {})
        invariant: dict = {}
        for e in walk(expr):  # children first
            if isinstance(e, Const):
                invariant[e] = True
            elif isinstance(e, Load):
                invariant[e] = self.local_value(e) is not None
            elif isinstance(e, IndexValue):
                invariant[e] = not (e.index.xreplace(self.subs).free_symbols & inner_vars)
            else:
                invariant[e] = all(invariant[c] for c in e.children())
            if invariant[e] and isinstance(e, Call):
                body.value(e)
        self.hoisted = {e: body.cache[e] for e in body.cache if isinstance(e, (Call, Cast))}
        return body

    def _row_member_loops(self, node, inner, indent, parallel, total):
        lines = []
        if node.epilogue:
            body = _Body(self, indent, {})
            value = body.value(node.expr)
            if node.buf.name not in self.k.local:
                self._store(node, value, body)
            self.row_values[node.buf.name] = value
            return body.lines
        loop_indent = indent + "    " * len(inner)
        body = _Body(self, loop_indent, {})
        par = self._parallel_clause(total) if parallel else None
        if getattr(node, "column", False):
            return self._column_loop(node, inner, indent, par)
        if id(node) in getattr(self, "rescale", {}):
            return self._rescale_member(node, self.rescale[id(node)], inner, indent, par)
        q = getattr(self, "stash", {}).get(id(node))
        if q is not None and id(q) in self.rescale:
            sc = self._scratch_row(node, q, inner, par, total)
            if sc is not None:
                self.scratch[id(node)] = sc
                lines += [d if d.startswith("#") else indent + d for d in sc["decl"]]
        if not node.is_reduction:
            summed = getattr(self, "reread", {}).get(id(node))
            riders = getattr(self, "riders", {}).get(id(node), ())
            if summed is not None and node.expr == summed.expr:
                # the output is the summed term itself: the sum's loop stored it already (its
                # column sums walk the row in loops of their own)
                return lines + [t for c in riders for t in self._column_loop(c, inner, indent, par)]
            streamed = None if summed is not None or riders else \
                self._streaming_member(node, inner, indent, par, total)
            if streamed is not None:
                return streamed
            lines.extend(self._open(inner, indent, par, simd=True))
            if summed is not None:
                term = self.tmp()
                idx = self.itext(node.store_index.xreplace(self.subs))
                body.lines.append(f"{loop_indent}{C.C_TYPES[node.buf.dtype]} {term} = {node.target}[{idx}];")
                body.cache[summed.expr] = term
            value = body.value(node.expr)
            self._store(node, value, body)
            self._ride(node, value, body)
            lines.extend(body.lines)
            lines.extend(indent + "    " * (len(inner) - 1 - d) + "}" for d in range(len(inner)))
            return lines
        pipe = self.pipe
        call = None
        # a helper call computes the row's result only: column sums riding on this reduction's loop
        # (s15 column fusion) need the generated loop
        if par is None and (pipe is None or node not in pipe[:2]) and not getattr(self, "riders", {}).get(id(node)):
            picked = self._row_pick(node, inner, indent)
            if picked is not None:
                return lines + picked[0] + self._row_result(node, picked[1], indent)
            fused = self.max_exp_sums.pop(id(node), None)
            if fused is not None:
                return lines + self._row_result(node, fused, indent)
            self.pre_helper, self.helper_indent = [], indent
            call = self._max_exp_sum(node, inner, indent)
            if call is None:
                call = self._row_helper(node, inner)
        if call is not None:
            return lines + self.pre_helper + self._row_result(node, call, indent)
        acc, nan = f"acc_{node.buf.name}", f"nan_{node.buf.name}"
        acc_t, init, nan_flag, clause, body_lines, result = self._reduction_pieces(node, body, acc, nan)
        self._ride(node, None, body)
        if pipe is not None and node is pipe[0]:
            # this row's result was carried over from the previous row's next loop, unless the
            # row is the first of its thread's
            lines.append(f"{indent}{acc_t} {acc} = pipe_acc;")
            if nan_flag:
                lines.append(f"{indent}int {nan} = pipe_nan;")
            lines.append(f"{indent}if (pipe_row != {pipe[2]}) {{")
            lines.append(f"{indent}    {acc} = {init};")
            if nan_flag:
                lines.append(f"{indent}    {nan} = 0;")
            lines.extend(self._open(inner, indent + "    ", par, simd=True, reduction=clause + " "))
            lines.extend("    " + line for line in body_lines)
            lines.extend(indent + "    " * (len(inner) - d) + "}" for d in range(len(inner)))
            lines.append(f"{indent}}}")
        else:
            lines.append(f"{indent}{acc_t} {acc} = {init};")
            if nan_flag:
                lines.append(f"{indent}int {nan} = 0;")  # an int (not bool) flag: the loop still vectorizes
            if pipe is not None and node is pipe[1]:
                # the next row's first reduction rides along (its loads overlap this loop's work)
                nxt = f"{pipe[2]}_next"
                first = pipe[0]
                lines.append(f"{indent}const int64_t {nxt} = {pipe[2]} + 1 < {pipe[3]} ? {pipe[2]} + 1 : {pipe[2]};")
                self.post = {pipe[4]: sympy.Symbol(nxt, integer=True)}
                try:
                    ahead = _Body(self, body.indent, {})
                    ahead.cache = {}  # nothing of this row's (hoisted values, row results) holds for the next
                    _, first_init, first_nan, first_clause, first_lines, _ = \
                        self._reduction_pieces(first, ahead, "pipe_acc", "pipe_nan")
                finally:
                    self.post = {}
                lines.append(f"{indent}pipe_acc = {first_init};")
                if first_nan:
                    lines.append(f"{indent}pipe_nan = 0;")
                clause += " " + first_clause
                body_lines = body_lines + first_lines
            lines.extend(self._open(inner, indent, par, simd=True, reduction=clause + " "))
            lines.extend(body_lines)
            lines.extend(indent + "    " * (len(inner) - 1 - d) + "}" for d in range(len(inner)))
            if pipe is not None and node is pipe[1]:
                lines.append(f"{indent}pipe_row = {pipe[2]} + 1;")
        return lines + self._row_result(node, result, indent)

    def _row_result(self, node, value: str, indent: str) -> list[str]:
        """Reduction ``node``'s row result ``value`` named for the row's later members (and stored
        unless the buffer is kernel-local)."""
        name = f"row_{node.buf.name}"
        lines = [f"{indent}{C.C_TYPES[node.buf.acc_dtype]} {name} = {value};"]
        self.row_values[node.buf.name] = name
        if node.buf.name not in self.k.local:
            store_body = _Body(self, indent, {})
            self._store(node, name, store_body)
            lines.extend(store_body.lines)
        return lines

    def _contiguous_row(self, load, v):
        """The C text of the address where ``load`` (float32) starts a row walked along loop
        variable ``v`` with unit stride, or None."""
        if not isinstance(load, Load) or load.storage_dtype is not dt.float32 or load.dtype is not dt.float32:
            return None
        if self.local_value(load) is not None:
            return None
        index = load.index.xreplace(self.subs)
        if _linear_coeff(index, v) != 1:
            return None
        return f"&{self.param(load.buf)}[{self.itext(index.xreplace({v: 0}))}]"

    def _helpers_take(self, first, second, inner) -> bool:
        """Whether a row kernel's first two reductions both run as prelude row helpers."""
        if self._row_helper(first, inner, check=True) is None:
            return False
        saved = dict(self.row_values)
        self.row_values[first.buf.name] = f"row_{first.buf.name}"
        try:
            return self._row_helper(second, inner, check=True) is not None
        finally:
            self.row_values = saved

    def _row_scalar(self, e, check: bool):
        """The C text of a value one row shares (a row result, what ``_hoist`` computed before the
        row's loops, a constant), or None. ``check``: only whether it is one (nothing hoisted yet)."""
        if e in self.hoisted:
            return self.hoisted[e]
        if isinstance(e, Load):
            return self.local_value(e)
        if isinstance(e, Const) and e.number is None:
            return C.const_text(e.value, e.dtype)
        if check and isinstance(e, (Call, Cast)) and all(self._row_scalar(c, True) for c in e.children()):
            return "row_value"
        return None

    def _row_helper(self, node, inner, check: bool = False):
        """The prelude call computing reduction ``node`` over one contiguous float32 row, where it
        matches one of eager's row-kernel shapes, else None: ``max``/``min`` of a load
        (``ember_row_max_f32``: NaN lanes in mask registers), ``sum`` of a load
        (``ember_row_sum_f32``), ``sum(exp(load - s))`` (``ember_exp_shift_sum_f32``, which also
        stores the terms where softmax stashes them) and ``sum((load - s)^2)`` (layer_norm's
        variance, ``ember_row_sq_dev_f32``), ``s`` a value of the row. The last two prefetch the
        next row (``self.prefetch``) for the first reduction of the next row."""
        if len(inner) != 1 or node.buf.acc_dtype is not dt.float32 or not node.is_reduction:
            return None
        v, size = inner[0]
        rt = node.buf.reduce_type
        e = node.expr
        stashed = getattr(self, "stash", {}).get(id(node))
        if rt in ("max", "min") or (rt == "sum" and isinstance(e, Load)):
            row = self._contiguous_row(e, v)
            if row is None or stashed is not None:
                return None
            return f"ember_row_{rt}_f32({row}, {self.itext(size)})"
        if rt != "sum" or not (isinstance(e, Call) and e.dtype is dt.float32):
            return None
        if e.op == "exp" and len(e.args) == 1:
            d = e.args[0]
        elif e.op == "mul" and len(e.args) == 2 and e.args[0] == e.args[1] and stashed is None:
            d = e.args[0]
        else:
            return None
        if d.dtype is not dt.float32:
            return None
        shift = row = None
        if isinstance(d, Call) and d.op == "sub" and len(d.args) == 2 and d.args[1].dtype is dt.float32:
            shift = self._row_scalar(d.args[1], check)
            row = self._contiguous_row(d.args[0], v)
        if shift is None or row is None:
            if e.op != "exp" or check:
                return None
            return self._computed_exp_sum(node, d, inner, stashed)
        nxt = self._next_row(d.args[0], v)
        n = self.itext(size)
        if e.op == "mul":
            return f"ember_row_sq_dev_f32({row}, {n}, {shift}, {nxt})"
        out = self._exp_row_out(node, stashed, v)
        if out is None:
            return None
        return f"ember_exp_shift_sum_f32({out}, {row}, {n}, {shift}, {nxt})"

    def _exp_row_out(self, node, stashed, v):
        """Where an exp-sum row helper of reduction ``node`` stores its exp terms: the node's scratch
        row, the row of the buffer that stashes them (float32, unit stride in ``v``), "NULL" when
        nothing keeps them; None when the stash cannot take a helper's row."""
        scratch = self.scratch.get(id(node))
        if scratch is not None:
            return scratch["row"]
        if stashed is None:
            return "NULL"
        index = stashed.store_index.xreplace(self.subs)
        if stashed.buf.dtype is not dt.float32 or _linear_coeff(index, v) != 1:
            return None
        return f"&{stashed.target}[{self.itext(index.xreplace({v: 0}))}]"

    def _next_row(self, expr, v):
        """The C expression of the next row's start of contiguous row ``expr`` (the one this kernel's
        row loop reads after the current one, for a prefetch), NULL past the last row or without a
        row loop to prefetch along."""
        if self.prefetch is None:
            return "NULL"
        row_var, rows, symbol = self.prefetch
        self.post = {symbol: symbol + 1}
        try:
            nxt = self._contiguous_row(expr, v)
        finally:
            self.post = {}
        return f"({row_var} + 1 < {rows} ? {nxt} : NULL)"

    def _max_exp_sum(self, node, inner, indent):
        """``max`` reduction ``node`` of a contiguous float32 row and a later ``sum(exp(row - max))``
        of the same row whose terms nothing keeps, in a kernel that picked an element of that row
        before (cross-entropy's forward: the target logit), in one pass (``ember_row_max_exp_sum_f32``,
        shifted by the picked element as eager's one-pass log-sum-exp): the call giving the max, the
        sum's row value declared before it in ``self.pre_helper`` and left in ``self.max_exp_sums`` for
        the sum's turn. Or None. (Without a pick, log_softmax, a guessed shift would cost its outputs
        near 0 the rounding of ``x - guess``: the two passes stay.)"""
        if not node.is_reduction or node.buf.reduce_type != "max" or node.buf.acc_dtype is not dt.float32:
            return None
        v, size = inner[0] if len(inner) == 1 else (None, None)
        row = self._contiguous_row(node.expr, v) if v is not None else None
        if row is None or getattr(self, "stash", {}).get(id(node)) is not None:
            return None
        later = self.k.nodes[self.k.nodes.index(node) + 1:]
        total = next((n for n in later if n.is_reduction and not n.epilogue and not getattr(n, "column", False)
                      and n.buf.reduce_type == "sum"), None)
        if total is None or total.buf.acc_dtype is not dt.float32 or id(total) in getattr(self, "riding", ()) \
                or getattr(self, "riders", {}).get(id(total)) or (self.pipe is not None and total in self.pipe[:2]):
            return None
        e = total.expr
        if not (isinstance(e, Call) and e.op == "exp" and len(e.args) == 1 and e.dtype is dt.float32):
            return None
        d = e.args[0]
        if not (isinstance(d, Call) and d.op == "sub" and len(d.args) == 2 and isinstance(d.args[1], Load)
                and d.args[1].buf == node.buf.name and d.args[1].dtype is dt.float32):
            return None
        if self._contiguous_row(d.args[0], v) != row:
            return None
        if self._exp_row_out(total, self.stash.get(id(total)), v) != "NULL":
            return None  # its exp terms are kept (softmax)
        if any(n.buf.name == d.args[0].buf for n in self.k.nodes):
            return None  # the row is written in this kernel (not by the time of the max)
        guess = None
        for p in self.k.nodes[:self.k.nodes.index(node)]:
            parts = self._pick_parts(p, inner) if p.is_reduction and not p.epilogue else None
            if parts is not None and self._contiguous_row(parts[1], v) == row and p.buf.name in self.row_values:
                guess = self.row_values[p.buf.name]  # the target's logit of this row
        if guess is None:
            return None
        if any(n is not total and not n.epilogue and any(ld.buf == node.buf.name for ld in n.loads)
               for n in later[:later.index(total)]):
            return None  # something between them reads the max inside a row loop: keep the order
        nxt = self._next_row(d.args[0], v)
        name = f"sum_{total.buf.name}"
        self.pre_helper = [f"{indent}float {name};"]
        self.max_exp_sums[id(total)] = name
        return f"ember_row_max_exp_sum_f32({row}, {self.itext(size)}, {guess}, &{name}, {nxt})"

    def _pick_parts(self, node, inner):
        """(the row's index value ``t``, the picked expression ``x``) of a reduction
        ``sum(where(t == column, x, 0))`` over the row's one loop, ``t`` a value of the row
        (cross-entropy's target logit and weight, by the decomposition's one-hot compare), else
        None."""
        if len(inner) != 1 or not node.is_reduction or node.buf.reduce_type != "sum":
            return None
        e = node.expr
        if not (isinstance(e, Call) and e.op == "where" and len(e.args) == 3):
            return None
        cond, x, zero = e.args
        if not (isinstance(zero, Const) and zero.number is None and zero.value == 0):
            return None
        if not (isinstance(cond, Call) and cond.op == "eq" and len(cond.args) == 2):
            return None
        v = inner[0][0]
        t, column = cond.args
        if isinstance(t, IndexValue) and not isinstance(column, IndexValue):
            t, column = column, t
        if not isinstance(column, IndexValue) or column.index.xreplace(self.subs) != v \
                or column.dtype.is_floating_point or t.dtype is not column.dtype:
            return None
        for leaf in walk(t):
            if isinstance(leaf, (Load, IndexValue)) and self.local_value(leaf) is None \
                    and v in leaf.index.xreplace(self.subs).free_symbols:
                return None  # not one value for the row
        return t, x

    def _row_pick(self, node, inner, indent):
        """(lines, result) of a pick (``_pick_parts``): one load of ``x`` at column ``t`` where
        the masked sum walked the row (a full pass, a compare an element), 0 for a ``t`` outside
        the row as the sum's; ``0 + x[t]`` as the sum's (a -0.0 logit sums to +0.0). Or None."""
        parts = self._pick_parts(node, inner)
        if parts is None:
            return None
        t, x = parts
        v, size = inner[0]
        body = _Body(self, indent, {})
        col = sympy.Symbol(f"pick_{node.buf.name}", integer=True)
        lines = [f"{indent}const int64_t {col.name} = (int64_t)({body.value(t)});"]
        lines = body.lines + lines
        acc_t = C.C_TYPES[node.buf.acc_dtype]
        at = _Body(self, indent + "    ", {})
        at.cache = dict(self.hoisted)  # nothing computed at the loop's column holds at the picked one
        self.post = {v: col}
        try:
            value = at.value(x)
        finally:
            self.post = {}
        name = f"picked_{node.buf.name}"
        return lines + [f"{indent}{acc_t} {name} = 0;",
                        f"{indent}if ({col.name} >= 0 && {col.name} < {self.itext(size)}) {{"] + at.lines + \
            [f"{indent}    {name} = ({acc_t})0 + ({acc_t})({value});", f"{indent}}}"], name

    def _computed_exp_sum(self, node, d, inner, stashed):
        """``sum(exp(d))`` of a row whose exp terms are stored (softmax's stash, or its scratch
        row) and whose ``d`` is computed (masked softmax's ``where(mask, -inf, x * scale) - max``):
        a generated loop stores ``d`` (less a row scalar it subtracts) in that row, then
        ``ember_exp_shift_sum_f32`` takes the exp of the row in place (AVX-512's exp, which gcc does
        not make of the inline scalar one). The call, its loop in ``self.pre_helper``; or None."""
        v, size = inner[0]
        out = self._exp_row_out(node, stashed, v)
        if out is None or out == "NULL":
            return None  # the computed d needs a row to be stored in
        if stashed is not None and any(ld.buf == stashed.target for ld in loads_of(d)):
            return None  # the row would overwrite what the loop reads
        shift = "0.0f"
        if isinstance(d, Call) and d.op == "sub" and len(d.args) == 2:
            s = self._row_scalar(d.args[1], False)
            if s is not None:
                shift, d = s, d.args[0]
        indent = getattr(self, "helper_indent", "    ")
        loop_indent = indent + "    "
        body = _Body(self, loop_indent, {})
        value = body.value(d)
        lines = self._open(inner, indent, None, simd=True)
        lines += body.lines + [f"{loop_indent}({out})[{v.name}] = {value};", f"{indent}}}"]
        self.pre_helper = lines
        return f"ember_exp_shift_sum_f32({out}, {out}, {self.itext(size)}, {shift}, NULL)"

    def _reduction_pieces(self, node, body, acc, nan):
        """(accumulator type, its initial value, whether a NaN flag goes beside it, the loop's
        reduction clauses, the loop body's lines, the row's result) of reduction ``node``."""
        rt = node.buf.reduce_type
        acc_t = C.C_TYPES[node.buf.acc_dtype]
        float_extreme = rt in ("max", "min") and node.buf.acc_dtype.is_floating_point
        if rt in ("max", "min"):
            init = (("-" if rt == "max" else "") + "INFINITY") if float_extreme else \
                C.limit_text(node.buf.acc_dtype, "lowest" if rt == "max" else "highest")
        else:
            init = _REDUCE_INIT[rt]
        clause = f"reduction({_REDUCE_CLAUSE[rt]}:{acc})"
        if float_extreme:
            clause += f" reduction(|:{nan})"
        loop_indent = body.indent
        v = body.value(node.expr)
        if rt == "sum":
            body.lines.append(f"{loop_indent}{acc} += {v};")
            stashed = getattr(self, "stash", {}).get(id(node))
            scratch = self.scratch.get(id(node))
            if scratch is not None:
                body.lines.append(f"{loop_indent}{scratch['row']}[{scratch['var'].name}] = "
                                  f"{C.store_value(v, stashed.buf.dtype)};")
            elif stashed is not None:
                self._store(stashed, v, body)
        elif rt == "prod":
            body.lines.append(f"{loop_indent}{acc} *= {v};")
        elif rt == "any":
            body.lines.append(f"{loop_indent}{acc} = {acc} || {v};")
        elif rt == "all":
            body.lines.append(f"{loop_indent}{acc} = {acc} && {v};")
        else:
            op = ">" if rt == "max" else "<"
            body.lines.append(f"{loop_indent}{acc} = {v} {op} {acc} ? {v} : {acc};")
            if float_extreme:
                body.lines.append(f"{loop_indent}{nan} |= ({v} != {v});")
        result = f"({nan} ? (({acc_t})NAN) : {acc})" if float_extreme else acc
        return acc_t, init, float_extreme, clause, body.lines, result

    def _pipeline(self, outer, inner):
        """(first, second, row variable text, rows text, row symbol) when a row kernel's first
        reduction (softmax's max, layer_norm's mean) can run one row ahead inside its second
        reduction's loop: that loop computes (an exp per element), while the next row's loads,
        from memory, overlap it; the first loop then finds the row in cache. Only for one outer
        loop, and a first reduction that reads nothing the kernel writes."""
        k = self.k
        if len(outer) != 1 or not inner:
            return None
        members = [n for n in k.nodes if not n.epilogue and not getattr(n, "column", False)]
        if len(members) < 2 or members[0] is not k.nodes[0]:
            return None
        if not (members[0].is_reduction and members[1].is_reduction):
            return None
        first, second = members[0], members[1]
        written = {n.target for n in k.nodes} | {n.buf.name for n in k.nodes}
        if any(ld.buf in written for ld in first.loads) or id(first) in self.stash:
            return None
        v, size = outer[0]
        return first, second, v.name, self.itext(size), v

def kernel_sources(kernels: list, buffers: dict, vector_math: bool, chunks: int = 1) -> tuple[list, dict]:
    """Sources holding ``kernels`` (``chunks`` files, compiled side by side) and each kernel's
    argument signature; returns ([(source, [kernel names])], signatures).

    A kernel whose code equals an earlier one's up to buffer names (each layer of a model
    repeats the same kernels) is not compiled again: it becomes an alias of that symbol, in
    the same file. Both take the same arguments in the same order, so the wrapper calls it
    unchanged; this cuts the compiler's work for an L-layer model by about L."""
    texts, signatures, aliases, first = [], {}, {}, {}
    for k in kernels:
        text, sig = CppKernelWriter(k, buffers).emit()
        signatures[k.name] = sig
        key = _canonical(text, k.name, buffers)
        original = first.setdefault(key, k.name)
        if original != k.name:
            header = text[text.index("EMBER_KERNEL void"):text.index(") {\n")]
            aliases.setdefault(original, []).append(f'{header}) __attribute__((alias("{original}")));')
            continue
        texts.append((k.name, text))
    chunks = max(1, min(chunks, len(texts)))
    size = -(-len(texts) // chunks)
    out = []
    for start in range(0, len(texts), size):
        part = texts[start:start + size]
        body = [C.prelude(vector_math)]
        names = []
        for name, text in part:
            body.append(text)
            body.extend(aliases.get(name, ()))
            names.append(name)
            names.extend(_alias_name(a) for a in aliases.get(name, ()))
        out.append(("\n".join(body), names))
    return out, signatures
